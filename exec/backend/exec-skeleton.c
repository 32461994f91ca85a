/* SPDX-License-Identifier: MIT
 * exec-skeleton.c: the device-independent part of every backend (exec-skeleton.h): workers
 * (one GThread per local stage; with a process group the host thread serves the group while
 * they run), message routing through the transport, the stages' report lists and the
 * construction steps every backend shares.
 */
#include "exec-skeleton.h"

#include <time.h>

#include "pp-error.h"

int64_t exec_skeleton_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- construction and teardown --- */

/* Grows the gradient tap buffer of local virtual stage @vs's stage to its largest tensor. */
static void exec_skeleton_tap_fit(ExecSkeleton *skel, int32_t vs) {
    const ExecVstageLayout *v = exec_skeleton_vstage_layout(skel, vs);
    ExecSkeletonStage      *st = &skel->stages[skel->vstage_stage[vs]];
    for (int i = 0; i < v->n_tensors; i++)
        st->tap_floats = MAX(st->tap_floats, v->tensors[i].numel);
    st->tap = g_renew(float, st->tap, MAX(st->tap_floats, 1));
}

gboolean exec_skeleton_init(ExecSkeleton *skel, const ExecBackendOps *ops, const char *what,
                            const ExecBackendSetup *setup, GError **error) {
    skel->base.ops = ops;
    skel->parallel = exec_parallel_resolve(&setup->parallel);
    int32_t replicas = skel->parallel.replicas;
    if (setup->comm && exec_comm_size(setup->comm) != setup->n_stages * replicas) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "%s runs one pipeline stage per process: %d replicas of %d stages need %d "
                    "processes, the job has %d",
                    what, replicas, setup->n_stages, setup->n_stages * replicas,
                    exec_comm_size(setup->comm));
        return FALSE;
    }
    PP_ASSERT(setup->layout->n_vstages == setup->n_stages * setup->n_chunks);
    skel->layout = exec_model_layout_ref(setup->layout);
    skel->n_stages = setup->n_stages;
    skel->n_chunks = setup->n_chunks;
    skel->n_vstages = setup->n_stages * setup->n_chunks;
    skel->vstage_stage = g_memdup2(setup->vstage_stage, (gsize)skel->n_vstages * sizeof(int32_t));
    skel->weight_versions =
        g_memdup2(setup->weight_versions, (gsize)skel->n_stages * sizeof(int32_t));
    skel->act_slots = g_new(int32_t, skel->n_vstages);
    for (int32_t vs = 0; vs < skel->n_vstages; vs++)
        skel->act_slots[vs] = exec_layout_slice_params(skel->layout, vs)->n_act_slots;
    skel->data = setup->data;
    skel->data_user = setup->data_user;
    skel->on_grads = setup->on_grads;
    skel->on_grads_user = setup->on_grads_user;
    skel->comm = setup->comm;
    skel->local = g_new(gboolean, skel->n_stages);
    skel->stages = g_new0(ExecSkeletonStage, skel->n_stages);
    size_t bt = skel->layout->batch_tokens;
    for (int32_t s = 0; s < skel->n_stages; s++) {
        ExecSkeletonStage *st = &skel->stages[s];
        skel->local[s] = skel->comm == NULL || s == exec_comm_stage(skel->comm);
        st->tokens = g_new(int32_t, bt);
        st->targets = g_new(int32_t, bt);
        st->reports = g_array_new(FALSE, FALSE, sizeof(ExecOpReport));
        st->flushed = g_array_new(FALSE, FALSE, sizeof(ExecOpReport));
    }
    skel->vstages = g_new0(ExecSkeletonVstage, skel->n_vstages);
    for (int32_t vs = 0; vs < skel->n_vstages; vs++) {
        skel->vstages[vs].stage = skel->vstage_stage[vs];
        exec_slots_init(&skel->vstages[vs].slots, skel->act_slots[vs]);
        exec_stashes_init(&skel->vstages[vs].stashes,
                          skel->weight_versions[skel->vstage_stage[vs]]);
        if (skel->on_grads && skel->local[skel->vstage_stage[vs]])
            exec_skeleton_tap_fit(skel, vs);
    }
    return TRUE;
}

