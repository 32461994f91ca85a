/* SPDX-License-Identifier: MIT
 * exec.c: the executor's pipeline object: partitions the model, creates the backend the caller
 * names, runs replays (static programs, or PACI's policy live) through the workers of
 * exec-replay.c and collects their results into ExecRunResult and the trace (across processes
 * with exec-merge.c); the model state is reached only through the backend's by-name copy
 * calls.
 */
#include "exec-pipeline-private.h"

#include <string.h>

#include "gpt2-table.h"
#include "pp-error.h"
#include "pp-policy.h"

/* --- construction and running --- */

/* The memory model's bytes of every stage (pp-memory.h): the stage's virtual stages with their
 * layers, @act_slots live units each and @versions[stage] - 1 extra weight copies when the
 * schedule stashes, the master weights and moments over @zero_shards replicas (ZeRO-1; 1:
 * none). Returns: (transfer full) (n_stages). */
static PpMemoryBytes *exec_pipeline_predict_memory(const ExecPipelineParams *params,
                                                   const PpPartition        *partition,
                                                   const PpSchedule         *shape,
                                                   const int32_t            *act_slots,
                                                   const int32_t *versions, int32_t zero_shards) {
    const Gpt2Config   *m = &params->model;
    const PpMemoryShape mshape = {.microbatch_size = params->microbatch_size,
                                  .seq_len = m->T,
                                  .hidden = m->C,
                                  .heads = m->NH,
                                  .vocab = m->V,
                                  .flash_attention = params->flash_attention,
                                  .zero_shards = zero_shards};
    PpMemoryModel       model;
    pp_memory_model(&mshape, &model);
    PpMemoryBytes *stages = g_new0(PpMemoryBytes, shape->n_stages);
    for (int32_t vs = 0; vs < shape->n_vstages; vs++) {
        int32_t        stage = shape->vstage_stage[vs];
        PpMemoryBytes  b;
        PpMemoryBytes *sum = &stages[stage];
        pp_memory_vstage_bytes(&model, partition->layer_begin[vs],
                               partition->layer_end[vs] - partition->layer_begin[vs], vs == 0,
                               vs == shape->n_vstages - 1, act_slots[vs],
                               MAX(versions[stage] - 1, 0), &b);
        sum->params_bytes += b.params_bytes;
        sum->grads_bytes += b.grads_bytes;
        sum->optim_bytes += b.optim_bytes;
        sum->static_bytes += b.static_bytes;
        sum->stash_bytes += b.stash_bytes;
        sum->act_bytes += b.act_bytes;
        sum->total_bytes += b.total_bytes;
    }
    return stages;
}

/* The most buckets any virtual stage of @layout hands its gradients over in
 * (gpt2_table_n_buckets()). */
static int32_t exec_pipeline_most_buckets(const ExecModelLayout *layout) {
    int32_t most = 1;
    for (int32_t vs = 0; vs < layout->n_vstages; vs++) {
        Gpt2Table *table = gpt2_table_new(exec_layout_slice_params(layout, vs));
        most = MAX(most, gpt2_table_n_buckets(table));
        gpt2_table_free(table);
    }
    return most;
}

/* What @params asks of the backend, against its capabilities (exec-backend.h): FALSE with
 * EXEC_ERROR_BACKEND naming the first setting it cannot run. */
