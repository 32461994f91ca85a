/* SPDX-License-Identifier: MIT
 * exec.c: backend-agnostic replay of a PpSchedule. Every stage's worker walks its program in
 * order: wait for the op's input message, run it, send its output. This file decides the
 * weight version each op computes with (current, or the stashed version of its F), checks it
 * against the schedule core's pp_schedule_version_used(), times every op into the trace,
 * collects losses and handles non-finite gradients (skip, count, stop after K in a row).
 */
#include "exec.h"

#include <time.h>

#include "pp-error.h"
#include "pp-policy.h"

/* The quark's name is stringified as written: keep clang-format from spacing the dashes. */
// clang-format off
G_DEFINE_QUARK(exec-error-quark, exec_error)
// clang-format on

struct _ExecPipeline {
    ExecPipelineParams params; /* copy; pointer fields are not used after exec_pipeline_new() */
    PpPartition       *partition;
    ExecBackend       *backend;
    int32_t            n_stages, n_chunks, n_vstages;
    int32_t           *vstage_of; /* (n_stages, n_chunks) virtual stage of (stage, chunk) */
    int32_t           *version;   /* (n_stages) updates applied so far */
    int32_t           *nonfinite; /* (n_stages) consecutive skipped updates */
    PpTrace           *trace;
    int64_t            t0_ns; /* CLOCK_MONOTONIC at creation */

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

static int64_t exec_now_ns(const ExecPipeline *pipeline) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - pipeline->t0_ns;
}

/* --- the worker --- */

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

/* Runs one op on @stage's worker: wait for its input, compute, send, record. Returns FALSE
 * when the worker must stop (aborted, or too many non-finite updates). */
static gboolean exec_pipeline_exec_op(ExecPipeline *pipeline, const ExecOpArgs *args) {
    const ExecBackendOps *ops = pipeline->backend->ops;
    ExecRunResult        *res = pipeline->result;
    const PpOp           *op = args->op;
    int32_t               stage = op->stage;
    ExecOpResult          out;
    if (!ops->wait_for(pipeline->backend, args))
        return FALSE;
    int64_t start_ns = exec_now_ns(pipeline);
    ops->run_op(pipeline->backend, args, &out);
    int64_t end_ns = exec_now_ns(pipeline);
    ops->record_done(pipeline->backend, args);

    PpTraceRow row = {.stage = stage,
                      .kind = op->kind,
                      .mb = op->mb,
                      .chunk = op->chunk,
                      .step = op->step,
                      .start_ns = start_ns,
                      .end_ns = end_ns,
                      .version_f = -1,
                      .version_b = -1,
                      .resource = PP_RESOURCE_COMPUTE};
    g_array_append_val(pipeline->rows[stage], row);
    PP_ASSERT(res->n_executed[stage] < res->capacity[stage]);
    res->executed[stage][res->n_executed[stage]++] = *op;
    if (op->kind == PP_OP_FORWARD && args->vstage == pipeline->n_vstages - 1) {
        res->loss[op->mb] = out.loss;
        res->mb_step[op->mb] = op->step;
        if (pipeline->params.on_loss)
            pipeline->params.on_loss(pipeline->params.on_loss_user, op->mb, op->step, out.loss);
    }
    if (op->kind != PP_OP_UPDATE)
        return TRUE;
    pipeline->version[stage]++;
    res->lr[stage][res->n_updates[stage]] = args->lr;
    res->grad_norm[stage][res->n_updates[stage]++] = out.grad_norm;
    if (out.applied) {
        pipeline->nonfinite[stage] = 0;
        return TRUE;
    }
    g_atomic_int_inc(&res->n_skipped);
    g_message("stage %d: update %d skipped: non-finite gradients (norm %.9g)", stage, args->version,
              out.grad_norm);
    if (++pipeline->nonfinite[stage] < pipeline->params.max_nonfinite)
        return TRUE;
    exec_pipeline_fail(pipeline,
                       g_error_new(EXEC_ERROR, EXEC_ERROR_NONFINITE,
                                   "stage %d: %d consecutive updates (up to update %d) had "
                                   "non-finite gradients; lower optimizer.lr or set "
                                   "optimizer.grad_clip",
                                   stage, pipeline->nonfinite[stage], args->version));
    return FALSE;
}

