/* SPDX-License-Identifier: MIT
 * kern-cuda.cu: the shared CUDA pieces of kern-cuda.h: element types, the device query, the
 * per-stream context, the row-major cuBLASLt GEMM with its per-context algorithm cache,
 * conversion and fill kernels, and the deterministic reductions (squared norm, column sums).
 */
#include <stdio.h>
#include <string.h>

#include "kern-cuda-internal.cuh"

/* --- element types, device query --- */

size_t kern_dtype_size(KernDtype dt) {
    KERN_ASSERT(dt == KERN_DTYPE_F32 || dt == KERN_DTYPE_BF16);
    return dt == KERN_DTYPE_F32 ? 4 : 2;
}

const char *kern_dtype_name(KernDtype dt) {
    KERN_ASSERT(dt == KERN_DTYPE_F32 || dt == KERN_DTYPE_BF16);
    return dt == KERN_DTYPE_F32 ? "fp32" : "bf16";
}

int kern_cuda_device_query(const char **why) {
    int         n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    const char *reason = NULL;
    if (err != cudaSuccess) {
        reason = cudaGetErrorString(err);
        cudaGetLastError(); /* clear the sticky "no driver / no device" error */
        n = 0;
    } else if (n == 0) {
        reason = "no CUDA device is visible (CUDA_VISIBLE_DEVICES?)";
    }
    if (why)
        *why = reason;
    return n;
}

int kern_cuda_device_count(void) {
    return kern_cuda_device_query(NULL);
}

int kern_cuda_try_malloc(void **ptr, size_t bytes) {
    cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *ptr = NULL;
        return 0;
    }
    KERN_CUDA_CHECK(err);
    return 1;
}

/* --- context --- */

size_t kern_cuda_ctx_device_bytes(void) {
    return KERN_CUDA_WORKSPACE_BYTES + KERN_CUDA_SCRATCH_FLOATS * sizeof(float) +
           KERN_CUDA_N_SCALARS * sizeof(double);
}

/* cudaMalloc that reports an out-of-memory failure to the caller (returns 0, error cleared)
 * and aborts on any other error. */
static int ctx_malloc(void **ptr, size_t bytes) {
    cudaError_t err = cudaMalloc(ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *ptr = NULL;
        return 0;
    }
    KERN_CUDA_CHECK(err);
    return 1;
}

KernCudaCtx *kern_cuda_ctx_new(cudaStream_t stream) {
    KernCudaCtx *ctx = (KernCudaCtx *)calloc(1, sizeof *ctx);
    KERN_ASSERT(ctx);
    ctx->stream = stream;
    void *ws = NULL, *scratch = NULL, *scalars = NULL;
    if (!ctx_malloc(&ws, KERN_CUDA_WORKSPACE_BYTES) ||
        !ctx_malloc(&scratch, KERN_CUDA_SCRATCH_FLOATS * sizeof(float)) ||
        !ctx_malloc(&scalars, KERN_CUDA_N_SCALARS * sizeof(double))) {
        KERN_CUDA_CHECK(cudaFree(ws));
        KERN_CUDA_CHECK(cudaFree(scratch));
        KERN_CUDA_CHECK(cudaFree(scalars));
        free(ctx);
        return NULL;
    }
    ctx->workspace = ws;
    ctx->scratch = (float *)scratch;
    ctx->scalars = (double *)scalars;
    KERN_CUBLAS_CHECK(cublasLtCreate(&ctx->lt));
    return ctx;
}

static void gemm_entry_release(KernGemmCacheEntry *e) {
    KERN_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(e->la));
    KERN_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(e->lb));
    KERN_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(e->lc));
    KERN_CUBLAS_CHECK(cublasLtMatmulDescDestroy(e->desc));
}

void kern_cuda_ctx_free(KernCudaCtx *ctx) {
    if (!ctx)
        return;
    KERN_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    for (int i = 0; i < ctx->n_cache; i++)
        gemm_entry_release(&ctx->cache[i]);
    KERN_CUBLAS_CHECK(cublasLtDestroy(ctx->lt));
    KERN_CUDA_CHECK(cudaFree(ctx->workspace));
    KERN_CUDA_CHECK(cudaFree(ctx->scratch));
    KERN_CUDA_CHECK(cudaFree(ctx->scalars));
    free(ctx);
}

