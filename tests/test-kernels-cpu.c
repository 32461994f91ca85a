/* SPDX-License-Identifier: MIT
 * test-kernels-cpu.c: the GPT-2 CPU kernels (kernels/gpt2-cpu.h) against central finite
 * differences and closed forms. Each kernel's scalar objective is L = sum_i r_i out_i with a
 * fixed random r, evaluated in double over the float outputs, so dL/dout = r. Attention over
 * several query blocks is also checked against a direct double evaluation.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-cpu.h"
#include "kern-pool.h"
#include "kern-util.h"

/* Tolerance of a finite-difference check: |num - ana| <= FD_RTOL |ana| + FD_ATOL max|ana|.
 * With eps 1e-2 on O(1) inputs the O(eps^2) truncation error stays below 1e-4 max|ana| (the
 * largest, 9e-5, is the softmax's) and the float rounding of L, ~1e-6 / 2e-2 = 5e-5, too. */
#define FD_EPS  1e-2f
#define FD_RTOL 1e-3
#define FD_ATOL 2e-4

static void fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *rng) {
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * kern_rng_uniform(rng);
}

static double dot_d(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* An objective of the inputs: recomputes the kernel and returns L in double. */
typedef double (*ObjectiveFn)(void *ctx);

/* Compares @ana (n) with central differences of @fn in each entry of @x (n). */
static void check_grad(ObjectiveFn fn, void *ctx, float *x, const float *ana, size_t n,
                       const char *what) {
    double maxabs = 0.0;
    for (size_t i = 0; i < n; i++)
        maxabs = fabs(ana[i]) > maxabs ? fabs(ana[i]) : maxabs;
    ck_assert_msg(maxabs > 0.0, "%s: analytic gradient is all zero", what);
    for (size_t i = 0; i < n; i++) {
        float orig = x[i];
        x[i] = orig + FD_EPS;
        double lp = fn(ctx);
        x[i] = orig - FD_EPS;
        double lm = fn(ctx);
        x[i] = orig;
        double num = (lp - lm) / (2.0 * (double)FD_EPS);
        double tol = FD_RTOL * fabs(ana[i]) + FD_ATOL * maxabs;
        ck_assert_msg(fabs(num - ana[i]) <= tol, "%s[%zu]: numeric %.7g analytic %.7g", what, i,
                      num, (double)ana[i]);
    }
}

/* --- layernorm --- */

enum { LN_N = 6, LN_C = 16 };

typedef struct {
    float inp[LN_N * LN_C], w[LN_C], b[LN_C], r[LN_N * LN_C];
    float out[LN_N * LN_C], mean[LN_N], rstd[LN_N];
} LnCase;

static double ln_objective(void *ctx) {
    LnCase *c = ctx;
    gpt2_cpu_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, LN_N, LN_C);
    return dot_d(c->out, c->r, LN_N * LN_C);
}

START_TEST(test_layernorm_grad) {
    static LnCase c;
    uint64_t      rng = kern_rng_seed(1);
    fill_uniform(c.inp, LN_N * LN_C, -2.0f, 2.0f, &rng);
    fill_uniform(c.w, LN_C, 0.5f, 1.5f, &rng);
    fill_uniform(c.b, LN_C, -0.5f, 0.5f, &rng);
    fill_uniform(c.r, LN_N * LN_C, -1.0f, 1.0f, &rng);
    ln_objective(&c);
    /* each normalised row has mean 0 and variance var / (var + eps) before the affine part */
    for (int n = 0; n < LN_N; n++) {
        double m = 0.0;
        for (int i = 0; i < LN_C; i++)
            m += (c.out[n * LN_C + i] - c.b[i]) / c.w[i];
        ck_assert_double_eq_tol(m / LN_C, 0.0, 1e-5);
    }
    static float dinp[LN_N * LN_C], dw[LN_C], db[LN_C];
    memset(dinp, 0, sizeof dinp);
    memset(dw, 0, sizeof dw);
    memset(db, 0, sizeof db);
    gpt2_cpu_layernorm_backward_input(dinp, c.r, c.inp, c.w, c.mean, c.rstd, LN_N, LN_C);
    gpt2_cpu_layernorm_backward_weight(dw, db, c.r, c.inp, c.mean, c.rstd, LN_N, LN_C);
    check_grad(ln_objective, &c, c.inp, dinp, LN_N * LN_C, "layernorm dinp");
    check_grad(ln_objective, &c, c.w, dw, LN_C, "layernorm dweight");
    check_grad(ln_objective, &c, c.b, db, LN_C, "layernorm dbias");
}
END_TEST

