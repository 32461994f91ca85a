/* SPDX-License-Identifier: MIT
 * test-cuda-util.h: helpers shared by the gpu-suite test programs: the skip-without-device
 * entry point, device buffers made from host fp32 arrays in either element type, NaN
 * poisoning, seeded random inputs and the error metric of the CUDA-vs-CPU comparisons.
 */
#pragma once

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "kern-cuda.h"

/* Runs @suite without forking (CUDA cannot be used in a child forked after the parent
 * initialised it) after creating the shared context; returns 77 without a usable CUDA device
 * (meson reports SKIP) after printing "SKIP: no usable CUDA device: " and the CUDA runtime's
 * reason (no driver, a driver older than the runtime, no device), which scripts/gpu-check
 * quotes, else the number of failed tests (0: success). */
int tcu_main(Suite *suite);

/* The context every test uses (created by tcu_main() on device 0, its own stream). */
KernCudaCtx *tcu_ctx(void);

/* x[i] = scale * N(0, 1) from a generator seeded by @seed. */
void tcu_randn(float *x, size_t n, float scale, uint64_t seed);
/* x[i] = lo + (hi - lo) * U[0, 1). */
void tcu_uniform(float *x, size_t n, float lo, float hi, uint64_t seed);

/* Rounds @n host floats in place to the values @dt can hold (identity for fp32), through the
 * device conversion kernels, so that a CPU reference sees exactly the GPU's inputs. */
void tcu_round(float *x, size_t n, KernDtype dt);

/* A device buffer of @n elements of @dt holding @host (fp32) converted; (transfer full):
 * release with tcu_free(). @host NULL: filled with NaN (poisoned). */
void *tcu_upload(const float *host, size_t n, KernDtype dt);
/* A device buffer of @bytes bytes, every byte 0xff (NaN in fp32 and bf16). */
void *tcu_alloc_poisoned(size_t bytes);
/* Device int32 copy of @host (n ids). */
int32_t *tcu_upload_ids(const int32_t *host, size_t n);
/* A host fp32 copy (transfer full, free()) of @n elements of @dt at @dev. Synchronises. */
float *tcu_download(const void *dev, size_t n, KernDtype dt);
void   tcu_free(void *dev);

/* max_i |got - ref| / max_i |ref| (absolute when ref is all 0); +inf when any got is not
 * finite while its ref is, so unwritten (NaN-poisoned) outputs always fail. */
double tcu_rel_err(const float *got, const float *ref, size_t n);

/* Asserts tcu_rel_err(got, ref, n) <= tol, naming @what in the failure message. */
#define tcu_assert_close(got, ref, n, tol, what)                                                   \
    do {                                                                                           \
        double tcu_err_ = tcu_rel_err((got), (ref), (n));                                          \
        ck_assert_msg(tcu_err_ <= (tol), "%s: relative error %.3g > %.3g", (what), tcu_err_,       \
                      (double)(tol));                                                              \
    } while (0)
