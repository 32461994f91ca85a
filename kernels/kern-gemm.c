/* SPDX-License-Identifier: MIT
 * kern-gemm.c: kern_gemm() (kern-gemm.h), a blocked matrix product in the style of
 * GotoBLAS/BLIS. Each task of the kern-pool team computes one block of C over all of K, in
 * cache blocks of MC rows, NC columns and KC depth; transposed operands are packed into
 * MR-tall / NR-wide micro-panels, the others are read in place. An MR x NR register tile does
 * the arithmetic: one C body compiled for AVX-512, AVX2 + FMA and baseline x86-64, picked at
 * run time (kern-simd.h).
 */
#include "kern-gemm.h"

#include <stdint.h>
#include <string.h>

#include "kern-check.h"
#include "kern-pool.h"
#include "kern-simd.h"

#define GEMM_NR       32 /* columns of a register tile: two 16-float vectors */
#define GEMM_MR_MAX   8  /* rows of the widest register tile */
#define GEMM_KC       KERN_GEMM_KC
#define GEMM_MC_TILES 16  /* register tiles of rows per cache block of op(A) */
#define GEMM_NC       512 /* columns of op(B) per cache block */
/* packed op(B) of one thread: a KC x NC panel, or all k-blocks of one when they fit */
#define GEMM_BPACK_FLOATS (1 << 20)
/* tasks per worker: several, so that a thread slowed by other load takes fewer */
#define GEMM_TASKS_PER_WORKER 8
/* fewest rows of a task that packs op(B) for itself */
#define GEMM_MIN_PACKED_ROWS 64
/* an untransposed op(A) up to this size (floats) is read by every task again */
#define GEMM_SMALL_A_FLOATS (1 << 20)
/* below this many multiply-adds a product runs on the calling thread alone */
#define GEMM_SERIAL_MACS (1 << 18)

typedef float GemmVec __attribute__((vector_size(64)));

/* --- register tile --- */

/* unaligned vector load and store (macros: a function returning a vector would need the
 * caller's instruction set) */
#define GEMM_LOAD(v, p)  memcpy(&(v), (p), sizeof(GemmVec))
#define GEMM_STORE(p, v) memcpy((p), &(v), sizeof(GemmVec))

/* c (MR, NR) with row stride ldc = alpha * sum_k a(:, k) b(k, :) + beta * c, where element
 * (i, k) of a is a[i * a_rs + k * a_ks] and row k of b starts at b + k * b_ks; beta == 0 never
 * reads c. Every sum starts from zero and runs k upwards. */