/* --- matmul --- */

enum { MM_N = 6, MM_IC = 8, MM_OC = 12 };

typedef struct {
    float inp[MM_N * MM_IC], w[MM_OC * MM_IC], b[MM_OC], r[MM_N * MM_OC], out[MM_N * MM_OC];
} MmCase;

static double mm_objective(void *ctx) {
    MmCase *c = ctx;
    gpt2_cpu_matmul_forward(c->out, c->inp, c->w, c->b, MM_N, MM_IC, MM_OC);
    return dot_d(c->out, c->r, MM_N * MM_OC);
}

START_TEST(test_matmul_grad) {
    static MmCase c;
    uint64_t      rng = kern_rng_seed(2);
    fill_uniform(c.inp, MM_N * MM_IC, -1.0f, 1.0f, &rng);
    fill_uniform(c.w, MM_OC * MM_IC, -1.0f, 1.0f, &rng);
    fill_uniform(c.b, MM_OC, -1.0f, 1.0f, &rng);
    fill_uniform(c.r, MM_N * MM_OC, -1.0f, 1.0f, &rng);
    mm_objective(&c);
    /* closed form of one entry: out[n, o] = b[o] + sum_i inp[n, i] w[o, i] */
    double ref = c.b[5];
    for (int i = 0; i < MM_IC; i++)
        ref += (double)c.inp[3 * MM_IC + i] * c.w[5 * MM_IC + i];
    ck_assert_double_eq_tol(c.out[3 * MM_OC + 5], ref, 1e-5);

    static float dinp[MM_N * MM_IC], dw[MM_OC * MM_IC], db[MM_OC];
    memset(dw, 0, sizeof dw);
    memset(db, 0, sizeof db);
    gpt2_cpu_matmul_backward_input(dinp, c.r, c.w, MM_N, MM_IC, MM_OC);
    gpt2_cpu_matmul_backward_weight(dw, db, c.r, c.inp, MM_N, MM_IC, MM_OC);
    check_grad(mm_objective, &c, c.inp, dinp, MM_N * MM_IC, "matmul dinp");
    check_grad(mm_objective, &c, c.w, dw, MM_OC * MM_IC, "matmul dweight");
    check_grad(mm_objective, &c, c.b, db, MM_OC, "matmul dbias");

    /* W accumulates: a second call doubles the gradients (up to the rounding of the sums) */
    static float dw2[MM_OC * MM_IC], db2[MM_OC];
    memcpy(dw2, dw, sizeof dw);
    memcpy(db2, db, sizeof db);
    gpt2_cpu_matmul_backward_weight(dw2, db2, c.r, c.inp, MM_N, MM_IC, MM_OC);
    for (int i = 0; i < MM_OC * MM_IC; i++)
        ck_assert_float_eq_tol(dw2[i], 2.0f * dw[i], 1e-5f);
    for (int i = 0; i < MM_OC; i++)
        ck_assert_float_eq_tol(db2[i], 2.0f * db[i], 1e-5f);
}
END_TEST

/* --- attention --- */

enum { AT_B = 2, AT_T = 8, AT_C = 16, AT_NH = 2 };

typedef struct {
    float qkv[AT_B * AT_T * 3 * AT_C], r[AT_B * AT_T * AT_C];
    float out[AT_B * AT_T * AT_C], att[AT_B * AT_NH * AT_T * AT_T];
} AttCase;

static double att_objective(void *ctx) {
    AttCase *c = ctx;
    gpt2_cpu_attention_forward(c->out, c->att, c->qkv, AT_B, AT_T, AT_C, AT_NH);
    return dot_d(c->out, c->r, AT_B * AT_T * AT_C);
}