cudaStream_t kern_cuda_ctx_stream(const KernCudaCtx *ctx) {
    return ctx->stream;
}

void kern_cuda_ctx_sync(KernCudaCtx *ctx) {
    KERN_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

void kern_cuda_ctx_gemm_counts(const KernCudaCtx *ctx, uint64_t *n_gemm, uint64_t *n_heuristics) {
    if (n_gemm)
        *n_gemm = ctx->n_gemm;
    if (n_heuristics)
        *n_heuristics = ctx->n_heuristics;
}

/* --- GEMM --- */

/* Largest power of two <= 16 dividing the address and every byte step @a and @b (row and
 * batch strides), i.e. the alignment every matrix and row of the operand keeps. Capped at 16
 * bytes, the widest access cuBLASLt's kernels need: a tensor's place in its arena (256 bytes
 * apart in one split of the model, 128 in another) then never changes the algorithm, so any
 * split computes bitwise the same products. */
static uint32_t gemm_align(const void *p, int64_t step_a_bytes, int64_t step_b_bytes) {
    uint64_t v = (uint64_t)(uintptr_t)p | (uint64_t)step_a_bytes | (uint64_t)step_b_bytes;
    uint32_t a = 16;
    while (a > 1 && (v % a) != 0)
        a >>= 1;
    return a;
}

static int gemm_key_eq(const KernGemmKey *x, const KernGemmKey *y) {
    return memcmp(x, y, sizeof *x) == 0;
}

static void gemm_pref_u32(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t a,
                          uint32_t v) {
    KERN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, a, &v, sizeof v));
}

/* A row-major (rows, cols, ld) matrix is the column-major (cols, rows, ld) matrix. */
static cublasLtMatrixLayout_t gemm_layout(KernDtype dt, int64_t rm_rows, int64_t rm_cols,
                                          int64_t ld, int batch, int64_t stride) {
    cublasLtMatrixLayout_t l;
    KERN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, kern_cuda_data_type(dt), (uint64_t)rm_cols,
                                                 (uint64_t)rm_rows, ld));
    if (batch > 1) {
        int32_t count = batch;
        KERN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                           &count, sizeof count));
        KERN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return l;
}

/* A cache entry for @key: a free one, else the least recently used one (its descriptor and
 * layouts released); its descriptor, layouts and algorithm built for @g. Aborts when cuBLASLt
 * has no algorithm. */
