/* SPDX-License-Identifier: MIT
 * exec-replay.c: the workers of a replay. Every stage's worker walks its program in order (or
 * lets PACI's policy pick each op): wait for the op's input message, run it, send its output.
 * This file decides the weight version each op computes with (current, or the stashed
 * version of its F) and checks it against the schedule core's pp_schedule_version_used(),
 * gives every U its learning rate (exec_pipeline_update_lr()), and after every U books the
 * backend's reports: trace rows, losses, and non-finite gradients (skip, count, stop after K in a
 * row).
 */
#include "exec-pipeline-private.h"

#include "pp-error.h"
#include "pp-policy.h"

static void exec_pipeline_fail(ExecPipeline *pipeline, GError *error) {
    g_mutex_lock(&pipeline->error_lock);
    if (!pipeline->error)
        pipeline->error = error;
    else
        g_error_free(error);
    g_mutex_unlock(&pipeline->error_lock);
    g_atomic_int_set(&pipeline->failed, 1);
    pipeline->backend->ops->abort(pipeline->backend);
}

void exec_pipeline_interrupt(ExecPipeline *pipeline, const char *why) {
    g_atomic_int_set(&pipeline->interrupted, 1);
    exec_pipeline_fail(pipeline, g_error_new(EXEC_ERROR, EXEC_ERROR_INTERRUPTED, "%s", why));
}

/* Whether the worker must stop before its next op: another worker failed, or an interrupt
 * (which may have come before this replay's prepare() re-armed the backend). */
static gboolean exec_pipeline_stopping(ExecPipeline *pipeline) {
    return g_atomic_int_get(&pipeline->failed) || g_atomic_int_get(&pipeline->interrupted);
}

float exec_pipeline_update_lr(const ExecPipeline *pipeline, int32_t update) {
    const ExecPipelineParams *p = &pipeline->params;
    return kern_lr_schedule(update, p->warmup_steps, p->total_steps, p->lr, p->min_lr);
}

/* Fills @args for @op: the weight version it computes with (current, or its F's when
 * stashing), its data position, loss scale and, for U, the learning rate. */
static void exec_pipeline_op_args(ExecPipeline *pipeline, const PpOp *op, ExecOpArgs *args) {
    ExecRunResult *res = pipeline->result;
    gboolean       stashed = pipeline->weight_mode == PP_WEIGHTS_STASHED;
    int32_t        current = pipeline->version[op->stage];
    *args = (ExecOpArgs){.op = op, .vstage = -1, .version = current};
    if (op->kind == PP_OP_UPDATE) {
        const ExecPipelineParams *p = &pipeline->params;
        args->lr = exec_pipeline_update_lr(pipeline, current);
        args->grad_clip = p->grad_clip;
        args->poison = current == p->poison_update;
        return;
    }
    args->vstage = pipeline->vstage_of[op->stage * pipeline->n_chunks + op->chunk];
    args->global_mb = pipeline->mb_offset + op->mb;
    args->loss_scale = 1.0f / (float)pipeline->mb_per_step;
    int32_t *vf = &res->version_f[(size_t)op->mb * pipeline->n_vstages + args->vstage];
    int32_t *vb = &res->version_b[(size_t)op->mb * pipeline->n_vstages + args->vstage];
    switch (op->kind) {
    case PP_OP_FORWARD:
        *vf = current;
        args->stash = stashed;
        break;
    case PP_OP_BACKWARD:
    case PP_OP_BACKWARD_FULL:
        args->version = stashed ? *vf : current;
        args->stash = stashed;
        *vb = args->version;
        break;
    case PP_OP_WEIGHT:
        args->version = stashed ? *vf : current;
        break;
    case PP_OP_UPDATE:
    case PP_OP_N_KINDS:
        PP_UNREACHABLE();
    }
}

/* The chunk of @stage that runs virtual stage @vstage. */
static int32_t exec_pipeline_vstage_chunk(const ExecPipeline *pipeline, int32_t stage,
                                          int32_t vstage) {
    for (int32_t c = 0; c < pipeline->n_chunks; c++)
        if (pipeline->vstage_of[stage * pipeline->n_chunks + c] == vstage)
            return c;
    PP_UNREACHABLE();
}

/* Books what @stage's backend reported since its last flush: trace rows, weight copies, the
 * losses of last-vstage forwards (and on_loss), and for each U its grad norm and the
 * non-finite rule.
 * Returns FALSE when the worker must stop (too many non-finite updates in a row). */
