/* SPDX-License-Identifier: MIT
 * gpt2-cuda-flash.cu: fused ("flash") causal attention of gpt2-cuda.h for bf16 with head
 * size 32, 64 or 128. Tiles of 64 queries x 64 keys live in shared memory; each of a
 * block's 4 warps owns 16 rows and multiplies with the tensor cores through WMMA (bf16
 * operands, fp32 accumulation). The forward keeps an online softmax and saves only the
 * log-sum-exp per row; the backward recomputes the probabilities, with one kernel for dK/dV
 * (a block per key tile) and one for dQ (a block per query tile), so every output has one
 * writer and no atomics: results are deterministic.
 */
#include <atomic>
#include <math.h>
#include <mma.h>

#include "gpt2-cuda.h"
#include "kern-cuda-internal.cuh"

using namespace nvcuda;

typedef __nv_bfloat16 bf16;

#define FLASH_TILE    64  /* queries per query tile, keys per key tile */
#define FLASH_THREADS 128 /* 4 warps x 16 rows */

/* Shared-memory strides and region sizes (bytes, each a multiple of 128 so every region and
 * every 16-row fragment start stays 32-byte aligned, as WMMA requires). */
template <int HS> struct FlashLayout {
    static constexpr int    LDH = HS + 8;                /* bf16 (64, HS) tile rows */
    static constexpr int    LDS = FLASH_TILE + 4;        /* fp32 (16, 64) per-warp rows */
    static constexpr int    LDP = FLASH_TILE + 8;        /* bf16 (16, 64) per-warp rows */
    static constexpr int    LDO = HS + 4;                /* fp32 (16, HS) per-warp rows */
    static constexpr size_t TILE = FLASH_TILE * LDH * 2; /* a (64, HS) bf16 tile */
    static constexpr size_t SF = 16 * LDS * 4;           /* a warp's (16, 64) fp32 */
    static constexpr size_t PB = 16 * LDP * 2;           /* a warp's (16, 64) bf16 */
    static constexpr size_t OF = 16 * LDO * 4;           /* a warp's (16, HS) fp32 */
    static constexpr size_t ROWS = 2 * FLASH_TILE * 4;   /* two fp32 values per tile row */
    /* forward: Q, K, V tiles; per warp S (fp32), P (bf16), O (fp32); m and l per row */
    static constexpr size_t FWD = 3 * TILE + 4 * (SF + PB + OF) + ROWS;
    /* dK/dV: K, V, Q, dO tiles; per warp S^T and P^T (fp32), P^T and dS^T (bf16), staging;
     * lse and D per query row */
    static constexpr size_t KV = 4 * TILE + 4 * (2 * SF + 2 * PB + OF) + ROWS;
    /* dQ: Q, dO, K, V tiles; per warp S and dP (fp32), dS (bf16), staging; lse and D */
    static constexpr size_t Q = 4 * TILE + 4 * (2 * SF + PB + OF) + ROWS;
    static_assert(TILE % 128 == 0 && SF % 128 == 0 && PB % 128 == 0 && OF % 128 == 0,
                  "regions must keep 128-byte alignment");
};

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float>              FragAcc;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> FragB;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> FragBt;

/* Copies rows r0 .. r0 + 63 of a (T, row_len) bf16 matrix, columns col0 .. col0 + HS - 1,
 * into a (64, LDH) shared tile; rows at or past T become 0. 16-byte copies: row_len, col0
 * and the matrix start are multiples of 8 elements (the callers check it). */
template <int HS>
static __device__ void flash_load_tile(bf16 *dst, const bf16 *src, int row_len, int col0, int r0,
                                       int T) {
    constexpr int VPR = HS / 8; /* 16-byte vectors per row */
    constexpr int LDH = FlashLayout<HS>::LDH;
    for (int v = threadIdx.x; v < FLASH_TILE * VPR; v += FLASH_THREADS) {
        int   r = v / VPR, c = (v % VPR) * 8;
        uint4 val = make_uint4(0u, 0u, 0u, 0u);
        if (r0 + r < T)
            val = *(const uint4 *)(src + (size_t)(r0 + r) * row_len + col0 + c);
        *(uint4 *)(dst + r * LDH + c) = val;
    }
}

/* Copies rows r0 .. r0 + 63 of @lse and @dv (one value per row of this head, T of them) into
 * @dst (lse) and @dst + 64 (D); 0 past T. */
