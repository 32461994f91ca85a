/* SPDX-License-Identifier: MIT
 * sim-cost.c: the simulator's cost model (docs/design.md §4.4). Explicit [costs] times or the
 * analytic model: transformer FLOPs per layer over peak FLOP/s times a kernel-efficiency
 * curve, a link of given bandwidth and latency, and Korthikanti et al.'s activation sizes.
 * Every duration is rounded to integer ns once, here; the engine only adds integers.
 */
#include "sim-cost.h"

#include <math.h>

#include "pp-checked.h"
#include "pp-error.h"
#include "pp-memory-advice.h"
#include "pp-memory.h"
#include "pp-partition.h"
#include "sim-cost-ops.h"
#include "sim-layout.h"
#include "sim-moe.h"

/* The optimizer step is memory bound: AdamW reads gradients, master weights and both moments
 * (2 + 4 + 4 + 4) and writes master weights, moments and bf16 weights (4 + 4 + 4 + 2). */
#define SIM_COST_UPDATE_BYTES_PER_PARAM 28
/* Activations and gradients travel between stages in bf16. */
#define SIM_COST_MSG_BYTES_PER_ELEM 2

double sim_cost_kernel_efficiency(const PpHardwareParams *hw, int64_t tokens, double hidden) {
    PP_ASSERT(tokens > 0 || hw->kernel_eff_half_tokens > 0.0);
    PP_ASSERT(hidden > 0.0 || hw->kernel_eff_half_hidden > 0.0);
    double eff =
        hw->kernel_eff_max * (double)tokens / ((double)tokens + hw->kernel_eff_half_tokens);
    if (hw->kernel_eff_half_hidden > 0.0)
        eff *= hidden / (hidden + hw->kernel_eff_half_hidden);
    return eff;
}

double sim_cost_matrix_time_factor(const PpHardwareParams *hw, double hidden, double width,
                                   double speedup) {
    PP_ASSERT(hidden > 0.0 && width > 0.0 && speedup > 0.0);
    const double half = MAX(hw->kernel_eff_half_hidden, 0.0);
    return (1.0 / speedup + half / width) / (1.0 + half / hidden);
}

/* Allocates a zeroed model with every per-stage table sized for @n_stages x @n_chunks. */
static SimCostModel *sim_cost_alloc(int32_t n_stages, int32_t n_chunks) {
    PP_ASSERT(n_stages >= 1 && n_chunks >= 1);
    size_t        n_units = (size_t)n_stages * (size_t)n_chunks;
    SimCostModel *cost = g_new0(SimCostModel, 1);
    cost->n_stages = n_stages;
    cost->n_chunks = n_chunks;
    cost->f_ns = g_new0(int64_t, n_units);
    cost->b_ns = g_new0(int64_t, n_units);
    cost->w_ns = g_new0(int64_t, n_units);
    cost->u_ns = g_new0(int64_t, n_stages);
    cost->static_bytes = g_new0(int64_t, n_stages);
    cost->weights_bytes = g_new0(int64_t, n_stages);
    cost->grads_bytes = g_new0(int64_t, n_stages);
    cost->optim_bytes = g_new0(int64_t, n_stages);
    cost->buffer_bytes = g_new0(int64_t, n_stages);
    cost->weight_copy_bytes = g_new0(int64_t, n_stages);
    cost->act_bytes = g_new0(int64_t, n_units);
    cost->act_b_bytes = g_new0(int64_t, n_units);
    cost->data_parallel = 1;
    cost->tensor_parallel = 1;
    cost->context_parallel = 1;
    return cost;
}

void sim_cost_free(SimCostModel *cost) {
    if (cost == NULL)
        return;
    g_free(cost->f_ns);
    g_free(cost->b_ns);
    g_free(cost->w_ns);
    g_free(cost->bw_ns);
    g_free(cost->stash_copy_ns);
    g_free(cost->u_ns);
    g_free(cost->static_bytes);
    g_free(cost->weights_bytes);
    g_free(cost->grads_bytes);
    g_free(cost->optim_bytes);
    g_free(cost->buffer_bytes);
    g_free(cost->weight_copy_bytes);
    g_free(cost->act_bytes);
    g_free(cost->act_b_bytes);
    g_free(cost->op_dur_ns);
    g_free(cost->op_sync_ns);
    g_free(cost->stage_node);
    g_free(cost->dp_sync_ns);
    g_free(cost->dp_pieces);
    g_free(cost);
}

SimCostModel *sim_cost_new_uniform(int32_t n_stages, int32_t n_chunks, int64_t f_ns, int64_t b_ns,
                                   int64_t w_ns, int64_t comm_ns) {
    PP_ASSERT(f_ns >= 0 && b_ns >= 0 && w_ns >= 0 && comm_ns >= 0);
    SimCostModel *cost = sim_cost_alloc(n_stages, n_chunks);
    for (int32_t i = 0; i < n_stages * n_chunks; i++) {
        cost->f_ns[i] = f_ns;
        cost->b_ns[i] = b_ns;
        cost->w_ns[i] = w_ns;
        cost->act_bytes[i] = 1; /* one unit per live (mb, chunk), freed at W when split */
    }
    cost->comm_latency_ns = comm_ns;
    cost->tokens_per_mb = 1;
    cost->samples_per_mb = 1;
    return cost;
}

void sim_cost_schedule_params(const SimCostModel *cost, PpScheduleParams *params) {
    params->f_ns = params->b_ns = params->w_ns = 0;
    for (int32_t i = 0; i < cost->n_stages * cost->n_chunks; i++) {
        params->f_ns = MAX(params->f_ns, cost->f_ns[i]);
        params->b_ns = MAX(params->b_ns, cost->b_ns[i]);
        params->w_ns = MAX(params->w_ns, cost->w_ns[i]);
    }
    /* The slowest hop: with nodes, the inter-node one when any stage pair crosses. */
    params->comm_ns = sim_cost_comm_ns(cost);
    for (int32_t s = 0; s + 1 < cost->n_stages; s++)
        params->comm_ns = MAX(params->comm_ns, sim_cost_hop_ns(cost, s, s + 1));
    /* The largest M_W / M_F: a deferred W is then never counted below its true bytes. */
    params->mem_w_fraction = 0.0;
    for (int32_t i = 0; i < cost->n_stages * cost->n_chunks; i++) {
        if (cost->act_bytes[i] > 0)
            params->mem_w_fraction =
                MAX(params->mem_w_fraction, (double)(cost->act_bytes[i] - cost->act_b_bytes[i]) /
                                                (double)cost->act_bytes[i]);
    }
}

/* One message of act_msg_bytes on a link of @latency_ns and @bytes_per_ns (0: latency only). */
static int64_t sim_cost_message_ns(const SimCostModel *cost, int64_t latency_ns,
                                   double bytes_per_ns) {
    int64_t hop_ns = latency_ns;
    if (bytes_per_ns > 0.0)
        hop_ns += llround((double)cost->act_msg_bytes / bytes_per_ns);
    return hop_ns;
}

int64_t sim_cost_comm_ns(const SimCostModel *cost) {
    return sim_cost_message_ns(cost, cost->comm_latency_ns, cost->comm_bytes_per_ns);
}

int64_t sim_cost_comm_inter_ns(const SimCostModel *cost) {
    return sim_cost_message_ns(cost, cost->comm_inter_latency_ns, cost->comm_inter_bytes_per_ns);
}

int64_t sim_cost_hop_ns(const SimCostModel *cost, int32_t from, int32_t to) {
    PP_ASSERT(from >= 0 && from < cost->n_stages && to >= 0 && to < cost->n_stages);
    if (from == to)
        return 0;
    if (cost->stage_node == NULL ||
        (cost->stage_node[from] >= 0 && cost->stage_node[from] == cost->stage_node[to]))
        return sim_cost_comm_ns(cost);
    return sim_cost_comm_inter_ns(cost);
}

