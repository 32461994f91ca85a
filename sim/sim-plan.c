/* SPDX-License-Identifier: MIT
 * sim-plan.c: the layout search behind pacer-sim plan (sim-plan.h). Candidates are listed
 * first (so progress can show a total), then each is checked against device memory by its
 * static bytes, built (the memory-constrained partition drops what cannot fit), simulated
 * and kept when its simulated peak fits. Everything is deterministic: the same input gives
 * the same ranking.
 */
#include "sim-plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "sim-report.h"

#define SIM_PLAN_GIB (1024.0 * 1024.0 * 1024.0)
/* Optimizer steps simulated per candidate: one for flush schedules (every step is the same),
 * enough for the asynchronous step time's middle half otherwise. */
#define SIM_PLAN_SYNC_STEPS  1
#define SIM_PLAN_ASYNC_STEPS 8
/* Progress is redrawn every this many candidates. */
#define SIM_PLAN_PROGRESS_EVERY 16

static const char *const sim_plan_recompute[] = {"none", "selective", "full"};

typedef struct {
    const PpSchedKindInfo *kind;
    const char            *schedule; /* borrowed from the options */
    int32_t                data, tensor, stages, chunks, microbatch_size, microbatches;
    int32_t                recompute; /* index into sim_plan_recompute */
    gboolean               static_fits;
} SimPlanCandidate;

static void sim_plan_row_clear(gpointer data) {
    SimPlanRow *row = data;
    g_free(row->schedule);
    g_free(row->recompute);
}

void sim_plan_free(SimPlan *plan) {
    if (plan == NULL)
        return;
    g_free(plan->scenario);
    if (plan->rows != NULL)
        g_array_unref(plan->rows);
    g_free(plan->first_error);
    g_free(plan);
}

/* The pipeline.accumulation candidate @m micro-batches per replica step give kind @info: a
 * kind that accumulates takes a = m (one update per replica batch), one with a fixed
 * accumulation that value, others 1. */
static int32_t sim_plan_accumulation(const PpSchedKindInfo *info, int32_t m) {
    if (info->fixed_accumulation > 0)
        return info->fixed_accumulation;
    return info->batch == PP_BATCH_ACCUMULATION ? m : 1;
}

/* Whether kind @info can run a replica step of @m micro-batches on @n stages: its batch rule
 * must make one update cover all m (pipedream and async-1f1b: m = 1 only), and its
 * micro-batch rule must accept them (pp_sched_kind_check_microbatches()). */
static gboolean sim_plan_kind_takes(const PpSchedKindInfo *info, int32_t n, int32_t m) {
    return pp_sched_kind_mb_per_step(info, m, sim_plan_accumulation(info, m)) == m &&
           pp_sched_kind_check_microbatches(info, n, m, NULL);
}

/* Parameters and optimizer state of the whole model on one GPU of a T x N grid, averaged
 * over the stages: a lower bound on the largest stage's static bytes (max >= mean). */
static double sim_plan_static_bytes(const PpScenario *sc, int32_t data, int32_t tensor,
                                    int32_t stages) {
    const double h = sc->model.hidden, V = sc->model.vocab, s = sc->model.seq_len;
    const double params =
        sc->model.layers * (12.0 * h * h + 13.0 * h) + (V * h + s * h) + (V * h + 2.0 * h);
    const double shard = sc->parallel.distributed_optimizer ? data : 1.0;
    /* bf16 weights 2 + gradients 2, fp32 master 4 and Adam moments 8 (sim-cost.c) */
    const double bytes_per_param = 4.0 + 12.0 / shard;
    return params / ((double)tensor * stages) * bytes_per_param;
}