static gboolean exec_pipeline_consume(ExecPipeline *pipeline, int32_t stage) {
    ExecRunResult  *res = pipeline->result;
    ExecStageReport report;
    pipeline->backend->ops->flush(pipeline->backend, stage, &report);
    for (int32_t i = 0; i < report.n_ops; i++) {
        const ExecOpReport *r = &report.ops[i];
        const PpOp         *op = &r->op;
        PP_ASSERT(op->stage == stage);
        PpTraceRow row = {.stage = stage,
                          .kind = op->kind,
                          .mb = op->mb,
                          .chunk = op->chunk,
                          .step = op->step,
                          .start_ns = r->start_ns,
                          .end_ns = r->end_ns,
                          .version_f = -1,
                          .version_b = -1,
                          .resource = PP_RESOURCE_COMPUTE,
                          .replica = pipeline->params.parallel.replica};
        for (guint b = 0; op->kind == PP_OP_UPDATE && b < pipeline->buckets[stage]->len; b++) {
            /* An overlapped bucket, placed on the reports' clock by the U's start. */
            const ExecBucket *bucket = &g_array_index(pipeline->buckets[stage], ExecBucket, b);
            PpTraceRow        reduce = row;
            reduce.start_ns = r->start_ns - (pipeline->u_start_us[stage] - bucket->start_us) * 1000;
            reduce.end_ns = r->start_ns - (pipeline->u_start_us[stage] - bucket->end_us) * 1000;
            reduce.chunk = exec_pipeline_vstage_chunk(pipeline, stage, bucket->piece.vstage);
            reduce.resource = PP_RESOURCE_REDUCE;
            g_array_append_val(pipeline->rows[stage], reduce);
        }
        if (op->kind == PP_OP_UPDATE && pipeline->reduce &&
            (pipeline->buckets[stage]->len == 0 || pipeline->sharded)) {
            /* The reduction (overlapped: the norm's exchange) ran on the host right before
             * the U started. */
            PpTraceRow reduce = row;
            reduce.start_ns = r->start_ns - pipeline->reduce_ns[stage];
            reduce.end_ns = r->start_ns;
            reduce.resource = PP_RESOURCE_REDUCE;
            g_array_append_val(pipeline->rows[stage], reduce);
        }
        if (op->kind == PP_OP_UPDATE && pipeline->device_reduce) {
            /* The device's reduction, timed by the backend on the stage's queue. */
            PpTraceRow reduce = row;
            reduce.start_ns = r->reduce_start_ns;
            reduce.end_ns = r->reduce_end_ns;
            reduce.resource = PP_RESOURCE_REDUCE;
            g_array_append_val(pipeline->rows[stage], reduce);
        }
        g_array_append_val(pipeline->rows[stage], row);
        if (op->kind == PP_OP_UPDATE && pipeline->sharded) {
            /* The all-gather of the updated parameters, right after the U ended. */
            PpTraceRow gather = row;
            gather.start_ns = r->end_ns;
            gather.end_ns = r->end_ns + pipeline->gather_ns[stage];
            gather.resource = PP_RESOURCE_REDUCE;
            g_array_append_val(pipeline->rows[stage], gather);
        }
        res->n_copies[stage] += r->copied;
        if (op->kind == PP_OP_FORWARD && r->vstage == pipeline->n_vstages - 1) {
            res->loss[op->mb] = r->loss;
            res->mb_step[op->mb] = op->step;
            exec_pipeline_report_loss(pipeline, op->mb, op->step, r->loss);
        }
        if (op->kind != PP_OP_UPDATE)
            continue;
        int32_t k = res->n_updates[stage]++, update = pipeline->version_base[stage] + k;
        res->grad_norm[stage][k] = r->grad_norm;
        if (r->applied) {
            pipeline->nonfinite[stage] = 0;
            continue;
        }
        g_atomic_int_inc(&res->n_skipped);
        g_message("stage %d: update %d skipped: non-finite gradients (norm %.9g)", stage, update,
                  r->grad_norm);
        if (++pipeline->nonfinite[stage] < pipeline->params.max_nonfinite)
            continue;
        exec_pipeline_fail(pipeline,
                           g_error_new(EXEC_ERROR, EXEC_ERROR_NONFINITE,
                                       "stage %d: %d consecutive updates (up to update %d) had "
                                       "non-finite gradients; lower optimizer.lr or set "
                                       "optimizer.grad_clip",
                                       stage, pipeline->nonfinite[stage], update));
        return FALSE;
    }
    return TRUE;
}

