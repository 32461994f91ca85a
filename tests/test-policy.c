/* SPDX-License-Identifier: MIT
 * test-policy.c: PACI's backpressure policy. A lockstep driver (every op one time unit,
 * messages visible the next unit, all stages decide at once from what they know) runs the
 * policy; the recorded program must equal the static "paci" program, and the policy's
 * individual decisions follow the rule's priorities.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-policy.h"
#include "test-util.h"

/* Drives a PACI run of @n_mb micro-batches to the end and returns the recorded program. */
static PpSchedule *run_policy(int32_t n, int32_t a, int32_t n_mb, int64_t *rounds_out) {
    g_autoptr(PpPolicyRecorder) rec =
        pp_policy_recorder_new(pp_sched_kind_lookup("paci"), n, a, n_mb);
    g_autofree PpPolicyState *st = g_new(PpPolicyState, n);
    /* (n, n_mb) flags: activation arrived, gradient arrived (last stage: own F done), BW ran */
    g_autofree gboolean *act = g_new0(gboolean, (gsize)n * n_mb);
    g_autofree gboolean *grad = g_new0(gboolean, (gsize)n * n_mb);
    g_autofree gboolean *bw_done = g_new0(gboolean, (gsize)n * n_mb);
    g_autofree PpOpKind *kind = g_new(PpOpKind, n);
    g_autofree int32_t  *mb = g_new(int32_t, n);
    for (int32_t s = 0; s < n; s++)
        pp_policy_state_init(&st[s], s, n, a, n_mb);
    int64_t rounds = 0, limit = 8 * ((int64_t)n_mb + n) + 16;
    for (;;) {
        gboolean all_done = TRUE;
        for (int32_t s = 0; s < n; s++)
            all_done = all_done && pp_policy_state_done(&st[s]);
        if (all_done)
            break;
        ck_assert_int_lt(rounds, limit); // the policy never deadlocks
        for (int32_t s = 0; s < n; s++) {
            PpPolicyState *p = &st[s];
            p->f_input_ready = s == 0 || (p->next_f_mb < n_mb && act[s * n_mb + p->next_f_mb]);
            p->b_ready_mb = -1;
            for (int32_t j = 0; j < p->next_f_mb && p->b_ready_mb < 0; j++) {
                if (grad[s * n_mb + j] && !bw_done[s * n_mb + j])
                    p->b_ready_mb = j;
            }
            kind[s] = pp_policy_paci_next(p, &mb[s]);
        }
        for (int32_t s = 0; s < n; s++) { // effects become visible in the next round
            if (kind[s] == PP_OP_N_KINDS)
                continue;
            pp_policy_recorder_record(rec, s, kind[s], mb[s]);
            pp_policy_state_apply(&st[s], kind[s], mb[s]);
            if (kind[s] == PP_OP_FORWARD) {
                if (s + 1 < n)
                    act[(s + 1) * n_mb + mb[s]] = TRUE;
                else
                    grad[s * n_mb + mb[s]] = TRUE;
            } else if (kind[s] == PP_OP_BACKWARD_FULL) {
                bw_done[s * n_mb + mb[s]] = TRUE;
                if (s > 0)
                    grad[(s - 1) * n_mb + mb[s]] = TRUE;
            }
        }
        rounds++;
    }
    *rounds_out = rounds;
    g_autoptr(GError) error = NULL;
    PpSchedule *sched = pp_policy_recorder_finish(rec, &error);
    ck_assert_msg(sched != NULL, "%s", error ? error->message : "");
    return sched;
}

START_TEST(test_policy_matches_static) {
    static const int32_t stages[] = {1, 2, 4, 8};
    int32_t              n = stages[_i];
    for (int32_t a = 1; a <= 4; a++) {
        for (int32_t steps = 1; steps <= 2 * n + 3; steps += n + 1) {
            /* paci ignores the costs test_util_schedule_new() sets. */
            g_autoptr(PpSchedule) ref = test_util_schedule_new("paci", n, 1, 1, a, steps);
            int64_t rounds = 0;
            g_autoptr(PpSchedule) got = run_policy(n, a, steps * a, &rounds);
            ck_assert_str_eq(got->kind, "paci");
            ck_assert_int_eq(got->n_mb, ref->n_mb);
            ck_assert_int_eq(got->n_steps, ref->n_steps);
            ck_assert_int_eq(got->mb_per_step, ref->mb_per_step);
            ck_assert_int_eq(got->weight_mode, ref->weight_mode);
            ck_assert_int_eq(got->synchronous, ref->synchronous);
            for (int32_t s = 0; s < n; s++) {
                ck_assert_int_eq(got->n_buffers[s], ref->n_buffers[s]);
                ck_assert_int_eq(got->n_weight_versions[s], ref->n_weight_versions[s]);
                ck_assert_int_eq(got->n_ops[s], ref->n_ops[s]);
                for (int32_t i = 0; i < ref->n_ops[s]; i++) {
                    const PpOp *x = &got->programs[s][i], *y = &ref->programs[s][i];
                    ck_assert_msg(x->kind == y->kind && x->mb == y->mb && x->chunk == y->chunk &&
                                      x->step == y->step,
                                  "N=%d a=%d steps=%d stage %d op %d differs", n, a, steps, s, i);
                }
            }
        }
    }
}
END_TEST

