/* SPDX-License-Identifier: MIT
 * exec-pipeline-private.h: the ExecPipeline struct, shared by exec.c (construction, runs,
 * state) and exec-replay.c (the workers that replay programs and consume the backend's
 * reports). Internal to libppexec.
 */
#pragma once

#include "exec-backend-impl.h"
#include "exec-reduce.h"
#include "exec.h"

G_BEGIN_DECLS

struct _ExecPipeline {
    ExecPipelineParams params; /* copy; pointer fields are not used after exec_pipeline_new() */
    PpPartition       *partition;
    ExecBackend       *backend;
    int32_t            n_stages, n_chunks, n_vstages;
    int32_t           *vstage_of;    /* (n_stages, n_chunks) virtual stage of (stage, chunk) */
    int32_t           *vstage_stage; /* (n_vstages) stage of each virtual stage */
    int32_t           *version;      /* (n_stages) updates applied so far */
    int32_t           *nonfinite;    /* (n_stages) consecutive skipped updates */
    PpTrace           *trace;
    PpMemoryBytes     *predicted; /* (n_stages) the memory model's bytes of each stage */
    ExecReduce        *reduce;    /* the gradient reduction between replicas; NULL for one */
    gboolean           sharded;   /* ZeRO-1: the optimizer steps replica d's shard only */
    int64_t           *reduce_ns; /* (n_stages) the host time of each stage's last reduction */
    int64_t           *gather_ns; /* (n_stages) sharded: of its last all-gather of parameters */

    /* State of the replay in progress (exec_pipeline_run()). */
    const PpSchedule *sched; /* NULL in dynamic mode */
    PpWeightMode      weight_mode;
    int32_t           mb_per_step; /* backwards per update: the loss scale is its inverse */
    int64_t           mb_offset;
    int32_t          *version_base; /* (n_stages) versions when the replay started */
    ExecRunResult    *result;
    GArray          **rows;        /* (n_stages) PpTraceRow, per worker */
    gint              failed;      /* atomic: a worker stopped the replay */
    gint              interrupted; /* atomic, never cleared: exec_pipeline_interrupt() */
    GMutex            error_lock;
    GError           *error; /* first failure, under error_lock */
};

/* Workers (exec-replay.c), run by the backend's launch on every local stage. */
void exec_pipeline_worker(gpointer user_data, int32_t stage);         /* static program */
void exec_pipeline_worker_dynamic(gpointer user_data, int32_t stage); /* PACI's policy */

/* --- across processes (exec-merge.c) --- */

/* Before a replay with a process group: the group's stop signal cleared, and on rank 0 the
 * loss reports of the last stage's rank expected (one per micro-batch of @res). */
void exec_pipeline_merge_begin(ExecPipeline *pipeline, const ExecRunResult *res);
/* Hands the loss of micro-batch @mb (step @step) to params.on_loss: here, or on rank 0 when
 * another rank runs the last stage. Worker of the last stage. */
void exec_pipeline_report_loss(ExecPipeline *pipeline, int32_t mb, int32_t step, float loss);
/* After a replay with a process group: every rank's outcome agreed (*@error, this rank's
 * failure or NULL on entry, is the same on every rank on return), then every rank's stages
 * exchanged so that every rank holds all of @res and the stages' versions and skip counts,
 * and the trace rows from @first_row on gathered to rank 0. Returns FALSE with *@error set
 * (the agreed failure, or EXEC_ERROR_COMM). */
gboolean exec_pipeline_merge(ExecPipeline *pipeline, ExecRunResult *res, int64_t first_row,
                             GError **error);

G_END_DECLS