void exec_skeleton_clear(ExecSkeleton *skel) {
    if (skel->comm)
        exec_comm_set_stop_handler(skel->comm, NULL, NULL);
    if (skel->transport)
        skel->transport->ops->free(skel->transport);
    skel->transport = NULL;
    for (int32_t vs = 0; skel->vstages && vs < skel->n_vstages; vs++) {
        exec_slots_clear(&skel->vstages[vs].slots);
        exec_stashes_clear(&skel->vstages[vs].stashes);
    }
    for (int32_t s = 0; skel->stages && s < skel->n_stages; s++) {
        ExecSkeletonStage *st = &skel->stages[s];
        g_free(st->tokens);
        g_free(st->targets);
        g_array_unref(st->reports);
        g_array_unref(st->flushed);
        g_free(st->tap);
    }
    g_clear_pointer(&skel->vstages, g_free);
    g_clear_pointer(&skel->stages, g_free);
    g_clear_pointer(&skel->vstage_stage, g_free);
    g_clear_pointer(&skel->weight_versions, g_free);
    g_clear_pointer(&skel->act_slots, g_free);
    g_clear_pointer(&skel->local, g_free);
    g_clear_pointer(&skel->layout, exec_model_layout_unref);
}

/* Wakes every local worker: their waits return FALSE (also the group's stop handler). */
static void exec_skeleton_stop(gpointer user_data) {
    ExecSkeleton *skel = user_data;
    g_atomic_int_set(&skel->aborted, 1);
    skel->transport->ops->abort(skel->transport);
}

gboolean exec_skeleton_start(ExecSkeleton *skel, GError **error) {
    PP_ASSERT(skel->transport != NULL);
    skel->t0_ns = exec_skeleton_clock_ns();
    if (skel->comm) {
        exec_comm_set_stop_handler(skel->comm, exec_skeleton_stop, skel);
        /* One timeline for every rank's op times: rank 0's origin, read on each rank's clock
         * through the offset between the clocks. */
        int64_t offset = 0;
        if (!exec_comm_clock_offset(skel->comm, &offset, NULL, error) ||
            !exec_comm_bcast(skel->comm, 0, &skel->t0_ns, sizeof skel->t0_ns,
                             "rank 0's time origin", error))
            return FALSE;
        skel->t0_ns -= offset;
    }
    return exec_skeleton_prepare(skel, NULL, error);
}

gboolean exec_skeleton_prepare(ExecSkeleton *skel, const PpSchedule *sched, GError **error) {
    if (sched && (!exec_backend_check_schedule(sched, skel->n_stages, skel->n_chunks,
                                               skel->vstage_stage, skel->act_slots, error) ||
                  !exec_backend_check_tags(skel->comm, skel->n_vstages, sched, error)))
        return FALSE;
    /* A previous replay that ended normally left nothing behind; an aborted one may leave
     * messages, dropped with the transport's (and what its workers had taken with them). */
    skel->transport->ops->reset(skel->transport);
    for (int32_t s = 0; s < skel->n_stages; s++) {
        ExecSkeletonStage *st = &skel->stages[s];
        st->input = NULL;
        st->input_data = NULL;
        st->output = NULL;
        g_array_set_size(st->reports, 0);
        g_array_set_size(st->flushed, 0);
    }
    for (int32_t vs = 0; vs < skel->n_vstages; vs++) {
        exec_slots_reset(&skel->vstages[vs].slots);
        exec_stashes_reset(&skel->vstages[vs].stashes);
    }
    g_atomic_int_set(&skel->aborted, 0);
    return TRUE;
}

