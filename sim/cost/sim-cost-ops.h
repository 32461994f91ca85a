/* SPDX-License-Identifier: MIT
 * sim-cost-ops.h: the operator-level cost model (hardware.cost_model = operators;
 * docs/cost-model.md, The operator cost model). One transformer block is the list of its operators
 * on one GPU, after the parallel splits: matrix products by their (M, N, K), the attention core,
 * the memory-bound operators by the bytes they move, each timed by what bounds it on the device,
 * and a host floor of hardware.launch_us per operator launched. Each operator family has its
 * own file (sim-cost-matmul.c, sim-cost-attention.c, sim-cost-elementwise.c), the device's
 * efficiency curves are in sim-cost-device.c, the splits in sim-cost-slice.c (one function per
 * parallelism dimension) and the block's list of operators in sim-cost-block.c.
 */
#pragma once

#include <glib.h>

#include "pp-memory.h"
#include "pp-scenario.h"

G_BEGIN_DECLS

/* The passes an operator's time falls into: forward, input-gradient backward (B), weight
 * gradient (W: the weight-gradient matrix products alone). */
typedef enum {
    SIM_COST_PASS_F,
    SIM_COST_PASS_B,
    SIM_COST_PASS_W,
    SIM_COST_PASS_N_KINDS,
} SimCostPass;

/* The parts of a block's forward a recomputation reruns in the backward: one per
 * PpRecomputeModule bit number (Megatron's selective recomputation of that module), and
 * SIM_COST_RERUN_OP (torchtitan's per-operator checkpointing: the forward of what it does not
 * keep). A rerun set is a mask of these bits, SIM_COST_RERUN_ALL the whole forward (full). */
#define SIM_COST_RERUN_OP  PP_RECOMPUTE_N_MODULES
#define SIM_COST_RERUN_N   (PP_RECOMPUTE_N_MODULES + 1)
#define SIM_COST_RERUN_ALL (1u << 31)

/* What a list of operators takes on one GPU per micro-batch: device time and operators
 * launched in each pass, the forward's matrix-product FLOPs, and per rerun part the forward's
 * device time, launches and matrix FLOPs in it; synced_*: the part of the forward the host
 * issues after it waited for the GPU (Megatron's all-to-all dispatcher, dropless: the token
 * counts copied to the host), so that the host's lead is lost there and the forward runs as
 * two stretches, each the device's time or the host's launches, whichever is longer. While a
 * block is built, @module (a PpRecomputeModule bit number, -1: none) and @op_rerun (the share
 * of an operator's forward that per-operator checkpointing reruns) say where the operators
 * added next belong. */
typedef struct {
    double gpu_ns[SIM_COST_PASS_N_KINDS];
    double kernels[SIM_COST_PASS_N_KINDS];
    double matmul_flops;
    double rerun_gpu_ns[SIM_COST_RERUN_N];
    double rerun_kernels[SIM_COST_RERUN_N];
    double rerun_flops[SIM_COST_RERUN_N];
    double synced_gpu_ns;
    double synced_kernels;
    int    module;
    double op_rerun;
} SimCostOps;

/* The work of one block on one GPU after the parallel splits (sim-cost-slice.c). */
typedef struct {
    const PpHardwareParams *hw;      /* NULL: count FLOPs only (no times) */
    double                  batch;   /* b sequences per micro-batch */
    double                  keys;    /* s: keys every query attends to */
    double                  queries; /* s / C: this GPU's queries of every sequence (s
                                        with the context all-to-all) */
    double core_heads_split;         /* C with the context all-to-all (its attention
                                        core runs 1/C of the heads), else 1 */
    double tokens;                   /* b s / C: rows of this GPU's matrix products */
    double tensor;                   /* T: heads and FFN columns are split T ways */
    double norm_shards;              /* T with sequence parallelism, else 1: the share of
                                        the h-wide memory-bound operators on this GPU */
    double local_experts;            /* E / EP routed experts on this GPU */
    double expert_rows;              /* token rows of each local expert's products */
    double expert_split;             /* expert_tensor: each expert's columns split */
    double speedup;                  /* the block's matrix products run this many times
                                        the bf16 rate (fp8) */
    gboolean fp8;                    /* fp8 products: each quantises its input (F) and its
                                        output's gradient (B) */
    gboolean flash;                  /* fused attention (model.flash_attention) */
    gboolean causal;                 /* flash skips the masked half (attention_flops) */
} SimCostSlice;

/* --- the parallelism passes (sim-cost-slice.c) --- */
/* One GPU holding the whole micro-batch and every weight. */
void sim_cost_slice_init(SimCostSlice *slice, const PpScenario *scenario);
/* Tensor parallelism (T) and sequence parallelism over the tensor group. */
void sim_cost_slice_tensor(SimCostSlice *slice, const PpScenario *scenario);
/* Context parallelism (C): each GPU holds s / C tokens of every sequence; its attention core
 * runs their queries (ring), or all s queries of 1/C of the heads (all-to-all). */
