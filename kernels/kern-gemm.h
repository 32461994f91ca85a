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
 * beta == 0 never reads C (it may hold NaN). C must not overlap A or B.
 * C is split among the calling thread's team into blocks of whole rows starting at multiples of
 * KERN_GEMM_ROW_ALIGN (never along K, never by columns), each block a single-threaded
 * cblas_sgemm call. OpenBLAS's kernel rounds an element the same way wherever such a block
 * starts, so results are bitwise identical for any kern_threads() (tests/test-gemm.c asserts
 * it); blocks of columns, or rows at other offsets, would change the rounding. Products below
 * KERN_GEMM_SERIAL_MACS multiply-adds, with at most KERN_GEMM_ROW_ALIGN rows, or called from
 * inside a task run on the calling thread alone. OpenBLAS's own thread count is set to 1
 * on the first call. */
void kern_gemm(KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc);

enum {
    KERN_GEMM_SERIAL_MACS = 1 << 18, /* smaller products are not split */
    /* every block starts at a multiple. OpenBLAS 0.3.21's Haswell sgemm walks the rows of a
     * row-major C (its columns in column-major terms) in groups of 12 and rounds by group
     * shape, so blocks must start on a group boundary; 24 also keeps 8-row tiles whole. */
    KERN_GEMM_ROW_ALIGN = 24
};

#ifdef __cplusplus
}
#endif
