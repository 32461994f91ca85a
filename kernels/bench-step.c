/* SPDX-License-Identifier: MIT
 * bench-step.c: pacer-bench-step, the CPU kernels' speed check. Times full training steps
 * (zero grads, forward, fused backward, AdamW) of a single-slice GPT-2 with L 4, C 256, NH 4,
 * T 256, B 4, V 50257 (Vp 50304), tied head (16.1M params, llm.c's layout) on random tokens,
 * and prints the median ms per step. Usage: pacer-bench-step [steps (5)] [blas threads (2)].
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpt2-slice.h"
#include "kern-util.h"
#include "optim-cpu.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 5;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    if (argc > 3 || steps < 1 || threads < 1) {
        fprintf(stderr, "usage: %s [steps >= 1 (5)] [blas threads >= 1 (2)]\n", argv[0]);
        return 2;
    }
    openblas_set_num_threads(threads);

    Gpt2SliceParams sp = {.model = {.L = 4, .C = 256, .NH = 4, .T = 256, .V = 50257, .Vp = 50304},
                          .layer_begin = 0,
                          .layer_end = 4,
                          .has_embedding = 1,
                          .has_head = 1,
                          .tie_head = 1,
                          .B = 4,
                          .n_act_slots = 1};
    Gpt2Slice      *slice = gpt2_slice_new(&sp);
    gpt2_slice_init_params(slice, 1337);
    KernOptimParams op = {.kind = KERN_OPTIM_ADAMW,
                          .beta1 = 0.9f,
                          .beta2 = 0.95f,
                          .eps = 1e-8f,
                          .weight_decay = 0.0f};
    KernOptim      *opt = kern_optim_new(&op, slice);

    int      n_tok = sp.B * sp.model.T;
    int32_t *tokens = kern_xmalloc((size_t)n_tok * sizeof(int32_t));
    int32_t *targets = kern_xmalloc((size_t)n_tok * sizeof(int32_t));
    uint64_t rng = kern_rng_seed(7);
    for (int i = 0; i < n_tok; i++) {
        tokens[i] = (int32_t)(kern_rng_u32(&rng) % (uint32_t)sp.model.V);
        targets[i] = (int32_t)(kern_rng_u32(&rng) % (uint32_t)sp.model.V);
    }

    double *ms = kern_xmalloc((size_t)steps * sizeof(double));
    float  *params = gpt2_slice_params(slice);
    float  *grads = gpt2_slice_grads(slice);
    float   loss = 0.0f;
    /* step -1 warms caches and OpenBLAS's thread pool and is not timed */
    for (int s = -1; s < steps; s++) {
        double t0 = now_ms();
        gpt2_slice_zero_grads(slice);
        gpt2_slice_forward(slice, params, 0, tokens, NULL, targets, NULL, &loss);
        gpt2_slice_backward(slice, params, 0, NULL, 1.0f, NULL, grads);
        kern_optim_step(opt, params, grads, 1e-4f);
        double dt = now_ms() - t0;
        if (s >= 0)
            ms[s] = dt;
        printf("step %d: loss %.4f, %.1f ms\n", s, loss, dt);
    }
    qsort(ms, (size_t)steps, sizeof(double), cmp_double);
    printf("params %zu, B %d, T %d, blas threads %d: median %.1f ms/step over %d steps\n",
           gpt2_slice_n_params(slice), sp.B, sp.model.T, threads, ms[steps / 2], steps);

    free(ms);
    free(targets);
    free(tokens);
    kern_optim_free(opt);
    gpt2_slice_free(slice);
    return 0;
}
