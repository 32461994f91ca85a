/* SPDX-License-Identifier: MIT
 * test-exec-cuda.c: the CUDA backend (gpu suite; exits 77 without a device, runs unforked):
 * one GPT-2 step against the CPU backend (loss and every gradient through the tap), pipelined
 * == unpipelined bitwise on one GPU in fp32, executed order and measured dependencies in the
 * event-timed trace, Δ and stashing against the program, dynamic mode and its replay,
 * non-finite skips, by-name copies and evaluate, the planned device memory against the bytes
 * the backend asked cudaMalloc for, bf16 (flash attention too) against fp32, and an exact
 * resume.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kern-check.h"
#include "pp-error.h"
#include "test-cuda-util.h"
#include "test-exec-util.h"
#include "test-util.h"

/* Every cudaMalloc of the program goes through here (it is linked with --wrap=cudaMalloc):
 * while counting_mallocs is set, the bytes the backend asked for are added up. */
cudaError_t     __real_cudaMalloc(void **ptr, size_t size);
cudaError_t     __wrap_cudaMalloc(void **ptr, size_t size);
static int      counting_mallocs;
static uint64_t malloc_bytes;

cudaError_t __wrap_cudaMalloc(void **ptr, size_t size) {
    cudaError_t err = __real_cudaMalloc(ptr, size);
    if (err == cudaSuccess && __atomic_load_n(&counting_mallocs, __ATOMIC_SEQ_CST))
        __atomic_fetch_add(&malloc_bytes, (uint64_t)size, __ATOMIC_SEQ_CST);
    return err;
}

/* Every stage on device 0 (the suite needs one GPU). */
static const int32_t all_on_0[8] = {0, 0, 0, 0, 0, 0, 0, 0};

static ExecPipelineParams gpu_params(const PpSchedule *shape, ExecPrecision precision) {
    ExecPipelineParams p = test_exec_tiny_params(shape);
    p.backend = "cuda";
    p.precision = precision;
    ck_assert_int_le(shape->n_stages, (int32_t)G_N_ELEMENTS(all_on_0));
    p.devices = all_on_0;
    return p;
}

/* max over tensors of max_i |got - ref| / max_i |ref| (the kernels' metric, per tensor). */
static double max_err_to_max(GHashTable *got, GHashTable *ref) {
    double         worst = 0.0;
    GHashTableIter it;
    gpointer       key, value;
    ck_assert_int_eq(g_hash_table_size(got), g_hash_table_size(ref));
    g_hash_table_iter_init(&it, ref);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        GArray *r = value, *g = g_hash_table_lookup(got, key);
        ck_assert_msg(g != NULL && g->len == r->len, "tensor %s", (const char *)key);
        double err =
            tcu_rel_err((const float *)(void *)g->data, (const float *)(void *)r->data, r->len);
        if (!(err <= worst))
            worst = isnan(err) ? INFINITY : err;
    }
    return worst;
}

/* Runs @c with the tap on @p's backend: mean loss, *grads of the last update, *params after. */
static double run_collect(const TestExecCase *c, ExecPipelineParams p, ExecRunResult **res_out,
                          GHashTable **grads, GHashTable **params) {
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    TestExecGrads store;
    test_exec_grads_init(&store);
    p.shape = sched;
    p.grad_clip = 0.0f; /* clipping is per stage: only without it is a split the same math */
    p.on_grads = test_exec_grads_collect;
    p.on_grads_user = &store;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    ExecRunResult *res = test_exec_run(pipeline, sched);
    double         loss = test_exec_mean_loss(res);
    *grads = g_hash_table_ref(store.grads);
    *params = test_exec_gather_params(pipeline);
    test_exec_grads_clear(&store);
    if (res_out)
        *res_out = res;
    else
        exec_run_result_free(res);
    return loss;
}

/* --- one step against the CPU backend --- */

