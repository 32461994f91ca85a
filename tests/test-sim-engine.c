/* SPDX-License-Identifier: MIT
 * test-sim-engine.c: the discrete-event engine against closed forms (docs/design.md §3), exact in
 * integer ns: GPipe/1F1B/interleaved makespans, multi-step runs, peak in-flight, weight
 * versions, PACI's drift and bottleneck-bound step time, memory, trace invariants and
 * determinism, and the cost model built from a scenario.
 */
#include <check.h>
#include <glib/gstdio.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "test-util.h"

static const int32_t test_stage_counts[] = {1, 2, 4, 8};
/* Full-stage F, B, W (ns); every value divisible by 6 so that v = 2 and v = 3 split exactly. */
static const int64_t test_costs[][3] = {
    {6000, 6000, 6000}, {18000, 12000, 6000}, {30000, 30000, 12000}, {12000, 6000, 0}};

/* Sets stage @s's static memory to @bytes (a multiple of 16) with the analytic model's split:
 * weights 6/16, gradients 2/16, optimizer state 8/16. */
static void test_set_static(SimCostModel *cost, int32_t s, int64_t bytes) {
    ck_assert_int_eq(bytes % 16, 0);
    cost->weights_bytes[s] = bytes / 16 * 6;
    cost->grads_bytes[s] = bytes / 16 * 2;
    cost->optim_bytes[s] = bytes / 16 * 8;
    cost->static_bytes[s] = bytes;
}

static SimResult *test_run(const PpSchedule *sched, const SimCostModel *cost) {
    g_autoptr(GError) error = NULL;
    SimResult *res = sim_engine_run(sched, cost, &error);
    if (res == NULL)
        ck_abort_msg("sim_engine_run: %s", error->message);
    ck_assert_int_eq(res->n_ops_simulated, pp_schedule_n_ops_total(sched));
    ck_assert_int_eq(res->trace->n_rows, pp_schedule_n_ops_total(sched));
    return res;
}

/* --- closed forms --- */

/* A closed-form case: N stages, m micro-batches per step, v chunks and the full-stage F, B, W
 * of test_costs[costs]. */
typedef struct {
    const char *name;
    int32_t     n, m, v;
    int         costs;
} TestShapeCase;

/* Every stage count with m in {N, 2N, 3N}, under each cost set. */
static const TestShapeCase flush_cases[] = {
    {"N=1 m=1 costs 0", 1, 1, 1, 0},   {"N=2 m=2 costs 0", 2, 2, 1, 0},
    {"N=4 m=4 costs 0", 4, 4, 1, 0},   {"N=8 m=8 costs 0", 8, 8, 1, 0},
    {"N=1 m=2 costs 0", 1, 2, 1, 0},   {"N=2 m=4 costs 0", 2, 4, 1, 0},
    {"N=4 m=8 costs 0", 4, 8, 1, 0},   {"N=8 m=16 costs 0", 8, 16, 1, 0},
    {"N=1 m=3 costs 0", 1, 3, 1, 0},   {"N=2 m=6 costs 0", 2, 6, 1, 0},
    {"N=4 m=12 costs 0", 4, 12, 1, 0}, {"N=8 m=24 costs 0", 8, 24, 1, 0},
    {"N=1 m=1 costs 1", 1, 1, 1, 1},   {"N=2 m=2 costs 1", 2, 2, 1, 1},
    {"N=4 m=4 costs 1", 4, 4, 1, 1},   {"N=8 m=8 costs 1", 8, 8, 1, 1},
    {"N=1 m=2 costs 1", 1, 2, 1, 1},   {"N=2 m=4 costs 1", 2, 4, 1, 1},
    {"N=4 m=8 costs 1", 4, 8, 1, 1},   {"N=8 m=16 costs 1", 8, 16, 1, 1},
    {"N=1 m=3 costs 1", 1, 3, 1, 1},   {"N=2 m=6 costs 1", 2, 6, 1, 1},
    {"N=4 m=12 costs 1", 4, 12, 1, 1}, {"N=8 m=24 costs 1", 8, 24, 1, 1},
    {"N=1 m=1 costs 2", 1, 1, 1, 2},   {"N=2 m=2 costs 2", 2, 2, 1, 2},
    {"N=4 m=4 costs 2", 4, 4, 1, 2},   {"N=8 m=8 costs 2", 8, 8, 1, 2},
    {"N=1 m=2 costs 2", 1, 2, 1, 2},   {"N=2 m=4 costs 2", 2, 4, 1, 2},
    {"N=4 m=8 costs 2", 4, 8, 1, 2},   {"N=8 m=16 costs 2", 8, 16, 1, 2},
    {"N=1 m=3 costs 2", 1, 3, 1, 2},   {"N=2 m=6 costs 2", 2, 6, 1, 2},
    {"N=4 m=12 costs 2", 4, 12, 1, 2}, {"N=8 m=24 costs 2", 8, 24, 1, 2},
    {"N=1 m=1 costs 3", 1, 1, 1, 3},   {"N=2 m=2 costs 3", 2, 2, 1, 3},
    {"N=4 m=4 costs 3", 4, 4, 1, 3},   {"N=8 m=8 costs 3", 8, 8, 1, 3},
    {"N=1 m=2 costs 3", 1, 2, 1, 3},   {"N=2 m=4 costs 3", 2, 4, 1, 3},
    {"N=4 m=8 costs 3", 4, 8, 1, 3},   {"N=8 m=16 costs 3", 8, 16, 1, 3},
    {"N=1 m=3 costs 3", 1, 3, 1, 3},   {"N=2 m=6 costs 3", 2, 6, 1, 3},
    {"N=4 m=12 costs 3", 4, 12, 1, 3}, {"N=8 m=24 costs 3", 8, 24, 1, 3},
};

/* GPipe and 1F1B-flush: makespan (m+N-1)(F+B+W), bubble (N-1)/(m+N-1), peak in-flight m and
 * min(N-s, m). */
START_TEST(test_flush_closed_form) {
    const TestShapeCase *t = &flush_cases[_i];
    test_util_case(t->name);
    int32_t        n = t->n, m = t->m;
    const int64_t *c = test_costs[t->costs];
    int64_t        fbw = c[0] + c[1] + c[2];
    const char    *kinds[] = {"gpipe", "1f1b"};
    for (int k = 0; k < 2; k++) {
        g_autoptr(PpSchedule) sched = test_util_schedule_new(kinds[k], n, 1, m, 1, 1);
        g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, 1, c[0], c[1], c[2], 0);
        g_autoptr(SimResult) res = test_run(sched, cost);
        ck_assert_int_eq(res->makespan_ns, (m + n - 1) * fbw);
        ck_assert_int_eq(res->step_time_ns, (m + n - 1) * fbw);
        ck_assert_double_eq_tol(res->bubble_fraction, (double)(n - 1) / (m + n - 1), 1e-12);
        ck_assert_double_eq_tol(res->efficiency, (double)m / (m + n - 1), 1e-12);
        for (int32_t s = 0; s < n; s++) {
            ck_assert_int_eq(res->stages[s].busy_ns, m * fbw);
            ck_assert_int_eq(res->stages[s].peak_inflight, k == 0 ? m : MIN(n - s, m));
            ck_assert_int_eq(res->stages[s].peak_activation_bytes, res->stages[s].peak_inflight);
            ck_assert_int_eq(res->stages[s].weight_versions, 1);
            ck_assert_int_eq(res->stages[s].delta_max, 0);
            ck_assert_int_eq(res->stages[s].delay_max, 0);
        }
    }
}
END_TEST

