/* SPDX-License-Identifier: MIT
 * gpt2-cuda-loss.cu: fused softmax + cross-entropy over the padded vocabulary (gpt2-cuda.h):
 * one block per row with an online max/sum, the row loss in double from the fp32 logits, the
 * mean by a single fixed-order block, and the element-wise backward (the target's p - 1 from
 * the fp32 row loss).
 */
#include <math.h>

#include "gpt2-cuda.h"
#include "kern-cuda-internal.cuh"

#define CE_THREADS   256
#define MEAN_THREADS 1024

/* Folds (m2, s2) into (m1, s1): s = sum of exp(x - m) over both parts, m their max. An empty
 * part (s 0, m -inf) contributes nothing (and never evaluates exp(-inf + inf)). */
static __device__ __forceinline__ void online_merge(float *m1, float *s1, float m2, float s2) {
    if (s2 == 0.0f)
        return;
    if (*s1 == 0.0f) {
        *m1 = m2;
        *s1 = s2;
        return;
    }
    float m = fmaxf(*m1, m2);
    *s1 = *s1 * expf(*m1 - m) + s2 * expf(m2 - m);
    *m1 = m;
}

template <typename E>
__global__ void crossentropy_forward_kernel(E *logits, float *row_loss, const int32_t *targets,
                                            int V, int Vp) {
    __shared__ float sh_m[CE_THREADS], sh_s[CE_THREADS];
    __shared__ float sh_tgt;
    size_t           n = blockIdx.x;
    E               *row = logits + n * Vp;
    int              tgt = targets[n];
    int              tgt_ok = tgt >= 0 && tgt < V;
    /* read the target logit before any thread overwrites the row */
    if (threadIdx.x == 0)
        sh_tgt = tgt_ok ? kern_ld(row, (size_t)tgt) : 0.0f;
    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < V; j += CE_THREADS) {
        float x = kern_ld(row, (size_t)j);
        if (x > m) { /* new maximum: rescale the sum (exp(-inf) = 0 on the first element) */
            s = s * expf(m - x) + 1.0f;
            m = x;
        } else {
            s += expf(x - m);
        }
    }
    sh_m[threadIdx.x] = m;
    sh_s[threadIdx.x] = s;
    __syncthreads();
    for (int k = CE_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) {
            float mm = sh_m[threadIdx.x], ss = sh_s[threadIdx.x];
            online_merge(&mm, &ss, sh_m[threadIdx.x + k], sh_s[threadIdx.x + k]);
            sh_m[threadIdx.x] = mm;
            sh_s[threadIdx.x] = ss;
        }
        __syncthreads();
    }
    float maxv = sh_m[0], sum = sh_s[0];
    if (threadIdx.x == 0) {
        /* -log p[target] = log(sum) - (logit[target] - max), exact even when p underflows */
        double loss = log((double)sum) - (double)(sh_tgt - maxv);
        row_loss[n] = tgt_ok ? (float)loss : NAN;
    }
    float inv = (float)(1.0 / (double)sum);
    for (int j = threadIdx.x; j < Vp; j += CE_THREADS) {
        float p = j < V ? expf(kern_ld(row, (size_t)j) - maxv) * inv : 0.0f;
        kern_st(row, (size_t)j, p);
    }
}

__global__ void mean_kernel(float *out, const float *x, int n) {
    __shared__ double sh[MEAN_THREADS];
    double            acc = 0.0;
    for (int i = threadIdx.x; i < n; i += MEAN_THREADS)
        acc += (double)x[i];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int k = MEAN_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k)
            sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *out = (float)(sh[0] / n);
}

void gpt2_cuda_crossentropy_forward(void *logits, float *row_loss, float *mean_loss,
                                    const int32_t *targets, int N, int V, int Vp, KernDtype dt,
                                    cudaStream_t stream) {
    KERN_ASSERT(N >= 0 && V >= 1 && V <= Vp);
    if (N == 0)
        return;
    KERN_DT_DISPATCH(dt, E, {
        crossentropy_forward_kernel<E>
            <<<(unsigned)N, CE_THREADS, 0, stream>>>((E *)logits, row_loss, targets, V, Vp);
        KERN_CUDA_LAUNCH_CHECK();
    });
    if (mean_loss) {
        mean_kernel<<<1, MEAN_THREADS, 0, stream>>>(mean_loss, row_loss, N);
        KERN_CUDA_LAUNCH_CHECK();
    }
}

template <typename E>
__global__ void crossentropy_backward_kernel(E *dlogits, const E *probs, const float *row_loss,
                                             const int32_t *targets, float dloss, int V, int Vp,
                                             size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / Vp;
        int    j = (int)(i % Vp);
        float  g = 0.0f;
        if (j < V && j == targets[n]) /* p - 1 = exp(-loss) - 1: fp32, no cancellation */
            g = expm1f(-row_loss[n]) * dloss;
        else if (j < V)
            g = kern_ld(probs, i) * dloss;
        kern_st(dlogits, i, g);
    }
}

void gpt2_cuda_crossentropy_backward(void *dlogits, const void *probs, const float *row_loss,
                                     const int32_t *targets, float dloss, int N, int V, int Vp,
                                     KernDtype dt, cudaStream_t stream) {
    KERN_ASSERT(N >= 0 && V >= 1 && V <= Vp);
    size_t total = (size_t)N * Vp;
    if (total == 0)
        return;
    unsigned grid = kern_cuda_grid(total, 256);
    KERN_DT_DISPATCH(dt, E, {
        crossentropy_backward_kernel<E><<<grid, 256, 0, stream>>>(
            (E *)dlogits, (const E *)probs, row_loss, targets, dloss, V, Vp, total);
        KERN_CUDA_LAUNCH_CHECK();
    });
}
