/* SPDX-License-Identifier: MIT
 * test-kernels-cuda.c: every gpt2_cuda_* kernel and the shared CUDA pieces (GEMM variants,
 * conversion, squared norm, the mean over replicas) against the CPU kernels on seeded random
 * inputs, in fp32 and bf16 (each test loops over both). Outputs start NaN-poisoned; accumulated
 * outputs start random and are compared by their increments, so a kernel that writes nothing
 * always fails.
 * Tolerances are relative to the reference's largest magnitude:
 *   fp32: forward outputs 1e-5, gradients 1e-4 (TF32 off; only the summation order differs).
 *   bf16 (the CPU reference runs in fp32 on the same bf16-rounded inputs):
 *     an output stored in bf16 once: 4e-3 (round to nearest: at most 2^-9 = 1.95e-3 of the
 *       value, doubled for margin);
 *     stored bf16 values that are read-modify-written (accumulators) or pass through two
 *       roundings (GELU epilogue, attention output, its backward): 1e-2 to 2e-2;
 *     fp32 results computed in fp32 from the bf16 inputs (weight gradients, LayerNorm
 *       statistics, row losses): the fp32 bounds, since no bf16 rounding is involved.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-cpu.h"
#include "gpt2-cuda.h"
#include "kern-check.h"
#include "kern-cuda.h"
#include "kern-util.h"
#include "optim-cpu.h"
#include "test-cuda-util.h"

#define F32  KERN_DTYPE_F32
#define BF16 KERN_DTYPE_BF16

/* tolerance for @dt: @f32 in fp32, @bf16 in bf16 */
static double tol(KernDtype dt, double f32, double bf16) {
    return dt == F32 ? f32 : bf16;
}

static cudaStream_t stream(void) {
    return kern_cuda_ctx_stream(tcu_ctx());
}

/* n random floats (scale * N(0,1)), rounded to what @dt holds; (transfer full) */
static float *hrand(size_t n, float scale, uint64_t seed, KernDtype dt) {
    float *x = kern_xmalloc(n * sizeof(float));
    tcu_randn(x, n, scale, seed);
    tcu_round(x, n, dt);
    return x;
}

static float *hcopy(const float *x, size_t n) {
    float *y = kern_xmalloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* y[i] = a[i] - b[i] (increments of accumulated outputs); (transfer full) */
static float *hdiff(const float *a, const float *b, size_t n) {
    float *y = kern_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] - b[i];
    return y;
}

/* Asserts that the increments got - init and ref - init agree within @tolerance. */
static void assert_increment(const float *got, const float *ref, const float *init, size_t n,
                             double tolerance, const char *what) {
    float *dg = hdiff(got, init, n), *dr = hdiff(ref, init, n);
    tcu_assert_close(dg, dr, n, tolerance, what);
    free(dg);
    free(dr);
}

static void rand_ids(int32_t *ids, int n, int range, uint64_t seed) {
    uint64_t rng = kern_rng_seed(seed);
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(kern_rng_u32(&rng) % (uint32_t)range);
}

/* --- shared pieces --- */

/* fp32 -> bf16 rounds to nearest even (device conversion, known values); fill writes all. */
START_TEST(test_convert_rne) {
    const float in[6] = {1.0f + 0x1p-8f,            /* halfway: ties to even, down to 1 */
                         1.0f + 3 * 0x1p-8f,        /* halfway: ties to even, up */
                         1.0f + 0x1p-8f + 0x1p-20f, /* just above halfway: up */
                         -2.5f,
                         65504.0f,
                         3.0e-39f};
    const float want[6] = {1.0f, 1.0f + 4 * 0x1p-8f, 1.0f + 2 * 0x1p-8f, -2.5f, 65536.0f, 3.0e-39f};
    float       x[6];
    memcpy(x, in, sizeof x);
    tcu_round(x, 6, BF16);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(x[i] == want[i], "bf16(%.9g) = %.9g, want %.9g", in[i], x[i], want[i]);
    /* a subnormal keeps its sign and stays within one bf16 ulp of subnormals (2^-133) */
    ck_assert(x[5] > 0.0f && fabsf(x[5] - want[5]) <= 0x1p-133f);
    /* fill writes every element */
    void *d = tcu_upload(NULL, 1000, BF16);
    kern_cuda_fill(d, BF16, -0.75f, 1000, stream());
    float *h = tcu_download(d, 1000, BF16);
    for (int i = 0; i < 1000; i++)
        ck_assert_float_eq(h[i], -0.75f);
    free(h);
    tcu_free(d);
}
END_TEST

/* The benchmarks' device generator: in range, centred, reproducible, seed-dependent. */
START_TEST(test_fill_uniform) {
    KernDtype dt = (KernDtype)_i;
    enum { N = 10000 };
    void *d = tcu_upload(NULL, N, dt);
    kern_cuda_fill_uniform(d, dt, -2.0f, 3.0f, N, 9, stream());
    float *a = tcu_download(d, N, dt);
    kern_cuda_fill_uniform(d, dt, -2.0f, 3.0f, N, 9, stream());
    float *b = tcu_download(d, N, dt);
    kern_cuda_fill_uniform(d, dt, -2.0f, 3.0f, N, 10, stream());
    float *c = tcu_download(d, N, dt);
    double sum = 0.0;
    int    same = 0;
    for (int i = 0; i < N; i++) {
        /* bf16 rounding may carry a value just below 3 up to 3 */
        ck_assert(a[i] >= -2.0f && a[i] <= 3.0f);
        sum += a[i];
        same += a[i] == c[i];
    }
    ck_assert_double_eq_tol(sum / N, 0.5, 0.05); /* std of the mean: 5 / sqrt(12 N) = 0.014 */
    ck_assert_mem_eq(a, b, N * sizeof(float));
    ck_assert_int_lt(same, N / 10);
    free(a);
    free(b);
    free(c);
    tcu_free(d);
}
END_TEST

/* Row-major C = alpha op(A) op(B) + beta C_in for every transpose pair, batched, against a
 * double-precision reference. */