#define GEMM_TILE_BODY(MR)                                                                         \
    do {                                                                                           \
        GemmVec acc0[MR], acc1[MR];                                                                \
        _Pragma("GCC unroll 16") for (int i = 0; i < (MR); i++) acc0[i] = acc1[i] = (GemmVec){0};  \
        for (int k = 0; k < kc; k++) {                                                             \
            GemmVec      b0, b1;                                                                   \
            const float *ak = a + (size_t)k * a_ks;                                                \
            GEMM_LOAD(b0, b + (size_t)k * b_ks);                                                   \
            GEMM_LOAD(b1, b + (size_t)k * b_ks + 16);                                              \
            _Pragma("GCC unroll 8") for (int i = 0; i < (MR); i++) {                               \
                float s = ak[(size_t)i * a_rs];                                                    \
                acc0[i] += s * b0;                                                                 \
                acc1[i] += s * b1;                                                                 \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 16") for (int i = 0; i < (MR); i++) {                                  \
            float  *ci = c + (size_t)i * ldc;                                                      \
            GemmVec r0 = acc0[i], r1 = acc1[i];                                                    \
            if (alpha != 1.0f) {                                                                   \
                r0 *= alpha;                                                                       \
                r1 *= alpha;                                                                       \
            }                                                                                      \
            if (beta != 0.0f) {                                                                    \
                GemmVec c0, c1;                                                                    \
                GEMM_LOAD(c0, ci);                                                                 \
                GEMM_LOAD(c1, ci + 16);                                                            \
                if (beta != 1.0f) {                                                                \
                    c0 *= beta;                                                                    \
                    c1 *= beta;                                                                    \
                }                                                                                  \
                r0 += c0;                                                                          \
                r1 += c1;                                                                          \
            }                                                                                      \
            GEMM_STORE(ci, r0);                                                                    \
            GEMM_STORE(ci + 16, r1);                                                               \
        }                                                                                          \
    } while (0)

#define GEMM_TILE_ARGS                                                                             \
    int kc, const float *restrict a, size_t a_rs, size_t a_ks, const float *restrict b,            \
        size_t b_ks, float *restrict c, size_t ldc, float alpha, float beta

typedef void (*GemmTileFn)(GEMM_TILE_ARGS);

#if KERN_HAVE_CLONES
/* 16 zmm accumulators */
__attribute__((target("arch=x86-64-v4"))) static void gemm_tile_avx512(GEMM_TILE_ARGS) {
    GEMM_TILE_BODY(8);
}

/* 12 ymm accumulators (a 16-float vector is two ymm) */
__attribute__((target("arch=x86-64-v3"))) static void gemm_tile_avx2(GEMM_TILE_ARGS) {
    GEMM_TILE_BODY(3);
}
#endif

static void gemm_tile_baseline(GEMM_TILE_ARGS) {
    GEMM_TILE_BODY(2);
}

typedef struct {
    int        mr;
    GemmTileFn tile;
} GemmIsa;

static const GemmIsa *gemm_isa(KernIsa isa) {
    static const GemmIsa baseline = {2, gemm_tile_baseline};
#if KERN_HAVE_CLONES
    static const GemmIsa avx512 = {8, gemm_tile_avx512};
    static const GemmIsa avx2 = {3, gemm_tile_avx2};
    switch (isa) {
    case KERN_ISA_AVX512:
        return &avx512;
    case KERN_ISA_AVX2:
        return &avx2;
    default:
        break;
    }
#endif
    return &baseline;
}

/* --- packing --- */

/* Micro-panel of op(A): rows [i0, i0 + mr) (zero past M), k in [p0, p0 + kc), as (kc, mr). */
static void gemm_pack_a(float *restrict dst, KernGemmTrans ta, const float *A, size_t lda, int M,
                        int i0, int mr, int p0, int kc) {
    int rows = M - i0 < mr ? M - i0 : mr;
    if (ta == KERN_GEMM_TRANS && rows == GEMM_MR_MAX && mr == GEMM_MR_MAX) {
        /* the common full panel: a fixed-size copy per k */
        for (int k = 0; k < kc; k++)
            memcpy(dst + (size_t)k * GEMM_MR_MAX, A + (size_t)(p0 + k) * lda + i0,
                   GEMM_MR_MAX * sizeof(float));
        return;
    }
    for (int k = 0; k < kc; k++) {
        float *d = dst + (size_t)k * mr;
        if (ta == KERN_GEMM_TRANS) {
            const float *src = A + (size_t)(p0 + k) * lda + i0;
            for (int r = 0; r < rows; r++)
                d[r] = src[r];
        } else {
            const float *src = A + (size_t)i0 * lda + p0 + k;
            for (int r = 0; r < rows; r++)
                d[r] = src[(size_t)r * lda];
        }
        for (int r = rows; r < mr; r++)
            d[r] = 0.0f;
    }
}

/* Micro-panel of op(B): columns [j0, j0 + NR) (zero past N), k in [p0, p0 + kc), as (kc, NR). */
static void gemm_pack_b(float *restrict dst, KernGemmTrans tb, const float *B, size_t ldb, int N,
                        int j0, int p0, int kc) {
    int cols = N - j0 < GEMM_NR ? N - j0 : GEMM_NR;
    if (tb == KERN_GEMM_NO_TRANS) {
        for (int k = 0; k < kc; k++) {
            const float *src = B + (size_t)(p0 + k) * ldb + j0;
            float       *d = dst + (size_t)k * GEMM_NR;
            if (cols == GEMM_NR) {
                memcpy(d, src, GEMM_NR * sizeof(float));
                continue;
            }
            for (int c = 0; c < GEMM_NR; c++)
                d[c] = c < cols ? src[c] : 0.0f;
        }
        return;
    }
    /* op(B)[k][j] = B[j][k]: transpose cols rows of B */
    for (int c = 0; c < cols; c++) {
        const float *src = B + (size_t)(j0 + c) * ldb + p0;
        for (int k = 0; k < kc; k++)
            dst[(size_t)k * GEMM_NR + c] = src[k];
    }
    for (int c = cols; c < GEMM_NR; c++)
        for (int k = 0; k < kc; k++)
            dst[(size_t)k * GEMM_NR + c] = 0.0f;
}

/* --- driver --- */

static inline int gemm_min(int a, int b) {
    return a < b ? a : b;
}

static inline int gemm_ceil_div(int a, int b) {
    return (a + b - 1) / b;
}

/* One product. A task computes one block of C, rows [i0, i0 + mb) by columns [j0, j0 + nb),
 * over all of K. A transposed operand is packed by the task that uses it, so blocks are split
 * along the other operand's dimension only (no packing is repeated); an untransposed op(A) is
 * read in place, and so is op(B) unless the task has enough rows to repay packing it (pack_b).
 * Ragged edges are always packed. */
typedef struct {
    const GemmIsa *isa;
    KernGemmTrans  ta, tb;
    int            M, N, K;
    float          alpha, beta;
    const float   *A, *B;
    size_t         lda, ldb, ldc;
    float         *C;
    int            mc;     /* rows per cache block of op(A): GEMM_MC_TILES * mr */
    int            pack_b; /* 1: each task packs its panels of op(B) */
    int            mb, nb; /* block of one task: mb % mr == 0, nb % NR == 0 */
    int            n_mblocks, n_nblocks;
} GemmJob;

/* Per-thread scratch of a task. */
typedef struct {
    float *apack; /* (mc, KC): packed block of op(A), or the ragged last micro-panel */
    float *bpack; /* (GEMM_BPACK_FLOATS): packed panels of op(B), or the ragged last
                     micro-panel */
} GemmScratch;

/* C block rows [ic, ic + mcr) by the panel's columns [jc, jc + nc), k-block [pc, pc + kc).
 * @bpanel: op(B)'s packed micro-panels of this k-block and these columns (pack_b). */
static void gemm_block_kernel(const GemmJob *j, const GemmScratch *w, const float *bpanel, int ic,
                              int mcr, int jc, int nc, int pc, int kc) {
    int   mr = j->isa->mr;
    int   n_ir = (mcr + mr - 1) / mr, n_jr = (nc + GEMM_NR - 1) / GEMM_NR;
    float beta = pc == 0 ? j->beta : 1.0f;
    float tile[GEMM_MR_MAX * GEMM_NR];

    if (j->ta == KERN_GEMM_TRANS) {
        for (int ir = 0; ir < n_ir; ir++)
            gemm_pack_a(w->apack + (size_t)ir * mr * kc, j->ta, j->A, j->lda, j->M, ic + ir * mr,
                        mr, pc, kc);
    } else if (mcr % mr) {
        gemm_pack_a(w->apack, j->ta, j->A, j->lda, j->M, ic + (n_ir - 1) * mr, mr, pc, kc);
    }

    for (int jr = 0; jr < n_jr; jr++) {
        int          col = jc + jr * GEMM_NR;
        int          nr = nc - jr * GEMM_NR < GEMM_NR ? nc - jr * GEMM_NR : GEMM_NR;
        const float *b;
        size_t       b_ks;
        if (j->pack_b) {
            b = bpanel + (size_t)jr * kc * GEMM_NR;
            b_ks = GEMM_NR;
        } else if (nr < GEMM_NR) {
            gemm_pack_b(w->bpack, j->tb, j->B, j->ldb, j->N, col, pc, kc);
            b = w->bpack;
            b_ks = GEMM_NR;
        } else {
            b = j->B + (size_t)pc * j->ldb + col;
            b_ks = j->ldb;
        }
        for (int ir = 0; ir < n_ir; ir++) {
            int          row = ic + ir * mr;
            int          m_rows = mcr - ir * mr < mr ? mcr - ir * mr : mr;
            const float *a;
            size_t       a_rs = 1, a_ks = (size_t)mr;
            if (j->ta == KERN_GEMM_TRANS) {
                a = w->apack + (size_t)ir * mr * kc;
            } else if (m_rows < mr) {
                a = w->apack;
            } else {
                a = j->A + (size_t)row * j->lda + pc;
                a_rs = j->lda;
                a_ks = 1;
            }
            float *cp = j->C + (size_t)row * j->ldc + col;
            if (m_rows == mr && nr == GEMM_NR) {
                j->isa->tile(kc, a, a_rs, a_ks, b, b_ks, cp, j->ldc, j->alpha, beta);
                continue;
            }
            /* edge: the same tile on a copy, so edge elements get the same arithmetic */
            if (beta != 0.0f) {
                memset(tile, 0, sizeof tile);
                for (int r = 0; r < m_rows; r++)
                    memcpy(tile + r * GEMM_NR, cp + (size_t)r * j->ldc, (size_t)nr * sizeof(float));
            }
            j->isa->tile(kc, a, a_rs, a_ks, b, b_ks, tile, GEMM_NR, j->alpha, beta);
            for (int r = 0; r < m_rows; r++)
                memcpy(cp + (size_t)r * j->ldc, tile + r * GEMM_NR, (size_t)nr * sizeof(float));
        }
    }
}

/* Packs op(B)'s columns [jc, jc + nc), k-block [pc, pc + kc) into micro-panels at @dst. */
static void gemm_pack_b_panel(const GemmJob *j, float *dst, int jc, int nc, int pc, int kc) {
    for (int jr = 0; jr * GEMM_NR < nc; jr++)
        gemm_pack_b(dst + (size_t)jr * kc * GEMM_NR, j->tb, j->B, j->ldb, j->N, jc + jr * GEMM_NR,
                    pc, kc);
}

static void gemm_task(void *arg, int task) {
    const GemmJob *j = arg;
    int            i0 = (task / j->n_nblocks) * j->mb, j0 = (task % j->n_nblocks) * j->nb;
    int            i1 = i0 + j->mb < j->M ? i0 + j->mb : j->M;
    int            j1 = j0 + j->nb < j->N ? j0 + j->nb : j->N;
    GemmScratch    w = {
           .apack = kern_thread_scratch(KERN_SCRATCH_GEMM_A, (size_t)j->mc * GEMM_KC),
           .bpack = kern_thread_scratch(KERN_SCRATCH_GEMM_B, GEMM_BPACK_FLOATS),
    };
    for (int jc = j0; jc < j1; jc += GEMM_NC) {
        int    nc = j1 - jc < GEMM_NC ? j1 - jc : GEMM_NC;
        size_t nc_pad = (size_t)(nc + GEMM_NR - 1) / GEMM_NR * GEMM_NR;
        if (j->pack_b && (size_t)j->K * nc_pad <= GEMM_BPACK_FLOATS) {
            /* op(B)'s whole depth fits: pack it once, then finish each cache block of C over
             * all k-blocks while it is in cache (k-block pc starts at pc * nc_pad) */
            for (int pc = 0; pc < j->K; pc += GEMM_KC)
                gemm_pack_b_panel(j, w.bpack + (size_t)pc * nc_pad, jc, nc, pc,
                                  gemm_min(GEMM_KC, j->K - pc));
            for (int ic = i0; ic < i1; ic += j->mc)
                for (int pc = 0; pc < j->K; pc += GEMM_KC)
                    gemm_block_kernel(j, &w, w.bpack + (size_t)pc * nc_pad, ic,
                                      gemm_min(j->mc, i1 - ic), jc, nc, pc,
                                      gemm_min(GEMM_KC, j->K - pc));
            continue;
        }
        for (int pc = 0; pc < j->K; pc += GEMM_KC) {
            int kc = gemm_min(GEMM_KC, j->K - pc);
            if (j->pack_b)
                gemm_pack_b_panel(j, w.bpack, jc, nc, pc, kc);
            for (int ic = i0; ic < i1; ic += j->mc)
                gemm_block_kernel(j, &w, w.bpack, ic, gemm_min(j->mc, i1 - ic), jc, nc, pc, kc);
        }
    }
}

/* Splits @n items (in units of @unit) into at most @max_blocks blocks; returns the block
 * size, a multiple of @unit, and sets *n_blocks. */
static int gemm_split(int n, int unit, int max_blocks, int *n_blocks) {
    int units = (n + unit - 1) / unit;
    int per = (units + max_blocks - 1) / max_blocks;
    *n_blocks = (units + per - 1) / per;
    return per * unit;
}

/* C = beta * C (beta == 0: zeros, C not read). */
static void gemm_scale_c(int M, int N, float beta, float *C, size_t ldc) {
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++)
            c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
}

/* Splits the product into tasks (see GemmJob) and runs them. */
static void gemm_run(GemmJob *j) {
    int M = j->M, N = j->N, K = j->K;
    if (M == 0 || N == 0)
        return;
    if (K == 0 || j->alpha == 0.0f) {
        gemm_scale_c(M, N, j->beta, j->C, j->ldc);
        return;
    }
    int workers = kern_pool_workers();
    int tasks =
        workers == 1 || (int64_t)M * N * K < GEMM_SERIAL_MACS ? 1 : GEMM_TASKS_PER_WORKER * workers;
    int mr = j->isa->mr;
    j->mc = GEMM_MC_TILES * mr;
    if (tasks == 1) {
        /* one task: every packing is done once */
        j->pack_b = 1;
        j->mb = gemm_split(M, mr, 1, &j->n_mblocks);
        j->nb = gemm_split(N, GEMM_NR, 1, &j->n_nblocks);
    } else if (j->ta == KERN_GEMM_TRANS) {
        /* op(A) is packed: split rows only, into blocks that repay packing op(B) too */
        j->pack_b = 1;
        j->mb = gemm_split(M, mr, gemm_min(tasks, gemm_ceil_div(M, GEMM_MIN_PACKED_ROWS)),
                           &j->n_mblocks);
        j->nb = gemm_split(N, GEMM_NR, 1, &j->n_nblocks);
    } else if (j->tb == KERN_GEMM_TRANS || (int64_t)M * K <= GEMM_SMALL_A_FLOATS) {
        /* op(B) is packed (or op(A) is small enough to be read again by every task): split
         * columns only */
        j->pack_b = 1;
        j->mb = gemm_split(M, mr, 1, &j->n_mblocks);
        j->nb = gemm_split(N, GEMM_NR, tasks, &j->n_nblocks);
    } else {
        /* a large op(A) read in place once: split rows into cache blocks or more (each
         * streams all of op(B), also read in place), then columns if there are too few */
        j->mb = gemm_split(M, mr, gemm_min(tasks, gemm_ceil_div(M, j->mc)), &j->n_mblocks);
        j->nb = gemm_split(N, GEMM_NR, gemm_ceil_div(tasks, j->n_mblocks), &j->n_nblocks);
    }
    kern_parallel_for(j->n_mblocks * j->n_nblocks, gemm_task, j);
}

void kern_gemm(KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    kern_gemm_isa(kern_isa(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void kern_gemm_isa(KernIsa isa, KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K,
                   float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc) {
    KERN_ASSERT(isa <= kern_isa());
    KERN_ASSERT(M >= 0 && N >= 0 && K >= 0);
    KERN_ASSERT(lda >= (ta == KERN_GEMM_TRANS ? M : K) && lda >= 1);
    KERN_ASSERT(ldb >= (tb == KERN_GEMM_TRANS ? K : N) && ldb >= 1);
    KERN_ASSERT(ldc >= N && ldc >= 1);
    GemmJob j = {.isa = gemm_isa(isa),
                 .ta = ta,
                 .tb = tb,
                 .M = M,
                 .N = N,
                 .K = K,
                 .alpha = alpha,
                 .beta = beta,
                 .A = A,
                 .B = B,
                 .lda = (size_t)lda,
                 .ldb = (size_t)ldb,
                 .ldc = (size_t)ldc,
                 .C = C};
    gemm_run(&j);
}
