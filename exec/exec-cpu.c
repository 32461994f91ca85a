/* SPDX-License-Identifier: MIT
 * exec-cpu.c: the CPU backend, reference implementation and test double of exec-backend.h.
 * One GThread per pipeline stage; each stage has an inbox (GAsyncQueue) and a pending table
 * keyed by (kind, mb, vstage) that holds messages arriving before the op that consumes them.
 * Model state per virtual stage: a Gpt2Slice, its KernOptim and the stashed weight copies.
 */
#include <math.h>
#include <string.h>

#include "exec.h"
#include "pp-error.h"

typedef enum {
    EXEC_MSG_ACT,   /* activation (B, T, C) for F(mb, vstage) */
    EXEC_MSG_GRAD,  /* gradient (B, T, C) of the x_out of vstage, for B/BW(mb, vstage) */
    EXEC_MSG_ABORT, /* wake-up: the run was aborted */
} ExecMsgKind;

typedef struct {
    gint64 key;  /* exec_cpu_msg_key(kind, mb, vstage): the pending table's key */
    float *data; /* (B, T, C) owned by the message */
} ExecMsg;

/* A stashed weight copy (PipeDream, 2BW) and the micro-batches still needing it. */
typedef struct {
    int32_t version;
    int32_t refs;
    float  *params; /* (n_params) */
} ExecStash;

typedef struct {
    Gpt2Slice *slice;
    KernOptim *optim;
    int32_t    stage;
    int32_t    n_slots;
    int32_t   *slot_mb; /* (n_slots) micro-batch holding each activation slot, -1 free */
    GPtrArray *stashes; /* ExecStash*, at most the stage's weight versions */
} ExecCpuVstage;

typedef struct {
    GAsyncQueue *inbox;   /* ExecMsg* */
    GHashTable  *pending; /* &msg->key -> ExecMsg* */
    gboolean     aborted;
    ExecMsg     *input;   /* taken by wait_for(), consumed by run_op() */
    float       *output;  /* (B, T, C) produced by run_op(), sent by record_done() */
    int32_t     *tokens;  /* (B, T) */
    int32_t     *targets; /* (B, T) */
} ExecCpuStage;

typedef struct {
    ExecBackend    base;
    Gpt2Config     model;
    int32_t        B;
    int32_t        n_stages, n_chunks, n_vstages;
    int32_t       *vstage_stage;    /* (n_vstages) */
    int32_t       *weight_versions; /* (n_stages) */
    ExecDataFn     data;
    gpointer       data_user;
    ExecGradFn     on_grads;
    gpointer       on_grads_user;
    ExecCpuVstage *vstages; /* (n_vstages) */
    ExecCpuStage  *stages;  /* (n_stages) */
} ExecCpuBackend;

static gint64 exec_cpu_msg_key(ExecMsgKind kind, int32_t mb, int32_t vstage) {
    PP_ASSERT(mb >= 0 && vstage >= 0 && vstage < (1 << 20));
    return ((gint64)kind << 56) | ((gint64)mb << 20) | (gint64)vstage;
}

static size_t exec_cpu_act_floats(const ExecCpuBackend *cpu) {
    return (size_t)cpu->B * cpu->model.T * cpu->model.C; /* (B, T, C) */
}

static void exec_cpu_msg_free(gpointer p) {
    ExecMsg *msg = p;
    g_free(msg->data);
    g_free(msg);
}

/* --- activation slots and stashes --- */

static int32_t exec_cpu_slot_find(const ExecCpuVstage *v, int32_t mb) {
    for (int32_t i = 0; i < v->n_slots; i++)
        if (v->slot_mb[i] == mb)
            return i;
    PP_ABORT("no activation slot holds micro-batch %d", mb);
}

static int32_t exec_cpu_slot_take(ExecCpuVstage *v, int32_t mb) {
    for (int32_t i = 0; i < v->n_slots; i++) {
        if (v->slot_mb[i] == -1) {
            v->slot_mb[i] = mb;
            return i;
        }
    }
    /* prepare() checked the schedule's peak against n_slots. */
    PP_ABORT("all %d activation slots busy at F(mb=%d)", v->n_slots, mb);
}

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

