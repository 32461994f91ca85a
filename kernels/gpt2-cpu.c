/* SPDX-License-Identifier: MIT
 * gpt2-cpu.c: the GPT-2 CPU kernels of gpt2-cpu.h. Matmuls (including the per-head attention
 * products) are cblas_sgemm calls; the remaining loops are single-threaded with a fixed
 * order, which keeps every result bitwise reproducible. exp and tanh use an inline
 * polynomial exp (relative error below 3e-7) so that the loops over logits vectorise.
 */
#include "gpt2-cpu.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kern-check.h"

#define GPT2_LN_EPS 1e-5f

/* Lanes of the fixed-order partial sums/maxima: wide enough for the compiler to vectorise,
 * and the same on every machine, so reductions stay bitwise reproducible. */
#define GPT2_LANES 16

/* e^x for x in about [-87, 88] (clamped outside): x = n ln2 + r with |r| <= ln2 / 2, e^r by
 * its degree-6 Taylor polynomial, 2^n assembled in the exponent bits (relative error below
 * 3e-7 over the range, measured against double exp).
 * Branch-free, so loops calling it vectorise; deterministic. */
static inline float gpt2_cpu_expf(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    /* round-to-nearest of x / ln2 by the 1.5 * 2^23 trick */
    float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    /* ln2 split in a high part exact in float times small n, and the rest */
    float   r = x - n * 0.693145752f - n * 1.42860677e-6f;
    float   p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f +
                                                  r * (0.0416666679f + r * (0.00833333377f +
                                                                            r * 0.00138888892f)))));
    int32_t bits = ((int32_t)n + 127) << 23;
    float   scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* tanh(u) = 1 - 2 / (e^{2u} + 1); absolute error ~1e-7, enough where 1 + tanh is used. */
static inline float gpt2_cpu_tanhf(float u) {
    return 1.0f - 2.0f / (gpt2_cpu_expf(2.0f * u) + 1.0f);
}

/* x[i] = e^(x[i] - shift) for i < n, in place; returns their sum, accumulated in GPT2_LANES
 * fixed partial sums (one pass over x). */
static float gpt2_cpu_exp_shifted_sum(float *x, int n, float shift) {
    float acc[GPT2_LANES] = {0};
    int   i = 0;
    for (; i + GPT2_LANES <= n; i += GPT2_LANES) {
        for (int k = 0; k < GPT2_LANES; k++) {
            float e = gpt2_cpu_expf(x[i + k] - shift);
            x[i + k] = e;
            acc[k] += e;
        }
    }
    for (; i < n; i++) {
        x[i] = gpt2_cpu_expf(x[i] - shift);
        acc[i % GPT2_LANES] += x[i];
    }
    float s = 0.0f;
    for (int k = 0; k < GPT2_LANES; k++)
        s += acc[k];
    return s;
}

/* Maximum of x[0..n), n >= 1. */
static float gpt2_cpu_row_max(const float *x, int n) {
    float acc[GPT2_LANES];
    for (int k = 0; k < GPT2_LANES; k++)
        acc[k] = x[0];
    int i = 0;
    for (; i + GPT2_LANES <= n; i += GPT2_LANES)
        for (int k = 0; k < GPT2_LANES; k++)
            acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
    for (; i < n; i++)
        acc[0] = x[i] > acc[0] ? x[i] : acc[0];
    float m = acc[0];
    for (int k = 1; k < GPT2_LANES; k++)
        m = acc[k] > m ? acc[k] : m;
    return m;
}

/* --- embedding --- */

void gpt2_cpu_encoder_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                              int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float       *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)tokens[b * T + t] * C;
            const float *pe = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++)
                o[i] = we[i] + pe[i];
        }
    }
}

void gpt2_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                               int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float       *dwe = dwte + (size_t)tokens[b * T + t] * C;
            float       *dpe = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) {
                dwe[i] += d[i];
                dpe[i] += d[i];
            }
        }
    }
}

/* --- layernorm --- */

void gpt2_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                const float *weight, const float *bias, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float       *o = out + (size_t)n * C;
        float        m = 0.0f;
        for (int i = 0; i < C; i++)
            m += x[i];
        m /= (float)C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        v /= (float)C;
        float s = 1.0f / sqrtf(v + GPT2_LN_EPS);
        for (int i = 0; i < C; i++)
            o[i] = (x[i] - m) * s * weight[i] + bias[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

void gpt2_cpu_layernorm_backward_input(float *dinp, const float *dout, const float *inp,
                                       const float *weight, const float *mean, const float *rstd,
                                       int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float       *dx = dinp + (size_t)n * C;
        float        m = mean[n], s = rstd[n];
        /* dxhat = dout * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
        float dmean = 0.0f, dnorm_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s;
            float dxhat = d[i] * weight[i];
            dmean += dxhat;
            dnorm_mean += dxhat * xhat;
        }
        dmean /= (float)C;
        dnorm_mean /= (float)C;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s;
            float dxhat = d[i] * weight[i];
            dx[i] += (dxhat - dmean - xhat * dnorm_mean) * s;
        }
    }
}

void gpt2_cpu_layernorm_backward_weight(float *dweight, float *dbias, const float *dout,
                                        const float *inp, const float *mean, const float *rstd,
                                        int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float        m = mean[n], s = rstd[n];
        for (int i = 0; i < C; i++) {
            dweight[i] += d[i] * ((x[i] - m) * s);
            dbias[i] += d[i];
        }
    }
}

/* --- matmul --- */

void gpt2_cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                             int N, int IC, int OC) {
    float beta = 0.0f;
    if (bias) {
        /* start from the bias so that sgemm adds onto it (no second pass over out) */
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, inp, IC, weight, IC, beta,
                out, OC);
}

void gpt2_cpu_matmul_backward_input(float *dinp, const float *dout, const float *weight, int N,
                                    int IC, int OC) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1.0f, dout, OC, weight, IC,
                0.0f, dinp, IC);
}