START_TEST(test_gpu_step_matches_cpu) {
    const TestExecCase c = {"gpipe", 1, 1, 2, 1, 1};
    g_autoptr(PpSchedule) shape = test_util_schedule_new("gpipe", 1, 1, 2, 1, 1);
    g_autoptr(GHashTable) cg = NULL, cp = NULL, gg = NULL, gp = NULL;
    ExecRunResult *cres = NULL, *gres = NULL;
    run_collect(&c, test_exec_tiny_params(shape), &cres, &cg, &cp);
    run_collect(&c, gpu_params(shape, EXEC_PRECISION_FP32), &gres, &gg, &gp);
    /* fp32, TF32 off: forward outputs within 1e-5, gradients within 1e-4 of the largest
     * magnitude (the kernel tests' bounds). */
    for (int32_t mb = 0; mb < 2; mb++)
        ck_assert_msg(fabs(gres->loss[mb] - cres->loss[mb]) <= 1e-5 * fabs(cres->loss[mb]),
                      "mb %d: loss %.9g on the GPU, %.9g on the CPU", mb, gres->loss[mb],
                      cres->loss[mb]);
    ck_assert_int_eq(g_hash_table_size(gg), g_hash_table_size(cg));
    double err = max_err_to_max(gg, cg);
    ck_assert_msg(err <= 1e-4, "gradients: relative error %.3g", err);
    exec_run_result_free(cres);
    exec_run_result_free(gres);
}
END_TEST

/* --- pipelined == unpipelined on one GPU --- */

static const TestExecCase sync_cases[] = {
    {"1f1b", 4, 1, 4, 1, 2}, {"interleaved", 2, 2, 4, 1, 2}, {"zb-h1", 4, 1, 4, 1, 2}};

START_TEST(test_gpu_pipelined_equals_unpipelined) {
    const TestExecCase *c = &sync_cases[_i];
    const TestExecCase  ref_case = {"gpipe", 1, 1, c->m, 1, c->steps};
    g_autoptr(PpSchedule) shape =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    g_autoptr(PpSchedule) ref_shape = test_util_schedule_new("gpipe", 1, 1, c->m, 1, c->steps);
    g_autoptr(GHashTable) rg = NULL, rp = NULL, g = NULL, p = NULL;
    double ref = run_collect(&ref_case, gpu_params(ref_shape, EXEC_PRECISION_FP32), NULL, &rg, &rp);
    double loss = run_collect(c, gpu_params(shape, EXEC_PRECISION_FP32), NULL, &g, &p);
    /* The same kernels on the same shapes in the same order per micro-batch, gradients
     * accumulated in micro-batch order, cuBLASLt's algorithm a function of the shape alone
     * (kern-cuda.cu): a split changes no arithmetic, so the match is bitwise. */
    ck_assert_msg(loss == ref, "%s: loss %.9g vs %.9g", c->kind, loss, ref);
    ck_assert_double_eq(test_exec_max_rel_diff(g, rg), 0.0);
    ck_assert_double_eq(test_exec_max_rel_diff(p, rp), 0.0);
}
END_TEST

/* --- the event-timed trace --- */

static const TestExecCase order_cases[] = {{"1f1b", 4, 1, 4, 1, 2},
                                           {"interleaved", 2, 2, 4, 1, 1},
                                           {"zb-h1", 2, 1, 4, 1, 1},
                                           {"paci", 4, 1, 1, 2, 3},
                                           {"pipedream", 3, 1, 1, 1, 4}};

/* Event times of different stages come from separate anchors, each elapsed time a float in
 * ms read against its window's start: a dependency may appear this much early. */
#define CROSS_STAGE_SLACK_NS 2000

START_TEST(test_gpu_order_and_deps) {
    const TestExecCase *c = &order_cases[_i];
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    ExecPipelineParams p = gpu_params(sched, EXEC_PRECISION_FP32);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    const PpTrace *trace = exec_pipeline_trace(pipeline);
    ck_assert_int_eq(trace->n_rows, pp_schedule_n_ops_total(sched));
    for (int32_t s = 0; s < sched->n_stages; s++) {
        ck_assert_int_eq(res->n_executed[s], sched->n_ops[s]);
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp       *want = &sched->programs[s][i];
            const PpTraceRow *row = &trace->rows[sched->op_offset[s] + i];
            ck_assert_int_eq(row->kind, want->kind);
            ck_assert_int_eq(row->mb, want->mb);
            ck_assert_int_le(row->start_ns, row->end_ns);
            /* One stream per stage: ops run back to back in program order. */
            if (i > 0)
                ck_assert_int_ge(row->start_ns, trace->rows[sched->op_offset[s] + i - 1].end_ns);
            int32_t        n_deps;
            const PpOpRef *deps = pp_schedule_deps(sched, (PpOpRef){s, i}, &n_deps);
            for (int32_t d = 0; d < n_deps; d++) {
                const PpTraceRow *dep = &trace->rows[pp_schedule_op_id(sched, deps[d])];
                ck_assert_msg(row->start_ns + CROSS_STAGE_SLACK_NS >= dep->end_ns,
                              "%s: op %d of stage %d starts at %" G_GINT64_FORMAT
                              " before its input ends at %" G_GINT64_FORMAT,
                              c->kind, i, s, row->start_ns, dep->end_ns);
            }
        }
    }
    for (int32_t mb = 0; mb < res->n_mb; mb++)
        ck_assert(isfinite(res->loss[mb]) && res->loss[mb] > 0.0f);
}
END_TEST