static KernGemmCacheEntry *gemm_entry_new(KernCudaCtx *ctx, const KernGemmKey *key,
                                          const KernCudaGemm *g, cublasLtEpilogue_t epi) {
    KernGemmCacheEntry *e;
    if (ctx->n_cache < KERN_CUDA_GEMM_CACHE) {
        e = &ctx->cache[ctx->n_cache++];
    } else {
        e = &ctx->cache[0];
        for (int i = 1; i < ctx->n_cache; i++)
            if (ctx->cache[i].last_use < e->last_use)
                e = &ctx->cache[i];
        gemm_entry_release(e);
    }
    memset(e, 0, sizeof *e);
    e->key = *key;

    KERN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t op_lt_a = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_lt_b = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a,
                                                     sizeof op_lt_a));
    KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b,
                                                     sizeof op_lt_b));
    KERN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (g->bias) {
        KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                         &g->bias, sizeof g->bias));
    }
    if (g->gelu_pre) {
        int64_t aux_ld = g->ldc;
        KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->gelu_pre, sizeof g->gelu_pre));
        KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    }
    int64_t sa = key->stride_a, sb = key->stride_b, sc = key->stride_c;
    /* cuBLASLt A = our B: stored (K, N) row-major when !trans_b, else (N, K) */
    e->la = g->trans_b ? gemm_layout(g->ab, g->N, g->K, g->ldb, g->batch, sb)
                       : gemm_layout(g->ab, g->K, g->N, g->ldb, g->batch, sb);
    /* cuBLASLt B = our A: stored (M, K) row-major when !trans_a, else (K, M) */
    e->lb = g->trans_a ? gemm_layout(g->ab, g->K, g->M, g->lda, g->batch, sa)
                       : gemm_layout(g->ab, g->M, g->K, g->lda, g->batch, sa);
    e->lc = gemm_layout(g->cd, g->M, g->N, g->ldc, g->batch, sc);

    cublasLtMatmulPreference_t pref;
    KERN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = KERN_CUDA_WORKSPACE_BYTES;
    KERN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    gemm_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key->align_b);
    gemm_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key->align_a);
    gemm_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key->align_c);
    gemm_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key->align_c);
    cublasLtMatmulHeuristicResult_t heur;
    int                             n_found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, e->desc, e->la, e->lb, e->lc, e->lc,
                                                       pref, 1, &heur, &n_found);
    KERN_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    ctx->n_heuristics++;
    if (st != CUBLAS_STATUS_SUCCESS || n_found < 1 || heur.state != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr,
                "kern_cuda_gemm: cuBLASLt has no algorithm (%s) for M %d N %d K %d trans %d/%d "
                "%s x %s -> %s, lda %lld ldb %lld ldc %lld, batch %d, epilogue %d, alignment "
                "%u/%u/%u\n",
                cublasLtGetStatusString(st), g->M, g->N, g->K, g->trans_a, g->trans_b,
                kern_dtype_name(g->ab), kern_dtype_name(g->ab), kern_dtype_name(g->cd),
                (long long)g->lda, (long long)g->ldb, (long long)g->ldc, g->batch, (int)epi,
                key->align_a, key->align_b, key->align_c);
        abort();
    }
    e->algo = heur.algo;
    return e;
}

KernCudaGemm kern_cuda_gemm_dense(int M, int N, int K, int trans_a, const void *a, int trans_b,
                                  const void *b, void *c, KernDtype ab, KernDtype cd) {
    KernCudaGemm g;
    memset(&g, 0, sizeof g);
    g.M = M;
    g.N = N;
    g.K = K;
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.ab = ab;
    g.cd = cd;
    g.a = a;
    g.lda = trans_a ? M : K;
    g.b = b;
    g.ldb = trans_b ? K : N;
    g.c = c;
    g.ldc = N;
    g.alpha = 1.0f;
    g.batch = 1;
    return g;
}

