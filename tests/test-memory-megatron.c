/* SPDX-License-Identifier: MIT
 * test-memory-megatron.c: the memory model's categories as Megatron-Core allocates them
 * (docs/memory.md), one test per category on a small GPT-2-style model, each against byte
 * counts written out here: a dense model with bf16 and fp32 gradients (16 and 18 bytes per
 * parameter), the distributed optimizer (6 + 12/D), MoE experts sharded over the
 * expert-data-parallel ranks, FSDP as Megatron's and torch FSDP2 allocate it, every
 * recomputation mode (none, selective, full uniform and block with recompute_num_layers), the
 * reserved estimate, fused and unfused SwiGLU, tied embeddings; the scenario keys that set them
 * and their bad-input errors.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-memory.h"
#include "pp-scenario.h"
#include "sim-cost.h"

/* b = 2, s = 32, h = 64, a = 4, V = 100: one block holds 12h^2 + 13h parameters. */
static const PpMemoryShape tiny = {
    .microbatch_size = 2, .seq_len = 32, .hidden = 64, .heads = 4, .vocab = 100};
#define TINY_BLOCK (12.0 * 64 * 64 + 13.0 * 64)
#define TINY_SBH   (32.0 * 2 * 64)

/* The state of @n_layers blocks from 0 (no ends) of @shape. */
static PpMemoryBytes tiny_state(const PpMemoryShape *shape, int32_t n_layers) {
    PpMemoryModel m;
    pp_memory_model(shape, &m);
    PpMemoryBytes bytes = {0};
    pp_memory_vstage_state(&m, 0, n_layers, FALSE, FALSE, &bytes);
    return bytes;
}

/* Dense, no data parallelism: bf16 weight 2 + fp32 master 4, gradients 2 (bf16) or 4 (fp32,
 * Megatron's main gradients: 18 bytes per parameter in all), Adam 8. */
START_TEST(test_dense_state) {
    PpMemoryBytes bf16 = tiny_state(&tiny, 3);
    ck_assert_int_eq(bf16.params_bytes, llround(3 * TINY_BLOCK * 6));
    ck_assert_int_eq(bf16.grads_bytes, llround(3 * TINY_BLOCK * 2));
    ck_assert_int_eq(bf16.optim_bytes, llround(3 * TINY_BLOCK * 8));
    PpMemoryShape fp32 = tiny;
    fp32.grad_bytes = 4;
    PpMemoryBytes b = tiny_state(&fp32, 3);
    ck_assert_int_eq(b.grads_bytes, llround(3 * TINY_BLOCK * 4));
    ck_assert_int_eq(b.static_bytes, llround(3 * TINY_BLOCK * 18));
}
END_TEST

/* The distributed optimizer over D = 4 with fp32 gradients: 6 + 12/4 = 9 bytes per parameter
 * (Megatron's theoretical_memory_usage.py: 6 + 12/DP): the bf16 weights and the gradient
 * buffer whole, the master weights and moments sharded. */
START_TEST(test_distributed_optimizer_state) {
    PpMemoryShape zero = tiny;
    zero.grad_bytes = 4;
    zero.zero_shards = 4;
    PpMemoryBytes b = tiny_state(&zero, 2);
    ck_assert_int_eq(b.params_bytes, llround(2 * TINY_BLOCK * (2 + 4.0 / 4)));
    ck_assert_int_eq(b.grads_bytes, llround(2 * TINY_BLOCK * 4));
    ck_assert_int_eq(b.optim_bytes, llround(2 * TINY_BLOCK * 8.0 / 4));
    ck_assert_int_eq(b.static_bytes, llround(2 * TINY_BLOCK * 9));
}
END_TEST

/* MoE with 8 experts over EP = 4 and ZeRO over D = 8, the experts' state over the 2
 * expert-data-parallel ranks: an MoE block's non-expert parameters at 6 + 12/8, its 2 local
 * experts' at 6 + 12/2 bytes per parameter (fp32 gradients). */
