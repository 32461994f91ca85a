/* SPDX-License-Identifier: MIT
 * sim-moe.c: the mixture-of-experts terms of the analytic cost model (sim-moe.h).
 */
#include "sim-moe.h"

#include <math.h>

#include "pp-checked.h"
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

gboolean sim_moe_host_stall_ns(const PpScenario *scenario, int64_t *ns) {
    const PpModelParams *m = &scenario->model;
    PP_ASSERT(m->experts > 0 && scenario->parallel.expert >= 1);
    if (pp_scenario_moe_dispatcher(scenario) != PP_MOE_DISPATCHER_ALLTOALL) {
        *ns = 0;
        return TRUE;
    }
    /* E / EP is whole: checked when the scenario loads (pp-scenario-blocks.c) */
    return pp_checked_mul(scenario->hardware.moe_host_ns_per_expert,
                          m->experts / scenario->parallel.expert, ns);
}
