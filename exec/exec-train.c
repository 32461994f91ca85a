/* SPDX-License-Identifier: MIT
 * exec-train.c: the training loop of pacer-train (see exec-train.h for segments, steps and
 * data positions). Builds one schedule per segment length, replays the segments on an
 * ExecPipeline, turns the per-micro-batch results into per-step log rows, runs validation on
 * the drained pipeline and writes the outputs.
 */
#include "exec-train.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "data-shard.h"
#include "exec-checkpoint.h"
#include "exec.h"
#include "pp-error.h"

/* Consecutive skipped updates on one stage before the run stops. */
#define EXEC_TRAIN_MAX_NONFINITE 3

typedef struct {
    const uint16_t *tokens; /* (n_tokens) borrowed from the shard */
    uint64_t        n_tokens;
    int32_t         B, T;
    uint64_t        seed;
} ExecTrainData;

/* Live per-step accounting, fed by the last stage's worker through on_loss. */
typedef struct {
    ExecProgress *progress;
    int32_t       total_steps;
    int32_t       step0; /* first step of the segment */
    int32_t       seg;   /* steps in the segment */
    int32_t       mb_per_step;
    int64_t       tokens_per_step;
    double        lr_peak, lr_min;
    int32_t       warmup;
    int32_t      *count;        /* (segment steps) losses seen per step */
    double       *sum;          /* (segment steps) */
    double       *tokens_per_s; /* (segment steps) */
    double        t_start_s;    /* training start (this invocation) */
    double        t_last_s;     /* when the previous step completed */
} ExecTrainLive;

static double exec_train_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t exec_train_window(uint64_t seed, int64_t seq, uint64_t n_tokens, int32_t T) {
    PP_ASSERT(n_tokens > (uint64_t)T);
    uint64_t z = seed + (uint64_t)seq * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z % (n_tokens - (uint64_t)T);
}

static void exec_train_fill(gpointer user_data, int64_t mb, int32_t *tokens, int32_t *targets) {
    const ExecTrainData *d = user_data;
    for (int32_t b = 0; b < d->B; b++) {
        uint64_t off = exec_train_window(d->seed, mb * d->B + b, d->n_tokens, d->T);
        for (int32_t t = 0; t < d->T; t++) {
            tokens[b * d->T + t] = d->tokens[off + t];
            targets[b * d->T + t] = d->tokens[off + t + 1];
        }
    }
}

static void exec_train_on_loss(gpointer user_data, int32_t mb, int32_t step, float loss) {
    ExecTrainLive *live = user_data;
    (void)mb;
    PP_ASSERT(step >= 0 && step < live->seg);
    live->sum[step] += loss;
    if (++live->count[step] < live->mb_per_step)
        return;
    double now = exec_train_now_s();
    live->tokens_per_s[step] = (double)live->tokens_per_step / MAX(now - live->t_last_s, 1e-9);
    live->t_last_s = now;
    int32_t          abs_step = live->step0 + step;
    ExecProgressStep show = {
        .step = abs_step,
        .total_steps = live->total_steps,
        .loss = live->sum[step] / live->count[step],
        .lr = kern_lr_schedule(abs_step, live->warmup, live->total_steps, (float)live->lr_peak,
                               (float)live->lr_min),
        .tokens_per_s = live->tokens_per_s[step],
        .elapsed_s = now - live->t_start_s,
    };
    exec_progress_step(live->progress, &show);
}

/* Mean validation loss over @n_batches micro-batches: contiguous, non-overlapping windows of
 * the val shard from its start, run forward through every slice on the drained pipeline. */
