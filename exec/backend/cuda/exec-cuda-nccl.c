/* SPDX-License-Identifier: MIT
 * exec-cuda-nccl.c: the gradient reduction of a stage's replicas over NCCL (exec-cuda-nccl.h).
 * The communicator is non-blocking, so that its set-up has the group's deadline: each call
 * that returns ncclInProgress is settled by polling ncclCommGetAsyncError().
 */
#include "exec-cuda-nccl.h"

#include <nccl.h>

#include "exec-comm-nccl.h"
#include "kern-check.h"
#include "kern-cuda.h"
#include "pp-error.h"

/* How often a wait on NCCL looks at its state. */
#define EXEC_CUDA_NCCL_POLL_US 100

struct _ExecCudaNccl {
    ncclComm_t comm;     /* NULL once aborted by a stopped replay */
    int32_t    replicas; /* D: the communicator's ranks, replica r as rank r */
    float     *scratch;  /* device (replicas, chunk) fp32: an exchange's all-gathered gradients */
    size_t     chunk;    /* floats per replica per exchange, <= EXEC_CUDA_NCCL_CHUNK_FLOATS */
    double     timeout_s;
};

/* Polls @comm until its last call is no longer in progress or @deadline_us (monotonic)
 * passes. Returns NCCL's outcome, ncclInProgress on the deadline. */
static ncclResult_t exec_cuda_nccl_settle(ncclComm_t comm, ncclResult_t result,
                                          gint64 deadline_us) {
    while (result == ncclInProgress && g_get_monotonic_time() < deadline_us) {
        g_usleep(EXEC_CUDA_NCCL_POLL_US);
        ncclResult_t async = ncclSuccess;
        KERN_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
        result = async;
    }
    return result;
}

/* The deadline of a wait starting now: the group's timeout ahead. */
static gint64 exec_cuda_nccl_deadline(double timeout_s) {
    return g_get_monotonic_time() + (gint64)(timeout_s * G_USEC_PER_SEC);
}

/* This rank's member of its stage group's communicator on @device, or NULL with @error. */
static ExecCudaNccl *exec_cuda_nccl_join(ExecComm *group, const ncclUniqueId *id, int32_t device,
                                         size_t max_n, GError **error) {
    ExecCudaNccl *nccl = g_new0(ExecCudaNccl, 1);
    nccl->replicas = exec_comm_replicas(group);
    nccl->chunk = exec_cuda_plan_nccl_chunk(max_n);
    nccl->timeout_s = exec_comm_timeout(group);
    KERN_CUDA_CHECK(cudaSetDevice(device));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t result =
        ncclCommInitRankConfig(&nccl->comm, nccl->replicas, *id, exec_comm_replica(group), &config);
    if (result == ncclSuccess || result == ncclInProgress)
        result =
            exec_cuda_nccl_settle(nccl->comm, result, exec_cuda_nccl_deadline(nccl->timeout_s));
    if (result != ncclSuccess) {
        g_set_error(error, EXEC_ERROR,
                    result == ncclInProgress ? EXEC_ERROR_COMM : EXEC_ERROR_BACKEND,
                    "rank %d: the NCCL communicator of stage %d's %d replicas %s; every replica "
                    "needs a device of its own (run.devices, CUDA_VISIBLE_DEVICES)",
                    exec_comm_rank(group), exec_comm_stage(group), nccl->replicas,
                    result == ncclInProgress ? "was not set up within run.comm_timeout_s"
                                             : ncclGetErrorString(result));
        if (nccl->comm)
            ncclCommAbort(nccl->comm);
        g_free(nccl);
        return NULL;
    }
    cudaError_t err =
        cudaMalloc((void **)&nccl->scratch, (size_t)nccl->replicas * nccl->chunk * sizeof(float));
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "rank %d: device %d has no room for the NCCL reduction's %.1f MiB of "
                    "scratch; lower pipeline.microbatch_size",
                    exec_comm_rank(group), device,
                    (double)nccl->replicas * (double)nccl->chunk * sizeof(float) / (1 << 20));
        ncclCommAbort(nccl->comm);
        g_free(nccl);
        return NULL;
    }
    KERN_CUDA_CHECK(err);
    return nccl;
}

