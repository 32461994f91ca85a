/* SPDX-License-Identifier: MIT
 * sim-cost-matmul.c: matrix products in the operator cost model. A product of M rows by a
 * K x N weight runs forward as (M, N, K), its input gradient as (M, K, N) in B and its weight
 * gradient as (K, N, M) in W, one kernel each; @count of them (an MoE layer's local experts)
 * as one grouped kernel.
 */
#include "sim-cost-ops.h"

void sim_cost_ops_matmul(SimCostOps *ops, const SimCostSlice *slice, double M, double N, double K,
                         double count) {
    const PpHardwareParams *hw = slice->hw;
    const double            x = slice->speedup;
    const double            flops = 2.0 * count * M * N * K;
    if (hw == NULL) {
        sim_cost_ops_add_forward(ops, 0.0, 1.0, flops);
        return;
    }
    sim_cost_ops_add_forward(ops, sim_cost_device_matmul_ns(hw, count, M, N, K, x), 1.0, flops);
    ops->gpu_ns[SIM_COST_PASS_B] += sim_cost_device_matmul_ns(hw, count, M, K, N, x);
    ops->gpu_ns[SIM_COST_PASS_W] += sim_cost_device_matmul_ns(hw, count, K, N, M, x);
    ops->kernels[SIM_COST_PASS_B] += 1.0;
    ops->kernels[SIM_COST_PASS_W] += 1.0;
}
