/* SPDX-License-Identifier: MIT
 * sim-cost.h: the simulator's cost model. Every duration is integer nanoseconds, fixed
 * before the run: op durations per (stage, chunk), the cost of a hop between devices, and
 * the memory model's byte counts. Built from a scenario (explicit [costs] or the analytic
 * FLOP model) or directly (tests).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-scenario.h"
#include "pp-sched-cache.h"
#include "pp-schedule.h"

G_BEGIN_DECLS

typedef struct {
    int32_t  n_stages;
    int32_t  n_chunks;
    int64_t *f_ns;             /* (n_stages * n_chunks) forward of one micro-batch, one chunk */
    int64_t *b_ns;             /* (n_stages * n_chunks) input-gradient backward B */
    int64_t *w_ns;             /* (n_stages * n_chunks) weight-gradient backward W */
    int64_t *bw_ns;            /* (n_stages * n_chunks) fused backward BW, or NULL: a BW costs
                                  B + W (sim_cost_bw_ns()); set when a measured fused
                                  backward differs from its split halves ([costs]
                                  fused_backward_us); freed by sim_cost_free() */
    int64_t *u_ns;             /* (n_stages) optimizer update */
    int64_t *stash_copy_ns;    /* (n_stages) copying the stage's weights, or NULL: free. Under
                                  weight stashing (pipedream, 2bw) the first F of each weight
                                  version on a stage pays it, as the executor copies the
                                  weights then ([costs] stash_us); freed by sim_cost_free() */
    int64_t comm_latency_ns;   /* per cross-device hop inside a node */
    double  comm_bytes_per_ns; /* that link's bandwidth; 0 = latency only */
    int64_t act_msg_bytes;     /* bytes of one activation / gradient message (per GPU) */
    /* Hops between nodes (analytic model with [hardware]; sim_cost_hop_ns()): stages a and b
     * share a node when stage_node[a] == stage_node[b] >= 0. NULL: every hop is intra-node. */
    int64_t *stage_node;              /* (n_stages) node of the stage's GPUs, -1: several */
    int64_t  comm_inter_latency_ns;   /* per hop between nodes */
    double   comm_inter_bytes_per_ns; /* 0 = latency only */
    /* The layout around this pipeline: D identical replicas of T GPUs per stage. */
    int32_t data_parallel;    /* D >= 1; throughputs count all replicas */
    int32_t tensor_parallel;  /* T >= 1; MFU divides by N * T * C GPUs per replica */
    int32_t context_parallel; /* C >= 1 context-parallel ranks of every stage */
    /* Data-parallel gradient synchronisation (sim-engine.c): before each U of stage s, the
     * gradients of each of its chunks are all-reduced across the D replicas, one chunk after
     * another on the stage's own communication channel. */
    int64_t *dp_sync_ns; /* (n_stages * n_chunks) all-reduce of the unit's gradients, or
                            NULL: no synchronisation (D = 1) */
    int32_t *dp_pieces;  /* (n_stages * n_chunks) layers of the unit: the overlap's
                            granularity (>= 1 when dp_sync_ns is set) */
    gboolean dp_overlap; /* the all-reduce of a unit starts layer by layer during its
                            last backward (else after it) */
    /* memory model, bytes per stage (index: stage) */
    int64_t *static_bytes;      /* (n_stages) weights + grads + optim + buffers: held the
                                   whole run */
    int64_t *weights_bytes;     /* (n_stages) bf16 weights + fp32 master copy (6 B/param) */
    int64_t *grads_bytes;       /* (n_stages) gradient buffer (parallel.grad_bytes B/param) */
    int64_t *optim_bytes;       /* (n_stages) Adam first and second moments, fp32 (8 B/param) */
    int64_t *buffer_bytes;      /* (n_stages) communication buffers, fsdp's gathered blocks and
                                   full recomputation's rebuilt activations (pp-memory.h);
                                   static_bytes[s] == weights + grads + optim + buffers (the
                                   engine asserts it): set all five when building a model by
                                   hand */
    int64_t *weight_copy_bytes; /* (n_stages) bytes of one extra stashed weight version */
    int64_t *act_bytes;         /* (n_stages * n_chunks) activations held per live (mb, chunk):
                                   +act at F; non-split: -act at BW; split: -act_b at B,
                                   -act_w at W */
    int64_t *act_b_bytes;       /* (n_stages * n_chunks) freed at B (split backward) */
    int64_t  tokens_per_mb;     /* tokens in one micro-batch (throughput reports) */
    int64_t  samples_per_mb;
    double   flops_per_mb;  /* model FLOPs of one micro-batch fwd+bwd, all stages (MFU):
                               3 (24bsh^2 + 4bs^2h) per layer + 6bshV for the head (GPT-2's
                               layer; docs/cost-model.md, Model shapes, for the others) */
    double hw_flops_per_mb; /* the same plus the backward's recomputation (HFU) */
    double peak_flops;      /* one device, of the precision the matrix products run at
                               (model.precision); 0 = unknown (no MFU) */
    /* Optional per-op durations (replay of a measured trace): when non-NULL, op with flat id
     * k of the schedule runs op_dur_ns[k] ns instead of the per-(stage, chunk) time above;
     * the tables still give the asynchronous bubble's per-micro-batch work. Static mode only
     * (sim_engine_run_policy() rejects it); freed by sim_cost_free(). */
    int64_t *op_dur_ns; /* (n_op_durs) by flat op id, or NULL */
    int32_t  n_op_durs; /* must equal the schedule's op count when op_dur_ns is set */
    /* Optional per-U synchronisation (replay of a data-parallel trace): with dp_sync_ns set,
     * the stage's whole synchronisation before the U of flat id k costs op_sync_ns[k] ns
     * instead of its chunks' dp_sync_ns, one piece from the latest chunk's gradient (no
     * overlap); entries of other ops are unused. Needs op_dur_ns (same length); freed by
     * sim_cost_free(). */
    int64_t *op_sync_ns; /* (n_op_durs) by flat op id, or NULL */
} SimCostModel;