START_TEST(test_attention_grad) {
    static AttCase c;
    uint64_t       rng = kern_rng_seed(3);
    fill_uniform(c.qkv, AT_B * AT_T * 3 * AT_C, -1.0f, 1.0f, &rng);
    fill_uniform(c.r, AT_B * AT_T * AT_C, -1.0f, 1.0f, &rng);
    att_objective(&c);
    /* probabilities: rows sum to 1, zero above the diagonal */
    for (int bh = 0; bh < AT_B * AT_NH; bh++) {
        for (int t = 0; t < AT_T; t++) {
            const float *row = c.att + ((size_t)bh * AT_T + t) * AT_T;
            double       s = 0.0;
            for (int j = 0; j < AT_T; j++) {
                if (j > t)
                    ck_assert_float_eq(row[j], 0.0f);
                s += row[j];
            }
            ck_assert_double_eq_tol(s, 1.0, 1e-6);
        }
    }
    /* position 0 attends only to itself: its output is its own value vector */
    for (int i = 0; i < AT_C; i++)
        ck_assert_float_eq_tol(c.out[i], c.qkv[2 * AT_C + i], 1e-6f);

    static float dqkv[AT_B * AT_T * 3 * AT_C];
    gpt2_cpu_attention_backward(dqkv, c.r, c.qkv, c.att, AT_B, AT_T, AT_C, AT_NH);
    check_grad(att_objective, &c, c.qkv, dqkv, AT_B * AT_T * 3 * AT_C, "attention dqkv");
}
END_TEST

/* Several query blocks, the last one ragged: forward and backward against a direct double
 * evaluation of the formulas, and bitwise the same with 1 and 3 threads. */
enum { AB_B = 2, AB_T = 70, AB_C = 32, AB_NH = 2, AB_HS = AB_C / AB_NH };

static void attention_reference(double *out, double *dqkv, const float *qkv, const float *r) {
    double scale = 1.0 / sqrt((double)AB_HS), p[AB_T], dp[AB_T];
    memset(dqkv, 0, sizeof(double) * AB_B * AB_T * 3 * AB_C);
    for (int b = 0; b < AB_B; b++) {
        for (int h = 0; h < AB_NH; h++) {
            const float *base = qkv + (size_t)b * AB_T * 3 * AB_C + h * AB_HS;
            double      *dbase = dqkv + (size_t)b * AB_T * 3 * AB_C + h * AB_HS;
            for (int t = 0; t < AB_T; t++) {
                const float *q = base + (size_t)t * 3 * AB_C;
                const float *dout = r + ((size_t)b * AB_T + t) * AB_C + h * AB_HS;
                double       maxv = -INFINITY, sum = 0.0, dot = 0.0;
                for (int j = 0; j <= t; j++) {
                    const float *k = base + (size_t)j * 3 * AB_C + AB_C;
                    double       sc = 0.0;
                    for (int i = 0; i < AB_HS; i++)
                        sc += (double)q[i] * k[i];
                    p[j] = sc * scale;
                    maxv = p[j] > maxv ? p[j] : maxv;
                }
                for (int j = 0; j <= t; j++)
                    sum += (p[j] = exp(p[j] - maxv));
                for (int i = 0; i < AB_HS; i++)
                    out[((size_t)b * AB_T + t) * AB_C + h * AB_HS + i] = 0.0;
                for (int j = 0; j <= t; j++) {
                    const float *v = base + (size_t)j * 3 * AB_C + 2 * AB_C;
                    p[j] /= sum;
                    dp[j] = 0.0;
                    for (int i = 0; i < AB_HS; i++) {
                        out[((size_t)b * AB_T + t) * AB_C + h * AB_HS + i] += p[j] * v[i];
                        dp[j] += (double)dout[i] * v[i];
                        dbase[(size_t)j * 3 * AB_C + 2 * AB_C + i] += p[j] * dout[i];
                    }
                    dot += p[j] * dp[j];
                }
                for (int j = 0; j <= t; j++) {
                    const float *k = base + (size_t)j * 3 * AB_C + AB_C;
                    double       ds = p[j] * (dp[j] - dot) * scale;
                    for (int i = 0; i < AB_HS; i++) {
                        dbase[(size_t)t * 3 * AB_C + i] += ds * k[i];
                        dbase[(size_t)j * 3 * AB_C + AB_C + i] += ds * q[i];
                    }
                }
            }
        }
    }
}

