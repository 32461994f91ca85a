/* SPDX-License-Identifier: MIT
 * test-sched-v.c: the V-shape schedules zb-v and dualpipe-v. Validity over many shapes, the
 * V placement, peak in-flight chunk units, closed-form step times with uniform op times (zb-v:
 * no bubble; dualpipe-v: (N - 1)(F + B - W) when F = B >= W, below the DualPipe repository's
 * bound), the zero-bubble authors' ZB-V row (bubble 0, 1F1B's activation memory, twice its
 * pipeline messages) and the analytic model's layer placement.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "test-util.h"

static const char *const v_kinds[] = {"zb-v", "dualpipe-v"};

static PpSchedule *v_schedule(const char *kind, int32_t n, int32_t m, int32_t steps) {
    return test_util_schedule_new(kind, n, 2, m, 1, steps);
}

static SimResult *v_run(const PpSchedule *sched, int64_t f, int64_t b, int64_t w) {
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(sched->n_stages, 2, f, b, w, 0);
    g_autoptr(GError) error = NULL;
    SimResult *res = sim_engine_run(sched, cost, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");
    return res;
}

/* Every shape builds and validates (pp_schedule_new runs the validator: one F, B, W per
 * (mb, vs), order, no deadlock, declared buffers); chunk 1 runs in reverse stage order. */
START_TEST(test_v_valid) {
    const char *kind = v_kinds[_i];
    for (int32_t n = 1; n <= 8; n++) {
        for (int32_t m = 1; m <= 4 * n + 3; m++) {
            if (strcmp(kind, "dualpipe-v") == 0 && m < 2 * n)
                continue;
            for (int32_t steps = 1; steps <= 2; steps++) {
                g_autoptr(PpSchedule) sched = v_schedule(kind, n, m, steps);
                ck_assert(sched->split_backward && sched->synchronous);
                ck_assert_int_eq(sched->n_vstages, 2 * n);
                for (int32_t vs = 0; vs < 2 * n; vs++) {
                    ck_assert_int_eq(sched->vstage_stage[vs], vs < n ? vs : 2 * n - 1 - vs);
                    ck_assert_int_eq(sched->vstage_chunk[vs], vs / n);
                    ck_assert_int_eq(
                        pp_schedule_vstage(sched, sched->vstage_stage[vs], sched->vstage_chunk[vs]),
                        vs);
                }
            }
        }
    }
}
END_TEST

/* Peak (mb, chunk) units: zb-v holds 2N on every stage once m >= 2N - 1 (N micro-batches of
 * a full stage: 1F1B's stage-0 peak, on every stage), at most that below; dualpipe-v at most
 * 2N + 1 (the DualPipe repository's PP + 1 for PP = 2N stages). */
START_TEST(test_v_peak_units) {
    for (int32_t n = 1; n <= 8; n++) {
        for (int32_t m = 1; m <= 4 * n; m++) {
            g_autoptr(PpSchedule) zb = v_schedule("zb-v", n, m, 1);
            for (int32_t s = 0; s < n; s++) {
                int32_t peak = pp_schedule_peak_inflight(zb, s);
                if (m >= 2 * n - 1)
                    ck_assert_int_eq(peak, 2 * n);
                else
                    ck_assert_int_le(peak, MIN(2 * n, 2 * m));
            }
            if (m < 2 * n)
                continue;
            g_autoptr(PpSchedule) dp = v_schedule("dualpipe-v", n, m, 1);
            for (int32_t s = 0; s < n; s++)
                ck_assert_int_le(pp_schedule_peak_inflight(dp, s), 2 * n + 1);
        }
    }
}
END_TEST

/* zb-v with F = B = W = f per chunk and no communication: every stage is busy from its first
 * op to its last, so its span is its work 6mf and the bubble is 0 (m >= 2N - 1); the last
 * stage starts (N - 1) f after stage 0 and ends last: makespan 6mf + (N - 1) f. */
