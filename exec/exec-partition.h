/* SPDX-License-Identifier: MIT
 * exec-partition.h: which transformer blocks each virtual stage of the pipeline holds.
 * Blocks are cut into n_vstages contiguous ranges that minimise the largest per-stage forward
 * cost (stage 0 also holds the embeddings, the last stage the final LayerNorm, LM head and
 * loss), or taken from run.layers_per_stage when the scenario gives it.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* Model shape and pipeline width the partition is computed for. */
typedef struct {
    int32_t        n_layers;          /* transformer blocks L */
    int32_t        hidden;            /* C */
    int32_t        seq_len;           /* T */
    int32_t        vocab;             /* V (unpadded) */
    int32_t        n_vstages;         /* virtual stages (stages * chunks) */
    const int32_t *layers_per_vstage; /* (nullable) (n_vstages) explicit block counts in
                                         virtual-stage order; NULL: balanced by cost */
} ExecPartitionParams;

/* Plain data: the ranges [layer_begin[vs], layer_end[vs]) of every virtual stage. */
typedef struct _ExecPartition ExecPartition;
struct _ExecPartition {
    int32_t  n_vstages;
    int32_t *layer_begin;       /* (n_vstages) */
    int32_t *layer_end;         /* (n_vstages) */
    int64_t *flops_per_seq;     /* (n_vstages) forward FLOPs of one sequence on that vstage */
    int64_t  max_flops_per_seq; /* the largest entry of flops_per_seq */
};

/* --- cost model (forward FLOPs of one sequence of seq_len tokens) --- */

/* One block: 24*T*C^2 (matmuls) + 4*T^2*C (attention scores and weighted sum). */
int64_t exec_partition_layer_flops(int32_t hidden, int32_t seq_len);
/* Final LayerNorm + LM head + loss: 2*T*C*V (the head matmul; the rest is negligible).
 * Embeddings cost ~0 FLOPs (a gather), although wte takes V*C floats of memory. */
int64_t exec_partition_head_flops(int32_t hidden, int32_t seq_len, int32_t vocab);

/* --- construction --- */

/* Computes the partition. Every virtual stage holds at least one block. Balanced mode picks,
 * among the partitions with the smallest maximum cost, the one where each stage in turn takes
 * ceil(remaining blocks / remaining stages) clamped to the counts that keep the optimum
 * reachable (equal costs: an even split with the remainder to the first stages).
 * Returns: (transfer full), or NULL with @error set: PP_SCENARIO_ERROR_INVALID_VALUE naming
 * run.layers_per_stage when an explicit count is < 1 or they do not sum to model.layers;
 * PP_SCENARIO_ERROR_INCONSISTENT when n_vstages > L or a size is < 1. */
ExecPartition *exec_partition_new(const ExecPartitionParams *params, GError **error);
void           exec_partition_free(ExecPartition *partition);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecPartition, exec_partition_free)

G_END_DECLS
