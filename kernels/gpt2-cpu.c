/* SPDX-License-Identifier: MIT
 * gpt2-cpu.c: the GPT-2 CPU kernels of gpt2-cpu.h but attention and the loss (gpt2-cpu-attn.c,
 * gpt2-cpu-loss.c). Matmuls are kern_gemm() calls; the other loops run on the kern-pool team,
 * split by rows where each row is independent and by channels where rows are summed (so every
 * sum keeps one fixed order), each chunk compiled per instruction set (KERN_CLONES).
 */
#include "gpt2-cpu.h"

#include <math.h>
#include <string.h>

#include "gpt2-cpu-math.h"
#include "kern-check.h"
#include "kern-gemm.h"
#include "kern-pool.h"
#include "kern-simd.h"

#define GPT2_LN_EPS 1e-5f

/* Smallest chunks handed to a thread: rows of (C) floats, channels of a column sum over all
 * rows, and elements of an element-wise loop. */
#define GPT2_GRAIN_ROWS     16
#define GPT2_GRAIN_CHANNELS 32
#define GPT2_GRAIN_ELEMS    8192

/* --- embedding --- */

typedef struct {
    float         *out, *dwte, *dwpe;
    const float   *wte, *wpe, *dout;
    const int32_t *tokens;
    int            B, T, C;
} EncoderArgs;

KERN_CLONES static void encoder_forward_rows(void *arg, size_t begin, size_t end) {
    const EncoderArgs *a = arg;
    int                C = a->C;
    for (size_t n = begin; n < end; n++) {
        float       *o = a->out + n * C;
        const float *we = a->wte + (size_t)a->tokens[n] * C;
        const float *pe = a->wpe + (n % (size_t)a->T) * C;
        for (int i = 0; i < C; i++)
            o[i] = we[i] + pe[i];
    }
}

void gpt2_cpu_encoder_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                              int B, int T, int C) {
    EncoderArgs a = {.out = out, .tokens = tokens, .wte = wte, .wpe = wpe, .B = B, .T = T, .C = C};
    kern_parallel_range((size_t)B * T, GPT2_GRAIN_ROWS, encoder_forward_rows, &a);
}

/* Channels [begin, end) of every row, rows in order: a token seen twice adds in (b, t) order. */
KERN_CLONES static void encoder_backward_channels(void *arg, size_t begin, size_t end) {
    const EncoderArgs *a = arg;
    int                C = a->C;
    for (int n = 0; n < a->B * a->T; n++) {
        const float *d = a->dout + (size_t)n * C;
        float       *dwe = a->dwte + (size_t)a->tokens[n] * C;
        float       *dpe = a->dwpe + (size_t)(n % a->T) * C;
        for (size_t i = begin; i < end; i++) {
            dwe[i] += d[i];
            dpe[i] += d[i];
        }
    }
}

void gpt2_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                               int B, int T, int C) {
    EncoderArgs a = {
        .dwte = dwte, .dwpe = dwpe, .dout = dout, .tokens = tokens, .B = B, .T = T, .C = C};
    kern_parallel_range((size_t)C, GPT2_GRAIN_CHANNELS, encoder_backward_channels, &a);
}

/* --- layernorm --- */

typedef struct {
    float       *out, *mean, *rstd, *dinp, *dweight, *dbias;
    const float *inp, *weight, *bias, *dout, *cmean, *crstd;
    int          N, C;
} LayernormArgs;

KERN_CLONES static void layernorm_forward_rows(void *arg, size_t begin, size_t end) {
    const LayernormArgs *a = arg;
    int                  C = a->C;
    float                dev[GPT2_LANES];
    for (size_t n = begin; n < end; n++) {
        const float *x = a->inp + n * C;
        float       *o = a->out + n * C;
        float        m = gpt2_cpu_row_sum(x, C) / (float)C;
        float        acc[GPT2_LANES] = {0};
        int          i = 0;
        for (; i + GPT2_LANES <= C; i += GPT2_LANES) {
            for (int k = 0; k < GPT2_LANES; k++) {
                dev[k] = x[i + k] - m;
                acc[k] += dev[k] * dev[k];
            }
        }
        for (; i < C; i++)
            acc[i % GPT2_LANES] += (x[i] - m) * (x[i] - m);
        float v = gpt2_cpu_lanes_sum(acc) / (float)C;
        float s = 1.0f / sqrtf(v + GPT2_LN_EPS);
        for (i = 0; i < C; i++)
            o[i] = (x[i] - m) * s * a->weight[i] + a->bias[i];
        a->mean[n] = m;
        a->rstd[n] = s;
    }
}

