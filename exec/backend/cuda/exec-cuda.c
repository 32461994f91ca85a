/* SPDX-License-Identifier: MIT
 * exec-cuda.c: the CUDA backend of exec-backend.h. Each stage has a device (the plan's,
 * exec-cuda-plan.h), a compute stream with its KernCudaCtx, and a host worker that enqueues
 * the stage's ops; each local virtual stage, allocated from the model layout, a Gpt2CudaSlice,
 * a KernCudaOptim and its stashed weight copies: the device part over the skeleton
 * (exec-skeleton.h: workers, messages through the transport (exec-cuda-transport.h), reports,
 * slots, each op's operands, the tensor tables). Nothing waits for the device between two
 * flushes: op times are pairs of timing events, losses and the optimizer's gate
 * (kern_update_gate() in a device kernel) are copied to pinned memory on the stream, and
 * flush() synchronises once and reads them. The semantics are the CPU backend's (exec-cpu.c),
 * op for op.
 */
#include <math.h>
#include <string.h>

#include "exec-cuda-private.h"
#include "kern-check.h"
#include "pp-error.h"

static double *exec_cuda_sq_norm(ExecCudaStage *st) {
    return (double *)(void *)(st->scalars + EXEC_CUDA_SQ_NORM_OFFSET);
}

static float *exec_cuda_loss(ExecCudaStage *st) {
    return (float *)(void *)(st->scalars + EXEC_CUDA_LOSS_OFFSET);
}

/* --- stashes (the skeleton's ExecStashes says which version each copy holds) --- */

static void *exec_cuda_stash_data(const ExecCudaBackend *cuda, const ExecCudaVstage *v, int32_t i) {
    size_t bytes = gpt2_cuda_slice_n_params(v->slice) * kern_dtype_size(cuda->plan->dtype);
    return (char *)v->stash_arena + (size_t)i * bytes;
}

/* --- op times and scalars --- */

/* ns since the backend's creation of timing event @ev of @st, recorded after its anchor. */
static int64_t exec_cuda_event_ns(ExecCudaStage *st, cudaEvent_t ev) {
    float ms = 0.0f;
    KERN_CUDA_CHECK(cudaEventElapsedTime(&ms, st->anchor, ev));
    return st->anchor_ns + llround((double)ms * 1e6);
}

/* Synchronises @st's stream and fills the reports of the ops recorded since the window was
 * last read: times from their events (relative to the anchor, which then moves to the last
 * end event, so elapsed times stay short and exact), losses and the optimizer's gate. */
static void exec_cuda_read_window(ExecCudaBackend *cuda, int32_t stage) {
    ExecCudaStage *st = &cuda->stages[stage];
    GArray        *list = cuda->skel.stages[stage].reports;
    int32_t        last_vstage = cuda->skel.n_vstages - 1;
    KERN_CUDA_CHECK(cudaSetDevice(st->device));
    exec_cuda_grads_wait(cuda, stage);
    int32_t n = st->n_window;
    if (n == 0)
        return;
    PP_ASSERT((int32_t)list->len >= n);
    ExecOpReport *reports = &g_array_index(list, ExecOpReport, list->len - n);
    for (int32_t k = 0; k < n; k++) {
        ExecOpReport            *r = &reports[k];
        const ExecCudaOpScalars *sc = &st->host_scalars[k];
        r->start_ns = exec_cuda_event_ns(st, st->ev_start[k]);
        r->end_ns = exec_cuda_event_ns(st, st->ev_end[k]);
        if (r->op.kind == PP_OP_FORWARD && r->vstage == last_vstage)
            r->loss = sc->loss;
        if (r->op.kind == PP_OP_UPDATE) {
            r->grad_norm = sc->status.grad_norm;
            r->applied = sc->status.applied != 0;
        }
        if (k == st->reduce_op) {
            r->reduce_start_ns = exec_cuda_event_ns(st, st->reduce_start);
            r->reduce_end_ns = exec_cuda_event_ns(st, st->reduce_end);
            st->reduce_op = -1;
        }
    }
    int64_t     last_ns = reports[n - 1].end_ns;
    cudaEvent_t anchor = st->anchor;
    st->anchor = st->ev_end[n - 1];
    st->ev_end[n - 1] = anchor;
    st->anchor_ns = last_ns;
    st->n_window = 0;
}