/* Lists every candidate (see sim/README.md for the rules). */
static GArray *sim_plan_candidates(const PpScenario *base, const SimPlanOptions *o,
                                   int32_t global_batch) {
    GArray       *out = g_array_new(FALSE, TRUE, sizeof(SimPlanCandidate));
    const int32_t g = o->gpus, layers = base->model.layers;
    for (int32_t t = 1; t <= MIN(g, base->hardware.gpus_per_node); t++) {
        /* the scenario's own rule (pp-scenario-check.c): T divides the heads, the key/value heads,
         * the hidden and the FFN widths */
        if (g % t != 0 || base->model.heads % t != 0 || base->model.kv_heads % t != 0 ||
            base->model.hidden % t != 0 || base->model.ffn_hidden % t != 0)
            continue;
        for (int32_t n = 1; n <= MIN(g / t, layers); n++) {
            if ((g / t) % n != 0)
                continue;
            int32_t d = g / t / n;
            if (global_batch % d != 0)
                continue;
            int32_t  per_replica = global_batch / d;
            gboolean fits =
                sim_plan_static_bytes(base, d, t, n) <= (double)base->hardware.memory_bytes;
            for (int32_t b = 1; b <= MIN(per_replica, o->max_microbatch); b++) {
                if (per_replica % b != 0)
                    continue;
                int32_t m = per_replica / b;
                for (size_t k = 0; o->schedules[k] != NULL; k++) {
                    const PpSchedKindInfo *kind = pp_sched_kind_lookup(o->schedules[k]);
                    PP_ASSERT(kind != NULL);
                    if (!sim_plan_kind_takes(kind, n, m))
                        continue;
                    /* the record's chunk choices (each needs N v <= layers); several chunks on
                     * one stage are a one-chunk schedule with extra work: skipped */
                    int32_t chunks[PP_SCHED_PLAN_CHUNKS];
                    size_t  n_chunks = 0;
                    for (size_t c = 0; c < PP_SCHED_PLAN_CHUNKS; c++) {
                        int32_t v = kind->plan_chunks[c] > 0 ? kind->plan_chunks[c]
                                    : c == 0                 ? kind->min_chunks
                                                             : 0;
                        if (v == 0)
                            break;
                        if ((v == 1 || n > 1) && (int64_t)n * v <= layers)
                            chunks[n_chunks++] = v;
                    }
                    for (size_t c = 0; c < n_chunks; c++) {
                        for (int32_t r = 0; r < (int32_t)G_N_ELEMENTS(sim_plan_recompute); r++) {
                            /* flash attention already drops what selective would recompute */
                            if (r == 1 && base->model.flash_attention)
                                continue;
                            SimPlanCandidate cand = {.kind = kind,
                                                     .schedule = o->schedules[k],
                                                     .data = d,
                                                     .tensor = t,
                                                     .stages = n,
                                                     .chunks = chunks[c],
                                                     .microbatch_size = b,
                                                     .microbatches = m,
                                                     .recompute = r,
                                                     .static_fits = fits};
                            g_array_append_val(out, cand);
                        }
                    }
                }
            }
        }
    }
    return out;
}

/* The overrides that turn the scenario into candidate @c (after the user's @overrides). */
static GStrv sim_plan_overrides(const char *const *overrides, const SimPlanCandidate *c,
                                int32_t global_batch, int32_t gpus) {
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    for (size_t i = 0; overrides != NULL && overrides[i] != NULL; i++)
        g_strv_builder_add(b, overrides[i]);
    gboolean         sync = c->kind->sync != PP_SCHED_ASYNC;
    g_autofree char *kind = g_strdup_printf("pipeline.schedule=%s", c->schedule);
    g_autofree char *stages = g_strdup_printf("pipeline.stages=%d", c->stages);
    g_autofree char *chunks = g_strdup_printf("pipeline.chunks=%d", c->chunks);
    g_autofree char *m = g_strdup_printf("pipeline.microbatches=%d", c->microbatches);
    g_autofree char *a = g_strdup_printf("pipeline.accumulation=%d",
                                         sim_plan_accumulation(c->kind, c->microbatches));
    g_autofree char *mbs = g_strdup_printf("pipeline.microbatch_size=%d", c->microbatch_size);
    g_autofree char *gb = g_strdup_printf("training.global_batch=%d", global_batch);
    g_autofree char *steps =
        g_strdup_printf("training.steps=%d", sync ? SIM_PLAN_SYNC_STEPS : SIM_PLAN_ASYNC_STEPS);
    g_autofree char *data = g_strdup_printf("parallel.data=%d", c->data);
    g_autofree char *tensor = g_strdup_printf("parallel.tensor=%d", c->tensor);
    g_autofree char *sp =
        g_strdup_printf("parallel.sequence_parallel=%s", c->tensor > 1 ? "true" : "false");
    g_autofree char  *rc = g_strdup_printf("model.recompute=%s", sim_plan_recompute[c->recompute]);
    g_autofree char  *devices = g_strdup_printf("hardware.devices=%d", gpus);
    const char *const mine[] = {kind,  stages, chunks, m,  a,  mbs,    gb,
                                steps, data,   tensor, sp, rc, devices};
    for (size_t i = 0; i < G_N_ELEMENTS(mine); i++)
        g_strv_builder_add(b, mine[i]);
    /* the plan sets the mode: the static program */
    g_strv_builder_add(b, "pipeline.mode=static");
    return g_strv_builder_end(b);
}