void gpt2_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                const float *weight, const float *bias, int N, int C) {
    LayernormArgs a = {.out = out,
                       .mean = mean,
                       .rstd = rstd,
                       .inp = inp,
                       .weight = weight,
                       .bias = bias,
                       .N = N,
                       .C = C};
    kern_parallel_range((size_t)N, GPT2_GRAIN_ROWS, layernorm_forward_rows, &a);
}

KERN_CLONES static void layernorm_backward_input_rows(void *arg, size_t begin, size_t end) {
    const LayernormArgs *a = arg;
    int                  C = a->C;
    const float         *w = a->weight;
    for (size_t n = begin; n < end; n++) {
        const float *x = a->inp + n * C;
        const float *d = a->dout + n * C;
        float       *dx = a->dinp + n * C;
        float        m = a->cmean[n], s = a->crstd[n];
        /* dxhat = dout * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
        float acc_d[GPT2_LANES] = {0}, acc_dx[GPT2_LANES] = {0};
        int   i = 0;
        for (; i + GPT2_LANES <= C; i += GPT2_LANES) {
            for (int k = 0; k < GPT2_LANES; k++) {
                float xhat = (x[i + k] - m) * s;
                float dxhat = d[i + k] * w[i + k];
                acc_d[k] += dxhat;
                acc_dx[k] += dxhat * xhat;
            }
        }
        for (; i < C; i++) {
            float xhat = (x[i] - m) * s;
            float dxhat = d[i] * w[i];
            acc_d[i % GPT2_LANES] += dxhat;
            acc_dx[i % GPT2_LANES] += dxhat * xhat;
        }
        float dmean = gpt2_cpu_lanes_sum(acc_d) / (float)C;
        float dnorm_mean = gpt2_cpu_lanes_sum(acc_dx) / (float)C;
        for (i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s;
            float dxhat = d[i] * w[i];
            dx[i] += (dxhat - dmean - xhat * dnorm_mean) * s;
        }
    }
}

void gpt2_cpu_layernorm_backward_input(float *dinp, const float *dout, const float *inp,
                                       const float *weight, const float *mean, const float *rstd,
                                       int N, int C) {
    LayernormArgs a = {.dinp = dinp,
                       .dout = dout,
                       .inp = inp,
                       .weight = weight,
                       .cmean = mean,
                       .crstd = rstd,
                       .N = N,
                       .C = C};
    kern_parallel_range((size_t)N, GPT2_GRAIN_ROWS, layernorm_backward_input_rows, &a);
}

/* Channels [begin, end), rows in order. */
KERN_CLONES static void layernorm_backward_weight_channels(void *arg, size_t begin, size_t end) {
    const LayernormArgs *a = arg;
    int                  C = a->C;
    for (int n = 0; n < a->N; n++) {
        const float *x = a->inp + (size_t)n * C;
        const float *d = a->dout + (size_t)n * C;
        float        m = a->cmean[n], s = a->crstd[n];
        for (size_t i = begin; i < end; i++) {
            a->dweight[i] += d[i] * ((x[i] - m) * s);
            a->dbias[i] += d[i];
        }
    }
}

void gpt2_cpu_layernorm_backward_weight(float *dweight, float *dbias, const float *dout,
                                        const float *inp, const float *mean, const float *rstd,
                                        int N, int C) {
    LayernormArgs a = {.dweight = dweight,
                       .dbias = dbias,
                       .dout = dout,
                       .inp = inp,
                       .cmean = mean,
                       .crstd = rstd,
                       .N = N,
                       .C = C};
    kern_parallel_range((size_t)C, GPT2_GRAIN_CHANNELS, layernorm_backward_weight_channels, &a);
}

/* --- matmul --- */

typedef struct {
    float       *out;
    const float *src;
    int          N, OC;
} RowsArgs;

static void matmul_bias_rows(void *arg, size_t begin, size_t end) {
    const RowsArgs *a = arg;
    for (size_t n = begin; n < end; n++)
        memcpy(a->out + n * a->OC, a->src, (size_t)a->OC * sizeof(float));
}

void gpt2_cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                             int N, int IC, int OC) {
    float beta = 0.0f;
    if (bias) {
        /* start from the bias so that the product adds onto it (no second pass over out) */
        RowsArgs a = {.out = out, .src = bias, .N = N, .OC = OC};
        kern_parallel_range((size_t)N, GPT2_GRAIN_ROWS, matmul_bias_rows, &a);
        beta = 1.0f;
    }
    kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_TRANS, N, OC, IC, 1.0f, inp, IC, weight, IC, beta, out,
              OC);
}

