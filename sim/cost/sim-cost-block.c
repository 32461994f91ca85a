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

/* The bit number of the PpRecomputeModule bit @module. */
static int sim_cost_block_module(guint module) {
    return module == 0 ? -1 : (int)g_bit_nth_lsf(module, -1);
}

/* Sets where the operators added next belong: @module (a PpRecomputeModule bit, 0: none) and
 * the share @op_rerun of their forward that per-operator checkpointing reruns. */
static void sim_cost_block_tag(SimCostOps *ops, guint module, double op_rerun) {
    ops->module = sim_cost_block_module(module);
    ops->op_rerun = op_rerun;
}

/* Per-operator checkpointing keeps the output of the @i-th (from 0) aten.mm of a block's
 * forward when i is even (torchtitan counts them from 1 and keeps the odd ones): the share of
 * the product's forward it reruns. */
static double sim_cost_block_op_rerun(int i) {
    return i % 2 == 0 ? 0.0 : 1.0;
}

/* An FFN of width @f (gelu or SwiGLU) over @rows rows on this GPU, in recomputation module
 * @module with its activation in @act_module; @mm: the aten.mm count before it in the block's
 * forward. torchtitan runs SwiGLU's w1 and w3 as two products (one kept, one rerun) where this
 * model runs one. */
static void sim_cost_block_ffn(SimCostOps *ops, const SimCostSlice *sl, gboolean gated, double rows,
                               double h, double f, guint module, guint act_module, int mm) {
    const double fc1 = gated ? 0.5 : sim_cost_block_op_rerun(mm);
    const double fc2 = sim_cost_block_op_rerun(mm + (gated ? 2 : 1));
    sim_cost_block_tag(ops, module, fc1);
    sim_cost_ops_matmul(ops, sl, rows, (gated ? 2.0 : 1.0) * f, h, 1.0);
    sim_cost_block_tag(ops, act_module, 1.0);
    sim_cost_ops_elementwise(ops, sl, rows * f, gated ? 6.0 : 4.0, gated ? 10.0 : 6.0);
    sim_cost_block_tag(ops, module, fc2);
    sim_cost_ops_matmul(ops, sl, rows, h, f, 1.0);
}

/* The local experts of an MoE layer (Megatron-Core's TEGroupedMLP) in recomputation module
 * moe, their activation in moe_act: the first products of every local expert, one activation
 * over all their rows, the second products; grouped products, which per-operator
 * checkpointing never keeps. */
static void sim_cost_block_experts(SimCostOps *ops, const SimCostSlice *sl, gboolean gated,
                                   double h, double f) {
    const double rows = sl->expert_rows, count = sl->local_experts;
    sim_cost_block_tag(ops, PP_RECOMPUTE_MODULE_MOE, 1.0);
    sim_cost_ops_matmul(ops, sl, rows, (gated ? 2.0 : 1.0) * f, h, count);
    sim_cost_block_tag(ops, PP_RECOMPUTE_MODULE_MOE_ACT, 1.0);
    sim_cost_ops_elementwise(ops, sl, count * rows * f, gated ? 6.0 : 4.0, gated ? 10.0 : 6.0);
    sim_cost_block_tag(ops, PP_RECOMPUTE_MODULE_MOE, 1.0);
    sim_cost_ops_matmul(ops, sl, rows, h, f, count);
}

/* The attention's projections and core; MLA's down- and up-projections of its latents. Returns
 * the aten.mm count of the attention in torchtitan's blocks (wq, wk, wv, wo; MLA wq_a, wq_b,
 * wkv_a, wkv_b, wo, or wq, wkv_a, wkv_b, wo without a query latent), whose outputs
 * per-operator checkpointing keeps alternately. */
