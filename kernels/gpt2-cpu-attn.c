/* SPDX-License-Identifier: MIT
 * gpt2-cpu-attn.c: causal self-attention on the CPU (gpt2_cpu_attention_* of gpt2-cpu.h). One
 * task per (sequence, head) on the kern-pool team; inside a task, query rows go in blocks of
 * GPT2_ATT_BLOCK and each block's products cover only the keys it can see (at most the block's
 * last position), so the masked upper triangle is never multiplied.
 */
#include "gpt2-cpu.h"

#include <math.h>
#include <string.h>

#include "gpt2-cpu-math.h"
#include "kern-check.h"
#include "kern-gemm.h"
#include "kern-pool.h"
#include "kern-simd.h"

/* Query (and key) positions per block. */
#define GPT2_ATT_BLOCK 32

typedef struct {
    float       *out, *att, *dqkv;
    const float *qkv, *dout, *catt;
    int          B, T, C, NH;
} AttnArgs;

/* Softmax of rows [t0, t1) of the (T, T) scores @a over columns j <= t, in place; zero for
 * t < j < t1 (the rest of the row is never written here). */
KERN_CLONES static void attn_softmax_rows(float *a, int T, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        float *row = a + (size_t)t * T;
        float  maxv = gpt2_cpu_row_max(row, t + 1);
        float  inv = 1.0f / gpt2_cpu_exp_shifted_sum(row, t + 1, maxv);
        for (int j = 0; j <= t; j++)
            row[j] *= inv;
        for (int j = t + 1; j < t1; j++)
            row[j] = 0.0f;
    }
}

static void attn_forward_head(void *arg, int task) {
    const AttnArgs *p = arg;
    int             T = p->T, C = p->C, C3 = 3 * C, hs = C / p->NH;
    int             b = task / p->NH, h = task % p->NH;
    float           scale = 1.0f / sqrtf((float)hs);
    const float    *q = p->qkv + (size_t)b * T * C3 + h * hs;
    const float    *k = q + C, *v = q + 2 * C;
    float          *a = p->att + (size_t)task * T * T;
    float          *out = p->out + (size_t)b * T * C + h * hs;
    for (int t0 = 0; t0 < T; t0 += GPT2_ATT_BLOCK) {
        int t1 = t0 + GPT2_ATT_BLOCK < T ? t0 + GPT2_ATT_BLOCK : T;
        /* scores[t0:t1, 0:t1] = scale * q[t0:t1] @ k[0:t1]^T, then the row softmax */
        kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_TRANS, t1 - t0, t1, hs, scale, q + (size_t)t0 * C3,
                  C3, k, C3, 0.0f, a + (size_t)t0 * T, T);
        attn_softmax_rows(a, T, t0, t1);
        for (int t = t0; t < t1; t++)
            memset(a + (size_t)t * T + t1, 0, (size_t)(T - t1) * sizeof(float));
        /* out[t0:t1] = att[t0:t1, 0:t1] @ v[0:t1] */
        kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, t1 - t0, hs, t1, 1.0f, a + (size_t)t0 * T,
                  T, v, C3, 0.0f, out + (size_t)t0 * C, C);
    }
}

void gpt2_cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                int NH) {
    KERN_ASSERT(C % NH == 0);
    AttnArgs p = {.out = out, .att = att, .qkv = qkv, .B = B, .T = T, .C = C, .NH = NH};
    kern_parallel_for(B * NH, attn_forward_head, &p);
}

/* Softmax backward of rows [t0, t1), in place in @ds (the probability gradients on entry):
 * ds = p * (ds - sum_j p ds) * scale over j <= t, zero for t < j < t1. */
KERN_CLONES static void attn_softmax_backward_rows(float *ds, const float *att, int T, int t0,
                                                   int t1, float scale) {
    for (int t = t0; t < t1; t++) {
        float       *d = ds + (size_t)t * T;
        const float *pr = att + (size_t)t * T;
        float        dot = gpt2_cpu_row_dot(pr, d, t + 1);
        for (int j = 0; j <= t; j++)
            d[j] = pr[j] * (d[j] - dot) * scale;
        for (int j = t + 1; j < t1; j++)
            d[j] = 0.0f;
    }
}

static void attn_backward_head(void *arg, int task) {
    const AttnArgs *p = arg;
    int             T = p->T, C = p->C, C3 = 3 * C, hs = C / p->NH;
    int             b = task / p->NH, h = task % p->NH;
    float           scale = 1.0f / sqrtf((float)hs);
    size_t          base = (size_t)b * T * C3 + h * hs;
    const float    *q = p->qkv + base, *k = q + C, *v = q + 2 * C;
    float          *dq = p->dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
    const float    *a = p->catt + (size_t)task * T * T;
    const float    *d = p->dout + (size_t)b * T * C + h * hs;
    /* score gradients (T, T); only entries with j < the end of t's block are written and read */
    float *ds = kern_thread_scratch(KERN_SCRATCH_ATTENTION, (size_t)T * T);
    for (int t0 = 0; t0 < T; t0 += GPT2_ATT_BLOCK) {
        int t1 = t0 + GPT2_ATT_BLOCK < T ? t0 + GPT2_ATT_BLOCK : T;
        /* ds[t0:t1, 0:t1] = dout[t0:t1] @ v[0:t1]^T, then the softmax backward */
        kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_TRANS, t1 - t0, t1, hs, 1.0f, d + (size_t)t0 * C, C,
                  v, C3, 0.0f, ds + (size_t)t0 * T, T);
        attn_softmax_backward_rows(ds, a, T, t0, t1, scale);
        /* dq[t0:t1] = ds[t0:t1, 0:t1] @ k[0:t1] */
        kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, t1 - t0, hs, t1, 1.0f,
                  ds + (size_t)t0 * T, T, k, C3, 0.0f, dq + (size_t)t0 * C3, C3);
    }
    for (int j0 = 0; j0 < T; j0 += GPT2_ATT_BLOCK) {
        int j1 = j0 + GPT2_ATT_BLOCK < T ? j0 + GPT2_ATT_BLOCK : T;
        /* keys j0..j1-1 are seen by queries t >= j0: dv = att[j0:T, j0:j1]^T @ dout[j0:T],
         * dk = ds[j0:T, j0:j1]^T @ q[j0:T] */
        kern_gemm(KERN_GEMM_TRANS, KERN_GEMM_NO_TRANS, j1 - j0, hs, T - j0, 1.0f,
                  a + (size_t)j0 * T + j0, T, d + (size_t)j0 * C, C, 0.0f, dv + (size_t)j0 * C3,
                  C3);
        kern_gemm(KERN_GEMM_TRANS, KERN_GEMM_NO_TRANS, j1 - j0, hs, T - j0, 1.0f,
                  ds + (size_t)j0 * T + j0, T, q + (size_t)j0 * C3, C3, 0.0f, dk + (size_t)j0 * C3,
                  C3);
    }
}

void gpt2_cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                                 int B, int T, int C, int NH) {
    KERN_ASSERT(C % NH == 0);
    AttnArgs p = {
        .dqkv = dqkv, .dout = dout, .qkv = qkv, .catt = att, .B = B, .T = T, .C = C, .NH = NH};
    kern_parallel_for(B * NH, attn_backward_head, &p);
}
