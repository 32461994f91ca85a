/* SPDX-License-Identifier: MIT
 * exec-skeleton.h: the part of every backend that does not depend on the device. A backend's
 * context starts with an ExecSkeleton, which holds the model layout (every virtual stage's
 * tensor table, local or not), the pipeline's shape, the stages this process runs, the
 * workers, message routing through the transport (exec-transport.h), each stage's messages in
 * hand, data buffers and report lists, each virtual stage's activation slots and stash
 * bookkeeping, each op's operands, the abort flag, the time origin shared by the ranks, and
 * evaluation across ranks. The skeleton's members below go straight into a backend's
 * ExecBackendOps (is_local, launch, wait_for, poll, has_input, record_done, abort) and so do
 * the state members (tensor tables, by-name copies, optimizer step counts) over the device
 * part's state primitives; the device part supplies the rest (run_op's kernels, flush's device
 * synchronisation, its state primitives, evaluate's step) and the transport. Built and tested
 * on the CPU. Internal to libppexec.
 */
#pragma once

#include "exec-backend-impl.h"
#include "exec-comm.h"
#include "exec-slots.h"
#include "exec-stash.h"
#include "exec-transport.h"

G_BEGIN_DECLS

/* A stage's messages in hand, data and reports (the worker of the stage only). */
typedef struct {
    ExecQueue         queue;      /* the stage's device queue (set by the device part), or NULL */
    ExecTransportMsg *input;      /* taken by wait_for(), released after run_op() */
    const void       *input_data; /* (B, T, C) of the backend's element type: the input */
    ExecTransportMsg *output;     /* taken by run_op(), sent by record_done() */
    int32_t          *tokens;     /* host (B, T) */
    int32_t          *targets;    /* host (B, T) */
    GArray           *reports;    /* ExecOpReport of the ops run since the last flush */
    GArray           *flushed;    /* ExecOpReport handed out by the last flush */
    float            *tap;        /* host (tap_floats) gradient tap copies; NULL without a tap */
    size_t            tap_floats;
} ExecSkeletonStage;

/* A virtual stage's device-independent part (its tensor table is the layout's, for a local
 * virtual stage and another process's alike). */
typedef struct {
    int32_t     stage;   /* the stage (and with a group, the rank) that runs it */
    ExecSlots   slots;   /* which micro-batch holds each activation slot */
    ExecStashes stashes; /* which version each stashed weight copy holds (the stage's weight
                            versions; the copies are the device part's) */
} ExecSkeletonVstage;

typedef struct _ExecSkeleton ExecSkeleton;

/* The device part's state primitives, for the skeleton's state members
 * (exec-skeleton-state.c), which find tensors by name in the layout's table, check names, roles
 * and sizes, and answer for another process's virtual stages. Each is called on the host
 * thread for a local virtual stage @vstage, on a drained pipeline. */
typedef struct {
    /* The flat arrays of @vstage in the device part's memory: parameters and gradients (the
     * layout's n_params floats each, laid out by its table). */
    void (*flat)(ExecSkeleton *skel, int32_t vstage, float **params, float **grads);
    /* Tensor @i's optimizer state (NULL where it has none): AdamW m in @first and v in
     * @second, or Muon's momentum in @first (the layout's roles say which); error feedback's
     * previous update in @prev_update. Each holds the elements [*@lo, *@hi) of the tensor,
     * element lo first: all numel of them, or with a sharded optimizer (ZeRO-1,
     * KernOptimParams.shards) the part inside this replica's shard. */
    void (*optim_state)(ExecSkeleton *skel, int32_t vstage, int i, float **first, float **second,
                        float **prev_update, size_t *lo, size_t *hi);
    /* Copies @bytes from @src to @dst and waits for it: from the device part's memory of
     * @vstage to the host when @to_host, else from the host into it. */
    void (*copy)(ExecSkeleton *skel, int32_t vstage, void *dst, const void *src, size_t bytes,
                 gboolean to_host);
    /* (nullable) After tensor_set() wrote @role of a tensor of @vstage (e.g. a compute copy
     * of the weights follows the master). */
    void (*after_set)(ExecSkeleton *skel, int32_t vstage, ExecTensorRole role);
    /* The optimizer's step count t of @vstage, read and written. */
    int64_t (*get_optim_steps)(ExecSkeleton *skel, int32_t vstage);
    void (*set_optim_steps)(ExecSkeleton *skel, int32_t vstage, int64_t n_steps);
} ExecSkeletonStateOps;