static double exec_train_validate(ExecPipeline *pipeline, const ExecTrainData *val,
                                  int32_t n_batches) {
    int32_t             B = val->B, T = val->T, nv = exec_pipeline_n_vstages(pipeline);
    int32_t             C = gpt2_slice_params_info(exec_pipeline_slice(pipeline, 0))->model.C;
    g_autofree int32_t *tokens = g_new(int32_t, (size_t)B * T);  /* (B, T) */
    g_autofree int32_t *targets = g_new(int32_t, (size_t)B * T); /* (B, T) */
    g_autofree float   *x = g_new(float, (size_t)B *T *C);       /* (B, T, C) */
    g_autofree float   *y = g_new(float, (size_t)B *T *C);       /* (B, T, C) */
    double              sum = 0.0;
    uint64_t            windows = (val->n_tokens - 1) / (uint64_t)T;
    for (int32_t i = 0; i < n_batches; i++) {
        for (int32_t b = 0; b < B; b++) {
            uint64_t off = ((uint64_t)i * B + b) % windows * (uint64_t)T;
            for (int32_t t = 0; t < T; t++) {
                tokens[b * T + t] = val->tokens[off + t];
                targets[b * T + t] = val->tokens[off + t + 1];
            }
        }
        float loss = 0.0f;
        for (int32_t vs = 0; vs < nv; vs++) {
            Gpt2Slice *slice = exec_pipeline_slice(pipeline, vs);
            gboolean   first = vs == 0, last = vs == nv - 1;
            /* Slot 0 is free: the pipeline is drained between segments. */
            gpt2_slice_forward(slice, gpt2_slice_params(slice), 0, first ? tokens : NULL,
                               first ? NULL : x, last ? targets : NULL, last ? NULL : y,
                               last ? &loss : NULL);
            float *swap = x;
            x = y;
            y = swap;
        }
        sum += loss;
    }
    return sum / n_batches;
}

/* Opens the shard at @path; @fingerprint (nullable): the vocabulary it must have been built
 * with (data_shard_open() refuses another). */
static gboolean exec_train_open_shard(const char *path, const uint8_t *fingerprint, int32_t T,
                                      int32_t V, DataShard **out, ExecTrainData *data,
                                      GError **error) {
    DataShard *shard = data_shard_open(path, fingerprint, error);
    if (!shard)
        return FALSE;
    data->tokens = data_shard_tokens(shard, &data->n_tokens);
    if (data->n_tokens <= (uint64_t)T + 1 || data_shard_n_vocab(shard) > V) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: %" G_GUINT64_FORMAT " tokens of a %d-token vocabulary; training needs "
                    "more than model.seq_len + 1 = %d tokens and a vocabulary <= model.vocab=%d",
                    path, data->n_tokens, data_shard_n_vocab(shard), T + 1, V);
        data_shard_free(shard);
        return FALSE;
    }
    *out = shard;
    return TRUE;
}

/* Opens the train and val shards: both built with params->vocab_fingerprint when given, and
 * always with the same vocabulary as each other. */
static gboolean exec_train_open_shards(const ExecTrainParams *params, int32_t T, int32_t V,
                                       DataShard **train_shard, ExecTrainData *train,
                                       DataShard **val_shard, ExecTrainData *val, GError **error) {
    const uint8_t *want = params->vocab_fingerprint;
    if (!exec_train_open_shard(params->train_path, want, T, V, train_shard, train, error) ||
        !exec_train_open_shard(params->val_path, want, T, V, val_shard, val, error))
        return FALSE;
    if (memcmp(data_shard_fingerprint(*train_shard), data_shard_fingerprint(*val_shard),
               DATA_BPE_FINGERPRINT_BYTES) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "token shards %s and %s were built with different vocabularies (their "
                    "fingerprints differ); rebuild both with pacer-data prepare",
                    params->train_path, params->val_path);
        return FALSE;
    }
    return TRUE;
}

/* Next step where the pipeline must be drained (eval, checkpoint or the end). */
static int32_t exec_train_next_boundary(const PpScenario *sc, int32_t step) {
    int32_t       end = sc->training.steps;
    const int32_t every[] = {sc->run.eval_every, sc->run.checkpoint_every};
    for (size_t i = 0; i < G_N_ELEMENTS(every); i++) {
        if (every[i] > 0) {
            int32_t next = (step / every[i] + 1) * every[i];
            end = MIN(end, next);
        }
    }
    return end;
}

static gboolean exec_train_write_file(const char *path, const char *text, GError **error) {
    GError *local = NULL;
    if (!g_file_set_contents(path, text, -1, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "%s: %s", path, local->message);
        g_error_free(local);
        return FALSE;
    }
    return TRUE;
}

static gboolean exec_train_write_trace(const ExecPipeline *pipeline, const char *path,
                                       GError **error) {
    const PpTrace *src = exec_pipeline_trace(pipeline);
    g_autoptr(PpTrace) trace = pp_trace_new();
    for (int64_t i = 0; i < src->n_rows; i++)
        pp_trace_append(trace, &src->rows[i]);
    pp_trace_sort(trace);
    return pp_trace_write_csv(trace, path, error);
}

