/* SPDX-License-Identifier: MIT
 * gpt2-slice.h: one pipeline stage's part of a GPT-2 model on the CPU (Gpt2Slice): a contiguous
 * range of transformer blocks, plus the embeddings on the first slice and the final LayerNorm,
 * LM head and loss on the last one. The slice owns its arenas (params, grads, activation slots)
 * and runs forward (F), input-gradient backward (B), weight-gradient backward (W) and fused BW.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- model shape --- */

/* Whole-model shape (GPT-2 Small: L 12, C 768, NH 12, T 1024, V 50257, Vp 50304). The padded
 * vocabulary Vp >= V (usually a multiple of 128) adds rows V..Vp-1 to wte and lm_head that
 * never change the loss and get zero gradient. */
typedef struct {
    int L;  /* number of transformer blocks of the whole model */
    int C;  /* channels (hidden size); C % NH == 0 */
    int NH; /* attention heads; head size C / NH */
    int T;  /* sequence length (also the number of learned positions) */
    int V;  /* vocabulary size (token ids 0..V-1) */
    int Vp; /* padded vocabulary size, V <= Vp */
} Gpt2Config;

/* Role of a tensor, for the optimizers (Muon orthogonalises GPT2_TENSOR_HIDDEN only). */
typedef enum {
    GPT2_TENSOR_EMBEDDING, /* wte.weight (Vp, C), wpe.weight (T, C) */
    GPT2_TENSOR_HIDDEN,    /* a block's matmul weight: c_attn, attn.c_proj, c_fc, mlp.c_proj */
    GPT2_TENSOR_HEAD,      /* lm_head.weight (Vp, C) (untied head only) */
    GPT2_TENSOR_GAIN,      /* LayerNorm weight (C) */
    GPT2_TENSOR_BIAS,      /* LayerNorm bias and matmul biases */
    GPT2_TENSOR_N_KINDS
} Gpt2TensorKind;

/* One parameter tensor of a slice (plain data; the table is owned by the slice).
 * Names are Hugging Face GPT-2 names relative to the whole model (block numbers are global):
 *   "wte.weight" (Vp, C)            "wpe.weight" (T, C)
 *   "h.<l>.ln_1.weight" (C)         "h.<l>.ln_1.bias" (C)
 *   "h.<l>.attn.c_attn.weight" (3C, C)   "h.<l>.attn.c_attn.bias" (3C)
 *   "h.<l>.attn.c_proj.weight" (C, C)    "h.<l>.attn.c_proj.bias" (C)
 *   "h.<l>.ln_2.weight" (C)         "h.<l>.ln_2.bias" (C)
 *   "h.<l>.mlp.c_fc.weight" (4C, C)      "h.<l>.mlp.c_fc.bias" (4C)
 *   "h.<l>.mlp.c_proj.weight" (C, 4C)    "h.<l>.mlp.c_proj.bias" (C)
 *   "ln_f.weight" (C)  "ln_f.bias" (C)  "lm_head.weight" (Vp, C)
 * Matmul weights are stored (OC, IC) row-major, out = inp @ W^T + b (llm.c), i.e. transposed
 * with respect to Hugging Face's Conv1D (IC, OC) layout. The q, k, v thirds of c_attn are rows
 * [0, C), [C, 2C), [2C, 3C); head h uses columns h*C/NH .. (h+1)*C/NH - 1 of each third.
 * Table order: wte, wpe (first slice), then per block the 12 tensors in the order above, then
 * ln_f.weight, ln_f.bias, lm_head.weight (last slice; lm_head absent when tied). Offsets are in
 * floats into the flat parameter (and gradient) array and follow the table order densely. */
typedef struct {
    const char    *name;      /* (transfer none): valid until gpt2_slice_free() */
    size_t         offset;    /* floats from the start of the flat params / grads */
    size_t         numel;     /* shape[0] * shape[1] (ndim 2) or shape[0] (ndim 1) */
    int            ndim;      /* 1 or 2 */
    int            shape[2];  /* as stored in pacer: (OC, IC) for matmuls; shape[1] = 1 if 1D */
    int            is_matrix; /* ndim == 2: gets decoupled weight decay in the optimizers */
    Gpt2TensorKind kind;
} Gpt2Tensor;

/* --- construction --- */