/* Checks a model dimension the analytic model needs. */
static gboolean sim_cost_check_dim(const PpScenario *scenario, const char *key, int64_t value,
                                   GError **error) {
    if (value > 0)
        return TRUE;
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                "%s: %s = %" G_GINT64_FORMAT " cannot feed the simulator's cost model; "
                "give a positive value (or a preset)",
                scenario->path, key, value);
    return FALSE;
}

/* What the analytic model charges for one block (dense or MoE), per micro-batch and per GPU
 * (FLOPs before the tensor split). */
typedef struct {
    double flops;                /* forward FLOPs (model FLOPs: active parameters) */
    double time_flops;           /* the same, fp8 matrix products counted at the bf16 rate:
                                    block time = this / (bf16 peak x eff); the partition's cost */
    double recompute_flops;      /* what the backward reruns (sim_layout_recompute_flops()) */
    double recompute_time_flops; /* the same at the bf16 rate */
    double attn_time_flops;      /* of time_flops, the attention's matrix products (QKV and
                                    projection); the rest of its matrix products are the
                                    FFN's (or the router's and experts') */
    double  static_bytes;        /* weights + grads + optimizer state */
    double  act_bytes;           /* activations per live micro-batch */
    int64_t comm_f_ns;           /* collectives in the forward: tensor, expert all-to-alls */
    int64_t comm_b_ns;           /* ... and in the input-gradient backward */
    int64_t comm_w_ns;           /* ... and in the weight-gradient pass (fsdp) */
} SimCostBlock;

/* What the analytic model charges per layer and for the embeddings and head, per
 * micro-batch and per GPU: the inputs of the layer partition. */
typedef struct {
    SimCostBlock dense;              /* blocks before first_moe_layer */
    SimCostBlock moe;                /* blocks from first_moe_layer on (pp-memory.h) */
    int32_t      first_moe_layer;    /* G_MAXINT32: a dense model */
    double       head_flops;         /* forward FLOPs of the LM head (last virtual stage) */
    double       embed_static_bytes; /* embeddings' state (virtual stage 0) */
    double       head_static_bytes;  /* final LayerNorm + head state (last virtual stage) */
    double       logits_bytes;       /* fp32 logits per live micro-batch (last virtual stage) */
    double       device_bytes;       /* per device besides its stages' (fsdp's gather buffers) */
} SimCostSplit;

/* The cost of block @layer: dense before split->first_moe_layer, MoE from it on. */
static const SimCostBlock *sim_cost_block(const SimCostSplit *split, int32_t layer) {
    return layer < split->first_moe_layer ? &split->dense : &split->moe;
}

/* @n_dense blocks of @dense plus @n_moe of @moe (the MoE term only when there is one, so
 * that a dense model's figures are the plain product). */
static double sim_cost_blocks(int32_t n_dense, double dense, int32_t n_moe, double moe) {
    return n_moe > 0 ? n_dense * dense + n_moe * moe : n_dense * dense;
}

/* Checks that every integer the analytic model derives stays within PP_CHECKED_MAX, so that
 * the partition's sums and the engine's totals can be checked in int64: the whole model's
 * forward FLOPs, static bytes and activation bytes of one micro-batch, its forward time (at
 * the peak rate when [costs] give the times, for the MFU), and with @times the update time
 * and one hop. A stage holds a part of the model, so its numbers are smaller. */
static gboolean sim_cost_check_magnitudes(const PpScenario *scenario, const SimCostSplit *split,
                                          double params, double rate, double msg_bytes,
                                          gboolean times, GError **error) {
    const PpModelParams    *m = &scenario->model;
    const PpHardwareParams *hw = &scenario->hardware;
    const double            max = (double)PP_CHECKED_MAX, L = m->layers;
    const SimCostBlock     *big = split->first_moe_layer < m->layers ? &split->moe : &split->dense;
    const double            flops = L * MAX(big->flops, big->time_flops) + split->head_flops;
    const double            bytes = L * (MAX(split->dense.static_bytes, split->moe.static_bytes) +
                              MAX(split->dense.act_bytes, split->moe.act_bytes)) +
                         split->embed_static_bytes + split->head_static_bytes + split->logits_bytes;
    if (!(flops <= max) || !(bytes <= max)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: one micro-batch of this model takes %.3g FLOPs and %.3g bytes "
                    "(model.layers = %d, model.hidden = %d, model.heads = %d, model.head_dim = "
                    "%d, model.ffn_hidden = %d, model.seq_len = %d, model.vocab = %d, "
                    "pipeline.microbatch_size = %d), beyond the simulator's limit of 2^62; "
                    "shrink one of them",
                    scenario->path, flops, bytes, m->layers, m->hidden, m->heads, m->head_dim,
                    m->ffn_hidden, m->seq_len, m->vocab, scenario->pipeline.microbatch_size);
        return FALSE;
    }
    /* With [costs] the rate only scales the MFU: it must not overflow either. */
    const double f_ns = flops / (times ? rate : hw->peak_flops) * 1e9;
    if ((times || hw->peak_flops > 0.0) && !(f_ns <= max)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: the forward of one micro-batch would take %.3g ns at %.3g FLOP/s "
                    "(hardware.peak_tflops = %g, hardware.kernel_eff_max = %g, "
                    "hardware.kernel_eff_half_tokens = %g), beyond the simulator's clock of "
                    "2^62 ns; raise them or shrink the model",
                    scenario->path, f_ns, rate, hw->peak_flops / 1e12, hw->kernel_eff_max,
                    hw->kernel_eff_half_tokens);
        return FALSE;
    }
    if (!times)
        return TRUE;
    const double u_ns = params * SIM_COST_UPDATE_BYTES_PER_PARAM / hw->mem_bw_bytes_per_s * 1e9;
    if (hw->mem_bw_bytes_per_s > 0.0 && !(u_ns <= max)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: the optimizer step would take %.3g ns at hardware.mem_bw_gbps = %g, "
                    "beyond the simulator's clock of 2^62 ns; raise it or shrink the model",
                    scenario->path, u_ns, hw->mem_bw_bytes_per_s / 1e9);
        return FALSE;
    }
    const double hop_ns = (double)hw->link_latency_ns + msg_bytes / hw->link_bw_bytes_per_s * 1e9;
    if (hw->link_bw_bytes_per_s > 0.0 && !(hop_ns <= max)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: one stage-to-stage hop of %.3g bytes would take %.3g ns "
                    "(hardware.link_gbps = %g, hardware.link_latency_us = %g), beyond the "
                    "simulator's clock of 2^62 ns; raise the bandwidth or shrink the model",
                    scenario->path, msg_bytes, hop_ns, hw->link_bw_bytes_per_s / 1e9,
                    (double)hw->link_latency_ns / 1e3);
        return FALSE;
    }
    return TRUE;
}

/* The layers of every virtual stage vs (on the device the schedule's placement gives it,
 * pp_placement_vstage()): run.layers_per_stage when given; else with [costs] (@times FALSE:
 * the times are full-stage, only memory follows the split) or pipeline.partition = even an
 * even split, remainder to the first; else balanced by forward FLOPs, and with [hardware]
 * memory each device must hold its virtual stages' state plus the schedule's peak in-flight
 * units of activations (pp_schedule_peak_inflight), shared evenly by its chunks (an
 * approximation: which chunk's units are live at the peak is not tracked), within the device's
 * memory less FSDP's gather buffers and the communication buffers. Returns: (transfer full), or
 * NULL with @error set. */
