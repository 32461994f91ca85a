/* SPDX-License-Identifier: MIT
 * exec-cpu-state.c: the CPU backend's state members: each virtual stage's tensor table and
 * the roles its tensors have (also for virtual stages another process holds), by-name copies
 * between the caller's host buffers and the slices' and optimizers' arenas, optimizer step
 * counts, and evaluate()'s step on the drained pipeline (exec_skeleton_evaluate() walks the
 * virtual stages and the ranks).
 */
#include <string.h>

#include "exec-cpu-private.h"
#include "pp-error.h"

static ExecCpuVstage *exec_cpu_vstage(ExecCpuBackend *cpu, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < cpu->skel.n_vstages);
    return &cpu->vstages[vstage];
}

int exec_cpu_n_tensors(ExecBackend *backend, int32_t vstage) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecCpuVstage  *v = exec_cpu_vstage(cpu, vstage);
    return v->slice ? gpt2_slice_n_tensors(v->slice) : cpu->skel.vstages[vstage].remote.n;
}

/* The roles tensor @i of @v has, and (nullable outs) their data in the CPU arenas: @role's
 * array of tensor->numel floats, NULL when the tensor lacks the role. */
static guint exec_cpu_roles(ExecCpuVstage *v, int i, ExecTensorRole role, float **data) {
    const Gpt2Tensor *t = gpt2_slice_tensor(v->slice, i);
    float            *first = NULL, *second = NULL;
    int               muon = kern_optim_tensor_state(v->optim, i, &first, &second);
    float            *prev = kern_optim_prev_update(v->optim);
    ExecTensorArrays  arrays = {.params = gpt2_slice_params(v->slice) + t->offset,
                                .grads = gpt2_slice_grads(v->slice) + t->offset,
                                .first = first,
                                .second = second,
                                .muon = muon,
                                .prev_update = prev ? prev + t->offset : NULL};
    return exec_tensor_arrays_roles(&arrays, role, data);
}

const Gpt2Tensor *exec_cpu_tensor(ExecBackend *backend, int32_t vstage, int i, guint *roles) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    ExecCpuVstage  *v = exec_cpu_vstage(cpu, vstage);
    if (v->slice == NULL) {
        const ExecRemoteTable *remote = &cpu->skel.vstages[vstage].remote;
        PP_ASSERT(i >= 0 && i < remote->n);
        if (roles)
            *roles = remote->roles[i];
        return &remote->tensors[i];
    }
    PP_ASSERT(i >= 0 && i < gpt2_slice_n_tensors(v->slice));
    if (roles)
        *roles = exec_cpu_roles(v, i, EXEC_TENSOR_PARAMS, NULL);
    return gpt2_slice_tensor(v->slice, i);
}

/* EXEC_ERROR_NOT_LOCAL unless this process holds @vstage. */
static ExecCpuVstage *exec_cpu_local_vstage(ExecCpuBackend *cpu, int32_t vstage, GError **error) {
    ExecCpuVstage *v = exec_cpu_vstage(cpu, vstage);
    if (v->slice)
        return v;
    exec_backend_set_not_local(error, cpu->skel.comm, vstage, cpu->skel.vstage_stage[vstage]);
    return NULL;
}

/* The arena data of @role of tensor @name of @vstage, checked against @n floats. */
static float *exec_cpu_tensor_data(ExecCpuBackend *cpu, int32_t vstage, const char *name,
                                   ExecTensorRole role, size_t n, GError **error) {
    ExecCpuVstage *v = exec_cpu_local_vstage(cpu, vstage, error);
    PP_ASSERT(role >= 0 && role < EXEC_TENSOR_N_ROLES);
    if (v == NULL)
        return NULL;
    int i = 0, n_tensors = gpt2_slice_n_tensors(v->slice);
    while (i < n_tensors && strcmp(gpt2_slice_tensor(v->slice, i)->name, name) != 0)
        i++;
    const Gpt2Tensor *t = i < n_tensors ? gpt2_slice_tensor(v->slice, i) : NULL;
    float            *data = NULL;
    if (t)
        exec_cpu_roles(v, i, role, &data);
    return exec_tensor_checked(vstage, name, t, role, data, n, error);
}

gboolean exec_cpu_tensor_get(ExecBackend *backend, int32_t vstage, const char *name,
                             ExecTensorRole role, float *dst, size_t n, GError **error) {
    const float *data = exec_cpu_tensor_data(exec_cpu(backend), vstage, name, role, n, error);
    if (data)
        memcpy(dst, data, n * sizeof(float));
    return data != NULL;
}

gboolean exec_cpu_tensor_set(ExecBackend *backend, int32_t vstage, const char *name,
                             ExecTensorRole role, const float *src, size_t n, GError **error) {
    float *data = exec_cpu_tensor_data(exec_cpu(backend), vstage, name, role, n, error);
    if (data)
        memcpy(data, src, n * sizeof(float));
    return data != NULL;
}

gboolean exec_cpu_get_optim_steps(ExecBackend *backend, int32_t vstage, int64_t *n_steps,
                                  GError **error) {
    ExecCpuVstage *v = exec_cpu_local_vstage(exec_cpu(backend), vstage, error);
    if (v)
        *n_steps = kern_optim_n_steps(v->optim);
    return v != NULL;
}

gboolean exec_cpu_set_optim_steps(ExecBackend *backend, int32_t vstage, int64_t n_steps,
                                  GError **error) {
    ExecCpuVstage *v = exec_cpu_local_vstage(exec_cpu(backend), vstage, error);
    PP_ASSERT(n_steps >= 0);
    if (v)
        kern_optim_set_n_steps(v->optim, n_steps);
    return v != NULL;
}

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
    size_t          floats = exec_cpu_act_floats(cpu);
    for (int i = 0; i < 2; i++)
        if (cpu->eval[i] == NULL)
            cpu->eval[i] = g_new(float, floats);
    return exec_skeleton_evaluate(&cpu->skel, floats * sizeof(float), exec_cpu_eval_step, tokens,
                                  targets, loss, error);
}
