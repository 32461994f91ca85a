/* SPDX-License-Identifier: MIT
 * sim-layout.c: node placement, ring collectives and Korthikanti et al.'s activation and
 * recomputation formulas for the analytic cost model (sim-layout.h).
 */
#include "sim-layout.h"

#include <math.h>

#include "pp-checked.h"
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
        .collective_ns = MAX(hw->collective_ns, 0),
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

double sim_layout_context_bytes_per_ns(const SimLayout *layout) {
    const int64_t G = layout->gpus_per_node;
    const double  in_node = (double)MAX(MIN((int64_t)layout->context, G / layout->tensor), 1);
    const double  nics = (double)MIN((int64_t)layout->nics_per_node, G);
    const double  share = MAX(nics * in_node / (double)G, 1.0) * layout->inter_bytes_per_ns;
    return layout->intra_bytes_per_ns > 0.0 ? MIN(share, layout->intra_bytes_per_ns) : share;
}

int64_t sim_layout_group_nodes(const SimLayout *layout, int32_t ranks, int64_t stride) {
    PP_ASSERT(ranks >= 1 && stride >= 1);
    const int64_t G = layout->gpus_per_node, span = ranks * stride;
    if (ranks == 1 || (span <= G && G % span == 0))
        return 1;
    if (span <= G) /* not tiling the node: some groups straddle two */
        return 2;
    const int64_t per_node = MAX(G / stride, 1);
    return (ranks + per_node - 1) / per_node;
}

int64_t sim_layout_ring_ns(const SimLayout *layout, SimLayoutRing kind, int32_t ranks,
                           int64_t nodes, double bytes, double bytes_per_ns) {
    PP_ASSERT(ranks >= 1 && nodes >= 1 && nodes <= ranks && bytes >= 0.0);
    if (ranks == 1)
        return 0;
    const gboolean allreduce = kind == SIM_LAYOUT_RING_ALLREDUCE;
    const double   collectives = kind == SIM_LAYOUT_RING_PAIR ? 2.0 : 1.0;
    const double   steps = (kind == SIM_LAYOUT_RING_GATHER ? 1.0 : 2.0) * (ranks - 1);
    const double   inter = nodes == 1  ? 0.0
                           : allreduce ? MIN(2.0 * (double)nodes, steps)
                                       : collectives * (double)(nodes - 1);
    double         latency_ns = collectives * (double)layout->collective_ns +
                        inter * (double)layout->inter_latency_ns +
                        (steps - inter) * (double)layout->intra_latency_ns;
    if (allreduce && nodes > 1)
        latency_ns *= SIM_LAYOUT_RING_PLATEAU;
    const double ns =
        latency_ns + (bytes_per_ns > 0.0 ? steps * bytes / ranks / bytes_per_ns : 0.0);
    return ns < (double)PP_CHECKED_MAX ? llround(ns) : PP_CHECKED_MAX; /* past the clock */
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
    return layout->collective_ns + latency_ns + llround(MAX(intra_ns, inter_ns));
}