gboolean exec_skeleton_evaluate(ExecSkeleton *skel, size_t msg_bytes, ExecSkeletonEvalFn step,
                                const int32_t *tokens, const int32_t *targets, float *loss,
                                GError **error) {
    /* (msg_bytes) the activation in from and out to another rank; with a group only */
    g_autofree void *in = skel->comm ? g_malloc(msg_bytes) : NULL;
    g_autofree void *out = skel->comm ? g_malloc(msg_bytes) : NULL;
    /* Replicas hold the same weights: replica 0 forwards, and its loss is every rank's. */
    gboolean forwards = skel->parallel.replica == 0;
    for (int32_t vs = 0; forwards && vs < skel->n_vstages; vs++) {
        gboolean first = vs == 0, last = vs == skel->n_vstages - 1;
        if (!skel->local[skel->vstage_stage[vs]])
            continue; /* another rank's */
        gboolean from_rank = !first && !skel->local[skel->vstage_stage[vs - 1]];
        gboolean to_rank = !last && !skel->local[skel->vstage_stage[vs + 1]];
        if (from_rank) {
            g_autofree char *what =
                g_strdup_printf("the activation of virtual stage %d for validation", vs);
            if (!exec_comm_recv(skel->comm,
                                exec_comm_stage_rank(skel->comm, skel->vstage_stage[vs - 1]), vs,
                                in, msg_bytes, what, error))
                return FALSE;
        }
        step(skel, vs, tokens, targets, from_rank ? in : NULL, to_rank ? out : NULL,
             last ? loss : NULL);
        if (to_rank) {
            g_autofree char *what =
                g_strdup_printf("the activation of virtual stage %d for validation", vs + 1);
            if (!exec_comm_send(skel->comm,
                                exec_comm_stage_rank(skel->comm, skel->vstage_stage[vs + 1]),
                                vs + 1, out, msg_bytes, what, error))
                return FALSE;
        }
    }
    /* The loss, from the rank of replica 0's last virtual stage to every rank. */
    if (skel->comm == NULL)
        return TRUE;
    int32_t root = exec_comm_layout_rank(skel->comm, 0, skel->vstage_stage[skel->n_vstages - 1]);
    return exec_comm_bcast(skel->comm, root, loss, sizeof *loss, "the validation loss", error);
}

/* --- workers --- */

gboolean exec_skeleton_is_local(ExecBackend *backend, int32_t stage) {
    ExecSkeleton *skel = exec_skeleton(backend);
    PP_ASSERT(stage >= 0 && stage < skel->n_stages);
    return skel->local[stage];
}

typedef struct {
    ExecWorkerFn  worker;
    gpointer      user_data;
    int32_t       stage;
    ExecSkeleton *skel;
    gint         *running; /* workers still running (atomic) */
} ExecSkeletonThread;

static gpointer exec_skeleton_thread_main(gpointer p) {
    ExecSkeletonThread *t = p;
    if (t->skel->enter)
        t->skel->enter(t->skel, t->stage);
    t->worker(t->user_data, t->stage);
    g_atomic_int_dec_and_test(t->running);
    if (t->skel->comm)
        exec_comm_wake(t->skel->comm);
    return NULL;
}

void exec_skeleton_launch(ExecBackend *backend, ExecWorkerFn worker, gpointer user_data) {
    ExecSkeleton                  *skel = exec_skeleton(backend);
    g_autofree ExecSkeletonThread *threads = g_new(ExecSkeletonThread, skel->n_stages);
    g_autofree GThread           **handles = g_new0(GThread *, skel->n_stages);
    gint                           running = 0;
    for (int32_t s = 0; s < skel->n_stages; s++)
        running += skel->local[s];
    for (int32_t s = 0; s < skel->n_stages; s++) {
        if (!skel->local[s])
            continue;
        threads[s] = (ExecSkeletonThread){.worker = worker,
                                          .user_data = user_data,
                                          .stage = s,
                                          .skel = skel,
                                          .running = &running};
        char name[32];
        g_snprintf(name, sizeof name, "pp-stage-%d", s);
        handles[s] = g_thread_new(name, exec_skeleton_thread_main, &threads[s]);
    }
    /* The host thread moves messages between processes while the workers compute. */
    if (skel->comm)
        exec_comm_serve(skel->comm, &running);
    for (int32_t s = 0; s < skel->n_stages; s++) {
        if (handles[s])
            g_thread_join(handles[s]);
    }
}