struct _ExecSkeleton {
    ExecBackend base;
    /* (nullable) Called on a stage's worker thread before its first op: makes the stage's
     * device current (CUDA: cudaSetDevice). */
    void (*enter)(ExecSkeleton *skel, int32_t stage);
    ExecModelLayout            *layout; /* a reference: tables, flat sizes, kernel arguments */
    int32_t                     n_stages, n_chunks, n_vstages;
    int32_t                    *vstage_stage;    /* (n_vstages) */
    int32_t                    *weight_versions; /* (n_stages) weight copies a stage keeps */
    int32_t                    *act_slots;       /* (n_vstages) the layout's n_act_slots */
    ExecDataFn                  data;
    gpointer                    data_user;
    ExecGradFn                  on_grads;
    gpointer                    on_grads_user;
    ExecComm                   *comm; /* (nullable) the group; stage s: exec_comm_stage_rank(s) */
    ExecParallel                parallel;  /* setup's, resolved (exec_parallel_resolve()) */
    gboolean                   *local;     /* (n_stages) the stages this process runs */
    ExecTransport              *transport; /* set by the device part before the first prepare() */
    const ExecSkeletonStateOps *state;     /* set by the device part before the first state call */
    gint                        aborted;   /* atomic: abort() since the last prepare() */
    int64_t                     t0_ns;     /* CLOCK_MONOTONIC origin of the reports' times */
    ExecSkeletonStage          *stages;    /* (n_stages) */
    ExecSkeletonVstage         *vstages;   /* (n_vstages) */
};

static inline ExecSkeleton *exec_skeleton(ExecBackend *backend) {
    return (ExecSkeleton *)backend;
}

/* Fills @skel from @setup for the backend @ops (named @what in errors, e.g. "the CPU
 * backend"): the layout, the shape, local stages, per-stage lists and buffers (the gradient
 * tap's sized for the largest tensor of the stage), per-vstage slots. Refuses
 * (EXEC_ERROR_BACKEND) a group whose size is not the stage count x replicas. The device part then
 * sets transport (and enter), builds its own state and calls exec_skeleton_start(). Free with
 * exec_skeleton_clear(), also after a failure. */
gboolean exec_skeleton_init(ExecSkeleton *skel, const ExecBackendOps *ops, const char *what,
                            const ExecBackendSetup *setup, GError **error);
/* Frees what the skeleton holds (the transport included); a cleared skeleton may be cleared
 * again. */
void exec_skeleton_clear(ExecSkeleton *skel);
/* The end of construction: with a group, installs the stop handler and agrees on rank 0's
 * time origin (t0_ns, read on this rank's clock); then prepares for a first replay. Collective
 * with a group. Returns FALSE with EXEC_ERROR_COMM when a peer does not answer. */
gboolean exec_skeleton_start(ExecSkeleton *skel, GError **error);
/* CLOCK_MONOTONIC in ns (the reports' clock before t0_ns is subtracted). */
int64_t exec_skeleton_clock_ns(void);
/* The layout of virtual stage @vstage: (transfer none). */
static inline const ExecVstageLayout *exec_skeleton_vstage_layout(const ExecSkeleton *skel,
                                                                  int32_t             vstage) {
    return &skel->layout->vstages[vstage];
}

/* One step of evaluate() for the device part: local virtual stage @vs forwards one
 * micro-batch over activation slot 0 with the current weights, no gradients. Its input:
 * @tokens (B, T) when @vs is 0, else @in (host, (B, T, C) of the backend's element type: the
 * activation from another rank) or, when @in is NULL, the output the device part kept from
 * local @vs - 1. Its output: into @out (host, the same shape: for another rank) when @out is not
 * NULL, else kept for local @vs + 1; on the last virtual stage, *@loss (mean cross-entropy
 * against @targets (B, T)) instead. */