/* Overlapped reduction, before the U of @args: hands the buckets not yet handed over (none
 * when the program is as expected) to the stage's thread and waits for all of them; they go
 * to buckets[stage] for the U's trace rows. Returns FALSE as exec_pipeline_reduce(). */
static gboolean exec_pipeline_wait_buckets(ExecPipeline *pipeline, ExecOverlap *overlap,
                                           int32_t stage, int32_t update) {
    for (int32_t vs = 0; vs < pipeline->n_vstages; vs++) {
        if (pipeline->vstage_stage[vs] != stage)
            continue;
        if (!pipeline->posted[vs])
            exec_overlap_post(overlap, update, vs, -1, 0, 0);
        pipeline->posted[vs] = FALSE;
    }
    return exec_overlap_wait(overlap, pipeline->buckets[stage]);
}

/* Data parallelism, before the U of @args: the gradients of every virtual stage of the stage
 * replaced by their mean over the replicas (exec-reduce.h; overlapped: by the stage's thread,
 * waited for here). With a sharded optimizer only this replica's shard of them, and @args
 * gets the stage's squared gradient norm over every shard (in virtual stage order, as the
 * backend adds them). The host time (ns) of what runs here goes to reduce_ns[stage] for the
 * U's trace rows. Returns FALSE when the replay stopped or a peer missed the deadline. */
static gboolean exec_pipeline_reduce(ExecPipeline *pipeline, ExecOpArgs *args) {
    int32_t      stage = args->op->stage, update = args->version - pipeline->version_base[stage];
    ExecOverlap *overlap = pipeline->overlaps[stage];
    g_array_set_size(pipeline->buckets[stage], 0);
    if (overlap && !exec_pipeline_wait_buckets(pipeline, overlap, stage, update))
        return FALSE;
    int64_t start_us = g_get_monotonic_time();
    args->sharded = pipeline->sharded;
    args->sq_norm = 0.0;
    for (int32_t vs = 0; vs < pipeline->n_vstages; vs++) {
        if (pipeline->vstage_stage[vs] != stage)
            continue;
        size_t          n = 0;
        double          sq = 0.0;
        float          *grads = pipeline->backend->ops->grads(pipeline->backend, vs, &n);
        ExecReducePiece whole = {update, vs, 0, n, 0, n};
        gboolean        ok = overlap || exec_reduce_scatter(pipeline->reduce, &whole, grads);
        if (ok && pipeline->sharded)
            ok = exec_reduce_norm(pipeline->reduce, update, vs, grads, n, &sq);
        else if (ok && !overlap)
            ok = exec_reduce_gather(pipeline->reduce, &whole, grads, "the reduced gradients");
        if (!ok)
            return FALSE;
        args->sq_norm += sq;
    }
    pipeline->reduce_ns[stage] = (g_get_monotonic_time() - start_us) * 1000;
    return TRUE;
}

/* Data parallelism on the device, before the U of @stage: the backend enqueues the reduction
 * of each of the stage's virtual stages, in increasing order on every replica. */
static void exec_pipeline_device_reduce(ExecPipeline *pipeline, int32_t stage) {
    for (int32_t vs = 0; vs < pipeline->n_vstages; vs++)
        if (pipeline->vstage_stage[vs] == stage)
            pipeline->backend->ops->reduce_grads(pipeline->backend, vs);
}

/* Whether op @i of @stage's program is the last one of its update window that adds to its
 * virtual stage's gradients (a BW or W with no other of the same chunk before the stage's
 * next U). */
static gboolean exec_pipeline_last_grads(const PpSchedule *sched, int32_t stage, int32_t i) {
    const PpOp *op = &sched->programs[stage][i];
    if (op->kind != PP_OP_BACKWARD_FULL && op->kind != PP_OP_WEIGHT)
        return FALSE;
    for (int32_t j = i + 1; j < sched->n_ops[stage]; j++) {
        const PpOp *next = &sched->programs[stage][j];
        if (next->kind == PP_OP_UPDATE)
            return TRUE;
        if ((next->kind == PP_OP_BACKWARD_FULL || next->kind == PP_OP_WEIGHT) &&
            next->chunk == op->chunk)
            return FALSE;
    }
    return TRUE;
}

