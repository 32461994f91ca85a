/* SPDX-License-Identifier: MIT
 * exec-backend-impl.h: the backend author's interface (the public contract is exec-backend.h):
 * the model layout's constructor and kernel arguments (exec-layout-impl.h), the ops table the
 * replay loop (exec.c, exec-replay.c) calls, what it asks of one op and what a backend reports
 * back, and the helpers every backend shares (message keys, the schedule check, tensors by
 * role, backends across processes). A backend is the skeleton
 * (exec-skeleton.h) plus a device part; exec/README.md lists the files to touch to add one.
 * The replay loop decides what each op does (weight version, loss scale, learning rate) and
 * keeps the books (versions, Δ checks, losses, skipped updates, the trace); the backend does
 * the math and the messaging. Internal to libppexec.
 */
#pragma once

#include "exec-backend.h"
#include "exec-layout-impl.h"
#include "exec-transport.h"
#include "pp-schedule.h"

G_BEGIN_DECLS

/* How the members are called (docs/backends.md has the whole story):
 *
 * Threads. The caller's thread ("host") calls prepare, is_local, launch, the state members
 * (n_tensors .. evaluate) and free, never while launch runs. launch starts one worker per
 * local stage; the worker of stage s calls wait_for, poll, has_input, run_op, record_done
 * and flush with ops of stage s only, so a backend keeps per-stage state without locks.
 * abort may come from any thread at any time.
 *
 * Order on a worker, per op of its program: wait_for -> run_op -> record_done; after every
 * U, and once when the worker stops (end of program or abort), flush. Dynamic mode adds
 * poll and has_input before picking an op.
 *
 * Synchronisation. Nothing between two flushes may wait for the device: run_op and
 * record_done only enqueue work (CPU: they run it), wait_for only orders the stage's queue
 * after the producer's (a stream waiting on an event) unless the input comes from another
 * process, and the backend measures op times itself (host clock on CPU, events on a GPU).
 * flush is the one point where a device synchronises: once per optimizer step of the stage,
 * to read the op times and the scalars (losses, grad norm, applied) since the last flush.
 * The state members copy between host and device and may synchronise: they run between
 * replays, on a drained pipeline.
 *
 * Processes. A backend that runs one process per stage (MPI) holds only its local stages'
 * state: is_local says which stages those are, launch starts workers for them only,
 * wait_for/record_done exchange messages across processes, and the state members answer for
 * local virtual stages (EXEC_ERROR_NOT_LOCAL for others); evaluate forwards across ranks and
 * returns the loss on every rank. */

/* What the replay loop asks of one op. */
typedef struct {
    const PpOp *op;
    int32_t     vstage;    /* F/B/W/BW: virtual stage; -1 for U */
    int64_t     global_mb; /* F/B/W/BW: micro-batch index over the whole run (data position) */
    int32_t     version;   /* absolute weight version the op computes with (U: the update's
                              index on its stage) */
    gboolean stash;        /* F: keep a copy of the current weights (version @version) for
                              the micro-batch's backward; B/BW: compute with that copy and
                              release it (PipeDream, 2BW weight stashing) */
    float    loss_scale;   /* B/BW on the last virtual stage: the micro-batch's share */
    float    lr;           /* U: learning rate */
    float    grad_clip;    /* U: per-stage L2 clipping threshold, 0 = off */
    gboolean poison;       /* U: test hook, treat the gradients as non-finite */
    gboolean sharded;      /* U with a sharded optimizer (ZeRO-1, KernOptimParams.shards > 1):
                              only the optimizer's range of each virtual stage's gradients is
                              reduced; the stage's squared gradient norm is @sq_norm (over every
                              replica's range) and the step scales and reads that range only */
    double               sq_norm;    /* U, @sharded: the stage's squared gradient norm */
    const Gpt2GradsHook *grads_hook; /* (nullable) BW/W: told of each bucket of the virtual
                                        stage's gradients as the op finishes it (the CPU
                                        backend; the CUDA backend ignores it, and the pipeline
                                        then hands the whole virtual stage over after the op) */
} ExecOpArgs;

