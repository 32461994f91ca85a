/* SPDX-License-Identifier: MIT
 * test-exec-conformance.c: the numbers every backend of the executor must reproduce, checked on
 * the backend this program links (test-exec-conformance.h; one program per backend the build
 * has): executed order == program, the measured trace obeys the dependencies, pipelined ==
 * unpipelined bitwise for synchronous schedules, weight versions and drift equal the program's
 * for asynchronous ones, one stash copy per weight version, dynamic mode and its replay,
 * non-finite gradients, the schedule check, state by name, evaluate, reports handed over once,
 * and an interrupted-and-resumed training run equal to an uninterrupted one. The tiny GPT-2
 * is fed by a synthetic xorshift token source (no corpus needed).
 */
#include "test-exec-conformance.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec-train.h"
#include "exec.h"
#include "kern-pool.h"
#include "pp-error.h"
#include "pp-trace.h"
#include "test-exec-util.h"
#include "test-util.h"

/* Tiny model: L=4, C=32, NH=2, T=16, V=61 (padded 128), B=2 sequences per micro-batch. */

ExecPipelineParams test_conf_params(const PpSchedule *shape) {
    ExecPipelineParams p = test_exec_tiny_params(shape);
    test_backend.select(&p);
    return p;
}

double test_conf_run_collect(const TestExecCase *c, ExecPipelineParams p, ExecRunResult **res_out,
                             GHashTable **grads, GHashTable **params) {
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    TestExecGrads store;
    test_exec_grads_init(&store);
    p.shape = sched;
    /* Clipping is per stage (exec.h): only without it is a split run the same math. */
    p.grad_clip = 0.0f;
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

const char **test_conf_sets(const char *const *backend_sets, const char *const *sets) {
    GPtrArray *all = g_ptr_array_new();
    for (const char *const *s = backend_sets; s && *s; s++)
        g_ptr_array_add(all, (gpointer)*s);
    for (const char *const *s = sets; s && *s; s++)
        g_ptr_array_add(all, (gpointer)*s);
    g_ptr_array_add(all, NULL);
    return (const char **)g_ptr_array_free(all, FALSE);
}

/* --- executed order and measured dependencies --- */

static const TestExecCase order_cases[] = {
    {"gpipe", 2, 1, 3, 1, 2},      {"1f1b", 4, 1, 4, 1, 1},  {"interleaved", 2, 2, 4, 1, 1},
    {"pipedream", 3, 1, 1, 1, 6},  {"2bw", 2, 1, 3, 1, 2},   {"async-1f1b", 4, 1, 1, 1, 6},
    {"paci", 4, 1, 1, 2, 3},       {"zb-h1", 2, 1, 4, 1, 1}, {"zb-h2", 2, 1, 4, 1, 1},
    {"zb-1p", 2, 1, 4, 1, 1},      {"zb-2p", 2, 1, 4, 1, 1}, {"zb-v", 2, 2, 4, 1, 1},
    {"dualpipe-v", 2, 2, 4, 1, 2}, {"1f1b", 4, 1, 4, 1, 2},  {"pipedream", 3, 1, 1, 1, 4},
};

START_TEST(test_exec_order_and_deps) {
    const TestExecCase *c = &order_cases[_i];
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    ExecPipelineParams p = test_conf_params(sched);
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
            /* One queue per stage: ops run back to back in program order. */
            if (i > 0)
                ck_assert_int_ge(row->start_ns, trace->rows[sched->op_offset[s] + i - 1].end_ns);
            int32_t        n_deps;
            const PpOpRef *deps = pp_schedule_deps(sched, (PpOpRef){s, i}, &n_deps);
            for (int32_t d = 0; d < n_deps; d++) {
                const PpTraceRow *dep = &trace->rows[pp_schedule_op_id(sched, deps[d])];
                ck_assert_msg(row->start_ns + test_backend.cross_stage_slack_ns >= dep->end_ns,
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
    /* two updates: the second step starts from the first one's weights and optimizer state */
    {"1f1b", 4, 1, 4, 1, 2},
    {"interleaved", 2, 2, 4, 1, 2},
    {"zb-h1", 4, 1, 4, 1, 2},
};

START_TEST(test_exec_pipelined_equals_unpipelined) {
    const TestExecCase *c = &sync_cases[_i];
    const TestExecCase  ref_case = {"gpipe", 1, 1, c->m, 1, c->steps};
    g_autoptr(PpSchedule) shape = test_util_schedule_new("gpipe", 1, 1, 1, 1, 1);
    ExecPipelineParams p = test_conf_params(shape);
    g_autoptr(GHashTable) ref_grads = NULL, ref_params = NULL, grads = NULL, params = NULL;
    double ref_loss = test_conf_run_collect(&ref_case, p, NULL, &ref_grads, &ref_params);
    double loss = test_conf_run_collect(c, p, NULL, &grads, &params);
    /* Same kernels on the same shapes, micro-batch gradients accumulated in mb order on
     * every stage (on a GPU, cuBLASLt's algorithm a function of the shape alone): the split
     * changes no summation order, so the match is bitwise. */
    ck_assert_msg(loss == ref_loss, "%s: loss %.9g vs %.9g", c->kind, loss, ref_loss);
    ck_assert_double_eq(test_exec_max_rel_diff(grads, ref_grads), 0.0);
    ck_assert_double_eq(test_exec_max_rel_diff(params, ref_params), 0.0);
}
END_TEST

/* --- asynchronous schedules: versions and drift --- */

static const TestExecCase async_cases[] = {
    {"pipedream", 4, 1, 1, 1, 10}, {"2bw", 4, 1, 4, 1, 4},  {"async-1f1b", 4, 1, 1, 1, 10},
    {"paci", 4, 1, 1, 2, 5},       {"paci", 3, 1, 1, 3, 4}, {"pipedream", 4, 1, 1, 1, 8},
    {"2bw", 4, 1, 4, 1, 3},
};

START_TEST(test_exec_async_versions) {
    const TestExecCase *c = &async_cases[_i];
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, c->n_stages, c->n_chunks, c->m, c->a, c->steps);
    ExecPipelineParams p = test_conf_params(sched);
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
        ck_assert_int_gt(stale, 0); /* backwards really ran on stashed copies */
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
    for (int32_t mb = 0; mb < sched->n_mb; mb++)
        ck_assert(isfinite(res->loss[mb]));
}
END_TEST

/* paci on one stage is plain synchronous accumulation over a micro-batches (bitwise). */
START_TEST(test_exec_paci_single_stage_is_sync) {
    const TestExecCase paci = {"paci", 1, 1, 1, 4, 3}, sync = {"gpipe", 1, 1, 4, 1, 3};
    g_autoptr(PpSchedule) shape = test_util_schedule_new("gpipe", 1, 1, 1, 1, 1);
    ExecPipelineParams p = test_conf_params(shape);
    g_autoptr(GHashTable) g1 = NULL, p1 = NULL, g2 = NULL, p2 = NULL;
    double l1 = test_conf_run_collect(&paci, p, NULL, &g1, &p1);
    double l2 = test_conf_run_collect(&sync, p, NULL, &g2, &p2);
    ck_assert(l1 == l2);
    ck_assert_double_eq(test_exec_max_rel_diff(g1, g2), 0.0);
    ck_assert_double_eq(test_exec_max_rel_diff(p1, p2), 0.0);
}
END_TEST

/* --- dynamic mode: PACI's policy run live --- */

/* Steps of each dynamic run. */
static const int32_t dynamic_steps[] = {6, 4};

START_TEST(test_exec_dynamic_paci) {
    const int32_t N = 4, a = 2, steps = dynamic_steps[_i], n_mb = steps * a;
    g_autoptr(PpSchedule) shape = test_util_schedule_new("paci", N, 1, 1, a, steps);
    ExecPipelineParams p = test_conf_params(shape);
    g_autoptr(ExecPipeline) dyn = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpSchedule) program = NULL;
    const ExecDynamicParams run = {
        .kind = pp_sched_kind_lookup("paci"), .mb_per_step = a, .n_mb = n_mb};
    g_autoptr(ExecRunResult) res = exec_pipeline_run_dynamic(dyn, &run, 0, &program, &error);
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
    ExecPipelineParams p = test_conf_params(sched);
    p.poison_update = 1;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(ExecRunResult) r0 = test_exec_run(pipeline, sched);
    ck_assert_int_eq(r0->n_skipped, 0);
    ck_assert(isfinite(r0->grad_norm[0][0]) && r0->grad_norm[0][0] > 0.0);
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
    ExecPipelineParams p = test_conf_params(sched);
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

/* A replay starts from no gradients: a replay stopped inside an accumulation window leaves its
 * gradients behind, and prepare() must drop them, so that gradients left in every tensor give
 * bitwise the weights of a fresh pipeline after the next replay. */
START_TEST(test_exec_replay_drops_left_grads) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    ExecPipelineParams p = test_conf_params(sched);
    g_autoptr(ExecPipeline) left = test_exec_pipeline_new(&p);
    g_autoptr(ExecPipeline) fresh = test_exec_pipeline_new(&p);
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(left); vs++) {
        for (int i = 0; i < exec_pipeline_n_tensors(left, vs); i++) {
            const ExecTensor *t = exec_pipeline_tensor(left, vs, i);
            g_autofree float *g = g_new(float, t->numel);
            for (size_t k = 0; k < t->numel; k++)
                g[k] = 0.25f;
            ck_assert(
                exec_pipeline_tensor_set(left, vs, t->name, EXEC_TENSOR_GRADS, g, t->numel, NULL));
        }
    }
    g_autoptr(ExecRunResult) r_left = test_exec_run(left, sched);
    g_autoptr(ExecRunResult) r_fresh = test_exec_run(fresh, sched);
    g_autoptr(GHashTable) w_left = test_exec_gather_params(left);
    g_autoptr(GHashTable) w_fresh = test_exec_gather_params(fresh);
    ck_assert_double_eq(test_exec_max_rel_diff(w_left, w_fresh), 0.0);
}
END_TEST

