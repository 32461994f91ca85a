/* SPDX-License-Identifier: MIT
 * pp-scenario-check.c: the scenario's derived values (batch, layer shape, layout, gradient bytes,
 * [costs] scalars, warmup) and the consistency checks across keys, run once the keys are parsed.
 */
#include <string.h>

#include "pp-error.h"
#include "pp-scenario-private.h"

/* --- derived values and consistency --- */

/* global_batch = microbatch_size * k * parallel.data, k per the schedule's batch rule; fills
 * whichever of the two is absent. */
static gboolean pp_scenario_derive_batch(PpScenario *sc, GError **error) {
    PpPipelineParams      *p = &sc->pipeline;
    int32_t               *gb = &sc->training.global_batch;
    const PpSchedKindInfo *info = p->kind;
    const char            *count_key = "microbatches";
    int32_t                count = p->mb_per_step;
    switch (info->batch) {
    case PP_BATCH_MICROBATCHES:
        break;
    case PP_BATCH_ACCUMULATION:
        count_key = "accumulation";
        break;
    case PP_BATCH_SINGLE:
        count_key = NULL;
        break;
    }
    /* Every data replica runs the pipeline's micro-batches: the step's sequences are D times
     * one pipeline's. */
    const int32_t data = sc->parallel.data;
    g_autoptr(GString) factor_text = g_string_new(NULL);
    if (count_key != NULL)
        g_string_append_printf(factor_text, " * [pipeline] %s = %d", count_key, count);
    if (data > 1)
        g_string_append_printf(factor_text, " * [parallel] data = %d", data);
    const char *factor = factor_text->str;
    if ((int64_t)count * data > G_MAXINT32)
        return pp_scenario_inconsistent(sc, error, "the step's micro-batches%s exceed %d", factor,
                                        G_MAXINT32);
    count *= data;

    if (p->microbatch_size < 0 && *gb < 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_MISSING_KEY,
                    "%s: missing key [training] global_batch or [pipeline] microbatch_size; "
                    "give one (schedule %s: global_batch = microbatch_size%s%s%s)",
                    sc->path, p->schedule, count_key ? " * " : "", count_key ? count_key : "",
                    data > 1 ? " * data" : "");
        return FALSE;
    }
    if (p->microbatch_size < 0) {
        if (*gb % count != 0) {
            if (data > 1)
                g_string_append_printf(factor_text, " = %d", count);
            return pp_scenario_inconsistent(
                sc, error,
                "[training] global_batch = %d is not a multiple of %s (schedule %s); "
                "change one, or give [pipeline] microbatch_size",
                *gb, factor_text->str + 3, p->schedule);
        }
        p->microbatch_size = *gb / count;
        return TRUE;
    }
    if ((int64_t)p->microbatch_size * count > G_MAXINT32)
        return pp_scenario_inconsistent(sc, error, "[pipeline] microbatch_size = %d%s is too large",
                                        p->microbatch_size, factor);
    int32_t product = p->microbatch_size * count;
    if (*gb < 0) {
        *gb = product;
        return TRUE;
    }
    if (*gb != product)
        return pp_scenario_inconsistent(
            sc, error,
            "[training] global_batch = %d but [pipeline] microbatch_size = %d%s gives %d "
            "sequences per step (schedule %s); set global_batch = %d or omit one of them",
            *gb, p->microbatch_size, factor, product, p->schedule, product);
    return TRUE;
}

/* Checks that a per-stage [costs] list named @key holds 1 or pipeline.stages values (or none:
 * absent) and returns its largest entry in *@max_ns (0 when absent). */
static gboolean pp_scenario_check_stage_list(const PpScenario *sc, const char *key,
                                             const int64_t *list, int32_t n, int64_t *max_ns,
                                             GError **error) {
    *max_ns = 0;
    for (int32_t i = 0; i < n; i++)
        *max_ns = MAX(*max_ns, list[i]);
    if (n <= 1 || n == sc->pipeline.stages)
        return TRUE;
    return pp_scenario_inconsistent(sc, error,
                                    "[costs] %s has %d values but [pipeline] stages = %d; give "
                                    "one value for every stage or one per stage",
                                    key, n, sc->pipeline.stages);
}

