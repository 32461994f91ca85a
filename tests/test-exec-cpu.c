/* SPDX-License-Identifier: MIT
 * test-exec-cpu.c: the CPU executor (exec/pipeline/exec.h) on tiny GPT-2 models fed by a synthetic
 * xorshift token source (no corpus needed): executed order == program, measured trace obeys
 * the dependencies, pipelined == unpipelined for synchronous schedules, weight versions and
 * drift equal the program's for asynchronous ones, stashing, non-finite gradient handling.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <glib/gstdio.h>

#include "data-shard.h"
#include "exec-checkpoint-unit.h"
#include "exec-checkpoint.h"
#include "exec-train.h"
#include "exec.h"
#include "kern-pool.h"
#include "pp-error.h"
#include "pp-trace.h"
#include "test-exec-util.h"
#include "test-util.h"

/* Tiny model: L=4, C=32, NH=2, T=16, V=61 (padded 128), B=2 sequences per micro-batch. */

/* --- executed order and measured dependencies --- */

static const TestExecCase order_cases[] = {
    {"gpipe", 2, 1, 3, 1, 2},      {"1f1b", 4, 1, 4, 1, 1},  {"interleaved", 2, 2, 4, 1, 1},
    {"pipedream", 3, 1, 1, 1, 6},  {"2bw", 2, 1, 3, 1, 2},   {"async-1f1b", 4, 1, 1, 1, 6},
    {"paci", 4, 1, 1, 2, 3},       {"zb-h1", 2, 1, 4, 1, 1}, {"zb-h2", 2, 1, 4, 1, 1},
    {"zb-1p", 2, 1, 4, 1, 1},      {"zb-2p", 2, 1, 4, 1, 1}, {"zb-v", 2, 2, 4, 1, 1},
    {"dualpipe-v", 2, 2, 4, 1, 2},
};

START_TEST(test_exec_order_and_deps) {
    const TestExecCase *c = &order_cases[_i];
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    ExecPipelineParams p = test_exec_tiny_params(sched);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    const PpTrace *trace = exec_pipeline_trace(pipeline);
    ck_assert_int_eq(trace->n_rows, pp_schedule_n_ops_total(sched));
    /* Rows come per stage in execution order: row of (s, i) = op_offset[s] + i. */
    for (int32_t s = 0; s < sched->n_stages; s++) {
        ck_assert_int_eq(res->n_executed[s], sched->n_ops[s]);
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *want = &sched->programs[s][i], *got = &res->executed[s][i];
            ck_assert_int_eq(got->kind, want->kind);
            ck_assert_int_eq(got->mb, want->mb);
            ck_assert_int_eq(got->chunk, want->chunk);
            const PpTraceRow *row = &trace->rows[sched->op_offset[s] + i];
            ck_assert_int_eq(row->stage, s);
            ck_assert_int_eq(row->kind, want->kind);
            ck_assert_int_eq(row->mb, want->mb);
            ck_assert_int_le(row->start_ns, row->end_ns);
            if (i > 0)
                ck_assert_int_ge(row->start_ns, trace->rows[sched->op_offset[s] + i - 1].end_ns);
            int32_t        n_deps;
            const PpOpRef *deps = pp_schedule_deps(sched, (PpOpRef){s, i}, &n_deps);
            for (int32_t d = 0; d < n_deps; d++) {
                const PpTraceRow *dep = &trace->rows[pp_schedule_op_id(sched, deps[d])];
                ck_assert_int_ge(row->start_ns, dep->end_ns);
            }
        }
    }
    for (int32_t mb = 0; mb < res->n_mb; mb++)
        ck_assert(isfinite(res->loss[mb]) && res->loss[mb] > 0.0f);
}
END_TEST

/* --- pipelined == unpipelined (synchronous schedules) --- */

static const TestExecCase sync_cases[] = {
    {"gpipe", 2, 1, 4, 1, 1},
    {"1f1b", 4, 1, 4, 1, 1},
    {"interleaved", 2, 2, 4, 1, 1},
    {"zb-h1", 4, 1, 4, 1, 1},
    {"zb-h2", 4, 1, 4, 1, 1},
    {"zb-1p", 2, 1, 4, 1, 1},
    {"zb-2p", 2, 1, 4, 1, 1},
    /* V placement: chunk 1 runs the last layers in reverse stage order, so stage 0 holds the
     * embeddings and the head; zb-v with m = 2 < 2N - 1 leaves padded micro-batches out */
    {"zb-v", 2, 2, 4, 1, 1},
    {"zb-v", 2, 2, 2, 1, 1},
    {"dualpipe-v", 2, 2, 4, 1, 1},
};

/* Runs case @c on the tiny model: returns the mean loss; *grads gets every gradient of the
 * last update (gathered by tensor name at U), *params every parameter at the end. */
