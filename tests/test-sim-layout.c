/* SPDX-License-Identifier: MIT
 * test-sim-layout.c: the simulator at cluster scale. Node placement and ring collectives
 * (sim-layout.h), Korthikanti et al.'s activation bytes, the analytic cost model under tensor
 * parallelism, recomputation and ZeRO-1, the [parallel] scenario keys, and the engine's
 * data-parallel synchronisation and whole-job figures, against closed forms in integer ns.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "sim-layout.h"
#include "test-util.h"

/* GPT-3-like shape on A100s with explicit link figures and the default kernel curve
 * (0.6, 2048 tokens, no width term); every test adds its layout with @overrides. */
static const char test_base[] = "[model]\n"
                                "layers = 8\nhidden = 12288\nheads = 96\nseq_len = 2048\n"
                                "vocab = 51200\n"
                                "[hardware]\n"
                                "peak_tflops = 312\nmemory_gib = 80\nmem_bw_gbps = 2000\n"
                                "link_gbps = 300\nlink_latency_us = 5\n"
                                "gpus_per_node = 8\ninternode_gbps = 25\n"
                                "internode_latency_us = 10\n"
                                "[pipeline]\n"
                                "schedule = 1f1b\nstages = 4\nmicrobatches = 8\n"
                                "microbatch_size = 1\npartition = even\n";