/* --- vtable: replay control --- */

/* A replay starts from no gradients: one stopped between the reduction and U (an interrupt,
 * a peer's failure, too many non-finite updates elsewhere) left its window's, and with them
 * host_grads_taken (the next U would upload the old window's reduced gradients) and reducing
 * (the next U would report the old reduction's span). */
static gboolean exec_cuda_prepare(ExecBackend *backend, const PpSchedule *sched, GError **error) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    if (!exec_cuda_grads_check(cuda, error) || !exec_skeleton_prepare(&cuda->skel, sched, error))
        return FALSE;
    for (int32_t vs = 0; vs < cuda->skel.n_vstages; vs++) {
        ExecCudaVstage *v = &cuda->vstages[vs];
        if (v->slice == NULL)
            continue; /* another process's */
        ExecCudaStage *st = exec_cuda_stage_enter(cuda, vs);
        v->host_grads_taken = FALSE;
        gpt2_cuda_slice_zero_grads(v->slice, st->ctx);
    }
    for (int32_t s = 0; s < cuda->skel.n_stages; s++) {
        if (!cuda->skel.local[s])
            continue;
        ExecCudaStage *st = &cuda->stages[s];
        PP_ASSERT(st->n_window == 0);
        st->reducing = FALSE;
        st->reduce_op = -1;
        KERN_CUDA_CHECK(cudaSetDevice(st->device));
        KERN_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    }
    return TRUE;
}

/* The skeleton's hook on a worker thread: the current device is per host thread, and the
 * stage's streams, contexts and buffers live on its device. */
static void exec_cuda_enter(ExecSkeleton *skel, int32_t stage) {
    KERN_CUDA_CHECK(cudaSetDevice(((ExecCudaBackend *)skel)->stages[stage].device));
}

/* --- vtable: ops --- */

/* U: with replicas, the reduced gradients back on the device first (host-staged path,
 * exec-cuda-grads.c; on the NCCL path they are there already, and the U's report gets the
 * reduction's span); the
 * stage's squared gradient norm over all its virtual stages, then every optimizer steps behind
 * the same device-side gate (skip when not finite or poisoned, clip), the compute weights are
 * refreshed and the gradients zeroed; the gate's outcome goes to the op's pinned scalars. */
static void exec_cuda_run_update(ExecCudaBackend *cuda, ExecCudaStage *st, const ExecOpArgs *args,
                                 int32_t k) {
    int32_t stage = args->op->stage;
    double *sq = exec_cuda_sq_norm(st);
    exec_cuda_grads_mark_update(st, k);
    for (int32_t vs = 0; vs < cuda->skel.n_vstages; vs++) {
        if (cuda->skel.vstage_stage[vs] == stage)
            exec_cuda_grads_upload(cuda, st, vs);
    }
    exec_skeleton_tap(&cuda->skel, stage);
    KERN_CUDA_CHECK(cudaMemsetAsync(sq, 0, sizeof *sq, st->stream));
    for (int32_t vs = 0; vs < cuda->skel.n_vstages; vs++) {
        ExecCudaVstage *v = &cuda->vstages[vs];
        if (cuda->skel.vstage_stage[vs] != stage)
            continue;
        kern_cuda_sq_norm_acc(sq, gpt2_cuda_slice_grads(v->slice),
                              gpt2_cuda_slice_n_params(v->slice), st->ctx);
    }
    KernCudaStepGate gate = {.sq_norm = sq, .grad_clip = args->grad_clip, .poison = args->poison};
    const KernCudaOptim *reporter = NULL;
    for (int32_t vs = 0; vs < cuda->skel.n_vstages; vs++) {
        ExecCudaVstage *v = &cuda->vstages[vs];
        if (cuda->skel.vstage_stage[vs] != stage)
            continue;
        kern_cuda_optim_step(v->optim, gpt2_cuda_slice_params(v->slice),
                             gpt2_cuda_slice_grads(v->slice), args->lr, &gate, st->ctx);
        /* Applied or not, the compute copy follows the master and the window ends here. */
        gpt2_cuda_slice_refresh_compute_params(v->slice, st->ctx);
        gpt2_cuda_slice_zero_grads(v->slice, st->ctx);
        reporter = reporter ? reporter : v->optim;
    }
    PP_ASSERT(reporter != NULL); /* every stage holds at least one virtual stage */
    KERN_CUDA_CHECK(cudaMemcpyAsync(&st->host_scalars[k].status, kern_cuda_optim_status(reporter),
                                    sizeof(KernCudaOptimStatus), cudaMemcpyDeviceToHost,
                                    st->stream));
}

