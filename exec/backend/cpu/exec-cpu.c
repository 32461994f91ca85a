/* SPDX-License-Identifier: MIT
 * exec-cpu.c: the CPU backend, reference implementation and test double of exec-backend.h:
 * the device part over the skeleton (exec-skeleton.h: one GThread per local stage, messages
 * through the host-queue transport, reports, slots, the tensor tables). Model state per local
 * virtual stage, allocated from the model layout: a Gpt2Slice, its KernOptim and the stashed
 * weight copies. Ops run on the worker's thread and are timed by the host clock; their reports
 * wait in the skeleton's per-stage list for flush().
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

/* A replay starts from no gradients: one stopped inside an accumulation window (an interrupt,
 * a peer's failure) left that window's behind, which the next U would apply. The stashed copies
 * stay allocated; the skeleton empties their bookkeeping. */
static gboolean exec_cpu_prepare(ExecBackend *backend, const PpSchedule *sched, GError **error) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    if (!exec_skeleton_prepare(&cpu->skel, sched, error))
        return FALSE;
    for (int32_t vs = 0; vs < cpu->skel.n_vstages; vs++)
        if (cpu->vstages[vs].slice != NULL)
            gpt2_slice_zero_grads(cpu->vstages[vs].slice);
    return TRUE;
}

/* U. With a sharded optimizer (ZeRO-1) the pipeline gives the norm and the step reads and
 * scales the optimizer's range of the gradients only (the rest is another replica's). */
static void exec_cpu_run_update(ExecCpuBackend *cpu, const ExecOpArgs *args, ExecOpReport *report) {
    int32_t stage = args->op->stage;
    double  sq = args->sharded ? args->sq_norm : 0.0;
    exec_skeleton_tap(&cpu->skel, stage);
    for (int32_t vs = 0; vs < cpu->skel.n_vstages; vs++) {
        ExecCpuVstage *v = &cpu->vstages[vs];
        if (cpu->skel.vstage_stage[vs] != stage)
            continue;
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

/* F with the live weights, copying them first into the stash the skeleton picked. Returns
 * whether it copied the weights. */
static gboolean exec_cpu_run_forward(ExecCpuBackend *cpu, const ExecOpArgs *args,
                                     ExecOpReport *report) {
    ExecCpuVstage      *v = &cpu->vstages[args->vstage];
    float              *live = gpt2_slice_params(v->slice);
    size_t              n_params = gpt2_slice_n_params(v->slice);
    ExecSkeletonForward f;
    exec_skeleton_forward(&cpu->skel, args, &f);
    if (f.fill >= 0)
        memcpy(v->stash[f.fill], live, n_params * sizeof(float));
    gpt2_slice_forward(v->slice, live, f.slot, f.tokens, f.input, f.targets, f.output,
                       f.targets ? &report->loss : NULL);
    return f.fill >= 0;
}

/* B or BW with the weights of its F (stashed) or the live ones; W: weight gradients of a B's
 * slot. BW and W tell @args->grads_hook of each bucket they finish. */
static void exec_cpu_run_backward(ExecCpuBackend *cpu, const ExecOpArgs *args) {
    ExecCpuVstage       *v = &cpu->vstages[args->vstage];
    ExecSkeletonBackward b;
    exec_skeleton_backward_begin(&cpu->skel, args, &b);
    const float *params = b.stash >= 0 ? v->stash[b.stash] : gpt2_slice_params(v->slice);
    switch (args->op->kind) {
    case PP_OP_WEIGHT:
        gpt2_slice_backward_weight(v->slice, b.slot, gpt2_slice_grads(v->slice), args->grads_hook);
        break;
    case PP_OP_BACKWARD:
        gpt2_slice_backward_input(v->slice, params, b.slot, b.dx_out, args->loss_scale, b.dx_in);
        break;
    case PP_OP_BACKWARD_FULL:
        gpt2_slice_backward(v->slice, params, b.slot, b.dx_out, args->loss_scale, b.dx_in,
                            gpt2_slice_grads(v->slice), args->grads_hook);
        break;
    default:
        PP_UNREACHABLE(); /* exec_skeleton_backward_begin() checked the kind */
    }
    exec_skeleton_backward_end(&cpu->skel, args, &b);
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
    .memory = exec_cpu_memory,
    .free = exec_cpu_free,
};

ExecBackend *exec_backend_cpu_new(const ExecBackendSetup *setup, GError **error) {
    /* Its registry row has neither devices nor bf16: exec_pipeline_new() refused both. */
    PP_ASSERT(setup->devices == NULL && setup->precision != EXEC_PRECISION_BF16);
    ExecCpuBackend *cpu = g_new0(ExecCpuBackend, 1);
    ExecSkeleton   *skel = &cpu->skel;
    if (!exec_skeleton_init(skel, &exec_cpu_ops, "the CPU backend", setup, error)) {
        exec_cpu_free(&skel->base);
        return NULL;
    }
    skel->state = &exec_cpu_state_ops;
    cpu->vstages = g_new0(ExecCpuVstage, skel->n_vstages);
    for (int32_t vs = 0; vs < skel->n_vstages; vs++) {
        ExecCpuVstage          *v = &cpu->vstages[vs];
        const ExecVstageLayout *layout = exec_skeleton_vstage_layout(skel, vs);
        if (skel->local[skel->vstage_stage[vs]]) {
            v->slice = gpt2_slice_new(exec_layout_slice_params(skel->layout, vs));
            PP_ASSERT(gpt2_slice_n_params(v->slice) == layout->n_params);
            gpt2_slice_init_params(v->slice, setup->seed);
            v->optim = kern_optim_new(exec_layout_optim(skel->layout), v->slice);
            v->stash_floats = layout->n_params;
        }
        /* Every copy the stage's weight versions need, now: nothing is allocated in a step. */
        v->stash = g_new0(float *, MAX(skel->vstages[vs].stashes.n, 1));
        for (int32_t i = 0; v->stash_floats > 0 && i < skel->vstages[vs].stashes.n; i++)
            v->stash[i] = g_new(float, v->stash_floats);
    }
    cpu->stages = g_new0(ExecCpuStage, skel->n_stages);
    skel->transport =
        exec_transport_queue_new(skel->n_stages, skel->n_vstages, skel->vstage_stage, skel->local,
                                 skel->layout->msg_floats * sizeof(float), skel->comm);
    if (!exec_skeleton_start(skel, error)) {
        exec_cpu_free(&skel->base);
        return NULL;
    }
    return &skel->base;
}
