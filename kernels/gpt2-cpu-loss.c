/* SPDX-License-Identifier: MIT
 * gpt2-cpu-loss.c: the fused softmax + cross-entropy over the padded vocabulary
 * (gpt2_cpu_crossentropy_* of gpt2-cpu.h). Rows are independent and split among the kern-pool
 * team; the mean loss adds the rows' losses in row order afterwards, so it does not depend on
 * the thread count.
 */
#include "gpt2-cpu.h"

#include <math.h>

#include "gpt2-cpu-math.h"
#include "kern-check.h"
#include "kern-pool.h"
#include "kern-simd.h"

typedef struct {
    float         *logits;   /* in: logits, out: probs (forward); dlogits (backward) */
    const float   *probs;    /* backward */
    double        *row_loss; /* (N) forward */
    const int32_t *targets;
    float          dloss;
    int            V, Vp;
} LossArgs;

KERN_CLONES static void crossentropy_forward_rows(void *arg, size_t begin, size_t end) {
    const LossArgs *a = arg;
    int             V = a->V, Vp = a->Vp;
    for (size_t n = begin; n < end; n++) {
        float *row = a->logits + n * Vp;
        int    tgt = a->targets[n];
        float  maxv = gpt2_cpu_row_max(row, V);
        float  tgt_shifted = row[tgt] - maxv;
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

KERN_CLONES static void crossentropy_backward_rows(void *arg, size_t begin, size_t end) {
    const LossArgs *a = arg;
    int             V = a->V, Vp = a->Vp;
    float           dloss = a->dloss;
    for (size_t n = begin; n < end; n++) {
        const float *p = a->probs + n * Vp;
        float       *d = a->logits + n * Vp;
        for (int i = 0; i < V; i++)
            d[i] = p[i] * dloss;
        d[a->targets[n]] -= dloss;
        for (int i = V; i < Vp; i++)
            d[i] = 0.0f;
    }
}

void gpt2_cpu_crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                                    float dloss, int N, int V, int Vp) {
    LossArgs a = {
        .logits = dlogits, .probs = probs, .targets = targets, .dloss = dloss, .V = V, .Vp = Vp};
    kern_parallel_range((size_t)N, 1, crossentropy_backward_rows, &a);
}