/* The flush shapes with v in {2, 3}, under each cost set. */
static const TestShapeCase interleaved_cases[] = {
    {"N=1 m=1 v=2 costs 0", 1, 1, 2, 0},   {"N=2 m=2 v=2 costs 0", 2, 2, 2, 0},
    {"N=4 m=4 v=2 costs 0", 4, 4, 2, 0},   {"N=8 m=8 v=2 costs 0", 8, 8, 2, 0},
    {"N=1 m=2 v=2 costs 0", 1, 2, 2, 0},   {"N=2 m=4 v=2 costs 0", 2, 4, 2, 0},
    {"N=4 m=8 v=2 costs 0", 4, 8, 2, 0},   {"N=8 m=16 v=2 costs 0", 8, 16, 2, 0},
    {"N=1 m=3 v=2 costs 0", 1, 3, 2, 0},   {"N=2 m=6 v=2 costs 0", 2, 6, 2, 0},
    {"N=4 m=12 v=2 costs 0", 4, 12, 2, 0}, {"N=8 m=24 v=2 costs 0", 8, 24, 2, 0},
    {"N=1 m=1 v=3 costs 0", 1, 1, 3, 0},   {"N=2 m=2 v=3 costs 0", 2, 2, 3, 0},
    {"N=4 m=4 v=3 costs 0", 4, 4, 3, 0},   {"N=8 m=8 v=3 costs 0", 8, 8, 3, 0},
    {"N=1 m=2 v=3 costs 0", 1, 2, 3, 0},   {"N=2 m=4 v=3 costs 0", 2, 4, 3, 0},
    {"N=4 m=8 v=3 costs 0", 4, 8, 3, 0},   {"N=8 m=16 v=3 costs 0", 8, 16, 3, 0},
    {"N=1 m=3 v=3 costs 0", 1, 3, 3, 0},   {"N=2 m=6 v=3 costs 0", 2, 6, 3, 0},
    {"N=4 m=12 v=3 costs 0", 4, 12, 3, 0}, {"N=8 m=24 v=3 costs 0", 8, 24, 3, 0},
    {"N=1 m=1 v=2 costs 1", 1, 1, 2, 1},   {"N=2 m=2 v=2 costs 1", 2, 2, 2, 1},
    {"N=4 m=4 v=2 costs 1", 4, 4, 2, 1},   {"N=8 m=8 v=2 costs 1", 8, 8, 2, 1},
    {"N=1 m=2 v=2 costs 1", 1, 2, 2, 1},   {"N=2 m=4 v=2 costs 1", 2, 4, 2, 1},
    {"N=4 m=8 v=2 costs 1", 4, 8, 2, 1},   {"N=8 m=16 v=2 costs 1", 8, 16, 2, 1},
    {"N=1 m=3 v=2 costs 1", 1, 3, 2, 1},   {"N=2 m=6 v=2 costs 1", 2, 6, 2, 1},
    {"N=4 m=12 v=2 costs 1", 4, 12, 2, 1}, {"N=8 m=24 v=2 costs 1", 8, 24, 2, 1},
    {"N=1 m=1 v=3 costs 1", 1, 1, 3, 1},   {"N=2 m=2 v=3 costs 1", 2, 2, 3, 1},
    {"N=4 m=4 v=3 costs 1", 4, 4, 3, 1},   {"N=8 m=8 v=3 costs 1", 8, 8, 3, 1},
    {"N=1 m=2 v=3 costs 1", 1, 2, 3, 1},   {"N=2 m=4 v=3 costs 1", 2, 4, 3, 1},
    {"N=4 m=8 v=3 costs 1", 4, 8, 3, 1},   {"N=8 m=16 v=3 costs 1", 8, 16, 3, 1},
    {"N=1 m=3 v=3 costs 1", 1, 3, 3, 1},   {"N=2 m=6 v=3 costs 1", 2, 6, 3, 1},
    {"N=4 m=12 v=3 costs 1", 4, 12, 3, 1}, {"N=8 m=24 v=3 costs 1", 8, 24, 3, 1},
    {"N=1 m=1 v=2 costs 2", 1, 1, 2, 2},   {"N=2 m=2 v=2 costs 2", 2, 2, 2, 2},
    {"N=4 m=4 v=2 costs 2", 4, 4, 2, 2},   {"N=8 m=8 v=2 costs 2", 8, 8, 2, 2},
    {"N=1 m=2 v=2 costs 2", 1, 2, 2, 2},   {"N=2 m=4 v=2 costs 2", 2, 4, 2, 2},
    {"N=4 m=8 v=2 costs 2", 4, 8, 2, 2},   {"N=8 m=16 v=2 costs 2", 8, 16, 2, 2},
    {"N=1 m=3 v=2 costs 2", 1, 3, 2, 2},   {"N=2 m=6 v=2 costs 2", 2, 6, 2, 2},
    {"N=4 m=12 v=2 costs 2", 4, 12, 2, 2}, {"N=8 m=24 v=2 costs 2", 8, 24, 2, 2},
    {"N=1 m=1 v=3 costs 2", 1, 1, 3, 2},   {"N=2 m=2 v=3 costs 2", 2, 2, 3, 2},
    {"N=4 m=4 v=3 costs 2", 4, 4, 3, 2},   {"N=8 m=8 v=3 costs 2", 8, 8, 3, 2},
    {"N=1 m=2 v=3 costs 2", 1, 2, 3, 2},   {"N=2 m=4 v=3 costs 2", 2, 4, 3, 2},
    {"N=4 m=8 v=3 costs 2", 4, 8, 3, 2},   {"N=8 m=16 v=3 costs 2", 8, 16, 3, 2},
    {"N=1 m=3 v=3 costs 2", 1, 3, 3, 2},   {"N=2 m=6 v=3 costs 2", 2, 6, 3, 2},
    {"N=4 m=12 v=3 costs 2", 4, 12, 3, 2}, {"N=8 m=24 v=3 costs 2", 8, 24, 3, 2},
    {"N=1 m=1 v=2 costs 3", 1, 1, 2, 3},   {"N=2 m=2 v=2 costs 3", 2, 2, 2, 3},
    {"N=4 m=4 v=2 costs 3", 4, 4, 2, 3},   {"N=8 m=8 v=2 costs 3", 8, 8, 2, 3},
    {"N=1 m=2 v=2 costs 3", 1, 2, 2, 3},   {"N=2 m=4 v=2 costs 3", 2, 4, 2, 3},
    {"N=4 m=8 v=2 costs 3", 4, 8, 2, 3},   {"N=8 m=16 v=2 costs 3", 8, 16, 2, 3},
    {"N=1 m=3 v=2 costs 3", 1, 3, 2, 3},   {"N=2 m=6 v=2 costs 3", 2, 6, 2, 3},
    {"N=4 m=12 v=2 costs 3", 4, 12, 2, 3}, {"N=8 m=24 v=2 costs 3", 8, 24, 2, 3},
    {"N=1 m=1 v=3 costs 3", 1, 1, 3, 3},   {"N=2 m=2 v=3 costs 3", 2, 2, 3, 3},
    {"N=4 m=4 v=3 costs 3", 4, 4, 3, 3},   {"N=8 m=8 v=3 costs 3", 8, 8, 3, 3},
    {"N=1 m=2 v=3 costs 3", 1, 2, 3, 3},   {"N=2 m=4 v=3 costs 3", 2, 4, 3, 3},
    {"N=4 m=8 v=3 costs 3", 4, 8, 3, 3},   {"N=8 m=16 v=3 costs 3", 8, 16, 3, 3},
    {"N=1 m=3 v=3 costs 3", 1, 3, 3, 3},   {"N=2 m=6 v=3 costs 3", 2, 6, 3, 3},
    {"N=4 m=12 v=3 costs 3", 4, 12, 3, 3}, {"N=8 m=24 v=3 costs 3", 8, 24, 3, 3},
};

/* Megatron interleaved with v chunks and per-chunk costs F/v, B/v, W/v: makespan
 * m(F+B+W) + (N-1)(F+B+W)/v; peak in-flight 2(N-s-1) + (v-1)N + 1 chunk units (at most m*v). */
START_TEST(test_interleaved_closed_form) {
    const TestShapeCase *t = &interleaved_cases[_i];
    test_util_case(t->name);
    int32_t        n = t->n, m = t->m, v = t->v;
    const int64_t *c = test_costs[t->costs];
    int64_t        fbw = c[0] + c[1] + c[2];
    g_autoptr(PpSchedule) sched = test_util_schedule_new("interleaved", n, v, m, 1, 1);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, v, c[0] / v, c[1] / v, c[2] / v, 0);
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->makespan_ns, m * fbw + (n - 1) * fbw / v);
    for (int32_t s = 0; s < n; s++) {
        ck_assert_int_eq(res->stages[s].busy_ns, m * fbw);
        ck_assert_int_eq(res->stages[s].peak_inflight,
                         MIN(2 * (n - s - 1) + (v - 1) * n + 1, m * v));
    }
}
END_TEST

/* Each synchronous kind at every stage count. */
static const struct {
    const char *name;
    const char *kind;
    int32_t     n;
} multi_step_cases[] = {
    {"gpipe N=1", "gpipe", 1}, {"1f1b N=1", "1f1b", 1}, {"interleaved N=1", "interleaved", 1},
    {"gpipe N=2", "gpipe", 2}, {"1f1b N=2", "1f1b", 2}, {"interleaved N=2", "interleaved", 2},
    {"gpipe N=4", "gpipe", 4}, {"1f1b N=4", "1f1b", 4}, {"interleaved N=4", "interleaved", 4},
    {"gpipe N=8", "gpipe", 8}, {"1f1b N=8", "1f1b", 8}, {"interleaved N=8", "interleaved", 8},
};

/* Synchronous multi-step runs: steps are separated by a flush, so the makespan of s steps is
 * s times one step and the step time equals one step's makespan. */
START_TEST(test_multi_step) {
    test_util_case(multi_step_cases[_i].name);
    const char *kind = multi_step_cases[_i].kind;
    int32_t     n = multi_step_cases[_i].n;
    int32_t     v = g_str_equal(kind, "interleaved") ? 2 : 1;
    int32_t     m = 2 * n;
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, v, 3000, 2000, 1000, 0);
    g_autoptr(PpSchedule) one = test_util_schedule_new(kind, n, v, m, 1, 1);
    g_autoptr(SimResult) r1 = test_run(one, cost);
    for (int32_t steps = 2; steps <= 3; steps++) {
        g_autoptr(PpSchedule) many = test_util_schedule_new(kind, n, v, m, 1, steps);
        g_autoptr(SimResult) rs = test_run(many, cost);
        ck_assert_int_eq(rs->makespan_ns, steps * r1->makespan_ns);
        ck_assert_int_eq(rs->step_time_ns, r1->makespan_ns);
        ck_assert_double_eq_tol(rs->bubble_fraction, r1->bubble_fraction, 1e-12);
        for (int32_t s = 0; s < n; s++)
            ck_assert_int_eq(rs->stages[s].peak_inflight, r1->stages[s].peak_inflight);
    }
}
END_TEST

/* GPipe with a cross-device hop c = latency + round(bytes / bandwidth): the forward wave
 * and the backward wave each cross N-1 links, so makespan = (m+N-1)(F+B+W) + 2(N-1)c. */
START_TEST(test_gpipe_comm) {
    const int32_t n = 4, m = 6;
    g_autoptr(PpSchedule) sched = test_util_schedule_new("gpipe", n, 1, m, 1, 1);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, 1, 1000, 1500, 500, 70);
    cost->act_msg_bytes = 1000;
    cost->comm_bytes_per_ns = 3.0; /* 333.33 ns, rounded to 333 */
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->makespan_ns, (m + n - 1) * 3000 + 2 * (n - 1) * (70 + 333));
}
END_TEST