/* --- checkpoints --- */

/* Every parameter of the pipeline, one list over all virtual stages (pacer layout). */
static ExecTensorList *exec_train_model_list(ExecPipeline *pipeline) {
    ExecTensorList *list = exec_tensor_list_new();
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        Gpt2Slice *slice = exec_pipeline_slice(pipeline, vs);
        exec_tensor_list_add_slice(list, slice, gpt2_slice_params(slice), "");
    }
    return list;
}

/* "a,b,c" of @n ints. Returns: (transfer full). */
static char *exec_train_join_ints(const int32_t *v, int32_t n) {
    GString *out = g_string_new(NULL);
    for (int32_t i = 0; i < n; i++)
        g_string_append_printf(out, "%s%d", i ? "," : "", v[i]);
    return g_string_free(out, FALSE);
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
static char *exec_train_hex(const uint8_t *bytes, size_t n) {
    GString *out = g_string_sized_new(2 * n);
    for (size_t i = 0; i < n; i++)
        g_string_append_printf(out, "%02x", bytes[i]);
    return g_string_free(out, FALSE);
}

/* Run identity stored in the sidecar and checked on resume: a checkpoint continues only the
 * same schedule, pipeline layout and partition. */
static char *exec_train_identity(const PpScenario *sc, const PpPartition *part) {
    g_autofree int32_t *counts = g_new(int32_t, part->n_vstages);
    for (int32_t vs = 0; vs < part->n_vstages; vs++)
        counts[vs] = part->layer_end[vs] - part->layer_begin[vs];
    g_autofree char *layers = exec_train_join_ints(counts, part->n_vstages);
    return g_strdup_printf(
        "%s stages=%d chunks=%d m=%d a=%d B=%d layers=%s seed=%" G_GUINT64_FORMAT,
        sc->pipeline.schedule, sc->pipeline.stages, sc->pipeline.chunks, sc->pipeline.microbatches,
        sc->pipeline.accumulation, sc->pipeline.microbatch_size, layers, sc->run.seed);
}

/* What decides the optimizer state's layout (checked on resume; hyperparameters such as the
 * learning rate may change between invocations). */
static char *exec_train_optim_identity(const PpScenario *sc) {
    return g_strdup_printf("%s error_feedback=%d", sc->optimizer.name,
                           sc->optimizer.error_feedback ? 1 : 0);
}

/* The persistent optimizer state of every virtual stage as sidecar tensors, named by the
 * parameter they belong to (Hugging Face names, global block numbers, so unique over the
 * whole pipeline) and shaped like it (pacer layout):
 *   optim.m.NAME, optim.v.NAME      AdamW first and second moments
 *   optim.momentum.NAME             Muon momentum (blocks' matmul weights under muon)
 *   optim.prev_update.NAME          error feedback's previous update (every parameter)
 * The data points into the optimizers' state arenas: saving reads it, loading overwrites it. */
static ExecTensorList *exec_train_state_list(ExecPipeline *pipeline) {
    ExecTensorList *list = exec_tensor_list_new();
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        Gpt2Slice *slice = exec_pipeline_slice(pipeline, vs);
        KernOptim *opt = exec_pipeline_optim(pipeline, vs);
        for (int i = 0; i < gpt2_slice_n_tensors(slice); i++) {
            const Gpt2Tensor *t = gpt2_slice_tensor(slice, i);
            float            *first, *second;
            int               muon = kern_optim_tensor_state(opt, i, &first, &second);
            int               cols = t->ndim == 1 ? 1 : t->shape[1];
            g_autofree char  *m = g_strconcat(muon ? "optim.momentum." : "optim.m.", t->name, NULL);
            exec_tensor_list_add(list, m, first, t->ndim, t->shape[0], cols);
            if (!muon) {
                g_autofree char *v = g_strconcat("optim.v.", t->name, NULL);
                exec_tensor_list_add(list, v, second, t->ndim, t->shape[0], cols);
            }
        }
        float *prev = kern_optim_prev_update(opt);
        if (prev)
            exec_tensor_list_add_slice(list, slice, prev, "optim.prev_update.");
    }
    return list;
}

