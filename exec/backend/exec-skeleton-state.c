/* SPDX-License-Identifier: MIT
 * exec-skeleton-state.c: the state members every backend shares (exec-skeleton.h): each
 * virtual stage's tensor table and the roles of its tensors (the model layout's, for local and
 * remote virtual stages alike), by-name copies between the caller's host buffers and the
 * device part's arrays with every check of a name, role and size, EXEC_ERROR_NOT_LOCAL for
 * another process's virtual stage, and the optimizer's step count. The device part supplies
 * only primitives (ExecSkeletonStateOps: where its flat buffers and a tensor's optimizer state
 * are, a copy, its step count).
 */
#include <string.h>

#include "exec-skeleton.h"
#include "pp-error.h"

static gboolean exec_skeleton_vstage_local(const ExecSkeleton *skel, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < skel->n_vstages);
    return skel->local[skel->vstage_stage[vstage]];
}

/* Tensor @i's @role array of local @vstage in the device part's memory, or NULL when the
 * layout gives the tensor no such role. The array holds the tensor's elements [*@lo, *@hi)
 * (nullable): all of them but for a sharded optimizer's state (ZeRO-1). */
static float *exec_skeleton_role_data(ExecSkeleton *skel, int32_t vstage, int i,
                                      ExecTensorRole role, size_t *lo, size_t *hi) {
    const ExecTensor *t = &exec_skeleton_vstage_layout(skel, vstage)->tensors[i];
    if (!(t->roles & EXEC_TENSOR_ROLE_BIT(role)))
        return NULL;
    float *params = NULL, *grads = NULL, *prev = NULL, *first = NULL, *second = NULL;
    float *data = NULL;
    size_t state_lo = 0, state_hi = t->numel;
    switch (role) {
    case EXEC_TENSOR_PARAMS:
    case EXEC_TENSOR_GRADS:
        skel->state->flat(skel, vstage, &params, &grads);
        data = (role == EXEC_TENSOR_PARAMS ? params : grads) + t->offset;
        break;
    case EXEC_TENSOR_PREV_UPDATE:
    case EXEC_TENSOR_ADAM_M:
    case EXEC_TENSOR_MUON_MOMENTUM:
    case EXEC_TENSOR_ADAM_V:
        skel->state->optim_state(skel, vstage, i, &first, &second, &prev, &state_lo, &state_hi);
        data = role == EXEC_TENSOR_PREV_UPDATE ? prev : role == EXEC_TENSOR_ADAM_V ? second : first;
        break;
    case EXEC_TENSOR_N_ROLES:
        PP_UNREACHABLE();
    }
    /* The device part allocated what the layout says: every role has its array. */
    PP_ASSERT(data != NULL);
    if (lo)
        *lo = state_lo;
    if (hi)
        *hi = state_hi;
    return data;
}

int exec_skeleton_n_tensors(ExecBackend *backend, int32_t vstage) {
    ExecSkeleton *skel = exec_skeleton(backend);
    PP_ASSERT(vstage >= 0 && vstage < skel->n_vstages);
    return exec_skeleton_vstage_layout(skel, vstage)->n_tensors;
}

const ExecTensor *exec_skeleton_tensor(ExecBackend *backend, int32_t vstage, int i) {
    ExecSkeleton *skel = exec_skeleton(backend);
    PP_ASSERT(vstage >= 0 && vstage < skel->n_vstages);
    const ExecVstageLayout *v = exec_skeleton_vstage_layout(skel, vstage);
    PP_ASSERT(i >= 0 && i < v->n_tensors);
    return &v->tensors[i];
}

/* FALSE with EXEC_ERROR_NOT_LOCAL unless this process holds @vstage. */
static gboolean exec_skeleton_check_local(ExecSkeleton *skel, int32_t vstage, GError **error) {
    if (exec_skeleton_vstage_local(skel, vstage))
        return TRUE;
    exec_backend_set_not_local(error, skel->comm, vstage, skel->vstage_stage[vstage]);
    return FALSE;
}

/* The device part's array of @role of tensor @name of @vstage, checked against @n floats; it
 * holds the tensor's elements [*@lo, *@hi). */
static float *exec_skeleton_tensor_data(ExecSkeleton *skel, int32_t vstage, const char *name,
                                        ExecTensorRole role, size_t n, size_t *lo, size_t *hi,
                                        GError **error) {
    PP_ASSERT(role >= 0 && role < EXEC_TENSOR_N_ROLES);
    if (!exec_skeleton_check_local(skel, vstage, error))
        return NULL;
    const ExecVstageLayout *v = exec_skeleton_vstage_layout(skel, vstage);
    int                     i = 0;
    while (i < v->n_tensors && strcmp(v->tensors[i].name, name) != 0)
        i++;
    const ExecTensor *t = i < v->n_tensors ? &v->tensors[i] : NULL;
    float            *data = t ? exec_skeleton_role_data(skel, vstage, i, role, lo, hi) : NULL;
    return exec_tensor_checked(vstage, name, t, role, data, n, error);
}

/* A sharded optimizer's state (ZeRO-1) holds part of a tensor: get fills only that part of
 * @dst, set reads only that part of @src. */
gboolean exec_skeleton_tensor_get(ExecBackend *backend, int32_t vstage, const char *name,
                                  ExecTensorRole role, float *dst, size_t n, GError **error) {
    ExecSkeleton *skel = exec_skeleton(backend);
    size_t        lo = 0, hi = 0;
    const float  *data = exec_skeleton_tensor_data(skel, vstage, name, role, n, &lo, &hi, error);
    if (data && hi > lo)
        skel->state->copy(skel, vstage, dst + lo, data, (hi - lo) * sizeof(float), TRUE);
    return data != NULL;
}

gboolean exec_skeleton_tensor_set(ExecBackend *backend, int32_t vstage, const char *name,
                                  ExecTensorRole role, const float *src, size_t n, GError **error) {
    ExecSkeleton *skel = exec_skeleton(backend);
    size_t        lo = 0, hi = 0;
    float        *data = exec_skeleton_tensor_data(skel, vstage, name, role, n, &lo, &hi, error);
    if (data == NULL)
        return FALSE;
    if (hi > lo)
        skel->state->copy(skel, vstage, data, src + lo, (hi - lo) * sizeof(float), FALSE);
    if (skel->state->after_set)
        skel->state->after_set(skel, vstage, role);
    return TRUE;
}

gboolean exec_skeleton_get_optim_steps(ExecBackend *backend, int32_t vstage, int64_t *n_steps,
                                       GError **error) {
    ExecSkeleton *skel = exec_skeleton(backend);
    if (!exec_skeleton_check_local(skel, vstage, error))
        return FALSE;
    *n_steps = skel->state->get_optim_steps(skel, vstage);
    return TRUE;
}

gboolean exec_skeleton_set_optim_steps(ExecBackend *backend, int32_t vstage, int64_t n_steps,
                                       GError **error) {
    ExecSkeleton *skel = exec_skeleton(backend);
    PP_ASSERT(n_steps >= 0);
    if (!exec_skeleton_check_local(skel, vstage, error))
        return FALSE;
    skel->state->set_optim_steps(skel, vstage, n_steps);
    return TRUE;
}