/* --- messages --- */

/* Kind of the message @args->op consumes; FALSE when it needs none. */
static gboolean exec_skeleton_input_kind(const ExecSkeleton *skel, const ExecOpArgs *args,
                                         ExecMsgKind *kind) {
    PpOpKind k = args->op->kind;
    if (k == PP_OP_FORWARD && args->vstage > 0) {
        *kind = EXEC_MSG_ACT;
        return TRUE;
    }
    if ((k == PP_OP_BACKWARD || k == PP_OP_BACKWARD_FULL) && args->vstage < skel->n_vstages - 1) {
        *kind = EXEC_MSG_GRAD;
        return TRUE;
    }
    return FALSE;
}

gboolean exec_skeleton_wait_for(ExecBackend *backend, const ExecOpArgs *args) {
    ExecSkeleton      *skel = exec_skeleton(backend);
    ExecSkeletonStage *st = &skel->stages[args->op->stage];
    ExecMsgKind        kind;
    if (!exec_skeleton_input_kind(skel, args, &kind))
        return !g_atomic_int_get(&skel->aborted);
    PP_ASSERT(st->input == NULL);
    return skel->transport->ops->recv(skel->transport, kind, pp_op_kind_name(args->op->kind),
                                      args->op->mb, args->vstage, st->queue, &st->input,
                                      &st->input_data);
}

gboolean exec_skeleton_poll(ExecBackend *backend, int32_t stage, gboolean block) {
    ExecSkeleton *skel = exec_skeleton(backend);
    return skel->transport->ops->poll(skel->transport, stage, block);
}

gboolean exec_skeleton_has_input(ExecBackend *backend, const ExecOpArgs *args) {
    ExecSkeleton *skel = exec_skeleton(backend);
    ExecMsgKind   kind;
    if (!exec_skeleton_input_kind(skel, args, &kind))
        return TRUE;
    return skel->transport->ops->has(skel->transport, kind, args->op->mb, args->vstage);
}

void exec_skeleton_record_done(ExecBackend *backend, const ExecOpArgs *args) {
    ExecSkeleton      *skel = exec_skeleton(backend);
    ExecSkeletonStage *st = &skel->stages[args->op->stage];
    if (!st->output)
        return;
    skel->transport->ops->send(skel->transport, st->output, st->queue);
    st->output = NULL;
}

void exec_skeleton_abort(ExecBackend *backend) {
    ExecSkeleton *skel = exec_skeleton(backend);
    /* With a group, every rank stops (the stop handler wakes this rank's workers). */
    if (skel->comm)
        exec_comm_stop(skel->comm);
    else
        exec_skeleton_stop(skel);
}

/* --- ops --- */

ExecOpReport *exec_skeleton_report(ExecSkeleton *skel, const ExecOpArgs *args) {
    GArray      *reports = skel->stages[args->op->stage].reports;
    ExecOpReport report = {.op = *args->op, .vstage = args->vstage};
    g_array_append_val(reports, report);
    return &g_array_index(reports, ExecOpReport, reports->len - 1);
}

void exec_skeleton_release_input(ExecSkeleton *skel, int32_t stage) {
    ExecSkeletonStage *st = &skel->stages[stage];
    if (!st->input)
        return;
    skel->transport->ops->release(skel->transport, st->input, st->queue);
    st->input = NULL;
    st->input_data = NULL;
}

void exec_skeleton_flush(ExecSkeleton *skel, int32_t stage, ExecStageReport *report) {
    ExecSkeletonStage *st = &skel->stages[stage];
    GArray            *swap = st->flushed;
    st->flushed = st->reports;
    st->reports = swap;
    g_array_set_size(st->reports, 0);
    report->ops = (const ExecOpReport *)(const void *)st->flushed->data;
    report->n_ops = (int32_t)st->flushed->len;
}
