/* SPDX-License-Identifier: MIT
 * test-optim-cuda.c: the CUDA optimizers (kernels/optim-cuda.h) against the CPU ones
 * (kernels/optim-cpu.h) over the tensor table of a tiny GPT-2 (L 2, C 16): Newton-Schulz,
 * two AdamW and two Muon steps with and without error feedback (params, moments and previous
 * update), the device-side gate (non-finite norm, poisoned step, clipping), the state round
 * trip, and gradient scaling. Tolerances relative to the largest magnitude: moments 1e-5
 * (element-wise; only powf's or a fused multiply-add's last bit may differ); parameter
 * updates 1e-4 (the update is p_new - p_old, so one ulp of p, ~3e-8 at |p| 0.4, is ~1e-5 of
 * a 2e-3 update; and Newton-Schulz's fp32 GEMMs, TF32 off, reorder sums).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-slice.h"
#include "gpt2-table.h"
#include "kern-check.h"
#include "kern-util.h"
#include "optim-cpu.h"
#include "optim-cuda.h"
#include "test-cuda-util.h"

static const Gpt2SliceParams tiny = {
    .model = {.L = 2, .C = 16, .NH = 2, .T = 8, .V = 37, .Vp = 128},
    .layer_begin = 0,
    .layer_end = 2,
    .has_embedding = 1,
    .has_head = 1,
    .B = 1,
    .n_act_slots = 1,
};

static KernOptimParams optim_params(KernOptimKind kind, int ef) {
    KernOptimParams p = {.kind = kind,
                         .beta1 = 0.9f,
                         .beta2 = 0.95f,
                         .eps = 1e-8f,
                         .weight_decay = 0.1f,
                         .muon_momentum = 0.95f,
                         .muon_lr_ratio = 20.0f,
                         .muon_ns_steps = 5,
                         .error_feedback = ef};
    return p;
}

/* One CPU and one GPU optimizer over the tiny table, with the same params and two sets of
 * gradients. */
typedef struct {
    Gpt2Slice     *slice; /* CPU: params live in the slice */
    Gpt2Table     *table;
    KernOptim     *cpu;
    KernCudaOptim *gpu;
    size_t         n;
    float         *p0, *g[2]; /* host */
    float         *dparams;   /* device */
    float         *dgrads[2]; /* device */
} OptPair;

static void pair_init(OptPair *o, const KernOptimParams *op) {
    memset(o, 0, sizeof *o);
    o->slice = gpt2_slice_new(&tiny);
    o->table = gpt2_table_new(&tiny);
    o->n = gpt2_table_n_params(o->table);
    o->p0 = kern_xmalloc(o->n * sizeof(float));
    tcu_randn(o->p0, o->n, 0.1f, 1);
    for (int k = 0; k < 2; k++) {
        o->g[k] = kern_xmalloc(o->n * sizeof(float));
        tcu_randn(o->g[k], o->n, 0.01f, 2 + k);
        o->dgrads[k] = tcu_upload(o->g[k], o->n, KERN_DTYPE_F32);
    }
    memcpy(gpt2_slice_params(o->slice), o->p0, o->n * sizeof(float));
    o->dparams = tcu_upload(o->p0, o->n, KERN_DTYPE_F32);
    o->cpu = kern_optim_new(op, o->slice);
    o->gpu = kern_cuda_optim_new(op, o->table);
    ck_assert_ptr_nonnull(o->gpu);
}

static void pair_clear(OptPair *o) {
    kern_cuda_optim_free(o->gpu);
    kern_optim_free(o->cpu);
    tcu_free(o->dparams);
    for (int k = 0; k < 2; k++) {
        tcu_free(o->dgrads[k]);
        free(o->g[k]);
    }
    free(o->p0);
    gpt2_table_free(o->table);
    gpt2_slice_free(o->slice);
}

/* Compares params (by their change from p0), every tensor's moments and the previous update
 * of the two optimizers. */
