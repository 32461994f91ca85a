/* SPDX-License-Identifier: MIT
 * exec.h: the executor's pipeline object. It replays a validated PpSchedule for real, one
 * worker per stage on a backend chosen by name (exec-backend.h), keeps every stage's weight
 * version and checks it against pp_schedule_version_used() for every op, and turns the
 * backend's per-step reports into the shared trace schema, the losses and the skip counts.
 * The schedule is borrowed, never copied or patched.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-backend.h"
#include "exec-error.h"
#include "gpt2-slice.h"
#include "optim-cpu.h"
#include "pp-memory.h"
#include "pp-partition.h"
#include "pp-schedule.h"
#include "pp-trace.h"

G_BEGIN_DECLS

/* Called from the last stage's worker for each forward on the last virtual stage, in run
 * order, when the backend reports it (at the stage's flush after its next U, or when the
 * worker stops), with the schedule's micro-batch @mb, its op.step and its mean loss. With a
 * process group it is called on rank 0 only, from the host thread as the reports arrive. */
typedef void (*ExecLossFn)(gpointer user_data, int32_t mb, int32_t step, float loss);

/* Parameters of exec_pipeline_new(). */
typedef struct {
    const char       *backend; /* run.backend (exec_backends()); NULL: the reference one */
    Gpt2Config        model;
    int32_t           microbatch_size; /* B sequences per micro-batch */
    const PpSchedule *shape;           /* a schedule of the kind the pipeline will run:
                                          stage/chunk counts, activation slots and weight
                                          versions are sized from it (borrowed for the call) */
    const int32_t  *layers_per_vstage; /* (nullable) (n_vstages), see pp-partition.h */
    PpPartitionMode partition;         /* pipeline.partition when layers_per_vstage is NULL
                                          (0: balanced by cost, no memory limit) */
    uint64_t        seed;              /* parameter init */
    KernOptimParams optim;
    float           lr, min_lr;    /* peak and final learning rate */
    int32_t         warmup_steps;  /* updates of linear warmup (per stage) */
    int32_t         total_steps;   /* updates over which the cosine decays (per stage) */
    float           grad_clip;     /* per-stage L2 clipping threshold, 0 = off */
    int32_t         max_nonfinite; /* consecutive skipped updates on a stage before the
                                      run stops with an error (>= 1) */
    ExecDataFn data;
    gpointer   data_user;
    ExecGradFn on_grads; /* (nullable) */
    gpointer   on_grads_user;
    ExecLossFn on_loss; /* (nullable) */
    gpointer   on_loss_user;
    int32_t    poison_update;       /* test hook: the U with this absolute index on every
                                       stage sees non-finite gradients; -1 = off */
    const int32_t *devices;         /* (nullable) (n_stages) run.devices, borrowed for the call */
    ExecPrecision  precision;       /* run.precision */
    gboolean       flash_attention; /* model.flash_attention */
    gboolean       speed_reference; /* run.speed_reference: after each U the stage's worker
                                       runs the backend's reference kernel, booked as a
                                       PP_RESOURCE_REFERENCE trace row (a backend without one
                                       is refused, EXEC_ERROR_BACKEND) */
    ExecComm *comm;                 /* (nullable) the process group of a multi-process run,
                                       borrowed for the pipeline's life: every rank builds the
                                       pipeline and makes the same calls in the same order.
                                       With parallel.replicas = D > 1 the group runs D
                                       replicas of the pipeline (data parallelism): each rank
                                       runs one stage of one replica, and before every U the
                                       stage's replicas replace their gradients by the mean
                                       over the replicas (exec-reduce.h), so the replicas'
                                       weights stay bitwise equal; each replica reads its own
                                       data (@data is called with the replica's micro-batch
                                       indices: the data source tells replicas apart) */
    ExecParallel parallel;          /* the replicas around this pipeline: D, this process's
                                       replica and the optimizer's shards; with a group, the
                                       D it was given (exec_comm_set_replicas()); all zero:
                                       one pipeline. shards = D > 1 is ZeRO-1
                                       (parallel.distributed_optimizer): replica d holds the
                                       optimizer state of shard d of each virtual stage's flat
                                       parameters only
                                       (kern_optim_shard_range()) and steps it after the
                                       reduce-scatter, then the replicas all-gather the updated
                                       parameters; bitwise the replicated run. AdamW only (Muon
                                       is refused, EXEC_ERROR_BACKEND), and a backend without
                                       the params member is refused likewise */
    gboolean overlap_grad_reduce;   /* parallel.overlap_grad_reduce, with D > 1 replicas: each
                                       bucket of a virtual stage's gradients (a block, the
                                       head, the embeddings; CUDA: the whole virtual stage) is
                                       reduced (on a thread of the stage's own) as soon as the
                                       last backward of the update window that adds to them has
                                       finished it, while that backward and the window's other
                                       ops go on; the same sums, so bitwise the reduction at U.
                                       Static programs only: dynamic mode reduces at U */
} ExecPipelineParams;