typedef void (*ExecSkeletonEvalFn)(ExecSkeleton *skel, int32_t vs, const int32_t *tokens,
                                   const int32_t *targets, const void *in, void *out, float *loss);
/* evaluate() for every backend: each process of replica 0 steps its local virtual stages in
 * order (@step), receiving the activation from the previous virtual stage's rank and sending
 * its output on to the next one's (host point-to-point, @msg_bytes each, tag: the virtual stage
 * it is for), and the last virtual stage's rank broadcasts the loss: *@loss on every rank (the
 * other replicas hold the same weights and forward nothing).
 * Collective with a group; FALSE with EXEC_ERROR_COMM when a peer does not answer. */
gboolean exec_skeleton_evaluate(ExecSkeleton *skel, size_t msg_bytes, ExecSkeletonEvalFn step,
                                const int32_t *tokens, const int32_t *targets, float *loss,
                                GError **error);

/* prepare()'s device-independent part: checks @sched (NULL in dynamic mode) against the
 * shape, the activation slots and the group's tags, resets the transport, messages in hand,
 * reports, slots and stashes and clears the abort flag. */
gboolean exec_skeleton_prepare(ExecSkeleton *skel, const PpSchedule *sched, GError **error);

/* --- members of ExecBackendOps (exec-backend-impl.h documents them) --- */

/* The members of a backend's ExecBackendOps initializer that are the skeleton's: is_local,
 * launch, wait_for, poll, has_input, record_done, abort and the state members; the device part
 * adds name, prepare, run_op, flush, reference, grads, evaluate, memory and free. */
#define EXEC_SKELETON_OPS                                                                          \
    .is_local = exec_skeleton_is_local, .launch = exec_skeleton_launch,                            \
    .wait_for = exec_skeleton_wait_for, .poll = exec_skeleton_poll,                                \
    .has_input = exec_skeleton_has_input, .record_done = exec_skeleton_record_done,                \
    .abort = exec_skeleton_abort, .n_tensors = exec_skeleton_n_tensors,                            \
    .tensor = exec_skeleton_tensor, .tensor_get = exec_skeleton_tensor_get,                        \
    .tensor_set = exec_skeleton_tensor_set, .get_optim_steps = exec_skeleton_get_optim_steps,      \
    .set_optim_steps = exec_skeleton_set_optim_steps

gboolean exec_skeleton_is_local(ExecBackend *backend, int32_t stage);
void     exec_skeleton_launch(ExecBackend *backend, ExecWorkerFn worker, gpointer user_data);
gboolean exec_skeleton_wait_for(ExecBackend *backend, const ExecOpArgs *args);
gboolean exec_skeleton_poll(ExecBackend *backend, int32_t stage, gboolean block);
gboolean exec_skeleton_has_input(ExecBackend *backend, const ExecOpArgs *args);
void     exec_skeleton_record_done(ExecBackend *backend, const ExecOpArgs *args);
void     exec_skeleton_abort(ExecBackend *backend);

/* --- state members of ExecBackendOps, over the device part's ExecSkeletonStateOps
 * (exec-skeleton-state.c) --- */

int               exec_skeleton_n_tensors(ExecBackend *backend, int32_t vstage);
const ExecTensor *exec_skeleton_tensor(ExecBackend *backend, int32_t vstage, int i);
gboolean          exec_skeleton_tensor_get(ExecBackend *backend, int32_t vstage, const char *name,
                                           ExecTensorRole role, float *dst, size_t n, GError **error);
gboolean          exec_skeleton_tensor_set(ExecBackend *backend, int32_t vstage, const char *name,
                                           ExecTensorRole role, const float *src, size_t n, GError **error);
gboolean exec_skeleton_get_optim_steps(ExecBackend *backend, int32_t vstage, int64_t *n_steps,
                                       GError **error);
