/* SPDX-License-Identifier: MIT
 * test-sched-zb.c: the zero-bubble schedules (common/pp-sched-zb.c) run through the
 * simulator: zb-h1 / zb-h2 hit their closed forms exactly, zb-1p / zb-2p reach the bubbles
 * their memory limits allow, every program is complete and valid, and steps repeat; with
 * fine-grained memory (mem_w_fraction) they respect the paper's byte limit on the
 * zero-bubble scenarios and reach lower bubbles. C below is the largest stage span of one
 * step (the paper's bubble definition).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "pp-sched-gen.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "test-util.h"

typedef struct {
    const char *name;
    int32_t     n, m;
    int64_t     f, b, w; /* ns */
} ZbCase;

/* The test grid: N in {2, 3, 4, 8} (slowest), m in {N, 2N, 3N+1}, then the costs (F, B, W)
 * in {(1, 1, 1), (3, 2, 1), (5, 5, 2), (2, 2, 2)} us. */
static const ZbCase zb_grid[] = {
    {"N=2 m=2 F=1 B=1 W=1 us", 2, 2, 1000, 1000, 1000},
    {"N=2 m=2 F=3 B=2 W=1 us", 2, 2, 3000, 2000, 1000},
    {"N=2 m=2 F=5 B=5 W=2 us", 2, 2, 5000, 5000, 2000},
    {"N=2 m=2 F=2 B=2 W=2 us", 2, 2, 2000, 2000, 2000},
    {"N=2 m=4 F=1 B=1 W=1 us", 2, 4, 1000, 1000, 1000},
    {"N=2 m=4 F=3 B=2 W=1 us", 2, 4, 3000, 2000, 1000},
    {"N=2 m=4 F=5 B=5 W=2 us", 2, 4, 5000, 5000, 2000},
    {"N=2 m=4 F=2 B=2 W=2 us", 2, 4, 2000, 2000, 2000},
    {"N=2 m=7 F=1 B=1 W=1 us", 2, 7, 1000, 1000, 1000},
    {"N=2 m=7 F=3 B=2 W=1 us", 2, 7, 3000, 2000, 1000},
    {"N=2 m=7 F=5 B=5 W=2 us", 2, 7, 5000, 5000, 2000},
    {"N=2 m=7 F=2 B=2 W=2 us", 2, 7, 2000, 2000, 2000},
    {"N=3 m=3 F=1 B=1 W=1 us", 3, 3, 1000, 1000, 1000},
    {"N=3 m=3 F=3 B=2 W=1 us", 3, 3, 3000, 2000, 1000},
    {"N=3 m=3 F=5 B=5 W=2 us", 3, 3, 5000, 5000, 2000},
    {"N=3 m=3 F=2 B=2 W=2 us", 3, 3, 2000, 2000, 2000},
    {"N=3 m=6 F=1 B=1 W=1 us", 3, 6, 1000, 1000, 1000},
    {"N=3 m=6 F=3 B=2 W=1 us", 3, 6, 3000, 2000, 1000},
    {"N=3 m=6 F=5 B=5 W=2 us", 3, 6, 5000, 5000, 2000},
    {"N=3 m=6 F=2 B=2 W=2 us", 3, 6, 2000, 2000, 2000},
    {"N=3 m=10 F=1 B=1 W=1 us", 3, 10, 1000, 1000, 1000},
    {"N=3 m=10 F=3 B=2 W=1 us", 3, 10, 3000, 2000, 1000},
    {"N=3 m=10 F=5 B=5 W=2 us", 3, 10, 5000, 5000, 2000},
    {"N=3 m=10 F=2 B=2 W=2 us", 3, 10, 2000, 2000, 2000},
    {"N=4 m=4 F=1 B=1 W=1 us", 4, 4, 1000, 1000, 1000},
    {"N=4 m=4 F=3 B=2 W=1 us", 4, 4, 3000, 2000, 1000},
    {"N=4 m=4 F=5 B=5 W=2 us", 4, 4, 5000, 5000, 2000},
    {"N=4 m=4 F=2 B=2 W=2 us", 4, 4, 2000, 2000, 2000},
    {"N=4 m=8 F=1 B=1 W=1 us", 4, 8, 1000, 1000, 1000},
    {"N=4 m=8 F=3 B=2 W=1 us", 4, 8, 3000, 2000, 1000},
    {"N=4 m=8 F=5 B=5 W=2 us", 4, 8, 5000, 5000, 2000},
    {"N=4 m=8 F=2 B=2 W=2 us", 4, 8, 2000, 2000, 2000},
    {"N=4 m=13 F=1 B=1 W=1 us", 4, 13, 1000, 1000, 1000},
    {"N=4 m=13 F=3 B=2 W=1 us", 4, 13, 3000, 2000, 1000},
    {"N=4 m=13 F=5 B=5 W=2 us", 4, 13, 5000, 5000, 2000},
    {"N=4 m=13 F=2 B=2 W=2 us", 4, 13, 2000, 2000, 2000},
    {"N=8 m=8 F=1 B=1 W=1 us", 8, 8, 1000, 1000, 1000},
    {"N=8 m=8 F=3 B=2 W=1 us", 8, 8, 3000, 2000, 1000},
    {"N=8 m=8 F=5 B=5 W=2 us", 8, 8, 5000, 5000, 2000},
    {"N=8 m=8 F=2 B=2 W=2 us", 8, 8, 2000, 2000, 2000},
    {"N=8 m=16 F=1 B=1 W=1 us", 8, 16, 1000, 1000, 1000},
    {"N=8 m=16 F=3 B=2 W=1 us", 8, 16, 3000, 2000, 1000},
    {"N=8 m=16 F=5 B=5 W=2 us", 8, 16, 5000, 5000, 2000},
    {"N=8 m=16 F=2 B=2 W=2 us", 8, 16, 2000, 2000, 2000},
    {"N=8 m=25 F=1 B=1 W=1 us", 8, 25, 1000, 1000, 1000},
    {"N=8 m=25 F=3 B=2 W=1 us", 8, 25, 3000, 2000, 1000},
    {"N=8 m=25 F=5 B=5 W=2 us", 8, 25, 5000, 5000, 2000},
    {"N=8 m=25 F=2 B=2 W=2 us", 8, 25, 2000, 2000, 2000},
};
#define ZB_N_GRID ((int)G_N_ELEMENTS(zb_grid))