START_TEST(test_moe_expert_data_parallel) {
    PpMemoryShape moe = tiny;
    moe.experts = 8;
    moe.experts_per_token = 2;
    moe.expert_ffn_hidden = 128;
    moe.expert = 4;
    moe.grad_bytes = 4;
    moe.zero_shards = 8;
    moe.expert_zero_shards = 2;
    const double  h = 64, fe = 128;
    const double  expert = 2 * h * fe + fe + h;             /* one gelu expert */
    const double  rest = 4 * h * h + 4 * h + 4 * h + h * 8; /* attention + biases, norms, router */
    const double  local = 8 * expert / 4;                   /* its 2 experts */
    PpMemoryBytes b = tiny_state(&moe, 2);
    ck_assert_int_eq(b.static_bytes,
                     llround(2 * rest * (6 + 12.0 / 8) + 2 * local * (6 + 12.0 / 2)));
    ck_assert_int_eq(b.optim_bytes, llround(2 * rest * 8.0 / 8 + 2 * local * 8.0 / 2));
    /* without the expert group every byte is over the 8 replicas */
    moe.expert_zero_shards = 0;
    PpMemoryBytes all = tiny_state(&moe, 2);
    ck_assert_int_eq(all.static_bytes, llround(2 * (rest + local) * (6 + 12.0 / 8)));
    /* the scenario's group: data 8 x tensor 1 / (expert 4 x expert_tensor 1) = 2 */
    const char *ini = "[model]\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 100\n"
                      "experts = 8\nexperts_per_token = 2\nexpert_ffn_hidden = 128\n"
                      "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 4\n"
                      "microbatch_size = 2\n"
                      "[parallel]\ndata = 8\nexpert = 4\ndistributed_optimizer = true\n"
                      "grad_bytes = 4\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(ini, "moe.ini", NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    PpMemoryShape shape;
    pp_scenario_memory_shape(sc, &shape);
    ck_assert_double_eq(shape.zero_shards, 8);
    ck_assert_double_eq(shape.expert_zero_shards, 2);
    ck_assert_double_eq(shape.grad_bytes, 4);
}
END_TEST

/* ZeRO-3 over 4 ranks. Megatron's FSDP: bf16 weight, fp32 master and fp32 gradient shards
 * with Adam's, 18/4 bytes per parameter, and per device the current and the prefetched bf16
 * block and one block's bf16 gradient, 6 bytes per block parameter. torch FSDP2: the fp32
 * parameter shard is the master, fp32 gradient shards, 16/4; the gathers add the gradient's
 * fp32 cast for the reduce-scatter, 10 bytes per block parameter. */
START_TEST(test_fsdp_state) {
    PpMemoryShape fsdp = tiny;
    fsdp.grad_bytes = 4;
    fsdp.zero_shards = fsdp.fsdp_shards = 4;
    PpMemoryModel m;
    pp_memory_model(&fsdp, &m);
    PpMemoryBytes b = tiny_state(&fsdp, 2);
    ck_assert_int_eq(b.static_bytes, llround(2 * TINY_BLOCK * 18 / 4));
    ck_assert_int_eq(b.params_bytes, llround(2 * TINY_BLOCK * 6 / 4));
    ck_assert_double_eq_tol(m.fsdp_buffer_bytes, 6 * TINY_BLOCK, 1e-6);
    fsdp.fsdp_impl = PP_FSDP_TORCH2;
    pp_memory_model(&fsdp, &m);
    b = tiny_state(&fsdp, 2);
    ck_assert_int_eq(b.params_bytes, llround(2 * TINY_BLOCK * 4 / 4));
    ck_assert_int_eq(b.grads_bytes, llround(2 * TINY_BLOCK * 4 / 4));
    ck_assert_int_eq(b.static_bytes, llround(2 * TINY_BLOCK * 16 / 4));
    ck_assert_double_eq_tol(m.fsdp_buffer_bytes, 10 * TINY_BLOCK, 1e-6);
}
END_TEST

/* Activations of a unit of 5 blocks (Korthikanti et al.'s sbh(34 + 5as/h) per block without
 * flash attention), by recomputation mode: none; selective (34sbh, one block's scores
 * rebuilt at a time); full uniform with N = 1
 * (each block's input, 2sbh, one block rebuilt at a time) and N = 2 (ceil(5/2) = 3 inputs, two
 * blocks rebuilt at once); full block with N = 2 (2 inputs + 3 whole blocks, one block
 * rebuilt). */