/* The scalar [costs] fields: each per-stage list's largest entry, after checking its length. */
static gboolean pp_scenario_derive_costs(PpScenario *sc, GError **error) {
    PpCostParams *c = &sc->costs;
    int64_t       extra_max = 0; /* unused: no scalar for fused_backward_us and stash_us */
    if (!c->set)
        return TRUE;
    return pp_scenario_check_stage_list(sc, "forward_us", c->forward_stage_ns, c->n_forward_stage,
                                        &c->forward_ns, error) &&
           pp_scenario_check_stage_list(sc, "backward_us", c->backward_stage_ns,
                                        c->n_backward_stage, &c->backward_ns, error) &&
           pp_scenario_check_stage_list(sc, "weight_us", c->weight_stage_ns, c->n_weight_stage,
                                        &c->weight_ns, error) &&
           pp_scenario_check_stage_list(sc, "update_us", c->update_stage_ns, c->n_update_stage,
                                        &c->update_ns, error) &&
           pp_scenario_check_stage_list(sc, "fused_backward_us", c->fused_stage_ns,
                                        c->n_fused_stage, &extra_max, error) &&
           pp_scenario_check_stage_list(sc, "stash_us", c->stash_stage_ns, c->n_stash_stage,
                                        &extra_max, error);
}

/* A custom order fixes the run: its stages, its optimizer steps (U ops per stage; an order
 * without U ops is one step) and its micro-batches. pipeline.stages, training.steps (which
 * pacer-sim --steps sets) and pipeline.microbatches must say the same, or the reports would
 * describe another run. Errors come from reading the order (PP_SCHEDULE_ERROR_PARSE) or are
 * PP_SCENARIO_ERROR_INCONSISTENT. */
static gboolean pp_scenario_check_order(const PpScenario *sc, GError **error) {
    const PpPipelineParams *p = &sc->pipeline;
    const PpSchedKindInfo  *kind = p->kind;
    PpScheduleParams        params = {.kind = kind, .order_file = p->order_file};
    g_autoptr(GError) local = NULL;
    g_autoptr(PpSchedule) order = kind->build(&params, &local);
    if (order == NULL) {
        g_set_error(error, local->domain, local->code, "%s: %s", sc->path, local->message);
        return FALSE;
    }
    int32_t steps = MAX(order->n_steps, 1);
    if (order->n_stages != p->stages)
        return pp_scenario_inconsistent(
            sc, error, "[pipeline] stages = %d but order_file '%s' has %d stages; set stages = %d",
            p->stages, p->order_file, order->n_stages, order->n_stages);
    if (sc->training.steps != steps)
        return pp_scenario_inconsistent(
            sc, error,
            "[training] steps = %d but order_file '%s' runs %d optimizer steps (U ops per "
            "stage); a custom order fixes its steps: set steps = %d (pacer-sim --steps sets "
            "training.steps)",
            sc->training.steps, p->order_file, steps, steps);
    if ((int64_t)p->microbatches * steps != order->n_mb)
        return pp_scenario_inconsistent(
            sc, error,
            "[pipeline] microbatches = %d per step but order_file '%s' runs %d micro-batches "
            "in %d steps; give the order's micro-batches per step%s",
            p->microbatches, p->order_file, order->n_mb, steps,
            order->n_mb % steps == 0 ? "" : " (the order's steps must be equal)");
    return TRUE;
}

/* [parallel] against [model] and [hardware]: tensor divides the heads, the job's GPUs fit
 * int32_t and the devices; derives hardware.devices, gpus_per_node and the inter-node link
 * when absent. */