/* The grid's (N, m) with F = B = W = 1 us. */
static const ZbCase zb_unit_grid[] = {
    {"N=2 m=2 F=1 B=1 W=1 us", 2, 2, 1000, 1000, 1000},
    {"N=2 m=4 F=1 B=1 W=1 us", 2, 4, 1000, 1000, 1000},
    {"N=2 m=7 F=1 B=1 W=1 us", 2, 7, 1000, 1000, 1000},
    {"N=3 m=3 F=1 B=1 W=1 us", 3, 3, 1000, 1000, 1000},
    {"N=3 m=6 F=1 B=1 W=1 us", 3, 6, 1000, 1000, 1000},
    {"N=3 m=10 F=1 B=1 W=1 us", 3, 10, 1000, 1000, 1000},
    {"N=4 m=4 F=1 B=1 W=1 us", 4, 4, 1000, 1000, 1000},
    {"N=4 m=8 F=1 B=1 W=1 us", 4, 8, 1000, 1000, 1000},
    {"N=4 m=13 F=1 B=1 W=1 us", 4, 13, 1000, 1000, 1000},
    {"N=8 m=8 F=1 B=1 W=1 us", 8, 8, 1000, 1000, 1000},
    {"N=8 m=16 F=1 B=1 W=1 us", 8, 16, 1000, 1000, 1000},
    {"N=8 m=25 F=1 B=1 W=1 us", 8, 25, 1000, 1000, 1000},
};

static const PpSchedKindInfo *const zb_kinds[] = {
    &pp_sched_kind_zb_h1,
    &pp_sched_kind_zb_h2,
    &pp_sched_kind_zb_1p,
    &pp_sched_kind_zb_2p,
};
#define ZB_N_KINDS 4

/* The generators that search with the costs: zb-1p and zb-2p. */
static const PpSchedKindInfo *const zb_searching[] = {&pp_sched_kind_zb_1p, &pp_sched_kind_zb_2p};

/* A kind with a hop cost. */
typedef struct {
    const char            *name;
    const PpSchedKindInfo *kind;
    int64_t                comm_ns;
} ZbKindComm;

/* Builds and finishes (derives + validates) a schedule; fails the test on any error.
 * Returns: (transfer full). */
static PpSchedule *zb_build_params(PpSchedBuildFn build, const PpScheduleParams *p) {
    g_autoptr(GError) err = NULL;
    g_autoptr(PpSchedule) sched = build(p, &err);
    ck_assert_msg(sched != NULL, "build: %s", err ? err->message : "?");
    ck_assert_msg(pp_schedule_finish(sched, &err), "finish: %s", err ? err->message : "?");
    return g_steal_pointer(&sched);
}

/* Builds with M_W / M_F = @w_frac (0: whole units); the costs also go to the searching
 * generators. Returns: (transfer full). */
static PpSchedule *zb_build_frac(PpSchedBuildFn build, const ZbCase *c, int32_t steps,
                                 int64_t comm_ns, double w_frac) {
    PpScheduleParams p = test_util_schedule_params(NULL, c->n, 1, c->m, 1, steps);
    p.f_ns = c->f;
    p.b_ns = c->b;
    p.w_ns = c->w;
    p.comm_ns = comm_ns;
    p.mem_w_fraction = w_frac;
    return zb_build_params(build, &p);
}

/* Whole units (mem_w_fraction 0). Returns: (transfer full). */
static PpSchedule *zb_build(PpSchedBuildFn build, const ZbCase *c, int32_t steps, int64_t comm_ns) {
    return zb_build_frac(build, c, steps, comm_ns, 0.0);
}

/* Simulates @sched with uniform costs. Returns: (transfer full). */
static SimResult *zb_sim(const PpSchedule *sched, const ZbCase *c, int64_t comm_ns) {
    g_autoptr(SimCostModel) cost =
        sim_cost_new_uniform(sched->n_stages, 1, c->f, c->b, c->w, comm_ns);
    g_autoptr(GError) err = NULL;
    SimResult *res = sim_engine_run(sched, cost, &err);
    ck_assert_msg(res != NULL, "sim: %s", err ? err->message : "?");
    return res;
}

static int64_t zb_max_span(const SimResult *res) {
    int64_t c_ns = 0;
    for (int32_t s = 0; s < res->n_stages; s++)
        c_ns = MAX(c_ns, res->stages[s].span_ns);
    return c_ns;
}

