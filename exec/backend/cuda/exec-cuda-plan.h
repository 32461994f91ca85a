/* SPDX-License-Identifier: MIT
 * exec-cuda-plan.h: what the CUDA backend builds, decided on the host before any device is
 * touched: the device of each stage (run.devices, or round-robin over the visible devices),
 * the element type, every virtual stage's slice, its message pools and stashed copies, and
 * the bytes of every device arena per stage (the message buffers of the transport the run
 * uses: one process, or one process per stage). exec-cuda.c allocates exactly this plan, so the
 * plan's bytes are the backend's actual device memory; host-only tests check it without a
 * GPU. Internal to libppexec (CUDA builds only).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-layout-impl.h"
#include "gpt2-slice-cuda.h"

G_BEGIN_DECLS

typedef struct {
    int32_t              n_stages, n_vstages;
    int32_t             *device; /* (n_stages) CUDA device id of each stage */
    KernDtype            dtype;  /* activations, messages, compute weights and stashes */
    Gpt2CudaSliceParams *slice;  /* (n_vstages) */
    int32_t *act_inbox;          /* (n_vstages) message slots for activations into the vstage: the
                                    producer's (vstage - 1) activation slots; 0 on vstage 0 */
    int32_t *grad_inbox;         /* (n_vstages) message slots for gradients into the vstage: its own
                                    activation slots; 0 on the last vstage */
    int32_t         *stashes;   /* (n_vstages) stashed weight copies: the stage's weight versions */
    size_t           msg_bytes; /* one message: (B, T, C) elements of dtype */
    size_t           msg_elems; /* B * T * C */
    ExecMemoryBytes *memory;    /* (n_stages) device bytes per stage by category */
} ExecCudaPlan;

/* Device bytes the backend holds per stage besides the arenas of its slices and optimizers:
 * the stage's squared-norm accumulator and loss (one 256-byte block), and two (B, T, C)
 * buffers that evaluate() passes between virtual stages. */
#define EXEC_CUDA_STAGE_SCALARS_BYTES 256

/* Floats of one replica's share of an NCCL exchange (exec-cuda-nccl.h): the all-gather's
 * scratch holds D of them (D x 16 MiB at most), whatever the size of the gradients. */
#define EXEC_CUDA_NCCL_CHUNK_FLOATS ((size_t)1 << 22)

/* Floats per replica of the NCCL reduction's scratch when the largest local virtual stage has
 * @max_n floats: min(@max_n, EXEC_CUDA_NCCL_CHUNK_FLOATS), at least 1. */
size_t exec_cuda_plan_nccl_chunk(size_t max_n);
/* The NCCL path (exec-grad-path.h), decided after the plan: adds the reduction's device
 * scratch, @replicas x exec_cuda_plan_nccl_chunk(largest virtual stage of a @local stage) fp32
 * values, to the workspace (and the total) of each @local (n_stages) stage, whose device holds
 * it. */
void exec_cuda_plan_add_nccl_scratch(ExecCudaPlan *plan, const ExecBackendSetup *setup,
                                     const gboolean *local, int32_t replicas);

/* The device of each of @n_stages stages into @out (n_stages): @devices (nullable, run.devices)
 * checked against the @n_visible devices this process sees, else stage s on s % n_visible.
 * Returns FALSE with EXEC_ERROR_BACKEND when no device is visible (@why, nullable: the CUDA
 * runtime's reason) or an id is not below @n_visible (the message names the stage, the id and
 * the valid ids). */
gboolean exec_cuda_plan_devices(const int32_t *devices, int32_t n_stages, int n_visible,
                                const char *why, int32_t *out, GError **error);

/* The plan for @setup on a process that sees @n_visible devices (@why as above). Returns:
 * (transfer full), or NULL with EXEC_ERROR_BACKEND: the device errors above, flash attention
 * outside bf16 or a head size of 32, 64 or 128, a model the slice cannot hold in the precision
 * (the slice's own check, e.g. bf16 needs C, C / NH and Vp multiples of 8). */
ExecCudaPlan *exec_cuda_plan_new(const ExecBackendSetup *setup, int n_visible, const char *why,
                                 GError **error);
void          exec_cuda_plan_free(ExecCudaPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecCudaPlan, exec_cuda_plan_free)

G_END_DECLS
