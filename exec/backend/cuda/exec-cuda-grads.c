/* SPDX-License-Identifier: MIT
 * exec-cuda-grads.c: the CUDA backend's gradients for data parallelism (exec-backend-impl.h,
 * grads) over the host-staged path: a virtual stage's device gradients are copied into a
 * pinned host array once the stage's stream has run the window's last backward; the
 * reduction between replicas (exec-reduce.c, over MPI) overwrites that array with the mean;
 * the stage's next U copies it back to the device on its stream before the norm. Every rank
 * may share one device or have its own: the path is the same (docs/design.md §5.11).
 */
#include "exec-cuda-private.h"
#include "kern-check.h"
#include "pp-error.h"

gboolean exec_cuda_grads_new(ExecCudaBackend *cuda, int32_t vstage) {
    ExecSkeleton *skel = &cuda->skel;
    if (skel->comm == NULL || exec_comm_replicas(skel->comm) < 2)
        return TRUE;
    size_t      bytes = exec_skeleton_vstage_layout(skel, vstage)->n_params * sizeof(float);
    cudaError_t err = cudaMallocHost((void **)&cuda->vstages[vstage].host_grads, bytes);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* the caller reports it as the pipeline's out-of-memory */
        cuda->vstages[vstage].host_grads = NULL;
        return FALSE;
    }
    KERN_CUDA_CHECK(err);
    return TRUE;
}

float *exec_cuda_grads(ExecBackend *backend, int32_t vstage, size_t *n) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    PP_ASSERT(vstage >= 0 && vstage < cuda->skel.n_vstages);
    ExecCudaVstage *v = &cuda->vstages[vstage];
    /* A local virtual stage of a run with replicas (the reduction runs only then). */
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
