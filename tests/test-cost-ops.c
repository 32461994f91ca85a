/* SPDX-License-Identifier: MIT
 * test-cost-ops.c: the operator cost model (sim/cost/, hardware.cost_model = operators) in
 * closed form: a matrix product's time by its shape (the ceiling, tile waves, a short
 * reduction), a GPT block's forward, input-gradient and weight-gradient passes from its
 * operators, the host floor of launch_us per operator, recomputation, the tensor and
 * sequence splits, fp8's quantisations, the MoE forward the all-to-all dispatcher splits at
 * its host sync, the stage times the simulator builds from them, and the keys' errors.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "sim-cost-ops.h"
#include "sim-cost.h"

/* 2 GPT layers of h 1024 (16 heads of 64), 4 sequences of 1024 tokens per micro-batch, flash
 * attention; the matmul ceiling 0.5 of 100 TFLOP/s without shape terms, 1000 GB/s. */
static const char ops_text[] = "[model]\nlayers = 2\nhidden = 1024\nheads = 16\nseq_len = 1024\n"
                               "vocab = 1024\nflash_attention = true\n"
                               "[hardware]\npeak_tflops = 100\nmemory_gib = 80\n"
                               "mem_bw_gbps = 1000\nlink_gbps = 100\nlink_latency_us = 1\n"
                               "kernel_eff_max = 0.5\nkernel_eff_half_tokens = 0\n"
                               "kernel_eff_half_hidden = 0\ncost_model = operators\n"
                               "[pipeline]\nschedule = 1f1b\nstages = 1\nmicrobatches = 1\n"
                               "microbatch_size = 4\n";

