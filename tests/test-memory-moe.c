/* SPDX-License-Identifier: MIT
 * test-memory-moe.c: the memory model of common/pp-memory.h for multi-head latent attention
 * and mixtures of experts, in closed form on DeepSeek-V3's shape (its config.json: hidden
 * 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
 * qk_rope_head_dim 64, v_head_dim 128, 61 layers of which the first 3 dense with FFN 18432,
 * 256 routed experts of 2048, 8 per token, 1 shared; vocab 129280): attention weights and
 * widths, total and active parameters against the report's 671B / 37B, per-GPU parameters
 * under expert parallelism, activation bytes and the dense/MoE split of a stage's layers;
 * every mixture-of-experts preset's total and active parameters against its publisher's.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "pp-memory.h"
#include "pp-scenario.h"

static const PpMemoryShape deepseek_v3 = {.microbatch_size = 1,
                                          .seq_len = 4096,
                                          .hidden = 7168,
                                          .heads = 128,
                                          .vocab = 129280,
                                          .flash_attention = TRUE,
                                          .ffn_hidden = 18432,
                                          .ffn_gated = TRUE,
                                          .mla = TRUE,
                                          .q_lora_rank = 1536,
                                          .kv_lora_rank = 512,
                                          .qk_nope_head_dim = 128,
                                          .qk_rope_head_dim = 64,
                                          .v_head_dim = 128,
                                          .experts = 256,
                                          .experts_per_token = 8,
                                          .shared_experts = 1,
                                          .expert_ffn_hidden = 2048,
                                          .dense_layers = 3};

START_TEST(test_mla_attention) {
    const double h = 7168, a = 128;
    /* W_DQ h r_q, W_UQ r_q a 192, W_DKV+KR h (512 + 64), W_UKV 512 a (128 + 128), W_O a 128 h */
    const double attn = h * 1536 + 1536 * a * 192 + h * 576 + 512 * a * 256 + a * 128 * h;
    ck_assert_double_eq(attn, 187105280.0);
    ck_assert_double_eq(pp_memory_attention_matrix_params(&deepseek_v3), attn);
    /* scores over d_qk = 192, weighted sum over d_v = 128 */
    ck_assert_double_eq(pp_memory_attention_width(&deepseek_v3), a * (192 + 128));
    /* a dense layer adds three h x 18432 matrices; an MoE layer's active weights the router
     * and 8 + 1 experts, its total 256 + 1 */
    ck_assert_double_eq(pp_memory_layer_matrix_params(&deepseek_v3), attn + 3 * h * 18432);
    ck_assert_double_eq(pp_memory_moe_layer_matrix_params(&deepseek_v3, TRUE),
                        attn + h * 256 + 9 * 3 * h * 2048);
    ck_assert_double_eq(pp_memory_moe_layer_matrix_params(&deepseek_v3, FALSE),
                        attn + h * 256 + 257 * 3 * h * 2048);
    /* queries without a latent: one h x a 192 matrix in place of the two */
    PpMemoryShape direct = deepseek_v3;
    direct.q_lora_rank = 0;
    ck_assert_double_eq(pp_memory_attention_matrix_params(&direct),
                        attn - h * 1536 - 1536 * a * 192 + h * a * 192);
}
END_TEST

START_TEST(test_moe_params) {
    /* The report (DeepSeek-V3 Technical Report, §1 and §4.2): 671B total, 37B activated per
     * token, without the 14B multi-token-prediction module. The memory model also counts
     * GPT-2-style biases and learned positions (< 0.1%). */
    double total = pp_memory_model_params(&deepseek_v3, 61, FALSE);
    double active = pp_memory_model_params(&deepseek_v3, 61, TRUE);
    ck_assert_double_le(total, 671e9 * 1.01);
    ck_assert_double_ge(total, 671e9 * 0.99);
    ck_assert_double_le(active, 37e9 * 1.02);
    ck_assert_double_ge(active, 37e9 * 0.98);
    /* the difference is 58 MoE layers' 248 idle experts of 3 h 2048 weights + biases */
    const double h = 7168, expert = 3 * h * 2048 + 2 * 2048 + h;
    ck_assert_double_eq_tol(total - active, 58 * 248 * expert, 1.0);
    /* a dense model (experts 0) ignores the expert keys: 61 dense layers */
    PpMemoryShape dense = deepseek_v3;
    dense.experts = 0;
    ck_assert_double_eq(pp_memory_model_params(&dense, 61, FALSE),
                        pp_memory_model_params(&dense, 61, TRUE));
}
END_TEST