void kern_cuda_gemm(const KernCudaGemm *g, KernCudaCtx *ctx) {
    KERN_ASSERT(g->M >= 1 && g->N >= 1 && g->K >= 1 && g->batch >= 1);
    KERN_ASSERT(g->ab == KERN_DTYPE_F32 || g->ab == KERN_DTYPE_BF16);
    KERN_ASSERT(g->cd == KERN_DTYPE_F32 || g->cd == g->ab);
    KERN_ASSERT(g->a && g->b && g->c);
    KERN_ASSERT(g->c_in || g->beta == 0.0f);
    KERN_ASSERT(g->lda >= (g->trans_a ? g->M : g->K));
    KERN_ASSERT(g->ldb >= (g->trans_b ? g->K : g->N));
    KERN_ASSERT(g->ldc >= g->N);
    KERN_ASSERT(g->batch == 1 || (!g->bias && !g->gelu_pre));
    /* cuBLASLt: the GELU input matrix's leading dimension must be a multiple of 8 */
    KERN_ASSERT(!g->gelu_pre || g->ldc % 8 == 0);

    /* Row-major C (M, N) = op(A) op(B) is column-major C^T (N, M) = op(B)^T op(A)^T: cuBLASLt's
     * A is our B and its B our A, each with the same transpose flag (see kern-cuda.h). */
    size_t             esz_ab = kern_dtype_size(g->ab), esz_cd = kern_dtype_size(g->cd);
    int64_t            sa = g->batch > 1 ? g->stride_a : 0, sb = g->batch > 1 ? g->stride_b : 0;
    int64_t            sc = g->batch > 1 ? g->stride_c : 0;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (g->gelu_pre)
        epi = g->bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    else if (g->bias)
        epi = CUBLASLT_EPILOGUE_BIAS;
    const void *c_in = g->c_in ? g->c_in : g->c;

    KernGemmKey key;
    memset(&key, 0, sizeof key); /* padding bytes take part in the memcmp */
    key.M = g->M;
    key.N = g->N;
    key.K = g->K;
    key.trans_a = g->trans_a != 0;
    key.trans_b = g->trans_b != 0;
    key.ab = (int)g->ab;
    key.cd = (int)g->cd;
    key.batch = g->batch;
    key.epilogue = (int)epi;
    key.in_place = c_in == g->c;
    key.lda = g->lda;
    key.ldb = g->ldb;
    key.ldc = g->ldc;
    key.stride_a = sa;
    key.stride_b = sb;
    key.stride_c = sc;
    key.align_a = gemm_align(g->a, g->lda * (int64_t)esz_ab, sa * (int64_t)esz_ab);
    key.align_b = gemm_align(g->b, g->ldb * (int64_t)esz_ab, sb * (int64_t)esz_ab);
    key.align_c = gemm_align(g->c, g->ldc * (int64_t)esz_cd, sc * (int64_t)esz_cd);
    uint32_t align_cin = gemm_align(c_in, g->ldc * (int64_t)esz_cd, sc * (int64_t)esz_cd);
    if (align_cin < key.align_c)
        key.align_c = align_cin;
    if (g->bias) {
        uint32_t ab = gemm_align(g->bias, 0, 0);
        key.align_c = ab < key.align_c ? ab : key.align_c;
    }
    if (g->gelu_pre) {
        uint32_t ag = gemm_align(g->gelu_pre, g->ldc * (int64_t)esz_cd, 0);
        key.align_c = ag < key.align_c ? ag : key.align_c;
    }

    ctx->n_gemm++;
    KernGemmCacheEntry *e = NULL;
    for (int i = 0; i < ctx->n_cache; i++) {
        if (gemm_key_eq(&ctx->cache[i].key, &key)) {
            e = &ctx->cache[i];
            break;
        }
    }
    if (!e)
        e = gemm_entry_new(ctx, &key, g, epi);
    e->last_use = ctx->n_gemm;
    /* the per-call pointers; cuBLASLt reads the descriptor when the product is enqueued */
    if (g->bias) {
        KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                         &g->bias, sizeof g->bias));
    }
    if (g->gelu_pre) {
        KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->gelu_pre, sizeof g->gelu_pre));
    }
    KERN_CUBLAS_CHECK(cublasLtMatmul(ctx->lt, e->desc, &g->alpha, g->b, e->la, g->a, e->lb,
                                     &g->beta, c_in, e->lc, g->c, e->lc, &e->algo, ctx->workspace,
                                     KERN_CUDA_WORKSPACE_BYTES, ctx->stream));
}

/* --- conversion and fill --- */

template <typename TD, typename TS>
__global__ void convert_kernel(TD *dst, const TS *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        kern_st(dst, i, kern_ld(src, i));
}

void kern_cuda_convert(void *dst, KernDtype dst_dt, const void *src, KernDtype src_dt, size_t n,
                       cudaStream_t stream) {
    if (n == 0 || (dst == src && dst_dt == src_dt))
        return;
    if (dst_dt == src_dt) {
        KERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * kern_dtype_size(dst_dt),
                                        cudaMemcpyDeviceToDevice, stream));
        return;
    }
    unsigned grid = kern_cuda_grid(n, 256);
    KERN_DT_DISPATCH(dst_dt, TD, KERN_DT_DISPATCH(src_dt, TS, {
                         convert_kernel<TD, TS>
                             <<<grid, 256, 0, stream>>>((TD *)dst, (const TS *)src, n);
                         KERN_CUDA_LAUNCH_CHECK();
                     }));
}