static __device__ void flash_load_rows(float *dst, const float *lse, const float *dv, int r0,
                                       int T) {
    for (int t = threadIdx.x; t < FLASH_TILE; t += FLASH_THREADS) {
        int ok = r0 + t < T;
        dst[t] = ok ? lse[r0 + t] : 0.0f;
        dst[FLASH_TILE + t] = ok ? dv[r0 + t] : 0.0f;
    }
}

/* The column a lane (row r, half) visits at step c of its 32: its half's columns from a
 * per-lane starting point. Rows are LDS = 68 floats apart (4 banks), so without the skew
 * rows r and r + 8 and both halves hit one bank (4-way conflicts); with it the 32 lanes hit
 * 32 banks at every step. The order is fixed, so sums over it stay deterministic. */
static __device__ __forceinline__ int flash_col(int r, int half, int c) {
    return half * 32 + ((c + (r >> 3) + 2 * half) & 31);
}

/* acc (16, 16) x n = sum over k of A (16, K) @ B where B is read transposed: out[:, n*16..]
 * = A @ Bsrc^T with Bsrc a (64, K) row-major bf16 tile; stored as fp32 (16, 64) at @out. */
template <int K>
static __device__ void flash_mm_abt(float *out, int ldo, const bf16 *a, int lda, const bf16 *b,
                                    int ldb) {
    for (int n = 0; n < FLASH_TILE / 16; n++) {
        FragAcc acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int k = 0; k < K / 16; k++) {
            FragA  fa;
            FragBt fb;
            wmma::load_matrix_sync(fa, a + k * 16, lda);
            wmma::load_matrix_sync(fb, b + n * 16 * ldb + k * 16, ldb);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(out + n * 16, acc, ldo, wmma::mem_row_major);
    }
}

/* acc[d] += A (16, 64) @ B (64, HS) columns d*16.., A a bf16 row-major (16, 64) tile, B a
 * (64, LDH) bf16 tile. */
template <int HS>
static __device__ void flash_mm_acc(FragAcc (&acc)[HS / 16], const bf16 *a, int lda,
                                    const bf16 *b) {
    constexpr int LDH = FlashLayout<HS>::LDH;
    /* k outermost: one A fragment live at a time, not HS / 16 of them (register pressure) */
#pragma unroll 1
    for (int k = 0; k < FLASH_TILE / 16; k++) {
        FragA fa;
        wmma::load_matrix_sync(fa, a + k * 16, lda);
#pragma unroll
        for (int d = 0; d < HS / 16; d++) {
            FragB fb;
            wmma::load_matrix_sync(fb, b + k * 16 * LDH + d * 16, LDH);
            wmma::mma_sync(acc[d], fa, fb, acc[d]);
        }
    }
}

/* Writes the warp's 16 staged fp32 rows (stride LDO) as bf16 rows r0 .. r0 + 15 (those below
 * T) of a (T, row_len) matrix at column col0, row i times inv[i] when @inv is non-NULL. One
 * row at a time, each lane a bf16 pair: consecutive 4-byte stores (col0 and row_len are
 * multiples of 8 elements), and consecutive 8-byte reads of the staging. */
template <int HS>
static __device__ void flash_write_rows(bf16 *dst, int row_len, int col0, int r0, int T,
                                        const float *stage, const float *inv) {
    constexpr int LDO = FlashLayout<HS>::LDO, PAIRS = HS / 2;
    int           lane = threadIdx.x % 32;
    for (int i = lane; i < 16 * PAIRS; i += 32) {
        int rr = i / PAIRS, cc = (i % PAIRS) * 2;
        if (r0 + rr >= T)
            continue;
        float2 v = *(const float2 *)(stage + rr * LDO + cc);
        float  f = inv ? inv[rr] : 1.0f;
        *(__nv_bfloat162 *)(dst + (size_t)(r0 + rr) * row_len + col0 + cc) =
            __floats2bfloat162_rn(v.x * f, v.y * f);
    }
}

/* Writes a warp's (16, HS) fp32 accumulators, times @scale, as bf16 rows of a (T, row_len)
 * matrix at column col0, rows r0 .. r0 + 15 (those below T), through the warp's staging. The
 * warp writes one row at a time, each lane a bf16 pair: 4-byte stores, consecutive across the
 * warp (col0 and row_len are multiples of 8 elements). */
