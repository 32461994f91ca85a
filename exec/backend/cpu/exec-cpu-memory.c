/* SPDX-License-Identifier: MIT
 * exec-cpu-memory.c: the CPU backend's memory member (exec-backend-impl.h): the bytes a local
 * stage holds by category, read from the sizes its arenas were allocated with (the slices',
 * the optimizers', the stashed copies', the skeleton's batch buffers), all host memory.
 */
#include "exec-cpu-private.h"

#include "pp-error.h"

void exec_cpu_memory(ExecBackend *backend, int32_t stage, ExecMemoryBytes *bytes) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecSkeleton   *skel = &cpu->skel;
    PP_ASSERT(stage >= 0 && stage < skel->n_stages && skel->local[stage]);
    /* Host memory: no device id. Messages are allocated when an op sends one and freed when its
     * consumer is done (the host-queue transport): nothing is held for them between ops. */
    *bytes = (ExecMemoryBytes){.device = -1};
    for (int32_t vs = 0; vs < skel->n_vstages; vs++) {
        const ExecCpuVstage *v = &cpu->vstages[vs];
        if (skel->vstage_stage[vs] != stage)
            continue;
        Gpt2SliceSizes sizes;
        gpt2_slice_sizes(v->slice, &sizes);
        bytes->params_bytes += (int64_t)sizes.params_bytes;
        bytes->grads_bytes += (int64_t)sizes.grads_bytes;
        bytes->act_bytes += (int64_t)sizes.acts_bytes;
        bytes->workspace_bytes += (int64_t)sizes.scratch_bytes;
        /* the state arena: moments (of the shard with ZeRO-1), error feedback, Newton-Schulz */
        bytes->optim_bytes += (int64_t)(kern_optim_state_floats(v->optim) * sizeof(float));
        bytes->stash_bytes +=
            (int64_t)skel->vstages[vs].stashes.n * (int64_t)(v->stash_floats * sizeof(float));
    }
    /* the stage's token and target ids, (B, T) int32 each */
    bytes->workspace_bytes += 2 * (int64_t)(skel->layout->batch_tokens * sizeof(int32_t));
    exec_memory_bytes_sum(bytes);
}