/* Simulates candidate @c; appends its row when it fits, and counts the outcome. */
static void sim_plan_try(SimPlan *plan, const char *path, const char *const *overrides,
                         const SimPlanCandidate *c) {
    if (!c->static_fits) {
        plan->n_static++;
        return;
    }
    g_auto(GStrv) ov = sim_plan_overrides(overrides, c, plan->global_batch, plan->gpus);
    g_autoptr(GError) error = NULL;
    PpScenario *sc = pp_scenario_load(path, (const char *const *)ov, &error);
    g_autoptr(SimJob) job = sc != NULL ? sim_job_new_from_scenario(sc, FALSE, &error) : NULL;
    if (job == NULL) {
        /* A scenario that loads but has no layer split within memory fails in the partition,
         * before the engine runs. */
        if (sc != NULL &&
            g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT)) {
            plan->n_partition++;
        } else {
            plan->n_failed++;
            if (plan->first_error == NULL)
                plan->first_error = g_strdup(error->message);
        }
        return;
    }
    plan->n_simulated++;
    const SimResult *res = job->result;
    if (res->peak_memory_bytes > plan->memory_bytes) {
        plan->n_over_memory++;
        return;
    }
    SimPlanRow row = {
        .schedule = g_strdup(c->schedule),
        .data = c->data,
        .tensor = c->tensor,
        .stages = c->stages,
        .chunks = c->chunks,
        .microbatch_size = c->microbatch_size,
        .microbatches = c->microbatches,
        .recompute = g_strdup(sim_plan_recompute[c->recompute]),
        .tokens_per_s = res->throughput_tokens_per_s,
        .step_time_ns = res->step_time_ns,
        .mfu = res->mfu,
        .peak_memory_bytes = res->peak_memory_bytes,
        .delta_max = res->delta_max,
    };
    g_array_append_val(plan->rows, row);
}

/* Best throughput first; ties: less memory, then enumeration order (the append index is the
 * last key, so the order is total and the ranking deterministic). */
typedef struct {
    SimPlanRow row;
    guint      index;
} SimPlanSortItem;

static gint sim_plan_cmp(gconstpointer pa, gconstpointer pb) {
    const SimPlanSortItem *a = pa, *b = pb;
    if (a->row.tokens_per_s != b->row.tokens_per_s)
        return a->row.tokens_per_s > b->row.tokens_per_s ? -1 : 1;
    if (a->row.peak_memory_bytes != b->row.peak_memory_bytes)
        return a->row.peak_memory_bytes < b->row.peak_memory_bytes ? -1 : 1;
    return a->index < b->index ? -1 : (a->index > b->index);
}

static void sim_plan_sort(GArray *rows) {
    g_autofree SimPlanSortItem *items = g_new(SimPlanSortItem, MAX(rows->len, 1));
    for (guint i = 0; i < rows->len; i++)
        items[i] = (SimPlanSortItem){g_array_index(rows, SimPlanRow, i), i};
    qsort(items, rows->len, sizeof *items, sim_plan_cmp);
    for (guint i = 0; i < rows->len; i++)
        g_array_index(rows, SimPlanRow, i) = items[i].row;
}

static void sim_plan_progress(const SimPlan *plan, guint done, guint total) {
    fprintf(stderr,
            "\rplan: %u/%u layouts, %" G_GINT64_FORMAT " simulated, %" G_GINT64_FORMAT " fit", done,
            total, plan->n_simulated, (int64_t)plan->rows->len);
    if (done == total)
        fputs("\n", stderr);
    fflush(stderr);
}

SimPlan *sim_plan_run(const char *path, const char *const *overrides, const SimPlanOptions *o,
                      GError **error) {
    g_autoptr(PpScenario) base = pp_scenario_load(path, overrides, error);
    if (base == NULL)
        return NULL;
    if (!base->hardware.set || base->costs.set) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: plan needs the analytic cost model: a [hardware] section (preset or "
                    "keys) and no [costs]",
                    path);
        return NULL;
    }
    int32_t global_batch = o->global_batch > 0 ? o->global_batch : base->training.global_batch;
    g_autoptr(SimPlan) plan = g_new0(SimPlan, 1);
    plan->scenario = g_strdup(path);
    plan->gpus = o->gpus;
    plan->global_batch = global_batch;
    plan->memory_bytes = base->hardware.memory_bytes;
    plan->rows = g_array_new(FALSE, TRUE, sizeof(SimPlanRow));
    g_array_set_clear_func(plan->rows, sim_plan_row_clear);

    g_autoptr(GArray) cands = sim_plan_candidates(base, o, global_batch);
    plan->n_layouts = cands->len;
    if (cands->len == 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: no layout of %d GPUs with global batch %d: data x tensor x stages "
                    "must equal the GPUs, tensor divide model.heads, kv_heads, hidden and "
                    "ffn_hidden and be at most hardware.gpus_per_node = %d, stages be at most "
                    "model.layers = %d, and the data replicas divide the global batch",
                    path, o->gpus, global_batch, base->hardware.gpus_per_node, base->model.layers);
        return NULL;
    }
    for (guint i = 0; i < cands->len; i++) {
        sim_plan_try(plan, path, overrides, &g_array_index(cands, SimPlanCandidate, i));
        if (o->progress && ((i + 1) % SIM_PLAN_PROGRESS_EVERY == 0 || i + 1 == cands->len))
            sim_plan_progress(plan, i + 1, cands->len);
    }
    sim_plan_sort(plan->rows);
    return g_steal_pointer(&plan);
}