/* Sharded optimizer, after the U of @args: every replica's updated shard of each virtual
 * stage's parameters to every replica (exec-reduce.h); its host time (ns) goes to
 * gather_ns[stage] for the trace. Returns FALSE as exec_pipeline_reduce(). */
static gboolean exec_pipeline_gather_params(ExecPipeline *pipeline, const ExecOpArgs *args) {
    int32_t stage = args->op->stage, update = args->version - pipeline->version_base[stage];
    int64_t start_us = g_get_monotonic_time();
    for (int32_t vs = 0; vs < pipeline->n_vstages; vs++) {
        if (pipeline->vstage_stage[vs] != stage)
            continue;
        size_t          n = 0;
        float          *params = pipeline->backend->ops->params(pipeline->backend, vs, &n);
        ExecReducePiece whole = {update, vs, 0, n, 0, n};
        if (!exec_reduce_gather(pipeline->reduce, &whole, params, "the updated parameters"))
            return FALSE;
    }
    pipeline->gather_ns[stage] = (g_get_monotonic_time() - start_us) * 1000;
    return TRUE;
}

/* Runs one op on @stage's worker: wait for its input, run it, send its output; after a U,
 * the stage's reports. Returns FALSE when the worker must stop (aborted, or too many
 * non-finite updates). */
static gboolean exec_pipeline_exec_op(ExecPipeline *pipeline, ExecOpArgs *args) {
    const ExecBackendOps *ops = pipeline->backend->ops;
    ExecRunResult        *res = pipeline->result;
    const PpOp           *op = args->op;
    int32_t               stage = op->stage;
    if (!ops->wait_for(pipeline->backend, args))
        return FALSE;
    if (op->kind == PP_OP_UPDATE && pipeline->reduce && !exec_pipeline_reduce(pipeline, args))
        return FALSE;
    if (op->kind == PP_OP_UPDATE && pipeline->device_reduce)
        exec_pipeline_device_reduce(pipeline, stage);
    pipeline->u_start_us[stage] = g_get_monotonic_time();
    ops->run_op(pipeline->backend, args);
    if (op->kind == PP_OP_UPDATE && pipeline->sharded &&
        !exec_pipeline_gather_params(pipeline, args))
        return FALSE;
    ops->record_done(pipeline->backend, args);
    PP_ASSERT(res->n_executed[stage] < res->capacity[stage]);
    res->executed[stage][res->n_executed[stage]++] = *op;
    if (op->kind != PP_OP_UPDATE)
        return TRUE;
    res->lr[stage][args->version - pipeline->version_base[stage]] = args->lr;
    pipeline->version[stage]++;
    /* After each U, the one point where the backend synchronises: its reports so far. */
    if (!exec_pipeline_consume(pipeline, stage))
        return FALSE;
    if (pipeline->params.speed_reference) {
        /* In the U's columns, so that calibrate finds the step (pp-trace.h). */
        PpTraceRow row = {.stage = stage,
                          .kind = op->kind,
                          .mb = op->mb,
                          .chunk = op->chunk,
                          .step = op->step,
                          .version_f = -1,
                          .version_b = -1,
                          .resource = PP_RESOURCE_REFERENCE,
                          .replica = pipeline->params.parallel.replica};
        ops->reference(pipeline->backend, stage, &row.start_ns, &row.end_ns);
        g_array_append_val(pipeline->rows[stage], row);
    }
    return TRUE;
}

/* Walks the stage's program in order until its end or a stop. */
static void exec_pipeline_replay_program(ExecPipeline *pipeline, int32_t stage) {
    const PpSchedule *sched = pipeline->sched;
    for (int32_t i = 0; i < sched->n_ops[stage]; i++) {
        if (exec_pipeline_stopping(pipeline))
            return;
        ExecOpArgs args;
        exec_pipeline_op_args(pipeline, &sched->programs[stage][i], &args);
        /* The executor computes with exactly the version the program implies (see
         * pp_schedule_version_used()). */
        PP_ASSERT(args.version - pipeline->version_base[stage] ==
                  pp_schedule_version_used(sched, (PpOpRef){stage, i}));
        ExecOverlap    *overlap = pipeline->overlaps[stage];
        gboolean        last = overlap && exec_pipeline_last_grads(sched, stage, i);
        ExecOverlapHook hook;
        if (last) {
            /* Each bucket the op finishes is reduced while the op and the window's other ops
             * go on. */
            exec_overlap_hook_init(&hook, overlap,
                                   pipeline->version[stage] - pipeline->version_base[stage],
                                   args.vstage);
            args.grads_hook = &hook.hook;
        }
        if (!exec_pipeline_exec_op(pipeline, &args))
            return;
        if (last) {
            /* A backend that reports no buckets (CUDA): the whole virtual stage, now. */
            if (hook.n_posted == 0)
                exec_overlap_post(overlap, hook.update, args.vstage, -1, 0, 0);
            pipeline->posted[args.vstage] = TRUE;
        }
    }
}

