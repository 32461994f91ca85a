/* SPDX-License-Identifier: MIT
 * sim-cost-block.c: one transformer block and the LM head as lists of operators (the
 * operator cost model; docs/cost-model.md, The operator cost model). In order: the norm, the
 * attention's projections (MLA: its latents), the attention core, the output projection, the
 * residual add with dropout, the norm, the FFN (or the router, the permutations and the
 * experts), the residual add. Memory-bound operators move 2-byte elements: a norm reads and
 * writes each element (4 bytes) and its backward reads two and writes one (6); a residual add
 * with dropout reads two, writes one and a 1-byte mask (7), backward 5; gelu 4 and 6, SwiGLU's
 * gate and product 6 and 10 per output element; the cross-entropy 8 bytes per fp32 logit each
 * way. A pass's time is the device's unless the host launching its operators at
 * hardware.launch_us each takes longer. Megatron's all-to-all dispatcher, dropless
 * (sim_moe_dispatcher_syncs()), makes the host wait for the GPU once per MoE layer forward,
 * before the expert all-to-all (MoEAlltoAllTokenDispatcher's d2h_event.synchronize() on the
 * token counts; NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py at
 * c4ba666, 2025-11): from there on the host has no lead, so the rest of the layer (the
 * experts, the unpermutation, the residual add) is its own stretch, and in it the host issues
 * the experts one at a time: two products per local expert and with fp8 each one's
 * quantisation (TEGroupedMLP's tokens_per_expert.tolist() into Transformer Engine's
 * GroupedLinear, experts.py at the same commit), each at launch_us.
 */
#include "sim-cost-ops.h"

#include "pp-checked.h"
#include "pp-error.h"
#include "sim-moe.h"

/* The three parallelism passes over a fresh slice. */
static void sim_cost_block_slice(const PpScenario *scenario, SimCostSlice *slice) {
    sim_cost_slice_init(slice, scenario);
    sim_cost_slice_tensor(slice, scenario);
    sim_cost_slice_context(slice, scenario);
    sim_cost_slice_expert(slice, scenario);
}

/* An FFN of width @f (gelu or SwiGLU) over @rows rows on this GPU. */
static void sim_cost_block_ffn(SimCostOps *ops, const SimCostSlice *sl, gboolean gated, double rows,
                               double h, double f) {
    sim_cost_ops_matmul(ops, sl, rows, (gated ? 2.0 : 1.0) * f, h, 1.0);
    sim_cost_ops_elementwise(ops, sl, rows * f, gated ? 6.0 : 4.0, gated ? 10.0 : 6.0);
    sim_cost_ops_matmul(ops, sl, rows, h, f, 1.0);
}

/* The local experts of an MoE layer (Megatron-Core's TEGroupedMLP): the first products of
 * every local expert, one activation over all their rows, the second products. */
static void sim_cost_block_experts(SimCostOps *ops, const SimCostSlice *sl, gboolean gated,
                                   double h, double f) {
    const double rows = sl->expert_rows, count = sl->local_experts;
    sim_cost_ops_matmul(ops, sl, rows, (gated ? 2.0 : 1.0) * f, h, count);
    sim_cost_ops_elementwise(ops, sl, count * rows * f, gated ? 6.0 : 4.0, gated ? 10.0 : 6.0);
    sim_cost_ops_matmul(ops, sl, rows, h, f, count);
}

