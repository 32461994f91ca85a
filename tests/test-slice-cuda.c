/* SPDX-License-Identifier: MIT
 * test-slice-cuda.c: the CUDA slice (kernels/gpt2-slice-cuda.h) against the CPU slice on a
 * tiny GPT-2 (L 2, C 16, NH 2, T 8, V 37, Vp 128, B 2) with perturbed weights, in fp32 and bf16
 * (each test loops over both): tensor table and init, one F + BW of the whole model (loss and
 * every gradient, untied and tied head), the model split into three slices chained through
 * device buffers, B-then-W against BW and run-to-run determinism (bitwise), activation slots,
 * and the host copy helpers.
 * Tolerances relative to the largest magnitude (per tensor for gradients): fp32 loss 1e-5,
 * gradients 1e-4. bf16, against the CPU in fp32 on the same bf16-rounded weights: every
 * activation is stored in bf16 (about 2^-9 relative each, ~25 roundings along a block's
 * forward and backward paths, partly averaging out): loss 1e-2, gradients 5e-2. These bf16
 * bounds are an estimate, not yet checked on a device.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-slice-cuda.h"
#include "gpt2-slice.h"
#include "gpt2-table.h"
#include "kern-check.h"
#include "kern-util.h"
#include "test-cuda-util.h"

enum { TL = 2, TC = 16, TNH = 2, TT = 8, TV = 37, TVP = 128, TB = 2, TN = TB * TT };

static const Gpt2Config tiny = {.L = TL, .C = TC, .NH = TNH, .T = TT, .V = TV, .Vp = TVP};

static Gpt2SliceParams part(int lb, int le, int emb, int head, int tie) {
    Gpt2SliceParams p = {.model = tiny,
                         .layer_begin = lb,
                         .layer_end = le,
                         .has_embedding = emb,
                         .has_head = head,
                         .tie_head = tie,
                         .B = TB,
                         .n_act_slots = 2};
    return p;
}

static double tol_loss(KernDtype dt) {
    return dt == KERN_DTYPE_F32 ? 1e-5 : 1e-2;
}

static double tol_grad(KernDtype dt) {
    return dt == KERN_DTYPE_F32 ? 1e-4 : 5e-2;
}

/* GPT-2 init moved away from its near-uniform start so every gradient is sizeable: weights
 * x10, gains 1 +- 0.3, biases +- 0.1; then rounded to what @dt holds. (transfer full) */
static float *model_params(const Gpt2Table *t, KernDtype dt) {
    size_t   n = gpt2_table_n_params(t);
    float   *p = kern_xmalloc(n * sizeof(float));
    uint64_t rng = kern_rng_seed(77);
    for (int i = 0; i < gpt2_table_n_tensors(t); i++) {
        const Gpt2Tensor *x = gpt2_table_tensor(t, i);
        float            *w = p + x->offset;
        gpt2_table_init_tensor(t, i, 42, w);
        for (size_t j = 0; j < x->numel; j++) {
            float u = 2.0f * kern_rng_uniform(&rng) - 1.0f;
            if (x->kind == GPT2_TENSOR_GAIN)
                w[j] = 1.0f + 0.3f * u;
            else if (x->kind == GPT2_TENSOR_BIAS)
                w[j] = 0.1f * u;
            else
                w[j] *= 10.0f;
        }
    }
    tcu_round(p, n, dt);
    return p;
}

/* Copies the tensors of @dst_table that @src_table also holds, by name. */
static void copy_by_name(float *dst, const Gpt2Table *dst_table, const float *src,
                         const Gpt2Table *src_table) {
    for (int i = 0; i < gpt2_table_n_tensors(dst_table); i++) {
        const Gpt2Tensor *d = gpt2_table_tensor(dst_table, i);
        const Gpt2Tensor *s = gpt2_table_tensor_by_name(src_table, d->name);
        ck_assert_ptr_nonnull(s);
        memcpy(dst + d->offset, src + s->offset, d->numel * sizeof(float));
    }
}