static gboolean exec_pipeline_check_caps(const ExecPipelineParams *params,
                                         const ExecBackendInfo *backend, GError **error) {
    if (params->devices && !exec_backend_require(backend, EXEC_BACKEND_CAN_DEVICES, "run.devices",
                                                 "remove the key", error))
        return FALSE;
    if (params->precision != EXEC_PRECISION_DEFAULT) {
        gboolean         bf16 = params->precision == EXEC_PRECISION_BF16;
        g_autofree char *setting = g_strdup_printf("run.precision = %s", bf16 ? "bf16" : "fp32");
        if (!exec_backend_require(backend, bf16 ? EXEC_BACKEND_CAN_BF16 : EXEC_BACKEND_CAN_FP32,
                                  setting, "remove the key or set the other precision", error))
            return FALSE;
    }
    const ExecParallel par = exec_parallel_resolve(&params->parallel);
    int32_t            replicas = par.replicas;
    if (replicas > 1) {
        g_autofree char *data = g_strdup_printf("parallel.data = %d", replicas);
        if (!exec_backend_require(backend, EXEC_BACKEND_CAN_REDUCE_GRADS, data,
                                  "set parallel.data = 1", error))
            return FALSE;
        g_autofree char *sharded =
            g_strdup_printf("parallel.distributed_optimizer with parallel.data = %d", replicas);
        if (par.shards > 1 &&
            !exec_backend_require(backend, EXEC_BACKEND_CAN_SHARD_OPTIMIZER, sharded,
                                  "set parallel.distributed_optimizer = false", error))
            return FALSE;
    }
    return !params->speed_reference ||
           exec_backend_require(backend, EXEC_BACKEND_CAN_SPEED_REFERENCE,
                                "run.speed_reference = true", "set it to false", error);
}