/* The attention's projections and core; MLA's down- and up-projections of its latents. */
static void sim_cost_block_attention(SimCostOps *ops, const SimCostSlice *sl,
                                     const PpMemoryShape *m) {
    const double N = sl->tokens, h = m->hidden, T = sl->tensor, a = m->heads;
    if (m->mla) {
        const double d_qk = m->qk_nope_head_dim + m->qk_rope_head_dim, d_v = m->v_head_dim;
        if (m->q_lora_rank > 0) {
            sim_cost_ops_matmul(ops, sl, N, m->q_lora_rank, h, 1.0);
            sim_cost_ops_matmul(ops, sl, N, a * d_qk / T, m->q_lora_rank, 1.0);
        } else {
            sim_cost_ops_matmul(ops, sl, N, a * d_qk / T, h, 1.0);
        }
        sim_cost_ops_matmul(ops, sl, N, m->kv_lora_rank + m->qk_rope_head_dim, h, 1.0);
        sim_cost_ops_matmul(ops, sl, N, a * (m->qk_nope_head_dim + d_v) / T, m->kv_lora_rank, 1.0);
        sim_cost_ops_attention(ops, sl, a / (T * sl->core_heads_split), d_qk, d_v);
        sim_cost_ops_matmul(ops, sl, N, h, a * d_v / T, 1.0);
        return;
    }
    const double k = m->kv_heads > 0 ? m->kv_heads : a;
    const double d = m->head_dim > 0 ? m->head_dim : h / a;
    sim_cost_ops_matmul(ops, sl, N, (a + 2.0 * k) * d / T, h, 1.0);
    sim_cost_ops_attention(ops, sl, a / (T * sl->core_heads_split), d, d);
    sim_cost_ops_matmul(ops, sl, N, h, a * d / T, 1.0);
}

void sim_cost_ops_block(const PpScenario *scenario, const PpMemoryShape *m, gboolean moe,
                        SimCostOps *ops) {
    SimCostSlice sl;
    sim_cost_block_slice(scenario, &sl);
    *ops = (SimCostOps){0};
    const double N = sl.tokens, h = m->hidden, T = sl.tensor;
    const double f = m->ffn_hidden > 0 ? m->ffn_hidden : 4.0 * h;
    const double norm_elements = N * h / sl.norm_shards;
    sim_cost_ops_elementwise(ops, &sl, norm_elements, 4.0, 6.0);
    sim_cost_block_attention(ops, &sl, m);
    sim_cost_ops_elementwise(ops, &sl, norm_elements, 7.0, 5.0);
    sim_cost_ops_elementwise(ops, &sl, norm_elements, 4.0, 6.0);
    if (!moe) {
        sim_cost_block_ffn(ops, &sl, m->ffn_gated, N, h, f / T);
    } else {
        const double f_e = m->expert_ffn_hidden > 0 ? m->expert_ffn_hidden : f;
        const double routed = N * pp_memory_moe_routed_per_token(m) / T; /* this GPU's copies */
        /* the router: a plain linear in bf16 or fp32, outside fp8 (Megatron-Core moe/router.py
         * TopKRouter.gating, router_gating_linear at c4ba666) */
        SimCostSlice router = sl;
        router.speedup = 1.0;
        router.fp8 = FALSE;
        sim_cost_ops_matmul(ops, &router, N, m->experts, h, 1.0);
        sim_cost_ops_elementwise(ops, &sl, routed * h, 4.0, 4.0); /* permute */
        if (m->shared_experts > 0)
            sim_cost_block_ffn(ops, &sl, m->ffn_gated, N, h, m->shared_experts * f_e / T);
        /* the host waits for the token counts here (before the expert all-to-all) */
        const double synced_gpu_ns = ops->gpu_ns[SIM_COST_PASS_F];
        const double synced_kernels = ops->kernels[SIM_COST_PASS_F];
        sim_cost_block_experts(ops, &sl, m->ffn_gated, h, f_e / sl.expert_split);
        sim_cost_ops_elementwise(ops, &sl, routed * h, 4.0, 4.0); /* unpermute */
        sim_cost_ops_elementwise(ops, &sl, norm_elements, 7.0, 5.0);
        if (sim_moe_dispatcher_syncs(scenario)) {
            ops->synced_gpu_ns = ops->gpu_ns[SIM_COST_PASS_F] - synced_gpu_ns;
            ops->synced_kernels = ops->kernels[SIM_COST_PASS_F] - synced_kernels;
            /* the host issues the experts' products one expert at a time (and with fp8 each
             * expert's quantisation) with no lead on the GPU */
            const double per_expert = (sl.fp8 ? 4.0 : 2.0) * (sl.local_experts - 1.0);
            ops->synced_kernels += per_expert;
            ops->kernels[SIM_COST_PASS_F] += per_expert;
        }
        return;
    }
    sim_cost_ops_elementwise(ops, &sl, norm_elements, 7.0, 5.0);
}