static ExecCpuBackend *exec_cpu(ExecBackend *backend) {
    return (ExecCpuBackend *)backend;
}

static gboolean exec_cpu_check(ExecCpuBackend *cpu, const PpSchedule *sched, GError **error) {
    if (sched->n_stages != cpu->n_stages || sched->n_chunks != cpu->n_chunks) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                    "schedule %s has %d stages x %d chunks; the pipeline was built for %d x %d",
                    sched->kind, sched->n_stages, sched->n_chunks, cpu->n_stages, cpu->n_chunks);
        return FALSE;
    }
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        if (sched->vstage_stage[vs] != cpu->vstage_stage[vs]) {
            g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                        "schedule %s places virtual stage %d on stage %d; the pipeline has it "
                        "on stage %d",
                        sched->kind, vs, sched->vstage_stage[vs], cpu->vstage_stage[vs]);
            return FALSE;
        }
    }
    g_autofree int32_t *peak = pp_schedule_vstage_peak_inflight(sched);
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        if (peak[vs] > cpu->vstages[vs].n_slots) {
            g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                        "schedule %s keeps %d micro-batches in flight on virtual stage %d; the "
                        "pipeline has %d activation slots there",
                        sched->kind, peak[vs], vs, cpu->vstages[vs].n_slots);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean exec_cpu_prepare(ExecBackend *backend, const PpSchedule *sched, GError **error) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    if (sched && !exec_cpu_check(cpu, sched, error))
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
    }
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        for (int32_t i = 0; i < v->n_slots; i++)
            v->slot_mb[i] = -1;
        g_ptr_array_set_size(v->stashes, 0);
    }
    return TRUE;
}

typedef struct {
    ExecWorkerFn worker;
    gpointer     user_data;
    int32_t      stage;
} ExecCpuThread;

static gpointer exec_cpu_thread_main(gpointer p) {
    ExecCpuThread *t = p;
    t->worker(t->user_data, t->stage);
    return NULL;
}

static void exec_cpu_launch(ExecBackend *backend, ExecWorkerFn worker, gpointer user_data) {
    ExecCpuBackend           *cpu = exec_cpu(backend);
    g_autofree ExecCpuThread *threads = g_new(ExecCpuThread, cpu->n_stages);
    g_autofree GThread      **handles = g_new(GThread *, cpu->n_stages);
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        threads[s] = (ExecCpuThread){.worker = worker, .user_data = user_data, .stage = s};
        char name[32];
        g_snprintf(name, sizeof name, "pp-stage-%d", s);
        handles[s] = g_thread_new(name, exec_cpu_thread_main, &threads[s]);
    }
    for (int32_t s = 0; s < cpu->n_stages; s++)
        g_thread_join(handles[s]);
}

/* Kind, micro-batch and vstage of the message @args->op consumes; FALSE when it needs none. */
static gboolean exec_cpu_input_key(const ExecCpuBackend *cpu, const ExecOpArgs *args, gint64 *key) {
    const PpOp *op = args->op;
    if (op->kind == PP_OP_FORWARD && args->vstage > 0) {
        *key = exec_cpu_msg_key(EXEC_MSG_ACT, op->mb, args->vstage);
        return TRUE;
    }
    if ((op->kind == PP_OP_BACKWARD || op->kind == PP_OP_BACKWARD_FULL) &&
        args->vstage < cpu->n_vstages - 1) {
        *key = exec_cpu_msg_key(EXEC_MSG_GRAD, op->mb, args->vstage);
        return TRUE;
    }
    return FALSE;
}

