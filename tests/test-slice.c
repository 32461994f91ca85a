/* SPDX-License-Identifier: MIT
 * test-slice.c: the pipeline-stage model slice (kernels/gpt2-slice.h) and the optimizers
 * (kernels/optim-cpu.h) on a tiny GPT-2 (L 2, C 16, NH 2, T 8, V 37, Vp 128, B 2): tensor
 * table, init, finite-difference gradients of the whole slice, padded-vocabulary gradients,
 * split-at-every-boundary and B-then-W bitwise equivalences, determinism (also across thread
 * counts, on a model big enough to split every loop), AdamW, Muon
 * (Newton-Schulz), error feedback, the optimizer state round trip, the learning-rate schedule
 * and clipping.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-slice.h"
#include "kern-pool.h"
#include "kern-util.h"
#include "optim-cpu.h"

enum { TL = 2, TC = 16, TNH = 2, TT = 8, TV = 37, TVP = 128, TB = 2, TN = TB * TT };

static const Gpt2Config tiny = {.L = TL, .C = TC, .NH = TNH, .T = TT, .V = TV, .Vp = TVP};

static Gpt2Slice *slice_make(int lb, int le, int emb, int head, int tie, int slots) {
    Gpt2SliceParams p = {.model = tiny,
                         .layer_begin = lb,
                         .layer_end = le,
                         .has_embedding = emb,
                         .has_head = head,
                         .tie_head = tie,
                         .B = TB,
                         .n_act_slots = slots};
    Gpt2Slice      *s = gpt2_slice_new(&p);
    gpt2_slice_init_params(s, 42);
    return s;
}

static void make_batch(int32_t *tokens, int32_t *targets, uint64_t seed) {
    uint64_t rng = kern_rng_seed(seed);
    for (int i = 0; i < TN; i++) {
        tokens[i] = (int32_t)(kern_rng_u32(&rng) % TV);
        targets[i] = (int32_t)(kern_rng_u32(&rng) % TV);
    }
}

/* Forward + fused backward of one micro-batch on a whole-model slice; returns the loss. */
static float full_step(Gpt2Slice *s, const int32_t *tokens, const int32_t *targets, float scale) {
    float loss;
    gpt2_slice_forward(s, gpt2_slice_params(s), 0, tokens, NULL, targets, NULL, &loss);
    gpt2_slice_backward(s, gpt2_slice_params(s), 0, NULL, scale, NULL, gpt2_slice_grads(s), NULL);
    return loss;
}

static float full_loss(Gpt2Slice *s, const int32_t *tokens, const int32_t *targets) {
    float loss;
    gpt2_slice_forward(s, gpt2_slice_params(s), 0, tokens, NULL, targets, NULL, &loss);
    return loss;
}

/* Moves the tiny GPT-2 init away from its near-uniform start so every gradient is sizeable:
 * weights x10 (std 0.2), gains 1 +- 0.3, biases +- 0.1. */
static void perturb_params(Gpt2Slice *s, uint64_t seed) {
    uint64_t rng = kern_rng_seed(seed);
    float   *p = gpt2_slice_params(s);
    for (int i = 0; i < gpt2_slice_n_tensors(s); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(s, i);
        for (size_t j = 0; j < t->numel; j++) {
            float  u = 2.0f * kern_rng_uniform(&rng) - 1.0f;
            float *w = p + t->offset + j;
            if (t->kind == GPT2_TENSOR_GAIN)
                *w = 1.0f + 0.3f * u;
            else if (t->kind == GPT2_TENSOR_BIAS)
                *w = 0.1f * u;
            else
                *w *= 10.0f;
        }
    }
}

/* --- tensor table and init --- */

START_TEST(test_slice_table) {
    Gpt2Slice *s = slice_make(0, TL, 1, 1, 0, 1);
    size_t     block = 12 * TC * TC + 13 * TC;
    size_t     expect = 2 * (size_t)TVP * TC + (size_t)TT * TC + TL * block + 2 * TC;
    ck_assert_uint_eq(gpt2_slice_n_params(s), expect);
    ck_assert_int_eq(gpt2_slice_n_tensors(s), 2 + 12 * TL + 3);
    size_t off = 0;
    for (int i = 0; i < gpt2_slice_n_tensors(s); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(s, i);
        ck_assert_uint_eq(t->offset, off);
        off += t->numel;
    }
    ck_assert_uint_eq(off, expect);
    /* the arenas' sizes: params and grads 4 bytes per parameter, the (B, T, C) scratch */
    Gpt2SliceSizes sizes;
    gpt2_slice_sizes(s, &sizes);
    ck_assert_uint_eq(sizes.params_bytes, 4 * expect);
    ck_assert_uint_eq(sizes.grads_bytes, 4 * expect);
    ck_assert_uint_eq(sizes.scratch_bytes, 4 * (size_t)TN * TC);
    ck_assert_uint_gt(sizes.acts_bytes, 0);
    ck_assert_uint_eq(sizes.total_bytes, sizes.params_bytes + sizes.grads_bytes + sizes.acts_bytes +
                                             sizes.scratch_bytes);
    ck_assert_str_eq(gpt2_slice_tensor(s, 0)->name, "wte.weight");
    const Gpt2Tensor *qkv = gpt2_slice_tensor_by_name(s, "h.1.attn.c_attn.weight");
    ck_assert_ptr_nonnull(qkv);
    ck_assert_int_eq(qkv->shape[0], 3 * TC);
    ck_assert_int_eq(qkv->shape[1], TC);
    ck_assert_int_eq(qkv->kind, GPT2_TENSOR_HIDDEN);
    const Gpt2Tensor *fcp = gpt2_slice_tensor_by_name(s, "h.0.mlp.c_proj.weight");
    ck_assert_int_eq(fcp->shape[0], TC);
    ck_assert_int_eq(fcp->shape[1], 4 * TC);
    ck_assert_int_eq(gpt2_slice_tensor_by_name(s, "lm_head.weight")->kind, GPT2_TENSOR_HEAD);
    ck_assert_int_eq(gpt2_slice_tensor_by_name(s, "ln_f.bias")->is_matrix, 0);
    gpt2_slice_free(s);

    /* a middle slice names its blocks globally and holds nothing else; tied head: no lm_head */
    s = slice_make(1, 2, 0, 0, 0, 1);
    ck_assert_int_eq(gpt2_slice_n_tensors(s), 12);
    ck_assert_str_eq(gpt2_slice_tensor(s, 0)->name, "h.1.ln_1.weight");
    ck_assert_ptr_null(gpt2_slice_tensor_by_name(s, "wte.weight"));
    gpt2_slice_free(s);
    s = slice_make(0, TL, 1, 1, 1, 1);
    ck_assert_ptr_null(gpt2_slice_tensor_by_name(s, "lm_head.weight"));
    ck_assert_uint_eq(gpt2_slice_n_params(s), expect - (size_t)TVP * TC);
    gpt2_slice_free(s);
}
END_TEST

