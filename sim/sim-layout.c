/* SPDX-License-Identifier: MIT
 * sim-layout.c: node placement, ring collectives and Korthikanti et al.'s activation and
 * recomputation formulas for the analytic cost model (sim-layout.h).
 */
#include "sim-layout.h"

#include <math.h>

#include "pp-error.h"

void sim_layout_init(SimLayout *layout, const PpScenario *scenario) {
    const PpHardwareParams *hw = &scenario->hardware;
    *layout = (SimLayout){
        .n_stages = scenario->pipeline.stages,
        .data = scenario->parallel.data,
        .tensor = scenario->parallel.tensor,
        .gpus_per_node = MAX(hw->gpus_per_node, 1),
        .intra_bytes_per_ns = MAX(hw->link_bw_bytes_per_s, 0.0) / 1e9,
        .intra_latency_ns = MAX(hw->link_latency_ns, 0),
        .inter_bytes_per_ns = MAX(hw->internode_bw_bytes_per_s, 0.0) / 1e9,
        .inter_latency_ns = MAX(hw->internode_latency_ns, 0),
    };
}

int64_t sim_layout_stage_node(const SimLayout *layout, int32_t stage) {
    PP_ASSERT(stage >= 0 && stage < layout->n_stages);
    int64_t block = (int64_t)layout->tensor * layout->data; /* GPUs of one stage */
    int64_t first = block * stage, last = first + block - 1;
    int64_t node = first / layout->gpus_per_node;
    return last / layout->gpus_per_node == node ? node : -1;
}

gboolean sim_layout_tensor_intra(const SimLayout *layout) {
    return layout->tensor <= layout->gpus_per_node && layout->gpus_per_node % layout->tensor == 0;
}

int64_t sim_layout_allreduce_ns(int32_t ranks, double bytes, double bytes_per_ns,
                                int64_t latency_ns) {
    PP_ASSERT(ranks >= 1 && bytes >= 0.0);
    if (ranks == 1)
        return 0;
    double steps = 2.0 * (ranks - 1);
    double step_ns = (double)latency_ns;
    if (bytes_per_ns > 0.0)
        step_ns += bytes / ranks / bytes_per_ns;
    return llround(steps * step_ns);
}

void sim_layout_layer_act(const PpScenario *scenario, double *act, double *act_w) {
    const double   s = scenario->model.seq_len, b = scenario->pipeline.microbatch_size;
    const double   h = scenario->model.hidden, a = scenario->model.heads;
    const double   t = scenario->parallel.tensor;
    const gboolean sp = scenario->parallel.sequence_parallel;
    /* Attention scores, softmax and its dropout mask, 5as/h per sbh; flash attention never
     * stores them. */
    const double scores = scenario->model.flash_attention ? 0.0 : 5.0 * a * s / h;
    double       factor = 0.0; /* bytes per sbh */
    double       kept = 0.0;   /* the 5as/h share still stored */
    switch (pp_scenario_recompute(scenario)) {
    case PP_RECOMPUTE_NONE:
        /* sbh(10 + 24/t + 5as/(ht)): LayerNorm inputs and dropout masks (10sbh) are
         * replicated across the tensor group unless sequence parallelism splits them. */
        factor = sp ? (34.0 + scores) / t : 10.0 + 24.0 / t + scores / t;
        kept = scores;
        break;
    case PP_RECOMPUTE_SELECTIVE:
        factor = sp ? 34.0 / t : 10.0 + 24.0 / t;
        break;
    case PP_RECOMPUTE_FULL:
        /* only the layer input, 2sbh, split over the group with sequence parallelism */
        factor = sp ? 2.0 / t : 2.0;
        break;
    }
    *act = s * b * h * factor;
    /* The weight-gradient pass needs the GEMM inputs, 32sbh of the unsharded 34sbh + 5as^2b;
     * the same share of the sharded bytes. With full recomputation the split backward keeps
     * the layer input until W (the recomputed tensors of one layer are transient). */
    *act_w =
        pp_scenario_recompute(scenario) == PP_RECOMPUTE_FULL ? *act : *act * 32.0 / (34.0 + kept);
}

double sim_layout_recompute_flops(const PpScenario *scenario, double layer_flops) {
    const double s = scenario->model.seq_len, b = scenario->pipeline.microbatch_size;
    const double h = scenario->model.hidden;
    switch (pp_scenario_recompute(scenario)) {
    case PP_RECOMPUTE_NONE:
        return 0.0;
    case PP_RECOMPUTE_SELECTIVE:
        /* QK^T and attention over V, 2bs^2h each; flash attention already recomputes them
         * inside its own backward, so selective recomputation adds nothing there. */
        return scenario->model.flash_attention ? 0.0 : 4.0 * b * s * s * h;
    case PP_RECOMPUTE_FULL:
        return layer_flops;
    }
    PP_UNREACHABLE();
}