/* Files @msg in @st's pending table, or marks the stage aborted. */
static void exec_cpu_file(ExecCpuStage *st, ExecMsg *msg) {
    if (msg->key == exec_cpu_msg_key(EXEC_MSG_ABORT, 0, 0)) {
        exec_cpu_msg_free(msg);
        st->aborted = TRUE;
        return;
    }
    /* A message arrives once per (kind, mb, vstage): validation guarantees one producer. */
    PP_ASSERT(!g_hash_table_contains(st->pending, &msg->key));
    g_hash_table_insert(st->pending, &msg->key, msg);
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
        exec_cpu_file(st, g_async_queue_pop(st->inbox));
    }
    return FALSE;
}

static gboolean exec_cpu_poll(ExecBackend *backend, int32_t stage, gboolean block) {
    ExecCpuStage *st = &exec_cpu(backend)->stages[stage];
    if (block && !st->aborted)
        exec_cpu_file(st, g_async_queue_pop(st->inbox));
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

static void exec_cpu_run_update(ExecCpuBackend *cpu, const ExecOpArgs *args, ExecOpResult *result) {
    int32_t stage = args->op->stage;
    double  sq = 0.0;
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        if (v->stage != stage)
            continue;
        float *grads = gpt2_slice_grads(v->slice);
        if (cpu->on_grads)
            cpu->on_grads(cpu->on_grads_user, vs, v->slice, grads);
        sq += kern_grad_sq_norm(grads, gpt2_slice_n_params(v->slice));
    }
    result->grad_norm = sqrt(sq);
    result->applied = isfinite(result->grad_norm) && !args->poison;
    float factor =
        args->grad_clip > 0.0f ? kern_clip_factor(result->grad_norm, args->grad_clip) : 1.0f;
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        if (v->stage != stage)
            continue;
        float *grads = gpt2_slice_grads(v->slice);
        if (result->applied) {
            if (factor != 1.0f)
                kern_grad_scale(grads, gpt2_slice_n_params(v->slice), factor);
            kern_optim_step(v->optim, gpt2_slice_params(v->slice), grads, args->lr);
        }
        /* Applied or not, the accumulation window ends here. */
        gpt2_slice_zero_grads(v->slice);
    }
}

static void exec_cpu_run_op(ExecBackend *backend, const ExecOpArgs *args, ExecOpResult *result) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    const PpOp     *op = args->op;
    ExecCpuStage   *st = &cpu->stages[op->stage];
    memset(result, 0, sizeof *result);
    if (op->kind == PP_OP_UPDATE) {
        exec_cpu_run_update(cpu, args, result);
        return;
    }
    ExecCpuVstage *v = &cpu->vstages[args->vstage];
    gboolean       first = args->vstage == 0, last = args->vstage == cpu->n_vstages - 1;
    float         *live = gpt2_slice_params(v->slice);
    size_t         n_params = gpt2_slice_n_params(v->slice);
    switch (op->kind) {
    case PP_OP_FORWARD: {
        int32_t slot = exec_cpu_slot_take(v, op->mb);
        if (first || last)
            cpu->data(cpu->data_user, args->global_mb, st->tokens, st->targets);
        if (args->stash) {
            ExecStash *stash = exec_cpu_stash_find(v, args->version);
            if (!stash) {
                stash = g_new0(ExecStash, 1);
                stash->version = args->version;
                stash->params = g_memdup2(live, n_params * sizeof(float));
                g_ptr_array_add(v->stashes, stash);
                /* The schedule declares how many weight copies a stage keeps. */
                PP_ASSERT((int32_t)v->stashes->len <= cpu->weight_versions[v->stage]);
            }
            stash->refs++;
        }
        if (!last)
            st->output = g_new(float, exec_cpu_act_floats(cpu));
        gpt2_slice_forward(v->slice, live, slot, first ? st->tokens : NULL,
                           first ? NULL : st->input->data, last ? st->targets : NULL,
                           last ? NULL : st->output, last ? &result->loss : NULL);
        break;
    }
    case PP_OP_BACKWARD:
    case PP_OP_BACKWARD_FULL: {
        int32_t      slot = exec_cpu_slot_find(v, op->mb);
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
            v->slot_mb[slot] = -1;
        }
        if (stash && --stash->refs == 0)
            g_ptr_array_remove_fast(v->stashes, stash);
        break;
    }
    case PP_OP_WEIGHT: {
        int32_t slot = exec_cpu_slot_find(v, op->mb);
        gpt2_slice_backward_weight(v->slice, slot, gpt2_slice_grads(v->slice));
        v->slot_mb[slot] = -1;
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

static void exec_cpu_send(ExecCpuBackend *cpu, ExecMsgKind kind, int32_t mb, int32_t vstage,
                          float *data) {
    ExecMsg *msg = g_new(ExecMsg, 1);
    msg->key = exec_cpu_msg_key(kind, mb, vstage);
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

static void exec_cpu_abort(ExecBackend *backend) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    for (int32_t s = 0; s < cpu->n_stages; s++) {
        ExecMsg *msg = g_new0(ExecMsg, 1);
        msg->key = exec_cpu_msg_key(EXEC_MSG_ABORT, 0, 0);
        g_async_queue_push(cpu->stages[s].inbox, msg);
    }
}

static Gpt2Slice *exec_cpu_slice(ExecBackend *backend, int32_t vstage) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    PP_ASSERT(vstage >= 0 && vstage < cpu->n_vstages);
    return cpu->vstages[vstage].slice;
}