/* Writes DIR/checkpoint.safetensors (weights, Hugging Face names) and its sidecar .state at a
 * drained step boundary: the optimizer state (exec_train_state_list()) and the metadata
 *   pacer_step          steps done
 *   pacer_versions      per stage: updates applied (weight version)
 *   pacer_nonfinite     per stage: consecutive skipped updates
 *   pacer_optim_steps   per virtual stage: the optimizer's step count t (skipped updates
 *                       advance the version but not t)
 *   pacer_run           run identity (exec_train_identity())
 *   pacer_optim         optimizer identity (exec_train_optim_identity())
 *   pacer_vocab         hex vocabulary fingerprint of the training shard
 * The data position needs no entry: micro-batch windows are a pure function of the step and
 * run.seed (exec_train_window()), and nothing else draws random numbers after init. */
static gboolean exec_train_save(ExecPipeline *pipeline, const PpScenario *sc, const char *vocab,
                                const char *dir, int32_t step, GError **error) {
    const Gpt2SliceParams *info = gpt2_slice_params_info(exec_pipeline_slice(pipeline, 0));
    int32_t                n_stages = sc->pipeline.stages, n_vs = exec_pipeline_n_vstages(pipeline);
    g_autoptr(ExecTensorList) model = exec_train_model_list(pipeline);
    g_autoptr(ExecTensorList) state = exec_train_state_list(pipeline);
    g_autoptr(GHashTable) meta = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autofree int32_t *versions = g_new(int32_t, n_stages);
    g_autofree int32_t *nonfinite = g_new(int32_t, n_stages);
    g_autofree int32_t *optim_steps = g_new(int32_t, n_vs);
    for (int32_t s = 0; s < n_stages; s++) {
        versions[s] = exec_pipeline_version(pipeline, s);
        nonfinite[s] = exec_pipeline_nonfinite(pipeline, s);
    }
    for (int32_t vs = 0; vs < n_vs; vs++)
        optim_steps[vs] = (int32_t)kern_optim_n_steps(exec_pipeline_optim(pipeline, vs));
    g_hash_table_insert(meta, g_strdup("pacer_step"), g_strdup_printf("%d", step));
    g_hash_table_insert(meta, g_strdup("pacer_versions"), exec_train_join_ints(versions, n_stages));
    g_hash_table_insert(meta, g_strdup("pacer_nonfinite"),
                        exec_train_join_ints(nonfinite, n_stages));
    g_hash_table_insert(meta, g_strdup("pacer_optim_steps"),
                        exec_train_join_ints(optim_steps, n_vs));
    g_hash_table_insert(meta, g_strdup("pacer_run"),
                        exec_train_identity(sc, exec_pipeline_partition(pipeline)));
    g_hash_table_insert(meta, g_strdup("pacer_optim"), exec_train_optim_identity(sc));
    g_hash_table_insert(meta, g_strdup("pacer_vocab"), g_strdup(vocab));
    g_autofree char *path = g_build_filename(dir, "checkpoint.safetensors", NULL);
    return exec_checkpoint_save_full(path, &info->model, model, NULL, EXEC_DTYPE_F32, state, meta,
                                     error);
}

/* Checks that the sidecar metadata @meta of @path was written by this run (identity,
 * optimizer, vocabulary @vocab) and reads its counters. */