/* A GPU slice of @p whose master params are @full's (the whole model's) by name. */
static Gpt2CudaSlice *gpu_slice(Gpt2SliceParams p, KernDtype dt, int flash, const float *full,
                                const Gpt2Table *full_table) {
    Gpt2CudaSliceParams cp = {.slice = p, .dtype = dt, .flash_attention = flash};
    ck_assert_ptr_null(gpt2_cuda_slice_params_check(&cp));
    Gpt2CudaSlice *s = gpt2_cuda_slice_new(&cp);
    ck_assert_ptr_nonnull(s);
    const Gpt2Table *t = gpt2_cuda_slice_table(s);
    float           *host = kern_xmalloc(gpt2_table_n_params(t) * sizeof(float));
    copy_by_name(host, t, full, full_table);
    gpt2_cuda_slice_from_host(s, GPT2_CUDA_PARAMS, host, tcu_ctx());
    gpt2_cuda_slice_zero_grads(s, tcu_ctx());
    free(host);
    return s;
}

static Gpt2Slice *cpu_slice(Gpt2SliceParams p, const float *full, const Gpt2Table *full_table) {
    Gpt2Slice *s = gpt2_slice_new(&p);
    Gpt2Table *t = gpt2_table_new(&p);
    copy_by_name(gpt2_slice_params(s), t, full, full_table);
    gpt2_table_free(t);
    gpt2_slice_zero_grads(s);
    return s;
}

static void make_batch(int32_t *tokens, int32_t *targets, uint64_t seed) {
    uint64_t rng = kern_rng_seed(seed);
    for (int i = 0; i < TN; i++) {
        tokens[i] = (int32_t)(kern_rng_u32(&rng) % TV);
        targets[i] = (int32_t)(kern_rng_u32(&rng) % TV);
    }
}

static float download_loss(const float *dloss) {
    float *h = tcu_download(dloss, 1, KERN_DTYPE_F32);
    float  v = h[0];
    free(h);
    return v;
}

/* Every gradient of GPU slice @g against the CPU slice @c's tensor of the same name. */
static void compare_grads(Gpt2CudaSlice *g, Gpt2Slice *c, double tolerance) {
    const Gpt2Table *t = gpt2_cuda_slice_table(g);
    float           *h = kern_xmalloc(gpt2_table_n_params(t) * sizeof(float));
    gpt2_cuda_slice_to_host(g, GPT2_CUDA_GRADS, h, tcu_ctx());
    for (int i = 0; i < gpt2_table_n_tensors(t); i++) {
        const Gpt2Tensor *x = gpt2_table_tensor(t, i);
        const Gpt2Tensor *y = gpt2_slice_tensor_by_name(c, x->name);
        ck_assert_ptr_nonnull(y);
        tcu_assert_close(h + x->offset, gpt2_slice_grads(c) + y->offset, x->numel, tolerance,
                         x->name);
    }
    free(h);
}

/* --- table and init --- */