/* Peak units with F done and W not done on @stage, from the program. */
static int32_t zb_peak_units(const PpSchedule *sched, int32_t stage) {
    int32_t live = 0, peak = 0;
    for (int32_t i = 0; i < sched->n_ops[stage]; i++) {
        PpOpKind kind = sched->programs[stage][i].kind;
        live += kind == PP_OP_FORWARD ? 1 : kind == PP_OP_WEIGHT ? -1 : 0;
        peak = MAX(peak, live);
    }
    return peak;
}

/* Peak activations on @stage in units of M_F when F allocates 1, B frees 1 - @w_frac and W
 * frees @w_frac, from the program. */
static double zb_peak_mem(const PpSchedule *sched, int32_t stage, double w_frac) {
    double live = 0.0, peak = 0.0;
    for (int32_t i = 0; i < sched->n_ops[stage]; i++) {
        PpOpKind kind = sched->programs[stage][i].kind;
        live += kind == PP_OP_FORWARD    ? 1.0
                : kind == PP_OP_BACKWARD ? -(1.0 - w_frac)
                : kind == PP_OP_WEIGHT   ? -w_frac
                                         : 0.0;
        peak = MAX(peak, live);
    }
    return peak;
}

/* Every stage peaks at exactly @expect units, declares it, and the simulator agrees. */
static void zb_check_peaks(const PpSchedule *sched, const SimResult *res, int32_t expect) {
    for (int32_t s = 0; s < sched->n_stages; s++) {
        ck_assert_int_eq(zb_peak_units(sched, s), expect);
        ck_assert_int_eq(sched->n_buffers[s], expect);
        ck_assert_int_le(res->stages[s].peak_inflight, expect);
    }
}

/* zb-h1, comm 0, m >= N, B >= W: makespan = C = span of stage 0 = m(F+B+W) + (N-1)(F+B-W);
 * every stage holds exactly min(N, m) units. */
START_TEST(test_zb_h1_closed_form) {
    ZbCase c = zb_grid[_i];
    test_util_case(c.name);
    ck_assert(c.m >= c.n && c.b >= c.w); // the closed form's conditions hold on the grid
    g_autoptr(PpSchedule) sched = zb_build(pp_sched_kind_zb_h1.build, &c, 1, 0);
    g_autoptr(SimResult) res = zb_sim(sched, &c, 0);
    int64_t expect = c.m * (c.f + c.b + c.w) + (c.n - 1) * (c.f + c.b - c.w);
    ck_assert_int_eq(res->makespan_ns, expect);
    ck_assert_int_eq(res->stages[0].span_ns, expect);
    ck_assert_int_eq(zb_max_span(res), expect);
    zb_check_peaks(sched, res, MIN(c.n, c.m));
}
END_TEST

/* zb-h2 with comm c in {0, 100}: for m >= 2N-1 (and F+B+2c >= 2W, true on the grid)
 * C = span of stage 0 = m(F+B+W) + (N-1)(F+B+2c-2W) and the makespan is
 * max(C, (N-1)(F+c) + m(F+B+W)), the last stage's start plus its work. For m < 2N-1 the
 * warmup cannot fill: C is then at most zb-h1's. Peak min(2N-1, m) units on every stage. */
static void zb_check_h2(ZbCase c, int64_t comm) {
    test_util_case(c.name);
    g_autoptr(PpSchedule) sched = zb_build(pp_sched_kind_zb_h2.build, &c, 1, comm);
    g_autoptr(SimResult) res = zb_sim(sched, &c, comm);
    int64_t work = c.m * (c.f + c.b + c.w);
    int64_t extra = (c.n - 1) * (c.f + c.b + 2 * comm - 2 * c.w);
    ck_assert_int_ge(extra, 0);
    if (c.m >= 2 * c.n - 1) {
        ck_assert_int_eq(res->stages[0].span_ns, work + extra);
        ck_assert_int_eq(zb_max_span(res), work + extra);
        ck_assert_int_eq(res->makespan_ns, MAX(work + extra, (c.n - 1) * (c.f + comm) + work));
    } else {
        g_autoptr(PpSchedule) h1 = zb_build(pp_sched_kind_zb_h1.build, &c, 1, comm);
        g_autoptr(SimResult) h1_res = zb_sim(h1, &c, comm);
        ck_assert_int_le(zb_max_span(res), zb_max_span(h1_res));
    }
    zb_check_peaks(sched, res, MIN(2 * c.n - 1, c.m));
}

/* zb-h2 on the grid without a hop cost. */
START_TEST(test_zb_h2_closed_form) {
    zb_check_h2(zb_grid[_i], 0);
}
END_TEST

/* zb-h2 on the grid with a hop of 100 ns. */
START_TEST(test_zb_h2_closed_form_comm) {
    zb_check_h2(zb_grid[_i], 100);
}
END_TEST

/* Every kind, every grid point, 1 and 3 steps: valid; per stage one F, one B and one W of
 * every micro-batch, each tagged with its step (mb / m), and a U closing every step. */