START_TEST(test_recompute_modes) {
    const double whole = TINY_SBH * (34 + 5.0 * 4 * 32 / 64), input = 2 * TINY_SBH;
    const struct {
        PpRecompute       mode;
        PpRecomputeMethod method;
        int32_t           n;
        double            act, rebuilt;
        int32_t           recomputed;
    } cases[] = {
        {PP_RECOMPUTE_NONE, PP_RECOMPUTE_UNIFORM, 0, 5 * whole, 0, 0},
        {PP_RECOMPUTE_SELECTIVE, PP_RECOMPUTE_UNIFORM, 0, 5 * 34 * TINY_SBH, whole - 34 * TINY_SBH,
         0},
        {PP_RECOMPUTE_FULL, PP_RECOMPUTE_UNIFORM, 1, 5 * input, whole, 5},
        {PP_RECOMPUTE_FULL, PP_RECOMPUTE_UNIFORM, 2, 3 * input, 2 * whole, 5},
        {PP_RECOMPUTE_FULL, PP_RECOMPUTE_BLOCK, 2, 2 * input + 3 * whole, whole, 2},
        {PP_RECOMPUTE_FULL, PP_RECOMPUTE_BLOCK, 9, 5 * input, whole, 5},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        PpMemoryShape shape = tiny;
        shape.recompute = cases[i].mode;
        shape.recompute_method = cases[i].method;
        shape.recompute_layers = cases[i].n;
        PpMemoryModel m;
        pp_memory_model(&shape, &m);
        ck_assert_msg(fabs(pp_memory_unit_act_bytes(&m, 0, 5, FALSE) - cases[i].act) < 1e-6,
                      "case %zu: %.1f vs %.1f", i, pp_memory_unit_act_bytes(&m, 0, 5, FALSE),
                      cases[i].act);
        ck_assert_msg(fabs(pp_memory_unit_recompute_bytes(&m, 0, 5) - cases[i].rebuilt) < 1e-6,
                      "case %zu: rebuilt %.1f vs %.1f", i, pp_memory_unit_recompute_bytes(&m, 0, 5),
                      cases[i].rebuilt);
        ck_assert_int_eq(pp_memory_recomputed_layers(&m, 5), cases[i].recomputed);
    }
}
END_TEST

/* The simulator charges the rebuilt blocks as a buffer of the stage: full block recomputation
 * of N = 1 over stages of 3 blocks stores 1 input and 2 whole blocks per live unit and one
 * whole block's activations besides. And the reserve is 5% over the allocated peak. */
START_TEST(test_recompute_in_simulator) {
    const char *ini = "[model]\nlayers = 6\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 100\n"
                      "recompute = full\nrecompute_method = block\n"
                      "[hardware]\npeak_tflops = 100\nmemory_gib = 80\nmem_bw_gbps = 1000\n"
                      "link_gbps = 100\nlink_latency_us = 1\n"
                      "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 4\n"
                      "microbatch_size = 2\n"
                      "[run]\nlayers_per_stage = 3,3\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(ini, "rc.ini", NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    const double whole = TINY_SBH * (34 + 5.0 * 4 * 32 / 64), input = 2 * TINY_SBH;
    ck_assert_int_eq(cost->act_bytes[0], llround(input + 2 * whole));
    /* + a received gradient and a sent activation, 2sbh each */
    ck_assert_int_eq(cost->buffer_bytes[0], llround(whole) + llround(2 * 2 * TINY_SBH));
    ck_assert_int_eq(pp_memory_reserved_bytes(1000000), 1050000);
}
END_TEST

/* SwiGLU's stored activations with f = 2h, flash attention, no T: sb(10h + 4(ad + kd) + 6f)
 * fused, 8f in place of 6f unfused (the silu output kept); a GeLU layer is the same either
 * way. */