static PpPartition *sim_cost_partition(const PpScenario *scenario, const SimCostSplit *split,
                                       gboolean times, PpSchedCache *cache, GError **error) {
    const int32_t       n_stages = scenario->pipeline.stages, n_chunks = scenario->pipeline.chunks;
    const int32_t       n_layers = scenario->model.layers;
    const int32_t       n_vstages = n_stages * n_chunks;
    const PpPlacement   placement = scenario->pipeline.kind->placement;
    g_autofree int64_t *layer_cost = g_new(int64_t, n_layers);
    for (int32_t i = 0; i < n_layers; i++)
        layer_cost[i] = llround(sim_cost_block(split, i)->time_flops);
    PpPartitionParams pp = {
        .n_layers = n_layers,
        .n_vstages = n_vstages,
        .mode = times ? pp_scenario_partition_mode(scenario) : PP_PARTITION_EVEN,
        .layers_per_vstage = scenario->run.layers_per_stage,
        .layer_cost = layer_cost,
        .last_cost = llround(split->head_flops),
    };
    const PpHardwareParams *hw = &scenario->hardware;
    g_autofree int64_t     *layer_static = NULL, *layer_act = NULL;
    g_autofree int32_t     *live = NULL, *device = NULL;
    if (pp.mode == PP_PARTITION_BALANCED && pp.layers_per_vstage == NULL && hw->set &&
        hw->memory_bytes > 0) {
        PpScheduleParams sp;
        pp_scenario_schedule_params(scenario, &sp);
        const int32_t *peak_inflight = pp_sched_cache_peak_inflight(cache, &sp, error);
        if (peak_inflight == NULL)
            return NULL;
        layer_static = g_new(int64_t, n_layers);
        layer_act = g_new(int64_t, n_layers);
        for (int32_t i = 0; i < n_layers; i++) {
            layer_static[i] = llround(sim_cost_block(split, i)->static_bytes);
            layer_act[i] = llround(sim_cost_block(split, i)->act_bytes);
        }
        live = g_new(int32_t, n_vstages);
        device = g_new(int32_t, n_vstages);
        for (int32_t vs = 0; vs < n_vstages; vs++) {
            int32_t stage, chunk;
            pp_placement_vstage(placement, n_stages, vs, &stage, &chunk);
            live[vs] = (peak_inflight[stage] + n_chunks - 1) / n_chunks;
            device[vs] = stage;
        }
        /* at least 1 byte: buffers beyond the device leave nothing, which no split fits */
        pp.mem_limit_bytes = MAX(hw->memory_bytes - llround(split->device_bytes), 1);
        pp.vstage_device = device;
        pp.n_devices = n_stages;
        pp.layer_static_bytes = layer_static;
        pp.layer_act_bytes = layer_act;
        pp.live_units = live;
        pp.first_static_bytes = llround(split->embed_static_bytes);
        pp.last_static_bytes = llround(split->head_static_bytes);
        pp.last_act_bytes = llround(split->logits_bytes);
    }
    g_autoptr(GError) local = NULL;
    g_autofree char *advice = pp_memory_advice(scenario);
    pp.mem_advice = advice;
    PpPartition *part = pp_partition_new(&pp, &local);
    if (part == NULL)
        g_set_error(error, local->domain, local->code, "%s: %s", scenario->path, local->message);
    return part;
}

/* Checks the [hardware] figures the analytic op times need. */
static gboolean sim_cost_check_rate(const PpScenario *scenario, GError **error) {
    const PpHardwareParams *hw = &scenario->hardware;
    if (!(hw->peak_flops > 0.0)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: hardware.peak_tflops = %g: the analytic cost model needs a positive "
                    "peak rate (or give [costs] forward_us, backward_us, weight_us)",
                    scenario->path, hw->peak_flops / 1e12);
        return FALSE;
    }
    if (pp_scenario_precision_fp8(scenario) && !(hw->peak_fp8_flops > 0.0)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: model.precision = fp8 but hardware.peak_fp8_tflops = %g: the analytic "
                    "cost model needs the device's dense fp8 rate (or use precision = bf16)",
                    scenario->path, hw->peak_fp8_flops / 1e12);
        return FALSE;
    }
    if (!(hw->kernel_eff_max > 0.0 && hw->kernel_eff_max <= 1.0)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: hardware.kernel_eff_max = %g: the analytic cost model needs a share of "
                    "peak in (0, 1]",
                    scenario->path, hw->kernel_eff_max);
        return FALSE;
    }
    if (scenario->model.experts > 0 && !(hw->alltoall_eff > 0.0 && hw->alltoall_eff <= 1.0)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: hardware.alltoall_eff = %g: the analytic cost model needs a share of "
                    "the link bandwidth in (0, 1]",
                    scenario->path, hw->alltoall_eff);
        return FALSE;
    }
    if (pp_scenario_precision_fp8(scenario) &&
        !(hw->kernel_eff_fp8 > 0.0 && hw->kernel_eff_fp8 <= 1.0)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: hardware.kernel_eff_fp8 = %g: the analytic cost model needs a share of "
                    "the fp8 rate in (0, 1]",
                    scenario->path, hw->kernel_eff_fp8);
        return FALSE;
    }
    if (!(hw->kernel_eff_half_tokens >= 0.0 && isfinite(hw->kernel_eff_half_tokens))) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: hardware.kernel_eff_half_tokens = %g: the analytic cost model needs a "
                    "finite token count >= 0",
                    scenario->path, hw->kernel_eff_half_tokens);
        return FALSE;
    }
    if (!(hw->kernel_eff_half_hidden >= 0.0 && isfinite(hw->kernel_eff_half_hidden))) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: hardware.kernel_eff_half_hidden = %g: the analytic cost model needs a "
                    "finite hidden size >= 0",
                    scenario->path, hw->kernel_eff_half_hidden);
        return FALSE;
    }
    return TRUE;
}

/* Where each stage's GPUs sit and the inter-node link (with [hardware]; else every hop is
 * intra-node), and the data-parallel all-reduce of every (stage, chunk)'s gradients of
 * @unit_params parameters per GPU (D > 1). */
static gboolean sim_cost_fill_layout(SimCostModel *cost, const PpScenario *scenario,
                                     const SimLayout *layout, const double *unit_params,
                                     const int32_t *unit_layers, gboolean times, GError **error) {
    const int32_t n_stages = cost->n_stages, n_units = cost->n_stages * cost->n_chunks;
    cost->data_parallel = layout->data;
    cost->tensor_parallel = scenario->parallel.tensor;
    cost->context_parallel = layout->context;
    if (layout->data > 1 && !scenario->hardware.set) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: parallel.data = %d: the gradient all-reduce across replicas needs a "
                    "[hardware] section (a preset, or link_gbps and link_latency_us)",
                    scenario->path, layout->data);
        return FALSE;
    }
    if (!scenario->hardware.set)
        return TRUE;
    int64_t *stage_node = g_new(int64_t, n_stages);
    for (int32_t s = 0; s < n_stages; s++)
        stage_node[s] = sim_layout_stage_node(layout, s);
    if (times) { /* [costs] comm_us is every hop's time: no node split then */
        cost->stage_node = stage_node;
        stage_node = NULL;
        cost->comm_inter_latency_ns = layout->inter_latency_ns;
        cost->comm_inter_bytes_per_ns = layout->inter_bytes_per_ns;
    }
    const int32_t replicas = layout->data * layout->context; /* share every stage's weights */
    if (replicas > 1 && !scenario->parallel.fsdp) {          /* fsdp reduce-scatters per layer */
        cost->dp_sync_ns = g_new(int64_t, n_units);
        cost->dp_pieces = g_new(int32_t, n_units);
        cost->dp_overlap = scenario->parallel.overlap_grad_reduce;
        for (int32_t u = 0; u < n_units; u++) {
            int32_t  stage = u / cost->n_chunks;
            int64_t  node = cost->stage_node != NULL ? cost->stage_node[stage]
                                                     : sim_layout_stage_node(layout, stage);
            gboolean intra = node >= 0;
            double   bytes = unit_params[u] * pp_scenario_grad_bytes(scenario);
            /* an all-reduce, or the distributed optimizer's reduce-scatter and all-gather,
             * over the replicas T ranks apart */
            cost->dp_sync_ns[u] = sim_layout_ring_ns(
                layout,
                scenario->parallel.distributed_optimizer ? SIM_LAYOUT_RING_PAIR
                                                         : SIM_LAYOUT_RING_ALLREDUCE,
                replicas, intra ? 1 : sim_layout_group_nodes(layout, replicas, layout->tensor),
                bytes, sim_layout_dp_bytes_per_ns(layout, intra));
            cost->dp_pieces[u] = MAX(unit_layers[u], 1);
        }
    }
    g_free(stage_node);
    return TRUE;
}

