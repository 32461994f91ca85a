/* SPDX-License-Identifier: MIT
 * exec-cuda-nccl.h: the CUDA backend's gradient reduction over NCCL (docs/design.md §5.11),
 * for a stage whose D replicas each run on a device of their own (exec-grad-path.h): one NCCL
 * communicator per stage group (the stage's D ranks, in replica order), and the reduction of a
 * virtual stage's device gradients on the stage's stream as an all-gather of every replica's
 * gradients, chunk by chunk, each chunk summed in replica order and divided by D by
 * kern_cuda_replica_mean(): the host path's sums (exec-reduce.h), bitwise. Built when meson
 * finds NCCL (PP_HAVE_NCCL). Internal to libppexec.
 */
#pragma once

#include <cuda_runtime_api.h>

#include "exec-comm.h"
#include "exec-cuda-plan.h"

G_BEGIN_DECLS

typedef struct _ExecCudaNccl ExecCudaNccl;

/* Collective over @group (every rank, host thread, between replays): when @wanted (the same on
 * every rank of a stage group), *@out = this rank's member of its stage group's communicator on
 * @device (made current), with the scratch of one exchange of at most @max_n floats per
 * replica; otherwise *@out = NULL. Ranks that want none still take part in sharing the ids.
 * Returns FALSE on every rank (the failures agreed) when an id could not be made, a
 * communicator could not be set up within the group's deadline (run.comm_timeout_s) or the
 * scratch does not fit: EXEC_ERROR_BACKEND or EXEC_ERROR_COMM. */
gboolean exec_cuda_nccl_new(ExecComm *group, int32_t device, size_t max_n, gboolean wanted,
                            ExecCudaNccl **out, GError **error);
/* Synchronises nothing; frees the communicator and the scratch. Accepts NULL. */
void exec_cuda_nccl_free(ExecCudaNccl *nccl);

/* Worker of the stage, its device current: enqueues on @stream the replacement of @grads
 * (device, n floats) by their mean over the replicas (every replica calls it with the same n,
 * in the same order). Returns once NCCL has taken the calls; aborts on an NCCL failure. */
void exec_cuda_nccl_reduce(ExecCudaNccl *nccl, float *grads, size_t n, cudaStream_t stream);

/* Worker of the stage: waits for @stream's work, NCCL's included, looking every 100 us at
 * NCCL's asynchronous error and at *@aborted (atomic: the replay was stopped). A stopped
 * replay may leave a reduction that a replica never joins: the communicator is then aborted
 * (its kernels end, the gradients are garbage, and the stopped run keeps none of them) and
 * refuses every later replay (exec_cuda_nccl_check()). A peer that fails or does not reach the
 * reduction within @timeout_s (run.comm_timeout_s) ends the process (the launcher ends the
 * job) after a line naming the stage and the deadline: NCCL does not say which peer. */
void exec_cuda_nccl_wait(ExecCudaNccl *nccl, cudaStream_t stream, int32_t stage, double timeout_s,
                         const gint *aborted);
/* Before a replay: FALSE with EXEC_ERROR_BACKEND when a stopped replay aborted the
 * communicator. */
gboolean exec_cuda_nccl_check(const ExecCudaNccl *nccl, GError **error);

G_END_DECLS
