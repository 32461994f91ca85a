/* SPDX-License-Identifier: MIT
 * test-progress.c: pacer-train's progress line (exec/train/exec-progress.h): the ETA is the time
 * per step of the steps this process ran times the steps left, also after a resume (where
 * the resumed steps took no time in this process).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "exec-progress.h"

/* The "ETA ..." tail of the line for @step. */
static char *eta_of(const ExecProgressStep *step) {
    g_autofree char *line = exec_progress_format(step);
    const char      *eta = strstr(line, "| ETA ");
    ck_assert_ptr_nonnull(eta);
    return g_strdup(eta + strlen("| ETA "));
}

START_TEST(test_progress_eta_fresh) {
    /* 10 of 40 steps in 20 s: 2 s a step, 30 left -> 60 s */
    ExecProgressStep step = {.step = 9, .first_step = 0, .total_steps = 40, .elapsed_s = 20.0};
    g_autofree char *eta = eta_of(&step);
    ck_assert_str_eq(eta, "1m00s");
    g_autofree char *line = exec_progress_format(&step);
    ck_assert_ptr_eq(strstr(line, "step 10/40 |"), line);
}
END_TEST

START_TEST(test_progress_eta_resumed) {
    /* Resumed at step 30 of 40 (the checkpoint holds 30 steps): 1 step ran here in 3 s, so
     * 9 steps left take 27 s. Counting the 30 resumed steps as run here would say 9 x 3/31 s,
     * about 1 s: the bug of the "0m06s with 39 steps left" report. */
    ExecProgressStep step = {.step = 30, .first_step = 30, .total_steps = 40, .elapsed_s = 3.0};
    g_autofree char *eta = eta_of(&step);
    ck_assert_str_eq(eta, "0m27s");
    /* the same run later: 8 steps here in 20 s, 2 left -> 5 s */
    step.step = 37;
    step.elapsed_s = 20.0;
    g_autofree char *later = eta_of(&step);
    ck_assert_str_eq(later, "0m05s");
}
END_TEST

START_TEST(test_progress_eta_last_step) {
    /* nothing left: 0 whatever the rate; minutes carry over 60 s */
    ExecProgressStep last = {.step = 39, .first_step = 12, .total_steps = 40, .elapsed_s = 99.0};
    g_autofree char *eta = eta_of(&last);
    ck_assert_str_eq(eta, "0m00s");
    ExecProgressStep slow = {.step = 0, .first_step = 0, .total_steps = 3, .elapsed_s = 45.25};
    g_autofree char *slow_eta = eta_of(&slow);
    ck_assert_str_eq(slow_eta, "1m31s"); /* 2 x 45.25 = 90.5 s, rounded half away from 0 */
}
END_TEST

int main(void) {
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("eta");
    tcase_add_test(tc, test_progress_eta_fresh);
    tcase_add_test(tc, test_progress_eta_resumed);
    tcase_add_test(tc, test_progress_eta_last_step);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
