/* SPDX-License-Identifier: MIT
 * exec-cuda-grads.c: the CUDA backend's gradients for data parallelism, over one of two paths
 * chosen once at creation for each stage group (exec-grad-path.h, docs/design.md §5.11):
 * - NCCL, when the build has it and every replica of the stage has a device of its own:
 *   reduce_grads() enqueues, on the stage's stream right before its U, an all-gather of the
 *   replicas' gradients and their sum in replica order (exec-cuda-nccl.h); nothing goes
 *   through the host;
 * - host-staged otherwise (several ranks on one GPU, or no NCCL): grads() copies a virtual
 *   stage's device gradients into a pinned host array once the stage's stream has run the
 *   window's last backward; the reduction between replicas (exec-reduce.c, over MPI)
 *   overwrites that array with the mean; the stage's next U copies it back to the device on
 *   its stream before the norm.
 * Both give the same bits: each element ((g_0 + g_1) + ... + g_{D-1}) / D in fp32.
 */
#include "exec-cuda-private.h"
#include "kern-check.h"
#include "pp-config.h"
#include "pp-error.h"
#if PP_HAVE_NCCL
#include "exec-cuda-nccl.h"
#endif

void exec_cuda_grads_choose(ExecCudaBackend *cuda, const ExecGradPlace *places) {
    ExecComm *comm = cuda->skel.comm;
    int32_t   replicas = cuda->skel.parallel.replicas;
    cuda->grad_path = exec_grad_path_choose(PP_HAVE_NCCL, places, replicas);
    /* Said once per stage group, by its replica 0 (scripts/gpu-check looks for it). */
    if (replicas > 1 && cuda->skel.parallel.replica == 0)
        g_message("stage %d: its %d replicas reduce their gradients over %s", exec_comm_stage(comm),
                  replicas, exec_grad_path_name(cuda->grad_path));
}

gboolean exec_cuda_grads_new(ExecCudaBackend *cuda, int32_t vstage) {
    if (cuda->grad_path != EXEC_GRAD_PATH_HOST)
        return TRUE;
    size_t      bytes = exec_skeleton_vstage_layout(&cuda->skel, vstage)->n_params * sizeof(float);
    cudaError_t err = cudaMallocHost((void **)&cuda->vstages[vstage].host_grads, bytes);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* the caller reports it as the pipeline's out-of-memory */
        cuda->vstages[vstage].host_grads = NULL;
        return FALSE;
    }
    KERN_CUDA_CHECK(err);
    return TRUE;
}

gboolean exec_cuda_grads_connect(ExecCudaBackend *cuda, GError **error) {
#if PP_HAVE_NCCL
    ExecSkeleton *skel = &cuda->skel;
    if (skel->comm == NULL)
        return TRUE;
    /* The largest local virtual stage sizes the scratch of one exchange. */
    size_t  max_n = 0;
    int32_t device = 0;
    for (int32_t vs = 0; vs < skel->n_vstages; vs++) {
        if (!skel->local[skel->vstage_stage[vs]])
            continue;
        max_n = MAX(max_n, exec_skeleton_vstage_layout(skel, vs)->n_params);
        device = cuda->stages[skel->vstage_stage[vs]].device;
    }
    return exec_cuda_nccl_new(skel->comm, device, max_n, cuda->grad_path == EXEC_GRAD_PATH_NCCL,
                              &cuda->nccl, error);
#else
    (void)cuda;
    (void)error;
    return TRUE;
#endif
}

void exec_cuda_grads_wait(ExecCudaBackend *cuda, int32_t stage) {
    ExecCudaStage *st = &cuda->stages[stage];
#if PP_HAVE_NCCL
    if (cuda->nccl) {
        exec_cuda_nccl_wait(cuda->nccl, st->stream, stage, exec_comm_timeout(cuda->skel.comm),
                            &cuda->skel.aborted);
        return;
    }
#endif
    KERN_CUDA_CHECK(cudaStreamSynchronize(st->stream));
}