static int sim_cost_block_attention(SimCostOps *ops, const SimCostSlice *sl,
                                    const PpMemoryShape *m) {
    const double N = sl->tokens, h = m->hidden, T = sl->tensor, a = m->heads;
    const guint  up = PP_RECOMPUTE_MODULE_MLA_UP_PROJ;
    if (m->mla) {
        const double d_qk = m->qk_nope_head_dim + m->qk_rope_head_dim, d_v = m->v_head_dim;
        int          mm = 0;
        if (m->q_lora_rank > 0) {
            sim_cost_block_tag(ops, 0, sim_cost_block_op_rerun(mm++));
            sim_cost_ops_matmul(ops, sl, N, m->q_lora_rank, h, 1.0);
            sim_cost_block_tag(ops, up, sim_cost_block_op_rerun(mm++));
            sim_cost_ops_matmul(ops, sl, N, a * d_qk / T, m->q_lora_rank, 1.0);
        } else {
            sim_cost_block_tag(ops, up, sim_cost_block_op_rerun(mm++));
            sim_cost_ops_matmul(ops, sl, N, a * d_qk / T, h, 1.0);
        }
        sim_cost_block_tag(ops, 0, sim_cost_block_op_rerun(mm++));
        sim_cost_ops_matmul(ops, sl, N, m->kv_lora_rank + m->qk_rope_head_dim, h, 1.0);
        sim_cost_block_tag(ops, up, sim_cost_block_op_rerun(mm++));
        sim_cost_ops_matmul(ops, sl, N, a * (m->qk_nope_head_dim + d_v) / T, m->kv_lora_rank, 1.0);
        sim_cost_block_tag(ops, PP_RECOMPUTE_MODULE_CORE_ATTN, 0.0);
        sim_cost_ops_attention(ops, sl, a / (T * sl->core_heads_split), d_qk, d_v);
        sim_cost_block_tag(ops, 0, sim_cost_block_op_rerun(mm++));
        sim_cost_ops_matmul(ops, sl, N, h, a * d_v / T, 1.0);
        return mm;
    }
    const double k = m->kv_heads > 0 ? m->kv_heads : a;
    const double d = m->head_dim > 0 ? m->head_dim : h / a;
    /* one fused QKV product; torchtitan's wk (the second) is rerun */
    sim_cost_block_tag(ops, 0, k / (a + 2.0 * k));
    sim_cost_ops_matmul(ops, sl, N, (a + 2.0 * k) * d / T, h, 1.0);
    sim_cost_block_tag(ops, PP_RECOMPUTE_MODULE_CORE_ATTN, 0.0);
    sim_cost_ops_attention(ops, sl, a / (T * sl->core_heads_split), d, d);
    sim_cost_block_tag(ops, 0, sim_cost_block_op_rerun(3));
    sim_cost_ops_matmul(ops, sl, N, h, a * d / T, 1.0);
    return 4;
}

/* The operators of one block in forward order. Megatron's Transformer Engine layer fuses a
 * norm that feeds one linear into it (part of that linear's module: the dense FFN's into mlp);
 * MLA's input norm and an MoE block's pre-MLP norm stand alone (recompute module layernorm).
 * @syncs: Megatron's dispatcher makes the host wait before the experts (synced_*). */
