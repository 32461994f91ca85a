/* SPDX-License-Identifier: MIT
 * exec-skeleton-compute.c: what every backend's F, B, W and BW share (exec-skeleton.h): the
 * activation slot of the micro-batch, the data source's batch on the first and last virtual
 * stage, the stash decisions (which copy to fill, which to compute with, when to release it),
 * the op's input message and its output buffer from the transport. The device part runs its
 * kernels on the operands these give it.
 */
#include "exec-skeleton.h"
#include "pp-error.h"

/* The buffer the op's output goes into (F: the activation for vstage + 1; B/BW: the input
 * gradient for vstage - 1), taken from the transport on the stage's queue; NULL when the op
 * sends nothing (W, F on the last vstage, B/BW on the first). */
static void *exec_skeleton_take_output(ExecSkeleton *skel, const ExecOpArgs *args) {
    ExecSkeletonStage *st = &skel->stages[args->op->stage];
    PpOpKind           k = args->op->kind;
    ExecMsgKind        kind;
    int32_t            to;
    if (k == PP_OP_FORWARD && args->vstage < skel->n_vstages - 1) {
        kind = EXEC_MSG_ACT;
        to = args->vstage + 1;
    } else if ((k == PP_OP_BACKWARD || k == PP_OP_BACKWARD_FULL) && args->vstage > 0) {
        kind = EXEC_MSG_GRAD;
        to = args->vstage - 1;
    } else {
        return NULL;
    }
    PP_ASSERT(st->output == NULL);
    return skel->transport->ops->take(skel->transport, kind, args->op->mb, to, st->queue,
                                      &st->output);
}

void exec_skeleton_forward(ExecSkeleton *skel, const ExecOpArgs *args, ExecSkeletonForward *f) {
    ExecSkeletonStage  *st = &skel->stages[args->op->stage];
    ExecSkeletonVstage *v = &skel->vstages[args->vstage];
    gboolean            first = args->vstage == 0, last = args->vstage == skel->n_vstages - 1;
    PP_ASSERT(args->op->kind == PP_OP_FORWARD);
    f->slot = exec_slots_take(&v->slots, args->op->mb);
    if (first || last)
        skel->data(skel->data_user, args->global_mb, st->tokens, st->targets);
    f->fill = -1;
    if (args->stash) {
        gboolean fill = FALSE;
        int32_t  i = exec_stashes_acquire(&v->stashes, args->version, &fill);
        f->fill = fill ? i : -1;
    }
    f->tokens = first ? st->tokens : NULL;
    f->targets = last ? st->targets : NULL;
    f->input = first ? NULL : st->input_data;
    f->output = exec_skeleton_take_output(skel, args);
}

void exec_skeleton_backward_begin(ExecSkeleton *skel, const ExecOpArgs *args,
                                  ExecSkeletonBackward *b) {
    ExecSkeletonVstage *v = &skel->vstages[args->vstage];
    gboolean            weight = args->op->kind == PP_OP_WEIGHT;
    PP_ASSERT(args->op->kind == PP_OP_BACKWARD || args->op->kind == PP_OP_BACKWARD_FULL || weight);
    b->slot = exec_slots_find(&v->slots, args->op->mb);
    b->stash = !weight && args->stash ? exec_stashes_find(&v->stashes, args->version) : -1;
    b->dx_out = weight || args->vstage == skel->n_vstages - 1
                    ? NULL
                    : skel->stages[args->op->stage].input_data;
    b->dx_in = weight ? NULL : exec_skeleton_take_output(skel, args);
}

void exec_skeleton_backward_end(ExecSkeleton *skel, const ExecOpArgs *args,
                                const ExecSkeletonBackward *b) {
    ExecSkeletonVstage *v = &skel->vstages[args->vstage];
    if (args->op->kind != PP_OP_BACKWARD)
        exec_slots_release(&v->slots, b->slot);
    /* An unreferenced copy stays until F needs a new version: the next F of this version (the
     * current one in 1F1B's steady state) reuses it instead of copying the weights again. */
    if (b->stash >= 0)
        exec_stashes_release(&v->stashes, b->stash);
}
