/* SPDX-License-Identifier: MIT
 * sim-cost-attention.c: the attention core in the operator cost model. With flash attention
 * one fused kernel per pass runs the 2 b s_q s (d_qk + d_v) FLOPs per head (half with
 * attention_flops = causal) at the device's flash rate, the backward twice the forward's.
 * Without it (Megatron's unfused path) two batched products (scores Q K^T, then the weighted
 * sum with V, all heads and sequences in one batched kernel) and between them the fused
 * scale-mask-softmax (2 bytes read and written per score) and the attention dropout (2 read, 2
 * written, a 1-byte mask); the backward reruns both products twice and reads the saved scores and
 * masks back.
 */
#include "sim-cost-ops.h"

void sim_cost_ops_attention(SimCostOps *ops, const SimCostSlice *slice, double heads, double d_qk,
                            double d_v) {
    const PpHardwareParams *hw = slice->hw;
    const double            b = slice->batch, sq = slice->queries, sk = slice->keys;
    if (hw == NULL) { /* its FLOPs are the attention's, not a matrix product's */
        sim_cost_ops_add_forward(ops, 0.0, slice->flash ? 1.0 : 4.0, 0.0);
        return;
    }
    if (slice->flash) {
        const double flops = 2.0 * b * heads * sq * sk * (d_qk + d_v) * (slice->causal ? 0.5 : 1.0);
        sim_cost_ops_add_forward(ops, sim_cost_device_flash_ns(hw, flops, sk, SIM_COST_PASS_F), 1.0,
                                 0.0);
        ops->gpu_ns[SIM_COST_PASS_B] +=
            sim_cost_device_flash_ns(hw, 2.0 * flops, sk, SIM_COST_PASS_B);
        ops->kernels[SIM_COST_PASS_B] += 2.0; /* the dO . O preprocessing and the kernel */
        return;
    }
    const double batch = b * heads; /* one product per head and sequence */
    const double scores = batch * sq * sk;
    const double f_ns = sim_cost_device_matmul_ns(hw, batch, sq, sk, d_qk, 1.0) +
                        sim_cost_device_matmul_ns(hw, batch, sq, d_v, sk, 1.0) +
                        sim_cost_device_memory_ns(hw, scores * (4.0 + 5.0));
    const double b_ns = sim_cost_device_matmul_ns(hw, batch, sq, d_qk, sk, 1.0) +
                        sim_cost_device_matmul_ns(hw, batch, sk, d_qk, sq, 1.0) +
                        sim_cost_device_matmul_ns(hw, batch, sq, sk, d_v, 1.0) +
                        sim_cost_device_matmul_ns(hw, batch, sk, d_v, sq, 1.0) +
                        sim_cost_device_memory_ns(hw, scores * (6.0 + 5.0));
    sim_cost_ops_add_forward(ops, f_ns, 4.0, 0.0);
    ops->gpu_ns[SIM_COST_PASS_B] += b_ns;
    ops->kernels[SIM_COST_PASS_B] += 6.0;
}
