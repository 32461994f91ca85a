/* SPDX-License-Identifier: MIT
 * pp-sched-registry.c: the schedule kinds by name ("gpipe", "1f1b", ...) and each kind's
 * rules (batch arithmetic, chunk limits, policy, stashing, synchrony, order file), a static
 * table in the order --help and error messages list them.
 */
#include <string.h>

#include "pp-error.h"
#include "pp-sched-gen.h"

/* Most-used rule sets; each row states its kind's chunk range. */
#define PP_FLUSH(kind_name, fn, text)                                                              \
    .name = kind_name, .build = fn, .summary = text, .batch = PP_BATCH_MICROBATCHES,               \
    .weights = PP_WEIGHTS_CURRENT, .sync = PP_SCHED_SYNC
#define PP_ASYNC(kind_name, fn, text, rule, mode)                                                  \
    .name = kind_name, .build = fn, .summary = text, .batch = rule, .weights = mode,               \
    .sync = PP_SCHED_ASYNC, .min_chunks = 1, .max_chunks = 1

static const PpSchedKindInfo pp_sched_kind_table[] = {
    {PP_FLUSH("gpipe", pp_sched_build_gpipe, "all F then all BW per step, flush"), .min_chunks = 1,
     .max_chunks = 1},
    {PP_FLUSH("1f1b", pp_sched_build_1f1b,
              "1F1B with flush (PipeDream-Flush, Megatron, DeepSpeed)"),
     .min_chunks = 1, .max_chunks = 1},
    {PP_FLUSH("interleaved", pp_sched_build_interleaved,
              "Megatron interleaved 1F1B, n_chunks chunks per device, m % N == 0"),
     .min_chunks = 1, .max_chunks = PP_INTERLEAVED_MAX_CHUNKS, .mb_multiple_of_stages = TRUE},
    {PP_FLUSH("zb-h1", pp_sched_build_zb_h1,
              "zero-bubble handcrafted ZB-H1 (B/W split, 1F1B memory)"),
     .min_chunks = 1, .max_chunks = 1},
    {PP_FLUSH("zb-h2", pp_sched_build_zb_h2,
              "zero-bubble handcrafted ZB-H2 (B/W split, more memory)"),
     .min_chunks = 1, .max_chunks = 1},
    {PP_FLUSH("zb-1p", pp_sched_build_zb_1p,
              "zero-bubble automatic schedule under 1x 1F1B's peak activations (greedy)"),
     .min_chunks = 1, .max_chunks = 1},
    {PP_FLUSH("zb-2p", pp_sched_build_zb_2p,
              "zero-bubble automatic schedule under 2x 1F1B's peak activations (greedy)"),
     .min_chunks = 1, .max_chunks = 1},
    {PP_FLUSH("zb-v", pp_sched_build_zb_v,
              "zero-bubble V schedule: 2 chunks per device in a V, B/W split, 1F1B's peak memory"),
     .min_chunks = 2, .max_chunks = 2, .placement = PP_PLACEMENT_V},
    {PP_FLUSH("dualpipe-v", pp_sched_build_dualpipe_v,
              "DeepSeek's DualPipe cut in half: 2 chunks per device in a V, F/B pairs, m >= 2N"),
     .min_chunks = 2, .max_chunks = 2, .placement = PP_PLACEMENT_V},
    {PP_ASYNC("pipedream", pp_sched_build_pipedream,
              "async 1F1B, update after every backward, weight stashing (N-s versions)",
              PP_BATCH_SINGLE, PP_WEIGHTS_STASHED)},
    {PP_ASYNC("2bw", pp_sched_build_2bw,
              "PipeDream-2BW: async 1F1B, update every m backwards, two weight versions",
              PP_BATCH_MICROBATCHES, PP_WEIGHTS_STASHED)},
    {PP_ASYNC("async-1f1b", pp_sched_build_async_1f1b,
              "async 1F1B without stashing, update after every backward (PACI with a = 1)",
              PP_BATCH_ACCUMULATION, PP_WEIGHTS_CURRENT),
     .fixed_accumulation = 1, .has_policy = TRUE},
    {PP_ASYNC("paci", pp_sched_build_paci,
              "PACI: async 1F1B, local accumulation over a backwards, backpressure q < N - s",
              PP_BATCH_ACCUMULATION, PP_WEIGHTS_CURRENT),
     .has_policy = TRUE},
    /* The order file decides the chunks per device; pipeline.chunks stays 1. */
    {.name = "custom",
     .build = pp_sched_build_custom,
     .summary = "per-stage op orders read from a CSV order file",
     .batch = PP_BATCH_MICROBATCHES,
     .min_chunks = 1,
     .max_chunks = 1,
     .weights = PP_WEIGHTS_CURRENT,
     .sync = PP_SCHED_SYNC_FROM_ORDER,
     .needs_order_file = TRUE},
    {.name = NULL},
};

const PpSchedKindInfo *pp_sched_kinds(void) {
    return pp_sched_kind_table;
}

const PpSchedKindInfo *pp_sched_kind_lookup(const char *name) {
    for (const PpSchedKindInfo *info = pp_sched_kind_table; info->name != NULL; info++) {
        if (strcmp(info->name, name) == 0)
            return info;
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
    for (const PpSchedKindInfo *info = pp_sched_kind_table; info->name != NULL; info++) {
        if (filter == NULL || filter(info))
            g_string_append_printf(names, "%s%s", names->len ? ", " : "", info->name);
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