/* F with the live compute weights, casting the master weights first into the stash the
 * skeleton picked (on the stage's stream: after every backward that used the copy before).
 * Returns whether it copied the weights. */
static gboolean exec_cuda_run_forward(ExecCudaBackend *cuda, ExecCudaStage *st,
                                      const ExecOpArgs *args, ExecCudaVstage *v, int32_t k) {
    ExecSkeletonForward f;
    exec_skeleton_forward(&cuda->skel, args, &f);
    if (f.fill >= 0)
        gpt2_cuda_slice_cast_params(v->slice, exec_cuda_stash_data(cuda, v, f.fill),
                                    gpt2_cuda_slice_params(v->slice), st->ctx);
    gpt2_cuda_slice_forward(v->slice, gpt2_cuda_slice_compute_params(v->slice), f.slot, f.tokens,
                            f.input, f.targets, f.output, f.targets ? exec_cuda_loss(st) : NULL,
                            st->ctx);
    if (f.targets)
        KERN_CUDA_CHECK(cudaMemcpyAsync(&st->host_scalars[k].loss, exec_cuda_loss(st),
                                        sizeof(float), cudaMemcpyDeviceToHost, st->stream));
    return f.fill >= 0;
}

/* B or BW with the weights of its F (stashed) or the live ones; W: weight gradients of a B's
 * slot. Enqueued on the stage's stream, so the skeleton's release of a stash orders it before
 * any F that overwrites the copy. */
static void exec_cuda_run_backward(ExecCudaBackend *cuda, ExecCudaStage *st, const ExecOpArgs *args,
                                   ExecCudaVstage *v) {
    float               *grads = gpt2_cuda_slice_grads(v->slice);
    ExecSkeletonBackward b;
    exec_skeleton_backward_begin(&cuda->skel, args, &b);
    const void *params = b.stash >= 0 ? exec_cuda_stash_data(cuda, v, b.stash)
                                      : gpt2_cuda_slice_compute_params(v->slice);
    switch (args->op->kind) {
    case PP_OP_WEIGHT:
        gpt2_cuda_slice_backward_weight(v->slice, b.slot, grads, st->ctx);
        break;
    case PP_OP_BACKWARD:
        gpt2_cuda_slice_backward_input(v->slice, params, b.slot, b.dx_out, args->loss_scale,
                                       b.dx_in, st->ctx);
        break;
    case PP_OP_BACKWARD_FULL:
        gpt2_cuda_slice_backward(v->slice, params, b.slot, b.dx_out, args->loss_scale, b.dx_in,
                                 grads, st->ctx);
        break;
    default:
        PP_UNREACHABLE(); /* exec_skeleton_backward_begin() checked the kind */
    }
    exec_skeleton_backward_end(&cuda->skel, args, &b);
}

