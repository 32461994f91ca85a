/* SPDX-License-Identifier: MIT
 * sim-moe.c: the mixture-of-experts terms of the analytic cost model (sim-moe.h).
 */
#include "sim-moe.h"

#include <math.h>

#include "pp-error.h"

double sim_moe_expert_width(double hidden, double expert_ffn_hidden) {
    PP_ASSERT(hidden > 0.0 && expert_ffn_hidden > 0.0);
    return 2.0 * hidden * expert_ffn_hidden / (hidden + expert_ffn_hidden);
}

int64_t sim_moe_a2a_exposed_ns(int64_t a2a_ns, double alltoall_eff, double hiding_ns,
                               gboolean overlap) {
    PP_ASSERT(a2a_ns >= 0 && alltoall_eff > 0.0 && alltoall_eff <= 1.0 && hiding_ns >= 0.0);
    if (!overlap)
        return a2a_ns;
    return llround((double)a2a_ns - MIN(alltoall_eff * (double)a2a_ns, hiding_ns));
}

/* The chance that none of a token's @k distinct experts, drawn evenly from @e, is one of the
 * @m on a given node: C(e - m, k) / C(e, k) = prod_{i < k} (e - m - i) / (e - i). */
static double sim_moe_node_missed(double e, double m, int64_t k) {
    double p = 1.0;
    for (int64_t i = 0; i < k && p > 0.0; i++)
        p *= MAX(e - m - (double)i, 0.0) / (e - (double)i);
    return p;
}

void sim_moe_a2a_bytes(const PpScenario *scenario, int64_t in_node, double bytes, double *intra,
                       double *inter) {
    const double ep = scenario->parallel.expert;
    PP_ASSERT(in_node >= 1 && in_node <= scenario->parallel.expert && bytes >= 0.0);
    if (pp_scenario_moe_dispatcher(scenario) == PP_MOE_DISPATCHER_ALLTOALL ||
        in_node == scenario->parallel.expert) {
        *intra = bytes * (double)(in_node - 1) / ep;
        *inter = bytes * (ep - (double)in_node) / ep;
        return;
    }
    const double  nodes = ep / (double)in_node, e = scenario->model.experts;
    const int64_t k = scenario->model.experts_per_token;
    const double  reached = (nodes - 1.0) * (1.0 - sim_moe_node_missed(e, e / nodes, k));
    *intra = bytes * (double)(in_node - 1) / (double)in_node;
    *inter = bytes / (double)k * reached;
}

gboolean sim_moe_dispatcher_syncs(const PpScenario *scenario) {
    PP_ASSERT(scenario->model.experts > 0);
    return pp_scenario_moe_dispatcher(scenario) == PP_MOE_DISPATCHER_ALLTOALL &&
           !(scenario->parallel.moe_capacity_factor > 0.0);
}