/* The FLOPs of one block whose matrix products hold @matrix_params weights (active ones for
 * an MoE block, @expert_params of them in its K + S experts, whose products are
 * sim_moe_expert_width() wide and run @expert_run_params weights' FLOPs as dispatched:
 * pp_memory_expert_run_params()) and whose attention costs @attention_flops, per micro-batch
 * before the tensor split: model FLOPs, their time at the bf16 rate and what the backward
 * recomputes. Time-FLOPs count each matrix FLOP sim_cost_matrix_time_factor() times, so that
 * every op time stays time-FLOPs / (peak_tflops x eff): model.precision = fp8 runs the GEMMs
 * at kernel_eff_fp8 x the fp8 rate, while the attention scores, the LM head and the
 * embeddings stay in bf16 (as in DeepSeek-V3's fp8 training, report §3.3). */
static void sim_cost_fill_block(const PpScenario *scenario, double matrix_params,
                                double expert_params, double expert_run_params,
                                double attention_flops, gboolean times, SimCostBlock *block) {
    PpMemoryShape shape;
    pp_scenario_memory_shape(scenario, &shape);
    const double            attn_params = pp_memory_attention_matrix_params(&shape);
    const PpHardwareParams *hw = &scenario->hardware;
    const PpModelParams    *m = &scenario->model;
    const double flops_per_param = 2.0 * scenario->pipeline.microbatch_size * (double)m->seq_len;
    const double matrix_flops = flops_per_param * matrix_params;
    block->flops = matrix_flops + attention_flops;
    double matrix_time_flops = matrix_flops;
    block->attn_time_flops = flops_per_param * attn_params;
    if (times) {
        const double h = m->hidden, expert_flops = flops_per_param * expert_params;
        const double speedup = pp_scenario_precision_fp8(scenario)
                                   ? hw->kernel_eff_fp8 * hw->peak_fp8_flops / hw->peak_flops
                                   : 1.0;
        matrix_time_flops =
            (matrix_flops - expert_flops) * sim_cost_matrix_time_factor(hw, h, h, speedup);
        block->attn_time_flops *= sim_cost_matrix_time_factor(hw, h, h, speedup);
        if (expert_params > 0.0)
            matrix_time_flops += flops_per_param * expert_run_params *
                                 sim_cost_matrix_time_factor(
                                     hw, h, sim_moe_expert_width(h, m->expert_ffn_hidden), speedup);
    }
    block->time_flops = matrix_time_flops + attention_flops;
    /* What the backward reruns: the whole forward (full), or the share of the block's matrix
     * FLOPs in the rerun parts of its operators (sim-cost-block.c) and the attention core's
     * FLOPs when core_attn is rerun (flash attention's kernel too). */
    const guint rerun = sim_cost_ops_rerun_set(scenario);
    if (rerun & SIM_COST_RERUN_ALL) {
        block->recompute_flops = block->flops;
        block->recompute_time_flops = block->time_flops;
        return;
    }
    SimCostOps count;
    sim_cost_ops_block(scenario, &shape, expert_params > 0.0, TRUE, &count);
    const double share = count.matmul_flops > 0.0
                             ? sim_cost_ops_rerun_flops(&count, rerun) / count.matmul_flops
                             : 0.0;
    const double core = rerun & PP_RECOMPUTE_MODULE_CORE_ATTN ? attention_flops : 0.0;
    block->recompute_flops = share * matrix_flops + core;
    block->recompute_time_flops = share * matrix_time_flops + core;
}

/* Context parallelism's ring attention in one layer (Liu et al. 2023; Megatron's
 * implementation): each of the C ranks holds s/C of every sequence (two of 2C chunks, causal
 * load balancing: equal attention work per rank); the forward runs C attention steps, and
 * between them C - 1 steps pass this rank's key/value block, b (s/C) (2kd, MLA a(d_qk + d_v))
 * bf16 values split over T, to the next rank while the current block's attention runs. A step
 * takes the longer of the two; what exceeds the attention (@attention_ns: this GPU's whole
 * attention forward time) is exposed: @ring_f_ns = (C - 1) max(0, hop - attention / C). The
 * backward passes keys, values and their gradients (2 hops' bytes) beside twice the attention
 * work: @ring_b_ns = (C - 1) max(0, 2 hop - 2 attention / C). Its hops are point-to-point
 * messages (a link's latency each, no collective_ns). The ring uses the intra-node link when
 * it fits in a node (sim_layout_context_intra()), else the node's NICs that its ranks there
 * own (sim_layout_context_bytes_per_ns()) at the inter-node latency. */
static void sim_cost_ring_ns(const PpScenario *scenario, const SimLayout *layout,
                             const PpMemoryShape *shape, double attention_ns, int64_t *ring_f_ns,
                             int64_t *ring_b_ns) {
    const double C = layout->context;
    const double bytes = scenario->pipeline.microbatch_size * (scenario->model.seq_len / C) *
                         pp_memory_kv_width(shape) * SIM_COST_MSG_BYTES_PER_ELEM /
                         scenario->parallel.tensor;
    const gboolean intra = sim_layout_context_intra(layout);
    const double bw = intra ? layout->intra_bytes_per_ns : sim_layout_context_bytes_per_ns(layout);
    const double hop_ns = (double)(intra ? layout->intra_latency_ns : layout->inter_latency_ns) +
                          (bw > 0.0 ? bytes / bw : 0.0);
    const double step_ns = attention_ns / C;
    *ring_f_ns = llround((C - 1.0) * MAX(0.0, hop_ns - step_ns));
    *ring_b_ns = llround((C - 1.0) * MAX(0.0, 2.0 * hop_ns - 2.0 * step_ns));
}

/* Tensor parallelism's collectives in one pass of @block: an all-gather and a reduce-scatter
 * (with sequence parallelism; else an all-reduce) around the attention's products and a pair
 * around the FFN's, @tp_ns per pair (sim_layout_ring_ns()). Without overlap both are
 * charged whole. With parallel.tp_comm_overlap (Transformer Engine's userbuffers) each pair
 * runs in T chunks under its products (their time at @ns_per_flop: the attention's QKV and
 * projection, the FFN's or the experts'), so only its excess over them is charged, and at
 * least the one chunk nothing hides (the ring exchange's first step, the pipelined
 * reduce-scatter's last): max(pair - products, pair / T) each. */
static int64_t sim_cost_tp_exposed_ns(const PpScenario *scenario, const SimCostBlock *block,
                                      double attention_flops, int64_t tp_ns, double ns_per_flop) {
    const double T = scenario->parallel.tensor;
    if (!scenario->parallel.tp_comm_overlap || T < 2.0 || !(ns_per_flop > 0.0))
        return SIM_LAYOUT_TP_COLLECTIVES_PER_PASS * tp_ns;
    const double attn_ns = block->attn_time_flops * ns_per_flop;
    const double ffn_ns =
        (block->time_flops - attention_flops - block->attn_time_flops) * ns_per_flop;
    const double pair = (double)tp_ns;
    return llround(MAX(pair - attn_ns, pair / T) + MAX(pair - ffn_ns, pair / T));
}

