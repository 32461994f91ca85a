/* SPDX-License-Identifier: MIT
 * exec-cpu.c: the CPU backend, reference implementation and test double of exec-backend.h.
 * One GThread per local pipeline stage; each stage has an inbox (GAsyncQueue) and a pending
 * table keyed by (kind, mb, vstage) that holds messages arriving before the op that consumes
 * them. Model state per virtual stage: a Gpt2Slice, its KernOptim and the stashed weight
 * copies. Ops run on the worker's thread; their reports (host-clock times, losses, grad norms)
 * wait in a per-stage list for flush().
 * The transport is the one seam between one process and many: a message for a stage of this
 * process goes into its inbox; with a process group (exec-comm.h, one stage per rank) a
 * message for another rank is posted to the group with the tag of (mb, vstage, kind), and the
 * host thread, serving the group while the workers run, files arriving messages into the
 * inboxes. Waits then have the group's deadline.
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

static void exec_cpu_msg_free(gpointer p) {
    ExecMsg *msg = p;
    g_free(msg->data);
    g_free(msg);
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
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        ExecCpuStage *st = &cpu->stages[s];
        PP_ASSERT(st->input == NULL && st->output == NULL);
        /* A previous replay that ended normally left nothing behind; an aborted one may
         * leave messages, dropped here. */
        g_hash_table_remove_all(st->pending);
        for (ExecMsg *msg; (msg = g_async_queue_try_pop(st->inbox)) != NULL;)
            exec_cpu_msg_free(msg);
        st->aborted = FALSE;
        g_array_set_size(st->reports, 0);
        g_array_set_size(st->flushed, 0);
    }
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        exec_slots_reset(&v->slots);
        g_ptr_array_set_size(v->stashes, 0);
    }
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

/* Kind, micro-batch and vstage of the message @args->op consumes; FALSE when it needs none. */
static gboolean exec_cpu_input_key(const ExecCpuBackend *cpu, const ExecOpArgs *args, gint64 *key) {
    const PpOp *op = args->op;
    if (op->kind == PP_OP_FORWARD && args->vstage > 0) {
        *key = exec_backend_msg_key(EXEC_MSG_ACT, op->mb, args->vstage);
        return TRUE;
    }
    if ((op->kind == PP_OP_BACKWARD || op->kind == PP_OP_BACKWARD_FULL) &&
        args->vstage < cpu->n_vstages - 1) {
        *key = exec_backend_msg_key(EXEC_MSG_GRAD, op->mb, args->vstage);
        return TRUE;
    }
    return FALSE;
}

/* Files @msg in @st's pending table, or marks the stage aborted. */
static void exec_cpu_file(ExecCpuStage *st, ExecMsg *msg) {
    if (msg->key == exec_backend_msg_key(EXEC_MSG_ABORT, 0, 0)) {
        exec_cpu_msg_free(msg);
        st->aborted = TRUE;
        return;
    }
    /* A message arrives once per (kind, mb, vstage): validation guarantees one producer. */
    PP_ASSERT(!g_hash_table_contains(st->pending, &msg->key));
    g_hash_table_insert(st->pending, &msg->key, msg);
}

/* What a wait that outlived the group's deadline reports: for wait_for() (@args), the op,
 * the message and the rank that should have sent it; for a blocking poll() of dynamic mode
 * (@args NULL), the stage and its neighbours. */
static GError *exec_cpu_late_error(const ExecCpuBackend *cpu, int32_t stage,
                                   const ExecOpArgs *args) {
    if (args == NULL)
        return exec_backend_late_poll(cpu->comm, stage, cpu->n_stages);
    gboolean act = args->op->kind == PP_OP_FORWARD;
    return exec_backend_late_input(cpu->comm, !act, pp_op_kind_name(args->op->kind), args->op->mb,
                                   args->vstage, cpu->vstage_stage[args->vstage + (act ? -1 : 1)]);
}