START_TEST(test_gemm_variants) {
    KernDtype dt = (KernDtype)(_i / 4);
    int       ta = (_i / 2) % 2, tb = _i % 2;
    /* odd sizes in fp32; in bf16 rows of 8-multiples (16-byte aligned operands) */
    int    M = dt == F32 ? 5 : 16, N = dt == F32 ? 7 : 24, K = dt == F32 ? 9 : 40, NB = 3;
    float *a = hrand((size_t)NB * M * K, 1.0f, 1 + _i, dt);
    float *b = hrand((size_t)NB * K * N, 1.0f, 11 + _i, dt);
    float *cin = hrand((size_t)NB * M * N, 1.0f, 21 + _i, F32);
    float *ref = kern_xmalloc((size_t)NB * M * N * sizeof(float));
    float  alpha = 0.75f, beta = 0.5f;
    for (int z = 0; z < NB; z++) {
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double acc = 0.0;
                for (int k = 0; k < K; k++) {
                    double av = ta ? a[z * M * K + k * M + i] : a[z * M * K + i * K + k];
                    double bv = tb ? b[z * K * N + j * K + k] : b[z * K * N + k * N + j];
                    acc += av * bv;
                }
                ref[z * M * N + i * N + j] =
                    (float)(alpha * acc + beta * cin[z * M * N + i * N + j]);
            }
        }
    }
    void        *da = tcu_upload(a, NB * M * K, dt), *db = tcu_upload(b, NB * K * N, dt);
    void        *dcin = tcu_upload(cin, NB * M * N, F32), *dc = tcu_upload(NULL, NB * M * N, F32);
    KernCudaGemm g = kern_cuda_gemm_dense(M, N, K, ta, da, tb, db, dc, dt, F32);
    g.c_in = dcin;
    g.alpha = alpha;
    g.beta = beta;
    g.batch = NB;
    g.stride_a = M * K;
    g.stride_b = K * N;
    g.stride_c = M * N;
    kern_cuda_gemm(&g, tcu_ctx());
    float *got = tcu_download(dc, NB * M * N, F32);
    /* fp32 C from exact (bf16-rounded) inputs: the fp32 bound in both modes (K <= 40 terms) */
    tcu_assert_close(got, ref, NB * M * N, 1e-5, "gemm");
    free(got);
    free(ref);
    free(a);
    free(b);
    free(cin);
    tcu_free(da);
    tcu_free(db);
    tcu_free(dcin);
    tcu_free(dc);
}
END_TEST

/* The GEMM cache: a shape seen before searches no algorithm, even among more shapes than the
 * old 64-entry cache held; the bias pointer, set per call on the cached descriptor, follows
 * the call (two biases, one shape); past the cache's size the least recently used entry
 * goes and the products stay right. */
START_TEST(test_gemm_cache) {
    enum { M = 8, N = 16, K = 8, SHAPES = 100 };
    KernCudaCtx *ctx = kern_cuda_ctx_new(stream());
    ck_assert_ptr_nonnull(ctx);
    float   *a = hrand((size_t)SHAPES * K, 1.0f, 50, F32), *b = hrand((size_t)K * N, 1.0f, 51, F32);
    float   *bias = hrand(2 * N, 1.0f, 52, F32);
    void    *da = tcu_upload(a, (size_t)SHAPES * K, F32), *db = tcu_upload(b, (size_t)K * N, F32);
    void    *dbias = tcu_upload(bias, 2 * N, F32), *dc = tcu_upload(NULL, (size_t)SHAPES * N, F32);
    uint64_t n0 = 0, h0 = 0, n1 = 0, h1 = 0;
    /* SHAPES products of (m, K) x (K, N), m = 1 .. SHAPES: SHAPES searches once, none again */
    for (int pass = 0; pass < 2; pass++) {
        kern_cuda_ctx_gemm_counts(ctx, &n0, &h0);
        for (int m = 1; m <= SHAPES; m++) {
            KernCudaGemm g = kern_cuda_gemm_dense(m, N, K, 0, da, 0, db, dc, F32, F32);
            kern_cuda_gemm(&g, ctx);
        }
        kern_cuda_ctx_gemm_counts(ctx, &n1, &h1);
        ck_assert_uint_eq(n1 - n0, SHAPES);
        ck_assert_uint_eq(h1 - h0, pass == 0 ? SHAPES : 0);
    }
    /* one shape, two biases: each call adds its own */
    for (int which = 0; which < 2; which++) {
        KernCudaGemm g = kern_cuda_gemm_dense(M, N, K, 0, da, 0, db, dc, F32, F32);
        g.bias = (const float *)dbias + which * N;
        kern_cuda_gemm(&g, ctx);
        float *got = tcu_download(dc, (size_t)M * N, F32), ref[M * N];
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double acc = bias[which * N + j];
                for (int k = 0; k < K; k++)
                    acc += (double)a[i * K + k] * b[k * N + j];
                ref[i * N + j] = (float)acc;
            }
        tcu_assert_close(got, ref, (size_t)M * N, 1e-5, "gemm with a per-call bias");
        free(got);
    }
    /* 200 more shapes, (1, 1) x (1, n) for n = 1 .. 200, push the first ones out; a product
     * of an evicted shape searches again and is right */
    float *wide = hrand(200, 1.0f, 53, F32);
    void  *dwide = tcu_upload(wide, 200, F32);
    kern_cuda_ctx_gemm_counts(ctx, NULL, &h0);
    for (int n = 1; n <= 200; n++) {
        KernCudaGemm g = kern_cuda_gemm_dense(1, n, 1, 0, da, 0, dwide, dc, F32, F32);
        kern_cuda_gemm(&g, ctx);
    }
    kern_cuda_ctx_gemm_counts(ctx, NULL, &h1);
    ck_assert_uint_eq(h1 - h0, 200);
    KernCudaGemm g = kern_cuda_gemm_dense(M, N, K, 0, da, 0, db, dc, F32, F32);
    kern_cuda_gemm(&g, ctx);
    kern_cuda_ctx_gemm_counts(ctx, NULL, &h0);
    ck_assert_uint_eq(h0 - h1, 1);
    float *got = tcu_download(dc, (size_t)M * N, F32), ref[M * N];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)a[i * K + k] * b[k * N + j];
            ref[i * N + j] = (float)acc;
        }
    tcu_assert_close(got, ref, (size_t)M * N, 1e-5, "gemm after eviction");
    free(got);
    kern_cuda_ctx_free(ctx);
    free(wide);
    tcu_free(dwide);
    free(a);
    free(b);
    free(bias);
    tcu_free(da);
    tcu_free(db);
    tcu_free(dbias);
    tcu_free(dc);
}
END_TEST

START_TEST(test_sq_norm) {
    enum { N = 100003 };
    float  *x = hrand(N, 1.0f, 3, F32);
    double  want = kern_grad_sq_norm(x, N);
    void   *dx = tcu_upload(x, N, F32);
    double *dsq = tcu_alloc_poisoned(2 * sizeof(double));
    double  got[2], again[2];
    for (int run = 0; run < 2; run++) {
        /* accumulates: 0 + s, then + s again */
        KERN_CUDA_CHECK(cudaMemsetAsync(dsq, 0, 2 * sizeof(double), stream()));
        kern_cuda_sq_norm_acc(dsq, dx, N, tcu_ctx());
        kern_cuda_sq_norm_acc(dsq + 1, dx, N, tcu_ctx());
        kern_cuda_sq_norm_acc(dsq + 1, dx, N, tcu_ctx());
        KERN_CUDA_CHECK(
            cudaMemcpyAsync(run ? again : got, dsq, sizeof got, cudaMemcpyDeviceToHost, stream()));
        KERN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    }
    ck_assert_double_eq_tol(got[0], want, 1e-12 * want);
    ck_assert_double_eq_tol(got[1], 2.0 * want, 2e-12 * want);
    ck_assert_mem_eq(got, again, sizeof got); /* deterministic */
    free(x);
    tcu_free(dx);
    tcu_free(dsq);
}
END_TEST

