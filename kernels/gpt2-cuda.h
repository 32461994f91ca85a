/* SPDX-License-Identifier: MIT
 * gpt2-cuda.h: GPT-2 layer kernels on CUDA, gpt2_cuda_*: one counterpart of every gpt2_cpu_*
 * kernel of gpt2-cpu.h with the same semantics and argument order, followed by the element
 * type and the stream (or the KernCudaCtx, for kernels that use cuBLASLt or the context's
 * reduction scratch). All pointers are device pointers unless marked "host". Tensors marked
 * "dt" hold elements of @dt (float or bf16); tensors marked "f32" are fp32 in both modes
 * (weight gradients, LayerNorm statistics, losses). Math is fp32 throughout. Kernels never
 * allocate; every reduction has a fixed order, so results are bitwise reproducible on a given
 * device. N is the number of token positions B * T.
 */
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kern-cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- embedding --- */

/* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. Token ids must lie in [0, Vp) (callers check
 * them on the host; the kernel does not). */
void gpt2_cuda_encoder_forward(void          *out,    // (B, T, C) dt
                               const int32_t *tokens, // (B, T)
                               const void    *wte,    // (Vp, C) dt
                               const void    *wpe,    // (T, C) dt
                               int B, int T, int C, KernDtype dt, cudaStream_t stream);

/* Host helper for the deterministic embedding backward: groups the N positions by token id.
 * Writes @order (N), the positions sorted by (token, position), and @starts (n_buckets + 1),
 * where bucket u holds order[starts[u] .. starts[u+1]-1] (one bucket per distinct token,
 * positions ascending). @scratch: N int64 (host). Token ids must be >= 0. Returns n_buckets.
 * All arrays are host memory. */
int gpt2_cuda_encoder_buckets(int32_t       *order,   // (N) host
                              int32_t       *starts,  // (N + 1) host
                              int64_t       *scratch, // (N) host
                              const int32_t *tokens,  // (N) host
                              int            N);
/* dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:], each sum taken in ascending
 * position order exactly as gpt2_cpu_encoder_backward() (so fp32 results match it bitwise).
 * @order and @starts are gpt2_cuda_encoder_buckets()'s output for @tokens, copied to the
 * device; @n_buckets its return value. */
void gpt2_cuda_encoder_backward(float         *dwte,   // (Vp, C) f32, accumulated
                                float         *dwpe,   // (T, C) f32, accumulated
                                const void    *dout,   // (B, T, C) dt
                                const int32_t *tokens, // (B, T)
                                const int32_t *order,  // (B * T)
                                const int32_t *starts, // (n_buckets + 1)
                                int n_buckets, int B, int T, int C, KernDtype dt,
                                cudaStream_t stream);

/* --- layernorm (eps 1e-5, biased variance) --- */

void gpt2_cuda_layernorm_forward(void       *out,    // (N, C) dt
                                 float      *mean,   // (N) f32
                                 float      *rstd,   // (N) f32, 1 / sqrt(var + eps)
                                 const void *inp,    // (N, C) dt
                                 const void *weight, // (C) dt
                                 const void *bias,   // (C) dt
                                 int N, int C, KernDtype dt, cudaStream_t stream);
/* B: dinp += d out / d inp applied to dout. */
void gpt2_cuda_layernorm_backward_input(void        *dinp,   // (N, C) dt, accumulated
                                        const void  *dout,   // (N, C) dt
                                        const void  *inp,    // (N, C) dt
                                        const void  *weight, // (C) dt
                                        const float *mean,   // (N) f32
                                        const float *rstd,   // (N) f32
                                        int N, int C, KernDtype dt, cudaStream_t stream);
/* W: dweight += sum_n dout * xhat; dbias += sum_n dout (two-stage fixed-order sums). */
void gpt2_cuda_layernorm_backward_weight(float       *dweight, // (C) f32, accumulated
                                         float       *dbias,   // (C) f32, accumulated
                                         const void  *dout,    // (N, C) dt
                                         const void  *inp,     // (N, C) dt
                                         const float *mean,    // (N) f32
                                         const float *rstd,    // (N) f32
                                         int N, int C, KernDtype dt, KernCudaCtx *ctx);

