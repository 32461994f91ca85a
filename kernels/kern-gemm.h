/* SPDX-License-Identifier: MIT
 * kern-gemm.h: the CPU kernels' single-precision matrix product (row-major, BLAS's sgemm
 * semantics), threaded on the kern-pool team and vectorised for the processor it runs on
 * (kern-simd.h).
 */
#pragma once

#include "kern-simd.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    KERN_GEMM_NO_TRANS = 0, /* op(X) = X */
    KERN_GEMM_TRANS = 1     /* op(X) = X^T */
} KernGemmTrans;

/* C = alpha * op(A) @ op(B) + beta * C, all row-major, with op(A) (M, K) and op(B) (K, N):
 *   A: (M, K) with row stride lda >= K, or (K, M) with lda >= M when transposed
 *   B: (K, N) with ldb >= N, or (N, K) with ldb >= K when transposed
 *   C: (M, N) with ldc >= N
 * beta == 0 never reads C (it may hold NaN). C must not overlap A or B.
 * Each element of C is reduced over k in ascending order, in blocks of KERN_GEMM_KC: within a
 * block the products accumulate from zero with fused multiply-adds (baseline x86-64: multiply
 * then add), and each block's sum is scaled by alpha and added to C. Blocks are partitioned
 * among threads by rows and columns of C only, so results are bitwise identical for any thread
 * count; they may differ between instruction sets. */
void kern_gemm(KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* kern_gemm() with the register tile of instruction set @isa instead of kern_isa()'s; @isa
 * must not exceed kern_isa(). For tests of the tiles this processor would not pick. */
void kern_gemm_isa(KernIsa isa, KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K,
                   float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc);

/* Depth of one k-block (see kern_gemm()). */
enum { KERN_GEMM_KC = 256 };

#ifdef __cplusplus
}
#endif
