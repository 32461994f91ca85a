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

typedef struct {
    KernGemmTrans ta, tb;
    int           M, N, K;
    float         alpha, beta;
    const float  *A, *B;
    float        *C;
    int           lda, ldb, ldc;
    int           n_tasks; /* blocks of rows */
    int           units;   /* row groups of KERN_GEMM_ROW_ALIGN, the last maybe shorter */
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

/* First row of block @task: the row groups shared out as evenly as whole groups allow. */
static int gemm_block_start(const GemmJob *j, int task) {
    int start = (int)((long long)j->units * task / j->n_tasks) * KERN_GEMM_ROW_ALIGN;
    return start < j->M ? start : j->M;
}

static void gemm_task(void *arg, int task) {
    const GemmJob *j = arg;
    gemm_rows(j, gemm_block_start(j, task), gemm_block_start(j, task + 1));
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
                 .n_tasks = 1,
                 .units = (M + KERN_GEMM_ROW_ALIGN - 1) / KERN_GEMM_ROW_ALIGN};
    /* One block per worker: every block packs all of op(B) again (OpenBLAS's copy of it), so
     * more blocks cost more than they balance (a few percent per doubling on the LM head). */
    if ((double)M * N * K >= KERN_GEMM_SERIAL_MACS) {
        int workers = kern_pool_workers();
        j.n_tasks = workers < j.units ? workers : j.units;
    }
    if (j.n_tasks <= 1)
        gemm_rows(&j, 0, M);
    else
        kern_parallel_for(j.n_tasks, gemm_task, &j);
}
