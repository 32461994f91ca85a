/* SPDX-License-Identifier: MIT
 * exec-train-checkpoint.c: pacer-train's checkpoints and resume. At a drained segment boundary
 * the pipeline's tensors are copied out by name into host lists, which become one checkpoint
 * unit (exec-checkpoint-unit.h) with the run's counters and log rows. Resume reads a unit into
 * host lists, checks that it belongs to this run, and only then copies it in. Across processes
 * rank 0 gathers every rank's tensors and counters (exec-train-dist.c) and alone writes and
 * reads the units; on resume the lists travel from rank 0 to the ranks holding them.
 */
#include "exec-train-private.h"

#include <string.h>

#include "exec-checkpoint-unit.h"
#include "exec-checkpoint.h"
#include "pp-error.h"

/* Host copies of pipeline tensors in checkpoint order, and where each one lives: the model
 * state crosses into and out of the backend only through its by-name copy calls. */
typedef struct {
    int32_t           vstage;
    const ExecTensor *table;  /* the entry in the backend's table (transfer none) */
    const char       *tensor; /* its name */
    ExecTensorRole    role;
    size_t            numel;
} ExecTrainRef;

typedef struct {
    ExecTensorList *list;  /* owned host buffers, named as in the file */
    GArray         *refs;  /* ExecTrainRef per list entry */
    gboolean        state; /* the optimizer's state: a sharded optimizer's replicas each hold
                              part of it (exec_pipeline_state_part()) */
} ExecTrainTensors;

static void exec_train_tensors_clear(ExecTrainTensors *t) {
    g_clear_pointer(&t->list, exec_tensor_list_free);
    g_clear_pointer(&t->refs, g_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ExecTrainTensors, exec_train_tensors_clear)

static void exec_train_tensors_init(ExecTrainTensors *t) {
    t->list = exec_tensor_list_new();
    t->refs = g_array_new(FALSE, FALSE, sizeof(ExecTrainRef));
}

/* Appends a zeroed host buffer for the @role data of tensor @tensor of @vstage, named
 * @prefix + its name. */
static void exec_train_tensors_add(ExecTrainTensors *t, int32_t vstage, const ExecTensor *tensor,
                                   ExecTensorRole role, const char *prefix) {
    g_autofree char *name = g_strconcat(prefix, tensor->name, NULL);
    exec_tensor_list_add_owned(t->list, name, tensor->ndim, tensor->shape[0],
                               tensor->ndim == 1 ? 1 : tensor->shape[1]);
    ExecTrainRef ref = {.vstage = vstage,
                        .table = tensor,
                        .tensor = tensor->name,
                        .role = role,
                        .numel = tensor->numel};
    g_array_append_val(t->refs, ref);
}

/* Every parameter of the pipeline, one list over all virtual stages (pacer layout). */
static void exec_train_model_tensors(ExecPipeline *pipeline, ExecTrainTensors *t) {
    exec_train_tensors_init(t);
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        for (int i = 0; i < exec_pipeline_n_tensors(pipeline, vs); i++)
            exec_train_tensors_add(t, vs, exec_pipeline_tensor(pipeline, vs, i), EXEC_TENSOR_PARAMS,
                                   "");
    }
}

/* The persistent optimizer state of every virtual stage as sidecar tensors, named by the
 * parameter they belong to (Hugging Face names, global block numbers, so unique over the
 * whole pipeline) and shaped like it (pacer layout), per virtual stage in this order:
 *   optim.m.NAME, optim.v.NAME      AdamW first and second moments, or
 *   optim.momentum.NAME             Muon momentum (blocks' matmul weights under muon),
 *   tensor by tensor; then
 *   optim.prev_update.NAME          error feedback's previous update (every parameter). */
