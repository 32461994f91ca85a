/* SPDX-License-Identifier: MIT
 * sim-cost-elementwise.c: memory-bound operators in the operator cost model (norms,
 * activations, residual adds and dropout, the cross-entropy, MoE permutations): bound by the
 * bytes they move at the device's memory bandwidth, one kernel per pass each.
 */
#include "sim-cost-ops.h"

void sim_cost_ops_elementwise(SimCostOps *ops, const SimCostSlice *slice, double elements,
                              double f_bytes, double b_bytes) {
    if (slice->hw == NULL) {
        sim_cost_ops_add_forward(ops, 0.0, 1.0, 0.0);
        return;
    }
    sim_cost_ops_add_forward(ops, sim_cost_device_memory_ns(slice->hw, elements * f_bytes), 1.0,
                             0.0);
    ops->gpu_ns[SIM_COST_PASS_B] += sim_cost_device_memory_ns(slice->hw, elements * b_bytes);
    ops->kernels[SIM_COST_PASS_B] += 1.0;
}
