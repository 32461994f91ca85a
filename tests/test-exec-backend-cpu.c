/* SPDX-License-Identifier: MIT
 * test-exec-backend-cpu.c: the CPU backend under the conformance suite
 * (test-exec-conformance.h), and the checks only it has: on one stage every schedule is the
 * unpipelined trainer written out with the CPU kernels (bitwise), the backend registry and
 * what the CPU backend refuses (devices, bf16), its speed reference and its memory report.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "kern-pool.h"
#include "pp-error.h"
#include "pp-trace.h"
#include "test-exec-conformance.h"
#include "test-exec-util.h"
#include "test-util.h"

/* --- single stage: every schedule is the unpipelined trainer --- */

/* The unpipelined trainer written out: a single whole-model slice, @mbs_per_step micro-batches
 * accumulated per step with loss scale 1/mbs_per_step, per-step clipping, warmup + cosine lr,
 * AdamW. Returns the parameters after @steps steps. */
static GHashTable *reference_train(int32_t mbs_per_step, int32_t steps) {
    g_autoptr(PpSchedule) shape = test_util_schedule_new("gpipe", 1, 1, 1, 1, 1);
    ExecPipelineParams p = test_exec_tiny_params(shape);
    Gpt2SliceParams    sp = {.model = test_exec_tiny,
                             .layer_begin = 0,
                             .layer_end = test_exec_tiny.L,
                             .has_embedding = 1,
                             .has_head = 1,
                             .tie_head = 0,
                             .B = TEST_EXEC_TINY_B,
                             .n_act_slots = 1};
    Gpt2Slice         *slice = gpt2_slice_new(&sp);
    gpt2_slice_init_params(slice, p.seed);
    KernOptim *opt = kern_optim_new(&p.optim, slice);
    int32_t    tokens[TEST_EXEC_TINY_B * 16], targets[TEST_EXEC_TINY_B * 16];
    size_t     n = gpt2_slice_n_params(slice);
    for (int32_t step = 0; step < steps; step++) {
        for (int32_t i = 0; i < mbs_per_step; i++) {
            float loss;
            test_exec_tiny_data((gpointer)&test_exec_data_seed, (int64_t)step * mbs_per_step + i,
                                tokens, targets);
            gpt2_slice_forward(slice, gpt2_slice_params(slice), 0, tokens, NULL, targets, NULL,
                               &loss);
            gpt2_slice_backward(slice, gpt2_slice_params(slice), 0, NULL,
                                1.0f / (float)mbs_per_step, NULL, gpt2_slice_grads(slice), NULL);
        }
        float *grads = gpt2_slice_grads(slice);
        double norm = sqrt(kern_grad_sq_norm(grads, n));
        float  factor = kern_clip_factor(norm, p.grad_clip);
        if (factor != 1.0f)
            kern_grad_scale(grads, n, factor);
        kern_optim_step(opt, gpt2_slice_params(slice), grads,
                        kern_lr_schedule(step, p.warmup_steps, p.total_steps, p.lr, p.min_lr));
        gpt2_slice_zero_grads(slice);
    }
    GHashTable *out =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    for (int i = 0; i < gpt2_slice_n_tensors(slice); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(slice, i);
        GArray           *copy = g_array_sized_new(FALSE, FALSE, sizeof(float), (guint)t->numel);
        g_array_append_vals(copy, gpt2_slice_params(slice) + t->offset, (guint)t->numel);
        g_hash_table_replace(out, g_strdup(t->name), copy);
    }
    kern_optim_free(opt);
    gpt2_slice_free(slice);
    return out;
}

static const TestExecCase single_cases[] = {
    {"gpipe", 1, 1, 3, 1, 3}, {"1f1b", 1, 1, 3, 1, 3},       {"pipedream", 1, 1, 1, 1, 4},
    {"2bw", 1, 1, 3, 1, 3},   {"async-1f1b", 1, 1, 1, 1, 4}, {"paci", 1, 1, 1, 3, 3},
    {"zb-h1", 1, 1, 3, 1, 3},
};