static PpScenario *load(const char *const *overrides) {
    g_autoptr(GError) err = NULL;
    PpScenario *sc = pp_scenario_load_data(ops_text, "ops.ini", overrides, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    return sc;
}

/* The scenario with @overrides, and its dense block's operators in @ops. */
static PpScenario *load_block(const char *const *overrides, SimCostOps *ops) {
    PpScenario   *sc = load(overrides);
    PpMemoryShape shape;
    pp_scenario_memory_shape(sc, &shape);
    sim_cost_ops_block(sc, &shape, FALSE, FALSE, ops);
    return sc;
}

/* ns of @flops at the 0.5 x 100 TFLOP/s ceiling */
static double at_ceiling_ns(double flops) {
    return flops / 50e12 * 1e9;
}

START_TEST(test_cost_ops_matmul_shape) {
    g_autoptr(PpScenario) sc = load(NULL);
    PpHardwareParams hw = sc->hardware;
    const double     n = 1024.0, flops = 2.0 * n * n * n;
    ck_assert_double_eq_tol(sim_cost_device_matmul_ns(&hw, 1, n, n, n, 1.0), at_ceiling_ns(flops),
                            1e-6);
    /* 8 x 8 tiles on 108 multiprocessors: one wave, 64 of 108 busy */
    hw.sms = 108;
    ck_assert_double_eq_tol(sim_cost_device_matmul_ns(&hw, 1, n, n, n, 1.0),
                            at_ceiling_ns(flops) * 108.0 / 64.0, 1e-6);
    /* 27 such products batched: 1728 tiles, 16 full waves */
    ck_assert_double_eq_tol(sim_cost_device_matmul_ns(&hw, 27, n, n, n, 1.0),
                            at_ceiling_ns(27 * flops), 1e-6);
    /* a reduction of K = kernel_eff_half_hidden runs at half the rate; a 64-wide output pads
     * its tile to 128 */
    hw.sms = 0;
    hw.kernel_eff_half_hidden = n;
    ck_assert_double_eq_tol(sim_cost_device_matmul_ns(&hw, 1, n, n, n, 1.0),
                            2.0 * at_ceiling_ns(flops), 1e-6);
    hw.kernel_eff_half_hidden = 0.0;
    ck_assert_double_eq_tol(sim_cost_device_matmul_ns(&hw, 1, n, 64, n, 1.0),
                            2.0 * at_ceiling_ns(2.0 * n * 64 * n), 1e-6);
    /* fp8's speedup divides the time */
    ck_assert_double_eq_tol(sim_cost_device_matmul_ns(&hw, 1, n, n, n, 2.0),
                            at_ceiling_ns(flops) / 2.0, 1e-6);
}
END_TEST

/* The block's four products (QKV 3h, projection h, FFN 4h and back) over N tokens. */
static double block_matmul_ns(double N, double h, double T) {
    return at_ceiling_ns(2.0 * N * h * h * (3.0 + 1.0 + 4.0 + 4.0) / T);
}

START_TEST(test_cost_ops_block_passes) {
    SimCostOps ops;
    g_autoptr(PpScenario) sc = load_block(NULL, &ops);
    const double N = 4096.0, h = 1024.0, s = 1024.0;
    /* memory-bound: two norms (4 bytes per element forward, 6 backward), two residual adds (7,
     * 5) over N h, gelu (4, 6) over N 4h, at 0.8 x 1000 GB/s */
    const double mem_f = (N * h * (4 + 4 + 7 + 7) + N * 4 * h * 4) / 800e9 * 1e9;
    const double mem_b = (N * h * (6 + 6 + 5 + 5) + N * 4 * h * 6) / 800e9 * 1e9;
    /* flash: 2 b a s^2 (2d) FLOPs at 0.9 (forward) and 0.75 (backward, twice the FLOPs) of
     * the ceiling times s / (s + 256) */
    const double attn = 2.0 * 4 * 16 * s * s * 128, keys = s / (s + 256.0);
    const double flash_f = attn / (50e12 * 0.9 * keys) * 1e9;
    const double flash_b = 2.0 * attn / (50e12 * 0.75 * keys) * 1e9;
    const double mm = block_matmul_ns(N, h, 1.0);
    ck_assert_double_eq_tol(ops.gpu_ns[SIM_COST_PASS_F], mm + flash_f + mem_f, 1e-3);
    ck_assert_double_eq_tol(ops.gpu_ns[SIM_COST_PASS_B], mm + flash_b + mem_b, 1e-3);
    /* W: the four weight-gradient products alone */
    ck_assert_double_eq_tol(ops.gpu_ns[SIM_COST_PASS_W], mm, 1e-3);
    ck_assert_double_eq(ops.kernels[SIM_COST_PASS_F], 10);
    ck_assert_double_eq(ops.kernels[SIM_COST_PASS_B], 11);
    ck_assert_double_eq(ops.kernels[SIM_COST_PASS_W], 4);
    /* full recomputation reruns the forward inside B; Megatron's core_attn checkpoint reruns
     * the fused kernel's forward too */
    const PpHardwareParams *hw = &sc->hardware;
    ck_assert_double_eq_tol(sim_cost_ops_pass_ns(&ops, hw, SIM_COST_PASS_B, SIM_COST_RERUN_ALL),
                            ops.gpu_ns[SIM_COST_PASS_B] + ops.gpu_ns[SIM_COST_PASS_F], 1e-6);
    ck_assert_double_eq_tol(
        sim_cost_ops_pass_ns(&ops, hw, SIM_COST_PASS_B, PP_RECOMPUTE_MODULE_CORE_ATTN),
        ops.gpu_ns[SIM_COST_PASS_B] + flash_f, 1e-3);
}
END_TEST

START_TEST(test_cost_ops_unfused_selective) {
    const char *ov[] = {"model.flash_attention=false", NULL};
    SimCostOps  ops;
    g_autoptr(PpScenario) sc = load_block(ov, &ops);
    /* the core: scores and weighted sum (one batched kernel each, 64 heads x sequences), the
     * softmax (4 bytes per score) and the dropout (5) */
    const double s = 1024.0, batch = 64.0, scores = batch * s * s;
    const double products = at_ceiling_ns(2.0 * batch * s * s * 64); /* each; the weighted
                                                                        sum's 64-wide output
                                                                        pads to 128: twice */
    const double core = 3.0 * products + scores * 9.0 / 800e9 * 1e9;
    ck_assert_double_eq_tol(ops.rerun_gpu_ns[0], core, 1e-3);
    ck_assert_double_eq(ops.rerun_kernels[0], 4);
    ck_assert_double_eq_tol(
        sim_cost_ops_pass_ns(&ops, &sc->hardware, SIM_COST_PASS_B, PP_RECOMPUTE_MODULE_CORE_ATTN),
        ops.gpu_ns[SIM_COST_PASS_B] + core, 1e-3);
}
END_TEST

START_TEST(test_cost_ops_launch_floor) {
    const char *ov[] = {"hardware.launch_us=1000", NULL};
    SimCostOps  ops;
    g_autoptr(PpScenario) sc = load_block(ov, &ops);
    /* 1 ms per operator exceeds every operator's device time */
    const PpHardwareParams *hw = &sc->hardware;
    ck_assert_double_eq(sim_cost_ops_pass_ns(&ops, hw, SIM_COST_PASS_F, 0), 10e6);
    ck_assert_double_eq(sim_cost_ops_pass_ns(&ops, hw, SIM_COST_PASS_B, SIM_COST_RERUN_ALL), 21e6);
    ck_assert_double_eq(sim_cost_ops_pass_ns(&ops, hw, SIM_COST_PASS_W, 0), 4e6);
}
END_TEST

START_TEST(test_cost_ops_tensor_split) {
    const char *ov[] = {"parallel.tensor=2", NULL};
    const char *sp_ov[] = {"parallel.tensor=2", "parallel.sequence_parallel=true", NULL};
    SimCostOps  a, b, c;
    g_autoptr(PpScenario) one = load_block(NULL, &a);
    g_autoptr(PpScenario) two = load_block(ov, &b);
    g_autoptr(PpScenario) sp = load_block(sp_ov, &c);
    /* T = 2 halves the products (W alone is them); the h-wide memory-bound operators stay
     * whole on each GPU unless sequence parallelism splits them too */
    ck_assert_double_eq_tol(b.gpu_ns[SIM_COST_PASS_W], a.gpu_ns[SIM_COST_PASS_W] / 2.0, 1e-6);
    const double N = 4096.0, h = 1024.0;
    const double norms_f = N * h * (4 + 4 + 7 + 7) / 800e9 * 1e9;
    ck_assert_double_eq_tol(b.gpu_ns[SIM_COST_PASS_F] - c.gpu_ns[SIM_COST_PASS_F], norms_f / 2.0,
                            1e-3);
    ck_assert(a.gpu_ns[SIM_COST_PASS_F] / 2.0 < b.gpu_ns[SIM_COST_PASS_F]);
}
END_TEST

START_TEST(test_cost_ops_stage_times) {
    const char *ov[] = {"model.recompute=full", NULL};
    g_autoptr(PpScenario) sc = load(ov);
    g_autoptr(GError) err = NULL;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
    PpMemoryShape shape;
    pp_scenario_memory_shape(sc, &shape);
    SimCostOps block, head;
    sim_cost_ops_block(sc, &shape, FALSE, FALSE, &block);
    sim_cost_ops_head(sc, &head);
    /* one stage: both layers and the head; B reruns the layers' forward, never the head's */
    ck_assert_int_eq(cost->f_ns[0],
                     llround(2.0 * block.gpu_ns[SIM_COST_PASS_F] + head.gpu_ns[SIM_COST_PASS_F]));
    ck_assert_int_eq(cost->b_ns[0],
                     llround(2.0 * (block.gpu_ns[SIM_COST_PASS_B] + block.gpu_ns[SIM_COST_PASS_F]) +
                             head.gpu_ns[SIM_COST_PASS_B]));
    ck_assert_int_eq(cost->w_ns[0],
                     llround(2.0 * block.gpu_ns[SIM_COST_PASS_W] + head.gpu_ns[SIM_COST_PASS_W]));
}
END_TEST

/* fp8 products (peak_fp8_tflops 200: twice the rate) quantise their input in F and their
 * output's gradient in B: 4 bytes per element at 0.8 x 1000 GB/s, one operator each. */
START_TEST(test_cost_ops_fp8_quantise) {
    const char *ov[] = {"model.precision=fp8", "hardware.peak_fp8_tflops=200", NULL};
    SimCostOps  bf16, fp8;
    g_autoptr(PpScenario) sc_bf16 = load_block(NULL, &bf16);
    g_autoptr(PpScenario) sc = load_block(ov, &fp8);
    const double N = 4096.0, h = 1024.0, mm = block_matmul_ns(N, h, 1.0);
    /* inputs: QKV and FC1 h wide, the projection h, FC2 4h; gradients: 3h, h, 4h, h */
    const double q_f = N * (h + h + h + 4 * h) * 4.0 / 800e9 * 1e9;
    const double q_b = N * (3 * h + h + 4 * h + h) * 4.0 / 800e9 * 1e9;
    ck_assert_double_eq_tol(fp8.gpu_ns[SIM_COST_PASS_F],
                            bf16.gpu_ns[SIM_COST_PASS_F] - mm / 2.0 + q_f, 1e-3);
    ck_assert_double_eq_tol(fp8.gpu_ns[SIM_COST_PASS_B],
                            bf16.gpu_ns[SIM_COST_PASS_B] - mm / 2.0 + q_b, 1e-3);
    ck_assert_double_eq_tol(fp8.gpu_ns[SIM_COST_PASS_W], mm / 2.0, 1e-3);
    ck_assert_double_eq(fp8.kernels[SIM_COST_PASS_F], 14);
    ck_assert_double_eq(fp8.kernels[SIM_COST_PASS_B], 15);
    ck_assert_double_eq(fp8.kernels[SIM_COST_PASS_W], 4);
}
END_TEST

/* An MoE block of 8 local experts (2 per token) with 1 ms per operator launched, so that the
 * host bounds every stretch. Its forward launches the norm, QKV, attention, projection,
 * residual add, norm, router and permutation (8 operators), then the experts' two products
 * and one activation, the unpermutation and the residual add (5): 13 ms with the fused
 * dispatchers or a capacity factor. Megatron's all-to-all dispatcher dropless waits for the
 * token counts after the permutation and issues the rest with no lead, each expert's two
 * products one by one: 8 + (5 + 2 x 7) = 27 ms; with fp8 every product but the router's
 * (bf16) also quantises its input, and after the sync each expert its own: (8 + 2) + (5 + 2 +
 * 4 x 7) = 45 ms. Full recomputation reruns the synced forward inside B. With
 * no launch cost the two stretches add up to the device time. */
static SimCostOps moe_block(const char *dispatch, const char *extra, const char *launch) {
    const char *ov[] = {"model.experts=8",
                        "model.experts_per_token=2",
                        "hardware.peak_fp8_tflops=200",
                        dispatch,
                        launch,
                        extra,
                        NULL};
    g_autoptr(PpScenario) sc = load(ov);
    PpMemoryShape shape;
    pp_scenario_memory_shape(sc, &shape);
    SimCostOps ops;
    sim_cost_ops_block(sc, &shape, TRUE, FALSE, &ops);
    return ops;
}

START_TEST(test_cost_ops_moe_sync) {
    const char *ms = "hardware.launch_us=1000", *none = "model.layers=2";
    g_autoptr(PpScenario) sc = load(NULL);
    PpHardwareParams hw = sc->hardware;
    hw.launch_ns = 1000000;
    const SimCostOps fused = moe_block("parallel.moe_dispatcher=hybridep", none, ms);
    const SimCostOps capacity =
        moe_block("parallel.moe_dispatcher=alltoall", "parallel.moe_capacity_factor=1", ms);
    const SimCostOps synced = moe_block("parallel.moe_dispatcher=alltoall", none, ms);
    const SimCostOps fp8 = moe_block("parallel.moe_dispatcher=alltoall", "model.precision=fp8", ms);
    ck_assert_double_eq(sim_cost_ops_pass_ns(&fused, &hw, SIM_COST_PASS_F, 0), 13e6);
    ck_assert_double_eq(sim_cost_ops_pass_ns(&capacity, &hw, SIM_COST_PASS_F, 0), 13e6);
    ck_assert_double_eq(synced.synced_kernels, 19);
    ck_assert_double_eq(sim_cost_ops_pass_ns(&synced, &hw, SIM_COST_PASS_F, 0), 27e6);
    ck_assert_double_eq(sim_cost_ops_pass_ns(&fp8, &hw, SIM_COST_PASS_F, 0), 45e6);
    /* the backward needs no counts: the same launches with either dispatcher */
    const double b = synced.kernels[SIM_COST_PASS_B] * 1e6;
    ck_assert_double_eq(fused.kernels[SIM_COST_PASS_B], synced.kernels[SIM_COST_PASS_B]);
    ck_assert_double_eq(sim_cost_ops_pass_ns(&synced, &hw, SIM_COST_PASS_B, 0), b);
    ck_assert_double_eq(sim_cost_ops_pass_ns(&synced, &hw, SIM_COST_PASS_B, SIM_COST_RERUN_ALL),
                        27e6 + b);
    /* without launch cost the stretches sum to the device time */
    hw.launch_ns = 0;
    ck_assert_double_eq_tol(sim_cost_ops_pass_ns(&synced, &hw, SIM_COST_PASS_F, 0),
                            synced.gpu_ns[SIM_COST_PASS_F], 1e-6);
    ck_assert_double_eq_tol(synced.gpu_ns[SIM_COST_PASS_F], fused.gpu_ns[SIM_COST_PASS_F], 1e-6);
}
END_TEST

START_TEST(test_cost_ops_keys_bad) {
    const char        *model_ov[] = {"hardware.cost_model=fast", NULL};
    const char        *launch_ov[] = {"hardware.launch_us=-1", NULL};
    const char        *sms_ov[] = {"hardware.sms=-4", NULL};
    const char *const *cases[] = {model_ov, launch_ov, sms_ov};
    const char        *needles[] = {"[hardware] cost_model = 'fast'", "[hardware] launch_us = '-1'",
                                    "[hardware] sms = '-4'"};
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(ops_text, "ops.ini", cases[i], &err);
        ck_assert_msg(sc == NULL, "case %zu loaded", i);
        ck_assert(g_error_matches(err, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
        ck_assert_msg(strstr(err->message, needles[i]) != NULL, "%s", err->message);
    }
    /* a launch time that overflows the clock is refused by the cost model, naming the key */
    const char *huge_ov[] = {"hardware.launch_us=1e12", "model.layers=1024", NULL};
    g_autoptr(PpScenario) sc = load(huge_ov);
    g_autoptr(GError) err = NULL;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert(cost == NULL);
    ck_assert_msg(strstr(err->message, "hardware.launch_us") != NULL, "%s", err->message);
}
END_TEST

static Suite *cost_ops_suite(void) {
    Suite *s = suite_create("cost-ops");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cost_ops_matmul_shape);
    tcase_add_test(tc, test_cost_ops_block_passes);
    tcase_add_test(tc, test_cost_ops_unfused_selective);
    tcase_add_test(tc, test_cost_ops_launch_floor);
    tcase_add_test(tc, test_cost_ops_tensor_split);
    tcase_add_test(tc, test_cost_ops_stage_times);
    tcase_add_test(tc, test_cost_ops_fp8_quantise);
    tcase_add_test(tc, test_cost_ops_moe_sync);
    tcase_add_test(tc, test_cost_ops_keys_bad);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(cost_ops_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
