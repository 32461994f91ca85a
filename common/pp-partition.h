/* SPDX-License-Identifier: MIT
 * pp-partition.h: which transformer blocks each virtual stage of the pipeline holds, shared by
 * the simulator's analytic cost model and the executor. Blocks are cut into n_vstages
 * contiguous ranges that minimise the largest per-stage cost (stage 0 may pay extra for the
 * embeddings, the last stage for the LM head and loss), optionally subject to every stage's
 * memory fitting a device limit; or split evenly; or taken from run.layers_per_stage.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef enum {
    PP_PARTITION_BALANCED = 0, /* minimise the largest stage cost (within the memory limit) */
    PP_PARTITION_EVEN,         /* L / n_vstages each, the remainder to the first stages */
} PpPartitionMode;

/* What the partition is computed for. Costs are in any one unit (FLOPs, ns); bytes in bytes.
 * Virtual stage vs holding blocks [a, b) costs sum(layer_cost[a..b)) (+ first_cost when
 * vs == 0, + last_cost when vs == n_vstages - 1) and, with the memory constraint on, needs
 * static + live_units[vs] * act bytes where static = sum(layer_static_bytes[a..b))
 * (+ first_static_bytes, + last_static_bytes) and act = sum(layer_act_bytes[a..b))
 * (+ first_act_bytes, + last_act_bytes) likewise. */
typedef struct {
    int32_t         n_layers;          /* transformer blocks L */
    int32_t         n_vstages;         /* virtual stages (stages * chunks) */
    PpPartitionMode mode;              /* ignored when layers_per_vstage is set */
    const int32_t  *layers_per_vstage; /* (nullable) (n_vstages) explicit block counts in
                                          virtual-stage order; overrides mode */
    const int64_t *layer_cost;         /* (n_layers) cost of each block, >= 0 */
    int64_t        first_cost;         /* extra on virtual stage 0 (embeddings), >= 0 */
    int64_t        last_cost;          /* extra on the last virtual stage (head, loss), >= 0 */
    /* Memory constraint (balanced mode only): on when mem_limit_bytes > 0; then the three
     * arrays are required. What must fit is a device: the sum of its virtual stages. */
    int64_t        mem_limit_bytes;    /* per device; 0 = unconstrained */
    const int32_t *vstage_device;      /* (nullable) (n_vstages) the device, 0..n_devices-1,
                                          each virtual stage runs on; NULL: each its own */
    int32_t        n_devices;          /* devices with vstage_device; else ignored */
    const int64_t *layer_static_bytes; /* (n_layers) weights + grads + optimizer state */
    const int64_t *layer_act_bytes;    /* (n_layers) activations of one live unit */
    const int32_t *live_units;         /* (n_vstages) peak live (mb, chunk) units, >= 0 */
    int64_t        first_static_bytes, first_act_bytes; /* embeddings on virtual stage 0 */
    int64_t        last_static_bytes, last_act_bytes;   /* head + logits on the last one */
    const char    *mem_advice; /* (nullable) what to change, appended to the error when no split
                                  fits the limit (pp_memory_advice()) */
} PpPartitionParams;

/* The most blocks a partition takes: the balanced split's dynamic program runs in
 * O(n_vstages * n_layers^2) time and O(n_vstages * n_layers) memory with n_vstages <=
 * n_layers, about 2e8 steps (under a second) at 1024; the deepest published GPT-style models
 * have about 130 blocks. */
#define PP_PARTITION_MAX_LAYERS 1024

/* Plain data: the ranges [layer_begin[vs], layer_end[vs]) of every virtual stage. */
typedef struct _PpPartition PpPartition;
struct _PpPartition {
    int32_t  n_vstages;
    int32_t *layer_begin; /* (n_vstages) */
    int32_t *layer_end;   /* (n_vstages) */
    int64_t *cost;        /* (n_vstages) stage cost in the unit of layer_cost */
    int64_t  max_cost;    /* the largest entry of cost */
    int64_t *mem_bytes;   /* (n_vstages) stage memory when the constraint is on, else NULL */
};

/* --- cost model (forward FLOPs of one sequence of seq_len tokens) --- */

/* One block: 24*T*C^2 (matmuls) + 4*T^2*C (attention scores and weighted sum); INT64_MAX
 * when that exceeds PP_CHECKED_MAX (pp_partition_new() then rejects the costs). */
int64_t pp_partition_layer_flops(int32_t hidden, int32_t seq_len);
/* Final LayerNorm + LM head + loss: 2*T*C*V (the head matmul; the rest is negligible);
 * INT64_MAX beyond PP_CHECKED_MAX. Embeddings cost ~0 FLOPs (a gather), although wte takes
 * V*C floats of memory. */
int64_t pp_partition_head_flops(int32_t hidden, int32_t seq_len, int32_t vocab);

/* --- construction --- */

/* Computes the partition. Every virtual stage holds at least one block. Balanced mode is a
 * two-pass dynamic program: the smallest achievable maximum stage cost among the partitions
 * whose every stage fits mem_limit_bytes, then, front to back, each stage takes the count
 * nearest to ceil(remaining blocks / remaining stages) (ties: the larger) among those that
 * keep the optimum reachable (equal costs, no memory limit: an even split with the remainder
 * to the first stages).
 * With several virtual stages on one device (vstage_device) the limit holds for their sum:
 * the program then caps each virtual stage's memory so that a device's caps add up to the
 * limit, trying equal shares, shares in proportion to the stage memories of the split
 * balanced with each virtual stage allowed the whole limit, shares in proportion to those of
 * the split whose fullest virtual stage is smallest (which fits its own caps whenever its
 * devices fit), and the first of those splits itself when its devices fit, and keeps the
 * smallest maximum cost (ties: that order). It finds a split whenever the frugal one fits,
 * but may miss the one of smallest cost.
 * Returns: (transfer full), or NULL with @error set: PP_SCENARIO_ERROR_INVALID_VALUE naming
 * run.layers_per_stage when an explicit count is < 1 or they do not sum to model.layers, and
 * model.layers when L > PP_PARTITION_MAX_LAYERS; PP_SCENARIO_ERROR_INCONSISTENT when
 * n_vstages > L or a size is < 1, when the whole model's cost, or (memory limit on) its
 * static bytes plus a stage's live units times its activation bytes, exceed PP_CHECKED_MAX,
 * or when no partition fits the memory limit (the message names the fullest device of the
 * split whose fullest virtual stage is smallest, by how much it exceeds the limit, and
 * mem_advice). */
PpPartition *pp_partition_new(const PpPartitionParams *params, GError **error);
/* The executor's split of GPT-2 (exec/pipeline/exec.c; the simulator's replay and calibration
 * follow it): @n_layers blocks of pp_partition_layer_flops() each, the head's
 * pp_partition_head_flops() on the last of @n_vstages virtual stages, no memory limit;
 * @layers_per_vstage (nullable) overrides @mode as in PpPartitionParams. Returns as
 * pp_partition_new(). */
PpPartition *pp_partition_new_gpt2_flops(int32_t n_layers, int32_t hidden, int32_t seq_len,
                                         int32_t vocab, int32_t n_vstages, PpPartitionMode mode,
                                         const int32_t *layers_per_vstage, GError **error);
void         pp_partition_free(PpPartition *partition);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PpPartition, pp_partition_free)

G_END_DECLS