template <int HS>
static __device__ void flash_store_rows(bf16 *dst, int row_len, int col0, int r0, int T,
                                        FragAcc (&acc)[HS / 16], float scale, float *stage) {
    constexpr int LDO = FlashLayout<HS>::LDO;
#pragma unroll
    for (int d = 0; d < HS / 16; d++) {
        for (int e = 0; e < acc[d].num_elements; e++)
            acc[d].x[e] *= scale;
        wmma::store_matrix_sync(stage + d * 16, acc[d], LDO, wmma::mem_row_major);
    }
    __syncwarp();
    flash_write_rows<HS>(dst, row_len, col0, r0, T, stage, NULL);
    __syncwarp();
}

/* --- forward --- */

/* One block per (query tile, head). out (B, T, C) bf16; lse (B, NH, T) fp32. */
template <int HS>
__global__ void __launch_bounds__(FLASH_THREADS)
    flash_forward_kernel(bf16 *out, float *lse, const bf16 *qkv, int T, int C, int NH,
                         float scale) {
    typedef FlashLayout<HS> L;
    extern __shared__ __align__(128) unsigned char smem[];
    int                                            warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    bf16                                          *Qs = (bf16 *)smem;
    bf16                                          *Ks = (bf16 *)(smem + L::TILE);
    bf16                                          *Vs = (bf16 *)(smem + 2 * L::TILE);
    char                                          *per_warp = (char *)smem + 3 * L::TILE;
    float                                         *Sf = (float *)(per_warp + warp * L::SF);
    bf16  *Pb = (bf16 *)(per_warp + 4 * L::SF + warp * L::PB);
    float *Of = (float *)(per_warp + 4 * (L::SF + L::PB) + warp * L::OF);
    float *m_row = (float *)(per_warp + 4 * (L::SF + L::PB + L::OF)); /* (64) running max */
    float *l_row = m_row + FLASH_TILE;                                /* (64) running sum */

    int         bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int         q0 = blockIdx.x * FLASH_TILE;
    const bf16 *base = qkv + (size_t)b * T * 3 * C;
    flash_load_tile<HS>(Qs, base, 3 * C, h * HS, q0, T);
    for (int i = lane; i < 16 * L::LDO; i += 32)
        Of[i] = 0.0f;
    if (lane < 16) {
        m_row[warp * 16 + lane] = -INFINITY;
        l_row[warp * 16 + lane] = 0.0f;
    }
    int r = lane / 2, half = lane % 2; /* this lane: row r, columns half * 32 .. + 31 */
    int qi = q0 + warp * 16 + r;

    for (int j = 0; j <= (int)blockIdx.x; j++) { /* causal: key tiles up to the diagonal */
        int k0 = j * FLASH_TILE;
        __syncthreads(); /* Q is loaded; every warp is done with the previous K and V */
        flash_load_tile<HS>(Ks, base, 3 * C, C + h * HS, k0, T);
        flash_load_tile<HS>(Vs, base, 3 * C, 2 * C + h * HS, k0, T);
        __syncthreads();
        /* S (16, 64) = Q_w K^T */
        flash_mm_abt<HS>(Sf, L::LDS, Qs + warp * 16 * L::LDH, L::LDH, Ks, L::LDH);
        __syncwarp();
        /* online softmax of row r over this tile */
        float *srow = Sf + r * L::LDS;
        float  mx = -INFINITY;
        for (int c = 0; c < 32; c++) {
            int   col = flash_col(r, half, c), kj = k0 + col;
            float s = (kj <= qi && kj < T) ? srow[col] * scale : -INFINITY;
            srow[col] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float m_old = m_row[warp * 16 + r];
        float m_new = fmaxf(m_old, mx);
        /* a row with no visible key yet (only rows past T) keeps m -inf: nothing to rescale */
        float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        float sum = 0.0f;
        bf16 *prow = Pb + r * L::LDP;
        for (int c = 0; c < 32; c++) {
            int   col = flash_col(r, half, c);
            float p = srow[col] == -INFINITY ? 0.0f : expf(srow[col] - m_new);
            sum += p;
            prow[col] = __float2bfloat16_rn(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        /* the same skew over this lane's HS / 2 accumulator columns (LDO = HS + 4) */
        float *orow = Of + r * L::LDO + half * (HS / 2);
        int    skew = (r >> 3) + 2 * half;
        for (int c = 0; c < HS / 2; c++)
            orow[HS >= 64 ? (c & ~31) + ((c + skew) & 31) : (c + skew) & 15] *= alpha;
        __syncwarp(); /* both lanes of each row have read m_row before it changes */
        if (half == 0) {
            m_row[warp * 16 + r] = m_new;
            l_row[warp * 16 + r] = l_row[warp * 16 + r] * alpha + sum;
        }
        __syncwarp();
        /* O_w (16, HS) += P (16, 64) @ V (64, HS) */
        for (int d = 0; d < HS / 16; d++) {
            FragAcc acc;
            wmma::load_matrix_sync(acc, Of + d * 16, L::LDO, wmma::mem_row_major);
            for (int k = 0; k < FLASH_TILE / 16; k++) {
                FragA fa;
                FragB fb;
                wmma::load_matrix_sync(fa, Pb + k * 16, L::LDP);
                wmma::load_matrix_sync(fb, Vs + k * 16 * L::LDH + d * 16, L::LDH);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Of + d * 16, acc, L::LDO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    /* 1 / l per row, over the running max (no longer needed) */
    __syncwarp();
    float l = l_row[warp * 16 + r];
    if (half == 0 && qi < T)
        lse[(size_t)bh * T + qi] = m_row[warp * 16 + r] + logf(l);
    __syncwarp();
    if (half == 0)
        m_row[warp * 16 + r] = 1.0f / l;
    __syncwarp();
    flash_write_rows<HS>(out + (size_t)b * T * C, C, h * HS, q0 + warp * 16, T, Of,
                         m_row + warp * 16);
}

/* --- backward --- */

/* D[bh, t] = sum_d dout[b, t, h, d] * out[b, t, h, d]: one warp per (b, h, t). */
template <int HS>
__global__ void flash_backward_dot_kernel(float *dv, const bf16 *dout, const bf16 *out, int B,
                                          int T, int C, int NH) {
    size_t row = blockIdx.x * (size_t)(FLASH_THREADS / 32) + threadIdx.x / 32;
    int    lane = threadIdx.x % 32;
    if (row >= (size_t)B * NH * T) /* warp-uniform */
        return;
    int    t = (int)(row % T);
    size_t bh = row / T;
    int    h = (int)(bh % NH), b = (int)(bh / NH);
    size_t at = ((size_t)b * T + t) * C + (size_t)h * HS;
    float  acc = 0.0f;
    for (int d = lane; d < HS; d += 32)
        acc += __bfloat162float(dout[at + d]) * __bfloat162float(out[at + d]);
    for (int o = 16; o > 0; o >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0)
        dv[row] = acc;
}

/* dK and dV of one key tile (blockIdx.x) of one head (blockIdx.y), over the query tiles at
 * or after it. */
template <int HS>
__global__ void __launch_bounds__(FLASH_THREADS)
    flash_backward_kv_kernel(bf16 *dqkv, const bf16 *qkv, const bf16 *dout, const float *lse,
                             const float *dvec, int T, int C, int NH, float scale) {
    typedef FlashLayout<HS> L;
    extern __shared__ __align__(128) unsigned char smem[];
    int                                            warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    bf16                                          *Ks = (bf16 *)smem;
    bf16                                          *Vs = (bf16 *)(smem + L::TILE);
    bf16                                          *Qs = (bf16 *)(smem + 2 * L::TILE);
    bf16                                          *dOs = (bf16 *)(smem + 3 * L::TILE);
    char                                          *per_warp = (char *)smem + 4 * L::TILE;
    float *St = (float *)(per_warp + warp * 2 * L::SF); /* S^T, then dP^T */
    float *Pf = St + 16 * L::LDS;                       /* P^T in fp32 */
    bf16  *Pt = (bf16 *)(per_warp + 4 * 2 * L::SF + warp * 2 * L::PB);
    bf16  *dSt = Pt + 16 * L::LDP;
    float *stage = (float *)(per_warp + 4 * (2 * L::SF + 2 * L::PB) + warp * L::OF);
    float *rows = (float *)(per_warp + 4 * (2 * L::SF + 2 * L::PB + L::OF)); /* lse, D */

    int         bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int         k0 = blockIdx.x * FLASH_TILE;
    const bf16 *base = qkv + (size_t)b * T * 3 * C;
    const bf16 *dbase = dout + (size_t)b * T * C;
    flash_load_tile<HS>(Ks, base, 3 * C, C + h * HS, k0, T);
    flash_load_tile<HS>(Vs, base, 3 * C, 2 * C + h * HS, k0, T);
    FragAcc dK[HS / 16], dV[HS / 16];
#pragma unroll
    for (int d = 0; d < HS / 16; d++) {
        wmma::fill_fragment(dK[d], 0.0f);
        wmma::fill_fragment(dV[d], 0.0f);
    }
    int r = lane / 2, half = lane % 2;
    int kj = k0 + warp * 16 + r; /* this lane's key row */
    int n_tiles = (T + FLASH_TILE - 1) / FLASH_TILE;

    for (int i = blockIdx.x; i < n_tiles; i++) { /* causal: query tiles from the diagonal on */
        int q0 = i * FLASH_TILE;
        __syncthreads(); /* K, V are loaded; every warp is done with the previous Q, dO */
        flash_load_tile<HS>(Qs, base, 3 * C, h * HS, q0, T);
        flash_load_tile<HS>(dOs, dbase, C, h * HS, q0, T);
        flash_load_rows(rows, lse + (size_t)bh * T, dvec + (size_t)bh * T, q0, T);
        __syncthreads();
        /* S^T (16 keys, 64 queries) = K_w Q^T */
        flash_mm_abt<HS>(St, L::LDS, Ks + warp * 16 * L::LDH, L::LDH, Qs, L::LDH);
        __syncwarp();
        for (int c = 0; c < 32; c++) {
            int   col = flash_col(r, half, c), qi = q0 + col;
            int   ok = kj <= qi && qi < T && kj < T;
            float p = ok ? expf(St[r * L::LDS + col] * scale - rows[col]) : 0.0f;
            Pf[r * L::LDS + col] = p;
            Pt[r * L::LDP + col] = __float2bfloat16_rn(p);
        }
        __syncwarp();
        /* dV_w += P^T (16, 64) @ dO (64, HS) */
        flash_mm_acc<HS>(dV, Pt, L::LDP, dOs);
        /* dP^T (16, 64) = V_w dO^T, over S^T (no longer needed) */
        flash_mm_abt<HS>(St, L::LDS, Vs + warp * 16 * L::LDH, L::LDH, dOs, L::LDH);
        __syncwarp();
        /* dS^T = P^T (dP^T - D) */
        for (int c = 0; c < 32; c++) {
            int col = flash_col(r, half, c);
            dSt[r * L::LDP + col] = __float2bfloat16_rn(
                Pf[r * L::LDS + col] * (St[r * L::LDS + col] - rows[FLASH_TILE + col]));
        }
        __syncwarp();
        /* dK_w += dS^T (16, 64) @ Q (64, HS); the score scale is applied at the end */
        flash_mm_acc<HS>(dK, dSt, L::LDP, Qs);
    }
    bf16 *dbh = dqkv + (size_t)b * T * 3 * C;
    flash_store_rows<HS>(dbh, 3 * C, C + h * HS, k0 + warp * 16, T, dK, scale, stage);
    flash_store_rows<HS>(dbh, 3 * C, 2 * C + h * HS, k0 + warp * 16, T, dV, 1.0f, stage);
}

/* dQ of one query tile (blockIdx.x) of one head (blockIdx.y), over the key tiles up to it. */
template <int HS>
__global__ void __launch_bounds__(FLASH_THREADS)
    flash_backward_q_kernel(bf16 *dqkv, const bf16 *qkv, const bf16 *dout, const float *lse,
                            const float *dvec, int T, int C, int NH, float scale) {
    typedef FlashLayout<HS> L;
    extern __shared__ __align__(128) unsigned char smem[];
    int                                            warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    bf16                                          *Qs = (bf16 *)smem;
    bf16                                          *dOs = (bf16 *)(smem + L::TILE);
    bf16                                          *Ks = (bf16 *)(smem + 2 * L::TILE);
    bf16                                          *Vs = (bf16 *)(smem + 3 * L::TILE);
    char                                          *per_warp = (char *)smem + 4 * L::TILE;
    float *Sf = (float *)(per_warp + warp * 2 * L::SF); /* S */
    float *dPf = Sf + 16 * L::LDS;                      /* dP */
    bf16  *dSb = (bf16 *)(per_warp + 4 * 2 * L::SF + warp * L::PB);
    float *stage = (float *)(per_warp + 4 * (2 * L::SF + L::PB) + warp * L::OF);
    float *rows = (float *)(per_warp + 4 * (2 * L::SF + L::PB + L::OF)); /* lse, D */

    int         bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int         q0 = blockIdx.x * FLASH_TILE;
    const bf16 *base = qkv + (size_t)b * T * 3 * C;
    flash_load_tile<HS>(Qs, base, 3 * C, h * HS, q0, T);
    flash_load_tile<HS>(dOs, dout + (size_t)b * T * C, C, h * HS, q0, T);
    flash_load_rows(rows, lse + (size_t)bh * T, dvec + (size_t)bh * T, q0, T);
    FragAcc dQ[HS / 16];
#pragma unroll
    for (int d = 0; d < HS / 16; d++)
        wmma::fill_fragment(dQ[d], 0.0f);
    int   r = lane / 2, half = lane % 2;
    int   qrow = warp * 16 + r, qi = q0 + qrow; /* this lane's query row */
    float row_lse = 0.0f, row_d = 0.0f;

    for (int j = 0; j <= (int)blockIdx.x; j++) { /* causal: key tiles up to the diagonal */
        int k0 = j * FLASH_TILE;
        __syncthreads(); /* Q, dO, rows are loaded; every warp is done with the previous K, V */
        flash_load_tile<HS>(Ks, base, 3 * C, C + h * HS, k0, T);
        flash_load_tile<HS>(Vs, base, 3 * C, 2 * C + h * HS, k0, T);
        __syncthreads();
        row_lse = rows[qrow];
        row_d = rows[FLASH_TILE + qrow];
        /* S (16, 64) = Q_w K^T; dP (16, 64) = dO_w V^T */
        flash_mm_abt<HS>(Sf, L::LDS, Qs + warp * 16 * L::LDH, L::LDH, Ks, L::LDH);
        flash_mm_abt<HS>(dPf, L::LDS, dOs + warp * 16 * L::LDH, L::LDH, Vs, L::LDH);
        __syncwarp();
        /* dS = P (dP - D) */
        for (int c = 0; c < 32; c++) {
            int   col = flash_col(r, half, c), kj = k0 + col;
            int   ok = kj <= qi && kj < T && qi < T;
            float p = ok ? expf(Sf[r * L::LDS + col] * scale - row_lse) : 0.0f;
            dSb[r * L::LDP + col] = __float2bfloat16_rn(p * (dPf[r * L::LDS + col] - row_d));
        }
        __syncwarp();
        /* dQ_w += dS (16, 64) @ K (64, HS); the score scale is applied at the end */
        flash_mm_acc<HS>(dQ, dSb, L::LDP, Ks);
    }
    flash_store_rows<HS>(dqkv + (size_t)b * T * 3 * C, 3 * C, h * HS, q0 + warp * 16, T, dQ, scale,
                         stage);
}

/* --- host side --- */

int gpt2_cuda_flash_attention_supported(int C, int NH, KernDtype dt) {
    if (dt != KERN_DTYPE_BF16 || NH < 1 || C % NH != 0 || C % 8 != 0)
        return 0;
    int hs = C / NH;
    return hs == 32 || hs == 64 || hs == 128;
}

size_t gpt2_cuda_flash_attention_scratch_bytes(int B, int T, int NH) {
    return (size_t)B * NH * T * sizeof(float);
}

/* Runs @launch with the kernel instantiated for the head size. */
#define FLASH_DISPATCH_HS(hs, HS, ...)                                                             \
    do {                                                                                           \
        switch (hs) {                                                                              \
        case 32: {                                                                                 \
            const int HS = 32;                                                                     \
            __VA_ARGS__;                                                                           \
            break;                                                                                 \
        }                                                                                          \
        case 64: {                                                                                 \
            const int HS = 64;                                                                     \
            __VA_ARGS__;                                                                           \
            break;                                                                                 \
        }                                                                                          \
        case 128: {                                                                                \
            const int HS = 128;                                                                    \
            __VA_ARGS__;                                                                           \
            break;                                                                                 \
        }                                                                                          \
        default:                                                                                   \
            KERN_ASSERT(!"flash attention: head size must be 32, 64 or 128");                      \
        }                                                                                          \
    } while (0)

/* Raises the kernel's dynamic shared-memory limit to @bytes (above the default 48 KiB), once
 * per device: @done (one per kernel) has bit d set once device d has it (devices past 63 set
 * it every launch). Two host threads may both set it the first time; that is harmless. */
template <typename K>
static void flash_smem(K kernel, size_t bytes, std::atomic<unsigned long long> *done) {
    int dev = 0;
    KERN_CUDA_CHECK(cudaGetDevice(&dev));
    unsigned long long bit = dev < 64 ? 1ull << dev : 0ull;
    if (bit && (done->load(std::memory_order_relaxed) & bit))
        return;
    KERN_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    done->fetch_or(bit, std::memory_order_relaxed);
}

/* The per-kernel flags of flash_smem(): kind 0 forward, 1 dK/dV, 2 dQ. */
template <int HS, int KIND> static std::atomic<unsigned long long> *flash_smem_done(void) {
    static std::atomic<unsigned long long> done(0);
    return &done;
}

static void flash_check(int B, int T, int C, int NH, KernDtype dt) {
    KERN_ASSERT(B >= 1 && T >= 1 && NH >= 1);
    KERN_ASSERT(gpt2_cuda_flash_attention_supported(C, NH, dt));
    KERN_ASSERT((size_t)B * NH <= 65535);
}

void gpt2_cuda_flash_attention_forward(void *out, float *lse, const void *qkv, int B, int T, int C,
                                       int NH, KernDtype dt, KernCudaCtx *ctx) {
    if (B == 0)
        return;
    flash_check(B, T, C, NH, dt);
    float scale = 1.0f / sqrtf((float)(C / NH));
    dim3  grid((unsigned)((T + FLASH_TILE - 1) / FLASH_TILE), (unsigned)(B * NH));
    FLASH_DISPATCH_HS(C / NH, HS, {
        size_t bytes = FlashLayout<HS>::FWD;
        flash_smem(flash_forward_kernel<HS>, bytes, flash_smem_done<HS, 0>());
        flash_forward_kernel<HS><<<grid, FLASH_THREADS, bytes, ctx->stream>>>(
            (bf16 *)out, lse, (const bf16 *)qkv, T, C, NH, scale);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

void gpt2_cuda_flash_attention_backward(void *dqkv, float *scratch, const void *dout,
                                        const void *qkv, const void *out, const float *lse, int B,
                                        int T, int C, int NH, KernDtype dt, KernCudaCtx *ctx) {
    if (B == 0)
        return;
    flash_check(B, T, C, NH, dt);
    float    scale = 1.0f / sqrtf((float)(C / NH));
    size_t   n_rows = (size_t)B * NH * T;
    unsigned dot_grid = (unsigned)((n_rows + FLASH_THREADS / 32 - 1) / (FLASH_THREADS / 32));
    dim3     grid((unsigned)((T + FLASH_TILE - 1) / FLASH_TILE), (unsigned)(B * NH));
    FLASH_DISPATCH_HS(C / NH, HS, {
        flash_backward_dot_kernel<HS><<<dot_grid, FLASH_THREADS, 0, ctx->stream>>>(
            scratch, (const bf16 *)dout, (const bf16 *)out, B, T, C, NH);
        KERN_CUDA_LAUNCH_CHECK();
        size_t kv_bytes = FlashLayout<HS>::KV, q_bytes = FlashLayout<HS>::Q;
        flash_smem(flash_backward_kv_kernel<HS>, kv_bytes, flash_smem_done<HS, 1>());
        flash_smem(flash_backward_q_kernel<HS>, q_bytes, flash_smem_done<HS, 2>());
        flash_backward_kv_kernel<HS><<<grid, FLASH_THREADS, kv_bytes, ctx->stream>>>(
            (bf16 *)dqkv, (const bf16 *)qkv, (const bf16 *)dout, lse, scratch, T, C, NH, scale);
        KERN_CUDA_LAUNCH_CHECK();
        flash_backward_q_kernel<HS><<<grid, FLASH_THREADS, q_bytes, ctx->stream>>>(
            (bf16 *)dqkv, (const bf16 *)qkv, (const bf16 *)dout, lse, scratch, T, C, NH, scale);
        KERN_CUDA_LAUNCH_CHECK();
    });
}