static void assert_close(const float *got, const double *want, size_t n, const char *what) {
    double maxabs = 0.0;
    for (size_t i = 0; i < n; i++)
        maxabs = fabs(want[i]) > maxabs ? fabs(want[i]) : maxabs;
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 * maxabs, "%s[%zu]: %.8g, want %.8g", what, i,
                      (double)got[i], want[i]);
}

START_TEST(test_attention_blocks) {
    enum {
        NQKV = AB_B * AB_T * 3 * AB_C,
        NOUT = AB_B * AB_T * AB_C,
        NATT = AB_B * AB_NH * AB_T * AB_T
    };
    static float  qkv[NQKV], r[NOUT], out[2][NOUT], att[2][NATT], dqkv[2][NQKV];
    static double ref_out[NOUT], ref_dqkv[NQKV];
    uint64_t      rng = kern_rng_seed(10);
    fill_uniform(qkv, NQKV, -1.5f, 1.5f, &rng);
    fill_uniform(r, NOUT, -1.0f, 1.0f, &rng);
    for (int run = 0; run < 2; run++) {
        kern_set_threads(run == 0 ? 1 : 3);
        memset(att[run], 0xff, sizeof att[run]); /* NaN: every entry must be written */
        gpt2_cpu_attention_forward(out[run], att[run], qkv, AB_B, AB_T, AB_C, AB_NH);
        gpt2_cpu_attention_backward(dqkv[run], r, qkv, att[run], AB_B, AB_T, AB_C, AB_NH);
    }
    kern_set_threads(1);
    attention_reference(ref_out, ref_dqkv, qkv, r);
    assert_close(out[0], ref_out, NOUT, "attention out");
    assert_close(dqkv[0], ref_dqkv, NQKV, "attention dqkv");
    for (int bh = 0; bh < AB_B * AB_NH; bh++)
        for (int t = 0; t < AB_T; t++)
            for (int j = t + 1; j < AB_T; j++)
                ck_assert_float_eq(att[0][((size_t)bh * AB_T + t) * AB_T + j], 0.0f);
    ck_assert_mem_eq(out[0], out[1], sizeof out[0]);
    ck_assert_mem_eq(att[0], att[1], sizeof att[0]);
    ck_assert_mem_eq(dqkv[0], dqkv[1], sizeof dqkv[0]);
}
END_TEST

/* --- GELU --- */

enum { GE_N = 64 };

typedef struct {
    float inp[GE_N], r[GE_N], out[GE_N];
} GeluCase;

static double gelu_objective(void *ctx) {
    GeluCase *c = ctx;
    gpt2_cpu_gelu_forward(c->out, c->inp, GE_N);
    return dot_d(c->out, c->r, GE_N);
}

START_TEST(test_gelu_grad) {
    static GeluCase c;
    uint64_t        rng = kern_rng_seed(4);
    fill_uniform(c.inp, GE_N, -4.0f, 4.0f, &rng);
    fill_uniform(c.r, GE_N, -1.0f, 1.0f, &rng);
    c.inp[0] = 0.0f;
    c.inp[1] = 1.0f;
    gelu_objective(&c);
    ck_assert_float_eq(c.out[0], 0.0f);
    double u = sqrt(2.0 / M_PI) * (1.0 + 0.044715);
    ck_assert_double_eq_tol(c.out[1], 0.5 * (1.0 + tanh(u)), 1e-6);
    static float dinp[GE_N];
    gpt2_cpu_gelu_backward(dinp, c.inp, c.r, GE_N);
    check_grad(gelu_objective, &c, c.inp, dinp, GE_N, "gelu dinp");
    /* in place: dinp may alias dout */
    static float inplace[GE_N];
    memcpy(inplace, c.r, sizeof inplace);
    gpt2_cpu_gelu_backward(inplace, c.inp, inplace, GE_N);
    ck_assert_mem_eq(inplace, dinp, sizeof dinp);
}
END_TEST

