/* SPDX-License-Identifier: MIT
 * test-context.c: context parallelism ([parallel] context; docs/cluster.md, "Context
 * parallelism") in the simulator's cost model, in closed form: every rank holds s/C tokens
 * (compute, activations and logits / C), ring attention's exposed hops per layer, the
 * all-to-all's (Ulysses) four all-to-alls per pass and its heads check, the layout's
 * GPUs and the seq_len check of causal load balancing.
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "sim-cost-ops.h"
#include "sim-cost.h"

/* 4 layers of h 256 (8 heads of 32), s 1024, flash attention; kernel efficiency 1 at 100
 * TFLOP/s; 2 stages x 2 replicas, nodes of 8 GPUs joined by 100 GB/s. */
static const char cp_text[] = "[model]\nlayers = 4\nhidden = 256\nheads = 8\nseq_len = 1024\n"
                              "vocab = 1000\nflash_attention = true\n"
                              "[hardware]\npeak_tflops = 100\nmemory_gib = 80\n"
                              "mem_bw_gbps = 1000\nlink_gbps = 100\nlink_latency_us = 1\n"
                              "gpus_per_node = 8\ninternode_gbps = 10\n"
                              "internode_latency_us = 5\nkernel_eff_max = 1\n"
                              "kernel_eff_half_tokens = 0\n"
                              "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 2\n"
                              "microbatch_size = 1\npartition = even\n"
                              "[parallel]\ndata = 2\n";