static void exec_train_state_tensors(ExecPipeline *pipeline, ExecTrainTensors *t) {
    static const struct {
        ExecTensorRole role;
        const char    *prefix;
    } per_tensor[] = {
        {EXEC_TENSOR_ADAM_M, "optim.m."},
        {EXEC_TENSOR_MUON_MOMENTUM, "optim.momentum."},
        {EXEC_TENSOR_ADAM_V, "optim.v."},
    };
    exec_train_tensors_init(t);
    t->state = TRUE;
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        int n = exec_pipeline_n_tensors(pipeline, vs);
        for (int i = 0; i < n; i++) {
            const ExecTensor *tensor = exec_pipeline_tensor(pipeline, vs, i);
            for (size_t k = 0; k < G_N_ELEMENTS(per_tensor); k++) {
                if (tensor->roles & EXEC_TENSOR_ROLE_BIT(per_tensor[k].role))
                    exec_train_tensors_add(t, vs, tensor, per_tensor[k].role, per_tensor[k].prefix);
            }
        }
        for (int i = 0; i < n; i++) {
            const ExecTensor *tensor = exec_pipeline_tensor(pipeline, vs, i);
            if (tensor->roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_PREV_UPDATE))
                exec_train_tensors_add(t, vs, tensor, EXEC_TENSOR_PREV_UPDATE,
                                       "optim.prev_update.");
        }
    }
}

/* Copies every tensor of @t out of the backend into its host buffer (@out), or from the host
 * buffer into the backend. Across processes each rank copies its own virtual stages, and the
 * host buffers of the others' travel from them to rank 0 (@out: replica 0's, or each
 * replica's part of a sharded optimizer's state), or from rank 0 to them. */
static gboolean exec_train_tensors_copy(ExecPipeline *pipeline, ExecTrainTensors *t, gboolean out,
                                        GError **error) {
    int32_t                       rank = exec_comm_rank(exec_pipeline_comm(pipeline));
    int                           n = exec_tensor_list_n(t->list);
    g_autofree int32_t           *vstages = g_new(int32_t, MAX(n, 1));
    g_autofree const ExecTensor **tables = g_new(const ExecTensor *, MAX(n, 1));
    for (int i = 0; i < n; i++) {
        vstages[i] = g_array_index(t->refs, ExecTrainRef, i).vstage;
        tables[i] = g_array_index(t->refs, ExecTrainRef, i).table;
    }
    if (!out && !exec_train_dist_scatter(pipeline, t->list, vstages, error))
        return FALSE;
    for (int i = 0; i < exec_tensor_list_n(t->list); i++) {
        const ExecTrainRef *ref = &g_array_index(t->refs, ExecTrainRef, i);
        float              *data = exec_tensor_list_get(t->list, i)->data;
        if (exec_pipeline_vstage_rank(pipeline, ref->vstage) != rank)
            continue;
        gboolean ok = out ? exec_pipeline_tensor_get(pipeline, ref->vstage, ref->tensor, ref->role,
                                                     data, ref->numel, error)
                          : exec_pipeline_tensor_set(pipeline, ref->vstage, ref->tensor, ref->role,
                                                     data, ref->numel, error);
        if (!ok)
            return FALSE;
    }
    return !out ||
           exec_train_dist_gather(pipeline, t->list, vstages, t->state ? tables : NULL, error);
}

/* Parses @text as exactly @n comma-separated integers >= 0 into @out. */
static gboolean exec_train_parse_ints(const char *text, int32_t n, int32_t *out) {
    g_auto(GStrv) parts = g_strsplit(text, ",", -1);
    if ((int32_t)g_strv_length(parts) != n)
        return FALSE;
    for (int32_t i = 0; i < n; i++) {
        gint64 v = 0;
        if (!g_ascii_string_to_signed(parts[i], 10, 0, G_MAXINT32, &v, NULL))
            return FALSE;
        out[i] = (int32_t)v;
    }
    return TRUE;
}

/* Lower-case hex of @n bytes. Returns: (transfer full). */
char *exec_train_hex(const uint8_t *bytes, size_t n) {
    GString *out = g_string_sized_new(2 * n);
    for (size_t i = 0; i < n; i++)
        g_string_append_printf(out, "%02x", bytes[i]);
    return g_string_free(out, FALSE);
}

/* What decides the optimizer state's layout (checked on resume; hyperparameters such as the
 * learning rate may change between invocations). */
static char *exec_train_optim_identity(const PpScenario *sc) {
    return g_strdup_printf("%s error_feedback=%d", sc->optimizer.name,
                           sc->optimizer.error_feedback ? 1 : 0);
}

/* Every checkpoint tensor of the pipeline in host memory: the weights (exec_train_model_tensors())
 * and the optimizer state (exec_train_state_tensors()), copied out by name. A multi-process
 * backend gathers the other ranks' tensors into the same lists. */
