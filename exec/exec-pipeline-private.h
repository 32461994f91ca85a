/* SPDX-License-Identifier: MIT
 * exec-pipeline-private.h: the ExecPipeline struct, shared by exec.c (construction, runs,
 * state) and exec-replay.c (the workers that replay programs and consume the backend's
 * reports). Internal to libppexec.
 */
#pragma once

#include "exec.h"

G_BEGIN_DECLS

struct _ExecPipeline {
    ExecPipelineParams params; /* copy; pointer fields are not used after exec_pipeline_new() */
    PpPartition       *partition;
    ExecBackend       *backend;
    int32_t            n_stages, n_chunks, n_vstages;
    int32_t           *vstage_of; /* (n_stages, n_chunks) virtual stage of (stage, chunk) */
    int32_t           *version;   /* (n_stages) updates applied so far */
    int32_t           *nonfinite; /* (n_stages) consecutive skipped updates */
    PpTrace           *trace;
    PpMemoryBytes     *predicted; /* (n_stages) the memory model's bytes of each stage */

    /* State of the replay in progress (exec_pipeline_run()). */
    const PpSchedule *sched; /* NULL in dynamic mode */
    PpWeightMode      weight_mode;
    int32_t           mb_per_step; /* backwards per update: the loss scale is its inverse */
    int64_t           mb_offset;
    int32_t          *version_base; /* (n_stages) versions when the replay started */
    ExecRunResult    *result;
    GArray          **rows;   /* (n_stages) PpTraceRow, per worker */
    gint              failed; /* atomic: a worker stopped the replay */
    GMutex            error_lock;
    GError           *error; /* first failure, under error_lock */
};

/* Workers (exec-replay.c), run by the backend's launch on every local stage. */
void exec_pipeline_worker(gpointer user_data, int32_t stage);         /* static program */
void exec_pipeline_worker_dynamic(gpointer user_data, int32_t stage); /* PACI's policy */

G_END_DECLS
