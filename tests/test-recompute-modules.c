/* SPDX-License-Identifier: MIT
 * test-recompute-modules.c: Megatron-Core's selective recomputation of named modules
 * (model.recompute_modules) and torchtitan's per-operator checkpointing (model.recompute = op)
 * in closed form (docs/memory.md, Activations; docs/cost-model.md): a block's activation bytes
 * with and without each module on a dense, an MoE and an MLA block, the op mode's saved bytes
 * with and without the tensor split, the backward's rerun time of both on the operator model
 * and the whole-layer curve, and the keys' bad input.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-memory.h"
#include "pp-scenario.h"
#include "sim-cost-ops.h"
#include "sim-cost.h"

/* b = 2, s = 32, h = 64, a = 4 (d 16), V = 100, gelu FFN of 4h, no flash attention: per block
 * and sbh 10 + X (X = 4(ad + kd)/h + 4f/h = 8 + 16) + the scores 5as/h = 10, 44 in all. */
static const PpMemoryShape tiny = {.microbatch_size = 2,
                                   .seq_len = 32,
                                   .hidden = 64,
                                   .heads = 4,
                                   .vocab = 100,
                                   .recompute = PP_RECOMPUTE_SELECTIVE};
#define TINY_SBH (32.0 * 2 * 64)

/* One dense (@moe FALSE) or MoE block's stored activation bytes and rebuilt bytes of @shape. */
static double block_bytes(const PpMemoryShape *shape, gboolean moe, double *rerun) {
    PpMemoryModel m;
    pp_memory_model(shape, &m);
    if (rerun != NULL)
        *rerun = moe ? m.moe_layer_rerun_bytes : m.layer_rerun_bytes;
    return moe ? m.moe_layer_act_bytes : m.layer_act_bytes;
}

/* Each module on a dense block, per sbh: none 44; core_attn (the default) drops the scores
 * 10; mlp the FFN's input 2 and its activation's input and output 4f/h = 16; the MoE and
 * norm modules find nothing (the norm is fused into the linear after it); with T = 2 and no
 * sequence parallelism 10 + (24 + 10)/2 = 27 and mlp's 2 replicated, 16 split. */
START_TEST(test_dense_modules) {
    const struct {
        guint  modules;
        double tensor, per_sbh;
    } cases[] = {
        {0, 1, 34},
        {PP_RECOMPUTE_MODULE_CORE_ATTN, 1, 34},
        {PP_RECOMPUTE_MODULE_MLP, 1, 44 - 18},
        {PP_RECOMPUTE_MODULE_MLP | PP_RECOMPUTE_MODULE_CORE_ATTN, 1, 44 - 28},
        {PP_RECOMPUTE_MODULE_LAYERNORM | PP_RECOMPUTE_MODULE_MOE | PP_RECOMPUTE_MODULE_MOE_ACT |
             PP_RECOMPUTE_MODULE_SHARED_EXPERTS,
         1, 44},
        {PP_RECOMPUTE_MODULE_MLP, 2, 27 - 2 - 8},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        PpMemoryShape shape = tiny;
        shape.recompute_modules = cases[i].modules;
        shape.tensor = cases[i].tensor;
        const double whole = (cases[i].tensor > 1 ? 27 : 44) * TINY_SBH;
        double       rerun;
        const double act = block_bytes(&shape, FALSE, &rerun);
        ck_assert_msg(fabs(act - cases[i].per_sbh * TINY_SBH) < 1e-6, "case %zu: %.2f sbh", i,
                      act / TINY_SBH);
        ck_assert_msg(fabs(rerun - (whole - act)) < 1e-6, "case %zu: rerun %.2f sbh", i,
                      rerun / TINY_SBH);
    }
    /* none stores the whole block and rebuilds nothing */
    PpMemoryShape none = tiny;
    none.recompute = PP_RECOMPUTE_NONE;
    none.recompute_modules = PP_RECOMPUTE_MODULE_MLP;
    double rerun;
    ck_assert_double_eq_tol(block_bytes(&none, FALSE, &rerun), 44 * TINY_SBH, 1e-6);
    ck_assert_double_eq(rerun, 0.0);
}
END_TEST