static void pair_compare(OptPair *o, double tol_params, double tol_state) {
    float *got = tcu_download(o->dparams, o->n, KERN_DTYPE_F32);
    float *ref = gpt2_slice_params(o->slice);
    float *dg = kern_xmalloc(o->n * sizeof(float)), *dr = kern_xmalloc(o->n * sizeof(float));
    for (size_t i = 0; i < o->n; i++) {
        dg[i] = got[i] - o->p0[i];
        dr[i] = ref[i] - o->p0[i];
    }
    tcu_assert_close(dg, dr, o->n, tol_params, "parameter updates");
    for (int i = 0; i < gpt2_table_n_tensors(o->table); i++) {
        const Gpt2Tensor *t = gpt2_table_tensor(o->table, i);
        float            *c1, *c2;
        int               muon = kern_optim_tensor_state(o->cpu, i, &c1, &c2);
        float            *h1 = kern_xmalloc(t->numel * sizeof(float));
        float            *h2 = kern_xmalloc(t->numel * sizeof(float));
        ck_assert_int_eq(kern_cuda_optim_tensor_state_to_host(o->gpu, i, h1, h2, tcu_ctx()), muon);
        tcu_assert_close(h1, c1, t->numel, tol_state, t->name);
        if (!muon)
            tcu_assert_close(h2, c2, t->numel, tol_state, t->name);
        free(h1);
        free(h2);
    }
    float *prev = kern_optim_prev_update(o->cpu);
    float *hp = kern_xmalloc(o->n * sizeof(float));
    ck_assert_int_eq(kern_cuda_optim_prev_update_to_host(o->gpu, hp, tcu_ctx()), prev != NULL);
    if (prev)
        tcu_assert_close(hp, prev, o->n, tol_params, "previous update");
    ck_assert_int_eq(kern_cuda_optim_n_steps(o->gpu, tcu_ctx()), kern_optim_n_steps(o->cpu));
    free(hp);
    free(got);
    free(dg);
    free(dr);
}

static void pair_steps(OptPair *o, int n_steps, float lr) {
    for (int k = 0; k < n_steps; k++) {
        kern_optim_step(o->cpu, gpt2_slice_params(o->slice), o->g[k % 2], lr);
        kern_cuda_optim_step(o->gpu, o->dparams, o->dgrads[k % 2], lr, NULL, tcu_ctx());
    }
}

static KernCudaOptimStatus status(OptPair *o) {
    KernCudaOptimStatus st;
    KERN_CUDA_CHECK(cudaMemcpyAsync(&st, kern_cuda_optim_status(o->gpu), sizeof st,
                                    cudaMemcpyDeviceToHost, kern_cuda_ctx_stream(tcu_ctx())));
    kern_cuda_ctx_sync(tcu_ctx());
    return st;
}

/* --- Newton-Schulz --- */

START_TEST(test_newton_schulz) {
    /* wide, tall and a third shape whose smallest singular value stays away from 0: the
     * quintic iteration multiplies a rounding difference in a tiny singular value by up to
     * 3.4445^5 ~ 480 */
    static const int shapes[3][2] = {{48, 16}, {16, 64}, {40, 24}};
    int              rows = shapes[_i][0], cols = shapes[_i][1];
    int              m = rows < cols ? rows : cols;
    size_t           n = (size_t)rows * cols, ns = 2 * n + 3 * (size_t)m * m;
    float           *g = kern_xmalloc(n * sizeof(float)), *ref = kern_xmalloc(n * sizeof(float));
    float           *scratch = kern_xmalloc(ns * sizeof(float));
    tcu_randn(g, n, 1.0f, 40 + _i);
    kern_newton_schulz5(ref, g, rows, cols, 5, scratch);
    float *dg = tcu_upload(g, n, KERN_DTYPE_F32), *dout = tcu_upload(NULL, n, KERN_DTYPE_F32);
    float *ds = tcu_upload(NULL, ns, KERN_DTYPE_F32);
    kern_cuda_newton_schulz5(dout, dg, rows, cols, 5, ds, tcu_ctx());
    float *got = tcu_download(dout, n, KERN_DTYPE_F32);
    tcu_assert_close(got, ref, n, 1e-4, "newton-schulz");
    /* in place (out = g) gives the same */
    kern_cuda_newton_schulz5(dg, dg, rows, cols, 5, ds, tcu_ctx());
    float *inplace = tcu_download(dg, n, KERN_DTYPE_F32);
    ck_assert_mem_eq(inplace, got, n * sizeof(float));
    free(inplace);
    free(got);
    free(g);
    free(ref);
    free(scratch);
    tcu_free(dg);
    tcu_free(dout);
    tcu_free(ds);
}
END_TEST

/* --- AdamW and Muon, error feedback off / on --- */

START_TEST(test_adamw_two_steps) {
    KernOptimParams op = optim_params(KERN_OPTIM_ADAMW, _i);
    OptPair         o;
    pair_init(&o, &op);
    pair_steps(&o, 2, 1e-3f);
    pair_compare(&o, 1e-4, 1e-5);
    pair_clear(&o);
}
END_TEST