static PpScenario *test_load(const char *const *overrides) {
    g_autoptr(GError) error = NULL;
    PpScenario *sc = pp_scenario_load_data(test_base, "layout.ini", overrides, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    return sc;
}

static SimCostModel *test_cost(const PpScenario *sc) {
    g_autoptr(GError) error = NULL;
    SimCostModel *cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    return cost;
}

/* The scenario's own schedule (its analytic costs are not needed by the generators here). */
static PpSchedule *test_schedule(const PpScenario *sc) {
    return test_util_scenario_schedule_new(sc);
}

/* Sets a uniform all-reduce of @a_ns per (stage, chunk) over @pieces layers on @cost. */
static void test_set_dp(SimCostModel *cost, int32_t data, int64_t a_ns, int32_t pieces,
                        gboolean overlap) {
    int32_t n = cost->n_stages * cost->n_chunks;
    cost->data_parallel = data;
    cost->dp_sync_ns = g_new(int64_t, n);
    cost->dp_pieces = g_new(int32_t, n);
    for (int32_t u = 0; u < n; u++) {
        cost->dp_sync_ns[u] = a_ns;
        cost->dp_pieces[u] = pieces;
    }
    cost->dp_overlap = overlap;
}

static SimResult *test_run(const PpSchedule *sched, const SimCostModel *cost) {
    g_autoptr(GError) error = NULL;
    SimResult *res = sim_engine_run(sched, cost, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");
    return res;
}

/* --- placement and collectives --- */

/* Ranks t + T (d + D s), G per node: stage s holds [T D s, T D (s + 1)). */
static const struct {
    int32_t data, tensor, gpus_per_node, n_stages;
    int64_t node[4]; /* stage_node of stages 0..3 */
} node_cases[] = {
    {1, 8, 8, 4, {0, 1, 2, 3}},     /* one stage per node */
    {2, 2, 8, 4, {0, 0, 1, 1}},     /* two stages per node */
    {1, 1, 8, 4, {0, 0, 0, 0}},     /* the whole pipeline in one node */
    {4, 4, 8, 4, {-1, -1, -1, -1}}, /* 16 GPUs per stage span two nodes */
    {3, 1, 8, 4, {0, 0, -1, 1}},    /* stage 2 holds ranks 6..8 across nodes 0 and 1 */
};

START_TEST(test_stage_node) {
    const __typeof__(node_cases[0]) *c = &node_cases[_i];
    SimLayout                        layout = {.n_stages = c->n_stages,
                                               .data = c->data,
                                               .tensor = c->tensor,
                                               .context = 1,
                                               .gpus_per_node = c->gpus_per_node};
    for (int32_t s = 0; s < c->n_stages; s++)
        ck_assert_int_eq(sim_layout_stage_node(&layout, s), c->node[s]);
    ck_assert(sim_layout_tensor_intra(&layout) == (c->tensor <= 8 && 8 % c->tensor == 0));
}
END_TEST

START_TEST(test_allreduce) {
    /* 2 (r - 1) steps of latency + bytes / (r bw) */
    ck_assert_int_eq(sim_layout_allreduce_ns(1, 1e9, 1.0, 5000), 0);
    ck_assert_int_eq(sim_layout_allreduce_ns(2, 1e6, 100.0, 5000), 2 * (5000 + 5000));
    ck_assert_int_eq(sim_layout_allreduce_ns(8, 8e6, 250.0, 1000), 14 * (1000 + 4000));
    ck_assert_int_eq(sim_layout_allreduce_ns(4, 1e6, 0.0, 7), 6 * 7); /* latency only */
}
END_TEST

/* NCCL's ring model: collective_ns per collective, then its steps' latencies; an all-reduce
 * across nodes crosses them in 2 nodes of its steps (all at most) and pays its latency 1.4
 * times, a gather crosses in nodes - 1. */
START_TEST(test_ring) {
    const SimLayout     layout = {.gpus_per_node = 8,
                                  .intra_latency_ns = 1000,
                                  .inter_latency_ns = 10000,
                                  .collective_ns = 8400};
    const SimLayoutRing AR = SIM_LAYOUT_RING_ALLREDUCE, PAIR = SIM_LAYOUT_RING_PAIR,
                        GATHER = SIM_LAYOUT_RING_GATHER;
    ck_assert_int_eq(sim_layout_ring_ns(&layout, AR, 1, 1, 1e9, 1.0), 0); /* one rank */
    /* an all-reduce of 8 in one node: 8.4 + 14 x (1 + 8e6 / 8 / 250 ns) */
    ck_assert_int_eq(sim_layout_ring_ns(&layout, AR, 8, 1, 8e6, 250.0), 8400 + 14 * (1000 + 4000));
    /* a reduce-scatter and an all-gather: two collectives, the same steps */
    ck_assert_int_eq(sim_layout_ring_ns(&layout, PAIR, 8, 1, 8e6, 250.0),
                     2 * 8400 + 14 * (1000 + 4000));
    /* 16 ranks on 2 nodes: of 30 steps 4 cross nodes, the latency 1.4 times; the pair: 2 */
    ck_assert_int_eq(sim_layout_ring_ns(&layout, AR, 16, 2, 0.0, 0.0),
                     llround(1.4 * (8400 + 4 * 10000 + 26 * 1000)));
    ck_assert_int_eq(sim_layout_ring_ns(&layout, PAIR, 16, 2, 0.0, 0.0),
                     2 * 8400 + 2 * 10000 + 28 * 1000);
    ck_assert_int_eq(sim_layout_ring_ns(&layout, GATHER, 16, 2, 0.0, 0.0),
                     8400 + 10000 + 14 * 1000);
    /* one rank per node: every step crosses; the bytes are not scaled */
    ck_assert_int_eq(sim_layout_ring_ns(&layout, AR, 4, 4, 4e6, 250.0),
                     llround(1.4 * (8400 + 6 * 10000)) + 6 * 4000);
    /* without a fixed cost, one node: the plain ring all-reduce */
    const SimLayout bare = {.gpus_per_node = 8, .intra_latency_ns = 5000};
    ck_assert_int_eq(sim_layout_ring_ns(&bare, AR, 8, 1, 8e6, 250.0),
                     sim_layout_allreduce_ns(8, 8e6, 250.0, 5000));
    /* past the clock: PP_CHECKED_MAX, for the caller to refuse */
    const SimLayout slow = {.gpus_per_node = 8, .intra_latency_ns = INT64_C(1) << 61};
    ck_assert_int_eq(sim_layout_ring_ns(&slow, AR, 8, 1, 0.0, 0.0), INT64_C(1) << 62);
    /* nodes a group spans: ranks T apart on nodes of 8 */
    ck_assert_int_eq(sim_layout_group_nodes(&layout, 8, 1), 1);
    ck_assert_int_eq(sim_layout_group_nodes(&layout, 16, 1), 2);
    ck_assert_int_eq(sim_layout_group_nodes(&layout, 4, 2), 1);
    ck_assert_int_eq(sim_layout_group_nodes(&layout, 8, 2), 2);
    ck_assert_int_eq(sim_layout_group_nodes(&layout, 4, 8), 4);
    ck_assert_int_eq(sim_layout_group_nodes(&layout, 3, 1), 2); /* straddles a boundary */
    ck_assert_int_eq(sim_layout_group_nodes(&layout, 1, 16), 1);
}
END_TEST

/* --- Korthikanti et al. 2022, Table 2: activation bytes per layer per micro-batch --- */

START_TEST(test_activation_table) {
    const double s = 2048, b = 1, h = 12288, a = 96, t = 8, sbh = s * b * h;
    const double scores = 5 * a * s / h; /* 80 for GPT-3 */
    static const struct {
        const char *tensor, *sp, *recompute, *flash;
    } rows[] = {
        {"1", "false", "none", "false"},     {"8", "false", "none", "false"},
        {"8", "true", "none", "false"},      {"8", "false", "selective", "false"},
        {"8", "true", "selective", "false"}, {"8", "false", "full", "false"},
        {"8", "true", "full", "false"},      {"8", "true", "none", "true"},
    };
    const double want[] = {
        sbh * (34 + scores),              /* no parallelism */
        sbh * (10 + 24 / t + scores / t), /* tensor parallel */
        sbh / t * (34 + scores),          /* + sequence parallel */
        sbh * (10 + 24 / t),              /* tensor + selective */
        sbh * 34 / t,                     /* tensor + sequence + selective */
        sbh * 2,                          /* full recomputation */
        sbh * 2 / t,                      /* full, the input split by sequence parallelism */
        sbh * 34 / t,                     /* flash attention stores no scores */
    };
    const double want_w[] = {
        want[0] * 32 / (34 + scores),
        want[1] * 32 / (34 + scores),
        want[2] * 32 / (34 + scores),
        want[3] * 32 / 34,
        want[4] * 32 / 34,
        want[5],
        want[6],
        want[7] * 32 / 34,
    };
    for (size_t i = 0; i < G_N_ELEMENTS(rows); i++) {
        g_autofree char  *tp = g_strdup_printf("parallel.tensor=%s", rows[i].tensor);
        g_autofree char  *sp = g_strdup_printf("parallel.sequence_parallel=%s", rows[i].sp);
        g_autofree char  *rc = g_strdup_printf("model.recompute=%s", rows[i].recompute);
        g_autofree char  *fl = g_strdup_printf("model.flash_attention=%s", rows[i].flash);
        const char *const o[] = {tp, sp, rc, fl, NULL};
        g_autoptr(PpScenario) sc = test_load(o);
        PpMemoryShape shape;
        PpMemoryModel mem;
        pp_scenario_memory_shape(sc, &shape);
        pp_memory_model(&shape, &mem);
        double act = pp_memory_unit_act_bytes(&mem, 0, 1, FALSE);
        double act_w = act - pp_memory_unit_act_b_bytes(&mem, 0, 1, FALSE);
        ck_assert_msg(fabs(act - want[i]) <= 1e-9 * want[i], "row %zu: %.3f vs %.3f", i, act,
                      want[i]);
        ck_assert_msg(fabs(act_w - want_w[i]) <= 1e-9 * want[i], "row %zu: W %.3f vs %.3f", i,
                      act_w, want_w[i]);
    }
}
END_TEST

/* --- the analytic cost model with tensor parallelism, recomputation and ZeRO-1 --- */

/* T = 8 inside a node: per layer 2 all-reduces of 2bsh bytes forward and 2 in B, FLOPs and
 * parameters divided by 8, messages of 2bsh / 8 bytes; against T = 1. */
START_TEST(test_cost_tensor) {
    const char *const o1[] = {NULL};
    const char *const o8[] = {"parallel.tensor=8", NULL};
    g_autoptr(PpScenario) sc1 = test_load(o1);
    g_autoptr(PpScenario) sc8 = test_load(o8);
    g_autoptr(SimCostModel) c1 = test_cost(sc1);
    g_autoptr(SimCostModel) c8 = test_cost(sc8);
    const double  b = 1, s = 2048, h = 12288, V = 51200;
    const double  eff = 0.6 * 2048 / (2048 + 2048.0), rate = 312e12 * eff;
    const int64_t ar_ns = llround(14 * (5000 + 2 * b * s * h / 8 / 300.0));
    ck_assert_int_eq(sim_layout_allreduce_ns(8, 2 * b * s * h, 300.0, 5000), ar_ns);
    for (int32_t st = 0; st < 4; st++) {
        double flops =
            2 * (24 * b * s * h * h + 4 * b * s * s * h) + (st == 3 ? 2 * b * s * h * V : 0);
        ck_assert_int_eq(c1->f_ns[st], llround(flops / rate * 1e9));
        ck_assert_int_eq(c8->f_ns[st], llround(flops / 8 / rate * 1e9) + 2 * 2 * ar_ns);
        ck_assert_int_eq(c8->b_ns[st], llround(flops / 8 / rate * 1e9) + 2 * 2 * ar_ns);
        ck_assert_int_eq(c8->w_ns[st], llround(flops / 8 / rate * 1e9));
        double params = 2 * (12 * h * h + 13 * h) + (st == 0 ? V * h + s * h : 0) +
                        (st == 3 ? V * h + 2 * h : 0);
        /* fp32 gradients: grad_bytes' default for bf16 */
        ck_assert_int_eq(c1->static_bytes[st], llround(params * 6) + llround(params * 4) +
                                                   llround(params * 8) + c1->buffer_bytes[st]);
        ck_assert_int_eq(c1->buffer_bytes[st], llround(2 * 2 * b * s * h)); /* pipeline */
        ck_assert_int_eq(c8->weights_bytes[st], llround(params / 8 * 6));
        ck_assert_int_eq(c8->optim_bytes[st], llround(params / 8 * 8));
        ck_assert_int_eq(c8->weight_copy_bytes[st], llround(params / 8 * 2));
    }
    ck_assert_int_eq(c8->act_msg_bytes, llround(2 * b * s * h / 8));
    ck_assert_int_eq(c8->tensor_parallel, 8);
    ck_assert_double_eq_tol(c8->flops_per_mb, c1->flops_per_mb, c1->flops_per_mb * 1e-12);
    ck_assert_double_eq(c8->hw_flops_per_mb, c8->flops_per_mb); /* no recomputation */
}
END_TEST

/* parallel.tp_comm_overlap: each pair of all-gather and reduce-scatter (one all-reduce's
 * time) runs under its products, the attention's 4h^2 and the FFN's 8h^2 per token over T;
 * GPT-3's products hide the pairs but for 1/T of each; on a 0.3 GB/s link the pairs outlast
 * them and their excess shows. The userbuffers hold 10 activations of 2bsh bytes where
 * sequence parallelism alone holds 1. */
START_TEST(test_cost_tensor_overlap) {
    const char *const        sp[] = {"parallel.tensor=8", "parallel.sequence_parallel=true", NULL};
    const char *const        lap[] = {"parallel.tensor=8", "parallel.sequence_parallel=true",
                                      "parallel.tp_comm_overlap=true", NULL};
    const char *const        slow[] = {"parallel.tensor=8", "parallel.sequence_parallel=true",
                                       "parallel.tp_comm_overlap=true", "hardware.link_gbps=0.3", NULL};
    const char *const *const runs[] = {sp, lap, slow};
    SimCostModel            *c[G_N_ELEMENTS(runs)];
    for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
        g_autoptr(PpScenario) sc = test_load(runs[i]);
        c[i] = test_cost(sc);
    }
    const SimCostModel *c_sp = c[0], *c_lap = c[1], *c_slow = c[2];
    const double        b = 1, s = 2048, h = 12288;
    const double        eff = 0.6 * 2048 / (2048 + 2048.0), rate = 312e12 * eff;
    const double        pair = (double)llround(14 * (5000 + 2 * b * s * h / 8 / 300.0));
    const double        pair_slow = (double)llround(14 * (5000 + 2 * b * s * h / 8 / 0.3));
    const double        attn_ns = 2 * b * s * 4 * h * h / 8 / rate * 1e9;
    const double        ffn_ns = 2 * b * s * 8 * h * h / 8 / rate * 1e9;
    const int64_t       hidden = llround(2 * pair / 8);
    const int64_t       shown = llround(2 * pair_slow - attn_ns - ffn_ns);
    ck_assert_double_gt(pair_slow, ffn_ns);
    for (int32_t st = 0; st < 4; st++) {
        const int64_t compute = c_sp->f_ns[st] - 2 * 2 * (int64_t)pair; /* 2 layers */
        ck_assert_int_eq(c_lap->f_ns[st], compute + 2 * hidden);
        ck_assert_int_eq(c_lap->b_ns[st], compute + 2 * hidden);
        ck_assert_int_eq(c_lap->w_ns[st], c_sp->w_ns[st]);
        ck_assert_int_eq(c_slow->f_ns[st], compute + 2 * shown);
        ck_assert_int_eq(c_lap->buffer_bytes[st] - c_sp->buffer_bytes[st],
                         llround(9 * 2 * b * s * h));
    }
    for (size_t i = 0; i < G_N_ELEMENTS(runs); i++)
        sim_cost_free(c[i]);
}
END_TEST

/* A tensor group of 16 spans two nodes of 8: its all-reduces cross over the node's NICs, one
 * at 25 GB/s by default and 8 rail-optimised ones at 200 GB/s (capped by the 300 GB/s link). */
START_TEST(test_cost_tensor_spanning) {
    const char *const one[] = {"parallel.tensor=16", "model.heads=128", NULL};
    const char *const rails[] = {"parallel.tensor=16", "model.heads=128",
                                 "hardware.nics_per_node=8", NULL};
    const char *const many[] = {"parallel.tensor=16", "model.heads=128",
                                "hardware.nics_per_node=64", NULL};
    g_autoptr(PpScenario) sc1 = test_load(one);
    g_autoptr(PpScenario) sc8 = test_load(rails);
    g_autoptr(PpScenario) sc64 = test_load(many);
    g_autoptr(SimCostModel) c1 = test_cost(sc1);
    g_autoptr(SimCostModel) c8 = test_cost(sc8);
    g_autoptr(SimCostModel) c64 = test_cost(sc64);
    SimLayout layout;
    sim_layout_init(&layout, sc8);
    ck_assert_double_eq(sim_layout_tensor_bytes_per_ns(&layout), 200.0);
    sim_layout_init(&layout, sc64); /* at most one NIC per GPU of the node, under the link */
    ck_assert_double_eq(sim_layout_tensor_bytes_per_ns(&layout), 200.0);
    sim_layout_init(&layout, sc1);
    ck_assert_double_eq(sim_layout_tensor_bytes_per_ns(&layout), 25.0);
    const double  bytes = 2.0 * 2048 * 12288;
    const int64_t ar1 = sim_layout_allreduce_ns(16, bytes, 25.0, 10000);
    const int64_t ar8 = sim_layout_allreduce_ns(16, bytes, 200.0, 10000);
    for (int32_t st = 0; st < 4; st++) {
        ck_assert_int_eq(c1->f_ns[st] - c8->f_ns[st], 2 * 2 * (ar1 - ar8));
        ck_assert_int_eq(c8->f_ns[st], c64->f_ns[st]);
    }
}
END_TEST

/* selective: B also pays QK^T and attention over V, 4bs^2h per layer; full: B reruns the
 * layers' forward and its two all-reduces; HFU counts both, MFU neither. */
START_TEST(test_cost_recompute) {
    const char *const on[] = {"parallel.tensor=8", NULL};
    const char *const os[] = {"parallel.tensor=8", "model.recompute=selective", NULL};
    const char *const of[] = {"parallel.tensor=8", "model.recompute=full", NULL};
    g_autoptr(PpScenario) sn = test_load(on);
    g_autoptr(PpScenario) ss = test_load(os);
    g_autoptr(PpScenario) sf = test_load(of);
    g_autoptr(SimCostModel) cn = test_cost(sn);
    g_autoptr(SimCostModel) cs = test_cost(ss);
    g_autoptr(SimCostModel) cf = test_cost(sf);
    const double  b = 1, s = 2048, h = 12288, V = 51200;
    const double  rate = 312e12 * 0.3;
    const double  layer = 24 * b * s * h * h + 4 * b * s * s * h;
    const int64_t ar_ns = sim_layout_allreduce_ns(8, 2 * b * s * h, 300.0, 5000);
    for (int32_t st = 0; st < 4; st++) {
        double flops = 2 * layer + (st == 3 ? 2 * b * s * h * V : 0);
        double compute = flops / 8 / rate * 1e9;
        ck_assert_int_eq(cs->f_ns[st], cn->f_ns[st]);
        ck_assert_int_eq(cs->w_ns[st], cn->w_ns[st]);
        ck_assert_int_eq(cs->b_ns[st],
                         llround(compute + 2 * 4 * b * s * s * h / 8 / rate * 1e9) + 4 * ar_ns);
        ck_assert_int_eq(cf->b_ns[st], llround(compute + 2 * layer / 8 / rate * 1e9) + 8 * ar_ns);
    }
    double n_layers = 8;
    ck_assert_double_eq_tol(cs->hw_flops_per_mb - cs->flops_per_mb, n_layers * 4 * b * s * s * h,
                            1.0);
    ck_assert_double_eq_tol(cf->hw_flops_per_mb - cf->flops_per_mb, n_layers * layer, 1.0);
    ck_assert_double_eq(cf->flops_per_mb, cn->flops_per_mb);
    /* full recomputation keeps 2sbh per layer, all of it until W */
    ck_assert_int_eq(cf->act_bytes[1], llround(2 * 2 * s * b * h));
    ck_assert_int_eq(cf->act_b_bytes[1], 0);
}
END_TEST

/* ZeRO-1 over D = 4: master weights 4/4 and moments 8/4 bytes per parameter, U over a quarter
 * of the parameters; gradients and the bf16 copy unchanged. The all-reduce moves the fp32
 * gradients (grad_bytes' default for bf16); fp16 ones (precision = fp16) half the bytes. */
START_TEST(test_cost_zero1) {
    const char *const plain[] = {"parallel.data=4", NULL};
    const char *const zero[] = {"parallel.data=4", "parallel.distributed_optimizer=true", NULL};
    const char *const fp16[] = {"parallel.data=4", "model.precision=fp16", NULL};
    g_autoptr(PpScenario) sp = test_load(plain);
    g_autoptr(PpScenario) sz = test_load(zero);
    g_autoptr(PpScenario) s2 = test_load(fp16);
    g_autoptr(SimCostModel) cp = test_cost(sp);
    g_autoptr(SimCostModel) cz = test_cost(sz);
    g_autoptr(SimCostModel) c2 = test_cost(s2);
    const double h = 12288, s = 2048, V = 51200;
    for (int32_t st = 0; st < 4; st++) {
        double params = 2 * (12 * h * h + 13 * h) + (st == 0 ? V * h + s * h : 0) +
                        (st == 3 ? V * h + 2 * h : 0);
        ck_assert_int_eq(cp->weights_bytes[st], llround(params * 6));
        ck_assert_int_eq(cz->weights_bytes[st], llround(params * (2 + 4 / 4.0)));
        ck_assert_int_eq(cz->optim_bytes[st], llround(params * 8 / 4.0));
        ck_assert_int_eq(cz->grads_bytes[st], cp->grads_bytes[st]);
        ck_assert_int_eq(cz->u_ns[st], llround(params / 4 * 28 / 2000e9 * 1e9));
        /* the all-reduce of the stage's fp32 gradients over the 4 replicas, inside one node
         * (T D = 4 GPUs per stage, 8 per node) */
        ck_assert_int_eq(cp->dp_sync_ns[st], sim_layout_allreduce_ns(4, params * 4, 300.0, 5000));
        ck_assert_int_eq(cz->dp_sync_ns[st], cp->dp_sync_ns[st]);
        ck_assert_int_eq(c2->dp_sync_ns[st], sim_layout_allreduce_ns(4, params * 2, 300.0, 5000));
        ck_assert_int_eq(c2->grads_bytes[st], llround(params * 2));
        ck_assert_int_eq(cp->dp_pieces[st], 2);
    }
    ck_assert_int_eq(cp->data_parallel, 4);
}
END_TEST

/* hardware.collective_us: once per collective. Tensor parallelism runs 2 all-reduces per pass
 * (2 layers a stage: 4 per forward), with sequence parallelism 2 all-gather and reduce-scatter
 * pairs (8 collectives); the gradient all-reduce is one, the distributed optimizer's
 * reduce-scatter and all-gather two. Stage-to-stage hops are messages: unchanged. */
START_TEST(test_cost_collective) {
    const char *const  tp[] = {"parallel.tensor=8", NULL};
    const char *const  tp_c[] = {"parallel.tensor=8", "hardware.collective_us=7", NULL};
    const char *const  sp[] = {"parallel.tensor=8", "parallel.sequence_parallel=true", NULL};
    const char *const  sp_c[] = {"parallel.tensor=8", "parallel.sequence_parallel=true",
                                 "hardware.collective_us=7", NULL};
    const char *const  dp[] = {"parallel.data=4", NULL};
    const char *const  dp_c[] = {"parallel.data=4", "hardware.collective_us=7", NULL};
    const char *const  zo_c[] = {"parallel.data=4", "parallel.distributed_optimizer=true",
                                 "hardware.collective_us=7", NULL};
    const char *const *cases[] = {tp, tp_c, sp, sp_c, dp, dp_c, zo_c};
    SimCostModel      *c[G_N_ELEMENTS(cases)];
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(PpScenario) sc = test_load(cases[i]);
        c[i] = test_cost(sc);
    }
    for (int32_t st = 0; st < 4; st++) {
        ck_assert_int_eq(c[1]->f_ns[st] - c[0]->f_ns[st], 2 * 2 * 7000);
        ck_assert_int_eq(c[1]->b_ns[st] - c[0]->b_ns[st], 2 * 2 * 7000);
        ck_assert_int_eq(c[1]->w_ns[st], c[0]->w_ns[st]);
        ck_assert_int_eq(c[3]->f_ns[st] - c[2]->f_ns[st], 2 * 2 * 2 * 7000);
        ck_assert_int_eq(c[5]->dp_sync_ns[st] - c[4]->dp_sync_ns[st], 7000);
        ck_assert_int_eq(c[6]->dp_sync_ns[st] - c[4]->dp_sync_ns[st], 2 * 7000);
    }
    ck_assert_int_eq(c[1]->comm_latency_ns, c[0]->comm_latency_ns);
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
        sim_cost_free(c[i]);
}
END_TEST