static void sim_cost_block_ops(const SimCostSlice *sl, const PpMemoryShape *m, gboolean moe,
                               gboolean syncs, SimCostOps *ops) {
    *ops = (SimCostOps){.module = -1, .op_rerun = 1.0};
    const double N = sl->tokens, h = m->hidden, T = sl->tensor;
    const double f = m->ffn_hidden > 0 ? m->ffn_hidden : 4.0 * h;
    const double norm_elements = N * h / sl->norm_shards;
    const guint  norm = PP_RECOMPUTE_MODULE_LAYERNORM;
    sim_cost_block_tag(ops, m->mla ? norm : 0, 1.0);
    sim_cost_ops_elementwise(ops, sl, norm_elements, 4.0, 6.0);
    const int mm = sim_cost_block_attention(ops, sl, m);
    sim_cost_block_tag(ops, 0, 1.0);
    sim_cost_ops_elementwise(ops, sl, norm_elements, 7.0, 5.0);
    if (!moe) {
        const guint mlp = PP_RECOMPUTE_MODULE_MLP;
        sim_cost_block_tag(ops, mlp, 1.0);
        sim_cost_ops_elementwise(ops, sl, norm_elements, 4.0, 6.0);
        sim_cost_block_ffn(ops, sl, m->ffn_gated, N, h, f / T, mlp, mlp, mm);
    } else {
        const guint  moe_module = PP_RECOMPUTE_MODULE_MOE;
        const double f_e = m->expert_ffn_hidden > 0 ? m->expert_ffn_hidden : f;
        const double routed = N * pp_memory_moe_routed_per_token(m) / T; /* this GPU's copies */
        sim_cost_block_tag(ops, norm, 1.0);
        sim_cost_ops_elementwise(ops, sl, norm_elements, 4.0, 6.0);
        /* the router: a plain linear in bf16 or fp32, outside fp8 (Megatron-Core moe/router.py
         * TopKRouter.gating, router_gating_linear at c4ba666) */
        SimCostSlice router = *sl;
        router.speedup = 1.0;
        router.fp8 = FALSE;
        sim_cost_block_tag(ops, moe_module, 1.0);
        sim_cost_ops_matmul(ops, &router, N, m->experts, h, 1.0);
        sim_cost_ops_elementwise(ops, sl, routed * h, 4.0, 4.0); /* permute */
        if (m->shared_experts > 0) {
            const guint shared = PP_RECOMPUTE_MODULE_SHARED_EXPERTS;
            sim_cost_block_ffn(ops, sl, m->ffn_gated, N, h, m->shared_experts * f_e / T, shared,
                               shared, mm);
        }
        /* the host waits for the token counts here (before the expert all-to-all) */
        const double synced_gpu_ns = ops->gpu_ns[SIM_COST_PASS_F];
        const double synced_kernels = ops->kernels[SIM_COST_PASS_F];
        sim_cost_block_experts(ops, sl, m->ffn_gated, h, f_e / sl->expert_split);
        sim_cost_block_tag(ops, moe_module, 1.0);
        sim_cost_ops_elementwise(ops, sl, routed * h, 4.0, 4.0); /* unpermute */
        if (syncs) {
            /* the host issues the experts' products one expert at a time (and with fp8 each
             * expert's quantisation) with no lead on the GPU */
            sim_cost_ops_add_forward(ops, 0.0, (sl->fp8 ? 4.0 : 2.0) * (sl->local_experts - 1.0),
                                     0.0);
        }
        sim_cost_block_tag(ops, 0, 1.0);
        sim_cost_ops_elementwise(ops, sl, norm_elements, 7.0, 5.0);
        if (syncs) {
            ops->synced_gpu_ns = ops->gpu_ns[SIM_COST_PASS_F] - synced_gpu_ns;
            ops->synced_kernels = ops->kernels[SIM_COST_PASS_F] - synced_kernels;
        }
        return;
    }
    sim_cost_block_tag(ops, 0, 1.0);
    sim_cost_ops_elementwise(ops, sl, norm_elements, 7.0, 5.0);
}

void sim_cost_ops_block(const PpScenario *scenario, const PpMemoryShape *m, gboolean moe,
                        gboolean count_only, SimCostOps *ops) {
    SimCostSlice sl;
    sim_cost_block_slice(scenario, &sl);
    if (count_only)
        sl.hw = NULL;
    sim_cost_block_ops(&sl, m, moe, moe && sim_moe_dispatcher_syncs(scenario), ops);
}