START_TEST(test_slice_init) {
    Gpt2Slice *full = slice_make(0, TL, 1, 1, 0, 1);
    Gpt2Slice *parts[3] = {slice_make(0, 1, 1, 0, 0, 1), slice_make(1, 2, 0, 0, 0, 1),
                           slice_make(2, 2, 0, 1, 0, 1)};
    /* every split gives the same full-model weights, tensor by tensor */
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < gpt2_slice_n_tensors(parts[k]); i++) {
            const Gpt2Tensor *t = gpt2_slice_tensor(parts[k], i);
            const Gpt2Tensor *f = gpt2_slice_tensor_by_name(full, t->name);
            ck_assert_ptr_nonnull(f);
            ck_assert_mem_eq(gpt2_slice_params(parts[k]) + t->offset,
                             gpt2_slice_params(full) + f->offset, t->numel * sizeof(float));
        }
    }
    const float *p = gpt2_slice_params(full);
    /* padded vocabulary rows are 0; gains 1, biases 0 */
    const Gpt2Tensor *wte = gpt2_slice_tensor_by_name(full, "wte.weight");
    const Gpt2Tensor *head = gpt2_slice_tensor_by_name(full, "lm_head.weight");
    for (size_t j = (size_t)TV * TC; j < (size_t)TVP * TC; j++) {
        ck_assert_float_eq(p[wte->offset + j], 0.0f);
        ck_assert_float_eq(p[head->offset + j], 0.0f);
    }
    ck_assert_float_eq(p[gpt2_slice_tensor_by_name(full, "h.0.ln_2.weight")->offset + 3], 1.0f);
    ck_assert_float_eq(p[gpt2_slice_tensor_by_name(full, "h.1.mlp.c_fc.bias")->offset + 7], 0.0f);
    /* standard deviations: 0.02, and 0.02 / sqrt(2 L) for the residual projections */
    const char  *names[2] = {"h.0.mlp.c_fc.weight", "h.1.mlp.c_proj.weight"};
    const double stds[2] = {0.02, 0.02 / sqrt(2.0 * TL)};
    for (int k = 0; k < 2; k++) {
        const Gpt2Tensor *t = gpt2_slice_tensor_by_name(full, names[k]);
        double            sq = 0.0;
        for (size_t j = 0; j < t->numel; j++)
            sq += (double)p[t->offset + j] * p[t->offset + j];
        double sd = sqrt(sq / t->numel);
        ck_assert_double_eq_tol(sd, stds[k], 0.1 * stds[k]);
    }
    /* another seed gives other weights */
    Gpt2Slice *other = slice_make(0, TL, 1, 1, 0, 1);
    gpt2_slice_init_params(other, 43);
    ck_assert_float_ne(gpt2_slice_params(other)[5], p[5]);
    gpt2_slice_free(other);
    for (int k = 0; k < 3; k++)
        gpt2_slice_free(parts[k]);
    gpt2_slice_free(full);
}
END_TEST

START_TEST(test_slice_bad_params_abort) {
    /* tie_head needs both ends on one slice: a caller bug, so KERN_ASSERT aborts */
    slice_make(0, 1, 1, 0, 1, 1);
}
END_TEST

/* --- gradients --- */

START_TEST(test_slice_initial_loss) {
    /* GPT-2 init gives near-uniform predictions: loss close to log V */
    Gpt2Slice *s = slice_make(0, TL, 1, 1, 0, 1);
    int32_t    tokens[TN], targets[TN];
    make_batch(tokens, targets, 1);
    ck_assert_double_eq_tol(full_loss(s, tokens, targets), log((double)TV), 0.05);
    gpt2_slice_free(s);
}
END_TEST

/* Finite differences of the whole slice's loss, for every tensor: a directional derivative
 * along a random +-1 direction over the tensor (well conditioned: it sums many entries) and
 * the two entries with the largest analytic gradient. The loss is a float near 3.6 (ulp
 * 2.4e-7), so a central difference with step eps resolves gradients to ~2.4e-7 / eps: the
 * absolute tolerances are about 3 such quanta (eps 1e-3: 4e-4; eps 1e-2: 5e-5), the relative
 * ones cover the O(eps^2) truncation. Loop over tie_head 0/1. */
START_TEST(test_slice_grad_fd) {
    int        tie = _i;
    Gpt2Slice *s = slice_make(0, TL, 1, 1, tie, 1);
    perturb_params(s, 7);
    int32_t tokens[TN], targets[TN];
    make_batch(tokens, targets, 2);
    gpt2_slice_zero_grads(s);
    full_step(s, tokens, targets, 1.0f);
    size_t n = gpt2_slice_n_params(s);
    float *g = malloc(n * sizeof(float));
    memcpy(g, gpt2_slice_grads(s), n * sizeof(float));
    float   *p = gpt2_slice_params(s);
    uint64_t rng = kern_rng_seed(3);
    for (int i = 0; i < gpt2_slice_n_tensors(s); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(s, i);
        float            *w = p + t->offset;
        const float      *gt = g + t->offset;
        /* directional derivative, eps 1e-3 per entry */
        const float  eps = 1e-3f;
        float       *orig = malloc(t->numel * sizeof(float));
        signed char *dir = malloc(t->numel);
        memcpy(orig, w, t->numel * sizeof(float));
        double ana = 0.0;
        for (size_t j = 0; j < t->numel; j++) {
            dir[j] = (kern_rng_u32(&rng) & 1) ? 1 : -1;
            ana += (double)gt[j] * dir[j];
        }
        for (size_t j = 0; j < t->numel; j++)
            w[j] = orig[j] + eps * dir[j];
        double lp = full_loss(s, tokens, targets);
        for (size_t j = 0; j < t->numel; j++)
            w[j] = orig[j] - eps * dir[j];
        double lm = full_loss(s, tokens, targets);
        memcpy(w, orig, t->numel * sizeof(float));
        double num = (lp - lm) / (2.0 * eps);
        ck_assert_msg(fabs(num - ana) <= 3e-3 * fabs(ana) + 4e-4,
                      "%s (tie %d): directional numeric %.7g analytic %.7g", t->name, tie, num,
                      ana);
        /* the two largest entries, eps 1e-2 */
        size_t top[2] = {0, 0};
        for (size_t j = 0; j < t->numel; j++)
            if (fabsf(gt[j]) > fabsf(gt[top[0]]))
                top[0] = j;
        top[1] = top[0] == 0 ? 1 : 0;
        for (size_t j = 0; j < t->numel; j++)
            if (j != top[0] && fabsf(gt[j]) > fabsf(gt[top[1]]))
                top[1] = j;
        for (int rep = 0; rep < 2; rep++) {
            size_t      best = top[rep];
            const float e = 1e-2f;
            w[best] = orig[best] + e;
            lp = full_loss(s, tokens, targets);
            w[best] = orig[best] - e;
            lm = full_loss(s, tokens, targets);
            w[best] = orig[best];
            num = (lp - lm) / (2.0 * e);
            ck_assert_msg(fabs(num - gt[best]) <= 3e-3 * fabs(gt[best]) + 5e-5,
                          "%s[%zu] (tie %d): numeric %.7g analytic %.7g", t->name, best, tie, num,
                          (double)gt[best]);
        }
        free(dir);
        free(orig);
    }
    free(g);
    gpt2_slice_free(s);
}
END_TEST

