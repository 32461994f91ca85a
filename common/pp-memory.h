/* SPDX-License-Identifier: MIT
 * pp-memory.h: the memory model of docs/design.md §4.5 (bf16 training with fp32 master weights
 * and Adam), shared by the simulator's cost model (sim/sim-cost.c) and the executor, which
 * logs it as the predicted bytes next to the bytes its device arenas really take. Plain
 * arithmetic on the model shape; no allocation.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* Training state per parameter, 16 bytes by category: weights = bf16 copy (2) + fp32 master
 * (4); gradients in bf16 (2); optimizer state = Adam first and second moments in fp32 (4 + 4).
 * A stashed weight version is one more bf16 copy (2). A distributed optimizer (ZeRO-1) shards
 * the master copy and the moments over the data replicas. */
#define PP_MEMORY_BF16_WEIGHT_BYTES_PER_PARAM 2
#define PP_MEMORY_MASTER_BYTES_PER_PARAM      4
#define PP_MEMORY_WEIGHTS_BYTES_PER_PARAM     6
#define PP_MEMORY_GRADS_BYTES_PER_PARAM       2
#define PP_MEMORY_OPTIM_BYTES_PER_PARAM       8
#define PP_MEMORY_STATE_BYTES_PER_PARAM       16
#define PP_MEMORY_WEIGHT_COPY_BYTES_PER_PARAM 2

/* Activation recomputation (Korthikanti et al. 2022; [model] recompute). */
typedef enum {
    PP_RECOMPUTE_NONE,      /* every activation is stored */
    PP_RECOMPUTE_SELECTIVE, /* attention's scores, softmax and dropout are recomputed */
    PP_RECOMPUTE_FULL,      /* only each layer's input is stored; the backward reruns F */
} PpRecompute;
/* Logits are kept in fp32 for the loss. */
#define PP_MEMORY_LOGIT_BYTES 4

/* The model shape the memory model reads (doubles: products of dimensions stay exact below
 * 2^53 for every accepted scenario, and the callers check their sums). */
typedef struct {
    double      microbatch_size;   /* b sequences */
    double      seq_len;           /* s */
    double      hidden;            /* h */
    double      heads;             /* a */
    double      vocab;             /* V */
    gboolean    flash_attention;   /* no stored s x s attention scores */
    double      tensor;            /* T-way tensor parallelism (0 or 1: none) */
    gboolean    sequence_parallel; /* Megatron sequence parallelism shards the rest over T */
    PpRecompute recompute;
    double      zero_shards; /* replicas sharing the master weights and moments (ZeRO-1);
                                0 or 1: none */
    /* The layer beyond GPT-2's; 0 (or FALSE) gives GPT-2's value, so a shape filled without
     * them (the executor's) is the GPT-2 layer. */
    double   kv_heads;   /* k key/value heads (grouped-query attention); 0: heads */
    double   head_dim;   /* d; 0: hidden / heads */
    double   ffn_hidden; /* f; 0: 4 * hidden */
    gboolean ffn_gated;  /* SwiGLU: three h x f matrices (gate, up, down) instead of two */
} PpMemoryShape;

/* Per-part quantities of the model on one GPU (parameters, bytes per live micro-batch): with
 * tensor parallelism every count below is that GPU's 1/T share. */
typedef struct {
    double layer_params;      /* per block, (matrices + biases + LayerNorms) / T: GPT-2's
                                 (12h^2 + 13h) / T; in general pp_memory_layer_matrix_params()
                                 + (a + 2k)d + 2h + (f or 2f) + 4h, all over T */
    double embed_params;      /* (V h + s h) / T (virtual stage 0) */
    double head_params;       /* final LayerNorm + untied head: (V h + 2h) / T (last vstage) */
    double weights_bpp;       /* bytes per parameter: bf16 copy + master (sharded by ZeRO-1) */
    double optim_bpp;         /* Adam moments (sharded by ZeRO-1) */
    double state_bpp;         /* weights + gradients + optimizer */
    double layer_act_bytes;   /* activations of one block per live micro-batch, M_F: without
                                 T, recomputation or flash sb(34h + 5as) for GPT-2's layer,
                                 sb(10h + 4(ad + kd) + 4f (gelu) or 6f (swiglu) + 5as) in
                                 general (pp-memory.c) */
    double layer_act_b_bytes; /* the part a split backward frees at B, M_B: sb(2h + 5as) in the
                                 plain case; W frees the rest */
    double logits_bytes;      /* fp32 logits per live micro-batch, 4bsV / T (last vstage) */
} PpMemoryModel;

void pp_memory_model(const PpMemoryShape *shape, PpMemoryModel *model);

/* Weights of one block's matrix products, the whole layer (not split over T):
 * QKV h(a + 2k)d + output projection adh + FFN 2hf (gelu) or 3hf (swiglu); 12h^2 for GPT-2's
 * layer. A forward pass costs 2 FLOPs per such weight and token. */
double pp_memory_layer_matrix_params(const PpMemoryShape *shape);
/* Query width a * d of one block (h for GPT-2's layer): the attention scores and the weighted
 * sum cost 2bs^2 * ad FLOPs each in the forward. */
double pp_memory_attention_width(const PpMemoryShape *shape);

/* Parameters of a virtual stage of @n_layers blocks (+ embeddings when @first, + head when
 * @last). */
double pp_memory_vstage_params(const PpMemoryModel *model, int32_t n_layers, gboolean first,
                               gboolean last);
/* Activation bytes of one live (micro-batch, virtual stage) unit, and the part B frees. */
double pp_memory_unit_act_bytes(const PpMemoryModel *model, int32_t n_layers, gboolean last);
double pp_memory_unit_act_b_bytes(const PpMemoryModel *model, int32_t n_layers, gboolean last);

/* A virtual stage's predicted peak bytes by category. */
typedef struct {
    int64_t static_bytes; /* weights + gradients + optimizer state (state_bpp per parameter) */
    int64_t stash_bytes;  /* extra stashed weight versions, 2 bytes per parameter each */
    int64_t act_bytes;    /* live units x activation bytes per unit */
    int64_t total_bytes;  /* the sum */
} PpMemoryBytes;

/* The predicted peak of a virtual stage holding @n_layers blocks (+ the ends) with @live_units
 * micro-batches' activations alive at once and @extra_versions stashed weight versions beyond
 * the current one: each category rounded to whole bytes as the simulator rounds it. */
void pp_memory_vstage_bytes(const PpMemoryModel *model, int32_t n_layers, gboolean first,
                            gboolean last, int32_t live_units, int32_t extra_versions,
                            PpMemoryBytes *bytes);

G_END_DECLS