/* The mean over replicas against the same loop in C: bitwise, for D = 1..4 (3 does not divide
 * exactly), in place into row 0 too. */
START_TEST(test_replica_mean) {
    enum { N = 70001, D_MAX = 4 };
    float *x = hrand((size_t)D_MAX * N, 1.0f, 11, F32);
    float *want = malloc(N * sizeof(float));
    for (int d = 1; d <= D_MAX; d++) {
        for (size_t i = 0; i < N; i++) {
            float sum = x[i];
            for (int r = 1; r < d; r++)
                sum += x[(size_t)r * N + i];
            want[i] = sum / (float)d;
        }
        float *din = tcu_upload(x, (size_t)d * N, F32);
        float *dout = tcu_alloc_poisoned(N * sizeof(float));
        kern_cuda_replica_mean(dout, din, d, N, stream());
        float *got = tcu_download(dout, N, F32);
        ck_assert_mem_eq(got, want, N * sizeof(float));
        free(got);
        kern_cuda_replica_mean(din, din, d, N, stream());
        got = tcu_download(din, N, F32);
        ck_assert_mem_eq(got, want, N * sizeof(float));
        free(got);
        tcu_free(din);
        tcu_free(dout);
    }
    free(want);
    free(x);
}
END_TEST

/* --- embedding --- */

START_TEST(test_encoder_forward) {
    KernDtype dt = (KernDtype)_i;
    enum { B = 3, T = 5, C = 24, VP = 19, N = B * T };
    float  *wte = hrand(VP * C, 1.0f, 1, dt), *wpe = hrand(T * C, 1.0f, 2, dt);
    int32_t tokens[N];
    rand_ids(tokens, N, VP, 3);
    float ref[N * C];
    gpt2_cpu_encoder_forward(ref, tokens, wte, wpe, B, T, C);
    void    *dwte = tcu_upload(wte, VP * C, dt), *dwpe = tcu_upload(wpe, T * C, dt);
    int32_t *dtok = tcu_upload_ids(tokens, N);
    void    *dout = tcu_upload(NULL, N * C, dt);
    gpt2_cuda_encoder_forward(dout, dtok, dwte, dwpe, B, T, C, dt, stream());
    float *got = tcu_download(dout, N * C, dt);
    tcu_assert_close(got, ref, N * C, tol(dt, 1e-5, 4e-3), "encoder out");
    free(got);
    free(wte);
    free(wpe);
    tcu_free(dwte);
    tcu_free(dwpe);
    tcu_free(dtok);
    tcu_free(dout);
}
END_TEST

/* Repeated tokens; the sums run in the CPU's order, so the result is bitwise the CPU's. */
START_TEST(test_encoder_backward) {
    KernDtype dt = (KernDtype)_i;
    enum { B = 4, T = 7, C = 33, VP = 8, N = B * T };
    float  *dout = hrand(N * C, 1.0f, 4, dt);
    float  *dwte = hrand(VP * C, 1.0f, 5, F32), *dwpe = hrand(T * C, 1.0f, 6, F32);
    int32_t tokens[N], order[N], starts[N + 1];
    int64_t keys[N];
    rand_ids(tokens, N, 6, 7); /* ids 0..5 of 8: repeats and untouched rows */
    int    nb = gpt2_cuda_encoder_buckets(order, starts, keys, tokens, N);
    float *ref_wte = hcopy(dwte, VP * C), *ref_wpe = hcopy(dwpe, T * C);
    gpt2_cpu_encoder_backward(ref_wte, ref_wpe, dout, tokens, B, T, C);
    void    *d_dout = tcu_upload(dout, N * C, dt);
    void    *d_wte = tcu_upload(dwte, VP * C, F32), *d_wpe = tcu_upload(dwpe, T * C, F32);
    int32_t *d_tok = tcu_upload_ids(tokens, N), *d_order = tcu_upload_ids(order, N);
    int32_t *d_starts = tcu_upload_ids(starts, nb + 1);
    gpt2_cuda_encoder_backward(d_wte, d_wpe, d_dout, d_tok, d_order, d_starts, nb, B, T, C, dt,
                               stream());
    float *got_wte = tcu_download(d_wte, VP * C, F32), *got_wpe = tcu_download(d_wpe, T * C, F32);
    ck_assert_mem_eq(got_wte, ref_wte, VP * C * sizeof(float));
    ck_assert_mem_eq(got_wpe, ref_wpe, T * C * sizeof(float));
    free(got_wte);
    free(got_wpe);
    free(ref_wte);
    free(ref_wpe);
    free(dout);
    free(dwte);
    free(dwpe);
    tcu_free(d_dout);
    tcu_free(d_wte);
    tcu_free(d_wpe);
    tcu_free(d_tok);
    tcu_free(d_order);
    tcu_free(d_starts);
}
END_TEST

/* --- layernorm --- */

/* LayerNorm inputs: rows with an offset and scale, gains near 1, small biases. */
static void ln_inputs(float *inp, float *w, float *b, int N, int C, KernDtype dt) {
    tcu_randn(inp, (size_t)N * C, 2.0f, 8);
    for (int i = 0; i < N * C; i++)
        inp[i] += 0.5f;
    tcu_uniform(w, C, 0.7f, 1.3f, 9);
    tcu_uniform(b, C, -0.1f, 0.1f, 10);
    tcu_round(inp, (size_t)N * C, dt);
    tcu_round(w, C, dt);
    tcu_round(b, C, dt);
}

START_TEST(test_layernorm_forward) {
    KernDtype dt = (KernDtype)_i;
    enum { N = 13, C = 40 };
    float inp[N * C], w[C], b[C], ref[N * C], mean[N], rstd[N];
    ln_inputs(inp, w, b, N, C, dt);
    gpt2_cpu_layernorm_forward(ref, mean, rstd, inp, w, b, N, C);
    void *di = tcu_upload(inp, N * C, dt), *dw = tcu_upload(w, C, dt), *db = tcu_upload(b, C, dt);
    void *dout = tcu_upload(NULL, N * C, dt);
    void *dmean = tcu_upload(NULL, N, F32), *drstd = tcu_upload(NULL, N, F32);
    gpt2_cuda_layernorm_forward(dout, dmean, drstd, di, dw, db, N, C, dt, stream());
    float *got = tcu_download(dout, N * C, dt), *gm = tcu_download(dmean, N, F32);
    float *gr = tcu_download(drstd, N, F32);
    tcu_assert_close(got, ref, N * C, tol(dt, 1e-5, 4e-3), "layernorm out");
    tcu_assert_close(gm, mean, N, 1e-5, "layernorm mean");
    tcu_assert_close(gr, rstd, N, 1e-5, "layernorm rstd");
    free(got);
    free(gm);
    free(gr);
    tcu_free(di);
    tcu_free(dw);
    tcu_free(db);
    tcu_free(dout);
    tcu_free(dmean);
    tcu_free(drstd);
}
END_TEST