/* A hand-built two-stage program with an update: exact start and end of every op. */
START_TEST(test_hand_built) {
    g_autoptr(PpSchedule) sched = pp_schedule_alloc("hand", 2, 1);
    sched->n_mb = 2;
    sched->n_steps = 1;
    sched->mb_per_step = 2;
    sched->synchronous = TRUE;
    sched->n_buffers[0] = sched->n_buffers[1] = 2;
    const PpOp ops[] = {
        {PP_OP_FORWARD, 0, 0, 0, 0},       {PP_OP_FORWARD, 0, 1, 0, 0},
        {PP_OP_BACKWARD_FULL, 0, 0, 0, 0}, {PP_OP_BACKWARD_FULL, 0, 1, 0, 0},
        {PP_OP_UPDATE, 0, -1, -1, 0},      {PP_OP_FORWARD, 1, 0, 0, 0},
        {PP_OP_BACKWARD_FULL, 1, 0, 0, 0}, {PP_OP_FORWARD, 1, 1, 0, 0},
        {PP_OP_BACKWARD_FULL, 1, 1, 0, 0}, {PP_OP_UPDATE, 1, -1, -1, 0},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(ops); i++)
        pp_schedule_append(sched, &ops[i]);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(pp_schedule_finish(sched, &error), "%s", error ? error->message : "");

    /* F 10, B 20, W 5 (BW 25), U 7, hop 3. Stage 0: F0 [0,10] F1 [10,20]; stage 1:
     * F0 [13,23] BW0 [23,48] F1 [48,58] BW1 [58,83] U [83,90]; stage 0: BW0 [51,76]
     * BW1 [86,111] U [111,118]. */
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(2, 1, 10, 20, 5, 3);
    cost->u_ns[0] = cost->u_ns[1] = 7;
    g_autoptr(SimResult) res = test_run(sched, cost);
    const struct {
        int32_t  stage;
        PpOpKind kind;
        int32_t  mb;
        int64_t  start_ns, end_ns;
    } want[] = {
        {0, PP_OP_FORWARD, 0, 0, 10},         {0, PP_OP_FORWARD, 1, 10, 20},
        {1, PP_OP_FORWARD, 0, 13, 23},        {1, PP_OP_BACKWARD_FULL, 0, 23, 48},
        {1, PP_OP_FORWARD, 1, 48, 58},        {0, PP_OP_BACKWARD_FULL, 0, 51, 76},
        {1, PP_OP_BACKWARD_FULL, 1, 58, 83},  {1, PP_OP_UPDATE, -1, 83, 90},
        {0, PP_OP_BACKWARD_FULL, 1, 86, 111}, {0, PP_OP_UPDATE, -1, 111, 118},
    };
    ck_assert_int_eq(res->trace->n_rows, G_N_ELEMENTS(want));
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
        const PpTraceRow *r = &res->trace->rows[i];
        ck_assert_int_eq(r->stage, want[i].stage);
        ck_assert_int_eq(r->kind, want[i].kind);
        ck_assert_int_eq(r->mb, want[i].mb);
        ck_assert_int_eq(r->start_ns, want[i].start_ns);
        ck_assert_int_eq(r->end_ns, want[i].end_ns);
        ck_assert_int_eq(r->version_f, r->kind == PP_OP_UPDATE ? -1 : 0);
        ck_assert_int_eq(r->version_b, r->kind == PP_OP_UPDATE ? -1 : 0);
        ck_assert_int_eq(r->resource, PP_RESOURCE_COMPUTE);
    }
    ck_assert_int_eq(res->makespan_ns, 118);
    ck_assert_int_eq(res->step_time_ns, 118);
    ck_assert_int_eq(res->stages[0].busy_ns, 2 * 10 + 2 * 25 + 7);
    ck_assert_int_eq(res->stages[0].span_ns, 118);
    ck_assert_int_eq(res->stages[1].span_ns, 90 - 13);
    ck_assert_int_eq(res->stages[1].peak_inflight, 1);
    ck_assert_int_eq(res->stages[0].peak_inflight, 2);
    /* C = stage 0's F/B/W span of the step (0..111), busy 70 */
    ck_assert_double_eq_tol(res->bubble_fraction, (111.0 - 70.0) / 111.0, 1e-12);
    ck_assert_double_eq_tol(res->efficiency, (77.0 + 77.0) / (2.0 * 118.0), 1e-12);
}
END_TEST

/* A hand-built split-backward program (B and W): W waits for B on its own device only, B
 * frees act_b_bytes, W the rest; the unit stays in flight until W. */
START_TEST(test_hand_built_split) {
    g_autoptr(PpSchedule) sched = pp_schedule_alloc("hand-split", 2, 1);
    sched->n_mb = 2;
    sched->n_steps = 1;
    sched->mb_per_step = 2;
    sched->synchronous = TRUE;
    sched->split_backward = TRUE;
    sched->n_buffers[0] = sched->n_buffers[1] = 2;
    const PpOp ops[] = {
        {PP_OP_FORWARD, 0, 0, 0, 0},  {PP_OP_FORWARD, 0, 1, 0, 0},  {PP_OP_BACKWARD, 0, 0, 0, 0},
        {PP_OP_BACKWARD, 0, 1, 0, 0}, {PP_OP_WEIGHT, 0, 0, 0, 0},   {PP_OP_WEIGHT, 0, 1, 0, 0},
        {PP_OP_FORWARD, 1, 0, 0, 0},  {PP_OP_BACKWARD, 1, 0, 0, 0}, {PP_OP_FORWARD, 1, 1, 0, 0},
        {PP_OP_BACKWARD, 1, 1, 0, 0}, {PP_OP_WEIGHT, 1, 0, 0, 0},   {PP_OP_WEIGHT, 1, 1, 0, 0},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(ops); i++)
        pp_schedule_append(sched, &ops[i]);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(pp_schedule_finish(sched, &error), "%s", error ? error->message : "");
    /* F 10, B 20, W 5, no comm. Stage 0: F0 [0,10] F1 [10,20]; stage 1: F0 [10,20] B0 [20,40]
     * F1 [40,50] B1 [50,70] W0 [70,75] W1 [75,80]; stage 0: B0 [40,60] B1 [70,90] W0 [90,95]
     * W1 [95,100]. */
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(2, 1, 10, 20, 5, 0);
    for (int32_t st = 0; st < 2; st++) {
        cost->act_bytes[st] = 100;
        cost->act_b_bytes[st] = 60;
        test_set_static(cost, st, 1008);
    }
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->makespan_ns, 100);
    ck_assert_int_eq(res->stages[0].span_ns, 100);
    ck_assert_int_eq(res->stages[1].span_ns, 70);
    /* stage 0 holds both units fully until B0 (200); stage 1 peaks at F1 after B0: 40 + 100 */
    ck_assert_int_eq(res->stages[0].peak_activation_bytes, 200);
    ck_assert_int_eq(res->stages[1].peak_activation_bytes, 140);
    ck_assert_int_eq(res->stages[1].peak_memory_bytes, 1148);
    /* the peaks by category: stage 0 at F1's end (20), stage 1 at F1's end (50) */
    ck_assert_int_eq(res->stages[0].peak_time_ns, 20);
    ck_assert_int_eq(res->stages[0].activation_peak_bytes, 200);
    ck_assert_int_eq(res->stages[1].peak_time_ns, 50);
    ck_assert_int_eq(res->stages[1].activation_peak_bytes, 140);
    ck_assert_int_eq(res->stages[1].stash_peak_bytes, 0);
    ck_assert_ptr_null(res->memory_timeline);
    /* The timeline, by hand: (stage, time, activations) in event order after the two rows
     * at time 0; at time 20 stage 0's F1 ends before stage 1's F0 (lower stage first). */
    const int64_t want[][3] = {{0, 0, 0},   {1, 0, 0},    {0, 10, 100}, {0, 20, 200}, {1, 20, 100},
                               {1, 40, 40}, {1, 50, 140}, {0, 60, 140}, {1, 70, 80},  {1, 75, 40},
                               {1, 80, 0},  {0, 90, 80},  {0, 95, 40},  {0, 100, 0}};
    SimRunOptions options = {.keep_trace = FALSE, .keep_memory_timeline = TRUE};
    g_autoptr(SimResult) timed = sim_engine_run_with(sched, cost, &options, &error);
    ck_assert_msg(timed != NULL, "%s", error ? error->message : "");
    ck_assert_ptr_null(timed->trace);
    ck_assert_int_eq(timed->n_memory_rows, G_N_ELEMENTS(want));
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
        const SimMemoryRow *row = &timed->memory_timeline[i];
        ck_assert_int_eq(row->stage, want[i][0]);
        ck_assert_int_eq(row->time_ns, want[i][1]);
        ck_assert_int_eq(row->activation_bytes, want[i][2]);
        ck_assert_int_eq(row->stash_bytes, 0);
        ck_assert_int_eq(row->total_bytes, 1008 + want[i][2]);
    }
    ck_assert_int_eq(res->stages[0].peak_inflight, 2);
    ck_assert_int_eq(res->stages[1].peak_inflight, 2); /* W0 runs after F1 */
    const PpTraceRow *last = &res->trace->rows[res->trace->n_rows - 1];
    ck_assert_int_eq(last->kind, PP_OP_WEIGHT);
    ck_assert_int_eq(last->start_ns, 95);
    ck_assert_int_eq(last->version_f, 0);
    ck_assert_int_eq(last->version_b, 0);
    ck_assert_double_eq_tol(res->bubble_fraction, (100.0 - 70.0) / 100.0, 1e-12);
}
END_TEST

/* Custom orders (scenarios/orders/) run like generated ones: the 1F1B order for N = 2,
 * m = 3 hits (m+N-1)(F+B+W); the same order with its U rows removed (written to a temporary
 * file) is one step of the same length. */
