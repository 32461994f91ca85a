/* SPDX-License-Identifier: MIT
 * gpt2-cpu-loss.c: softmax + cross-entropy over the padded vocabulary, fused with the LM head's
 * backward (gpt2_cpu_crossentropy_forward, gpt2_cpu_head_backward_* of gpt2-cpu.h). The
 * logits' gradient (probs - onehot) * dloss is linear in the probabilities, so the backward
 * products read the probabilities as they are and correct the one-hot part afterwards: the
 * (N, Vp) gradient is never written, two passes less over the largest array of a CPU step.
 * Rows (or, for sums over rows, channels) split among the kern-pool team; the mean loss adds
 * the rows' losses in row order afterwards, so nothing depends on the thread count.
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

/* --- backward --- */

/* dlogits @ X = dloss * (probs @ X) - dloss * X[target] row by row, and likewise for the
 * transposed product: the products read the probabilities as they are, and the one-hot part
 * is a row gather (B) or scatter (W). */
typedef struct {
    float         *out;
    const float   *src;
    const int32_t *targets;
    float          dloss;
    int            N, C;
} HeadArgs;

/* B: out[n] -= dloss * src[targets[n]] for rows [begin, end) */
KERN_CLONES static void head_input_onehot_rows(void *arg, size_t begin, size_t end) {
    const HeadArgs *a = arg;
    for (size_t n = begin; n < end; n++) {
        const float *w = a->src + (size_t)a->targets[n] * a->C;
        float       *o = a->out + n * a->C;
        for (int c = 0; c < a->C; c++)
            o[c] -= a->dloss * w[c];
    }
}

void gpt2_cpu_head_backward_input(float *dinp, const float *probs, const int32_t *targets,
                                  float dloss, const float *weight, int N, int C, int V, int Vp) {
    KERN_ASSERT(V <= Vp);
    kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, N, C, Vp, dloss, probs, Vp, weight, C, 0.0f,
              dinp, C);
    HeadArgs a = {.out = dinp, .src = weight, .targets = targets, .dloss = dloss, .N = N, .C = C};
    kern_parallel_range((size_t)N, 16, head_input_onehot_rows, &a);
}

/* W: out[targets[n]][c] -= dloss * src[n][c] for channels [begin, end), rows in order (a
 * token seen twice subtracts in row order) */
KERN_CLONES static void head_weight_onehot_channels(void *arg, size_t begin, size_t end) {
    const HeadArgs *a = arg;
    for (int n = 0; n < a->N; n++) {
        const float *x = a->src + (size_t)n * a->C;
        float       *o = a->out + (size_t)a->targets[n] * a->C;
        for (size_t c = begin; c < end; c++)
            o[c] -= a->dloss * x[c];
    }
}

void gpt2_cpu_head_backward_weight(float *dweight, const float *probs, const int32_t *targets,
                                   float dloss, const float *inp, int N, int C, int V, int Vp) {
    KERN_ASSERT(V <= Vp);
    kern_gemm(KERN_GEMM_TRANS, KERN_GEMM_NO_TRANS, Vp, C, N, dloss, probs, Vp, inp, C, 1.0f,
              dweight, C);
    HeadArgs a = {.out = dweight, .src = inp, .targets = targets, .dloss = dloss, .N = N, .C = C};
    kern_parallel_range((size_t)C, 32, head_weight_onehot_channels, &a);
}
