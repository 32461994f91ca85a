/* SPDX-License-Identifier: MIT
 * test-exec-backend-cuda.c: the CUDA backend under the conformance suite
 * (test-exec-conformance.h; gpu suite: exits 77 without a device, runs unforked, every stage on
 * device 0 in fp32), and the checks only it has: one GPT-2 step against the CPU backend (loss
 * and every gradient through the tap), the planned device memory against the bytes the backend
 * asked cudaMalloc for, bf16 (flash attention too) against fp32, and a GPU checkpoint resumed
 * on the CPU backend.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kern-check.h"
#include "pp-error.h"
#include "test-cuda-util.h"
#include "test-exec-conformance.h"
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

static void cuda_select(ExecPipelineParams *p) {
    p->backend = "cuda";
    p->precision = EXEC_PRECISION_FP32;
    ck_assert_int_le(p->shape->n_stages, (int32_t)G_N_ELEMENTS(all_on_0));
    p->devices = all_on_0;
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

/* --- one step against the CPU backend --- */

START_TEST(test_gpu_step_matches_cpu) {
    const TestExecCase c = {"gpipe", 1, 1, 2, 1, 1};
    g_autoptr(PpSchedule) shape = test_util_schedule_new("gpipe", 1, 1, 2, 1, 1);
    g_autoptr(GHashTable) cg = NULL, cp = NULL, gg = NULL, gp = NULL;
    ExecRunResult *cres = NULL, *gres = NULL;
    test_conf_run_collect(&c, test_exec_tiny_params(shape), &cres, &cg, &cp);
    test_conf_run_collect(&c, test_conf_params(shape), &gres, &gg, &gp);
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

/* --- planned memory against the device --- */

START_TEST(test_gpu_memory_planned) {
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 4, 1, 4, 1, 1);
    ExecPipelineParams p = test_conf_params(shape);
    p.precision = EXEC_PRECISION_BF16;
    size_t free0 = 0, free1 = 0, total = 0;
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
    ExecPipelineParams p = test_conf_params(shape);
    p.model.NH = 1;
    g_autoptr(GHashTable) g32 = NULL, p32 = NULL;
    double ref = test_conf_run_collect(&c, p, NULL, &g32, &p32);
    p.precision = EXEC_PRECISION_BF16;
    for (int flash = 0; flash < 2; flash++) {
        p.flash_attention = flash;
        g_autoptr(GHashTable) g16 = NULL, p16 = NULL;
        double loss = test_conf_run_collect(&c, p, NULL, &g16, &p16);
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

/* --- a GPU checkpoint in the CPU backend --- */

static const char *const cuda_train_sets[] = {"run.backend=cuda", "run.precision=fp32",
                                              "run.devices=0,0", NULL};

/* The GPU's checkpoint of step 2 loads in the CPU backend, which continues from the same
 * weights and optimizer state: its first loss is the GPU's within fp32 rounding. */
START_TEST(test_gpu_checkpoint_on_cpu) {
    TestExecTrain straight, cut, cpu;
    test_exec_train_init(&straight);
    test_exec_train_init(&cut);
    test_exec_train_init(&cpu);
    ExecTrainSummary a, b, c;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(test_exec_train(&straight, cuda_train_sets, NULL, 0, FALSE, &a, &error), "%s",
                  error ? error->message : "");
    ck_assert_msg(test_exec_train(&cut, cuda_train_sets, NULL, 2, FALSE, &b, &error), "%s",
                  error ? error->message : "");
    g_autofree char *ckpt = g_build_filename(cut.dir, "checkpoints", "step-00000002", NULL);
    ck_assert_msg(test_exec_train(&cpu, NULL, ckpt, 0, FALSE, &c, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(c.steps, 4);
    g_auto(GStrv) log_a = test_exec_read_lines(straight.dir, "log.csv");
    g_auto(GStrv) log_c = test_exec_read_lines(cpu.dir, "log.csv");
    ck_assert_int_eq(g_strv_length(log_a), 5);
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

static void cuda_add_own(TCase *tc) {
    tcase_add_test(tc, test_gpu_step_matches_cpu);
    tcase_add_test(tc, test_gpu_memory_planned);
    tcase_add_test(tc, test_gpu_bf16_close_to_fp32);
    tcase_add_test(tc, test_gpu_checkpoint_on_cpu);
}

const TestBackend test_backend = {
    .name = "cuda",
    .select = cuda_select,
    .train_sets = cuda_train_sets,
    /* Event times of different stages come from separate anchors, each elapsed time a float
     * in ms read against its window's start: a dependency may appear this much early. */
    .cross_stage_slack_ns = 2000,
    .accounts_memory = TRUE,
    .timeout_s = 120,
    .add_own = cuda_add_own,
    .run = tcu_main,
};