/* --- residual --- */

enum { RS_N = 20 };

typedef struct {
    float a[RS_N], b[RS_N], r[RS_N], out[RS_N];
} ResCase;

static double res_objective(void *ctx) {
    ResCase *c = ctx;
    gpt2_cpu_residual_forward(c->out, c->a, c->b, RS_N);
    return dot_d(c->out, c->r, RS_N);
}

START_TEST(test_residual_grad) {
    static ResCase c;
    uint64_t       rng = kern_rng_seed(5);
    fill_uniform(c.a, RS_N, -1.0f, 1.0f, &rng);
    fill_uniform(c.b, RS_N, -1.0f, 1.0f, &rng);
    fill_uniform(c.r, RS_N, -1.0f, 1.0f, &rng);
    static float da[RS_N], db[RS_N];
    memset(da, 0, sizeof da);
    memset(db, 0, sizeof db);
    gpt2_cpu_residual_backward(da, db, c.r, RS_N);
    check_grad(res_objective, &c, c.a, da, RS_N, "residual dinp1");
    check_grad(res_objective, &c, c.b, db, RS_N, "residual dinp2");
}
END_TEST

/* --- softmax + cross-entropy, fused with the LM head --- */

enum { CE_N = 4, CE_C = 8, CE_V = 37, CE_VP = 128 };

typedef struct {
    float   inp[CE_N * CE_C], w[CE_VP * CE_C], probs[CE_N * CE_VP];
    int32_t targets[CE_N];
} CeCase;

/* mean loss of the logits inp @ w^T; leaves the probabilities in probs */
static double ce_objective(void *ctx) {
    CeCase *c = ctx;
    gpt2_cpu_matmul_forward(c->probs, c->inp, c->w, NULL, CE_N, CE_C, CE_VP);
    return gpt2_cpu_crossentropy_forward(c->probs, NULL, c->targets, CE_N, CE_V, CE_VP);
}

START_TEST(test_crossentropy_grad) {
    static CeCase c;
    uint64_t      rng = kern_rng_seed(6);
    for (int n = 0; n < CE_N; n++)
        c.targets[n] = (int32_t)(n * 11 % CE_V);
    /* equal logits: the loss is log V exactly, whatever the padded columns hold */
    static float logits[CE_N * CE_VP], row_loss[CE_N];
    for (int i = 0; i < CE_N * CE_VP; i++)
        logits[i] = (i % CE_VP) < CE_V ? 0.5f : 100.0f * kern_rng_uniform(&rng);
    float loss = gpt2_cpu_crossentropy_forward(logits, row_loss, c.targets, CE_N, CE_V, CE_VP);
    ck_assert_double_eq_tol(loss, log((double)CE_V), 1e-6);
    ck_assert_double_eq_tol(row_loss[2], log((double)CE_V), 1e-6);

    fill_uniform(c.inp, CE_N * CE_C, -1.0f, 1.0f, &rng);
    fill_uniform(c.w, CE_VP * CE_C, -1.0f, 1.0f, &rng);
    /* probabilities: sum 1 over the real vocabulary, exactly 0 in the padding */
    loss = (float)ce_objective(&c);
    for (int n = 0; n < CE_N; n++) {
        double s = 0.0;
        for (int i = 0; i < CE_VP; i++) {
            if (i >= CE_V)
                ck_assert_float_eq(c.probs[n * CE_VP + i], 0.0f);
            s += c.probs[n * CE_VP + i];
        }
        ck_assert_double_eq_tol(s, 1.0, 1e-5);
    }
    /* the loss ignores the padded logits (weight rows V..Vp-1) */
    for (int i = CE_V * CE_C; i < CE_VP * CE_C; i++)
        c.w[i] = 1e3f;
    float again = (float)ce_objective(&c);
    ck_assert_mem_eq(&again, &loss, sizeof loss);

    /* gradients through the head: padded weight rows get exactly zero */
    static float dinp[CE_N * CE_C], dw[CE_VP * CE_C];
    memset(dw, 0, sizeof dw);
    gpt2_cpu_head_backward_input(dinp, c.probs, c.targets, 1.0f / CE_N, c.w, CE_N, CE_C, CE_V,
                                 CE_VP);
    gpt2_cpu_head_backward_weight(dw, c.probs, c.targets, 1.0f / CE_N, c.inp, CE_N, CE_C, CE_V,
                                  CE_VP);
    for (int i = CE_V * CE_C; i < CE_VP * CE_C; i++)
        ck_assert_float_eq(dw[i], 0.0f);
    check_grad(ce_objective, &c, c.inp, dinp, CE_N * CE_C, "head dinp");
    /* the real rows only: the padded ones do not enter the loss at all */
    check_grad(ce_objective, &c, c.w, dw, CE_V * CE_C, "head dweight");
}
END_TEST

