/* SPDX-License-Identifier: MIT
 * exec-skeleton-update.c: what every backend's U shares (exec-skeleton.h): the gradient tap
 * (host copies of a virtual stage's gradients for the observer, through the device part's
 * copy primitive) and the update's decision on the host: kern_update_gate() (norm, the
 * non-finite and poison gate, the clipping factor), the rule a GPU evaluates on the device
 * (kern_cuda_optim_step()'s gate calls the same function).
 */
#include "exec-skeleton.h"
#include "kern-update-gate.h"
#include "pp-error.h"

void exec_skeleton_tap(ExecSkeleton *skel, int32_t vstage) {
    const ExecSkeletonStateOps *state = skel->state;
    float                      *tap = skel->stages[skel->vstage_stage[vstage]].tap;
    float                      *params = NULL, *grads = NULL, *prev = NULL;
    PP_ASSERT(skel->on_grads != NULL && tap != NULL);
    const ExecVstageLayout     *v = exec_skeleton_vstage_layout(skel, vstage);
    state->flat(skel, vstage, &params, &grads, &prev);
    for (int i = 0; i < v->n_tensors; i++) {
        const Gpt2Tensor *t = &v->tensors[i];
        state->copy(skel, vstage, tap, grads + t->offset, t->numel * sizeof(float), TRUE);
        skel->on_grads(skel->on_grads_user, vstage, t, tap);
    }
}

float exec_skeleton_update_gate(double sq_norm, const ExecOpArgs *args, ExecOpReport *report) {
    KernUpdateGate gate = kern_update_gate(sq_norm, args->grad_clip, args->poison);
    report->grad_norm = gate.grad_norm;
    report->applied = gate.applied;
    return gate.factor;
}