/* --- asynchronous schedules: Δ and stashing against the program --- */

static const TestExecCase async_cases[] = {
    {"pipedream", 4, 1, 1, 1, 8}, {"2bw", 4, 1, 4, 1, 3}, {"paci", 4, 1, 1, 2, 5}};

START_TEST(test_gpu_async_versions) {
    const TestExecCase *c = &async_cases[_i];
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    ExecPipelineParams p = gpu_params(sched, EXEC_PRECISION_FP32);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    gboolean stashed = sched->weight_mode == PP_WEIGHTS_STASHED;
    int32_t  stale = 0, max_delta = 0;
    for (int32_t mb = 0; mb < sched->n_mb; mb++) {
        for (int32_t vs = 0; vs < sched->n_vstages; vs++) {
            int32_t f = pp_schedule_find_op(sched, PP_OP_FORWARD, mb, vs);
            int32_t b = pp_schedule_find_op(sched, PP_OP_BACKWARD_FULL, mb, vs);
            size_t  cell = (size_t)mb * sched->n_vstages + vs;
            /* The measured Δ of every micro-batch is the program's. */
            ck_assert_int_eq(res->version_f[cell],
                             pp_schedule_version_used(sched, pp_schedule_op_ref(sched, f)));
            ck_assert_int_eq(res->version_b[cell],
                             pp_schedule_version_used(sched, pp_schedule_op_ref(sched, b)));
            int32_t delta = res->version_b[cell] - res->version_f[cell];
            max_delta = MAX(max_delta, delta);
            if (stashed) {
                ck_assert_int_eq(delta, 0);
                stale += sched->version[b] > res->version_f[cell];
            }
        }
    }
    if (stashed)
        ck_assert_int_gt(stale, 0); /* backwards really ran on stashed copies */
    /* One cast copy per weight version the forwards use: a released stash serves the next
     * forward of its version. */
    for (int32_t s = 0; s < sched->n_stages; s++)
        ck_assert_int_eq(res->n_copies[s], test_exec_stash_copies(sched, s));
    if (strcmp(c->kind, "paci") == 0)
        ck_assert_int_eq(max_delta, (c->n_stages - 1 + c->a - 1) / c->a);
    for (int32_t mb = 0; mb < sched->n_mb; mb++)
        ck_assert(isfinite(res->loss[mb]));
}
END_TEST

/* --- dynamic mode --- */

START_TEST(test_gpu_dynamic_paci) {
    const int32_t N = 4, a = 2, steps = 4;
    g_autoptr(PpSchedule) shape = test_util_schedule_new("paci", N, 1, 1, a, steps);
    ExecPipelineParams p = gpu_params(shape, EXEC_PRECISION_FP32);
    g_autoptr(ExecPipeline) dyn = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpSchedule) program = NULL;
    g_autoptr(ExecRunResult) res = exec_pipeline_run_dynamic(dyn, shape, 0, &program, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");
    ck_assert(pp_schedule_validate(program, NULL));
    for (int32_t s = 0; s < N; s++)
        ck_assert_int_eq(exec_pipeline_version(dyn, s), steps);
    /* Replaying the recorded program statically from the same start: the same math. */
    g_autoptr(ExecPipeline) replay = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res2 = test_exec_run(replay, program);
    for (int32_t mb = 0; mb < res->n_mb; mb++)
        ck_assert(res2->loss[mb] == res->loss[mb]);
    g_autoptr(GHashTable) p1 = test_exec_gather_params(dyn);
    g_autoptr(GHashTable) p2 = test_exec_gather_params(replay);
    ck_assert_double_eq(test_exec_max_rel_diff(p1, p2), 0.0);
}
END_TEST