START_TEST(test_layernorm_backward_input) {
    KernDtype dt = (KernDtype)_i;
    enum { N = 13, C = 40 };
    float inp[N * C], w[C], b[C], out[N * C], mean[N], rstd[N];
    ln_inputs(inp, w, b, N, C, dt);
    gpt2_cpu_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    float *dout = hrand(N * C, 1.0f, 11, dt), *init = hrand(N * C, 0.1f, 12, dt);
    float *ref = hcopy(init, N * C);
    gpt2_cpu_layernorm_backward_input(ref, dout, inp, w, mean, rstd, N, C);
    void *ddinp = tcu_upload(init, N * C, dt), *ddout = tcu_upload(dout, N * C, dt);
    void *di = tcu_upload(inp, N * C, dt), *dw = tcu_upload(w, C, dt);
    void *dmean = tcu_upload(mean, N, F32), *drstd = tcu_upload(rstd, N, F32);
    gpt2_cuda_layernorm_backward_input(ddinp, ddout, di, dw, dmean, drstd, N, C, dt, stream());
    float *got = tcu_download(ddinp, N * C, dt);
    assert_increment(got, ref, init, N * C, tol(dt, 1e-4, 1e-2), "layernorm dinp");
    free(got);
    free(ref);
    free(dout);
    free(init);
    tcu_free(ddinp);
    tcu_free(ddout);
    tcu_free(di);
    tcu_free(dw);
    tcu_free(dmean);
    tcu_free(drstd);
}
END_TEST

/* LayerNorm weight and bias gradients of (N, C) against the CPU, accumulated onto random
 * values; with @runs 2 the second run must give the same bits. */
static void layernorm_weight_case(KernDtype dt, int N, int C, uint64_t seed, int runs) {
    size_t nc = (size_t)N * C;
    float *inp = kern_xmalloc(nc * sizeof(float)), *out = kern_xmalloc(nc * sizeof(float));
    float *w = kern_xmalloc((size_t)C * sizeof(float)),
          *b = kern_xmalloc((size_t)C * sizeof(float));
    float *mean = kern_xmalloc((size_t)N * sizeof(float)),
          *rstd = kern_xmalloc((size_t)N * sizeof(float));
    ln_inputs(inp, w, b, N, C, dt);
    gpt2_cpu_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    float *dout = hrand(nc, 1.0f, seed, dt);
    float *iw = hrand(C, 1.0f, seed + 1, F32), *ib = hrand(C, 1.0f, seed + 2, F32);
    float *rw = hcopy(iw, C), *rb = hcopy(ib, C);
    gpt2_cpu_layernorm_backward_weight(rw, rb, dout, inp, mean, rstd, N, C);
    void  *ddout = tcu_upload(dout, nc, dt), *di = tcu_upload(inp, nc, dt);
    void  *dmean = tcu_upload(mean, N, F32), *drstd = tcu_upload(rstd, N, F32);
    float *first[2] = {NULL, NULL};
    for (int run = 0; run < runs; run++) {
        void *ddw = tcu_upload(iw, C, F32), *ddb = tcu_upload(ib, C, F32);
        gpt2_cuda_layernorm_backward_weight(ddw, ddb, ddout, di, dmean, drstd, N, C, dt, tcu_ctx());
        float *gw = tcu_download(ddw, C, F32), *gb = tcu_download(ddb, C, F32);
        /* fp32 sums of exact inputs: the fp32 gradient bound in both modes */
        assert_increment(gw, rw, iw, C, 1e-4, "layernorm dweight");
        assert_increment(gb, rb, ib, C, 1e-4, "layernorm dbias");
        if (run == 0) {
            first[0] = gw;
            first[1] = gb;
        } else {
            ck_assert_mem_eq(gw, first[0], (size_t)C * sizeof(float));
            ck_assert_mem_eq(gb, first[1], (size_t)C * sizeof(float));
            free(gw);
            free(gb);
        }
        tcu_free(ddw);
        tcu_free(ddb);
    }
    free(first[0]);
    free(first[1]);
    free(rw);
    free(rb);
    free(iw);
    free(ib);
    free(dout);
    free(inp);
    free(out);
    free(w);
    free(b);
    free(mean);
    free(rstd);
    tcu_free(ddout);
    tcu_free(di);
    tcu_free(dmean);
    tcu_free(drstd);
}

START_TEST(test_layernorm_backward_weight) {
    layernorm_weight_case((KernDtype)_i, 300, 70, 13, 1);
}
END_TEST

/* Many row chunks (2048 rows: 64 chunks of 32, more than the finish's 16 lanes) and a column
 * count that leaves a partial block: the fixed-order column sums against the CPU, and the same
 * bits on a second run. */
START_TEST(test_layernorm_backward_weight_long) {
    layernorm_weight_case((KernDtype)_i, 2048, 100, 16, 2);
}
END_TEST

static const int mm_cases[][4] = {
    {37, 24, 40, 1}, {37, 24, 40, 0}, {64, 128, 96, 1}, {5, 13, 7, 1}};
#define MM_N_CASES 4

static int mm_case(int i, KernDtype *dt, int *N, int *IC, int *OC, int *bias) {
    *dt = (KernDtype)(i % 2);
    const int *c = mm_cases[i / 2];
    *N = c[0];
    *IC = c[1];
    *OC = c[2];
    *bias = c[3];
    return *dt == F32 || (*IC % 8 == 0 && *OC % 8 == 0);
}