static gboolean pp_scenario_check_layout(PpScenario *sc, GError **error) {
    const PpParallelParams *par = &sc->parallel;
    PpHardwareParams       *hw = &sc->hardware;
    if (sc->model.heads % par->tensor != 0 || sc->model.hidden % par->tensor != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] tensor = %d does not divide [model] heads = %d and hidden = %d; "
            "tensor parallelism splits whole heads, choose a divisor of both",
            par->tensor, sc->model.heads, sc->model.hidden);
    if (sc->model.kv_heads % par->tensor != 0 || sc->model.ffn_hidden % par->tensor != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] tensor = %d does not divide [model] kv_heads = %d and ffn_hidden = %d; "
            "tensor parallelism splits whole key/value heads and the FFN's columns (Megatron "
            "needs both), choose a divisor of both",
            par->tensor, sc->model.kv_heads, sc->model.ffn_hidden);
    if (par->tp_comm_overlap && par->tensor > 1 && !par->sequence_parallel)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] tp_comm_overlap = true overlaps sequence parallelism's all-gathers and "
            "reduce-scatters, but [parallel] sequence_parallel = false with tensor = %d; set "
            "sequence_parallel = true or tp_comm_overlap = false",
            par->tensor);
    if (!par->fsdp && pp_scenario_fsdp_impl(sc) != PP_FSDP_MEGATRON)
        return pp_scenario_inconsistent(sc, error,
                                        "[parallel] fsdp_impl = %s needs [parallel] fsdp = true; "
                                        "set fsdp = true or leave fsdp_impl out",
                                        par->fsdp_impl);
    int64_t gpus = pp_scenario_gpus(sc);
    if (gpus > G_MAXINT32)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] data = %d times tensor = %d times context = %d times [pipeline] "
            "stages = %d is %" G_GINT64_FORMAT " GPUs, more than %d; lower one of them",
            par->data, par->tensor, par->context, sc->pipeline.stages, gpus, G_MAXINT32);
    if (hw->devices < 0)
        hw->devices = (int32_t)gpus;
    if (hw->devices < gpus)
        return pp_scenario_inconsistent(
            sc, error,
            "[hardware] devices = %d is fewer than the %" G_GINT64_FORMAT
            " GPUs of the layout ([parallel] data = %d x tensor = %d x context = %d x "
            "[pipeline] stages = %d); each stage of each replica needs its own devices; raise "
            "devices or omit it",
            hw->devices, gpus, par->data, par->tensor, par->context, sc->pipeline.stages);
    if (hw->gpus_per_node < 0)
        hw->gpus_per_node = hw->devices; /* one node */
    if (hw->internode_bw_bytes_per_s < 0.0)
        hw->internode_bw_bytes_per_s = hw->link_bw_bytes_per_s;
    if (hw->internode_latency_ns < 0)
        hw->internode_latency_ns = hw->link_latency_ns;
    return TRUE;
}

/* model.recompute_modules: Megatron's module names, with recompute = selective only;
 * mla_up_proj needs MLA (as Megatron-Core's TransformerConfig checks). */
static gboolean pp_scenario_check_recompute_modules(const PpScenario *sc, GError **error) {
    const PpModelParams *m = &sc->model;
    if (m->recompute_modules == NULL)
        return TRUE;
    if (pp_scenario_recompute(sc) != PP_RECOMPUTE_SELECTIVE) {
        g_autofree char *list = g_strjoinv(",", m->recompute_modules);
        return pp_scenario_inconsistent(
            sc, error,
            "[model] recompute_modules = %s applies to selective recomputation only (Megatron's "
            "recompute_granularity = selective), but [model] recompute = %s; set recompute = "
            "selective or leave recompute_modules out",
            list, m->recompute);
    }
    for (char **name = m->recompute_modules; *name != NULL; name++) {
        guint module;
        if (!pp_recompute_module_lookup(*name, &module)) {
            g_autoptr(GString) valid = g_string_new(NULL);
            for (guint i = 0; i < PP_RECOMPUTE_N_MODULES; i++)
                g_string_append_printf(valid, "%s%s", i ? ", " : "", pp_recompute_module_name(i));
            return pp_scenario_inconsistent(
                sc, error, "[model] recompute_modules: unknown module '%s'; valid: %s", *name,
                valid->str);
        }
        if (module == PP_RECOMPUTE_MODULE_MLA_UP_PROJ && !pp_scenario_attention_mla(sc))
            return pp_scenario_inconsistent(
                sc, error,
                "[model] recompute_modules = mla_up_proj needs multi-head latent attention, but "
                "[model] attention = %s; set attention = mla or drop mla_up_proj",
                m->attention);
    }
    return TRUE;
}

/* The layer keys beyond GPT-2's: head_dim = hidden / heads (which must then divide), kv_heads
 * = heads and ffn_hidden = 4 * hidden when absent; kv_heads must divide heads. */
