/* SPDX-License-Identifier: MIT
 * sim-cost-tally.c: adding one operator's forward to a list's totals (SimCostOps): to the
 * forward pass, to the recomputation module the operator belongs to while a block is built, and
 * to per-operator checkpointing's rerun share (docs/cost-model.md, The operator cost model).
 * The operator families (matmul, attention, elementwise) call it; the block sets the module.
 */
#include "sim-cost-ops.h"

void sim_cost_ops_add_forward(SimCostOps *ops, double gpu_ns, double kernels, double flops) {
    ops->gpu_ns[SIM_COST_PASS_F] += gpu_ns;
    ops->kernels[SIM_COST_PASS_F] += kernels;
    ops->matmul_flops += flops;
    if (ops->module >= 0) {
        ops->rerun_gpu_ns[ops->module] += gpu_ns;
        ops->rerun_kernels[ops->module] += kernels;
        ops->rerun_flops[ops->module] += flops;
    }
    ops->rerun_gpu_ns[SIM_COST_RERUN_OP] += ops->op_rerun * gpu_ns;
    ops->rerun_kernels[SIM_COST_RERUN_OP] += ops->op_rerun * kernels;
    ops->rerun_flops[SIM_COST_RERUN_OP] += ops->op_rerun * flops;
}