/* Context parallelism's all-to-all (Ulysses; Megatron's --cp-comm-type a2a, Transformer
 * Engine's implementation) in one layer: before the attention core three all-to-alls over the
 * C ranks turn this GPU's s/C tokens of q, k and v (all of its tensor rank's heads) into all s
 * tokens of 1/C of the heads, and one turns the output back; the backward runs the same four
 * on the gradients (dO before, dq dk dv after). Each moves b (s/C) x width bf16 values split
 * over T, (C - 1)/C of them to other ranks (q a d_qk, k and v half the key/value width each,
 * the output a d_v); the group spans T C consecutive ranks like an expert group
 * (sim_layout_expert_ranks_in_node()), its shares in and off the node at once
 * (sim_layout_alltoall_ns()). Nothing runs beside them: all of it is exposed,
 * @f_ns = @b_ns = the four all-to-alls. */
static int64_t sim_cost_ulysses_ns(const PpScenario *scenario, const SimLayout *layout,
                                   const PpMemoryShape *shape) {
    const double C = layout->context;
    const double elems = scenario->pipeline.microbatch_size * (scenario->model.seq_len / C) *
                         SIM_COST_MSG_BYTES_PER_ELEM / scenario->parallel.tensor;
    const int64_t in_node =
        sim_layout_expert_ranks_in_node(layout, layout->context, layout->tensor);
    const double width = pp_memory_attention_width(shape) / 2.0; /* a(d_qk + d_v) / 2 */
    const double kv = pp_memory_kv_width(shape) / 2.0;           /* one of k, v */
    /* q and the output together are a(d_qk + d_v) wide: as two of their mean width */
    const double widths[] = {width, kv, kv, width};
    int64_t      ns = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(widths); i++) {
        const double bytes = elems * widths[i];
        ns += sim_layout_alltoall_ns(layout, bytes * (double)(in_node - 1) / C,
                                     bytes * (C - (double)in_node) / C);
    }
    return ns;
}

/* Fully sharded data parallelism (ZeRO-3, as PyTorch FSDP and Megatron's FSDP run it): a
 * block's @params bf16 weights (per GPU of its tensor group) are all-gathered over the D x C
 * replicas before its forward and again before its backward, and its gradients (@grad_bytes
 * each, parallel.grad_bytes) reduce-scattered after its weight-gradient pass; each collective is
 * prefetched behind the neighbouring block's compute, so only its excess over this block's compute
 * is charged: F += max(0, gather - forward), B += max(0, gather - input-gradient compute), W +=
 * max(0, reduce-scatter - weight-gradient compute). A ring all-gather or reduce-scatter of
 * Z ranks takes collective_ns + Z - 1 steps of a link latency + bytes / (Z bw) each
 * (sim_layout_ring_ns()), on the intra-node link when a stage's ranks fit a node (bw:
 * sim_layout_dp_bytes_per_ns()). */
static void sim_cost_add_fsdp(const SimLayout *layout, double params, int32_t grad_bytes,
                              double ns_per_flop, SimCostBlock *block) {
    const int32_t  Z = layout->data * layout->context;
    const gboolean intra = sim_layout_stage_node(layout, 0) >= 0;
    const double   bw = sim_layout_dp_bytes_per_ns(layout, intra);
    if (Z < 2)
        return;
    /* the gathered bf16 block; the reduce-scatter of its gradients at grad_bytes each */
    const int32_t nodes = intra ? 1 : sim_layout_group_nodes(layout, Z, layout->tensor);
    const double  gather_ns =
        (double)sim_layout_ring_ns(layout, SIM_LAYOUT_RING_GATHER, Z, nodes,
                                   params * PP_MEMORY_BF16_WEIGHT_BYTES_PER_PARAM, bw);
    const double scatter_ns = (double)sim_layout_ring_ns(layout, SIM_LAYOUT_RING_GATHER, Z, nodes,
                                                         params * grad_bytes, bw);
    const double f_ns = block->time_flops * ns_per_flop;
    const double b_ns = f_ns + block->recompute_time_flops * ns_per_flop;
    block->comm_f_ns += llround(MAX(0.0, gather_ns - f_ns));
    block->comm_b_ns += llround(MAX(0.0, gather_ns - b_ns));
    block->comm_w_ns += llround(MAX(0.0, scatter_ns - f_ns));
}

/* The share of a block's forward collectives its backward runs again: tensor-parallel (@tp),
 * context (@cp) and, for an MoE block, the expert all-to-alls (@a2a; the dispatcher's host
 * sync is in the block's operators, SimCostOps). Full recomputation reruns them all. Selective
 * recomputation reruns those inside its modules: the attention core's context collectives
 * (core_attn), the FFN's one of the two tensor-parallel collective pairs (mlp in a dense block, moe
 * in an MoE block, with the MoE layer's all-to-alls). Per-operator checkpointing keeps the
 * reduce-scatters' and all-to-alls' outputs (torchtitan's saved collectives) and reruns the
 * all-gathers (half of a pass's tensor-parallel bytes with sequence parallelism) or the all-reduces
 * (all of them without). */
typedef struct {
    double tp, cp, a2a;
} SimCostRerunComm;

static SimCostRerunComm sim_cost_rerun_comm(const PpScenario *scenario, gboolean moe) {
    const guint rerun = sim_cost_ops_rerun_set(scenario);
    if (rerun & SIM_COST_RERUN_ALL)
        return (SimCostRerunComm){1.0, 1.0, 1.0};
    if (rerun & (1u << SIM_COST_RERUN_OP))
        return (SimCostRerunComm){scenario->parallel.sequence_parallel ? 0.5 : 1.0, 0.0, 0.0};
    const gboolean ffn =
        moe ? (rerun & PP_RECOMPUTE_MODULE_MOE) != 0 : (rerun & PP_RECOMPUTE_MODULE_MLP) != 0;
    return (SimCostRerunComm){
        .tp = ffn ? 0.5 : 0.0,
        .cp = rerun & PP_RECOMPUTE_MODULE_CORE_ATTN ? 1.0 : 0.0,
        .a2a = moe && ffn ? 1.0 : 0.0,
    };
}

/* Checks one layer's collective time @ns (@what: which) so that the layers' sums stay within
 * the simulator's clock: at most PP_CHECKED_MAX / (layers + 1), and not an overflowed round. */
static gboolean sim_cost_check_layer_ns(const PpScenario *scenario, const char *what, int64_t ns,
                                        GError **error) {
    if (ns >= 0 && ns <= PP_CHECKED_MAX / ((int64_t)scenario->model.layers + 1))
        return TRUE;
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                "%s: one layer's %s would take beyond the simulator's clock of 2^62 ns over "
                "model.layers = %d; raise hardware.link_gbps = %g or internode_gbps = %g, "
                "lower collective_us = %g or the link latencies, or shrink the model",
                scenario->path, what, scenario->model.layers,
                scenario->hardware.link_bw_bytes_per_s / 1e9,
                scenario->hardware.internode_bw_bytes_per_s / 1e9,
                (double)scenario->hardware.collective_ns / 1e3);
    return FALSE;
}

/* One GPU's costs of a dense and an MoE block and of the LM head before the pipeline split:
 * the layout's memory model, the blocks' compute and their collectives. */
typedef struct {
    SimLayout     layout;
    PpMemoryShape shape;
    PpMemoryModel mem;
    SimCostSplit  split;
    gboolean      ops_model; /* hardware.cost_model = operators: the ops below (sim/cost/) */
    SimCostOps    dense_ops, moe_ops, head_ops;
    double        attention_flops;  /* one block's attention core, forward, unsharded */
    double        rate;             /* FLOP/s of this GPU on a block's time-FLOPs (0: [costs]) */
    double        ns_per_flop;      /* this GPU's ns per time-FLOP of a block (0: [costs]) */
    int64_t       tp_ns;            /* one tensor-parallel all-reduce or gather/scatter pair */
    int64_t       cp_f_ns, cp_b_ns; /* the context ranks' collectives per pass, every block */
} SimCostLayers;

