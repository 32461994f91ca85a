/* SPDX-License-Identifier: MIT
 * exec-cuda-state.c: the CUDA backend's state members: each virtual stage's tensor table and
 * the roles its tensors have, by-name copies between the caller's host buffers and the device
 * arenas of the slices and optimizers (on the stage's stream, synchronised), optimizer step
 * counts, and evaluate()'s step on the drained pipeline (exec_skeleton_evaluate() walks the
 * virtual stages and passes the activation between ranks through host memory). A virtual stage
 * another process holds has its tensor table (exec_remote_table_build()) and nothing else.
 */
#include <string.h>

#include "exec-cuda-private.h"
#include "kern-check.h"
#include "pp-error.h"

static ExecCudaVstage *exec_cuda_vstage(ExecCudaBackend *cuda, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < cuda->skel.n_vstages);
    return &cuda->vstages[vstage];
}

int exec_cuda_n_tensors(ExecBackend *backend, int32_t vstage) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    ExecCudaVstage  *v = exec_cuda_vstage(cuda, vstage);
    return v->slice ? gpt2_table_n_tensors(gpt2_cuda_slice_table(v->slice))
                    : cuda->skel.vstages[vstage].remote.n;
}

/* The roles tensor @i of @v has, and (nullable out) @role's data on the device: the tensor's
 * numel floats, NULL when the tensor lacks the role. */
static guint exec_cuda_roles(ExecCudaVstage *v, int i, ExecTensorRole role, float **data) {
    const Gpt2Tensor *t = gpt2_table_tensor(gpt2_cuda_slice_table(v->slice), i);
    float            *first = NULL, *second = NULL;
    int               muon = kern_cuda_optim_tensor_state(v->optim, i, &first, &second);
    float            *prev = kern_cuda_optim_prev_update(v->optim);
    ExecTensorArrays  arrays = {.params = gpt2_cuda_slice_params(v->slice) + t->offset,
                                .grads = gpt2_cuda_slice_grads(v->slice) + t->offset,
                                .first = first,
                                .second = second,
                                .muon = muon,
                                .prev_update = prev ? prev + t->offset : NULL};
    return exec_tensor_arrays_roles(&arrays, role, data);
}

const Gpt2Tensor *exec_cuda_tensor(ExecBackend *backend, int32_t vstage, int i, guint *roles) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    ExecCudaVstage  *v = exec_cuda_vstage(cuda, vstage);
    if (v->slice == NULL) {
        const ExecRemoteTable *remote = &cuda->skel.vstages[vstage].remote;
        PP_ASSERT(i >= 0 && i < remote->n);
        if (roles)
            *roles = remote->roles[i];
        return &remote->tensors[i];
    }
    const Gpt2Table *table = gpt2_cuda_slice_table(v->slice);
    PP_ASSERT(i >= 0 && i < gpt2_table_n_tensors(table));
    if (roles)
        *roles = exec_cuda_roles(v, i, EXEC_TENSOR_PARAMS, NULL);
    return gpt2_table_tensor(table, i);
}

/* EXEC_ERROR_NOT_LOCAL unless this process holds @vstage. */
static ExecCudaVstage *exec_cuda_local_vstage(ExecCudaBackend *cuda, int32_t vstage,
                                              GError **error) {
    ExecCudaVstage *v = exec_cuda_vstage(cuda, vstage);
    if (v->slice)
        return v;
    exec_backend_set_not_local(error, cuda->skel.comm, vstage, cuda->skel.vstage_stage[vstage]);
    return NULL;
}

/* The device data of @role of tensor @name of @vstage, checked against @n floats; its
 * stage's device is made current. */
static float *exec_cuda_tensor_data(ExecCudaBackend *cuda, int32_t vstage, const char *name,
                                    ExecTensorRole role, size_t n, GError **error) {
    ExecCudaVstage *v = exec_cuda_local_vstage(cuda, vstage, error);
    if (v == NULL)
        return NULL;
    const Gpt2Table *table = gpt2_cuda_slice_table(v->slice);
    PP_ASSERT(role >= 0 && role < EXEC_TENSOR_N_ROLES);
    exec_cuda_stage_enter(cuda, vstage);
    int i = 0, n_tensors = gpt2_table_n_tensors(table);
    while (i < n_tensors && strcmp(gpt2_table_tensor(table, i)->name, name) != 0)
        i++;
    const Gpt2Tensor *t = i < n_tensors ? gpt2_table_tensor(table, i) : NULL;
    float            *data = NULL;
    if (t)
        exec_cuda_roles(v, i, role, &data);
    return exec_tensor_checked(vstage, name, t, role, data, n, error);
}

/* Copies @bytes on @st's stream and waits for it. */
static void exec_cuda_copy(ExecCudaStage *st, void *dst, const void *src, size_t bytes,
                           enum cudaMemcpyKind kind) {
    KERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, st->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(st->stream));
}

gboolean exec_cuda_tensor_get(ExecBackend *backend, int32_t vstage, const char *name,
                              ExecTensorRole role, float *dst, size_t n, GError **error) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    const float     *data = exec_cuda_tensor_data(cuda, vstage, name, role, n, error);
    if (data)
        exec_cuda_copy(exec_cuda_stage_enter(cuda, vstage), dst, data, n * sizeof(float),
                       cudaMemcpyDeviceToHost);
    return data != NULL;
}

gboolean exec_cuda_tensor_set(ExecBackend *backend, int32_t vstage, const char *name,
                              ExecTensorRole role, const float *src, size_t n, GError **error) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    float           *data = exec_cuda_tensor_data(cuda, vstage, name, role, n, error);
    if (!data)
        return FALSE;
    ExecCudaStage  *st = exec_cuda_stage_enter(cuda, vstage);
    ExecCudaVstage *v = exec_cuda_vstage(cuda, vstage);
    exec_cuda_copy(st, data, src, n * sizeof(float), cudaMemcpyHostToDevice);
    if (role == EXEC_TENSOR_PARAMS) {
        /* F and B read the compute copy (bf16 mode): it follows the master. */
        gpt2_cuda_slice_refresh_compute_params(v->slice, st->ctx);
        kern_cuda_ctx_sync(st->ctx);
    }
    return TRUE;
}

gboolean exec_cuda_get_optim_steps(ExecBackend *backend, int32_t vstage, int64_t *n_steps,
                                   GError **error) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    if (!exec_cuda_local_vstage(cuda, vstage, error))
        return FALSE;
    ExecCudaStage *st = exec_cuda_stage_enter(cuda, vstage);
    *n_steps = kern_cuda_optim_n_steps(exec_cuda_vstage(cuda, vstage)->optim, st->ctx);
    return TRUE;
}

gboolean exec_cuda_set_optim_steps(ExecBackend *backend, int32_t vstage, int64_t n_steps,
                                   GError **error) {
    PP_ASSERT(n_steps >= 0);
    ExecCudaBackend *cuda = exec_cuda(backend);
    if (!exec_cuda_local_vstage(cuda, vstage, error))
        return FALSE;
    ExecCudaStage *st = exec_cuda_stage_enter(cuda, vstage);
    kern_cuda_optim_set_n_steps(exec_cuda_vstage(cuda, vstage)->optim, n_steps, st->ctx);
    return TRUE;
}

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