/* What a backend reports about one op it ran, at its stage's next flush. */
typedef struct {
    PpOp     op;             /* the op as run_op() received it */
    int32_t  vstage;         /* F/B/W/BW: its virtual stage; -1 for U */
    int64_t  start_ns;       /* when its compute started and ended: ns since the backend was */
    int64_t  end_ns;         /* created (CPU: host clock around the kernels; GPU: stream events) */
    float    loss;           /* F on the last virtual stage: mean cross-entropy (nats); else 0 */
    double   grad_norm;      /* U: L2 norm of the stage's gradients before clipping */
    gboolean applied;        /* U: FALSE when the gradients were not finite (or poisoned) and the
                                update was skipped (gradients discarded all the same) */
    gboolean copied;         /* F with stash: the op copied the stage's weights (a version no kept
                                copy held) */
    int64_t reduce_start_ns; /* U after reduce_grads(): the span of the device's reduction */
    int64_t reduce_end_ns;   /* of the stage's gradients right before it, on the same clock;
                                0 and 0 otherwise */
} ExecOpReport;

/* The ops a stage ran since its previous flush, in run order. */
typedef struct {
    const ExecOpReport *ops; /* (n_ops) (transfer none): valid until the stage's next run_op,
                                flush or prepare */
    int32_t n_ops;
} ExecStageReport;

/* The end of a backend's tensor lookup by name: @data (tensor @t's @role array, NULL when it
 * lacks the role) when @t holds @n floats; otherwise NULL and an EXEC_ERROR_TENSOR naming
 * virtual stage @vstage, @name and what differs (@t NULL: the stage holds no such tensor). */
float *exec_tensor_checked(int32_t vstage, const char *name, const ExecTensor *t,
                           ExecTensorRole role, float *data, size_t n, GError **error);

typedef struct _ExecBackendOps ExecBackendOps;

/* Runs the replay of one pipeline stage; the backend calls it on that stage's worker. */
typedef void (*ExecWorkerFn)(gpointer user_data, int32_t stage);

struct _ExecBackendOps {
    const char *name;

    /* --- replay control (host thread, no worker running) --- */

    /* Checks that @sched fits the model state (stage/chunk counts, activation slots) and
     * resets the transport and the reports for a new replay; @sched is NULL in dynamic mode
     * (nothing to check). Returns FALSE and sets @error (EXEC_ERROR_SHAPE) otherwise. */
    gboolean (*prepare)(ExecBackend *backend, const PpSchedule *sched, GError **error);
    /* Whether this process runs @stage's worker and holds its virtual stages' state. */
    gboolean (*is_local)(ExecBackend *backend, int32_t stage);
    /* Runs @worker(@user_data, stage) once for every local stage, concurrently (a host thread
     * each), and returns when all have returned. */
    void (*launch)(ExecBackend *backend, ExecWorkerFn worker, gpointer user_data);

    /* --- ops (the worker of args->op->stage, or of @stage) --- */

