/* SPDX-License-Identifier: MIT
 * test-scenario-moe.c: the [model] keys of multi-head latent attention and mixtures of
 * experts and the [parallel] expert keys (common/pp-scenario-blocks.c): defaults, derived
 * values, the text round trip, the errors for inconsistent values; and what the simulator's
 * cost model charges for them in closed form: FLOPs of the active weights, the expert
 * all-to-alls on the links the placement gives (sim/README.md, "Mixture of experts").
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "sim-cost.h"

/* 4 layers of h 256, 8 heads of 32, the first dense (SwiGLU of 512), then 8 experts of 128
 * (2 per token) and a shared one; 2 stages x 8 replicas on nodes of 4 GPUs. The kernel
 * efficiency is 1, so an op's compute time is its FLOPs at 100 TFLOP/s. */
static const char moe_text[] = "[model]\nlayers = 4\nhidden = 256\nheads = 8\nseq_len = 128\n"
                               "vocab = 1000\nflash_attention = true\nffn = swiglu\n"
                               "ffn_hidden = 512\nexperts = 8\nexperts_per_token = 2\n"
                               "shared_experts = 1\nexpert_ffn_hidden = 128\ndense_layers = 1\n"
                               "[hardware]\npeak_tflops = 100\nmemory_gib = 80\n"
                               "mem_bw_gbps = 1000\nlink_gbps = 100\nlink_latency_us = 1\n"
                               "gpus_per_node = 4\ninternode_gbps = 10\n"
                               "internode_latency_us = 5\nkernel_eff_max = 1\n"
                               "kernel_eff_half_tokens = 0\n"
                               "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 2\n"
                               "microbatch_size = 1\npartition = even\n"
                               "[parallel]\ndata = 8\nexpert = 8\n";

static PpScenario *load(const char *const *overrides, GError **error) {
    return pp_scenario_load_data(moe_text, "moe.ini", overrides, error);
}