START_TEST(test_exec_shape_mismatch) {
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    g_autoptr(PpSchedule) other = test_util_schedule_new("1f1b", 4, 1, 4, 1, 1);
    ExecPipelineParams p = test_conf_params(shape);
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(exec_pipeline_run(pipeline, other, 0, &error));
    ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_SHAPE));
}
END_TEST

/* Tensors cross the contract by name: set then get round-trips every role a tensor has, and
 * every wrong name, role or size is refused with EXEC_ERROR_TENSOR. */
START_TEST(test_tensor_copy_calls) {
    g_autoptr(PpSchedule) shape = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    ExecPipelineParams p = test_conf_params(shape);
    p.optim.kind = KERN_OPTIM_MUON;
    p.optim.error_feedback = 1;
    g_autoptr(ExecPipeline) pipeline = test_exec_pipeline_new(&p);
    g_autoptr(GError) error = NULL;
    int n_muon = 0;
    for (int32_t vs = 0; vs < exec_pipeline_n_vstages(pipeline); vs++) {
        for (int i = 0; i < exec_pipeline_n_tensors(pipeline, vs); i++) {
            const ExecTensor *t = exec_pipeline_tensor(pipeline, vs, i);
            /* The blocks' matrices: "h.<l>.attn.c_attn.weight" and the like. */
            gboolean muon = t->is_matrix && g_str_has_prefix(t->name, "h.");
            n_muon += muon;
            /* Muon drives the blocks' matrices, AdamW the rest; error feedback everything. */
            ck_assert_int_eq(!!(t->roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_MUON_MOMENTUM)), muon);
            ck_assert_int_eq(!!(t->roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_ADAM_M)), !muon);
            ck_assert_int_eq(!!(t->roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_ADAM_V)), !muon);
            ck_assert(t->roles & EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_PREV_UPDATE));
            g_autofree float *src = g_new(float, t->numel);
            g_autofree float *dst = g_new(float, t->numel);
            for (int r = 0; r < EXEC_TENSOR_N_ROLES; r++) {
                if (!(t->roles & EXEC_TENSOR_ROLE_BIT(r)))
                    continue;
                for (size_t k = 0; k < t->numel; k++)
                    src[k] = (float)(r * 1000 + (int)(k % 997)) * 0.5f;
                ck_assert(exec_pipeline_tensor_set(pipeline, vs, t->name, r, src, t->numel, NULL));
                ck_assert(exec_pipeline_tensor_get(pipeline, vs, t->name, r, dst, t->numel, NULL));
                ck_assert_int_eq(memcmp(src, dst, t->numel * sizeof(float)), 0);
            }
            /* One float short, one too many. */
            const size_t wrong[] = {t->numel - 1, t->numel + 1};
            for (size_t w = 0; w < G_N_ELEMENTS(wrong); w++) {
                ck_assert(!exec_pipeline_tensor_get(pipeline, vs, t->name, EXEC_TENSOR_PARAMS, dst,
                                                    wrong[w], &error));
                ck_assert(g_error_matches(error, EXEC_ERROR, EXEC_ERROR_TENSOR));
                g_clear_error(&error);
            }
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
        ExecPipelineParams p = test_conf_params(sched);
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
    ExecPipelineParams p = test_conf_params(sched);
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
    g_autofree const char **sets = test_conf_sets(test_backend.train_sets, resume_cases[_i].sets);
    TestExecTrain           straight, cut;
    test_exec_train_init(&straight);
    test_exec_train_init(&cut);
    ExecTrainSummary a, b;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(test_exec_train(&straight, sets, NULL, 0, FALSE, &a, &error), "%s",
                  error ? error->message : "");
    ck_assert_msg(test_exec_train(&cut, sets, NULL, 2, FALSE, &b, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(b.steps, 2);
    if (test_backend.accounts_memory) {
        ck_assert_int_gt(b.actual_bytes, 0);
        g_auto(GStrv) memory = test_exec_read_lines(cut.dir, "memory.csv");
        ck_assert_int_eq(g_strv_length(memory), 3); /* header + 2 stages */
    }
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

int main(void) {
    /* One kernel thread per worker: fair on a shared machine. */
    kern_set_threads(1);
    g_autofree char *name = g_strdup_printf("exec-conformance-%s", test_backend.name);
    Suite           *s = suite_create(name);
    TCase           *tc = tcase_create("contract");
    tcase_set_timeout(tc, test_backend.timeout_s);
    tcase_add_loop_test(tc, test_exec_order_and_deps, 0, G_N_ELEMENTS(order_cases));
    tcase_add_loop_test(tc, test_exec_pipelined_equals_unpipelined, 0, G_N_ELEMENTS(sync_cases));
    tcase_add_loop_test(tc, test_exec_async_versions, 0, G_N_ELEMENTS(async_cases));
    tcase_add_test(tc, test_exec_paci_single_stage_is_sync);
    tcase_add_loop_test(tc, test_exec_dynamic_paci, 0, G_N_ELEMENTS(dynamic_steps));
    tcase_add_test(tc, test_exec_nonfinite_skips_update);
    tcase_add_test(tc, test_exec_nonfinite_stops);
    tcase_add_test(tc, test_exec_replay_drops_left_grads);
    tcase_add_test(tc, test_exec_shape_mismatch);
    tcase_add_test(tc, test_tensor_copy_calls);
    tcase_add_test(tc, test_evaluate_matches_forward);
    tcase_add_test(tc, test_reports_once);
    tcase_add_loop_test(tc, test_train_resume_bitwise, 0, G_N_ELEMENTS(resume_cases));
    suite_add_tcase(s, tc);
    TCase *own = tcase_create(test_backend.name);
    tcase_set_timeout(own, test_backend.timeout_s);
    test_backend.add_own(own);
    suite_add_tcase(s, own);
    return test_backend.run(s);
}