static SimCostModel *cost_for(const char *const *overrides, PpScenario **out) {
    g_autoptr(GError) err = NULL;
    PpScenario *sc = pp_scenario_load_data(cp_text, "cp.ini", overrides, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    SimCostModel *cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
    *out = sc;
    return cost;
}

START_TEST(test_context_ring) {
    const double s = 1024, h = 256, rate = 1e14;
    const double attention = 2 * s * s * (8 * 32 + 8 * 32); /* scores and AV, all counted */
    const double layer = 2 * s * 12 * h * h + attention;    /* 12h^2 matrices */
    const char  *cp4[] = {"parallel.context=4", NULL};
    PpScenario  *sc;
    g_autoptr(SimCostModel) cost = cost_for(cp4, &sc);
    ck_assert_int_eq(pp_scenario_gpus(sc), 2 * 4 * 2);
    ck_assert_int_eq(cost->context_parallel, 4);
    /* the ring of 4 ranks fits a node: each of 3 hops passes K and V of 256 tokens,
     * 256 x 2 x 8 x 32 x 2 bytes, at 100 GB/s after 1 us, against a quarter of this GPU's
     * attention (1/4 of the sequence's) */
    const double  hop = 1000 + 256 * 2 * 8 * 32 * 2 / 100.0;
    const double  step = attention / 4 / rate * 1e9 / 4;
    const int64_t ring_f = llround(3 * (hop - step)), ring_b = llround(3 * (2 * hop - 2 * step));
    const int64_t f0 = llround(2 * layer / 4 / rate * 1e9) + 2 * ring_f;
    ck_assert_int_le(llabs(cost->f_ns[0] - f0), 1);
    ck_assert_int_le(llabs(cost->b_ns[0] - (f0 - 2 * ring_f + 2 * ring_b)), 1);
    ck_assert_int_le(llabs(cost->w_ns[0] - (f0 - 2 * ring_f)), 1);
    /* a link fast enough hides every hop behind the attention: compute / 4 alone */
    const char *fast[] = {"parallel.context=4", "hardware.link_gbps=1e6",
                          "hardware.link_latency_us=0", NULL};
    PpScenario *sc_fast;
    g_autoptr(SimCostModel) hidden = cost_for(fast, &sc_fast);
    ck_assert_int_le(llabs(hidden->f_ns[0] - llround(2 * layer / 4 / rate * 1e9)), 1);
    /* activations per GPU: 1/4 of one rank's without context parallelism */
    PpScenario *sc1;
    g_autoptr(SimCostModel) one = cost_for(NULL, &sc1);
    for (int32_t u = 0; u < 2; u++)
        ck_assert_int_le(llabs(cost->act_bytes[u] * 4 - one->act_bytes[u]), 4);
    /* a ring of 16 ranks (2 nodes) crosses nodes: the inter-node link */
    const char *cp16[] = {"parallel.context=16", NULL};
    PpScenario *sc16;
    g_autoptr(SimCostModel) wide = cost_for(cp16, &sc16);
    const double  hop16 = 5000 + 64 * 2 * 8 * 32 * 2 / 10.0;
    const double  step16 = attention / 16 / rate * 1e9 / 16;
    const int64_t f16 = llround(2 * layer / 16 / rate * 1e9) + 2 * llround(15 * (hop16 - step16));
    ck_assert_int_le(llabs(wide->f_ns[0] - f16), 1);
    pp_scenario_free(sc);
    pp_scenario_free(sc_fast);
    pp_scenario_free(sc1);
    pp_scenario_free(sc16);
}
END_TEST

/* A ring spanning nodes crosses over the NICs its ranks on a node own (rail-optimised:
 * hardware.nics_per_node = 8, 10 GB/s each): 16 ranks on 2 nodes of 8 have 8 NICs, 80 GB/s
 * under the 100 GB/s link; with tensor = 2 each node holds 4 ranks of each of 2 rings, 4
 * NICs each (40 GB/s); with a 50 GB/s link the first is capped at 50; more NICs than GPUs
 * add nothing. Its hops are messages: hardware.collective_us leaves them unchanged, and adds
 * to each of the all-to-all's four per pass. */
START_TEST(test_context_ring_nics) {
    const double s = 1024, h = 256, rate = 1e14;
    const double attention = 2 * s * s * (8 * 32 + 8 * 32);
    const double layer = 2 * s * 12 * h * h + attention;
    const struct {
        const char *ov[5];
        double      tensor, context, bw;
    } cases[] = {
        {{"parallel.context=16", "hardware.nics_per_node=8", NULL}, 1, 16, 80.0},
        {{"parallel.context=16", "hardware.nics_per_node=64", NULL}, 1, 16, 80.0},
        {{"parallel.context=16", "hardware.nics_per_node=8", "hardware.link_gbps=50", NULL},
         1,
         16,
         50.0},
        {{"parallel.context=8", "parallel.tensor=2", "hardware.nics_per_node=8", NULL}, 2, 8, 40.0},
        {{"parallel.context=16", "hardware.nics_per_node=8", "hardware.collective_us=3", NULL},
         1,
         16,
         80.0},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const double T = cases[i].tensor, C = cases[i].context;
        PpScenario  *sc;
        g_autoptr(SimCostModel) cost = cost_for(cases[i].ov, &sc);
        /* K and V of s / C tokens, the heads split T ways */
        const double hop = 5000 + s / C * 2 * 8 * 32 * 2 / T / cases[i].bw;
        const double step = attention / T / C / rate * 1e9 / C;
        /* tensor = 2: 2 all-reduces per layer of b (s / C) h bf16 values in one node,
         * 2 steps of 1 us + half the bytes at 100 GB/s */
        const int64_t tp = T > 1 ? llround(2 * (1000 + s / C * h * 2 / 2 / 100.0)) : 0;
        const int64_t f = llround(2 * layer / T / C / rate * 1e9) +
                          2 * (llround((C - 1) * (hop - step)) + 2 * tp);
        ck_assert_msg(llabs(cost->f_ns[0] - f) <= 1, "case %zu: %" PRId64 " vs %" PRId64, i,
                      cost->f_ns[0], f);
        pp_scenario_free(sc);
    }
    const char *a2a[] = {"parallel.context=4", "parallel.context_comm=a2a", NULL};
    const char *a2a_c[] = {"parallel.context=4", "parallel.context_comm=a2a",
                           "hardware.collective_us=3", NULL};
    PpScenario *sa, *sc;
    g_autoptr(SimCostModel) plain = cost_for(a2a, &sa);
    g_autoptr(SimCostModel) fixed = cost_for(a2a_c, &sc);
    ck_assert_int_eq(fixed->f_ns[0] - plain->f_ns[0], 2 * 4 * 3000);
    ck_assert_int_eq(fixed->b_ns[0] - plain->b_ns[0], 2 * 4 * 3000);
    pp_scenario_free(sa);
    pp_scenario_free(sc);
}
END_TEST

/* parallel.context_comm = a2a (Ulysses): per pass four all-to-alls (q, k, v, output; their
 * gradients in B) of 256 tokens x 8 heads x 32 bf16 values each, 3/4 of them to the other
 * ranks of a group inside a node; all exposed. Across nodes (2 GPUs each) a GPU has 1 peer on
 * its node (1/4 of the bytes) and 2 off it (2/4, at 10 GB/s after 5 us). The operator model's
 * attention core runs all 1024 queries of 8 / 4 heads. */
START_TEST(test_context_a2a) {
    const double s = 1024, h = 256, rate = 1e14;
    const double attention = 2 * s * s * (8 * 32 + 8 * 32);
    const double layer = 2 * s * 12 * h * h + attention;
    const double bytes = 256 * 8 * 32 * 2.0; /* one all-to-all's tensor on this GPU */
    const char  *a2a[] = {"parallel.context=4", "parallel.context_comm=a2a", NULL};
    PpScenario  *sc;
    g_autoptr(SimCostModel) cost = cost_for(a2a, &sc);
    const int64_t one = 1000 + llround(bytes * 3 / 4 / 100.0);
    const int64_t f0 = llround(2 * layer / 4 / rate * 1e9) + 2 * 4 * one;
    ck_assert_int_le(llabs(cost->f_ns[0] - f0), 1);
    ck_assert_int_le(llabs(cost->b_ns[0] - f0), 1);
    ck_assert_int_le(llabs(cost->w_ns[0] - (f0 - 2 * 4 * one)), 1);
    /* the same activations as the ring's */
    PpScenario *sc_ring;
    const char *ring[] = {"parallel.context=4", NULL};
    g_autoptr(SimCostModel) ring_cost = cost_for(ring, &sc_ring);
    for (int32_t u = 0; u < 2; u++)
        ck_assert_int_eq(cost->act_bytes[u], ring_cost->act_bytes[u]);
    const char *wide[] = {"parallel.context=4", "parallel.context_comm=a2a",
                          "hardware.gpus_per_node=2", NULL};
    PpScenario *sc_wide;
    g_autoptr(SimCostModel) cross = cost_for(wide, &sc_wide);
    const int64_t one_x = 5000 + llround(fmax(bytes / 4 / 100.0, bytes * 2 / 4 / 10.0));
    ck_assert_int_le(llabs(cross->f_ns[0] - (llround(2 * layer / 4 / rate * 1e9) + 8 * one_x)), 1);
    SimCostSlice sl;
    sim_cost_slice_init(&sl, sc);
    sim_cost_slice_tensor(&sl, sc);
    sim_cost_slice_context(&sl, sc);
    ck_assert_double_eq(sl.queries, 1024);
    ck_assert_double_eq(sl.core_heads_split, 4);
    ck_assert_double_eq(sl.tokens, 256);
    pp_scenario_free(sc);
    pp_scenario_free(sc_ring);
    pp_scenario_free(sc_wide);
}
END_TEST

START_TEST(test_context_errors) {
    /* causal load balancing: 2C chunks of every sequence */
    const char *odd[] = {"parallel.context=3", NULL};
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(cp_text, "cp.ini", odd, &err);
    ck_assert_ptr_null(sc);
    ck_assert(g_error_matches(err, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_msg(strstr(err->message, "seq_len = 1024 is not a multiple of 2 x [parallel] "
                                       "context = 3") != NULL,
                  "%s", err->message);
    g_clear_error(&err);
    const char *zero[] = {"parallel.context=0", NULL};
    g_autoptr(PpScenario) sc0 = pp_scenario_load_data(cp_text, "cp.ini", zero, &err);
    ck_assert_ptr_null(sc0);
    ck_assert_msg(strstr(err->message, "[parallel] context = '0'") != NULL, "%s", err->message);
    g_clear_error(&err);
    /* the all-to-all splits a tensor rank's query and key/value heads over the context */
    const char *split[] = {"parallel.context=16", "parallel.context_comm=a2a", NULL};
    g_autoptr(PpScenario) sc16 = pp_scenario_load_data(cp_text, "cp.ini", split, &err);
    ck_assert_ptr_null(sc16);
    ck_assert(g_error_matches(err, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_msg(strstr(err->message, "context_comm = a2a splits each tensor rank's heads over "
                                       "context = 16") != NULL,
                  "%s", err->message);
    g_clear_error(&err);
    const char *gqa[] = {"parallel.context=4", "parallel.context_comm=a2a", "model.kv_heads=2",
                         NULL};
    g_autoptr(PpScenario) sc_gqa = pp_scenario_load_data(cp_text, "cp.ini", gqa, &err);
    ck_assert_ptr_null(sc_gqa);
    ck_assert_msg(strstr(err->message, "key/value heads 2 over tensor = 1 leave 8 and 2") != NULL,
                  "%s", err->message);
    g_clear_error(&err);
    const char *p2p[] = {"parallel.context_comm=p2p", NULL};
    g_autoptr(PpScenario) sc_p2p = pp_scenario_load_data(cp_text, "cp.ini", p2p, &err);
    ck_assert_ptr_null(sc_p2p);
    ck_assert_msg(strstr(err->message, "[parallel] context_comm = 'p2p'") != NULL, "%s",
                  err->message);
    g_clear_error(&err);
    /* hops too slow for the clock are refused, not wrapped around */
    const char *slow[] = {"parallel.context=4", "hardware.gpus_per_node=1",
                          "hardware.internode_gbps=1e-12", NULL};
    g_autoptr(PpScenario) sc_slow = pp_scenario_load_data(cp_text, "cp.ini", slow, &err);
    ck_assert_msg(sc_slow != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc_slow, &err);
    ck_assert_ptr_null(cost);
    ck_assert_msg(strstr(err->message, "ring attention hops") != NULL, "%s", err->message);
}
END_TEST

int main(void) {
    Suite *s = suite_create("context");
    TCase *tc = tcase_create("context");
    tcase_add_test(tc, test_context_ring);
    tcase_add_test(tc, test_context_ring_nics);
    tcase_add_test(tc, test_context_a2a);
    tcase_add_test(tc, test_context_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
