/* SPDX-License-Identifier: MIT
 * test-exec-stash.c: the stashed weight copies' bookkeeping every backend shares
 * (exec/backend/exec-stash.h): one fill per weight version while a copy holds it, a released copy
 * keeps its version (the next F of it fills nothing), a new version takes the lowest copy nobody
 * needs, reset empties every copy, and a stage that runs out of copies or asks for a version no
 * copy holds aborts.
 */
#include <check.h>
#include <signal.h>

#include "exec-stash.h"

/* 1F1B-like with two copies: versions 0, 0, 1, 1 in flight, then 2 after 0's are done. */
START_TEST(test_stash_versions) {
    ExecStashes st;
    gboolean    fill = FALSE;
    exec_stashes_init(&st, 2);
    ck_assert_int_eq(exec_stashes_acquire(&st, 0, &fill), 0);
    ck_assert(fill);
    ck_assert_int_eq(exec_stashes_acquire(&st, 0, &fill), 0);
    ck_assert(!fill);
    ck_assert_int_eq(exec_stashes_acquire(&st, 1, &fill), 1);
    ck_assert(fill);
    ck_assert_int_eq(st.refs[0], 2);
    ck_assert_int_eq(exec_stashes_find(&st, 0), 0);
    exec_stashes_release(&st, 0);
    exec_stashes_release(&st, 0);
    /* Released, copy 0 keeps version 0: an F of version 0 again fills nothing. */
    ck_assert_int_eq(exec_stashes_acquire(&st, 0, &fill), 0);
    ck_assert(!fill);
    exec_stashes_release(&st, 0);
    /* Version 2 takes copy 0 (nobody needs it), copy 1 still holds version 1. */
    ck_assert_int_eq(exec_stashes_acquire(&st, 2, &fill), 0);
    ck_assert(fill);
    ck_assert_int_eq(st.version[0], 2);
    ck_assert_int_eq(exec_stashes_find(&st, 1), 1);
    exec_stashes_reset(&st);
    for (int32_t i = 0; i < st.n; i++) {
        ck_assert_int_eq(st.version[i], -1);
        ck_assert_int_eq(st.refs[i], 0);
    }
    exec_stashes_clear(&st);
    exec_stashes_clear(&st);
}
END_TEST

START_TEST(test_stash_exhausted) {
    ExecStashes st;
    gboolean    fill;
    exec_stashes_init(&st, 1);
    exec_stashes_acquire(&st, 0, &fill);
    exec_stashes_acquire(&st, 1, &fill); /* copy 0 is still needed by version 0 */
}
END_TEST

START_TEST(test_stash_unknown_version) {
    ExecStashes st;
    exec_stashes_init(&st, 2);
    exec_stashes_find(&st, 3);
}
END_TEST

int main(void) {
    Suite *s = suite_create("exec-stash");
    TCase *tc = tcase_create("stash");
    tcase_add_test(tc, test_stash_versions);
    tcase_add_test_raise_signal(tc, test_stash_exhausted, SIGABRT);
    tcase_add_test_raise_signal(tc, test_stash_unknown_version, SIGABRT);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