static gboolean exec_train_collect(ExecPipeline *pipeline, ExecTrainTensors *model,
                                   ExecTrainTensors *state, GError **error) {
    exec_train_model_tensors(pipeline, model);
    exec_train_state_tensors(pipeline, state);
    return exec_train_tensors_copy(pipeline, model, TRUE, error) &&
           exec_train_tensors_copy(pipeline, state, TRUE, error);
}

/* The counters of state.safetensors' metadata at the drained boundary after @step steps:
 *   pacer_step          steps done
 *   pacer_versions      per stage: updates applied (weight version)
 *   pacer_nonfinite     per stage: consecutive skipped updates
 *   pacer_optim_steps   per virtual stage: the optimizer's step count t (skipped updates
 *                       advance the version but not t)
 *   pacer_optim         optimizer identity (exec_train_optim_identity())
 *   pacer_vocab         hex vocabulary fingerprint of the training shard
 * The data position needs no entry: micro-batch windows are a pure function of the step and
 * run.seed (exec_train_window()), and nothing else draws random numbers after init. Across
 * processes every rank calls it and rank 0's table holds every rank's counts.
 * Returns: (transfer full), or NULL with @error set by the backend. */
static GHashTable *exec_train_counters(ExecPipeline *pipeline, const PpScenario *sc,
                                       const char *vocab, int32_t step, GError **error) {
    int32_t             n_stages = sc->pipeline.stages, n_vs = exec_pipeline_n_vstages(pipeline);
    ExecComm           *comm = exec_pipeline_comm(pipeline);
    g_autofree int32_t *versions = g_new(int32_t, n_stages);
    g_autofree int32_t *nonfinite = g_new(int32_t, n_stages);
    g_autofree int32_t *optim_steps = g_new(int32_t, n_vs);
    for (int32_t s = 0; s < n_stages; s++) {
        versions[s] = exec_pipeline_version(pipeline, s);
        nonfinite[s] = exec_pipeline_nonfinite(pipeline, s);
    }
    for (int32_t vs = 0; vs < n_vs; vs++) {
        int64_t t = 0;
        if (exec_pipeline_vstage_rank(pipeline, vs) == exec_comm_rank(comm) &&
            !exec_pipeline_optim_steps(pipeline, vs, &t, error))
            return NULL;
        optim_steps[vs] = (int32_t)t;
    }
    if (!exec_train_dist_gather_vstage_ints(pipeline, optim_steps,
                                            "the optimizer step counts for the checkpoint", error))
        return NULL;
    GHashTable *meta = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_hash_table_insert(meta, g_strdup("pacer_step"), g_strdup_printf("%d", step));
    g_hash_table_insert(meta, g_strdup("pacer_versions"), exec_train_join_ints(versions, n_stages));
    g_hash_table_insert(meta, g_strdup("pacer_nonfinite"),
                        exec_train_join_ints(nonfinite, n_stages));
    g_hash_table_insert(meta, g_strdup("pacer_optim_steps"),
                        exec_train_join_ints(optim_steps, n_vs));
    g_hash_table_insert(meta, g_strdup("pacer_optim"), exec_train_optim_identity(sc));
    g_hash_table_insert(meta, g_strdup("pacer_vocab"), g_strdup(vocab));
    return meta;
}

/* How long the peers wait for rank 0's checkpoint write: no deadline in practice (about 30
 * years, well inside the comm's int64 microseconds). */
#define EXEC_TRAIN_CHECKPOINT_WAIT_S 1e9

/* exec_checkpoint_units_prune() of @units_dir after the unit of @step, saying in the log what
 * it left in place. */
static gboolean exec_train_prune(const char *units_dir, int32_t step, int32_t keep,
                                 GError **error) {
    g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func(g_free);
    gboolean ok = exec_checkpoint_units_prune(units_dir, step, keep, NULL, kept, error);
    exec_train_say_kept(kept);
    return ok;
}

/* Writes the unit of @step from the host lists and counters, then @out_dir/log.csv, then prunes
 * (one process: the only one, or rank 0). Returns: (transfer full) the unit's path, or NULL
 * with @error set. */
