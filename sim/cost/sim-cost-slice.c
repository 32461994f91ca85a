/* SPDX-License-Identifier: MIT
 * sim-cost-slice.c: the parallelism passes of the operator cost model, one per dimension:
 * each narrows the work of one block to what one GPU runs (sim-cost-ops.h, SimCostSlice).
 */
#include "sim-cost-ops.h"

void sim_cost_slice_init(SimCostSlice *slice, const PpScenario *scenario) {
    const PpHardwareParams *hw = &scenario->hardware;
    const double            b = scenario->pipeline.microbatch_size, s = scenario->model.seq_len;
    const double            E = scenario->model.experts;
    *slice = (SimCostSlice){
        .hw = hw,
        .batch = b,
        .keys = s,
        .queries = s,
        .tokens = b * s,
        .core_heads_split = 1.0,
        .tensor = 1.0,
        .norm_shards = 1.0,
        .local_experts = E,
        .expert_rows = E > 0 ? b * s * scenario->model.experts_per_token / E : 0.0,
        .expert_split = 1.0,
        .speedup = pp_scenario_precision_fp8(scenario)
                       ? hw->kernel_eff_fp8 * hw->peak_fp8_flops / hw->peak_flops
                       : 1.0,
        .fp8 = pp_scenario_precision_fp8(scenario),
        .flash = scenario->model.flash_attention,
        .causal = pp_scenario_attention_causal(scenario),
    };
}

/* Megatron's tensor parallelism splits the heads and the FFN's columns T ways; sequence
 * parallelism also splits the tokens of the norms, dropouts and residual adds. */
void sim_cost_slice_tensor(SimCostSlice *slice, const PpScenario *scenario) {
    slice->tensor = scenario->parallel.tensor;
    slice->norm_shards = scenario->parallel.sequence_parallel ? scenario->parallel.tensor : 1.0;
}

/* Each of the C ranks holds s / C tokens of every sequence. Ring attention: its queries
 * attend to all s keys (the ring brings the others' keys and values). The all-to-all
 * (Ulysses): all s queries and keys of 1/C of the heads. */
void sim_cost_slice_context(SimCostSlice *slice, const PpScenario *scenario) {
    const double C = scenario->parallel.context;
    slice->tokens = slice->batch * slice->keys / C;
    if (pp_scenario_context_comm(scenario) == PP_CONTEXT_COMM_A2A)
        slice->core_heads_split = C;
    else
        slice->queries = slice->keys / C;
}

/* E / EP routed experts per GPU, each expert's columns split expert_tensor ways; the routed
 * rows per GPU keep the model's FLOP count, K tokens' copies over T:
 * local experts x rows x (f_e / ET) = tokens x K x f_e / T; with a capacity factor the rows
 * as padded or dropped, R in place of K (pp_memory_moe_routed_rows()). */
void sim_cost_slice_expert(SimCostSlice *slice, const PpScenario *scenario) {
    const double E = scenario->model.experts;
    if (!(E > 0))
        return;
    const double ep = MAX(scenario->parallel.expert, 1);
    const double et = MAX(scenario->parallel.expert_tensor, 1);
    slice->local_experts = E / ep;
    slice->expert_split = et;
    const double routed = pp_memory_moe_routed_rows(scenario->parallel.moe_capacity_factor,
                                                    slice->tokens / slice->tensor,
                                                    scenario->model.experts_per_token, E);
    slice->expert_rows = slice->tokens * routed * et / (slice->tensor * slice->local_experts);
}