START_TEST(test_slice_padded_grads) {
    int        tie = _i;
    Gpt2Slice *s = slice_make(0, TL, 1, 1, tie, 1);
    perturb_params(s, 8);
    int32_t tokens[TN], targets[TN];
    make_batch(tokens, targets, 3);
    gpt2_slice_zero_grads(s);
    full_step(s, tokens, targets, 1.0f);
    const float *g = gpt2_slice_grads(s);
    const char  *names[2] = {"wte.weight", "lm_head.weight"};
    for (int k = 0; k < 2 - tie; k++) {
        const Gpt2Tensor *t = gpt2_slice_tensor_by_name(s, names[k]);
        double            real = 0.0;
        for (size_t j = 0; j < (size_t)TV * TC; j++)
            real += fabs(g[t->offset + j]);
        ck_assert_double_gt(real, 0.0);
        for (size_t j = (size_t)TV * TC; j < t->numel; j++)
            ck_assert_float_eq(g[t->offset + j], 0.0f);
    }
    gpt2_slice_free(s);
}
END_TEST

/* --- equivalences --- */

/* Runs the model split at the cut points @cuts (n_cuts of them, non-decreasing, in [0, L]) as
 * a pipeline of slices, one micro-batch, loss_scale 0.25; checks loss and every gradient
 * bitwise against the single slice @full (whose grads hold the same micro-batch's BW). */
static void check_split(Gpt2Slice *full, float full_loss_v, const int *cuts, int n_cuts,
                        const int32_t *tokens, const int32_t *targets) {
    int        n = n_cuts + 1;
    Gpt2Slice *sl[TL + 2];
    float      x[TN * TC], dx[TN * TC], dx2[TN * TC];
    for (int k = 0; k < n; k++) {
        int lb = k == 0 ? 0 : cuts[k - 1];
        int le = k == n - 1 ? TL : cuts[k];
        sl[k] = slice_make(lb, le, k == 0, k == n - 1, 0, 1);
        gpt2_slice_zero_grads(sl[k]);
    }
    float loss = 0.0f;
    for (int k = 0; k < n; k++) {
        int last = k == n - 1;
        gpt2_slice_forward(sl[k], gpt2_slice_params(sl[k]), 0, k == 0 ? tokens : NULL,
                           k == 0 ? NULL : x, last ? targets : NULL, last ? NULL : x,
                           last ? &loss : NULL);
    }
    ck_assert_mem_eq(&loss, &full_loss_v, sizeof loss);
    for (int k = n - 1; k >= 0; k--) {
        gpt2_slice_backward(sl[k], gpt2_slice_params(sl[k]), 0, k == n - 1 ? NULL : dx, 0.25f,
                            k == 0 ? NULL : dx2, gpt2_slice_grads(sl[k]), NULL);
        memcpy(dx, dx2, sizeof dx);
    }
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < gpt2_slice_n_tensors(sl[k]); i++) {
            const Gpt2Tensor *t = gpt2_slice_tensor(sl[k], i);
            const Gpt2Tensor *f = gpt2_slice_tensor_by_name(full, t->name);
            ck_assert_msg(memcmp(gpt2_slice_grads(sl[k]) + t->offset,
                                 gpt2_slice_grads(full) + f->offset, t->numel * sizeof(float)) == 0,
                          "gradient of %s differs", t->name);
        }
        gpt2_slice_free(sl[k]);
    }
}

START_TEST(test_slice_split_bitwise) {
    Gpt2Slice *full = slice_make(0, TL, 1, 1, 0, 1);
    int32_t    tokens[TN], targets[TN];
    make_batch(tokens, targets, 4);
    gpt2_slice_zero_grads(full);
    float loss = full_step(full, tokens, targets, 0.25f);
    /* every single cut, including the empty first (embedding only) and last (head only) */
    for (int k = 0; k <= TL; k++)
        check_split(full, loss, &k, 1, tokens, targets);
    /* one block per slice, plus a head-only slice */
    const int cuts[2] = {1, 2};
    check_split(full, loss, cuts, 2, tokens, targets);
    gpt2_slice_free(full);
}
END_TEST

/* B then W equals fused BW bitwise, on the whole model (loop 0) and on a middle slice (1). */
START_TEST(test_slice_b_then_w) {
    int        middle = _i;
    Gpt2Slice *a = middle ? slice_make(1, 2, 0, 0, 0, 1) : slice_make(0, TL, 1, 1, 0, 1);
    Gpt2Slice *b = middle ? slice_make(1, 2, 0, 0, 0, 1) : slice_make(0, TL, 1, 1, 0, 1);
    int32_t    tokens[TN], targets[TN];
    make_batch(tokens, targets, 5);
    float    xin[TN * TC], xa[TN * TC], xb[TN * TC], dout[TN * TC], da[TN * TC], db[TN * TC];
    float    la = 0.0f, lb = 0.0f;
    uint64_t rng = kern_rng_seed(9);
    for (int i = 0; i < TN * TC; i++) {
        xin[i] = 2.0f * kern_rng_uniform(&rng) - 1.0f;
        dout[i] = 0.01f * (2.0f * kern_rng_uniform(&rng) - 1.0f);
    }
    gpt2_slice_zero_grads(a);
    gpt2_slice_zero_grads(b);
    if (middle) {
        gpt2_slice_forward(a, gpt2_slice_params(a), 0, NULL, xin, NULL, xa, NULL);
        gpt2_slice_forward(b, gpt2_slice_params(b), 0, NULL, xin, NULL, xb, NULL);
        gpt2_slice_backward(a, gpt2_slice_params(a), 0, dout, 1.0f, da, gpt2_slice_grads(a), NULL);
        gpt2_slice_backward_input(b, gpt2_slice_params(b), 0, dout, 1.0f, db);
        gpt2_slice_backward_weight(b, 0, gpt2_slice_grads(b), NULL);
        ck_assert_mem_eq(da, db, sizeof da);
    } else {
        la = full_step(a, tokens, targets, 1.0f);
        gpt2_slice_forward(b, gpt2_slice_params(b), 0, tokens, NULL, targets, NULL, &lb);
        gpt2_slice_backward_input(b, gpt2_slice_params(b), 0, NULL, 1.0f, NULL);
        gpt2_slice_backward_weight(b, 0, gpt2_slice_grads(b), NULL);
        ck_assert_mem_eq(&la, &lb, sizeof la);
    }
    ck_assert_mem_eq(gpt2_slice_grads(a), gpt2_slice_grads(b),
                     gpt2_slice_n_params(a) * sizeof(float));
    gpt2_slice_free(a);
    gpt2_slice_free(b);
}
END_TEST

