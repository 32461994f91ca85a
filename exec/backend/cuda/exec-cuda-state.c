/* SPDX-License-Identifier: MIT
 * exec-cuda-state.c: the CUDA backend's state primitives (the skeleton's state members,
 * exec-skeleton-state.c, look tensors up by name in the layout's tables and check them): the
 * stage of a local virtual stage with its device current (exec_cuda_stage_enter()), where
 * a local virtual stage's flat buffers and a tensor's optimizer state are in the device arenas
 * of the slices and optimizers, copies on the stage's stream (synchronised), the compute copy
 * refreshed after the weights are set, the optimizer's step count; and evaluate()'s step on
 * the drained pipeline (exec_skeleton_evaluate() walks the virtual stages and passes the
 * activation between ranks through host memory).
 */
#include <string.h>

#include "exec-cuda-private.h"
#include "kern-check.h"
#include "pp-error.h"

ExecCudaStage *exec_cuda_stage_enter(ExecCudaBackend *cuda, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < cuda->skel.n_vstages &&
              cuda->skel.local[cuda->skel.vstage_stage[vstage]]);
    ExecCudaStage *st = &cuda->stages[cuda->skel.vstage_stage[vstage]];
    KERN_CUDA_CHECK(cudaSetDevice(st->device));
    return st;
}

/* Local virtual stage @vstage of @skel. */
static ExecCudaVstage *exec_cuda_vstage(ExecSkeleton *skel, int32_t vstage) {
    ExecCudaVstage *v = &((ExecCudaBackend *)skel)->vstages[vstage];
    PP_ASSERT(v->slice != NULL);
    return v;
}

static void exec_cuda_state_flat(ExecSkeleton *skel, int32_t vstage, float **params,
                                 float **grads) {
    ExecCudaVstage *v = exec_cuda_vstage(skel, vstage);
    *params = gpt2_cuda_slice_params(v->slice);
    *grads = gpt2_cuda_slice_grads(v->slice);
}

/* The CUDA optimizer is never sharded: every tensor's state is whole. */
static void exec_cuda_state_optim_state(ExecSkeleton *skel, int32_t vstage, int i, float **first,
                                        float **second, float **prev_update, size_t *lo,
                                        size_t *hi) {
    ExecCudaVstage   *v = exec_cuda_vstage(skel, vstage);
    const ExecTensor *t = &exec_skeleton_vstage_layout(skel, vstage)->tensors[i];
    float            *prev = kern_cuda_optim_prev_update(v->optim);
    *prev_update = prev ? prev + t->offset : NULL;
    *lo = 0;
    *hi = t->numel;
    kern_cuda_optim_tensor_state(v->optim, i, first, second);
}

/* Copies @bytes on @st's stream and waits for it. */
static void exec_cuda_copy(ExecCudaStage *st, void *dst, const void *src, size_t bytes,
                           enum cudaMemcpyKind kind) {
    KERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, st->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(st->stream));
}

static void exec_cuda_state_copy(ExecSkeleton *skel, int32_t vstage, void *dst, const void *src,
                                 size_t bytes, gboolean to_host) {
    ExecCudaStage *st = exec_cuda_stage_enter((ExecCudaBackend *)skel, vstage);
    exec_cuda_copy(st, dst, src, bytes, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice);
}

/* F and B read the compute copy (bf16 mode): it follows the master weights. */
static void exec_cuda_state_after_set(ExecSkeleton *skel, int32_t vstage, ExecTensorRole role) {
    if (role != EXEC_TENSOR_PARAMS)
        return;
    ExecCudaStage *st = exec_cuda_stage_enter((ExecCudaBackend *)skel, vstage);
    gpt2_cuda_slice_refresh_compute_params(exec_cuda_vstage(skel, vstage)->slice, st->ctx);
    kern_cuda_ctx_sync(st->ctx);
}

static int64_t exec_cuda_state_get_optim_steps(ExecSkeleton *skel, int32_t vstage) {
    ExecCudaStage *st = exec_cuda_stage_enter((ExecCudaBackend *)skel, vstage);
    return kern_cuda_optim_n_steps(exec_cuda_vstage(skel, vstage)->optim, st->ctx);
}

static void exec_cuda_state_set_optim_steps(ExecSkeleton *skel, int32_t vstage, int64_t n_steps) {
    ExecCudaStage *st = exec_cuda_stage_enter((ExecCudaBackend *)skel, vstage);
    kern_cuda_optim_set_n_steps(exec_cuda_vstage(skel, vstage)->optim, n_steps, st->ctx);
}

const ExecSkeletonStateOps exec_cuda_state_ops = {
    .flat = exec_cuda_state_flat,
    .optim_state = exec_cuda_state_optim_state,
    .copy = exec_cuda_state_copy,
    .after_set = exec_cuda_state_after_set,
    .get_optim_steps = exec_cuda_state_get_optim_steps,
    .set_optim_steps = exec_cuda_state_set_optim_steps,
};

/* evaluate()'s step on CUDA (exec-skeleton.h): the stage's two evaluation buffers; between
 * two local virtual stages the output is peer-copied into the next stage's input. */
static void exec_cuda_eval_step(ExecSkeleton *skel, int32_t vs, const int32_t *tokens,
                                const int32_t *targets, const void *in, void *out, float *loss) {
    ExecCudaBackend *cuda = (ExecCudaBackend *)skel;
    ExecCudaVstage  *v = &cuda->vstages[vs];
    gboolean         first = vs == 0, last = vs == skel->n_vstages - 1;
    size_t           bytes = cuda->plan->msg_bytes;
    ExecCudaStage   *st = exec_cuda_stage_enter(cuda, vs);
    if (in)
        exec_cuda_copy(st, st->eval_in, in, bytes, cudaMemcpyHostToDevice);
    /* Slot 0 is free: the pipeline is drained between replays. */
    gpt2_cuda_slice_forward(
        v->slice, gpt2_cuda_slice_compute_params(v->slice), 0, first ? tokens : NULL,
        first ? NULL : st->eval_in, last ? targets : NULL, last ? NULL : st->eval_out,
        last ? (float *)(void *)(st->scalars + EXEC_CUDA_LOSS_OFFSET) : NULL, st->ctx);
    if (last) {
        exec_cuda_copy(st, loss, st->scalars + EXEC_CUDA_LOSS_OFFSET, sizeof(float),
                       cudaMemcpyDeviceToHost);
        return;
    }
    if (out) {
        exec_cuda_copy(st, out, st->eval_out, bytes, cudaMemcpyDeviceToHost);
        return;
    }
    /* The next virtual stage's input, on its device; waited for before it starts. */
    ExecCudaStage *next = &cuda->stages[skel->vstage_stage[vs + 1]];
    KERN_CUDA_CHECK(cudaMemcpyPeerAsync(next->eval_in, next->device, st->eval_out, st->device,
                                        bytes, st->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(st->stream));
}

gboolean exec_cuda_evaluate(ExecBackend *backend, const int32_t *tokens, const int32_t *targets,
                            float *loss, GError **error) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    return exec_skeleton_evaluate(&cuda->skel, cuda->plan->msg_bytes, exec_cuda_eval_step, tokens,
                                  targets, loss, error);
}