START_TEST(test_zb_v_closed_form) {
    static const int64_t fs[] = {1000, 7000};
    for (int32_t n = 1; n <= 8; n++) {
        for (int32_t m = 2 * n - 1; m <= 4 * n; m += n) {
            for (size_t k = 0; k < G_N_ELEMENTS(fs); k++) {
                const int64_t f = fs[k];
                g_autoptr(PpSchedule) sched = v_schedule("zb-v", n, MAX(m, 1), 1);
                g_autoptr(SimResult) res = v_run(sched, f, f, f);
                const int64_t work = 6 * (int64_t)MAX(m, 1) * f;
                for (int32_t s = 0; s < n; s++) {
                    ck_assert_int_eq(res->stages[s].busy_ns, work);
                    ck_assert_int_eq(res->stages[s].span_ns, work);
                }
                ck_assert_int_eq(res->makespan_ns, work + (n - 1) * f);
                ck_assert_double_eq(res->bubble_fraction, 0.0);
            }
        }
    }
}
END_TEST

/* dualpipe-v with F = B >= W per chunk, no communication: the longest stage span exceeds the
 * work 2m(F + B + W) by (N - 1)(F + B - W). The DualPipe repository's bubble (PP/2 - 1)(F&B +
 * B' - 3W) with B' = B + W its full backward and F&B = F + B' (our chunks run back to back)
 * is (N - 1)(F + 2B - W): an upper bound, checked on costs outside the closed form's regime. */
START_TEST(test_dualpipe_v_closed_form) {
    static const int64_t fbw[][3] = {{3000, 3000, 3000}, {3000, 3000, 1000}, {5000, 5000, 0},
                                     {4000, 4000, 2000}, {6000, 3000, 1000}, {2000, 3000, 3000},
                                     {3000, 1000, 2000}, {1000, 3000, 2000}};
    for (int32_t n = 1; n <= 8; n++) {
        for (int32_t m = 2 * n; m <= 4 * n + 3; m += 3) {
            for (size_t k = 0; k < G_N_ELEMENTS(fbw); k++) {
                const int64_t f = fbw[k][0], b = fbw[k][1], w = fbw[k][2];
                g_autoptr(PpSchedule) sched = v_schedule("dualpipe-v", n, m, 1);
                g_autoptr(SimResult) res = v_run(sched, f, b, w);
                const int64_t work = 2 * (int64_t)m * (f + b + w);
                int64_t       span = 0;
                for (int32_t s = 0; s < n; s++) {
                    ck_assert_int_eq(res->stages[s].busy_ns, work);
                    span = MAX(span, res->stages[s].span_ns);
                }
                if (f == b && b >= w)
                    ck_assert_int_eq(span - work, (n - 1) * (f + b - w));
                ck_assert_int_le(span - work, (n - 1) * (f + 2 * b - w));
            }
        }
    }
}
END_TEST

/* Cross-device dependencies of one micro-batch: activation and gradient messages. */
static int64_t v_messages(const PpSchedule *sched) {
    int64_t n = 0;
    for (int32_t s = 0; s < sched->n_stages; s++) {
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            int32_t        n_deps;
            const PpOpRef *deps = pp_schedule_deps(sched, (PpOpRef){s, i}, &n_deps);
            for (int32_t d = 0; d < n_deps; d++)
                n += deps[d].stage != s;
        }
    }
    return n / sched->n_mb;
}

/* The zero-bubble repository's comparison (T_F = T_B = T_W): ZBV has bubble rate 0, 1x 1F1B's
 * activation memory and 2x its pipeline communication volume. Bytes: with uniform layers each
 * chunk holds half a stage's activations, so 2N chunk units are 1F1B's N stage units. */