static gboolean exec_train_check_meta(GHashTable *meta, const PpScenario *sc,
                                      ExecPipeline *pipeline, const char *vocab, const char *path,
                                      int32_t *step, int32_t *versions, int32_t *nonfinite,
                                      int32_t *optim_steps, GError **error) {
    static const char *const keys[] = {"pacer_run",        "pacer_optim",    "pacer_vocab",
                                       "pacer_step",       "pacer_versions", "pacer_nonfinite",
                                       "pacer_optim_steps"};
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (!g_hash_table_contains(meta, keys[i])) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s.state: no %s metadata; resume needs a checkpoint written by "
                        "pacer-train",
                        path, keys[i]);
            return FALSE;
        }
    }
    g_autofree char *run = exec_train_identity(sc, exec_pipeline_partition(pipeline));
    g_autofree char *optim = exec_train_optim_identity(sc);
    const char      *saved_run = g_hash_table_lookup(meta, "pacer_run");
    const char      *saved_optim = g_hash_table_lookup(meta, "pacer_optim");
    const char      *saved_vocab = g_hash_table_lookup(meta, "pacer_vocab");
    if (strcmp(saved_run, run) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: written by run \"%s\"; this scenario is \"%s\" (resume needs the same "
                    "schedule, layout, partition and seed)",
                    path, saved_run, run);
        return FALSE;
    }
    if (strcmp(saved_optim, optim) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: optimizer state of \"%s\"; this scenario has \"%s\" (resume needs the "
                    "same optimizer.name and optimizer.error_feedback)",
                    path, saved_optim, optim);
        return FALSE;
    }
    if (strcmp(saved_vocab, vocab) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: trained on shards of vocabulary %s; the training shard now has %s "
                    "(resume needs data tokenised with the same vocabulary)",
                    path, saved_vocab, vocab);
        return FALSE;
    }
    const char *saved_step = g_hash_table_lookup(meta, "pacer_step");
    int32_t     n_stages = sc->pipeline.stages, n_vs = exec_pipeline_n_vstages(pipeline);
    gint64      at = 0;
    if (!g_ascii_string_to_signed(saved_step, 10, 0, sc->training.steps, &at, NULL) ||
        !exec_train_parse_ints(g_hash_table_lookup(meta, "pacer_versions"), n_stages, versions) ||
        !exec_train_parse_ints(g_hash_table_lookup(meta, "pacer_nonfinite"), n_stages, nonfinite) ||
        !exec_train_parse_ints(g_hash_table_lookup(meta, "pacer_optim_steps"), n_vs, optim_steps)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s.state: pacer_step=%s, pacer_versions=%s, pacer_nonfinite=%s, "
                    "pacer_optim_steps=%s do not fit %d steps on %d stages (%d virtual); each "
                    "list needs one integer >= 0 per stage (per virtual stage for "
                    "pacer_optim_steps)",
                    path, saved_step, (const char *)g_hash_table_lookup(meta, "pacer_versions"),
                    (const char *)g_hash_table_lookup(meta, "pacer_nonfinite"),
                    (const char *)g_hash_table_lookup(meta, "pacer_optim_steps"),
                    sc->training.steps, n_stages, n_vs);
        return FALSE;
    }
    *step = (int32_t)at;
    return TRUE;
}

/* Loads weights, optimizer state and counters from @path (checked against this run first);
 * returns the step to continue from in *step. Tensor shapes are checked as they are read: a
 * mismatch is PP_IO_ERROR_MISMATCH naming the tensor and both shapes. */
static gboolean exec_train_load(ExecPipeline *pipeline, const PpScenario *sc, const char *vocab,
                                const char *path, int32_t *step, GError **error) {
    const Gpt2SliceParams *info = gpt2_slice_params_info(exec_pipeline_slice(pipeline, 0));
    int32_t                n_stages = sc->pipeline.stages, n_vs = exec_pipeline_n_vstages(pipeline);
    g_autoptr(ExecTensorList) none = exec_tensor_list_new();
    g_autoptr(GHashTable) meta = NULL;
    g_autofree int32_t *versions = g_new(int32_t, n_stages);
    g_autofree int32_t *nonfinite = g_new(int32_t, n_stages);
    g_autofree int32_t *optim_steps = g_new(int32_t, n_vs);
    /* The metadata first (the sidecar is mapped, not read): a checkpoint of another run is
     * refused by name before any tensor is compared. */
    if (!exec_checkpoint_load_state(path, none, &meta, error) ||
        !exec_train_check_meta(meta, sc, pipeline, vocab, path, step, versions, nonfinite,
                               optim_steps, error))
        return FALSE;
    g_autoptr(ExecTensorList) model = exec_train_model_list(pipeline);
    g_autoptr(ExecTensorList) state = exec_train_state_list(pipeline);
    if (!exec_checkpoint_load(path, &info->model, model, NULL, error) ||
        !exec_checkpoint_load_state(path, state, NULL, error))
        return FALSE;
    exec_pipeline_set_versions(pipeline, versions);
    exec_pipeline_set_nonfinite(pipeline, nonfinite);
    for (int32_t vs = 0; vs < n_vs; vs++)
        kern_optim_set_n_steps(exec_pipeline_optim(pipeline, vs), optim_steps[vs]);
    return TRUE;
}