/* The context ranks' collectives per pass of @ly's blocks: Ulysses' all-to-alls or ring
 * attention's hops (FALSE with @error when one layer's would leave the clock). */
static gboolean sim_cost_layers_context(SimCostLayers *ly, const PpScenario *scenario,
                                        GError **error) {
    const SimLayout *layout = &ly->layout;
    ly->cp_f_ns = ly->cp_b_ns = 0;
    if (layout->context > 1 && pp_scenario_context_comm(scenario) == PP_CONTEXT_COMM_A2A) {
        ly->cp_f_ns = ly->cp_b_ns = sim_cost_ulysses_ns(scenario, layout, &ly->shape);
        return sim_cost_check_layer_ns(scenario, "context all-to-alls", ly->cp_f_ns, error);
    }
    if (layout->context > 1) {
        const double t = scenario->parallel.tensor, c = layout->context;
        sim_cost_ring_ns(scenario, layout, &ly->shape, ly->attention_flops / t / c / ly->rate * 1e9,
                         &ly->cp_f_ns, &ly->cp_b_ns);
        return sim_cost_check_layer_ns(scenario, "ring attention hops", ly->cp_b_ns, error);
    }
    return TRUE;
}

/* Fills @ly's MoE block (split.moe, moe_ops): its compute, the tensor and context collectives
 * of a dense block and the expert all-to-alls. Expert parallelism: a dispatch and a combine
 * all-to-all per MoE layer in the forward, and their two gradients in the input-gradient
 * backward (and two more per recomputed forward), each moving the K routed copies of this
 * GPU's bs/T tokens (2h bytes each; with a capacity factor the rows as padded or dropped,
 * pp_memory_moe_routed_per_token()), on the compute stream as Megatron's all-to-all dispatcher
 * runs them; with parallel.moe_a2a_overlap the forward's run under the paired backward's
 * compute and the backward's under the paired forward's (sim_moe_a2a_exposed_ns()). They move
 * their bytes at hardware.alltoall_eff x the links' bandwidths (checked by
 * sim_cost_check_rate() when the model gives the times). */
static gboolean sim_cost_layers_moe(SimCostLayers *ly, const PpScenario *scenario, gboolean times,
                                    GError **error) {
    const PpModelParams *model = &scenario->model;
    const SimLayout     *layout = &ly->layout;
    const double         b = scenario->pipeline.microbatch_size, s = model->seq_len;
    const double         h = model->hidden, t = scenario->parallel.tensor, c = layout->context;
    const double         a2a_eff = times ? scenario->hardware.alltoall_eff : 1.0;
    const double         routed_bytes = b * s / t * pp_memory_moe_routed_per_token(&ly->shape) * h *
                                SIM_COST_MSG_BYTES_PER_ELEM / a2a_eff;
    const int64_t in_node = sim_layout_expert_ranks_in_node(layout, scenario->parallel.expert,
                                                            scenario->parallel.expert_tensor);
    double        intra_bytes, inter_bytes;
    sim_moe_a2a_bytes(scenario, in_node, routed_bytes, &intra_bytes, &inter_bytes);
    const int64_t a2a_ns = scenario->parallel.expert > 1
                               ? sim_layout_alltoall_ns(layout, intra_bytes, inter_bytes)
                               : 0;
    if (!sim_cost_check_layer_ns(scenario, "expert all-to-all", a2a_ns, error))
        return FALSE;
    SimCostBlock *moe = &ly->split.moe;
    sim_cost_fill_block(scenario, pp_memory_moe_layer_matrix_params(&ly->shape, TRUE),
                        pp_memory_expert_matrix_params(&ly->shape),
                        pp_memory_expert_run_params(&ly->shape), ly->attention_flops, times, moe);
    if (ly->ops_model) {
        sim_cost_ops_block(scenario, &ly->shape, TRUE, FALSE, &ly->moe_ops);
        if (!sim_cost_ops_check(&ly->moe_ops, scenario, error))
            return FALSE;
    }
    moe->static_bytes = pp_memory_moe_layer_state_bytes(&ly->mem);
    moe->act_bytes = pp_memory_layer_stored_bytes(&ly->mem, TRUE);
    const gboolean overlap = scenario->parallel.moe_a2a_overlap && times;
    const double   moe_f_ns = overlap ? moe->time_flops / t / c / ly->rate * 1e9 : 0.0;
    const double   moe_b_ns =
        overlap ? moe_f_ns + moe->recompute_time_flops / t / c / ly->rate * 1e9 : 0.0;
    /* the same context collectives as a dense block, the tensor ones under its own
     * products, the expert ones added */
    const SimCostRerunComm rerun = sim_cost_rerun_comm(scenario, TRUE);
    const int64_t          tp_moe_ns =
        sim_cost_tp_exposed_ns(scenario, moe, ly->attention_flops, ly->tp_ns, ly->ns_per_flop);
    moe->comm_f_ns =
        tp_moe_ns + ly->cp_f_ns + sim_moe_a2a_exposed_ns(2 * a2a_ns, a2a_eff, moe_b_ns, overlap);
    const int64_t a2a_passes_b = rerun.a2a > 0.0 ? 2 : 1;
    moe->comm_b_ns = llround(tp_moe_ns * (1.0 + rerun.tp) + ly->cp_b_ns * (1.0 + rerun.cp)) +
                     sim_moe_a2a_exposed_ns(2 * a2a_ns * a2a_passes_b, a2a_eff, moe_f_ns, overlap);
    return TRUE;
}

/* Fills @ly from @scenario: the memory model of docs/design.md §4.5 with the layout's T,
 * sequence parallelism, recomputation and ZeRO-1 (pp-memory.h), and per block the FLOPs,
 * compute time and collectives (@times: FALSE when [costs] gave the times). FLOPs of one
 * micro-batch's forward before sharding: per layer 2bs per weight of its matrix products (QKV,
 * projection, FFN: 24bsh^2 for GPT-2's layer; an MoE layer's active ones: router and K + S
 * experts) + 2bs^2 * a(d_qk + d_v) (scores and weighted sum, a query heads: 4bs^2 ad for
 * multi-head attention; half of it with model.attention_flops = causal); LM head 2bshV.
 * Backward = 2 x forward, half B (input gradient), half W (weight gradient); B also reruns
 * what model.recompute dropped. */
