/* SPDX-License-Identifier: MIT
 * exec-train.c: the training loop of pacer-train (see exec-train.h for segments, steps and
 * data positions): opens the data, builds the pipeline, resumes, then runs one segment after
 * another, validating, logging and checkpointing at their boundaries. The parts live in
 * exec-train-*.c (exec-train-private.h). Across processes every rank runs this loop; rank 0
 * writes the files, and every phase that can fail on one rank ends with an agreement
 * (exec_comm_agree()) so that all ranks stop together with the same error.
 */
#include "exec-train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec-checkpoint-unit.h"
#include "exec-train-private.h"
#include "kern-pool.h"
#include "pp-error.h"

/* What the segment boundaries of one run share. */
typedef struct {
    const ExecTrainParams *params;
    const PpScenario      *sc;
    ExecPipeline          *pipeline;
    const ExecTrainData   *val;
    const char            *vocab; /* hex fingerprint of the training shard's vocabulary */
    GString               *log;   /* log.csv so far */
    ExecProgress          *progress;
    int32_t                stop; /* last step of this invocation */
    ExecTrainSummary      *summary;
} ExecTrainRun;

/* Rank 0 has written a file (@written: its error, transfer full, or NULL; NULL on the other
 * ranks): every rank learns how that went. */
static gboolean exec_train_written(ExecComm *comm, GError *written, const char *what,
                                   GError **error) {
    if (exec_comm_agree(comm, what, &written))
        return TRUE;
    g_propagate_error(error, written);
    return FALSE;
}

/* At the boundary after the segment ending at step @end: validation (into the last of @rows),
 * the segment's log rows, and a checkpoint with the log when one is due. */
static gboolean exec_train_boundary(const ExecTrainRun *run, int32_t end, ExecTrainRow *rows,
                                    int32_t seg, ExecTrainSummary *summary, GError **error) {
    const PpScenario *sc = run->sc;
    const char       *out_dir = run->params->out_dir;
    int32_t           total = sc->training.steps;
    gboolean          eval =
        sc->run.eval_every > 0 ? end % sc->run.eval_every == 0 || end == total : end == total;
    if (eval && sc->run.eval_batches > 0) {
        double val_loss;
        if (!exec_train_validate(run->pipeline, run->val, sc->run.eval_batches, &val_loss, error))
            return FALSE;
        rows[seg - 1].val_loss = summary->val_loss = val_loss;
        exec_progress_note(run->progress, FALSE, "step %d | val loss %.4f | perplexity %.2f", end,
                           val_loss, exp(val_loss));
    }
    for (int32_t k = 0; k < seg; k++)
        exec_train_log_append(run->log, &rows[k]);
    summary->train_loss = rows[seg - 1].train_loss;
    gboolean save =
        end == run->stop || (sc->run.checkpoint_every > 0 && end % sc->run.checkpoint_every == 0);
    if (out_dir == NULL || !save)
        return TRUE;
    /* The log rows are part of the unit, so an interrupted run keeps them. */
    g_autofree char *unit =
        exec_train_checkpoint(run->pipeline, sc, run->vocab, run->log, out_dir, end, error);
    if (!unit)
        return FALSE;
    exec_progress_note(run->progress, FALSE, "step %d | checkpoint written to %s", end, unit);
    run->summary->saved_step = end;
    return TRUE;
}

/* After a segment stopped by an interrupt (EXEC_ERROR_INTERRUPTED in *@error): rank 0 keeps
 * what ran, log.csv (the rows of the segments done) and ops.csv (every op of this invocation,
 * the interrupted segment's included), each written to a temporary file and renamed; a file
 * that cannot be written is added to the error's message. */
static void exec_train_keep_interrupted(const ExecTrainRun *run, GError **error) {
    const char *out_dir = run->params->out_dir;
    if (!g_error_matches(*error, EXEC_ERROR, EXEC_ERROR_INTERRUPTED) || out_dir == NULL ||
        exec_comm_rank(run->params->comm) != 0)
        return;
    GError *local = NULL;
    if (exec_train_log_write(run->log, out_dir, &local))
        exec_train_write_ops(run->pipeline, out_dir, &local);
    if (local == NULL)
        return;
    GError *interrupted = *error;
    *error = g_error_new(interrupted->domain, interrupted->code, "%s (and %s)",
                         interrupted->message, local->message);
    g_error_free(interrupted);
    g_error_free(local);
}

/* Removes the temporary unit folders that interrupted checkpoint writes left in
 * @out_dir/checkpoints (exec_checkpoint_units_remove_stale()), saying so in the log. */
