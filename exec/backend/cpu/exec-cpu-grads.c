/* SPDX-License-Identifier: MIT
 * exec-cpu-grads.c: the CPU backend's gradients for data parallelism (exec-backend-impl.h,
 * grads): a local virtual stage's slice keeps them in one host array, which the reduction
 * between replicas reads and overwrites in place.
 */
#include "exec-cpu-private.h"

#include "pp-error.h"

float *exec_cpu_grads(ExecBackend *backend, int32_t vstage, size_t *n) {
    ExecCpuBackend *cpu = exec_cpu(backend);
    PP_ASSERT(vstage >= 0 && vstage < cpu->skel.n_vstages);
    Gpt2Slice *slice = cpu->vstages[vstage].slice;
    PP_ASSERT(slice != NULL); /* a local virtual stage (the reduction runs on its worker) */
    *n = gpt2_slice_n_params(slice);
    return gpt2_slice_grads(slice);
}
