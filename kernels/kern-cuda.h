/* SPDX-License-Identifier: MIT
 * kern-cuda.h: the shared pieces of the CUDA side of kernels/: the element types (KernDtype),
 * the per-stream context (KernCudaCtx: stream, cuBLASLt handle and workspace, a small
 * reduction scratch), the one row-major GEMM every CUDA matmul goes through (cuBLASLt, TF32
 * off in fp32), type conversion and deterministic reductions. Plain C API; functions enqueue
 * work on the context's stream, never allocate device memory (context creation aside) and
 * never synchronise unless they say so.
 */
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- element types --- */

/* Element type of the activations and compute weights of a run. Master weights, weight
 * gradients, LayerNorm statistics, losses and optimizer state are always fp32. */
typedef enum {
    KERN_DTYPE_F32,  /* fp32 storage, fp32 math, TF32 off: the correctness mode */
    KERN_DTYPE_BF16, /* bf16 storage (round to nearest even), fp32 math and accumulation */
    KERN_DTYPE_N
} KernDtype;

/* Bytes per element of @dt (4 or 2). */
size_t kern_dtype_size(KernDtype dt);
/* "fp32" / "bf16". (transfer none) */
const char *kern_dtype_name(KernDtype dt);

/* --- device query --- */

/* Number of CUDA devices visible to this process; 0 when there is no driver or no device. */
int kern_cuda_device_count(void);
/* The same count, and when it is 0 why: @why (may be NULL) is set to the CUDA runtime's error
 * text ("CUDA driver version is insufficient for CUDA runtime version", "no CUDA-capable
 * device is detected", ...) or, when the query succeeded with no device, "no CUDA device is
 * visible (CUDA_VISIBLE_DEVICES?)"; NULL when a device is there. (transfer none: static) */
int kern_cuda_device_query(const char **why);

/* --- allocation --- */

/* cudaMalloc of @bytes (at least 1) on the current device into *@ptr. Returns 0 with *@ptr
 * NULL on out-of-memory (the CUDA error cleared, so the caller can report it and go on), 1 on
 * success; aborts on any other CUDA failure. */
int kern_cuda_try_malloc(void **ptr, size_t bytes);

/* --- per-stream context --- */

typedef struct _KernCudaCtx KernCudaCtx;

/* Bytes of device memory one context holds (cuBLASLt workspace + reduction scratch), for
 * memory accounting before kern_cuda_ctx_new(). */
size_t kern_cuda_ctx_device_bytes(void);

/* Creates a context on the current device for work on @stream (borrowed: it must outlive
 * the context; 0 is the legacy default stream): a cuBLASLt handle, its workspace and a
 * reduction scratch. A context is used by one host thread at a time, and everything enqueued
 * with it runs in its stream's order (the workspace and scratch are reused call after call).
 * Returns NULL when the device memory cannot be allocated (nothing is left allocated, the CUDA
 * error is cleared); aborts on any other CUDA or cuBLASLt failure. Returns: (transfer full)
 * (nullable): free with kern_cuda_ctx_free(). */
KernCudaCtx *kern_cuda_ctx_new(cudaStream_t stream);
/* Synchronises the stream, then frees the context; accepts NULL. */
void kern_cuda_ctx_free(KernCudaCtx *ctx);
/* The stream the context's work goes to. */
cudaStream_t kern_cuda_ctx_stream(const KernCudaCtx *ctx);
/* Blocks until all work on the context's stream is done (aborts on a device error). */
void kern_cuda_ctx_sync(KernCudaCtx *ctx);
/* Products run through the context, and how many of them searched for an algorithm (a cache
 * miss: a shape, layout or alignment not met among the recent ones). */
void kern_cuda_ctx_gemm_counts(const KernCudaCtx *ctx, uint64_t *n_gemm, uint64_t *n_heuristics);

/* --- GEMM (cuBLASLt) --- */