/* Rows of an earlier log.csv in @dir for steps before @start (resume into the same DIR). */
static void exec_train_keep_log(GString *log, const char *dir, int32_t start) {
    g_autofree char *path = g_build_filename(dir, "log.csv", NULL);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (guint i = 1; lines[i] && lines[i][0]; i++) {
        if (g_ascii_strtoll(lines[i], NULL, 10) < start)
            g_string_append_printf(log, "%s\n", lines[i]);
    }
}

static const char exec_train_log_header[] =
    "step,tokens,train_loss,val_loss,lr,grad_norm,tokens_per_s,delta_max\n";

static gboolean exec_train_validate_scenario(const ExecTrainParams *params, GError **error) {
    const PpScenario *sc = params->scenario;
    const char       *name = sc->optimizer.name;
    if (g_strcmp0(name, "adamw") != 0 && g_strcmp0(name, "muon") != 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: optimizer.name=%s; valid: adamw, muon", sc->path, name);
        return FALSE;
    }
    if (params->dynamic && g_strcmp0(sc->pipeline.schedule, "paci") != 0 &&
        g_strcmp0(sc->pipeline.schedule, "async-1f1b") != 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: dynamic mode (--dynamic or pipeline.mode=dynamic) runs PACI's policy; "
                    "pipeline.schedule=%s must be paci or async-1f1b",
                    sc->path, sc->pipeline.schedule);
        return FALSE;
    }
    if (sc->training.steps <= sc->optimizer.warmup_steps) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: training.steps=%d must exceed optimizer.warmup_steps=%d", sc->path,
                    sc->training.steps, sc->optimizer.warmup_steps);
        return FALSE;
    }
    if (sc->parallel.data != 1 || sc->parallel.tensor != 1) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: parallel.data=%d, parallel.tensor=%d: pacer-train runs one pipeline "
                    "with one device per stage; data and tensor parallelism are the "
                    "simulator's (set both to 1)",
                    sc->path, sc->parallel.data, sc->parallel.tensor);
        return FALSE;
    }
    return TRUE;
}