/* Static mode: walk the stage's program in order. */
static void exec_pipeline_worker(gpointer user_data, int32_t stage) {
    ExecPipeline     *pipeline = user_data;
    const PpSchedule *sched = pipeline->sched;
    for (int32_t i = 0; i < sched->n_ops[stage]; i++) {
        if (g_atomic_int_get(&pipeline->failed))
            return;
        ExecOpArgs args;
        exec_pipeline_op_args(pipeline, &sched->programs[stage][i], &args);
        /* The executor computes with exactly the version the program implies (DESIGN.md §4). */
        PP_ASSERT(args.version - pipeline->version_base[stage] ==
                  pp_schedule_version_used(sched, (PpOpRef){stage, i}));
        if (!exec_pipeline_exec_op(pipeline, &args))
            return;
    }
}

/* Dynamic mode: PACI's backpressure policy picks each op from the stage's own state. */
static void exec_pipeline_worker_dynamic(gpointer user_data, int32_t stage) {
    ExecPipeline         *pipeline = user_data;
    const ExecBackendOps *ops = pipeline->backend->ops;
    int32_t               n_mb = pipeline->result->n_mb, last = pipeline->n_stages - 1;
    g_autofree gboolean  *f_done = g_new0(gboolean, n_mb);
    g_autofree gboolean  *b_done = g_new0(gboolean, n_mb);
    PpPolicyState         state;
    pp_policy_state_init(&state, stage, pipeline->n_stages, pipeline->mb_per_step, n_mb);
    int32_t n_updates = 0;
    while (!pp_policy_state_done(&state)) {
        if (g_atomic_int_get(&pipeline->failed) || !ops->poll(pipeline->backend, stage, FALSE))
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

/* --- construction and running --- */

void exec_backend_free(ExecBackend *backend) {
    if (backend)
        backend->ops->free(backend);
}

ExecPipeline *exec_pipeline_new(const ExecPipelineParams *params, GError **error) {
    const PpSchedule *shape = params->shape;
    const Gpt2Config *m = &params->model;
    if (m->NH < 1 || m->C % m->NH != 0 || m->V > m->Vp || params->microbatch_size < 1) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                    "model.hidden=%d must be a multiple of model.heads=%d, the padded "
                    "vocabulary %d must hold model.vocab=%d and micro-batches need >= 1 "
                    "sequence (got %d)",
                    m->C, m->NH, m->Vp, m->V, params->microbatch_size);
        return NULL;
    }
    if (params->max_nonfinite < 1 || params->total_steps <= params->warmup_steps) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                    "need max_nonfinite >= 1 (got %d) and training steps %d > warmup steps %d",
                    params->max_nonfinite, params->total_steps, params->warmup_steps);
        return NULL;
    }
    /* Every block costs the same; the head sits on the last virtual stage. On the CPU there
     * is no device-memory limit: balanced mode minimises the largest stage FLOPs alone. */
    g_autofree int64_t *layer_flops = g_new(int64_t, MAX(m->L, 1));
    for (int32_t i = 0; i < m->L; i++)
        layer_flops[i] = pp_partition_layer_flops(m->C, m->T);
    PpPartitionParams pp = {.n_layers = m->L,
                            .n_vstages = shape->n_vstages,
                            .mode = params->partition,
                            .layers_per_vstage = params->layers_per_vstage,
                            .layer_cost = layer_flops,
                            .last_cost = pp_partition_head_flops(m->C, m->T, m->V)};
    g_autoptr(PpPartition) partition = pp_partition_new(&pp, error);
    if (!partition)
        return NULL;

    g_autofree int32_t *act_slots = pp_schedule_vstage_peak_inflight(shape);
    g_autofree int32_t *versions = g_new0(int32_t, shape->n_stages);
    for (int32_t s = 0; s < shape->n_stages; s++)
        versions[s] = shape->weight_mode == PP_WEIGHTS_STASHED ? shape->n_weight_versions[s] : 0;
    for (int32_t vs = 0; vs < shape->n_vstages; vs++)
        act_slots[vs] = MAX(act_slots[vs], 1);
    ExecBackendSetup setup = {
        .model = *m,
        .microbatch_size = params->microbatch_size,
        .n_stages = shape->n_stages,
        .n_chunks = shape->n_chunks,
        .vstage_stage = shape->vstage_stage,
        .act_slots = act_slots,
        .weight_versions = versions,
        .partition = partition,
        .seed = params->seed,
        .optim = params->optim,
        .data = params->data,
        .data_user = params->data_user,
        .on_grads = params->on_grads,
        .on_grads_user = params->on_grads_user,
    };
    ExecPipeline *pipeline = g_new0(ExecPipeline, 1);
    pipeline->params = *params;
    pipeline->params.shape = NULL;
    pipeline->params.layers_per_vstage = NULL;
    pipeline->n_stages = shape->n_stages;
    pipeline->n_chunks = shape->n_chunks;
    pipeline->n_vstages = shape->n_vstages;
    pipeline->vstage_of = g_new(int32_t, shape->n_stages * shape->n_chunks);
    for (int32_t st = 0; st < shape->n_stages; st++)
        for (int32_t c = 0; c < shape->n_chunks; c++)
            pipeline->vstage_of[st * shape->n_chunks + c] = pp_schedule_vstage(shape, st, c);
    pipeline->backend = exec_backend_cpu_new(&setup);
    pipeline->partition = g_steal_pointer(&partition);
    pipeline->version = g_new0(int32_t, shape->n_stages);
    pipeline->nonfinite = g_new0(int32_t, shape->n_stages);
    pipeline->trace = pp_trace_new();
    g_mutex_init(&pipeline->error_lock);
    pipeline->t0_ns = 0;
    pipeline->t0_ns = exec_now_ns(pipeline);
    return pipeline;
}

