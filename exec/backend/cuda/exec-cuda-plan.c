/* SPDX-License-Identifier: MIT
 * exec-cuda-plan.c: the CUDA backend's plan (exec-cuda-plan.h): device placement, precision,
 * slices, message pools and stashes, and the device bytes of each stage, all on the host.
 */
#include "exec-cuda-plan.h"

#include "gpt2-cuda.h"
#include "optim-cuda.h"
#include "pp-error.h"

gboolean exec_cuda_plan_devices(const int32_t *devices, int32_t n_stages, int n_visible,
                                const char *why, int32_t *out, GError **error) {
    if (n_visible < 1) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "run.backend = cuda: no CUDA device is visible to this process (%s); run on "
                    "a machine with an NVIDIA GPU and its driver, or use run.backend = cpu",
                    why ? why : "the CUDA runtime reports 0 devices");
        return FALSE;
    }
    for (int32_t s = 0; s < n_stages; s++) {
        if (devices == NULL) {
            out[s] = s % n_visible;
            continue;
        }
        if (devices[s] < 0 || devices[s] >= n_visible) {
            g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                        "run.devices: stage %d is placed on device %d but this process sees %d "
                        "CUDA device%s (valid ids: 0..%d)",
                        s, devices[s], n_visible, n_visible == 1 ? "" : "s", n_visible - 1);
            return FALSE;
        }
        out[s] = devices[s];
    }
    return TRUE;
}

void exec_cuda_plan_free(ExecCudaPlan *plan) {
    if (!plan)
        return;
    g_free(plan->device);
    g_free(plan->slice);
    g_free(plan->act_inbox);
    g_free(plan->grad_inbox);
    g_free(plan->stashes);
    g_free(plan->memory);
    g_free(plan);
}

/* The element type of @precision (default: bf16, the speed mode). */
static KernDtype exec_cuda_plan_dtype(ExecPrecision precision) {
    return precision == EXEC_PRECISION_FP32 ? KERN_DTYPE_F32 : KERN_DTYPE_BF16;
}

/* Adds the bytes of virtual stage @vs's slice, optimizer and stashes to its stage. */
static void exec_cuda_plan_vstage_bytes(ExecCudaPlan *plan, const ExecBackendSetup *setup,
                                        int32_t vs) {
    const ExecVstageLayout *layout = &setup->layout->vstages[vs];
    ExecMemoryBytes        *mem = &plan->memory[setup->vstage_stage[vs]];
    Gpt2CudaSliceSizes      sizes;
    gpt2_cuda_slice_sizes(&plan->slice[vs], &sizes);
    Gpt2Table *table = gpt2_table_new(&plan->slice[vs].slice);
    mem->params_bytes += (int64_t)(sizes.params_bytes + sizes.compute_params_bytes);
    mem->grads_bytes += (int64_t)sizes.grads_bytes;
    mem->act_bytes += (int64_t)sizes.acts_bytes;
    mem->workspace_bytes += (int64_t)sizes.scratch_bytes;
    mem->optim_bytes +=
        (int64_t)kern_cuda_optim_device_bytes(exec_layout_optim(setup->layout), table);
    mem->stash_bytes +=
        (int64_t)plan->stashes[vs] * (int64_t)(layout->n_params * kern_dtype_size(plan->dtype));
    gpt2_table_free(table);
}

