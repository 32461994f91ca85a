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

typedef struct _ExecOverlap ExecOverlap;

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
    ExecReduce        *reduce;    /* the gradient reduction between replicas on the host; NULL
                                     for one replica or with device_reduce */
    gboolean device_reduce;       /* the backend reduces the gradients between replicas
                                     itself (reduces_grads(), reduce_grads()) */
    gboolean sharded;             /* ZeRO-1: the optimizer steps replica d's shard only */
    int64_t *reduce_ns;           /* (n_stages) the host time of each stage's last reduction */
    int64_t *gather_ns;           /* (n_stages) sharded: of its last all-gather of parameters */
    gboolean overlap;             /* parallel.overlap_grad_reduce with replicas on the host:
                                     each bucket of a virtual stage's gradients is reduced as
                                     soon as the window's last backward that adds to them has
                                     finished it (static programs) */
    ExecOverlap **overlaps;       /* (n_stages) overlap: each local stage's reduction thread
                                     while its worker replays a program, else NULL */
    GArray  **buckets;            /* (n_stages) overlap: ExecBucket reduced before the last U */
    gboolean *posted;             /* (n_vstages) overlap: its buckets handed to the thread in
                                     this window */
    int64_t *u_start_us;          /* (n_stages) monotonic time right before the last U */

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

/* --- the overlapped reduction (exec-overlap.c) --- */

/* A piece of one virtual stage's gradients (a bucket: gpt2_table_bucket()'s, or the whole
 * array) reduced between the replicas, from @start_us to @end_us (monotonic). */
typedef struct {
    ExecReducePiece piece;
    int64_t         start_us, end_us;
} ExecBucket;

/* The hook (Gpt2GradsHook, first) a worker gives the window's last BW or W of a virtual stage:
 * each bucket the op finishes goes to the stage's reduction thread at once. */
typedef struct {
    Gpt2GradsHook hook;
    ExecOverlap  *overlap;
    int32_t       update, vstage;
    int32_t       n_posted; /* buckets handed over so far */
} ExecOverlapHook;

/* Worker of @stage, before its program: starts the stage's reduction thread. */
ExecOverlap *exec_overlap_start(ExecPipeline *pipeline, int32_t stage);
/* Worker: hands floats [@begin, @end) of virtual stage @vstage's gradients, bucket @bucket
 * (-1: the whole array, @begin and @end unused), complete for update @update, to the thread;
 * the worker leaves them alone until the U. */
void exec_overlap_post(ExecOverlap *overlap, int32_t update, int32_t vstage, int32_t bucket,
                       size_t begin, size_t end);
/* Worker: *@hook set to hand each bucket of @vstage's gradients for update @update to
 * @overlap's thread as exec_overlap_post() does. */
void exec_overlap_hook_init(ExecOverlapHook *hook, ExecOverlap *overlap, int32_t update,
                            int32_t vstage);
/* Worker, before the U: waits for every bucket posted and appends them to @buckets
 * (ExecBucket). Returns FALSE when one stopped or missed the deadline (recorded with
 * exec_comm_fail() by the reduction). */
gboolean exec_overlap_wait(ExecOverlap *overlap, GArray *buckets);
/* Worker, after its program: lets the thread finish what it was handed, joins it, frees. */
void exec_overlap_stop(ExecOverlap *overlap);

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