START_TEST(test_muon_two_steps) {
    KernOptimParams op = optim_params(KERN_OPTIM_MUON, _i);
    OptPair         o;
    pair_init(&o, &op);
    pair_steps(&o, 2, 1e-3f);
    /* momentum is element-wise; the updates pass through Newton-Schulz */
    pair_compare(&o, 1e-4, 1e-5);
    pair_clear(&o);
}
END_TEST

/* --- the device-side gate --- */

/* A non-finite norm (_i 0) or a poisoned step (_i 1) leaves params, moments and t alone. */
START_TEST(test_gate_skips) {
    KernOptimParams op = optim_params(_i ? KERN_OPTIM_MUON : KERN_OPTIM_ADAMW, 1);
    OptPair         o;
    pair_init(&o, &op);
    pair_steps(&o, 1, 1e-3f); /* both at t 1 */
    float  *before = tcu_download(o.dparams, o.n, KERN_DTYPE_F32);
    double *dsq = tcu_alloc_poisoned(sizeof(double));
    double  sq = _i ? 4.0 : NAN;
    KERN_CUDA_CHECK(cudaMemcpyAsync(dsq, &sq, sizeof sq, cudaMemcpyHostToDevice,
                                    kern_cuda_ctx_stream(tcu_ctx())));
    KernCudaStepGate gate = {.sq_norm = dsq, .grad_clip = 0.0f, .poison = _i};
    uint64_t         gemms0 = 0, gemms1 = 0;
    kern_cuda_ctx_gemm_counts(tcu_ctx(), &gemms0, NULL);
    kern_cuda_optim_step(o.gpu, o.dparams, o.dgrads[1], 1e-3f, &gate, tcu_ctx());
    kern_cuda_ctx_gemm_counts(tcu_ctx(), &gemms1, NULL);
    KernCudaOptimStatus st = status(&o);
    ck_assert_int_eq(st.applied, 0);
    ck_assert_int_eq(st.t, 1);
    /* a poisoned step (known on the host) runs no Newton-Schulz product */
    if (_i)
        ck_assert_uint_eq(gemms1, gemms0);
    float *after = tcu_download(o.dparams, o.n, KERN_DTYPE_F32);
    ck_assert_mem_eq(after, before, o.n * sizeof(float));
    pair_compare(&o, 1e-4, 1e-5); /* still equal to the CPU after its one step */
    free(before);
    free(after);
    tcu_free(dsq);
    pair_clear(&o);
}
END_TEST

/* Clipping: the gate's factor equals kern_clip_factor() of the device norm, and the step
 * equals the CPU step on gradients scaled by it. */
START_TEST(test_gate_clip) {
    KernOptimParams op = optim_params(_i ? KERN_OPTIM_MUON : KERN_OPTIM_ADAMW, 0);
    OptPair         o;
    pair_init(&o, &op);
    double *dsq = tcu_alloc_poisoned(sizeof(double));
    KERN_CUDA_CHECK(cudaMemsetAsync(dsq, 0, sizeof(double), kern_cuda_ctx_stream(tcu_ctx())));
    kern_cuda_sq_norm_acc(dsq, o.dgrads[0], o.n, tcu_ctx());
    double norm = sqrt(kern_grad_sq_norm(o.g[0], o.n));
    float  clip = (float)(0.5 * norm);
    float  factor = kern_clip_factor(norm, clip);
    ck_assert_float_lt(factor, 0.51f);
    KernCudaStepGate gate = {.sq_norm = dsq, .grad_clip = clip, .poison = 0};
    kern_cuda_optim_step(o.gpu, o.dparams, o.dgrads[0], 1e-3f, &gate, tcu_ctx());
    KernCudaOptimStatus st = status(&o);
    ck_assert_int_eq(st.applied, 1);
    ck_assert_int_eq(st.t, 1);
    ck_assert_double_eq_tol(st.grad_norm, norm, 1e-9 * norm);
    ck_assert_float_eq_tol(st.factor, factor, 1e-6f * factor);
    kern_grad_scale(o.g[0], o.n, factor);
    kern_optim_step(o.cpu, gpt2_slice_params(o.slice), o.g[0], 1e-3f);
    pair_compare(&o, 1e-4, 1e-5);
    tcu_free(dsq);
    pair_clear(&o);
}
END_TEST

/* Saving the state after one step and loading it into a fresh optimizer continues the run
 * bit for bit. */