/* Parameters of gpt2_slice_new(). The first slice (has_embedding, layer_begin 0) holds wte and
 * wpe and takes token ids; the last (has_head, layer_end L) holds ln_f and the LM head and
 * computes the loss. tie_head 1 makes the LM head wte (GPT-2 exactly) and is allowed only on a
 * slice with both ends (a single-stage model); 0, the default, gives an untied lm_head.weight
 * (Vp, C). */
typedef struct {
    Gpt2Config model;         /* whole-model shape */
    int        layer_begin;   /* first block held, 0 <= layer_begin <= layer_end <= model.L */
    int        layer_end;     /* one past the last block held (a slice may hold no block) */
    int        has_embedding; /* 1: first slice */
    int        has_head;      /* 1: last slice */
    int        tie_head;      /* 1: LM head = wte (single-stage only) */
    int        B;             /* micro-batch size (sequences); every call uses (B, T) tokens */
    int        n_act_slots;   /* activation slots = micro-batches in flight at once, >= 1 */
} Gpt2SliceParams;

typedef struct _Gpt2Slice Gpt2Slice;

/* Allocates a slice: one arena each for params, grads, activation slots and scratch. Params
 * and grads are zeroed (call gpt2_slice_init_params() for GPT-2 init). Aborts (KERN_ASSERT)
 * on an inconsistent @params (bad layer range, C % NH != 0, V > Vp, an embedding not at block
 * 0 or a head not after block L-1, tie_head without both ends): callers validate user input
 * first. Aborts on OOM.
 * Returns: (transfer full): free with gpt2_slice_free(). */
Gpt2Slice *gpt2_slice_new(const Gpt2SliceParams *params);
/* Frees the slice and all its arenas; accepts NULL. */
void gpt2_slice_free(Gpt2Slice *slice);

/* --- shape and tensor table --- */

/* (transfer none): the parameters the slice was built with. */
const Gpt2SliceParams *gpt2_slice_params_info(const Gpt2Slice *slice);
/* Number of parameters (floats) of the slice = length of the params and grads arrays. */
size_t gpt2_slice_n_params(const Gpt2Slice *slice);
/* Number of tensors in the table, and tensor @i (0 <= i < n_tensors), (transfer none). */
int               gpt2_slice_n_tensors(const Gpt2Slice *slice);
const Gpt2Tensor *gpt2_slice_tensor(const Gpt2Slice *slice, int i);
/* Tensor by Hugging Face name, or NULL when this slice does not hold it. (transfer none). */
const Gpt2Tensor *gpt2_slice_tensor_by_name(const Gpt2Slice *slice, const char *name);

/* Bytes of each arena gpt2_slice_new() allocated (memory accounting). */
typedef struct {
    size_t params_bytes;  /* fp32 params (n_params floats) */
    size_t grads_bytes;   /* fp32 grads (n_params floats) */
    size_t acts_bytes;    /* n_act_slots activation slots, token and target ids included */
    size_t scratch_bytes; /* the projection's output (F) or its input gradient (B): (B, T, C) */
    size_t total_bytes;   /* sum of the four arenas */
} Gpt2SliceSizes;

/* Fills @sizes with the sizes the slice's arenas were allocated with. */
void gpt2_slice_sizes(const Gpt2Slice *slice, Gpt2SliceSizes *sizes);

/* The slice's own parameters and gradients, each gpt2_slice_n_params() floats laid out by the
 * tensor table. (transfer none): valid until gpt2_slice_free(). A caller keeping stashed
 * weight versions (PipeDream, 2BW) copies these arrays and passes the copy as @params below. */
float *gpt2_slice_params(Gpt2Slice *slice);
float *gpt2_slice_grads(Gpt2Slice *slice);

/* GPT-2 init of the slice's own params: matmul weights and embeddings N(0, 0.02), the two
 * residual projections (attn.c_proj.weight, mlp.c_proj.weight) N(0, 0.02 / sqrt(2 L)) with the
 * whole model's L, biases 0, LayerNorm gains 1, padded vocabulary rows (V..Vp-1) of wte and
 * lm_head 0. Each tensor draws from its own generator seeded by (@seed, tensor name), so any
 * split of the model into slices yields the same full-model weights. */