static char *exec_train_checkpoint_write(ExecPipeline *pipeline, const PpScenario *sc,
                                         ExecTrainTensors *model, ExecTrainTensors *state,
                                         GHashTable *counters, const GString *log,
                                         const char *out_dir, int32_t step, GError **error) {
    const PpPartition *part = exec_pipeline_partition(pipeline);
    g_autofree char   *run = exec_train_identity_summary(sc, part);
    g_auto(GStrv) identity = exec_train_identity_new(sc, part, error);
    if (identity == NULL)
        return NULL;
    ExecCheckpointUnitData data = {.step = step,
                                   .run = run,
                                   .identity = (const char *const *)identity,
                                   .model_cfg = exec_pipeline_model(pipeline),
                                   .model = model->list,
                                   .state = state->list,
                                   .state_metadata = counters,
                                   .log = log->str};
    g_autofree char       *units_dir = g_build_filename(out_dir, EXEC_CHECKPOINT_UNITS_DIR, NULL);
    g_autofree char       *unit = exec_checkpoint_unit_write(units_dir, &data, error);
    if (!unit) {
        g_prefix_error(error, "checkpoint of step %d: ", step);
        return NULL;
    }
    /* Older units go only once the new one and the log it holds are in place. */
    if (!exec_train_log_write(log, out_dir, error) ||
        !exec_train_prune(units_dir, step, sc->run.keep_checkpoints, error))
        return NULL;
    return g_steal_pointer(&unit);
}

char *exec_train_checkpoint(ExecPipeline *pipeline, const PpScenario *sc, const char *vocab,
                            const GString *log, const char *out_dir, int32_t step, GError **error) {
    ExecComm *comm = exec_pipeline_comm(pipeline);
    g_auto(ExecTrainTensors) model = {0};
    g_auto(ExecTrainTensors) state = {0};
    g_autoptr(GHashTable) counters = NULL;
    if (!exec_train_collect(pipeline, &model, &state, error) ||
        !(counters = exec_train_counters(pipeline, sc, vocab, step, error)))
        return NULL;
    if (comm == NULL)
        return exec_train_checkpoint_write(pipeline, sc, &model, &state, counters, log, out_dir,
                                           step, error);
    /* Rank 0 holds every tensor now and writes the unit alone; every rank returns its error.
     * The write has no deadline: storage may take longer than run.comm_timeout_s, and the
     * peers wait for rank 0's verdict however long it takes (a rank 0 that dies ends the job
     * through the launcher). The deadline is back for everything after. */
    GError          *local = NULL;
    g_autofree char *unit = NULL;
    exec_comm_set_timeout(comm, EXEC_TRAIN_CHECKPOINT_WAIT_S);
    if (exec_comm_rank(comm) == 0)
        unit = exec_train_checkpoint_write(pipeline, sc, &model, &state, counters, log, out_dir,
                                           step, &local);
    gboolean agreed = exec_comm_agree(comm, "writing the checkpoint", &local);
    exec_comm_set_timeout(comm, sc->run.comm_timeout_s);
    if (!agreed) {
        g_propagate_error(error, local);
        return NULL;
    }
    if (unit == NULL) {
        g_autofree char *name = exec_checkpoint_unit_name(step);
        unit = g_build_filename(out_dir, EXEC_CHECKPOINT_UNITS_DIR, name, NULL);
    }
    return g_steal_pointer(&unit);
}

/* What resume reads from a unit into host memory before anything reaches the pipeline. */
typedef struct {
    ExecPipeline     *pipeline;
    const PpScenario *sc;
    const char       *vocab;
    ExecTrainTensors *model, *state; /* host lists of the pipeline's tables */
    int32_t           step;
    int32_t          *versions;    /* (n_stages) */
    int32_t          *nonfinite;   /* (n_stages) */
    int32_t          *optim_steps; /* (n_vstages) */
    char             *log;         /* the unit's log.csv */
    GPtrArray        *notes;       /* (nullable) exec_train_load()'s */
} ExecTrainResume;

/* Checks that @unit was written by a run of the same identity (exec-train-identity.c). A unit
 * written before manifests recorded one has only the run summary, which is compared instead,
 * with a note saying what could not be checked. */
