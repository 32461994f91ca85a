/* SPDX-License-Identifier: MIT
 * test-memory.c: the memory model of common/pp-memory.h: GPT-2 124M's parameter count, the
 * activation bytes per block in closed form, and that the simulator's cost model charges
 * exactly pp_memory_vstage_bytes() per stage (one formula for the simulator and the executor);
 * the grouped-query, SwiGLU layer of Llama 3 8B: parameters, activations, the analytic cost
 * model's FLOPs, op times at bf16 and fp8 and the causal count (docs/cost-model.md, Model shapes).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "pp-memory.h"
#include "pp-presets.h"
#include "pp-scenario.h"
#include "sim-cost.h"

static const PpMemoryShape gpt2_124m = {
    .microbatch_size = 4, .seq_len = 1024, .hidden = 768, .heads = 12, .vocab = 50257};

START_TEST(test_memory_gpt2_params) {
    PpMemoryModel m;
    pp_memory_model(&gpt2_124m, &m);
    ck_assert_double_eq(m.layer_params, 7087872.0);
    /* GPT-2 124M counts the tied head once: untied, the head adds V h = 38597376. */
    double whole = pp_memory_vstage_params(&m, 0, 12, TRUE, TRUE);
    ck_assert_double_eq(whole - 50257.0 * 768.0, 124439808.0);
    /* sb(34h + 5as) and sb(2h + 5as) per block; 34sbh and 2sbh with flash attention. */
    ck_assert_double_eq(m.layer_act_bytes, 1024.0 * 4 * (34.0 * 768 + 5.0 * 12 * 1024));
    ck_assert_double_eq(m.layer_act_b_bytes, 1024.0 * 4 * (2.0 * 768 + 5.0 * 12 * 1024));
    /* at the loss: the bf16 logits and their fp32 copy, 6 bytes per logit */
    ck_assert_double_eq(m.logits_bytes, 6.0 * 1024 * 50257 * 4);
    PpMemoryShape flash = gpt2_124m;
    flash.flash_attention = TRUE;
    pp_memory_model(&flash, &m);
    ck_assert_double_eq(m.layer_act_bytes, 34.0 * 1024 * 4 * 768);
    ck_assert_double_eq(m.layer_act_b_bytes, 2.0 * 1024 * 4 * 768);
    PpMemoryBytes bytes;
    pp_memory_vstage_bytes(&m, 3, 3, FALSE, FALSE, 2, 1, &bytes);
    ck_assert_int_eq(bytes.static_bytes, 16 * 3 * 7087872);
    ck_assert_int_eq(bytes.params_bytes, 6 * 3 * 7087872);
    ck_assert_int_eq(bytes.grads_bytes, 2 * 3 * 7087872);
    ck_assert_int_eq(bytes.optim_bytes, 8 * 3 * 7087872);
    ck_assert_int_eq(bytes.stash_bytes, 2 * 3 * 7087872);
    ck_assert_int_eq(bytes.act_bytes, 2 * 3 * 34 * 1024 * 4 * 768);
    ck_assert_int_eq(bytes.total_bytes, bytes.static_bytes + bytes.stash_bytes + bytes.act_bytes);
}
END_TEST

/* The simulator's per-stage static bytes and per-unit activation bytes are the executor's
 * prediction for the same partition (one chunk per stage). */