static gboolean pp_scenario_derive_layer(PpScenario *sc, GError **error) {
    PpModelParams *m = &sc->model;
    if (m->head_dim < 0) {
        if (m->hidden % m->heads != 0)
            return pp_scenario_inconsistent(
                sc, error,
                "[model] hidden = %d is not a multiple of [model] heads = %d; "
                "choose heads that divide hidden (or give [model] head_dim)",
                m->hidden, m->heads);
        m->head_dim = m->hidden / m->heads;
    }
    if (m->kv_heads < 0)
        m->kv_heads = m->heads;
    if (m->heads % m->kv_heads != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[model] kv_heads = %d does not divide [model] heads = %d; grouped-query attention "
            "shares each key/value head among heads / kv_heads query heads: choose a divisor "
            "of heads (1..%d)",
            m->kv_heads, m->heads, m->heads);
    if (m->ffn_hidden < 0) {
        if ((int64_t)m->hidden * 4 > (int64_t)PP_FFN_MAX)
            return pp_scenario_inconsistent(sc, error,
                                            "[model] ffn_hidden = 4 * hidden = %" G_GINT64_FORMAT
                                            " exceeds %.0f; give [model] ffn_hidden",
                                            (int64_t)m->hidden * 4, PP_FFN_MAX);
        m->ffn_hidden = m->hidden * 4;
    }
    if (!m->swiglu_fusion && !pp_scenario_ffn_gated(sc))
        return pp_scenario_inconsistent(
            sc, error,
            "[model] swiglu_fusion = false applies to ffn = swiglu only, but [model] ffn = %s; "
            "set ffn = swiglu or leave swiglu_fusion out",
            m->ffn);
    if (pp_scenario_recompute(sc) != PP_RECOMPUTE_FULL &&
        (m->recompute_num_layers != 1 || pp_scenario_recompute_method(sc) != PP_RECOMPUTE_UNIFORM))
        return pp_scenario_inconsistent(
            sc, error,
            "[model] recompute_method = %s, recompute_num_layers = %d apply to full "
            "recomputation only (Megatron's recompute_granularity = full), but [model] "
            "recompute = %s; set recompute = full or leave both keys out",
            m->recompute_method, m->recompute_num_layers, m->recompute);
    return pp_scenario_check_recompute_modules(sc, error);
}

