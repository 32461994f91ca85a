/* SPDX-License-Identifier: MIT
 * optim-cuda.h: the optimizers of optim-cpu.h on CUDA (KernCudaOptim): AdamW, Muon
 * (Newton-Schulz through cuBLASLt fp32 GEMMs, TF32 off) and update-level error feedback over
 * a slice's fp32 master params and fp32 grads on the device, with the same per-float formulas
 * and state layout as kern_optim_step(). The update is gated on the device (non-finite
 * gradient norm, poisoned step, clipping factor) so that no host synchronisation is needed
 * inside a step; the step count lives on the device with the gate's outcome.
 */
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "gpt2-table.h"
#include "kern-cuda.h"
#include "optim-cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct _KernCudaOptim KernCudaOptim;

/* The device-side outcome of the last kern_cuda_optim_step() (plain data, device memory). */
typedef struct {
    int64_t t;         /* steps applied so far (AdamW's bias-correction step) */
    double  grad_norm; /* last step: sqrt of the gate's squared norm; -1 without one */
    float   factor;    /* last step: clipping factor applied to the gradients (1: none) */
    int32_t applied;   /* last step: 1 applied, 0 skipped (non-finite norm or poisoned) */
} KernCudaOptimStatus;

/* What decides, on the device, whether and how a step applies. */
typedef struct {
    const double *sq_norm; /* device (1), nullable: sum of squared gradients of everything
                              this update clips together (kern_cuda_sq_norm_acc()) */
    float grad_clip;       /* > 0: scale the gradients by kern_clip_factor(norm, grad_clip) */
    int   poison;          /* 1: skip this update */
} KernCudaStepGate;

/* Bytes of device memory kern_cuda_optim_new() allocates for @params and @table (state,
 * error-feedback buffer, Newton-Schulz scratch, block tables, status). */
size_t kern_cuda_optim_device_bytes(const KernOptimParams *params, const Gpt2Table *table);

/* Creates the optimizer for @table (read now and copied) on the current device: state all
 * zero, t 0. Aborts on bad @params as kern_optim_new() does, and on CUDA errors other than
 * running out of device memory, which returns NULL (nothing left allocated).
 * Returns: (transfer full) (nullable): free with kern_cuda_optim_free(). */
KernCudaOptim *kern_cuda_optim_new(const KernOptimParams *params, const Gpt2Table *table);
/* Synchronises the device, then frees; accepts NULL. */
void kern_cuda_optim_free(KernCudaOptim *opt);

/* One update of @params from @grads (device, gpt2_table_n_params() floats each, the table's
 * layout) with AdamW learning rate @lr (Muon: lr * muon_lr_ratio), enqueued on ctx's stream.
 * First a one-thread kernel evaluates @gate (NULL: always apply, no clipping): norm =
 * sqrt(*sq_norm); applied = !poison && norm finite; factor = kern_clip_factor(norm,
 * grad_clip) when grad_clip > 0, else 1; when applied, t += 1. Then every float gets exactly
 * kern_optim_step()'s update with g = grads * factor, or nothing when not applied. @grads is
 * not modified. A poisoned step enqueues the gate alone (no AdamW, no Muon momentum or
 * Newton-Schulz products); a step the device finds non-finite still runs Muon's products
 * (their results are discarded by the gated kernels). */
void kern_cuda_optim_step(KernCudaOptim *opt, float *params, const float *grads, float lr,
                          const KernCudaStepGate *gate, KernCudaCtx *ctx);

/* (transfer none): device pointer to the status, valid until kern_cuda_optim_free(); read it
 * with an async copy ordered after the step (e.g. at the step boundary). */
const KernCudaOptimStatus *kern_cuda_optim_status(const KernCudaOptim *opt);

/* --- state access --- */

/* Device pointers (transfer none, valid until kern_cuda_optim_free()) of tensor @i's state, as
 * kern_optim_tensor_state() gives host ones: AdamW-driven: *@first = m, *@second = v (numel
 * floats each); Muon-driven: *@first = momentum, *@second = NULL. Either out may be NULL.
 * Returns 1 when the tensor is Muon-driven, else 0. */
int kern_cuda_optim_tensor_state(KernCudaOptim *opt, int i, float **first, float **second);
/* Device pointer (transfer none) of error feedback's previous update (n_params floats, the
 * table's layout), NULL when error_feedback is off. */
float *kern_cuda_optim_prev_update(KernCudaOptim *opt);

/* The following copy to / from the host; each call synchronises ctx's stream. */

/* t, the number of applied steps. */
int64_t kern_cuda_optim_n_steps(KernCudaOptim *opt, KernCudaCtx *ctx);
void    kern_cuda_optim_set_n_steps(KernCudaOptim *opt, int64_t n_steps, KernCudaCtx *ctx);
/* Tensor @i's moments to / from host arrays of numel floats, as kern_optim_tensor_state():
 * AdamW-driven: @first = m, @second = v; Muon-driven: @first = momentum, @second unused (may
 * be NULL). Returns 1 when the tensor is Muon-driven, else 0. */
int kern_cuda_optim_tensor_state_to_host(KernCudaOptim *opt, int i, float *first, float *second,
                                         KernCudaCtx *ctx);
int kern_cuda_optim_tensor_state_from_host(KernCudaOptim *opt, int i, const float *first,
                                           const float *second, KernCudaCtx *ctx);
/* Error feedback's previous update (n_params floats) to / from host. Returns 0 (and copies
 * nothing) when error_feedback is off, else 1. */
int kern_cuda_optim_prev_update_to_host(KernCudaOptim *opt, float *host, KernCudaCtx *ctx);
int kern_cuda_optim_prev_update_from_host(KernCudaOptim *opt, const float *host, KernCudaCtx *ctx);

/* --- building blocks --- */

/* kern_newton_schulz5() on the device: the same normalisation (norm in double), orientation
 * and quintic iteration, with the three products per step as fp32 cuBLASLt GEMMs.
 *   @out     (rows, cols) device; may be @g
 *   @g       (rows, cols) device
 *   @scratch device, at least 2 * rows * cols + 3 * m * m floats, m = min(rows, cols) */
void kern_cuda_newton_schulz5(float *out, const float *g, int rows, int cols, int steps,
                              float *scratch, KernCudaCtx *ctx);
/* grads[i] *= @factor for i < @n. */
void kern_cuda_grad_scale(float *grads, size_t n, float factor, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