START_TEST(test_table_and_init) {
    KernDtype           dt = (KernDtype)_i;
    Gpt2SliceParams     p = part(0, TL, 1, 1, 0);
    Gpt2CudaSliceParams cp = {.slice = p, .dtype = dt};
    Gpt2CudaSlice      *g = gpt2_cuda_slice_new(&cp);
    Gpt2Slice          *c = gpt2_slice_new(&p);
    ck_assert_ptr_nonnull(g);
    const Gpt2Table *t = gpt2_cuda_slice_table(g);
    ck_assert_uint_eq(gpt2_cuda_slice_n_params(g), gpt2_slice_n_params(c));
    ck_assert_int_eq(gpt2_table_n_tensors(t), gpt2_slice_n_tensors(c));
    for (int i = 0; i < gpt2_table_n_tensors(t); i++) {
        ck_assert_str_eq(gpt2_table_tensor(t, i)->name, gpt2_slice_tensor(c, i)->name);
        ck_assert_uint_eq(gpt2_table_tensor(t, i)->offset, gpt2_slice_tensor(c, i)->offset);
    }
    gpt2_slice_init_params(c, 1234);
    gpt2_cuda_slice_init_params(g, 1234, tcu_ctx());
    size_t n = gpt2_slice_n_params(c);
    float *h = kern_xmalloc(n * sizeof(float));
    gpt2_cuda_slice_to_host(g, GPT2_CUDA_PARAMS, h, tcu_ctx());
    ck_assert_mem_eq(h, gpt2_slice_params(c), n * sizeof(float));
    /* the compute params are the master converted to the dtype */
    float *compute = tcu_download(gpt2_cuda_slice_compute_params(g), n, dt);
    tcu_round(h, n, dt);
    ck_assert_mem_eq(compute, h, n * sizeof(float));
    /* zeroed grads */
    gpt2_cuda_slice_zero_grads(g, tcu_ctx());
    gpt2_cuda_slice_to_host(g, GPT2_CUDA_GRADS, h, tcu_ctx());
    for (size_t i = 0; i < n; i++)
        ck_assert_float_eq(h[i], 0.0f);
    free(compute);
    free(h);
    gpt2_slice_free(c);
    gpt2_cuda_slice_free(g);
}
END_TEST

START_TEST(test_tensor_copies) {
    KernDtype           dt = (KernDtype)_i;
    Gpt2CudaSliceParams cp = {.slice = part(0, TL, 1, 1, 0), .dtype = dt};
    Gpt2CudaSlice      *g = gpt2_cuda_slice_new(&cp);
    ck_assert_ptr_nonnull(g);
    const Gpt2Tensor *t =
        gpt2_table_tensor_by_name(gpt2_cuda_slice_table(g), "h.1.mlp.c_fc.weight");
    float *in = kern_xmalloc(t->numel * sizeof(float));
    float *out = kern_xmalloc(t->numel * sizeof(float));
    tcu_randn(in, t->numel, 1.0f, 5);
    for (int which = 0; which < 2; which++) {
        ck_assert_int_eq(
            gpt2_cuda_slice_tensor_from_host(g, (Gpt2CudaArena)which, t->name, in, tcu_ctx()), 1);
        ck_assert_int_eq(
            gpt2_cuda_slice_tensor_to_host(g, (Gpt2CudaArena)which, t->name, out, tcu_ctx()), 1);
        ck_assert_mem_eq(out, in, t->numel * sizeof(float));
    }
    ck_assert_int_eq(
        gpt2_cuda_slice_tensor_to_host(g, GPT2_CUDA_PARAMS, "h.7.ln_1.weight", out, tcu_ctx()), 0);
    /* writing a param refreshed its compute copy */
    float *compute =
        tcu_download(gpt2_cuda_slice_compute_params(g), gpt2_cuda_slice_n_params(g), dt);
    tcu_round(in, t->numel, dt);
    ck_assert_mem_eq(compute + t->offset, in, t->numel * sizeof(float));
    free(compute);
    free(in);
    free(out);
    gpt2_cuda_slice_free(g);
}
END_TEST

/* --- whole model --- */

/* One F + BW of the whole model @p on the CPU and on the GPU (slot 1, loss scale 0.25):
 * loss and every gradient within the bounds of @dt. */