ExecPipeline *exec_pipeline_new(const ExecPipelineParams *params, GError **error) {
    const PpSchedule      *shape = params->shape;
    const Gpt2Config      *m = &params->model;
    const ExecBackendInfo *backend = exec_backend_find(params->backend, error);
    if (!backend || !exec_pipeline_check_caps(params, backend, error))
        return NULL;
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
    g_autoptr(PpPartition) partition =
        pp_partition_new_gpt2_flops(m->L, m->C, m->T, m->V, shape->n_vstages, params->partition,
                                    params->layers_per_vstage, error);
    if (!partition)
        return NULL;

    g_autofree int32_t *act_slots = pp_schedule_vstage_peak_inflight(shape);
    g_autofree int32_t *versions = g_new0(int32_t, shape->n_stages);
    for (int32_t s = 0; s < shape->n_stages; s++)
        versions[s] = shape->weight_mode == PP_WEIGHTS_STASHED ? shape->n_weight_versions[s] : 0;
    for (int32_t vs = 0; vs < shape->n_vstages; vs++)
        act_slots[vs] = MAX(act_slots[vs], 1);
    const ExecParallel par = exec_parallel_resolve(&params->parallel);
    /* The group's rank arithmetic and this layout describe the same replicas. */
    PP_ASSERT(params->comm == NULL ? par.replicas == 1
                                   : exec_comm_replicas(params->comm) == par.replicas &&
                                         exec_comm_replica(params->comm) == par.replica);
    int32_t  replicas = par.replicas;
    gboolean sharded = par.shards > 1;
    if (sharded && params->optim.kind != KERN_OPTIM_ADAMW) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "parallel.distributed_optimizer with parallel.data = %d shards the flat "
                    "parameters at element granularity and Muon orthogonalises whole matrices; "
                    "use optimizer.name = adamw or set parallel.distributed_optimizer = false",
                    replicas);
        return NULL;
    }
    KernOptimParams optim = params->optim;
    if (sharded) {
        optim.shards = par.shards;
        optim.shard = par.replica;
    }
    /* What every backend allocates from: the model's tables and sizes, built here once. */
    g_autoptr(ExecModelLayout) layout =
        exec_model_layout_new(m, params->microbatch_size, partition, act_slots, &optim);
    ExecBackendSetup setup = {
        .layout = layout,
        .n_stages = shape->n_stages,
        .n_chunks = shape->n_chunks,
        .vstage_stage = shape->vstage_stage,
        .weight_versions = versions,
        .seed = params->seed,
        .data = params->data,
        .data_user = params->data_user,
        .on_grads = params->on_grads,
        .on_grads_user = params->on_grads_user,
        .comm = params->comm,
        .parallel = par,
        .devices = params->devices,
        .precision = params->precision,
        .flash_attention = params->flash_attention,
    };
    g_autoptr(ExecBackend) made = backend->create(&setup, error);
    if (!made)
        return NULL;
    /* The registry row's capabilities are what the checks above asked: the ops must agree. */
    guint can = exec_backend_caps(backend)->can;
    PP_ASSERT(!(can & EXEC_BACKEND_CAN_REDUCE_GRADS) == (made->ops->grads == NULL));
    PP_ASSERT(!(can & EXEC_BACKEND_CAN_SHARD_OPTIMIZER) == (made->ops->params == NULL));
    PP_ASSERT(!(can & EXEC_BACKEND_CAN_SPEED_REFERENCE) == (made->ops->reference == NULL));
    ExecPipeline *pipeline = g_new0(ExecPipeline, 1);
    pipeline->params = *params;
    pipeline->params.parallel = par;
    pipeline->params.backend = NULL;
    pipeline->params.shape = NULL;
    pipeline->params.layers_per_vstage = NULL;
    pipeline->params.devices = NULL;
    pipeline->n_stages = shape->n_stages;
    pipeline->n_chunks = shape->n_chunks;
    pipeline->n_vstages = shape->n_vstages;
    pipeline->vstage_of = g_new(int32_t, shape->n_stages * shape->n_chunks);
    for (int32_t st = 0; st < shape->n_stages; st++)
        for (int32_t c = 0; c < shape->n_chunks; c++)
            pipeline->vstage_of[st * shape->n_chunks + c] = pp_schedule_vstage(shape, st, c);
    pipeline->vstage_stage = g_memdup2(shape->vstage_stage, shape->n_vstages * sizeof(int32_t));
    pipeline->backend = g_steal_pointer(&made);
    pipeline->partition = g_steal_pointer(&partition);
    pipeline->version = g_new0(int32_t, shape->n_stages);
    pipeline->nonfinite = g_new0(int32_t, shape->n_stages);
    pipeline->trace = pp_trace_new();
    pipeline->predicted = exec_pipeline_predict_memory(params, pipeline->partition, shape,
                                                       act_slots, versions, par.shards);
    pipeline->reduce_ns = g_new0(int64_t, shape->n_stages);
    pipeline->gather_ns = g_new0(int64_t, shape->n_stages);
    const ExecBackendOps *ops = pipeline->backend->ops;
    pipeline->device_reduce =
        replicas > 1 && ops->reduces_grads && ops->reduces_grads(pipeline->backend);
    PP_ASSERT(!pipeline->device_reduce || (ops->reduce_grads && !sharded));
    if (replicas > 1 && !pipeline->device_reduce) {
        pipeline->reduce = exec_reduce_new(params->comm, &par, shape->n_vstages,
                                           exec_pipeline_most_buckets(layout));
    }
    pipeline->sharded = sharded;
    /* The device's reduction is ordered on the stage's one queue, right before the U: no
     * buckets to overlap (docs/design.md §5.11). */
    pipeline->overlap = params->overlap_grad_reduce && pipeline->reduce != NULL;
    if (params->overlap_grad_reduce && pipeline->device_reduce)
        g_message("parallel.overlap_grad_reduce: the %s backend reduces on the device, on each "
                  "stage's stream right before its update; the key applies to the host-staged "
                  "reduction only",
                  ops->name);
    pipeline->overlaps = g_new0(ExecOverlap *, shape->n_stages);
    pipeline->buckets = g_new0(GArray *, shape->n_stages);
    for (int32_t s = 0; s < shape->n_stages; s++)
        pipeline->buckets[s] = g_array_new(FALSE, FALSE, sizeof(ExecBucket));
    pipeline->posted = g_new0(gboolean, shape->n_vstages);
    pipeline->u_start_us = g_new0(int64_t, shape->n_stages);
    g_mutex_init(&pipeline->error_lock);
    return pipeline;
}

