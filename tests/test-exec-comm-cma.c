/* SPDX-License-Identifier: MIT
 * test-exec-comm-cma.c: the choice of Open MPI's single-copy mechanism (exec/comm/exec-comm-cma.c)
 * before MPI_Init: a mechanism the caller set is kept as it is; unset, it becomes the probe's
 * answer; and a process whose seccomp filter refuses process_vm_readv (as a container's may)
 * gets "none". Each case runs in a child of its own, so that neither the environment nor the
 * filter reaches another case.
 */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "exec-comm-private.h"

#define MCA "OMPI_MCA_btl_vader_single_copy_mechanism"

/* Runs @body in a forked child. Returns: the child's exit status (-1 when it did not exit). */
static int in_child(int (*body)(void)) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(body());
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Every process_vm_readv of this process and its children fails with EPERM from here on. */
static gboolean refuse_process_vm_readv(void) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)G_N_ELEMENTS(filter), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/* Exit status 0: the caller's value is returned and left in place. */
static int keeps_callers(void) {
    gboolean set = FALSE;
    g_setenv(MCA, "none", TRUE);
    if (strcmp(exec_comm_cma_choose(&set), "none") != 0 || !set)
        return 1;
    g_setenv(MCA, "cma", TRUE);
    if (strcmp(exec_comm_cma_choose(&set), "cma") != 0 || strcmp(g_getenv(MCA), "cma") != 0)
        return 2;
    return 0;
}

/* Exit status 0: unset, the environment gets the probe's answer. */
static int follows_probe(void) {
    gboolean set = TRUE;
    g_unsetenv(MCA);
    const char *expected = exec_comm_cma_permitted() ? "cma" : "none";
    const char *chosen = exec_comm_cma_choose(&set);
    if (strcmp(chosen, expected) != 0 || set)
        return 1;
    return g_strcmp0(g_getenv(MCA), expected) == 0 ? 0 : 2;
}

/* Exit status 0: with process_vm_readv refused, the probe says no and "none" is chosen;
 * 77 when this kernel takes no seccomp filter. */
static int refused(void) {
    gboolean set = TRUE;
    if (!refuse_process_vm_readv())
        return 77;
    g_unsetenv(MCA);
    if (exec_comm_cma_permitted())
        return 1;
    return g_strcmp0(exec_comm_cma_choose(&set), "none") == 0 ? 0 : 2;
}

START_TEST(test_keeps_callers) {
    ck_assert_int_eq(in_child(keeps_callers), 0);
}
END_TEST

START_TEST(test_follows_probe) {
    ck_assert_int_eq(in_child(follows_probe), 0);
}
END_TEST

START_TEST(test_refused) {
    int status = in_child(refused);
    if (status == 77)
        return; /* no seccomp here: nothing to check */
    ck_assert_int_eq(status, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("exec-comm-cma");
    TCase *tc = tcase_create("choose");
    tcase_add_test(tc, test_keeps_callers);
    tcase_add_test(tc, test_follows_probe);
    tcase_add_test(tc, test_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