static KernOptim *exec_cpu_optim(ExecBackend *backend, int32_t vstage) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    PP_ASSERT(vstage >= 0 && vstage < cpu->n_vstages);
    return cpu->vstages[vstage].optim;
}

static void exec_cpu_free(ExecBackend *backend) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        gpt2_slice_free(v->slice);
        kern_optim_free(v->optim);
        g_free(v->slot_mb);
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
    }
    g_free(cpu->vstages);
    g_free(cpu->stages);
    g_free(cpu->vstage_stage);
    g_free(cpu->weight_versions);
    g_free(cpu);
}

static const ExecBackendOps exec_cpu_ops = {
    .name = "cpu",
    .prepare = exec_cpu_prepare,
    .launch = exec_cpu_launch,
    .wait_for = exec_cpu_wait_for,
    .poll = exec_cpu_poll,
    .has_input = exec_cpu_has_input,
    .run_op = exec_cpu_run_op,
    .record_done = exec_cpu_record_done,
    .abort = exec_cpu_abort,
    .slice = exec_cpu_slice,
    .optim = exec_cpu_optim,
    .free = exec_cpu_free,
};

ExecBackend *exec_backend_cpu_new(const ExecBackendSetup *setup) {
    ExecCpuBackend *cpu = g_new0(ExecCpuBackend, 1);
    cpu->base.ops = &exec_cpu_ops;
    cpu->model = setup->model;
    cpu->B = setup->microbatch_size;
    cpu->n_stages = setup->n_stages;
    cpu->n_chunks = setup->n_chunks;
    cpu->n_vstages = setup->n_stages * setup->n_chunks;
    cpu->vstage_stage = g_memdup2(setup->vstage_stage, cpu->n_vstages * sizeof(int32_t));
    cpu->weight_versions = g_memdup2(setup->weight_versions, cpu->n_stages * sizeof(int32_t));
    cpu->data = setup->data;
    cpu->data_user = setup->data_user;
    cpu->on_grads = setup->on_grads;
    cpu->on_grads_user = setup->on_grads_user;
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
        v->slice = gpt2_slice_new(&sp);
        gpt2_slice_init_params(v->slice, setup->seed);
        v->optim = kern_optim_new(&setup->optim, v->slice);
        v->stage = cpu->vstage_stage[vs];
        v->n_slots = setup->act_slots[vs];
        v->slot_mb = g_new(int32_t, v->n_slots);
        for (int32_t i = 0; i < v->n_slots; i++)
            v->slot_mb[i] = -1;
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
    }
    return &cpu->base;
}