    /* Makes the input message of @args->op available to the stage (activation for F on a
     * vstage > 0, gradient for B/BW below the last vstage; other ops return at once): blocks
     * the worker until the producer has handed it over (CPU: the data arrived; GPU: the
     * producer's event is recorded and the stage's stream waits on it, no host sync).
     * Returns FALSE when the run was aborted. */
    gboolean (*wait_for)(ExecBackend *backend, const ExecOpArgs *args);
    /* Dynamic mode: moves the messages that reached @stage into its pending set; with @block,
     * first waits until at least one arrives. Returns FALSE when the run was aborted. */
    gboolean (*poll)(ExecBackend *backend, int32_t stage, gboolean block);
    /* Dynamic mode: whether the input message of @args->op is pending (after poll()); TRUE
     * for ops that need none. */
    gboolean (*has_input)(ExecBackend *backend, const ExecOpArgs *args);
    /* Runs (CPU) or enqueues (GPU) the op and records its report for the next flush. U
     * computes the stage's gradient norm, skips the update when it is not finite (or
     * @args->poison), clips to @args->grad_clip, steps the optimizer with @args->lr and zeroes
     * the gradients; the tap, when installed, sees the gradients first. */
    void (*run_op)(ExecBackend *backend, const ExecOpArgs *args);
    /* Sends the op's output (activation of F, input gradient of B/BW) to the worker of the
     * consuming virtual stage (GPU: after an event that orders it behind the op). */
    void (*record_done)(ExecBackend *backend, const ExecOpArgs *args);
    /* Waits for the stage's work so far (the one device synchronisation of a step) and hands
     * over the reports of the ops run since the previous flush, in run order. */
    void (*flush)(ExecBackend *backend, int32_t stage, ExecStageReport *report);
    /* (nullable) The speed reference (run.speed_reference): runs a fixed kernel on the
     * stage's device, the same work in every run, schedule and model, waits for it and
     * returns its span in *@start_ns, *@end_ns (the reports' clock). A run's reference times
     * say how fast the stage's device was then, apart from what the schedule did. */
    void (*reference)(ExecBackend *backend, int32_t stage, int64_t *start_ns, int64_t *end_ns);
    /* (nullable: a backend without it runs one replica) Data parallelism: the gradients
     * accumulated so far in local virtual stage @vstage as one flat host array of *@n floats
     * (transfer none), which the gradient reduction between replicas reads and overwrites in
     * place after the stage's last backward of an update window, before its U. Called again
     * in the same window (overlapped buckets, then the U) it returns the same array as the
     * reduction left it. */
    float *(*grads)(ExecBackend *backend, int32_t vstage, size_t *n);
    /* (nullable: a backend without it reduces through grads()) Data parallelism on the device:
     * whether this backend reduces the gradients between the replicas of a stage itself, with
     * reduce_grads() below; decided once at creation, the same on every rank of a stage's
     * replica group (exec-grad-path.h). FALSE: through grads() and the pipeline's host
     * reduction. Any thread. */
    gboolean (*reduces_grads)(ExecBackend *backend);
    /* (nullable: needed when reduces_grads() says TRUE) Worker of the stage of local @vstage,
     * right before the stage's U, once per local virtual stage in increasing order (the same
     * calls on every replica): enqueues on the stage's queue, after the window's backwards,
     * the replacement of @vstage's gradients by their mean over the replicas, summed in
     * replica order then divided by D (exec-reduce.h's sums, bitwise), and returns without
     * waiting for the device. The U's report carries the span of these reductions
     * (reduce_start_ns, reduce_end_ns). */
    void (*reduce_grads)(ExecBackend *backend, int32_t vstage);
    /* (nullable: a backend without it has no sharded optimizer) ZeRO-1: the parameters of
     * local virtual stage @vstage as one flat host array of *@n floats (transfer none), into
     * which the all-gather after a sharded U copies the other replicas' updated shards. */
    float *(*params)(ExecBackend *backend, int32_t vstage, size_t *n);

    /* --- any thread --- */

    /* Wakes every waiting worker: their wait_for()/poll() return FALSE from now on until the
     * next prepare(). */
    void (*abort)(ExecBackend *backend);

    /* --- state (host thread, between replays: the pipeline is drained) --- */