START_TEST(test_moe_per_gpu) {
    const double  h = 7168, expert = 3 * h * 2048 + 2 * 2048 + h;
    const double  attn_small = 1536 + 512 + h;
    PpMemoryShape sh = deepseek_v3;
    sh.tensor = 2;
    sh.expert = 64;
    sh.expert_tensor = 1;
    PpMemoryModel m;
    pp_memory_model(&sh, &m);
    ck_assert_int_eq(m.first_moe_layer, 3);
    /* attention, LayerNorms and the shared expert over T = 2, the router whole, the 256 routed
     * experts over 64 EP ranks: 4 each */
    const double attn = pp_memory_attention_matrix_params(&sh);
    ck_assert_double_eq_tol(m.moe_layer_params,
                            (attn + attn_small + 4 * h + expert) / 2 + h * 256 + 4 * expert, 1e-3);
    /* a stage of layers 1..4 holds 2 dense and 2 MoE blocks */
    ck_assert_int_eq(pp_memory_moe_layers(&m, 1, 4), 2);
    ck_assert_int_eq(pp_memory_moe_layers(&m, 0, 3), 0);
    ck_assert_int_eq(pp_memory_moe_layers(&m, 10, 5), 5);
    ck_assert_double_eq(pp_memory_vstage_params(&m, 1, 4, FALSE, FALSE),
                        2 * m.layer_params + 2 * m.moe_layer_params);
    ck_assert_double_eq(pp_memory_unit_act_bytes(&m, 1, 4, FALSE),
                        2 * m.layer_act_bytes + 2 * m.moe_layer_act_bytes);
    /* doubling EP halves the routed experts' share alone */
    PpMemoryModel m2;
    sh.expert = 128;
    pp_memory_model(&sh, &m2);
    ck_assert_double_eq_tol(m.moe_layer_params - m2.moe_layer_params, 2 * expert, 1e-3);
}
END_TEST

START_TEST(test_moe_activations) {
    /* flash attention, no tensor split: sbh(10 + latents/h + (Q K V proj + FFN part)/h) with
     * latents 4 r_q + 4 r_kv + 2 d_rope, attention 4a(d_qk + d_v); dense FFN 6f, MoE FFN
     * (K + S) 6 f_e + 4Kh + 4E */
    const double  s = 4096, h = 7168, a = 128, sbh = s * h;
    const double  latent = 4.0 * 1536 + 4.0 * 512 + 2.0 * 64, attn = 4.0 * a * (192 + 128);
    const double  moe_ffn = 9 * 6.0 * 2048 + 4.0 * 8 * h + 4.0 * 256;
    PpMemoryModel m;
    pp_memory_model(&deepseek_v3, &m);
    ck_assert_double_eq_tol(m.layer_act_bytes, sbh * (10 + latent / h + (attn + 6.0 * 18432) / h),
                            1.0);
    ck_assert_double_eq_tol(m.moe_layer_act_bytes, sbh * (10 + latent / h + (attn + moe_ffn) / h),
                            1.0);
    /* B frees the block input's 2sbh; W keeps the rest (no scores with flash attention) */
    ck_assert_double_eq_tol(m.moe_layer_act_b_bytes, 2 * sbh, 1.0);
    /* full recomputation keeps the layer input alone in either kind of block, and the
     * backward rebuilds one block at a time: the MoE block's activations at most */
    PpMemoryShape full = deepseek_v3;
    full.recompute = PP_RECOMPUTE_FULL;
    const double dense_act = m.layer_act_bytes, moe_act = m.moe_layer_act_bytes;
    pp_memory_model(&full, &m);
    ck_assert_double_eq(pp_memory_unit_act_bytes(&m, 1, 4, FALSE), 4 * 2 * sbh);
    ck_assert_double_eq(pp_memory_layer_stored_bytes(&m, TRUE), 2 * sbh);
    ck_assert_double_eq(pp_memory_layer_stored_bytes(&m, FALSE), 2 * sbh);
    ck_assert_double_eq(pp_memory_unit_recompute_bytes(&m, 0, 3), dense_act);
    ck_assert_double_eq(pp_memory_unit_recompute_bytes(&m, 1, 4), moe_act);
}
END_TEST

