/* SPDX-License-Identifier: MIT
 * pp-memory-advice.c: pp_memory_advice() and pp_memory_over() (pp-memory-advice.h).
 */
#include "pp-memory-advice.h"

#include "pp-memory.h"

#define PP_ADVICE_GIB ((double)(1 << 30))

char *pp_memory_advice(const PpScenario *sc) {
    GString *out = g_string_new("what lowers it: ");
    if (sc->pipeline.microbatch_size > 1)
        g_string_append_printf(out,
                               "a smaller pipeline.microbatch_size (now %d: activations scale "
                               "with it); ",
                               sc->pipeline.microbatch_size);
    switch (pp_scenario_recompute(sc)) {
    case PP_RECOMPUTE_NONE:
        g_string_append(out, "model.recompute = selective (attention's scores) or full (only "
                             "each layer's input is kept; now none); ");
        break;
    case PP_RECOMPUTE_SELECTIVE:
        g_string_append(out, "more model.recompute_modules (mlp, moe: whole FFNs) or "
                             "model.recompute = full (now selective); ");
        break;
    case PP_RECOMPUTE_OP:
        g_string_append(out, "model.recompute = full (now op); ");
        break;
    case PP_RECOMPUTE_FULL:
        break;
    }
    if (!sc->model.flash_attention && pp_scenario_recompute(sc) == PP_RECOMPUTE_NONE)
        g_string_append(out, "model.flash_attention = true (the scores are never stored); ");
    g_string_append_printf(out, "more pipeline.stages (now %d: fewer layers per device); ",
                           sc->pipeline.stages);
    g_string_append_printf(out, "more parallel.tensor (now %d); ", sc->parallel.tensor);
    g_string_append_printf(out,
                           "more parallel.context (now %d: each rank holds seq_len / context "
                           "tokens' activations); ",
                           sc->parallel.context);
    if (sc->model.experts > sc->parallel.expert)
        g_string_append_printf(out,
                               "more parallel.expert (now %d: fewer of the %d routed experts per "
                               "device); ",
                               sc->parallel.expert, sc->model.experts);
    if (!sc->parallel.distributed_optimizer && sc->parallel.data > 1)
        g_string_append_printf(out,
                               "parallel.distributed_optimizer = true (shards the master weights "
                               "and Adam's moments over the %d data replicas); ",
                               sc->parallel.data);
    if (!sc->parallel.fsdp && (int64_t)sc->parallel.data * sc->parallel.context > 1)
        g_string_append_printf(out,
                               "parallel.fsdp = true (ZeRO-3: shards the bf16 weights and "
                               "gradients too over the %" G_GINT64_FORMAT " data x context "
                               "replicas); ",
                               (int64_t)sc->parallel.data * sc->parallel.context);
    g_string_append(out, "or a larger device (hardware.memory_gib)");
    return g_string_free(out, FALSE);
}

char *pp_memory_over(int64_t need_bytes, int64_t limit_bytes) {
    return g_strdup_printf(
        "%.3f GiB, %.3f GiB over the device's %.3f GiB", (double)need_bytes / PP_ADVICE_GIB,
        (double)(need_bytes - limit_bytes) / PP_ADVICE_GIB, (double)limit_bytes / PP_ADVICE_GIB);
}
