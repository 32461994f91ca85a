/* SPDX-License-Identifier: MIT
 * exec-train-identity.c: what a checkpoint unit records of the run that wrote it, and the check
 * a resume makes against it: every scenario key that changes what is computed (the model, the
 * batch and schedule, the partition, the precision, the optimizer keys that give its state a
 * meaning, the seed), each refused by name with both values when it differs. The keys that may
 * change on resume are the others (docs/checkpoints.md, "Which keys a resume may change").
 */
#include "exec-train-private.h"

#include <string.h>

#include "exec-backend.h"
#include "pp-error.h"
#include "pp-schedule.h"

/* In the order the manifest records them. Three are not the key as written but its effect:
 * run.layers_per_stage holds the layers of each virtual stage however they were chosen
 * (pipeline.partition, hardware.memory_gib or the key itself), run.precision the backend's
 * default when the key is absent, and pipeline.order_file the SHA-256 of the file's content
 * (a custom program may place its updates anywhere, so the order is part of the math). */
static const char *const exec_train_identity_table[] = {
    "model.layers",
    "model.hidden",
    "model.heads",
    "model.kv_heads",
    "model.head_dim",
    "model.ffn",
    "model.ffn_hidden",
    "model.seq_len",
    "model.vocab",
    "model.flash_attention",
    "pipeline.schedule",
    "pipeline.stages",
    "pipeline.chunks",
    "pipeline.microbatches",
    "pipeline.accumulation",
    "pipeline.microbatch_size",
    "pipeline.order_file",
    "training.global_batch",
    "optimizer.name",
    "optimizer.beta1",
    "optimizer.beta2",
    "optimizer.momentum",
    "optimizer.error_feedback",
    "run.seed",
    "run.layers_per_stage",
    "run.precision",
    NULL,
};

const char *const *exec_train_identity_keys(void) {
    return exec_train_identity_table;
}

char *exec_train_join_ints(const int32_t *v, int32_t n) {
    GString *out = g_string_new(NULL);
    for (int32_t i = 0; i < n; i++)
        g_string_append_printf(out, "%s%d", i ? "," : "", v[i]);
    return g_string_free(out, FALSE);
}

/* The layers of each virtual stage of @part, "3,3,2". Returns: (transfer full). */
static char *exec_train_layers(const PpPartition *part) {
    g_autofree int32_t *counts = g_new(int32_t, part->n_vstages);
    for (int32_t vs = 0; vs < part->n_vstages; vs++)
        counts[vs] = part->layer_end[vs] - part->layer_begin[vs];
    return exec_train_join_ints(counts, part->n_vstages);
}

/* The recorded value of @name (one of exec_train_identity_table). Returns: (transfer full), or
 * NULL with @error set when the order file cannot be read. */
static char *exec_train_identity_value(const PpScenario *sc, const PpPartition *part,
                                       const char *name, GError **error) {
    if (strcmp(name, "run.layers_per_stage") == 0)
        return exec_train_layers(part);
    if (strcmp(name, "run.precision") == 0) {
        if (sc->run.precision)
            return g_strdup(sc->run.precision);
        const ExecBackendInfo *backend = exec_backend_find(sc->run.backend, NULL);
        PP_ASSERT(backend != NULL); /* exec_train_check_scenario() accepted it */
        return g_strdup(backend->default_precision);
    }
    if (strcmp(name, "pipeline.order_file") == 0) {
        g_autofree char *text = NULL;
        gsize            len = 0;
        if (sc->pipeline.order_file == NULL)
            return g_strdup("(unset)");
        if (!pp_file_read(sc->pipeline.order_file, "order file", &text, &len, error))
            return NULL;
        g_autofree char *sha =
            g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)text, len);
        return g_strconcat("sha256 ", sha, NULL);
    }
    g_auto(GStrv) parts = g_strsplit(name, ".", 2);
    char *value = pp_scenario_value(sc, parts[0], parts[1]);
    PP_ASSERT(value != NULL); /* the generic keys of the table are never unset */
    return value;
}

GStrv exec_train_identity_new(const PpScenario *sc, const PpPartition *part, GError **error) {
    g_autoptr(GStrvBuilder) pairs = g_strv_builder_new();
    for (const char *const *name = exec_train_identity_table; *name; name++) {
        g_autofree char *value = exec_train_identity_value(sc, part, *name, error);
        if (value == NULL)
            return NULL;
        g_strv_builder_add(pairs, *name);
        g_strv_builder_add(pairs, value);
    }
    return g_strv_builder_end(pairs);
}

/* The replica count the batch keys of @saved imply: training.global_batch over
 * microbatch_size x the micro-batches of a step by its schedule's batch rule
 * (pp-scenario-check.c: microbatches, accumulation or 1), or 0 when they do not say. */
static int32_t exec_train_identity_data(GHashTable *saved) {
    const PpSchedKindInfo *kind =
        pp_sched_kind_lookup(g_hash_table_lookup(saved, "pipeline.schedule"));
    if (kind == NULL)
        return 0;
    const char       *count_key = kind->batch == PP_BATCH_MICROBATCHES   ? "pipeline.microbatches"
                                  : kind->batch == PP_BATCH_ACCUMULATION ? "pipeline.accumulation"
                                                                         : NULL;
    const char *const keys[] = {"training.global_batch", "pipeline.microbatch_size", count_key};
    gint64            v[G_N_ELEMENTS(keys)] = {0, 0, 1};
    for (size_t i = 0; i < G_N_ELEMENTS(keys) && keys[i]; i++) {
        const char *text = g_hash_table_lookup(saved, keys[i]);
        if (!text || !g_ascii_string_to_signed(text, 10, 1, G_MAXINT32, &v[i], NULL))
            return 0;
    }
    gint64 per_replica = v[1] * v[2];
    return v[0] % per_replica == 0 && v[0] / per_replica <= G_MAXINT32
               ? (int32_t)(v[0] / per_replica)
               : 0;
}

gboolean exec_train_identity_check(const char *const *identity, int32_t data, GHashTable *saved,
                                   const char *dir, GError **error) {
    int32_t data_then = exec_train_identity_data(saved);
    if (data_then > 0 && data_then != data) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: parallel.data = %d in the checkpoint (its training.global_batch over "
                    "microbatch_size and the step's micro-batches), %d in this run; a resume "
                    "continues the same computation, so it needs the same parallel.data (set it "
                    "back, or start a new run)",
                    dir, data_then, data);
        return FALSE;
    }
    for (const char *const *p = identity; *p; p += 2) {
        const char *then = g_hash_table_lookup(saved, p[0]);
        if (g_strcmp0(then, p[1]) == 0)
            continue;
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: %s = %s in the checkpoint, %s in this run; a resume continues the same "
                    "computation, so it needs the same %s (set it back, or start a new run)",
                    dir, p[0], then ? then : "(not recorded)", p[1], p[0]);
        return FALSE;
    }
    return TRUE;
}

char *exec_train_identity_summary(const PpScenario *sc, const PpPartition *part) {
    g_autofree char *layers = exec_train_layers(part);
    return g_strdup_printf(
        "%s stages=%d chunks=%d m=%d a=%d B=%d layers=%s seed=%" G_GUINT64_FORMAT,
        sc->pipeline.schedule, sc->pipeline.stages, sc->pipeline.chunks, sc->pipeline.microbatches,
        sc->pipeline.accumulation, sc->pipeline.microbatch_size, layers, sc->run.seed);
}