/* The presets' parameters as the publishers count them (pp-presets.c cites each): total, and
 * active with (Mistral, Qwen) or without (DeepSeek, OpenAI) the input embedding table, which
 * runs no matrix product. The memory model's GPT-2-style biases, LayerNorm shifts and learned
 * positions add < 0.5%. */
START_TEST(test_moe_presets) {
    static const struct {
        const char *preset;
        double      total, active;
        gboolean    active_embedding; /* the publisher's active count includes it */
        double      tol;
    } presets[] = {
        /* the paper: 46.7B, 12.9B */
        {"mixtral-8x7b", 46.7e9, 12.9e9, TRUE, 0.01},
        /* Mistral AI: 141B, 39B; the model's learned positions (65536 x 6144, 0.40B, which
         * Mixtral has not) make its active count 1.4% higher */
        {"mixtral-8x22b", 141e9, 39e9, TRUE, 0.02},
        /* the Qwen3 report: 30.5B, 3.3B (a rounded figure: 3.35B counted here) */
        {"qwen3-30b-a3b", 30.5e9, 3.3e9, TRUE, 0.02},
        /* 235B, 22B */
        {"qwen3-235b-a22b", 235e9, 22e9, TRUE, 0.01},
        /* the report: 671B, 37B (README_WEIGHTS: 36.6B with the head, without the embedding) */
        {"deepseek-v3", 671e9, 37e9, FALSE, 0.02},
        /* the model card: 116.83B, 5.13B active without the embedding */
        {"gpt-oss-120b", 116.8e9, 5.1e9, FALSE, 0.01},
    };
    const PpModelParams *m;
    for (size_t i = 0; i < G_N_ELEMENTS(presets); i++) {
        g_autofree char *text = g_strdup_printf("[model]\npreset = %s\n[pipeline]\nschedule = "
                                                "1f1b\nstages = 2\nmicrobatch_size = 1\n",
                                                presets[i].preset);
        g_autoptr(GError) err = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(text, "preset.ini", NULL, &err);
        ck_assert_msg(sc != NULL, "%s: %s", presets[i].preset, err ? err->message : "");
        m = &sc->model;
        PpMemoryShape shape;
        pp_scenario_memory_shape(sc, &shape);
        double total = pp_memory_model_params(&shape, m->layers, FALSE);
        double active = pp_memory_model_params(&shape, m->layers, TRUE);
        if (!presets[i].active_embedding)
            active -= (double)m->vocab * m->hidden + (double)m->seq_len * m->hidden;
        ck_assert_msg(fabs(total / presets[i].total - 1.0) <= 0.01, "%s: total %.4g vs %.4g",
                      presets[i].preset, total, presets[i].total);
        ck_assert_msg(fabs(active / presets[i].active - 1.0) <= presets[i].tol,
                      "%s: active %.4g vs %.4g", presets[i].preset, active, presets[i].active);
    }
    /* llama3-405b's FFN width is the released config's intermediate_size */
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) llama = pp_scenario_load_data(
        "[model]\npreset = llama3-405b\n[pipeline]\nschedule = 1f1b\nstages = 2\n"
        "microbatch_size = 1\n",
        "llama.ini", NULL, &err);
    ck_assert_msg(llama != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(llama->model.ffn_hidden, 53248);
    ck_assert_int_eq(llama->model.experts, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("memory-moe");
    TCase *tc = tcase_create("memory-moe");
    tcase_add_test(tc, test_mla_attention);
    tcase_add_test(tc, test_moe_params);
    tcase_add_test(tc, test_moe_per_gpu);
    tcase_add_test(tc, test_moe_activations);
    tcase_add_test(tc, test_moe_presets);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