START_TEST(test_custom_order) {
    g_autofree char *path =
        g_build_filename(PP_SOURCE_ROOT, "scenarios", "orders", "1f1b-n2-m3.csv", NULL);
    PpScheduleParams params = {.kind = pp_sched_kind_lookup("custom"), .order_file = path};
    g_autoptr(GError) error = NULL;
    g_autoptr(PpSchedule) sched = pp_schedule_new(&params, &error);
    ck_assert_msg(sched != NULL, "%s", error ? error->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(2, 1, 3000, 2000, 1000, 0);
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->makespan_ns, (3 + 2 - 1) * 6000);
    ck_assert_int_eq(res->step_time_ns, res->makespan_ns);

    g_autofree char *text = NULL;
    ck_assert(g_file_get_contents(path, &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    GString *kept = g_string_new(NULL);
    for (char **l = lines; *l != NULL; l++) {
        if (**l != '\0' && strstr(*l, ",U,") == NULL)
            g_string_append_printf(kept, "%s\n", *l);
    }
    g_autofree char *no_u = NULL;
    int              fd = g_file_open_tmp("pacer-sim-no-u-XXXXXX.csv", &no_u, NULL);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert(g_file_set_contents(no_u, kept->str, -1, NULL));
    g_string_free(kept, TRUE);
    params.order_file = no_u;
    g_autoptr(PpSchedule) bare = pp_schedule_new(&params, &error);
    ck_assert_msg(bare != NULL, "%s", error ? error->message : "");
    g_autoptr(SimResult) rb = test_run(bare, cost);
    ck_assert_int_eq(rb->makespan_ns, (3 + 2 - 1) * 6000);
    ck_assert_int_eq(rb->step_time_ns, rb->makespan_ns);
    ck_assert_double_eq_tol(rb->bubble_fraction, 1.0 / 4.0, 1e-12);
    g_unlink(no_u);
}
END_TEST

/* --- asynchronous schedules --- */

/* PACI's cases: N in {4, 8}, a in {1, 2, 3, 4}. */
static const struct {
    const char *name;
    int32_t     n, a;
} paci_cases[] = {
    {"N=4 a=1", 4, 1}, {"N=4 a=2", 4, 2}, {"N=4 a=3", 4, 3}, {"N=4 a=4", 4, 4},
    {"N=8 a=1", 8, 1}, {"N=8 a=2", 8, 2}, {"N=8 a=3", 8, 3}, {"N=8 a=4", 8, 4},
};

/* PACI with uniform costs: drift per stage ceil((N-1-s)/a) (gradient delay the same, since
 * B uses the current weights), one weight version, in-flight and activation memory equal
 * to 1F1B's, and a bubble-free steady state: step time a(F+B+W). */
START_TEST(test_paci_uniform) {
    test_util_case(paci_cases[_i].name);
    int32_t       n = paci_cases[_i].n;
    int32_t       a = paci_cases[_i].a;
    const int64_t f = 3000, b = 2000, w = 1000;
    g_autoptr(PpSchedule) sched = test_util_schedule_new("paci", n, 1, 1, a, 4 * n);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, 1, f, b, w, 0);
    g_autoptr(SimResult) res = test_run(sched, cost);
    g_autoptr(PpSchedule) flush = test_util_schedule_new("1f1b", n, 1, 2 * n, 1, 1);
    g_autoptr(SimResult) ref = test_run(flush, cost);
    ck_assert_int_eq(res->step_time_ns, a * (f + b + w));
    ck_assert_double_eq_tol(res->bubble_fraction, 0.0, 1e-12);
    ck_assert_double_eq_tol(res->throughput_samples_per_s, 1e9 / (f + b + w), 1e-6);
    int32_t delta_max = 0;
    for (int32_t s = 0; s < n; s++) {
        const SimStageResult *sr = &res->stages[s];
        int32_t               delta = (n - 1 - s + a - 1) / a;
        ck_assert_int_eq(sr->delta_max, delta);
        ck_assert_int_eq(sr->delay_max, delta);
        ck_assert_int_eq(sr->weight_versions, 1);
        ck_assert_int_eq(sr->peak_inflight, n - s);
        ck_assert_int_eq(sr->peak_inflight, ref->stages[s].peak_inflight);
        ck_assert_int_eq(sr->peak_activation_bytes, ref->stages[s].peak_activation_bytes);
        ck_assert_int_eq(sr->peak_memory_bytes, ref->stages[s].peak_memory_bytes);
        delta_max = MAX(delta_max, delta);
    }
    ck_assert_int_eq(res->delta_max, delta_max);
    /* Trace drift agrees with the per-stage maxima. */
    for (int64_t r = 0; r < res->trace->n_rows; r++) {
        const PpTraceRow *row = &res->trace->rows[r];
        if (row->kind == PP_OP_UPDATE)
            continue;
        ck_assert_int_le(row->version_b - row->version_f, res->stages[row->stage].delta_max);
        ck_assert_int_ge(row->version_b, row->version_f);
    }
}
END_TEST

/* N in {4, 8}, a in {1..4}, slow stage in {0, N/2, N-1}. */
static const struct {
    const char *name;
    int32_t     n, a, slow;
} paci_bottleneck_cases[] = {
    {"N=4 a=1 slow stage 0", 4, 1, 0}, {"N=8 a=1 slow stage 0", 8, 1, 0},
    {"N=4 a=2 slow stage 0", 4, 2, 0}, {"N=8 a=2 slow stage 0", 8, 2, 0},
    {"N=4 a=3 slow stage 0", 4, 3, 0}, {"N=8 a=3 slow stage 0", 8, 3, 0},
    {"N=4 a=4 slow stage 0", 4, 4, 0}, {"N=8 a=4 slow stage 0", 8, 4, 0},
    {"N=4 a=1 slow stage 2", 4, 1, 2}, {"N=8 a=1 slow stage 4", 8, 1, 4},
    {"N=4 a=2 slow stage 2", 4, 2, 2}, {"N=8 a=2 slow stage 4", 8, 2, 4},
    {"N=4 a=3 slow stage 2", 4, 3, 2}, {"N=8 a=3 slow stage 4", 8, 3, 4},
    {"N=4 a=4 slow stage 2", 4, 4, 2}, {"N=8 a=4 slow stage 4", 8, 4, 4},
    {"N=4 a=1 slow stage 3", 4, 1, 3}, {"N=8 a=1 slow stage 7", 8, 1, 7},
    {"N=4 a=2 slow stage 3", 4, 2, 3}, {"N=8 a=2 slow stage 7", 8, 2, 7},
    {"N=4 a=3 slow stage 3", 4, 3, 3}, {"N=8 a=3 slow stage 7", 8, 3, 7},
    {"N=4 a=4 slow stage 3", 4, 4, 3}, {"N=8 a=4 slow stage 7", 8, 4, 7},
};

/* PACI with one slow stage (costs x2): the steady state runs at the bottleneck's rate, one
 * update every a(F+B+W) of the slow stage, and the slow stage never idles. */
START_TEST(test_paci_bottleneck) {
    test_util_case(paci_bottleneck_cases[_i].name);
    int32_t       n = paci_bottleneck_cases[_i].n;
    int32_t       a = paci_bottleneck_cases[_i].a;
    int32_t       slow = paci_bottleneck_cases[_i].slow;
    const int64_t f = 3000, b = 2000, w = 1000;
    g_autoptr(PpSchedule) sched = test_util_schedule_new("paci", n, 1, 1, a, 6 * n);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, 1, f, b, w, 0);
    cost->f_ns[slow] *= 2;
    cost->b_ns[slow] *= 2;
    cost->w_ns[slow] *= 2;
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->step_time_ns, a * 2 * (f + b + w));
    ck_assert_double_eq_tol(res->bubble_fraction, 0.0, 1e-12);
    for (int32_t s = 0; s < n; s++)
        ck_assert_int_eq(res->stages[s].peak_inflight, n - s);
}
END_TEST

/* PACI with a cross-device hop c: stage 0 admits N micro-batches per round trip, and a round
 * trip of N micro-batches takes N(F+B+W) of stage 0's work plus 2(N-1) hops that the window
 * cannot hide, so the steady state runs one micro-batch per F+B+W + 2(N-1)c/N, not at the
 * compute bound. PACI's cases (paci_cases); c chosen so 2(N-1)c/N is whole. */
START_TEST(test_paci_comm) {
    test_util_case(paci_cases[_i].name);
    int32_t       n = paci_cases[_i].n;
    int32_t       a = paci_cases[_i].a;
    const int64_t fbw = 3000 + 2000 + 1000, c = n == 4 ? 200 : 400;
    g_autoptr(PpSchedule) sched = test_util_schedule_new("paci", n, 1, 1, a, 8 * n);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, 1, 3000, 2000, 1000, c);
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->step_time_ns, a * (fbw + 2 * (n - 1) * c / n));
}
END_TEST

/* PipeDream (stashing, update after every backward): N-s weight versions, drift 0 (B uses
 * its F's version), gradient delay N-s-1, memory static + (N-s-1) copies + (N-s) units.
 * 2BW (update every m backwards, m >= N): at most 2 versions, drift 0, delay at most 1.
 * Loop index: N in {1, 2, 4, 8}. */
START_TEST(test_stashed_versions) {
    int32_t n = test_stage_counts[_i];
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, 1, 3000, 2000, 1000, 0);
    for (int32_t s = 0; s < n; s++) {
        test_set_static(cost, s, 1000000);
        cost->weight_copy_bytes[s] = 1000;
    }
    g_autoptr(PpSchedule) pd = test_util_schedule_new("pipedream", n, 1, 1, 1, 4 * n);
    g_autoptr(SimResult) rpd = test_run(pd, cost);
    for (int32_t s = 0; s < n; s++) {
        const SimStageResult *sr = &rpd->stages[s];
        ck_assert_int_eq(sr->weight_versions, n - s);
        ck_assert_int_eq(sr->delta_max, 0);
        ck_assert_int_eq(sr->delay_max, n - s - 1);
        ck_assert_int_eq(sr->peak_inflight, n - s);
        ck_assert_int_eq(sr->peak_memory_bytes, 1000000 + (n - s - 1) * 1000 + (n - s));
    }
    g_autoptr(PpSchedule) tbw = test_util_schedule_new("2bw", n, 1, n, 1, 4);
    g_autoptr(SimResult) rtbw = test_run(tbw, cost);
    for (int32_t s = 0; s < n; s++) {
        const SimStageResult *sr = &rtbw->stages[s];
        /* the last stage runs each F right before its BW: a U never falls in between */
        ck_assert_int_eq(sr->weight_versions, s < n - 1 ? 2 : 1);
        ck_assert_int_eq(sr->delta_max, 0);
        ck_assert_int_eq(sr->delay_max, s < n - 1 ? 1 : 0);
    }
    /* async-1f1b: PACI with a = 1, current weights. */
    g_autoptr(PpSchedule) as = test_util_schedule_new("async-1f1b", n, 1, 1, 1, 4 * n);
    g_autoptr(SimResult) ras = test_run(as, cost);
    for (int32_t s = 0; s < n; s++) {
        ck_assert_int_eq(ras->stages[s].weight_versions, 1);
        ck_assert_int_eq(ras->stages[s].delta_max, n - 1 - s);
        ck_assert_int_eq(ras->stages[s].peak_memory_bytes, 1000000 + (n - s));
    }
}
END_TEST

/* --- dynamic mode --- */

/* paci with N in {1, 2, 4, 8}, a in {1..4}, then async-1f1b, PACI's policy with a = 1, with
 * N in {1, 2, 4, 8}, asked for a = 3: its registry row fixes a = 1 whatever
 * params.accumulation says. a is the accumulation the program has; params_a the one asked. */
static const struct {
    const char *name;
    const char *kind;
    int32_t     n, a, params_a;
} policy_cases[] = {
    {"paci N=1 a=1", "paci", 1, 1, 1},
    {"paci N=2 a=1", "paci", 2, 1, 1},
    {"paci N=4 a=1", "paci", 4, 1, 1},
    {"paci N=8 a=1", "paci", 8, 1, 1},
    {"paci N=1 a=2", "paci", 1, 2, 2},
    {"paci N=2 a=2", "paci", 2, 2, 2},
    {"paci N=4 a=2", "paci", 4, 2, 2},
    {"paci N=8 a=2", "paci", 8, 2, 2},
    {"paci N=1 a=3", "paci", 1, 3, 3},
    {"paci N=2 a=3", "paci", 2, 3, 3},
    {"paci N=4 a=3", "paci", 4, 3, 3},
    {"paci N=8 a=3", "paci", 8, 3, 3},
    {"paci N=1 a=4", "paci", 1, 4, 4},
    {"paci N=2 a=4", "paci", 2, 4, 4},
    {"paci N=4 a=4", "paci", 4, 4, 4},
    {"paci N=8 a=4", "paci", 8, 4, 4},
    {"async-1f1b N=1 a=1", "async-1f1b", 1, 1, 3},
    {"async-1f1b N=2 a=1", "async-1f1b", 2, 1, 3},
    {"async-1f1b N=4 a=1", "async-1f1b", 4, 1, 3},
    {"async-1f1b N=8 a=1", "async-1f1b", 8, 1, 3},
};

/* The live policy with uniform costs (and comm) executes exactly the static program of its
 * kind and gives the same reports. */
