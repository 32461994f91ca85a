/* SPDX-License-Identifier: MIT
 * test-scenario-moe.c: the [model] keys of multi-head latent attention and mixtures of
 * experts and the [parallel] expert keys (common/pp-scenario-blocks.c): defaults, derived
 * values, the text round trip, the errors for inconsistent values; and what the simulator's
 * cost model charges for them in closed form: FLOPs of the active weights, the expert
 * all-to-alls on the links the placement gives, with and without their overlap, the
 * fused dispatchers' bytes, which dispatch makes the host wait, and the experts' matrix
 * products at the expert's width (docs/cost-model.md, "Mixture of experts").
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "sim-cost-ops.h"
#include "sim-cost.h"
#include "sim-moe.h"

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
    ck_assert_int_eq(pp_scenario_moe_dispatcher(sc), PP_MOE_DISPATCHER_ALLTOALL);
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
    const char *overrides[7];
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
    {{"hardware.alltoall_eff=0"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] alltoall_eff = '0'"}},
    {{"hardware.alltoall_eff=1.5"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] alltoall_eff = '1.5'", "out of range"}},
    {{"hardware.kernel_eff_fp8=0"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] kernel_eff_fp8 = '0'"}},
    {{"parallel.moe_a2a_overlap=maybe"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[parallel] moe_a2a_overlap = 'maybe'"}},
    {{"parallel.moe_dispatcher=nccl"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[parallel] moe_dispatcher = 'nccl'", "alltoall, deepep, hybridep"}},
    {{"parallel.moe_capacity_factor=-1"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[parallel] moe_capacity_factor = '-1'"}},
    {{"parallel.moe_capacity_factor=4.5"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"moe_capacity_factor = 4.5", "experts_per_token = 2 > experts = 8", "at most 4"}},
    {{"model.experts=0", "model.experts_per_token=0", "model.shared_experts=0",
      "model.dense_layers=0", "parallel.expert=1", "parallel.moe_capacity_factor=1"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"moe_capacity_factor = 1", "experts = 0 (a dense model)"}},
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

/* moe_text's closed forms: forward FLOPs per micro-batch of 128 tokens (h 256, 8 heads of
 * 32 with all scores counted; the MoE layer's experts apart, 2 routed + 1 shared SwiGLU of 128)
 * and one all-to-all of EP 8 over nodes of 4 GPUs: 4 ranks in this node (3/8 of the 2 copies x
 * 128 tokens x 2h bytes on the 100 GB/s link), 4 in another (4/8 on the 10 GB/s link), at
 * once: inter-node latency + the slower share, in ns. */
typedef struct {
    double  dense;   /* the dense layer's matrices: QKV, projection, SwiGLU 512 */
    double  router;  /* the MoE layer's attention matrices and router */
    double  experts; /* the MoE layer's 2 + 1 experts */
    double  scores;  /* QK^T and AV */
    double  head;    /* the LM head */
    double  bytes;   /* one all-to-all's bytes per GPU */
    int64_t a2a;     /* one all-to-all at alltoall_eff = 1 */
} MoeForms;

static MoeForms moe_forms(void) {
    const double bs = 128, h = 256, attn = h * (8 + 16) * 32 + 8 * 32 * h;
    MoeForms     f = {
            .dense = 2 * bs * (attn + 3 * h * 512),
            .router = 2 * bs * (attn + h * 8),
            .experts = 2 * bs * (2 + 1) * 3 * h * 128,
            .scores = 2 * bs * 128 * (8 * 32 + 8 * 32),
            .head = 2 * bs * h * 1000,
            .bytes = bs * 2 * h * 2,
    };
    f.a2a = 5000 + llround(fmax(f.bytes * 3 / 8 / 100.0, f.bytes * 4 / 8 / 10.0));
    return f;
}

/* The cost model of moe_text with @overrides, which must load and build.
 * Returns: (transfer full). */
