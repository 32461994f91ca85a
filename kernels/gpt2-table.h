/* SPDX-License-Identifier: MIT
 * gpt2-table.h: the tensor table of a GPT-2 slice (names, offsets, shapes, kinds) and its
 * GPT-2 init, as plain host data without any arena. The CPU slice (gpt2-slice.h) and the CUDA
 * slice are both built on it, so they lay out and initialise their parameters alike. Plain C,
 * no allocation beyond the table itself.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "gpt2-slice.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The 12 tensors of one transformer block, in table order (see Gpt2Tensor). */
typedef enum {
    GPT2_LT_LN1_W,     /* ln_1.weight (C) */
    GPT2_LT_LN1_B,     /* ln_1.bias (C) */
    GPT2_LT_QKV_W,     /* attn.c_attn.weight (3C, C) */
    GPT2_LT_QKV_B,     /* attn.c_attn.bias (3C) */
    GPT2_LT_ATTPROJ_W, /* attn.c_proj.weight (C, C) */
    GPT2_LT_ATTPROJ_B, /* attn.c_proj.bias (C) */
    GPT2_LT_LN2_W,     /* ln_2.weight (C) */
    GPT2_LT_LN2_B,     /* ln_2.bias (C) */
    GPT2_LT_FC_W,      /* mlp.c_fc.weight (4C, C) */
    GPT2_LT_FC_B,      /* mlp.c_fc.bias (4C) */
    GPT2_LT_FCPROJ_W,  /* mlp.c_proj.weight (C, 4C) */
    GPT2_LT_FCPROJ_B,  /* mlp.c_proj.bias (C) */
    GPT2_LT_N
} Gpt2LayerTensor;

typedef struct _Gpt2Table Gpt2Table;

/* Builds the table of the slice described by @params (only model, layer_begin, layer_end,
 * has_embedding, has_head and tie_head are read): the one gpt2_slice_new() uses for the same
 * parameters. Aborts (KERN_ASSERT) on inconsistent parameters (a bad model or layer range,
 * embedding off the first block, head off the last, a tied head without both); callers
 * validate user input first.
 * Returns: (transfer full): free with gpt2_table_free(). */
Gpt2Table *gpt2_table_new(const Gpt2SliceParams *params);
/* Frees; accepts NULL. */
void gpt2_table_free(Gpt2Table *table);

/* Number of parameters (floats) of the slice: the length of its flat params/grads arrays. */
size_t gpt2_table_n_params(const Gpt2Table *table);
/* Number of tensors, and tensor @i (0 <= i < n_tensors): (transfer none), valid until
 * gpt2_table_free(). */
int               gpt2_table_n_tensors(const Gpt2Table *table);
const Gpt2Tensor *gpt2_table_tensor(const Gpt2Table *table, int i);
/* Tensor by Hugging Face name, or NULL when the slice does not hold it. (transfer none). */
const Gpt2Tensor *gpt2_table_tensor_by_name(const Gpt2Table *table, const char *name);
/* Table index of block @layer's tensor @which, @layer counted from the slice's first block
 * (0 <= layer < layer_end - layer_begin). */
int gpt2_table_layer_tensor(const Gpt2Table *table, int layer, Gpt2LayerTensor which);

/* Table indices of the embedding and head tensors, -1 when the slice does not hold them
 * (gpt2_table_head() is gpt2_table_wte() when the head is tied). */
int gpt2_table_wte(const Gpt2Table *table);
int gpt2_table_wpe(const Gpt2Table *table);
int gpt2_table_lnf_w(const Gpt2Table *table);
int gpt2_table_lnf_b(const Gpt2Table *table);
int gpt2_table_head(const Gpt2Table *table);

/* --- gradient buckets ---
 * W (gpt2_slice_backward_weight()) finishes a slice's weight gradients from its last tensors to
 * its first, one bucket at a time: bucket 0 the head (ln_f and lm_head, the table's last
 * tensors), bucket 1 + i the slice's block n_layers - 1 - i (its 12 tensors), bucket
 * n_layers + 1 the embeddings (wte and wpe, the table's first tensors; a tied head adds its
 * gradient to wte, which is therefore final with this bucket only). Each bucket is one
 * contiguous range of the flat array, and the buckets tile [0, n_params) in reverse order. A
 * bucket the slice does not hold (the head off the last slice, the embeddings off the first)
 * is empty. */

/* Number of buckets: the slice's blocks + 2 (head and embeddings, possibly empty). */
int gpt2_table_n_buckets(const Gpt2Table *table);
/* Bucket @k (0 <= k < n_buckets) is floats [*begin, *end) of the flat array. */
void gpt2_table_bucket(const Gpt2Table *table, int k, size_t *begin, size_t *end);

/* Writes tensor @i's GPT-2 init for @seed into @out (numel floats): bitwise the values
 * gpt2_slice_init_params() gives that tensor (same generator per (seed, name), same
 * standard deviations, padded vocabulary rows 0). */
void gpt2_table_init_tensor(const Gpt2Table *table, int i, uint64_t seed, float *out);

#ifdef __cplusplus
}
#endif