/* hardware.collective_us must be a finite number of microseconds >= 0; one so large that a
 * layer's tensor-parallel collectives leave the clock is refused by the cost model. */
START_TEST(test_collective_bad) {
    const char *const  neg[] = {"hardware.collective_us=-1", NULL};
    const char *const  word[] = {"hardware.collective_us=fast", NULL};
    const char *const *cases[] = {neg, word};
    const char        *needles[] = {"[hardware] collective_us = '-1'",
                                    "[hardware] collective_us = 'fast'"};
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(test_base, "layout.ini", cases[i], &err);
        ck_assert_msg(sc == NULL, "case %zu loaded", i);
        ck_assert(g_error_matches(err, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
        ck_assert_msg(strstr(err->message, needles[i]) != NULL, "%s", err->message);
    }
    const char *const huge[] = {"parallel.tensor=8", "parallel.sequence_parallel=true",
                                "hardware.collective_us=1e12", "model.layers=1024", NULL};
    g_autoptr(PpScenario) sc = test_load(huge);
    g_autoptr(GError) err = NULL;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &err);
    ck_assert(cost == NULL);
    ck_assert_msg(strstr(err->message, "collective_us = 1e+12") != NULL, "%s", err->message);
}
END_TEST

/* A measured bus bandwidth (hardware.allreduce_busbw_gbps) replaces the link's in the
 * data-parallel all-reduce, inside a node and across nodes alike, and leaves the stage-to-stage
 * hops on the link; 0 is the link's. */