static void exec_cuda_run_op(ExecBackend *backend, const ExecOpArgs *args) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    ExecCudaStage   *st = &cuda->stages[args->op->stage];
    if (st->n_window == EXEC_CUDA_WINDOW_OPS)
        exec_cuda_read_window(cuda, args->op->stage);
    int32_t       k = st->n_window++;
    ExecOpReport *report = exec_skeleton_report(&cuda->skel, args);
    KERN_CUDA_CHECK(cudaEventRecord(st->ev_start[k], st->stream));
    switch (args->op->kind) {
    case PP_OP_UPDATE:
        exec_cuda_run_update(cuda, st, args, k);
        break;
    case PP_OP_FORWARD:
        report->copied = exec_cuda_run_forward(cuda, st, args, &cuda->vstages[args->vstage], k);
        break;
    case PP_OP_BACKWARD:
    case PP_OP_BACKWARD_FULL:
    case PP_OP_WEIGHT:
        exec_cuda_run_backward(cuda, st, args, &cuda->vstages[args->vstage]);
        break;
    case PP_OP_N_KINDS:
        PP_UNREACHABLE();
    }
    KERN_CUDA_CHECK(cudaEventRecord(st->ev_end[k], st->stream));
    exec_skeleton_release_input(&cuda->skel, args->op->stage);
}

static void exec_cuda_flush(ExecBackend *backend, int32_t stage, ExecStageReport *report) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    /* The one synchronisation of the step: the stream's work so far. */
    exec_cuda_read_window(cuda, stage);
    exec_skeleton_flush(&cuda->skel, stage, report);
}

static void exec_cuda_memory(ExecBackend *backend, int32_t stage, ExecMemoryBytes *bytes) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    PP_ASSERT(stage >= 0 && stage < cuda->skel.n_stages);
    *bytes = cuda->plan->memory[stage];
}

/* --- teardown (also of a partly built backend) --- */

static void exec_cuda_free_stage(ExecCudaStage *st) {
    if (!st->stream)
        return;
    KERN_CUDA_CHECK(cudaSetDevice(st->device));
    KERN_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    kern_cuda_ctx_free(st->ctx);
    for (int k = 0; k < EXEC_CUDA_WINDOW_OPS; k++) {
        if (st->ev_start[k])
            KERN_CUDA_CHECK(cudaEventDestroy(st->ev_start[k]));
        if (st->ev_end[k])
            KERN_CUDA_CHECK(cudaEventDestroy(st->ev_end[k]));
    }
    if (st->anchor)
        KERN_CUDA_CHECK(cudaEventDestroy(st->anchor));
    if (st->reduce_start)
        KERN_CUDA_CHECK(cudaEventDestroy(st->reduce_start));
    if (st->reduce_end)
        KERN_CUDA_CHECK(cudaEventDestroy(st->reduce_end));
    KERN_CUDA_CHECK(cudaFree(st->scalars));
    KERN_CUDA_CHECK(cudaFree(st->eval_in));
    KERN_CUDA_CHECK(cudaFree(st->eval_out));
    if (st->host_scalars)
        KERN_CUDA_CHECK(cudaFreeHost(st->host_scalars));
    KERN_CUDA_CHECK(cudaStreamDestroy(st->stream));
}

static void exec_cuda_free(ExecBackend *backend) {
    ExecCudaBackend *cuda = exec_cuda(backend);
    /* The transport first: it waits for its copy streams, and the host-staged one for the
     * host functions on the stages' streams. */
    if (cuda->skel.transport)
        cuda->skel.transport->ops->free(cuda->skel.transport);
    cuda->skel.transport = NULL;
    exec_cuda_grads_free(cuda);
    for (int32_t vs = 0; cuda->vstages && vs < cuda->skel.n_vstages; vs++) {
        ExecCudaVstage *v = &cuda->vstages[vs];
        if (!cuda->skel.local[cuda->skel.vstage_stage[vs]])
            continue;
        KERN_CUDA_CHECK(cudaSetDevice(cuda->plan->device[cuda->skel.vstage_stage[vs]]));
        gpt2_cuda_slice_free(v->slice);
        kern_cuda_optim_free(v->optim);
        KERN_CUDA_CHECK(cudaFree(v->stash_arena));
        if (v->host_grads)
            KERN_CUDA_CHECK(cudaFreeHost(v->host_grads));
    }
    for (int32_t s = 0; cuda->stages && s < cuda->skel.n_stages; s++)
        exec_cuda_free_stage(&cuda->stages[s]);
    exec_skeleton_clear(&cuda->skel);
    g_free(cuda->vstages);
    g_free(cuda->stages);
    exec_cuda_plan_free(cuda->plan);
    g_free(cuda);
}

