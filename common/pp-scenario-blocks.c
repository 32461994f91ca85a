/* SPDX-License-Identifier: MIT
 * pp-scenario-blocks.c: the [model] keys of multi-head latent attention and mixtures of
 * experts and the [parallel] expert and context keys, checked against each other and the
 * layout (docs/cost-model.md, "Multi-head latent attention and mixtures of experts";
 * docs/cluster.md, "Context parallelism"); derives expert_ffn_hidden and parallel.expert_tensor
 * when absent.
 */
#include "pp-error.h"
#include "pp-scenario-private.h"

/* attention = mla needs its latent and head widths; mha takes none of them. */
static gboolean pp_scenario_check_mla(const PpScenario *sc, GError **error) {
    const PpModelParams *m = &sc->model;
    const struct {
        const char *key;
        int32_t     value;
        gboolean    needed; /* > 0 with mla */
    } keys[] = {
        {"q_lora_rank", m->q_lora_rank, FALSE},
        {"kv_lora_rank", m->kv_lora_rank, TRUE},
        {"qk_nope_head_dim", m->qk_nope_head_dim, TRUE},
        {"qk_rope_head_dim", m->qk_rope_head_dim, FALSE},
        {"v_head_dim", m->v_head_dim, TRUE},
    };
    const gboolean mla = pp_scenario_attention_mla(sc);
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (mla && keys[i].needed && keys[i].value == 0)
            return pp_scenario_inconsistent(
                sc, error,
                "[model] attention = mla needs [model] %s > 0 (DeepSeek-V3: kv_lora_rank 512, "
                "qk_nope_head_dim 128, v_head_dim 128)",
                keys[i].key);
        if (!mla && keys[i].value != 0)
            return pp_scenario_inconsistent(
                sc, error,
                "[model] %s = %d belongs to multi-head latent attention, but [model] attention "
                "= %s; set attention = mla or remove %s",
                keys[i].key, keys[i].value, m->attention, keys[i].key);
    }
    return TRUE;
}

/* experts > 0: 1 <= experts_per_token <= experts, dense_layers < layers, moe_capacity_factor
 * x experts_per_token <= experts; experts = 0 takes none of the other expert keys, no expert
 * parallelism and no capacity factor. */
static gboolean pp_scenario_check_experts(PpScenario *sc, GError **error) {
    PpModelParams          *m = &sc->model;
    const PpParallelParams *par = &sc->parallel;
    if (m->expert_ffn_hidden < 0)
        m->expert_ffn_hidden = m->ffn_hidden;
    if (m->experts == 0) {
        if (m->experts_per_token != 0 || m->shared_experts != 0 || m->dense_layers != 0 ||
            par->expert != 1)
            return pp_scenario_inconsistent(
                sc, error,
                "[model] experts = 0 (a dense model) but [model] experts_per_token = %d, "
                "shared_experts = %d, dense_layers = %d, [parallel] expert = %d; give experts "
                "> 0 for a mixture of experts, or leave those at 0, 0, 0 and 1",
                m->experts_per_token, m->shared_experts, m->dense_layers, par->expert);
        if (par->moe_capacity_factor > 0.0)
            return pp_scenario_inconsistent(
                sc, error,
                "[parallel] moe_capacity_factor = %g sizes the experts' capacity, but [model] "
                "experts = 0 (a dense model); remove it or give experts > 0",
                par->moe_capacity_factor);
        return TRUE;
    }
    if (m->experts_per_token < 1 || m->experts_per_token > m->experts)
        return pp_scenario_inconsistent(sc, error,
                                        "[model] experts_per_token = %d: each token runs "
                                        "through 1..experts = %d routed experts",
                                        m->experts_per_token, m->experts);
    /* Megatron picks each expert's capacity tokens by a top-k over the rank's tokens: at
     * most all of them, factor x K / E <= 1 */
    if (par->moe_capacity_factor * m->experts_per_token > m->experts)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] moe_capacity_factor = %g gives each expert more than every token of a "
            "rank (factor x [model] experts_per_token = %d > experts = %d); use 0 (dropless) "
            "or at most %g",
            par->moe_capacity_factor, m->experts_per_token, m->experts,
            (double)m->experts / m->experts_per_token);
    if (m->dense_layers >= m->layers)
        return pp_scenario_inconsistent(
            sc, error,
            "[model] dense_layers = %d leaves none of the [model] layers = %d to the experts; "
            "use 0..%d (or experts = 0 for a dense model)",
            m->dense_layers, m->layers, m->layers - 1);
    return TRUE;
}

