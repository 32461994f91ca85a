/* SPDX-License-Identifier: MIT
 * exec-cuda-private.h: the CUDA backend's context, shared by its replay side (exec-cuda.c:
 * construction, workers, ops on the stages' streams, event times and reports) and its state
 * side (exec-cuda-state.c: by-name copies, optimizer step counts, evaluation). Internal to
 * libppexec (CUDA builds only).
 */
#pragma once

#include <cuda_runtime_api.h>

#include "exec-cuda-plan.h"
#include "exec-cuda-transport.h"
#include "exec-grad-path.h"
#include "exec-skeleton.h"
#include "gpt2-slice-cuda.h"
#include "kern-cuda.h"
#include "optim-cuda.h"

G_BEGIN_DECLS

/* Ops a stage records between two reads of its events: beyond it, run_op reads the window
 * first (one extra synchronisation, for stages with very many ops per optimizer step). */
#define EXEC_CUDA_WINDOW_OPS 256

/* Device scalars of a stage, inside its EXEC_CUDA_STAGE_SCALARS_BYTES block. */
#define EXEC_CUDA_SQ_NORM_OFFSET 0 /* double: squared gradient norm of the stage's U */
#define EXEC_CUDA_LOSS_OFFSET    8 /* float: loss of the last vstage's F (and evaluate) */

/* What the device reports per op, copied into pinned host memory on the stage's stream right
 * after the op; read at the next flush. */
typedef struct {
    float               loss;   /* F on the last vstage */
    KernCudaOptimStatus status; /* U: the first vstage's optimizer gate (all share it) */
} ExecCudaOpScalars;

typedef struct {
    Gpt2CudaSlice *slice;       /* NULL when another process holds the virtual stage */
    KernCudaOptim *optim;       /* NULL likewise */
    void          *stash_arena; /* (plan->stashes[vs], n_params) elements of the dtype, or
                                   NULL; the skeleton's ExecStashes says which version each
                                   copy holds */
    /* Data parallelism over the host-staged path (exec-cuda-grads.c): pinned (n_params) fp32,
     * the gradients handed to the reduction between replicas, which overwrites them with the
     * mean; NULL with one replica. */
    float   *host_grads;
    gboolean host_grads_taken; /* host_grads holds this window's gradients: the first grads()
                                  since the last U copied them, later calls return them as
                                  the reduction left them, and U uploads them before its norm
                                  and clears this */
} ExecCudaVstage;

/* A stage's device part (its messages in hand, data and reports are the skeleton's). */
typedef struct {
    int32_t      device;
    cudaStream_t stream;             /* the compute stream: every op of the stage */
    KernCudaCtx *ctx;                /* on stream */
    char        *scalars;            /* device (EXEC_CUDA_STAGE_SCALARS_BYTES) */
    void        *eval_in, *eval_out; /* device (B, T, C) of the dtype: evaluate()'s messages */
    /* Op times: two timing events per op of the window; the anchor is the last event read,
     * at anchor_ns (ns since the backend's time origin). */
    int32_t            n_window; /* ops recorded since the window was last read */
    cudaEvent_t        ev_start[EXEC_CUDA_WINDOW_OPS];
    cudaEvent_t        ev_end[EXEC_CUDA_WINDOW_OPS];
    cudaEvent_t        anchor;
    int64_t            anchor_ns;
    ExecCudaOpScalars *host_scalars; /* pinned (EXEC_CUDA_WINDOW_OPS) */
    /* The NCCL reduction's span before a U (exec-cuda-grads.c): events recorded around the
     * reductions enqueued since the last U (reducing: the first one is recorded), and the
     * window index of the U whose report gets the span (-1: none). */
    cudaEvent_t reduce_start, reduce_end;
    gboolean    reducing;
    int32_t     reduce_op;
} ExecCudaStage;

typedef struct _ExecCudaNccl ExecCudaNccl;

typedef struct {
    ExecSkeleton  skel; /* first: workers, messages, reports, slots */
    ExecCudaPlan *plan;
    ExecGradPath  grad_path; /* how this rank's stage group reduces its gradients, agreed by
                                the group at creation (exec-grad-path.h) */
    ExecCudaNccl   *nccl;    /* grad_path NCCL: the stage group's communicator, else NULL */
    ExecCudaVstage *vstages; /* (n_vstages) */
    ExecCudaStage  *stages;  /* (n_stages); another rank's stage has no stream */
} ExecCudaBackend;

static inline ExecCudaBackend *exec_cuda(ExecBackend *backend) {
    return (ExecCudaBackend *)backend;
}

/* The stage of local @vstage with its device made current on the calling thread
 * (exec-cuda-state.c). */
ExecCudaStage *exec_cuda_stage_enter(ExecCudaBackend *cuda, int32_t vstage);

/* --- exec-cuda-grads.c --- */

/* grads() (exec-backend-impl.h documents it): the device gradients of @vstage in host_grads. */
float *exec_cuda_grads(ExecBackend *backend, int32_t vstage, size_t *n);
/* reduces_grads() and reduce_grads() (exec-backend-impl.h): TRUE on the NCCL path; the mean
 * over the replicas of @vstage's device gradients, enqueued on its stage's stream. */
gboolean exec_cuda_reduces_grads(ExecBackend *backend);
void     exec_cuda_reduce_grads(ExecBackend *backend, int32_t vstage);
/* Sets grad_path from the @places (replicas) of this rank's stage group, in replica order (the
 * same facts on every rank of the group), before the virtual stages are allocated. */
void exec_cuda_grads_choose(ExecCudaBackend *cuda, const ExecGradPlace *places);
/* Allocates @vstage's host_grads on the host-staged path. Returns FALSE on out-of-memory. */
gboolean exec_cuda_grads_new(ExecCudaBackend *cuda, int32_t vstage);
/* Collective over the group (every rank, host thread, after the allocations): the stage
 * groups' NCCL communicators where grad_path is NCCL. Returns FALSE as exec_cuda_nccl_new(). */
gboolean exec_cuda_grads_connect(ExecCudaBackend *cuda, GError **error);
/* Waits for the work on the stream of local @stage: with NCCL under the group's deadline. */
void exec_cuda_grads_wait(ExecCudaBackend *cuda, int32_t stage);
/* prepare()'s check: FALSE with EXEC_ERROR_BACKEND when a stopped replay aborted the NCCL
 * communicator (exec_cuda_nccl_check()). */
gboolean exec_cuda_grads_check(ExecCudaBackend *cuda, GError **error);
/* Frees the communicator. */
void exec_cuda_grads_free(ExecCudaBackend *cuda);
/* U, window index @k: the report of the U gets the span of the reductions enqueued since the
 * last U, if any. */
void exec_cuda_grads_mark_update(ExecCudaStage *st, int32_t k);
/* U's first step on the stage's stream: the reduced host gradients of @vstage back into the
 * device gradients, when the reduction has run since the last U. */
void exec_cuda_grads_upload(ExecCudaBackend *cuda, ExecCudaStage *st, int32_t vstage);

/* --- exec-cuda-state.c --- */

/* The state primitives the skeleton's state members use. */
extern const ExecSkeletonStateOps exec_cuda_state_ops;
/* evaluate() (exec-backend-impl.h documents it). */
gboolean exec_cuda_evaluate(ExecBackend *backend, const int32_t *tokens, const int32_t *targets,
                            float *loss, GError **error);

G_END_DECLS