static void check_whole_model(Gpt2SliceParams p, KernDtype dt, int flash) {
    Gpt2Table     *ft = gpt2_table_new(&p);
    float         *full = model_params(ft, dt);
    Gpt2Slice     *c = cpu_slice(p, full, ft);
    Gpt2CudaSlice *g = gpu_slice(p, dt, flash, full, ft);
    int            n = p.B * p.model.T;
    int32_t       *tokens = kern_xmalloc((size_t)n * sizeof(int32_t));
    int32_t       *targets = kern_xmalloc((size_t)n * sizeof(int32_t));
    uint64_t       rng = kern_rng_seed(3);
    for (int i = 0; i < n; i++) {
        tokens[i] = (int32_t)(kern_rng_u32(&rng) % (uint32_t)p.model.V);
        targets[i] = (int32_t)(kern_rng_u32(&rng) % (uint32_t)p.model.V);
    }
    float cpu_loss;
    gpt2_slice_forward(c, gpt2_slice_params(c), 0, tokens, NULL, targets, NULL, &cpu_loss);
    gpt2_slice_backward(c, gpt2_slice_params(c), 0, NULL, 0.25f, NULL, gpt2_slice_grads(c), NULL);
    float *dloss = tcu_upload(NULL, 1, KERN_DTYPE_F32);
    void  *w = gpt2_cuda_slice_compute_params(g);
    gpt2_cuda_slice_forward(g, w, 1, tokens, NULL, targets, NULL, dloss, tcu_ctx());
    gpt2_cuda_slice_backward(g, w, 1, NULL, 0.25f, NULL, gpt2_cuda_slice_grads(g), tcu_ctx());
    float gpu_loss = download_loss(dloss);
    ck_assert_msg(fabs(gpu_loss - cpu_loss) <= tol_loss(dt) * fabs(cpu_loss),
                  "loss gpu %.7g cpu %.7g", gpu_loss, cpu_loss);
    compare_grads(g, c, tol_grad(dt));
    free(tokens);
    free(targets);
    tcu_free(dloss);
    gpt2_cuda_slice_free(g);
    gpt2_slice_free(c);
    free(full);
    gpt2_table_free(ft);
}

/* _i: dtype + 2 * tie_head */
START_TEST(test_whole_model) {
    check_whole_model(part(0, TL, 1, 1, _i / 2), (KernDtype)(_i % 2), 0);
}
END_TEST

/* The model in three GPU slices (embedding + block 0, block 1, head without blocks) chained
 * through device buffers gives the whole CPU model's loss and gradients. */
START_TEST(test_split_slices) {
    KernDtype       dt = (KernDtype)_i;
    Gpt2SliceParams whole = part(0, TL, 1, 1, 0);
    Gpt2SliceParams parts[3] = {part(0, 1, 1, 0, 0), part(1, 2, 0, 0, 0), part(2, 2, 0, 1, 0)};
    Gpt2Table      *ft = gpt2_table_new(&whole);
    float          *full = model_params(ft, dt);
    Gpt2Slice      *c = cpu_slice(whole, full, ft);
    Gpt2CudaSlice  *g[3];
    for (int k = 0; k < 3; k++)
        g[k] = gpu_slice(parts[k], dt, 0, full, ft);
    int32_t tokens[TN], targets[TN];
    make_batch(tokens, targets, 4);
    float cpu_loss;
    gpt2_slice_forward(c, gpt2_slice_params(c), 0, tokens, NULL, targets, NULL, &cpu_loss);
    gpt2_slice_backward(c, gpt2_slice_params(c), 0, NULL, 1.0f, NULL, gpt2_slice_grads(c), NULL);

    KernCudaCtx *ctx = tcu_ctx();
    void        *x1 = tcu_upload(NULL, TN * TC, dt), *x2 = tcu_upload(NULL, TN * TC, dt);
    float       *dloss = tcu_upload(NULL, 1, KERN_DTYPE_F32);
    gpt2_cuda_slice_forward(g[0], gpt2_cuda_slice_compute_params(g[0]), 0, tokens, NULL, NULL, x1,
                            NULL, ctx);
    gpt2_cuda_slice_forward(g[1], gpt2_cuda_slice_compute_params(g[1]), 0, NULL, x1, NULL, x2, NULL,
                            ctx);
    gpt2_cuda_slice_forward(g[2], gpt2_cuda_slice_compute_params(g[2]), 0, NULL, x2, targets, NULL,
                            dloss, ctx);
    /* backward: dx_in written over the dx_out buffer each time */
    gpt2_cuda_slice_backward(g[2], gpt2_cuda_slice_compute_params(g[2]), 0, NULL, 1.0f, x2,
                             gpt2_cuda_slice_grads(g[2]), ctx);
    gpt2_cuda_slice_backward(g[1], gpt2_cuda_slice_compute_params(g[1]), 0, x2, 1.0f, x2,
                             gpt2_cuda_slice_grads(g[1]), ctx);
    gpt2_cuda_slice_backward(g[0], gpt2_cuda_slice_compute_params(g[0]), 0, x2, 1.0f, NULL,
                             gpt2_cuda_slice_grads(g[0]), ctx);
    float gpu_loss = download_loss(dloss);
    ck_assert_msg(fabs(gpu_loss - cpu_loss) <= tol_loss(dt) * fabs(cpu_loss),
                  "loss gpu %.7g cpu %.7g", gpu_loss, cpu_loss);
    for (int k = 0; k < 3; k++)
        compare_grads(g[k], c, tol_grad(dt));
    tcu_free(x1);
    tcu_free(x2);
    tcu_free(dloss);
    for (int k = 0; k < 3; k++)
        gpt2_cuda_slice_free(g[k]);
    gpt2_slice_free(c);
    free(full);
    gpt2_table_free(ft);
}
END_TEST