ExecCudaPlan *exec_cuda_plan_new(const ExecBackendSetup *setup, int n_visible, const char *why,
                                 GError **error) {
    g_autoptr(ExecCudaPlan) plan = g_new0(ExecCudaPlan, 1);
    int32_t n_stages = setup->n_stages, n_vstages = setup->n_stages * setup->n_chunks;
    plan->n_stages = n_stages;
    plan->n_vstages = n_vstages;
    plan->device = g_new(int32_t, n_stages);
    if (!exec_cuda_plan_devices(setup->devices, n_stages, n_visible, why, plan->device, error))
        return NULL;
    plan->dtype = exec_cuda_plan_dtype(setup->precision);
    /* Every virtual stage has the whole model's shape in its kernel argument. */
    const Gpt2Config *m = &exec_layout_slice_params(setup->layout, 0)->model;
    if (setup->flash_attention && !gpt2_cuda_flash_attention_supported(m->C, m->NH, plan->dtype)) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                    "model.flash_attention = true: the fused attention kernels need run.precision "
                    "= bf16 and a head size (model.hidden / model.heads) of 32, 64 or 128; got %s "
                    "and %d",
                    kern_dtype_name(plan->dtype), m->NH > 0 ? m->C / m->NH : 0);
        return NULL;
    }
    plan->msg_elems = setup->layout->msg_floats;
    plan->msg_bytes = plan->msg_elems * kern_dtype_size(plan->dtype);
    plan->slice = g_new0(Gpt2CudaSliceParams, n_vstages);
    plan->act_inbox = g_new0(int32_t, n_vstages);
    plan->grad_inbox = g_new0(int32_t, n_vstages);
    plan->stashes = g_new0(int32_t, n_vstages);
    plan->memory = g_new0(ExecMemoryBytes, n_stages);
    for (int32_t vs = 0; vs < n_vstages; vs++) {
        Gpt2CudaSliceParams *sp = &plan->slice[vs];
        sp->slice = *exec_layout_slice_params(setup->layout, vs);
        sp->dtype = plan->dtype;
        sp->flash_attention = setup->flash_attention;
        const char *bad = gpt2_cuda_slice_params_check(sp);
        if (bad) {
            g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND,
                        "run.backend = cuda, run.precision = %s: virtual stage %d cannot run on "
                        "the GPU: %s",
                        kern_dtype_name(plan->dtype), vs, bad);
            return NULL;
        }
        /* Messages in flight into vs: an activation from vs - 1 waits for F(mb, vs) while mb
         * is in flight on vs - 1; a gradient from vs + 1 waits for B(mb, vs) while mb is in
         * flight on vs. Activation slots bound both (prepare() checks the schedule). */
        plan->act_inbox[vs] = vs > 0 ? plan->slice[vs - 1].slice.n_act_slots : 0;
        plan->grad_inbox[vs] = vs < n_vstages - 1 ? sp->slice.n_act_slots : 0;
        plan->stashes[vs] = setup->weight_versions[setup->vstage_stage[vs]];
        exec_cuda_plan_vstage_bytes(plan, setup, vs);
    }
    for (int32_t vs = 0; setup->comm == NULL && vs < n_vstages; vs++) {
        int32_t stage = setup->vstage_stage[vs];
        int64_t msg = (int64_t)plan->msg_bytes;
        plan->memory[stage].message_bytes += (plan->act_inbox[vs] + plan->grad_inbox[vs]) * msg;
        /* A message from another device is written into a staging slot on the producer's
         * device first, then copied on the producer's copy stream. */
        if (vs > 0 && plan->device[setup->vstage_stage[vs - 1]] != plan->device[stage])
            plan->memory[setup->vstage_stage[vs - 1]].message_bytes += plan->act_inbox[vs] * msg;
        if (vs < n_vstages - 1 && plan->device[setup->vstage_stage[vs + 1]] != plan->device[stage])
            plan->memory[setup->vstage_stage[vs + 1]].message_bytes += plan->grad_inbox[vs] * msg;
    }
    for (int32_t s = 0; s < n_stages; s++) {
        ExecMemoryBytes *mem = &plan->memory[s];
        mem->device = plan->device[s];
        /* Between processes (exec_cuda_transport_host_new()): one buffer out, one in. */
        if (setup->comm)
            mem->message_bytes = 2 * (int64_t)plan->msg_bytes;
        mem->workspace_bytes += (int64_t)kern_cuda_ctx_device_bytes() +
                                EXEC_CUDA_STAGE_SCALARS_BYTES + 2 * (int64_t)plan->msg_bytes;
        exec_memory_bytes_sum(mem);
    }
    return g_steal_pointer(&plan);
}

size_t exec_cuda_plan_nccl_chunk(size_t max_n) {
    return MAX(MIN(max_n, EXEC_CUDA_NCCL_CHUNK_FLOATS), 1);
}

void exec_cuda_plan_add_nccl_scratch(ExecCudaPlan *plan, const ExecBackendSetup *setup,
                                     const gboolean *local, int32_t replicas) {
    size_t max_n = 0;
    for (int32_t vs = 0; vs < plan->n_vstages; vs++) {
        if (local[setup->vstage_stage[vs]])
            max_n = MAX(max_n, setup->layout->vstages[vs].n_params);
    }
    int64_t bytes = (int64_t)replicas * (int64_t)exec_cuda_plan_nccl_chunk(max_n) * 4;
    for (int32_t s = 0; s < plan->n_stages; s++) {
        if (!local[s])
            continue;
        plan->memory[s].workspace_bytes += bytes;
        exec_memory_bytes_sum(&plan->memory[s]);
    }
}