char *sim_plan_format(const SimPlan *plan, int32_t top) {
    GString *out = g_string_new(NULL);
    g_string_append_printf(out,
                           "plan        %s: %d GPUs, global batch %d sequences\n"
                           "layouts     %" G_GINT64_FORMAT " enumerated: %" G_GINT64_FORMAT
                           " dropped by static memory, %" G_GINT64_FORMAT
                           " by the memory-constrained partition, %" G_GINT64_FORMAT
                           " simulated (%" G_GINT64_FORMAT " over memory), %u fit",
                           plan->scenario, plan->gpus, plan->global_batch, plan->n_layouts,
                           plan->n_static, plan->n_partition, plan->n_simulated,
                           plan->n_over_memory, plan->rows->len);
    if (plan->n_failed > 0)
        g_string_append_printf(out, ", %" G_GINT64_FORMAT " failed (first: %s)", plan->n_failed,
                               plan->first_error);
    g_string_append(out, "\n\n");
    g_string_append(out, "rank  schedule       D    T    N   v   b     m  recompute       "
                         "tokens/s     MFU     step ms  peak GiB  \xce\x94max\n");
    for (guint i = 0; i < plan->rows->len && (int32_t)i < top; i++) {
        const SimPlanRow *r = &g_array_index(plan->rows, SimPlanRow, i);
        g_string_append_printf(out,
                               "%4u  %-12s %4d %4d %4d %3d %3d %5d  %-9s %14.1f %7.4f %11.3f "
                               "%9.3f %5d\n",
                               i + 1, r->schedule, r->data, r->tensor, r->stages, r->chunks,
                               r->microbatch_size, r->microbatches, r->recompute, r->tokens_per_s,
                               r->mfu, (double)r->step_time_ns / 1e6,
                               (double)r->peak_memory_bytes / SIM_PLAN_GIB, r->delta_max);
    }
    return g_string_free(out, FALSE);
}

JsonNode *sim_plan_build_json(const SimPlan *plan, int32_t top) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "scenario");
    json_builder_add_string_value(b, plan->scenario);
    const struct {
        const char *name;
        int64_t     value;
    } counts[] = {
        {"gpus", plan->gpus},
        {"global_batch", plan->global_batch},
        {"layouts", plan->n_layouts},
        {"dropped_static", plan->n_static},
        {"dropped_partition", plan->n_partition},
        {"simulated", plan->n_simulated},
        {"over_memory", plan->n_over_memory},
        {"failed", plan->n_failed},
        {"fit", plan->rows->len},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(counts); i++) {
        json_builder_set_member_name(b, counts[i].name);
        json_builder_add_int_value(b, counts[i].value);
    }
    json_builder_set_member_name(b, "rows");
    json_builder_begin_array(b);
    for (guint i = 0; i < plan->rows->len && (int32_t)i < top; i++) {
        const SimPlanRow *r = &g_array_index(plan->rows, SimPlanRow, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "schedule");
        json_builder_add_string_value(b, r->schedule);
        json_builder_set_member_name(b, "recompute");
        json_builder_add_string_value(b, r->recompute);
        const struct {
            const char *name;
            int64_t     value;
        } ints[] = {
            {"data", r->data},
            {"tensor", r->tensor},
            {"stages", r->stages},
            {"chunks", r->chunks},
            {"microbatch_size", r->microbatch_size},
            {"microbatches", r->microbatches},
            {"step_time_ns", r->step_time_ns},
            {"peak_memory_bytes", r->peak_memory_bytes},
            {"delta_max", r->delta_max},
        };
        for (size_t k = 0; k < G_N_ELEMENTS(ints); k++) {
            json_builder_set_member_name(b, ints[k].name);
            json_builder_add_int_value(b, ints[k].value);
        }
        json_builder_set_member_name(b, "throughput_tokens_per_s");
        json_builder_add_double_value(b, r->tokens_per_s);
        json_builder_set_member_name(b, "mfu");
        json_builder_add_double_value(b, r->mfu);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