gboolean exec_skeleton_set_optim_steps(ExecBackend *backend, int32_t vstage, int64_t n_steps,
                                       GError **error);

/* --- for the device part's run_op and flush (the stage's worker) --- */

/* A new report of @args's op, appended to its stage's list: valid until the next one. */
ExecOpReport *exec_skeleton_report(ExecSkeleton *skel, const ExecOpArgs *args);
/* After the op's last read of its input (enqueued on the stage's queue): gives it back. */
void exec_skeleton_release_input(ExecSkeleton *skel, int32_t stage);
/* flush()'s hand-over, after the device part has completed the reports: the stage's reports
 * since the last flush, in run order. */
void exec_skeleton_flush(ExecSkeleton *skel, int32_t stage, ExecStageReport *report);

/* --- for the device part's F, B, W and BW (exec-skeleton-compute.c): what each op reads
 * and writes, decided once; the device part runs the kernels between begin and end --- */

/* F's operands. */
typedef struct {
    int32_t slot;           /* the activation slot taken for the micro-batch */
    int32_t fill;           /* the stashed copy the device part fills with the live weights
                               before the forward (the schedule stashes and no copy holds the
                               op's version yet; report->copied), else -1. The forward itself
                               always reads the live weights */
    const int32_t *tokens;  /* host (B, T) on the first virtual stage (from the data source),
                               else NULL */
    const int32_t *targets; /* host (B, T) on the last virtual stage, else NULL */
    const void    *input;   /* (B, T, C) of the element type: the activation from vstage - 1
                               (wait_for's message); NULL on the first virtual stage */
    void *output;           /* (B, T, C): the message buffer for vstage + 1 (taken from the
                               transport on the stage's queue); NULL on the last */
} ExecSkeletonForward;

/* F's bookkeeping before the device part's forward of @args: a slot for the micro-batch, the
 * batch loaded, the stash decision, the input and the output buffer. */
void exec_skeleton_forward(ExecSkeleton *skel, const ExecOpArgs *args, ExecSkeletonForward *f);

/* B's, W's or BW's operands. */
typedef struct {
    int32_t slot;       /* the slot the micro-batch's F filled */
    int32_t stash;      /* B/BW: the stashed copy holding the weights its F used (compute with
                           it), or -1: the live weights; W reads no weights: -1 */
    const void *dx_out; /* B/BW: (B, T, C) the gradient from vstage + 1 (wait_for's message);
                           NULL on the last virtual stage (it starts from the loss) and for W */
    void *dx_in;        /* B/BW: (B, T, C) the message buffer for vstage - 1; NULL on the
                           first virtual stage and for W */
} ExecSkeletonBackward;

/* Before the device part's B, W or BW of @args: its slot, weights, input and output. */
void exec_skeleton_backward_begin(ExecSkeleton *skel, const ExecOpArgs *args,
                                  ExecSkeletonBackward *b);
/* After it (enqueued): W and BW free the slot, B keeps it for W; a stashed copy is released
 * (it keeps its version for the next F of it). */
void exec_skeleton_backward_end(ExecSkeleton *skel, const ExecOpArgs *args,
                                const ExecSkeletonBackward *b);

/* --- for the device part's U (exec-skeleton-update.c) --- */

/* U's gradient tap (nothing without on_grads): for each virtual stage of local @stage in
 * turn, a host copy of each of its gradient tensors (the state primitives' copy, on the stage's
 * worker, which waits for the copy: a test hook), handed to the observer. Called before the
 * norm and the step. */
void exec_skeleton_tap(ExecSkeleton *skel, int32_t stage);
/* U's decision on the host: kern_update_gate() (kern-update-gate.h, the rule a GPU evaluates
 * on the device in kern_cuda_optim_step()'s gate) of @sq_norm, the stage's squared gradient
 * norm over its virtual stages, args->grad_clip and args->poison: report->grad_norm and
 * report->applied are set; returns the factor the gradients are scaled by before the step. */
float exec_skeleton_update_gate(double sq_norm, const ExecOpArgs *args, ExecOpReport *report);

G_END_DECLS