void gpt2_slice_init_params(Gpt2Slice *slice, uint64_t seed);
/* Sets the slice's own gradients to 0. */
void gpt2_slice_zero_grads(Gpt2Slice *slice);

/* --- compute (one micro-batch per call; one calling thread per slice at a time; the kernels
 * use its kern-pool team) --- */

/* F: forward of one micro-batch into activation slot @slot (0 <= slot < n_act_slots),
 * overwriting what the slot held, with weights @params (the slice's own or a stashed copy with
 * the same layout).
 *   @tokens  (B, T) int32 ids in [0, V): first slice only, else NULL
 *   @x_in    (B, T, C) the previous slice's output: other slices only, else NULL. Copied into
 *            the slot; the caller may reuse the buffer after the call, even as @x_out.
 *   @targets (B, T) int32 ids in [0, V): last slice only, else NULL (copied into the slot)
 *   @x_out   (B, T, C) caller-owned output: non-last slices only, else NULL
 *   @loss    last slice: receives the mean cross-entropy over the B*T positions (nats);
 *            NULL otherwise */
void gpt2_slice_forward(Gpt2Slice *slice, const float *params, int slot, const int32_t *tokens,
                        const float *x_in, const int32_t *targets, float *x_out, float *loss);

/* B: input-gradient backward of the micro-batch in @slot, with weights @params (the same
 * version its forward used, for exact gradients). The last slice starts from the loss: the
 * gradient of (@loss_scale * mean loss), i.e. dlogits = (probs - onehot) * loss_scale / (B*T);
 * @loss_scale is the micro-batch's share of the step (e.g. 1 / micro-batches per step) and
 * @dx_out must be NULL. Other slices start from @dx_out (B, T, C), the gradient of their x_out
 * (already scaled by the next slice), and ignore @loss_scale.
 *   @dx_in (B, T, C) caller-owned: receives the gradient w.r.t. x_in (non-first slices);
 *          NULL on the first slice. May be the @dx_out buffer (read before written).
 * Keeps in the slot everything gpt2_slice_backward_weight() needs; the slot stays busy until
 * W has run on it. */
void gpt2_slice_backward_input(Gpt2Slice *slice, const float *params, int slot, const float *dx_out,
                               float loss_scale, float *dx_in);
/* A caller's hook into W: @ready(@user_data, k, begin, end) runs on the calling thread as soon
 * as W has added its last term to bucket k of @grads (gpt2_table_bucket(): floats [begin,
 * end), end > begin; empty buckets are skipped), in bucket order 0, 1, ...; W writes no float
 * of that range after the call, so another thread may read and overwrite it meanwhile (the
 * data-parallel reduction of the bucket while W goes on). */
typedef struct {
    void (*ready)(void *user_data, int bucket, size_t begin, size_t end);
    void *user_data;
} Gpt2GradsHook;

/* W: weight gradients of the micro-batch in @slot, ACCUMULATED (+=) into @grads (the slice's
 * own gradients or any array of gpt2_slice_n_params() floats). Needs a preceding B on @slot.
 * Needs no weights: dW depends only on the saved activations and output gradients. @hook
 * (nullable) hears of each bucket as it becomes final. */
void gpt2_slice_backward_weight(Gpt2Slice *slice, int slot, float *grads,
                                const Gpt2GradsHook *hook);
/* BW: B and W on @slot (with @hook, nullable), each part's W right after its B (the head,
 * then every block from the last, then the embeddings), so that a bucket is final as soon as
 * its part's backward has run. Gives bit-for-bit the same dx_in and grads as the two calls. */
void gpt2_slice_backward(Gpt2Slice *slice, const float *params, int slot, const float *dx_out,
                         float loss_scale, float *dx_in, float *grads, const Gpt2GradsHook *hook);

/* Determinism: every reduction has a fixed order that does not depend on the thread count
 * (gpt2-cpu.h), so the same inputs on the same machine give bitwise identical results for any
 * kern_set_threads() value; a processor with another vector instruction set (kern-simd.h, and
 * valgrind's emulated CPU) or another OpenBLAS core type may round differently. Splitting a model
 * at any block boundary gives bitwise the same loss, x_out/dx_in at the boundaries and gradients as
 * one slice of the whole model (each block runs the same kernels on the same shapes). */

#ifdef __cplusplus
}
#endif