START_TEST(test_zb_v_paper_row) {
    for (int32_t n = 2; n <= 8; n++) {
        const int32_t m = 3 * n;
        g_autoptr(PpSchedule) zb = v_schedule("zb-v", n, m, 2);
        g_autoptr(PpSchedule) ref = test_util_schedule_new("1f1b", n, 1, m, 1, 2);
        g_autoptr(SimResult) res = v_run(zb, 1000, 1000, 1000);
        ck_assert_double_eq(res->bubble_fraction, 0.0);
        /* memory: act 1 per chunk unit = half of a 1F1B stage unit of 2 */
        g_autoptr(SimCostModel) one = sim_cost_new_uniform(n, 1, 2000, 2000, 2000, 0);
        for (int32_t s = 0; s < n; s++)
            one->act_bytes[s] = 2;
        g_autoptr(SimResult) base = sim_engine_run(ref, one, NULL);
        ck_assert_ptr_nonnull(base);
        for (int32_t s = 0; s < n; s++)
            ck_assert_int_eq(res->stages[s].peak_activation_bytes,
                             base->stages[0].peak_activation_bytes);
        ck_assert_int_eq(v_messages(zb), 2 * v_messages(ref));
        ck_assert_int_eq(v_messages(ref), 2 * (n - 1));
    }
}
END_TEST

START_TEST(test_v_errors) {
    g_autoptr(GError) error = NULL;
    PpScheduleParams p = test_util_schedule_params("dualpipe-v", 4, 2, 7, 1, 1);
    ck_assert_ptr_null(pp_schedule_new(&p, &error));
    ck_assert_ptr_nonnull(strstr(error->message, "n_microbatches = 7 is below 2 n_stages = 8"));
    g_clear_error(&error);
    p.kind = pp_sched_kind_lookup("zb-v");
    p.n_chunks = 1;
    ck_assert_ptr_null(pp_schedule_new(&p, &error));
    ck_assert_ptr_nonnull(strstr(error->message, "n_chunks = 1 is out of range; valid: 2..2"));
    /* the scenario names the key */
    static const char text[] = "[model]\nlayers = 8\nhidden = 64\nheads = 4\nseq_len = 32\n"
                               "vocab = 100\n[pipeline]\nschedule = zb-v\nstages = 2\n"
                               "microbatch_size = 1\nmicrobatches = 4\n";
    g_clear_error(&error);
    ck_assert_ptr_null(pp_scenario_load_data(text, "v.ini", NULL, &error));
    ck_assert_ptr_nonnull(strstr(error->message, "[pipeline] chunks = 1 but schedule zb-v"));
}
END_TEST

/* The analytic model follows the placement: 16 layers over 4 stages x 2 chunks, 2 each;
 * virtual stage 7 (the head) sits on stage 0 as chunk 1, so stage 0 holds the embeddings and
 * the head, and its chunk 1 pays the head's FLOPs. */
START_TEST(test_v_analytic_placement) {
    static const char text[] = "[model]\nlayers = 16\nhidden = 256\nheads = 4\nseq_len = 128\n"
                               "vocab = 1000\n[hardware]\npreset = a100-sxm\n[pipeline]\n"
                               "schedule = zb-v\nstages = 4\nchunks = 2\nmicrobatches = 8\n"
                               "microbatch_size = 1\npartition = even\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(text, "v.ini", NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    /* units: stage * 2 + chunk */
    ck_assert_int_gt(cost->f_ns[0 * 2 + 1], cost->f_ns[0 * 2 + 0]);
    for (int32_t s = 1; s < 4; s++) {
        ck_assert_int_eq(cost->f_ns[s * 2 + 0], cost->f_ns[0]);
        ck_assert_int_eq(cost->f_ns[s * 2 + 1], cost->f_ns[0]);
        ck_assert_int_lt(cost->static_bytes[s], cost->static_bytes[0]);
    }
    ck_assert_int_gt(cost->act_bytes[0 * 2 + 1], cost->act_bytes[0]); /* logits */
}
END_TEST

int main(void) {
    Suite *s = suite_create("sched-v");
    TCase *tc = tcase_create("v");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_v_valid, 0, G_N_ELEMENTS(v_kinds));
    tcase_add_test(tc, test_v_peak_units);
    tcase_add_test(tc, test_zb_v_closed_form);
    tcase_add_test(tc, test_dualpipe_v_closed_form);
    tcase_add_test(tc, test_zb_v_paper_row);
    tcase_add_test(tc, test_v_errors);
    tcase_add_test(tc, test_v_analytic_placement);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