static gboolean exec_train_check_identity(ExecTrainResume *r, ExecCheckpointUnit *unit,
                                          GError **error) {
    const PpPartition *part = exec_pipeline_partition(r->pipeline);
    const char        *dir = exec_checkpoint_unit_dir(unit);
    GHashTable        *saved = exec_checkpoint_unit_identity(unit);
    if (saved) {
        g_auto(GStrv) identity = exec_train_identity_new(r->sc, part, error);
        return identity && exec_train_identity_check((const char *const *)identity,
                                                     r->sc->parallel.data, saved, dir, error);
    }
    g_autofree char *run = exec_train_identity_summary(r->sc, part);
    if (strcmp(exec_checkpoint_unit_run(unit), run) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: written by run \"%s\"; this scenario is \"%s\" (resume needs the same "
                    "schedule, layout, partition and seed)",
                    dir, exec_checkpoint_unit_run(unit), run);
        return FALSE;
    }
    if (r->notes)
        g_ptr_array_add(r->notes,
                        g_strdup_printf("%s records no identity (an earlier pacer-train wrote it): "
                                        "its schedule, layout, partition, seed and optimizer were "
                                        "checked, its [model] keys, precision and Adam or Muon "
                                        "decay rates were not",
                                        dir));
    return TRUE;
}

/* Checks that @unit was written by this run (identity in the manifest; optimizer and
 * vocabulary in the state's metadata @meta) and reads its counters into @r. */
static gboolean exec_train_check_meta(ExecTrainResume *r, ExecCheckpointUnit *unit,
                                      GHashTable *meta, GError **error) {
    const PpScenario        *sc = r->sc;
    const char              *dir = exec_checkpoint_unit_dir(unit);
    static const char *const keys[] = {"pacer_optim",    "pacer_vocab",     "pacer_step",
                                       "pacer_versions", "pacer_nonfinite", "pacer_optim_steps"};
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (!g_hash_table_contains(meta, keys[i])) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s/" EXEC_CHECKPOINT_UNIT_STATE ": no %s metadata; resume needs a "
                        "checkpoint written by pacer-train",
                        dir, keys[i]);
            return FALSE;
        }
    }
    g_autofree char *optim = exec_train_optim_identity(sc);
    const char      *saved_optim = g_hash_table_lookup(meta, "pacer_optim");
    const char      *saved_vocab = g_hash_table_lookup(meta, "pacer_vocab");
    if (strcmp(saved_optim, optim) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: optimizer state of \"%s\"; this scenario has \"%s\" (resume needs the "
                    "same optimizer.name and optimizer.error_feedback)",
                    dir, saved_optim, optim);
        return FALSE;
    }
    if (strcmp(saved_vocab, r->vocab) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: trained on shards of vocabulary %s; the training shard now has %s "
                    "(resume needs data tokenised with the same vocabulary)",
                    dir, saved_vocab, r->vocab);
        return FALSE;
    }
    const char *saved_step = g_hash_table_lookup(meta, "pacer_step");
    int32_t     n_stages = sc->pipeline.stages, n_vs = exec_pipeline_n_vstages(r->pipeline);
    gint64      at = 0;
    if (!g_ascii_string_to_signed(saved_step, 10, 0, G_MAXINT32, &at, NULL) ||
        at != exec_checkpoint_unit_step(unit) ||
        !exec_train_parse_ints(g_hash_table_lookup(meta, "pacer_versions"), n_stages,
                               r->versions) ||
        !exec_train_parse_ints(g_hash_table_lookup(meta, "pacer_nonfinite"), n_stages,
                               r->nonfinite) ||
        !exec_train_parse_ints(g_hash_table_lookup(meta, "pacer_optim_steps"), n_vs,
                               r->optim_steps)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s/" EXEC_CHECKPOINT_UNIT_STATE ": pacer_step=%s, pacer_versions=%s, "
                    "pacer_nonfinite=%s, pacer_optim_steps=%s do not fit the unit's step %d on "
                    "%d stages (%d virtual); each list needs one integer >= 0 per stage (per "
                    "virtual stage for pacer_optim_steps)",
                    dir, saved_step, (const char *)g_hash_table_lookup(meta, "pacer_versions"),
                    (const char *)g_hash_table_lookup(meta, "pacer_nonfinite"),
                    (const char *)g_hash_table_lookup(meta, "pacer_optim_steps"),
                    exec_checkpoint_unit_step(unit), n_stages, n_vs);
        return FALSE;
    }
    r->step = (int32_t)at;
    return TRUE;
}

/* ExecCheckpointUnitReadFn: the identities and counters first (a unit of another run is refused
 * by name before any tensor is compared), then every tensor and the log rows into host memory.
 * Tensor shapes are checked as they are read: a mismatch is PP_IO_ERROR_MISMATCH naming the
 * tensor and both shapes. */