START_TEST(test_matmul_forward) {
    KernDtype dt;
    int       N, IC, OC, has_bias;
    if (!mm_case(_i, &dt, &N, &IC, &OC, &has_bias))
        return;
    float *inp = hrand((size_t)N * IC, 1.0f, 16, dt), *w = hrand((size_t)OC * IC, 0.3f, 17, dt);
    float *bias = hrand(OC, 0.5f, 18, dt);
    float *ref = kern_xmalloc((size_t)N * OC * sizeof(float));
    gpt2_cpu_matmul_forward(ref, inp, w, has_bias ? bias : NULL, N, IC, OC);
    void *di = tcu_upload(inp, (size_t)N * IC, dt), *dw = tcu_upload(w, (size_t)OC * IC, dt);
    void *db = tcu_upload(bias, OC, dt), *dout = tcu_upload(NULL, (size_t)N * OC, dt);
    gpt2_cuda_matmul_forward(dout, di, dw, has_bias ? db : NULL, N, IC, OC, dt, tcu_ctx());
    float *got = tcu_download(dout, (size_t)N * OC, dt);
    tcu_assert_close(got, ref, (size_t)N * OC, tol(dt, 1e-5, 4e-3), "matmul out");
    free(got);
    free(ref);
    free(inp);
    free(w);
    free(bias);
    tcu_free(di);
    tcu_free(dw);
    tcu_free(db);
    tcu_free(dout);
}
END_TEST

/* bf16 with OC % 8 == 0 takes cuBLASLt's GELU_AUX_BIAS epilogue, every other case the matmul
 * and the GELU kernel; both against the CPU matmul then CPU GELU. */
START_TEST(test_matmul_forward_gelu) {
    KernDtype dt;
    int       N, IC, OC, has_bias;
    if (!mm_case(_i, &dt, &N, &IC, &OC, &has_bias))
        return;
    size_t no = (size_t)N * OC;
    float *inp = hrand((size_t)N * IC, 1.0f, 19, dt), *w = hrand((size_t)OC * IC, 0.3f, 20, dt);
    float *bias = hrand(OC, 0.5f, 21, dt);
    float *pre = kern_xmalloc(no * sizeof(float)), *act = kern_xmalloc(no * sizeof(float));
    gpt2_cpu_matmul_forward(pre, inp, w, has_bias ? bias : NULL, N, IC, OC);
    gpt2_cpu_gelu_forward(act, pre, no);
    void *di = tcu_upload(inp, (size_t)N * IC, dt), *dw = tcu_upload(w, (size_t)OC * IC, dt);
    void *db = tcu_upload(bias, OC, dt);
    void *dpre = tcu_upload(NULL, no, dt), *dact = tcu_upload(NULL, no, dt);
    gpt2_cuda_matmul_forward_gelu(dact, dpre, di, dw, has_bias ? db : NULL, N, IC, OC, dt,
                                  tcu_ctx());
    float *gpre = tcu_download(dpre, no, dt), *gact = tcu_download(dact, no, dt);
    tcu_assert_close(gpre, pre, no, tol(dt, 1e-5, 4e-3), "matmul+gelu pre-activation");
    tcu_assert_close(gact, act, no, tol(dt, 1e-5, 1e-2), "matmul+gelu output");
    free(gpre);
    free(gact);
    free(pre);
    free(act);
    free(inp);
    free(w);
    free(bias);
    tcu_free(di);
    tcu_free(dw);
    tcu_free(db);
    tcu_free(dpre);
    tcu_free(dact);
}
END_TEST

START_TEST(test_matmul_backward_input) {
    KernDtype dt;
    int       N, IC, OC, has_bias;
    if (!mm_case(_i, &dt, &N, &IC, &OC, &has_bias))
        return;
    float *dout = hrand((size_t)N * OC, 1.0f, 22, dt), *w = hrand((size_t)OC * IC, 0.3f, 23, dt);
    float *ref = kern_xmalloc((size_t)N * IC * sizeof(float));
    gpt2_cpu_matmul_backward_input(ref, dout, w, N, IC, OC);
    void *ddout = tcu_upload(dout, (size_t)N * OC, dt), *dw = tcu_upload(w, (size_t)OC * IC, dt);
    void *ddinp = tcu_upload(NULL, (size_t)N * IC, dt);
    gpt2_cuda_matmul_backward_input(ddinp, ddout, dw, N, IC, OC, dt, tcu_ctx());
    float *got = tcu_download(ddinp, (size_t)N * IC, dt);
    tcu_assert_close(got, ref, (size_t)N * IC, tol(dt, 1e-4, 4e-3), "matmul dinp");
    free(got);
    free(ref);
    free(dout);
    free(w);
    tcu_free(ddout);
    tcu_free(dw);
    tcu_free(ddinp);
}
END_TEST

START_TEST(test_matmul_backward_weight) {
    KernDtype dt;
    int       N, IC, OC, has_bias;
    if (!mm_case(_i, &dt, &N, &IC, &OC, &has_bias))
        return;
    size_t nw = (size_t)OC * IC;
    float *dout = hrand((size_t)N * OC, 1.0f, 24, dt), *inp = hrand((size_t)N * IC, 1.0f, 25, dt);
    float *iw = hrand(nw, 1.0f, 26, F32), *ib = hrand(OC, 1.0f, 27, F32);
    float *rw = hcopy(iw, nw), *rb = hcopy(ib, OC);
    gpt2_cpu_matmul_backward_weight(rw, has_bias ? rb : NULL, dout, inp, N, IC, OC);
    void *ddout = tcu_upload(dout, (size_t)N * OC, dt), *di = tcu_upload(inp, (size_t)N * IC, dt);
    void *ddw = tcu_upload(iw, nw, F32), *ddb = tcu_upload(ib, OC, F32);
    gpt2_cuda_matmul_backward_weight(ddw, has_bias ? ddb : NULL, ddout, di, N, IC, OC, dt,
                                     tcu_ctx());
    float *gw = tcu_download(ddw, nw, F32), *gb = tcu_download(ddb, OC, F32);
    /* fp32 accumulation of exact inputs: the fp32 gradient bound in both modes */
    assert_increment(gw, rw, iw, nw, 1e-4, "matmul dweight");
    if (has_bias)
        assert_increment(gb, rb, ib, OC, 1e-4, "matmul dbias");
    else
        ck_assert_mem_eq(gb, ib, OC * sizeof(float)); /* untouched */
    free(gw);
    free(gb);
    free(rw);
    free(rb);
    free(iw);
    free(ib);
    free(dout);
    free(inp);
    tcu_free(ddout);
    tcu_free(di);
    tcu_free(ddw);
    tcu_free(ddb);
}
END_TEST

/* --- attention --- */

/* T 17 in fp32 (odd rows and strides exercise the indexing); 16 in bf16, whose cuBLASLt
 * operands need 16-byte aligned rows, as every bf16 slice has (C, C / NH, Vp multiples of 8) */
enum { AB = 2, AC = 32, ANH = 4 };

static int attn_t(KernDtype dt) {
    return dt == F32 ? 17 : 16;
}