START_TEST(test_cost_busbw) {
    const char *const link[] = {"parallel.data=4", NULL};
    const char *const zero[] = {"parallel.data=4", "hardware.allreduce_busbw_gbps=0", NULL};
    const char *const bus[] = {"parallel.data=4", "hardware.allreduce_busbw_gbps=120", NULL};
    const char *const wide[] = {"parallel.data=4", "hardware.gpus_per_node=2",
                                "hardware.allreduce_busbw_gbps=120", NULL};
    g_autoptr(PpScenario) sl = test_load(link);
    g_autoptr(PpScenario) s0 = test_load(zero);
    g_autoptr(PpScenario) sb = test_load(bus);
    g_autoptr(PpScenario) sw = test_load(wide);
    g_autoptr(SimCostModel) cl = test_cost(sl);
    g_autoptr(SimCostModel) c0 = test_cost(s0);
    g_autoptr(SimCostModel) cb = test_cost(sb);
    g_autoptr(SimCostModel) cw = test_cost(sw);
    const double h = 12288, s = 2048, V = 51200;
    for (int32_t st = 0; st < 4; st++) {
        double params = 2 * (12 * h * h + 13 * h) + (st == 0 ? V * h + s * h : 0) +
                        (st == 3 ? V * h + 2 * h : 0);
        ck_assert_int_eq(c0->dp_sync_ns[st], cl->dp_sync_ns[st]);
        ck_assert_int_eq(cb->dp_sync_ns[st], sim_layout_allreduce_ns(4, params * 4, 120.0, 5000));
        /* a stage's 4 replicas span two nodes of 2, the same bandwidth: of the ring's 6 steps
         * 4 cross nodes at the inter-node latency (NCCL's ring model), 2 stay inside, and
         * the latency counts 1.4 times */
        ck_assert_int_eq(cw->dp_sync_ns[st], sim_layout_allreduce_ns(4, params * 4, 120.0, 0) +
                                                 llround(1.4 * (4 * 10000 + 2 * 5000)));
    }
    ck_assert_int_eq(sim_cost_comm_ns(cb), sim_cost_comm_ns(cl));
}
END_TEST

