/* SPDX-License-Identifier: MIT
 * gpt2-slice-cuda.h: one pipeline stage's part of GPT-2 on a CUDA device (Gpt2CudaSlice), the
 * counterpart of gpt2-slice.h: the same tensor table (gpt2-table.h) and the same F, B, W and
 * fused BW semantics, run with the gpt2_cuda_* kernels in fp32 or bf16. Device memory is one
 * arena per category (fp32 master params, bf16 compute params in bf16 mode, fp32 grads,
 * activation slots, scratch), allocated once by gpt2_cuda_slice_new() and sized beforehand by
 * gpt2_cuda_slice_sizes(); nothing is allocated afterwards.
 */
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "gpt2-slice.h"
#include "gpt2-table.h"
#include "kern-cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- construction --- */

typedef struct {
    Gpt2SliceParams slice; /* shape, layer range, ends, tie_head, B, n_act_slots: as the CPU */
    KernDtype       dtype; /* activations and compute weights: KERN_DTYPE_F32 or _BF16 */
    int             flash_attention; /* 1: the fused attention kernels (bf16, head size 32, 64
                                        or 128): no (B, NH, T, T) probabilities are kept;
                                        0: the unfused kernels (any dtype and shape) */
} Gpt2CudaSliceParams;

/* Device bytes of each arena of a slice (what gpt2_cuda_slice_new() will cudaMalloc). */
typedef struct {
    size_t params_bytes;         /* fp32 master params (n_params floats) */
    size_t compute_params_bytes; /* bf16 copy used by F/B (bf16 mode; 0 in fp32: the master) */
    size_t grads_bytes;          /* fp32 grads (n_params floats) */
    size_t act_slot_bytes;       /* one activation slot */
    size_t acts_bytes;           /* n_act_slots * act_slot_bytes */
    size_t scratch_bytes;        /* projection output, attention scratch, row losses */
    size_t total_bytes;          /* sum of the five arenas */
} Gpt2CudaSliceSizes;

/* NULL when @params describe a valid slice, else a static message naming what is wrong (layer
 * range, C % NH, V > Vp, embedding not on block 0, head not after block L-1, tie_head without
 * both ends, B or n_act_slots < 1, unknown dtype, in bf16 C, C / NH or Vp not a multiple of 8:
 * rows that keep cuBLASLt's bf16 operands 16-byte aligned, flash_attention where
 * gpt2_cuda_flash_attention_supported() says no). */
const char *gpt2_cuda_slice_params_check(const Gpt2CudaSliceParams *params);
/* Fills @sizes for valid @params (host only: no device is touched). */
void gpt2_cuda_slice_sizes(const Gpt2CudaSliceParams *params, Gpt2CudaSliceSizes *sizes);

typedef struct _Gpt2CudaSlice Gpt2CudaSlice;

/* Allocates a slice on the current device: the arenas of gpt2_cuda_slice_sizes() (params and
 * grads zeroed; call gpt2_cuda_slice_init_params() for GPT-2 init) and pinned host staging for
 * token ids. Aborts when gpt2_cuda_slice_params_check() fails (validate first). Returns NULL
 * when device or pinned memory runs out (nothing left allocated, the CUDA error cleared).
 * Returns: (transfer full) (nullable): free with gpt2_cuda_slice_free(). */
Gpt2CudaSlice *gpt2_cuda_slice_new(const Gpt2CudaSliceParams *params);
/* Synchronises the device, then frees everything; accepts NULL. */
void gpt2_cuda_slice_free(Gpt2CudaSlice *slice);

/* --- shape, tensor table and arenas --- */

/* (transfer none): the parameters the slice was built with. */
const Gpt2CudaSliceParams *gpt2_cuda_slice_params_info(const Gpt2CudaSlice *slice);
/* (transfer none): the tensor table, identical to the CPU slice's for the same parameters. */
const Gpt2Table *gpt2_cuda_slice_table(const Gpt2CudaSlice *slice);
/* Parameters (floats) of the slice: the length of the params and grads arenas. */
size_t gpt2_cuda_slice_n_params(const Gpt2CudaSlice *slice);

/* Device arenas (transfer none, valid until gpt2_cuda_slice_free()):
 * the fp32 master params and fp32 grads (n_params floats each, the table's layout), and the
 * compute params F/B read (n_params elements of the dtype: the master itself in fp32, its
 * bf16 copy in bf16). */
float *gpt2_cuda_slice_params(Gpt2CudaSlice *slice);
float *gpt2_cuda_slice_grads(Gpt2CudaSlice *slice);
void  *gpt2_cuda_slice_compute_params(Gpt2CudaSlice *slice);

