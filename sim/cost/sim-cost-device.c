/* SPDX-License-Identifier: MIT
 * sim-cost-device.c: the device's efficiency curves of the operator cost model, all in one
 * place (docs/cost-model.md, The operator cost model). A matrix product reaches
 * hardware.kernel_eff_max of the peak (the achievable matmul ceiling) times what its shape
 * loses: output tiles of SIM_COST_TILE x SIM_COST_TILE padded at the edges, the last wave of
 * tiles over hardware.sms multiprocessors partly idle, and short reductions K / (K +
 * kernel_eff_half_hidden) and few rows M / (M + kernel_eff_half_tokens). Fused attention runs
 * at a fixed share of that ceiling per pass, lower for short sequences; memory-bound operators
 * at SIM_COST_MEMORY_EFF of the memory bandwidth.
 */
#include <math.h>

#include "pp-error.h"
#include "sim-cost-ops.h"

/* Output tile of one thread block in cuBLAS's large bf16 kernels (128 x 128 on Ampere and
 * Hopper). */
#define SIM_COST_TILE 128.0
/* Share of the datasheet memory bandwidth a streaming kernel reaches (STREAM-like copies on
 * A100 and H100 reach 80-90%). */
#define SIM_COST_MEMORY_EFF 0.8
/* FlashAttention-2's forward reaches ~73% and its backward ~63% of A100's peak at long
 * sequences (Dao 2023, Figure 4 and 5) where cuBLAS reaches ~80%: shares of the matmul
 * ceiling, and half of that rate at SIM_COST_FLASH_HALF_KEYS keys per query. */
#define SIM_COST_FLASH_FWD_SHARE 0.9
#define SIM_COST_FLASH_BWD_SHARE 0.75
#define SIM_COST_FLASH_HALF_KEYS 256.0

/* The share of the last wave's multiprocessors kept busy by @tiles tiles (1 without SMs). */
static double sim_cost_device_wave(double tiles, int32_t sms) {
    if (sms <= 0)
        return 1.0;
    const double waves = ceil(tiles / sms);
    return tiles / (waves * sms);
}

double sim_cost_device_matmul_ns(const PpHardwareParams *hw, double batch, double M, double N,
                                 double K, double speedup) {
    PP_ASSERT(batch > 0.0 && M > 0.0 && N > 0.0 && K > 0.0 && speedup > 0.0);
    const double tiles_m = ceil(M / SIM_COST_TILE), tiles_n = ceil(N / SIM_COST_TILE);
    const double padding = (M / (tiles_m * SIM_COST_TILE)) * (N / (tiles_n * SIM_COST_TILE));
    const double eff = hw->kernel_eff_max * padding *
                       sim_cost_device_wave(batch * tiles_m * tiles_n, hw->sms) * K /
                       (K + hw->kernel_eff_half_hidden) * M / (M + hw->kernel_eff_half_tokens);
    return 2.0 * batch * M * N * K / (hw->peak_flops * speedup * eff) * 1e9;
}

double sim_cost_device_flash_ns(const PpHardwareParams *hw, double flops, double keys,
                                SimCostPass pass) {
    PP_ASSERT(keys > 0.0 && pass != SIM_COST_PASS_W);
    const double share =
        pass == SIM_COST_PASS_F ? SIM_COST_FLASH_FWD_SHARE : SIM_COST_FLASH_BWD_SHARE;
    const double eff = hw->kernel_eff_max * share * keys / (keys + SIM_COST_FLASH_HALF_KEYS);
    return flops / (hw->peak_flops * eff) * 1e9;
}

double sim_cost_device_memory_ns(const PpHardwareParams *hw, double bytes) {
    return bytes / (hw->mem_bw_bytes_per_s * SIM_COST_MEMORY_EFF) * 1e9;
}