/* Hops: T = 8 fills a node, so every stage-to-stage hop crosses nodes: latency 10 us + 2bsh/8
 * bytes at 25 GB/s; with T = 2 and D = 1 the four stages share a node. */
START_TEST(test_cost_hops) {
    const char *const o8[] = {"parallel.tensor=8", NULL};
    const char *const o2[] = {"parallel.tensor=2", NULL};
    g_autoptr(PpScenario) s8 = test_load(o8);
    g_autoptr(PpScenario) s2 = test_load(o2);
    g_autoptr(SimCostModel) c8 = test_cost(s8);
    g_autoptr(SimCostModel) c2 = test_cost(s2);
    const double bytes8 = 2.0 * 2048 * 12288 / 8, bytes2 = 2.0 * 2048 * 12288 / 2;
    for (int32_t st = 0; st + 1 < 4; st++) {
        ck_assert_int_eq(sim_cost_hop_ns(c8, st, st + 1), 10000 + llround(bytes8 / 25.0));
        ck_assert_int_eq(sim_cost_hop_ns(c2, st, st + 1), 5000 + llround(bytes2 / 300.0));
    }
    ck_assert_int_eq(sim_cost_hop_ns(c8, 2, 2), 0);
    /* the engine waits exactly one inter-node hop between F(0) on stage 0 and on stage 1 */
    g_autoptr(PpSchedule) sched = test_schedule(s8);
    g_autoptr(SimResult) res = test_run(sched, c8);
    int64_t f0_end = -1, f1_start = -1;
    for (int64_t r = 0; r < res->trace->n_rows; r++) {
        const PpTraceRow *row = &res->trace->rows[r];
        if (row->kind == PP_OP_FORWARD && row->mb == 0 && row->stage == 0)
            f0_end = row->end_ns;
        if (row->kind == PP_OP_FORWARD && row->mb == 0 && row->stage == 1)
            f1_start = row->start_ns;
    }
    ck_assert_int_eq(f1_start - f0_end, sim_cost_hop_ns(c8, 0, 1));
}
END_TEST