/* Duration (ns) of a fused backward BW of (stage, chunk) unit @unit: bw_ns[unit] when the
 * model has fused times, else b_ns[unit] + w_ns[unit]. */
static inline int64_t sim_cost_bw_ns(const SimCostModel *cost, int32_t unit) {
    return cost->bw_ns != NULL ? cost->bw_ns[unit] : cost->b_ns[unit] + cost->w_ns[unit];
}

/* Kernel efficiency of the analytic model: the share of peak FLOP/s a micro-batch of @tokens
 * tokens reaches in a model of hidden size @hidden,
 * eff = kernel_eff_max * tokens / (tokens + kernel_eff_half_tokens)
 *       * hidden / (hidden + kernel_eff_half_hidden)   (the last factor is 1 when that key is 0).
 * Small micro-batches run small GEMMs far from peak, and narrow models spend more of a layer's
 * time in memory-bound work (LayerNorm, dropout, softmax: ~sbh bytes against 24sbh^2 FLOPs); by
 * default ([hardware] keys, defaults in pp-scenario-keys.c's key table) the curve saturates at 60%
 * of peak and reaches half of that at 2048 tokens, with no width term; the calibrated hardware
 * presets carry their own fit (docs/published-runs.md); calibrate the keys against measurements. */
double sim_cost_kernel_efficiency(const PpHardwareParams *hw, int64_t tokens, double hidden);

/* Time per FLOP of matrix products of width @width running at @speedup times the bf16 rate,
 * relative to the layer's bf16 time per FLOP (the efficiency above, taken at the model's
 * @hidden): the curve's width term h / (h + half) splits a product's time into the GEMM
 * itself, 1, and the memory-bound work around it, half / width, per FLOP at full efficiency;
 * only the GEMM runs @speedup times faster (fp8: kernel_eff_fp8 x peak_fp8 / peak), so the
 * factor is (1 / speedup + half / width) / (1 + half / hidden), half =
 * hardware.kernel_eff_half_hidden: 1 for a bf16 product of width h, 1 / speedup without a
 * width term. */
double sim_cost_matrix_time_factor(const PpHardwareParams *hw, double hidden, double width,
                                   double speedup);