gboolean pp_scenario_check(PpScenario *sc, GError **error) {
    const PpModelParams *m = &sc->model;
    PpPipelineParams    *p = &sc->pipeline;
    /* the kind and its micro-batches per step, resolved once (the key parser accepted only
     * registry names) */
    p->kind = pp_sched_kind_lookup(p->schedule);
    PP_ASSERT(p->kind != NULL);
    p->mb_per_step = pp_sched_kind_mb_per_step(p->kind, p->microbatches, p->accumulation);
    const PpSchedKindInfo *kind = p->kind;

    if (!pp_scenario_derive_layer(sc, error) || !pp_scenario_check_blocks(sc, error))
        return FALSE;
    if (p->stages > m->layers)
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] stages = %d exceeds [model] layers = %d; "
                                        "use at most %d stages",
                                        p->stages, m->layers, m->layers);
    if (p->chunks < kind->min_chunks || p->chunks > kind->max_chunks) {
        g_autofree char *multi = pp_sched_kind_multi_chunk_names();
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] chunks = %d but schedule %s runs %d..%d "
                                        "chunks per device; set chunks in that range (more "
                                        "than one chunk needs [pipeline] schedule = %s)",
                                        p->chunks, p->schedule, kind->min_chunks, kind->max_chunks,
                                        multi);
    }
    if ((int64_t)p->stages * p->chunks > m->layers)
        return pp_scenario_inconsistent(
            sc, error,
            "[pipeline] stages = %d times [pipeline] chunks = %d exceeds "
            "[model] layers = %d; every chunk needs a layer, lower stages or chunks",
            p->stages, p->chunks, m->layers);
    g_autoptr(GError) rule = NULL;
    if (!pp_sched_kind_check_microbatches(kind, p->stages, p->mb_per_step, &rule))
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] microbatches = %d, stages = %d: %s; change "
                                        "[pipeline] microbatches or stages",
                                        p->microbatches, p->stages, rule->message);
    if (kind->fixed_accumulation > 0 && p->accumulation != kind->fixed_accumulation)
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] accumulation = %d but schedule %s takes "
                                        "accumulation = %d (%s); set accumulation = %d or use "
                                        "schedule paci",
                                        p->accumulation, p->schedule, kind->fixed_accumulation,
                                        kind->summary, kind->fixed_accumulation);
    if (strcmp(p->mode, "dynamic") == 0 && !kind->has_policy) {
        g_autofree char *policy_kinds = pp_sched_kind_policy_names();
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] mode = dynamic runs the PACI policy but "
                                        "[pipeline] schedule = %s has none; use a schedule with "
                                        "a run-time policy (%s) or mode static",
                                        p->schedule, policy_kinds);
    }
    if (!pp_scenario_derive_batch(sc, error) || !pp_scenario_derive_costs(sc, error))
        return FALSE;

    if (kind->needs_order_file) {
        if (p->order_file == NULL)
            return pp_scenario_inconsistent(
                sc, error,
                "[pipeline] schedule = %s needs [pipeline] order_file; add the "
                "path of a CSV of per-stage op orders (stage,index,op,mb,chunk)",
                p->schedule);
        if (!g_file_test(p->order_file, G_FILE_TEST_IS_REGULAR)) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_NOT_FOUND,
                        "%s: [pipeline] order_file = '%s' does not exist or is not a file "
                        "(relative paths start at the scenario file's folder)",
                        sc->path, p->order_file);
            return FALSE;
        }
        if (!pp_scenario_check_order(sc, error))
            return FALSE;
    }

    if (!pp_scenario_check_layout(sc, error))
        return FALSE;
    if (sc->parallel.grad_bytes < 0) /* Megatron's gradient dtype for the precision */
        sc->parallel.grad_bytes = pp_scenario_grad_bytes(sc);
    if (pp_scenario_precision_fp8(sc) && sc->hardware.set && !(sc->hardware.peak_fp8_flops > 0.0))
        return pp_scenario_inconsistent(
            sc, error,
            "[model] precision = fp8 runs the matrix products at the device's fp8 rate, but "
            "[hardware]%s%s has none (peak_fp8_tflops = 0); give [hardware] peak_fp8_tflops "
            "(dense, in (0, %g]) or use precision = bf16",
            sc->hardware.preset ? " preset = " : "", sc->hardware.preset ? sc->hardware.preset : "",
            PP_RATE_MAX);

    if (sc->run.layers_per_stage != NULL) {
        int64_t sum = 0;
        int32_t want = p->stages * p->chunks;
        for (int32_t i = 0; i < sc->run.n_layers_per_stage; i++)
            sum += sc->run.layers_per_stage[i];
        if (sc->run.n_layers_per_stage != want)
            return pp_scenario_inconsistent(
                sc, error,
                "[run] layers_per_stage has %d entries but [pipeline] stages = %d "
                "times chunks = %d needs %d; give one entry per virtual stage",
                sc->run.n_layers_per_stage, p->stages, p->chunks, want);
        if (sum != m->layers)
            return pp_scenario_inconsistent(sc, error,
                                            "[run] layers_per_stage sums to %" G_GINT64_FORMAT
                                            " but [model] "
                                            "layers = %d; make the entries add up to %d",
                                            sum, m->layers, m->layers);
    }

    if (sc->run.devices != NULL && sc->run.n_devices != p->stages)
        return pp_scenario_inconsistent(sc, error,
                                        "[run] devices has %d entries but [pipeline] stages = %d; "
                                        "give one device id per stage (ids may repeat)",
                                        sc->run.n_devices, p->stages);

    PpOptimizerParams *o = &sc->optimizer;
    if (o->warmup_steps < 0)
        o->warmup_steps = sc->training.steps / 10;
    if (o->warmup_steps >= sc->training.steps)
        return pp_scenario_inconsistent(sc, error,
                                        "[optimizer] warmup_steps = %d is not below [training] "
                                        "steps = %d; the cosine decay needs at least one step "
                                        "after the warmup, use at most %d",
                                        o->warmup_steps, sc->training.steps,
                                        sc->training.steps - 1);
    if (o->min_lr > o->lr)
        return pp_scenario_inconsistent(sc, error,
                                        "[optimizer] min_lr = %g exceeds [optimizer] lr = %g; "
                                        "the cosine decay ends at min_lr <= lr",
                                        o->min_lr, o->lr);
    return TRUE;
}
