/* SPDX-License-Identifier: MIT
 * test-fsdp.c: fully sharded data parallelism ([parallel] fsdp; docs/cluster.md, "Fully
 * sharded data parallelism") in the simulator's cost model, in closed form: the per-layer
 * all-gathers and reduce-scatters' excess over the layer's compute, the sharded training
 * state with the gather buffers, and no end-of-step all-reduce.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "pp-scenario.h"
#include "sim-cost.h"

/* GPT-2-shaped: 4 layers of h 256 (12h^2 + 13h = 789,760 parameters), s 1024, V 1000, flash
 * attention; kernel efficiency 1 at 100 TFLOP/s; 2 stages x 4 replicas in one node of 8 GPUs
 * joined by 1 GB/s, so the gathers are slower than the layers. bf16 gradients (grad_bytes 2,
 * as Megatron-Bridge's FSDP recipes reduce them); test_fsdp_fp32_grads takes the default 4. */
static const char fsdp_text[] = "[model]\nlayers = 4\nhidden = 256\nheads = 8\nseq_len = 1024\n"
                                "vocab = 1000\nflash_attention = true\n"
                                "[hardware]\npeak_tflops = 100\nmemory_gib = 80\n"
                                "mem_bw_gbps = 1000\nlink_gbps = 1\nlink_latency_us = 1\n"
                                "gpus_per_node = 8\nkernel_eff_max = 1\n"
                                "kernel_eff_half_tokens = 0\n"
                                "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 2\n"
                                "microbatch_size = 1\npartition = even\n"
                                "[parallel]\ndata = 4\nfsdp = true\ngrad_bytes = 2\n";

START_TEST(test_fsdp_cost) {
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(fsdp_text, "fsdp.ini", NULL, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
    const double s = 1024, h = 256, P = 12 * h * h + 13 * h;
    ck_assert_double_eq(P, 789760);
    const double layer_ns = (2 * s * 12 * h * h + 2 * s * s * 2 * h) / 1e14 * 1e9;
    /* a ring all-gather of the layer's 2P bytes over 4 ranks: 3 steps of 1 us + 2P/4 bytes */
    const double  gather_ns = 3 * (1000 + 2 * P / 4 / 1.0);
    const int64_t exposed = llround(gather_ns - layer_ns);
    const int64_t f0 = llround(2 * layer_ns) + 2 * exposed;
    ck_assert_int_le(llabs(cost->f_ns[0] - f0), 1);
    ck_assert_int_le(llabs(cost->b_ns[0] - f0), 1); /* gather again before the backward */
    ck_assert_int_le(llabs(cost->w_ns[0] - f0), 1); /* reduce-scatter after W */
    /* no end-of-step all-reduce: gradients leave layer by layer */
    ck_assert_ptr_null(cost->dp_sync_ns);
    /* stage 0: two layers and the embeddings, every byte of state over 4 (bf16 weights 2 +
     * master 4, gradients 2, moments 8), plus two gathered layers and one layer's gradients
     * in bf16 and the pipeline buffers (a gradient received, an activation sent: 2 x 2sh) */
    const double p0 = 2 * P + 1000 * h + 1024 * h;
    ck_assert_int_eq(cost->buffer_bytes[0], llround(6 * P + 2 * 2 * s * h));
    ck_assert_int_eq(cost->static_bytes[0], llround(p0 * 1.5) + llround(p0 * 0.5) +
                                                llround(p0 * 2) + llround(6 * P + 2 * 2 * s * h));
    /* the same layout without fsdp keeps every byte and all-reduces at the end */
    const char *off[] = {"parallel.fsdp=false", NULL};
    g_autoptr(PpScenario) sc_off = pp_scenario_load_data(fsdp_text, "fsdp.ini", off, &err);
    ck_assert_msg(sc_off != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) plain = sim_cost_new_from_scenario(sc_off, &err);
    ck_assert_msg(plain != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(plain->static_bytes[0],
                     llround(p0 * 6) + llround(p0 * 2) + llround(p0 * 8) + llround(2 * 2 * s * h));
    ck_assert_ptr_nonnull(plain->dp_sync_ns);
    ck_assert_int_le(llabs(plain->f_ns[0] - llround(2 * layer_ns)), 1);
}
END_TEST

/* With fp32 gradients (grad_bytes' default for bf16) the reduce-scatter after W moves 4P
 * bytes instead of 2P, the gathers keep the bf16 2P, and the gradient shards are 4/4 bytes per
 * parameter. */
START_TEST(test_fsdp_fp32_grads) {
    const char *fp32[] = {"parallel.grad_bytes=4", NULL};
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(fsdp_text, "fsdp.ini", fp32, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
    const double  s = 1024, h = 256, P = 12 * h * h + 13 * h;
    const double  layer_ns = (2 * s * 12 * h * h + 2 * s * s * 2 * h) / 1e14 * 1e9;
    const double  gather_ns = 3 * (1000 + 2 * P / 4 / 1.0);
    const double  scatter_ns = 3 * (1000 + 4 * P / 4 / 1.0);
    const int64_t f0 = llround(2 * layer_ns) + 2 * llround(gather_ns - layer_ns);
    const int64_t w0 = llround(2 * layer_ns) + 2 * llround(scatter_ns - layer_ns);
    ck_assert_int_le(llabs(cost->f_ns[0] - f0), 1);
    ck_assert_int_le(llabs(cost->w_ns[0] - w0), 1);
    ck_assert_int_eq(cost->grads_bytes[0], llround((2 * P + 1000 * h + 1024 * h) * 4 / 4));
}
END_TEST

int main(void) {
    Suite *s = suite_create("fsdp");
    TCase *tc = tcase_create("fsdp");
    tcase_add_test(tc, test_fsdp_cost);
    tcase_add_test(tc, test_fsdp_fp32_grads);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