/* What a W's hook saw: the buckets in call order and a copy of each bucket's floats then. */
typedef struct {
    const float *grads;
    float       *seen; /* (n_params) each bucket's floats when its hook ran */
    int          n_calls, last_bucket;
    size_t       next_end; /* the previous bucket's begin: buckets come from the end */
} HookLog;

static void hook_log_ready(void *user_data, int bucket, size_t begin, size_t end) {
    HookLog *log = user_data;
    ck_assert_int_gt(bucket, log->last_bucket);
    ck_assert_uint_eq(end, log->next_end);
    ck_assert_uint_lt(begin, end);
    memcpy(log->seen + begin, log->grads + begin, (end - begin) * sizeof(float));
    log->last_bucket = bucket;
    log->next_end = begin;
    log->n_calls++;
}

/* The gradient hook of BW (loops 0-2) and of W after B (3-5), on top of a first micro-batch's
 * gradients: every bucket reported once, from the end of the array to its start with no gap,
 * and each bucket's floats when reported are bitwise the final ones; the gradients are
 * bitwise those of BW without the hook. Whole model untied (loops 0, 3) and tied (1, 4), a
 * middle slice (2, 5). */
START_TEST(test_slice_grads_hook) {
    static const int shape[][5] = {{0, TL, 1, 1, 0}, {0, TL, 1, 1, 1}, {1, 2, 0, 0, 0}};
    const int       *sh = shape[_i % 3];
    int              split = _i >= 3;
    Gpt2Slice       *a = slice_make(sh[0], sh[1], sh[2], sh[3], sh[4], 1);
    Gpt2Slice       *b = slice_make(sh[0], sh[1], sh[2], sh[3], sh[4], 1);
    size_t           n = gpt2_slice_n_params(a);
    int32_t          tokens[TN], targets[TN];
    float            xin[TN * TC], xout[TN * TC], dout[TN * TC], dx[TN * TC];
    uint64_t         rng = kern_rng_seed(11);
    for (int i = 0; i < TN * TC; i++) {
        xin[i] = 2.0f * kern_rng_uniform(&rng) - 1.0f;
        dout[i] = 0.01f * (2.0f * kern_rng_uniform(&rng) - 1.0f);
    }
    HookLog       log = {.grads = gpt2_slice_grads(a),
                         .seen = calloc(n, sizeof(float)),
                         .last_bucket = -1,
                         .next_end = n};
    Gpt2GradsHook hook = {.ready = hook_log_ready, .user_data = &log};
    for (int mb = 0; mb < 2; mb++) {
        make_batch(tokens, targets, 20 + (uint64_t)mb);
        Gpt2Slice *both[2] = {a, b};
        for (int k = 0; k < 2; k++) {
            Gpt2Slice *s = both[k];
            float      loss;
            gpt2_slice_forward(s, gpt2_slice_params(s), 0, sh[2] ? tokens : NULL,
                               sh[2] ? NULL : xin, sh[3] ? targets : NULL, sh[3] ? NULL : xout,
                               sh[3] ? &loss : NULL);
            const Gpt2GradsHook *h = k == 0 && mb == 1 ? &hook : NULL;
            if (split && k == 0) {
                gpt2_slice_backward_input(s, gpt2_slice_params(s), 0, sh[3] ? NULL : dout, 0.5f,
                                          sh[2] ? NULL : dx);
                gpt2_slice_backward_weight(s, 0, gpt2_slice_grads(s), h);
            } else {
                gpt2_slice_backward(s, gpt2_slice_params(s), 0, sh[3] ? NULL : dout, 0.5f,
                                    sh[2] ? NULL : dx, gpt2_slice_grads(s), h);
            }
        }
    }
    ck_assert_int_eq(log.n_calls, (sh[1] - sh[0]) + sh[2] + sh[3]);
    ck_assert_uint_eq(log.next_end, 0);
    ck_assert_mem_eq(log.seen, gpt2_slice_grads(a), n * sizeof(float));
    ck_assert_mem_eq(gpt2_slice_grads(a), gpt2_slice_grads(b), n * sizeof(float));
    free(log.seen);
    gpt2_slice_free(a);
    gpt2_slice_free(b);
}
END_TEST

/* Two micro-batches in flight in two slots, backwards in reverse order and W deferred, give
 * bitwise the gradients of running them one after the other (W order kept: mb 0 then 1). */
START_TEST(test_slice_slots) {
    Gpt2Slice *a = slice_make(0, TL, 1, 1, 0, 2);
    Gpt2Slice *b = slice_make(0, TL, 1, 1, 0, 1);
    int32_t    tok[2][TN], tgt[2][TN];
    make_batch(tok[0], tgt[0], 10);
    make_batch(tok[1], tgt[1], 11);
    gpt2_slice_zero_grads(a);
    gpt2_slice_zero_grads(b);
    float  la[2], lb[2];
    float *pa = gpt2_slice_params(a);
    gpt2_slice_forward(a, pa, 0, tok[0], NULL, tgt[0], NULL, &la[0]);
    gpt2_slice_forward(a, pa, 1, tok[1], NULL, tgt[1], NULL, &la[1]);
    gpt2_slice_backward_input(a, pa, 1, NULL, 0.5f, NULL);
    gpt2_slice_backward_input(a, pa, 0, NULL, 0.5f, NULL);
    gpt2_slice_backward_weight(a, 0, gpt2_slice_grads(a), NULL);
    gpt2_slice_backward_weight(a, 1, gpt2_slice_grads(a), NULL);
    lb[0] = full_step(b, tok[0], tgt[0], 0.5f);
    lb[1] = full_step(b, tok[1], tgt[1], 0.5f);
    ck_assert_mem_eq(la, lb, sizeof la);
    ck_assert_mem_eq(gpt2_slice_grads(a), gpt2_slice_grads(b),
                     gpt2_slice_n_params(a) * sizeof(float));
    /* two slots: twice one slot's activation arena, the rest the same */
    Gpt2SliceSizes sa, sb;
    gpt2_slice_sizes(a, &sa);
    gpt2_slice_sizes(b, &sb);
    ck_assert_uint_eq(sa.acts_bytes, 2 * sb.acts_bytes);
    ck_assert_uint_eq(sa.total_bytes - sa.acts_bytes, sb.total_bytes - sb.acts_bytes);
    gpt2_slice_free(a);
    gpt2_slice_free(b);
}
END_TEST