START_TEST(test_attention_forward) {
    KernDtype dt = (KernDtype)_i;
    int       AT = attn_t(dt), AN = AB * AT;
    size_t    nqkv = (size_t)AN * 3 * AC, natt = (size_t)AB * ANH * AT * AT;
    float    *qkv = hrand(nqkv, 1.0f, 28, dt);
    float    *out = kern_xmalloc((size_t)AN * AC * sizeof(float));
    float    *att = kern_xmalloc(natt * sizeof(float));
    gpt2_cpu_attention_forward(out, att, qkv, AB, AT, AC, ANH);
    void *dqkv = tcu_upload(qkv, nqkv, dt), *dout = tcu_upload(NULL, (size_t)AN * AC, dt);
    void *datt = tcu_upload(NULL, natt, dt);
    void *scratch = tcu_alloc_poisoned(gpt2_cuda_attention_scratch_bytes(AB, AT, AC, ANH, dt));
    gpt2_cuda_attention_forward(dout, datt, dqkv, scratch, AB, AT, AC, ANH, dt, tcu_ctx());
    float *gout = tcu_download(dout, (size_t)AN * AC, dt), *gatt = tcu_download(datt, natt, dt);
    tcu_assert_close(gatt, att, natt, tol(dt, 1e-5, 4e-3), "attention probabilities");
    tcu_assert_close(gout, out, (size_t)AN * AC, tol(dt, 1e-5, 1e-2), "attention out");
    free(gout);
    free(gatt);
    free(qkv);
    free(out);
    free(att);
    tcu_free(dqkv);
    tcu_free(dout);
    tcu_free(datt);
    tcu_free(scratch);
}
END_TEST

START_TEST(test_attention_backward) {
    KernDtype dt = (KernDtype)_i;
    int       AT = attn_t(dt), AN = AB * AT;
    size_t    nqkv = (size_t)AN * 3 * AC, natt = (size_t)AB * ANH * AT * AT;
    float    *qkv = hrand(nqkv, 1.0f, 29, dt), *dout = hrand((size_t)AN * AC, 1.0f, 30, dt);
    float    *out = kern_xmalloc((size_t)AN * AC * sizeof(float));
    float    *att = kern_xmalloc(natt * sizeof(float));
    float    *ref = kern_xmalloc(nqkv * sizeof(float));
    gpt2_cpu_attention_forward(out, att, qkv, AB, AT, AC, ANH);
    tcu_round(att, natt, dt); /* both sides see the probabilities the GPU stores */
    gpt2_cpu_attention_backward(ref, dout, qkv, att, AB, AT, AC, ANH);
    void *dqkv = tcu_upload(qkv, nqkv, dt), *ddout = tcu_upload(dout, (size_t)AN * AC, dt);
    void *datt = tcu_upload(att, natt, dt), *ddqkv = tcu_upload(NULL, nqkv, dt);
    void *scratch = tcu_alloc_poisoned(gpt2_cuda_attention_scratch_bytes(AB, AT, AC, ANH, dt));
    gpt2_cuda_attention_backward(ddqkv, scratch, ddout, dqkv, datt, AB, AT, AC, ANH, dt, tcu_ctx());
    float *got = tcu_download(ddqkv, nqkv, dt);
    tcu_assert_close(got, ref, nqkv, tol(dt, 1e-4, 2e-2), "attention dqkv");
    free(got);
    free(qkv);
    free(dout);
    free(out);
    free(att);
    free(ref);
    tcu_free(dqkv);
    tcu_free(ddout);
    tcu_free(datt);
    tcu_free(ddqkv);
    tcu_free(scratch);
}
END_TEST

/* --- fused (flash) attention, bf16 --- */

/* (T, C, NH): head sizes 32, 64, 128; T a partial tile, two tiles with a partial one, and two
 * tiles plus a partial one */
static const int flash_cases[3][3] = {{16, 64, 2}, {80, 128, 2}, {140, 256, 2}};

/* Reference log-sum-exp of each causal row of scale * q k^T, in double. */
static void flash_ref_lse(float *lse, const float *qkv, int B, int T, int C, int NH) {
    int    hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double       m = -INFINITY, sum = 0.0;
                double      *s = kern_xmalloc((size_t)(t + 1) * sizeof(double));
                for (int j = 0; j <= t; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
                    double       dot = 0.0;
                    for (int d = 0; d < hs; d++)
                        dot += (double)q[d] * k[d];
                    s[j] = dot * scale;
                    m = s[j] > m ? s[j] : m;
                }
                for (int j = 0; j <= t; j++)
                    sum += exp(s[j] - m);
                lse[((size_t)b * NH + h) * T + t] = (float)(m + log(sum));
                free(s);
            }
        }
    }
}

/* Forward (out, lse) and backward (dqkv) against the CPU kernels on the same bf16 inputs, and
 * bitwise the same results on a second run. */
START_TEST(test_flash_attention) {
    int       B = 2, T = flash_cases[_i][0], C = flash_cases[_i][1], NH = flash_cases[_i][2];
    KernDtype dt = BF16;
    ck_assert(gpt2_cuda_flash_attention_supported(C, NH, dt));
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, nrow = (size_t)B * NH * T;
    size_t natt = nrow * T;
    float *qkv = hrand(nqkv, 1.0f, 60 + _i, dt), *dout = hrand(nout, 1.0f, 70 + _i, dt);
    float *out = kern_xmalloc(nout * sizeof(float)), *att = kern_xmalloc(natt * sizeof(float));
    float *dref = kern_xmalloc(nqkv * sizeof(float)), *lref = kern_xmalloc(nrow * sizeof(float));
    gpt2_cpu_attention_forward(out, att, qkv, B, T, C, NH);
    gpt2_cpu_attention_backward(dref, dout, qkv, att, B, T, C, NH);
    flash_ref_lse(lref, qkv, B, T, C, NH);

    void  *dqkv = tcu_upload(qkv, nqkv, dt), *ddout = tcu_upload(dout, nout, dt);
    void  *dout_f = tcu_upload(NULL, nout, dt), *dlse = tcu_upload(NULL, nrow, F32);
    void  *dgrad = tcu_upload(NULL, nqkv, dt);
    float *scratch = tcu_alloc_poisoned(gpt2_cuda_flash_attention_scratch_bytes(B, T, NH));
    float *got[2][3];
    for (int run = 0; run < 2; run++) {
        gpt2_cuda_flash_attention_forward(dout_f, dlse, dqkv, B, T, C, NH, dt, tcu_ctx());
        gpt2_cuda_flash_attention_backward(dgrad, scratch, ddout, dqkv, dout_f, dlse, B, T, C, NH,
                                           dt, tcu_ctx());
        got[run][0] = tcu_download(dout_f, nout, dt);
        got[run][1] = tcu_download(dlse, nrow, F32);
        got[run][2] = tcu_download(dgrad, nqkv, dt);
    }
    tcu_assert_close(got[0][0], out, nout, 1e-2, "flash attention out");
    tcu_assert_close(got[0][1], lref, nrow, 1e-4, "flash attention log-sum-exp");
    tcu_assert_close(got[0][2], dref, nqkv, 2e-2, "flash attention dqkv");
    ck_assert_mem_eq(got[0][0], got[1][0], nout * sizeof(float));
    ck_assert_mem_eq(got[0][1], got[1][1], nrow * sizeof(float));
    ck_assert_mem_eq(got[0][2], got[1][2], nqkv * sizeof(float));
    for (int run = 0; run < 2; run++)
        for (int k = 0; k < 3; k++)
            free(got[run][k]);
    free(qkv);
    free(dout);
    free(out);
    free(att);
    free(dref);
    free(lref);
    tcu_free(dqkv);
    tcu_free(ddout);
    tcu_free(dout_f);
    tcu_free(dlse);
    tcu_free(dgrad);
    tcu_free(scratch);
}
END_TEST

