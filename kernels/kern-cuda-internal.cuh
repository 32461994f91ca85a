/* SPDX-License-Identifier: MIT
 * kern-cuda-internal.cuh: what the .cu files of kernels/ share and the public C headers do
 * not show: the KernCudaCtx struct, fp32/bf16 load/store helpers, the dtype dispatch, launch
 * checking and grid sizing, and the deterministic column-sum helpers (bias and LayerNorm
 * weight gradients). C++ (nvcc) only.
 */
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kern-check.h"
#include "kern-cuda.h"

/* --- context --- */

/* Bytes of the cuBLASLt workspace (32 MiB, the size cuBLAS recommends for Hopper). */
#define KERN_CUDA_WORKSPACE_BYTES ((size_t)32 << 20)
/* Floats of reduction scratch per context (16 MiB): column-sum and norm partials. */
#define KERN_CUDA_SCRATCH_FLOATS ((size_t)4 << 20)
/* Device doubles of per-context scalars (Newton-Schulz norm). */
#define KERN_CUDA_N_SCALARS 8
/* GEMM cache entries per context (a GPT-2 slice uses a few dozen shapes; past this many the
 * least recently used entry is replaced). */
#define KERN_CUDA_GEMM_CACHE 128

/* Everything that selects a cuBLASLt algorithm for one product. */
typedef struct {
    int      M, N, K, trans_a, trans_b, ab, cd, batch, epilogue, in_place;
    int64_t  lda, ldb, ldc, stride_a, stride_b, stride_c;
    uint32_t align_a, align_b, align_c;
} KernGemmKey;

/* One cached product: its algorithm, and the descriptor and layouts built once for its key
 * (per call only the bias and GELU-input pointers are set on the descriptor). */
typedef struct {
    KernGemmKey            key;
    cublasLtMatmulAlgo_t   algo;
    cublasLtMatmulDesc_t   desc;
    cublasLtMatrixLayout_t la, lb, lc;
    uint64_t               last_use;
} KernGemmCacheEntry;

struct _KernCudaCtx {
    cudaStream_t       stream;
    cublasLtHandle_t   lt;
    void              *workspace; /* (KERN_CUDA_WORKSPACE_BYTES) */
    float             *scratch;   /* (KERN_CUDA_SCRATCH_FLOATS) reduction partials */
    double            *scalars;   /* (KERN_CUDA_N_SCALARS) */
    int                n_cache;
    uint64_t           n_gemm;       /* products run (the cache's clock) */
    uint64_t           n_heuristics; /* algorithm searches (cache misses) */
    KernGemmCacheEntry cache[KERN_CUDA_GEMM_CACHE];
};

/* --- launches --- */

/* Checks the launch just made (configuration errors show up here, execution errors at the
 * next synchronising call). */
#define KERN_CUDA_LAUNCH_CHECK() KERN_CUDA_CHECK(cudaGetLastError())

/* Blocks for a grid-stride loop over @n items with @threads threads per block: enough to fill
 * the device, never 0 (callers return before launching when n is 0). */
static inline unsigned kern_cuda_grid(size_t n, unsigned threads) {
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 65536)
        blocks = 65536;
    return blocks ? (unsigned)blocks : 1u;
}

/* --- fp32 / bf16 element access (math is always fp32) --- */

static __device__ __forceinline__ float kern_ld(const float *p, size_t i) {
    return p[i];
}
static __device__ __forceinline__ float kern_ld(const __nv_bfloat16 *p, size_t i) {
    return __bfloat162float(p[i]);
}
static __device__ __forceinline__ void kern_st(float *p, size_t i, float v) {
    p[i] = v;
}
static __device__ __forceinline__ void kern_st(__nv_bfloat16 *p, size_t i, float v) {
    p[i] = __float2bfloat16_rn(v);
}

/* Runs the statements with T = float or __nv_bfloat16 according to @dt. */
#define KERN_DT_DISPATCH(dt, T, ...)                                                               \
    do {                                                                                           \
        switch (dt) {                                                                              \
        case KERN_DTYPE_F32: {                                                                     \
            typedef float T;                                                                       \
            __VA_ARGS__;                                                                           \
            break;                                                                                 \
        }                                                                                          \
        case KERN_DTYPE_BF16: {                                                                    \
            typedef __nv_bfloat16 T;                                                               \
            __VA_ARGS__;                                                                           \
            break;                                                                                 \
        }                                                                                          \
        default:                                                                                   \
            KERN_ASSERT(!"unknown KernDtype");                                                     \
        }                                                                                          \
    } while (0)

static inline cudaDataType_t kern_cuda_data_type(KernDtype dt) {
    KERN_ASSERT(dt == KERN_DTYPE_F32 || dt == KERN_DTYPE_BF16);
    return dt == KERN_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16BF;
}

/* --- deterministic column sums ---
 * A column sum over N rows runs in two launches: each block sums a fixed chunk of rows for
 * 32 columns (fixed order inside the block) into a partial row of the context's scratch,
 * then 16 lanes per column add the partial rows (lane y: rows y, y + 16, ... in order) and
 * fold by a fixed tree onto the destination. The chunk
 * count depends only on (N, columns, quantities), so results are bitwise reproducible. */

/* Number of row chunks for @n_rows rows, @n_cols columns and @n_quant quantities summed at
 * once, fitting the context scratch (>= 1; aborts if even one chunk does not fit). */
int kern_cuda_colsum_chunks(int n_rows, int n_cols, int n_quant);
/* dst[c] += sum_r partial[r * n_cols + c] over r < n_chunks (r ascending), c < n_cols. */
void kern_cuda_colsum_finish(float *dst, const float *partial, int n_chunks, int n_cols,
                             cudaStream_t stream);
/* Both at once, in one launch: dst0 from partial (n_chunks rows), dst1 from the n_chunks
 * rows after them (two quantities summed together, as LayerNorm's weight and bias). */
void kern_cuda_colsum_finish2(float *dst0, float *dst1, const float *partial, int n_chunks,
                              int n_cols, cudaStream_t stream);
/* dst[c] += sum_n x[n, c] over n < N (x (N, C) of dt; dst (C) fp32): the bias gradient. */
void kern_cuda_colsum_rows(float *dst, const void *x, int N, int C, KernDtype dt, KernCudaCtx *ctx);