void exec_pipeline_free(ExecPipeline *pipeline) {
    if (!pipeline)
        return;
    exec_reduce_free(pipeline->reduce);
    g_free(pipeline->reduce_ns);
    g_free(pipeline->gather_ns);
    for (int32_t s = 0; pipeline->buckets && s < pipeline->n_stages; s++)
        g_array_unref(pipeline->buckets[s]);
    g_free(pipeline->buckets);
    g_free(pipeline->overlaps);
    g_free(pipeline->posted);
    g_free(pipeline->u_start_us);
    exec_backend_free(pipeline->backend);
    pp_partition_free(pipeline->partition);
    pp_trace_free(pipeline->trace);
    g_free(pipeline->predicted);
    g_free(pipeline->vstage_of);
    g_free(pipeline->vstage_stage);
    g_free(pipeline->version);
    g_free(pipeline->nonfinite);
    g_clear_error(&pipeline->error); /* an interrupt after the last replay */
    g_mutex_clear(&pipeline->error_lock);
    g_free(pipeline);
}

/* @ops_per_stage: capacity of each stage's executed-op record; @n_replicas: D. */
static ExecRunResult *exec_run_result_new(int32_t n_stages, int32_t n_vstages, int32_t n_mb,
                                          const int32_t *ops_per_stage, int32_t n_replicas) {
    ExecRunResult *res = g_new0(ExecRunResult, 1);
    size_t         cells = (size_t)n_mb * n_vstages;
    res->n_mb = n_mb;
    res->loss = g_new0(float, n_mb);
    res->n_replicas = n_replicas;
    size_t replica_cells = (size_t)n_mb * n_replicas;
    res->losses = g_new0(float, replica_cells);
    res->mb_step = g_new0(int32_t, n_mb);
    res->version_f = g_new(int32_t, cells);
    res->version_b = g_new(int32_t, cells);
    for (size_t i = 0; i < cells; i++)
        res->version_f[i] = res->version_b[i] = -1;
    res->n_stages = n_stages;
    res->grad_norm = g_new0(double *, n_stages);
    res->lr = g_new0(float *, n_stages);
    res->n_updates = g_new0(int32_t, n_stages);
    res->n_copies = g_new0(int32_t, n_stages);
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
    g_free(result->n_copies);
    g_free(result->executed);
    g_free(result->n_executed);
    g_free(result->capacity);
    g_free(result->loss);
    g_free(result->losses);
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
    int64_t first_row = pipeline->trace->n_rows;
    if (pipeline->params.comm)
        exec_pipeline_merge_begin(pipeline, res);

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
    if (pipeline->params.comm)
        exec_pipeline_merge(pipeline, res, first_row, &pipeline->error);
    else
        memcpy(res->losses, res->loss, (size_t)res->n_mb * sizeof(float));
    if (pipeline->error) {
        g_propagate_error(error, g_steal_pointer(&pipeline->error));
        return NULL;
    }
    return g_steal_pointer(&owned);
}

/* Checks that @sched (NULL in dynamic mode) fits the pipeline and has the backend prepare
 * for it; with a process group every rank learns every rank's outcome. */
static gboolean exec_pipeline_prepare(ExecPipeline *pipeline, const PpSchedule *sched,
                                      GError **error) {
    GError *local = NULL;
    for (int32_t s = 0; sched && s < pipeline->n_stages && !local; s++) {
        for (int32_t c = 0; c < pipeline->n_chunks && !local; c++) {
            if (pp_schedule_vstage(sched, s, c) != pipeline->vstage_of[s * pipeline->n_chunks + c])
                local = g_error_new(EXEC_ERROR, EXEC_ERROR_SHAPE,
                                    "schedule %s maps stage %d chunk %d to virtual stage %d; the "
                                    "pipeline has %d",
                                    sched->kind, s, c, pp_schedule_vstage(sched, s, c),
                                    pipeline->vstage_of[s * pipeline->n_chunks + c]);
        }
    }
    if (local == NULL)
        pipeline->backend->ops->prepare(pipeline->backend, sched, &local);
    if (pipeline->reduce)
        exec_reduce_reset(pipeline->reduce);
    if (exec_comm_agree(pipeline->params.comm, "preparing a replay", &local))
        return TRUE;
    g_propagate_error(error, local);
    return FALSE;
}

