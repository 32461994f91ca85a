/* SPDX-License-Identifier: MIT
 * kern-check.h: abort-on-failure macros of kernels/ (docs/style.md §3). KERN_ASSERT guards
 * invariants (never compiled out); KERN_CHECK_GEN checks a library call against its success
 * value and prints the statement, function, file, line and the library's error string. The
 * CUDA, cuBLASLt and NCCL instances name their library's functions only when expanded, so
 * they are defined everywhere (whatever the include order) and used where those headers are.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define KERN_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define KERN_CHECK_GEN(stmt, success, strerror_fn)                                                 \
    do {                                                                                           \
        __typeof__(stmt) kern_check_status_ = (stmt);                                              \
        if (kern_check_status_ != (success)) {                                                     \
            fprintf(stderr, "%s failed in %s at %s:%d: %s\n", #stmt, __func__, __FILE__, __LINE__, \
                    strerror_fn(kern_check_status_));                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define KERN_CUDA_CHECK(stmt)   KERN_CHECK_GEN(stmt, cudaSuccess, cudaGetErrorString)
#define KERN_CUBLAS_CHECK(stmt) KERN_CHECK_GEN(stmt, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString)
#define KERN_NCCL_CHECK(stmt)   KERN_CHECK_GEN(stmt, ncclSuccess, ncclGetErrorString)