static gboolean exec_train_remove_stale(const char *out_dir, GError **error) {
    g_autofree char *units_dir = g_build_filename(out_dir, EXEC_CHECKPOINT_UNITS_DIR, NULL);
    g_autoptr(GPtrArray) removed = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func(g_free);
    gboolean ok = exec_checkpoint_units_remove_stale(units_dir, removed, kept, error);
    for (guint i = 0; i < removed->len; i++)
        g_message("removed %s, left by an interrupted checkpoint write",
                  (const char *)g_ptr_array_index(removed, i));
    exec_train_say_kept(kept);
    return ok;
}

/* Resumes from params->resume when given: *@start is the step to continue from (0 without),
 * *@log the resumed unit's log.csv and *@unit_dir its folder (transfer full; NULL without, and
 * @unit_dir on ranks other than 0). The units skipped go to the log (g_message), the one
 * resumed to @progress, even in quiet mode. */
static gboolean exec_train_resume(const ExecTrainParams *params, ExecPipeline *pipeline,
                                  const char *vocab, ExecProgress *progress, int32_t *start,
                                  char **log, char **unit_dir, GError **error) {
    const PpScenario *sc = params->scenario;
    *start = 0;
    *log = NULL;
    *unit_dir = NULL;
    if (!params->resume)
        return TRUE;
    g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
    gboolean ok =
        exec_train_load(pipeline, sc, vocab, params->resume, start, log, unit_dir, notes, error);
    for (guint i = 0; i < notes->len; i++) {
        const char *note = g_ptr_array_index(notes, i);
        if (ok && i + 1 == notes->len)
            exec_progress_note(progress, TRUE, "%s",
                               note); /* the unit resumed, said in every mode */
        else
            g_message("%s", note);
    }
    if (!ok || *start < sc->training.steps)
        return ok;
    /* training.steps is no identity key: a resume may raise it (the cosine decay then
     * stretches over the new total from the resumed step on). */
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                "%s: the checkpoint is at step %d and training.steps = %d: nothing left to "
                "train. To train on, raise training.steps above %d (e.g. add --set "
                "training.steps=%d to this command, --resume kept); for a fresh run use "
                "another --out or add --overwrite (without --resume); or resume an earlier "
                "unit (--resume OUT/checkpoints/step-NNNNNNNN)",
                params->resume, *start, sc->training.steps, *start, 2 * *start);
    return FALSE;
}