/* --- non-finite gradients --- */

START_TEST(test_gpu_nonfinite_skips_update) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    ExecPipelineParams p = gpu_params(sched, EXEC_PRECISION_FP32);
    p.poison_update = 1;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) r0 = test_exec_run(pipeline, sched);
    ck_assert_int_eq(r0->n_skipped, 0);
    ck_assert(isfinite(r0->grad_norm[0][0]) && r0->grad_norm[0][0] > 0.0);
    g_autoptr(GHashTable) before = test_exec_gather_params(pipeline);
    g_autoptr(ExecRunResult) r1 = test_exec_run(pipeline, sched);
    ck_assert_int_eq(r1->n_skipped, 2);
    g_autoptr(GHashTable) after = test_exec_gather_params(pipeline);
    ck_assert_double_eq(test_exec_max_rel_diff(after, before), 0.0);
    int64_t t = -1;
    ck_assert(exec_pipeline_optim_steps(pipeline, 0, &t, NULL));
    ck_assert_int_eq(t, 1);
    g_autoptr(ExecRunResult) r2 = test_exec_run(pipeline, sched);
    ck_assert_int_eq(r2->n_skipped, 0);
    g_autoptr(GHashTable) later = test_exec_gather_params(pipeline);
    ck_assert_double_gt(test_exec_max_rel_diff(later, after), 0.0);
}
END_TEST

/* --- state by name, evaluate --- */

START_TEST(test_gpu_tensor_copy_and_evaluate) {
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    ExecPipelineParams p = gpu_params(shape, EXEC_PRECISION_FP32);
    p.optim.kind = KERN_OPTIM_MUON;
    p.optim.error_feedback = 1;
    int32_t tokens[TEST_EXEC_TINY_B * 16], targets[TEST_EXEC_TINY_B * 16];
    test_exec_tiny_data((gpointer)&test_exec_data_seed, 0, tokens, targets);
    float losses[2];
    for (int k = 0; k < 2; k++) {
        g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", k == 0 ? 1 : 4, 1, 2, 1, 1);
        ExecPipelineParams q = gpu_params(sched, EXEC_PRECISION_FP32);
        g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&q);
        g_autoptr(GError) error = NULL;
        ck_assert_msg(exec_pipeline_evaluate(pipeline, tokens, targets, &losses[k], &error), "%s",
                      error ? error->message : "");
        g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
        ck_assert(res->loss[0] == losses[k]); /* evaluate is F through every stage */
    }
    ck_assert(losses[0] == losses[1]);

    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        for (int i = 0; i < exec_pipeline_n_tensors(pipeline, vs); i++) {
            guint             roles = 0;
            const Gpt2Tensor *t = exec_pipeline_tensor(pipeline, vs, i, &roles);
            gboolean          muon = t->kind == GPT2_TENSOR_HIDDEN;
            ck_assert_int_eq(!!(roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_MUON_MOMENTUM)), muon);
            ck_assert_int_eq(!!(roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_ADAM_V)), !muon);
            ck_assert(roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_PREV_UPDATE));
            g_autofree float *src = g_new(float, t->numel);
            g_autofree float *dst = g_new(float, t->numel);
            for (int r = 0; r < EXEC_TENSOR_N_ROLES; r++) {
                if (!(roles & EXEC_TENSOR_ROLE_BIT(r)))
                    continue;
                for (size_t k = 0; k < t->numel; k++)
                    src[k] = (float)(r * 1000 + (int)(k % 997)) * 0.5f;
                ck_assert(exec_pipeline_tensor_set(pipeline, vs, t->name, r, src, t->numel, NULL));
                ck_assert(exec_pipeline_tensor_get(pipeline, vs, t->name, r, dst, t->numel, NULL));
                ck_assert_int_eq(memcmp(src, dst, t->numel * sizeof(float)), 0);
            }
            ck_assert(!exec_pipeline_tensor_get(pipeline, vs, t->name, EXEC_TENSOR_PARAMS, dst,
                                                t->numel + 1, &error));
            ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_TENSOR));
            g_clear_error(&error);
        }
    }
    int64_t t = -1;
    ck_assert(exec_pipeline_set_optim_steps(pipeline, 1, 7, NULL));
    ck_assert(exec_pipeline_optim_steps(pipeline, 1, &t, NULL));
    ck_assert_int_eq(t, 7);
}
END_TEST

