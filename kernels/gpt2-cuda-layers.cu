/* SPDX-License-Identifier: MIT
 * gpt2-cuda-layers.cu: the element-wise and row-wise GPT-2 kernels of gpt2-cuda.h: embedding
 * forward and deterministic backward, LayerNorm (one warp per row; weight gradients by fixed
 * two-stage column sums), GELU and residual. fp32 math on fp32 or bf16 storage.
 */
#include <stdlib.h>

#include "gpt2-cuda.h"
#include "kern-cuda-internal.cuh"

#define LN_EPS       1e-5f
#define GELU_SCALE   0.7978845608028654f /* sqrt(2 / pi) */
#define ROWS_THREADS 256                 /* 8 warps: 8 rows per block */

/* Sum over the 32 lanes of a full warp; every lane gets the same value (each butterfly step
 * adds the same two operands in both lanes). */
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* --- embedding --- */

template <typename T>
__global__ void encoder_forward_kernel(T *out, const int32_t *tokens, const T *wte, const T *wpe,
                                       int N, int T_, int C) {
    size_t total = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / C;
        int    c = (int)(i % C);
        int    t = (int)(n % T_);
        float  we = kern_ld(wte, (size_t)tokens[n] * C + c);
        float  pe = kern_ld(wpe, (size_t)t * C + c);
        kern_st(out, i, we + pe);
    }
}

void gpt2_cuda_encoder_forward(void *out, const int32_t *tokens, const void *wte, const void *wpe,
                               int B, int T, int C, KernDtype dt, cudaStream_t stream) {
    KERN_ASSERT(B >= 0 && T >= 1 && C >= 1);
    int N = B * T;
    if (N == 0)
        return;
    unsigned grid = kern_cuda_grid((size_t)N * C, 256);
    KERN_DT_DISPATCH(dt, E, {
        encoder_forward_kernel<E>
            <<<grid, 256, 0, stream>>>((E *)out, tokens, (const E *)wte, (const E *)wpe, N, T, C);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int gpt2_cuda_encoder_buckets(int32_t *order, int32_t *starts, int64_t *scratch,
                              const int32_t *tokens, int N) {
    KERN_ASSERT(N >= 0);
    /* key = (token, position): unique keys, so the order is total and stable by position */
    for (int i = 0; i < N; i++) {
        KERN_ASSERT(tokens[i] >= 0);
        scratch[i] = ((int64_t)tokens[i] << 32) | (int64_t)i;
    }
    qsort(scratch, (size_t)N, sizeof *scratch, cmp_i64);
    int n_buckets = 0;
    for (int k = 0; k < N; k++) {
        order[k] = (int32_t)(scratch[k] & 0xffffffff);
        if (k == 0 || (scratch[k] >> 32) != (scratch[k - 1] >> 32))
            starts[n_buckets++] = k;
    }
    starts[n_buckets] = N;
    return n_buckets;
}

/* dwpe[t, c] += dout[b, t, c] for b ascending: one thread per (t, c). */
template <typename T>
__global__ void encoder_backward_wpe_kernel(float *dwpe, const T *dout, int B, int T_, int C) {
    size_t total = (size_t)T_ * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++)
            acc += kern_ld(dout, (size_t)b * total + i);
        dwpe[i] = acc;
    }
}

/* dwte[v, c] += dout[pos, c] over bucket u's positions (ascending): one block per bucket. */
template <typename T>
__global__ void encoder_backward_wte_kernel(float *dwte, const T *dout, const int32_t *tokens,
                                            const int32_t *order, const int32_t *starts, int C) {
    int    u = blockIdx.x;
    int    k0 = starts[u], k1 = starts[u + 1];
    size_t v = (size_t)tokens[order[k0]];
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = dwte[v * C + c];
        for (int k = k0; k < k1; k++)
            acc += kern_ld(dout, (size_t)order[k] * C + c);
        dwte[v * C + c] = acc;
    }
}

void gpt2_cuda_encoder_backward(float *dwte, float *dwpe, const void *dout, const int32_t *tokens,
                                const int32_t *order, const int32_t *starts, int n_buckets, int B,
                                int T, int C, KernDtype dt, cudaStream_t stream) {
    KERN_ASSERT(B >= 0 && T >= 1 && C >= 1 && n_buckets >= 0 && n_buckets <= B * T);
    if (B == 0)
        return;
    unsigned grid = kern_cuda_grid((size_t)T * C, 256);
    KERN_DT_DISPATCH(dt, E, {
        encoder_backward_wpe_kernel<E><<<grid, 256, 0, stream>>>(dwpe, (const E *)dout, B, T, C);
        KERN_CUDA_LAUNCH_CHECK();
        if (n_buckets > 0) {
            encoder_backward_wte_kernel<E><<<(unsigned)n_buckets, 128, 0, stream>>>(
                dwte, (const E *)dout, tokens, order, starts, C);
            KERN_CUDA_LAUNCH_CHECK();
        }
    });
}

/* --- layernorm --- */

