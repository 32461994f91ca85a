/* SPDX-License-Identifier: MIT
 * gpt2-cpu.h: GPT-2 layer kernels on the CPU, gpt2_cpu_* (the role of llm.c's train_gpt2.c
 * kernels). Matmuls are kern_gemm() calls (kern-gemm.h); every kernel runs on the calling
 * thread's kern-pool team (kern_set_threads()) and is vectorised for the processor
 * (kern-simd.h). Callers pass every output buffer; the only memory kernels take themselves is
 * per-thread scratch of fixed purpose (kern_thread_scratch()), kept between calls.
 * Backward kernels are split into the input gradient (B) and the weight gradient (W, always
 * accumulated with +=) for zero-bubble schedules. N is the number of token positions B * T.
 *
 * Determinism: threads split work only by output rows (tokens, attention heads, rows of a
 * product) or by output channels, never inside a sum. Every sum over rows (weight, bias,
 * LayerNorm and embedding gradients) runs over all rows in ascending order on one thread, and
 * every sum along a row (LayerNorm statistics, softmax, dot products) goes into GPT2_LANES
 * fixed partial sums (gpt2-cpu-math.h); products are cut into blocks fixed by their shape alone
 * (kern_gemm()). So results are bitwise identical for any thread count; they may differ between
 * instruction sets (fused multiply-adds where the processor has them) and OpenBLAS core types.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- embedding --- */

/* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] */
void gpt2_cpu_encoder_forward(float         *out,    // (B, T, C)
                              const int32_t *tokens, // (B, T), ids in [0, Vp)
                              const float   *wte,    // (Vp, C)
                              const float   *wpe,    // (T, C)
                              int B, int T, int C);
/* dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:] (b ascending). */
void gpt2_cpu_encoder_backward(float         *dwte,   // (Vp, C), accumulated
                               float         *dwpe,   // (T, C), accumulated
                               const float   *dout,   // (B, T, C)
                               const int32_t *tokens, // (B, T)
                               int B, int T, int C);

/* --- layernorm (eps 1e-5, biased variance) --- */

void gpt2_cpu_layernorm_forward(float       *out,    // (N, C)
                                float       *mean,   // (N)
                                float       *rstd,   // (N), 1 / sqrt(var + eps)
                                const float *inp,    // (N, C)
                                const float *weight, // (C)
                                const float *bias,   // (C)
                                int N, int C);
/* B: dinp += d out / d inp applied to dout. */
void gpt2_cpu_layernorm_backward_input(float       *dinp,   // (N, C), accumulated
                                       const float *dout,   // (N, C)
                                       const float *inp,    // (N, C)
                                       const float *weight, // (C)
                                       const float *mean,   // (N)
                                       const float *rstd,   // (N)
                                       int N, int C);
/* W: dweight += sum_n dout * xhat; dbias += sum_n dout (n ascending). */
void gpt2_cpu_layernorm_backward_weight(float       *dweight, // (C), accumulated
                                        float       *dbias,   // (C), accumulated
                                        const float *dout,    // (N, C)
                                        const float *inp,     // (N, C)
                                        const float *mean,    // (N)
                                        const float *rstd,    // (N)
                                        int N, int C);

/* --- matmul: out = inp @ weight^T + bias --- */

void gpt2_cpu_matmul_forward(float       *out,    // (N, OC)
                             const float *inp,    // (N, IC)
                             const float *weight, // (OC, IC)
                             const float *bias,   // (OC), nullable
                             int N, int IC, int OC);
/* B: dinp = dout @ weight (overwritten). */
void gpt2_cpu_matmul_backward_input(float       *dinp,   // (N, IC)
                                    const float *dout,   // (N, OC)
                                    const float *weight, // (OC, IC)
                                    int N, int IC, int OC);
/* W: dweight += dout^T @ inp; dbias += sum_n dout (n ascending) when non-NULL. */
void gpt2_cpu_matmul_backward_weight(float       *dweight, // (OC, IC), accumulated
                                     float       *dbias,   // (OC), accumulated, nullable
                                     const float *dout,    // (N, OC)
                                     const float *inp,     // (N, IC)
                                     int N, int IC, int OC);

/* --- causal multi-head self-attention (scale 1 / sqrt(C / NH)) --- */

/* qkv holds q, k, v as channel ranges [0, C), [C, 2C), [2C, 3C); head h uses channels
 * h*hs .. h*hs + hs - 1 of each (hs = C / NH). att receives the softmax probabilities, zero
 * above the diagonal. */
void gpt2_cpu_attention_forward(float       *out, // (B, T, C)
                                float       *att, // (B, NH, T, T)
                                const float *qkv, // (B, T, 3C)
                                int B, int T, int C, int NH);
/* B: dqkv = gradient of qkv (overwritten). Attention has no weights, so it has no W part. */
void gpt2_cpu_attention_backward(float       *dqkv, // (B, T, 3C)
                                 const float *dout, // (B, T, C)
                                 const float *qkv,  // (B, T, 3C)
                                 const float *att,  // (B, NH, T, T)
                                 int B, int T, int C, int NH);

/* --- GELU (tanh approximation) --- */

void gpt2_cpu_gelu_forward(float       *out, // (N)
                           const float *inp, // (N)
                           size_t       N);
/* dinp = gelu'(inp) * dout (overwritten; dinp may alias dout). */
void gpt2_cpu_gelu_backward(float       *dinp, // (N)
                            const float *inp,  // (N)
                            const float *dout, // (N)
                            size_t       N);

/* --- residual --- */

void gpt2_cpu_residual_forward(float       *out,  // (N)
                               const float *inp1, // (N)
                               const float *inp2, // (N)
                               size_t       N);
/* dinp1 += dout; dinp2 += dout. */
void gpt2_cpu_residual_backward(float       *dinp1, // (N), accumulated
                                float       *dinp2, // (N), accumulated
                                const float *dout,  // (N)
                                size_t       N);

/* --- softmax + cross-entropy over the padded vocabulary, fused with the LM head --- */

/* F: softmax over the first V columns of each row (columns V..Vp-1 get probability 0 and never
 * affect the loss), in place: @logits becomes the probabilities. Returns the mean over the N
 * rows of -log p[target] (accumulated in double, row order). @row_loss (N), nullable,
 * receives each row's loss. */
float gpt2_cpu_crossentropy_forward(float         *logits,   // (N, Vp) in: logits, out: probs
                                    float         *row_loss, // (N), nullable
                                    const int32_t *targets,  // (N), ids in [0, V)
                                    int N, int V, int Vp);

/* The backward of logits = inp @ weight^T followed by the loss, whose logits' gradient
 * dlogits = (probs - onehot(target)) * dloss (0 in padded columns) is never stored: the
 * products take dloss * probs and the one-hot part is subtracted row by row afterwards (rows in
 * order where a token repeats). @dloss is the gradient of each row's loss, e.g. 1 / N for the
 * mean. */
/* B: dinp = dlogits @ weight (overwritten). */
void gpt2_cpu_head_backward_input(float         *dinp,              // (N, C)
                                  const float   *probs,             // (N, Vp) from the forward
                                  const int32_t *targets,           // (N)
                                  float dloss, const float *weight, // (Vp, C)
                                  int N, int C, int V, int Vp);
/* W: dweight += dlogits^T @ inp. */
void gpt2_cpu_head_backward_weight(float         *dweight,        // (Vp, C), accumulated
                                   const float   *probs,          // (N, Vp)
                                   const int32_t *targets,        // (N)
                                   float dloss, const float *inp, // (N, C)
                                   int N, int C, int V, int Vp);

#ifdef __cplusplus
}
#endif