/* kernel_eff_half_hidden scales the curve by h / (h + half): 0.6 x 2048 / 4096 x 12288 /
 * 16384 = 0.225 of peak for this model, whatever the tensor degree. */
START_TEST(test_cost_hidden_term) {
    const char *const o[] = {"hardware.kernel_eff_half_hidden=4096", "parallel.tensor=8", NULL};
    g_autoptr(PpScenario) sc = test_load(o);
    ck_assert_double_eq_tol(sim_cost_kernel_efficiency(&sc->hardware, 2048, 12288), 0.225, 1e-15);
    g_autoptr(SimCostModel) cost = test_cost(sc);
    const double b = 1, s = 2048, h = 12288;
    double       flops = 2 * (24 * b * s * h * h + 4 * b * s * s * h);
    ck_assert_int_eq(cost->w_ns[1], llround(flops / 8 / (312e12 * 0.225) * 1e9));
}
END_TEST

/* --- the engine: data-parallel synchronisation --- */

/* 1F1B, N = 2, m = 4, F = B = W = 1 us, no comm, U free: one step is (m + N - 1) 3 us = 15 us
 * without replicas. Each stage's U waits for its all-reduce of A: without overlap it starts
 * A after the stage's last BW, so a step takes 15 + A us; with overlap over L layers it starts
 * at max(last BW start + 2/L + A, last BW end + A/L). */
static const struct {
    int64_t  a_ns;
    int32_t  pieces;
    gboolean overlap;
    int64_t  step_ns;
} dp_cases[] = {
    {7000, 1, FALSE, 22000},
    {7000, 4, TRUE, 13000 + 500 + 7000},
    {1000, 4, TRUE, 15000 + 250},
    {0, 1, FALSE, 15000},
};

START_TEST(test_dp_sync_1f1b) {
    const __typeof__(dp_cases[0]) *c = &dp_cases[_i];
    g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", 2, 1, 4, 1, 2);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(2, 1, 1000, 1000, 1000, 0);
    test_set_dp(cost, 3, c->a_ns, c->pieces, c->overlap);
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->step_time_ns, c->step_ns);
    ck_assert_int_eq(res->makespan_ns, 2 * c->step_ns);
    /* stage 0's U waited for the sync beyond its last BW, each step */
    ck_assert_int_eq(res->stages[0].dp_wait_ns, 2 * (c->step_ns - 15000));
    /* three replicas: three times one pipeline's tokens per step */
    ck_assert_double_eq_tol(res->throughput_tokens_per_s, 3 * 4 * 1e9 / c->step_ns, 1e-6);
    ck_assert_int_eq(res->gpus, 2 * 3);
}
END_TEST

/* Interleaved, N = 2, v = 2: the stage's channel runs the chunks' all-reduces one at a time
 * in the order their last backward ended. Checked on the trace against the rule. */
