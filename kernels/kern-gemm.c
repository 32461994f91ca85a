/* SPDX-License-Identifier: MIT
 * kern-gemm.c: kern_gemm() (kern-gemm.h). Cuts C into a grid of blocks chosen from the
 * product's shape alone and hands each block to a single-threaded cblas_sgemm as one task of
 * the kern-pool team; OpenBLAS keeps the core type the environment chose.
 */
#include "kern-gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <stddef.h>

#include "kern-check.h"
#include "kern-pool.h"

typedef struct {
    KernGemmTrans ta, tb;
    int           M, N, K;
    float         alpha, beta;
    const float  *A, *B;
    float        *C;
    int           lda, ldb, ldc;
    int           by_cols;  /* 1: blocks of whole columns of C, 0: of whole rows */
    int           align;    /* rows or columns per unit; blocks start on unit boundaries */
    int           units;    /* units along the cut dimension, the last maybe shorter */
    int           n_blocks; /* from the shape only, never from the team size */
} GemmJob;

static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;

/* The team supplies the parallelism: OpenBLAS threads on top would oversubscribe the cores. */
static void gemm_init(void) {
    openblas_set_num_threads(1);
}

/* The block of rows [r0, r1) and columns [c0, c1) of C: one single-threaded sgemm call. */
static void gemm_block(const GemmJob *j, int r0, int r1, int c0, int c1) {
    const float *a = j->ta == KERN_GEMM_TRANS ? j->A + r0 : j->A + (size_t)r0 * j->lda;
    const float *b = j->tb == KERN_GEMM_TRANS ? j->B + (size_t)c0 * j->ldb : j->B + c0;
    cblas_sgemm(CblasRowMajor, j->ta == KERN_GEMM_TRANS ? CblasTrans : CblasNoTrans,
                j->tb == KERN_GEMM_TRANS ? CblasTrans : CblasNoTrans, r1 - r0, c1 - c0, j->K,
                j->alpha, a, j->lda, b, j->ldb, j->beta, j->C + (size_t)r0 * j->ldc + c0, j->ldc);
}

/* First row (or column) of block @block: the units shared out as evenly as whole units allow. */
static int gemm_block_start(const GemmJob *j, int block) {
    int extent = j->by_cols ? j->N : j->M;
    int start = (int)((long long)j->units * block / j->n_blocks) * j->align;
    return start < extent ? start : extent;
}

static void gemm_task(void *arg, int block) {
    const GemmJob *j = arg;
    int            lo = gemm_block_start(j, block), hi = gemm_block_start(j, block + 1);
    if (j->by_cols)
        gemm_block(j, 0, j->M, lo, hi);
    else
        gemm_block(j, lo, hi, 0, j->N);
}

/* Blocks for a product of @macs multiply-adds over @units units: a power of two, so that teams
 * of 1, 2, 4 and 8 threads share them evenly, each block at least KERN_GEMM_BLOCK_MACS. */
static int gemm_n_blocks(double macs, int units) {
    if (macs < KERN_GEMM_SERIAL_MACS)
        return 1;
    int n = 1;
    while (n < KERN_GEMM_MAX_BLOCKS && macs / (2.0 * n) >= KERN_GEMM_BLOCK_MACS)
        n *= 2;
    return n < units ? n : units;
}

/* C = beta * C for a product with nothing to add (alpha 0 or K 0): A and B are never read, and
 * beta 0 writes zeros without reading C. */
static void gemm_scale(float beta, float *C, int M, int N, int ldc) {
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        for (int jj = 0; jj < N; jj++)
            c[jj] = beta == 0.0f ? 0.0f : beta * c[jj];
    }
}

void kern_gemm(KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    KERN_ASSERT(M >= 0 && N >= 0 && K >= 0);
    pthread_once(&gemm_once, gemm_init);
    if (M == 0 || N == 0)
        return;
    if (alpha == 0.0f || K == 0) {
        gemm_scale(beta, C, M, N, ldc);
        return;
    }
    /* Cut along the longer side of C: each block packs all of the other operand again (rows
     * repack op(B), columns op(A)), so the cut that repeats the smaller operand costs least. */
    int     by_cols = N > M;
    int     align = by_cols ? KERN_GEMM_COL_ALIGN : KERN_GEMM_ROW_ALIGN;
    int     units = ((by_cols ? N : M) + align - 1) / align;
    GemmJob j = {.ta = ta,
                 .tb = tb,
                 .M = M,
                 .N = N,
                 .K = K,
                 .alpha = alpha,
                 .beta = beta,
                 .A = A,
                 .B = B,
                 .C = C,
                 .lda = lda,
                 .ldb = ldb,
                 .ldc = ldc,
                 .by_cols = by_cols,
                 .align = align,
                 .units = units,
                 .n_blocks = gemm_n_blocks((double)M * N * K, units)};
    if (j.n_blocks == 1)
        gemm_block(&j, 0, M, 0, N);
    else
        kern_parallel_for(j.n_blocks, gemm_task, &j);
}
