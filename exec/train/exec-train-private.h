/* SPDX-License-Identifier: MIT
 * exec-train-private.h: the parts of pacer-train's training loop (exec-train.h), one file each:
 * the pipeline parameters built from the scenario (exec-train-params.c), the training and
 * validation data (exec-train-data.c), running one segment (exec-train-segment.c), log.csv
 * rows and progress (exec-train-log.c), the memory report (exec-train-memory.c), checkpoints
 * and resume (exec-train-checkpoint.c), the model state across processes
 * (exec-train-dist.c). Internal to libppexec; exec-train.c drives them.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "data-shard.h"
#include "exec-checkpoint.h"
#include "exec-progress.h"
#include "exec-train.h"
#include "exec.h"

G_BEGIN_DECLS

/* Consecutive skipped updates on one stage before the run stops. */
#define EXEC_TRAIN_MAX_NONFINITE 3

/* --- parameters (exec-train-params.c) --- */

/* Checks the scenario values the executor adds to the scenario's own checks (optimizer name,
 * dynamic mode, warmup). Returns FALSE with a PP_SCENARIO_ERROR naming the key otherwise. */
gboolean exec_train_check_scenario(const ExecTrainParams *params, GError **error);
/* The whole model's shape (padded vocabulary: model.vocab rounded up to 128). */
Gpt2Config exec_train_model(const PpScenario *sc);
/* run.precision (the scenario's key table accepted only fp32 and bf16). */
ExecPrecision exec_train_precision(const PpScenario *sc);
/* Kernel threads per worker: run.threads, or the processors shared by the stages. */
int32_t exec_train_threads(const PpScenario *sc);
/* Fills @pp for a pipeline of @sc's model, optimizer and learning-rate schedule, sized by
 * @shape (borrowed into @pp for the exec_pipeline_new() call); data and callbacks are left
 * for the caller. */
void exec_train_pipeline_params(const PpScenario *sc, const PpSchedule *shape,
                                ExecPipelineParams *pp);

/* --- data (exec-train-data.c) --- */

/* A token shard as the data source of micro-batches. */
typedef struct {
    const uint16_t *tokens; /* (n_tokens) borrowed from the shard */
    uint64_t        n_tokens;
    int32_t         B, T;
    uint64_t        seed;
    /* Data parallelism: this process runs replica @replica of @replicas, each running
     * @mb_per_step micro-batches per step (1, 0 and any without). */
    int32_t replicas, replica, mb_per_step;
} ExecTrainData;

/* ExecDataFn over an ExecTrainData (@user_data): sequence b of the replica's micro-batch @mb
 * is the window exec_train_window(seed, g * B + b), g its global micro-batch
 * (exec_train_global_mb()). */
void exec_train_fill(gpointer user_data, int64_t mb, int32_t *tokens, int32_t *targets);

/* Opens the train and val shards of @params: both built with params->vocab_fingerprint when
 * given, and always with the same vocabulary as each other, each holding more than T + 1
 * tokens of a vocabulary <= @V. The shards are (out) (transfer full); @train and @val borrow
 * their tokens. Returns FALSE with a PP_IO_ERROR naming the file otherwise. */
gboolean exec_train_open_shards(const ExecTrainParams *params, int32_t T, int32_t V,
                                DataShard **train_shard, ExecTrainData *train,
                                DataShard **val_shard, ExecTrainData *val, GError **error);

/* Mean validation loss over @n_batches micro-batches: contiguous, non-overlapping windows of
 * the val shard from its start, forwarded through every virtual stage of the drained
 * pipeline (exec_pipeline_evaluate()). Returns FALSE with @error set when the backend fails. */
gboolean exec_train_validate(ExecPipeline *pipeline, const ExecTrainData *val, int32_t n_batches,
                             double *loss, GError **error);

/* --- log.csv and progress (exec-train-log.c) --- */

/* One row of log.csv (exec-train.h says what each column means). */
typedef struct {
    int32_t step;
    int64_t tokens;       /* training tokens consumed after the step */
    double  train_loss;   /* NAN when no micro-batch of the step ran */
    double  val_loss;     /* NAN: no validation after this step (empty cell) */
    float   lr;           /* NAN when stage 0 had no such update */
    double  grad_norm;    /* over all stages' k-th updates of the segment */
    double  tokens_per_s; /* measured */
    int32_t delta_max;
} ExecTrainRow;

/* Per-step accounting while a segment runs, fed by the last stage's worker through on_loss
 * (ExecLossFn) and shown by the progress display. */
typedef struct {
    ExecProgress       *progress;
    const ExecPipeline *pipeline;
    int32_t             total_steps;
    int32_t             first_step; /* the step this invocation started from (resume) */
    int64_t             tokens_per_step;
    int32_t             mb_per_step;
    int32_t             step0;        /* first step of the segment */
    int32_t             seg;          /* steps in the segment */
    int32_t             version0;     /* stage 0's version at the segment's start */
    int32_t            *count;        /* (seg) losses seen per step */
    double             *sum;          /* (seg) */
    double             *tokens_per_s; /* (seg) */
    double              t_start_s;    /* training start (this invocation) */
    double              t_last_s;     /* when the previous step completed */
    int32_t             sigint_at;    /* test hook (EXEC_TRAIN_SIGINT_ENV): raise SIGINT when
                                         this step completes; -1: off */
} ExecTrainLive;