void sim_cost_ops_head(const PpScenario *scenario, SimCostOps *ops) {
    SimCostSlice sl;
    sim_cost_block_slice(scenario, &sl);
    sl.speedup = 1.0; /* the head stays in bf16 under fp8 */
    sl.fp8 = FALSE;
    *ops = (SimCostOps){0};
    const double h = scenario->model.hidden, V = scenario->model.vocab;
    sim_cost_ops_elementwise(ops, &sl, sl.tokens * h / sl.norm_shards, 4.0, 6.0);
    sim_cost_ops_matmul(ops, &sl, sl.tokens, V / sl.tensor, h, 1.0);
    /* the cross-entropy: 8 bytes per fp32 logit each way */
    sim_cost_ops_elementwise(ops, &sl, sl.tokens * V / sl.tensor, 8.0, 8.0);
}

/* ns of one stretch the host issues without waiting: the device's time or the launches'. */
static double sim_cost_ops_stretch_ns(double gpu_ns, double kernels, const PpHardwareParams *hw) {
    return MAX(gpu_ns, kernels * (double)hw->launch_ns);
}

double sim_cost_ops_pass_ns(const SimCostOps *ops, const PpHardwareParams *hw, SimCostPass pass,
                            PpRecompute recompute) {
    const double sg = ops->synced_gpu_ns, sk = ops->synced_kernels;
    const double fg = ops->gpu_ns[SIM_COST_PASS_F], fk = ops->kernels[SIM_COST_PASS_F];
    if (pass == SIM_COST_PASS_F)
        return sim_cost_ops_stretch_ns(fg - sg, fk - sk, hw) + sim_cost_ops_stretch_ns(sg, sk, hw);
    double gpu_ns = ops->gpu_ns[pass], kernels = ops->kernels[pass];
    if (pass == SIM_COST_PASS_B && recompute == PP_RECOMPUTE_FULL) /* the rerun forward syncs */
        return sim_cost_ops_stretch_ns(fg - sg, fk - sk, hw) +
               sim_cost_ops_stretch_ns(sg + gpu_ns, sk + kernels, hw);
    if (pass == SIM_COST_PASS_B && recompute == PP_RECOMPUTE_SELECTIVE) {
        gpu_ns += ops->core_gpu_ns;
        kernels += ops->core_kernels;
    }
    return sim_cost_ops_stretch_ns(gpu_ns, kernels, hw);
}

void sim_cost_ops_unit_ns(const SimCostOps *dense, int32_t n_dense, const SimCostOps *moe,
                          int32_t n_moe, const SimCostOps *head, const PpHardwareParams *hw,
                          PpRecompute recompute, double ns[SIM_COST_PASS_N_KINDS]) {
    for (int p = 0; p < SIM_COST_PASS_N_KINDS; p++) {
        ns[p] = n_dense * sim_cost_ops_pass_ns(dense, hw, p, recompute);
        if (n_moe > 0)
            ns[p] += n_moe * sim_cost_ops_pass_ns(moe, hw, p, recompute);
        if (head != NULL) /* the head is never recomputed */
            ns[p] += sim_cost_ops_pass_ns(head, hw, p, PP_RECOMPUTE_NONE);
    }
}

gboolean sim_cost_ops_check(const SimCostOps *ops, const PpScenario *scenario, GError **error) {
    const PpHardwareParams *hw = &scenario->hardware;
    const double            max = (double)(PP_CHECKED_MAX / ((int64_t)scenario->model.layers + 1));
    for (int p = 0; p < SIM_COST_PASS_N_KINDS; p++) {
        const double ns = sim_cost_ops_pass_ns(ops, hw, p, PP_RECOMPUTE_FULL);
        if (ns <= max)
            continue;
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: one layer would take %.3g ns (hardware.launch_us = %g over %g operators, "
                    "peak_tflops = %g, mem_bw_gbps = %g), beyond the simulator's clock of 2^62 ns "
                    "over model.layers = %d; lower launch_us or shrink the model",
                    scenario->path, ns, (double)hw->launch_ns / 1e3, ops->kernels[p],
                    hw->peak_flops / 1e12, hw->mem_bw_bytes_per_s / 1e9, scenario->model.layers);
        return FALSE;
    }
    return TRUE;
}