template <typename T>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp,
                                         const T *weight, const T *bias, int N, int C) {
    int row = blockIdx.x * (ROWS_THREADS / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) /* warp-uniform: the whole warp leaves */
        return;
    const T *x = inp + (size_t)row * C;
    T       *o = out + (size_t)row * C;
    float    s = 0.0f;
    for (int i = lane; i < C; i += 32)
        s += kern_ld(x, i);
    float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float d = kern_ld(x, i) - m;
        v += d * d;
    }
    v = warp_sum(v) / (float)C;
    float r = 1.0f / sqrtf(v + LN_EPS);
    for (int i = lane; i < C; i += 32)
        kern_st(o, i, (kern_ld(x, i) - m) * r * kern_ld(weight, i) + kern_ld(bias, i));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

void gpt2_cuda_layernorm_forward(void *out, float *mean, float *rstd, const void *inp,
                                 const void *weight, const void *bias, int N, int C, KernDtype dt,
                                 cudaStream_t stream) {
    KERN_ASSERT(N >= 0 && C >= 1);
    if (N == 0)
        return;
    unsigned grid = (unsigned)((N + ROWS_THREADS / 32 - 1) / (ROWS_THREADS / 32));
    KERN_DT_DISPATCH(dt, E, {
        layernorm_forward_kernel<E><<<grid, ROWS_THREADS, 0, stream>>>(
            (E *)out, mean, rstd, (const E *)inp, (const E *)weight, (const E *)bias, N, C);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

template <typename T>
__global__ void layernorm_backward_input_kernel(T *dinp, const T *dout, const T *inp,
                                                const T *weight, const float *mean,
                                                const float *rstd, int N, int C) {
    int row = blockIdx.x * (ROWS_THREADS / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const T *x = inp + (size_t)row * C;
    const T *d = dout + (size_t)row * C;
    T       *dx = dinp + (size_t)row * C;
    float    m = mean[row], s = rstd[row];
    /* dxhat = dout * w; dx += s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
    float dmean = 0.0f, dnorm_mean = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float xhat = (kern_ld(x, i) - m) * s;
        float dxhat = kern_ld(d, i) * kern_ld(weight, i);
        dmean += dxhat;
        dnorm_mean += dxhat * xhat;
    }
    dmean = warp_sum(dmean) / (float)C;
    dnorm_mean = warp_sum(dnorm_mean) / (float)C;
    for (int i = lane; i < C; i += 32) {
        float xhat = (kern_ld(x, i) - m) * s;
        float dxhat = kern_ld(d, i) * kern_ld(weight, i);
        kern_st(dx, i, kern_ld(dx, i) + (dxhat - dmean - xhat * dnorm_mean) * s);
    }
}

void gpt2_cuda_layernorm_backward_input(void *dinp, const void *dout, const void *inp,
                                        const void *weight, const float *mean, const float *rstd,
                                        int N, int C, KernDtype dt, cudaStream_t stream) {
    KERN_ASSERT(N >= 0 && C >= 1);
    if (N == 0)
        return;
    unsigned grid = (unsigned)((N + ROWS_THREADS / 32 - 1) / (ROWS_THREADS / 32));
    KERN_DT_DISPATCH(dt, E, {
        layernorm_backward_input_kernel<E><<<grid, ROWS_THREADS, 0, stream>>>(
            (E *)dinp, (const E *)dout, (const E *)inp, (const E *)weight, mean, rstd, N, C);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

/* --- column sums (LayerNorm weight gradients, bias gradients) --- */

#define CS_TX 32 /* columns per block */
#define CS_TY 8  /* row lanes per block */

/* Partial column sums of one chunk of rows. LN: quantity 0 is dout * xhat, quantity 1 dout
 * (rows n_chunks.. of @partial); else quantity 0 is dout. Every (chunk, column) of every
 * quantity is written, 0 for an empty chunk. */
template <typename T, bool LN>
__global__ void colsum_partial_kernel(float *partial, const T *dout, const T *inp,
                                      const float *mean, const float *rstd, int N, int C,
                                      int rows_per_chunk, int n_chunks) {
    __shared__ float sh0[CS_TY][CS_TX + 1];
    __shared__ float sh1[CS_TY][CS_TX + 1];
    int              tx = threadIdx.x, ty = threadIdx.y;
    int              c = blockIdx.x * CS_TX + tx;
    int              chunk = blockIdx.y;
    long long        r0 = (long long)chunk * rows_per_chunk;
    long long        r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
    float            a0 = 0.0f, a1 = 0.0f;
    if (c < C) {
        for (long long r = r0 + ty; r < r1; r += CS_TY) {
            float d = kern_ld(dout, (size_t)r * C + c);
            if (LN) {
                float xhat = (kern_ld(inp, (size_t)r * C + c) - mean[r]) * rstd[r];
                a0 += d * xhat;
                a1 += d;
            } else {
                a0 += d;
            }
        }
    }
    sh0[ty][tx] = a0;
    sh1[ty][tx] = a1;
    __syncthreads();
    if (ty == 0 && c < C) {
        float s0 = 0.0f, s1 = 0.0f;
        for (int k = 0; k < CS_TY; k++) {
            s0 += sh0[k][tx];
            s1 += sh1[k][tx];
        }
        partial[(size_t)chunk * C + c] = s0;
        if (LN)
            partial[((size_t)n_chunks + chunk) * C + c] = s1;
    }
}

/* Launches the partial sums of @n_quant quantities; returns the chunk count. */
template <typename T, bool LN>
static int colsum_partial(float *partial, const T *dout, const T *inp, const float *mean,
                          const float *rstd, int N, int C, cudaStream_t stream) {
    int  n_chunks = kern_cuda_colsum_chunks(N, C, LN ? 2 : 1);
    int  rows_per_chunk = (N + n_chunks - 1) / n_chunks;
    dim3 grid((unsigned)((C + CS_TX - 1) / CS_TX), (unsigned)n_chunks);
    dim3 block(CS_TX, CS_TY);
    colsum_partial_kernel<T, LN><<<grid, block, 0, stream>>>(partial, dout, inp, mean, rstd, N, C,
                                                             rows_per_chunk, n_chunks);
    KERN_CUDA_LAUNCH_CHECK();
    return n_chunks;
}

void gpt2_cuda_layernorm_backward_weight(float *dweight, float *dbias, const void *dout,
                                         const void *inp, const float *mean, const float *rstd,
                                         int N, int C, KernDtype dt, KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && C >= 1);
    if (N == 0)
        return;
    int n_chunks = 0;
    KERN_DT_DISPATCH(dt, E, {
        n_chunks = colsum_partial<E, true>(ctx->scratch, (const E *)dout, (const E *)inp, mean,
                                           rstd, N, C, ctx->stream);
    });
    kern_cuda_colsum_finish2(dweight, dbias, ctx->scratch, n_chunks, C, ctx->stream);
}

void kern_cuda_colsum_rows(float *dst, const void *x, int N, int C, KernDtype dt,
                           KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && C >= 1);
    if (N == 0)
        return;
    int n_chunks = 0;
    KERN_DT_DISPATCH(dt, E, {
        n_chunks = colsum_partial<E, false>(ctx->scratch, (const E *)x, (const E *)NULL, NULL, NULL,
                                            N, C, ctx->stream);
    });
    kern_cuda_colsum_finish(dst, ctx->scratch, n_chunks, C, ctx->stream);
}

/* --- GELU --- */

template <typename T> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = kern_ld(inp, i);
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        kern_st(out, i, 0.5f * x * (1.0f + tanhf(u)));
    }
}

template <typename T>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = kern_ld(inp, i);
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float grad =
            0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        kern_st(dinp, i, grad * kern_ld(dout, i));
    }
}