/* An MoE block of 8 gelu experts of f_e 128, 2 per token, 1 shared: its FFN part per token is
 * (K + S) 4f_e + 4Kh + 4E = 1536 + 512 + 32 = 2080 bytes, 32.5 sbh; the block 10 + 8 + 32.5 +
 * 10 = 60.5. moe_act drops 2f_e K / h = 8, shared_experts S 4f_e / h = 8, layernorm the
 * pre-MLP norm's output 2, moe the whole 32.5 (moe_act and shared_experts inside it). */
START_TEST(test_moe_modules) {
    PpMemoryShape moe = tiny;
    moe.experts = 8;
    moe.experts_per_token = 2;
    moe.shared_experts = 1;
    moe.expert_ffn_hidden = 128;
    const struct {
        guint  modules;
        double per_sbh;
    } cases[] = {
        {PP_RECOMPUTE_MODULE_MOE_ACT, 60.5 - 8},
        {PP_RECOMPUTE_MODULE_SHARED_EXPERTS, 60.5 - 8},
        {PP_RECOMPUTE_MODULE_LAYERNORM, 60.5 - 2},
        {PP_RECOMPUTE_MODULE_MOE, 60.5 - 32.5},
        {PP_RECOMPUTE_MODULE_MOE | PP_RECOMPUTE_MODULE_MOE_ACT | PP_RECOMPUTE_MODULE_SHARED_EXPERTS,
         60.5 - 32.5},
        {PP_RECOMPUTE_MODULE_CORE_ATTN | PP_RECOMPUTE_MODULE_MOE_ACT |
             PP_RECOMPUTE_MODULE_LAYERNORM,
         60.5 - 10 - 8 - 2},
        /* mlp is a dense block's */
        {PP_RECOMPUTE_MODULE_MLP, 60.5},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        PpMemoryShape shape = moe;
        shape.recompute_modules = cases[i].modules;
        double       rerun;
        const double act = block_bytes(&shape, TRUE, &rerun);
        ck_assert_msg(fabs(act - cases[i].per_sbh * TINY_SBH) < 1e-6, "case %zu: %.2f sbh", i,
                      act / TINY_SBH);
        ck_assert_msg(fabs(rerun - (60.5 * TINY_SBH - act)) < 1e-6, "case %zu: rerun", i);
    }
}
END_TEST

/* An MLA block (flash attention, gelu FFN of 4h): q latent 32, kv latent 16, 16 + 8 rotary
 * query/key width, 16 value width: Q, K, V and the projection's input 4a(d_qk + d_v) = 640
 * bytes per token (10 sbh), the latents 4(32 + 16) + 2 x 8 = 208 (3.25 sbh), the block 10 +
 * 3.25 + 10 + 16 = 39.25 sbh. mla_up_proj drops Q, K, V, 2a(2 d_qk + d_v) = 512 bytes (8 sbh);
 * layernorm the separate input norm's output (2 sbh). */
START_TEST(test_mla_modules) {
    PpMemoryShape mla = tiny;
    mla.flash_attention = TRUE;
    mla.mla = TRUE;
    mla.q_lora_rank = 32;
    mla.kv_lora_rank = 16;
    mla.qk_nope_head_dim = 16;
    mla.qk_rope_head_dim = 8;
    mla.v_head_dim = 16;
    const struct {
        guint  modules;
        double per_sbh;
    } cases[] = {
        {PP_RECOMPUTE_MODULE_CORE_ATTN, 39.25}, /* flash keeps no scores */
        {PP_RECOMPUTE_MODULE_MLA_UP_PROJ, 39.25 - 8},
        {PP_RECOMPUTE_MODULE_LAYERNORM, 39.25 - 2},
        {PP_RECOMPUTE_MODULE_MLA_UP_PROJ | PP_RECOMPUTE_MODULE_LAYERNORM | PP_RECOMPUTE_MODULE_MLP,
         39.25 - 8 - 2 - 18},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        PpMemoryShape shape = mla;
        shape.recompute_modules = cases[i].modules;
        const double act = block_bytes(&shape, FALSE, NULL);
        ck_assert_msg(fabs(act - cases[i].per_sbh * TINY_SBH) < 1e-6, "case %zu: %.2f sbh", i,
                      act / TINY_SBH);
    }
}
END_TEST

