/* SPDX-License-Identifier: MIT
 * kern-gemm.c: kern_gemm() (kern-gemm.h). Splits C into blocks of whole rows and hands each to
 * a single-threaded cblas_sgemm as one task of the kern-pool team; OpenBLAS keeps the core type
 * the environment chose.
 */
#include "kern-gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <stddef.h>

#include "kern-check.h"
#include "kern-pool.h"

/* Blocks per worker: a few, so that a thread slowed by other load takes fewer. */
#define GEMM_TASKS_PER_WORKER 2

typedef struct {
    KernGemmTrans ta, tb;
    int           M, N, K;
    float         alpha, beta;
    const float  *A, *B;
    float        *C;
    int           lda, ldb, ldc;
    int           rows; /* rows of C per block (the last may have fewer) */
} GemmJob;

static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;

/* The team supplies the parallelism: OpenBLAS threads on top would oversubscribe the cores. */
static void gemm_init(void) {
    openblas_set_num_threads(1);
}

/* Rows [m0, m1) of C. */
static void gemm_rows(const GemmJob *j, int m0, int m1) {
    const float *a = j->ta == KERN_GEMM_TRANS ? j->A + m0 : j->A + (size_t)m0 * j->lda;
    cblas_sgemm(CblasRowMajor, j->ta == KERN_GEMM_TRANS ? CblasTrans : CblasNoTrans,
                j->tb == KERN_GEMM_TRANS ? CblasTrans : CblasNoTrans, m1 - m0, j->N, j->K, j->alpha,
                a, j->lda, j->B, j->ldb, j->beta, j->C + (size_t)m0 * j->ldc, j->ldc);
}

static void gemm_task(void *arg, int task) {
    const GemmJob *j = arg;
    int            m0 = task * j->rows;
    gemm_rows(j, m0, m0 + j->rows < j->M ? m0 + j->rows : j->M);
}

void kern_gemm(KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    KERN_ASSERT(M >= 0 && N >= 0 && K >= 0);
    pthread_once(&gemm_once, gemm_init);
    if (M == 0 || N == 0)
        return;
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
                 .rows = M};
    int     workers = kern_pool_workers();
    if (workers > 1 && M >= 2 * KERN_GEMM_ROW_ALIGN && (double)M * N * K >= KERN_GEMM_SERIAL_MACS) {
        int want = workers * GEMM_TASKS_PER_WORKER;
        j.rows = (M + want - 1) / want;
        j.rows = (j.rows + KERN_GEMM_ROW_ALIGN - 1) / KERN_GEMM_ROW_ALIGN * KERN_GEMM_ROW_ALIGN;
    }
    int n_tasks = (M + j.rows - 1) / j.rows;
    if (n_tasks == 1)
        gemm_rows(&j, 0, M);
    else
        kern_parallel_for(n_tasks, gemm_task, &j);
}