START_TEST(test_slice_loss_scale) {
    /* the backward is linear in its seed: loss_scale 0.5 halves every gradient exactly */
    Gpt2Slice *a = slice_make(0, TL, 1, 1, 0, 1);
    Gpt2Slice *b = slice_make(0, TL, 1, 1, 0, 1);
    int32_t    tokens[TN], targets[TN];
    make_batch(tokens, targets, 6);
    gpt2_slice_zero_grads(a);
    gpt2_slice_zero_grads(b);
    full_step(a, tokens, targets, 1.0f);
    full_step(b, tokens, targets, 0.5f);
    const float *ga = gpt2_slice_grads(a), *gb = gpt2_slice_grads(b);
    for (size_t j = 0; j < gpt2_slice_n_params(a); j++)
        ck_assert_float_eq(gb[j], 0.5f * ga[j]);
    gpt2_slice_free(a);
    gpt2_slice_free(b);
}
END_TEST

START_TEST(test_slice_determinism) {
    float  loss[2];
    float *grads[2];
    size_t n = 0;
    for (int r = 0; r < 2; r++) {
        Gpt2Slice *s = slice_make(0, TL, 1, 1, 0, 1);
        int32_t    tokens[TN], targets[TN];
        make_batch(tokens, targets, 12);
        gpt2_slice_zero_grads(s);
        loss[r] = full_step(s, tokens, targets, 1.0f);
        n = gpt2_slice_n_params(s);
        grads[r] = malloc(n * sizeof(float));
        memcpy(grads[r], gpt2_slice_grads(s), n * sizeof(float));
        gpt2_slice_free(s);
    }
    ck_assert_mem_eq(&loss[0], &loss[1], sizeof(float));
    ck_assert_mem_eq(grads[0], grads[1], n * sizeof(float));
    free(grads[0]);
    free(grads[1]);
}
END_TEST

/* --- thread count --- */

/* A model big enough that every product and loop is split among threads. */
static const Gpt2Config medium = {.L = 2, .C = 64, .NH = 4, .T = 64, .V = 300, .Vp = 384};
enum { MB = 4, MN = MB * 64 };

static KernOptimParams optim_params(KernOptimKind kind, float wd, int ef);

/* One training step (forward, B, W, gradient norm, optimizer @kind) of the medium model with
 * @threads threads; returns (transfer full) the loss, the squared gradient norm and the
 * gradients and parameters after the step, packed in one array. */
static float *medium_step(int threads, KernOptimKind kind, size_t *n_out) {
    kern_set_threads(threads);
    Gpt2SliceParams p = {.model = medium,
                         .layer_begin = 0,
                         .layer_end = medium.L,
                         .has_embedding = 1,
                         .has_head = 1,
                         .B = MB,
                         .n_act_slots = 1};
    Gpt2Slice      *s = gpt2_slice_new(&p);
    gpt2_slice_init_params(s, 3);
    KernOptimParams op = optim_params(kind, 0.1f, 1);
    KernOptim      *o = kern_optim_new(&op, s);
    int32_t         tokens[MN], targets[MN];
    uint64_t        rng = kern_rng_seed(21);
    for (int i = 0; i < MN; i++) {
        tokens[i] = (int32_t)(kern_rng_u32(&rng) % (uint32_t)medium.V);
        targets[i] = (int32_t)(kern_rng_u32(&rng) % (uint32_t)medium.V);
    }
    size_t n = gpt2_slice_n_params(s);
    float *out = malloc((2 + 2 * n) * sizeof(float));
    gpt2_slice_forward(s, gpt2_slice_params(s), 0, tokens, NULL, targets, NULL, &out[0]);
    gpt2_slice_backward_input(s, gpt2_slice_params(s), 0, NULL, 0.5f, NULL);
    gpt2_slice_backward_weight(s, 0, gpt2_slice_grads(s), NULL);
    out[1] = (float)kern_grad_sq_norm(gpt2_slice_grads(s), n);
    memcpy(out + 2, gpt2_slice_grads(s), n * sizeof(float));
    kern_optim_step(o, gpt2_slice_params(s), gpt2_slice_grads(s), 1e-3f);
    memcpy(out + 2 + n, gpt2_slice_params(s), n * sizeof(float));
    kern_optim_free(o);
    gpt2_slice_free(s);
    *n_out = 2 + 2 * n;
    return out;
}

/* _i: 0 AdamW, 1 Muon (Newton-Schulz products) */
START_TEST(test_slice_thread_count_bitwise) {
    KernOptimKind kind = _i ? KERN_OPTIM_MUON : KERN_OPTIM_ADAMW;
    size_t        n;
    float        *one = medium_step(1, kind, &n);
    ck_assert(isfinite(one[0]) && one[1] > 0.0f);
    for (int threads = 2; threads <= 3; threads++) {
        float *many = medium_step(threads, kind, &n);
        ck_assert_msg(memcmp(one, many, n * sizeof(float)) == 0, "%d threads differ from 1",
                      threads);
        free(many);
    }
    free(one);
    kern_set_threads(1);
}
END_TEST

/* --- optimizers --- */

static KernOptimParams optim_params(KernOptimKind kind, float wd, int ef) {
    KernOptimParams p = {.kind = kind,
                         .beta1 = 0.9f,
                         .beta2 = 0.95f,
                         .eps = 1e-8f,
                         .weight_decay = wd,
                         .muon_momentum = 0.95f,
                         .muon_lr_ratio = 10.0f,
                         .muon_ns_steps = 5,
                         .error_feedback = ef};
    return p;
}

static void fill_grads(float *g, size_t n, uint64_t seed) {
    uint64_t rng = kern_rng_seed(seed);
    for (size_t j = 0; j < n; j++)
        g[j] = 0.1f * (2.0f * kern_rng_uniform(&rng) - 1.0f);
}

START_TEST(test_adamw_one_step) {
    Gpt2Slice *s = slice_make(0, TL, 1, 1, 0, 1);
    size_t     n = gpt2_slice_n_params(s);
    float     *p0 = malloc(n * sizeof(float));
    float     *g = gpt2_slice_grads(s);
    float     *p = gpt2_slice_params(s);
    fill_grads(g, n, 13);
    memcpy(p0, p, n * sizeof(float));
    KernOptimParams op = optim_params(KERN_OPTIM_ADAMW, 0.1f, 0);
    KernOptim      *o = kern_optim_new(&op, s);
    const double    lr = 1e-2;
    kern_optim_step(o, p, g, (float)lr);
    ck_assert_int_eq(kern_optim_n_steps(o), 1);
    /* first step: bias-corrected m = g, v = g^2, so u = lr (g / (|g| + eps) + wd p) */
    for (int i = 0; i < gpt2_slice_n_tensors(s); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(s, i);
        double            wd = t->is_matrix ? 0.1 : 0.0;
        for (size_t j = t->offset; j < t->offset + t->numel; j++) {
            double gj = g[j];
            double expect = p0[j] - lr * (gj / (fabs(gj) + 1e-8) + wd * p0[j]);
            ck_assert_double_eq_tol(p[j], expect, 1e-7 + 1e-5 * fabs(expect));
        }
    }
    /* second step with the same gradient: m_hat = g and v_hat = g^2 again */
    memcpy(p0, p, n * sizeof(float));
    kern_optim_step(o, p, g, (float)lr);
    size_t j = gpt2_slice_tensor_by_name(s, "h.0.ln_1.bias")->offset + 2;
    ck_assert_double_eq_tol(p[j], p0[j] - lr * g[j] / (fabs(g[j]) + 1e-8), 1e-7);
    kern_optim_free(o);
    free(p0);
    gpt2_slice_free(s);
}
END_TEST