static double run_collect(const TestExecCase *c, GHashTable **grads, GHashTable **params) {
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    TestExecGrads store;
    test_exec_grads_init(&store);
    ExecPipelineParams p = test_exec_tiny_params(sched);
    /* Clipping is per stage (exec.h): only without it is a split run the same math. */
    p.grad_clip = 0.0f;
    p.on_grads = test_exec_grads_collect;
    p.on_grads_user = &store;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    *grads = g_hash_table_ref(store.grads);
    *params = test_exec_gather_params(pipeline);
    test_exec_grads_clear(&store);
    return test_exec_mean_loss(res);
}

START_TEST(test_exec_pipelined_equals_unpipelined) {
    const TestExecCase *c = &sync_cases[_i];
    const TestExecCase  ref_case = {"gpipe", 1, 1, c->m, 1, 1};
    g_autoptr(GHashTable) ref_grads = NULL, ref_params = NULL, grads = NULL, params = NULL;
    double ref_loss = run_collect(&ref_case, &ref_grads, &ref_params);
    double loss = run_collect(c, &grads, &params);
    /* Same kernels on the same shapes, micro-batch gradients accumulated in mb order on
     * every stage: the split changes no summation order, so the match is bitwise. */
    ck_assert_msg(loss == ref_loss, "%s: loss %.9g vs %.9g", c->kind, loss, ref_loss);
    ck_assert_double_eq(test_exec_max_rel_diff(grads, ref_grads), 0.0);
    ck_assert_double_eq(test_exec_max_rel_diff(params, ref_params), 0.0);
}
END_TEST

/* --- asynchronous schedules: versions and drift --- */

static const TestExecCase async_cases[] = {
    {"pipedream", 4, 1, 1, 1, 10}, {"2bw", 4, 1, 4, 1, 4},  {"async-1f1b", 4, 1, 1, 1, 10},
    {"paci", 4, 1, 1, 2, 5},       {"paci", 3, 1, 1, 3, 4},
};

START_TEST(test_exec_async_versions) {
    const TestExecCase *c = &async_cases[_i];
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    ExecPipelineParams p = test_exec_tiny_params(sched);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    gboolean stashed = sched->weight_mode == PP_WEIGHTS_STASHED;
    int32_t  stale = 0, max_delta = 0;
    for (int32_t mb = 0; mb < sched->n_mb; mb++) {
        for (int32_t vs = 0; vs < sched->n_vstages; vs++) {
            int32_t f = pp_schedule_find_op(sched, PP_OP_FORWARD, mb, vs);
            int32_t b = pp_schedule_find_op(sched, PP_OP_BACKWARD_FULL, mb, vs);
            ck_assert_int_ge(f, 0);
            ck_assert_int_ge(b, 0);
            int32_t want_f = pp_schedule_version_used(sched, pp_schedule_op_ref(sched, f));
            int32_t want_b = pp_schedule_version_used(sched, pp_schedule_op_ref(sched, b));
            size_t  cell = (size_t)mb * sched->n_vstages + vs;
            /* Measured Δ per micro-batch equals the program's. */
            ck_assert_int_eq(res->version_f[cell], want_f);
            ck_assert_int_eq(res->version_b[cell], want_b);
            int32_t delta = res->version_b[cell] - res->version_f[cell];
            max_delta = MAX(max_delta, delta);
            /* Stashing: B used its F's version although the stage had moved on. */
            if (stashed) {
                ck_assert_int_eq(delta, 0);
                if (sched->version[b] > res->version_f[cell])
                    stale++;
            }
        }
    }
    if (stashed)
        ck_assert_int_gt(stale, 0);
    if (strcmp(c->kind, "paci") == 0 || strcmp(c->kind, "async-1f1b") == 0) {
        /* Stage 0 sees the largest drift: ceil((N - 1) / a) in steady state. */
        ck_assert_int_eq(max_delta, (c->n_stages - 1 + c->a - 1) / c->a);
    }
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int32_t n_updates = 0;
        for (int32_t i = 0; i < sched->n_ops[s]; i++)
            n_updates += sched->programs[s][i].kind == PP_OP_UPDATE;
        ck_assert_int_eq(exec_pipeline_version(pipeline, s), n_updates);
        /* Stashing copies the weights once per version its forwards use: a copy no
         * micro-batch needs any more is kept for the next forward of that version (the
         * last stage runs F and B alternately and would otherwise copy at every F). */
        ck_assert_int_eq(res->n_copies[s], test_exec_stash_copies(sched, s));
        /* Each U applied the lr of its own update index, whatever the other stages did. */
        ck_assert_int_eq(res->n_updates[s], n_updates);
        for (int32_t k = 0; k < n_updates; k++) {
            float want = kern_lr_schedule(k, p.warmup_steps, p.total_steps, p.lr, p.min_lr);
            ck_assert(res->lr[s][k] == want);
            ck_assert(exec_pipeline_update_lr(pipeline, k) == want);
        }
    }
}
END_TEST

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
                                1.0f / (float)mbs_per_step, NULL, gpt2_slice_grads(slice));
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
    ExecPipelineParams p = test_exec_tiny_params(sched);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    g_autoptr(GHashTable) params = test_exec_gather_params(pipeline);
    ck_assert_int_eq(exec_pipeline_version(pipeline, 0), c->steps);
    g_autoptr(GHashTable) ref = reference_train(sched->mb_per_step, c->steps);
    ck_assert_double_eq(test_exec_max_rel_diff(params, ref), 0.0);
}
END_TEST