gboolean exec_cuda_nccl_new(ExecComm *group, int32_t device, size_t max_n, gboolean wanted,
                            ExecCudaNccl **out, GError **error) {
    ncclUniqueId id;
    *out = NULL;
    if (!exec_comm_nccl_stage_unique_id(group, wanted, &id, error))
        return FALSE;
    GError *local = NULL;
    if (wanted)
        *out = exec_cuda_nccl_join(group, &id, device, max_n, &local);
    if (!exec_comm_agree(group, "setting up the NCCL communicators of the stage groups", &local)) {
        g_propagate_error(error, local);
        exec_cuda_nccl_free(*out);
        *out = NULL;
        return FALSE;
    }
    return TRUE;
}

void exec_cuda_nccl_free(ExecCudaNccl *nccl) {
    if (!nccl)
        return;
    KERN_CUDA_CHECK(cudaFree(nccl->scratch));
    if (nccl->comm == NULL) {
        g_free(nccl);
        return;
    }
    ncclResult_t result = ncclCommFinalize(nccl->comm);
    result = exec_cuda_nccl_settle(nccl->comm, result, exec_cuda_nccl_deadline(nccl->timeout_s));
    /* A peer gone or late: the communicator is aborted instead of finalised. */
    if (result != ncclSuccess)
        ncclCommAbort(nccl->comm);
    else
        KERN_NCCL_CHECK(ncclCommDestroy(nccl->comm));
    g_free(nccl);
}

void exec_cuda_nccl_reduce(ExecCudaNccl *nccl, float *grads, size_t n, cudaStream_t stream) {
    for (size_t off = 0; off < n; off += nccl->chunk) {
        size_t c = MIN(nccl->chunk, n - off);
        /* (replicas, c): replica r's chunk at scratch + r * c, NCCL rank r being replica r. */
        ncclResult_t result =
            ncclAllGather(grads + off, nccl->scratch, c, ncclFloat, nccl->comm, stream);
        KERN_NCCL_CHECK(
            exec_cuda_nccl_settle(nccl->comm, result, exec_cuda_nccl_deadline(nccl->timeout_s)));
        /* In stream order after the all-gather, before the next chunk overwrites the scratch. */
        kern_cuda_replica_mean(grads + off, nccl->scratch, nccl->replicas, c, stream);
    }
}

gboolean exec_cuda_nccl_check(const ExecCudaNccl *nccl, GError **error) {
    if (nccl->comm != NULL)
        return TRUE;
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                "the NCCL communicator of the stage's replicas was aborted when a replay "
                "stopped; start the run again (it resumes from its last checkpoint)");
    return FALSE;
}

void exec_cuda_nccl_wait(ExecCudaNccl *nccl, cudaStream_t stream, int32_t stage, double timeout_s,
                         const gint *aborted) {
    gint64 deadline = exec_cuda_nccl_deadline(timeout_s);
    for (;;) {
        cudaError_t err = cudaStreamQuery(stream);
        if (err == cudaSuccess)
            return;
        if (err != cudaErrorNotReady)
            KERN_CUDA_CHECK(err);
        if (nccl->comm == NULL || g_atomic_int_get(aborted)) {
            /* A stopped replay: a replica may never join the reduction on the stream. */
            if (nccl->comm != NULL)
                ncclCommAbort(nccl->comm);
            nccl->comm = NULL;
            KERN_CUDA_CHECK(cudaStreamSynchronize(stream));
            return;
        }
        ncclResult_t async = ncclSuccess;
        KERN_NCCL_CHECK(ncclCommGetAsyncError(nccl->comm, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
            ncclCommAbort(nccl->comm);
            PP_ABORT("stage %d: the NCCL gradient reduction between its replicas failed: %s", stage,
                     ncclGetErrorString(async));
        }
        if (g_get_monotonic_time() >= deadline) {
            ncclCommAbort(nccl->comm);
            PP_ABORT("stage %d: its stream (the NCCL gradient reduction between its replicas "
                     "included) did not finish within %g s (run.comm_timeout_s); a replica of "
                     "the stage may have died or hung",
                     stage, timeout_s);
        }
        g_usleep(EXEC_CUDA_NCCL_POLL_US);
    }
}