/* --- bitwise properties of the GPU slice --- */

/* Runs F then (B, W) or BW on slot @slot into zeroed grads; returns the grads and the loss. */
static float *run_step(Gpt2CudaSlice *g, int slot, const int32_t *tokens, const int32_t *targets,
                       int split, float *loss) {
    KernCudaCtx *ctx = tcu_ctx();
    float       *dloss = tcu_upload(NULL, 1, KERN_DTYPE_F32);
    void        *w = gpt2_cuda_slice_compute_params(g);
    gpt2_cuda_slice_zero_grads(g, ctx);
    gpt2_cuda_slice_forward(g, w, slot, tokens, NULL, targets, NULL, dloss, ctx);
    if (split) {
        gpt2_cuda_slice_backward_input(g, w, slot, NULL, 1.0f, NULL, ctx);
        gpt2_cuda_slice_backward_weight(g, slot, gpt2_cuda_slice_grads(g), ctx);
    } else {
        gpt2_cuda_slice_backward(g, w, slot, NULL, 1.0f, NULL, gpt2_cuda_slice_grads(g), ctx);
    }
    *loss = download_loss(dloss);
    tcu_free(dloss);
    float *h = kern_xmalloc(gpt2_cuda_slice_n_params(g) * sizeof(float));
    gpt2_cuda_slice_to_host(g, GPT2_CUDA_GRADS, h, ctx);
    return h;
}

/* B then W equals BW, and the same step twice gives the same bits. */
START_TEST(test_bitwise_b_then_w_and_determinism) {
    KernDtype       dt = (KernDtype)_i;
    Gpt2SliceParams p = part(0, TL, 1, 1, 0);
    Gpt2Table      *ft = gpt2_table_new(&p);
    float          *full = model_params(ft, dt);
    Gpt2CudaSlice  *g = gpu_slice(p, dt, 0, full, ft);
    size_t          n = gpt2_cuda_slice_n_params(g);
    int32_t         tokens[TN], targets[TN];
    make_batch(tokens, targets, 5);
    float  l1, l2, l3;
    float *a = run_step(g, 0, tokens, targets, 0, &l1);
    float *b = run_step(g, 0, tokens, targets, 1, &l2);
    float *c = run_step(g, 0, tokens, targets, 0, &l3);
    ck_assert_mem_eq(&l1, &l2, sizeof l1);
    ck_assert_mem_eq(&l1, &l3, sizeof l1);
    ck_assert_mem_eq(a, b, n * sizeof(float));
    ck_assert_mem_eq(a, c, n * sizeof(float));
    free(a);
    free(b);
    free(c);
    gpt2_cuda_slice_free(g);
    free(full);
    gpt2_table_free(ft);
}
END_TEST