gboolean exec_train_run(const ExecTrainParams *params, ExecTrainSummary *summary, GError **error) {
    const PpScenario *sc = params->scenario;
    ExecComm         *comm = params->comm;
    gboolean          root = exec_comm_rank(comm) == 0;
    Gpt2Config        model = exec_train_model(sc);
    int32_t           B = sc->pipeline.microbatch_size, total = sc->training.steps;
    if (comm)
        exec_comm_set_timeout(comm, sc->run.comm_timeout_s);

    g_autoptr(DataShard) train_shard = NULL, val_shard = NULL;
    ExecTrainData train = {.B = B, .T = model.T, .seed = sc->run.seed};
    ExecTrainData val = {.B = B, .T = model.T, .seed = sc->run.seed};
    g_autoptr(ExecTrainSchedules) schedules = exec_train_schedules_new(sc);
    const PpSchedule *shape = NULL;
    GError           *local = NULL;
    if (exec_train_check_scenario(params, &local) &&
        exec_train_open_shards(params, model.T, model.V, &train_shard, &train, &val_shard, &val,
                               &local))
        shape = exec_train_schedule(schedules, exec_train_next_boundary(sc, 0), &local);
    /* Every rank checks the same scenario and opens its own copy of the shards. */
    if (!exec_comm_agree(comm, "the start of training", &local)) {
        g_propagate_error(error, local);
        return FALSE;
    }
    /* The world size is parallel.data x pipeline.stages (checked above): rank r runs stage
     * r / D of replica r mod D, and reads that replica's part of every global batch. */
    int32_t replicas = sc->parallel.data;
    exec_comm_set_replicas(comm, replicas);
    /* The layout every part of the run reads from here on (the group keeps D for its rank
     * arithmetic only). */
    const ExecParallel parallel = {
        .replicas = replicas,
        .replica = exec_comm_replica(comm),
        .shards = sc->parallel.distributed_optimizer && replicas > 1 ? replicas : 1};
    gboolean same_data = g_strcmp0(g_getenv(EXEC_TRAIN_REPLICA_DATA_ENV), "same") == 0;
    train.replicas = same_data ? 1 : replicas;
    train.replica = parallel.replica;
    train.mb_per_step = shape->mb_per_step;
    g_autofree char *vocab =
        exec_train_hex(data_shard_fingerprint(train_shard), DATA_BPE_FINGERPRINT_BYTES);
    /* One process-wide count: each worker thread's kernels use that many threads. */
    kern_set_threads(exec_train_threads(sc));

    const char        *sigint_at = g_getenv(EXEC_TRAIN_SIGINT_ENV);
    ExecTrainLive      live = {.total_steps = total,
                               .sigint_at = sigint_at ? atoi(sigint_at) : -1,
                               .tokens_per_step = (int64_t)sc->training.global_batch * model.T,
                               .mb_per_step = shape->mb_per_step * replicas};
    ExecPipelineParams pp;
    exec_train_pipeline_params(sc, shape, &pp);
    pp.data = exec_train_fill;
    pp.data_user = &train;
    pp.on_loss = exec_train_on_loss;
    pp.on_loss_user = &live;
    pp.comm = comm;
    pp.parallel = parallel;
    g_autoptr(ExecPipeline) pipeline = exec_pipeline_new(&pp, &local);
    if (!exec_comm_agree(comm, "building the pipeline", &local)) {
        g_propagate_error(error, local);
        return FALSE;
    }
    /* From here a signal stops the run cleanly (exec-interrupt.h). */
    g_autoptr(ExecInterruptAttachment) attached =
        exec_interrupt_attach(params->interrupt, pipeline);
    /* Progress on rank 0 only (it receives the last stage's losses). */
    g_autoptr(ExecProgress) progress = exec_progress_new(
        stdout, root ? params->progress : EXEC_PROGRESS_QUIET, MAX(sc->run.log_every, 1));
    /* One run per folder, from before the resume reads its units to the end (rank 0's lock;
     * every rank stops when it is held by another run). */
    g_autoptr(ExecTrainLock) lock = NULL;
    if (root && params->out_dir)
        lock = exec_train_lock_take(params->out_dir, &local);
    if (!exec_train_written(comm, local, "locking the output folder", error))
        return FALSE;
    int32_t          start;
    g_autofree char *resumed_log = NULL, *resumed_unit = NULL;
    if (!exec_train_resume(params, pipeline, vocab, progress, &start, &resumed_log, &resumed_unit,
                           error))
        return FALSE;
    live.pipeline = pipeline;
    g_autoptr(GString) log = exec_train_log_new(resumed_log, start);
    /* Nothing has been written yet: a folder of another run is refused untouched. */
    if (root && params->out_dir &&
        exec_train_out_prepare(params->out_dir, resumed_unit, params->overwrite, &local) &&
        exec_train_outputs_begin(sc, params->out_dir, &local))
        exec_train_remove_stale(params->out_dir, &local);
    if (!exec_train_written(comm, local, "creating the output folder", error))
        return FALSE;
    live.progress = progress;
    ExecTrainRun run = {.params = params,
                        .sc = sc,
                        .pipeline = pipeline,
                        .val = &val,
                        .vocab = vocab,
                        .log = log,
                        .progress = progress,
                        .stop = params->stop_at > 0 ? MIN(params->stop_at, total) : total,
                        .summary = summary};
    memset(summary, 0, sizeof *summary);
    summary->val_loss = NAN;
    exec_train_memory_report(pipeline, comm, progress, root ? params->out_dir : NULL, summary,
                             &local);
    if (!exec_train_written(comm, local, "writing memory.csv", error))
        return FALSE;
    summary->steps = start;
    summary->tokens = (int64_t)start * live.tokens_per_step;
    live.first_step = start;
    live.t_start_s = live.t_last_s = exec_train_now_s();
    for (int32_t step = start; step < run.stop;) {
        int32_t seg = MIN(exec_train_next_boundary(sc, step), run.stop) - step;
        /* Dynamic mode runs the policy over the segment: no static program. */
        const PpSchedule *sched =
            params->dynamic ? NULL : exec_train_schedule(schedules, seg, &local);
        g_autofree ExecTrainRow *rows = g_new(ExecTrainRow, seg);
        if (!exec_comm_agree(comm, "building a segment's schedule", &local)) {
            g_propagate_error(error, local);
            return FALSE;
        }
        if (!exec_train_run_segment(pipeline, sched, params->dynamic ? &sc->pipeline : NULL, &live,
                                    step, seg, rows, &summary->n_skipped, error)) {
            exec_train_keep_interrupted(&run, error);
            return FALSE;
        }
        if (!exec_train_boundary(&run, step + seg, rows, seg, summary, error))
            return FALSE;
        step += seg;
        summary->steps = step;
        summary->tokens = (int64_t)step * live.tokens_per_step;
    }
    summary->wall_s = exec_train_now_s() - live.t_start_s;
    summary->tokens_per_s =
        (double)(summary->steps - start) * live.tokens_per_step / MAX(summary->wall_s, 1e-9);
    /* ops.csv: rank 0 holds every rank's rows (exec_pipeline_trace()). */
    if (root && params->out_dir && exec_train_log_write(log, params->out_dir, &local))
        exec_train_write_ops(pipeline, params->out_dir, &local);
    return exec_train_written(comm, local, "writing log.csv and ops.csv", error);
}