/* One (optionally batched) row-major product C = alpha * op(A) @ op(B) + beta * C_in, with
 * op(X) = X or X^T, shapes op(A) (M, K), op(B) (K, N), C (M, N):
 *   A is stored (M, K) when !trans_a, else (K, M), rows lda elements apart; B likewise
 *   (K, N) or (N, K) with ldb; C and C_in are (M, N) with ldc.
 * A and B have element type ab; C and C_in have cd (fp32 or the same as ab). Math in fp32
 * (cuBLASLt CUBLAS_COMPUTE_32F; with fp32 operands this is plain fp32, TF32 off).
 * c_in may equal c (in place) or be NULL (beta must then be 0). Epilogues (batch 1 only):
 * bias (N) of type cd is added to every row; with gelu_pre non-NULL the output C receives
 * gelu(tanh approximation)(product + bias) and gelu_pre (M, N, ldc, type cd) the value before
 * GELU. Batches: batch >= 1 products, matrix i at A + i * stride_a (elements) etc. */
typedef struct {
    int         M, N, K;
    int         trans_a, trans_b; /* 0 or 1 */
    KernDtype   ab, cd;           /* element types of A and B, and of C and C_in */
    const void *a;
    int64_t     lda;
    const void *b;
    int64_t     ldb;
    void       *c;
    const void *c_in; /* nullable */
    int64_t     ldc;
    float       alpha, beta;
    int         batch;                        /* >= 1 */
    int64_t     stride_a, stride_b, stride_c; /* elements between batch matrices */
    const void *bias;                         /* nullable: (N) of type cd */
    void       *gelu_pre;                     /* nullable: (M, N) of type cd */
} KernCudaGemm;

/* A product of dense matrices: lda, ldb, ldc the row lengths of A, B, C as stored (K or M,
 * N or K, N), batch 1, alpha 1, beta 0, no C_in and no epilogue. Callers adjust the other
 * fields (alpha, beta, c_in, batch and strides, bias, gelu_pre) before kern_cuda_gemm(). */
KernCudaGemm kern_cuda_gemm_dense(int M, int N, int K, int trans_a, const void *a, int trans_b,
                                  const void *b, void *c, KernDtype ab, KernDtype cd);

/* Enqueues the product on ctx's stream. Algorithms are chosen by cuBLASLt's heuristic for the
 * shape and the pointers' alignment up to 16 bytes (so 16-byte aligned operands get the same
 * algorithm wherever they sit) and cached per context; for a fixed shape, alignment and device
 * the choice, and so the result, is deterministic. Aborts (with the shape) when cuBLASLt
 * offers no algorithm, or on any cuBLASLt error. */
void kern_cuda_gemm(const KernCudaGemm *gemm, KernCudaCtx *ctx);

/* --- conversion, fill, reductions --- */

/* dst[i] = src[i] converted (fp32 -> bf16 rounds to nearest even) for i < n. dst and src
 * must not overlap unless identical with the same type (then nothing is done). */
void kern_cuda_convert(void *dst, KernDtype dst_dt, const void *src, KernDtype src_dt, size_t n,
                       cudaStream_t stream);
/* x[i] = value (converted to dt) for i < n. */
void kern_cuda_fill(void *x, KernDtype dt, float value, size_t n, cudaStream_t stream);
/* x[i] = lo + (hi - lo) * u_i (converted to dt), u_i in [0, 1) from a counter-based hash of
 * (@seed, i): the same values on every run and device, for benchmarks' inputs. */
void kern_cuda_fill_uniform(void *x, KernDtype dt, float lo, float hi, size_t n, uint64_t seed,
                            cudaStream_t stream);

/* *sq_norm (one device double) += sum of x[i]^2 over i < n, in double, in a fixed order that
 * depends only on n: deterministic run to run. Uses the context's reduction scratch. */
void kern_cuda_sq_norm_acc(double *sq_norm, const float *x, size_t n, KernCudaCtx *ctx);

/* The mean of @d replicas' arrays, each element summed in replica order then divided by @d:
 *     out[i] = ((in[0][i] + in[1][i]) + ... + in[d-1][i]) / d
 * with fp32 round-to-nearest adds (never fused) and an IEEE division: the same bits as the
 * same loop in C on the host (the data-parallel reduction's rule, exec/pipeline/exec-reduce.h).
 *   @out (n) fp32; may be any of the rows of @in, since each thread reads its column first
 *   @in  (d, n) fp32: replica r's array at in + r * n
 * d >= 1. */
void kern_cuda_replica_mean(float *out, const float *in, int d, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