/* paci on one stage is plain synchronous accumulation over a micro-batches (bitwise). */
START_TEST(test_exec_paci_single_stage_is_sync) {
    const TestExecCase paci = {"paci", 1, 1, 1, 4, 3}, sync = {"gpipe", 1, 1, 4, 1, 3};
    g_autoptr(GHashTable) g1 = NULL, p1 = NULL, g2 = NULL, p2 = NULL;
    double l1 = run_collect(&paci, &g1, &p1);
    double l2 = run_collect(&sync, &g2, &p2);
    ck_assert(l1 == l2);
    ck_assert_double_eq(test_exec_max_rel_diff(g1, g2), 0.0);
    ck_assert_double_eq(test_exec_max_rel_diff(p1, p2), 0.0);
}
END_TEST

/* --- dynamic mode: PACI's policy run live --- */

START_TEST(test_exec_dynamic_paci) {
    const int32_t N = 4, a = 2, steps = 6, n_mb = steps * a;
    g_autoptr(PpSchedule) shape = test_util_schedule_new("paci", N, 1, 1, a, steps);
    ExecPipelineParams p = test_exec_tiny_params(shape);
    g_autoptr(ExecPipeline) dyn = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpSchedule) program = NULL;
    g_autoptr(ExecRunResult) res = exec_pipeline_run_dynamic(dyn, shape, 0, &program, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");
    /* The executed order is a valid program with the same shape as the static one. */
    ck_assert_ptr_nonnull(program);
    ck_assert(pp_schedule_validate(program, NULL));
    for (int32_t s = 0; s < N; s++) {
        ck_assert_int_eq(program->n_ops[s], shape->n_ops[s]);
        ck_assert_int_eq(exec_pipeline_version(dyn, s), steps);
        /* Same drift bound as the static program: ceil((N - 1 - s) / a). */
        int32_t max_delta = 0;
        for (int32_t mb = 0; mb < n_mb; mb++) {
            size_t cell = (size_t)mb * N + s;
            max_delta = MAX(max_delta, res->version_b[cell] - res->version_f[cell]);
        }
        ck_assert_int_le(max_delta, (N - 1 - s + a - 1) / a);
    }
    for (int32_t mb = 0; mb < n_mb; mb++)
        ck_assert(isfinite(res->loss[mb]));
    /* Replaying the recorded program from the same start gives the same math, bitwise. */
    g_autoptr(ExecPipeline) replay = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res2 = test_exec_run(replay, program);
    for (int32_t mb = 0; mb < n_mb; mb++)
        ck_assert(res2->loss[mb] == res->loss[mb]);
    g_autoptr(GHashTable) p1 = test_exec_gather_params(dyn);
    g_autoptr(GHashTable) p2 = test_exec_gather_params(replay);
    ck_assert_double_eq(test_exec_max_rel_diff(p1, p2), 0.0);
}
END_TEST

/* --- non-finite gradients --- */

START_TEST(test_exec_nonfinite_skips_update) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    ExecPipelineParams p = test_exec_tiny_params(sched);
    p.poison_update = 1;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) r0 = test_exec_run(pipeline, sched);
    ck_assert_int_eq(r0->n_skipped, 0);
    g_autoptr(GHashTable) before = test_exec_gather_params(pipeline);
    /* Update 1 sees poisoned gradients on both stages: skipped, weights unchanged. */
    g_autoptr(ExecRunResult) r1 = test_exec_run(pipeline, sched);
    ck_assert_int_eq(r1->n_skipped, 2);
    g_autoptr(GHashTable) after = test_exec_gather_params(pipeline);
    ck_assert_double_eq(test_exec_max_rel_diff(after, before), 0.0);
    ck_assert_int_eq(exec_pipeline_version(pipeline, 0), 2);
    /* A skipped update advances the version, not the optimizer's step count. */
    int64_t t = -1;
    ck_assert(exec_pipeline_optim_steps(pipeline, 0, &t, NULL));
    ck_assert_int_eq(t, 1);
    /* The accumulation window was discarded: the next step updates normally. */
    g_autoptr(ExecRunResult) r2 = test_exec_run(pipeline, sched);
    ck_assert_int_eq(r2->n_skipped, 0);
    g_autoptr(GHashTable) later = test_exec_gather_params(pipeline);
    ck_assert_double_gt(test_exec_max_rel_diff(later, after), 0.0);
}
END_TEST

START_TEST(test_exec_nonfinite_stops) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("gpipe", 2, 1, 2, 1, 3);
    ExecPipelineParams p = test_exec_tiny_params(sched);
    p.poison_update = 1;
    p.max_nonfinite = 1;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    g_autoptr(ExecRunResult) res = exec_pipeline_run(pipeline, sched, 0, &error);
    ck_assert_ptr_null(res);
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_NONFINITE));
    ck_assert_ptr_nonnull(strstr(error->message, "non-finite"));
}
END_TEST