START_TEST(test_policy_partial_window) {
    /* n_mb = 5, a = 2: updates after BW 1, BW 3 and a final one after BW 4 = ceil(5/2). */
    int64_t rounds = 0;
    g_autoptr(PpSchedule) sched = run_policy(3, 2, 5, &rounds);
    ck_assert_int_eq(sched->n_steps, 3);
    for (int32_t s = 0; s < 3; s++) {
        int32_t n_u = 0, n_bw = 0;
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            if (op->kind == PP_OP_UPDATE) {
                ck_assert(n_bw == 2 || n_bw == 4 || n_bw == 5);
                ck_assert(i > 0 && sched->programs[s][i - 1].kind == PP_OP_BACKWARD_FULL);
                n_u++;
            }
            n_bw += op->kind == PP_OP_BACKWARD_FULL;
        }
        ck_assert_int_eq(n_u, 3);
        ck_assert_int_eq(sched->programs[s][sched->n_ops[s] - 1].kind, PP_OP_UPDATE);
    }
}
END_TEST

START_TEST(test_policy_rule) {
    PpPolicyState st;
    int32_t       mb = 0;
    pp_policy_state_init(&st, 1, 4, 2, 10); // stage 1 of 4: at most 3 in flight
    ck_assert(!st.f_input_ready);
    ck_assert_int_eq(pp_policy_paci_next(&st, &mb), PP_OP_N_KINDS);
    ck_assert_int_eq(mb, -1);
    st.f_input_ready = TRUE;
    for (int32_t j = 0; j < 3; j++) {
        ck_assert_int_eq(pp_policy_paci_next(&st, &mb), PP_OP_FORWARD);
        ck_assert_int_eq(mb, j);
        pp_policy_state_apply(&st, PP_OP_FORWARD, mb);
    }
    ck_assert_int_eq(st.q, 3);
    ck_assert_int_eq(pp_policy_paci_next(&st, &mb), PP_OP_N_KINDS); // backpressure: q = N - s
    st.b_ready_mb = 0;
    ck_assert_int_eq(pp_policy_paci_next(&st, &mb), PP_OP_BACKWARD_FULL);
    ck_assert_int_eq(mb, 0);
    pp_policy_state_apply(&st, PP_OP_BACKWARD_FULL, 0);
    st.b_ready_mb = 1; // backward first, although a forward is admissible now (q = 2)
    ck_assert_int_eq(pp_policy_paci_next(&st, &mb), PP_OP_BACKWARD_FULL);
    pp_policy_state_apply(&st, PP_OP_BACKWARD_FULL, 1);
    st.b_ready_mb = 2; // a = 2 backwards since the last update: update first
    ck_assert_int_eq(pp_policy_paci_next(&st, &mb), PP_OP_UPDATE);
    ck_assert_int_eq(mb, -1);
    pp_policy_state_apply(&st, PP_OP_UPDATE, -1);
    ck_assert_int_eq(st.backwards_since_update, 0);
    ck_assert(!pp_policy_state_done(&st));
}
END_TEST

START_TEST(test_policy_bad_apply_aborts) {
    PpPolicyState st;
    pp_policy_state_init(&st, 0, 2, 1, 4);
    pp_policy_state_apply(&st, PP_OP_BACKWARD_FULL, 0); // nothing in flight: PP_ASSERT
}
END_TEST

START_TEST(test_recorder_incomplete_run) {
    g_autoptr(PpPolicyRecorder) rec = pp_policy_recorder_new(pp_sched_kind_lookup("paci"), 2, 1, 1);
    pp_policy_recorder_record(rec, 0, PP_OP_FORWARD, 0);
    pp_policy_recorder_record(rec, 1, PP_OP_FORWARD, 0);
    pp_policy_recorder_record(rec, 1, PP_OP_BACKWARD_FULL, 0);
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(pp_policy_recorder_finish(rec, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_MISSING_OP));
    ck_assert_ptr_nonnull(strstr(error->message, "BW(mb=0, chunk=0) on stage 0 is missing"));
}
END_TEST

static Suite *policy_suite(void) {
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("paci");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_policy_matches_static, 0, 4);
    tcase_add_test(tc, test_policy_partial_window);
    tcase_add_test(tc, test_policy_rule);
    tcase_add_test_raise_signal(tc, test_policy_bad_apply_aborts, SIGABRT);
    tcase_add_test(tc, test_recorder_incomplete_run);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(policy_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