template <typename T> __global__ void fill_kernel(T *x, float value, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        kern_st(x, i, value);
}

void kern_cuda_fill(void *x, KernDtype dt, float value, size_t n, cudaStream_t stream) {
    if (n == 0)
        return;
    unsigned grid = kern_cuda_grid(n, 256);
    KERN_DT_DISPATCH(dt, T, {
        fill_kernel<T><<<grid, 256, 0, stream>>>((T *)x, value, n);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

/* splitmix64 finaliser of seed + i: a counter-based generator, 24 bits -> [0, 1) */
template <typename T>
__global__ void fill_uniform_kernel(T *x, float lo, float hi, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float u = (float)(z >> 40) / 16777216.0f;
        kern_st(x, i, lo + (hi - lo) * u);
    }
}

void kern_cuda_fill_uniform(void *x, KernDtype dt, float lo, float hi, size_t n, uint64_t seed,
                            cudaStream_t stream) {
    if (n == 0)
        return;
    unsigned grid = kern_cuda_grid(n, 256);
    KERN_DT_DISPATCH(dt, T, {
        fill_uniform_kernel<T><<<grid, 256, 0, stream>>>((T *)x, lo, hi, n, seed);
        KERN_CUDA_LAUNCH_CHECK();
    });
}

/* --- squared norm --- */

#define SQ_THREADS    256
#define SQ_MAX_BLOCKS 1024

/* Tree sum of one double per thread over a block of SQ_THREADS (fixed order); the result is
 * valid in thread 0. */
static __device__ double block_sum_double(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = SQ_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    return sh[0];
}

__global__ void sq_norm_partial_kernel(double *partial, const float *x, size_t n) {
    __shared__ double sh[SQ_THREADS];
    double            acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)SQ_THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * SQ_THREADS) {
        double v = (double)x[i];
        acc += v * v;
    }
    double total = block_sum_double(acc, sh);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = total;
}

__global__ void sq_norm_finish_kernel(double *out, const double *partial, int n_partial) {
    __shared__ double sh[SQ_THREADS];
    double            acc = 0.0;
    for (int i = threadIdx.x; i < n_partial; i += SQ_THREADS)
        acc += partial[i];
    double total = block_sum_double(acc, sh);
    if (threadIdx.x == 0)
        *out += total;
}

void kern_cuda_sq_norm_acc(double *sq_norm, const float *x, size_t n, KernCudaCtx *ctx) {
    if (n == 0)
        return;
    size_t blocks = (n + SQ_THREADS * 8 - 1) / (SQ_THREADS * 8);
    if (blocks > SQ_MAX_BLOCKS)
        blocks = SQ_MAX_BLOCKS;
    /* the scratch is 256-byte aligned floats: room for SQ_MAX_BLOCKS doubles */
    double *partial = (double *)ctx->scratch;
    sq_norm_partial_kernel<<<(unsigned)blocks, SQ_THREADS, 0, ctx->stream>>>(partial, x, n);
    KERN_CUDA_LAUNCH_CHECK();
    sq_norm_finish_kernel<<<1, SQ_THREADS, 0, ctx->stream>>>(sq_norm, partial, (int)blocks);
    KERN_CUDA_LAUNCH_CHECK();
}

/* --- the mean over replicas --- */

#define REPLICA_MEAN_THREADS 256

__global__ void replica_mean_kernel(float *out, const float *in, int d, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float sum = in[i];
        for (int r = 1; r < d; r++)
            sum = __fadd_rn(sum, in[(size_t)r * n + i]);
        out[i] = __fdiv_rn(sum, (float)d);
    }
}

void kern_cuda_replica_mean(float *out, const float *in, int d, size_t n, cudaStream_t stream) {
    KERN_ASSERT(d >= 1);
    if (n == 0)
        return;
    size_t blocks = (n + REPLICA_MEAN_THREADS - 1) / REPLICA_MEAN_THREADS;
    if (blocks > 65535)
        blocks = 65535; /* the grid-stride loop covers the rest */
    replica_mean_kernel<<<(unsigned)blocks, REPLICA_MEAN_THREADS, 0, stream>>>(out, in, d, n);
    KERN_CUDA_LAUNCH_CHECK();
}