static const ExecBackendOps exec_cuda_ops = {
    EXEC_SKELETON_OPS,
    .name = "cuda",
    .prepare = exec_cuda_prepare,
    .run_op = exec_cuda_run_op,
    .flush = exec_cuda_flush,
    .reference = NULL, /* none yet: exec_pipeline_new() refuses run.speed_reference */
    .grads = exec_cuda_grads,
    .reduces_grads = exec_cuda_reduces_grads,
    .reduce_grads = exec_cuda_reduce_grads,
    .evaluate = exec_cuda_evaluate,
    .memory = exec_cuda_memory,
    .free = exec_cuda_free,
};

/* --- construction --- */

/* Refuses a plan whose @local (n_stages) stages do not fit the free memory of their devices,
 * naming the device, the bytes the plan needs and the bytes free. */
static gboolean exec_cuda_check_fit(const ExecCudaPlan *plan, const gboolean *local,
                                    GError **error) {
    for (int32_t s = 0; s < plan->n_stages; s++) {
        int32_t d = plan->device[s];
        int64_t need = 0, n = 0;
        if (!local[s])
            continue;
        for (int32_t u = 0; u < plan->n_stages; u++) {
            if (plan->device[u] != d || !local[u])
                continue;
            if (u < s)
                break; /* device d was checked with its first stage */
            need += plan->memory[u].total_bytes;
            n++;
        }
        if (n == 0)
            continue;
        size_t free_bytes = 0, total = 0;
        KERN_CUDA_CHECK(cudaSetDevice(d));
        KERN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
        if ((uint64_t)need <= (uint64_t)free_bytes)
            continue;
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "device %d: its %" G_GINT64_FORMAT " stage%s need %.3f GiB of device memory "
                    "and %.3f GiB of %.3f GiB are free; lower pipeline.microbatch_size, set "
                    "run.precision = bf16, or spread the stages over more devices (run.devices)",
                    d, n, n == 1 ? "" : "s", (double)need / (1 << 30),
                    (double)free_bytes / (1 << 30), (double)total / (1 << 30));
        return FALSE;
    }
    return TRUE;
}

/* Builds virtual stage @vs on its (current) device. Returns FALSE on out-of-memory. */
static gboolean exec_cuda_vstage_new(ExecCudaBackend *cuda, const ExecBackendSetup *setup,
                                     int32_t vs) {
    ExecCudaVstage *v = &cuda->vstages[vs];
    ExecCudaStage  *st = &cuda->stages[cuda->skel.vstage_stage[vs]];
    v->slice = gpt2_cuda_slice_new(&cuda->plan->slice[vs]);
    if (!v->slice)
        return FALSE;
    PP_ASSERT(gpt2_cuda_slice_n_params(v->slice) ==
              exec_skeleton_vstage_layout(&cuda->skel, vs)->n_params);
    v->optim =
        kern_cuda_optim_new(exec_layout_optim(cuda->skel.layout), gpt2_cuda_slice_table(v->slice));
    if (!v->optim)
        return FALSE;
    /* The skeleton's bookkeeping has as many copies as the plan: the stage's weight versions. */
    PP_ASSERT(cuda->skel.vstages[vs].stashes.n == cuda->plan->stashes[vs]);
    size_t stash_bytes = (size_t)cuda->plan->stashes[vs] * gpt2_cuda_slice_n_params(v->slice) *
                         kern_dtype_size(cuda->plan->dtype);
    if (stash_bytes > 0 && !kern_cuda_try_malloc(&v->stash_arena, stash_bytes))
        return FALSE;
    if (!exec_cuda_grads_new(cuda, vs))
        return FALSE;
    /* The same GPT-2 init as gpt2_slice_init_params() (bitwise), for any partition. */
    gpt2_cuda_slice_init_params(v->slice, setup->seed, st->ctx);
    return TRUE;
}