/* Uniform costs for tests: every (stage, chunk) has the same f/b/w, comm is latency only,
 * memory: act_bytes 1 per live (mb, chunk) unit, static (and its split) 0.
 * Returns: (transfer full). */
SimCostModel *sim_cost_new_uniform(int32_t n_stages, int32_t n_chunks, int64_t f_ns, int64_t b_ns,
                                   int64_t w_ns, int64_t comm_ns);
/* From a scenario: [costs] when set (each stage's full-stage times, one value for every stage
 * or one per stage, split evenly over its chunks, truncated; fused_backward_us, when given,
 * fills bw_ns, stash_us stash_copy_ns; comm_us is the whole hop, bandwidth 0; update_us per U;
 * layers split evenly for the memory model), else the analytic model: layers over virtual
 * stages vs = chunk * N + stage by pp_partition_new() (run.layers_per_stage;
 * pipeline.partition = even: remainder to the first; balanced: the smallest slowest stage
 * whose split fits hardware.memory_gib with the scenario schedule's peak in-flight units),
 * forward FLOPs 24bsh^2 + 4bs^2h per layer (GPT-2's layer; in general 2bs per matrix weight,
 * pp_memory_layer_matrix_params(), + 4bs^2 * ad, halved with model.attention_flops = causal) +
 * 2bshV LM head on the last virtual stage, B = W = forward, time = FLOPs / (peak_flops *
 * eff(b*s)) (model.precision = fp8: the matrix products at kernel_eff_fp8 x peak_fp8_flops,
 * and MFU's peak_flops is the fp8 one; an MoE layer's experts at their own width,
 * sim-moe.h); U = 28 bytes per parameter / memory bandwidth; hop = link latency +
 * 2bsh bytes / link bandwidth. Memory either way: 16 bytes per parameter static, split into weights
 * 6 (bf16 + fp32 master), gradients 2 (bf16) and optimizer state 8 (Adam moments), 2 per stashed
 * copy; activations sb(34h + 5as) per layer (M_B = sb(2h + 5as) freed at B), or with
 * model.flash_attention 34sbh (M_B = 2sbh), plus the logits at the loss on the last virtual stage.
 * Returns: (transfer full), or NULL with @error set (PP_SCENARIO_ERROR_INVALID_VALUE naming
 * the key the model lacks or whose value it cannot use; PP_SCENARIO_ERROR_INCONSISTENT when
 * no split fits hardware.memory_gib; the schedule generator's errors). */
SimCostModel *sim_cost_new_from_scenario(const PpScenario *scenario, GError **error);
/* The same, taking the memory-constrained partition's peak in-flight counts from @cache
 * (pp_sched_cache_peak_inflight()): a search that builds many cost models of one pipeline
 * shape generates its schedule once. */
SimCostModel *sim_cost_new_cached(const PpScenario *scenario, PpSchedCache *cache, GError **error);
/* One cross-device hop inside a node (ns): comm_latency_ns + act_msg_bytes /
 * comm_bytes_per_ns rounded to the nearest ns; latency only when the bandwidth is 0. */
int64_t sim_cost_comm_ns(const SimCostModel *cost);
/* The same between nodes, with the inter-node link's figures. */
int64_t sim_cost_comm_inter_ns(const SimCostModel *cost);
/* The hop from stage @from to stage @to (0 on one stage): sim_cost_comm_ns() when both
 * stages share a node (stage_node), else sim_cost_comm_inter_ns(). */
int64_t sim_cost_hop_ns(const SimCostModel *cost, int32_t from, int32_t to);
/* Fills @params' f_ns, b_ns, w_ns (the largest per-chunk time over all (stage, chunk): the
 * bottleneck), comm_ns (one hop) and mem_w_fraction (the largest (act_bytes - act_b_bytes) /
 * act_bytes over all (stage, chunk): M_W / M_F, so the generator never counts a deferred W
 * below its bytes; 0 when no unit holds activations) for the generators that search with
 * costs (zb-1p, zb-2p); leaves every other field alone. */
void sim_cost_schedule_params(const SimCostModel *cost, PpScheduleParams *params);
void sim_cost_free(SimCostModel *cost);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimCostModel, sim_cost_free)

G_END_DECLS