/* Singular values of @x (rows, cols) via Jacobi eigenvalues of the small Gram matrix. */
static void singular_values(const float *x, int rows, int cols, double *sv) {
    int     m = rows < cols ? rows : cols;
    double *a = calloc((size_t)m * m, sizeof(double));
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            double s = 0.0;
            int    k_n = rows < cols ? cols : rows;
            for (int k = 0; k < k_n; k++) {
                double xi = rows < cols ? x[i * cols + k] : x[k * cols + i];
                double xj = rows < cols ? x[j * cols + k] : x[k * cols + j];
                s += xi * xj;
            }
            a[i * m + j] = s;
        }
    }
    for (int sweep = 0; sweep < 60; sweep++) {
        for (int p = 0; p < m; p++) {
            for (int q = p + 1; q < m; q++) {
                double apq = a[p * m + q];
                if (fabs(apq) < 1e-15)
                    continue;
                double theta = 0.5 * atan2(2.0 * apq, a[q * m + q] - a[p * m + p]);
                double c = cos(theta), s = sin(theta);
                for (int k = 0; k < m; k++) {
                    double akp = a[k * m + p], akq = a[k * m + q];
                    a[k * m + p] = c * akp - s * akq;
                    a[k * m + q] = s * akp + c * akq;
                }
                for (int k = 0; k < m; k++) {
                    double apk = a[p * m + k], aqk = a[q * m + k];
                    a[p * m + k] = c * apk - s * aqk;
                    a[q * m + k] = s * apk + c * aqk;
                }
            }
        }
    }
    for (int i = 0; i < m; i++)
        sv[i] = sqrt(fmax(a[i * m + i], 0.0));
    free(a);
}

START_TEST(test_newton_schulz_band) {
    const int shapes[3][2] = {{8, 16}, {24, 8}, {16, 16}};
    for (int k = 0; k < 3; k++) {
        int      r = shapes[k][0], c = shapes[k][1];
        int      m = r < c ? r : c;
        float   *g = malloc(sizeof(float) * r * c), *o = malloc(sizeof(float) * r * c);
        float   *scratch = malloc(sizeof(float) * (2 * r * c + 3 * m * m));
        uint64_t rng = kern_rng_seed(20 + k);
        for (int i = 0; i < r * c; i++)
            g[i] = kern_rng_normal(&rng);
        kern_newton_schulz5(o, g, r, c, 5, scratch);
        double sv[24];
        singular_values(o, r, c, sv);
        /* the quintic maps every singular value into roughly [0.7, 1.2] */
        for (int i = 0; i < m; i++)
            ck_assert_msg(sv[i] > 0.6 && sv[i] < 1.25, "%dx%d: singular value %g", r, c, sv[i]);
        free(g);
        free(o);
        free(scratch);
    }
}
END_TEST

START_TEST(test_newton_schulz_known) {
    /* G = [[3, 0, 0], [0, 4, 0]] (and its transpose): the iteration acts on the normalised
     * singular values 0.6 and 0.8 independently through x -> a x + b x^3 + c x^5 */
    double s[2] = {0.6, 0.8};
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 2; i++)
            s[i] = 3.4445 * s[i] - 4.7750 * pow(s[i], 3) + 2.0315 * pow(s[i], 5);
    float g[6] = {3, 0, 0, 0, 4, 0}, o[6], scratch[2 * 6 + 3 * 4];
    kern_newton_schulz5(o, g, 2, 3, 5, scratch);
    const float expect[6] = {(float)s[0], 0, 0, 0, (float)s[1], 0};
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq_tol(o[i], expect[i], 1e-5f);
    float gt[6] = {3, 0, 0, 4, 0, 0}, ot[6];
    kern_newton_schulz5(ot, gt, 3, 2, 5, scratch);
    const float expect_t[6] = {(float)s[0], 0, 0, (float)s[1], 0, 0};
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq_tol(ot[i], expect_t[i], 1e-5f);
}
END_TEST

START_TEST(test_muon_step) {
    Gpt2Slice *s = slice_make(0, TL, 1, 1, 0, 1);
    size_t     n = gpt2_slice_n_params(s);
    float     *p0 = malloc(n * sizeof(float));
    float     *g = gpt2_slice_grads(s);
    float     *p = gpt2_slice_params(s);
    fill_grads(g, n, 14);
    memcpy(p0, p, n * sizeof(float));
    KernOptimParams op = optim_params(KERN_OPTIM_MUON, 0.0f, 0);
    KernOptim      *o = kern_optim_new(&op, s);
    const float     lr = 1e-3f;
    kern_optim_step(o, p, g, lr);
    /* first step, hidden matrix (3C, C): momentum = G, Nesterov input (1 + mu) G, whose
     * orthogonalisation equals NS5(G) (scale-free); update lr * ratio * sqrt(3) * NS5(G) */
    const Gpt2Tensor *t = gpt2_slice_tensor_by_name(s, "h.1.attn.c_attn.weight");
    float            *ns = malloc(t->numel * sizeof(float));
    float            *scratch = malloc(sizeof(float) * (2 * t->numel + 3 * TC * TC));
    kern_newton_schulz5(ns, g + t->offset, t->shape[0], t->shape[1], 5, scratch);
    for (size_t j = 0; j < t->numel; j++) {
        double u = (double)lr * 10.0 * sqrt(3.0) * ns[j];
        ck_assert_double_eq_tol(p[t->offset + j], p0[t->offset + j] - u, 1e-6);
    }
    /* a gain goes through AdamW: first step moves it by lr * sign(g) */
    const Gpt2Tensor *gain = gpt2_slice_tensor_by_name(s, "ln_f.weight");
    size_t            j = gain->offset + 1;
    ck_assert_double_eq_tol(p[j], p0[j] - lr * (g[j] > 0 ? 1.0 : -1.0), 1e-6);
    free(scratch);
    free(ns);
    kern_optim_free(o);
    free(p0);
    gpt2_slice_free(s);
}
END_TEST

