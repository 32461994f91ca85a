/* SPDX-License-Identifier: MIT
 * gpt2-cpu-loss.c: softmax + cross-entropy over the padded vocabulary, fused with the LM head's
 * backward (gpt2_cpu_crossentropy_forward, gpt2_cpu_head_backward_* of gpt2-cpu.h). The
 * backward products compute the logits' gradient from the probabilities block by block as
 * kern_gemm_load_a() asks for it, so the (N, Vp) gradient is never written to memory: two
 * passes less over the largest array of a CPU step. Rows split among the kern-pool team; the
 * mean loss adds the rows' losses in row order afterwards, so nothing depends on the thread
 * count.
 */
#include "gpt2-cpu.h"

#include <math.h>

#include "gpt2-cpu-math.h"
#include "kern-check.h"
#include "kern-gemm.h"
#include "kern-pool.h"
#include "kern-simd.h"

typedef struct {
    float         *logits;   /* (N, Vp): logits in, probabilities out */
    double        *row_loss; /* (N) */
    const int32_t *targets;  /* (N) */
    int            V, Vp;
} LossArgs;

KERN_CLONES static void crossentropy_forward_rows(void *arg, size_t begin, size_t end) {
    const LossArgs *a = arg;
    int             V = a->V, Vp = a->Vp;
    for (size_t n = begin; n < end; n++) {
        float *row = a->logits + n * Vp;
        float  maxv = gpt2_cpu_row_max(row, V);
        float  tgt_shifted = row[a->targets[n]] - maxv;
        double sum = gpt2_cpu_exp_shifted_sum(row, V, maxv);
        float  inv = (float)(1.0 / sum);
        for (int i = 0; i < V; i++)
            row[i] *= inv;
        for (int i = V; i < Vp; i++)
            row[i] = 0.0f;
        /* -log p[target] = log(sum) - (logit[target] - max), exact even when p underflows */
        a->row_loss[n] = log(sum) - (double)tgt_shifted;
    }
}

float gpt2_cpu_crossentropy_forward(float *logits, float *row_loss, const int32_t *targets, int N,
                                    int V, int Vp) {
    KERN_ASSERT(V <= Vp);
    for (int n = 0; n < N; n++)
        KERN_ASSERT(targets[n] >= 0 && targets[n] < V);
    double  *loss = (double *)kern_thread_scratch(KERN_SCRATCH_SUMS, 2 * (size_t)N);
    LossArgs a = {.logits = logits, .row_loss = loss, .targets = targets, .V = V, .Vp = Vp};
    kern_parallel_range((size_t)N, 1, crossentropy_forward_rows, &a);
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        if (row_loss)
            row_loss[n] = (float)loss[n];
        total += loss[n];
    }
    return (float)(total / N);
}

/* --- backward: the logits' gradient, one block at a time --- */

typedef struct {
    const float   *probs;
    const int32_t *targets;
    float          dloss;
    int            Vp;
} HeadGrad;

/* dlogits[n][v] for v in [v0, v0 + len) into d[0..len) (the padded columns' probabilities are
 * 0, so they give 0) */
static inline void head_dlogits_row(const HeadGrad *g, int n, int v0, int len, float *d) {
    const float *p = g->probs + (size_t)n * g->Vp + v0;
    for (int i = 0; i < len; i++)
        d[i] = p[i] * g->dloss;
    int t = g->targets[n] - v0;
    if (t >= 0 && t < len)
        d[t] -= g->dloss;
}

/* op(A) = dlogits (N, Vp): rows are tokens, k the vocabulary; row-major blocks. */
KERN_CLONES static void head_load_dlogits(void *ctx, float *dst, size_t ld, int i0, int rows,
                                          int p0, int kc) {
    for (int r = 0; r < rows; r++)
        head_dlogits_row(ctx, i0 + r, p0, kc, dst + (size_t)r * ld);
}

/* op(A) = dlogits^T (Vp, N): rows are the vocabulary, k the tokens; k-major blocks, so each
 * k is a contiguous piece of one token's row. */
KERN_CLONES static void head_load_dlogits_t(void *ctx, float *dst, size_t ld, int i0, int rows,
                                            int p0, int kc) {
    for (int k = 0; k < kc; k++)
        head_dlogits_row(ctx, p0 + k, i0, rows, dst + (size_t)k * ld);
}

void gpt2_cpu_head_backward_input(float *dinp, const float *probs, const int32_t *targets,
                                  float dloss, const float *weight, int N, int C, int V, int Vp) {
    KERN_ASSERT(V <= Vp);
    HeadGrad g = {.probs = probs, .targets = targets, .dloss = dloss, .Vp = Vp};
    kern_gemm_load_a(KERN_GEMM_NO_TRANS, head_load_dlogits, &g, KERN_GEMM_NO_TRANS, N, C, Vp, 1.0f,
                     weight, C, 0.0f, dinp, C);
}

void gpt2_cpu_head_backward_weight(float *dweight, const float *probs, const int32_t *targets,
                                   float dloss, const float *inp, int N, int C, int V, int Vp) {
    KERN_ASSERT(V <= Vp);
    HeadGrad g = {.probs = probs, .targets = targets, .dloss = dloss, .Vp = Vp};
    kern_gemm_load_a(KERN_GEMM_TRANS, head_load_dlogits_t, &g, KERN_GEMM_NO_TRANS, Vp, C, N, 1.0f,
                     inp, C, 1.0f, dweight, C);
}