START_TEST(test_policy_matches_static) {
    test_util_case(policy_cases[_i].name);
    const char   *kind = policy_cases[_i].kind;
    int32_t       n = policy_cases[_i].n;
    int32_t       a = policy_cases[_i].a;
    const int32_t steps = 3 * n;
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, 1, 3000, 2000, 1000, 0);
    PpScheduleParams params =
        test_util_schedule_params(kind, n, 1, 1, policy_cases[_i].params_a, steps);
    g_autoptr(GError) error = NULL;
    PpSchedule *program_raw = NULL;
    g_autoptr(SimResult) live = sim_engine_run_policy(&params, cost, &program_raw, &error);
    ck_assert_msg(live != NULL, "%s", error ? error->message : "");
    g_autoptr(PpSchedule) program = program_raw;
    g_autoptr(PpSchedule) fixed = test_util_schedule_new(kind, n, 1, 1, a, steps);
    g_autoptr(SimResult) ref = test_run(fixed, cost);
    ck_assert_str_eq(program->kind, kind);
    ck_assert_int_eq(program->mb_per_step, a);
    for (int32_t s = 0; s < n; s++) {
        ck_assert_int_eq(program->n_ops[s], fixed->n_ops[s]);
        for (int32_t i = 0; i < fixed->n_ops[s]; i++) {
            const PpOp *x = &program->programs[s][i], *y = &fixed->programs[s][i];
            ck_assert(x->kind == y->kind && x->mb == y->mb && x->chunk == y->chunk);
        }
        ck_assert_int_eq(live->stages[s].delta_max, ref->stages[s].delta_max);
        ck_assert_int_eq(live->stages[s].peak_inflight, ref->stages[s].peak_inflight);
    }
    ck_assert_int_eq(live->makespan_ns, ref->makespan_ns);
    ck_assert_int_eq(live->step_time_ns, ref->step_time_ns);
    ck_assert_int_eq(live->trace->n_rows, ref->trace->n_rows);
}
END_TEST

/* The slow stage of an 8-stage pipeline: first, middle, last. */
static const struct {
    const char *name;
    int32_t     slow;
} heterogeneous_cases[] = {
    {"slow stage 0", 0},
    {"slow stage 3", 3},
    {"slow stage 7", 7},
};

/* With a slow stage and link latency the policy still respects backpressure (in-flight at
 * most N-s) and runs at the bottleneck's rate. */
START_TEST(test_policy_heterogeneous) {
    test_util_case(heterogeneous_cases[_i].name);
    const int32_t n = 8, a = 4;
    int32_t       slow = heterogeneous_cases[_i].slow;
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, 1, 3000, 2000, 1000, 100);
    cost->f_ns[slow] = 9000;
    cost->b_ns[slow] = 6000;
    cost->w_ns[slow] = 3000;
    PpScheduleParams params = test_util_schedule_params("paci", n, 1, 1, a, 40);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimResult) live = sim_engine_run_policy(&params, cost, NULL, &error);
    ck_assert_msg(live != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(live->step_time_ns, a * 18000);
    for (int32_t s = 0; s < n; s++) {
        ck_assert_int_le(live->stages[s].peak_inflight, n - s);
        ck_assert_int_eq(live->stages[s].weight_versions, 1);
    }
}
END_TEST