/* --- GELU, residual --- */

enum { EN = 1000 };

START_TEST(test_gelu) {
    KernDtype dt = (KernDtype)_i;
    float     x[EN], dout[EN], ref[EN], dref[EN];
    tcu_uniform(x, EN, -5.0f, 5.0f, 31);
    tcu_randn(dout, EN, 1.0f, 32);
    tcu_round(x, EN, dt);
    tcu_round(dout, EN, dt);
    gpt2_cpu_gelu_forward(ref, x, EN);
    gpt2_cpu_gelu_backward(dref, x, dout, EN);
    void *dx = tcu_upload(x, EN, dt), *dy = tcu_upload(NULL, EN, dt);
    void *dd = tcu_upload(dout, EN, dt), *dg = tcu_upload(NULL, EN, dt);
    gpt2_cuda_gelu_forward(dy, dx, EN, dt, stream());
    gpt2_cuda_gelu_backward(dg, dx, dd, EN, dt, stream());
    gpt2_cuda_gelu_backward(dd, dx, dd, EN, dt, stream()); /* in place over dout */
    float *gy = tcu_download(dy, EN, dt), *gg = tcu_download(dg, EN, dt);
    float *gi = tcu_download(dd, EN, dt);
    tcu_assert_close(gy, ref, EN, tol(dt, 1e-5, 4e-3), "gelu forward");
    tcu_assert_close(gg, dref, EN, tol(dt, 1e-4, 4e-3), "gelu backward");
    tcu_assert_close(gi, dref, EN, tol(dt, 1e-4, 4e-3), "gelu backward in place");
    free(gy);
    free(gg);
    free(gi);
    tcu_free(dx);
    tcu_free(dy);
    tcu_free(dd);
    tcu_free(dg);
}
END_TEST

START_TEST(test_residual) {
    KernDtype dt = (KernDtype)_i;
    float    *a = hrand(EN, 1.0f, 33, dt), *b = hrand(EN, 1.0f, 34, dt);
    float    *d = hrand(EN, 1.0f, 35, dt);
    float     ref[EN];
    gpt2_cpu_residual_forward(ref, a, b, EN);
    float *ra = hcopy(a, EN), *rb = hcopy(b, EN);
    gpt2_cpu_residual_backward(ra, rb, d, EN);
    void *da = tcu_upload(a, EN, dt), *db = tcu_upload(b, EN, dt), *dd = tcu_upload(d, EN, dt);
    void *dy = tcu_upload(NULL, EN, dt);
    gpt2_cuda_residual_forward(dy, da, db, EN, dt, stream());
    float *gy = tcu_download(dy, EN, dt);
    tcu_assert_close(gy, ref, EN, tol(dt, 1e-5, 4e-3), "residual forward");
    gpt2_cuda_residual_backward(da, db, dd, EN, dt, stream());
    float *ga = tcu_download(da, EN, dt), *gb = tcu_download(db, EN, dt);
    assert_increment(ga, ra, a, EN, tol(dt, 1e-4, 1e-2), "residual dinp1");
    assert_increment(gb, rb, b, EN, tol(dt, 1e-4, 1e-2), "residual dinp2");
    free(gy);
    free(ga);
    free(gb);
    free(ra);
    free(rb);
    free(a);
    free(b);
    free(d);
    tcu_free(da);
    tcu_free(db);
    tcu_free(dd);
    tcu_free(dy);
}
END_TEST

/* --- cross-entropy --- */

enum { XN = 9, XV = 50, XVP = 64 };

/* The reference logits' gradient (probs - onehot(target)) * dloss, 0 in padded columns (the
 * CPU kernels never store it: gpt2_cpu_head_backward_* fold it into their products). */
static void crossentropy_backward_ref(float *dlogits, const float *probs, const int32_t *targets,
                                      float dloss, int N, int V, int Vp) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < Vp; j++) {
            float p = j < V ? probs[(size_t)i * Vp + j] : 0.0f;
            dlogits[(size_t)i * Vp + j] = (p - (j == targets[i] ? 1.0f : 0.0f)) * dloss;
        }
}

START_TEST(test_crossentropy) {
    KernDtype dt = (KernDtype)_i;
    float    *logits = hrand(XN * XVP, 3.0f, 36, dt);
    int32_t   targets[XN];
    rand_ids(targets, XN, XV, 37);
    float *probs = hcopy(logits, XN * XVP), rloss[XN];
    float  mean = gpt2_cpu_crossentropy_forward(probs, rloss, targets, XN, XV, XVP);
    float  dref[XN * XVP], dloss = 1.0f / XN;
    crossentropy_backward_ref(dref, probs, targets, dloss, XN, XV, XVP);
    void    *dl = tcu_upload(logits, XN * XVP, dt);
    void    *drl = tcu_upload(NULL, XN, F32), *dmean = tcu_upload(NULL, 1, F32);
    int32_t *dtg = tcu_upload_ids(targets, XN);
    gpt2_cuda_crossentropy_forward(dl, drl, dmean, dtg, XN, XV, XVP, dt, stream());
    float *gp = tcu_download(dl, XN * XVP, dt), *grl = tcu_download(drl, XN, F32);
    float *gm = tcu_download(dmean, 1, F32);
    tcu_assert_close(gp, probs, XN * XVP, tol(dt, 1e-5, 4e-3), "softmax probabilities");
    /* the loss comes from the fp32 logits in both modes */
    tcu_assert_close(grl, rloss, XN, 1e-5, "row losses");
    tcu_assert_close(gm, &mean, 1, 1e-5, "mean loss");
    /* backward in place over the probabilities, and into a separate buffer */
    void *dd = tcu_upload(NULL, XN * XVP, dt);
    gpt2_cuda_crossentropy_backward(dd, dl, drl, dtg, dloss, XN, XV, XVP, dt, stream());
    gpt2_cuda_crossentropy_backward(dl, dl, drl, dtg, dloss, XN, XV, XVP, dt, stream());
    float *gd = tcu_download(dd, XN * XVP, dt), *gi = tcu_download(dl, XN * XVP, dt);
    tcu_assert_close(gd, dref, XN * XVP, tol(dt, 1e-4, 1e-2), "dlogits");
    tcu_assert_close(gi, dref, XN * XVP, tol(dt, 1e-4, 1e-2), "dlogits in place");
    free(gp);
    free(grl);
    free(gm);
    free(gd);
    free(gi);
    free(probs);
    free(logits);
    tcu_free(dl);
    tcu_free(drl);
    tcu_free(dmean);
    tcu_free(dtg);
    tcu_free(dd);
}
END_TEST