/* --- matmul: out = inp @ weight^T + bias (cuBLASLt, bias epilogue) --- */

void gpt2_cuda_matmul_forward(void       *out,    // (N, OC) dt
                              const void *inp,    // (N, IC) dt
                              const void *weight, // (OC, IC) dt
                              const void *bias,   // (OC) dt, nullable
                              int N, int IC, int OC, KernDtype dt, KernCudaCtx *ctx);
/* out_pre = inp @ weight^T + bias, out_gelu = gelu(out_pre) (tanh approximation). In bf16
 * with OC % 8 == 0 one cuBLASLt call with the GELU_AUX_BIAS epilogue (cuBLASLt's GELU); in
 * fp32 (and otherwise) the matmul followed by gpt2_cuda_gelu_forward(), i.e. exactly the CPU
 * kernels' formula. */
void gpt2_cuda_matmul_forward_gelu(void       *out_gelu, // (N, OC) dt
                                   void       *out_pre,  // (N, OC) dt
                                   const void *inp,      // (N, IC) dt
                                   const void *weight,   // (OC, IC) dt
                                   const void *bias,     // (OC) dt, nullable
                                   int N, int IC, int OC, KernDtype dt, KernCudaCtx *ctx);
/* B: dinp = dout @ weight (overwritten). */
void gpt2_cuda_matmul_backward_input(void       *dinp,   // (N, IC) dt
                                     const void *dout,   // (N, OC) dt
                                     const void *weight, // (OC, IC) dt
                                     int N, int IC, int OC, KernDtype dt, KernCudaCtx *ctx);
/* W: dweight += dout^T @ inp (fp32 accumulation into the fp32 gradient: cuBLASLt with bf16
 * operands and an fp32 C in bf16 mode); dbias += sum_n dout when non-NULL (fixed order). */
void gpt2_cuda_matmul_backward_weight(float      *dweight, // (OC, IC) f32, accumulated
                                      float      *dbias,   // (OC) f32, accumulated, nullable
                                      const void *dout,    // (N, OC) dt
                                      const void *inp,     // (N, IC) dt
                                      int N, int IC, int OC, KernDtype dt, KernCudaCtx *ctx);

/* --- causal multi-head self-attention (scale 1 / sqrt(C / NH)) ---
 * Layout as gpt2_cpu_attention_forward(). Implementation: q, k, v are permuted to
 * (B, NH, T, hs) in @scratch, the scores q k^T come from one batched cuBLASLt product into an
 * fp32 scratch, a fused causal softmax writes @att (zero above the diagonal), and att @ v is
 * a second batched product. @scratch must hold gpt2_cuda_attention_scratch_bytes() bytes,
 * 256-byte aligned, and is only used during the call. */

/* Scratch bytes needed by the forward and the backward of one call with these shapes. */
size_t gpt2_cuda_attention_scratch_bytes(int B, int T, int C, int NH, KernDtype dt);
void   gpt2_cuda_attention_forward(void       *out,     // (B, T, C) dt
                                   void       *att,     // (B, NH, T, T) dt
                                   const void *qkv,     // (B, T, 3C) dt
                                   void       *scratch, // see above
                                   int B, int T, int C, int NH, KernDtype dt, KernCudaCtx *ctx);
/* B: dqkv = gradient of qkv (overwritten). */
void gpt2_cuda_attention_backward(void       *dqkv,    // (B, T, 3C) dt
                                  void       *scratch, // see above
                                  const void *dout,    // (B, T, C) dt
                                  const void *qkv,     // (B, T, 3C) dt
                                  const void *att,     // (B, NH, T, T) dt
                                  int B, int T, int C, int NH, KernDtype dt, KernCudaCtx *ctx);

/* --- fused (flash) causal attention: bf16, head size C / NH of 32, 64 or 128 ---
 * The same function as gpt2_cuda_attention_forward/backward without the (B, NH, T, T)
 * probabilities: the forward saves the log-sum-exp of each row's scaled scores, the backward
 * recomputes the probabilities from q, k and it. Tensor cores through WMMA (bf16 operands,
 * fp32 accumulation, probabilities rounded to bf16 before the products with v); one writer
 * per output, so results are deterministic. Needs C % 8 == 0 and 16-byte aligned tensors. */

