/* SPDX-License-Identifier: MIT
 * exec-skeleton-update.c: what every backend's U shares (exec-skeleton.h): the gradient tap
 * (host copies of a virtual stage's gradients for the observer, through the device part's
 * copy primitive) and the update's decision on the host (norm, the non-finite and poison gate,
 * the clipping factor), the rule a GPU applies on the device (kern_cuda_optim_step()'s gate).
 */
#include <math.h>

#include "exec-skeleton.h"
#include "optim-cpu.h"
#include "pp-error.h"

void exec_skeleton_tap(ExecSkeleton *skel, int32_t vstage) {
    const ExecSkeletonStateOps *state = skel->state;
    float                      *tap = skel->stages[skel->vstage_stage[vstage]].tap;
    float                      *params = NULL, *grads = NULL;
    PP_ASSERT(skel->on_grads != NULL && tap != NULL);
    state->flat(skel, vstage, &params, &grads);
    for (int i = 0; i < state->n_tensors(skel, vstage); i++) {
        const Gpt2Tensor *t = state->tensor(skel, vstage, i);
        state->copy(skel, vstage, tap, grads + t->offset, t->numel * sizeof(float), TRUE);
        skel->on_grads(skel->on_grads_user, vstage, t, tap);
    }
}

float exec_skeleton_update_gate(double sq_norm, const ExecOpArgs *args, ExecOpReport *report) {
    report->grad_norm = sqrt(sq_norm);
    report->applied = isfinite(report->grad_norm) && !args->poison;
    return args->grad_clip > 0.0f ? kern_clip_factor(report->grad_norm, args->grad_clip) : 1.0f;
}