START_TEST(test_zb_programs_complete) {
    const PpSchedKindInfo *kind = zb_kinds[_i];
    for (int g = 0; g < ZB_N_GRID; g++) {
        ZbCase c = zb_grid[g];
        for (int32_t steps = 1; steps <= 3; steps += 2) {
            g_autoptr(PpSchedule) sched = zb_build(kind->build, &c, steps, 0);
            ck_assert_str_eq(sched->kind, kind->name);
            ck_assert(sched->split_backward && sched->synchronous);
            ck_assert_int_eq(sched->n_chunks, 1);
            ck_assert_int_eq(sched->n_mb, steps * c.m);
            ck_assert_int_eq(sched->mb_per_step, c.m);
            g_autofree int32_t *seen = g_new0(int32_t, (size_t)3 * sched->n_mb);
            for (int32_t s = 0; s < c.n; s++) {
                memset(seen, 0, sizeof(int32_t) * 3 * (size_t)sched->n_mb);
                ck_assert_int_eq(sched->n_ops[s], steps * (3 * c.m + 1));
                for (int32_t i = 0; i < sched->n_ops[s]; i++) {
                    const PpOp *op = &sched->programs[s][i];
                    int32_t     step = i / (3 * c.m + 1);
                    ck_assert_int_eq(op->step, step);
                    if (i % (3 * c.m + 1) == 3 * c.m) {
                        ck_assert_int_eq(op->kind, PP_OP_UPDATE);
                        continue;
                    }
                    ck_assert_int_eq(op->mb / c.m, step);
                    ck_assert_int_eq(op->chunk, 0);
                    ck_assert(op->kind == PP_OP_FORWARD || op->kind == PP_OP_BACKWARD ||
                              op->kind == PP_OP_WEIGHT);
                    seen[3 * op->mb + (op->kind == PP_OP_FORWARD    ? 0
                                       : op->kind == PP_OP_BACKWARD ? 1
                                                                    : 2)]++;
                }
                for (int32_t k = 0; k < 3 * sched->n_mb; k++)
                    ck_assert_int_eq(seen[k], 1);
                ck_assert_int_le(zb_peak_units(sched, s), sched->n_buffers[s]);
            }
        }
    }
}
END_TEST

/* Three steps. U has no cross-stage dependency, so step k+1 starts on stage 0 when stage 0
 * ends step k. When stage 0 has the largest span C of a step, every stage's next step is
 * the previous one shifted by C: makespan(3) = 2C + makespan(1); where moreover stage 0
 * ends last (C = makespan(1): zb-h1, zb-h2 with B + c >= 2W) that is 3 x makespan(1). In
 * every case the steps can only overlap: makespan(3) <= 3 x makespan(1). */
static const ZbKindComm zb_steps_cases[] = {
    {"zb-h1 comm 0", &pp_sched_kind_zb_h1, 0}, {"zb-h1 comm 100", &pp_sched_kind_zb_h1, 100},
    {"zb-h2 comm 0", &pp_sched_kind_zb_h2, 0}, {"zb-h2 comm 100", &pp_sched_kind_zb_h2, 100},
    {"zb-1p comm 0", &pp_sched_kind_zb_1p, 0}, {"zb-1p comm 100", &pp_sched_kind_zb_1p, 100},
    {"zb-2p comm 0", &pp_sched_kind_zb_2p, 0}, {"zb-2p comm 100", &pp_sched_kind_zb_2p, 100},
};

START_TEST(test_zb_steps_repeat) {
    test_util_case(zb_steps_cases[_i].name);
    const PpSchedKindInfo *kind = zb_steps_cases[_i].kind;
    int64_t                comm = zb_steps_cases[_i].comm_ns;
    gboolean handcrafted = kind == &pp_sched_kind_zb_h1 || kind == &pp_sched_kind_zb_h2;
    int      n_shifted = 0;
    for (int g = 0; g < ZB_N_GRID; g++) {
        ZbCase c = zb_grid[g];
        g_autoptr(PpSchedule) one = zb_build(kind->build, &c, 1, comm);
        g_autoptr(PpSchedule) three = zb_build(kind->build, &c, 3, comm);
        g_autoptr(SimResult) r1 = zb_sim(one, &c, comm);
        g_autoptr(SimResult) r3 = zb_sim(three, &c, comm);
        int64_t c_ns = zb_max_span(r1);
        ck_assert_int_le(r3->makespan_ns, 3 * r1->makespan_ns);
        if (r1->stages[0].span_ns == c_ns) {
            ck_assert_int_eq(r3->makespan_ns, 2 * c_ns + r1->makespan_ns);
            n_shifted++;
        }
        gboolean h1 = kind == &pp_sched_kind_zb_h1 && comm == 0;
        gboolean h2 = kind == &pp_sched_kind_zb_h2 && c.m >= 2 * c.n - 1 && c.b + comm >= 2 * c.w;
        if (h1 || h2) {
            ck_assert_int_eq(r1->stages[0].span_ns, r1->makespan_ns);
            ck_assert_int_eq(r3->makespan_ns, 3 * r1->makespan_ns);
        }
    }
    if (handcrafted) // the handcrafted schedules always end their steps on stage 0's span
        ck_assert_int_eq(n_shifted, ZB_N_GRID);
}
END_TEST

/* F = B = W = 1 us, comm 0. 1F1B's bubble is (N-1)(F+B+W). zb-1p may hold N units per
 * stage: the last stage then defers at most N W's, which bounds C below by zb-h1's form,
 * so its bubble is at least (N-1)(F+B-W) = (N-1)F, a third of 1F1B's; the greedy reaches
 * it exactly. zb-2p may hold 2N >= 2N-1 units: for m >= 2N its bubble is 0; with m = N the
 * limit is m itself, as for zb-1p, and so is the bubble. Both stay within their limits. */