gboolean exec_train_run(const ExecTrainParams *params, ExecTrainSummary *summary, GError **error) {
    const PpScenario *sc = params->scenario;
    if (!exec_train_validate_scenario(params, error))
        return FALSE;
    Gpt2Config model = {.L = sc->model.layers,
                        .C = sc->model.hidden,
                        .NH = sc->model.heads,
                        .T = sc->model.seq_len,
                        .V = sc->model.vocab,
                        .Vp = (sc->model.vocab + 127) / 128 * 128};
    int32_t    B = sc->pipeline.microbatch_size, total = sc->training.steps;

    g_autoptr(DataShard) train_shard = NULL, val_shard = NULL;
    ExecTrainData train = {.B = B, .T = model.T, .seed = sc->run.seed};
    ExecTrainData val = {.B = B, .T = model.T, .seed = sc->run.seed};
    if (!exec_train_open_shards(params, model.T, model.V, &train_shard, &train, &val_shard, &val,
                                error))
        return FALSE;
    g_autofree char *vocab =
        exec_train_hex(data_shard_fingerprint(train_shard), DATA_BPE_FINGERPRINT_BYTES);

    int32_t threads = sc->run.threads > 0
                          ? sc->run.threads
                          : MAX(1, (int32_t)g_get_num_processors() / sc->pipeline.stages);
    /* OpenBLAS keeps one process-wide thread count: every worker's sgemm uses it. */
    openblas_set_num_threads(threads);

    /* One schedule per distinct segment length (usually the eval interval and a tail). */
    g_autoptr(GHashTable) schedules = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                                            (GDestroyNotify)pp_schedule_free);
    PpScheduleParams sp;
    pp_scenario_schedule_params(sc, &sp);
    int32_t       start = 0;
    ExecTrainLive live = {.total_steps = total,
                          .tokens_per_step = (int64_t)sc->training.global_batch * model.T,
                          .lr_peak = sc->optimizer.lr,
                          .lr_min = sc->optimizer.min_lr,
                          .warmup = sc->optimizer.warmup_steps};
    sp.n_steps = exec_train_next_boundary(sc, start) - start;
    PpSchedule *shape = pp_schedule_new(&sp, error);
    if (!shape)
        return FALSE;
    g_hash_table_insert(schedules, GINT_TO_POINTER(sp.n_steps), shape);
    live.mb_per_step = shape->mb_per_step;

    KernOptimParams optim = {
        .kind = g_strcmp0(sc->optimizer.name, "muon") == 0 ? KERN_OPTIM_MUON : KERN_OPTIM_ADAMW,
        .beta1 = (float)sc->optimizer.beta1,
        .beta2 = (float)sc->optimizer.beta2,
        .eps = (float)sc->optimizer.eps,
        .weight_decay = (float)sc->optimizer.weight_decay,
        .muon_momentum = (float)sc->optimizer.momentum,
        /* Muon's matrices follow lr's warmup + cosine shape, scaled to optimizer.muon_lr */
        .muon_lr_ratio =
            sc->optimizer.lr > 0.0 ? (float)(sc->optimizer.muon_lr / sc->optimizer.lr) : 0.0f,
        .muon_ns_steps = sc->optimizer.ns_steps,
        .error_feedback = sc->optimizer.error_feedback,
    };
    ExecPipelineParams pp = {
        .model = model,
        .microbatch_size = B,
        .shape = shape,
        .layers_per_vstage = sc->run.layers_per_stage,
        .partition = pp_scenario_partition_mode(sc),
        .seed = sc->run.seed,
        .optim = optim,
        .lr = (float)sc->optimizer.lr,
        .min_lr = (float)sc->optimizer.min_lr,
        .warmup_steps = sc->optimizer.warmup_steps,
        .total_steps = total,
        .grad_clip = (float)sc->optimizer.grad_clip,
        .max_nonfinite = EXEC_TRAIN_MAX_NONFINITE,
        .data = exec_train_fill,
        .data_user = &train,
        .on_loss = exec_train_on_loss,
        .on_loss_user = &live,
        .poison_update = -1,
    };
    g_autoptr(ExecPipeline) pipeline = exec_pipeline_new(&pp, error);
    if (!pipeline)
        return FALSE;

    if (params->resume && !exec_train_load(pipeline, sc, vocab, params->resume, &start, error))
        return FALSE;
    if (params->resume && start >= total) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: the checkpoint is at step %d and [training] steps = %d: nothing left "
                    "to train (resume a checkpoint from an earlier step)",
                    params->resume, start, total);
        return FALSE;
    }
    g_autoptr(GString) log = g_string_new(exec_train_log_header);
    if (params->out_dir && params->resume)
        exec_train_keep_log(log, params->out_dir, start);
    if (params->out_dir) {
        if (g_mkdir_with_parents(params->out_dir, 0755) != 0) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "%s: cannot create: %s",
                        params->out_dir, g_strerror(errno));
            return FALSE;
        }
        g_autofree char *ini = pp_scenario_to_data(sc);
        g_autofree char *ini_path = g_build_filename(params->out_dir, "scenario.ini", NULL);
        if (!exec_train_write_file(ini_path, ini, error))
            return FALSE;
    }

    g_autoptr(ExecProgress) progress =
        exec_progress_new(stdout, params->progress, MAX(sc->run.log_every, 1));
    live.progress = progress;
    memset(summary, 0, sizeof *summary);
    summary->val_loss = NAN;
    summary->steps = start;
    summary->tokens = (int64_t)start * live.tokens_per_step;
    int32_t stop = params->stop_at > 0 ? MIN(params->stop_at, total) : total;
    live.t_start_s = live.t_last_s = exec_train_now_s();
    int32_t n_vs = exec_pipeline_n_vstages(pipeline);
    for (int32_t step = start; step < stop;) {
        int32_t     seg = MIN(exec_train_next_boundary(sc, step), stop) - step;
        PpSchedule *sched = g_hash_table_lookup(schedules, GINT_TO_POINTER(seg));
        if (!sched) {
            sp.n_steps = seg;
            sched = pp_schedule_new(&sp, error);
            if (!sched)
                return FALSE;
            g_hash_table_insert(schedules, GINT_TO_POINTER(seg), sched);
        }
        /* Data positions are global: micro-batch index = step * mb_per_step + mb. */
        if (sched->n_mb != seg * sched->mb_per_step) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                        "%s: schedule %s runs %d micro-batches for %d steps of %d; pacer-train "
                        "needs steps x micro-batches per step (a custom order must cover "
                        "training.steps, or set run.eval_every/checkpoint_every to match it)",
                        sc->path, sched->kind, sched->n_mb, seg, sched->mb_per_step);
            return FALSE;
        }
        live.step0 = step;
        live.seg = seg;
        live.count = g_new0(int32_t, seg);
        live.sum = g_new0(double, seg);
        live.tokens_per_s = g_new0(double, seg);
        g_autoptr(PpSchedule) program = NULL;
        g_autoptr(ExecRunResult) res =
            params->dynamic
                ? exec_pipeline_run_dynamic(pipeline, sched->mb_per_step, sched->n_mb,
                                            (int64_t)step * sched->mb_per_step, &program, error)
                : exec_pipeline_run(pipeline, sched, (int64_t)step * sched->mb_per_step, error);
        g_autofree int32_t *count = g_steal_pointer(&live.count);
        g_autofree double  *sum = g_steal_pointer(&live.sum);
        g_autofree double  *tps = g_steal_pointer(&live.tokens_per_s);
        if (!res)
            return FALSE;
        summary->n_skipped += res->n_skipped;

        int32_t  end = step + seg;
        gboolean eval =
            sc->run.eval_every > 0 ? end % sc->run.eval_every == 0 || end == total : end == total;
        double val_loss = NAN;
        if (eval && sc->run.eval_batches > 0) {
            val_loss = exec_train_validate(pipeline, &val, sc->run.eval_batches);
            summary->val_loss = val_loss;
            exec_progress_note(progress, FALSE, "step %d | val loss %.4f | perplexity %.2f", end,
                               val_loss, exp(val_loss));
        }
        for (int32_t k = 0; k < seg; k++) {
            double sq = 0.0;
            for (int32_t s = 0; s < sched->n_stages; s++)
                if (k < res->n_updates[s])
                    sq += res->grad_norm[s][k] * res->grad_norm[s][k];
            int32_t delta = 0;
            for (int32_t mb = 0; mb < res->n_mb; mb++) {
                if (res->mb_step[mb] != k)
                    continue;
                for (int32_t vs = 0; vs < n_vs; vs++) {
                    size_t cell = (size_t)mb * n_vs + vs;
                    delta = MAX(delta, res->version_b[cell] - res->version_f[cell]);
                }
            }
            int32_t abs_step = step + k;
            double  loss = count[k] > 0 ? sum[k] / count[k] : NAN;
            float   lr = kern_lr_schedule(abs_step, pp.warmup_steps, total, pp.lr, pp.min_lr);
            g_autofree char *val_text =
                k == seg - 1 && !isnan(val_loss) ? g_strdup_printf("%.6f", val_loss) : g_strdup("");
            g_string_append_printf(log, "%d,%" G_GINT64_FORMAT ",%.6f,%s,%.6e,%.6f,%.1f,%d\n",
                                   abs_step, (int64_t)(abs_step + 1) * live.tokens_per_step, loss,
                                   val_text, lr, sqrt(sq), tps[k], delta);
            summary->train_loss = loss;
        }
        step = end;
        summary->steps = step;
        summary->tokens = (int64_t)step * live.tokens_per_step;
        gboolean save =
            end == stop || (sc->run.checkpoint_every > 0 && end % sc->run.checkpoint_every == 0);
        if (params->out_dir && save) {
            /* log.csv goes with every checkpoint, so an interrupted run keeps its rows. */
            g_autofree char *log_path = g_build_filename(params->out_dir, "log.csv", NULL);
            if (!exec_train_save(pipeline, sc, vocab, params->out_dir, end, error) ||
                !exec_train_write_file(log_path, log->str, error))
                return FALSE;
            exec_progress_note(progress, FALSE, "step %d | checkpoint written to %s", end,
                               params->out_dir);
        }
    }
    summary->wall_s = exec_train_now_s() - live.t_start_s;
    summary->tokens_per_s =
        (double)(summary->steps - start) * live.tokens_per_step / MAX(summary->wall_s, 1e-9);
    if (params->out_dir) {
        g_autofree char *log_path = g_build_filename(params->out_dir, "log.csv", NULL);
        g_autofree char *ops_path = g_build_filename(params->out_dir, "ops.csv", NULL);
        if (!exec_train_write_file(log_path, log->str, error) ||
            !exec_train_write_trace(pipeline, ops_path, error))
            return FALSE;
    }
    return TRUE;
}