/* A confident prediction (p[target] from 0.99 to 0.9998): the target's gradient p - 1 must
 * hold to bf16's storage rounding of itself (at most 2^-8 = 3.9e-3 relative, plus the fp32
 * loss's own error: bound 6e-3), which p rounded to bf16 and then less 1 cannot: its error is
 * up to 2^-9 absolute, 20% or more of p - 1 here, and every row with 1 - p < 2^-9 (margins
 * from 10.35 on) rounds p to 1 and gets 0, an error of 100%. */
START_TEST(test_crossentropy_confident) {
    KernDtype dt = (KernDtype)_i;
    float    *logits = hrand(XN * XVP, 0.5f, 40, dt);
    int32_t   targets[XN];
    rand_ids(targets, XN, XV, 41);
    /* margins 9 to 12.6 over 49 logits of N(0, 0.5^2): 1 - p from about 7e-3 to 2e-4 */
    for (int n = 0; n < XN; n++)
        logits[(size_t)n * XVP + targets[n]] = 9.0f + 0.45f * (float)n;
    tcu_round(logits, XN * XVP, dt);
    float *probs = hcopy(logits, XN * XVP), rloss[XN];
    gpt2_cpu_crossentropy_forward(probs, rloss, targets, XN, XV, XVP);
    void    *dl = tcu_upload(logits, XN * XVP, dt), *drl = tcu_upload(NULL, XN, F32);
    int32_t *dtg = tcu_upload_ids(targets, XN);
    gpt2_cuda_crossentropy_forward(dl, drl, NULL, dtg, XN, XV, XVP, dt, stream());
    gpt2_cuda_crossentropy_backward(dl, dl, drl, dtg, 1.0f, XN, XV, XVP, dt, stream());
    float *gd = tcu_download(dl, XN * XVP, dt);
    for (int n = 0; n < XN; n++) {
        /* the reference in double from the fp32 loss: p - 1 = expm1(-loss) */
        double want = expm1(-(double)rloss[n]), got = gd[(size_t)n * XVP + targets[n]];
        ck_assert_msg(want < -1e-4 && want > -1e-2, "row %d: p - 1 = %g", n, want);
        ck_assert_msg(fabs(got - want) <= 6e-3 * fabs(want), "row %d (%s): p - 1 %.6g, want %.6g",
                      n, kern_dtype_name(dt), got, want);
    }
    free(gd);
    free(probs);
    free(logits);
    tcu_free(dl);
    tcu_free(drl);
    tcu_free(dtg);
}
END_TEST

/* A target outside [0, V) gives its row a NaN loss and no one-hot term, and leaves the other
 * rows alone (no out-of-bounds read). */
START_TEST(test_crossentropy_bad_target) {
    float  *logits = hrand(XN * XVP, 1.0f, 38, F32);
    int32_t targets[XN];
    rand_ids(targets, XN, XV, 39);
    targets[2] = XV;
    targets[5] = -1;
    void    *dl = tcu_upload(logits, XN * XVP, F32), *drl = tcu_upload(NULL, XN, F32);
    int32_t *dtg = tcu_upload_ids(targets, XN);
    gpt2_cuda_crossentropy_forward(dl, drl, NULL, dtg, XN, XV, XVP, F32, stream());
    float *grl = tcu_download(drl, XN, F32), *gp = tcu_download(dl, XN * XVP, F32);
    for (int n = 0; n < XN; n++)
        ck_assert_msg((n == 2 || n == 5) ? isnan(grl[n]) : isfinite(grl[n]), "row %d loss %g", n,
                      grl[n]);
    gpt2_cuda_crossentropy_backward(dl, dl, drl, dtg, 1.0f, XN, XV, XVP, F32, stream());
    float *gd = tcu_download(dl, XN * XVP, F32);
    for (int j = 0; j < XV; j++)
        ck_assert_float_eq(gd[2 * XVP + j], gp[2 * XVP + j]); /* p * 1, no -1 anywhere */
    free(grl);
    free(gp);
    free(gd);
    free(logits);
    tcu_free(dl);
    tcu_free(drl);
    tcu_free(dtg);
}
END_TEST

static Suite *kernels_suite(void) {
    Suite *s = suite_create("kernels-cuda");
    TCase *tc = tcase_create("shared");
    tcase_add_test(tc, test_convert_rne);
    tcase_add_loop_test(tc, test_fill_uniform, 0, 2);
    tcase_add_loop_test(tc, test_gemm_variants, 0, 8);
    tcase_add_test(tc, test_gemm_cache);
    tcase_add_test(tc, test_sq_norm);
    tcase_add_test(tc, test_replica_mean);
    suite_add_tcase(s, tc);
    tc = tcase_create("layers");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_encoder_forward, 0, 2);
    tcase_add_loop_test(tc, test_encoder_backward, 0, 2);
    tcase_add_loop_test(tc, test_layernorm_forward, 0, 2);
    tcase_add_loop_test(tc, test_layernorm_backward_input, 0, 2);
    tcase_add_loop_test(tc, test_layernorm_backward_weight, 0, 2);
    tcase_add_loop_test(tc, test_layernorm_backward_weight_long, 0, 2);
    tcase_add_loop_test(tc, test_matmul_forward, 0, 2 * MM_N_CASES);
    tcase_add_loop_test(tc, test_matmul_forward_gelu, 0, 2 * MM_N_CASES);
    tcase_add_loop_test(tc, test_matmul_backward_input, 0, 2 * MM_N_CASES);
    tcase_add_loop_test(tc, test_matmul_backward_weight, 0, 2 * MM_N_CASES);
    tcase_add_loop_test(tc, test_attention_forward, 0, 2);
    tcase_add_loop_test(tc, test_attention_backward, 0, 2);
    tcase_add_loop_test(tc, test_flash_attention, 0, 3);
    tcase_add_loop_test(tc, test_gelu, 0, 2);
    tcase_add_loop_test(tc, test_residual, 0, 2);
    tcase_add_loop_test(tc, test_crossentropy, 0, 2);
    tcase_add_test(tc, test_crossentropy_bad_target);
    tcase_add_loop_test(tc, test_crossentropy_confident, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tcu_main(kernels_suite());
}
