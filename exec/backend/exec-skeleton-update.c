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

void exec_skeleton_tap(ExecSkeleton *skel, int32_t stage) {
    const ExecSkeletonStateOps *state = skel->state;
    float                      *tap = skel->stages[stage].tap;
    for (int32_t vs = 0; skel->on_grads && vs < skel->n_vstages; vs++) {
        if (skel->vstage_stage[vs] != stage)
            continue;
        const ExecVstageLayout *v = exec_skeleton_vstage_layout(skel, vs);
        float                  *params = NULL, *grads = NULL;
        PP_ASSERT(tap != NULL);
        state->flat(skel, vs, &params, &grads);
        for (int i = 0; i < v->n_tensors; i++) {
            const ExecTensor *t = &v->tensors[i];
            state->copy(skel, vs, tap, grads + t->offset, t->numel * sizeof(float), TRUE);
            skel->on_grads(skel->on_grads_user, vs, t, tap);
        }
    }
}

float exec_skeleton_update_gate(double sq_norm, const ExecOpArgs *args, ExecOpReport *report) {
    KernUpdateGate gate = kern_update_gate(sq_norm, args->grad_clip, args->poison);
    report->grad_norm = gate.grad_norm;
    report->applied = gate.applied;
    return gate.factor;
}
