/* SPDX-License-Identifier: MIT
 * bench-step.c: pacer-bench-step, the CPU kernels' speed check. Times full training steps
 * (zero grads, forward, backward B then W, AdamW) of a single-slice GPT-2 with L 4, C 256,
 * NH 4, T 256, B 4, V 50257 (Vp 50304), tied head (16.1M params, llm.c's layout) on random
 * tokens, and prints the median wall and CPU milliseconds per step and per phase.
 * Usage: pacer-bench-step [steps (5)] [threads (2)].
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpt2-slice.h"
#include "kern-pool.h"
#include "kern-simd.h"
#include "kern-util.h"
#include "optim-cpu.h"

enum { PHASE_FORWARD, PHASE_BACKWARD_INPUT, PHASE_BACKWARD_WEIGHT, PHASE_UPDATE, N_PHASES };
static const char *phase_names[N_PHASES] = {"forward", "backward B", "backward W", "zero + AdamW"};

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of @x (n), sorting it. */
static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 5;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    if (argc > 3 || steps < 1 || threads < 1) {
        fprintf(stderr, "usage: %s [steps >= 1 (5)] [threads >= 1 (2)]\n", argv[0]);
        return 2;
    }
    kern_set_threads(threads);

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

    /* (steps) wall and CPU (all threads) ms of the whole step, then of each phase */
    double *ms = kern_xmalloc((size_t)steps * 2 * (N_PHASES + 1) * sizeof(double));
    double *wall = ms, *cpu = ms + steps;
    double *phase_wall = ms + 2 * (size_t)steps, *phase_cpu = phase_wall + N_PHASES * steps;
    float  *params = gpt2_slice_params(slice);
    float  *grads = gpt2_slice_grads(slice);
    float   loss = 0.0f;
    /* step -1 warms caches and the worker threads and is not timed */
    for (int s = -1; s < steps; s++) {
        double w[N_PHASES + 1], c[N_PHASES + 1];
        w[0] = clock_ms(CLOCK_MONOTONIC);
        c[0] = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        for (int ph = 0; ph < N_PHASES; ph++) {
            switch (ph) {
            case PHASE_FORWARD:
                gpt2_slice_forward(slice, params, 0, tokens, NULL, targets, NULL, &loss);
                break;
            case PHASE_BACKWARD_INPUT:
                gpt2_slice_backward_input(slice, params, 0, NULL, 1.0f, NULL);
                break;
            case PHASE_BACKWARD_WEIGHT:
                gpt2_slice_backward_weight(slice, 0, grads, NULL);
                break;
            default:
                kern_optim_step(opt, params, grads, 1e-4f);
                gpt2_slice_zero_grads(slice);
                break;
            }
            w[ph + 1] = clock_ms(CLOCK_MONOTONIC);
            c[ph + 1] = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        }
        printf("step %d: loss %.4f, %.1f ms\n", s, loss, w[N_PHASES] - w[0]);
        if (s < 0)
            continue;
        wall[s] = w[N_PHASES] - w[0];
        cpu[s] = c[N_PHASES] - c[0];
        for (int ph = 0; ph < N_PHASES; ph++) {
            phase_wall[ph * steps + s] = w[ph + 1] - w[ph];
            phase_cpu[ph * steps + s] = c[ph + 1] - c[ph];
        }
    }
    printf("params %zu, B %d, T %d, threads %d, %s loops, OpenBLAS %s: median %.1f ms/step over "
           "%d steps (CPU %.1f ms)\n",
           gpt2_slice_n_params(slice), sp.B, sp.model.T, threads, kern_isa_name(),
           openblas_get_corename(), median(wall, steps), steps, median(cpu, steps));
    for (int ph = 0; ph < N_PHASES; ph++)
        printf("  %-13s %8.1f ms (CPU %.1f ms)\n", phase_names[ph],
               median(phase_wall + (size_t)ph * steps, steps),
               median(phase_cpu + (size_t)ph * steps, steps));

    free(ms);
    free(targets);
    free(tokens);
    kern_optim_free(opt);
    gpt2_slice_free(slice);
    return 0;
}
