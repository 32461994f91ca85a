/* SPDX-License-Identifier: MIT
 * sim-cost-matmul.c: matrix products in the operator cost model. A product of M rows by a
 * K x N weight runs forward as (M, N, K), its input gradient as (M, K, N) in B and its weight
 * gradient as (K, N, M) in W, one operator each; @count of them (an MoE layer's local experts)
 * at the device time of one grouped product and, for the host, one operator: Transformer
 * Engine's GroupedLinear (which Megatron-Core's TEGroupedMLP runs the experts with) issues the
 * experts' GEMMs from one call (general_grouped_gemm, a C++ loop of cuBLAS launches;
 * NVIDIA/TransformerEngine transformer_engine/pytorch/module/grouped_linear.py at 42d2274,
 * 2025-11) while the host keeps its lead (a synced MoE forward launches them one by one:
 * sim-cost-block.c). An fp8 product also quantises its input in F and its output's gradient
 * in B (TE's quantize / split_quantize), memory-bound: 2 bytes read and 2 written per element
 * (the row- and column-wise fp8 copies the forward and the weight gradient read), one
 * operator each.
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
    if (slice->fp8) { /* the quantisations: 2 bytes read, 2 written per element */
        sim_cost_ops_add_forward(ops, sim_cost_device_memory_ns(hw, count * M * K * 4.0), 1.0, 0.0);
        ops->gpu_ns[SIM_COST_PASS_B] += sim_cost_device_memory_ns(hw, count * M * N * 4.0);
        ops->kernels[SIM_COST_PASS_B] += 1.0;
    }
}