void gpt2_cpu_matmul_backward_weight(float *dweight, float *dbias, const float *dout,
                                     const float *inp, int N, int IC, int OC) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f,
                dweight, IC);
    if (dbias) {
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++)
                dbias[o] += d[o];
        }
    }
}

/* --- attention --- */

void gpt2_cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                int NH) {
    KERN_ASSERT(C % NH == 0);
    int   hs = C / NH;
    int   C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * hs;
            const float *k = q + C;
            const float *v = q + 2 * C;
            float       *a = att + ((size_t)b * NH + h) * T * T;
            /* scores (T, T) = scale * q @ k^T; entries above the diagonal are masked below */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3,
                        0.0f, a, T);
            for (int t = 0; t < T; t++) {
                float *row = a + (size_t)t * T;
                float  maxv = gpt2_cpu_row_max(row, t + 1);
                float  inv = 1.0f / gpt2_cpu_exp_shifted_sum(row, t + 1, maxv);
                for (int j = 0; j <= t; j++)
                    row[j] *= inv;
                for (int j = t + 1; j < T; j++)
                    row[j] = 0.0f;
            }
            /* out (T, hs) = att @ v; the zeros above the diagonal keep it causal */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3,
                        0.0f, out + (size_t)b * T * C + h * hs, C);
        }
    }
}

void gpt2_cpu_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                                 const float *att, int B, int T, int C, int NH) {
    KERN_ASSERT(C % NH == 0);
    int   hs = C / NH;
    int   C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t       base = (size_t)b * T * C3 + h * hs;
            const float *q = qkv + base;
            const float *k = q + C;
            const float *v = q + 2 * C;
            float       *dq = dqkv + base;
            float       *dk = dq + C;
            float       *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            const float *d = dout + (size_t)b * T * C + h * hs;
            /* datt (T, T) = dout @ v^T; dv (T, hs) = att^T @ dout */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d, C, v, C3, 0.0f,
                        scratch, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, d, C, 0.0f,
                        dv, C3);
            /* softmax backward in place, times the score scale: dscores (T, T) */
            for (int t = 0; t < T; t++) {
                float       *ds = scratch + (size_t)t * T;
                const float *p = a + (size_t)t * T;
                float        dot = 0.0f;
                for (int j = 0; j <= t; j++)
                    dot += p[j] * ds[j];
                for (int j = 0; j <= t; j++)
                    ds[j] = p[j] * (ds[j] - dot) * scale;
                for (int j = t + 1; j < T; j++)
                    ds[j] = 0.0f;
            }
            /* dq = dscores @ k; dk = dscores^T @ q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, scratch, T, k,
                        C3, 0.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, scratch, T, q, C3,
                        0.0f, dk, C3);
        }
    }
}

/* --- GELU --- */

#define GPT2_GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */

void gpt2_cpu_gelu_forward(float *out, const float *inp, size_t N) {
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float u = GPT2_GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + gpt2_cpu_tanhf(u));
    }
}

void gpt2_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N) {
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float u = GPT2_GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = gpt2_cpu_tanhf(u);
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) +
                     0.5f * x * sech2 * GPT2_GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = grad * dout[i];
    }
}

/* --- residual --- */

void gpt2_cpu_residual_forward(float *out, const float *inp1, const float *inp2, size_t N) {
    for (size_t i = 0; i < N; i++)
        out[i] = inp1[i] + inp2[i];
}

void gpt2_cpu_residual_backward(float *dinp1, float *dinp2, const float *dout, size_t N) {
    for (size_t i = 0; i < N; i++) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}

/* --- softmax + cross-entropy --- */

float gpt2_cpu_crossentropy_forward(float *logits, float *row_loss, const int32_t *targets, int N,
                                    int V, int Vp) {
    KERN_ASSERT(V <= Vp);
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        float *row = logits + (size_t)n * Vp;
        int    tgt = targets[n];
        KERN_ASSERT(tgt >= 0 && tgt < V);
        float  maxv = gpt2_cpu_row_max(row, V);
        float  tgt_shifted = row[tgt] - maxv;
        double sum = gpt2_cpu_exp_shifted_sum(row, V, maxv);
        float  inv = (float)(1.0 / sum);
        for (int i = 0; i < V; i++)
            row[i] *= inv;
        for (int i = V; i < Vp; i++)
            row[i] = 0.0f;
        /* -log p[target] = log(sum) - (logit[target] - max), exact even when p underflows */
        double loss = log(sum) - (double)tgt_shifted;
        if (row_loss)
            row_loss[n] = (float)loss;
        total += loss;
    }
    return (float)(total / N);
}

void gpt2_cpu_crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                                    float dloss, int N, int V, int Vp) {
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * Vp;
        float       *d = dlogits + (size_t)n * Vp;
        for (int i = 0; i < V; i++)
            d[i] = p[i] * dloss;
        d[targets[n]] -= dloss;
        for (int i = V; i < Vp; i++)
            d[i] = 0.0f;
    }
}