ExecRunResult *exec_pipeline_run(ExecPipeline *pipeline, const PpSchedule *sched, int64_t mb_offset,
                                 GError **error) {
    if (!exec_pipeline_prepare(pipeline, sched, error))
        return NULL;
    pipeline->sched = sched;
    pipeline->weight_mode = sched->weight_mode;
    pipeline->mb_per_step = sched->mb_per_step;
    ExecRunResult *res = exec_run_result_new(sched->n_stages, sched->n_vstages, sched->n_mb,
                                             sched->n_ops, pipeline->params.parallel.replicas);
    res = exec_pipeline_launch(pipeline, exec_pipeline_worker, res, mb_offset, error);
    for (int32_t s = 0; res && s < pipeline->n_stages; s++) {
        if (pipeline->backend->ops->is_local(pipeline->backend, s))
            PP_ASSERT(res->n_executed[s] == sched->n_ops[s]);
    }
    return res;
}

ExecRunResult *exec_pipeline_run_dynamic(ExecPipeline *pipeline, const ExecDynamicParams *run,
                                         int64_t mb_offset, PpSchedule **program, GError **error) {
    const PpSchedKindInfo *info = run->kind;
    int32_t                accumulation = run->mb_per_step, n_mb = run->n_mb;
    PP_ASSERT(info != NULL && accumulation >= 1 && n_mb >= 1);
    if (!info->has_policy || pipeline->n_chunks != 1) {
        g_autofree char *policy_kinds = pp_sched_kind_policy_names();
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                    "dynamic mode runs PACI's policy: it needs a schedule with a run-time "
                    "policy (%s; got %s) and pipeline.chunks=1 (got %d)",
                    policy_kinds, info->name, pipeline->n_chunks);
        return NULL;
    }
    if (!exec_pipeline_prepare(pipeline, NULL, error))
        return NULL;
    pipeline->weight_mode = PP_WEIGHTS_CURRENT;
    pipeline->mb_per_step = accumulation;
    g_autofree int32_t *cap = g_new(int32_t, pipeline->n_stages);
    for (int32_t s = 0; s < pipeline->n_stages; s++)
        cap[s] = 2 * n_mb + (n_mb + accumulation - 1) / accumulation; /* F, BW, U */
    ExecRunResult *res = exec_run_result_new(pipeline->n_stages, pipeline->n_vstages, n_mb, cap,
                                             pipeline->params.parallel.replicas);
    g_autoptr(ExecRunResult) done =
        exec_pipeline_launch(pipeline, exec_pipeline_worker_dynamic, res, mb_offset, error);
    if (!done)
        return NULL;
    /* The executed order becomes a program; the versions the workers used must be the ones
     * that program implies, exactly as in static mode. */
    g_autoptr(PpPolicyRecorder) rec =
        pp_policy_recorder_new(info, pipeline->n_stages, accumulation, n_mb);
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

int32_t exec_pipeline_n_stages(const ExecPipeline *pipeline) {
    return pipeline->n_stages;
}

int32_t exec_pipeline_n_vstages(const ExecPipeline *pipeline) {
    return pipeline->n_vstages;
}

const PpPartition *exec_pipeline_partition(const ExecPipeline *pipeline) {
    return pipeline->partition;
}

const Gpt2Config *exec_pipeline_model(const ExecPipeline *pipeline) {
    return &pipeline->params.model;
}

int32_t exec_pipeline_microbatch_size(const ExecPipeline *pipeline) {
    return pipeline->params.microbatch_size;
}

/* --- model state --- */

/* The backend, for a state call: never while a replay runs. */
static ExecBackend *exec_pipeline_state(const ExecPipeline *pipeline, int32_t vstage) {
    PP_ASSERT(pipeline->result == NULL);
    PP_ASSERT(vstage >= 0 && vstage < pipeline->n_vstages);
    return pipeline->backend;
}

