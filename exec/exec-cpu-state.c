/* SPDX-License-Identifier: MIT
 * exec-cpu-state.c: the CPU backend's state members: each virtual stage's tensor table and
 * the roles its tensors have, by-name copies between the caller's host buffers and the
 * slices' and optimizers' arenas, optimizer step counts, and evaluation on the drained
 * pipeline.
 */
#include <string.h>

#include "exec-cpu-private.h"
#include "pp-error.h"

static ExecCpuVstage *exec_cpu_vstage(ExecCpuBackend *cpu, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < cpu->n_vstages);
    return &cpu->vstages[vstage];
}

int exec_cpu_n_tensors(ExecBackend *backend, int32_t vstage) {
    return gpt2_slice_n_tensors(exec_cpu_vstage(exec_cpu(backend), vstage)->slice);
}

/* The roles tensor @i of @v has, and (nullable outs) their data in the CPU arenas: @role's
 * array of tensor->numel floats, NULL when the tensor lacks the role. */
static guint exec_cpu_roles(ExecCpuVstage *v, int i, ExecTensorRole role, float **data) {
    const Gpt2Tensor *t = gpt2_slice_tensor(v->slice, i);
    float            *first = NULL, *second = NULL;
    int               muon = kern_optim_tensor_state(v->optim, i, &first, &second);
    float            *prev = kern_optim_prev_update(v->optim);
    float            *at[EXEC_TENSOR_N_ROLES] = {
                   [EXEC_TENSOR_PARAMS] = gpt2_slice_params(v->slice) + t->offset,
                   [EXEC_TENSOR_GRADS] = gpt2_slice_grads(v->slice) + t->offset,
                   [EXEC_TENSOR_ADAM_M] = muon ? NULL : first,
                   [EXEC_TENSOR_ADAM_V] = muon ? NULL : second,
                   [EXEC_TENSOR_MUON_MOMENTUM] = muon ? first : NULL,
                   [EXEC_TENSOR_PREV_UPDATE] = prev ? prev + t->offset : NULL,
    };
    guint roles = 0;
    for (int r = 0; r < EXEC_TENSOR_N_ROLES; r++)
        roles |= at[r] ? EXEC_TENSOR_ROLE_BIT(r) : 0u;
    if (data)
        *data = at[role];
    return roles;
}

const Gpt2Tensor *exec_cpu_tensor(ExecBackend *backend, int32_t vstage, int i, guint *roles) {
    ExecCpuVstage *v = exec_cpu_vstage(exec_cpu(backend), vstage);
    PP_ASSERT(i >= 0 && i < gpt2_slice_n_tensors(v->slice));
    if (roles)
        *roles = exec_cpu_roles(v, i, EXEC_TENSOR_PARAMS, NULL);
    return gpt2_slice_tensor(v->slice, i);
}

/* The arena data of @role of tensor @name of @vstage, checked against @n floats. */
static float *exec_cpu_tensor_data(ExecCpuBackend *cpu, int32_t vstage, const char *name,
                                   ExecTensorRole role, size_t n, GError **error) {
    ExecCpuVstage *v = exec_cpu_vstage(cpu, vstage);
    PP_ASSERT(role >= 0 && role < EXEC_TENSOR_N_ROLES);
    for (int i = 0; i < gpt2_slice_n_tensors(v->slice); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(v->slice, i);
        if (strcmp(t->name, name) != 0)
            continue;
        float *data = NULL;
        exec_cpu_roles(v, i, role, &data);
        if (data && n == t->numel)
            return data;
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_TENSOR,
                    "virtual stage %d: tensor %s has %zu floats and %s %s; the caller asked "
                    "for %zu",
                    vstage, name, t->numel, data ? "role" : "no role", exec_tensor_role_name(role),
                    n);
        return NULL;
    }
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_TENSOR, "virtual stage %d holds no tensor %s", vstage,
                name);
    return NULL;
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
    (void)error;
    *n_steps = kern_optim_n_steps(exec_cpu_vstage(exec_cpu(backend), vstage)->optim);
    return TRUE;
}

gboolean exec_cpu_set_optim_steps(ExecBackend *backend, int32_t vstage, int64_t n_steps,
                                  GError **error) {
    (void)error;
    PP_ASSERT(n_steps >= 0);
    kern_optim_set_n_steps(exec_cpu_vstage(exec_cpu(backend), vstage)->optim, n_steps);
    return TRUE;
}

gboolean exec_cpu_evaluate(ExecBackend *backend, const int32_t *tokens, const int32_t *targets,
                           float *loss, GError **error) {
    ExecCpuBackend   *cpu = exec_cpu(backend);
    size_t            floats = exec_cpu_act_floats(cpu);
    g_autofree float *x = g_new(float, floats); /* (B, T, C) */
    g_autofree float *y = g_new(float, floats); /* (B, T, C) */
    (void)error;
    for (int32_t vs = 0; vs < cpu->n_vstages; vs++) {
        Gpt2Slice *slice = cpu->vstages[vs].slice;
        gboolean   first = vs == 0, last = vs == cpu->n_vstages - 1;
        /* Slot 0 is free: the pipeline is drained between replays. */
        gpt2_slice_forward(slice, gpt2_slice_params(slice), 0, first ? tokens : NULL,
                           first ? NULL : x, last ? targets : NULL, last ? NULL : y,
                           last ? loss : NULL);
        float *swap = x;
        x = y;
        y = swap;
    }
    return TRUE;
}