/* dst (n_params elements of the slice's dtype) = @src (n_params fp32) converted: makes the
 * compute weights of a master copy, e.g. a stashed version for PipeDream / 2BW. Both device. */
void gpt2_cuda_slice_cast_params(Gpt2CudaSlice *slice, void *dst, const float *src,
                                 KernCudaCtx *ctx);
/* Refreshes the compute params from the master params (after an optimizer step); nothing to
 * do in fp32. */
void gpt2_cuda_slice_refresh_compute_params(Gpt2CudaSlice *slice, KernCudaCtx *ctx);
/* GPT-2 init of the master params, bitwise gpt2_slice_init_params()'s values (generated on
 * the host per tensor, uploaded), then the compute params refreshed. Synchronises. */
void gpt2_cuda_slice_init_params(Gpt2CudaSlice *slice, uint64_t seed, KernCudaCtx *ctx);
/* Sets the grads to 0 (enqueued on ctx's stream). */
void gpt2_cuda_slice_zero_grads(Gpt2CudaSlice *slice, KernCudaCtx *ctx);

/* --- host copies (checkpoints, tests); each call synchronises ctx's stream --- */

typedef enum {
    GPT2_CUDA_PARAMS, /* the fp32 master params */
    GPT2_CUDA_GRADS,  /* the fp32 grads */
} Gpt2CudaArena;

/* The whole arena to / from a host array of n_params floats. Writing the params refreshes the
 * compute params. */
void gpt2_cuda_slice_to_host(Gpt2CudaSlice *slice, Gpt2CudaArena which, float *host,
                             KernCudaCtx *ctx);
void gpt2_cuda_slice_from_host(Gpt2CudaSlice *slice, Gpt2CudaArena which, const float *host,
                               KernCudaCtx *ctx);
/* One tensor by Hugging Face name to / from a host array of its numel floats. Returns 0 (and
 * copies nothing) when the slice does not hold @name, else 1. Writing a param refreshes the
 * compute params. */
int gpt2_cuda_slice_tensor_to_host(Gpt2CudaSlice *slice, Gpt2CudaArena which, const char *name,
                                   float *host, KernCudaCtx *ctx);
int gpt2_cuda_slice_tensor_from_host(Gpt2CudaSlice *slice, Gpt2CudaArena which, const char *name,
                                     const float *host, KernCudaCtx *ctx);

/* --- compute: enqueued on ctx's stream; calls on one slice must be stream-ordered (they share
 * the scratch arena) --- */

/* F: forward of one micro-batch into activation slot @slot, with compute weights @params
 * (gpt2_cuda_slice_compute_params() or a cast stashed copy, device).
 *   @tokens  host (B, T) ids in [0, V): first slice only, else NULL. Checked (KERN_ASSERT),
 *            bucketed for the embedding backward, and copied through pinned staging; the
 *            caller may reuse the array when the call returns.
 *   @x_in    device (B, T, C) of the dtype: other slices only, else NULL (copied into the slot)
 *   @targets host (B, T) ids in [0, V): last slice only, else NULL (checked, copied)
 *   @x_out   device (B, T, C) of the dtype: non-last slices only, else NULL
 *   @loss    device (1) fp32: last slice, receives the mean cross-entropy; NULL otherwise */
void gpt2_cuda_slice_forward(Gpt2CudaSlice *slice, const void *params, int slot,
                             const int32_t *tokens, const void *x_in, const int32_t *targets,
                             void *x_out, float *loss, KernCudaCtx *ctx);
/* B: input-gradient backward of @slot with compute weights @params, as
 * gpt2_slice_backward_input(): the last slice starts from @loss_scale * mean loss (@dx_out
 * NULL); others from @dx_out (device (B, T, C) of the dtype). @dx_in (device, non-first
 * slices, else NULL) may be the @dx_out buffer. */
void gpt2_cuda_slice_backward_input(Gpt2CudaSlice *slice, const void *params, int slot,
                                    const void *dx_out, float loss_scale, void *dx_in,
                                    KernCudaCtx *ctx);
/* W: weight gradients of @slot ACCUMULATED (+=) into @grads (device, n_params fp32, e.g.
 * gpt2_cuda_slice_grads()). Needs a preceding B on @slot; reads no weights. */
void gpt2_cuda_slice_backward_weight(Gpt2CudaSlice *slice, int slot, float *grads,
                                     KernCudaCtx *ctx);
/* BW: B then W on @slot (bitwise the same as the two calls). */
void gpt2_cuda_slice_backward(Gpt2CudaSlice *slice, const void *params, int slot,
                              const void *dx_out, float loss_scale, void *dx_in, float *grads,
                              KernCudaCtx *ctx);

#ifdef __cplusplus
}
#endif
