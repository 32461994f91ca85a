/* SPDX-License-Identifier: MIT
 * test-exec-grad-path.c: the choice of a GPU backend's gradient reduction path
 * (exec/backend/exec-grad-path.h) on made-up places: one replica reduces nothing; a build
 * without NCCL, or two replicas on one device of one host, take the host-staged path; replicas
 * on distinct devices (on one host, or on several hosts under the same device ordinal) take
 * NCCL.
 */
#include <check.h>
#include <signal.h>
#include <string.h>

#include "exec-grad-path.h"

/* Place of a replica on @host with a uuid made of the byte @device. */
static ExecGradPlace place(const char *host, uint8_t device) {
    uint8_t uuid[16];
    for (int i = 0; i < 16; i++)
        uuid[i] = (uint8_t)(device + i);
    ExecGradPlace p;
    exec_grad_place_init(&p, host, uuid);
    return p;
}

START_TEST(test_one_replica) {
    ExecGradPlace p[1] = {place("n0", 0)};
    ck_assert_int_eq(exec_grad_path_choose(TRUE, p, 1), EXEC_GRAD_PATH_NONE);
    ck_assert_int_eq(exec_grad_path_choose(FALSE, p, 1), EXEC_GRAD_PATH_NONE);
    ck_assert_str_eq(exec_grad_path_name(EXEC_GRAD_PATH_NONE), "none");
}
END_TEST

START_TEST(test_shared_device) {
    /* Two ranks on one GPU (scripts/gpu-check's layout): NCCL refuses it. */
    ExecGradPlace p[2] = {place("n0", 0), place("n0", 0)};
    ck_assert_int_eq(exec_grad_path_choose(TRUE, p, 2), EXEC_GRAD_PATH_HOST);
    /* Three replicas, the last two sharing: one shared device is enough. */
    ExecGradPlace q[3] = {place("n0", 0), place("n0", 1), place("n0", 1)};
    ck_assert_int_eq(exec_grad_path_choose(TRUE, q, 3), EXEC_GRAD_PATH_HOST);
    ck_assert_str_eq(exec_grad_path_name(EXEC_GRAD_PATH_HOST), "host");
}
END_TEST

START_TEST(test_distinct_devices) {
    ExecGradPlace p[4] = {place("n0", 0), place("n0", 1), place("n0", 2), place("n0", 3)};
    ck_assert_int_eq(exec_grad_path_choose(TRUE, p, 4), EXEC_GRAD_PATH_NCCL);
    ck_assert_str_eq(exec_grad_path_name(EXEC_GRAD_PATH_NCCL), "nccl");
}
END_TEST

START_TEST(test_hosts) {
    /* Device 0 of two nodes: two GPUs (the uuids differ). */
    ExecGradPlace p[2] = {place("n0", 0), place("n1", 7)};
    ck_assert_int_eq(exec_grad_path_choose(TRUE, p, 2), EXEC_GRAD_PATH_NCCL);
    /* The same uuid under two host names is two places: only a uuid on one host is one. */
    ExecGradPlace q[2] = {place("n0", 0), place("n1", 0)};
    ck_assert_int_eq(exec_grad_path_choose(TRUE, q, 2), EXEC_GRAD_PATH_NCCL);
    /* A host name longer than the field is cut: both still compare equal. */
    char long_name[2 * EXEC_GRAD_HOST_BYTES];
    memset(long_name, 'h', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    ExecGradPlace r[2] = {place(long_name, 3), place(long_name, 3)};
    ck_assert_uint_eq(strlen(r[0].host), EXEC_GRAD_HOST_BYTES - 1);
    ck_assert_int_eq(exec_grad_path_choose(TRUE, r, 2), EXEC_GRAD_PATH_HOST);
}
END_TEST

START_TEST(test_no_nccl) {
    ExecGradPlace p[2] = {place("n0", 0), place("n0", 1)};
    ck_assert_int_eq(exec_grad_path_choose(FALSE, p, 2), EXEC_GRAD_PATH_HOST);
}
END_TEST

START_TEST(test_no_replicas) {
    exec_grad_path_choose(TRUE, NULL, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("exec-grad-path");
    TCase *tc = tcase_create("choose");
    tcase_add_test(tc, test_one_replica);
    tcase_add_test(tc, test_shared_device);
    tcase_add_test(tc, test_distinct_devices);
    tcase_add_test(tc, test_hosts);
    tcase_add_test(tc, test_no_nccl);
    tcase_add_test_raise_signal(tc, test_no_replicas, SIGABRT);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
