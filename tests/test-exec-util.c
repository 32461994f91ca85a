/* SPDX-License-Identifier: MIT
 * test-exec-util.c: the executor tests' shared helpers (test-exec-util.h).
 */
#include "test-exec-util.h"

#include <math.h>
#include <string.h>

#include "data-shard.h"
#include "exec-checkpoint.h"
#include "test-util.h"

const Gpt2Config test_exec_tiny = {.L = 4, .C = 32, .NH = 2, .T = 16, .V = 61, .Vp = 128};

/* Synthetic data: tokens of micro-batch mb from an xorshift64 stream seeded by (seed, mb);
 * targets are the next tokens of the same stream. */
void test_exec_tiny_data(gpointer user_data, int64_t mb, int32_t *tokens, int32_t *targets) {
    uint64_t seed = *(const uint64_t *)user_data;
    for (int b = 0; b < TEST_EXEC_TINY_B; b++) {
        uint64_t x = (seed ^ ((uint64_t)mb * 0x9E3779B97F4A7C15ull)) + (uint64_t)b * 7919 + 1;
        int32_t  prev = 0;
        for (int t = 0; t <= test_exec_tiny.T; t++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            int32_t id = (int32_t)(x % (uint64_t)test_exec_tiny.V);
            if (t > 0) {
                tokens[b * test_exec_tiny.T + t - 1] = prev;
                targets[b * test_exec_tiny.T + t - 1] = id;
            }
            prev = id;
        }
    }
}

const uint64_t test_exec_data_seed = 4242;

void test_exec_grads_collect(gpointer user_data, int32_t vstage, const ExecTensor *tensor,
                             const float *grads) {
    TestExecGrads *store = user_data;
    (void)vstage;
    GArray *copy = g_array_sized_new(FALSE, FALSE, sizeof(float), (guint)tensor->numel);
    g_array_append_vals(copy, grads, (guint)tensor->numel);
    g_mutex_lock(&store->lock);
    g_hash_table_replace(store->grads, g_strdup(tensor->name), copy);
    g_mutex_unlock(&store->lock);
}

void test_exec_grads_init(TestExecGrads *store) {
    g_mutex_init(&store->lock);
    store->grads =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
}

void test_exec_grads_clear(TestExecGrads *store) {
    g_hash_table_unref(store->grads);
    g_mutex_clear(&store->lock);
}

ExecPipelineParams test_exec_tiny_params(const PpSchedule *shape) {
    ExecPipelineParams p = {
        .model = test_exec_tiny,
        .microbatch_size = TEST_EXEC_TINY_B,
        .shape = shape,
        .seed = 1337,
        .optim = {.kind = KERN_OPTIM_ADAMW,
                  .beta1 = 0.9f,
                  .beta2 = 0.95f,
                  .eps = 1e-8f,
                  .weight_decay = 0.1f,
                  .muon_momentum = 0.95f,
                  .muon_lr_ratio = 1.0f,
                  .muon_ns_steps = 5},
        .lr = 1e-3f,
        .min_lr = 1e-4f,
        .warmup_steps = 2,
        .total_steps = 20,
        .grad_clip = 1.0f,
        .max_nonfinite = 3,
        .data = test_exec_tiny_data,
        .data_user = (gpointer)&test_exec_data_seed,
        .poison_update = -1,
    };
    return p;
}

ExecPipeline *test_exec_pipeline_new(const ExecPipelineParams *p) {
    g_autoptr(GError) error = NULL;
    ExecPipeline *pipeline = exec_pipeline_new(p, &error);
    if (!pipeline)
        ck_abort_msg("exec_pipeline_new: %s", error->message);
    return pipeline;
}

ExecRunResult *test_exec_run(ExecPipeline *pipeline, const PpSchedule *sched) {
    g_autoptr(GError) error = NULL;
    ExecRunResult *res = exec_pipeline_run(pipeline, sched, 0, &error);
    if (!res)
        ck_abort_msg("exec_pipeline_run(%s): %s", sched->kind, error->message);
    return res;
}