START_TEST(test_policy_errors) {
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(4, 1, 1, 1, 1, 0);
    PpScheduleParams params = test_util_schedule_params("1f1b", 4, 1, 4, 1, 1);
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(sim_engine_run_policy(&params, cost, NULL, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
    ck_assert_ptr_nonnull(strstr(error->message, "1f1b"));
    g_clear_error(&error);
    params.kind = pp_sched_kind_lookup("paci");
    params.accumulation = 0;
    ck_assert_ptr_null(sim_engine_run_policy(&params, cost, NULL, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
    g_clear_error(&error);
    params.accumulation = 2;
    params.n_stages = 5;
    ck_assert_ptr_null(sim_engine_run_policy(&params, cost, NULL, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
}
END_TEST

/* --- trace and consistency --- */

/* The trace is sorted by start, covers every op once, respects durations, program order and
 * every dependency (+ comm across devices); two runs give identical rows. Loop index: kind. */
START_TEST(test_trace_invariants) {
    const struct {
        const char *kind;
        int32_t     v, m, a, steps;
    } cases[] = {{"1f1b", 1, 8, 1, 2},       {"interleaved", 2, 8, 1, 2}, {"paci", 1, 1, 3, 10},
                 {"pipedream", 1, 1, 1, 12}, {"gpipe", 1, 5, 1, 1},       {"zb-h1", 1, 8, 1, 2},
                 {"2bw", 1, 4, 1, 3}};
    const int32_t n = 4;
    const int64_t comm = 250;
    g_autoptr(PpSchedule) sched = test_util_schedule_new(cases[_i].kind, n, cases[_i].v,
                                                         cases[_i].m, cases[_i].a, cases[_i].steps);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(n, cases[_i].v, 1100, 1300, 700, comm);
    for (int32_t s = 0; s < n; s++)
        cost->u_ns[s] = 90 + s;
    g_autoptr(SimResult) r1 = test_run(sched, cost);
    g_autoptr(SimResult) r2 = test_run(sched, cost);
    const PpTrace *t = r1->trace;

    /* op id -> row, through the schedule's (mb, vs, kind) index; U rows by (stage, step) */
    int32_t             n_ops = pp_schedule_n_ops_total(sched);
    g_autofree int64_t *row_of = g_new(int64_t, n_ops);
    for (int32_t id = 0; id < n_ops; id++)
        row_of[id] = -1;
    for (int64_t r = 0; r < t->n_rows; r++) {
        const PpTraceRow *row = &t->rows[r];
        const PpTraceRow *other = &r2->trace->rows[r];
        ck_assert(row->stage == other->stage && row->kind == other->kind && row->mb == other->mb &&
                  row->chunk == other->chunk && row->step == other->step &&
                  row->start_ns == other->start_ns && row->end_ns == other->end_ns &&
                  row->version_f == other->version_f && row->version_b == other->version_b &&
                  row->resource == other->resource);
        if (r > 0)
            ck_assert_int_le(t->rows[r - 1].start_ns, row->start_ns);
        int32_t id = -1;
        if (row->kind == PP_OP_UPDATE) {
            for (int32_t i = 0, u = 0; i < sched->n_ops[row->stage]; i++)
                if (sched->programs[row->stage][i].kind == PP_OP_UPDATE && u++ == row->step)
                    id = sched->op_offset[row->stage] + i;
        } else {
            id = pp_schedule_find_op(sched, row->kind, row->mb,
                                     pp_schedule_vstage(sched, row->stage, row->chunk));
        }
        ck_assert_int_ge(id, 0);
        ck_assert_int_eq(row_of[id], -1); /* each op once */
        row_of[id] = r;
    }
    for (int32_t s = 0; s < n; s++) {
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            int32_t           id = sched->op_offset[s] + i;
            const PpTraceRow *row = &t->rows[row_of[id]];
            const PpOp       *op = &sched->programs[s][i];
            const int64_t     durs[PP_OP_N_KINDS] = {[PP_OP_FORWARD] = 1100,
                                                     [PP_OP_BACKWARD] = 1300,
                                                     [PP_OP_WEIGHT] = 700,
                                                     [PP_OP_BACKWARD_FULL] = 2000,
                                                     [PP_OP_UPDATE] = 90 + s};
            int64_t           dur = durs[op->kind];
            ck_assert_int_eq(row->end_ns - row->start_ns, dur);
            if (op->kind != PP_OP_UPDATE) {
                /* versions as the schedule core defines them */
                int32_t vs = pp_schedule_vstage(sched, s, op->chunk);
                int32_t f_id = pp_schedule_find_op(sched, PP_OP_FORWARD, op->mb, vs);
                int32_t b_id = pp_schedule_find_op(
                    sched, sched->split_backward ? PP_OP_BACKWARD : PP_OP_BACKWARD_FULL, op->mb,
                    vs);
                ck_assert_int_eq(row->version_f,
                                 pp_schedule_version_used(sched, pp_schedule_op_ref(sched, f_id)));
                ck_assert_int_eq(row->version_b,
                                 pp_schedule_version_used(sched, pp_schedule_op_ref(sched, b_id)));
            }
            if (i > 0) /* in order on the device, never overlapping */
                ck_assert_int_le(t->rows[row_of[id - 1]].end_ns, row->start_ns);
            int32_t        n_deps;
            const PpOpRef *deps = pp_schedule_deps(sched, (PpOpRef){s, i}, &n_deps);
            for (int32_t d = 0; d < n_deps; d++) {
                const PpTraceRow *dep = &t->rows[row_of[pp_schedule_op_id(sched, deps[d])]];
                ck_assert_int_ge(row->start_ns, dep->end_ns + (deps[d].stage == s ? 0 : comm));
            }
        }
    }
}
END_TEST

START_TEST(test_cost_mismatch) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", 4, 1, 4, 1, 1);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(3, 1, 1, 1, 1, 0);
    g_autoptr(GError) error = NULL;
    SimResult *res = sim_engine_run(sched, cost, &error);
    ck_assert_ptr_null(res);
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
    ck_assert_ptr_nonnull(strstr(error->message, "4 stages"));
}
END_TEST

/* Times and bytes int64 cannot hold are a GError before the run, not a wrapped clock (issue
 * 6: the engine aborted on "time never goes backwards"); just below the limit the run keeps
 * the exact closed form. */
START_TEST(test_engine_bounds) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", 4, 1, 8, 1, 1);
    const int64_t big = INT64_C(1) << 55; /* 4 stages x 8 x 3 ops: 3 x 2^60 ns in all */
    g_autoptr(SimCostModel) fits = sim_cost_new_uniform(4, 1, big, big, big, 0);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimResult) res = sim_engine_run(sched, fits, &error);
    ck_assert_ptr_nonnull(res);
    ck_assert_int_eq(res->makespan_ns, (8 + 4 - 1) * 3 * big); /* (m + N - 1)(F + B + W) */

    g_autoptr(SimCostModel) slow = sim_cost_new_uniform(4, 1, 4 * big, 4 * big, 4 * big, 0);
    ck_assert_ptr_null(sim_engine_run(sched, slow, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "clock of 2^62 ns"));
    g_clear_error(&error);

    /* 4 units in flight on stage 0, 2^61 bytes each. */
    g_autoptr(SimCostModel) heavy = sim_cost_new_uniform(4, 1, 1, 1, 1, 0);
    for (int32_t i = 0; i < 4; i++)
        heavy->act_bytes[i] = INT64_C(1) << 61;
    ck_assert_ptr_null(sim_engine_run(sched, heavy, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "limit of 2^62 bytes"));
    g_clear_error(&error);

    /* The live policy is bounded before it runs. */
    PpScheduleParams params = test_util_schedule_params("paci", 4, 1, 0, 2, 4);
    ck_assert_ptr_null(sim_engine_run_policy(&params, slow, NULL, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "clock of 2^62 ns"));
}
END_TEST

/* An unfinished schedule (no dependency graph) breaks the engine's contract: abort. */
START_TEST(test_unfinished_aborts) {
    PpSchedule   *sched = pp_schedule_alloc("raw", 1, 1);
    SimCostModel *cost = sim_cost_new_uniform(1, 1, 1, 1, 1, 0);
    sim_engine_run(sched, cost, NULL);
}
END_TEST

/* --- cost model from a scenario --- */

static void test_scenario_fill(PpScenario *sc) {
    *sc = (PpScenario){0};
    sc->path = (char *)"inline.ini";
    sc->model =
        (PpModelParams){.layers = 26, .hidden = 1024, .heads = 16, .seq_len = 1024, .vocab = 50257};
    sc->hardware.peak_flops = 1e15;
    sc->hardware.link_bw_bytes_per_s = 50e9;
    sc->hardware.link_latency_ns = 10000;
    sc->hardware.mem_bw_bytes_per_s = 2e12;
    sc->hardware.kernel_eff_max = 0.6; /* the [hardware] key table's defaults */
    sc->hardware.kernel_eff_half_tokens = 2048;
    sc->pipeline.stages = 4;
    sc->pipeline.chunks = 1;
    sc->pipeline.microbatch_size = 2;
    sc->pipeline.partition = (char *)"even"; /* the closed forms below assume the even split */
    sc->pipeline.schedule = (char *)"1f1b";
    sc->pipeline.kind = pp_sched_kind_lookup("1f1b");
    sc->model.recompute = (char *)"none";
    sc->parallel.data = 1;
    sc->parallel.tensor = 1;
}

/* Analytic model: 26 layers over 4 stages = 7, 7, 6, 6; FLOPs 24bsh^2 + 4bs^2h per layer,
 * LM head 2bshV on the last stage, B = W = F, time = FLOPs / (peak * eff(2048 tokens) = 0.3). */
START_TEST(test_cost_analytic) {
    PpScenario sc;
    test_scenario_fill(&sc);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(&sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    const double b = 2, s = 1024, h = 1024, V = 50257, a = 16;
    ck_assert_double_eq_tol(sim_cost_kernel_efficiency(&sc.hardware, 2048, 1024.0), 0.3, 1e-15);
    const int32_t layers[] = {7, 7, 6, 6};
    double        total = 0;
    for (int32_t st = 0; st < 4; st++) {
        double flops = layers[st] * (24 * b * s * h * h + 4 * b * s * s * h) +
                       (st == 3 ? 2 * b * s * h * V : 0);
        total += 3 * flops;
        int64_t f_ns = llround(flops / (1e15 * 0.3) * 1e9);
        ck_assert_int_eq(cost->f_ns[st], f_ns);
        ck_assert_int_eq(cost->b_ns[st], f_ns);
        ck_assert_int_eq(cost->w_ns[st], f_ns);
        double params = layers[st] * (12 * h * h + 13 * h) + (st == 0 ? V * h + s * h : 0) +
                        (st == 3 ? V * h + 2 * h : 0);
        /* + the pipeline buffers: a received gradient and a sent activation, 2bsh bytes each */
        ck_assert_int_eq(cost->buffer_bytes[st], llround(2 * 2 * b * s * h));
        /* 6 + 4 + 8 bytes per parameter: fp32 gradients, grad_bytes' default for bf16 */
        ck_assert_int_eq(cost->static_bytes[st], llround(params * 18) + llround(2 * 2 * b * s * h));
        ck_assert_int_eq(cost->weight_copy_bytes[st], llround(params * 2));
        ck_assert_int_eq(cost->u_ns[st], llround(params * 28 / 2e12 * 1e9));
        double logits = st == 3 ? b * s * V * 6 : 0;
        ck_assert_int_eq(cost->act_bytes[st],
                         llround(layers[st] * s * b * (34 * h + 5 * a * s) + logits));
        ck_assert_int_eq(cost->act_b_bytes[st],
                         llround(layers[st] * s * b * (2 * h + 5 * a * s) + logits));
    }
    ck_assert_int_eq(cost->act_msg_bytes, 2 * 1024 * 1024 * 2);
    ck_assert_int_eq(cost->comm_latency_ns, 10000);
    ck_assert_double_eq_tol(cost->comm_bytes_per_ns, 50.0, 1e-12);
    ck_assert_int_eq(cost->tokens_per_mb, 2048);
    ck_assert_int_eq(cost->samples_per_mb, 2);
    ck_assert_double_eq_tol(cost->flops_per_mb, total, total * 1e-12);
    ck_assert_double_eq_tol(cost->peak_flops, 1e15, 1);
}
END_TEST

/* model.flash_attention drops the 5as term: 34sbh bytes per layer (M_B = 2sbh) plus the
 * logits; off gives Korthikanti's sb(34h + 5as). Times and static bytes do not change. */
START_TEST(test_cost_flash_attention) {
    PpScenario sc;
    test_scenario_fill(&sc);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimCostModel) off = sim_cost_new_from_scenario(&sc, &error);
    ck_assert_msg(off != NULL, "%s", error ? error->message : "");
    sc.model.flash_attention = TRUE;
    g_autoptr(SimCostModel) on = sim_cost_new_from_scenario(&sc, &error);
    ck_assert_msg(on != NULL, "%s", error ? error->message : "");
    const double  b = 2, s = 1024, h = 1024, V = 50257, a = 16;
    const int32_t layers[] = {7, 7, 6, 6};
    for (int32_t st = 0; st < 4; st++) {
        double logits = st == 3 ? b * s * V * 6 : 0;
        ck_assert_int_eq(on->act_bytes[st], llround(34 * s * b * h * layers[st] + logits));
        ck_assert_int_eq(on->act_b_bytes[st], llround(2 * s * b * h * layers[st] + logits));
        ck_assert_int_eq(off->act_bytes[st],
                         llround(s * b * h * (34 + 5 * a * s / h) * layers[st] + logits));
        ck_assert_int_eq(off->act_b_bytes[st],
                         llround(s * b * h * (2 + 5 * a * s / h) * layers[st] + logits));
        /* M_F = M_B + M_W with the same M_W = 32sbh either way */
        ck_assert_int_eq(on->act_bytes[st] - on->act_b_bytes[st],
                         off->act_bytes[st] - off->act_b_bytes[st]);
        ck_assert_int_eq(on->f_ns[st], off->f_ns[st]);
        ck_assert_int_eq(on->static_bytes[st], off->static_bytes[st]);
    }
}
END_TEST

/* hardware.kernel_eff_max and kernel_eff_half_tokens set the efficiency curve: max 0.5,
 * half 1000 at 2048 tokens gives F = FLOPs / (peak * 0.5 * 2048 / 3048); half 0 is flat. */
START_TEST(test_cost_kernel_efficiency_keys) {
    PpScenario sc;
    test_scenario_fill(&sc);
    sc.hardware.kernel_eff_max = 0.5;
    sc.hardware.kernel_eff_half_tokens = 1000;
    ck_assert_double_eq(sim_cost_kernel_efficiency(&sc.hardware, 2048, 1024.0),
                        0.5 * 2048 / 3048.0);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(&sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    const double  b = 2, s = 1024, h = 1024, V = 50257;
    const int32_t layers[] = {7, 7, 6, 6};
    for (int32_t st = 0; st < 4; st++) {
        double flops = layers[st] * (24 * b * s * h * h + 4 * b * s * s * h) +
                       (st == 3 ? 2 * b * s * h * V : 0);
        int64_t f_ns = llround(flops / (1e15 * (0.5 * 2048 / (2048 + 1000.0))) * 1e9);
        ck_assert_int_eq(cost->f_ns[st], f_ns);
        ck_assert_int_eq(cost->b_ns[st], f_ns);
        ck_assert_int_eq(cost->w_ns[st], f_ns);
    }

    sc.hardware.kernel_eff_max = 1.0;
    sc.hardware.kernel_eff_half_tokens = 0;
    ck_assert_double_eq(sim_cost_kernel_efficiency(&sc.hardware, 2048, 1024.0), 1.0);
    g_autoptr(SimCostModel) flat = sim_cost_new_from_scenario(&sc, &error);
    ck_assert_msg(flat != NULL, "%s", error ? error->message : "");
    double flops0 = 7 * (24 * b * s * h * h + 4 * b * s * s * h);
    ck_assert_int_eq(flat->f_ns[0], llround(flops0 / 1e15 * 1e9));
}
END_TEST

/* [costs] given: full-stage times split evenly over chunks, comm_us is the whole hop. */
START_TEST(test_cost_explicit) {
    PpScenario sc;
    test_scenario_fill(&sc);
    sc.pipeline.chunks = 2;
    sc.costs = (PpCostParams){.set = TRUE,
                              .forward_ns = 18522000,
                              .backward_ns = 18086000,
                              .weight_ns = 9337000,
                              .comm_ns = 601000,
                              .update_ns = 5000};
    g_autoptr(GError) error = NULL;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(&sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    for (int32_t i = 0; i < 8; i++) {
        ck_assert_int_eq(cost->f_ns[i], 9261000);
        ck_assert_int_eq(cost->b_ns[i], 9043000);
        ck_assert_int_eq(cost->w_ns[i], 4668500);
    }
    for (int32_t st = 0; st < 4; st++)
        ck_assert_int_eq(cost->u_ns[st], 5000);
    ck_assert_int_eq(cost->comm_latency_ns, 601000);
    ck_assert_double_eq(cost->comm_bytes_per_ns, 0.0);
    /* 26 layers over 8 virtual stages vs = chunk * 4 + stage: 4, 4, 3, 3, 3, 3, 3, 3 */
    ck_assert_int_gt(cost->act_bytes[0 * 2 + 0], cost->act_bytes[0 * 2 + 1]);
    ck_assert_int_eq(cost->act_bytes[2 * 2 + 0], cost->act_bytes[0 * 2 + 1]);
}
END_TEST

/* run.layers_per_stage overrides the even split; a wrong entry count is an error. The hop
 * and the searching generators' parameters derive from the model. */
/* Per-stage [costs] lists and a fused backward that differs from B + W: the cost model takes
 * each stage's entry, and 1F1B's busy time per stage is m(F + BW) + U with the fused time. */
START_TEST(test_cost_per_stage) {
    static const char text[] = "[model]\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\n"
                               "vocab = 100\n[pipeline]\nschedule = 1f1b\nstages = 2\n"
                               "microbatches = 4\nmicrobatch_size = 1\n[training]\nsteps = 2\n"
                               "[costs]\nforward_us = 10, 30\nbackward_us = 20\n"
                               "weight_us = 5, 15\nupdate_us = 7, 9\n"
                               "fused_backward_us = 21, 40\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(text, "per-stage.ini", NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    static const int64_t f[] = {10000, 30000}, w[] = {5000, 15000}, u[] = {7000, 9000},
                         bw[] = {21000, 40000};
    for (int32_t st = 0; st < 2; st++) {
        ck_assert_int_eq(cost->f_ns[st], f[st]);
        ck_assert_int_eq(cost->b_ns[st], 20000);
        ck_assert_int_eq(cost->w_ns[st], w[st]);
        ck_assert_int_eq(cost->u_ns[st], u[st]);
        ck_assert_int_eq(sim_cost_bw_ns(cost, st), bw[st]);
    }
    g_autoptr(PpSchedule) sched = test_util_scenario_schedule_new(sc);
    g_autoptr(SimResult) res = test_run(sched, cost);
    for (int32_t st = 0; st < 2; st++)
        ck_assert_int_eq(res->stages[st].busy_ns, 2 * (4 * (f[st] + bw[st]) + u[st]));
    /* Without fused_backward_us the same run charges B + W. */
    const char *const plain[] = {"costs.fused_backward_us=", NULL};
    g_autoptr(GError) err2 = NULL;
    g_autoptr(PpScenario) sc2 = pp_scenario_load_data(text, "per-stage.ini", plain, &err2);
    ck_assert_ptr_null(sc2); /* an empty list is an error, not "absent" */
}
END_TEST

/* [costs] stash_us: under weight stashing (2bw, pipedream) the first forward of every weight
 * version on a stage pays the copy, so busy = sum(F + BW + U) + versions x stash; 1f1b, which
 * does not stash, pays nothing. */
START_TEST(test_cost_stash_copy) {
    static const char *const kinds[] = {"2bw", "pipedream", "1f1b"};
    for (size_t k = 0; k < G_N_ELEMENTS(kinds); k++) {
        g_autofree char *text = g_strdup_printf(
            "[model]\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 100\n"
            "[pipeline]\nschedule = %s\nstages = 2\nmicrobatches = 4\nmicrobatch_size = 1\n"
            "[training]\nsteps = 3\n[costs]\nforward_us = 10\nbackward_us = 20\n"
            "update_us = 5\nstash_us = 7, 9\n",
            kinds[k]);
        g_autoptr(GError) error = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(text, "stash.ini", NULL, &error);
        ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
        g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
        ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
        g_autoptr(PpSchedule) sched = test_util_scenario_schedule_new(sc);
        g_autoptr(SimResult) res = test_run(sched, cost);
        gboolean stashed = sched->weight_mode == PP_WEIGHTS_STASHED;
        for (int32_t st = 0; st < 2; st++) {
            int64_t busy = 0;
            int32_t versions = 0, last = -1;
            for (int32_t i = 0; i < sched->n_ops[st]; i++) {
                const PpOp *op = &sched->programs[st][i];
                busy += op->kind == PP_OP_FORWARD ? 10000 : op->kind == PP_OP_UPDATE ? 5000 : 20000;
                int32_t v = sched->version[sched->op_offset[st] + i];
                if (op->kind == PP_OP_FORWARD && v != last) {
                    versions++;
                    last = v;
                }
            }
            ck_assert_int_gt(versions, 1);
            ck_assert_int_eq(res->stages[st].busy_ns,
                             busy + (stashed ? versions * (st == 0 ? 7000 : 9000) : 0));
        }
    }
}
END_TEST

START_TEST(test_cost_layers_and_params) {
    PpScenario sc;
    test_scenario_fill(&sc);
    int32_t layers[] = {8, 6, 6, 6};
    sc.run.layers_per_stage = layers;
    sc.run.n_layers_per_stage = 4;
    g_autoptr(GError) error = NULL;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(&sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    const double b = 2, s = 1024, h = 1024, V = 50257;
    for (int32_t st = 0; st < 4; st++) {
        double flops = layers[st] * (24 * b * s * h * h + 4 * b * s * s * h) +
                       (st == 3 ? 2 * b * s * h * V : 0);
        ck_assert_int_eq(cost->f_ns[st], llround(flops / (1e15 * 0.3) * 1e9));
    }
    /* hop: 10 us + 4 MiB at 50 B/ns */
    ck_assert_int_eq(sim_cost_comm_ns(cost), 10000 + llround(4194304.0 / 50.0));
    PpScheduleParams params = test_util_schedule_params("zb-1p", 4, 0, 0, 0, 0);
    sim_cost_schedule_params(cost, &params);
    ck_assert_int_eq(params.f_ns,
                     MAX(MAX(cost->f_ns[0], cost->f_ns[1]), MAX(cost->f_ns[2], cost->f_ns[3])));
    ck_assert_int_eq(params.w_ns, params.f_ns);
    ck_assert_int_eq(params.comm_ns, sim_cost_comm_ns(cost));
    ck_assert_str_eq(params.kind->name, "zb-1p");

    sc.run.layers_per_stage = layers;
    sc.run.n_layers_per_stage = 3;
    ck_assert_ptr_null(sim_cost_new_from_scenario(&sc, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "run.layers_per_stage"));
}
END_TEST

START_TEST(test_cost_errors) {
    PpScenario sc;
    test_scenario_fill(&sc);
    sc.hardware.peak_flops = 0;
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(sim_cost_new_from_scenario(&sc, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "hardware.peak_tflops"));
    g_clear_error(&error);
    test_scenario_fill(&sc);
    sc.model.hidden = 0;
    ck_assert_ptr_null(sim_cost_new_from_scenario(&sc, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "model.hidden"));
    g_clear_error(&error);
    /* hand-built scenarios bypass the key table's ranges; the cost model checks them too */
    test_scenario_fill(&sc);
    sc.hardware.kernel_eff_max = 0;
    ck_assert_ptr_null(sim_cost_new_from_scenario(&sc, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "hardware.kernel_eff_max"));
    g_clear_error(&error);
    test_scenario_fill(&sc);
    sc.hardware.kernel_eff_half_tokens = -1;
    ck_assert_ptr_null(sim_cost_new_from_scenario(&sc, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "hardware.kernel_eff_half_tokens"));
}
END_TEST

/* --- pipeline.partition on the README's scenario --- */

/* Runs scenarios/default.ini with @overrides (NULL-terminated) as pacer-sim does in static
 * mode. Returns: (transfer full), or NULL with @error set by the cost model. */
static SimResult *test_partition_run(const char *const *overrides, GError **error) {
    g_autofree char *path = g_build_filename(PP_SOURCE_ROOT, "scenarios", "default.ini", NULL);
    g_autoptr(PpScenario) sc = pp_scenario_load(path, overrides, error);
    ck_assert_msg(sc != NULL, "%s", *error ? (*error)->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, error);
    if (cost == NULL)
        return NULL;
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    sim_cost_schedule_params(cost, &params);
    g_autoptr(PpSchedule) sched = test_util_schedule_build(&params);
    SimResult *res = sim_engine_run(sched, cost, error);
    ck_assert_msg(res != NULL, "%s", *error ? (*error)->message : "");
    return res;
}

/* GPT-2 Medium in 8 stages: the even split (3 layers each) leaves the LM head (~3.5 layers of
 * FLOPs) on top of the last stage's 3 layers; the cost-balanced split gives it 1 layer and
 * lowers the step time of 1F1B and PACI. */
START_TEST(test_partition_default_balanced) {
    const char *const schedules[] = {"pipeline.schedule=1f1b", "pipeline.schedule=paci"};
    for (size_t i = 0; i < G_N_ELEMENTS(schedules); i++) {
        g_autoptr(GError) error = NULL;
        const char *even_set[] = {schedules[i], "pipeline.partition=even", NULL};
        const char *bal_set[] = {schedules[i], "pipeline.partition=balanced", NULL};
        g_autoptr(SimResult) even = test_partition_run(even_set, &error);
        g_autoptr(SimResult) balanced = test_partition_run(bal_set, &error);
        ck_assert_ptr_nonnull(even);
        ck_assert_ptr_nonnull(balanced);
        ck_assert_int_lt(balanced->step_time_ns, even->step_time_ns);
        /* the last stage ran the head on 3 layers, now on 1: busy drops by 2 layers' work */
        ck_assert_int_lt(balanced->stages[7].busy_ns, even->stages[7].busy_ns);
    }
}
END_TEST

/* With hardware.memory_gib = 40 the unconstrained split's stage 0 (3 layers, 8 micro-batches
 * in flight under 1F1B) exceeds the device; the constrained split fits every stage, and a
 * device too small for any split is an error naming the limit. */
START_TEST(test_partition_default_memory) {
    const int64_t limit = INT64_C(40) << 30; // bytes
    g_autoptr(GError) error = NULL;
    const char *free_set[] = {"pipeline.schedule=1f1b", NULL};
    g_autoptr(SimResult) unconstrained = test_partition_run(free_set, &error);
    ck_assert_ptr_nonnull(unconstrained);
    ck_assert_int_gt(unconstrained->stages[0].peak_memory_bytes, limit);
    const char *fit_set[] = {"pipeline.schedule=1f1b", "hardware.memory_gib=40", NULL};
    g_autoptr(SimResult) fitted = test_partition_run(fit_set, &error);
    ck_assert_ptr_nonnull(fitted);
    for (int32_t st = 0; st < fitted->n_stages; st++)
        ck_assert_int_le(fitted->stages[st].peak_memory_bytes, limit);

    const char *tiny_set[] = {"pipeline.schedule=1f1b", "hardware.memory_gib=10", NULL};
    ck_assert_ptr_null(test_partition_run(tiny_set, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "default.ini"));
    ck_assert_ptr_nonnull(
        strstr(error->message, "over the limit of 9.938 GiB (10670309376 bytes)"));
    ck_assert_ptr_nonnull(strstr(error->message, "hardware.memory_gib"));
}
END_TEST

/* --- memory by category --- */

/* Schedules of the memory invariants on N = 4 stages with the analytic model's bytes. */
typedef struct {
    const char *kind;
    int32_t     n_chunks, m, a, n_steps;
} MemoryCase;

static const MemoryCase memory_cases[] = {
    {"1f1b", 1, 8, 1, 2}, {"gpipe", 1, 8, 1, 2}, {"pipedream", 1, 1, 1, 16},  {"2bw", 1, 4, 1, 4},
    {"paci", 1, 1, 4, 8}, {"zb-h1", 1, 8, 1, 2}, {"interleaved", 2, 8, 1, 2},
};

/* Activation changes of @stage replayed from the trace (program order; F adds act, B frees
 * act_b, W the rest, BW all): the (end_ns, activations) pairs where the value changes.
 * Returns: (transfer full) (element-type int64_t[2]). */
static GArray *test_memory_act_changes(const SimResult *res, const SimCostModel *cost,
                                       int32_t stage) {
    GArray *changes = g_array_new(FALSE, FALSE, 2 * sizeof(int64_t));
    int64_t act = 0;
    for (int64_t r = 0; r < res->trace->n_rows; r++) {
        const PpTraceRow *row = &res->trace->rows[r];
        if (row->stage != stage || row->kind == PP_OP_UPDATE)
            continue;
        int32_t unit = stage * cost->n_chunks + row->chunk;
        int64_t before = act;
        if (row->kind == PP_OP_FORWARD)
            act += cost->act_bytes[unit];
        else if (row->kind == PP_OP_BACKWARD)
            act -= cost->act_b_bytes[unit];
        else if (row->kind == PP_OP_WEIGHT)
            act -= cost->act_bytes[unit] - cost->act_b_bytes[unit];
        else
            act -= cost->act_bytes[unit];
        if (act != before) {
            int64_t pair[2] = {row->end_ns, act};
            g_array_append_val(changes, pair);
        }
    }
    return changes;
}

/* Per stage: the peak total is static + stash + activations at its moment, the parts within
 * their own peaks; the timeline's rows add up, come in time order, reach each peak (first at
 * peak_time_ns, with the same parts) and each category's maximum, and their activation
 * changes replay the trace's; a run without the timeline reports the same. Closed forms:
 * 1F1B/GPipe hold min(N-s, m)/m units at the peak, PipeDream stashes N-s-1 copies, 2BW at
 * most 1; current-weight schedules none. Loop index: memory_cases. */
START_TEST(test_memory_invariants) {
    const MemoryCase *c = &memory_cases[_i];
    const int32_t     n = 4;
    PpScenario        sc;
    test_scenario_fill(&sc);
    sc.pipeline.chunks = c->n_chunks;
    g_autoptr(GError) error = NULL;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(&sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    g_autoptr(PpSchedule) sched =
        test_util_schedule_new(c->kind, n, c->n_chunks, c->m, c->a, c->n_steps);
    SimRunOptions options = {.keep_trace = TRUE, .keep_memory_timeline = TRUE};
    g_autoptr(SimResult) res = sim_engine_run_with(sched, cost, &options, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");
    SimRunOptions bare_options = {.keep_trace = FALSE, .keep_memory_timeline = FALSE};
    g_autoptr(SimResult) bare = sim_engine_run_with(sched, cost, &bare_options, &error);
    ck_assert_msg(bare != NULL, "%s", error ? error->message : "");
    ck_assert_ptr_null(bare->memory_timeline);
    ck_assert_int_eq(bare->n_memory_rows, 0);
    ck_assert_int_le(res->n_memory_rows, n + pp_schedule_n_ops_total(sched));

    for (int32_t s = 0; s < n; s++) {
        const SimStageResult *sr = &res->stages[s];
        ck_assert_mem_eq(sr, &bare->stages[s], sizeof *sr);
        /* categories: 6 + 4 + 8 bytes per parameter (fp32 gradients), and the buffers */
        ck_assert_int_eq(cost->weights_bytes[s] + cost->grads_bytes[s] + cost->optim_bytes[s] +
                             cost->buffer_bytes[s],
                         cost->static_bytes[s]);
        ck_assert_int_eq(2 * cost->weights_bytes[s], 3 * cost->grads_bytes[s]);
        ck_assert_int_eq(cost->optim_bytes[s], 2 * cost->grads_bytes[s]);
        ck_assert_int_gt(cost->grads_bytes[s], 0);

        ck_assert_int_eq(sr->peak_memory_bytes,
                         cost->static_bytes[s] + sr->stash_peak_bytes + sr->activation_peak_bytes);
        ck_assert_int_le(sr->stash_peak_bytes, sr->peak_stash_bytes);
        ck_assert_int_le(sr->activation_peak_bytes, sr->peak_activation_bytes);
        ck_assert_int_eq(sr->peak_stash_bytes,
                         (int64_t)(sr->weight_versions - 1) * cost->weight_copy_bytes[s]);

        /* The timeline of stage s. */
        int64_t  max_total = -1, max_stash = -1, max_act = -1, last_ns = 0;
        int64_t  n_rows = 0, prev_act = -1;
        gboolean seen_peak = FALSE;
        g_autoptr(GArray) act_changes = test_memory_act_changes(res, cost, s);
        guint n_changes = 0;
        for (int64_t i = 0; i < res->n_memory_rows; i++) {
            const SimMemoryRow *row = &res->memory_timeline[i];
            if (i > 0)
                ck_assert_int_ge(row->time_ns, res->memory_timeline[i - 1].time_ns);
            if (row->stage != s)
                continue;
            if (n_rows++ == 0) {
                /* first: time 0, static only */
                ck_assert_int_eq(row->time_ns, 0);
                ck_assert_int_eq(row->activation_bytes + row->stash_bytes, 0);
            }
            ck_assert_int_ge(row->time_ns, last_ns);
            last_ns = row->time_ns;
            ck_assert_int_eq(row->total_bytes,
                             cost->static_bytes[s] + row->stash_bytes + row->activation_bytes);
            if (!seen_peak && row->total_bytes == sr->peak_memory_bytes) {
                seen_peak = TRUE;
                ck_assert_int_eq(row->time_ns, sr->peak_time_ns);
                ck_assert_int_eq(row->stash_bytes, sr->stash_peak_bytes);
                ck_assert_int_eq(row->activation_bytes, sr->activation_peak_bytes);
            }
            max_total = MAX(max_total, row->total_bytes);
            max_stash = MAX(max_stash, row->stash_bytes);
            max_act = MAX(max_act, row->activation_bytes);
            if (n_rows > 1 && row->activation_bytes != prev_act) {
                ck_assert_uint_lt(n_changes, act_changes->len);
                const int64_t *want = &g_array_index(act_changes, int64_t, 2 * n_changes);
                ck_assert_int_eq(row->time_ns, want[0]);
                ck_assert_int_eq(row->activation_bytes, want[1]);
                n_changes++;
            }
            prev_act = row->activation_bytes;
        }
        ck_assert_uint_eq(n_changes, act_changes->len);
        ck_assert(seen_peak);
        ck_assert_int_eq(max_total, sr->peak_memory_bytes);
        ck_assert_int_eq(max_stash, sr->peak_stash_bytes);
        ck_assert_int_eq(max_act, sr->peak_activation_bytes);

        /* closed forms */
        int64_t act = cost->act_bytes[s];
        if (strcmp(c->kind, "1f1b") == 0 || strcmp(c->kind, "gpipe") == 0) {
            int64_t units = strcmp(c->kind, "gpipe") == 0 ? c->m : MIN(n - s, c->m);
            ck_assert_int_eq(sr->peak_activation_bytes, units * act);
            ck_assert_int_eq(sr->activation_peak_bytes, units * act);
        }
        if (strcmp(c->kind, "pipedream") == 0) {
            ck_assert_int_eq(sr->peak_stash_bytes, (n - s - 1) * cost->weight_copy_bytes[s]);
            ck_assert_int_eq(sr->stash_peak_bytes, (n - s - 1) * cost->weight_copy_bytes[s]);
        } else if (strcmp(c->kind, "2bw") == 0) {
            ck_assert_int_le(sr->peak_stash_bytes, cost->weight_copy_bytes[s]);
        } else {
            ck_assert_int_eq(sr->peak_stash_bytes, 0);
        }
    }
}
END_TEST

/* A cost model whose static bytes are not the sum of their categories breaks the engine's
 * contract: abort. */
START_TEST(test_memory_split_mismatch_aborts) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", 2, 1, 2, 1, 1);
    SimCostModel *cost = sim_cost_new_uniform(2, 1, 1, 1, 1, 0);
    cost->static_bytes[1] = 16;
    sim_engine_run(sched, cost, NULL);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sim-engine");
    TCase *tc = tcase_create("closed-forms");
    tcase_add_loop_test(tc, test_flush_closed_form, 0, G_N_ELEMENTS(flush_cases));
    tcase_add_loop_test(tc, test_interleaved_closed_form, 0, G_N_ELEMENTS(interleaved_cases));
    tcase_add_loop_test(tc, test_multi_step, 0, G_N_ELEMENTS(multi_step_cases));
    tcase_add_test(tc, test_gpipe_comm);
    tcase_add_test(tc, test_hand_built);
    tcase_add_test(tc, test_hand_built_split);
    tcase_add_test(tc, test_custom_order);
    suite_add_tcase(s, tc);

    tc = tcase_create("async");
    tcase_add_loop_test(tc, test_paci_uniform, 0, G_N_ELEMENTS(paci_cases));
    tcase_add_loop_test(tc, test_paci_bottleneck, 0, G_N_ELEMENTS(paci_bottleneck_cases));
    tcase_add_loop_test(tc, test_paci_comm, 0, G_N_ELEMENTS(paci_cases));
    tcase_add_loop_test(tc, test_stashed_versions, 0, 4);
    suite_add_tcase(s, tc);

    tc = tcase_create("policy");
    tcase_add_loop_test(tc, test_policy_matches_static, 0, G_N_ELEMENTS(policy_cases));
    tcase_add_loop_test(tc, test_policy_heterogeneous, 0, G_N_ELEMENTS(heterogeneous_cases));
    tcase_add_test(tc, test_policy_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("trace");
    tcase_add_loop_test(tc, test_trace_invariants, 0, 7);
    tcase_add_test(tc, test_cost_mismatch);
    tcase_add_test(tc, test_engine_bounds);
    tcase_add_test_raise_signal(tc, test_unfinished_aborts, SIGABRT);
    suite_add_tcase(s, tc);

    tc = tcase_create("cost");
    tcase_add_test(tc, test_cost_analytic);
    tcase_add_test(tc, test_cost_flash_attention);
    tcase_add_test(tc, test_cost_kernel_efficiency_keys);
    tcase_add_test(tc, test_cost_explicit);
    tcase_add_test(tc, test_cost_per_stage);
    tcase_add_test(tc, test_cost_stash_copy);
    tcase_add_test(tc, test_cost_layers_and_params);
    tcase_add_test(tc, test_cost_errors);
    tcase_add_test(tc, test_partition_default_balanced);
    tcase_add_test(tc, test_partition_default_memory);
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_add_loop_test(tc, test_memory_invariants, 0, G_N_ELEMENTS(memory_cases));
    tcase_add_test_raise_signal(tc, test_memory_split_mismatch_aborts, SIGABRT);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