typedef struct _ExecPipeline ExecPipeline;

/* Result of one replay (exec_pipeline_run()); all arrays indexed by the schedule's mb. With a
 * process group every rank holds the whole result: each rank's stages are exchanged after
 * the replay. */
typedef struct {
    int32_t n_mb;
    float  *loss;       /* (n_mb) mean cross-entropy of each micro-batch (last vstage F) */
    int32_t n_replicas; /* D: data-parallel replicas of the pipeline (parallel.replicas) */
    float  *losses;     /* (n_replicas, n_mb) every replica's losses, replica-major (this
                           replica's are @loss) */
    int32_t *mb_step;   /* (n_mb) the op.step of the micro-batch's F on the last vstage */
    int32_t *version_f; /* (n_mb, n_vstages) absolute version its F used on each vstage */
    int32_t *version_b; /* (n_mb, n_vstages) absolute version its B/BW used */
    gint     n_skipped; /* updates skipped for non-finite gradients, all stages */
    int32_t  n_stages;
    double **grad_norm;  /* (n_stages)(n_updates[stage]) L2 norm of the stage's gradients
                            before clipping, at each of its U in order */
    float **lr;          /* (n_stages)(n_updates[stage]) learning rate each U applied
                            (exec_pipeline_update_lr() of the stage's version) */
    int32_t *n_updates;  /* (n_stages) U ops run */
    int32_t *n_copies;   /* (n_stages) weight copies the stage's F ops made for stashing
                            (PipeDream, 2BW): one per weight version they used */
    PpOp **executed;     /* (n_stages)(n_executed[stage]) ops in the order each worker ran
                            them */
    int32_t *n_executed; /* (n_stages) */
    int32_t *capacity;   /* (n_stages) room in executed[stage] */
} ExecRunResult;

void exec_run_result_free(ExecRunResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecRunResult, exec_run_result_free)

/* --- construction --- */

/* Partitions the model, creates the backend params->backend names with GPT-2-initialised
 * weights (the same full-model weights for any partition) and zeroed optimizer state.
 * Returns: (transfer full), or NULL with @error set (partition errors, an unsupported shape,
 * EXEC_ERROR_BACKEND for a backend this build lacks). */
ExecPipeline *exec_pipeline_new(const ExecPipelineParams *params, GError **error);
void          exec_pipeline_free(ExecPipeline *pipeline);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecPipeline, exec_pipeline_free)

/* --- running --- */

/* With a process group every rank calls the run functions together; each rank runs its own
 * stages, and a failure on any rank (its error, or a peer that did not answer) ends the run
 * on every rank with the same error (exec_comm_agree()).
 *
 * Replays @sched (validated, the same stage/chunk layout as params->shape) once: micro-batch
 * mb of the schedule reads global micro-batch @mb_offset + mb from the data source. Weights,
 * optimizer state and stage versions carry over from the previous call, so a run may be cut
 * into consecutive schedules (each drains the pipeline at its end). Every op's weight version
 * is PP_ASSERTed equal to pp_schedule_version_used() (relative to the versions at the call).
 * The backend times each op (ns since exec_pipeline_new(): host clock on CPU, events on a GPU)
 * and reports it at its stage's next flush; the rows go into the trace.
 * Returns: (transfer full), or NULL with @error set: EXEC_ERROR_SHAPE when @sched does not
 * fit, EXEC_ERROR_NONFINITE when a stage skipped max_nonfinite consecutive updates for
 * non-finite gradients (the other workers are stopped; the state is then partial). */