void sim_cost_slice_context(SimCostSlice *slice, const PpScenario *scenario);
/* Expert parallelism (EP, expert_tensor): the routed experts this GPU runs and their rows. */
void sim_cost_slice_expert(SimCostSlice *slice, const PpScenario *scenario);

/* --- the device (sim-cost-device.c) --- */
/* ns of @batch M x K by K x N products launched together (a batched or grouped kernel) at
 * the device's matmul efficiency for that shape. */
double sim_cost_device_matmul_ns(const PpHardwareParams *hw, double batch, double M, double N,
                                 double K, double speedup);
/* ns of @flops of fused attention in @pass (F or B) over sequences of @keys keys. */
double sim_cost_device_flash_ns(const PpHardwareParams *hw, double flops, double keys,
                                SimCostPass pass);
/* ns to move @bytes through device memory. */
double sim_cost_device_memory_ns(const PpHardwareParams *hw, double bytes);

/* --- the operator families --- */
/* @count products of @M rows by a @K x @N weight, one grouped operator per pass: the forward
 * (M, N, K) in F, the input gradient (M, K, N) in B, the weight gradient (K, N, M) in W; with
 * fp8 the quantisation of the inputs (F) and of the output gradients (B), 4 bytes per element
 * at HBM bandwidth, one operator each (sim-cost-matmul.c). */
void sim_cost_ops_matmul(SimCostOps *ops, const SimCostSlice *slice, double M, double N, double K,
                         double count);
/* The attention core of @heads local query heads of widths @d_qk, @d_v (sim-cost-attention.c). */
void sim_cost_ops_attention(SimCostOps *ops, const SimCostSlice *slice, double heads, double d_qk,
                            double d_v);
/* A memory-bound operator over @elements 2-byte elements moving @f_bytes per element in the
 * forward and @b_bytes in the backward (sim-cost-elementwise.c). */
void sim_cost_ops_elementwise(SimCostOps *ops, const SimCostSlice *slice, double elements,
                              double f_bytes, double b_bytes);

/* Adds the forward of an operator, @gpu_ns and @kernels, and its matrix @flops to @ops: to F,
 * to the rerun part of ops->module and op_rerun x it to SIM_COST_RERUN_OP (sim-cost-tally.c). */
void sim_cost_ops_add_forward(SimCostOps *ops, double gpu_ns, double kernels, double flops);

/* --- the block and the head (sim-cost-block.c) --- */
/* The operators of one block (@moe: an MoE block of @shape) on one GPU; with @count_only
 * their FLOPs alone (no device times: any cost model). */
void sim_cost_ops_block(const PpScenario *scenario, const PpMemoryShape *shape, gboolean moe,
                        gboolean count_only, SimCostOps *ops);
/* The rerun set of the scenario's model.recompute (SimCostOps): full SIM_COST_RERUN_ALL,
 * selective its modules' bits (moe with moe_act's and shared_experts'), op SIM_COST_RERUN_OP. */
guint sim_cost_ops_rerun_set(const PpScenario *scenario);
/* The forward matrix FLOPs of @ops that the rerun set @rerun reruns. */
double sim_cost_ops_rerun_flops(const SimCostOps *ops, guint rerun);
/* The LM head's matrix product and the cross-entropy over its logits on one GPU. */
void sim_cost_ops_head(const PpScenario *scenario, SimCostOps *ops);
/* ns of @pass of @ops: the device time, or the host's launches when they take longer, over
 * each stretch the host issues without waiting (the forward's synced part is its own
 * stretch); B includes the forward's parts in the rerun set @rerun
 * (sim_cost_ops_rerun_set(); full: all of it, synced again; a partial rerun: one stretch with
 * the backward). */
double sim_cost_ops_pass_ns(const SimCostOps *ops, const PpHardwareParams *hw, SimCostPass pass,
                            guint rerun);
/* Checks that every pass of @ops (one block or the head) stays within the simulator's clock
 * over the model's layers; FALSE with @error naming hardware.launch_us and the rates. */
gboolean sim_cost_ops_check(const SimCostOps *ops, const PpScenario *scenario, GError **error);
/* The F, B and W ns of @n_dense blocks of @dense, @n_moe of @moe and @head (NULL: none). */
void sim_cost_ops_unit_ns(const SimCostOps *dense, int32_t n_dense, const SimCostOps *moe,
                          int32_t n_moe, const SimCostOps *head, const PpHardwareParams *hw,
                          guint rerun, double ns[SIM_COST_PASS_N_KINDS]);

G_END_DECLS
