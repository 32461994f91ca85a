/* SPDX-License-Identifier: MIT
 * exec-skeleton-state.c: the state members every backend shares (exec-skeleton.h): each
 * virtual stage's tensor table and the roles of its tensors (another process's from its
 * remote table), by-name copies between the caller's host buffers and the device part's
 * arrays with every check of a name, role and size, EXEC_ERROR_NOT_LOCAL for another process's
 * virtual stage, and the optimizer's step count. The device part supplies only primitives
 * (ExecSkeletonStateOps: its tables, where a tensor's arrays are, a copy, its step count).
 */
#include <string.h>

#include "exec-skeleton.h"
#include "pp-error.h"

static gboolean exec_skeleton_vstage_local(const ExecSkeleton *skel, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < skel->n_vstages);
    return skel->local[skel->vstage_stage[vstage]];
}

/* The roles tensor @i of local @vstage has and, in *@data (nullable), @role's array in the
 * device part's memory (NULL when the tensor lacks the role), holding the tensor's elements
 * [*@lo, *@hi) (nullable; all of them but for a sharded optimizer's state). */
static guint exec_skeleton_roles(ExecSkeleton *skel, int32_t vstage, int i, ExecTensorRole role,
                                 float **data, size_t *lo, size_t *hi) {
    const ExecSkeletonStateOps *state = skel->state;
    const Gpt2Tensor           *t = state->tensor(skel, vstage, i);
    float                      *params = NULL, *grads = NULL;
    ExecTensorArrays            arrays = {0};
    state->flat(skel, vstage, &params, &grads);
    arrays.params = params + t->offset;
    arrays.grads = grads + t->offset;
    arrays.muon = state->optim_state(skel, vstage, i, &arrays.first, &arrays.second,
                                     &arrays.prev_update, &arrays.state_lo, &arrays.state_hi);
    gboolean whole = role == EXEC_TENSOR_PARAMS || role == EXEC_TENSOR_GRADS;
    if (lo)
        *lo = whole ? 0 : arrays.state_lo;
    if (hi)
        *hi = whole ? t->numel : arrays.state_hi;
    return exec_tensor_arrays_roles(&arrays, role, data);
}

int exec_skeleton_n_tensors(ExecBackend *backend, int32_t vstage) {
    ExecSkeleton *skel = exec_skeleton(backend);
    return exec_skeleton_vstage_local(skel, vstage) ? skel->state->n_tensors(skel, vstage)
                                                    : skel->vstages[vstage].remote.n;
}

const Gpt2Tensor *exec_skeleton_tensor(ExecBackend *backend, int32_t vstage, int i, guint *roles) {
    ExecSkeleton *skel = exec_skeleton(backend);
    if (!exec_skeleton_vstage_local(skel, vstage)) {
        const ExecRemoteTable *remote = &skel->vstages[vstage].remote;
        PP_ASSERT(i >= 0 && i < remote->n);
        if (roles)
            *roles = remote->roles[i];
        return &remote->tensors[i];
    }
    PP_ASSERT(i >= 0 && i < skel->state->n_tensors(skel, vstage));
    if (roles)
        *roles = exec_skeleton_roles(skel, vstage, i, EXEC_TENSOR_PARAMS, NULL, NULL, NULL);
    return skel->state->tensor(skel, vstage, i);
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
    int i = 0, n_tensors = skel->state->n_tensors(skel, vstage);
    while (i < n_tensors && strcmp(skel->state->tensor(skel, vstage, i)->name, name) != 0)
        i++;
    const Gpt2Tensor *t = i < n_tensors ? skel->state->tensor(skel, vstage, i) : NULL;
    float            *data = NULL;
    if (t)
        exec_skeleton_roles(skel, vstage, i, role, &data, lo, hi);
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