START_TEST(test_dp_sync_chunks) {
    const int64_t a_ns = 2500;
    g_autoptr(PpSchedule) sched = test_util_schedule_new("interleaved", 2, 2, 4, 1, 1);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(2, 2, 1000, 1000, 1000, 0);
    test_set_dp(cost, 2, a_ns, 1, FALSE);
    for (int32_t u = 0; u < 4; u++)
        cost->dp_sync_ns[u] = a_ns * (1 + u % 2); /* chunk 1 takes twice as long */
    g_autoptr(SimResult) res = test_run(sched, cost);
    for (int32_t s = 0; s < 2; s++) {
        int64_t last_end[2] = {0, 0}, u_start = -1, prev_end = 0;
        for (int64_t r = 0; r < res->trace->n_rows; r++) {
            const PpTraceRow *row = &res->trace->rows[r];
            if (row->stage != s)
                continue;
            if (row->kind == PP_OP_BACKWARD_FULL)
                last_end[row->chunk] = MAX(last_end[row->chunk], row->end_ns);
            if (row->kind == PP_OP_UPDATE)
                u_start = row->start_ns;
            else
                prev_end = MAX(prev_end, row->end_ns);
        }
        int32_t first = last_end[1] <= last_end[0] ? 1 : 0, second = 1 - first;
        int64_t t = last_end[first] + cost->dp_sync_ns[s * 2 + first];
        t = MAX(t, last_end[second]) + cost->dp_sync_ns[s * 2 + second];
        ck_assert_int_eq(u_start, MAX(t, prev_end));
        ck_assert_int_eq(res->stages[s].dp_wait_ns, u_start - prev_end);
    }
}
END_TEST

/* Asynchronous schedules: every U of a stage waits for that stage's all-reduce of the
 * gradients its window accumulated, A after the window's last backward (one chunk, no
 * overlap, the channel idle since the previous U); Δ does not change. */
static const char *const async_kinds[] = {"paci", "2bw", "pipedream", "async-1f1b"};

START_TEST(test_dp_sync_async) {
    const char   *kind = async_kinds[_i];
    const int64_t a_ns = 4000;
    int32_t       m = strcmp(kind, "2bw") == 0 ? 4 : 1;
    int32_t       acc = strcmp(kind, "paci") == 0 ? 2 : 1;
    g_autoptr(PpSchedule) sched = test_util_schedule_new(kind, 3, 1, m, acc, 8);
    g_autoptr(SimCostModel) plain = sim_cost_new_uniform(3, 1, 1000, 1000, 1000, 0);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(3, 1, 1000, 1000, 1000, 0);
    test_set_dp(cost, 2, a_ns, 1, FALSE);
    g_autoptr(SimResult) base = test_run(sched, plain);
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->delta_max, base->delta_max);
    ck_assert_int_gt(res->step_time_ns, base->step_time_ns);
    for (int32_t s = 0; s < 3; s++) {
        int64_t last_bw_end = -1;
        int32_t n_u = 0;
        /* trace rows are sorted by start time; on one stage that is program order */
        for (int64_t r = 0; r < res->trace->n_rows; r++) {
            const PpTraceRow *row = &res->trace->rows[r];
            if (row->stage != s)
                continue;
            if (row->kind == PP_OP_BACKWARD_FULL)
                last_bw_end = row->end_ns;
            if (row->kind == PP_OP_UPDATE) {
                ck_assert_int_eq(row->start_ns, last_bw_end + a_ns);
                n_u++;
            }
        }
        ck_assert_int_gt(n_u, 0);
        ck_assert_int_eq(res->stages[s].dp_wait_ns, (int64_t)n_u * a_ns);
    }
}
END_TEST

/* --- whole-job figures from a scenario --- */

START_TEST(test_job_figures) {
    const char *const o[] = {"parallel.data=4", "parallel.tensor=8", "model.recompute=selective",
                             NULL};
    g_autoptr(PpScenario) sc = test_load(o);
    g_autoptr(SimCostModel) cost = test_cost(sc);
    g_autoptr(PpSchedule) sched = test_schedule(sc);
    g_autoptr(SimResult) res = test_run(sched, cost);
    ck_assert_int_eq(res->gpus, 4 * 8 * 4);
    double steps_per_s = 1e9 / res->step_time_ns;
    ck_assert_double_eq_tol(res->throughput_tokens_per_s, 2048.0 * 8 * 4 * steps_per_s, 1e-6);
    double mfu = cost->flops_per_mb * 8 * steps_per_s / (4 * 8 * 312e12);
    ck_assert_double_eq_tol(res->mfu, mfu, 1e-12);
    ck_assert_double_eq_tol(res->hfu / res->mfu, cost->hw_flops_per_mb / cost->flops_per_mb, 1e-12);
    ck_assert_double_eq_tol(res->tflops_per_gpu, res->mfu * 312, 1e-9);
    ck_assert_int_gt(res->hfu * 1e6, res->mfu * 1e6);
    /* the global batch counts all four replicas: 1 sequence x 8 micro-batches x 4 */
    ck_assert_int_eq(sc->training.global_batch, 32);
}
END_TEST

/* --- [parallel] keys --- */

