/* SPDX-License-Identifier: MIT
 * test-exec-cuda-host.c: the CUDA backend's host side, which runs without a GPU (suite unit,
 * CUDA builds): device placement and its errors (run.devices), the plan's arenas in closed
 * form against the slice sizes and the memory model, its refusals, and pacer-train with
 * run.backend = cuda on a machine without a device (exit 1 with a clear message, no abort).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "exec-cuda-plan.h"
#include "kern-cuda.h"
#include "pp-error.h"
#include "pp-memory.h"
#include "test-util.h"

#define TRAIN_BIN PP_BUILD_ROOT "/exec/pacer-train"

/* --- device placement --- */

START_TEST(test_devices_default_round_robin) {
    int32_t out[5];
    ck_assert(exec_cuda_plan_devices(NULL, 5, 3, NULL, out, NULL));
    const int32_t want[5] = {0, 1, 2, 0, 1};
    ck_assert_mem_eq(out, want, sizeof want);
    /* run.devices = 0,0,0,0: four stages on one device. */
    const int32_t same[4] = {0, 0, 0, 0};
    ck_assert(exec_cuda_plan_devices(same, 4, 1, NULL, out, NULL));
    ck_assert_mem_eq(out, same, sizeof same);
}
END_TEST

START_TEST(test_devices_errors) {
    int32_t       out[3];
    const int32_t devices[3] = {0, 2, 1};
    g_autoptr(GError) error = NULL;
    ck_assert(!exec_cuda_plan_devices(devices, 3, 2, NULL, out, &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
    ck_assert_str_eq(error->message, "run.devices: stage 1 is placed on device 2 but this process "
                                     "sees 2 CUDA devices (valid ids: 0..1)");
    g_clear_error(&error);
    ck_assert(
        !exec_cuda_plan_devices(NULL, 3, 0, "no CUDA-capable device is detected", out, &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
    ck_assert_ptr_nonnull(strstr(error->message, "no CUDA device is visible to this process (no "
                                                 "CUDA-capable device is detected)"));
    ck_assert_ptr_nonnull(strstr(error->message, "run.backend = cpu"));
}
END_TEST

/* --- the plan --- */

static const Gpt2Config tiny = {.L = 8, .C = 64, .NH = 2, .T = 16, .V = 61, .Vp = 128};
enum { TINY_B = 2 };

typedef struct {
    PpSchedule      *sched;
    PpPartition     *partition;
    int32_t         *act_slots;
    int32_t         *versions;
    ExecModelLayout *layout;
    ExecBackendSetup setup;
} PlanFixture;

/* The fixture's layout for @model (AdamW), in place of the one it had. */
static void plan_fixture_set_model(PlanFixture *f, const Gpt2Config *model) {
    const KernOptimParams adamw = {
        .kind = KERN_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f};
    exec_model_layout_unref(f->layout);
    f->layout = exec_model_layout_new(model, TINY_B, f->partition, f->act_slots, &adamw);
    f->setup.layout = f->layout;
}

static void plan_fixture_init(PlanFixture *f, const char *kind, int32_t n_stages, int32_t m) {
    f->sched = test_util_schedule_new(kind, n_stages, 1, m, 1, 2);
    int64_t           layer_cost[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    PpPartitionParams pp = {.n_layers = tiny.L,
                            .n_vstages = n_stages,
                            .mode = PP_PARTITION_EVEN,
                            .layer_cost = layer_cost};
    f->partition = pp_partition_new(&pp, NULL);
    ck_assert_ptr_nonnull(f->partition);
    f->act_slots = pp_schedule_vstage_peak_inflight(f->sched);
    f->versions = g_new0(int32_t, n_stages);
    for (int32_t s = 0; s < n_stages; s++)
        f->versions[s] =
            f->sched->weight_mode == PP_WEIGHTS_STASHED ? f->sched->n_weight_versions[s] : 0;
    f->setup = (ExecBackendSetup){
        .n_stages = n_stages,
        .n_chunks = 1,
        .vstage_stage = f->sched->vstage_stage,
        .weight_versions = f->versions,
    };
    f->layout = NULL;
    plan_fixture_set_model(f, &tiny);
}

static void plan_fixture_clear(PlanFixture *f) {
    pp_schedule_free(f->sched);
    exec_model_layout_unref(f->layout);
    pp_partition_free(f->partition);
    g_free(f->act_slots);
    g_free(f->versions);
}

static size_t round256(size_t b) {
    return (b + 255) & ~(size_t)255;
}

/* Parameters of virtual stage @vs of the fixture (the slice's table). */
static size_t vstage_params(const ExecCudaPlan *plan, int32_t vs) {
    Gpt2Table *table = gpt2_table_new(&plan->slice[vs].slice);
    size_t     n = gpt2_table_n_params(table);
    gpt2_table_free(table);
    return n;
}

/* 1f1b on 4 stages, each on its own device, bf16: message pools from the neighbours'
 * activation slots, staging on the producer's device, and every arena in closed form. */
START_TEST(test_plan_bytes_bf16) {
    PlanFixture f;
    plan_fixture_init(&f, "1f1b", 4, 4);
    f.setup.precision = EXEC_PRECISION_DEFAULT; /* bf16 on cuda */
    g_autoptr(GError) error = NULL;
    g_autoptr(ExecCudaPlan) plan = exec_cuda_plan_new(&f.setup, 4, NULL, &error);
    ck_assert_msg(plan != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(plan->dtype, KERN_DTYPE_BF16);
    ck_assert_uint_eq(plan->msg_bytes, (size_t)TINY_B * tiny.T * tiny.C * 2);
    for (int32_t s = 0; s < 4; s++) {
        /* 1F1B keeps min(N - s, m) micro-batches in flight on stage s. */
        ck_assert_int_eq(f.act_slots[s], 4 - s);
        ck_assert_int_eq(plan->device[s], s);
        ck_assert_int_eq(plan->act_inbox[s], s > 0 ? f.act_slots[s - 1] : 0);
        ck_assert_int_eq(plan->grad_inbox[s], s < 3 ? f.act_slots[s] : 0);
        ck_assert_int_eq(plan->stashes[s], 0);
        const ExecMemoryBytes *mem = &plan->memory[s];
        size_t                 n = vstage_params(plan, s);
        /* fp32 master + bf16 compute copy; fp32 gradients; AdamW's two fp32 moments. */
        ck_assert_int_eq(mem->params_bytes, (int64_t)(round256(n * 4) + round256(n * 2)));
        ck_assert_int_eq(mem->grads_bytes, (int64_t)round256(n * 4));
        ck_assert_int_ge(mem->optim_bytes, (int64_t)(n * 8));
        ck_assert_int_lt(mem->optim_bytes, (int64_t)(n * 8 + 64 * 1024));
        Gpt2CudaSliceSizes sizes;
        gpt2_cuda_slice_sizes(&plan->slice[s], &sizes);
        ck_assert_int_eq(mem->act_bytes, (int64_t)(f.act_slots[s] * sizes.act_slot_bytes));
        /* Inboxes on this stage's device, plus staging for what it sends to other devices. */
        int64_t inbox = (plan->act_inbox[s] + plan->grad_inbox[s]) * (int64_t)plan->msg_bytes;
        int64_t staging =
            ((s < 3 ? plan->act_inbox[s + 1] : 0) + (s > 0 ? plan->grad_inbox[s - 1] : 0)) *
            (int64_t)plan->msg_bytes;
        ck_assert_int_eq(mem->message_bytes, inbox + staging);
        ck_assert_int_eq(mem->workspace_bytes,
                         (int64_t)(sizes.scratch_bytes + kern_cuda_ctx_device_bytes()) +
                             EXEC_CUDA_STAGE_SCALARS_BYTES + 2 * (int64_t)plan->msg_bytes);
        ck_assert_int_eq(mem->total_bytes, mem->params_bytes + mem->grads_bytes + mem->optim_bytes +
                                               mem->stash_bytes + mem->act_bytes +
                                               mem->message_bytes + mem->workspace_bytes);
        /* Against the memory model (bf16 training, 16 B per parameter): the GPU keeps fp32
         * gradients, 2 B more per parameter, and nothing else beyond 256-byte rounding and
         * the optimizer's block tables. */
        PpMemoryModel       model;
        const PpMemoryShape shape = {.microbatch_size = TINY_B,
                                     .seq_len = tiny.T,
                                     .hidden = tiny.C,
                                     .heads = tiny.NH,
                                     .vocab = tiny.V};
        pp_memory_model(&shape, &model);
        PpMemoryBytes predicted;
        int32_t       layers = f.partition->layer_end[s] - f.partition->layer_begin[s];
        pp_memory_vstage_bytes(&model, f.partition->layer_begin[s], layers, s == 0, s == 3,
                               f.act_slots[s], 0, &predicted);
        /* The model counts V vocabulary rows, the slices Vp (padded). */
        int64_t pad = s == 3 || s == 0 ? (int64_t)(tiny.Vp - tiny.V) * tiny.C : 0;
        ck_assert_int_eq(predicted.static_bytes, 16 * ((int64_t)n - pad));
        int64_t state = mem->params_bytes + mem->grads_bytes + mem->optim_bytes;
        ck_assert_int_ge(state, 18 * (int64_t)n);
        ck_assert_int_le(state, 18 * (int64_t)n + 64 * 1024);
    }
    plan_fixture_clear(&f);
}
END_TEST

/* fp32 on one device (run.devices = 0,0,0,0): no compute copy, no staging; pipedream's
 * stashes: the stage's weight versions, fp32 copies. */
START_TEST(test_plan_bytes_fp32_one_device) {
    PlanFixture f;
    plan_fixture_init(&f, "pipedream", 4, 1);
    const int32_t devices[4] = {0, 0, 0, 0};
    f.setup.devices = devices;
    f.setup.precision = EXEC_PRECISION_FP32;
    g_autoptr(GError) error = NULL;
    g_autoptr(ExecCudaPlan) plan = exec_cuda_plan_new(&f.setup, 2, NULL, &error);
    ck_assert_msg(plan != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(plan->dtype, KERN_DTYPE_F32);
    for (int32_t s = 0; s < 4; s++) {
        const ExecMemoryBytes *mem = &plan->memory[s];
        size_t                 n = vstage_params(plan, s);
        ck_assert_int_eq(mem->device, 0);
        ck_assert_int_eq(mem->params_bytes, (int64_t)round256(n * 4));
        /* PipeDream keeps N - s weight versions on stage s. */
        ck_assert_int_eq(plan->stashes[s], 4 - s);
        ck_assert_int_eq(mem->stash_bytes, (int64_t)((4 - s) * n * 4));
        ck_assert_int_eq(mem->message_bytes,
                         (plan->act_inbox[s] + plan->grad_inbox[s]) * (int64_t)plan->msg_bytes);
    }
    plan_fixture_clear(&f);
}
END_TEST

/* One process per stage (a group in the setup; the plan only asks whether there is one): the
 * host-staged transport's two message buffers per stage, whatever the schedule's slots. */
START_TEST(test_plan_bytes_processes) {
    PlanFixture f;
    plan_fixture_init(&f, "1f1b", 4, 4);
    f.setup.comm = (ExecComm *)&f; /* never dereferenced by the plan */
    g_autoptr(GError) error = NULL;
    g_autoptr(ExecCudaPlan) plan = exec_cuda_plan_new(&f.setup, 4, NULL, &error);
    ck_assert_msg(plan != NULL, "%s", error ? error->message : "");
    for (int32_t s = 0; s < 4; s++) {
        const ExecMemoryBytes *mem = &plan->memory[s];
        ck_assert_int_eq(mem->message_bytes, 2 * (int64_t)plan->msg_bytes);
        ck_assert_int_eq(mem->total_bytes, mem->params_bytes + mem->grads_bytes + mem->optim_bytes +
                                               mem->stash_bytes + mem->act_bytes +
                                               mem->message_bytes + mem->workspace_bytes);
    }
    plan_fixture_clear(&f);
}
END_TEST

/* The NCCL path's scratch: D chunks of the largest local virtual stage's floats, 16 MiB each
 * at most, on the workspace of each local stage only. */
START_TEST(test_plan_nccl_scratch) {
    ck_assert_uint_eq(exec_cuda_plan_nccl_chunk(0), 1);
    ck_assert_uint_eq(exec_cuda_plan_nccl_chunk(10), 10);
    ck_assert_uint_eq(exec_cuda_plan_nccl_chunk((size_t)1 << 22), (size_t)1 << 22);
    ck_assert_uint_eq(exec_cuda_plan_nccl_chunk((size_t)124 << 20), (size_t)1 << 22);
    PlanFixture f;
    plan_fixture_init(&f, "1f1b", 4, 4);
    g_autoptr(GError) error = NULL;
    g_autoptr(ExecCudaPlan) plan = exec_cuda_plan_new(&f.setup, 4, NULL, &error);
    ck_assert_msg(plan != NULL, "%s", error ? error->message : "");
    ExecMemoryBytes before[4];
    memcpy(before, plan->memory, sizeof before);
    const gboolean local[4] = {FALSE, TRUE, FALSE, FALSE};
    exec_cuda_plan_add_nccl_scratch(plan, &f.setup, local, 3);
    size_t n = vstage_params(plan, 1);
    ck_assert_uint_lt(n, (size_t)1 << 22); /* the tiny model: its whole stage per exchange */
    for (int32_t s = 0; s < 4; s++) {
        int64_t scratch = s == 1 ? 3 * (int64_t)n * 4 : 0;
        ck_assert_int_eq(plan->memory[s].workspace_bytes, before[s].workspace_bytes + scratch);
        ck_assert_int_eq(plan->memory[s].total_bytes, before[s].total_bytes + scratch);
    }
    plan_fixture_clear(&f);
}
END_TEST

START_TEST(test_plan_refusals) {
    PlanFixture f;
    plan_fixture_init(&f, "1f1b", 2, 2);
    g_autoptr(GError) error = NULL;
    f.setup.precision = EXEC_PRECISION_FP32;
    f.setup.flash_attention = TRUE;
    ck_assert_ptr_null(exec_cuda_plan_new(&f.setup, 1, NULL, &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
    ck_assert_ptr_nonnull(strstr(error->message, "model.flash_attention = true"));
    ck_assert_ptr_nonnull(strstr(error->message, "got fp32 and 32"));
    g_clear_error(&error);
    /* bf16 needs C, C / NH and Vp multiples of 8: C = 64 with 16 heads has heads of 4. */
    f.setup.flash_attention = FALSE;
    f.setup.precision = EXEC_PRECISION_BF16;
    Gpt2Config narrow_heads = tiny;
    narrow_heads.NH = 16;
    plan_fixture_set_model(&f, &narrow_heads);
    ck_assert_ptr_null(exec_cuda_plan_new(&f.setup, 1, NULL, &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_BACKEND));
    ck_assert_ptr_nonnull(strstr(error->message, "run.precision = bf16"));
    ck_assert_ptr_nonnull(strstr(error->message, "multiples of 8"));
    g_clear_error(&error);
    /* The same model runs in fp32. */
    f.setup.precision = EXEC_PRECISION_FP32;
    g_autoptr(ExecCudaPlan) plan = exec_cuda_plan_new(&f.setup, 1, NULL, &error);
    ck_assert_msg(plan != NULL, "%s", error ? error->message : "");
    plan_fixture_clear(&f);
}
END_TEST

/* --- pacer-train without a device --- */

START_TEST(test_train_without_device) {
    if (kern_cuda_device_count() > 0)
        return; /* a GPU machine: the gpu suite trains for real */
    g_autofree char *data_cache = test_util_cache_dir();
    g_autofree char *cache_set = g_strconcat("data.cache_dir=", data_cache, NULL);
    const char      *args[] = {PP_SOURCE_ROOT "/scenarios/train-tiny.ini",
                               "--set",
                               "run.backend=cuda",
                               "--set",
                               "training.steps=2",
                               "--set",
                               "optimizer.warmup_steps=1",
                               "--set",
                               cache_set,
                               "--quiet",
                               NULL};
    g_autofree char *err = NULL;
    int              status = test_util_spawn(TRAIN_BIN, args, NULL, &err);
    ck_assert_int_eq(status, 1);
    ck_assert_msg(strstr(err, "pacer-train: run.backend = cuda: no CUDA device is visible") != NULL,
                  "%s", err);
}
END_TEST

int main(void) {
    Suite       *s = suite_create("exec-cuda-host");
    TCase       *tc = tcase_create("plan");
    TestUtilData data;
    test_util_data_init(&data);
    tcase_add_test(tc, test_devices_default_round_robin);
    tcase_add_test(tc, test_devices_errors);
    tcase_add_test(tc, test_plan_bytes_bf16);
    tcase_add_test(tc, test_plan_bytes_fp32_one_device);
    tcase_add_test(tc, test_plan_bytes_processes);
    tcase_add_test(tc, test_plan_nccl_scratch);
    tcase_add_test(tc, test_plan_refusals);
    tcase_set_timeout(tc, 60);
    /* pacer-train loads the GPT-2 vocabulary before it looks for a device: skipped without
     * scripts/fetch-data. */
    test_util_data_add(&data, tc, test_train_without_device, 0, 1);
    suite_add_tcase(s, tc);
    return test_util_data_run(&data, s);
}