/* The next message of @stage's inbox, for @args (NULL: dynamic mode's poll). With a process
 * group the wait has its deadline: past it the group records exec_cpu_late_error(), the
 * replay stops and NULL is returned. */
static ExecMsg *exec_cpu_pop(ExecCpuBackend *cpu, int32_t stage, const ExecOpArgs *args) {
    ExecCpuStage *st = &cpu->stages[stage];
    if (cpu->comm == NULL)
        return g_async_queue_pop(st->inbox);
    ExecMsg *msg = g_async_queue_timeout_pop(
        st->inbox, (guint64)(exec_comm_timeout(cpu->comm) * G_USEC_PER_SEC));
    if (msg == NULL) {
        exec_comm_fail(cpu->comm, exec_cpu_late_error(cpu, stage, args));
        st->aborted = TRUE;
    }
    return msg;
}

static gboolean exec_cpu_wait_for(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecCpuStage   *st = &cpu->stages[args->op->stage];
    gint64          key;
    if (!exec_cpu_input_key(cpu, args, &key))
        return !st->aborted;
    while (!st->aborted) {
        ExecMsg *msg = g_hash_table_lookup(st->pending, &key);
        if (msg) {
            g_hash_table_steal(st->pending, &key);
            st->input = msg;
            return TRUE;
        }
        msg = exec_cpu_pop(cpu, args->op->stage, args);
        if (msg)
            exec_cpu_file(st, msg);
    }
    return FALSE;
}

static gboolean exec_cpu_poll(ExecBackend *backend, int32_t stage, gboolean block) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecCpuStage   *st = &cpu->stages[stage];
    if (block && !st->aborted) {
        ExecMsg *msg = exec_cpu_pop(cpu, stage, NULL);
        if (msg)
            exec_cpu_file(st, msg);
    }
    for (ExecMsg *msg; !st->aborted && (msg = g_async_queue_try_pop(st->inbox)) != NULL;)
        exec_cpu_file(st, msg);
    return !st->aborted;
}