/* Seconds on CLOCK_MONOTONIC. */
double exec_train_now_s(void);
/* Starts segment [@step0, @step0 + @seg) of @live (zeroed per-step sums). */
void exec_train_live_begin(ExecTrainLive *live, int32_t step0, int32_t seg, int32_t version0);
/* Frees the segment's per-step sums. */
void exec_train_live_end(ExecTrainLive *live);
/* ExecLossFn over an ExecTrainLive (@user_data): adds the loss to its step; when the step has
 * all its micro-batches, measures tokens/s and shows the step. */
void exec_train_on_loss(gpointer user_data, int32_t mb, int32_t step, float loss);

/* A log.csv being built: the header, then (resuming: @resumed, nullable, the log.csv of the
 * checkpoint unit resumed) its rows for steps before @start. Returns: (transfer full). */
GString *exec_train_log_new(const char *resumed, int32_t start);
/* Appends @row. */
void exec_train_log_append(GString *log, const ExecTrainRow *row);
/* Writes @text to @path (temporary file + rename). Returns FALSE with PP_IO_ERROR_WRITE. */
gboolean exec_train_write_file(const char *path, const char *text, GError **error);
/* Writes @log to @dir/log.csv. */
gboolean exec_train_log_write(const GString *log, const char *dir, GError **error);
/* Creates @dir and writes @sc as @dir/scenario.ini. */
gboolean exec_train_outputs_begin(const PpScenario *sc, const char *dir, GError **error);
/* Writes every op the pipeline ran to @dir/ops.csv (sorted rows, the trace schema). */
gboolean exec_train_write_ops(const ExecPipeline *pipeline, const char *dir, GError **error);

/* --- the memory report (exec-train-memory.c) --- */

/* Collective: the memory of every stage of every replica, when the backend accounts it
 * (exec_pipeline_memory() on the process running it), gathered on rank 0: one progress note
 * each (predicted by the simulator's memory model vs allocated, by category), the sums over
 * all of them into @summary (actual_bytes stays -1 otherwise) and, with @dir (nullable), @dir/
 * memory.csv: stage, replica, device (-1: host), the prediction by category and in all, the
 * allocation by category and in all (bytes), by stage then replica. Other ranks only send.
 * Returns FALSE with EXEC_ERROR_COMM when the gather fails, PP_IO_ERROR_WRITE when the file
 * cannot be written. */
gboolean exec_train_memory_report(const ExecPipeline *pipeline, ExecComm *comm,
                                  ExecProgress *progress, const char *dir,
                                  ExecTrainSummary *summary, GError **error);

/* --- the output folder (exec-train-out.c) --- */

/* Before a run writes into @dir: a folder that holds a run (any of log.csv, ops.csv,
 * scenario.ini, memory.csv, checkpoints/) is refused with PP_IO_ERROR_EXISTS naming them,
 * --resume and --overwrite, and left as it is, unless @resumed_unit (nullable: the unit this
 * run resumed) lies in @dir/checkpoints (the run continues) or @overwrite is set: then
 * those files and the checkpoint units (exec_checkpoint_units_remove_all()) are removed, each
 * said in the log, and nothing else; an entry of those names that is a symbolic link or of
 * another kind refuses the removal (PP_IO_ERROR_EXISTS) before anything goes. @overwrite with a
 * @resumed_unit in @dir is refused (it would remove what the run continues from). PP_IO_ERROR_WRITE
 * when a removal fails. */
gboolean exec_train_out_prepare(const char *dir, const char *resumed_unit, gboolean overwrite,
                                GError **error);
/* Says in the log (g_message) each entry a removal left in place (@kept: element-type utf8,
 * nullable, "PATH: why", as exec-checkpoint-unit.h's removals fill it). */
void exec_train_say_kept(const GPtrArray *kept);

/* --- one run per folder (exec-train-lock.c) --- */

/* The lock file of a run folder. */
#define EXEC_TRAIN_LOCK_FILE "pacer.lock"

/* A held lock on a run folder. */
typedef struct _ExecTrainLock ExecTrainLock;

/* Creates @dir if needed and takes an exclusive flock() on @dir/pacer.lock (created when
 * missing, never through a symbolic link), then writes this process's PID and host into it.
 * A lock file naming a holder that is gone (the kernel released its lock) is taken over,
 * said in the log. Returns: (transfer full) the held lock, or NULL with PP_IO_ERROR_EXISTS
 * naming the live holder's PID and host, or PP_IO_ERROR_WRITE. */
ExecTrainLock *exec_train_lock_take(const char *dir, GError **error);
/* Empties the lock file (a normal end) and releases the lock; NULL is accepted. */
void exec_train_lock_free(ExecTrainLock *lock);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecTrainLock, exec_train_lock_free)

/* --- segments (exec-train-segment.c) --- */

/* The schedules of a run, one per distinct segment length (usually the eval interval and a
 * tail), built from the scenario on first use. */