guint sim_cost_ops_rerun_set(const PpScenario *scenario) {
    switch (pp_scenario_recompute(scenario)) {
    case PP_RECOMPUTE_NONE:
        return 0;
    case PP_RECOMPUTE_FULL:
        return SIM_COST_RERUN_ALL;
    case PP_RECOMPUTE_OP:
        return 1u << SIM_COST_RERUN_OP;
    case PP_RECOMPUTE_SELECTIVE: {
        guint modules = pp_scenario_recompute_modules(scenario);
        if (modules & PP_RECOMPUTE_MODULE_MOE) /* the MoE layer holds both */
            modules |= PP_RECOMPUTE_MODULE_MOE_ACT | PP_RECOMPUTE_MODULE_SHARED_EXPERTS;
        return modules;
    }
    }
    PP_UNREACHABLE();
}

double sim_cost_ops_rerun_flops(const SimCostOps *ops, guint rerun) {
    if (rerun & SIM_COST_RERUN_ALL)
        return ops->matmul_flops;
    double flops = 0.0;
    for (int i = 0; i < SIM_COST_RERUN_N; i++)
        if (rerun & (1u << i))
            flops += ops->rerun_flops[i];
    return flops;
}

void sim_cost_ops_head(const PpScenario *scenario, SimCostOps *ops) {
    SimCostSlice sl;
    sim_cost_block_slice(scenario, &sl);
    sl.speedup = 1.0; /* the head stays in bf16 under fp8 */
    sl.fp8 = FALSE;
    *ops = (SimCostOps){.module = -1, .op_rerun = 0.0};
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
                            guint rerun) {
    const double sg = ops->synced_gpu_ns, sk = ops->synced_kernels;
    const double fg = ops->gpu_ns[SIM_COST_PASS_F], fk = ops->kernels[SIM_COST_PASS_F];
    if (pass == SIM_COST_PASS_F)
        return sim_cost_ops_stretch_ns(fg - sg, fk - sk, hw) + sim_cost_ops_stretch_ns(sg, sk, hw);
    double gpu_ns = ops->gpu_ns[pass], kernels = ops->kernels[pass];
    if (pass == SIM_COST_PASS_B && (rerun & SIM_COST_RERUN_ALL)) /* the rerun forward syncs */
        return sim_cost_ops_stretch_ns(fg - sg, fk - sk, hw) +
               sim_cost_ops_stretch_ns(sg + gpu_ns, sk + kernels, hw);
    if (pass == SIM_COST_PASS_B) {
        for (int i = 0; i < SIM_COST_RERUN_N; i++) {
            if (rerun & (1u << i)) {
                gpu_ns += ops->rerun_gpu_ns[i];
                kernels += ops->rerun_kernels[i];
            }
        }
    }
    return sim_cost_ops_stretch_ns(gpu_ns, kernels, hw);
}

void sim_cost_ops_unit_ns(const SimCostOps *dense, int32_t n_dense, const SimCostOps *moe,
                          int32_t n_moe, const SimCostOps *head, const PpHardwareParams *hw,
                          guint rerun, double ns[SIM_COST_PASS_N_KINDS]) {
    for (int p = 0; p < SIM_COST_PASS_N_KINDS; p++) {
        ns[p] = n_dense * sim_cost_ops_pass_ns(dense, hw, p, rerun);
        if (n_moe > 0)
            ns[p] += n_moe * sim_cost_ops_pass_ns(moe, hw, p, rerun);
        if (head != NULL) /* the head is never recomputed */
            ns[p] += sim_cost_ops_pass_ns(head, hw, p, 0);
    }
}

gboolean sim_cost_ops_check(const SimCostOps *ops, const PpScenario *scenario, GError **error) {
    const PpHardwareParams *hw = &scenario->hardware;
    const double            max = (double)(PP_CHECKED_MAX / ((int64_t)scenario->model.layers + 1));
    for (int p = 0; p < SIM_COST_PASS_N_KINDS; p++) {
        const double ns = sim_cost_ops_pass_ns(ops, hw, p, SIM_COST_RERUN_ALL);
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
