/* SPDX-License-Identifier: MIT
 * gpt2-cuda-matmul.cu: the GPT-2 matmuls of gpt2-cuda.h as row-major kern_cuda_gemm() calls:
 * forward with the bias (and, in bf16, GELU) epilogue, input gradient, and the weight
 * gradient accumulated into fp32 with the bias gradient by a fixed-order column sum.
 */
#include <string.h>

#include "gpt2-cuda.h"
#include "kern-cuda-internal.cuh"

/* A plain (unbatched) product with every field the matmuls do not use cleared. */
static KernCudaGemm matmul_gemm(KernDtype dt) {
    KernCudaGemm g;
    memset(&g, 0, sizeof g);
    g.ab = dt;
    g.cd = dt;
    g.alpha = 1.0f;
    g.batch = 1;
    return g;
}

void gpt2_cuda_matmul_forward(void *out, const void *inp, const void *weight, const void *bias,
                              int N, int IC, int OC, KernDtype dt, KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && IC >= 1 && OC >= 1);
    if (N == 0)
        return;
    /* out (N, OC) = inp (N, IC) @ weight^T, weight stored (OC, IC) */
    KernCudaGemm g = matmul_gemm(dt);
    g.M = N;
    g.N = OC;
    g.K = IC;
    g.a = inp;
    g.lda = IC;
    g.b = weight;
    g.ldb = IC;
    g.trans_b = 1;
    g.c = out;
    g.ldc = OC;
    g.bias = bias;
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
    KernCudaGemm g = matmul_gemm(dt);
    g.M = N;
    g.N = OC;
    g.K = IC;
    g.a = inp;
    g.lda = IC;
    g.b = weight;
    g.ldb = IC;
    g.trans_b = 1;
    g.c = out_gelu;
    g.ldc = OC;
    g.bias = bias;
    g.gelu_pre = out_pre;
    kern_cuda_gemm(&g, ctx);
}

void gpt2_cuda_matmul_backward_input(void *dinp, const void *dout, const void *weight, int N,
                                     int IC, int OC, KernDtype dt, KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && IC >= 1 && OC >= 1);
    if (N == 0)
        return;
    /* dinp (N, IC) = dout (N, OC) @ weight (OC, IC) */
    KernCudaGemm g = matmul_gemm(dt);
    g.M = N;
    g.N = IC;
    g.K = OC;
    g.a = dout;
    g.lda = OC;
    g.b = weight;
    g.ldb = IC;
    g.c = dinp;
    g.ldc = IC;
    kern_cuda_gemm(&g, ctx);
}

void gpt2_cuda_matmul_backward_weight(float *dweight, float *dbias, const void *dout,
                                      const void *inp, int N, int IC, int OC, KernDtype dt,
                                      KernCudaCtx *ctx) {
    KERN_ASSERT(N >= 0 && IC >= 1 && OC >= 1);
    if (N == 0)
        return;
    /* dweight (OC, IC) += dout^T (OC, N) @ inp (N, IC), dout stored (N, OC) */
    KernCudaGemm g = matmul_gemm(dt);
    g.cd = KERN_DTYPE_F32;
    g.M = OC;
    g.N = IC;
    g.K = N;
    g.a = dout;
    g.lda = OC;
    g.trans_a = 1;
    g.b = inp;
    g.ldb = IC;
    g.c = dweight;
    g.c_in = dweight;
    g.ldc = IC;
    g.beta = 1.0f;
    kern_cuda_gemm(&g, ctx);
    if (dbias)
        kern_cuda_colsum_rows(dbias, dout, N, OC, dt, ctx);
}