START_TEST(test_state_roundtrip) {
    KernOptimParams op = optim_params(_i ? KERN_OPTIM_MUON : KERN_OPTIM_ADAMW, 1);
    OptPair         o;
    pair_init(&o, &op);
    pair_steps(&o, 1, 1e-3f);
    KernCudaOptim *fresh = kern_cuda_optim_new(&op, o.table);
    ck_assert_ptr_nonnull(fresh);
    for (int i = 0; i < gpt2_table_n_tensors(o.table); i++) {
        size_t n = gpt2_table_tensor(o.table, i)->numel;
        float *a = kern_xmalloc(n * sizeof(float)), *b = kern_xmalloc(n * sizeof(float));
        kern_cuda_optim_tensor_state_to_host(o.gpu, i, a, b, tcu_ctx());
        kern_cuda_optim_tensor_state_from_host(fresh, i, a, b, tcu_ctx());
        free(a);
        free(b);
    }
    float *prev = kern_xmalloc(o.n * sizeof(float));
    ck_assert_int_eq(kern_cuda_optim_prev_update_to_host(o.gpu, prev, tcu_ctx()), 1);
    ck_assert_int_eq(kern_cuda_optim_prev_update_from_host(fresh, prev, tcu_ctx()), 1);
    kern_cuda_optim_set_n_steps(fresh, kern_cuda_optim_n_steps(o.gpu, tcu_ctx()), tcu_ctx());
    float *copy = tcu_upload(NULL, o.n, KERN_DTYPE_F32);
    KERN_CUDA_CHECK(cudaMemcpyAsync(copy, o.dparams, o.n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    kern_cuda_ctx_stream(tcu_ctx())));
    kern_cuda_optim_step(o.gpu, o.dparams, o.dgrads[1], 1e-3f, NULL, tcu_ctx());
    kern_cuda_optim_step(fresh, copy, o.dgrads[1], 1e-3f, NULL, tcu_ctx());
    float *a = tcu_download(o.dparams, o.n, KERN_DTYPE_F32),
          *b = tcu_download(copy, o.n, KERN_DTYPE_F32);
    ck_assert_mem_eq(a, b, o.n * sizeof(float));
    ck_assert_int_eq(kern_cuda_optim_n_steps(fresh, tcu_ctx()), 2);
    free(a);
    free(b);
    free(prev);
    tcu_free(copy);
    kern_cuda_optim_free(fresh);
    pair_clear(&o);
}
END_TEST

START_TEST(test_grad_scale) {
    enum { N = 5000 };
    float x[N];
    tcu_randn(x, N, 1.0f, 50);
    float *d = tcu_upload(x, N, KERN_DTYPE_F32);
    kern_cuda_grad_scale(d, N, 0.375f, kern_cuda_ctx_stream(tcu_ctx()));
    kern_grad_scale(x, N, 0.375f);
    float *got = tcu_download(d, N, KERN_DTYPE_F32);
    ck_assert_mem_eq(got, x, sizeof x);
    free(got);
    tcu_free(d);
}
END_TEST

START_TEST(test_device_bytes) {
    /* AdamW: m and v for every float; Muon: one momentum per hidden float plus NS scratch;
     * error feedback adds n_params floats */
    Gpt2Table      *t = gpt2_table_new(&tiny);
    size_t          n = gpt2_table_n_params(t);
    KernOptimParams a = optim_params(KERN_OPTIM_ADAMW, 0), ae = optim_params(KERN_OPTIM_ADAMW, 1);
    size_t ba = kern_cuda_optim_device_bytes(&a, t), bae = kern_cuda_optim_device_bytes(&ae, t);
    ck_assert_uint_ge(ba, 2 * n * sizeof(float));
    ck_assert_uint_ge(bae - ba, n * sizeof(float));
    ck_assert_uint_le(bae - ba, n * sizeof(float) + 255);
    gpt2_table_free(t);
}
END_TEST

static Suite *optim_suite(void) {
    Suite *s = suite_create("optim-cuda");
    TCase *tc = tcase_create("optim");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_newton_schulz, 0, 3);
    tcase_add_loop_test(tc, test_adamw_two_steps, 0, 2);
    tcase_add_loop_test(tc, test_muon_two_steps, 0, 2);
    tcase_add_loop_test(tc, test_gate_skips, 0, 2);
    tcase_add_loop_test(tc, test_gate_clip, 0, 2);
    tcase_add_loop_test(tc, test_state_roundtrip, 0, 2);
    tcase_add_test(tc, test_grad_scale);
    tcase_add_test(tc, test_device_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tcu_main(optim_suite());
}
