/* SPDX-License-Identifier: MIT
 * kern-gemm.h: the CPU kernels' single-precision matrix product (row-major, BLAS's sgemm
 * semantics): OpenBLAS's cblas_sgemm on blocks of C, one block per task of the kern-pool team,
 * so that pipeline stages each use their own threads and never OpenBLAS's shared pool.
 */
#pragma once

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
 * BLAS's rules for special scalars hold whatever kernel OpenBLAS picked: alpha == 0 or K == 0
 * never reads A or B (C becomes beta * C), and beta == 0 never reads C (it may hold NaN).
 * C must not overlap A or B.
 * Determinism: C is cut into a grid of blocks (whole rows, or whole columns when C is wider
 * than tall) whose number and bounds depend only on M, N and K, and each block is one
 * single-threaded cblas_sgemm call, run by whichever thread of the caller's team takes it. The
 * same product is thus the same sequence of calls for any kern_threads(), and gives the same
 * bits under every core type OpenBLAS can pick (tests/test-gemm.c checks each one the CPU
 * supports). Cutting by the team size would not: OpenBLAS's AVX-512 kernels round a block
 * differently by its shape (small blocks take another code path). OpenBLAS's own thread
 * count is set to 1 on the first call. */
void kern_gemm(KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc);

enum {
    KERN_GEMM_SERIAL_MACS = 1 << 18, /* smaller products are one block */
    KERN_GEMM_BLOCK_MACS = 1 << 24,  /* a block has at least this many multiply-adds... */
    /* ...and a product at most this many: each block repacks all of the other operand, and
     * on pacer-bench-step's products 8 or 16 blocks cost 4-6% of a step against 1.005x for 4
     * (2 threads, 2026-12-02). A team of more than 4 threads leaves the rest idle in a product. */
    KERN_GEMM_MAX_BLOCKS = 4,
    /* blocks of rows start on multiples of 24 and blocks of columns on multiples of 64, so
     * OpenBLAS's register tiles (groups of 8 or 12 rows, 16 or 32 columns) stay whole: for
     * speed only, the bits do not depend on it. */
    KERN_GEMM_ROW_ALIGN = 24,
    KERN_GEMM_COL_ALIGN = 64
};

#ifdef __cplusplus
}
#endif