START_TEST(test_exec_shape_mismatch) {
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    g_autoptr(PpSchedule) other = test_util_schedule_new("1f1b", 4, 1, 4, 1, 1);
    ExecPipelineParams p = test_exec_tiny_params(shape);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(exec_pipeline_run(pipeline, other, 0, &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_SHAPE));
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
    /* The CPU backend has no devices and computes in fp32 only. */
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
    ck_assert_ptr_nonnull(strstr(error->message, "run.precision = bf16: the cpu backend computes "
                                                 "in fp32 only"));
    g_clear_error(&error);
    p.precision = EXEC_PRECISION_FP32;
    g_autoptr(ExecPipeline) fp32 = exec_pipeline_new(&p, &error);
    ck_assert_msg(fp32 != NULL, "%s", error ? error->message : "");
    /* The CPU backend does not account memory; the prediction is there all the same. */
    PpMemoryBytes   predicted;
    ExecMemoryBytes actual;
    ck_assert(!exec_pipeline_memory(fp32, 0, &predicted, &actual));
    ck_assert_int_gt(predicted.static_bytes, 0);
    ck_assert_int_eq(predicted.total_bytes,
                     predicted.static_bytes + predicted.stash_bytes + predicted.act_bytes);
}
END_TEST

/* Tensors cross the contract by name: set then get round-trips every role a tensor has, and
 * every wrong name, role or size is refused with EXEC_ERROR_TENSOR. */
START_TEST(test_tensor_copy_calls) {
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    ExecPipelineParams p = test_exec_tiny_params(shape);
    p.optim.kind = KERN_OPTIM_MUON;
    p.optim.error_feedback = 1;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    int n_muon = 0;
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        for (int i = 0; i < exec_pipeline_n_tensors(pipeline, vs); i++) {
            guint             roles = 0;
            const Gpt2Tensor *t = exec_pipeline_tensor(pipeline, vs, i, &roles);
            gboolean          muon = t->kind == GPT2_TENSOR_HIDDEN;
            n_muon += muon;
            /* Muon drives the blocks' matrices, AdamW the rest; error feedback everything. */
            ck_assert_int_eq(!!(roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_MUON_MOMENTUM)), muon);
            ck_assert_int_eq(!!(roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_ADAM_M)), !muon);
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
                                                t->numel - 1, &error));
            ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_TENSOR));
            g_clear_error(&error);
            ExecTensorRole absent = muon ? EXEC_TENSOR_ADAM_V : EXEC_TENSOR_MUON_MOMENTUM;
            ck_assert(
                !exec_pipeline_tensor_get(pipeline, vs, t->name, absent, dst, t->numel, &error));
            ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_TENSOR));
            g_clear_error(&error);
        }
    }
    ck_assert_int_eq(n_muon, 4 * test_exec_tiny.L);
    float x = 0.0f;
    ck_assert(!exec_pipeline_tensor_get(pipeline, 0, "lm_head.weight", EXEC_TENSOR_PARAMS, &x, 1,
                                        &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_TENSOR));
    ck_assert_ptr_nonnull(strstr(error->message, "lm_head.weight"));
    g_clear_error(&error);
    int64_t t = -1;
    ck_assert(exec_pipeline_set_optim_steps(pipeline, 1, 7, NULL));
    ck_assert(exec_pipeline_optim_steps(pipeline, 1, &t, NULL));
    ck_assert_int_eq(t, 7);
}
END_TEST

/* evaluate() forwards through every virtual stage: on the initial weights it gives bitwise the
 * loss the first micro-batch's F reported in a replay, on any split of the model. */
START_TEST(test_evaluate_matches_forward) {
    int32_t tokens[TEST_EXEC_TINY_B * 16], targets[TEST_EXEC_TINY_B * 16];
    test_exec_tiny_data((gpointer)&test_exec_data_seed, 0, tokens, targets);
    float losses[2];
    for (int k = 0; k < 2; k++) {
        g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", k == 0 ? 1 : 4, 1, 2, 1, 1);
        ExecPipelineParams p = test_exec_tiny_params(sched);
        g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
        g_autoptr(GError) error = NULL;
        ck_assert_msg(exec_pipeline_evaluate(pipeline, tokens, targets, &losses[k], &error), "%s",
                      error ? error->message : "");
        g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
        ck_assert(res->loss[0] == losses[k]);
    }
    ck_assert(losses[0] == losses[1]);
}
END_TEST

/* The backend reports every op once, at its stage's flushes: one trace row per op, and every
 * last-vstage forward's loss reaches on_loss exactly once. */
typedef struct {
    GMutex lock;
    int    seen[64]; /* on_loss calls per mb */
} LossCount;