/* --- column sums --- */

/* Rows per chunk at least this many, so that blocks have work; chunks at most this many. */
#define COLSUM_MIN_ROWS   32
#define COLSUM_MAX_CHUNKS 512

int kern_cuda_colsum_chunks(int n_rows, int n_cols, int n_quant) {
    KERN_ASSERT(n_rows >= 1 && n_cols >= 1 && n_quant >= 1);
    size_t per_chunk = (size_t)n_cols * (size_t)n_quant;
    KERN_ASSERT(per_chunk <= KERN_CUDA_SCRATCH_FLOATS);
    size_t fit = KERN_CUDA_SCRATCH_FLOATS / per_chunk;
    size_t chunks = ((size_t)n_rows + COLSUM_MIN_ROWS - 1) / COLSUM_MIN_ROWS;
    if (chunks > COLSUM_MAX_CHUNKS)
        chunks = COLSUM_MAX_CHUNKS;
    if (chunks > fit)
        chunks = fit;
    return chunks ? (int)chunks : 1;
}

/* The finish: a block of COLSUM_FIN_COLS x COLSUM_FIN_LANES threads per COLSUM_FIN_COLS
 * columns. Lane y sums chunks y, y + LANES, ... of its column in order (coalesced across the
 * columns), then the lanes fold by a fixed tree in shared memory: the same order, so the same
 * bits, every run, with 16x fewer serial adds than one thread per column and 16x more blocks
 * (48 instead of 3 for C = 768). */
#define COLSUM_FIN_COLS  32
#define COLSUM_FIN_LANES 16

/* blockIdx.y picks the quantity: dst0 from the first (n_chunks, n_cols) partials, dst1 from
 * the next. */
__global__ void colsum_finish_kernel(float *dst0, float *dst1, const float *partial, int n_chunks,
                                     int n_cols) {
    __shared__ float sh[COLSUM_FIN_LANES][COLSUM_FIN_COLS + 1];
    int              cx = threadIdx.x, ly = threadIdx.y;
    int              c = blockIdx.x * COLSUM_FIN_COLS + cx;
    float           *dst = blockIdx.y ? dst1 : dst0;
    const float     *part = partial + (size_t)blockIdx.y * n_chunks * n_cols;
    float            acc = 0.0f;
    if (c < n_cols) {
        for (int r = ly; r < n_chunks; r += COLSUM_FIN_LANES)
            acc += part[(size_t)r * n_cols + c];
    }
    sh[ly][cx] = acc;
    __syncthreads();
    for (int k = COLSUM_FIN_LANES / 2; k > 0; k >>= 1) {
        if (ly < k)
            sh[ly][cx] += sh[ly + k][cx];
        __syncthreads();
    }
    if (ly == 0 && c < n_cols)
        dst[c] += sh[0][cx];
}

static void colsum_finish_launch(float *dst0, float *dst1, const float *partial, int n_chunks,
                                 int n_cols, cudaStream_t stream) {
    dim3 grid((unsigned)((n_cols + COLSUM_FIN_COLS - 1) / COLSUM_FIN_COLS), dst1 ? 2u : 1u);
    dim3 block(COLSUM_FIN_COLS, COLSUM_FIN_LANES);
    colsum_finish_kernel<<<grid, block, 0, stream>>>(dst0, dst1, partial, n_chunks, n_cols);
    KERN_CUDA_LAUNCH_CHECK();
}

void kern_cuda_colsum_finish(float *dst, const float *partial, int n_chunks, int n_cols,
                             cudaStream_t stream) {
    colsum_finish_launch(dst, NULL, partial, n_chunks, n_cols, stream);
}

void kern_cuda_colsum_finish2(float *dst0, float *dst1, const float *partial, int n_chunks,
                              int n_cols, cudaStream_t stream) {
    colsum_finish_launch(dst0, dst1, partial, n_chunks, n_cols, stream);
}