START_TEST(test_zb_auto_unit_bubbles) {
    ZbCase c = zb_unit_grid[_i];
    test_util_case(c.name);
    int64_t work = c.m * (c.f + c.b + c.w);

    PpScheduleParams p = test_util_schedule_params("1f1b", c.n, 1, c.m, 1, 1);
    g_autoptr(PpSchedule) ref = test_util_schedule_build(&p);
    g_autoptr(SimResult) ref_res = zb_sim(ref, &c, 0);
    int64_t bubble_1f1b = ref_res->makespan_ns - work;
    ck_assert_int_eq(bubble_1f1b, (c.n - 1) * (c.f + c.b + c.w));

    g_autoptr(PpSchedule) p1 = zb_build(pp_sched_kind_zb_1p.build, &c, 1, 0);
    g_autoptr(SimResult) r1 = zb_sim(p1, &c, 0);
    ck_assert_int_eq(3 * (zb_max_span(r1) - work), bubble_1f1b);
    zb_check_peaks(p1, r1, MIN(c.n, c.m));

    g_autoptr(PpSchedule) p2 = zb_build(pp_sched_kind_zb_2p.build, &c, 1, 0);
    g_autoptr(SimResult) r2 = zb_sim(p2, &c, 0);
    ck_assert_int_eq(zb_max_span(r2) - work, c.m >= 2 * c.n ? 0 : bubble_1f1b / 3);
    for (int32_t s = 0; s < c.n; s++) {
        ck_assert_int_le(zb_peak_units(p2, s), MIN(2 * c.n, c.m));
        ck_assert_int_eq(p2->n_buffers[s], MIN(2 * c.n, c.m));
        ck_assert_int_le(r2->stages[s].peak_inflight, p2->n_buffers[s]);
    }
}
END_TEST

/* Every grid cost, comm 0: the greedy is never worse than the handcrafted schedule of the
 * same memory (zb-1p vs zb-h1, zb-2p vs zb-h2) nor than 1F1B. */
START_TEST(test_zb_auto_vs_handcrafted) {
    ZbCase c = zb_grid[_i];
    test_util_case(c.name);
    g_autoptr(PpSchedule) h1 = zb_build(pp_sched_kind_zb_h1.build, &c, 1, 0);
    g_autoptr(PpSchedule) h2 = zb_build(pp_sched_kind_zb_h2.build, &c, 1, 0);
    g_autoptr(PpSchedule) a1 = zb_build(pp_sched_kind_zb_1p.build, &c, 1, 0);
    g_autoptr(PpSchedule) a2 = zb_build(pp_sched_kind_zb_2p.build, &c, 1, 0);
    g_autoptr(SimResult) rh1 = zb_sim(h1, &c, 0);
    g_autoptr(SimResult) rh2 = zb_sim(h2, &c, 0);
    g_autoptr(SimResult) ra1 = zb_sim(a1, &c, 0);
    g_autoptr(SimResult) ra2 = zb_sim(a2, &c, 0);
    ck_assert_int_le(zb_max_span(ra1), zb_max_span(rh1));
    ck_assert_int_le(zb_max_span(ra2), zb_max_span(rh2));
    ck_assert_int_le(zb_max_span(ra1), (c.m + c.n - 1) * (c.f + c.b + c.w));
}
END_TEST

/* The zero-bubble paper's profiled stages (docs/design.md §6.2; us -> ns), comm included. For a
 * schedule whose stages hold at most P units, C >= m(F+B+W) + (N-1)(F+B+2c) - (P-1)W: the
 * last stage starts at (N-1)(F+c), runs every F and B and at least m - P W's before its
 * final B, whose gradient needs (N-1)(B+c) more to cross to stage 0, which then has one W
 * left. zb-h2 meets its bound (P = 2N-1) exactly; the greedy stays within 1% of its own
 * (zb-1p: P = N, measured <= 0.8%; zb-2p: P = 2N, <= 0.6%) and never trails the
 * handcrafted schedule of the same memory. */
START_TEST(test_zb_paper_configs) {
    static const int64_t cfg[4][6] = {
        /* N, m, F, B, W, comm (us) */
        {8, 24, 18522, 18086, 9337, 601},
        {8, 24, 29718, 29444, 19927, 527},
        {16, 48, 11347, 11248, 8132, 377},
        {32, 96, 10419, 10207, 7715, 408},
    };
    const int64_t *k = cfg[_i];
    ZbCase         c = {.n = (int32_t)k[0],
                        .m = (int32_t)k[1],
                        .f = k[2] * 1000,
                        .b = k[3] * 1000,
                        .w = k[4] * 1000};
    int64_t        comm = k[5] * 1000;
    int64_t        base = c.m * (c.f + c.b + c.w) + (c.n - 1) * (c.f + c.b + 2 * comm);
    const int32_t  limit[ZB_N_KINDS] = {c.n, 2 * c.n - 1, c.n, 2 * c.n};
    int64_t        span[ZB_N_KINDS];
    for (int j = 0; j < ZB_N_KINDS; j++) {
        g_autoptr(PpSchedule) sched = zb_build(zb_kinds[j]->build, &c, 1, comm);
        g_autoptr(SimResult) res = zb_sim(sched, &c, comm);
        span[j] = zb_max_span(res);
        ck_assert_int_ge(span[j], base - (limit[j] - 1) * c.w);
    }
    ck_assert_int_eq(span[1], base - (2 * c.n - 2) * c.w);
    ck_assert_int_le(span[2], span[0]);
    ck_assert_int_le(span[3], span[1]);
    ck_assert_int_le(100 * span[2], 101 * (base - (c.n - 1) * c.w));
    ck_assert_int_le(100 * span[3], 101 * (base - (2 * c.n - 1) * c.w));
}
END_TEST