/* Per-operator checkpointing keeps, per token: the input 2h = 128; of wq, wk, wv, wo, w1, w2
 * the first, third and fifth, wq 2ad = 128, wv 128, w1 2f = 512; the attention output 2ad =
 * 128 and its fp32 log-sum-exp 4a = 16: 1040 bytes. SwiGLU of f 128 (wq, wk, wv, wo, w1, w3,
 * w2): wq, wv, w1 256, w2's h-wide output 128: 912. T = 2 with sequence parallelism (gelu):
 * the input 64, wq 64, wv 64, w1 256, the attention's 72 and the two reduce-scatters'
 * outputs 2 x 64: 648. An MoE block with EP 2 adds the all-to-alls' outputs, 2h per routed
 * row each way (K = 2: 512), and keeps its shared expert's w1 (f_e 128: 256) but not w2. */
START_TEST(test_op_saved_bytes) {
    PpMemoryShape op = tiny;
    op.recompute = PP_RECOMPUTE_OP;
    op.flash_attention = TRUE;
    double rerun;
    ck_assert_double_eq_tol(block_bytes(&op, FALSE, &rerun), 1040 * 64, 1e-6);
    ck_assert_double_eq_tol(rerun, 34 * TINY_SBH - 1040 * 64, 1e-6);
    PpMemoryShape gated = op;
    gated.ffn_gated = TRUE;
    gated.ffn_hidden = 128;
    ck_assert_double_eq_tol(block_bytes(&gated, FALSE, NULL), 912 * 64, 1e-6);
    PpMemoryShape split = op;
    split.tensor = 2;
    split.sequence_parallel = TRUE;
    ck_assert_double_eq_tol(block_bytes(&split, FALSE, NULL), 648 * 64, 1e-6);
    PpMemoryShape moe = op;
    moe.experts = 8;
    moe.experts_per_token = 2;
    moe.shared_experts = 1;
    moe.expert_ffn_hidden = 128;
    moe.expert = 2;
    ck_assert_double_eq_tol(block_bytes(&moe, TRUE, NULL), (128 + 256 + 144 + 256 + 512) * 64,
                            1e-6);
    /* the simulator's activation bytes per live unit: two such blocks */
    PpMemoryModel m;
    pp_memory_model(&op, &m);
    ck_assert_double_eq_tol(pp_memory_unit_act_bytes(&m, 0, 2, FALSE), 2 * 1040 * 64, 1e-6);
    ck_assert_double_eq_tol(pp_memory_unit_recompute_bytes(&m, 0, 2), m.layer_rerun_bytes, 1e-6);
}
END_TEST

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