ExecRunResult *exec_pipeline_run(ExecPipeline *pipeline, const PpSchedule *sched, int64_t mb_offset,
                                 GError **error);

/* What dynamic mode runs: values the scenario resolved once (PpScenario's pipeline.kind and
 * mb_per_step), no program. */
typedef struct {
    const PpSchedKindInfo *kind;        /* a kind with a run-time policy (paci, async-1f1b) */
    int32_t                mb_per_step; /* backwards accumulated per update (PACI's a), >= 1 */
    int32_t                n_mb;        /* micro-batches to run (steps x mb_per_step), >= 1 */
} ExecDynamicParams;

/* Dynamic mode (one chunk per stage): every worker runs PACI's backpressure policy live
 * (pp_policy_paci_next() with its own state) over the @run->n_mb micro-batches, for a kind
 * with a run-time policy (paci, async-1f1b), with accumulation @run->mb_per_step, using the
 * current weights (no stashing); no static program is built or replayed. The executed order
 * is recorded into a program of @run->kind (PpPolicyRecorder), and every op's weight version
 * is PP_ASSERTed equal to what that program implies; replaying *program statically from the
 * same state gives the same math. @program: (out) (transfer full).
 * Returns: (transfer full), or NULL with @error set as exec_pipeline_run() (EXEC_ERROR_SHAPE
 * also for a kind without a policy or several chunks per stage). */
ExecRunResult *exec_pipeline_run_dynamic(ExecPipeline *pipeline, const ExecDynamicParams *run,
                                         int64_t mb_offset, PpSchedule **program, GError **error);

/* Stops the replay in progress as soon as possible, and every later one before its first op:
 * the workers stop before their next op (waits are woken through the backend's abort), the
 * rows of the ops that ran go into the trace as usual, and exec_pipeline_run() (or _dynamic)
 * returns NULL with EXEC_ERROR_INTERRUPTED and the message @why. Any thread (pacer-train's
 * signal watcher); not async-signal-safe. The pipeline's state is partial afterwards: only a
 * checkpoint written before is sound. */
void exec_pipeline_interrupt(ExecPipeline *pipeline, const char *why);

/* --- state --- */

/* Stages, virtual stages and the partition. (transfer none). */
int32_t            exec_pipeline_n_stages(const ExecPipeline *pipeline);
int32_t            exec_pipeline_n_vstages(const ExecPipeline *pipeline);
const PpPartition *exec_pipeline_partition(const ExecPipeline *pipeline);
/* The whole model's shape and the micro-batch size B. */
const Gpt2Config *exec_pipeline_model(const ExecPipeline *pipeline);
int32_t           exec_pipeline_microbatch_size(const ExecPipeline *pipeline);

/* --- model state, by name (between runs: the pipeline is drained) ---
 * Tensors cross into and out of the backend only as host copies; the table describes them. */

/* Number of tensors of @vstage, and tensor @i (name, offset, shape, weight decay, roles).
 * (transfer none): valid until the free. */
int               exec_pipeline_n_tensors(const ExecPipeline *pipeline, int32_t vstage);
const ExecTensor *exec_pipeline_tensor(const ExecPipeline *pipeline, int32_t vstage, int i);
/* Copies the @role data of tensor @name of @vstage to @dst / from @src (@n floats, its
 * numel). Returns FALSE with EXEC_ERROR_TENSOR or EXEC_ERROR_NOT_LOCAL (exec-backend.h). */
gboolean exec_pipeline_tensor_get(ExecPipeline *pipeline, int32_t vstage, const char *name,
                                  ExecTensorRole role, float *dst, size_t n, GError **error);