/* Two micro-batches in flight in slots 0 and 1 (F, F, then B/W in reverse) give bitwise the
 * grads and losses of each run alone. */
START_TEST(test_slots) {
    KernDtype       dt = (KernDtype)_i;
    Gpt2SliceParams p = part(0, TL, 1, 1, 0);
    Gpt2Table      *ft = gpt2_table_new(&p);
    float          *full = model_params(ft, dt);
    Gpt2CudaSlice  *g = gpu_slice(p, dt, 0, full, ft);
    KernCudaCtx    *ctx = tcu_ctx();
    size_t          n = gpt2_cuda_slice_n_params(g);
    int32_t         tok[2][TN], tgt[2][TN];
    make_batch(tok[0], tgt[0], 6);
    make_batch(tok[1], tgt[1], 7);
    float  alone_loss[2];
    float *alone[2] = {run_step(g, 0, tok[0], tgt[0], 0, &alone_loss[0]),
                       run_step(g, 1, tok[1], tgt[1], 0, &alone_loss[1])};
    void  *w = gpt2_cuda_slice_compute_params(g);
    float *dloss = tcu_upload(NULL, 2, KERN_DTYPE_F32);
    float *dgrads[2] = {tcu_upload(NULL, n, KERN_DTYPE_F32), tcu_upload(NULL, n, KERN_DTYPE_F32)};
    for (int k = 0; k < 2; k++) {
        KERN_CUDA_CHECK(
            cudaMemsetAsync(dgrads[k], 0, n * sizeof(float), kern_cuda_ctx_stream(ctx)));
        gpt2_cuda_slice_forward(g, w, k, tok[k], NULL, tgt[k], NULL, dloss + k, ctx);
    }
    for (int k = 1; k >= 0; k--) {
        gpt2_cuda_slice_backward_input(g, w, k, NULL, 1.0f, NULL, ctx);
        gpt2_cuda_slice_backward_weight(g, k, dgrads[k], ctx);
    }
    float *losses = tcu_download(dloss, 2, KERN_DTYPE_F32);
    for (int k = 0; k < 2; k++) {
        float *h = tcu_download(dgrads[k], n, KERN_DTYPE_F32);
        ck_assert_mem_eq(h, alone[k], n * sizeof(float));
        ck_assert_mem_eq(&losses[k], &alone_loss[k], sizeof(float));
        free(h);
        free(alone[k]);
        tcu_free(dgrads[k]);
    }
    free(losses);
    tcu_free(dloss);
    gpt2_cuda_slice_free(g);
    free(full);
    gpt2_table_free(ft);
}
END_TEST

/* The fused attention in a bf16 slice with head size 32 (C 64, NH 2, T 24: one partial
 * tile) against the CPU, with the bf16 bounds. */
START_TEST(test_flash_slice) {
    Gpt2SliceParams p = part(0, TL, 1, 1, 0);
    p.model.C = 64;
    p.model.T = 24;
    check_whole_model(p, KERN_DTYPE_BF16, 1);
}
END_TEST

static Suite *slice_suite(void) {
    Suite *s = suite_create("slice-cuda");
    TCase *tc = tcase_create("slice");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_table_and_init, 0, 2);
    tcase_add_loop_test(tc, test_tensor_copies, 0, 2);
    tcase_add_loop_test(tc, test_whole_model, 0, 4);
    tcase_add_loop_test(tc, test_split_slices, 0, 2);
    tcase_add_loop_test(tc, test_bitwise_b_then_w_and_determinism, 0, 2);
    tcase_add_loop_test(tc, test_slots, 0, 2);
    tcase_add_test(tc, test_flash_slice);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tcu_main(slice_suite());
}
