/* SPDX-License-Identifier: MIT
 * kern-update-gate.h: the rule that decides an optimizer update, written once for every
 * backend: from the squared L2 norm of the gradients an update clips together, whether the
 * update applies (the norm is finite and the step is not poisoned) and the factor the gradients
 * are scaled by first (clipping). Header-only pure functions, host C and CUDA device code alike:
 * the CPU backend calls them on the host (exec-skeleton-update.c), the CUDA optimizer's
 * one-thread gate kernel on the device (optim-cuda.cu), so that a GPU decides without the host
 * waiting for it. No allocation, no state.
 */
#pragma once

#include <math.h>

#ifdef __CUDACC__
#define KERN_GATE_FN static inline __host__ __device__
#else
#define KERN_GATE_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One update's decision. */
typedef struct {
    double grad_norm; /* sqrt of the squared norm: L2 norm before clipping */
    float  factor;    /* gradients are multiplied by this before the step (1: no clipping) */
    int    applied;   /* 1: the step applies; 0: it is skipped (gradients discarded) */
} KernUpdateGate;

/* Multiplier that brings an L2 norm @norm down to @max_norm: max_norm / (norm + 1e-6) when
 * norm > max_norm, else 1 (so 1 for a NaN norm, 0 for an infinite one). */
KERN_GATE_FN float kern_update_clip_factor(double norm, float max_norm) {
    return norm > (double)max_norm ? (float)((double)max_norm / (norm + 1e-6)) : 1.0f;
}

/* The decision for squared gradient norm @sq_norm (the sum over everything the update clips
 * together, accumulated in double), threshold @grad_clip (> 0: clip to it; 0: off) and the
 * test hook @poison (1: skip as if not finite): applied = !poison && sqrt(sq_norm) finite;
 * factor = kern_update_clip_factor(norm, grad_clip) when grad_clip > 0, else 1. */
KERN_GATE_FN KernUpdateGate kern_update_gate(double sq_norm, float grad_clip, int poison) {
    KernUpdateGate gate;
    gate.grad_norm = sqrt(sq_norm);
    gate.applied = !poison && isfinite(gate.grad_norm);
    gate.factor = grad_clip > 0.0f ? kern_update_clip_factor(gate.grad_norm, grad_clip) : 1.0f;
    return gate;
}

#ifdef __cplusplus
}
#endif
