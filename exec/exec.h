/* SPDX-License-Identifier: MIT
 * exec.h: the executor's pipeline object. It replays a validated PpSchedule for real, one
 * worker per stage on a backend (exec-backend.h), keeps every stage's weight version and
 * checks it against pp_schedule_version_used() for every op, times every op into the shared
 * trace schema and collects the losses. The schedule is borrowed, never copied or patched.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-backend.h"
#include "pp-schedule.h"
#include "pp-trace.h"

G_BEGIN_DECLS

/* --- errors --- */
#define EXEC_ERROR (exec_error_quark())
GQuark exec_error_quark(void);

typedef enum {
    EXEC_ERROR_SHAPE,     /* a schedule that does not fit the pipeline's model state */
    EXEC_ERROR_NONFINITE, /* a stage skipped max_nonfinite consecutive updates */
} ExecError;

/* Called by the last stage's worker after each forward on the last virtual stage, with the
 * schedule's micro-batch @mb, its op.step and its mean loss (progress display). */
typedef void (*ExecLossFn)(gpointer user_data, int32_t mb, int32_t step, float loss);

/* Parameters of exec_pipeline_new(). */
typedef struct {
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
    int32_t    poison_update; /* test hook: the U with this absolute index on every
                                 stage sees non-finite gradients; -1 = off */
} ExecPipelineParams;

typedef struct _ExecPipeline ExecPipeline;

/* Result of one replay (exec_pipeline_run()); all arrays indexed by the schedule's mb. */
typedef struct {
    int32_t  n_mb;
    float   *loss;      /* (n_mb) mean cross-entropy of each micro-batch (last vstage F) */
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
    PpOp   **executed;   /* (n_stages)(n_executed[stage]) ops in the order each worker ran
                            them */
    int32_t *n_executed; /* (n_stages) */
    int32_t *capacity;   /* (n_stages) room in executed[stage] */
} ExecRunResult;

void exec_run_result_free(ExecRunResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecRunResult, exec_run_result_free)

/* --- construction --- */

/* Partitions the model, creates the CPU backend with GPT-2-initialised weights (the same
 * full-model weights for any partition) and zeroed optimizer state. Returns: (transfer full),
 * or NULL with @error set (partition errors, an unsupported shape). */
ExecPipeline *exec_pipeline_new(const ExecPipelineParams *params, GError **error);
void          exec_pipeline_free(ExecPipeline *pipeline);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecPipeline, exec_pipeline_free)

/* --- running --- */

/* Replays @sched (validated, the same stage/chunk layout as params->shape) once: micro-batch
 * mb of the schedule reads global micro-batch @mb_offset + mb from the data source. Weights,
 * optimizer state and stage versions carry over from the previous call, so a run may be cut
 * into consecutive schedules (each drains the pipeline at its end). Every op's weight version
 * is PP_ASSERTed equal to pp_schedule_version_used() (relative to the versions at the call).
 * Each op is timed (CLOCK_MONOTONIC ns since exec_pipeline_new) into the trace.
 * Returns: (transfer full), or NULL with @error set: EXEC_ERROR_SHAPE when @sched does not
 * fit, EXEC_ERROR_NONFINITE when a stage skipped max_nonfinite consecutive updates for
 * non-finite gradients (the other workers are stopped; the state is then partial). */
ExecRunResult *exec_pipeline_run(ExecPipeline *pipeline, const PpSchedule *sched, int64_t mb_offset,
                                 GError **error);

/* Dynamic mode (one chunk per stage): every worker runs PACI's backpressure policy live
 * (pp_policy_paci_next() with its own state) over the @like->n_mb micro-batches of @like, a
 * program of a kind with a run-time policy (paci, async-1f1b), with accumulation
 * @like->mb_per_step, instead of replaying @like, using the current weights (no stashing).
 * The executed order is recorded into a program of @like's kind (PpPolicyRecorder), and every
 * op's weight version is PP_ASSERTed equal to what that program implies; replaying *program
 * statically from the same state gives the same math. @program: (out) (transfer full).
 * Returns: (transfer full), or NULL with @error set as exec_pipeline_run() (EXEC_ERROR_SHAPE
 * also for a kind without a policy or several chunks per stage). */
ExecRunResult *exec_pipeline_run_dynamic(ExecPipeline *pipeline, const PpSchedule *like,
                                         int64_t mb_offset, PpSchedule **program, GError **error);

/* --- state --- */

/* Virtual stages and the partition. (transfer none). */
int32_t            exec_pipeline_n_vstages(const ExecPipeline *pipeline);
const PpPartition *exec_pipeline_partition(const ExecPipeline *pipeline);
/* The model slice of @vstage: params, grads, tensor table. (transfer none). */
Gpt2Slice *exec_pipeline_slice(ExecPipeline *pipeline, int32_t vstage);
/* The optimizer of @vstage. (transfer none). */
KernOptim *exec_pipeline_optim(ExecPipeline *pipeline, int32_t vstage);
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
/* Every op run so far (rows in execution order per stage; version_f/version_b filled).
 * (transfer none). */
const PpTrace *exec_pipeline_trace(const ExecPipeline *pipeline);

G_END_DECLS