/* Builds stage @s on its device: stream, context, scalars, evaluation buffers, events. */
static gboolean exec_cuda_stage_new(ExecCudaBackend *cuda, int32_t s) {
    ExecCudaStage *st = &cuda->stages[s];
    st->device = cuda->plan->device[s];
    KERN_CUDA_CHECK(cudaSetDevice(st->device));
    KERN_CUDA_CHECK(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    cuda->skel.stages[s].queue = st->stream;
    for (int k = 0; k < EXEC_CUDA_WINDOW_OPS; k++) {
        KERN_CUDA_CHECK(cudaEventCreate(&st->ev_start[k]));
        KERN_CUDA_CHECK(cudaEventCreate(&st->ev_end[k]));
    }
    KERN_CUDA_CHECK(cudaEventCreate(&st->anchor));
    KERN_CUDA_CHECK(cudaEventCreate(&st->reduce_start));
    KERN_CUDA_CHECK(cudaEventCreate(&st->reduce_end));
    st->reduce_op = -1;
    cudaError_t err = cudaMallocHost((void **)&st->host_scalars,
                                     EXEC_CUDA_WINDOW_OPS * sizeof(ExecCudaOpScalars));
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        st->host_scalars = NULL;
        return FALSE;
    }
    KERN_CUDA_CHECK(err);
    st->ctx = kern_cuda_ctx_new(st->stream);
    return st->ctx && kern_cuda_try_malloc((void **)&st->scalars, EXEC_CUDA_STAGE_SCALARS_BYTES) &&
           kern_cuda_try_malloc(&st->eval_in, cuda->plan->msg_bytes) &&
           kern_cuda_try_malloc(&st->eval_out, cuda->plan->msg_bytes);
}

/* Records every stage's anchor: the first stage on a device takes the host clock (its stream
 * is idle, so the event completes at once); the others on that device are placed from it by
 * their elapsed time, so the stages of one device share one clock exactly. */
static void exec_cuda_anchor(ExecCudaBackend *cuda) {
    for (int32_t s = 0; s < cuda->skel.n_stages; s++) {
        ExecCudaStage *st = &cuda->stages[s];
        if (!cuda->skel.local[s])
            continue;
        KERN_CUDA_CHECK(cudaSetDevice(st->device));
        KERN_CUDA_CHECK(cudaStreamSynchronize(st->stream));
        KERN_CUDA_CHECK(cudaEventRecord(st->anchor, st->stream));
        KERN_CUDA_CHECK(cudaEventSynchronize(st->anchor));
        int32_t ref = 0;
        while (!cuda->skel.local[ref] || cuda->stages[ref].device != st->device)
            ref++;
        if (ref == s) {
            st->anchor_ns = exec_skeleton_clock_ns() - cuda->skel.t0_ns;
            continue;
        }
        float ms = 0.0f;
        KERN_CUDA_CHECK(cudaEventElapsedTime(&ms, cuda->stages[ref].anchor, st->anchor));
        st->anchor_ns = cuda->stages[ref].anchor_ns + llround((double)ms * 1e6);
    }
}

/* What a rank tells the others about where it computes: its device id (-1: it could not
 * place its stage) and the device's host and uuid (the reduction's path, exec-grad-path.h). */
typedef struct {
    int32_t       device;
    ExecGradPlace place;
} ExecCudaRankPlace;

/* This rank's place on @device (-1: none, zeros). */
static ExecCudaRankPlace exec_cuda_rank_place(int32_t device) {
    ExecCudaRankPlace mine;
    memset(&mine, 0, sizeof mine);
    mine.device = device;
    if (device < 0)
        return mine;
    struct cudaDeviceProp prop;
    KERN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    exec_grad_place_init(&mine.place, g_get_host_name(), (const uint8_t *)prop.uuid.bytes);
    return mine;
}

/* A multi-process run's device of every stage of this rank's replica (n_stages): each rank's
 * from run.devices (indexed by its stage: the replicas of a stage share the entry) or, without
 * the key, its rank on the node modulo the devices it sees (a GPU per rank where there are
 * enough, else ranks share), checked here and gathered from every rank, and in @group
 * (replicas) the places of the ranks of this rank's stage, in replica order. Collective: a
 * rank that cannot place its stage still takes part, so that no rank waits for it. Returns:
 * (transfer full), or NULL with this rank's error or one naming the rank that failed. */