START_TEST(test_error_feedback) {
    /* Plain and error-feedback AdamW (wd 0: updates depend on gradients only) see the same
     * gradients g1, g2, so they compute the same updates u1, u2. EF applies 2 u1 on the
     * first step (u0 = 0) and 2 u2 - u1 on the second. */
    Gpt2Slice *a = slice_make(0, TL, 1, 1, 0, 1);
    Gpt2Slice *b = slice_make(0, TL, 1, 1, 0, 1);
    size_t     n = gpt2_slice_n_params(a);
    float     *g1 = malloc(n * sizeof(float)), *g2 = malloc(n * sizeof(float));
    float     *pa0 = malloc(n * sizeof(float)), *pa1 = malloc(n * sizeof(float));
    float     *pb1 = malloc(n * sizeof(float));
    fill_grads(g1, n, 15);
    fill_grads(g2, n, 16);
    KernOptimParams plain = optim_params(KERN_OPTIM_ADAMW, 0.0f, 0);
    KernOptimParams ef = optim_params(KERN_OPTIM_ADAMW, 0.0f, 1);
    KernOptim      *oa = kern_optim_new(&plain, a), *ob = kern_optim_new(&ef, b);
    ck_assert_uint_gt(kern_optim_state_floats(ob), kern_optim_state_floats(oa));
    float *pa = gpt2_slice_params(a), *pb = gpt2_slice_params(b);
    memcpy(pa0, pa, n * sizeof(float));
    kern_optim_step(oa, pa, g1, 1e-2f);
    kern_optim_step(ob, pb, g1, 1e-2f);
    memcpy(pa1, pa, n * sizeof(float));
    memcpy(pb1, pb, n * sizeof(float));
    for (size_t j = 0; j < n; j++) {
        double u1 = (double)pa0[j] - pa1[j];
        ck_assert_double_eq_tol(pb1[j], pa0[j] - 2.0 * u1, 1e-6);
    }
    kern_optim_step(oa, pa, g2, 1e-2f);
    kern_optim_step(ob, pb, g2, 1e-2f);
    for (size_t j = 0; j < n; j++) {
        double u1 = (double)pa0[j] - pa1[j];
        double u2 = (double)pa1[j] - pa[j];
        ck_assert_double_eq_tol(pb[j], pb1[j] - (2.0 * u2 - u1), 1e-6);
    }
    kern_optim_free(oa);
    kern_optim_free(ob);
    free(g1);
    free(g2);
    free(pa0);
    free(pa1);
    free(pb1);
    gpt2_slice_free(a);
    gpt2_slice_free(b);
}
END_TEST

/* Float copy of @src (@n). */
static float *floats_dup(const float *src, size_t n) {
    float *out = malloc(n * sizeof(float));
    memcpy(out, src, n * sizeof(float));
    return out;
}

START_TEST(test_optim_shards) {
    /* ZeRO-1: D = 3 AdamW optimizers (error feedback, weight decay) over the shards of one
     * slice's flat parameters, each stepping its shard of a copy of the parameters twice,
     * together give bitwise the parameters of one optimizer over the whole slice; the shards
     * are whole chunks of the gradient norm, back to back, and their partial sums are the
     * whole array's; their tensor spans cover them; their state adds up to the whole one's. */
    const Gpt2Config wide = {.L = 2, .C = 64, .NH = 2, .T = 8, .V = 1000, .Vp = 1024};
    Gpt2SliceParams  sp = {.model = wide,
                           .layer_begin = 0,
                           .layer_end = 2,
                           .has_embedding = 1,
                           .has_head = 1,
                           .B = 1,
                           .n_act_slots = 1};
    Gpt2Slice       *s = gpt2_slice_new(&sp);
    gpt2_slice_init_params(s, 42);
    const int D = 3;
    size_t    n = gpt2_slice_n_params(s), chunks = kern_grad_norm_n_chunks(n);
    ck_assert_uint_gt(chunks, (size_t)D);
    float *g1 = malloc(n * sizeof(float)), *g2 = malloc(n * sizeof(float));
    fill_grads(g1, n, 21);
    fill_grads(g2, n, 22);
    KernOptimParams whole = optim_params(KERN_OPTIM_ADAMW, 0.1f, 1);
    KernOptim      *ow = kern_optim_new(&whole, s);
    float          *pw = floats_dup(gpt2_slice_params(s), n);
    float          *pz = floats_dup(gpt2_slice_params(s), n);
    kern_optim_step(ow, pw, g1, 1e-2f);
    kern_optim_step(ow, pw, g2, 1e-2f);
    double *partial_whole = malloc(chunks * sizeof(double));
    double *partial_shard = malloc(chunks * sizeof(double));
    kern_grad_sq_norm_partials(g1, n, partial_whole);
    size_t covered = 0, state = 0;
    for (int d = 0; d < D; d++) {
        KernOptimParams sharded = whole;
        sharded.shards = D;
        sharded.shard = d;
        KernOptim *od = kern_optim_new(&sharded, s);
        size_t     lo, hi, want_lo, want_hi, spans = 0;
        kern_optim_range(od, &lo, &hi);
        kern_optim_shard_range(n, D, d, &want_lo, &want_hi);
        ck_assert_uint_eq(lo, want_lo);
        ck_assert_uint_eq(hi, want_hi);
        ck_assert_uint_eq(lo, covered);
        ck_assert_uint_eq(lo % KERN_GRAD_NORM_CHUNK, 0);
        ck_assert_uint_gt(hi, lo);
        covered = hi;
        for (int i = 0; i < gpt2_slice_n_tensors(s); i++) {
            size_t tlo, thi;
            kern_optim_tensor_span(od, i, &tlo, &thi);
            spans += thi - tlo;
        }
        ck_assert_uint_eq(spans, hi - lo);
        float *pd = floats_dup(gpt2_slice_params(s), n);
        kern_optim_step(od, pd, g1, 1e-2f);
        kern_optim_step(od, pd, g2, 1e-2f);
        memcpy(pz + lo, pd + lo, (hi - lo) * sizeof(float));
        kern_grad_sq_norm_partials(g1 + lo, hi - lo, partial_shard);
        ck_assert(memcmp(partial_shard, partial_whole + lo / KERN_GRAD_NORM_CHUNK,
                         kern_grad_norm_n_chunks(hi - lo) * sizeof(double)) == 0);
        state += kern_optim_state_floats(od);
        free(pd);
        kern_optim_free(od);
    }
    ck_assert_uint_eq(covered, n);
    ck_assert(memcmp(pz, pw, n * sizeof(float)) == 0);
    ck_assert_uint_eq(state, kern_optim_state_floats(ow));
    free(partial_shard);
    free(partial_whole);
    free(pz);
    free(pw);
    kern_optim_free(ow);
    free(g2);
    free(g1);
    gpt2_slice_free(s);
}
END_TEST

/* Optimizer state round trip: optimizer a takes 3 steps; b, made fresh for a copy of the
 * weights, receives a's moments, previous update and t through the accessors; one more step
 * with the same gradient then gives bitwise the same weights and state. Loop index: 0 AdamW,
 * 1 Muon with error feedback. */