void exec_pipeline_free(ExecPipeline *pipeline) {
    if (!pipeline)
        return;
    exec_backend_free(pipeline->backend);
    pp_partition_free(pipeline->partition);
    pp_trace_free(pipeline->trace);
    g_free(pipeline->vstage_of);
    g_free(pipeline->version);
    g_free(pipeline->nonfinite);
    g_mutex_clear(&pipeline->error_lock);
    g_free(pipeline);
}

/* @ops_per_stage: capacity of each stage's executed-op record. */
static ExecRunResult *exec_run_result_new(int32_t n_stages, int32_t n_vstages, int32_t n_mb,
                                          const int32_t *ops_per_stage) {
    ExecRunResult *res = g_new0(ExecRunResult, 1);
    size_t         cells = (size_t)n_mb * n_vstages;
    res->n_mb = n_mb;
    res->loss = g_new0(float, n_mb);
    res->mb_step = g_new0(int32_t, n_mb);
    res->version_f = g_new(int32_t, cells);
    res->version_b = g_new(int32_t, cells);
    for (size_t i = 0; i < cells; i++)
        res->version_f[i] = res->version_b[i] = -1;
    res->n_stages = n_stages;
    res->grad_norm = g_new0(double *, n_stages);
    res->lr = g_new0(float *, n_stages);
    res->n_updates = g_new0(int32_t, n_stages);
    res->executed = g_new0(PpOp *, n_stages);
    res->n_executed = g_new0(int32_t, n_stages);
    res->capacity = g_new0(int32_t, n_stages);
    for (int32_t s = 0; s < n_stages; s++) {
        res->capacity[s] = ops_per_stage[s];
        res->executed[s] = g_new(PpOp, MAX(ops_per_stage[s], 1));
        res->grad_norm[s] = g_new0(double, MAX(ops_per_stage[s], 1));
        res->lr[s] = g_new0(float, MAX(ops_per_stage[s], 1));
    }
    return res;
}

void exec_run_result_free(ExecRunResult *result) {
    if (!result)
        return;
    for (int32_t s = 0; s < result->n_stages; s++) {
        g_free(result->executed[s]);
        g_free(result->grad_norm[s]);
        g_free(result->lr[s]);
    }
    g_free(result->n_updates);
    g_free(result->executed);
    g_free(result->n_executed);
    g_free(result->capacity);
    g_free(result->loss);
    g_free(result->mb_step);
    g_free(result->version_f);
    g_free(result->version_b);
    g_free(result->grad_norm);
    g_free(result->lr);
    g_free(result);
}

/* Launches @worker on every stage for the replay described by pipeline->sched (NULL when
 * dynamic), weight_mode and mb_per_step, then moves the rows into the trace.
 * Returns: (transfer full) @res, or NULL with @error set (and @res freed). */
