/* SPDX-License-Identifier: MIT
 * exec-cpu-state.c: the CPU backend's state primitives (the skeleton's state members,
 * exec-skeleton-state.c, look tensors up by name in the layout's tables and check them): where
 * a local virtual stage's flat buffers and a tensor's optimizer state are in the slices' and
 * optimizers' arenas, a host copy, the optimizer's step count; and evaluate()'s step on the
 * drained pipeline (exec_skeleton_evaluate() walks the virtual stages and the ranks).
 */
#include <string.h>

#include "exec-cpu-private.h"
#include "pp-error.h"

/* Local virtual stage @vstage of @skel. */
static ExecCpuVstage *exec_cpu_vstage(ExecSkeleton *skel, int32_t vstage) {
    ExecCpuVstage *v = &((ExecCpuBackend *)skel)->vstages[vstage];
    PP_ASSERT(v->slice != NULL);
    return v;
}

static void exec_cpu_state_flat(ExecSkeleton *skel, int32_t vstage, float **params, float **grads) {
    ExecCpuVstage *v = exec_cpu_vstage(skel, vstage);
    *params = gpt2_slice_params(v->slice);
    *grads = gpt2_slice_grads(v->slice);
}

static void exec_cpu_state_optim_state(ExecSkeleton *skel, int32_t vstage, int i, float **first,
                                       float **second, float **prev_update, size_t *lo,
                                       size_t *hi) {
    KernOptim *optim = exec_cpu_vstage(skel, vstage)->optim;
    kern_optim_tensor_span(optim, i, lo, hi);
    *prev_update = kern_optim_tensor_prev_update(optim, i);
    kern_optim_tensor_state(optim, i, first, second);
}

/* Every array is host memory: a copy either way is a memcpy. */
static void exec_cpu_state_copy(ExecSkeleton *skel, int32_t vstage, void *dst, const void *src,
                                size_t bytes, gboolean to_host) {
    (void)skel;
    (void)vstage;
    (void)to_host;
    memcpy(dst, src, bytes);
}

static int64_t exec_cpu_state_get_optim_steps(ExecSkeleton *skel, int32_t vstage) {
    return kern_optim_n_steps(exec_cpu_vstage(skel, vstage)->optim);
}

static void exec_cpu_state_set_optim_steps(ExecSkeleton *skel, int32_t vstage, int64_t n_steps) {
    kern_optim_set_n_steps(exec_cpu_vstage(skel, vstage)->optim, n_steps);
}

const ExecSkeletonStateOps exec_cpu_state_ops = {
    .flat = exec_cpu_state_flat,
    .optim_state = exec_cpu_state_optim_state,
    .copy = exec_cpu_state_copy,
    .after_set = NULL, /* F and B read the master weights themselves */
    .get_optim_steps = exec_cpu_state_get_optim_steps,
    .set_optim_steps = exec_cpu_state_set_optim_steps,
};

/* evaluate()'s step on the CPU (exec-skeleton.h): the activation between two local virtual
 * stages stays in eval[0]. */
static void exec_cpu_eval_step(ExecSkeleton *skel, int32_t vs, const int32_t *tokens,
                               const int32_t *targets, const void *in, void *out, float *loss) {
    ExecCpuBackend *cpu = (ExecCpuBackend *)skel;
    Gpt2Slice      *slice = cpu->vstages[vs].slice;
    gboolean        first = vs == 0, last = vs == skel->n_vstages - 1;
    const float    *x = first ? NULL : in ? in : cpu->eval[0];
    float          *y = last ? NULL : out ? out : cpu->eval[1];
    /* Slot 0 is free: the pipeline is drained between replays. */
    gpt2_slice_forward(slice, gpt2_slice_params(slice), 0, first ? tokens : NULL, x,
                       last ? targets : NULL, y, loss);
    if (y == cpu->eval[1]) {
        float *swap = cpu->eval[0];
        cpu->eval[0] = cpu->eval[1];
        cpu->eval[1] = swap;
    }
}

gboolean exec_cpu_evaluate(ExecBackend *backend, const int32_t *tokens, const int32_t *targets,
                           float *loss, GError **error) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    size_t          floats = cpu->skel.layout->msg_floats;
    for (int i = 0; i < 2; i++)
        if (cpu->eval[i] == NULL)
            cpu->eval[i] = g_new(float, floats);
    return exec_skeleton_evaluate(&cpu->skel, floats * sizeof(float), exec_cpu_eval_step, tokens,
                                  targets, loss, error);
}