gboolean exec_cuda_grads_check(ExecCudaBackend *cuda, GError **error) {
#if PP_HAVE_NCCL
    if (cuda->nccl)
        return exec_cuda_nccl_check(cuda->nccl, error);
#endif
    (void)cuda;
    (void)error;
    return TRUE;
}

void exec_cuda_grads_free(ExecCudaBackend *cuda) {
    if (cuda->nccl == NULL)
        return;
    /* The scratch lives on the device of the rank's one stage. */
    for (int32_t s = 0; s < cuda->skel.n_stages; s++)
        if (cuda->skel.local[s])
            KERN_CUDA_CHECK(cudaSetDevice(cuda->stages[s].device));
#if PP_HAVE_NCCL
    exec_cuda_nccl_free(cuda->nccl);
#endif
    cuda->nccl = NULL;
}

gboolean exec_cuda_reduces_grads(ExecBackend *backend) {
    return exec_cuda(backend)->grad_path == EXEC_GRAD_PATH_NCCL;
}

void exec_cuda_reduce_grads(ExecBackend *backend, int32_t vstage) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    /* Only on the NCCL path does the pipeline call it (reduces_grads()). */
    PP_ASSERT(cuda->nccl != NULL);
    ExecCudaVstage *v = &cuda->vstages[vstage];
    ExecCudaStage  *st = exec_cuda_stage_enter(cuda, vstage);
    if (!st->reducing)
        KERN_CUDA_CHECK(cudaEventRecord(st->reduce_start, st->stream));
    st->reducing = TRUE;
#if PP_HAVE_NCCL
    exec_cuda_nccl_reduce(cuda->nccl, gpt2_cuda_slice_grads(v->slice),
                          gpt2_cuda_slice_n_params(v->slice), st->stream);
#else
    (void)v;
#endif
    KERN_CUDA_CHECK(cudaEventRecord(st->reduce_end, st->stream));
}

void exec_cuda_grads_mark_update(ExecCudaStage *st, int32_t k) {
    st->reduce_op = st->reducing ? k : -1;
    st->reducing = FALSE;
}

float *exec_cuda_grads(ExecBackend *backend, int32_t vstage, size_t *n) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    PP_ASSERT(vstage >= 0 && vstage < cuda->skel.n_vstages);
    ExecCudaVstage *v = &cuda->vstages[vstage];
    /* A local virtual stage on the host-staged path (the reduction runs only then). */
    PP_ASSERT(v->slice != NULL && v->host_grads != NULL);
    /* The calling thread (the worker or the overlap's reduction thread) needs the device. */
    *n = gpt2_cuda_slice_n_params(v->slice);
    /* A second call in the same window (the U after an overlapped bucket) must not copy the
     * device's unreduced gradients over the reduced ones. */
    if (v->host_grads_taken)
        return v->host_grads;
    ExecCudaStage *st = exec_cuda_stage_enter(cuda, vstage);
    /* In stream order after every backward enqueued so far, the window's last among them. */
    KERN_CUDA_CHECK(cudaMemcpyAsync(v->host_grads, gpt2_cuda_slice_grads(v->slice),
                                    *n * sizeof(float), cudaMemcpyDeviceToHost, st->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    v->host_grads_taken = TRUE;
    return v->host_grads;
}

void exec_cuda_grads_upload(ExecCudaBackend *cuda, ExecCudaStage *st, int32_t vstage) {
    ExecCudaVstage *v = &cuda->vstages[vstage];
    if (!v->host_grads_taken)
        return;
    /* The host array is not written again before the next grads(), which waits for the
     * stream first: the asynchronous copy may read it after this returns. */
    KERN_CUDA_CHECK(cudaMemcpyAsync(gpt2_cuda_slice_grads(v->slice), v->host_grads,
                                    gpt2_cuda_slice_n_params(v->slice) * sizeof(float),
                                    cudaMemcpyHostToDevice, st->stream));
    v->host_grads_taken = FALSE;
}