static gboolean sim_cost_layers_fill(SimCostLayers *ly, const PpScenario *scenario, gboolean times,
                                     GError **error) {
    const PpModelParams    *model = &scenario->model;
    const PpHardwareParams *hw = &scenario->hardware;
    *ly = (SimCostLayers){0};
    sim_layout_init(&ly->layout, scenario);
    const SimLayout *layout = &ly->layout;
    const double     b = scenario->pipeline.microbatch_size, s = model->seq_len;
    const double     h = model->hidden, V = model->vocab, t = scenario->parallel.tensor;
    const double     c = layout->context; /* each context rank: s/c tokens of every sequence */
    const int64_t    tokens = (int64_t)scenario->pipeline.microbatch_size * model->seq_len;
    pp_scenario_memory_shape(scenario, &ly->shape);
    pp_memory_model(&ly->shape, &ly->mem);
    const double causal = pp_scenario_attention_causal(scenario) ? 0.5 : 1.0;
    ly->attention_flops = 2.0 * b * s * s * pp_memory_attention_width(&ly->shape) * causal;
    ly->rate =
        times ? hw->peak_flops * sim_cost_kernel_efficiency(hw, tokens / layout->context, h) : 0.0;
    ly->ops_model = times && pp_scenario_cost_operators(scenario);
    /* Tensor parallelism: SIM_LAYOUT_TP_COLLECTIVES_PER_PASS collectives of the layer's full
     * bf16 activation 2bsh per forward and per input-gradient backward (and per recomputed
     * forward), on the intra-node link when the group fits in a node, else over the node's
     * NICs (sim_layout_tensor_bytes_per_ns()); an all-reduce is one collective, sequence
     * parallelism's all-gather and reduce-scatter two (sim_layout_ring_ns()). */
    const gboolean tp_intra = sim_layout_tensor_intra(layout);
    ly->tp_ns = sim_layout_ring_ns(
        layout,
        scenario->parallel.sequence_parallel ? SIM_LAYOUT_RING_PAIR : SIM_LAYOUT_RING_ALLREDUCE,
        scenario->parallel.tensor,
        tp_intra ? 1 : sim_layout_group_nodes(layout, scenario->parallel.tensor, 1),
        b * s * h * SIM_COST_MSG_BYTES_PER_ELEM / c, sim_layout_tensor_bytes_per_ns(layout));
    /* forward, input-gradient backward and a recomputed forward (-1: beyond the clock
     * already) */
    const int64_t tp_passes = 3 * SIM_LAYOUT_TP_COLLECTIVES_PER_PASS;
    if (!sim_cost_check_layer_ns(
            scenario, "tensor-parallel collectives",
            ly->tp_ns > PP_CHECKED_MAX / tp_passes ? -1 : tp_passes * ly->tp_ns, error))
        return FALSE;
    SimCostSplit *split = &ly->split;
    *split = (SimCostSplit){
        .first_moe_layer = ly->mem.first_moe_layer,
        .head_flops = 2.0 * b * s * h * V,
        .embed_static_bytes = ly->mem.embed_params * ly->mem.state_bpp,
        .head_static_bytes = ly->mem.head_params * ly->mem.state_bpp,
        .logits_bytes = ly->mem.logits_bytes,
    };
    sim_cost_fill_block(scenario, pp_memory_layer_matrix_params(&ly->shape), 0.0, 0.0,
                        ly->attention_flops, times, &split->dense);
    if (ly->ops_model) {
        /* the collectives' overlap below (ring, expert all-to-alls, FSDP) reads the block's
         * forward time as its FLOPs at this rate */
        sim_cost_ops_block(scenario, &ly->shape, FALSE, FALSE, &ly->dense_ops);
        sim_cost_ops_head(scenario, &ly->head_ops);
        if (!sim_cost_ops_check(&ly->dense_ops, scenario, error) ||
            !sim_cost_ops_check(&ly->head_ops, scenario, error))
            return FALSE;
        ly->rate = split->dense.time_flops / (t * c) /
                   sim_cost_ops_pass_ns(&ly->dense_ops, hw, SIM_COST_PASS_F, 0) * 1e9;
    }
    split->dense.static_bytes = pp_memory_layer_state_bytes(&ly->mem);
    split->dense.act_bytes = pp_memory_layer_stored_bytes(&ly->mem, FALSE);
    ly->ns_per_flop = times ? 1e9 / (t * c * ly->rate) : 0.0;
    if (!sim_cost_layers_context(ly, scenario, error))
        return FALSE;
    const SimCostRerunComm rerun = sim_cost_rerun_comm(scenario, FALSE);
    const int64_t tp_dense_ns = sim_cost_tp_exposed_ns(scenario, &split->dense, ly->attention_flops,
                                                       ly->tp_ns, ly->ns_per_flop);
    split->dense.comm_f_ns = tp_dense_ns + ly->cp_f_ns;
    split->dense.comm_b_ns =
        llround(tp_dense_ns * (1.0 + rerun.tp) + ly->cp_b_ns * (1.0 + rerun.cp));
    if (ly->mem.first_moe_layer < model->layers && !sim_cost_layers_moe(ly, scenario, times, error))
        return FALSE;
    if (scenario->parallel.fsdp && times) {
        const int32_t g = pp_scenario_grad_bytes(scenario);
        sim_cost_add_fsdp(layout, ly->mem.layer_params, g, ly->ns_per_flop, &split->dense);
        if (ly->mem.first_moe_layer < model->layers)
            sim_cost_add_fsdp(layout, ly->mem.moe_layer_params, g, ly->ns_per_flop, &split->moe);
    }
    split->device_bytes = ly->mem.fsdp_buffer_bytes + ly->mem.comm_buffer_bytes;
    return TRUE;
}

/* Fills the analytic durations, link and memory model of @cost from @scenario. Layers are
 * split over the virtual stages by sim_cost_partition(); virtual stage vs runs on the device
 * of the schedule's placement. Stage 0's first chunk holds the embeddings, the last virtual
 * stage the final LayerNorm and the untied LM head. Every figure is one GPU's: tensor
 * parallelism divides FLOPs, parameters and activations by T (Korthikanti et al.'s formulas,
 * sim-layout.h) and adds its collectives to F and B; ZeRO-1 shards the master weights and
 * moments over D. @times: also fill f/b/w/u (FALSE when [costs] gave them). */