/* --- embedding --- */

enum { EN_B = 2, EN_T = 4, EN_C = 8, EN_VP = 16 };

typedef struct {
    float   wte[EN_VP * EN_C], wpe[EN_T * EN_C], r[EN_B * EN_T * EN_C], out[EN_B * EN_T * EN_C];
    int32_t tokens[EN_B * EN_T];
} EncCase;

static double enc_objective(void *ctx) {
    EncCase *c = ctx;
    gpt2_cpu_encoder_forward(c->out, c->tokens, c->wte, c->wpe, EN_B, EN_T, EN_C);
    return dot_d(c->out, c->r, EN_B * EN_T * EN_C);
}

START_TEST(test_encoder_grad) {
    static EncCase c;
    uint64_t       rng = kern_rng_seed(7);
    fill_uniform(c.wte, EN_VP * EN_C, -1.0f, 1.0f, &rng);
    fill_uniform(c.wpe, EN_T * EN_C, -1.0f, 1.0f, &rng);
    fill_uniform(c.r, EN_B * EN_T * EN_C, -1.0f, 1.0f, &rng);
    /* token 3 appears three times: its gradient row sums three contributions */
    const int32_t tokens[EN_B * EN_T] = {3, 5, 3, 0, 9, 3, 1, 2};
    memcpy(c.tokens, tokens, sizeof tokens);
    enc_objective(&c);
    ck_assert_float_eq(c.out[(1 * EN_T + 2) * EN_C + 4], c.wte[1 * EN_C + 4] + c.wpe[2 * EN_C + 4]);
    static float dwte[EN_VP * EN_C], dwpe[EN_T * EN_C];
    memset(dwte, 0, sizeof dwte);
    memset(dwpe, 0, sizeof dwpe);
    gpt2_cpu_encoder_backward(dwte, dwpe, c.r, c.tokens, EN_B, EN_T, EN_C);
    check_grad(enc_objective, &c, c.wpe, dwpe, EN_T * EN_C, "encoder dwpe");
    /* rows of unused tokens (including the padded ones) stay 0; used rows match FD */
    for (int v = 0; v < EN_VP; v++) {
        int used = 0;
        for (int i = 0; i < EN_B * EN_T; i++)
            used |= tokens[i] == v;
        if (used) {
            check_grad(enc_objective, &c, c.wte + v * EN_C, dwte + v * EN_C, EN_C, "encoder dwte");
        } else {
            for (int i = 0; i < EN_C; i++)
                ck_assert_float_eq(dwte[v * EN_C + i], 0.0f);
        }
    }
}
END_TEST

static Suite *kernels_suite(void) {
    Suite *s = suite_create("kernels-cpu");
    TCase *tc = tcase_create("grad");
    tcase_add_test(tc, test_layernorm_grad);
    tcase_add_test(tc, test_matmul_grad);
    tcase_add_test(tc, test_attention_grad);
    tcase_add_test(tc, test_attention_blocks);
    tcase_add_test(tc, test_gelu_grad);
    tcase_add_test(tc, test_residual_grad);
    tcase_add_test(tc, test_crossentropy_grad);
    tcase_add_test(tc, test_encoder_grad);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(kernels_suite());
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