static gboolean exec_cpu_has_input(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    gint64          key;
    if (!exec_cpu_input_key(cpu, args, &key))
        return TRUE;
    return g_hash_table_contains(cpu->stages[args->op->stage].pending, &key);
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
        if (!last)
            st->output = g_new(float, exec_cpu_act_floats(cpu));
        gpt2_slice_forward(v->slice, live, slot, first ? st->tokens : NULL,
                           first ? NULL : st->input->data, last ? st->targets : NULL,
                           last ? NULL : st->output, last ? &report->loss : NULL);
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
        if (!first)
            st->output = g_new(float, exec_cpu_act_floats(cpu));
        const float *dx_out = last ? NULL : st->input->data;
        if (op->kind == PP_OP_BACKWARD) {
            gpt2_slice_backward_input(v->slice, params, slot, dx_out, args->loss_scale,
                                      first ? NULL : st->output);
        } else {
            gpt2_slice_backward(v->slice, params, slot, dx_out, args->loss_scale,
                                first ? NULL : st->output, gpt2_slice_grads(v->slice));
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
        exec_cpu_msg_free(st->input);
        st->input = NULL;
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

/* Hands @data (transfer full) to the worker of @vstage: its inbox, or its rank. */
static void exec_cpu_send(ExecCpuBackend *cpu, ExecMsgKind kind, int32_t mb, int32_t vstage,
                          float *data) {
    int32_t stage = cpu->vstage_stage[vstage];
    if (exec_cpu_stage_local(cpu, stage)) {
        ExecMsg *msg = g_new(ExecMsg, 1);
        msg->key = exec_backend_msg_key(kind, mb, vstage);
        msg->data = data;
        g_async_queue_push(cpu->stages[stage].inbox, msg);
        return;
    }
    int64_t tag = exec_backend_msg_tag(cpu->n_vstages, kind == EXEC_MSG_GRAD, mb, vstage);
    if (tag > exec_comm_tag_max(cpu->comm)) {
        /* Dynamic mode learns a replay's length only as it runs (prepare() checks programs). */
        g_free(data);
        exec_comm_fail(cpu->comm, exec_backend_tag_error(cpu->comm, cpu->n_vstages, mb));
        return;
    }
    exec_comm_post(cpu->comm, EXEC_COMM_DATA, stage, (int32_t)tag, data,
                   exec_cpu_act_floats(cpu) * sizeof(float));
}

/* The group's receiver of activations and gradients (host thread): into the inbox of the
 * local stage holding the message's virtual stage. */
static void exec_cpu_receive(gpointer user_data, int32_t src, int32_t tag, void *data,
                             size_t bytes) {
    ExecCpuBackend *cpu = user_data;
    (void)src;
    gboolean grad;
    int32_t  mb, vstage;
    exec_backend_msg_untag(cpu->n_vstages, tag, &grad, &mb, &vstage);
    /* Sent by exec_cpu_send() of the same program to this rank. */
    PP_ASSERT(bytes == exec_cpu_act_floats(cpu) * sizeof(float));
    PP_ASSERT(exec_cpu_stage_local(cpu, cpu->vstage_stage[vstage]));
    ExecMsg *msg = g_new(ExecMsg, 1);
    msg->key = exec_backend_msg_key(grad ? EXEC_MSG_GRAD : EXEC_MSG_ACT, mb, vstage);
    msg->data = data;
    g_async_queue_push(cpu->stages[cpu->vstage_stage[vstage]].inbox, msg);
}

static void exec_cpu_record_done(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecCpuStage   *st = &cpu->stages[args->op->stage];
    if (!st->output)
        return;
    if (args->op->kind == PP_OP_FORWARD)
        exec_cpu_send(cpu, EXEC_MSG_ACT, args->op->mb, args->vstage + 1, st->output);
    else
        exec_cpu_send(cpu, EXEC_MSG_GRAD, args->op->mb, args->vstage - 1, st->output);
    st->output = NULL;
}

/* Wakes every local worker: its next wait returns FALSE (also the group's stop handler). */
static void exec_cpu_wake_all(gpointer user_data) {
    ExecCpuBackend *cpu = user_data;
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        if (!exec_cpu_stage_local(cpu, s))
            continue;
        ExecMsg *msg = g_new0(ExecMsg, 1);
        msg->key = exec_backend_msg_key(EXEC_MSG_ABORT, 0, 0);
        g_async_queue_push(cpu->stages[s].inbox, msg);
    }
}

static void exec_cpu_abort(ExecBackend *backend) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    /* With a group, every rank stops (the stop handler wakes this rank's workers). */
    if (cpu->comm)
        exec_comm_stop(cpu->comm);
    else
        exec_cpu_wake_all(cpu);
}

static gboolean exec_cpu_is_local(ExecBackend *backend, int32_t stage) {
    return exec_cpu_stage_local(exec_cpu(backend), stage);
}

static void exec_cpu_free(ExecBackend *backend) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    if (cpu->comm) {
        exec_comm_set_receiver(cpu->comm, EXEC_COMM_DATA, NULL, NULL);
        exec_comm_set_stop_handler(cpu->comm, NULL, NULL);
    }
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
        g_hash_table_unref(st->pending);
        g_async_queue_unref(st->inbox);
        if (st->input)
            exec_cpu_msg_free(st->input);
        g_free(st->output);
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
        st->inbox = g_async_queue_new_full(exec_cpu_msg_free);
        st->pending = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, exec_cpu_msg_free);
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
    if (cpu->comm) {
        exec_comm_set_receiver(cpu->comm, EXEC_COMM_DATA, exec_cpu_receive, cpu);
        exec_comm_set_stop_handler(cpu->comm, exec_cpu_wake_all, cpu);
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