void gpt2_cuda_gelu_forward(void *out, const void *inp, size_t N, KernDtype dt,
                            cudaStream_t stream) {
    if (N == 0)
        return;
    unsigned grid = kern_cuda_grid(N, 256);
    KERN_DT_DISPATCH(dt, E, {
        gelu_forward_kernel<E><<<grid, 256, 0, stream>>>((E *)out, (const E *)inp, N);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

void gpt2_cuda_gelu_backward(void *dinp, const void *inp, const void *dout, size_t N, KernDtype dt,
                             cudaStream_t stream) {
    if (N == 0)
        return;
    unsigned grid = kern_cuda_grid(N, 256);
    KERN_DT_DISPATCH(dt, E, {
        gelu_backward_kernel<E>
            <<<grid, 256, 0, stream>>>((E *)dinp, (const E *)inp, (const E *)dout, N);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

/* --- residual --- */

template <typename T>
__global__ void residual_forward_kernel(T *out, const T *inp1, const T *inp2, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        kern_st(out, i, kern_ld(inp1, i) + kern_ld(inp2, i));
}

template <typename T>
__global__ void residual_backward_kernel(T *dinp1, T *dinp2, const T *dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = kern_ld(dout, i);
        kern_st(dinp1, i, kern_ld(dinp1, i) + d);
        kern_st(dinp2, i, kern_ld(dinp2, i) + d);
    }
}

void gpt2_cuda_residual_forward(void *out, const void *inp1, const void *inp2, size_t N,
                                KernDtype dt, cudaStream_t stream) {
    if (N == 0)
        return;
    unsigned grid = kern_cuda_grid(N, 256);
    KERN_DT_DISPATCH(dt, E, {
        residual_forward_kernel<E>
            <<<grid, 256, 0, stream>>>((E *)out, (const E *)inp1, (const E *)inp2, N);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

void gpt2_cuda_residual_backward(void *dinp1, void *dinp2, const void *dout, size_t N, KernDtype dt,
                                 cudaStream_t stream) {
    if (N == 0)
        return;
    unsigned grid = kern_cuda_grid(N, 256);
    KERN_DT_DISPATCH(dt, E, {
        residual_backward_kernel<E>
            <<<grid, 256, 0, stream>>>((E *)dinp1, (E *)dinp2, (const E *)dout, N);
        KERN_CUDA_LAUNCH_CHECK();
    });
}
