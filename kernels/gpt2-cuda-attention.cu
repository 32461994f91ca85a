/* SPDX-License-Identifier: MIT
 * gpt2-cuda-attention.cu: causal self-attention of gpt2-cuda.h, the unfused way: heads are
 * gathered to (B, NH, T, hs), scores and their gradients come from batched cuBLASLt products
 * in fp32, and a warp-per-row kernel applies the causal softmax (or its backward) in fp32.
 */
#include <math.h>
#include <string.h>

#include "gpt2-cuda.h"
#include "kern-cuda-internal.cuh"

#define SOFTMAX_THREADS 256 /* 8 warps: 8 rows per block */

/* Regions of the attention scratch, each 256-byte aligned. */
typedef struct {
    float *scores;        /* (B, NH, T, T) f32: q k^T * scale (F), d att (B) */
    char  *dpre;          /* (B, NH, T, T) dt: d scores (B) */
    char  *q, *k, *v, *y; /* (B, NH, T, hs) dt each; y: att @ v (F), d out by head (B) */
    char  *dq, *dk, *dv;  /* (B, NH, T, hs) dt each (B) */
} AttnScratch;

static size_t attn_round(size_t bytes) {
    return (bytes + 255) & ~(size_t)255;
}

/* Carves the regions at @base (NULL: only counts); returns the total bytes. */
static size_t attn_carve(int B, int T, int C, int NH, KernDtype dt, char *base, AttnScratch *s) {
    size_t esz = kern_dtype_size(dt);
    size_t btt = (size_t)B * NH * T * T;
    size_t heads = (size_t)B * T * C; /* = B * NH * T * hs */
    size_t cur = 0;
    char **regions[7] = {&s->q, &s->k, &s->v, &s->y, &s->dq, &s->dk, &s->dv};
    s->scores = base ? (float *)(base + cur) : NULL;
    cur += attn_round(btt * sizeof(float));
    s->dpre = base ? base + cur : NULL;
    cur += attn_round(btt * esz);
    for (int i = 0; i < 7; i++) {
        *regions[i] = base ? base + cur : NULL;
        cur += attn_round(heads * esz);
    }
    return cur;
}

size_t gpt2_cuda_attention_scratch_bytes(int B, int T, int C, int NH, KernDtype dt) {
    AttnScratch s;
    return attn_carve(B, T, C, NH, dt, NULL, &s);
}

/* --- head gather / scatter --- */

/* dst (B, NH, T, hs) [i] = src[(b T + t) * src_row + col0 + h hs + d] */
template <typename E>
__global__ void gather_heads_kernel(E *dst, const E *src, int src_row, int col0, int NH, int T,
                                    int hs, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int    d = (int)(i % hs);
        size_t r = i / hs; /* (b, h, t) */
        int    t = (int)(r % T);
        int    h = (int)((r / T) % NH);
        size_t b = r / ((size_t)T * NH);
        dst[i] = src[(b * T + t) * src_row + col0 + (size_t)h * hs + d];
    }
}

/* dst[(b T + t) * dst_row + col0 + h hs + d] = src (B, NH, T, hs) [i] */
template <typename E>
__global__ void scatter_heads_kernel(E *dst, int dst_row, int col0, const E *src, int NH, int T,
                                     int hs, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int    d = (int)(i % hs);
        size_t r = i / hs;
        int    t = (int)(r % T);
        int    h = (int)((r / T) % NH);
        size_t b = r / ((size_t)T * NH);
        dst[(b * T + t) * dst_row + col0 + (size_t)h * hs + d] = src[i];
    }
}