static int32_t *exec_cuda_rank_devices(const ExecBackendSetup *setup, int n_visible,
                                       const char *why, ExecGradPlace *group, GError **error) {
    ExecComm *comm = setup->comm;
    int32_t   rank = exec_comm_rank(comm), stage = exec_comm_stage(comm), mine = -1;
    int64_t   node_rank = exec_comm_launched_local_rank();
    g_autoptr(GError) local = NULL;
    if (n_visible < 1) {
        exec_cuda_plan_devices(NULL, 1, n_visible, why, &mine, &local);
        mine = -1;
    } else if (setup->devices &&
               (setup->devices[stage] < 0 || setup->devices[stage] >= n_visible)) {
        g_set_error(&local, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "run.devices: stage %d (rank %d) is placed on device %d but its process "
                    "sees %d CUDA device%s (valid ids: 0..%d)",
                    stage, rank, setup->devices[stage], n_visible, n_visible == 1 ? "" : "s",
                    n_visible - 1);
    } else {
        mine = setup->devices ? setup->devices[stage]
                              : (int32_t)((node_rank >= 0 ? node_rank : rank) % n_visible);
    }
    ExecCudaRankPlace place = exec_cuda_rank_place(mine);
    g_autoptr(GBytes) bytes = g_bytes_new(&place, sizeof place);
    g_autoptr(GPtrArray) all = exec_comm_allgather(comm, bytes, "the device of every stage", error);
    if (!all)
        return NULL;
    if (local) {
        g_propagate_error(error, g_steal_pointer(&local));
        return NULL;
    }
    ExecCudaRankPlace *places = g_new(ExecCudaRankPlace, exec_comm_size(comm));
    for (int32_t r = 0; r < exec_comm_size(comm); r++) {
        PP_ASSERT(g_bytes_get_size(g_ptr_array_index(all, r)) == sizeof(ExecCudaRankPlace));
        memcpy(&places[r], g_bytes_get_data(g_ptr_array_index(all, r), NULL),
               sizeof(ExecCudaRankPlace));
        if (places[r].device < 0) {
            g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                        "rank %d could not place stage %d on a CUDA device (its own message says "
                        "why)",
                        r, exec_comm_rank_stage(comm, r));
            g_free(places);
            return NULL;
        }
    }
    g_autofree int32_t *devices = g_new(int32_t, setup->n_stages);
    for (int32_t s = 0; s < setup->n_stages; s++)
        devices[s] = places[exec_comm_stage_rank(comm, s)].device;
    for (int32_t e = 0; e < exec_parallel_resolve(&setup->parallel).replicas; e++)
        group[e] = places[exec_comm_layout_rank(comm, e, stage)].place;
    g_free(places);
    return g_steal_pointer(&devices);
}

/* The plan of @setup for this process: every stage in it, or (with a group) the stages of this
 * rank's replica, each on the device its rank chose; @group (replicas) as
 * exec_cuda_rank_devices() (untouched without a group). */
static ExecCudaPlan *exec_cuda_plan_for(const ExecBackendSetup *setup, ExecGradPlace *group,
                                        GError **error) {
    int         n_visible = 0;
    const char *why = NULL;
    cudaError_t err = cudaGetDeviceCount(&n_visible);
    if (err != cudaSuccess) {
        why = cudaGetErrorString(err);
        cudaGetLastError(); /* the "no driver / no device" error is sticky until read */
        n_visible = 0;
    }
    if (setup->comm == NULL)
        return exec_cuda_plan_new(setup, n_visible, why, error);
    g_autofree int32_t *devices = exec_cuda_rank_devices(setup, n_visible, why, group, error);
    if (!devices)
        return NULL;
    /* Each id was checked on its own rank; another node may see more devices than this one. */
    int32_t most = 0;
    for (int32_t s = 0; s < setup->n_stages; s++)
        most = MAX(most, devices[s]);
    ExecBackendSetup placed = *setup;
    placed.devices = devices;
    return exec_cuda_plan_new(&placed, most + 1, NULL, error);
}