/* The expert layout: expert divides experts, expert_tensor the expert's FFN width, and the
 * expert x expert_tensor ranks of an MoE layer tile the tensor x data ranks of its stage;
 * shared experts split over tensor like a dense FFN. A dense model ignores expert_tensor
 * (a saved scenario writes it; its tensor may change later). */
static gboolean pp_scenario_check_expert_layout(PpScenario *sc, GError **error) {
    const PpModelParams *m = &sc->model;
    PpParallelParams    *par = &sc->parallel;
    if (par->expert_tensor < 0)
        par->expert_tensor = par->tensor;
    if (m->experts == 0)
        return TRUE; /* a dense model runs no expert groups */
    if (m->experts % par->expert != 0)
        return pp_scenario_inconsistent(sc, error,
                                        "[parallel] expert = %d does not divide [model] experts "
                                        "= %d; every expert-parallel rank holds experts / expert "
                                        "of them, choose a divisor",
                                        par->expert, m->experts);
    if (m->expert_ffn_hidden % par->expert_tensor != 0 ||
        (m->shared_experts > 0 && m->expert_ffn_hidden % par->tensor != 0))
        return pp_scenario_inconsistent(
            sc, error,
            "[model] expert_ffn_hidden = %d is not a multiple of [parallel] expert_tensor = %d "
            "(routed experts) or tensor = %d (shared experts); choose divisors of it",
            m->expert_ffn_hidden, par->expert_tensor, par->tensor);
    int64_t span = (int64_t)par->expert * par->expert_tensor;
    int64_t ranks = (int64_t)par->tensor * par->context * par->data;
    if (ranks % span != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] expert = %d times expert_tensor = %d (%" G_GINT64_FORMAT " ranks) does "
            "not divide tensor = %d times context = %d times data = %d (%" G_GINT64_FORMAT
            " ranks per stage): the expert groups are carved out of a stage's ranks; choose a "
            "divisor",
            par->expert, par->expert_tensor, span, par->tensor, par->context, par->data, ranks);
    return TRUE;
}

/* Context parallelism with causal load balancing cuts every sequence into 2C chunks (rank i
 * holds chunks i and 2C - 1 - i), so 2C must divide seq_len. The all-to-all (Ulysses) gives
 * each rank 1/C of a tensor rank's heads, query and key/value heads alike (MLA materialises a
 * key and a value per query head), so C divides both. */
static gboolean pp_scenario_check_context(const PpScenario *sc, GError **error) {
    const int32_t C = sc->parallel.context, T = sc->parallel.tensor;
    if (C > 1 && sc->model.seq_len % (2 * C) != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[model] seq_len = %d is not a multiple of 2 x [parallel] context = %d: causal "
            "load balancing gives each context-parallel rank two of 2 x context equal chunks of "
            "every sequence; choose a context that divides seq_len / 2",
            sc->model.seq_len, C);
    if (C < 2 || pp_scenario_context_comm(sc) != PP_CONTEXT_COMM_A2A)
        return TRUE;
    const int32_t kv = pp_scenario_attention_mla(sc) ? sc->model.heads : sc->model.kv_heads;
    if ((sc->model.heads / T) % C != 0 || (kv / T) % C != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] context_comm = a2a splits each tensor rank's heads over context = %d "
            "ranks, but [model] heads = %d and key/value heads %d over tensor = %d leave %d and "
            "%d; choose a context dividing both, or context_comm = ring",
            C, sc->model.heads, kv, T, sc->model.heads / T, kv / T);
    return TRUE;
}

gboolean pp_scenario_check_blocks(PpScenario *sc, GError **error) {
    return pp_scenario_check_mla(sc, error) && pp_scenario_check_experts(sc, error) &&
           pp_scenario_check_expert_layout(sc, error) && pp_scenario_check_context(sc, error);
}