typedef struct _ExecTrainSchedules ExecTrainSchedules;

ExecTrainSchedules *exec_train_schedules_new(const PpScenario *sc);
void                exec_train_schedules_free(ExecTrainSchedules *schedules);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecTrainSchedules, exec_train_schedules_free)
/* The schedule of @n_steps steps. Returns: (transfer none): valid until the free, or NULL
 * with @error set (the generator's error, or a program whose micro-batches do not cover
 * @n_steps steps: data positions need n_mb == n_steps * mb_per_step). */
const PpSchedule *exec_train_schedule(ExecTrainSchedules *schedules, int32_t n_steps,
                                      GError **error);

/* Next step where the pipeline must be drained (eval, checkpoint or the end). */
int32_t exec_train_next_boundary(const PpScenario *sc, int32_t step);

/* Runs the @seg steps from @step0 on @pipeline (@dynamic, nullable: the scenario's resolved
 * pipeline, whose kind's policy runs live over seg x dynamic->mb_per_step micro-batches,
 * @sched then NULL; else @sched's program) and fills @rows (seg) with every column but
 * val_loss (NAN); adds the skipped updates to *@n_skipped. Returns FALSE with @error set when
 * the pipeline stops. */
gboolean exec_train_run_segment(ExecPipeline *pipeline, const PpSchedule *sched,
                                const PpPipelineParams *dynamic, ExecTrainLive *live, int32_t step0,
                                int32_t seg, ExecTrainRow *rows, int32_t *n_skipped,
                                GError **error);

/* --- the run's identity (exec-train-identity.c) --- */

/* "a,b,c" of @n ints. Returns: (transfer full). */
char *exec_train_join_ints(const int32_t *v, int32_t n);
/* The identity a checkpoint of @sc with the partition @part records: key, value, key, value,
 * ... for every key of exec_train_identity_keys(), in that order. Returns: (transfer full),
 * or NULL with a PP_IO_ERROR naming the file when pipeline.order_file cannot be read. */
GStrv exec_train_identity_new(const PpScenario *sc, const PpPartition *part, GError **error);
/* The one-line summary units record as "run" (schedule, layout, partition, seed): all that
 * units written before the identity existed record, and what a resume of one compares.
 * Returns: (transfer full). */
char *exec_train_identity_summary(const PpScenario *sc, const PpPartition *part);

/* --- checkpoints (exec-train-checkpoint.c) --- */

/* Lower-case hex of @n bytes (the vocabulary fingerprint in the checkpoint). Returns:
 * (transfer full). */
char *exec_train_hex(const uint8_t *bytes, size_t n);
/* At the drained boundary after @step steps: writes the checkpoint unit
 * @out_dir/checkpoints/step-NNNNNNNN (weights, optimizer state, the counters that
 * exec-train-checkpoint.c lists, @log), then @out_dir/log.csv from @log, then removes the
 * units that run.keep_checkpoints no longer keeps (exec_checkpoint_units_prune()).
 * Returns: (transfer full) the unit's path, or NULL with @error set. */
char *exec_train_checkpoint(ExecPipeline *pipeline, const PpScenario *sc, const char *vocab,
                            const GString *log, const char *out_dir, int32_t step, GError **error);
/* Resumes from the unit @path names (exec_checkpoint_unit_find(): a unit, or the newest
 * complete unit of a run folder): reads it into host memory, checks that it belongs to this run
 * (identity, optimizer, vocabulary) and only then loads weights, optimizer state and counters
 * into @pipeline. *@step: the step to continue from; *@log: (transfer full) the unit's
 * log.csv; *@unit_dir: (transfer full) the unit's folder on the rank that read it (rank 0),
 * NULL on the others; @notes (element-type utf8, nullable): the units skipped and why, then
 * which unit was resumed. */
gboolean exec_train_load(ExecPipeline *pipeline, const PpScenario *sc, const char *vocab,
                         const char *path, int32_t *step, char **log, char **unit_dir,
                         GPtrArray *notes, GError **error);

/* --- the model state across processes (exec-train-dist.c; collective: every rank calls) ---
 * Entry i of @list (a list over every virtual stage, the same on every rank) belongs to
 * virtual stage @vstages[i]. Without a process group they do nothing. */

/* Rank 0 receives every entry another rank holds (the holder has filled it): replica 0's or,
 * with @state_tables (nullable: (n) entry i is optimizer state of that tensor of the table),
 * each replica's part of it (exec_pipeline_state_part()). */
gboolean exec_train_dist_gather(ExecPipeline *pipeline, ExecTensorList *list,
                                const int32_t *vstages, const ExecTensor *const *state_tables,
                                GError **error);
/* Every rank receives from rank 0 the entries it holds (rank 0 has filled them all). */
gboolean exec_train_dist_scatter(ExecPipeline *pipeline, ExecTensorList *list,
                                 const int32_t *vstages, GError **error);
/* @values (n_vstages): each rank's own virtual stages filled; on return rank 0 has them all. */
gboolean exec_train_dist_gather_vstage_ints(ExecPipeline *pipeline, int32_t *values,
                                            const char *what, GError **error);

G_END_DECLS