static void gather_heads(void *dst, const void *src, int src_row, int col0, int B, int T, int C,
                         int NH, KernDtype dt, cudaStream_t stream) {
    size_t   total = (size_t)B * T * C;
    unsigned grid = kern_cuda_grid(total, 256);
    KERN_DT_DISPATCH(dt, E, {
        gather_heads_kernel<E><<<grid, 256, 0, stream>>>((E *)dst, (const E *)src, src_row, col0,
                                                         NH, T, C / NH, total);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

static void scatter_heads(void *dst, int dst_row, int col0, const void *src, int B, int T, int C,
                          int NH, KernDtype dt, cudaStream_t stream) {
    size_t   total = (size_t)B * T * C;
    unsigned grid = kern_cuda_grid(total, 256);
    KERN_DT_DISPATCH(dt, E, {
        scatter_heads_kernel<E><<<grid, 256, 0, stream>>>((E *)dst, dst_row, col0, (const E *)src,
                                                          NH, T, C / NH, total);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

/* --- causal softmax, one warp per row of (B * NH * T) rows of length T --- */

static __device__ __forceinline__ float warp_sum_f(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max_f(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* att[r, j] = softmax_j<=t(scores[r, :]) for j <= t, 0 for j > t (t = r % T). */
template <typename E>
__global__ void causal_softmax_kernel(E *att, const float *scores, size_t n_rows, int T) {
    size_t row = blockIdx.x * (size_t)(SOFTMAX_THREADS / 32) + threadIdx.x / 32;
    int    lane = threadIdx.x % 32;
    if (row >= n_rows) /* warp-uniform */
        return;
    int          t = (int)(row % T);
    const float *x = scores + row * T;
    E           *p = att + row * T;
    float        m = -INFINITY;
    for (int j = lane; j <= t; j += 32)
        m = fmaxf(m, x[j]);
    m = warp_max_f(m);
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32)
        s += expf(x[j] - m);
    float inv = 1.0f / warp_sum_f(s);
    for (int j = lane; j < T; j += 32)
        kern_st(p, j, j <= t ? expf(x[j] - m) * inv : 0.0f);
}

/* dpre[r, j] = p_j (datt_j - sum_i<=t p_i datt_i) * scale for j <= t, 0 above. */
template <typename E>
__global__ void causal_softmax_backward_kernel(E *dpre, const E *att, const float *datt,
                                               size_t n_rows, int T, float scale) {
    size_t row = blockIdx.x * (size_t)(SOFTMAX_THREADS / 32) + threadIdx.x / 32;
    int    lane = threadIdx.x % 32;
    if (row >= n_rows)
        return;
    int          t = (int)(row % T);
    const E     *p = att + row * T;
    const float *d = datt + row * T;
    E           *o = dpre + row * T;
    float        dot = 0.0f;
    for (int j = lane; j <= t; j += 32)
        dot += kern_ld(p, j) * d[j];
    dot = warp_sum_f(dot);
    for (int j = lane; j < T; j += 32)
        kern_st(o, j, j <= t ? kern_ld(p, j) * (d[j] - dot) * scale : 0.0f);
}

/* --- batched head products --- */

/* One batched product over the B * NH heads: C (M, N) = alpha op(A) op(B), each operand a
 * dense (B * NH) stack of row-major matrices. */
static void heads_gemm(int M, int N, int K, int ta, const void *a, int tb, const void *b, void *c,
                       KernDtype ab, KernDtype cd, float alpha, int n_heads, KernCudaCtx *ctx) {
    KernCudaGemm g = kern_cuda_gemm_dense(M, N, K, ta, a, tb, b, c, ab, cd);
    g.alpha = alpha;
    g.batch = n_heads;
    g.stride_a = (int64_t)M * K;
    g.stride_b = (int64_t)K * N;
    g.stride_c = (int64_t)M * N;
    kern_cuda_gemm(&g, ctx);
}

/* Shapes shared by the forward and the backward of one call. */
typedef struct {
    int      hs, heads; /* head size C / NH; B * NH heads */
    float    scale;     /* 1 / sqrt(hs) */
    size_t   rows;      /* B * NH * T rows of scores */
    unsigned grid;      /* blocks of the softmax kernels (one warp per row) */
} AttnShape;

/* Checks the shapes, carves @scratch into @s and gathers q, k, v of @qkv by head. */
static AttnShape attn_begin(AttnScratch *s, void *scratch, const void *qkv, int B, int T, int C,
                            int NH, KernDtype dt, cudaStream_t st) {
    KERN_ASSERT(B >= 1 && T >= 1 && C >= 1 && NH >= 1 && C % NH == 0);
    AttnShape a;
    a.hs = C / NH;
    a.heads = B * NH;
    a.scale = 1.0f / sqrtf((float)a.hs);
    a.rows = (size_t)a.heads * T;
    a.grid = (unsigned)((a.rows + SOFTMAX_THREADS / 32 - 1) / (SOFTMAX_THREADS / 32));
    attn_carve(B, T, C, NH, dt, (char *)scratch, s);
    gather_heads(s->q, qkv, 3 * C, 0, B, T, C, NH, dt, st);
    gather_heads(s->k, qkv, 3 * C, C, B, T, C, NH, dt, st);
    gather_heads(s->v, qkv, 3 * C, 2 * C, B, T, C, NH, dt, st);
    return a;
}

void gpt2_cuda_attention_forward(void *out, void *att, const void *qkv, void *scratch, int B, int T,
                                 int C, int NH, KernDtype dt, KernCudaCtx *ctx) {
    if (B == 0)
        return;
    cudaStream_t st = ctx->stream;
    AttnScratch  s;
    AttnShape    a = attn_begin(&s, scratch, qkv, B, T, C, NH, dt, st);
    /* scores (T, T) = scale * q @ k^T per head, in fp32 */
    heads_gemm(T, T, a.hs, 0, s.q, 1, s.k, s.scores, dt, KERN_DTYPE_F32, a.scale, a.heads, ctx);
    KERN_DT_DISPATCH(dt, E, {
        causal_softmax_kernel<E><<<a.grid, SOFTMAX_THREADS, 0, st>>>((E *)att, s.scores, a.rows, T);
        KERN_CUDA_LAUNCH_CHECK();
    });
    /* y (T, hs) = att @ v per head; the zeros above the diagonal keep it causal */
    heads_gemm(T, a.hs, T, 0, att, 0, s.v, s.y, dt, dt, 1.0f, a.heads, ctx);
    scatter_heads(out, C, 0, s.y, B, T, C, NH, dt, st);
}

void gpt2_cuda_attention_backward(void *dqkv, void *scratch, const void *dout, const void *qkv,
                                  const void *att, int B, int T, int C, int NH, KernDtype dt,
                                  KernCudaCtx *ctx) {
    if (B == 0)
        return;
    cudaStream_t st = ctx->stream;
    AttnScratch  s;
    AttnShape    a = attn_begin(&s, scratch, qkv, B, T, C, NH, dt, st);
    gather_heads(s.y, dout, C, 0, B, T, C, NH, dt, st);
    /* datt (T, T) = dy @ v^T in fp32; dv (T, hs) = att^T @ dy */
    heads_gemm(T, T, a.hs, 0, s.y, 1, s.v, s.scores, dt, KERN_DTYPE_F32, 1.0f, a.heads, ctx);
    heads_gemm(T, a.hs, T, 1, att, 0, s.y, s.dv, dt, dt, 1.0f, a.heads, ctx);
    KERN_DT_DISPATCH(dt, E, {
        causal_softmax_backward_kernel<E><<<a.grid, SOFTMAX_THREADS, 0, st>>>(
            (E *)s.dpre, (const E *)att, s.scores, a.rows, T, a.scale);
        KERN_CUDA_LAUNCH_CHECK();
    });
    /* dq = dpre @ k; dk = dpre^T @ q */
    heads_gemm(T, a.hs, T, 0, s.dpre, 0, s.k, s.dq, dt, dt, 1.0f, a.heads, ctx);
    heads_gemm(T, a.hs, T, 1, s.dpre, 0, s.q, s.dk, dt, dt, 1.0f, a.heads, ctx);
    scatter_heads(dqkv, 3 * C, 0, s.dq, B, T, C, NH, dt, st);
    scatter_heads(dqkv, 3 * C, C, s.dk, B, T, C, NH, dt, st);
    scatter_heads(dqkv, 3 * C, 2 * C, s.dv, B, T, C, NH, dt, st);
}