START_TEST(test_exec_single_stage_equals_trainer) {
    const TestExecCase *c = &single_cases[_i];
    g_autoptr(PpSchedule) sched = test_util_schedule_new(c->kind, 1, 1, c->m, c->a, c->steps);
    ExecPipelineParams p = test_conf_params(sched);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    g_autoptr(GHashTable) params = test_exec_gather_params(pipeline);
    ck_assert_int_eq(exec_pipeline_version(pipeline, 0), c->steps);
    g_autoptr(GHashTable) ref = reference_train(sched->mb_per_step, c->steps);
    ck_assert_double_eq(test_exec_max_rel_diff(params, ref), 0.0);
}
END_TEST

/* --- the backend contract: registry, by-name copies, evaluate, reports --- */

START_TEST(test_backend_registry) {
    g_autoptr(GError) error = NULL;
    const ExecBackendInfo *cpu = exec_backend_find("cpu", &error);
    ck_assert_ptr_nonnull(cpu);
    ck_assert_str_eq(cpu->name, "cpu");
    ck_assert_str_eq(exec_backends()[0].name, "cpu");
    if (exec_backend_find("cuda", NULL) == NULL) {
        /* A build without CUDA: a scenario naming it is told so plainly. */
        ck_assert_ptr_null(exec_backend_find("cuda", &error));
        ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
        ck_assert_ptr_nonnull(strstr(error->message, "this build has no CUDA backend"));
        ck_assert_ptr_nonnull(strstr(error->message, "valid: cpu"));
    } else {
        ck_assert_str_eq(exec_backends()[1].name, "cuda");
        g_autofree char *names = exec_backend_names();
        ck_assert_str_eq(names, "cpu, cuda");
    }
    g_clear_error(&error);
    /* What each backend can do is its registry row's capabilities: the CPU backend is the
     * reference (the backend when none is named), reduces gradients, shards the optimizer and
     * times a speed reference, in fp32 on host threads; the CUDA backend reduces gradients
     * (host-staged or NCCL) on devices in fp32 or bf16. */
    ck_assert_ptr_eq(exec_backend_find(NULL, NULL), cpu);
    ck_assert_uint_eq(exec_backend_caps(cpu)->can,
                      EXEC_BACKEND_CAN_REDUCE_GRADS | EXEC_BACKEND_CAN_SHARD_OPTIMIZER |
                          EXEC_BACKEND_CAN_SPEED_REFERENCE | EXEC_BACKEND_CAN_FP32 |
                          EXEC_BACKEND_IS_REFERENCE);
    const ExecBackendInfo *cuda = exec_backend_find("cuda", NULL);
    if (cuda) {
        ck_assert_uint_eq(exec_backend_caps(cuda)->can,
                          EXEC_BACKEND_CAN_REDUCE_GRADS | EXEC_BACKEND_CAN_DEVICES |
                              EXEC_BACKEND_CAN_FP32 | EXEC_BACKEND_CAN_BF16);
    }
    ck_assert(exec_backend_require(cpu, EXEC_BACKEND_CAN_REDUCE_GRADS | EXEC_BACKEND_CAN_FP32,
                                   "parallel.data = 2", "set parallel.data = 1", &error));
    ck_assert(!exec_backend_require(cpu, EXEC_BACKEND_CAN_DEVICES | EXEC_BACKEND_CAN_BF16,
                                    "run.devices with bf16", "remove them", &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
    ck_assert_str_eq(error->message,
                     cuda ? "run.devices with bf16: the cpu backend has no devices (every stage "
                            "runs on host threads) and does not compute in bf16; remove them, or "
                            "use run.backend = cuda"
                          : "run.devices with bf16: the cpu backend has no devices (every stage "
                            "runs on host threads) and does not compute in bf16; remove them");
    g_clear_error(&error);
    ck_assert_ptr_null(exec_backend_find("tpu", &error));
    ck_assert_ptr_nonnull(strstr(error->message, "backend = tpu: unknown backend"));
    g_clear_error(&error);
    /* exec_pipeline_new() takes the caller's choice: without CUDA (or without a device) it
     * fails plainly. */
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    ExecPipelineParams p = test_exec_tiny_params(shape);
    p.backend = "cuda";
    g_autoptr(ExecPipeline) gpu = exec_pipeline_new(&p, &error);
    if (gpu == NULL) {
        ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
        ck_assert_msg(strstr(error->message, "this build has no CUDA backend") ||
                          strstr(error->message, "no CUDA device is visible"),
                      "%s", error->message);
        g_clear_error(&error);
    }
    /* The CPU backend has no devices and computes in fp32 only (its capabilities). */
    const int32_t devices[] = {0, 0};
    p.backend = "cpu";
    p.devices = devices;
    ck_assert_ptr_null(exec_pipeline_new(&p, &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
    ck_assert_ptr_nonnull(strstr(error->message, "run.devices"));
    g_clear_error(&error);
    p.devices = NULL;
    p.precision = EXEC_PRECISION_BF16;
    ck_assert_ptr_null(exec_pipeline_new(&p, &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
    ck_assert_ptr_nonnull(strstr(error->message, "run.precision = bf16: the cpu backend does not "
                                                 "compute in bf16"));
    g_clear_error(&error);
    p.precision = EXEC_PRECISION_FP32;
    g_autoptr(ExecPipeline) fp32 = exec_pipeline_new(&p, &error);
    ck_assert_msg(fp32 != NULL, "%s", error ? error->message : "");
}
END_TEST

/* --- memory --- */

/* Parameters of virtual stage @vs of @pipeline with a vocabulary of @V rows, GPT-2's closed
 * form: 12 C^2 + 13 C per block, + (V + T) C for the embeddings on the first, + 2 C + V C for
 * ln_f and the untied head on the last. The slices pad the vocabulary (Vp), the memory model
 * does not (V). */
static int64_t vstage_params(const ExecPipeline *pipeline, int32_t vs, int64_t V) {
    const Gpt2Config  *m = exec_pipeline_model(pipeline);
    const PpPartition *part = exec_pipeline_partition(pipeline);
    int64_t            C = m->C;
    int64_t n = (int64_t)(part->layer_end[vs] - part->layer_begin[vs]) * (12 * C * C + 13 * C);
    if (vs == 0)
        n += (V + m->T) * C;
    if (vs == exec_pipeline_n_vstages(pipeline) - 1)
        n += 2 * C + V * C;
    return n;
}

static const struct {
    const char *kind;
    int32_t     n_stages, n_chunks;
} memory_cases[] = {{"1f1b", 2, 1}, {"interleaved", 2, 2}, {"2bw", 2, 1}, {"pipedream", 3, 1}};

/* The CPU backend's memory by category, per stage (the sum over its virtual stages): params
 * and grads 4 bytes per parameter, AdamW's m and v 8, a stashing schedule's copies 4 per
 * parameter and weight version, activation slots as many as the schedule keeps in flight;
 * the categories add up; host memory (device -1). The prediction has the memory model's
 * categories (bf16 weights with fp32 master 6 bytes per parameter, gradients 2, moments 8)
 * adding up likewise. */
START_TEST(test_cpu_memory) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new(
        memory_cases[_i].kind, memory_cases[_i].n_stages, memory_cases[_i].n_chunks, 4, 1, 1);
    ExecPipelineParams p = test_conf_params(sched);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autofree int32_t *slots = pp_schedule_vstage_peak_inflight(sched);
    for (int32_t s = 0; s < sched->n_stages; s++) {
        PpMemoryBytes   predicted;
        ExecMemoryBytes actual;
        ck_assert(exec_pipeline_memory(pipeline, s, &predicted, &actual));
        int64_t n = 0, n_model = 0; /* parameters: the slices', the memory model's */
        for (int32_t vs = 0; vs < sched->n_vstages; vs++) {
            if (sched->vstage_stage[vs] != s)
                continue;
            n += vstage_params(pipeline, vs, test_exec_tiny.Vp);
            n_model += vstage_params(pipeline, vs, test_exec_tiny.V);
        }
        int64_t versions =
            sched->weight_mode == PP_WEIGHTS_STASHED ? sched->n_weight_versions[s] : 0;
        ck_assert_int_eq(actual.device, -1);
        ck_assert_int_eq(actual.params_bytes, 4 * n);
        ck_assert_int_eq(actual.grads_bytes, 4 * n);
        ck_assert_int_eq(actual.optim_bytes, 2 * 4 * n);
        ck_assert_int_eq(actual.stash_bytes, versions * 4 * n);
        if (strcmp(sched->kind, "2bw") == 0 || strcmp(sched->kind, "pipedream") == 0)
            ck_assert_int_gt(versions, 0);
        ck_assert_int_eq(actual.message_bytes, 0);
        ck_assert_int_gt(actual.workspace_bytes, 0);
        ck_assert_int_eq(actual.total_bytes, actual.params_bytes + actual.grads_bytes +
                                                 actual.optim_bytes + actual.stash_bytes +
                                                 actual.act_bytes + actual.message_bytes +
                                                 actual.workspace_bytes);
        /* one chunk per stage: as many equal slots as the schedule keeps in flight */
        ck_assert_int_gt(actual.act_bytes, 0);
        if (sched->n_chunks == 1)
            ck_assert_int_eq(actual.act_bytes % slots[s], 0);
        ck_assert_int_eq(predicted.params_bytes, 6 * n_model);
        ck_assert_int_eq(predicted.grads_bytes, 2 * n_model);
        ck_assert_int_eq(predicted.optim_bytes, 8 * n_model);
        ck_assert_int_eq(predicted.static_bytes,
                         predicted.params_bytes + predicted.grads_bytes + predicted.optim_bytes);
        ck_assert_int_eq(predicted.total_bytes,
                         predicted.static_bytes + predicted.stash_bytes + predicted.act_bytes);
    }
}
END_TEST

/* run.speed_reference: one reference row after every U, in the U's columns, on the same
 * stage, after the U and before the stage's next op; compute rows as without it. */
START_TEST(test_speed_reference) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("2bw", 2, 1, 2, 1, 3);
    ExecPipelineParams p = test_conf_params(sched);
    p.speed_reference = TRUE;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    const PpTrace *trace = exec_pipeline_trace(pipeline);
    int32_t        n_compute = 0, n_updates = 0, n_reference = 0;
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *row = &trace->rows[i];
        if (row->resource == PP_RESOURCE_COMPUTE) {
            n_compute++;
            n_updates += row->kind == PP_OP_UPDATE;
            continue;
        }
        ck_assert_int_eq(row->resource, PP_RESOURCE_REFERENCE);
        ck_assert_int_eq(row->kind, PP_OP_UPDATE);
        ck_assert_int_gt(row->end_ns, row->start_ns);
        n_reference++;
        /* Its U, and the stage's next op. */
        const PpTraceRow *update = NULL, *next = NULL;
        for (int64_t k = 0; k < trace->n_rows; k++) {
            const PpTraceRow *o = &trace->rows[k];
            if (o->resource != PP_RESOURCE_COMPUTE || o->stage != row->stage)
                continue;
            if (o->kind == PP_OP_UPDATE && o->step == row->step)
                update = o;
            else if (o->start_ns >= row->start_ns && (next == NULL || o->start_ns < next->start_ns))
                next = o;
        }
        ck_assert_ptr_nonnull(update);
        ck_assert_int_ge(row->start_ns, update->end_ns);
        if (next != NULL)
            ck_assert_int_ge(next->start_ns, row->end_ns);
    }
    ck_assert_int_eq(n_compute, pp_schedule_n_ops_total(sched));
    ck_assert_int_eq(n_reference, n_updates);
    ck_assert_int_eq(n_updates, sched->n_stages * sched->n_steps);
}
END_TEST

/* The CPU backend by name (what test_exec_tiny_params() leaves unset, the default). */
static void cpu_select(ExecPipelineParams *p) {
    p->backend = "cpu";
}

static void cpu_add_own(TCase *tc) {
    tcase_add_loop_test(tc, test_exec_single_stage_equals_trainer, 0, G_N_ELEMENTS(single_cases));
    tcase_add_test(tc, test_backend_registry);
    tcase_add_test(tc, test_speed_reference);
    tcase_add_loop_test(tc, test_cpu_memory, 0, G_N_ELEMENTS(memory_cases));
}

static int cpu_run(Suite *suite) {
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* pacer-train's default backend: no key to set. */
static const char *const cpu_train_sets[] = {NULL};

const TestBackend test_backend = {
    .name = "cpu",
    .select = cpu_select,
    .train_sets = cpu_train_sets,
    .cross_stage_slack_ns = 0, /* one host clock for every stage */
    .accounts_memory = TRUE,
    .timeout_s = 30,
    .add_own = cpu_add_own,
    .run = cpu_run,
};