void exec_pipeline_worker(gpointer user_data, int32_t stage) {
    ExecPipeline *pipeline = user_data;
    if (pipeline->overlap)
        pipeline->overlaps[stage] = exec_overlap_start(pipeline, stage);
    exec_pipeline_replay_program(pipeline, stage);
    if (pipeline->overlap) {
        exec_overlap_stop(pipeline->overlaps[stage]);
        pipeline->overlaps[stage] = NULL;
        for (int32_t vs = 0; vs < pipeline->n_vstages; vs++)
            if (pipeline->vstage_stage[vs] == stage)
                pipeline->posted[vs] = FALSE;
    }
    /* What ran after the stage's last U (or before a stop) is reported now. */
    exec_pipeline_consume(pipeline, stage);
}

/* Dynamic mode: PACI's backpressure policy picks each op from the stage's own state, until
 * the stage has run its share or a stop. */
static void exec_pipeline_run_policy(ExecPipeline *pipeline, int32_t stage) {
    const ExecBackendOps *ops = pipeline->backend->ops;
    int32_t               n_mb = pipeline->result->n_mb, last = pipeline->n_stages - 1;
    g_autofree gboolean  *f_done = g_new0(gboolean, n_mb);
    g_autofree gboolean  *b_done = g_new0(gboolean, n_mb);
    PpPolicyState         state;
    pp_policy_state_init(&state, stage, pipeline->n_stages, pipeline->mb_per_step, n_mb);
    int32_t n_updates = 0;
    while (!pp_policy_state_done(&state)) {
        if (exec_pipeline_stopping(pipeline) || !ops->poll(pipeline->backend, stage, FALSE))
            return;
        PpOp       probe = {.kind = PP_OP_FORWARD, .stage = stage, .mb = state.next_f_mb};
        ExecOpArgs probe_args = {.op = &probe, .vstage = stage};
        state.f_input_ready =
            state.next_f_mb < n_mb && ops->has_input(pipeline->backend, &probe_args);
        state.b_ready_mb = -1;
        for (int32_t mb = 0; mb < state.next_f_mb && state.b_ready_mb < 0; mb++) {
            if (!f_done[mb] || b_done[mb])
                continue;
            probe = (PpOp){.kind = PP_OP_BACKWARD_FULL, .stage = stage, .mb = mb};
            if (stage == last || ops->has_input(pipeline->backend, &probe_args))
                state.b_ready_mb = mb;
        }
        int32_t  mb;
        PpOpKind kind = pp_policy_paci_next(&state, &mb);
        if (kind == PP_OP_N_KINDS) {
            if (!ops->poll(pipeline->backend, stage, TRUE))
                return;
            continue;
        }
        /* op.step as the static paci program sets it: the stage-0 update consuming mb. */
        PpOp       op = {.kind = kind,
                         .stage = stage,
                         .mb = mb,
                         .chunk = kind == PP_OP_UPDATE ? -1 : 0,
                         .step = kind == PP_OP_UPDATE ? n_updates : mb / pipeline->mb_per_step};
        ExecOpArgs args;
        exec_pipeline_op_args(pipeline, &op, &args);
        if (!exec_pipeline_exec_op(pipeline, &args))
            return;
        pp_policy_state_apply(&state, kind, mb);
        if (kind == PP_OP_FORWARD)
            f_done[mb] = TRUE;
        else if (kind == PP_OP_BACKWARD_FULL)
            b_done[mb] = TRUE;
        else
            n_updates++;
    }
}

void exec_pipeline_worker_dynamic(gpointer user_data, int32_t stage) {
    ExecPipeline *pipeline = user_data;
    exec_pipeline_run_policy(pipeline, stage);
    exec_pipeline_consume(pipeline, stage);
}
