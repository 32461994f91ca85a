/* SPDX-License-Identifier: MIT
 * gpt2-cuda-matmul.cu: the GPT-2 matmuls of gpt2-cuda.h as row-major kern_cuda_gemm() calls:
 * forward with the bias (and, in bf16, GELU) epilogue, input gradient, and the weight
 * gradient accumulated into fp32 with the bias gradient by a fixed-order column sum.
 */
#include "gpt2-cuda.h"
#include "kern-cuda-internal.cuh"

/* out (N, OC) = inp (N, IC) @ weight^T + bias, weight stored (OC, IC). */
static KernCudaGemm forward_gemm(void *out, const void *inp, const void *weight, const void *bias,
                                 int N, int IC, int OC, KernDtype dt) {
    KernCudaGemm g = kern_cuda_gemm_dense(N, OC, IC, 0, inp, 1, weight, out, dt, dt);
    g.bias = bias;
    return g;
}

void gpt2_cuda_matmul_forward(void *out, const void *inp, const void *weight, const void *bias,
                              int N, int IC, int OC, KernDtype dt, KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && IC >= 1 && OC >= 1);
    if (N == 0)
        return;
    KernCudaGemm g = forward_gemm(out, inp, weight, bias, N, IC, OC, dt);
    kern_cuda_gemm(&g, ctx);
}

void gpt2_cuda_matmul_forward_gelu(void *out_gelu, void *out_pre, const void *inp,
                                   const void *weight, const void *bias, int N, int IC, int OC,
                                   KernDtype dt, KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && IC >= 1 && OC >= 1);
    if (N == 0)
        return;
    if (dt != KERN_DTYPE_BF16 || OC % 8 != 0) {
        gpt2_cuda_matmul_forward(out_pre, inp, weight, bias, N, IC, OC, dt, ctx);
        gpt2_cuda_gelu_forward(out_gelu, out_pre, (size_t)N * OC, dt, ctx->stream);
        return;
    }
    KernCudaGemm g = forward_gemm(out_gelu, inp, weight, bias, N, IC, OC, dt);
    g.gelu_pre = out_pre;
    kern_cuda_gemm(&g, ctx);
}

void gpt2_cuda_matmul_backward_input(void *dinp, const void *dout, const void *weight, int N,
                                     int IC, int OC, KernDtype dt, KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && IC >= 1 && OC >= 1);
    if (N == 0)
        return;
    /* dinp (N, IC) = dout (N, OC) @ weight (OC, IC) */
    KernCudaGemm g = kern_cuda_gemm_dense(N, IC, OC, 0, dout, 0, weight, dinp, dt, dt);
    kern_cuda_gemm(&g, ctx);
}

void gpt2_cuda_matmul_backward_weight(float *dweight, float *dbias, const void *dout,
                                      const void *inp, int N, int IC, int OC, KernDtype dt,
                                      KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && IC >= 1 && OC >= 1);
    if (N == 0)
        return;
    /* dweight (OC, IC) += dout^T (OC, N) @ inp (N, IC), dout stored (N, OC) */
    KernCudaGemm g = kern_cuda_gemm_dense(OC, IC, N, 1, dout, 0, inp, dweight, dt, KERN_DTYPE_F32);
    g.c_in = dweight;
    g.beta = 1.0f;
    kern_cuda_gemm(&g, ctx);
    if (dbias)
        kern_cuda_colsum_rows(dbias, dout, N, OC, dt, ctx);
}