START_TEST(test_memory_matches_simulator) {
    static const char ini[] = "[model]\npreset = gpt2\n"
                              "[pipeline]\nschedule = 1f1b\nstages = 4\nmicrobatches = 8\n"
                              "microbatch_size = 4\n"
                              "[costs]\nforward_us = 1\nbackward_us = 1\n"
                              "[run]\nlayers_per_stage = 2,4,3,3\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(ini, "memory.ini", NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    PpMemoryShape shape = gpt2_124m;
    shape.grad_bytes = 4; /* the scenario's: fp32 gradients, grad_bytes' default for bf16 */
    ck_assert_int_eq(pp_scenario_grad_bytes(sc), 4);
    PpMemoryModel m;
    pp_memory_model(&shape, &m);
    const int32_t layers[] = {2, 4, 3, 3};
    for (int32_t s = 0, begin = 0; s < 4; begin += layers[s], s++) {
        PpMemoryBytes bytes;
        pp_memory_vstage_bytes(&m, begin, layers[s], s == 0, s == 3, 1, 1, &bytes);
        /* the simulator's static bytes add the buffers (pipeline messages, no fsdp or
         * recomputation here) */
        ck_assert_int_eq(bytes.static_bytes + cost->buffer_bytes[s], cost->static_bytes[s]);
        ck_assert_int_eq(bytes.params_bytes, cost->weights_bytes[s]);
        ck_assert_int_eq(bytes.grads_bytes, cost->grads_bytes[s]);
        ck_assert_int_eq(bytes.optim_bytes, cost->optim_bytes[s]);
        ck_assert_int_eq(bytes.act_bytes, cost->act_bytes[s]);
        ck_assert_int_eq(bytes.stash_bytes, cost->weight_copy_bytes[s]);
    }
}
END_TEST

/* Llama 3 8B (Llama 3 paper, Table 3): 32 layers, h 4096, 32 heads of 128, 8 key/value
 * heads, SwiGLU of 14336, V 128256; one sequence of 8192 tokens. */
static const PpMemoryShape llama3_8b = {.microbatch_size = 1,
                                        .seq_len = 8192,
                                        .hidden = 4096,
                                        .heads = 32,
                                        .vocab = 128256,
                                        .kv_heads = 8,
                                        .head_dim = 128,
                                        .ffn_hidden = 14336,
                                        .ffn_gated = TRUE};

START_TEST(test_memory_llama3_8b) {
    const double h = 4096, s = 8192, V = 128256, sbh = s * h;
    /* matrices: QKV h(32 + 16)128, projection 4096 x 4096, three 4096 x 14336 */
    ck_assert_double_eq(pp_memory_layer_matrix_params(&llama3_8b), 218103808.0);
    ck_assert_double_eq(pp_memory_attention_width(&llama3_8b), 2 * 4096.0);
    /* the released model: matrices + two RMSNorm scales per layer, untied embeddings and head
     * and the final norm, 8,030,261,248 parameters */
    ck_assert_double_eq(32 * (pp_memory_layer_matrix_params(&llama3_8b) + 2 * h) + 2 * V * h + h,
                        8030261248.0);
    /* the model counts GPT-2's small terms too: biases (a + 2k)d + h + 2f + h, LayerNorm shifts
     * (4h instead of 2h) and learned positions sh: 35,196,928 (0.44%) more */
    PpMemoryModel m;
    pp_memory_model(&llama3_8b, &m);
    ck_assert_double_eq(m.layer_params, 218103808.0 + 6144 + 4096 + 2 * 14336 + 4096 + 4 * 4096);
    double whole = pp_memory_vstage_params(&m, 0, 32, TRUE, TRUE);
    ck_assert_double_eq(whole, 8065458176.0);
    ck_assert_double_eq(whole - 8030261248.0,
                        s * h + 32 * (6144 + 4096 + 2 * 14336 + 4096 + 2 * h) + h);
    /* activations per layer: 10sbh + 4sb(ad + kd) + 6sbf + 5as^2b = sbh(10 + 20 + 21 + 320) */
    ck_assert_double_eq(m.layer_act_bytes, sbh * (10.0 + 4.0 * (4096 + 1024) / h + 6.0 * 14336 / h +
                                                  5.0 * 32 * s / h));
    ck_assert_double_eq(m.layer_act_bytes, 356.0 * sbh);
    /* B frees the block input's 2sbh and the scores; W the (8 + X)sbh GEMM inputs, X = 26 */
    ck_assert_double_eq_tol(m.layer_act_b_bytes, (2.0 + 320.0) * sbh, 1.0);
    PpMemoryShape flash = llama3_8b;
    flash.flash_attention = TRUE;
    pp_memory_model(&flash, &m);
    ck_assert_double_eq(m.layer_act_bytes, 36.0 * sbh);
    ck_assert_double_eq_tol(m.layer_act_b_bytes, 2.0 * sbh, 1.0);

    /* grouped-query attention against multi-head: 24 fewer K and V heads of 128 save
     * 2 h 24 128 weights + 2 24 128 biases per layer and 4sb 24 128 activation bytes */
    PpMemoryShape mha = llama3_8b;
    mha.kv_heads = 32;
    PpMemoryModel g, a;
    pp_memory_model(&llama3_8b, &g);
    pp_memory_model(&mha, &a);
    ck_assert_double_eq(a.layer_params - g.layer_params, 2 * h * 24 * 128 + 2 * 24 * 128);
    ck_assert_double_eq(a.layer_act_bytes - g.layer_act_bytes, 4.0 * s * 24 * 128);
    /* GELU of the same width: one matrix fewer, its activations 4sbf instead of 6sbf */
    PpMemoryShape gelu = llama3_8b;
    gelu.ffn_gated = FALSE;
    ck_assert_double_eq(pp_memory_layer_matrix_params(&gelu), 218103808.0 - h * 14336);
    pp_memory_model(&gelu, &a);
    ck_assert_double_eq(g.layer_act_bytes - a.layer_act_bytes, 2.0 * s * 14336);
    /* with T = 8 and sequence parallelism everything is split: sbh 356 / 8 */
    PpMemoryShape tp = llama3_8b;
    tp.tensor = 8;
    tp.sequence_parallel = TRUE;
    pp_memory_model(&tp, &a);
    ck_assert_double_eq(a.layer_act_bytes, 356.0 / 8 * sbh);
    tp.sequence_parallel = FALSE;
    pp_memory_model(&tp, &a);
    ck_assert_double_eq(a.layer_act_bytes, (10.0 + 26.0 / 8 + 320.0 / 8) * sbh);
}
END_TEST