static ExecRunResult *exec_pipeline_launch(ExecPipeline *pipeline, ExecWorkerFn worker,
                                           ExecRunResult *res, int64_t mb_offset, GError **error) {
    g_autoptr(ExecRunResult) owned = res;
    g_autofree int32_t *base = g_memdup2(pipeline->version, pipeline->n_stages * sizeof(int32_t));
    pipeline->mb_offset = mb_offset;
    pipeline->version_base = base;
    pipeline->result = res;
    pipeline->rows = g_new(GArray *, pipeline->n_stages);
    for (int32_t s = 0; s < pipeline->n_stages; s++)
        pipeline->rows[s] = g_array_new(FALSE, FALSE, sizeof(PpTraceRow));
    g_atomic_int_set(&pipeline->failed, 0);

    pipeline->backend->ops->launch(pipeline->backend, worker, pipeline);

    for (int32_t s = 0; s < pipeline->n_stages; s++) {
        GArray *rows = pipeline->rows[s];
        for (guint i = 0; i < rows->len; i++) {
            PpTraceRow *row = &g_array_index(rows, PpTraceRow, i);
            if (row->kind != PP_OP_UPDATE) {
                size_t cell = (size_t)row->mb * pipeline->n_vstages +
                              pipeline->vstage_of[s * pipeline->n_chunks + row->chunk];
                row->version_f = res->version_f[cell];
                row->version_b = res->version_b[cell];
            }
            pp_trace_append(pipeline->trace, row);
        }
        g_array_free(rows, TRUE);
    }
    g_clear_pointer(&pipeline->rows, g_free);
    pipeline->sched = NULL;
    pipeline->version_base = NULL;
    pipeline->result = NULL;
    if (pipeline->error) {
        g_propagate_error(error, g_steal_pointer(&pipeline->error));
        return NULL;
    }
    return g_steal_pointer(&owned);
}

ExecRunResult *exec_pipeline_run(ExecPipeline *pipeline, const PpSchedule *sched, int64_t mb_offset,
                                 GError **error) {
    if (!pipeline->backend->ops->prepare(pipeline->backend, sched, error))
        return NULL;
    for (int32_t s = 0; s < pipeline->n_stages; s++) {
        for (int32_t c = 0; c < pipeline->n_chunks; c++) {
            if (pp_schedule_vstage(sched, s, c) !=
                pipeline->vstage_of[s * pipeline->n_chunks + c]) {
                g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                            "schedule %s maps stage %d chunk %d to virtual stage %d; the "
                            "pipeline has %d",
                            sched->kind, s, c, pp_schedule_vstage(sched, s, c),
                            pipeline->vstage_of[s * pipeline->n_chunks + c]);
                return NULL;
            }
        }
    }
    pipeline->sched = sched;
    pipeline->weight_mode = sched->weight_mode;
    pipeline->mb_per_step = sched->mb_per_step;
    ExecRunResult *res =
        exec_run_result_new(sched->n_stages, sched->n_vstages, sched->n_mb, sched->n_ops);
    res = exec_pipeline_launch(pipeline, exec_pipeline_worker, res, mb_offset, error);
    if (res) {
        for (int32_t s = 0; s < pipeline->n_stages; s++)
            PP_ASSERT(res->n_executed[s] == sched->n_ops[s]);
    }
    return res;
}