static gboolean sim_cost_fill_analytic(SimCostModel *cost, const PpScenario *scenario,
                                       gboolean times, PpSchedCache *cache, GError **error) {
    const PpModelParams    *model = &scenario->model;
    const PpHardwareParams *hw = &scenario->hardware;
    if (!sim_cost_check_dim(scenario, "model.layers", model->layers, error) ||
        !sim_cost_check_dim(scenario, "model.hidden", model->hidden, error) ||
        !sim_cost_check_dim(scenario, "model.heads", model->heads, error) ||
        !sim_cost_check_dim(scenario, "model.seq_len", model->seq_len, error) ||
        !sim_cost_check_dim(scenario, "model.vocab", model->vocab, error) ||
        !sim_cost_check_dim(scenario, "pipeline.microbatch_size",
                            scenario->pipeline.microbatch_size, error))
        return FALSE;
    if (times && !sim_cost_check_rate(scenario, error))
        return FALSE;

    const int32_t n_stages = cost->n_stages, n_chunks = cost->n_chunks;
    const int32_t n_vstages = n_stages * n_chunks;
    if (scenario->run.layers_per_stage != NULL && scenario->run.n_layers_per_stage != n_vstages) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: run.layers_per_stage has %d entries but pipeline.stages * "
                    "pipeline.chunks = %d; give one layer count per virtual stage",
                    scenario->path, scenario->run.n_layers_per_stage, n_vstages);
        return FALSE;
    }
    SimCostLayers ly;
    if (!sim_cost_layers_fill(&ly, scenario, times, error))
        return FALSE;
    const SimLayout     *layout = &ly.layout;
    const PpMemoryModel *mem = &ly.mem;
    const SimCostSplit  *split = &ly.split;
    const double         b = scenario->pipeline.microbatch_size, s = model->seq_len;
    const double         h = model->hidden, t = scenario->parallel.tensor, d = layout->data;
    const double         c = layout->context;
    const double         rate = ly.rate, head_flops = split->head_flops;
    const gboolean       zero = scenario->parallel.distributed_optimizer || scenario->parallel.fsdp;

    /* One activation or gradient message between stages: each of the T GPUs sends its 1/T
     * of the bf16 activation 2bsh (sequence parallelism shards it; without it, Megatron's
     * scatter/gather optimisation does, and the intra-node all-gather after it is not
     * charged). */
    const double msg_bytes = b * s * h * SIM_COST_MSG_BYTES_PER_ELEM / t / c;
    const double all_params = pp_memory_vstage_params(mem, 0, model->layers, TRUE, TRUE);
    if (!sim_cost_check_magnitudes(scenario, split, all_params, rate, msg_bytes, times, error))
        return FALSE;
    g_autoptr(PpPartition) part = sim_cost_partition(scenario, split, times, cache, error);
    if (part == NULL)
        return FALSE;

    const PpPlacement   placement = scenario->pipeline.kind->placement;
    g_autofree double  *unit_params = g_new0(double, n_vstages);     /* per GPU */
    g_autofree int32_t *unit_layers = g_new0(int32_t, n_vstages);    /* by unit */
    g_autofree int64_t *recompute_bytes = g_new0(int64_t, n_stages); /* by stage */
    double              total_flops = 0.0, total_hw_flops = 0.0;
    const SimCostBlock *D = &split->dense, *M = &split->moe;
    for (int32_t vs = 0; vs < n_vstages; vs++) {
        int32_t stage, chunk;
        pp_placement_vstage(placement, n_stages, vs, &stage, &chunk);
        int32_t  unit = stage * n_chunks + chunk;
        int32_t  begin = part->layer_begin[vs], layers = part->layer_end[vs] - begin;
        int32_t  n_moe = pp_memory_moe_layers(mem, begin, layers), n_dense = layers - n_moe;
        gboolean first = vs == 0, last = vs == n_vstages - 1;

        double flops =
            sim_cost_blocks(n_dense, D->flops, n_moe, M->flops) + (last ? head_flops : 0.0);
        double time_flops = sim_cost_blocks(n_dense, D->time_flops, n_moe, M->time_flops) +
                            (last ? head_flops : 0.0);
        double params = pp_memory_vstage_params(mem, begin, layers, first, last);
        total_flops += 3.0 * flops;
        total_hw_flops +=
            3.0 * flops + sim_cost_blocks(n_dense, D->recompute_flops, n_moe, M->recompute_flops);
        unit_params[unit] = params;
        unit_layers[unit] = layers;
        if (ly.ops_model) {
            double ns[SIM_COST_PASS_N_KINDS];
            sim_cost_ops_unit_ns(&ly.dense_ops, n_dense, &ly.moe_ops, n_moe,
                                 last ? &ly.head_ops : NULL, hw, sim_cost_ops_rerun_set(scenario),
                                 ns);
            cost->f_ns[unit] =
                llround(ns[SIM_COST_PASS_F]) + n_dense * D->comm_f_ns + n_moe * M->comm_f_ns;
            cost->b_ns[unit] =
                llround(ns[SIM_COST_PASS_B]) + n_dense * D->comm_b_ns + n_moe * M->comm_b_ns;
            cost->w_ns[unit] =
                llround(ns[SIM_COST_PASS_W]) + n_dense * D->comm_w_ns + n_moe * M->comm_w_ns;
        } else if (times) {
            /* ns of this GPU's share of the unit's forward FLOPs */
            double compute_ns = time_flops / t / c / rate * 1e9;
            double recompute_ns =
                sim_cost_blocks(n_dense, D->recompute_time_flops, n_moe, M->recompute_time_flops) /
                t / c / rate * 1e9;
            cost->f_ns[unit] = llround(compute_ns) + n_dense * D->comm_f_ns + n_moe * M->comm_f_ns;
            cost->b_ns[unit] =
                llround(compute_ns + recompute_ns) + n_dense * D->comm_b_ns + n_moe * M->comm_b_ns;
            cost->w_ns[unit] = llround(compute_ns) + n_dense * D->comm_w_ns + n_moe * M->comm_w_ns;
        }
        PpMemoryBytes state;
        pp_memory_vstage_state(mem, begin, layers, first, last, &state);
        cost->weights_bytes[stage] += state.params_bytes;
        cost->grads_bytes[stage] += state.grads_bytes;
        cost->optim_bytes[stage] += state.optim_bytes;
        cost->static_bytes[stage] += state.static_bytes;
        /* the largest set of activations the stage's backward rebuilds at once */
        recompute_bytes[stage] = MAX(recompute_bytes[stage],
                                     llround(pp_memory_unit_recompute_bytes(mem, begin, layers)));
        cost->weight_copy_bytes[stage] += llround(params * PP_MEMORY_WEIGHT_COPY_BYTES_PER_PARAM);
        if (times && hw->mem_bw_bytes_per_s > 0.0)
            cost->u_ns[stage] +=
                llround(params / (zero ? d * c : 1.0) * SIM_COST_UPDATE_BYTES_PER_PARAM /
                        hw->mem_bw_bytes_per_s * 1e9);
        cost->act_bytes[unit] = llround(pp_memory_unit_act_bytes(mem, begin, layers, last));
        cost->act_b_bytes[unit] = llround(pp_memory_unit_act_b_bytes(mem, begin, layers, last));
    }

    for (int32_t stage = 0; stage < n_stages; stage++) {
        /* communication buffers, fsdp's gathered blocks, recomputed activations */
        cost->buffer_bytes[stage] = llround(split->device_bytes) + recompute_bytes[stage];
        cost->static_bytes[stage] += cost->buffer_bytes[stage];
    }
    cost->act_msg_bytes = llround(msg_bytes);
    if (times) {
        cost->comm_latency_ns = hw->link_latency_ns;
        cost->comm_bytes_per_ns = hw->link_bw_bytes_per_s / 1e9;
    }
    if (!sim_cost_fill_layout(cost, scenario, layout, unit_params, unit_layers, times, error))
        return FALSE;
    cost->tokens_per_mb = (int64_t)scenario->pipeline.microbatch_size * model->seq_len;
    cost->samples_per_mb = scenario->pipeline.microbatch_size;
    cost->flops_per_mb = total_flops;
    cost->hw_flops_per_mb = total_hw_flops;
    /* MFU against the peak of the precision the matrix products run at (fp8's under fp8) */
    cost->peak_flops = pp_scenario_precision_fp8(scenario) ? hw->peak_fp8_flops : hw->peak_flops;
    return TRUE;
}

SimCostModel *sim_cost_new_from_scenario(const PpScenario *scenario, GError **error) {
    /* holds the one schedule the partition builds, freed on return */
    g_autoptr(PpSchedCache) cache = pp_sched_cache_new(0);
    return sim_cost_new_cached(scenario, cache, error);
}

SimCostModel *sim_cost_new_cached(const PpScenario *scenario, PpSchedCache *cache, GError **error) {
    const PpPipelineParams *pipe = &scenario->pipeline;
    if (pipe->stages < 1 || pipe->chunks < 1) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: pipeline.stages = %d, pipeline.chunks = %d: both must be >= 1",
                    scenario->path, pipe->stages, pipe->chunks);
        return NULL;
    }
    g_autoptr(SimCostModel) cost = sim_cost_alloc(pipe->stages, pipe->chunks);
    const PpCostParams *c = &scenario->costs;
    if (c->set) {
        /* [costs] times are per full stage; each chunk gets an equal share (truncated). */
        if (c->fused_stage_ns != NULL)
            cost->bw_ns = g_new0(int64_t, (size_t)pipe->stages * pipe->chunks);
        if (c->stash_stage_ns != NULL)
            cost->stash_copy_ns = g_new0(int64_t, pipe->stages);
        for (int32_t st = 0; st < pipe->stages; st++) {
            for (int32_t k = 0; k < pipe->chunks; k++) {
                int32_t i = st * pipe->chunks + k;
                cost->f_ns[i] = pp_scenario_stage_cost_ns(c, PP_OP_FORWARD, st) / pipe->chunks;
                cost->b_ns[i] = pp_scenario_stage_cost_ns(c, PP_OP_BACKWARD, st) / pipe->chunks;
                cost->w_ns[i] = pp_scenario_stage_cost_ns(c, PP_OP_WEIGHT, st) / pipe->chunks;
                if (cost->bw_ns != NULL)
                    cost->bw_ns[i] =
                        pp_scenario_stage_cost_ns(c, PP_OP_BACKWARD_FULL, st) / pipe->chunks;
            }
            cost->u_ns[st] = pp_scenario_stage_cost_ns(c, PP_OP_UPDATE, st);
            if (cost->stash_copy_ns != NULL)
                cost->stash_copy_ns[st] = pp_scenario_stash_ns(c, st);
        }
    }
    if (!sim_cost_fill_analytic(cost, scenario, !c->set, cache, error))
        return NULL;
    if (c->set) {
        cost->comm_latency_ns = c->comm_ns;
        cost->comm_bytes_per_ns = 0.0; /* [costs] comm_us is the whole hop */
    }
    return g_steal_pointer(&cost);
}