/* All-zero costs make zb-1p search with unit costs: the same program as F = B = W. */
START_TEST(test_zb_auto_zero_costs_are_unit) {
    ZbCase unit = {.n = 4, .m = 9, .f = 7, .b = 7, .w = 7};
    ZbCase zero = {.n = 4, .m = 9, .f = 0, .b = 0, .w = 0};
    g_autoptr(PpSchedule) a = zb_build(pp_sched_kind_zb_1p.build, &unit, 2, 0);
    g_autoptr(PpSchedule) b = zb_build(pp_sched_kind_zb_1p.build, &zero, 2, 0);
    for (int32_t s = 0; s < 4; s++) {
        ck_assert_int_eq(a->n_ops[s], b->n_ops[s]);
        for (int32_t i = 0; i < a->n_ops[s]; i++) {
            ck_assert_int_eq(a->programs[s][i].kind, b->programs[s][i].kind);
            ck_assert_int_eq(a->programs[s][i].mb, b->programs[s][i].mb);
        }
    }
}
END_TEST

/* --- fine-grained memory: mem_w_fraction --- */

/* mem_w_fraction 1 (W frees everything, B nothing) is whole units: the same programs and
 * declarations as 0, on the grid for zb-1p and zb-2p, comm 0 and 100. */
static const ZbKindComm zb_fraction_one_cases[] = {
    {"zb-1p comm 0", &pp_sched_kind_zb_1p, 0},
    {"zb-1p comm 100", &pp_sched_kind_zb_1p, 100},
    {"zb-2p comm 0", &pp_sched_kind_zb_2p, 0},
    {"zb-2p comm 100", &pp_sched_kind_zb_2p, 100},
};

START_TEST(test_zb_fraction_one_is_whole) {
    test_util_case(zb_fraction_one_cases[_i].name);
    const PpSchedKindInfo *kind = zb_fraction_one_cases[_i].kind;
    int64_t                comm = zb_fraction_one_cases[_i].comm_ns;
    for (int g = 0; g < ZB_N_GRID; g++) {
        ZbCase c = zb_grid[g];
        g_autoptr(PpSchedule) whole = zb_build(kind->build, &c, 1, comm);
        g_autoptr(PpSchedule) one = zb_build_frac(kind->build, &c, 1, comm, 1.0);
        for (int32_t s = 0; s < c.n; s++) {
            ck_assert_int_eq(one->n_buffers[s], whole->n_buffers[s]);
            ck_assert_int_eq(one->n_ops[s], whole->n_ops[s]);
            for (int32_t i = 0; i < one->n_ops[s]; i++) {
                ck_assert_int_eq(one->programs[s][i].kind, whole->programs[s][i].kind);
                ck_assert_int_eq(one->programs[s][i].mb, whole->programs[s][i].mb);
            }
        }
    }
}
END_TEST

/* Fractions 0.25 and 0.6 on the grid, comm 100, 2 steps: every stage holds at most the limit
 * (min(N, m) for zb-1p, min(2N, m) for zb-2p) in units of M_F counted finely, declares
 * exactly its measured whole-unit peak, and the simulator agrees with it. */
static const struct {
    const char            *name;
    const PpSchedKindInfo *kind;
    double                 w_frac; /* M_W / M_F */
    int32_t                mult;   /* the limit in units of N */
} zb_fraction_limit_cases[] = {
    {"zb-1p fraction 0.25", &pp_sched_kind_zb_1p, 0.25, 1},
    {"zb-1p fraction 0.6", &pp_sched_kind_zb_1p, 0.6, 1},
    {"zb-2p fraction 0.25", &pp_sched_kind_zb_2p, 0.25, 2},
    {"zb-2p fraction 0.6", &pp_sched_kind_zb_2p, 0.6, 2},
};

START_TEST(test_zb_fraction_limits) {
    test_util_case(zb_fraction_limit_cases[_i].name);
    const PpSchedKindInfo *kind = zb_fraction_limit_cases[_i].kind;
    const double           w_frac = zb_fraction_limit_cases[_i].w_frac;
    const int32_t          mult = zb_fraction_limit_cases[_i].mult;
    for (int g = 0; g < ZB_N_GRID; g++) {
        ZbCase c = zb_grid[g];
        g_autoptr(PpSchedule) sched = zb_build_frac(kind->build, &c, 2, 100, w_frac);
        g_autoptr(SimResult) res = zb_sim(sched, &c, 100);
        int32_t limit = MIN(mult * c.n, c.m);
        for (int32_t s = 0; s < c.n; s++) {
            ck_assert_double_le(zb_peak_mem(sched, s, w_frac), limit + 1e-9);
            ck_assert_int_eq(sched->n_buffers[s], zb_peak_units(sched, s));
            ck_assert_int_eq(res->stages[s].peak_inflight, sched->n_buffers[s]);
        }
    }
}
END_TEST