ExecRunResult *exec_pipeline_run_dynamic(ExecPipeline *pipeline, const PpSchedule *like,
                                         int64_t mb_offset, PpSchedule **program, GError **error) {
    const PpSchedKindInfo *info = pp_sched_kind_lookup(like->kind);
    int32_t                accumulation = like->mb_per_step, n_mb = like->n_mb;
    if (info == NULL || !info->has_policy || pipeline->n_chunks != 1) {
        g_autofree char *policy_kinds = pp_sched_kind_policy_names();
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                    "dynamic mode runs PACI's policy: it needs a schedule with a run-time "
                    "policy (%s; got %s) and pipeline.chunks=1 (got %d)",
                    policy_kinds, like->kind, pipeline->n_chunks);
        return NULL;
    }
    if (!pipeline->backend->ops->prepare(pipeline->backend, NULL, error))
        return NULL;
    pipeline->weight_mode = PP_WEIGHTS_CURRENT;
    pipeline->mb_per_step = accumulation;
    g_autofree int32_t *cap = g_new(int32_t, pipeline->n_stages);
    for (int32_t s = 0; s < pipeline->n_stages; s++)
        cap[s] = 2 * n_mb + (n_mb + accumulation - 1) / accumulation; /* F, BW, U */
    ExecRunResult *res = exec_run_result_new(pipeline->n_stages, pipeline->n_vstages, n_mb, cap);
    g_autoptr(ExecRunResult) done =
        exec_pipeline_launch(pipeline, exec_pipeline_worker_dynamic, res, mb_offset, error);
    if (!done)
        return NULL;
    /* The executed order becomes a program; the versions the workers used must be the ones
     * that program implies, exactly as in static mode. */
    g_autoptr(PpPolicyRecorder) rec =
        pp_policy_recorder_new(info->name, pipeline->n_stages, accumulation, n_mb);
    for (int32_t s = 0; s < pipeline->n_stages; s++)
        for (int32_t i = 0; i < done->n_executed[s]; i++)
            pp_policy_recorder_record(rec, s, done->executed[s][i].kind, done->executed[s][i].mb);
    g_autoptr(PpSchedule) sched = pp_policy_recorder_finish(rec, error);
    if (!sched)
        return NULL;
    for (int32_t mb = 0; mb < n_mb; mb++) {
        for (int32_t vs = 0; vs < pipeline->n_vstages; vs++) {
            size_t  cell = (size_t)mb * pipeline->n_vstages + vs;
            int32_t f = pp_schedule_find_op(sched, PP_OP_FORWARD, mb, vs);
            int32_t b = pp_schedule_find_op(sched, PP_OP_BACKWARD_FULL, mb, vs);
            int32_t stage = vs; /* one chunk per stage: vstage == stage */
            int32_t base = pipeline->version[stage] - done->n_updates[stage];
            PP_ASSERT(done->version_f[cell] - base ==
                      pp_schedule_version_used(sched, pp_schedule_op_ref(sched, f)));
            PP_ASSERT(done->version_b[cell] - base ==
                      pp_schedule_version_used(sched, pp_schedule_op_ref(sched, b)));
        }
    }
    *program = g_steal_pointer(&sched);
    return g_steal_pointer(&done);
}

/* --- state --- */

int32_t exec_pipeline_n_vstages(const ExecPipeline *pipeline) {
    return pipeline->n_vstages;
}

const PpPartition *exec_pipeline_partition(const ExecPipeline *pipeline) {
    return pipeline->partition;
}

Gpt2Slice *exec_pipeline_slice(ExecPipeline *pipeline, int32_t vstage) {
    return pipeline->backend->ops->slice(pipeline->backend, vstage);
}

KernOptim *exec_pipeline_optim(ExecPipeline *pipeline, int32_t vstage) {
    return pipeline->backend->ops->optim(pipeline->backend, vstage);
}

float exec_pipeline_update_lr(const ExecPipeline *pipeline, int32_t update) {
    const ExecPipelineParams *p = &pipeline->params;
    return kern_lr_schedule(update, p->warmup_steps, p->total_steps, p->lr, p->min_lr);
}

int32_t exec_pipeline_version(const ExecPipeline *pipeline, int32_t stage) {
    PP_ASSERT(stage >= 0 && stage < pipeline->n_stages);
    return pipeline->version[stage];
}

void exec_pipeline_set_versions(ExecPipeline *pipeline, const int32_t *versions) {
    for (int32_t s = 0; s < pipeline->n_stages; s++)
        pipeline->version[s] = versions[s];
}

int32_t exec_pipeline_nonfinite(const ExecPipeline *pipeline, int32_t stage) {
    PP_ASSERT(stage >= 0 && stage < pipeline->n_stages);
    return pipeline->nonfinite[stage];
}

void exec_pipeline_set_nonfinite(ExecPipeline *pipeline, const int32_t *counts) {
    for (int32_t s = 0; s < pipeline->n_stages; s++) {
        PP_ASSERT(counts[s] >= 0);
        pipeline->nonfinite[s] = counts[s];
    }
}

const PpTrace *exec_pipeline_trace(const ExecPipeline *pipeline) {
    return pipeline->trace;
}
