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
/* Optimizer steps simulated per candidate: one for flush schedules (every step is the same).
 * An asynchronous schedule on N stages with a micro-batches per update keeps about N / a
 * updates in flight, so its pipeline fills (peak memory, Δmax) only after that many steps and
 * the step time is the middle half's mean: it runs SIM_PLAN_ASYNC_FILLS x N / a steps (the
 * middle half then starts after the fill), at least SIM_PLAN_ASYNC_STEPS. */
#define SIM_PLAN_SYNC_STEPS  1
#define SIM_PLAN_ASYNC_STEPS 8
#define SIM_PLAN_ASYNC_FILLS 4
/* Progress is redrawn every this many candidates. */
#define SIM_PLAN_PROGRESS_EVERY 16

typedef struct {
    const PpSchedKindInfo *kind;
    int32_t                data, tensor, stages, chunks, microbatch_size, microbatches;
    PpRecompute            recompute;
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
    g_strfreev(plan->overrides);
    g_strfreev(plan->schedules);
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
                                   int32_t global_batch, int64_t memory_bytes) {
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
            gboolean fits = sim_plan_static_bytes(base, d, t, n) <= (double)memory_bytes;
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
                        for (PpRecompute r = PP_RECOMPUTE_NONE; r <= PP_RECOMPUTE_FULL; r++) {
                            /* flash attention already drops what selective would recompute */
                            if (r == PP_RECOMPUTE_SELECTIVE && base->model.flash_attention)
                                continue;
                            SimPlanCandidate cand = {.kind = kind,
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

/* The optimizer steps candidate @c is simulated for (SIM_PLAN_ASYNC_FILLS). */
static int32_t sim_plan_steps(const SimPlanCandidate *c) {
    if (c->kind->sync != PP_SCHED_ASYNC)
        return SIM_PLAN_SYNC_STEPS;
    int32_t a = sim_plan_accumulation(c->kind, c->microbatches);
    int32_t fill = (c->stages + a - 1) / a;
    return MAX(SIM_PLAN_ASYNC_STEPS, SIM_PLAN_ASYNC_FILLS * fill);
}

/* The typed change that turns the scenario into candidate @c. */
static PpScenarioDelta sim_plan_delta(const SimPlanCandidate *c, int32_t global_batch,
                                      int32_t gpus) {
    return (PpScenarioDelta){
        .kind = c->kind,
        .stages = c->stages,
        .chunks = c->chunks,
        .microbatches = c->microbatches,
        .accumulation = sim_plan_accumulation(c->kind, c->microbatches),
        .microbatch_size = c->microbatch_size,
        .global_batch = global_batch,
        .steps = sim_plan_steps(c),
        .data = c->data,
        .tensor = c->tensor,
        .set_sequence_parallel = TRUE,
        .sequence_parallel = c->tensor > 1,
        .set_recompute = TRUE,
        .recompute = c->recompute,
        .devices = gpus,
        /* the plan sets the mode: the static program */
        .static_mode = TRUE,
    };
}

/* Simulates candidate @c; appends its row when it fits, and counts the outcome. */
static void sim_plan_try(SimPlan *plan, const PpScenario *base, const SimPlanCandidate *c) {
    if (!c->static_fits) {
        plan->n_static++;
        return;
    }
    PpScenarioDelta delta = sim_plan_delta(c, plan->global_batch, plan->gpus);
    g_autoptr(GError) error = NULL;
    PpScenario *sc = pp_scenario_with(base, &delta, &error);
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
        .schedule = g_strdup(c->kind->name),
        .data = c->data,
        .tensor = c->tensor,
        .stages = c->stages,
        .chunks = c->chunks,
        .microbatch_size = c->microbatch_size,
        .microbatches = c->microbatches,
        .accumulation = job->scenario->pipeline.accumulation,
        .steps = job->scenario->training.steps,
        .recompute = g_strdup(pp_recompute_name(c->recompute)),
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
    plan->overrides = g_strdupv((char **)overrides);
    plan->schedules = g_strdupv((char **)o->schedules);
    plan->gpus = o->gpus;
    plan->global_batch = global_batch;
    plan->headroom_bytes = o->headroom_bytes;
    plan->memory_bytes = base->hardware.memory_bytes - o->headroom_bytes;
    if (plan->memory_bytes <= 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: --headroom %.3f GiB leaves nothing of hardware.memory_gib = %.3f; give "
                    "a headroom below the device memory",
                    path, (double)o->headroom_bytes / SIM_PLAN_GIB,
                    (double)base->hardware.memory_bytes / SIM_PLAN_GIB);
        return NULL;
    }
    plan->rows = g_array_new(FALSE, TRUE, sizeof(SimPlanRow));
    g_array_set_clear_func(plan->rows, sim_plan_row_clear);

    g_autoptr(GArray) cands = sim_plan_candidates(base, o, global_batch, plan->memory_bytes);
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
        sim_plan_try(plan, base, &g_array_index(cands, SimPlanCandidate, i));
        if (o->progress && ((i + 1) % SIM_PLAN_PROGRESS_EVERY == 0 || i + 1 == cands->len))
            sim_plan_progress(plan, i + 1, cands->len);
    }
    sim_plan_sort(plan->rows);
    return g_steal_pointer(&plan);
}

/* --- a row's overrides --- */

/* One key a row sets, typed for JSON. */
typedef struct {
    const char *key;
    enum { SIM_PLAN_NUMBER, SIM_PLAN_BOOL, SIM_PLAN_TEXT } type;
    int64_t     number; /* SIM_PLAN_NUMBER; SIM_PLAN_BOOL: 0 or 1 */
    const char *text;   /* SIM_PLAN_TEXT */
} SimPlanSetting;

#define SIM_PLAN_N_SETTINGS 14

/* Fills @out with every key the search set for @r (the same values sim_plan_delta() gave). */
static void sim_plan_row_settings(const SimPlan *plan, const SimPlanRow *r,
                                  SimPlanSetting out[SIM_PLAN_N_SETTINGS]) {
    const SimPlanSetting settings[SIM_PLAN_N_SETTINGS] = {
        {"pipeline.schedule", SIM_PLAN_TEXT, 0, r->schedule},
        {"pipeline.stages", SIM_PLAN_NUMBER, r->stages, NULL},
        {"pipeline.chunks", SIM_PLAN_NUMBER, r->chunks, NULL},
        {"pipeline.microbatches", SIM_PLAN_NUMBER, r->microbatches, NULL},
        {"pipeline.accumulation", SIM_PLAN_NUMBER, r->accumulation, NULL},
        {"pipeline.microbatch_size", SIM_PLAN_NUMBER, r->microbatch_size, NULL},
        {"pipeline.mode", SIM_PLAN_TEXT, 0, "static"},
        {"training.global_batch", SIM_PLAN_NUMBER, plan->global_batch, NULL},
        {"training.steps", SIM_PLAN_NUMBER, r->steps, NULL},
        {"parallel.data", SIM_PLAN_NUMBER, r->data, NULL},
        {"parallel.tensor", SIM_PLAN_NUMBER, r->tensor, NULL},
        {"parallel.sequence_parallel", SIM_PLAN_BOOL, r->tensor > 1, NULL},
        {"model.recompute", SIM_PLAN_TEXT, 0, r->recompute},
        {"hardware.devices", SIM_PLAN_NUMBER, plan->gpus, NULL},
    };
    memcpy(out, settings, sizeof settings);
}

/* The "section.key" of override @o, stripped. Returns: (transfer full). */
static char *sim_plan_override_key(const char *o) {
    const char *eq = strchr(o, '=');
    PP_ASSERT(eq != NULL); /* the scenario loaded with it */
    return g_strstrip(g_strndup(o, (gsize)(eq - o)));
}

/* Whether @key is one of @settings'. */
static gboolean sim_plan_sets(const SimPlanSetting *settings, const char *key) {
    for (size_t i = 0; i < SIM_PLAN_N_SETTINGS; i++) {
        if (strcmp(settings[i].key, key) == 0)
            return TRUE;
    }
    return FALSE;
}

/* The "section.key=value" overrides of sim_plan_row_command(). Returns: (transfer full)
 * NULL-terminated. */
static GStrv sim_plan_row_overrides(const SimPlan *plan, const SimPlanRow *row) {
    SimPlanSetting settings[SIM_PLAN_N_SETTINGS];
    sim_plan_row_settings(plan, row, settings);
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    for (size_t i = 0; plan->overrides != NULL && plan->overrides[i] != NULL; i++) {
        g_autofree char *key = sim_plan_override_key(plan->overrides[i]);
        if (!sim_plan_sets(settings, key))
            g_strv_builder_add(b, plan->overrides[i]);
    }
    for (size_t i = 0; i < SIM_PLAN_N_SETTINGS; i++) {
        const SimPlanSetting *st = &settings[i];
        g_autofree char      *o = st->type == SIM_PLAN_NUMBER
                                      ? g_strdup_printf("%s=%" G_GINT64_FORMAT, st->key, st->number)
                                      : g_strdup_printf("%s=%s", st->key,
                                                   st->type == SIM_PLAN_TEXT ? st->text
                                                        : st->number              ? "true"
                                                                                  : "false");
        g_strv_builder_add(b, o);
    }
    return g_strv_builder_end(b);
}

/* @text, single-quoted for a POSIX shell when it holds anything but [A-Za-z0-9._/=,:+-].
 * Returns: (transfer full). */
static char *sim_plan_shell_word(const char *text) {
    for (const char *c = text; *c; c++) {
        if (!g_ascii_isalnum(*c) && strchr("._/=,:+-", *c) == NULL)
            return g_shell_quote(text);
    }
    return g_strdup(text);
}

char *sim_plan_row_command(const SimPlan *plan, const SimPlanRow *row) {
    g_auto(GStrv) overrides = sim_plan_row_overrides(plan, row);
    g_autofree char *path = sim_plan_shell_word(plan->scenario);
    GString         *cmd = g_string_new("pacer-sim ");
    g_string_append(cmd, path);
    for (size_t i = 0; overrides[i] != NULL; i++) {
        g_autofree char *word = sim_plan_shell_word(overrides[i]);
        g_string_append_printf(cmd, " --set %s", word);
    }
    return g_string_free(cmd, FALSE);
}

/* Adds @row's overrides to @b as the object "set" (the user's values as text, the search's
 * typed) and its command line as "command". */
static void sim_plan_json_set(JsonBuilder *b, const SimPlan *plan, const SimPlanRow *row) {
    SimPlanSetting settings[SIM_PLAN_N_SETTINGS];
    sim_plan_row_settings(plan, row, settings);
    json_builder_set_member_name(b, "set");
    json_builder_begin_object(b);
    for (size_t i = 0; plan->overrides != NULL && plan->overrides[i] != NULL; i++) {
        g_autofree char *key = sim_plan_override_key(plan->overrides[i]);
        if (sim_plan_sets(settings, key))
            continue;
        g_autofree char *value = g_strstrip(g_strdup(strchr(plan->overrides[i], '=') + 1));
        json_builder_set_member_name(b, key);
        json_builder_add_string_value(b, value);
    }
    for (size_t i = 0; i < SIM_PLAN_N_SETTINGS; i++) {
        json_builder_set_member_name(b, settings[i].key);
        if (settings[i].type == SIM_PLAN_NUMBER)
            json_builder_add_int_value(b, settings[i].number);
        else if (settings[i].type == SIM_PLAN_BOOL)
            json_builder_add_boolean_value(b, settings[i].number != 0);
        else
            json_builder_add_string_value(b, settings[i].text);
    }
    json_builder_end_object(b);
    g_autofree char *command = sim_plan_row_command(plan, row);
    json_builder_set_member_name(b, "command");
    json_builder_add_string_value(b, command);
}

/* The index in the ranking of @schedule's best row, or -1 when none of its layouts fits. */
static gint sim_plan_best_of(const SimPlan *plan, const char *schedule) {
    for (guint i = 0; i < plan->rows->len; i++) {
        if (strcmp(g_array_index(plan->rows, SimPlanRow, i).schedule, schedule) == 0)
            return (gint)i;
    }
    return -1;
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
    if (plan->headroom_bytes > 0)
        g_string_append_printf(out, " within %.3f GiB per GPU (%.3f GiB headroom)",
                               (double)plan->memory_bytes / SIM_PLAN_GIB,
                               (double)plan->headroom_bytes / SIM_PLAN_GIB);
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
    g_string_append(out, "\nbest per schedule (rank in the whole ranking):\n");
    for (size_t k = 0; plan->schedules[k] != NULL; k++) {
        gint i = sim_plan_best_of(plan, plan->schedules[k]);
        if (i < 0) {
            g_string_append_printf(out, "  %-12s no layout fits\n", plan->schedules[k]);
            continue;
        }
        const SimPlanRow *r = &g_array_index(plan->rows, SimPlanRow, i);
        g_string_append_printf(out,
                               "  %-12s rank %4d: D %d T %d N %d v %d b %d m %d %s, %.1f tokens/s, "
                               "%.3f GiB\n",
                               r->schedule, i + 1, r->data, r->tensor, r->stages, r->chunks,
                               r->microbatch_size, r->microbatches, r->recompute, r->tokens_per_s,
                               (double)r->peak_memory_bytes / SIM_PLAN_GIB);
    }
    if (plan->rows->len > 0 && top > 0) {
        g_autofree char *command =
            sim_plan_row_command(plan, &g_array_index(plan->rows, SimPlanRow, 0));
        g_string_append_printf(out, "\nrank 1 alone: %s\n", command);
    }
    return g_string_free(out, FALSE);
}

/* Adds the members of row @r to the object being built in @b. */
static void sim_plan_json_row(JsonBuilder *b, const SimPlan *plan, const SimPlanRow *r) {
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
    sim_plan_json_set(b, plan, r);
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
        {"memory_bytes", plan->memory_bytes},
        {"headroom_bytes", plan->headroom_bytes},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(counts); i++) {
        json_builder_set_member_name(b, counts[i].name);
        json_builder_add_int_value(b, counts[i].value);
    }
    json_builder_set_member_name(b, "rows");
    json_builder_begin_array(b);
    for (guint i = 0; i < plan->rows->len && (int32_t)i < top; i++) {
        json_builder_begin_object(b);
        sim_plan_json_row(b, plan, &g_array_index(plan->rows, SimPlanRow, i));
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "best_per_schedule");
    json_builder_begin_array(b);
    for (size_t k = 0; plan->schedules[k] != NULL; k++) {
        gint i = sim_plan_best_of(plan, plan->schedules[k]);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "fits");
        json_builder_add_boolean_value(b, i >= 0);
        if (i < 0) {
            json_builder_set_member_name(b, "schedule");
            json_builder_add_string_value(b, plan->schedules[k]);
        } else {
            json_builder_set_member_name(b, "rank");
            json_builder_add_int_value(b, i + 1);
            sim_plan_json_row(b, plan, &g_array_index(plan->rows, SimPlanRow, i));
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