/* The analytic cost model on llama3-8b: model FLOPs 6 N_matrix tokens + 12 L b s^2 ad (all
 * scores) or half the attention term (attention_flops = causal); op times at bf16, and at fp8
 * with the GEMMs at kernel_eff_fp8 (the preset's, or given) x the fp8 rate and the width
 * term's memory-bound share at the bf16 rate, (1/r + half/h) / (1 + half/h) per matrix FLOP
 * (sim_cost_matrix_time_factor()); MFU against the precision's peak. */
START_TEST(test_cost_llama3_8b) {
    /* The whole-layer curve (cost_model = curve) with the curve's width term H100 had before
     * its preset moved to the operator model (docs/cost-model.md): 1450. */
    static const char ini[] = "[model]\npreset = llama3-8b\n[hardware]\npreset = h100-sxm\n"
                              "cost_model = curve\nkernel_eff_half_hidden = 1450\n"
                              "[pipeline]\nschedule = 1f1b\nstages = 4\nmicrobatches = 8\n"
                              "microbatch_size = 1\npartition = even\n";
    const double      L = 32, b = 1, s = 8192, h = 4096, V = 128256, ad = 4096;
    const double      matrix = 218103808.0;
    const double      attention = 4 * b * s * s * ad, layer = 2 * b * s * matrix + attention;
    const double      head = 2 * b * s * h * V;
    /* the curve at 8192 tokens and h 4096, no token term (h100-sxm's half_tokens is 0) */
    const PpHardwarePreset *h100 = pp_preset_hardware_lookup("h100-sxm");
    ck_assert_double_eq(h100->kernel_eff_half_tokens, 0.0);
    const double rate = 989e12 * h100->kernel_eff_max * 4096 / (4096 + 1450.0);
    const double fp8_eff = h100->kernel_eff_fp8, x = 1450.0 / 4096;
    ck_assert(fp8_eff > 0.0 && fp8_eff <= 1.0);
    /* time per matrix FLOP at fp8 over bf16's, for kernel_eff_fp8 = e */
#define FP8_TIME(e) ((989.0 / (1979.0 * (e)) + x) / (1 + x))
    struct {
        const char *precision, *attention_flops, *fp8; /* fp8: an override or NULL */
        double      attention_share, matrix_time, peak;
    } runs[] = {
        {"bf16", "full", NULL, 1.0, 1.0, 989e12},
        {"fp8", "full", NULL, 1.0, FP8_TIME(fp8_eff), 1979e12},
        {"fp8", "full", "hardware.kernel_eff_fp8=0.5", 1.0, FP8_TIME(0.5), 1979e12},
        {"bf16", "causal", NULL, 0.5, 1.0, 989e12},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
        g_autofree char  *p = g_strdup_printf("model.precision=%s", runs[i].precision);
        g_autofree char  *c = g_strdup_printf("model.attention_flops=%s", runs[i].attention_flops);
        const char *const ov[] = {p, c, runs[i].fp8, NULL};
        g_autoptr(GError) error = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(ini, "llama.ini", ov, &error);
        ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
        g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
        ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
        const double attn = attention * runs[i].attention_share;
        /* 6 N tokens for N = the layers' matrices and the head, plus 3 x the scores' FLOPs */
        ck_assert_double_eq(cost->flops_per_mb, 6 * (L * matrix + V * h) * b * s + 3 * L * attn);
        ck_assert_double_eq(cost->flops_per_mb, 3 * (L * (layer - attention + attn) + head));
        ck_assert_double_eq(cost->peak_flops, runs[i].peak);
        /* 8 layers per stage; the last stage also runs the bf16 head */
        const double stage_flops = 8 * (2 * b * s * matrix * runs[i].matrix_time + attn);
        for (int32_t st = 0; st < 4; st++) {
            double ns = (stage_flops + (st == 3 ? head : 0.0)) / rate * 1e9;
            ck_assert_int_le(llabs(cost->f_ns[st] - llround(ns)), 1);
            ck_assert_int_le(llabs(cost->b_ns[st] - llround(ns)), 1);
            ck_assert_int_le(llabs(cost->w_ns[st] - llround(ns)), 1);
        }
    }

    /* Recomputation: full reruns the layer at its own rates (fp8 matrix products), selective
     * the scores alone at bf16, halved when causal; HFU counts the model FLOPs rerun. */
    struct {
        const char *recompute, *precision, *attention_flops;
        double      rerun_time_flops, rerun_flops; /* per layer */
    } reruns[] = {
        {"full", "fp8", "full", 2 * b * s * matrix * FP8_TIME(fp8_eff) + attention, layer},
        {"selective", "bf16", "causal", attention / 2, attention / 2},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(reruns); i++) {
        g_autofree char *r = g_strdup_printf("model.recompute=%s", reruns[i].recompute);
        g_autofree char *p = g_strdup_printf("model.precision=%s", reruns[i].precision);
        g_autofree char *c = g_strdup_printf("model.attention_flops=%s", reruns[i].attention_flops);
        const char *const ov[] = {r, p, c, NULL};
        g_autoptr(GError) error = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(ini, "llama.ini", ov, &error);
        ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
        g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
        ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
        ck_assert_double_eq_tol(cost->hw_flops_per_mb - cost->flops_per_mb,
                                L * reruns[i].rerun_flops, 1.0);
        double f_ns = (double)cost->f_ns[0];
        ck_assert_int_le(
            llabs(cost->b_ns[0] - llround(f_ns + 8 * reruns[i].rerun_time_flops / rate * 1e9)), 1);
    }
#undef FP8_TIME
}
END_TEST

int main(void) {
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("memory");
    tcase_add_test(tc, test_memory_gpt2_params);
    tcase_add_test(tc, test_memory_matches_simulator);
    tcase_add_test(tc, test_memory_llama3_8b);
    tcase_add_test(tc, test_cost_llama3_8b);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