static SimCostModel *moe_cost(const char *const *overrides) {
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(overrides, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    SimCostModel *cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
    return cost;
}

/* Stage 0 holds layers 0 (dense) and 1 (MoE), stage 1 layers 2 and 3 (MoE). */
START_TEST(test_moe_cost) {
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(NULL, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
    const MoeForms f = moe_forms();
    const double   rate = 100e12, dense = f.dense, moe = f.router + f.experts;
    const double   scores = f.scores, head = f.head, bytes = f.bytes;
    const int64_t  a2a = f.a2a;
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

/* parallel.moe_a2a_overlap: a pass's two all-to-alls run under the paired pass's compute of
 * the same layer (B = F here: no recomputation), so only their excess is charged; a slow
 * device hides them whole. With alltoall_eff = 0.25 they take 4 times as long, and the
 * overlap hides only the wire's quarter of that; the work on the SMs stays. */
START_TEST(test_moe_a2a_overlap) {
    const MoeForms f = moe_forms();
    const double   moe = f.router + f.experts, scores = f.scores, head = f.head;
    const double   bytes = f.bytes;
    const int64_t  a2a = f.a2a;
    const struct {
        const char *peak; /* hardware.peak_tflops override */
        double      rate; /* FLOP/s */
    } runs[] = {{"hardware.peak_tflops=100", 100e12}, {"hardware.peak_tflops=0.01", 0.01e12}};
    for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
        const char *ov[] = {"parallel.moe_a2a_overlap=true", runs[i].peak, NULL};
        g_autoptr(SimCostModel) cost = moe_cost(ov);
        const double  layer_ns = (moe + scores) / runs[i].rate * 1e9;
        const int64_t exposed = llround(fmax(0.0, 2.0 * a2a - layer_ns));
        if (i == 0)
            ck_assert_int_eq(exposed, 2 * a2a - llround(layer_ns)); /* partly hidden */
        else
            ck_assert_int_eq(exposed, 0); /* hidden whole */
        const int64_t f1 = llround((2 * (moe + scores) + head) / runs[i].rate * 1e9) + 2 * exposed;
        ck_assert_int_le(llabs(cost->f_ns[1] - f1), 1);
        ck_assert_int_le(llabs(cost->b_ns[1] - f1), 1);
    }
    const char *ov[] = {"parallel.moe_a2a_overlap=true", "hardware.peak_tflops=0.01",
                        "hardware.alltoall_eff=0.25", NULL};
    g_autoptr(SimCostModel) cost = moe_cost(ov);
    const int64_t a2a4 = 5000 + llround(fmax(bytes * 4 * 3 / 8 / 100.0, bytes * 4 * 4 / 8 / 10.0));
    ck_assert_int_eq(sim_moe_a2a_exposed_ns(2 * a2a4, 0.25, 1e12, TRUE),
                     llround(0.75 * 2.0 * (double)a2a4));
    const int64_t f1 = llround((2 * (moe + scores) + head) / 0.01e12 * 1e9) +
                       2 * sim_moe_a2a_exposed_ns(2 * a2a4, 0.25, 1e12, TRUE);
    ck_assert_int_le(llabs(cost->f_ns[1] - f1), 1);
    /* a hand-built scenario bypasses the key table's range; the cost model checks it too */
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(NULL, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    sc->hardware.alltoall_eff = 0.0;
    ck_assert_ptr_null(sim_cost_new_from_scenario(sc, &err));
    ck_assert(g_error_matches(err, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_msg(strstr(err->message, "hardware.alltoall_eff = 0") != NULL, "%s", err->message);
    /* without overlap every all-to-all is charged whole */
    ck_assert_int_eq(sim_moe_a2a_exposed_ns(2 * a2a4, 0.25, 1e12, FALSE), 2 * a2a4);
}
END_TEST

/* parallel.moe_capacity_factor: each of the 8 experts takes ceil(cf x 128 x 2 / 8) of a
 * rank's 128 routed tokens, padded: cf 1.3 gives 42 rows each, 8 x 42 / 128 = 2.625 per token
 * in place of K = 2 (0.5 gives 16 rows: 1 per token, half the copies dropped). The experts'
 * time, the all-to-all bytes and the routed activations follow the rows; the model FLOPs stay
 * K's, and with fixed splits the host waits for no token counts. */
START_TEST(test_moe_capacity) {
    ck_assert_double_eq(pp_memory_moe_routed_rows(0.0, 128, 2, 8), 2);
    ck_assert_double_eq(pp_memory_moe_routed_rows(1.3, 128, 2, 8), 2.625);
    ck_assert_double_eq(pp_memory_moe_routed_rows(0.5, 128, 2, 8), 1);
    ck_assert_double_eq(pp_memory_moe_routed_rows(1.0, 128, 2, 8), 2);
    const MoeForms f = moe_forms();
    const double   rate = 100e12, h = 256, routed = 2.625;
    const double   experts = 2 * 128 * (routed + 1) * 3 * h * 128;
    const double   bytes = 128 * routed * h * 2;
    const int64_t  a2a = 5000 + llround(fmax(bytes * 3 / 8 / 100.0, bytes * 4 / 8 / 10.0));
    const char    *ov[] = {"parallel.moe_capacity_factor=1.3", NULL};
    g_autoptr(SimCostModel) cost = moe_cost(ov);
    const int64_t f1 =
        llround((2 * (f.router + experts + f.scores) + f.head) / rate * 1e9) + 4 * a2a;
    ck_assert_int_le(llabs(cost->f_ns[1] - f1), 1);
    ck_assert_int_le(llabs(cost->b_ns[1] - f1), 1);
    const char *base_ov[] = {NULL};
    g_autoptr(SimCostModel) base = moe_cost(base_ov);
    ck_assert_double_eq(cost->flops_per_mb, base->flops_per_mb);
    /* the routed activations: (R - K) x 128 tokens x (6 f_e + 4h) more bytes per MoE block */
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(ov, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    PpMemoryShape shape;
    pp_scenario_memory_shape(sc, &shape);
    ck_assert_double_eq(pp_memory_moe_routed_per_token(&shape), routed);
    PpMemoryModel padded, dropless;
    pp_memory_model(&shape, &padded);
    shape.moe_capacity_factor = 0.0;
    pp_memory_model(&shape, &dropless);
    ck_assert_double_eq_tol(padded.moe_layer_act_bytes - dropless.moe_layer_act_bytes,
                            (routed - 2) * 128 * (6 * 128 + 4 * h), 1e-6);
    ck_assert_double_eq(padded.layer_act_bytes, dropless.layer_act_bytes);
    /* the operator model's rows per local expert: 128 x 2.625 / 1 on EP 8 */
    SimCostSlice sl;
    sim_cost_slice_init(&sl, sc);
    sim_cost_slice_tensor(&sl, sc);
    sim_cost_slice_context(&sl, sc);
    sim_cost_slice_expert(&sl, sc);
    ck_assert_double_eq(sl.expert_rows, 128 * routed);
    /* fixed splits: the host waits for no token counts; the same scenario dropless does */
    ck_assert(!sim_moe_dispatcher_syncs(sc));
    sc->parallel.moe_capacity_factor = 0.0;
    ck_assert(sim_moe_dispatcher_syncs(sc));
}
END_TEST

/* The fused dispatchers send a token once per other node that holds any of its experts:
 * moe_text's EP 8 spans 2 nodes of 4 GPUs with 4 of the 8 experts each, so a token's 2
 * distinct experts miss the other node with chance C(4, 2) / C(8, 2) = 3/14, and its one
 * copy crosses with chance 11/14 (the all-to-all dispatcher sends 4/8 of its 2 copies); on
 * the node 3 of 4 copies cross the node's links (3/8 of 2). Inside one node (EP 4) both
 * dispatchers move the same bytes. */
START_TEST(test_moe_fused_dispatch) {
    const MoeForms f = moe_forms();
    const double   bytes = f.bytes;
    double         intra, inter;
    g_autoptr(GError) err = NULL;
    const char *deepep[] = {"parallel.moe_dispatcher=deepep", NULL};
    g_autoptr(PpScenario) sc = load(deepep, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    sim_moe_a2a_bytes(sc, 4, bytes, &intra, &inter);
    ck_assert_double_eq_tol(intra, bytes * 3 / 4, 1e-9);
    ck_assert_double_eq_tol(inter, bytes / 2 * 11 / 14, 1e-9);
    const int64_t fused_a2a = 5000 + llround(fmax(bytes * 3 / 4 / 100.0, bytes * 11 / 28 / 10.0));
    ck_assert_int_eq(fused_a2a, 5000 + 5149);
    const char *plain_ov[] = {NULL};
    g_autoptr(SimCostModel) plain = moe_cost(plain_ov);
    g_autoptr(SimCostModel) cost = moe_cost(deepep);
    ck_assert_int_eq(plain->f_ns[1] - cost->f_ns[1], 4 * (f.a2a - fused_a2a));
    ck_assert_int_eq(plain->b_ns[1] - cost->b_ns[1], 4 * (f.a2a - fused_a2a));
    /* EP 4 in one node: the all-to-all dispatcher's 3/4 of the bytes for both */
    g_autoptr(PpScenario) plain4 = load((const char *const[]){"parallel.expert=4", NULL}, &err);
    ck_assert_msg(plain4 != NULL, "%s", err ? err->message : "");
    double intra4, inter4;
    sim_moe_a2a_bytes(plain4, 4, bytes, &intra4, &inter4);
    ck_assert_double_eq_tol(intra4, bytes * 3 / 4, 1e-9);
    ck_assert_double_eq(inter4, 0.0);
    g_autoptr(SimCostModel) p4 = moe_cost((const char *const[]){"parallel.expert=4", NULL});
    g_autoptr(SimCostModel) h4 = moe_cost(
        (const char *const[]){"parallel.expert=4", "parallel.moe_dispatcher=hybridep", NULL});
    ck_assert_int_eq(p4->f_ns[1], h4->f_ns[1]);
}
END_TEST

/* With a width term the experts' matrix products (f_e 128 beside h 256) run at the curve's
 * width w = 2 h f_e / (h + f_e) = 512/3: (1 + 256/w) / (1 + 256/h) = 1.25 times the layer's
 * time per FLOP; the attention, router and dense layer keep the layer's rate. */
START_TEST(test_moe_expert_width) {
    const char *ov[] = {"hardware.kernel_eff_half_hidden=256", NULL};
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = load(ov, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert_msg(cost != NULL, "%s", err ? err->message : "");
    ck_assert_double_eq_tol(sim_moe_expert_width(256, 128), 512.0 / 3, 1e-12);
    ck_assert_double_eq(sim_moe_expert_width(256, 256), 256.0);
    const double w = sim_moe_expert_width(256, 128);
    ck_assert_double_eq_tol(sim_cost_matrix_time_factor(&sc->hardware, 256, w, 1.0), 1.25, 1e-12);
    ck_assert_double_eq(sim_cost_matrix_time_factor(&sc->hardware, 256, 256, 1.0), 1.0);
    /* a GEMM twice as fast keeps its memory-bound share: (1/2 + 1.5) / 2 */
    ck_assert_double_eq_tol(sim_cost_matrix_time_factor(&sc->hardware, 256, w, 2.0), 1.0, 1e-12);
    const MoeForms f = moe_forms();
    const double   rate = 100e12 * 256 / (256 + 256), experts = f.experts;
    const double   moe = f.router + 1.25 * experts, dense = f.dense, scores = f.scores;
    const double   head = f.head;
    const int64_t  a2a = f.a2a;
    ck_assert_int_le(
        llabs(cost->f_ns[0] - (llround((dense + moe + 2 * scores) / rate * 1e9) + 2 * a2a)), 1);
    ck_assert_int_le(
        llabs(cost->f_ns[1] - (llround((2 * (moe + scores) + head) / rate * 1e9) + 4 * a2a)), 1);
    /* model FLOPs stay the active weights' */
    ck_assert_double_eq_tol(cost->flops_per_mb,
                            3 * (dense + 3 * (moe - 0.25 * experts) + 4 * scores + head), 1.0);
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
    tcase_add_test(tc, test_moe_a2a_overlap);
    tcase_add_test(tc, test_moe_capacity);
    tcase_add_test(tc, test_moe_fused_dispatch);
    tcase_add_test(tc, test_moe_expert_width);
    tcase_add_test(tc, test_moe_memory_advice);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