/* --- planned memory against the device --- */

START_TEST(test_gpu_memory_planned) {
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 4, 1, 4, 1, 1);
    ExecPipelineParams p = gpu_params(shape, EXEC_PRECISION_BF16);
    size_t             free0 = 0, free1 = 0, total = 0;
    KERN_CUDA_CHECK(cudaMemGetInfo(&free0, &total));
    __atomic_store_n(&malloc_bytes, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&counting_mallocs, 1, __ATOMIC_SEQ_CST);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    __atomic_store_n(&counting_mallocs, 0, __ATOMIC_SEQ_CST);
    KERN_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    int64_t planned = 0;
    for (int32_t s = 0; s < 4; s++) {
        PpMemoryBytes   predicted;
        ExecMemoryBytes actual;
        ck_assert(exec_pipeline_memory(pipeline, s, &predicted, &actual));
        ck_assert_int_eq(actual.device, 0);
        planned += actual.total_bytes;
    }
    /* What the backend asked cudaMalloc for is what it planned: every planned byte, and no
     * arena outside the plan (a few bytes over for buffers of 0 bytes, allocated as 1). The
     * driver's free memory is no measure of that (it caches and rounds allocations), only a
     * loose bound: at most the requests plus its 2 MiB granularity per allocation and the
     * cuBLASLt handles' own state, 64 MiB per stage here. */
    int64_t requested = (int64_t)__atomic_load_n(&malloc_bytes, __ATOMIC_SEQ_CST);
    ck_assert_msg(requested >= planned && requested <= planned + 4096,
                  "cudaMalloc asked for %" G_GINT64_FORMAT " bytes, planned %" G_GINT64_FORMAT,
                  requested, planned);
    int64_t used = (int64_t)free0 - (int64_t)free1;
    ck_assert_msg(used <= requested + 4 * (64 << 20),
                  "device memory used %" G_GINT64_FORMAT ", requested %" G_GINT64_FORMAT, used,
                  requested);
}
END_TEST

/* --- bf16 (and its fused attention) against fp32 --- */

START_TEST(test_gpu_bf16_close_to_fp32) {
    const TestExecCase c = {"1f1b", 2, 1, 2, 1, 2};
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 2, 1, 2, 1, 2);
    /* One head of 32 channels, a size the fused attention kernels take. */
    ExecPipelineParams p = gpu_params(shape, EXEC_PRECISION_FP32);
    p.model.NH = 1;
    g_autoptr(GHashTable) g32 = NULL, p32 = NULL;
    double ref = run_collect(&c, p, NULL, &g32, &p32);
    p.precision = EXEC_PRECISION_BF16;
    for (int flash = 0; flash < 2; flash++) {
        p.flash_attention = flash;
        g_autoptr(GHashTable) g16 = NULL, p16 = NULL;
        double loss = run_collect(&c, p, NULL, &g16, &p16);
        /* bf16 activations and compute weights (8 bits of mantissa), fp32 accumulation: the
         * mean loss within 1% of fp32's, every gradient within 5% of its tensor's largest
         * magnitude. */
        ck_assert_msg(fabs(loss - ref) <= 1e-2 * ref, "bf16 (flash %d) loss %.6g, fp32 %.6g", flash,
                      loss, ref);
        double err = max_err_to_max(g16, g32);
        ck_assert_msg(err <= 5e-2, "bf16 (flash %d) gradients: relative error %.3g", flash, err);
    }
}
END_TEST

/* --- exact resume, and a GPU checkpoint in the CPU backend --- */