    /* Number of parameter tensors of virtual stage @vstage (every vstage, local or not). */
    int (*n_tensors)(ExecBackend *backend, int32_t vstage);
    /* Tensor @i of @vstage's table (the layout's: Hugging Face name, offset, shape, weight
     * decay and the EXEC_TENSOR_ROLE_BIT()s it has). Returns: (transfer none): valid until
     * free(). */
    const ExecTensor *(*tensor)(ExecBackend *backend, int32_t vstage, int i);
    /* Copies the @role data of tensor @name of @vstage into @dst (@n floats, its numel).
     * Returns FALSE with EXEC_ERROR_TENSOR (no such tensor or role, @n differs) or
     * EXEC_ERROR_NOT_LOCAL. */
    gboolean (*tensor_get)(ExecBackend *backend, int32_t vstage, const char *name,
                           ExecTensorRole role, float *dst, size_t n, GError **error);
    /* Copies @src (@n floats) into the @role data of tensor @name of @vstage. Errors as
     * tensor_get(). */
    gboolean (*tensor_set)(ExecBackend *backend, int32_t vstage, const char *name,
                           ExecTensorRole role, const float *src, size_t n, GError **error);
    /* The optimizer's step count t of @vstage (skipped updates do not advance it), and
     * setting it (resume). Errors: EXEC_ERROR_NOT_LOCAL. */
    gboolean (*get_optim_steps)(ExecBackend *backend, int32_t vstage, int64_t *n_steps,
                                GError **error);
    gboolean (*set_optim_steps)(ExecBackend *backend, int32_t vstage, int64_t n_steps,
                                GError **error);
    /* Forward of one micro-batch through every virtual stage with the current weights, no
     * gradients: *@loss = its mean cross-entropy (nats).
     *   @tokens  (B, T) ids in [0, V)
     *   @targets (B, T) ids in [0, V) */
    gboolean (*evaluate)(ExecBackend *backend, const int32_t *tokens, const int32_t *targets,
                         float *loss, GError **error);
    /* (optional: NULL for a backend whose memory is not arenas of its own) The memory the
     * backend allocated for local @stage's state. */
    void (*memory)(ExecBackend *backend, int32_t stage, ExecMemoryBytes *bytes);

    void (*free)(ExecBackend *backend);
};

/* Base of every backend; a backend's context struct starts with it. */
struct _ExecBackend {
    const ExecBackendOps *ops;
};

/* prepare()'s check, for every backend: @sched has @n_stages x @n_chunks, places every
 * virtual stage on the stage @vstage_stage (n_vstages) says, and keeps no more micro-batches
 * in flight on a virtual stage than its @act_slots (n_vstages) (pp_schedule_vstage_peak_inflight).
 * Returns FALSE with EXEC_ERROR_SHAPE naming the first mismatch otherwise. */
gboolean exec_backend_check_schedule(const PpSchedule *sched, int32_t n_stages, int32_t n_chunks,
                                     const int32_t *vstage_stage, const int32_t *act_slots,
                                     GError **error);

/* --- backends across processes (exec-backend-comm.c) --- */

/* prepare()'s check with a group: FALSE with exec_msg_tag_error() when @sched's last
 * message needs a tag past the group's largest. TRUE without a group. */
gboolean exec_backend_check_tags(const ExecComm *comm, int32_t n_vstages, const PpSchedule *sched,
                                 GError **error);
/* EXEC_ERROR_NOT_LOCAL into @error: @vstage lives on stage (and rank) @stage, not here. */
void exec_backend_set_not_local(GError **error, const ExecComm *comm, int32_t vstage,
                                int32_t stage);

/* --- backends --- */

/* The CPU backend: one GThread per local stage, host-queue inboxes, Gpt2Slice + KernOptim
 * per local virtual stage from the layout (exec-cpu.c); with setup->comm, stage r on rank r and
 * messages between ranks through the group. Fails (EXEC_ERROR_BACKEND) for setup->devices or bf16
 * and when the group's size is not the stage count, EXEC_ERROR_COMM when a peer does not answer (it
 * is collective with a group: the ranks agree on one time origin). Returns: (transfer full). */
ExecBackend *exec_backend_cpu_new(const ExecBackendSetup *setup, GError **error);

/* The CUDA backend (exec-cuda.c): per stage a device, a compute stream, a host worker and
 * device arenas sized at creation; with setup->comm, each rank's stage (exec-comm.h, replicas)
 * on run.devices[stage] or the rank's place on its node modulo the devices it sees, messages
 * staged through host memory and the group, and with replicas the gradient reduction over
 * NCCL or the host-staged path (exec-cuda-grads.c). Fails (EXEC_ERROR_BACKEND) without a CUDA
 * device, for a device id the process does not see, a precision or flash attention the model's
 * shape cannot run, when the device memory is too small, when the group's size is not the stage
 * count, or for a sharded optimizer (exec_layout_optim(setup->layout)->shards > 1: ZeRO-1 is
 * the CPU backend's); with a group it is collective, like the CPU backend's. Returns: (transfer
 * full). */
ExecBackend *exec_backend_cuda_new(const ExecBackendSetup *setup, GError **error);

G_END_DECLS