/* 1 when (C, NH, dt) can use the fused kernels, else 0. */
int gpt2_cuda_flash_attention_supported(int C, int NH, KernDtype dt);
/* Scratch bytes of the backward: one fp32 per (b, h, t). */
size_t gpt2_cuda_flash_attention_scratch_bytes(int B, int T, int NH);
void   gpt2_cuda_flash_attention_forward(void       *out, // (B, T, C) bf16
                                         float      *lse, // (B, NH, T) f32, log-sum-exp per row
                                         const void *qkv, // (B, T, 3C) bf16
                                         int B, int T, int C, int NH, KernDtype dt, KernCudaCtx *ctx);
/* B: dqkv = gradient of qkv (overwritten), from the forward's @out and @lse. */
void gpt2_cuda_flash_attention_backward(void        *dqkv,    // (B, T, 3C) bf16
                                        float       *scratch, // (B, NH, T) f32
                                        const void  *dout,    // (B, T, C) bf16
                                        const void  *qkv,     // (B, T, 3C) bf16
                                        const void  *out,     // (B, T, C) bf16
                                        const float *lse,     // (B, NH, T) f32
                                        int B, int T, int C, int NH, KernDtype dt,
                                        KernCudaCtx *ctx);

/* --- GELU (tanh approximation) --- */

void gpt2_cuda_gelu_forward(void       *out, // (N) dt
                            const void *inp, // (N) dt
                            size_t N, KernDtype dt, cudaStream_t stream);
/* dinp = gelu'(inp) * dout (overwritten; dinp may alias dout). */
void gpt2_cuda_gelu_backward(void       *dinp, // (N) dt
                             const void *inp,  // (N) dt
                             const void *dout, // (N) dt
                             size_t N, KernDtype dt, cudaStream_t stream);

/* --- residual --- */

void gpt2_cuda_residual_forward(void       *out,  // (N) dt
                                const void *inp1, // (N) dt
                                const void *inp2, // (N) dt
                                size_t N, KernDtype dt, cudaStream_t stream);
/* dinp1 += dout; dinp2 += dout. */
void gpt2_cuda_residual_backward(void       *dinp1, // (N) dt, accumulated
                                 void       *dinp2, // (N) dt, accumulated
                                 const void *dout,  // (N) dt
                                 size_t N, KernDtype dt, cudaStream_t stream);

/* --- fused softmax + cross-entropy over the padded vocabulary --- */

/* Softmax over the first V columns of each row in place (@logits become the probabilities,
 * columns V..Vp-1 get 0); @row_loss receives each row's -log p[target] computed as
 * log(sum) - (logit[target] - max), in fp32 from the fp32 logits before any rounding; when
 * @mean_loss is non-NULL it receives the mean over the N rows (summed in double, fixed
 * order). A target outside [0, V) gives that row a NaN loss (and no one-hot term in the
 * backward) instead of an out-of-bounds read. */
void gpt2_cuda_crossentropy_forward(void          *logits,    // (N, Vp) dt, in: logits, out: probs
                                    float         *row_loss,  // (N) f32
                                    float         *mean_loss, // (1) f32, nullable
                                    const int32_t *targets,   // (N)
                                    int N, int V, int Vp, KernDtype dt, cudaStream_t stream);
/* dlogits = (probs - onehot(target)) * dloss for columns < V, 0 for padded columns
 * (overwritten; dlogits may alias probs). At the target, p - 1 is expm1(-row_loss) in fp32
 * from the forward's @row_loss, not the stored probability minus 1: a bf16 p near 1 is off by
 * up to 2^-9, 20% and more of p - 1 once p > 0.99. */
void gpt2_cuda_crossentropy_backward(void          *dlogits,  // (N, Vp) dt
                                     const void    *probs,    // (N, Vp) dt
                                     const float   *row_loss, // (N) f32, the forward's
                                     const int32_t *targets,  // (N)
                                     float dloss, int N, int V, int Vp, KernDtype dt,
                                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif
