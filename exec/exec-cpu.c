/* SPDX-License-Identifier: MIT
 * exec-cpu.c: the CPU backend, reference implementation and test double of exec-backend.h.
 * One GThread per local pipeline stage; activations and gradients travel through the
 * host-queue transport (exec-transport.h: the stages' inboxes, and with a process group, one
 * stage per rank, the group's data channel; waits then have the group's deadline). Model
 * state per virtual stage: a Gpt2Slice, its KernOptim and the stashed weight copies. Ops run
 * on the worker's thread; their reports (host-clock times, losses, grad norms) wait in a
 * per-stage list for flush().
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "exec-cpu-private.h"
#include "kern-gemm.h"
#include "pp-error.h"

/* ns since the backend's creation. */
static int64_t exec_cpu_now_ns(const ExecCpuBackend *cpu) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - cpu->t0_ns;
}

/* --- activation slots and stashes --- */

static ExecStash *exec_cpu_stash_find(ExecCpuVstage *v, int32_t version) {
    for (guint i = 0; i < v->stashes->len; i++) {
        ExecStash *st = g_ptr_array_index(v->stashes, i);
        if (st->version == version)
            return st;
    }
    return NULL;
}

static void exec_cpu_stash_free(gpointer p) {
    ExecStash *st = p;
    g_free(st->params);
    g_free(st);
}

/* --- vtable --- */

static gboolean exec_cpu_prepare(ExecBackend *backend, const PpSchedule *sched, GError **error) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    if (sched && (!exec_backend_check_schedule(sched, cpu->n_stages, cpu->n_chunks,
                                               cpu->vstage_stage, cpu->act_slots, error) ||
                  !exec_backend_check_tags(cpu->comm, cpu->n_vstages, sched, error)))
        return FALSE;
    /* A previous replay that ended normally left nothing behind; an aborted one may leave
     * messages, dropped here. */
    cpu->transport->ops->reset(cpu->transport);
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        ExecCpuStage *st = &cpu->stages[s];
        PP_ASSERT(st->input == NULL && st->output == NULL);
        g_array_set_size(st->reports, 0);
        g_array_set_size(st->flushed, 0);
    }
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        exec_slots_reset(&v->slots);
        g_ptr_array_set_size(v->stashes, 0);
    }
    g_atomic_int_set(&cpu->aborted, 0);
    return TRUE;
}

typedef struct {
    ExecWorkerFn worker;
    gpointer     user_data;
    int32_t      stage;
    ExecComm    *comm;    /* (nullable) */
    gint        *running; /* workers still running (atomic) */
} ExecCpuThread;

static gpointer exec_cpu_thread_main(gpointer p) {
    ExecCpuThread *t = p;
    t->worker(t->user_data, t->stage);
    g_atomic_int_dec_and_test(t->running);
    if (t->comm)
        exec_comm_wake(t->comm);
    return NULL;
}

static void exec_cpu_launch(ExecBackend *backend, ExecWorkerFn worker, gpointer user_data) {
    ExecCpuBackend           *cpu = exec_cpu(backend);
    g_autofree ExecCpuThread *threads = g_new(ExecCpuThread, cpu->n_stages);
    g_autofree GThread      **handles = g_new0(GThread *, cpu->n_stages);
    gint                      running = 0;
    for (int32_t s = 0; s < cpu->n_stages; s++)
        running += exec_cpu_stage_local(cpu, s);
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        if (!exec_cpu_stage_local(cpu, s))
            continue;
        threads[s] = (ExecCpuThread){.worker = worker,
                                     .user_data = user_data,
                                     .stage = s,
                                     .comm = cpu->comm,
                                     .running = &running};
        char name[32];
        g_snprintf(name, sizeof name, "pp-stage-%d", s);
        handles[s] = g_thread_new(name, exec_cpu_thread_main, &threads[s]);
    }
    /* The host thread moves messages between processes while the workers compute. */
    if (cpu->comm)
        exec_comm_serve(cpu->comm, &running);
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        if (handles[s])
            g_thread_join(handles[s]);
    }
}

/* Kind of the message @args->op consumes; FALSE when it needs none. */
static gboolean exec_cpu_input_kind(const ExecCpuBackend *cpu, const ExecOpArgs *args,
                                    ExecMsgKind *kind) {
    PpOpKind k = args->op->kind;
    if (k == PP_OP_FORWARD && args->vstage > 0) {
        *kind = EXEC_MSG_ACT;
        return TRUE;
    }
    if ((k == PP_OP_BACKWARD || k == PP_OP_BACKWARD_FULL) && args->vstage < cpu->n_vstages - 1) {
        *kind = EXEC_MSG_GRAD;
        return TRUE;
    }
    return FALSE;
}

static gboolean exec_cpu_wait_for(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecCpuStage   *st = &cpu->stages[args->op->stage];
    ExecMsgKind     kind;
    if (!exec_cpu_input_kind(cpu, args, &kind))
        return !g_atomic_int_get(&cpu->aborted);
    PP_ASSERT(st->input == NULL);
    const void *data = NULL;
    gboolean ok = cpu->transport->ops->recv(cpu->transport, kind, pp_op_kind_name(args->op->kind),
                                            args->op->mb, args->vstage, NULL, &st->input, &data);
    st->input_data = data;
    return ok;
}

static gboolean exec_cpu_poll(ExecBackend *backend, int32_t stage, gboolean block) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    return cpu->transport->ops->poll(cpu->transport, stage, block);
}

static gboolean exec_cpu_has_input(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecMsgKind     kind;
    if (!exec_cpu_input_kind(cpu, args, &kind))
        return TRUE;
    return cpu->transport->ops->has(cpu->transport, kind, args->op->mb, args->vstage);
}

/* The gradient tap: a host copy of every gradient tensor of @v (virtual stage @vs) for the
 * observer, through @st's scratch buffer. */
static void exec_cpu_tap(ExecCpuBackend *cpu, ExecCpuStage *st, int32_t vs, ExecCpuVstage *v) {
    const float *grads = gpt2_slice_grads(v->slice);
    for (int i = 0; i < gpt2_slice_n_tensors(v->slice); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(v->slice, i);
        memcpy(st->tap, grads + t->offset, t->numel * sizeof(float));
        cpu->on_grads(cpu->on_grads_user, vs, t, st->tap);
    }
}

static void exec_cpu_run_update(ExecCpuBackend *cpu, const ExecOpArgs *args, ExecOpReport *report) {
    int32_t       stage = args->op->stage;
    ExecCpuStage *st = &cpu->stages[stage];
    double        sq = 0.0;
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        if (v->stage != stage)
            continue;
        if (cpu->on_grads)
            exec_cpu_tap(cpu, st, vs, v);
        sq += kern_grad_sq_norm(gpt2_slice_grads(v->slice), gpt2_slice_n_params(v->slice));
    }
    report->grad_norm = sqrt(sq);
    report->applied = isfinite(report->grad_norm) && !args->poison;
    float factor =
        args->grad_clip > 0.0f ? kern_clip_factor(report->grad_norm, args->grad_clip) : 1.0f;
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        if (v->stage != stage)
            continue;
        float *grads = gpt2_slice_grads(v->slice);
        if (report->applied) {
            if (factor != 1.0f)
                kern_grad_scale(grads, gpt2_slice_n_params(v->slice), factor);
            kern_optim_step(v->optim, gpt2_slice_params(v->slice), grads, args->lr);
        }
        /* Applied or not, the accumulation window ends here. */
        gpt2_slice_zero_grads(v->slice);
    }
}

/* Runs F, B, W or BW; the loss of a last-vstage F goes to @report. */
static void exec_cpu_run_compute(ExecCpuBackend *cpu, const ExecOpArgs *args,
                                 ExecOpReport *report) {
    const PpOp    *op = args->op;
    ExecCpuStage  *st = &cpu->stages[op->stage];
    ExecCpuVstage *v = &cpu->vstages[args->vstage];
    gboolean       first = args->vstage == 0, last = args->vstage == cpu->n_vstages - 1;
    float         *live = gpt2_slice_params(v->slice);
    size_t         n_params = gpt2_slice_n_params(v->slice);
    switch (op->kind) {
    case PP_OP_FORWARD: {
        int32_t slot = exec_slots_take(&v->slots, op->mb);
        if (first || last)
            cpu->data(cpu->data_user, args->global_mb, st->tokens, st->targets);
        if (args->stash) {
            ExecStash *stash = exec_cpu_stash_find(v, args->version);
            if (!stash) {
                /* A new version: a copy no micro-batch needs any more takes it (no new
                 * allocation, no page faults); else a new copy. */
                for (guint i = 0; i < v->stashes->len && !stash; i++)
                    if (((ExecStash *)g_ptr_array_index(v->stashes, i))->refs == 0)
                        stash = g_ptr_array_index(v->stashes, i);
                if (stash) {
                    memcpy(stash->params, live, n_params * sizeof(float));
                } else {
                    stash = g_new0(ExecStash, 1);
                    stash->params = g_memdup2(live, n_params * sizeof(float));
                    g_ptr_array_add(v->stashes, stash);
                }
                stash->version = args->version;
                report->copied = TRUE;
                /* The schedule declares how many weight copies a stage keeps. */
                PP_ASSERT((int32_t)v->stashes->len <= cpu->weight_versions[v->stage]);
            }
            stash->refs++;
        }
        float *x_out = NULL;
        if (!last)
            x_out = cpu->transport->ops->take(cpu->transport, EXEC_MSG_ACT, op->mb,
                                              args->vstage + 1, NULL, &st->output);
        gpt2_slice_forward(v->slice, live, slot, first ? st->tokens : NULL,
                           first ? NULL : st->input_data, last ? st->targets : NULL, x_out,
                           last ? &report->loss : NULL);
        break;
    }
    case PP_OP_BACKWARD:
    case PP_OP_BACKWARD_FULL: {
        int32_t      slot = exec_slots_find(&v->slots, op->mb);
        ExecStash   *stash = NULL;
        const float *params = live;
        if (args->stash) {
            stash = exec_cpu_stash_find(v, args->version);
            PP_ASSERT(stash != NULL);
            params = stash->params;
        }
        float *dx_in = NULL;
        if (!first)
            dx_in = cpu->transport->ops->take(cpu->transport, EXEC_MSG_GRAD, op->mb,
                                              args->vstage - 1, NULL, &st->output);
        const float *dx_out = last ? NULL : st->input_data;
        if (op->kind == PP_OP_BACKWARD) {
            gpt2_slice_backward_input(v->slice, params, slot, dx_out, args->loss_scale, dx_in);
        } else {
            gpt2_slice_backward(v->slice, params, slot, dx_out, args->loss_scale, dx_in,
                                gpt2_slice_grads(v->slice));
            exec_slots_release(&v->slots, slot);
        }
        /* An unreferenced copy stays until F needs a new version: the next F of this
         * version (the current one in 1F1B's steady state) reuses it instead of copying the
         * weights again. */
        if (stash)
            stash->refs--;
        break;
    }
    case PP_OP_WEIGHT: {
        int32_t slot = exec_slots_find(&v->slots, op->mb);
        gpt2_slice_backward_weight(v->slice, slot, gpt2_slice_grads(v->slice));
        exec_slots_release(&v->slots, slot);
        break;
    }
    case PP_OP_UPDATE:
    case PP_OP_N_KINDS:
        PP_UNREACHABLE();
    }
    if (st->input) {
        cpu->transport->ops->release(cpu->transport, st->input, NULL);
        st->input = NULL;
        st->input_data = NULL;
    }
}

static void exec_cpu_run_op(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecOpReport    report = {.op = *args->op, .vstage = args->vstage};
    report.start_ns = exec_cpu_now_ns(cpu);
    if (args->op->kind == PP_OP_UPDATE)
        exec_cpu_run_update(cpu, args, &report);
    else
        exec_cpu_run_compute(cpu, args, &report);
    report.end_ns = exec_cpu_now_ns(cpu);
    g_array_append_val(cpu->stages[args->op->stage].reports, report);
}

static void exec_cpu_flush(ExecBackend *backend, int32_t stage, ExecStageReport *report) {
    ExecCpuStage *st = &exec_cpu(backend)->stages[stage];
    GArray       *swap = st->flushed;
    /* The CPU ran every op already: handing the list over is the whole flush. */
    st->flushed = st->reports;
    st->reports = swap;
    g_array_set_size(st->reports, 0);
    report->ops = (const ExecOpReport *)(const void *)st->flushed->data;
    report->n_ops = (int32_t)st->flushed->len;
}

static void exec_cpu_reference(ExecBackend *backend, int32_t stage, int64_t *start_ns,
                               int64_t *end_ns) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecCpuStage   *st = &cpu->stages[stage];
    const size_t    a = (size_t)EXEC_CPU_REF_M * EXEC_CPU_REF_K,
                 b = (size_t)EXEC_CPU_REF_K * EXEC_CPU_REF_N;
    if (st->reference == NULL) {
        st->reference = g_new(float, a + b + (size_t)EXEC_CPU_REF_M * EXEC_CPU_REF_N);
        /* Fixed operands in [-1, 1): no denormals, no special values. */
        for (size_t i = 0; i < a + b; i++)
            st->reference[i] = (float)(i % 97) / 48.5f - 1.0f;
    }
    *start_ns = exec_cpu_now_ns(cpu);
    kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, EXEC_CPU_REF_M, EXEC_CPU_REF_N,
              EXEC_CPU_REF_K, 1.0f, st->reference, EXEC_CPU_REF_K, st->reference + a,
              EXEC_CPU_REF_N, 0.0f, st->reference + a + b, EXEC_CPU_REF_N);
    *end_ns = exec_cpu_now_ns(cpu);
}

static void exec_cpu_record_done(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecCpuStage   *st = &cpu->stages[args->op->stage];
    if (!st->output)
        return;
    cpu->transport->ops->send(cpu->transport, st->output, NULL);
    st->output = NULL;
}

/* Wakes every local worker: their waits return FALSE (also the group's stop handler). */
static void exec_cpu_stop(gpointer user_data) {
    ExecCpuBackend *cpu = user_data;
    g_atomic_int_set(&cpu->aborted, 1);
    cpu->transport->ops->abort(cpu->transport);
}

static void exec_cpu_abort(ExecBackend *backend) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    /* With a group, every rank stops (the stop handler wakes this rank's workers). */
    if (cpu->comm)
        exec_comm_stop(cpu->comm);
    else
        exec_cpu_stop(cpu);
}

static gboolean exec_cpu_is_local(ExecBackend *backend, int32_t stage) {
    return exec_cpu_stage_local(exec_cpu(backend), stage);
}

static void exec_cpu_free(ExecBackend *backend) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    if (cpu->comm)
        exec_comm_set_stop_handler(cpu->comm, NULL, NULL);
    if (cpu->transport)
        cpu->transport->ops->free(cpu->transport);
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        gpt2_slice_free(v->slice);
        kern_optim_free(v->optim);
        exec_remote_table_clear(&v->remote);
        exec_slots_clear(&v->slots);
        g_ptr_array_unref(v->stashes);
    }
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        ExecCpuStage *st = &cpu->stages[s];
        g_free(st->tokens);
        g_free(st->targets);
        g_array_unref(st->reports);
        g_array_unref(st->flushed);
        g_free(st->tap);
        g_free(st->reference);
    }
    g_free(cpu->vstages);
    g_free(cpu->stages);
    g_free(cpu->vstage_stage);
    g_free(cpu->weight_versions);
    g_free(cpu->act_slots);
    g_free(cpu->local);
    g_free(cpu);
}

static const ExecBackendOps exec_cpu_ops = {
    .name = "cpu",
    .prepare = exec_cpu_prepare,
    .is_local = exec_cpu_is_local,
    .launch = exec_cpu_launch,
    .wait_for = exec_cpu_wait_for,
    .poll = exec_cpu_poll,
    .has_input = exec_cpu_has_input,
    .run_op = exec_cpu_run_op,
    .record_done = exec_cpu_record_done,
    .flush = exec_cpu_flush,
    .reference = exec_cpu_reference,
    .abort = exec_cpu_abort,
    .n_tensors = exec_cpu_n_tensors,
    .tensor = exec_cpu_tensor,
    .tensor_get = exec_cpu_tensor_get,
    .tensor_set = exec_cpu_tensor_set,
    .get_optim_steps = exec_cpu_get_optim_steps,
    .set_optim_steps = exec_cpu_set_optim_steps,
    .evaluate = exec_cpu_evaluate,
    .memory = NULL, /* host slices from malloc: no arenas of the backend's own to report */
    .free = exec_cpu_free,
};