static void loss_count(gpointer user_data, int32_t mb, int32_t step, float loss) {
    LossCount *c = user_data;
    (void)step;
    ck_assert(isfinite(loss));
    g_mutex_lock(&c->lock);
    c->seen[mb]++;
    g_mutex_unlock(&c->lock);
}

START_TEST(test_reports_once) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("paci", 4, 1, 1, 3, 4);
    LossCount          count = {0};
    ExecPipelineParams p = test_exec_tiny_params(sched);
    p.on_loss = loss_count;
    p.on_loss_user = &count;
    g_mutex_init(&count.lock);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) res = test_exec_run(pipeline, sched);
    ck_assert_int_le(sched->n_mb, 64);
    for (int32_t mb = 0; mb < sched->n_mb; mb++)
        ck_assert_int_eq(count.seen[mb], 1);
    ck_assert_int_eq(exec_pipeline_trace(pipeline)->n_rows, pp_schedule_n_ops_total(sched));
    g_mutex_clear(&count.lock);
}
END_TEST

/* run.speed_reference: one reference row after every U, in the U's columns, on the same
 * stage, after the U and before the stage's next op; compute rows as without it. */
START_TEST(test_speed_reference) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("2bw", 2, 1, 2, 1, 3);
    ExecPipelineParams p = test_exec_tiny_params(sched);
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

/* --- the training loop (exec-train.h) on a synthetic shard --- */