/* Every tensor's @role data of the model, by name, copied out of the backend. */
GHashTable *test_exec_gather_role(ExecPipeline *pipeline, ExecTensorRole role) {
    GHashTable *out =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        for (int i = 0; i < exec_pipeline_n_tensors(pipeline, vs); i++) {
            const ExecTensor *t = exec_pipeline_tensor(pipeline, vs, i);
            GArray *copy = g_array_sized_new(FALSE, FALSE, sizeof(float), (guint)t->numel);
            g_array_set_size(copy, (guint)t->numel);
            g_autoptr(GError) error = NULL;
            ck_assert_msg(exec_pipeline_tensor_get(pipeline, vs, t->name, role,
                                                   (float *)(void *)copy->data, t->numel, &error),
                          "%s", error ? error->message : "");
            g_hash_table_replace(out, g_strdup(t->name), copy);
        }
    }
    return out;
}

/* Every parameter of the model, by name. */
GHashTable *test_exec_gather_params(ExecPipeline *pipeline) {
    return test_exec_gather_role(pipeline, EXEC_TENSOR_PARAMS);
}

/* Largest |a - b| / max(|b|, 1e-3) over the tensors of @ref (every name must exist in @got
 * with the same size). */
double test_exec_max_rel_diff(GHashTable *got, GHashTable *ref) {
    double worst = 0.0;
    ck_assert_int_eq(g_hash_table_size(got), g_hash_table_size(ref));
    GHashTableIter it;
    gpointer       key, value;
    g_hash_table_iter_init(&it, ref);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        GArray *r = value, *g = g_hash_table_lookup(got, key);
        ck_assert_msg(g != NULL, "tensor %s missing", (const char *)key);
        ck_assert_int_eq(g->len, r->len);
        for (guint i = 0; i < r->len; i++) {
            double a = g_array_index(g, float, i), b = g_array_index(r, float, i);
            double d = fabs(a - b) / fmax(fabs(b), 1e-3);
            if (!(d <= worst))
                worst = isnan(d) ? INFINITY : d;
        }
    }
    return worst;
}

double test_exec_mean_loss(const ExecRunResult *res) {
    double sum = 0.0;
    for (int32_t mb = 0; mb < res->n_mb; mb++)
        sum += res->loss[mb];
    return sum / res->n_mb;
}

int32_t test_exec_stash_copies(const PpSchedule *sched, int32_t stage) {
    if (sched->weight_mode != PP_WEIGHTS_STASHED)
        return 0;
    g_autofree int32_t *last = g_new(int32_t, sched->n_chunks); /* (n_chunks) last version */
    int32_t             n = 0;
    for (int32_t c = 0; c < sched->n_chunks; c++)
        last[c] = -1;
    for (int32_t i = 0; i < sched->n_ops[stage]; i++) {
        const PpOp *op = &sched->programs[stage][i];
        int32_t     v = pp_schedule_version_used(sched, (PpOpRef){stage, i});
        if (op->kind == PP_OP_FORWARD && v != last[op->chunk]) {
            n++;
            last[op->chunk] = v;
        }
    }
    return n;
}

/* --- the training loop on synthetic shards --- */

const char test_exec_train_ini[] = "[model]\nlayers = 2\nhidden = 32\nheads = 2\nseq_len = 16\n"
                                   "vocab = 61\n"
                                   "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 2\n"
                                   "microbatch_size = 2\n"
                                   "[training]\nsteps = 4\n"
                                   "[optimizer]\nname = adamw\nlr = 1e-3\nmin_lr = 1e-4\n"
                                   "warmup_steps = 1\n"
                                   "[run]\neval_every = 2\neval_batches = 2\ncheckpoint_every = 2\n"
                                   "threads = 1\nlog_every = 1\n";

/* Writes a shard of @n xorshift tokens below the tiny vocabulary into @dir/@name. */
char *test_exec_write_shard(const char *dir, const char *name, uint64_t n, uint64_t seed) {
    g_autofree uint16_t *tokens = g_new(uint16_t, n);
    uint64_t             x = seed;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        tokens[i] = (uint16_t)(x % (uint64_t)test_exec_tiny.V);
    }
    uint8_t fingerprint[DATA_BPE_FINGERPRINT_BYTES] = {0};
    char   *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(data_shard_write(path, tokens, n, test_exec_tiny.V, fingerprint, &error), "%s",
                  error ? error->message : "");
    return path;
}