/* A fraction outside [0, 1] (or NaN) is a GError naming mem_w_fraction. */
START_TEST(test_zb_fraction_bad) {
    const double bad[] = {-0.1, 1.5, NAN};
    for (int k = 0; k < 3; k++) {
        PpScheduleParams p = test_util_schedule_params(NULL, 4, 1, 8, 1, 1);
        p.mem_w_fraction = bad[k];
        g_autoptr(GError) err = NULL;
        g_autoptr(PpSchedule) sched = zb_searching[_i]->build(&p, &err);
        ck_assert_ptr_null(sched);
        ck_assert(g_error_matches(err, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
        ck_assert_msg(strstr(err->message, "mem_w_fraction") != NULL, "%s", err->message);
        ck_assert_msg(strstr(err->message, zb_searching[_i]->name) != NULL, "%s", err->message);
    }
}
END_TEST

/* The zero-bubble scenarios (scenarios/zb/, [costs] plus the model's bytes, 4 steps),
 * without and with flash attention. sim_cost_schedule_params gives M_W / M_F =
 * 32h / (34h + 5as) (32 / 34 with flash attention; the last stage's logits, freed at B,
 * only lower its own share). Every stage s of zb-1p / zb-2p holds at most 1x / 2x min(N, m)
 * of its own M_F (act_bytes[s]), with whole units and with the fraction: the generator's
 * guarantee. On the scenarios as given (no flash attention) that keeps every stage within
 * 1x / 2x of 1F1B's peak activation bytes (its largest stage: the paper's M_limit). With
 * flash attention the logits make up a larger share of the last stage's M_F, and zb-1p's
 * last stage exceeds 1F1B's peak there, whole units or not (1.5b: 1937 vs 1836 MiB), so
 * that check is left to the first form. zb-2p's bubble with the fraction, measured (whole
 * units -> fraction; asserted to 0.001), drops below whole units' without flash attention:
 *   1.5b 0.1022 -> 0.0446, 6.2b 0.0615 -> 0.0025, 14.6b 0.0672 -> 0.0062,
 *   28.3b 0.0641 -> 0.0066;
 * with flash attention (M_W / M_F = 0.94 leaves little room) it is never above:
 *   1.5b 0.1022 -> 0.1022, 6.2b 0.0615 -> 0.0615, 14.6b 0.0672 -> 0.0575,
 *   28.3b 0.0641 -> 0.0541.
 * zb-1p's bubble is the same either way (0.1585, 0.1323, 0.1397, 0.1421): stage 0 already
 * holds N forwards in 1F1B's rhythm, so a limit of N units leaves no room for deferred W. */
typedef struct {
    const char *file;
    gboolean    flash;     /* model.flash_attention */
    double      bubble_2p; /* zb-2p's bubble measured with the fraction */
} ZbScenarioCase;

static const ZbScenarioCase zb_scenarios[] = {
    {"zb-1.5b-p8-m24.ini", FALSE, 0.0446},   {"zb-1.5b-p8-m24.ini", TRUE, 0.1022},
    {"zb-6.2b-p8-m24.ini", FALSE, 0.0025},   {"zb-6.2b-p8-m24.ini", TRUE, 0.0615},
    {"zb-14.6b-p16-m48.ini", FALSE, 0.0062}, {"zb-14.6b-p16-m48.ini", TRUE, 0.0575},
    {"zb-28.3b-p32-m96.ini", FALSE, 0.0066}, {"zb-28.3b-p32-m96.ini", TRUE, 0.0541},
};

/* Builds @kind with @params (mem_w_fraction replaced by @w_frac) and simulates it.
 * Returns: (transfer full). */
static SimResult *zb_scenario_run(const char *kind, const PpScheduleParams *params, double w_frac,
                                  const SimCostModel *cost) {
    PpScheduleParams p = *params;
    p.kind = pp_sched_kind_lookup(kind);
    p.mem_w_fraction = w_frac;
    g_autoptr(PpSchedule) sched = test_util_schedule_build(&p);
    g_autoptr(GError) err = NULL;
    SimResult *res = sim_engine_run(sched, cost, &err);
    ck_assert_msg(res != NULL, "%s: %s", kind, err ? err->message : "?");
    return res;
}

START_TEST(test_zb_scenario_byte_limit) {
    const ZbScenarioCase *sc_case = &zb_scenarios[_i];
    const gboolean        flash = sc_case->flash;
    g_autofree char      *case_name =
        g_strdup_printf("%s%s", sc_case->file, flash ? " flash attention" : "");
    test_util_case(case_name);
    g_autofree char *path =
        g_build_filename(PP_SOURCE_ROOT, "scenarios", "zb", sc_case->file, NULL);
    const char *overrides[] = {flash ? "model.flash_attention=true" : "model.flash_attention=false",
                               NULL};
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(path, overrides, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "?");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "?");
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    sim_cost_schedule_params(cost, &params);
    const double h = sc->model.hidden, a = sc->model.heads, s = sc->model.seq_len;
    const double w_frac = flash ? 32.0 / 34.0 : 32.0 * h / (34.0 * h + 5.0 * a * s);
    ck_assert_double_eq_tol(params.mem_w_fraction, w_frac, 1e-12);

    g_autoptr(SimResult) ref = zb_scenario_run("1f1b", &params, 0.0, cost);
    int64_t ref_peak = 0; // bytes
    for (int32_t st = 0; st < ref->n_stages; st++)
        ref_peak = MAX(ref_peak, ref->stages[st].peak_activation_bytes);
    double bubble[2][2]; // [zb-1p, zb-2p][whole, fraction]
    for (int32_t mult = 1; mult <= 2; mult++) {
        for (int fine = 0; fine < 2; fine++) {
            g_autoptr(SimResult) res =
                zb_scenario_run(mult == 1 ? "zb-1p" : "zb-2p", &params, fine ? w_frac : 0.0, cost);
            const int32_t limit = MIN(mult * params.n_stages, params.n_microbatches);
            for (int32_t st = 0; st < res->n_stages; st++) {
                ck_assert_int_le(res->stages[st].peak_activation_bytes,
                                 limit * cost->act_bytes[st]);
                if (!flash)
                    ck_assert_int_le(res->stages[st].peak_activation_bytes, mult * ref_peak);
            }
            bubble[mult - 1][fine] = res->bubble_fraction;
        }
    }
    ck_assert_double_eq(bubble[0][1], bubble[0][0]);
    if (flash)
        ck_assert_double_le(bubble[1][1], bubble[1][0]);
    else
        ck_assert_double_lt(bubble[1][1], bubble[1][0]);
    ck_assert_double_le(bubble[1][1], sc_case->bubble_2p + 0.001);
    ck_assert_double_ge(bubble[1][1], sc_case->bubble_2p - 0.001);
}
END_TEST

/* The registry resolves each name to its generator, and pp_schedule_new() finishes it. */
START_TEST(test_zb_registry) {
    const PpSchedKindInfo *kind = zb_kinds[_i];
    const PpSchedKindInfo *info = pp_sched_kind_lookup(kind->name);
    ck_assert_ptr_nonnull(info);
    ck_assert(info->build == kind->build);
    PpScheduleParams p = test_util_schedule_params(kind->name, 4, 1, 9, 1, 2);
    g_autoptr(PpSchedule) sched = test_util_schedule_build(&p);
    ck_assert_str_eq(sched->kind, kind->name);
    ck_assert_int_eq(pp_schedule_n_ops_total(sched), 4 * 2 * (3 * 9 + 1));
}
END_TEST

/* Bad parameters are GErrors naming the parameter. */
START_TEST(test_zb_bad_params) {
    const PpSchedKindInfo *kind = zb_kinds[_i];
    PpScheduleParams       good = test_util_schedule_params(NULL, 4, 1, 8, 1, 1);
    good.f_ns = good.b_ns = good.w_ns = 1;
    PpScheduleParams bad[5];
    const char      *names[5] = {"n_stages", "n_microbatches", "n_steps", "n_chunks", "costs"};
    for (int k = 0; k < 5; k++)
        bad[k] = good;
    bad[0].n_stages = 0;
    bad[1].n_microbatches = 0;
    bad[2].n_steps = 0;
    bad[3].n_chunks = 2;
    bad[4].w_ns = -1;
    // only the searching generators read the costs
    int n_bad = kind == zb_searching[0] || kind == zb_searching[1] ? 5 : 4;
    for (int k = 0; k < n_bad; k++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(PpSchedule) sched = kind->build(&bad[k], &err);
        ck_assert_ptr_null(sched);
        ck_assert(g_error_matches(err, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
        ck_assert_msg(strstr(err->message, kind->name) != NULL, "%s", err->message);
        if (k < 4)
            ck_assert_msg(strstr(err->message, names[k]) != NULL, "%s", err->message);
    }
}
END_TEST

static Suite *zb_suite(void) {
    Suite *suite = suite_create("sched-zb");
    TCase *tc = tcase_create("handcrafted");
    tcase_add_loop_test(tc, test_zb_h1_closed_form, 0, ZB_N_GRID);
    tcase_add_loop_test(tc, test_zb_h2_closed_form, 0, ZB_N_GRID);
    tcase_add_loop_test(tc, test_zb_h2_closed_form_comm, 0, ZB_N_GRID);
    suite_add_tcase(suite, tc);

    tc = tcase_create("automatic");
    tcase_add_loop_test(tc, test_zb_auto_unit_bubbles, 0, G_N_ELEMENTS(zb_unit_grid));
    tcase_add_loop_test(tc, test_zb_auto_vs_handcrafted, 0, ZB_N_GRID);
    tcase_add_loop_test(tc, test_zb_paper_configs, 0, 4);
    tcase_add_test(tc, test_zb_auto_zero_costs_are_unit);
    suite_add_tcase(suite, tc);

    tc = tcase_create("fraction");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_zb_fraction_one_is_whole, 0, G_N_ELEMENTS(zb_fraction_one_cases));
    tcase_add_loop_test(tc, test_zb_fraction_limits, 0, G_N_ELEMENTS(zb_fraction_limit_cases));
    tcase_add_loop_test(tc, test_zb_fraction_bad, 0, G_N_ELEMENTS(zb_searching));
    tcase_add_loop_test(tc, test_zb_scenario_byte_limit, 0, G_N_ELEMENTS(zb_scenarios));
    suite_add_tcase(suite, tc);

    tc = tcase_create("programs");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_zb_programs_complete, 0, ZB_N_KINDS);
    tcase_add_loop_test(tc, test_zb_steps_repeat, 0, G_N_ELEMENTS(zb_steps_cases));
    tcase_add_loop_test(tc, test_zb_bad_params, 0, ZB_N_KINDS);
    tcase_add_loop_test(tc, test_zb_registry, 0, ZB_N_KINDS);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    SRunner *runner = srunner_create(zb_suite());
    srunner_run_all(runner, CK_ENV);
    int n_failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