START_TEST(test_parallel_keys) {
    g_autoptr(PpScenario) def = test_load(NULL);
    ck_assert_int_eq(def->parallel.data, 1);
    ck_assert_int_eq(def->parallel.tensor, 1);
    ck_assert(!def->parallel.sequence_parallel && !def->parallel.distributed_optimizer);
    ck_assert_str_eq(def->model.recompute, "none");
    ck_assert_int_eq(pp_scenario_gpus(def), 4);
    ck_assert_int_eq(def->hardware.devices, 4);

    /* global_batch derives the micro-batch size through all replicas */
    g_autoptr(GError) error = NULL;
    const char *const gb2[] = {"parallel.data=16", "training.global_batch=512", NULL};
    g_autofree char  *text = g_strdup(test_base);
    *strstr(text, "microbatch_size = 1\n") = '#'; /* let global_batch derive it */
    g_autoptr(PpScenario) d = pp_scenario_load_data(text, "gb.ini", gb2, &error);
    ck_assert_msg(d != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(d->pipeline.microbatch_size, 512 / (8 * 16));

    /* without a preset: one node, and the inter-node link is the intra-node one */
    static const char bare[] = "[model]\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\n"
                               "vocab = 100\n[hardware]\npeak_tflops = 1\nmemory_gib = 1\n"
                               "mem_bw_gbps = 1\nlink_gbps = 7\nlink_latency_us = 3\n"
                               "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatch_size = 1\n"
                               "[parallel]\ndata = 3\ntensor = 2\n";
    g_autoptr(PpScenario) b = pp_scenario_load_data(bare, "bare.ini", NULL, &error);
    ck_assert_msg(b != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(b->hardware.gpus_per_node, 12);
    ck_assert_double_eq(b->hardware.internode_bw_bytes_per_s, 7e9);
    ck_assert_int_eq(b->hardware.internode_latency_ns, 3000);
    g_autofree char *round = pp_scenario_to_data(b);
    g_autoptr(PpScenario) again = pp_scenario_load_data(round, "again.ini", NULL, &error);
    ck_assert_msg(again != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(again->parallel.data, 3);
    ck_assert_int_eq(again->hardware.gpus_per_node, 12);

    /* a preset gives 8 GPUs per node and its inter-node link */
    const char *const h100[] = {"hardware.preset=h100-sxm", NULL};
    g_autoptr(PpScenario) p = pp_scenario_load_data(bare, "p.ini", h100, &error);
    ck_assert_msg(p != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(p->hardware.gpus_per_node, 8);
    ck_assert_double_eq(p->hardware.internode_bw_bytes_per_s, 50e9);
}
END_TEST

/* Bad layouts: each a clear error naming the keys. */
static const struct {
    const char *overrides[5];
    int         code;
    const char *needle;
} bad_cases[] = {
    {{"parallel.tensor=5"}, PP_SCENARIO_ERROR_INCONSISTENT, "tensor = 5 does not divide"},
    {{"parallel.tensor=0"}, PP_SCENARIO_ERROR_INVALID_VALUE, "[parallel] tensor = '0'"},
    {{"parallel.tensor=2048"}, PP_SCENARIO_ERROR_INVALID_VALUE, "out of range"},
    {{"parallel.data=1048576", "parallel.tensor=96", "pipeline.stages=32", "model.layers=64"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     "GPUs, more than"},
    {{"parallel.data=4", "hardware.devices=8"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     "devices = 8 is fewer than the 16 GPUs"},
    {{"model.recompute=some"}, PP_SCENARIO_ERROR_INVALID_VALUE, "none, selective, full"},
    {{"hardware.internode_gbps=0"}, PP_SCENARIO_ERROR_INVALID_VALUE, "internode_gbps = '0'"},
    {{"hardware.gpus_per_node=0"}, PP_SCENARIO_ERROR_INVALID_VALUE, "gpus_per_node = '0'"},
    {{"hardware.nics_per_node=0"}, PP_SCENARIO_ERROR_INVALID_VALUE, "nics_per_node = '0'"},
    {{"hardware.kernel_eff_half_hidden=-1"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     "kernel_eff_half_hidden = '-1'"},
    {{"pipeline.chunks=2"}, PP_SCENARIO_ERROR_INCONSISTENT, "interleaved, zb-v, dualpipe-v"},
    {{"parallel.tensor=8", "parallel.tp_comm_overlap=true"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     "sequence_parallel = false with tensor = 8"},
    {{"parallel.tp_comm_overlap=often"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     "[parallel] tp_comm_overlap = 'often'"},
};

START_TEST(test_parallel_errors) {
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc =
        pp_scenario_load_data(test_base, "bad.ini", bad_cases[_i].overrides, &error);
    ck_assert_ptr_null(sc);
    ck_assert_msg(g_error_matches(error, PP_SCENARIO_ERROR, bad_cases[_i].code), "%s",
                  error->message);
    ck_assert_msg(strstr(error->message, bad_cases[_i].needle) != NULL, "%s", error->message);
}
END_TEST

/* Data replicas need link figures; dynamic PACI refuses them. */
START_TEST(test_dp_needs_hardware) {
    static const char costs[] = "[model]\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\n"
                                "vocab = 100\n[pipeline]\nschedule = paci\nstages = 2\n"
                                "microbatch_size = 1\naccumulation = 2\n[parallel]\ndata = 2\n"
                                "[costs]\nforward_us = 1\nbackward_us = 1\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(costs, "costs.ini", NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_ptr_null(cost);
    ck_assert_ptr_nonnull(strstr(error->message, "parallel.data = 2"));

    const char *const dyn[] = {"parallel.data=2", NULL};
    g_autoptr(PpScenario) hw = test_load(dyn);
    g_autoptr(SimCostModel) c = test_cost(hw);
    PpScheduleParams params = test_util_schedule_params("paci", 4, 0, 0, 2, 2);
    g_clear_error(&error);
    ck_assert_ptr_null(sim_engine_run_policy(&params, c, NULL, &error));
    ck_assert_ptr_nonnull(strstr(error->message, "data-parallel replicas"));
}
END_TEST

int main(void) {
    Suite *s = suite_create("sim-layout");
    TCase *tc = tcase_create("layout");
    tcase_add_loop_test(tc, test_stage_node, 0, G_N_ELEMENTS(node_cases));
    tcase_add_test(tc, test_allreduce);
    tcase_add_test(tc, test_ring);
    tcase_add_test(tc, test_activation_table);
    suite_add_tcase(s, tc);

    tc = tcase_create("cost");
    tcase_add_test(tc, test_cost_tensor);
    tcase_add_test(tc, test_cost_tensor_spanning);
    tcase_add_test(tc, test_cost_tensor_overlap);
    tcase_add_test(tc, test_cost_recompute);
    tcase_add_test(tc, test_cost_zero1);
    tcase_add_test(tc, test_cost_busbw);
    tcase_add_test(tc, test_cost_collective);
    tcase_add_test(tc, test_collective_bad);
    tcase_add_test(tc, test_cost_hops);
    tcase_add_test(tc, test_cost_hidden_term);
    suite_add_tcase(s, tc);

    tc = tcase_create("engine");
    tcase_add_loop_test(tc, test_dp_sync_1f1b, 0, G_N_ELEMENTS(dp_cases));
    tcase_add_test(tc, test_dp_sync_chunks);
    tcase_add_loop_test(tc, test_dp_sync_async, 0, G_N_ELEMENTS(async_kinds));
    tcase_add_test(tc, test_job_figures);
    suite_add_tcase(s, tc);

    tc = tcase_create("scenario");
    tcase_add_test(tc, test_parallel_keys);
    tcase_add_loop_test(tc, test_parallel_errors, 0, G_N_ELEMENTS(bad_cases));
    tcase_add_test(tc, test_dp_needs_hardware);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