START_TEST(test_gpu_train_resume_bitwise) {
    const char   *sets[] = {"run.backend=cuda", "run.precision=fp32", "run.devices=0,0", NULL};
    TestExecTrain straight, cut;
    test_exec_train_init(&straight);
    test_exec_train_init(&cut);
    ExecTrainSummary a, b;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(test_exec_train(&straight, sets, NULL, 0, FALSE, &a, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_gt(a.actual_bytes, 0);
    g_auto(GStrv) memory = test_exec_read_lines(straight.dir, "memory.csv");
    ck_assert_int_eq(g_strv_length(memory), 3); /* header + 2 stages */
    ck_assert_msg(test_exec_train(&cut, sets, NULL, 2, FALSE, &b, &error), "%s",
                  error ? error->message : "");
    ck_assert_msg(test_exec_train(&cut, sets, cut.dir, 0, FALSE, &b, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(a.steps, 4);
    ck_assert_int_eq(b.steps, 4);
    ck_assert(memcmp(&a.train_loss, &b.train_loss, sizeof(double)) == 0);
    ck_assert(memcmp(&a.val_loss, &b.val_loss, sizeof(double)) == 0);
    g_auto(GStrv) log_a = test_exec_read_lines(straight.dir, "log.csv");
    g_auto(GStrv) log_b = test_exec_read_lines(cut.dir, "log.csv");
    ck_assert_int_eq(g_strv_length(log_a), 5);
    ck_assert_int_eq(g_strv_length(log_b), 5);
    for (int i = 0; i < 5; i++) {
        g_auto(GStrv) ca = g_strsplit(log_a[i], ",", -1), cb = g_strsplit(log_b[i], ",", -1);
        for (int col = 0; col < 8; col++) {
            if (i == 0 || col != 6) /* tokens_per_s is a measurement */
                ck_assert_str_eq(ca[col], cb[col]);
        }
    }
    Gpt2Slice *wa = test_exec_train_full_slice(), *wb = test_exec_train_full_slice();
    test_exec_load_weights(wa, straight.dir);
    test_exec_load_weights(wb, cut.dir);
    for (int i = 0; i < gpt2_slice_n_tensors(wa); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(wa, i);
        ck_assert_msg(memcmp(gpt2_slice_params(wa) + t->offset, gpt2_slice_params(wb) + t->offset,
                             t->numel * sizeof(float)) == 0,
                      "tensor %s differs after resume", t->name);
    }
    gpt2_slice_free(wa);
    gpt2_slice_free(wb);

    /* The GPU's checkpoint of step 2 loads in the CPU backend, which continues from the same
     * weights and optimizer state: its first loss is the GPU's within fp32 rounding. */
    TestExecTrain cpu;
    test_exec_train_init(&cpu);
    ExecTrainSummary c;
    g_autofree char *ckpt = g_build_filename(cut.dir, "checkpoints", "step-00000002", NULL);
    ck_assert_msg(test_exec_train(&cpu, NULL, ckpt, 0, FALSE, &c, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(c.steps, 4);
    g_auto(GStrv) log_c = test_exec_read_lines(cpu.dir, "log.csv");
    g_auto(GStrv) gpu_row = g_strsplit(log_a[3], ",", -1), cpu_row = g_strsplit(log_c[1], ",", -1);
    ck_assert_str_eq(cpu_row[0], "2");
    double gl = g_ascii_strtod(gpu_row[2], NULL), cl = g_ascii_strtod(cpu_row[2], NULL);
    ck_assert_msg(fabs(gl - cl) <= 1e-4 * gl, "step 2: loss %.6f on the GPU, %.6f on the CPU", gl,
                  cl);
    test_exec_train_clear(&cpu);
    test_exec_train_clear(&straight);
    test_exec_train_clear(&cut);
}
END_TEST

int main(void) {
    Suite *s = suite_create("exec-cuda");
    TCase *tc = tcase_create("exec-cuda");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gpu_step_matches_cpu);
    tcase_add_loop_test(tc, test_gpu_pipelined_equals_unpipelined, 0, G_N_ELEMENTS(sync_cases));
    tcase_add_loop_test(tc, test_gpu_order_and_deps, 0, G_N_ELEMENTS(order_cases));
    tcase_add_loop_test(tc, test_gpu_async_versions, 0, G_N_ELEMENTS(async_cases));
    tcase_add_test(tc, test_gpu_dynamic_paci);
    tcase_add_test(tc, test_gpu_nonfinite_skips_update);
    tcase_add_test(tc, test_gpu_tensor_copy_and_evaluate);
    tcase_add_test(tc, test_gpu_memory_planned);
    tcase_add_test(tc, test_gpu_bf16_close_to_fp32);
    tcase_add_test(tc, test_gpu_train_resume_bitwise);
    suite_add_tcase(s, tc);
    return tcu_main(s);
}