START_TEST(test_swiglu_fusion) {
    PpMemoryShape swiglu = tiny;
    swiglu.flash_attention = TRUE;
    swiglu.ffn_gated = TRUE;
    swiglu.ffn_hidden = 128;
    PpMemoryModel m;
    pp_memory_model(&swiglu, &m);
    const double sb = 32.0 * 2, h = 64, qkv = 4 * (64 + 64);
    ck_assert_double_eq(m.layer_act_bytes, sb * (10 * h + qkv + 6 * 128));
    swiglu.swiglu_unfused = TRUE;
    pp_memory_model(&swiglu, &m);
    ck_assert_double_eq(m.layer_act_bytes, sb * (10 * h + qkv + 8 * 128));
    /* an MoE block's routed and shared experts follow it: K + S = 2 + 1 experts of 8f_e */
    swiglu.experts = 4;
    swiglu.experts_per_token = 2;
    swiglu.shared_experts = 1;
    swiglu.expert_ffn_hidden = 32;
    pp_memory_model(&swiglu, &m);
    ck_assert_double_eq(m.moe_layer_act_bytes,
                        sb * (10 * h + qkv + 3 * 8 * 32 + 4 * 2 * h + 4 * 4));
}
END_TEST

/* Tied embeddings: a virtual stage holding both ends counts the head's final LayerNorm 2h
 * alone (V h fewer parameters); the last of several stages keeps its own copy, as Megatron's
 * last pipeline stage does. T = 2 halves both. */
START_TEST(test_tied_embeddings) {
    PpMemoryShape shape = tiny;
    shape.tensor = 2;
    PpMemoryModel untied, tied;
    pp_memory_model(&shape, &untied);
    shape.tied_embeddings = TRUE;
    pp_memory_model(&shape, &tied);
    const double block = (12.0 * 64 * 64 + 13.0 * 64) / 2, embed = (100.0 * 64 + 32 * 64) / 2;
    ck_assert_double_eq(pp_memory_vstage_params(&untied, 0, 2, TRUE, TRUE),
                        2 * block + embed + (100.0 * 64 + 2 * 64) / 2);
    ck_assert_double_eq(pp_memory_vstage_params(&tied, 0, 2, TRUE, TRUE),
                        2 * block + embed + 2.0 * 64 / 2);
    ck_assert_double_eq(pp_memory_vstage_params(&tied, 2, 2, FALSE, TRUE),
                        pp_memory_vstage_params(&untied, 2, 2, FALSE, TRUE));
    PpMemoryBytes bytes;
    pp_memory_vstage_state(&tied, 0, 2, TRUE, TRUE, &bytes);
    ck_assert_int_eq(bytes.static_bytes, llround((2 * block + embed + 64.0) * 16));
}
END_TEST

