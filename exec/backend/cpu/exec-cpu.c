/* SPDX-License-Identifier: MIT
 * exec-cpu.c: the CPU backend, reference implementation and test double of exec-backend.h:
 * the device part over the skeleton (exec-skeleton.h: one GThread per local stage, messages
 * through the host-queue transport, reports, slots). Model state per virtual stage: a
 * Gpt2Slice, its KernOptim and the stashed weight copies. Ops run on the worker's thread and
 * are timed by the host clock; their reports wait in the skeleton's per-stage list for flush().
 */
#include <string.h>

#include "exec-cpu-private.h"
#include "kern-gemm.h"
#include "pp-error.h"

/* ns since the backend's time origin. */
static int64_t exec_cpu_now_ns(const ExecCpuBackend *cpu) {
    return exec_skeleton_clock_ns() - cpu->skel.t0_ns;
}

/* --- vtable --- */

static gboolean exec_cpu_prepare(ExecBackend *backend, const PpSchedule *sched, GError **error) {
    /* The stashed copies stay allocated; the skeleton empties their bookkeeping. */
    return exec_skeleton_prepare(&exec_cpu(backend)->skel, sched, error);
}

/* U. With a sharded optimizer (ZeRO-1) the pipeline gives the norm and the step reads and
 * scales the optimizer's range of the gradients only (the rest is another replica's). */
static void exec_cpu_run_update(ExecCpuBackend *cpu, const ExecOpArgs *args, ExecOpReport *report) {
    int32_t stage = args->op->stage;
    double  sq = args->sharded ? args->sq_norm : 0.0;
    for (int32_t vs = 0; vs < cpu->skel.n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        if (cpu->skel.vstage_stage[vs] != stage)
            continue;
        if (cpu->skel.on_grads)
            exec_skeleton_tap(&cpu->skel, vs);
        if (!args->sharded)
            sq += kern_grad_sq_norm(gpt2_slice_grads(v->slice), gpt2_slice_n_params(v->slice));
    }
    float factor = exec_skeleton_update_gate(sq, args, report);
    for (int32_t vs = 0; vs < cpu->skel.n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        if (cpu->skel.vstage_stage[vs] != stage)
            continue;
        float *grads = gpt2_slice_grads(v->slice);
        size_t lo, hi;
        kern_optim_range(v->optim, &lo, &hi);
        if (report->applied) {
            if (factor != 1.0f)
                kern_grad_scale(grads + lo, hi - lo, factor);
            kern_optim_step(v->optim, gpt2_slice_params(v->slice), grads, args->lr);
        }
        /* Applied or not, the accumulation window ends here. */
        gpt2_slice_zero_grads(v->slice);
    }
}

/* F with the live weights, stashing them first when the schedule does and no copy holds this
 * version yet (a copy no micro-batch needs takes it; allocated when first filled). Returns
 * whether it copied the weights. */
static gboolean exec_cpu_run_forward(ExecCpuBackend *cpu, const ExecOpArgs *args,
                                     ExecOpReport *report) {
    const PpOp        *op = args->op;
    ExecSkeletonStage *st = &cpu->skel.stages[op->stage];
    ExecCpuVstage     *v = &cpu->vstages[args->vstage];
    ExecSlots         *slots = &cpu->skel.vstages[args->vstage].slots;
    gboolean           first = args->vstage == 0, last = args->vstage == cpu->skel.n_vstages - 1;
    float             *live = gpt2_slice_params(v->slice);
    size_t             n_params = gpt2_slice_n_params(v->slice);
    gboolean           copied = FALSE;
    int32_t            slot = exec_slots_take(slots, op->mb);
    exec_skeleton_load_batch(&cpu->skel, args);
    if (args->stash) {
        int32_t i =
            exec_stashes_acquire(&cpu->skel.vstages[args->vstage].stashes, args->version, &copied);
        if (copied) {
            if (v->stash[i] == NULL)
                v->stash[i] = g_new(float, n_params);
            memcpy(v->stash[i], live, n_params * sizeof(float));
        }
    }
    gpt2_slice_forward(v->slice, live, slot, first ? st->tokens : NULL,
                       first ? NULL : st->input_data, last ? st->targets : NULL,
                       exec_skeleton_take_output(&cpu->skel, args), last ? &report->loss : NULL);
    return copied;
}

/* B or BW with the weights of its F (stashed) or the live ones; W: weight gradients of a B's
 * slot. */
static void exec_cpu_run_backward(ExecCpuBackend *cpu, const ExecOpArgs *args) {
    const PpOp        *op = args->op;
    ExecSkeletonStage *st = &cpu->skel.stages[op->stage];
    ExecCpuVstage     *v = &cpu->vstages[args->vstage];
    ExecSlots         *slots = &cpu->skel.vstages[args->vstage].slots;
    gboolean           last = args->vstage == cpu->skel.n_vstages - 1;
    int32_t            slot = exec_slots_find(slots, op->mb);
    if (op->kind == PP_OP_WEIGHT) {
        gpt2_slice_backward_weight(v->slice, slot, gpt2_slice_grads(v->slice));
        exec_slots_release(slots, slot);
        return;
    }
    ExecStashes *stashes = &cpu->skel.vstages[args->vstage].stashes;
    int32_t      stash = args->stash ? exec_stashes_find(stashes, args->version) : -1;
    const float *params = stash >= 0 ? v->stash[stash] : gpt2_slice_params(v->slice);
    float       *dx_in = exec_skeleton_take_output(&cpu->skel, args);
    const float *dx_out = last ? NULL : st->input_data;
    if (op->kind == PP_OP_BACKWARD) {
        gpt2_slice_backward_input(v->slice, params, slot, dx_out, args->loss_scale, dx_in);
    } else {
        gpt2_slice_backward(v->slice, params, slot, dx_out, args->loss_scale, dx_in,
                            gpt2_slice_grads(v->slice));
        exec_slots_release(slots, slot);
    }
    /* An unreferenced copy stays until F needs a new version: the next F of this version (the
     * current one in 1F1B's steady state) reuses it instead of copying the weights again. */
    if (stash >= 0)
        exec_stashes_release(stashes, stash);
}