START_TEST(test_optim_state_roundtrip) {
    KernOptimParams op =
        _i == 0 ? optim_params(KERN_OPTIM_ADAMW, 0.1f, 0) : optim_params(KERN_OPTIM_MUON, 0.1f, 1);
    Gpt2Slice *a = slice_make(0, TL, 1, 1, 0, 1);
    Gpt2Slice *b = slice_make(0, TL, 1, 1, 0, 1);
    size_t     n = gpt2_slice_n_params(a);
    float     *g = malloc(n * sizeof(float));
    float     *pa = gpt2_slice_params(a), *pb = gpt2_slice_params(b);
    KernOptim *oa = kern_optim_new(&op, a), *ob = kern_optim_new(&op, b);
    ck_assert(kern_optim_prev_update(oa) == NULL || op.error_feedback);
    for (int k = 0; k < 3; k++) {
        fill_grads(g, n, 30 + (uint64_t)k);
        kern_optim_step(oa, pa, g, 1e-2f);
    }
    memcpy(pb, pa, n * sizeof(float));
    int n_muon = 0;
    for (int i = 0; i < gpt2_slice_n_tensors(a); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(a, i);
        float            *a1, *a2, *b1, *b2;
        int               muon = kern_optim_tensor_state(oa, i, &a1, &a2);
        ck_assert_int_eq(kern_optim_tensor_state(ob, i, &b1, &b2), muon);
        ck_assert_int_eq(muon, op.kind == KERN_OPTIM_MUON && t->kind == GPT2_TENSOR_HIDDEN);
        ck_assert_int_eq(a2 == NULL, muon);
        n_muon += muon;
        memcpy(b1, a1, t->numel * sizeof(float));
        if (!muon)
            memcpy(b2, a2, t->numel * sizeof(float));
    }
    ck_assert_int_eq(n_muon > 0, op.kind == KERN_OPTIM_MUON);
    if (op.error_feedback)
        memcpy(kern_optim_prev_update(ob), kern_optim_prev_update(oa), n * sizeof(float));
    kern_optim_set_n_steps(ob, kern_optim_n_steps(oa));
    ck_assert_int_eq(kern_optim_n_steps(ob), 3);
    fill_grads(g, n, 33);
    kern_optim_step(oa, pa, g, 1e-2f);
    kern_optim_step(ob, pb, g, 1e-2f);
    ck_assert_int_eq(memcmp(pa, pb, n * sizeof(float)), 0);
    for (int i = 0; i < gpt2_slice_n_tensors(a); i++) {
        float *a1, *a2, *b1, *b2;
        kern_optim_tensor_state(oa, i, &a1, &a2);
        kern_optim_tensor_state(ob, i, &b1, &b2);
        ck_assert_int_eq(memcmp(a1, b1, gpt2_slice_tensor(a, i)->numel * sizeof(float)), 0);
    }
    kern_optim_free(oa);
    kern_optim_free(ob);
    free(g);
    gpt2_slice_free(a);
    gpt2_slice_free(b);
}
END_TEST

START_TEST(test_lr_schedule) {
    const float max_lr = 6e-4f, min_lr = 6e-5f;
    /* warmup 10, total 110: linear ramp, peak at the end of warmup, midpoint, floor */
    ck_assert_float_eq_tol(kern_lr_schedule(0, 10, 110, max_lr, min_lr), 6e-5f, 1e-10f);
    ck_assert_float_eq_tol(kern_lr_schedule(4, 10, 110, max_lr, min_lr), 3e-4f, 1e-10f);
    ck_assert_float_eq_tol(kern_lr_schedule(9, 10, 110, max_lr, min_lr), max_lr, 1e-10f);
    ck_assert_float_eq_tol(kern_lr_schedule(10, 10, 110, max_lr, min_lr), max_lr, 1e-10f);
    ck_assert_float_eq_tol(kern_lr_schedule(60, 10, 110, max_lr, min_lr), 3.3e-4f, 1e-10f);
    ck_assert_float_eq_tol(kern_lr_schedule(110, 10, 110, max_lr, min_lr), min_lr, 1e-12f);
    ck_assert_float_eq_tol(kern_lr_schedule(500, 10, 110, max_lr, min_lr), min_lr, 1e-12f);
    /* a quarter into the decay: min + (max - min) (1 + cos(pi/4)) / 2 */
    double q = 6e-5 + 5.4e-4 * (1.0 + cos(M_PI / 4.0)) / 2.0;
    ck_assert_double_eq_tol(kern_lr_schedule(35, 10, 110, max_lr, min_lr), q, 1e-9);
    /* no warmup */
    ck_assert_float_eq_tol(kern_lr_schedule(0, 0, 100, max_lr, min_lr), max_lr, 1e-10f);
}
END_TEST

START_TEST(test_clipping) {
    float  g[4] = {3.0f, 0.0f, -4.0f, 0.0f};
    double sq = kern_grad_sq_norm(g, 4);
    ck_assert_double_eq(sq, 25.0);
    float f = kern_clip_factor(sqrt(sq), 1.0f);
    ck_assert_float_eq_tol(f, 0.2f, 1e-6f);
    ck_assert_float_eq(kern_clip_factor(0.5, 1.0f), 1.0f);
    kern_grad_scale(g, 4, f);
    ck_assert_double_eq_tol(sqrt(kern_grad_sq_norm(g, 4)), 1.0, 1e-6);
}
END_TEST

static Suite *slice_suite(void) {
    Suite *s = suite_create("slice");
    TCase *tc = tcase_create("slice");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_slice_table);
    tcase_add_test(tc, test_slice_init);
    tcase_add_test_raise_signal(tc, test_slice_bad_params_abort, SIGABRT);
    tcase_add_test(tc, test_slice_initial_loss);
    tcase_add_loop_test(tc, test_slice_grad_fd, 0, 2);
    tcase_add_loop_test(tc, test_slice_padded_grads, 0, 2);
    tcase_add_test(tc, test_slice_split_bitwise);
    tcase_add_loop_test(tc, test_slice_b_then_w, 0, 2);
    tcase_add_loop_test(tc, test_slice_grads_hook, 0, 6);
    tcase_add_test(tc, test_slice_slots);
    tcase_add_test(tc, test_slice_loss_scale);
    tcase_add_test(tc, test_slice_determinism);
    tcase_add_loop_test(tc, test_slice_thread_count_bitwise, 0, 2);
    suite_add_tcase(s, tc);
    TCase *to = tcase_create("optim");
    tcase_add_test(to, test_adamw_one_step);
    tcase_add_test(to, test_newton_schulz_band);
    tcase_add_test(to, test_newton_schulz_known);
    tcase_add_test(to, test_muon_step);
    tcase_add_test(to, test_error_feedback);
    tcase_add_test(to, test_optim_shards);
    tcase_add_loop_test(to, test_optim_state_roundtrip, 0, 2);
    tcase_add_test(to, test_lr_schedule);
    tcase_add_test(to, test_clipping);
    suite_add_tcase(s, to);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(slice_suite());
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