ExecBackend *exec_backend_cpu_new(const ExecBackendSetup *setup, GError **error) {
    if (setup->comm && exec_comm_size(setup->comm) != setup->n_stages) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "the CPU backend runs one pipeline stage per process: %d stages need %d "
                    "processes, the job has %d",
                    setup->n_stages, setup->n_stages, exec_comm_size(setup->comm));
        return NULL;
    }
    if (setup->devices != NULL) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "run.devices: the cpu backend runs every stage on host threads and has no "
                    "devices; remove the key or use run.backend = cuda");
        return NULL;
    }
    if (setup->precision == EXEC_PRECISION_BF16) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "run.precision = bf16: the cpu backend computes in fp32 only; remove the key, "
                    "set fp32, or use run.backend = cuda");
        return NULL;
    }
    ExecCpuBackend *cpu = g_new0(ExecCpuBackend, 1);
    cpu->base.ops = &exec_cpu_ops;
    cpu->model = setup->model;
    cpu->B = setup->microbatch_size;
    cpu->n_stages = setup->n_stages;
    cpu->n_chunks = setup->n_chunks;
    cpu->n_vstages = setup->n_stages * setup->n_chunks;
    cpu->vstage_stage = g_memdup2(setup->vstage_stage, cpu->n_vstages * sizeof(int32_t));
    cpu->weight_versions = g_memdup2(setup->weight_versions, cpu->n_stages * sizeof(int32_t));
    cpu->act_slots = g_memdup2(setup->act_slots, cpu->n_vstages * sizeof(int32_t));
    cpu->data = setup->data;
    cpu->data_user = setup->data_user;
    cpu->on_grads = setup->on_grads;
    cpu->on_grads_user = setup->on_grads_user;
    cpu->comm = setup->comm;
    cpu->local = g_new(gboolean, cpu->n_stages);
    for (int32_t s = 0; s < cpu->n_stages; s++)
        cpu->local[s] = cpu->comm == NULL || s == exec_comm_rank(cpu->comm);
    PP_ASSERT(setup->partition->n_vstages == cpu->n_vstages);
    cpu->vstages = g_new0(ExecCpuVstage, cpu->n_vstages);
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage  *v = &cpu->vstages[vs];
        Gpt2SliceParams sp = {
            .model = setup->model,
            .layer_begin = setup->partition->layer_begin[vs],
            .layer_end = setup->partition->layer_end[vs],
            .has_embedding = vs == 0,
            .has_head = vs == cpu->n_vstages - 1,
            /* Untied head on every split, even a single stage, so that any partition is the
             * same model. Tying wte and lm_head across stages would need an all-reduce of
             * the tied gradient between the first and last stage before every update. */
            .tie_head = 0,
            .B = setup->microbatch_size,
            .n_act_slots = setup->act_slots[vs],
        };
        v->stage = cpu->vstage_stage[vs];
        if (!exec_cpu_stage_local(cpu, v->stage)) {
            exec_remote_table_build(&v->remote, &sp, &setup->optim);
        } else {
            v->slice = gpt2_slice_new(&sp);
            gpt2_slice_init_params(v->slice, setup->seed);
            v->optim = kern_optim_new(&setup->optim, v->slice);
        }
        exec_slots_init(&v->slots, setup->act_slots[vs]);
        v->stashes = g_ptr_array_new_with_free_func(exec_cpu_stash_free);
    }
    cpu->stages = g_new0(ExecCpuStage, cpu->n_stages);
    size_t bt = (size_t)cpu->B * cpu->model.T;
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        ExecCpuStage *st = &cpu->stages[s];
        st->tokens = g_new(int32_t, bt);
        st->targets = g_new(int32_t, bt);
        st->reports = g_array_new(FALSE, FALSE, sizeof(ExecOpReport));
        st->flushed = g_array_new(FALSE, FALSE, sizeof(ExecOpReport));
    }
    if (cpu->on_grads) {
        for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
            ExecCpuVstage *v = &cpu->vstages[vs];
            size_t         most = 0;
            if (v->slice == NULL)
                continue;
            for (int i = 0; i < gpt2_slice_n_tensors(v->slice); i++)
                most = MAX(most, gpt2_slice_tensor(v->slice, i)->numel);
            ExecCpuStage *st = &cpu->stages[v->stage];
            if (st->tap == NULL || most > st->tap_floats) {
                st->tap = g_renew(float, st->tap, most);
                st->tap_floats = most;
            }
        }
    }
    cpu->t0_ns = 0;
    cpu->t0_ns = exec_cpu_now_ns(cpu);
    cpu->transport =
        exec_transport_queue_new(cpu->n_stages, cpu->n_vstages, cpu->vstage_stage, cpu->local,
                                 exec_cpu_act_floats(cpu) * sizeof(float), cpu->comm);
    if (cpu->comm) {
        exec_comm_set_stop_handler(cpu->comm, exec_cpu_stop, cpu);
        /* One timeline for every rank's op times: rank 0's origin, read on each rank's clock
         * through the offset between the clocks. */
        int64_t offset = 0;
        if (!exec_comm_clock_offset(cpu->comm, &offset, NULL, error) ||
            !exec_comm_bcast(cpu->comm, 0, &cpu->t0_ns, sizeof cpu->t0_ns, "rank 0's time origin",
                             error)) {
            exec_cpu_free(&cpu->base);
            return NULL;
        }
        cpu->t0_ns -= offset;
    }
    return &cpu->base;
}