static gboolean exec_train_read_unit(ExecCheckpointUnit *unit, gpointer user_data, GError **error) {
    ExecTrainResume *r = user_data;
    if (!exec_train_check_identity(r, unit, error))
        return FALSE;
    g_autoptr(ExecTensorList) none = exec_tensor_list_new();
    g_autoptr(GHashTable) meta = NULL;
    g_clear_pointer(&r->log, g_free);
    return exec_checkpoint_unit_read_state(unit, none, &meta, error) &&
           exec_train_check_meta(r, unit, meta, error) &&
           exec_checkpoint_unit_read_model(unit, exec_pipeline_model(r->pipeline), r->model->list,
                                           error) &&
           exec_checkpoint_unit_read_state(unit, r->state->list, NULL, error) &&
           (r->log = exec_checkpoint_unit_read_log(unit, error)) != NULL;
}

/* The reverse of exec_train_collect(): copies the host lists of @r into the pipeline by name
 * and sets its counters. Across processes rank 0's lists travel to the ranks holding them. */
static gboolean exec_train_restore(const ExecTrainResume *r, GError **error) {
    ExecPipeline *pipeline = r->pipeline;
    int32_t       rank = exec_comm_rank(exec_pipeline_comm(pipeline));
    if (!exec_train_tensors_copy(pipeline, r->model, FALSE, error) ||
        !exec_train_tensors_copy(pipeline, r->state, FALSE, error))
        return FALSE;
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        if (exec_pipeline_vstage_rank(pipeline, vs) == rank &&
            !exec_pipeline_set_optim_steps(pipeline, vs, r->optim_steps[vs], error))
            return FALSE;
    }
    exec_pipeline_set_versions(pipeline, r->versions);
    exec_pipeline_set_nonfinite(pipeline, r->nonfinite);
    return TRUE;
}

gboolean exec_train_load(ExecPipeline *pipeline, const PpScenario *sc, const char *vocab,
                         const char *path, int32_t *step, char **log, char **unit_dir,
                         GPtrArray *notes, GError **error) {
    int32_t   n_stages = sc->pipeline.stages, n_vs = exec_pipeline_n_vstages(pipeline);
    ExecComm *comm = exec_pipeline_comm(pipeline);
    /* (1 + 2 n_stages + n_vs): the step, every stage's version and skip count, every virtual
     * stage's optimizer step count: what rank 0 reads for every rank. */
    g_autofree int32_t *counters = g_new0(int32_t, 1 + 2 * n_stages + n_vs);
    int32_t            *versions = counters + 1, *nonfinite = versions + n_stages;
    int32_t            *optim_steps = nonfinite + n_stages;
    g_auto(ExecTrainTensors) model = {0};
    g_auto(ExecTrainTensors) state = {0};
    exec_train_model_tensors(pipeline, &model);
    exec_train_state_tensors(pipeline, &state);
    ExecTrainResume r = {.pipeline = pipeline,
                         .sc = sc,
                         .vocab = vocab,
                         .model = &model,
                         .state = &state,
                         .versions = versions,
                         .nonfinite = nonfinite,
                         .optim_steps = optim_steps,
                         .notes = notes};
    /* Rank 0 alone reads the unit (every rank, without a process group). */
    GError *local = NULL;
    g_autoptr(ExecCheckpointUnit) unit = NULL;
    if (exec_comm_rank(comm) == 0)
        unit = exec_checkpoint_unit_find(path, exec_train_read_unit, &r, notes, &local);
    g_autofree char *unit_log = g_steal_pointer(&r.log);
    counters[0] = r.step;
    if (!exec_comm_agree(comm, "reading the checkpoint", &local) ||
        !exec_comm_bcast(comm, 0, counters, (1 + 2 * n_stages + n_vs) * sizeof(int32_t),
                         "the checkpoint's counters", &local)) {
        g_propagate_error(error, local);
        return FALSE;
    }
    r.step = counters[0];
    /* The whole unit is in host memory and checked: now the pipeline's state changes. */
    if (!exec_train_restore(&r, error))
        return FALSE;
    if (notes && unit)
        g_ptr_array_add(notes, g_strdup_printf("resuming from %s (step %d)",
                                               exec_checkpoint_unit_dir(unit), r.step));
    *step = r.step;
    *log = g_steal_pointer(&unit_log);
    *unit_dir = unit ? g_strdup(exec_checkpoint_unit_dir(unit)) : NULL;
    return TRUE;
}