void test_exec_train_init(TestExecTrain *f) {
    f->dir = test_util_tmp_dir_new("pacer-exec-XXXXXX");
    f->train = test_exec_write_shard(f->dir, "train.bin", 4096, 11);
    f->val = test_exec_write_shard(f->dir, "val.bin", 1024, 23);
}

void test_exec_train_clear(TestExecTrain *f) {
    test_util_tmp_dir_remove(f->dir);
    g_free(f->dir);
    g_free(f->train);
    g_free(f->val);
}

char **test_exec_read_lines(const char *dir, const char *name) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *text = test_util_read_file(path, NULL);
    return g_strsplit(g_strchomp(text), "\n", -1);
}

/* test_exec_train() with the vocabulary the shards must have (@fingerprint, nullable). */
gboolean test_exec_train_vocab(const TestExecTrain *f, const char *const *sets, const char *resume,
                               int32_t stop_at, gboolean dynamic, const uint8_t *fingerprint,
                               ExecTrainSummary *sum, GError **error) {
    g_autoptr(PpScenario) sc = pp_scenario_load_data(test_exec_train_ini, "train.ini", sets, error);
    ck_assert_msg(sc != NULL, "%s", (*error)->message);
    ExecTrainParams p = {.scenario = sc,
                         .train_path = f->train,
                         .val_path = f->val,
                         .vocab_fingerprint = fingerprint,
                         .out_dir = f->dir,
                         .resume = resume,
                         .overwrite = resume == NULL,
                         .stop_at = stop_at,
                         .dynamic = dynamic || g_strcmp0(sc->pipeline.mode, "dynamic") == 0,
                         .progress = EXEC_PROGRESS_QUIET};
    return exec_train_run(&p, sum, error);
}

gboolean test_exec_train(const TestExecTrain *f, const char *const *sets, const char *resume,
                         int32_t stop_at, gboolean dynamic, ExecTrainSummary *sum, GError **error) {
    return test_exec_train_vocab(f, sets, resume, stop_at, dynamic, NULL, sum, error);
}

/* The whole model of test_exec_train_ini as one slice (tensor names and shapes for checkpoints). */
const Gpt2Config test_exec_train_cfg = {.L = 2, .C = 32, .NH = 2, .T = 16, .V = 61, .Vp = 128};

Gpt2Slice *test_exec_train_full_slice(void) {
    Gpt2SliceParams p = {.model = test_exec_train_cfg,
                         .layer_begin = 0,
                         .layer_end = test_exec_train_cfg.L,
                         .has_embedding = 1,
                         .has_head = 1,
                         .B = 1,
                         .n_act_slots = 1};
    return gpt2_slice_new(&p);
}

/* Loads the weights of the newest checkpoint unit of the run folder @dir
 * (@dir/checkpoints/step-NNNNNNNN/model.safetensors, the largest step) into @slice. */
void test_exec_load_weights(Gpt2Slice *slice, const char *dir) {
    g_autofree char *units = g_build_filename(dir, "checkpoints", NULL);
    g_autoptr(GDir) folder = g_dir_open(units, 0, NULL);
    ck_assert_ptr_nonnull(folder);
    g_autofree char *newest = NULL;
    for (const char *name; (name = g_dir_read_name(folder)) != NULL;) {
        if (g_str_has_prefix(name, "step-") && g_strcmp0(name, newest) > 0) {
            g_free(newest);
            newest = g_strdup(name);
        }
    }
    ck_assert_ptr_nonnull(newest);
    g_autofree char *path = g_build_filename(units, newest, "model.safetensors", NULL);
    g_autoptr(ExecTensorList) list = exec_tensor_list_new();
    exec_tensor_list_add_slice(list, slice, gpt2_slice_params(slice), "");
    g_autoptr(GError) error = NULL;
    ck_assert_msg(exec_checkpoint_load(path, &test_exec_train_cfg, list, NULL, &error), "%s",
                  error ? error->message : "");
}
