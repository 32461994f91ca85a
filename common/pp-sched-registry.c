/* SPDX-License-Identifier: MIT
 * pp-sched-registry.c: the list of schedule kinds, in the order --help and error messages
 * list them, and the rules every kind's record (PpSchedKindInfo, defined next to its
 * generator) is applied by: lookup by name, batch arithmetic, the micro-batch rule, weight
 * copies. Adding a kind: its file, one line here, one in pp-sched-gen.h and common/meson.build.
 */
#include <string.h>

#include "pp-error.h"
#include "pp-sched-gen.h"

/* The kinds, one record per line: each is defined next to its generator. */
static const PpSchedKindInfo *const pp_sched_kind_table[] = {
    &pp_sched_kind_gpipe,       /* pp-sched-flush.c */
    &pp_sched_kind_1f1b,        /* pp-sched-flush.c */
    &pp_sched_kind_interleaved, /* pp-sched-interleaved.c */
    &pp_sched_kind_zb_h1,       /* pp-sched-zb.c */
    &pp_sched_kind_zb_h2,       /* pp-sched-zb.c */
    &pp_sched_kind_zb_1p,       /* pp-sched-zb.c */
    &pp_sched_kind_zb_2p,       /* pp-sched-zb.c */
    &pp_sched_kind_zb_v,        /* pp-sched-v.c */
    &pp_sched_kind_dualpipe_v,  /* pp-sched-v.c */
    &pp_sched_kind_pipedream,   /* pp-sched-async.c */
    &pp_sched_kind_2bw,         /* pp-sched-async.c */
    &pp_sched_kind_async_1f1b,  /* pp-sched-async.c */
    &pp_sched_kind_paci,        /* pp-sched-async.c */
    &pp_sched_kind_custom,      /* pp-sched-custom.c */
    NULL,
};

const PpSchedKindInfo *const *pp_sched_kinds(void) {
    return pp_sched_kind_table;
}

const PpSchedKindInfo *pp_sched_kind_lookup(const char *name) {
    for (const PpSchedKindInfo *const *info = pp_sched_kind_table; *info != NULL; info++) {
        if (strcmp((*info)->name, name) == 0)
            return *info;
    }
    return NULL;
}

PpPlacement pp_sched_kind_placement(const char *name) {
    const PpSchedKindInfo *info = name != NULL ? pp_sched_kind_lookup(name) : NULL;
    return info != NULL ? info->placement : PP_PLACEMENT_LOOP;
}

/* "a, b, c" of the kinds that pass @filter (NULL: all). */
static char *pp_sched_kind_join(gboolean (*filter)(const PpSchedKindInfo *info)) {
    GString *names = g_string_new(NULL);
    for (const PpSchedKindInfo *const *info = pp_sched_kind_table; *info != NULL; info++) {
        if (filter == NULL || filter(*info))
            g_string_append_printf(names, "%s%s", names->len ? ", " : "", (*info)->name);
    }
    return g_string_free(names, FALSE);
}

static gboolean pp_sched_kind_has_policy(const PpSchedKindInfo *info) {
    return info->has_policy;
}

static gboolean pp_sched_kind_multi_chunk(const PpSchedKindInfo *info) {
    return info->max_chunks > 1;
}

char *pp_sched_kind_names(void) {
    return pp_sched_kind_join(NULL);
}

char *pp_sched_kind_policy_names(void) {
    return pp_sched_kind_join(pp_sched_kind_has_policy);
}

char *pp_sched_kind_multi_chunk_names(void) {
    return pp_sched_kind_join(pp_sched_kind_multi_chunk);
}

int32_t pp_sched_kind_mb_per_step(const PpSchedKindInfo *info, int32_t microbatches,
                                  int32_t accumulation) {
    switch (info->batch) {
    case PP_BATCH_MICROBATCHES:
        return microbatches;
    case PP_BATCH_ACCUMULATION:
        return info->fixed_accumulation > 0 ? info->fixed_accumulation : accumulation;
    case PP_BATCH_SINGLE:
        return 1;
    }
    PP_UNREACHABLE();
}

gboolean pp_sched_kind_check_microbatches(const PpSchedKindInfo *info, int32_t n_stages,
                                          int32_t microbatches, GError **error) {
    const int32_t n = n_stages, k = microbatches;
    if (info->mb_multiple_of_stages && k % n != 0) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s': n_microbatches = %d is not a multiple of n_stages = %d; "
                    "valid: n_microbatches = %d, %d, ...",
                    info->name, k, n, n, 2 * n);
        return FALSE;
    }
    const int64_t least = (int64_t)info->mb_min_per_stage * n + info->mb_min_offset;
    if (k < least) {
        g_autoptr(GString) bound = g_string_new(NULL);
        if (info->mb_min_per_stage != 1)
            g_string_append_printf(bound, "%d ", info->mb_min_per_stage);
        g_string_append(bound, "n_stages");
        if (info->mb_min_offset != 0)
            g_string_append_printf(bound, " %c %d", info->mb_min_offset < 0 ? '-' : '+',
                                   ABS(info->mb_min_offset));
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s': n_microbatches = %d is below %s = %" G_GINT64_FORMAT
                    "%s%s; valid: n_microbatches >= %" G_GINT64_FORMAT,
                    info->name, k, bound->str, least, info->mb_min_reason ? ", " : "",
                    info->mb_min_reason ? info->mb_min_reason : "", least);
        return FALSE;
    }
    return TRUE;
}

int32_t pp_sched_kind_weight_copies(const PpSchedKindInfo *info, int32_t n_stages, int32_t stage) {
    if (info->weight_copies == PP_SCHED_COPIES_IN_FLIGHT)
        return n_stages - stage; // one per micro-batch in flight on 1F1B's warm-up
    return MAX(info->weight_copies, 1);
}