gboolean exec_pipeline_tensor_set(ExecPipeline *pipeline, int32_t vstage, const char *name,
                                  ExecTensorRole role, const float *src, size_t n, GError **error);
/* The elements [*@lo, *@hi) of tensor @t (of @vstage's table) whose optimizer state replica
 * @replica contributes to a checkpoint: all of them from replica 0 and none from the others
 * (the replicas hold the same state), or with a sharded optimizer (ZeRO-1) the part inside
 * the replica's shard (kern_optim_shard_range()); tensor_get() of a state role fills that part
 * on the replica's rank, and tensor_set() reads it. */
void exec_pipeline_state_part(const ExecPipeline *pipeline, int32_t vstage, const ExecTensor *t,
                              int32_t replica, size_t *lo, size_t *hi);
/* The optimizer step count t of @vstage, and setting it (resume). */
gboolean exec_pipeline_optim_steps(ExecPipeline *pipeline, int32_t vstage, int64_t *n_steps,
                                   GError **error);
gboolean exec_pipeline_set_optim_steps(ExecPipeline *pipeline, int32_t vstage, int64_t n_steps,
                                       GError **error);
/* Forward of one micro-batch through every virtual stage with the current weights (the
 * backend's evaluate): *@loss its mean cross-entropy (nats).
 *   @tokens, @targets (B, T) ids in [0, V) */
gboolean exec_pipeline_evaluate(ExecPipeline *pipeline, const int32_t *tokens,
                                const int32_t *targets, float *loss, GError **error);

/* --- memory --- */

/* The memory of @stage: *@predicted, the simulator's model (pp-memory.h, docs/design.md §4.5:
 * bf16 training with fp32 master weights and Adam, the master weights and moments sharded over
 * the replicas with a distributed optimizer) for the stage's layers, activation slots and
 * stashed versions; *@actual (nullable), what this process's backend allocated for it.
 * Returns FALSE (and leaves *@actual alone) when the backend does not account its memory or
 * the stage is not local (another process holds it). */
gboolean exec_pipeline_memory(const ExecPipeline *pipeline, int32_t stage, PpMemoryBytes *predicted,
                              ExecMemoryBytes *actual);

/* --- counters --- */

/* Learning rate of a stage's update number @update (0-based, absolute: the stage's weight
 * version when the U runs): warmup + cosine over params->total_steps updates. The one
 * function: every U applies it, and the training log and progress report it. */
float exec_pipeline_update_lr(const ExecPipeline *pipeline, int32_t update);
/* Updates applied so far by @stage (its absolute weight version). */
int32_t exec_pipeline_version(const ExecPipeline *pipeline, int32_t stage);
/* Sets every stage's version (resume from a checkpoint taken at a drained boundary). */
void exec_pipeline_set_versions(ExecPipeline *pipeline, const int32_t *versions);
/* Consecutive updates @stage skipped for non-finite gradients up to now (the run stops when
 * it reaches max_nonfinite), and setting every stage's count (resume). */
int32_t exec_pipeline_nonfinite(const ExecPipeline *pipeline, int32_t stage);
void    exec_pipeline_set_nonfinite(ExecPipeline *pipeline, const int32_t *counts);
/* Every op run so far (rows in execution order per stage; version_f/version_b filled); with a
 * process group, every rank's on rank 0 (times on one timeline) and this rank's elsewhere.
 * (transfer none). */
const PpTrace *exec_pipeline_trace(const ExecPipeline *pipeline);

/* --- processes --- */

/* The process group (transfer none; NULL: one process), the replicas around the pipeline
 * (params.parallel with its zero fields read, transfer none), and the rank of this rank's
 * replica holding virtual stage @vstage's state (0 without a group). */
ExecComm           *exec_pipeline_comm(const ExecPipeline *pipeline);
const ExecParallel *exec_pipeline_parallel(const ExecPipeline *pipeline);
int32_t             exec_pipeline_vstage_rank(const ExecPipeline *pipeline, int32_t vstage);

G_END_DECLS
