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
        .context = MAX(scenario->parallel.context, 1),
        .gpus_per_node = MAX(hw->gpus_per_node, 1),
        .intra_bytes_per_ns = MAX(hw->link_bw_bytes_per_s, 0.0) / 1e9,
        .intra_latency_ns = MAX(hw->link_latency_ns, 0),
        .inter_bytes_per_ns = MAX(hw->internode_bw_bytes_per_s, 0.0) / 1e9,
        .inter_latency_ns = MAX(hw->internode_latency_ns, 0),
        .dp_bytes_per_ns = MAX(hw->allreduce_busbw_bytes_per_s, 0.0) / 1e9,
        .nics_per_node = MAX(hw->nics_per_node, 1),
    };
}

double sim_layout_dp_bytes_per_ns(const SimLayout *layout, gboolean intra) {
    if (layout->dp_bytes_per_ns > 0.0)
        return layout->dp_bytes_per_ns;
    return intra ? layout->intra_bytes_per_ns : layout->inter_bytes_per_ns;
}

int64_t sim_layout_stage_node(const SimLayout *layout, int32_t stage) {
    PP_ASSERT(stage >= 0 && stage < layout->n_stages);
    int64_t block = (int64_t)layout->tensor * layout->context * layout->data; /* one stage */
    int64_t first = block * stage, last = first + block - 1;
    int64_t node = first / layout->gpus_per_node;
    return last / layout->gpus_per_node == node ? node : -1;
}

gboolean sim_layout_tensor_intra(const SimLayout *layout) {
    return layout->tensor <= layout->gpus_per_node && layout->gpus_per_node % layout->tensor == 0;
}

double sim_layout_tensor_bytes_per_ns(const SimLayout *layout) {
    if (sim_layout_tensor_intra(layout))
        return layout->intra_bytes_per_ns;
    const double nics = MIN(layout->nics_per_node, layout->gpus_per_node);
    const double spanning = nics * layout->inter_bytes_per_ns;
    return layout->intra_bytes_per_ns > 0.0 ? MIN(spanning, layout->intra_bytes_per_ns) : spanning;
}

gboolean sim_layout_context_intra(const SimLayout *layout) {
    int64_t span = (int64_t)layout->tensor * layout->context;
    return span <= layout->gpus_per_node && layout->gpus_per_node % span == 0;
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

int64_t sim_layout_expert_ranks_in_node(const SimLayout *layout, int32_t ep,
                                        int32_t expert_tensor) {
    PP_ASSERT(ep >= 1 && expert_tensor >= 1);
    const int64_t span = (int64_t)ep * expert_tensor, G = layout->gpus_per_node;
    if (span <= G && G % span == 0)
        return ep;
    return MIN((int64_t)ep, MAX(G / expert_tensor, 1));
}

int64_t sim_layout_alltoall_ns(const SimLayout *layout, double intra_bytes, double inter_bytes) {
    PP_ASSERT(intra_bytes >= 0.0 && inter_bytes >= 0.0);
    double  intra_ns = 0.0, inter_ns = 0.0;
    int64_t latency_ns = layout->intra_latency_ns;
    if (layout->intra_bytes_per_ns > 0.0)
        intra_ns = intra_bytes / layout->intra_bytes_per_ns;
    if (inter_bytes > 0.0) {
        latency_ns = MAX(latency_ns, layout->inter_latency_ns);
        if (layout->inter_bytes_per_ns > 0.0)
            inter_ns = inter_bytes / layout->inter_bytes_per_ns;
    }
    return latency_ns + llround(MAX(intra_ns, inter_ns));
}