static PpScenario *load(const char *text, const char *const *overrides) {
    g_autoptr(GError) err = NULL;
    PpScenario *sc = pp_scenario_load_data(text, "rc.ini", overrides, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    return sc;
}

/* ns of @flops at the 0.5 x 100 TFLOP/s ceiling */
static double at_ceiling_ns(double flops) {
    return flops / 50e12 * 1e9;
}

/* The backward's rerun on the operator model, N = 4096 tokens, h = 1024: mlp reruns the FFN's
 * norm (4 bytes per element), fc1 and fc2 (2N h 4h each) and gelu (4 bytes per element of
 * N 4h); op the norms, residual adds and gelu (all the memory-bound operators), a third of the
 * fused QKV (torchtitan's wk), the projection (the fourth product) and fc2 (the sixth): the
 * matrix FLOPs 2N h^2 (1 + 1 + 4), 7 1/3 launches. */
START_TEST(test_rerun_time_operators) {
    g_autoptr(PpScenario) sc = load(ops_text, NULL);
    PpMemoryShape shape;
    pp_scenario_memory_shape(sc, &shape);
    SimCostOps ops;
    sim_cost_ops_block(sc, &shape, FALSE, FALSE, &ops);
    const PpHardwareParams *hw = &sc->hardware;
    const double            N = 4096.0, h = 1024.0;
    const double mlp = at_ceiling_ns(2 * 2.0 * N * h * 4 * h) + (N * h * 4 + N * 4 * h * 4) / 800.0;
    ck_assert_double_eq_tol(
        sim_cost_ops_pass_ns(&ops, hw, SIM_COST_PASS_B, PP_RECOMPUTE_MODULE_MLP),
        ops.gpu_ns[SIM_COST_PASS_B] + mlp, 1e-3);
    const double mem_f = (N * h * (4 + 4 + 7 + 7) + N * 4 * h * 4) / 800.0;
    const double op = mem_f + at_ceiling_ns(2.0 * N * h * h * 6);
    ck_assert_double_eq_tol(
        sim_cost_ops_pass_ns(&ops, hw, SIM_COST_PASS_B, 1u << SIM_COST_RERUN_OP),
        ops.gpu_ns[SIM_COST_PASS_B] + op, 1e-3);
    ck_assert_double_eq_tol(ops.rerun_kernels[SIM_COST_RERUN_OP], 5 + 1.0 / 3 + 2, 1e-9);
    /* the counted FLOPs are the same without a device */
    SimCostOps count;
    sim_cost_ops_block(sc, &shape, FALSE, TRUE, &count);
    ck_assert_double_eq_tol(count.matmul_flops, 2.0 * N * h * h * 12, 1.0);
    ck_assert_double_eq_tol(sim_cost_ops_rerun_flops(&count, 1u << SIM_COST_RERUN_OP),
                            2.0 * N * h * h * 6, 1.0);
    /* in the simulator: each of the two layers' B grows by it, F and W do not */
    const char *mlp_ov[] = {"model.recompute=selective", "model.recompute_modules=mlp", NULL};
    const char *op_ov[] = {"model.recompute=op", NULL};
    g_autoptr(GError) err = NULL;
    g_autoptr(SimCostModel) base = sim_cost_new_from_scenario(sc, &err);
    g_autoptr(PpScenario) sc_mlp = load(ops_text, mlp_ov);
    g_autoptr(SimCostModel) with_mlp = sim_cost_new_from_scenario(sc_mlp, &err);
    g_autoptr(PpScenario) sc_op = load(ops_text, op_ov);
    g_autoptr(SimCostModel) with_op = sim_cost_new_from_scenario(sc_op, &err);
    ck_assert(base != NULL && with_mlp != NULL && with_op != NULL);
    ck_assert_int_eq(with_mlp->f_ns[0], base->f_ns[0]);
    ck_assert_int_eq(with_mlp->w_ns[0], base->w_ns[0]);
    ck_assert(llabs(with_mlp->b_ns[0] - base->b_ns[0] - llround(2 * mlp)) <= 1);
    ck_assert(llabs(with_op->b_ns[0] - base->b_ns[0] - llround(2 * op)) <= 1);
}
END_TEST

/* The whole-layer curve charges the rerun share of the block's matrix FLOPs: mlp 8 of the 12
 * h^2 per token, so its extra B is 2/3 of what full recomputation adds beyond core_attn's
 * attention FLOPs. */
START_TEST(test_rerun_time_curve) {
    const char *curve[] = {"hardware.cost_model=curve", NULL, NULL, NULL};
    g_autoptr(PpScenario) sc = load(ops_text, curve);
    g_autoptr(GError) err = NULL;
    g_autoptr(SimCostModel) base = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(base != NULL, "%s", err ? err->message : "");
    const char *sets[][2] = {{"model.recompute=full", NULL},
                             {"model.recompute=selective", "model.recompute_modules=core_attn"},
                             {"model.recompute=selective", "model.recompute_modules=mlp"}};
    int64_t     delta[3];
    for (int i = 0; i < 3; i++) {
        curve[1] = sets[i][0];
        curve[2] = sets[i][1];
        g_autoptr(PpScenario) v = load(ops_text, curve);
        g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(v, &err);
        ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
        delta[i] = cost->b_ns[0] - base->b_ns[0];
    }
    ck_assert(delta[1] > 0 && delta[2] > 0);
    ck_assert_msg(fabs((double)delta[2] - 2.0 / 3.0 * (double)(delta[0] - delta[1])) <= 2.0,
                  "%" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT, delta[2], delta[0] - delta[1]);
}
END_TEST

/* The key: a comma list of Megatron's names, selective only; errors name the key, the bad
 * value and the valid names. */
START_TEST(test_recompute_modules_key) {
    const struct {
        const char *set[3];
        const char *needle;
    } bad[] = {
        {{"model.recompute=selective", "model.recompute_modules=core_attn,attn"},
         "unknown module 'attn'; valid: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, "
         "shared_experts"},
        {{"model.recompute=full", "model.recompute_modules=mlp"},
         "[model] recompute_modules = mlp applies to selective recomputation only"},
        {{"model.recompute_modules=mlp", NULL}, "recompute = none"},
        {{"model.recompute=selective", "model.recompute_modules=mla_up_proj"},
         "mla_up_proj needs multi-head latent attention"},
        {{"model.recompute=some", NULL}, "none, selective, full, op"},
        {{"model.recompute=selective", "model.recompute_modules=mlp,,moe"}, "recompute_modules"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(ops_text, "bad.ini", bad[i].set, &err);
        ck_assert_msg(sc == NULL, "case %zu loaded", i);
        ck_assert_msg(strstr(err->message, bad[i].needle) != NULL, "case %zu: %s", i, err->message);
    }
    const char *good[] = {"model.recompute=selective", "model.recompute_modules=mlp,moe_act", NULL};
    g_autoptr(PpScenario) sc = load(ops_text, good);
    ck_assert_uint_eq(pp_scenario_recompute_modules(sc),
                      PP_RECOMPUTE_MODULE_MLP | PP_RECOMPUTE_MODULE_MOE_ACT);
    const char *selective[] = {"model.recompute=selective", NULL};
    g_autoptr(PpScenario) plain = load(ops_text, selective);
    ck_assert_uint_eq(pp_scenario_recompute_modules(plain), PP_RECOMPUTE_MODULE_CORE_ATTN);
    g_autoptr(PpScenario) none = load(ops_text, NULL);
    ck_assert_uint_eq(pp_scenario_recompute_modules(none), 0);
    const char *op[] = {"model.recompute=op", NULL};
    g_autoptr(PpScenario) op_sc = load(ops_text, op);
    ck_assert_int_eq(pp_scenario_recompute(op_sc), PP_RECOMPUTE_OP);
    /* overriding a file's selective recomputation by another mode drops its modules */
    g_autofree char *text = g_strdup_printf("%s[model]\nrecompute = selective\n"
                                            "recompute_modules = mlp\n",
                                            ops_text);
    const char      *full[] = {"model.recompute=full", NULL};
    g_autoptr(PpScenario) overridden = load(text, full);
    ck_assert_ptr_null(overridden->model.recompute_modules);
}
END_TEST

int main(void) {
    Suite *s = suite_create("recompute-modules");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_dense_modules);
    tcase_add_test(tc, test_moe_modules);
    tcase_add_test(tc, test_mla_modules);
    tcase_add_test(tc, test_op_saved_bytes);
    tcase_add_test(tc, test_rerun_time_operators);
    tcase_add_test(tc, test_rerun_time_curve);
    tcase_add_test(tc, test_recompute_modules_key);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