void gpt2_cpu_matmul_backward_input(float *dinp, const float *dout, const float *weight, int N,
                                    int IC, int OC) {
    kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f,
              dinp, IC);
}

/* dbias channels [begin, end) += the column sums of dout, rows in order. */
KERN_CLONES static void matmul_bias_grad_channels(void *arg, size_t begin, size_t end) {
    const RowsArgs *a = arg;
    for (int n = 0; n < a->N; n++) {
        const float *d = a->src + (size_t)n * a->OC;
        for (size_t o = begin; o < end; o++)
            a->out[o] += d[o];
    }
}

void gpt2_cpu_matmul_backward_weight(float *dweight, float *dbias, const float *dout,
                                     const float *inp, int N, int IC, int OC) {
    kern_gemm(KERN_GEMM_TRANS, KERN_GEMM_NO_TRANS, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f,
              dweight, IC);
    if (dbias) {
        RowsArgs a = {.out = dbias, .src = dout, .N = N, .OC = OC};
        kern_parallel_range((size_t)OC, GPT2_GRAIN_CHANNELS, matmul_bias_grad_channels, &a);
    }
}

/* --- GELU --- */

#define GPT2_GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */

typedef struct {
    float       *out;
    const float *inp, *inp2;
} ElemArgs;

KERN_CLONES static void gelu_forward_elems(void *arg, size_t begin, size_t end) {
    const ElemArgs *a = arg;
    for (size_t i = begin; i < end; i++) {
        float x = a->inp[i];
        float u = GPT2_GELU_SCALE * (x + 0.044715f * x * x * x);
        a->out[i] = 0.5f * x * (1.0f + gpt2_cpu_tanhf(u));
    }
}

void gpt2_cpu_gelu_forward(float *out, const float *inp, size_t N) {
    ElemArgs a = {.out = out, .inp = inp};
    kern_parallel_range(N, GPT2_GRAIN_ELEMS, gelu_forward_elems, &a);
}

/* inp: the GELU input, inp2: dout (out may alias it) */
KERN_CLONES static void gelu_backward_elems(void *arg, size_t begin, size_t end) {
    const ElemArgs *a = arg;
    for (size_t i = begin; i < end; i++) {
        float x = a->inp[i];
        float u = GPT2_GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = gpt2_cpu_tanhf(u);
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) +
                     0.5f * x * sech2 * GPT2_GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        a->out[i] = grad * a->inp2[i];
    }
}

void gpt2_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N) {
    ElemArgs a = {.out = dinp, .inp = inp, .inp2 = dout};
    kern_parallel_range(N, GPT2_GRAIN_ELEMS, gelu_backward_elems, &a);
}

/* --- residual --- */

KERN_CLONES static void residual_forward_elems(void *arg, size_t begin, size_t end) {
    const ElemArgs *a = arg;
    for (size_t i = begin; i < end; i++)
        a->out[i] = a->inp[i] + a->inp2[i];
}

void gpt2_cpu_residual_forward(float *out, const float *inp1, const float *inp2, size_t N) {
    ElemArgs a = {.out = out, .inp = inp1, .inp2 = inp2};
    kern_parallel_range(N, GPT2_GRAIN_ELEMS, residual_forward_elems, &a);
}

void gpt2_cpu_residual_backward(float *dinp1, float *dinp2, const float *dout, size_t N) {
    for (size_t i = 0; i < N; i++) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}