ExecBackend *exec_backend_cuda_new(const ExecBackendSetup *setup, GError **error) {
    /* Its registry row has no sharded optimizer: exec_pipeline_new() refused one. */
    PP_ASSERT(exec_layout_optim(setup->layout)->shards <= 1);
    ExecCudaBackend *cuda = g_new0(ExecCudaBackend, 1);
    ExecSkeleton    *skel = &cuda->skel;
    if (!exec_skeleton_init(skel, &exec_cuda_ops, "the CUDA backend", setup, error)) {
        exec_cuda_free(&skel->base);
        return NULL;
    }
    skel->enter = exec_cuda_enter;
    skel->state = &exec_cuda_state_ops;
    g_autofree ExecGradPlace *group = g_new0(ExecGradPlace, skel->parallel.replicas);
    cuda->plan = exec_cuda_plan_for(setup, group, error);
    if (!cuda->plan) {
        exec_cuda_free(&skel->base);
        return NULL;
    }
    exec_cuda_grads_choose(cuda, group);
    ExecCudaPlan *plan = cuda->plan;
    if (cuda->grad_path == EXEC_GRAD_PATH_NCCL)
        exec_cuda_plan_add_nccl_scratch(plan, setup, skel->local, skel->parallel.replicas);
    /* With a group a rank whose device is short of memory tells the others (they agree). */
    GError *no_fit = NULL;
    exec_cuda_check_fit(plan, skel->local, &no_fit);
    if (!exec_comm_agree(skel->comm, "checking the devices' free memory", &no_fit)) {
        g_propagate_error(error, no_fit);
        exec_cuda_free(&skel->base);
        return NULL;
    }
    cuda->stages = g_new0(ExecCudaStage, skel->n_stages);
    cuda->vstages = g_new0(ExecCudaVstage, skel->n_vstages);
    gboolean ok = TRUE;
    for (int32_t s = 0; ok && s < skel->n_stages; s++)
        ok = !skel->local[s] || exec_cuda_stage_new(cuda, s);
    for (int32_t vs = 0; ok && vs < skel->n_vstages; vs++) {
        if (!skel->local[skel->vstage_stage[vs]])
            continue;
        exec_cuda_stage_enter(cuda, vs);
        ok = exec_cuda_vstage_new(cuda, setup, vs);
    }
    if (ok) {
        skel->transport = skel->comm ? exec_cuda_transport_host_new(plan, skel->vstage_stage,
                                                                    skel->comm, skel->local)
                                     : exec_cuda_transport_local_new(plan, skel->vstage_stage);
        ok = skel->transport != NULL;
    }
    GError *short_of_memory = NULL;
    if (!ok) {
        int64_t planned = 0;
        for (int32_t s = 0; s < plan->n_stages; s++)
            planned += skel->local[s] ? plan->memory[s].total_bytes : 0;
        g_set_error(&short_of_memory, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "run.backend = cuda: device memory ran out while allocating the pipeline's "
                    "arenas (%.3f GiB planned over this process's stages); lower "
                    "pipeline.microbatch_size or spread the stages over more devices "
                    "(run.devices)",
                    (double)planned / (1 << 30));
    }
    /* With a group every rank learns of a failure, so none waits for the collectives below. */
    if (!exec_comm_agree(skel->comm, "allocating the pipeline on the devices", &short_of_memory)) {
        g_propagate_error(error, short_of_memory);
        exec_cuda_free(&skel->base);
        return NULL;
    }
    /* The time origin (agreed by the ranks) before the anchors, which read it. */
    if (!exec_cuda_grads_connect(cuda, error) || !exec_skeleton_start(skel, error)) {
        exec_cuda_free(&skel->base);
        return NULL;
    }
    exec_cuda_anchor(cuda);
    exec_cuda_prepare(&skel->base, NULL, NULL);
    return &skel->base;
}
