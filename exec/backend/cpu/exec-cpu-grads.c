/* SPDX-License-Identifier: MIT
 * exec-cpu-grads.c: the CPU backend's flat arrays for data parallelism (exec-backend-impl.h,
 * grads and params): a local virtual stage's slice keeps its gradients and its parameters in
 * one host array each, which the reduction between replicas reads and overwrites in place
 * (the parameters with a sharded optimizer only).
 */
#include "exec-cpu-private.h"

#include "pp-error.h"

/* The slice of local virtual stage @vstage. */
static Gpt2Slice *exec_cpu_local_slice(ExecBackend *backend, int32_t vstage) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    PP_ASSERT(vstage >= 0 && vstage < cpu->skel.n_vstages);
    Gpt2Slice *slice = cpu->vstages[vstage].slice;
    PP_ASSERT(slice != NULL); /* a local virtual stage (the reduction runs on its worker) */
    return slice;
}

float *exec_cpu_grads(ExecBackend *backend, int32_t vstage, size_t *n) {
    Gpt2Slice *slice = exec_cpu_local_slice(backend, vstage);
    *n = gpt2_slice_n_params(slice);
    return gpt2_slice_grads(slice);
}

float *exec_cpu_params(ExecBackend *backend, int32_t vstage, size_t *n) {
    Gpt2Slice *slice = exec_cpu_local_slice(backend, vstage);
    *n = gpt2_slice_n_params(slice);
    return gpt2_slice_params(slice);
}
