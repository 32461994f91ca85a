/* SPDX-License-Identifier: MIT
 * test-exec-comm-launcher.c: no rank outlives its launcher (exec/comm/exec-comm-launcher.c).
 * A process tied to its parent ends by SIGTERM once that parent is killed, and the progress
 * loop's check ends a process whose parent is no longer the launcher it recorded. This test
 * process is a child subreaper, so that it can reap the orphan and read how it ended.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-comm-private.h"

/* Waits at most @limit_us for the orphan @pid. Returns: its wait status, or -1. */
static int reap_within(pid_t pid, int64_t limit_us) {
    int64_t end = g_get_monotonic_time() + limit_us;
    int     status = 0;
    while (g_get_monotonic_time() < end) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return status;
        g_usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* The launcher (the middle process) is killed: the rank it started, tied to it, ends by
 * SIGTERM within a second, although nothing else would end it. */
START_TEST(test_tie) {
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t launcher = fork();
    ck_assert_int_ge(launcher, 0);
    if (launcher == 0) {
        pid_t rank = fork();
        if (rank == 0) {
            signal(SIGTERM, SIG_DFL); /* not the test runner's handler, which Check forks in */
            exec_comm_launcher_tie();
            if (write(ready[1], &rank, sizeof rank) != sizeof rank)
                _exit(1);
            for (;;)
                pause();
        }
        if (write(ready[1], &rank, sizeof rank) != sizeof rank)
            _exit(1);
        for (;;)
            pause();
    }
    /* Two words in either order: the rank's pid from the launcher, 0 from the tied rank. */
    pid_t words[2] = {-1, -1};
    ck_assert_int_eq(read(ready[0], &words[0], sizeof words[0]), sizeof words[0]);
    ck_assert_int_eq(read(ready[0], &words[1], sizeof words[1]), sizeof words[1]);
    pid_t rank = MAX(words[0], words[1]);
    ck_assert_int_eq(MIN(words[0], words[1]), 0);
    ck_assert_int_gt(rank, 0);
    ck_assert_int_eq(kill(launcher, SIGKILL), 0);
    ck_assert_int_eq(waitpid(launcher, NULL, 0), launcher);
    int status = reap_within(rank, G_USEC_PER_SEC);
    ck_assert_msg(status != -1, "the rank outlived its launcher by a second");
    ck_assert(WIFSIGNALED(status));
    ck_assert_int_eq(WTERMSIG(status), SIGTERM);
}
END_TEST

/* A parent that is not the recorded launcher: the check ends the process by SIGTERM; the
 * recorded launcher itself: the check returns. */
START_TEST(test_check) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        ExecComm comm = {.rank = 1, .launcher_pid = (int64_t)getppid()};
        exec_comm_launcher_check(&comm);
        comm.launcher_checked_us = 0;
        comm.launcher_pid = (int64_t)getppid() + 1;
        exec_comm_launcher_check(&comm);
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status));
    ck_assert_int_eq(WTERMSIG(status), SIGTERM);
}
END_TEST

int main(void) {
    Suite *s = suite_create("exec-comm-launcher");
    TCase *tc = tcase_create("launcher");
    tcase_add_test(tc, test_tie);
    tcase_add_test(tc, test_check);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