static void exec_cpu_run_op(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecOpReport   *report = exec_skeleton_report(&cpu->skel, args);
    report->start_ns = exec_cpu_now_ns(cpu);
    switch (args->op->kind) {
    case PP_OP_UPDATE:
        exec_cpu_run_update(cpu, args, report);
        break;
    case PP_OP_FORWARD:
        report->copied = exec_cpu_run_forward(cpu, args, report);
        break;
    case PP_OP_BACKWARD:
    case PP_OP_BACKWARD_FULL:
    case PP_OP_WEIGHT:
        exec_cpu_run_backward(cpu, args);
        break;
    case PP_OP_N_KINDS:
        PP_UNREACHABLE();
    }
    exec_skeleton_release_input(&cpu->skel, args->op->stage);
    report->end_ns = exec_cpu_now_ns(cpu);
}

static void exec_cpu_flush(ExecBackend *backend, int32_t stage, ExecStageReport *report) {
    /* The CPU ran every op already: handing the list over is the whole flush. */
    exec_skeleton_flush(&exec_cpu(backend)->skel, stage, report);
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

static void exec_cpu_free(ExecBackend *backend) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    for (int32_t vs = 0; cpu->vstages && vs < cpu->skel.n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        gpt2_slice_free(v->slice);
        kern_optim_free(v->optim);
        for (int32_t i = 0; v->stash && i < cpu->skel.vstages[vs].stashes.n; i++)
            g_free(v->stash[i]);
        g_free(v->stash);
    }
    for (int32_t s = 0; cpu->stages && s < cpu->skel.n_stages; s++)
        g_free(cpu->stages[s].reference);
    exec_skeleton_clear(&cpu->skel);
    g_free(cpu->eval[0]);
    g_free(cpu->eval[1]);
    g_free(cpu->vstages);
    g_free(cpu->stages);
    g_free(cpu);
}

static const ExecBackendOps exec_cpu_ops = {
    EXEC_SKELETON_OPS,
    .name = "cpu",
    .prepare = exec_cpu_prepare,
    .run_op = exec_cpu_run_op,
    .flush = exec_cpu_flush,
    .reference = exec_cpu_reference,
    .grads = exec_cpu_grads,
    .params = exec_cpu_params,
    .evaluate = exec_cpu_evaluate,
    .memory = NULL, /* host slices from malloc: no arenas of the backend's own to report */
    .free = exec_cpu_free,
};

ExecBackend *exec_backend_cpu_new(const ExecBackendSetup *setup, GError **error) {
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
    ExecSkeleton   *skel = &cpu->skel;
    if (!exec_skeleton_init(skel, &exec_cpu_ops, "the CPU backend", setup, error)) {
        exec_cpu_free(&skel->base);
        return NULL;
    }
    skel->state = &exec_cpu_state_ops;
    cpu->vstages = g_new0(ExecCpuVstage, skel->n_vstages);
    for (int32_t vs = 0; vs < skel->n_vstages; vs++) {
        ExecCpuVstage  *v = &cpu->vstages[vs];
        Gpt2SliceParams sp = {
            .model = setup->model,
            .layer_begin = setup->partition->layer_begin[vs],
            .layer_end = setup->partition->layer_end[vs],
            .has_embedding = vs == 0,
            .has_head = vs == skel->n_vstages - 1,
            /* Untied head on every split, even a single stage, so that any partition is the
             * same model. Tying wte and lm_head across stages would need an all-reduce of
             * the tied gradient between the first and last stage before every update. */
            .tie_head = 0,
            .B = setup->microbatch_size,
            .n_act_slots = setup->act_slots[vs],
        };
        int32_t stage = skel->vstage_stage[vs];
        if (!skel->local[stage]) {
            exec_remote_table_build(&skel->vstages[vs].remote, &sp, &setup->optim);
        } else {
            v->slice = gpt2_slice_new(&sp);
            gpt2_slice_init_params(v->slice, setup->seed);
            v->optim = kern_optim_new(&setup->optim, v->slice);
            for (int i = 0; skel->on_grads && i < gpt2_slice_n_tensors(v->slice); i++)
                exec_skeleton_tap_fit(skel, stage, gpt2_slice_tensor(v->slice, i)->numel);
        }
        v->stash = g_new0(float *, MAX(skel->vstages[vs].stashes.n, 1));
    }
    cpu->stages = g_new0(ExecCpuStage, skel->n_stages);
    skel->transport =
        exec_transport_queue_new(skel->n_stages, skel->n_vstages, skel->vstage_stage, skel->local,
                                 exec_cpu_act_floats(cpu) * sizeof(float), skel->comm);
    if (!exec_skeleton_start(skel, error)) {
        exec_cpu_free(&skel->base);
        return NULL;
    }
    return &skel->base;
}