int exec_pipeline_n_tensors(const ExecPipeline *pipeline, int32_t vstage) {
    ExecBackend *backend = exec_pipeline_state(pipeline, vstage);
    return backend->ops->n_tensors(backend, vstage);
}

const ExecTensor *exec_pipeline_tensor(const ExecPipeline *pipeline, int32_t vstage, int i) {
    ExecBackend *backend = exec_pipeline_state(pipeline, vstage);
    return backend->ops->tensor(backend, vstage, i);
}

void exec_pipeline_state_part(const ExecPipeline *pipeline, int32_t vstage, const ExecTensor *t,
                              int32_t replica, size_t *lo, size_t *hi) {
    if (!pipeline->sharded) {
        *lo = 0;
        *hi = replica == 0 ? t->numel : 0;
        return;
    }
    /* The flat array is the table's tensors back to back (exec-backend.h). */
    size_t n = 0, shard_lo, shard_hi;
    for (int i = 0; i < exec_pipeline_n_tensors(pipeline, vstage); i++)
        n += exec_pipeline_tensor(pipeline, vstage, i)->numel;
    kern_optim_shard_range(n, pipeline->params.parallel.shards, replica, &shard_lo, &shard_hi);
    size_t from = MAX(t->offset, shard_lo), to = MIN(t->offset + t->numel, shard_hi);
    *lo = from < to ? from - t->offset : 0;
    *hi = from < to ? to - t->offset : 0;
}

gboolean exec_pipeline_tensor_get(ExecPipeline *pipeline, int32_t vstage, const char *name,
                                  ExecTensorRole role, float *dst, size_t n, GError **error) {
    ExecBackend *backend = exec_pipeline_state(pipeline, vstage);
    return backend->ops->tensor_get(backend, vstage, name, role, dst, n, error);
}

gboolean exec_pipeline_tensor_set(ExecPipeline *pipeline, int32_t vstage, const char *name,
                                  ExecTensorRole role, const float *src, size_t n, GError **error) {
    ExecBackend *backend = exec_pipeline_state(pipeline, vstage);
    return backend->ops->tensor_set(backend, vstage, name, role, src, n, error);
}

gboolean exec_pipeline_optim_steps(ExecPipeline *pipeline, int32_t vstage, int64_t *n_steps,
                                   GError **error) {
    ExecBackend *backend = exec_pipeline_state(pipeline, vstage);
    return backend->ops->get_optim_steps(backend, vstage, n_steps, error);
}

gboolean exec_pipeline_set_optim_steps(ExecPipeline *pipeline, int32_t vstage, int64_t n_steps,
                                       GError **error) {
    ExecBackend *backend = exec_pipeline_state(pipeline, vstage);
    return backend->ops->set_optim_steps(backend, vstage, n_steps, error);
}

gboolean exec_pipeline_evaluate(ExecPipeline *pipeline, const int32_t *tokens,
                                const int32_t *targets, float *loss, GError **error) {
    ExecBackend *backend = exec_pipeline_state(pipeline, 0);
    return backend->ops->evaluate(backend, tokens, targets, loss, error);
}

/* --- memory --- */

gboolean exec_pipeline_memory(const ExecPipeline *pipeline, int32_t stage, PpMemoryBytes *predicted,
                              ExecMemoryBytes *actual) {
    PP_ASSERT(stage >= 0 && stage < pipeline->n_stages);
    ExecBackend *backend = pipeline->backend;
    *predicted = pipeline->predicted[stage];
    if (backend->ops->memory == NULL || !backend->ops->is_local(backend, stage))
        return FALSE;
    if (actual)
        backend->ops->memory(backend, stage, actual);
    return TRUE;
}

/* --- counters --- */

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

/* --- processes --- */

ExecComm *exec_pipeline_comm(const ExecPipeline *pipeline) {
    return pipeline->params.comm;
}

const ExecParallel *exec_pipeline_parallel(const ExecPipeline *pipeline) {
    return &pipeline->params.parallel;
}