/* Bad input names the key, the value and what would be valid. */
START_TEST(test_memory_keys_bad_input) {
    const char *base = "[model]\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 100\n"
                       "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 4\n"
                       "microbatch_size = 1\n";
    const struct {
        const char *set, *needle;
    } bad[] = {
        {"model.recompute_method=every", "uniform, block"},
        {"model.recompute_num_layers=0", "recompute_num_layers"},
        {"model.recompute_num_layers=2", "apply to full recomputation only"},
        {"model.recompute_method=block", "set recompute = full"},
        {"parallel.fsdp_impl=fsdp3", "megatron, fsdp2"},
        {"parallel.fsdp_impl=fsdp2", "needs [parallel] fsdp = true"},
        {"model.swiglu_fusion=maybe", "expected true or false"},
        {"model.swiglu_fusion=false", "applies to ffn = swiglu only"},
        {"model.tie_embeddings=2", "expected true or false"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        const char *set[] = {bad[i].set, NULL};
        g_autoptr(GError) error = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(base, "bad.ini", set, &error);
        ck_assert_msg(sc == NULL, "%s accepted", bad[i].set);
        ck_assert_msg(strstr(error->message, bad[i].needle) != NULL, "%s: %s", bad[i].set,
                      error->message);
    }
    const char *good[] = {"model.recompute=full", "model.recompute_method=block",
                          "model.recompute_num_layers=2", NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(base, "good.ini", good, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(pp_scenario_recompute_method(sc), PP_RECOMPUTE_BLOCK);
    const char *keys[] = {"model.ffn=swiglu", "model.swiglu_fusion=false",
                          "model.tie_embeddings=true", NULL};
    g_autoptr(PpScenario) with = pp_scenario_load_data(base, "keys.ini", keys, &error);
    ck_assert_msg(with != NULL, "%s", error ? error->message : "");
    PpMemoryShape shape;
    pp_scenario_memory_shape(with, &shape);
    ck_assert(shape.swiglu_unfused && shape.tied_embeddings);
    pp_scenario_memory_shape(sc, &shape);
    ck_assert(!shape.swiglu_unfused && !shape.tied_embeddings);
}
END_TEST

/* parallel.grad_bytes' default is Megatron-LM's rule for model.precision (docs/memory.md):
 * fp32 main gradients under bf16 and fp8, a stage's gradient buffer its parameters x 4; fp16
 * ones under fp16, x 2. The data-parallel reduction moves the same bytes (one time per byte
 * count, longer for 4), and an explicit value wins over the rule. */
START_TEST(test_grad_bytes_by_precision) {
    const char *ini = "[model]\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 100\n"
                      "[hardware]\npeak_tflops = 100\npeak_fp8_tflops = 200\nmemory_gib = 80\n"
                      "mem_bw_gbps = 1000\nlink_gbps = 100\nlink_latency_us = 1\n"
                      "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 4\n"
                      "microbatch_size = 2\n"
                      "[parallel]\ndata = 4\n"
                      "[run]\nlayers_per_stage = 2,2\n";
    const struct {
        const char *set[3];
        int32_t     bytes;
        gboolean    given;
    } cases[] = {
        {{NULL}, 4, FALSE}, /* precision's default, bf16 */
        {{"model.precision=bf16", NULL}, 4, FALSE},
        {{"model.precision=fp8", NULL}, 4, FALSE},
        {{"model.precision=fp16", NULL}, 2, FALSE},
        {{"model.precision=bf16", "parallel.grad_bytes=2", NULL}, 2, TRUE},
        {{"model.precision=fp16", "parallel.grad_bytes=4", NULL}, 4, TRUE},
    };
    int64_t sync_ns[5] = {0}; /* by byte count: stage 0's reduction */
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(ini, "g.ini", cases[i].set, &error);
        ck_assert_msg(sc != NULL, "%zu: %s", i, error ? error->message : "");
        ck_assert_int_eq(sc->parallel.grad_bytes, cases[i].bytes);
        ck_assert_int_eq(pp_scenario_key_given(sc, "parallel", "grad_bytes"), cases[i].given);
        PpMemoryShape shape;
        pp_scenario_memory_shape(sc, &shape);
        PpMemoryBytes two = tiny_state(&shape, 2);
        ck_assert_int_eq(two.grads_bytes, llround(2 * TINY_BLOCK * cases[i].bytes));
        g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
        ck_assert_msg(cost != NULL, "%zu: %s", i, error ? error->message : "");
        /* the last stage: 2 blocks, the final LayerNorm and the head, V h + 2h */
        ck_assert_int_eq(cost->grads_bytes[1],
                         llround((2 * TINY_BLOCK + 100.0 * 64 + 2 * 64) * cases[i].bytes));
        if (sync_ns[cases[i].bytes] == 0)
            sync_ns[cases[i].bytes] = cost->dp_sync_ns[0];
        ck_assert_int_eq(cost->dp_sync_ns[0], sync_ns[cases[i].bytes]);
    }
    ck_assert_int_gt(sync_ns[4], sync_ns[2]);
    /* a precision Megatron has no rule for is the key's error */
    const char *fp64[] = {"model.precision=fp64", NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) bad = pp_scenario_load_data(ini, "g.ini", fp64, &error);
    ck_assert_ptr_null(bad);
    ck_assert_msg(strstr(error->message, "[model] precision = 'fp64'") != NULL &&
                      strstr(error->message, "bf16, fp8, fp16") != NULL,
                  "%s", error->message);
}
END_TEST

int main(void) {
    Suite *s = suite_create("memory-megatron");
    TCase *tc = tcase_create("categories");
    tcase_add_test(tc, test_dense_state);
    tcase_add_test(tc, test_distributed_optimizer_state);
    tcase_add_test(tc, test_moe_expert_data_parallel);
    tcase_add_test(tc, test_fsdp_state);
    tcase_add_test(tc, test_recompute_modes);
    tcase_add_test(tc, test_recompute_in_simulator);
    tcase_add_test(tc, test_swiglu_fusion);
    tcase_add_test(tc, test_tied_embeddings);
    tcase_add_test(tc, test_memory_keys_bad_input);
    tcase_add_test(tc, test_grad_bytes_by_precision);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