START_TEST(test_train_outputs) {
    TestExecTrain f;
    test_exec_train_init(&f);
    ExecTrainSummary sum;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(test_exec_train(&f, NULL, NULL, 0, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(sum.steps, 4);
    ck_assert_int_eq(sum.tokens, 4 * 4 * 16); /* steps * global batch 4 * T */
    ck_assert_int_eq(sum.n_skipped, 0);
    ck_assert(isfinite(sum.val_loss) && isfinite(sum.train_loss));
    g_auto(GStrv) log = test_exec_read_lines(f.dir, "log.csv");
    ck_assert_int_eq(g_strv_length(log), 5);
    ck_assert_str_eq(log[0], "step,tokens,train_loss,val_loss,lr,grad_norm,tokens_per_s,"
                             "delta_max");
    /* Validation every 2 steps: a val_loss on steps 1 and 3 only. */
    for (int i = 1; i <= 4; i++) {
        g_auto(GStrv) cols = g_strsplit(log[i], ",", -1);
        ck_assert_int_eq(g_strv_length(cols), 8);
        ck_assert_int_eq(g_ascii_strtoll(cols[0], NULL, 10), i - 1);
        ck_assert_int_eq(cols[3][0] != '\0', i % 2 == 0);
        ck_assert_str_eq(cols[7], "0"); /* flush: no drift */
        /* lr: what stage 0 applied at update i - 1 (warmup 1 of 4 steps, 1e-3 to 1e-4) */
        g_autofree char *lr = g_strdup_printf("%.6e", kern_lr_schedule(i - 1, 1, 4, 1e-3f, 1e-4f));
        ck_assert_str_eq(cols[4], lr);
    }
    g_autofree char *ops = g_build_filename(f.dir, "ops.csv", NULL);
    g_autoptr(PpTrace) trace = pp_trace_read_csv(ops, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "");
    /* 4 steps x (2 stages x (2 F + 2 BW + 1 U)). */
    ck_assert_int_eq(trace->n_rows, 4 * 2 * 5);
    /* A unit at every checkpoint_every = 2 steps, nothing else in checkpoints/. */
    g_autofree char *units = g_build_filename(f.dir, "checkpoints", NULL);
    g_autofree char *listing = test_util_list_dir(units);
    ck_assert_str_eq(listing, "step-00000002 step-00000004");
    test_exec_train_clear(&f);
}
END_TEST

START_TEST(test_train_resume) {
    TestExecTrain f;
    test_exec_train_init(&f);
    ExecTrainSummary sum;
    g_autoptr(GError) error = NULL;
    ck_assert(test_exec_train(&f, NULL, NULL, 0, FALSE, &sum, &error));
    g_auto(GStrv) full = test_exec_read_lines(f.dir, "log.csv");
    /* Stop at step 2 (a checkpoint), then resume into the same folder. */
    ck_assert(test_exec_train(&f, NULL, NULL, 2, FALSE, &sum, &error));
    ck_assert_int_eq(sum.steps, 2);
    /* The run folder: its newest unit is step 2 (the first run's step 4 went with the restart). */
    const char *ckpt = f.dir;
    ck_assert_msg(test_exec_train(&f, NULL, ckpt, 0, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(sum.steps, 4);
    g_auto(GStrv) resumed = test_exec_read_lines(f.dir, "log.csv");
    ck_assert_int_eq(g_strv_length(resumed), 5);
    /* Steps before the checkpoint are the same run; the first step after it starts from the
     * same weights and data, so its loss (computed before any update) matches exactly. */
    ck_assert_str_eq(resumed[0], full[0]);
    for (int i = 1; i <= 3; i++) {
        g_auto(GStrv) a = g_strsplit(full[i], ",", -1), b = g_strsplit(resumed[i], ",", -1);
        /* step, tokens, train_loss; tokens_per_s (column 6) is a measurement. */
        for (int col = 0; col < 3; col++)
            ck_assert_str_eq(a[col], b[col]);
        if (i <= 2) {
            for (int col = 3; col < 6; col++)
                ck_assert_str_eq(a[col], b[col]);
        }
    }
    /* run.backend = cuda: refused in a build without it (naming the key), and with it on a
     * machine without a device (a clear error, not an abort); trains where there is one. */
    const char *cuda[] = {"run.backend=cuda", "run.precision=fp32", NULL};
    GError     *no_cuda = NULL;
    if (!test_exec_train(&f, cuda, NULL, 0, FALSE, &sum, &no_cuda)) {
        gboolean absent =
            g_error_matches(no_cuda, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE) &&
            strstr(no_cuda->message, "[run] backend = cuda: this build has no CUDA backend");
        gboolean no_device = g_error_matches(no_cuda, EXEC_ERROR, EXEC_ERROR_BACKEND) &&
                             strstr(no_cuda->message, "no CUDA device is visible");
        ck_assert_msg(absent || no_device, "%s", no_cuda->message);
        g_error_free(no_cuda);
    }
    /* A checkpoint of another layout is refused. */
    const char *other[] = {"pipeline.schedule=gpipe", NULL};
    GError     *mismatch = NULL;
    ck_assert(!test_exec_train(&f, other, ckpt, 0, FALSE, &sum, &mismatch));
    ck_assert(g_error_matches(mismatch, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    g_error_free(mismatch);
    test_exec_train_clear(&f);
}
END_TEST

/* Uninterrupted vs interrupted-and-resumed training (exec-train.h): 4 steps straight, or 2
 * steps, a checkpoint, a new pipeline resuming from it and 2 more steps (both with the
 * boundary at step 2). Every weight, the whole sidecar (optimizer state and counters), every
 * logged value but the measured tokens_per_s and the summary losses are bitwise equal. */
typedef struct {
    const char *sets[6];
} ResumeCase;

static const ResumeCase resume_cases[] = {
    {{"pipeline.schedule=1f1b", NULL}},
    {{"pipeline.schedule=1f1b", "optimizer.name=muon", "optimizer.error_feedback=true", NULL}},
    {{"pipeline.schedule=paci", "pipeline.accumulation=2", "pipeline.microbatches=1", NULL}},
    {{"pipeline.schedule=paci", "pipeline.accumulation=2", "pipeline.microbatches=1",
      "optimizer.name=muon", "optimizer.error_feedback=true", NULL}},
};

START_TEST(test_train_resume_bitwise) {
    const char *const *sets = resume_cases[_i].sets;
    TestExecTrain      straight, cut;
    test_exec_train_init(&straight);
    test_exec_train_init(&cut);
    ExecTrainSummary a, b;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(test_exec_train(&straight, sets, NULL, 0, FALSE, &a, &error), "%s",
                  error ? error->message : "");
    ck_assert_msg(test_exec_train(&cut, sets, NULL, 2, FALSE, &b, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(b.steps, 2);
    g_autofree char *ckpt = g_build_filename(cut.dir, "checkpoints", "step-00000002", NULL);
    ck_assert_msg(test_exec_train(&cut, sets, ckpt, 0, FALSE, &b, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(a.steps, 4);
    ck_assert_int_eq(b.steps, 4);
    ck_assert_int_eq(a.n_skipped + b.n_skipped, 0);
    ck_assert(memcmp(&a.train_loss, &b.train_loss, sizeof(double)) == 0);
    ck_assert(memcmp(&a.val_loss, &b.val_loss, sizeof(double)) == 0);

    g_auto(GStrv) log_a = test_exec_read_lines(straight.dir, "log.csv");
    g_auto(GStrv) log_b = test_exec_read_lines(cut.dir, "log.csv");
    ck_assert_int_eq(g_strv_length(log_a), 5);
    ck_assert_int_eq(g_strv_length(log_b), 5);
    for (int i = 0; i < 5; i++) {
        g_auto(GStrv) ca = g_strsplit(log_a[i], ",", -1), cb = g_strsplit(log_b[i], ",", -1);
        ck_assert_int_eq(g_strv_length(ca), 8);
        ck_assert_int_eq(g_strv_length(cb), 8);
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

    /* The final units' weights and optimizer state (with the counters) are the same files. */
    for (int k = 0; k < 2; k++) {
        const char      *name = k ? "state.safetensors" : "model.safetensors";
        g_autofree char *file_a =
            g_build_filename(straight.dir, "checkpoints", "step-00000004", name, NULL);
        g_autofree char *file_b =
            g_build_filename(cut.dir, "checkpoints", "step-00000004", name, NULL);
        gsize            len_a = 0, len_b = 0;
        g_autofree char *bytes_a = test_util_read_file(file_a, &len_a);
        g_autofree char *bytes_b = test_util_read_file(file_b, &len_b);
        ck_assert_uint_eq(len_a, len_b);
        ck_assert_msg(memcmp(bytes_a, bytes_b, len_a) == 0, "%s differs after resume", name);
    }
    test_exec_train_clear(&straight);
    test_exec_train_clear(&cut);
}
END_TEST

/* pacer-train runs one pipeline of one device per stage with GPT-2's layer: data, tensor or
 * context parallelism, fsdp, grouped-query or latent attention, another head width, SwiGLU,
 * another FFN width or experts (the simulator's keys) is an error naming them, before any
 * step. */
START_TEST(test_train_refuses_layout) {
    TestExecTrain f;
    test_exec_train_init(&f);
    static const struct {
        const char *set[5];
        const char *needle;
    } cases[] = {
        {{"parallel.data=2", NULL}, "runs one process per stage of every replica (mpirun"},
        {{"parallel.distributed_optimizer=true", NULL}, "pacer-train runs one pipeline"},
        {{"parallel.tensor=2", NULL}, "pacer-train runs one pipeline"},
        {{"parallel.context=2", NULL}, "pacer-train runs one pipeline"},
        {{"parallel.fsdp=true", NULL}, "pacer-train runs one pipeline"},
        {{"model.experts=2", "model.experts_per_token=1", NULL}, "mixtures of experts"},
        {{"model.attention=mla", "model.kv_lora_rank=8", "model.qk_nope_head_dim=8",
          "model.v_head_dim=8", NULL},
         "latent attention"},
        {{"model.kv_heads=1", NULL}, "pacer-train trains GPT-2's layer"},
        {{"model.head_dim=8", NULL}, "pacer-train trains GPT-2's layer"},
        {{"model.ffn=swiglu", NULL}, "pacer-train trains GPT-2's layer"},
        {{"model.ffn_hidden=64", NULL}, "pacer-train trains GPT-2's layer"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        ExecTrainSummary sum;
        g_autoptr(GError) error = NULL;
        ck_assert(!test_exec_train(&f, cases[i].set, NULL, 0, FALSE, &sum, &error));
        ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
        ck_assert_msg(strstr(error->message, cases[i].needle) != NULL, "%s", error->message);
    }
    test_exec_train_clear(&f);
}
END_TEST

/* Resume and shard checks: another optimizer, another vocabulary, an optimizer tensor of
 * another shape in the sidecar; train and val shards of different vocabularies. */
START_TEST(test_train_resume_refused) {
    TestExecTrain f;
    test_exec_train_init(&f);
    ExecTrainSummary sum;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(test_exec_train(&f, NULL, NULL, 2, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    const char *ckpt = f.dir;

    const char *muon[] = {"optimizer.name=muon", NULL};
    GError     *err = NULL;
    ck_assert(!test_exec_train(&f, muon, ckpt, 0, FALSE, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, "optimizer.name") != NULL, "%s", err->message);
    g_clear_error(&err);

    /* The fixture's shards carry an all-zero fingerprint. */
    uint8_t other[DATA_BPE_FINGERPRINT_BYTES] = {7};
    ck_assert(!test_exec_train_vocab(&f, NULL, NULL, 0, FALSE, other, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, f.train) != NULL, "%s", err->message);
    g_clear_error(&err);

    /* Shards of another vocabulary: refused next to the zero-fingerprint val shard, and on
     * resuming a checkpoint trained on the zero-fingerprint shards. */
    uint16_t         tokens[64];
    g_autofree char *alt = g_build_filename(f.dir, "other.bin", NULL);
    for (int i = 0; i < 64; i++)
        tokens[i] = (uint16_t)(i % test_exec_train_cfg.V);
    ck_assert(data_shard_write(alt, tokens, 64, test_exec_train_cfg.V, other, NULL));
    TestExecTrain mixed = {.dir = f.dir, .train = f.train, .val = alt};
    ck_assert(!test_exec_train(&mixed, NULL, NULL, 0, FALSE, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, "different vocabularies") != NULL, "%s", err->message);
    g_clear_error(&err);
    TestExecTrain moved = {.dir = f.dir, .train = alt, .val = alt};
    ck_assert(!test_exec_train(&moved, NULL, ckpt, 0, FALSE, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, "vocabulary") != NULL, "%s", err->message);
    g_clear_error(&err);
    g_remove(alt);

    /* A unit whose AdamW m of h.1.mlp.c_fc.weight (pacer (128, 32)) is stored (32, 128). */
    g_autofree char *units = g_build_filename(f.dir, "checkpoints", NULL);
    g_autofree char *step2 = g_build_filename(units, "step-00000002", NULL);
    g_autoptr(ExecCheckpointUnit) unit = exec_checkpoint_unit_open(step2, &err);
    ck_assert_msg(unit != NULL, "%s", err ? err->message : "");
    g_autoptr(GHashTable) meta = NULL;
    g_autoptr(ExecTensorList) none = exec_tensor_list_new();
    ck_assert(exec_checkpoint_unit_read_state(unit, none, &meta, NULL));
    g_autofree char *log = exec_checkpoint_unit_read_log(unit, NULL);
    Gpt2Slice       *slice = test_exec_train_full_slice();
    g_autoptr(ExecTensorList) model = exec_tensor_list_new();
    g_autoptr(ExecTensorList) state = exec_tensor_list_new();
    exec_tensor_list_add_slice(model, slice, gpt2_slice_params(slice), "");
    for (int i = 0; i < gpt2_slice_n_tensors(slice); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(slice, i);
        float            *data = gpt2_slice_params(slice) + t->offset;
        int               r = t->shape[0], c = t->ndim == 1 ? 1 : t->shape[1];
        gboolean          swap = strcmp(t->name, "h.1.mlp.c_fc.weight") == 0;
        g_autofree char  *m = g_strconcat("optim.m.", t->name, NULL);
        g_autofree char  *v = g_strconcat("optim.v.", t->name, NULL);
        exec_tensor_list_add(state, m, data, t->ndim, swap ? c : r, swap ? r : c);
        exec_tensor_list_add(state, v, data, t->ndim, r, c);
    }
    ExecCheckpointUnitData data = {.step = 2,
                                   .run = exec_checkpoint_unit_run(unit),
                                   .model_cfg = &test_exec_train_cfg,
                                   .model = model,
                                   .state = state,
                                   .state_metadata = meta,
                                   .log = log};
    g_autofree char       *written = exec_checkpoint_unit_write(units, &data, &err);
    ck_assert_msg(written != NULL, "%s", err ? err->message : "");
    gpt2_slice_free(slice);
    ck_assert(!test_exec_train(&f, NULL, ckpt, 0, FALSE, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, "\"optim.m.h.1.mlp.c_fc.weight\" has shape (32, 128) in "
                                       "the file, the model expects (128, 32)") != NULL,
                  "%s", err->message);
    g_clear_error(&err);
    test_exec_train_clear(&f);
}
END_TEST

START_TEST(test_train_dynamic) {
    TestExecTrain f;
    test_exec_train_init(&f);
    ExecTrainSummary sum;
    g_autoptr(GError) error = NULL;
    const char *paci[] = {"pipeline.schedule=paci", "pipeline.accumulation=2",
                          "pipeline.microbatches=1", "pipeline.mode=dynamic", NULL};
    ck_assert_msg(test_exec_train(&f, paci, NULL, 0, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(sum.steps, 4);
    /* async-1f1b is PACI with a = 1: its policy runs live too, with PACI's drift N - 1. */
    const char *async[] = {"pipeline.schedule=async-1f1b", "pipeline.microbatches=1",
                           "pipeline.mode=dynamic", NULL};
    ck_assert_msg(test_exec_train(&f, async, NULL, 0, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(sum.steps, 4);
    /* The policy needs PACI's rule: a flush schedule is refused. */
    GError *refused = NULL;
    ck_assert(!test_exec_train(&f, NULL, NULL, 0, TRUE, &sum, &refused));
    ck_assert(g_error_matches(refused, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    g_error_free(refused);
    test_exec_train_clear(&f);
}
END_TEST

int main(void) {
    /* One kernel thread per worker: fair on a shared machine. */
    kern_set_threads(1);
    Suite *s = suite_create("exec-cpu");
    TCase *tc = tcase_create("exec-cpu");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_exec_order_and_deps, 0, G_N_ELEMENTS(order_cases));
    tcase_add_loop_test(tc, test_exec_pipelined_equals_unpipelined, 0, G_N_ELEMENTS(sync_cases));
    tcase_add_loop_test(tc, test_exec_async_versions, 0, G_N_ELEMENTS(async_cases));
    tcase_add_loop_test(tc, test_exec_single_stage_equals_trainer, 0, G_N_ELEMENTS(single_cases));
    tcase_add_test(tc, test_exec_paci_single_stage_is_sync);
    tcase_add_test(tc, test_exec_dynamic_paci);
    tcase_add_test(tc, test_exec_nonfinite_skips_update);
    tcase_add_test(tc, test_exec_nonfinite_stops);
    tcase_add_test(tc, test_exec_shape_mismatch);
    tcase_add_test(tc, test_backend_registry);
    tcase_add_test(tc, test_tensor_copy_calls);
    tcase_add_test(tc, test_evaluate_matches_forward);
    tcase_add_test(tc, test_reports_once);
    tcase_add_test(tc, test_speed_reference);
    suite_add_tcase(s, tc);
    TCase *tt = tcase_create("train");
    tcase_set_timeout(tt, 30);
    tcase_add_test(tt, test_train_outputs);
    tcase_add_test(tt, test_train_resume);
    tcase_add_test(tt, test_train_dynamic);
    tcase_add_loop_test(tt, test_train_resume_bitwise, 0, G_N_ELEMENTS(resume_cases));
    tcase_add_test(tt, test_train_resume_refused);
    tcase_add_test(tt, test_train_refuses_layout);
    suite_add_tcase(s, tt);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
