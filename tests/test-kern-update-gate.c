/* SPDX-License-Identifier: MIT
 * test-kern-update-gate.c: the update gate (kernels/kern-update-gate.h), the one rule the CPU
 * backend applies on the host and the CUDA optimizer on the device: the norm, whether a step
 * applies (finite, not poisoned) and the clipping factor, in closed form.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kern-update-gate.h"
#include "optim-cpu.h"

/* A finite norm: applied, the norm is sqrt of the squared norm, no clipping without a
 * threshold or below it. */
START_TEST(test_gate_finite) {
    KernUpdateGate g = kern_update_gate(25.0, 0.0f, 0);
    ck_assert_double_eq(g.grad_norm, 5.0);
    ck_assert_int_eq(g.applied, 1);
    ck_assert_float_eq(g.factor, 1.0f);
    g = kern_update_gate(25.0, 5.0f, 0); /* exactly at the threshold: not above it */
    ck_assert_float_eq(g.factor, 1.0f);
    g = kern_update_gate(0.0, 1.0f, 0);
    ck_assert_double_eq(g.grad_norm, 0.0);
    ck_assert_int_eq(g.applied, 1);
    ck_assert_float_eq(g.factor, 1.0f);
}
END_TEST

/* Above the threshold: factor = clip / (norm + 1e-6), in double then rounded to float. */
START_TEST(test_gate_clip) {
    KernUpdateGate g = kern_update_gate(25.0, 1.0f, 0);
    ck_assert_int_eq(g.applied, 1);
    ck_assert_float_eq(g.factor, (float)(1.0 / (5.0 + 1e-6)));
    ck_assert_float_eq(g.factor, kern_clip_factor(5.0, 1.0f));
    g = kern_update_gate(1e6, 0.5f, 0); /* norm 1000 */
    ck_assert_float_eq(g.factor, (float)(0.5 / (1000.0 + 1e-6)));
    /* The scaled gradients' norm is the threshold, to the 1e-6 guard. */
    ck_assert_double_eq_tol(g.grad_norm * g.factor, 0.5, 1e-6);
}
END_TEST

/* Not finite (NaN or an overflowed sum): skipped; the norm is reported as it is. */
START_TEST(test_gate_not_finite) {
    KernUpdateGate g = kern_update_gate(NAN, 1.0f, 0);
    ck_assert(isnan(g.grad_norm));
    ck_assert_int_eq(g.applied, 0);
    ck_assert_float_eq(g.factor, 1.0f); /* NaN is not above the threshold */
    g = kern_update_gate(INFINITY, 1.0f, 0);
    ck_assert(isinf(g.grad_norm));
    ck_assert_int_eq(g.applied, 0);
    ck_assert_float_eq(g.factor, 0.0f);
    g = kern_update_gate(INFINITY, 0.0f, 0);
    ck_assert_int_eq(g.applied, 0);
    ck_assert_float_eq(g.factor, 1.0f);
    /* The largest finite double's root is finite: applied. */
    g = kern_update_gate(DBL_MAX, 0.0f, 0);
    ck_assert_int_eq(g.applied, 1);
}
END_TEST

/* Poisoned (the test hook): skipped whatever the norm; norm and factor as without it. */
START_TEST(test_gate_poison) {
    KernUpdateGate g = kern_update_gate(25.0, 1.0f, 1);
    ck_assert_int_eq(g.applied, 0);
    ck_assert_double_eq(g.grad_norm, 5.0);
    ck_assert_float_eq(g.factor, kern_clip_factor(5.0, 1.0f));
}
END_TEST

static Suite *gate_suite(void) {
    Suite *s = suite_create("kern-update-gate");
    TCase *tc = tcase_create("gate");
    tcase_add_test(tc, test_gate_finite);
    tcase_add_test(tc, test_gate_clip);
    tcase_add_test(tc, test_gate_not_finite);
    tcase_add_test(tc, test_gate_poison);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(gate_suite());
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