START_TEST(test_moe_keys_defaults) {
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(NULL, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(sc->parallel.expert_tensor, 1); /* absent: tensor */
    ck_assert_str_eq(sc->model.attention, "mha");
    PpMemoryShape shape;
    pp_scenario_memory_shape(sc, &shape);
    ck_assert_double_eq(shape.experts, 8);
    ck_assert_double_eq(shape.expert, 8);
    ck_assert_int_eq(shape.dense_layers, 1);
    /* the text round trip keeps every key */
    g_autofree char *text = pp_scenario_to_data(sc);
    ck_assert_ptr_nonnull(strstr(text, "\nexperts_per_token=2\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nexpert=8\n"));
    g_autoptr(PpScenario) again = pp_scenario_load_data(text, "moe.ini", NULL, &err);
    ck_assert_msg(again != NULL, "%s", err ? err->message : "");
    g_autofree char *text2 = pp_scenario_to_data(again);
    ck_assert(strcmp(text, text2) == 0);
    /* expert_ffn_hidden absent: ffn_hidden; a dense model: experts 0 */
    const char *dense[] = {"model.experts=0",        "model.experts_per_token=0",
                           "model.shared_experts=0", "model.dense_layers=0",
                           "parallel.expert=1",      NULL};
    g_autoptr(PpScenario) d = load(dense, &err);
    ck_assert_msg(d != NULL, "%s", err ? err->message : "");
    /* MLA keys with attention = mla */
    const char *mla[] = {"model.attention=mla", "model.kv_lora_rank=64",
                         "model.qk_nope_head_dim=32", "model.v_head_dim=32", NULL};
    g_autoptr(PpScenario) m = load(mla, &err);
    ck_assert_msg(m != NULL, "%s", err ? err->message : "");
    ck_assert(pp_scenario_attention_mla(m));
}
END_TEST

typedef struct {
    const char *overrides[4];
    int         code;
    const char *needles[3];
} MoeBadCase;

static const MoeBadCase bad_cases[] = {
    {{"model.attention=gqa"}, PP_SCENARIO_ERROR_INVALID_VALUE, {"[model] attention", "mha, mla"}},
    {{"model.attention=mla"}, PP_SCENARIO_ERROR_INCONSISTENT, {"attention = mla", "kv_lora_rank"}},
    {{"model.q_lora_rank=64"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"q_lora_rank = 64", "attention = mha", "set attention = mla"}},
    {{"model.experts_per_token=9"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"experts_per_token = 9", "1..experts = 8"}},
    {{"model.experts_per_token=0"}, PP_SCENARIO_ERROR_INCONSISTENT, {"experts_per_token = 0"}},
    {{"model.dense_layers=4"}, PP_SCENARIO_ERROR_INCONSISTENT, {"dense_layers = 4", "0..3"}},
    {{"model.experts=0"}, PP_SCENARIO_ERROR_INCONSISTENT, {"experts = 0", "experts_per_token = 2"}},
    {{"parallel.expert=3"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"expert = 3", "experts = 8", "divisor"}},
    {{"parallel.expert=4", "parallel.expert_tensor=3"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"expert_ffn_hidden = 128", "expert_tensor = 3"}},
    {{"parallel.expert=4", "parallel.expert_tensor=4"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"expert = 4 times expert_tensor = 4", "data = 8"}},
    {{"parallel.expert=0"}, PP_SCENARIO_ERROR_INVALID_VALUE, {"[parallel] expert = '0'"}},
    {{"model.experts=-1"}, PP_SCENARIO_ERROR_INVALID_VALUE, {"[model] experts = '-1'"}},
    {{"model.expert_ffn_hidden=67108865"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] expert_ffn_hidden", "from 1 to 67108864"}},
};

START_TEST(test_moe_keys_bad) {
    const MoeBadCase *c = &bad_cases[_i];
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(c->overrides, &err);
    ck_assert_msg(sc == NULL, "case %d loaded", _i);
    ck_assert_msg(g_error_matches(err, PP_SCENARIO_ERROR, c->code), "case %d: %s", _i,
                  err->message);
    for (int i = 0; i < 3 && c->needles[i]; i++)
        ck_assert_msg(strstr(err->message, c->needles[i]) != NULL, "case %d: '%s' not in: %s", _i,
                      c->needles[i], err->message);
}
END_TEST

/* Stage 0 holds layers 0 (dense) and 1 (MoE), stage 1 layers 2 and 3 (MoE). */
START_TEST(test_moe_cost) {
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(NULL, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
    const double bs = 128, h = 256, rate = 100e12;
    const double attn = h * (8 + 16) * 32 + 8 * 32 * h;                 /* QKV + projection */
    const double dense = 2 * bs * (attn + 3 * h * 512);                 /* + SwiGLU 512 */
    const double moe = 2 * bs * (attn + h * 8 + (2 + 1) * 3 * h * 128); /* router, 2 + 1 experts */
    const double scores = 2 * bs * 128 * (8 * 32 + 8 * 32);             /* QK^T and AV, all */
    const double head = 2 * bs * h * 1000;
    /* The all-to-all of EP 8 over nodes of 4 GPUs: 4 ranks in this node (3/8 of the 2 copies
     * x 128 tokens x 2h bytes on NVLink), 4 in another (4/8 on the 10 GB/s link), at once:
     * inter-node latency + the slower share. */
    const double  bytes = bs * 2 * h * 2;
    const int64_t a2a = 5000 + llround(fmax(bytes * 3 / 8 / 100.0, bytes * 4 / 8 / 10.0));
    ck_assert_int_eq(a2a, 5000 + 6554);
    const int64_t f0 = llround((dense + scores + moe + scores) / rate * 1e9) + 2 * a2a;
    const int64_t f1 = llround((2 * (moe + scores) + head) / rate * 1e9) + 4 * a2a;
    ck_assert_int_le(llabs(cost->f_ns[0] - f0), 1);
    ck_assert_int_le(llabs(cost->f_ns[1] - f1), 1);
    /* the input-gradient backward runs the two all-to-alls' gradients; W none */
    ck_assert_int_le(llabs(cost->b_ns[1] - f1), 1);
    ck_assert_int_le(llabs(cost->w_ns[1] - (f1 - 4 * a2a)), 1);
    /* model FLOPs per micro-batch: 3 x the active forward */
    ck_assert_double_eq_tol(cost->flops_per_mb, 3 * (dense + 3 * moe + 4 * scores + head), 1.0);
    /* EP 4 inside a node: NVLink alone, 3/4 of the bytes */
    const char *intra[] = {"parallel.expert=4", NULL};
    g_autoptr(PpScenario) sc4 = load(intra, &err);
    ck_assert_msg(sc4 != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) cost4 = sim_cost_new_from_scenario(sc4, &err);
    ck_assert_msg(cost4 != NULL, "%s", err ? err->message : "");
    const int64_t a2a4 = 1000 + llround(bytes * 3 / 4 / 100.0);
    ck_assert_int_eq(cost->f_ns[1] - cost4->f_ns[1], 4 * (a2a - a2a4));
    /* an all-to-all too slow for the clock is refused, not wrapped around */
    const char *slow[] = {"hardware.internode_gbps=1e-15", NULL};
    g_autoptr(PpScenario) sc_slow = load(slow, &err);
    ck_assert_msg(sc_slow != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) none = sim_cost_new_from_scenario(sc_slow, &err);
    ck_assert_ptr_null(none);
    ck_assert_msg(strstr(err->message, "expert all-to-all") != NULL, "%s", err->message);
}
END_TEST

/* When no split fits, the advice names expert parallelism with the experts it would spread. */
START_TEST(test_moe_memory_advice) {
    const char *small[] = {"pipeline.partition=balanced", "hardware.memory_gib=0.001",
                           "parallel.expert=2", NULL};
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(small, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_ptr_null(cost);
    ck_assert_msg(strstr(err->message, "more parallel.expert (now 2: fewer of the 8 routed "
                                       "experts per device)") != NULL,
                  "%s", err->message);
}
END_TEST

int main(void) {
    Suite *s = suite_create("scenario-moe");
    TCase *tc = tcase_create("scenario-moe");
    tcase_add_test(tc, test_moe_keys_defaults);
    tcase_add_loop_test(tc, test_moe_keys_bad, 0, (int)G_N_ELEMENTS(bad_cases));
    tcase_add_test(tc, test_moe_cost);
    tcase_add_test(tc, test_moe_memory_advice);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
