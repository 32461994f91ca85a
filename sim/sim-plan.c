/* SPDX-License-Identifier: MIT
 * sim-plan.c: the layout search behind pacer-sim plan (sim-plan.h). Candidates are listed
 * first (so progress can show a total), then each is checked against device memory by a
 * memory floor, built (the memory-constrained partition drops what cannot fit), simulated
 * and kept when its simulated peak fits. Everything is deterministic: the same input gives
 * the same ranking.
 */
#include "sim-plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-memory.h"
#include "pp-scenario.h"
#include "pp-sched-cache.h"
#include "sim-cost.h"
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
/* Context parallelism is searched down to this many tokens of a sequence per rank. */
#define SIM_PLAN_MIN_CONTEXT_TOKENS 1024
/* Ops of the finished schedules the search keeps for reuse (pp-sched-cache.h; about 80 bytes
 * each): candidates that differ only in tensor, context, expert, ZeRO or recomputation choices
 * run the same program. */
#define SIM_PLAN_CACHE_OPS (INT64_C(1) << 23)
/* Progress is redrawn every this many candidates. */
#define SIM_PLAN_PROGRESS_EVERY 16
/* Off a terminal: a search this large says its size first, and a progress line comes at most
 * this often. */
#define SIM_PLAN_ANNOUNCE_LAYOUTS 100000
#define SIM_PLAN_PROGRESS_LINE_S  5

typedef struct {
    const PpSchedKindInfo *kind;
    int32_t                data, tensor, context, stages, chunks, microbatch_size, microbatches;
    int32_t                expert, expert_tensor; /* EP, ranks splitting each routed expert */
    int32_t                zero;                  /* ZeRO stage: 0, 1 or 3 (SimPlanOptions) */
    PpRecompute            recompute;
    gboolean               floor_fits; /* sim_plan_memory_floor() within memory */
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
    if (plan->over_memory != NULL)
        g_array_unref(plan->over_memory);
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

/* A lower bound on candidate @c's largest stage peak (bytes): the whole model's training
 * state on one GPU of its layout (pp-memory.h: T, EP x expert_tensor, ZeRO-1 or FSDP over
 * D x C) plus one live micro-batch's activations of every layer and the logits, averaged over
 * the N stages (every stage holds its state and at least one micro-batch's activations at its
 * peak, and the largest is at least the mean), plus FSDP's gather buffers, which every device
 * holds. */
static double sim_plan_memory_floor(const PpScenario *base, const SimPlanCandidate *c) {
    PpMemoryShape shape;
    PpMemoryModel mem;
    pp_scenario_memory_shape(base, &shape);
    const double replicas = (double)c->data * c->context; /* share every stage's weights */
    shape.microbatch_size = c->microbatch_size;
    shape.tensor = c->tensor;
    shape.sequence_parallel = c->tensor > 1;
    shape.recompute = c->recompute;
    shape.zero_shards = c->zero >= 1 ? replicas : 1.0;
    shape.fsdp_shards = c->zero == 3 ? replicas : 1.0;
    shape.expert = c->expert;
    shape.expert_tensor = c->expert_tensor;
    shape.context = c->context;
    /* the experts' state over the expert-data-parallel ranks (pp_scenario_memory_shape()) */
    shape.expert_zero_shards = c->zero >= 1 ? (double)c->data * c->tensor * c->context /
                                                  ((double)c->expert * c->expert_tensor)
                                            : 1.0;
    shape.msg_bytes = 0.0; /* a floor: no pipeline buffers */
    pp_memory_model(&shape, &mem);
    const int32_t L = base->model.layers;
    PpMemoryBytes whole;
    pp_memory_vstage_state(&mem, 0, L, TRUE, TRUE, &whole);
    const double state = (double)whole.static_bytes;
    const double act = pp_memory_unit_act_bytes(&mem, 0, L, TRUE);
    return (state + act) / c->stages + mem.fsdp_buffer_bytes;
}

/* Whether tensor parallelism @t is a layout of the scenario's model (pp-scenario-check.c): T
 * divides the heads, the key/value heads, the hidden and the FFN widths (a shared expert's
 * too) and stays inside a node. */
static gboolean sim_plan_tensor_ok(const PpScenario *base, int32_t g, int32_t t) {
    const PpModelParams *m = &base->model;
    return t <= base->hardware.gpus_per_node && g % t == 0 && m->heads % t == 0 &&
           m->kv_heads % t == 0 && m->hidden % t == 0 && m->ffn_hidden % t == 0 &&
           (m->experts == 0 || m->shared_experts == 0 || m->expert_ffn_hidden % t == 0);
}

/* Whether context parallelism @c is searched for sequences of @seq_len tokens: C = 1, or 2C
 * dividing seq_len (causal load balancing) with at least SIM_PLAN_MIN_CONTEXT_TOKENS tokens
 * per rank. */
static gboolean sim_plan_context_ok(int32_t seq_len, int32_t c) {
    return c == 1 || (seq_len % (2 * c) == 0 && seq_len / c >= SIM_PLAN_MIN_CONTEXT_TOKENS);
}

/* Whether @base's context_comm allows C = @c at tensor @t: the all-to-all (Ulysses) gives each
 * rank 1/C of a tensor rank's query and key/value heads (pp-scenario-blocks.c). */
static gboolean sim_plan_context_heads_ok(const PpScenario *base, int32_t t, int32_t c) {
    if (c == 1 || pp_scenario_context_comm(base) != PP_CONTEXT_COMM_A2A)
        return TRUE;
    const int32_t kv = pp_scenario_attention_mla(base) ? base->model.heads : base->model.kv_heads;
    return (base->model.heads / t) % c == 0 && (kv / t) % c == 0;
}

/* One expert layout of a stage. */
typedef struct {
    int32_t expert, expert_tensor;
} SimPlanExperts;

static gint sim_plan_int_cmp(gconstpointer a, gconstpointer b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* The divisors of @n >= 1 that are at most @max, ascending, found in sqrt(@n) steps (a loop
 * up to @n would take seconds and overflow its counter near INT32_MAX). Returns: (transfer
 * full) (int32_t). */
static GArray *sim_plan_divisors(int32_t n, int32_t max) {
    GArray *out = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t e = 1; (int64_t)e * e <= n; e++) {
        if (n % e != 0)
            continue;
        int32_t pair = n / e;
        if (e <= max)
            g_array_append_val(out, e);
        if (pair != e && pair <= max)
            g_array_append_val(out, pair);
    }
    g_array_sort(out, sim_plan_int_cmp);
    return out;
}

/* The expert layouts of a stage of @ranks = T x C x D GPUs, in search order. A dense model has
 * one, EP = 1 and expert_tensor = 1 (ignored). An MoE model tries every EP dividing both
 * model.experts and the stage's ranks, ascending, each with expert_tensor 1 and, when T > 1
 * divides expert_ffn_hidden, T; EP x expert_tensor must divide the stage's ranks
 * (pp-scenario-blocks.c). Returns: (transfer full) (SimPlanExperts). */
static GArray *sim_plan_expert_layouts(const PpScenario *base, int32_t t, int64_t ranks) {
    const PpModelParams *m = &base->model;
    GArray              *out = g_array_new(FALSE, FALSE, sizeof(SimPlanExperts));
    if (m->experts == 0) {
        SimPlanExperts one = {1, 1};
        g_array_append_val(out, one);
        return out;
    }
    int64_t common = m->experts, r = ranks; /* gcd(experts, ranks) */
    while (r != 0) {
        int64_t next = common % r;
        common = r;
        r = next;
    }
    g_autoptr(GArray) eps = sim_plan_divisors((int32_t)common, (int32_t)common);
    for (guint i = 0; i < eps->len; i++) {
        const int32_t e = g_array_index(eps, int32_t, i), splits[2] = {1, t};
        for (size_t k = 0; k < (t > 1 ? 2u : 1u); k++) {
            if (m->expert_ffn_hidden % splits[k] != 0 || ranks % ((int64_t)e * splits[k]) != 0)
                continue;
            SimPlanExperts layout = {e, splits[k]};
            g_array_append_val(out, layout);
        }
    }
    return out;
}

/* Appends candidate @proto with every micro-batch size, schedule, chunk count and
 * recomputation of the search (see docs/cluster.md for the rules), each checked against
 * sim_plan_memory_floor(). */
static void sim_plan_add_batches(GArray *out, const PpScenario *base, const SimPlanOptions *o,
                                 int32_t global_batch, int64_t memory_bytes,
                                 const SimPlanCandidate *proto) {
    const int32_t n = proto->stages, layers = base->model.layers;
    const int32_t per_replica = global_batch / proto->data;
    g_autoptr(GArray) sizes = sim_plan_divisors(per_replica, o->max_microbatch);
    for (guint i = 0; i < sizes->len; i++) {
        int32_t b = g_array_index(sizes, int32_t, i), m = per_replica / b;
        for (size_t k = 0; o->schedules[k] != NULL; k++) {
            const PpSchedKindInfo *kind = pp_sched_kind_lookup(o->schedules[k]);
            PP_ASSERT(kind != NULL);
            if (!sim_plan_kind_takes(kind, n, m))
                continue;
            /* the record's chunk choices (each needs N v <= layers); several chunks on one
             * stage are a one-chunk schedule with extra work: skipped */
            for (size_t c = 0; c < PP_SCHED_PLAN_CHUNKS; c++) {
                int32_t v = kind->plan_chunks[c] > 0 ? kind->plan_chunks[c]
                            : c == 0                 ? kind->min_chunks
                                                     : 0;
                if (v == 0)
                    break;
                if (!((v == 1 || n > 1) && (int64_t)n * v <= layers))
                    continue;
                for (PpRecompute r = PP_RECOMPUTE_NONE; r <= PP_RECOMPUTE_FULL; r++) {
                    /* flash attention already drops what selective would recompute */
                    if (r == PP_RECOMPUTE_SELECTIVE && base->model.flash_attention)
                        continue;
                    SimPlanCandidate cand = *proto;
                    cand.kind = kind;
                    cand.chunks = v;
                    cand.microbatch_size = b;
                    cand.microbatches = m;
                    cand.recompute = r;
                    cand.floor_fits = sim_plan_memory_floor(base, &cand) <= (double)memory_bytes;
                    g_array_append_val(out, cand);
                }
            }
        }
    }
}

/* Lists every candidate (see docs/cluster.md for the rules). */
static GArray *sim_plan_candidates(const PpScenario *base, const SimPlanOptions *o,
                                   int32_t global_batch, int64_t memory_bytes) {
    GArray       *out = g_array_new(FALSE, TRUE, sizeof(SimPlanCandidate));
    const int32_t g = o->gpus, layers = base->model.layers;
    for (int32_t t = 1; t <= MIN(g, base->hardware.gpus_per_node); t++) {
        if (!sim_plan_tensor_ok(base, g, t))
            continue;
        /* C > seq_len is never a context layout (sim_plan_context_ok()): the bound also keeps
         * c from overflowing when G is near INT32_MAX */
        for (int32_t c = 1; c <= MIN(g / t, base->model.seq_len); c++) {
            if ((g / t) % c != 0 || !sim_plan_context_ok(base->model.seq_len, c) ||
                !sim_plan_context_heads_ok(base, t, c))
                continue;
            for (int32_t n = 1; n <= MIN(g / t / c, layers); n++) {
                if ((g / t / c) % n != 0)
                    continue;
                int32_t d = g / t / c / n;
                if (global_batch % d != 0)
                    continue;
                g_autoptr(GArray) experts = sim_plan_expert_layouts(base, t, (int64_t)t * c * d);
                for (guint e = 0; e < experts->len; e++) {
                    const SimPlanExperts *x = &g_array_index(experts, SimPlanExperts, e);
                    for (size_t z = 0; z < o->n_zero; z++) {
                        /* one replica (D C = 1) shards nothing: every stage is the same */
                        if (z > 0 && (int64_t)d * c == 1)
                            break;
                        SimPlanCandidate proto = {.data = d,
                                                  .tensor = t,
                                                  .context = c,
                                                  .stages = n,
                                                  .expert = x->expert,
                                                  .expert_tensor = x->expert_tensor,
                                                  .zero = o->zero[z]};
                        sim_plan_add_batches(out, base, o, global_batch, memory_bytes, &proto);
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
    int32_t fill = c->stages / a + (c->stages % a != 0); /* rounded up, a up to INT32_MAX */
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
        .context = c->context,
        .expert = c->expert,
        .expert_tensor = c->expert_tensor,
        .set_sequence_parallel = TRUE,
        .sequence_parallel = c->tensor > 1,
        .set_recompute = TRUE,
        .recompute = c->recompute,
        .set_sharding = TRUE,
        .distributed_optimizer = c->zero >= 1,
        .fsdp = c->zero == 3,
        .devices = gpus,
        /* the plan sets the mode: the static program */
        .static_mode = TRUE,
    };
}

/* What a simulated candidate must beat to be printed: the best SimPlanOptions.top rows so
 * far and the best row of each schedule so far. */
typedef struct {
    const SimPlanOptions *options;
    GArray               *best;      /* (double) tokens/s, descending, at most top of them */
    double               *kind_best; /* (schedules) tokens/s of each schedule's best; 0: none */
} SimPlanBound;

/* The index of @kind in @o->schedules. */
static size_t sim_plan_kind_index(const SimPlanOptions *o, const PpSchedKindInfo *kind) {
    for (size_t k = 0; o->schedules[k] != NULL; k++) {
        if (strcmp(o->schedules[k], kind->name) == 0)
            return k;
    }
    PP_UNREACHABLE();
}

/* An upper bound on candidate @c's whole-job tokens/s from its cost model: the step takes at
 * least its busiest device's compute for one update, every micro-batch's F, B and W of each
 * of its chunks for a flush schedule (all of them run inside the step), the B and W of the
 * a backwards an update accumulates for an asynchronous one (their forwards may fall in an
 * earlier interval); no bubble, hop or update counted. */
static double sim_plan_tokens_ceiling(const SimPlanCandidate *c, const SimCostModel *cost) {
    const gboolean async = c->kind->sync == PP_SCHED_ASYNC;
    int64_t        busiest_ns = 0; /* one micro-batch's ops on the busiest device */
    for (int32_t stage = 0; stage < cost->n_stages; stage++) {
        int64_t sum = 0;
        for (int32_t chunk = 0; chunk < cost->n_chunks; chunk++) {
            int32_t unit = stage * cost->n_chunks + chunk;
            sum += sim_cost_bw_ns(cost, unit) + (async ? 0 : cost->f_ns[unit]);
        }
        busiest_ns = MAX(busiest_ns, sum);
    }
    if (busiest_ns <= 0)
        return INFINITY;
    /* tokens of an update's micro-batches over D replicas, over at least that many times
     * busiest_ns */
    return (double)cost->tokens_per_mb * cost->data_parallel * 1e9 / (double)busiest_ns;
}

/* Whether a candidate of @kind whose tokens/s cannot exceed @ceiling would be printed
 * neither among the best top rows nor as its schedule's best (strictly below both, with a
 * margin for rounding). */
static gboolean sim_plan_out_of_reach(const SimPlanBound *bound, const PpSchedKindInfo *kind,
                                      double ceiling) {
    const double margin = 1.0 - 1e-9;
    const size_t top = (size_t)bound->options->top;
    if (bound->best->len < top || !(ceiling < g_array_index(bound->best, double, top - 1) * margin))
        return FALSE;
    double kind_best = bound->kind_best[sim_plan_kind_index(bound->options, kind)];
    return kind_best > 0.0 && ceiling < kind_best * margin;
}

/* Records a fitting row of @kind at @tokens_per_s in @bound. */
static void sim_plan_bound_add(SimPlanBound *bound, const PpSchedKindInfo *kind,
                               double tokens_per_s) {
    guint at = 0;
    while (at < bound->best->len && g_array_index(bound->best, double, at) >= tokens_per_s)
        at++;
    if (at < (guint)bound->options->top) {
        g_array_insert_val(bound->best, at, tokens_per_s);
        if (bound->best->len > (guint)bound->options->top)
            g_array_set_size(bound->best, (guint)bound->options->top);
    }
    double *kb = &bound->kind_best[sim_plan_kind_index(bound->options, kind)];
    *kb = MAX(*kb, tokens_per_s);
}

/* Builds candidate @c's cost model, drops it when sim_plan_out_of_reach(), else simulates it
 * on its schedule from @cache; appends its row when it fits, and counts the outcome. */
static void sim_plan_try(SimPlan *plan, SimPlanBound *bound, PpSchedCache *cache,
                         const PpScenario *base, const SimPlanCandidate *c) {
    if (!c->floor_fits) {
        plan->n_static++;
        return;
    }
    PpScenarioDelta delta = sim_plan_delta(c, plan->global_batch, plan->gpus);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_with(base, &delta, &error);
    g_autoptr(SimCostModel) cost = sc != NULL ? sim_cost_new_cached(sc, cache, &error) : NULL;
    if (cost != NULL && sim_plan_out_of_reach(bound, c->kind, sim_plan_tokens_ceiling(c, cost))) {
        plan->n_bound++;
        return;
    }
    g_autoptr(SimResult) res = cost != NULL ? sim_run_cached(sc, cost, cache, &error) : NULL;
    if (res == NULL) {
        /* A scenario that loads but has no layer split within memory fails in the partition,
         * before the engine runs. */
        if (sc != NULL && cost == NULL &&
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
    gboolean fits = res->peak_memory_bytes <= plan->memory_bytes;
    plan->n_over_memory += !fits;
    SimPlanRow row = {
        .schedule = g_strdup(c->kind->name),
        .data = c->data,
        .tensor = c->tensor,
        .context = c->context,
        .expert = c->expert,
        .expert_tensor = c->expert_tensor,
        .zero = c->zero,
        .stages = c->stages,
        .chunks = c->chunks,
        .microbatch_size = c->microbatch_size,
        .microbatches = c->microbatches,
        .accumulation = sc->pipeline.accumulation,
        .steps = sc->training.steps,
        .recompute = g_strdup(pp_recompute_name(c->recompute)),
        .tokens_per_s = res->throughput_tokens_per_s,
        .step_time_ns = res->step_time_ns,
        .mfu = res->mfu,
        .peak_memory_bytes = res->peak_memory_bytes,
        .delta_max = res->delta_max,
    };
    if (!fits) {
        g_array_append_val(plan->over_memory, row);
        return;
    }
    g_array_append_val(plan->rows, row);
    sim_plan_bound_add(bound, c->kind, row.tokens_per_s);
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

/* The search's progress on a terminal, with the time left at the pace so far (the wall clock
 * only paces this line; no simulated number depends on it). */
static void sim_plan_progress(const SimPlan *plan, guint done, guint total, int64_t start_us) {
    double elapsed_s = (double)(g_get_monotonic_time() - start_us) / 1e6;
    double left_s = done > 0 ? elapsed_s / done * (total - done) : 0.0;
    fprintf(stderr,
            "\rplan: %u/%u layouts, %" G_GINT64_FORMAT " simulated, %" G_GINT64_FORMAT
            " fit, %.0f s, ETA %.0f s   ",
            done, total, plan->n_simulated, (int64_t)plan->rows->len, elapsed_s, left_s);
    if (done == total)
        fputs("\n", stderr);
    fflush(stderr);
}

/* Progress of a search started at @start_us at @done of @cands' layouts: on a terminal
 * (@o->progress) the line sim_plan_progress() rewrites; elsewhere, before a search of
 * SIM_PLAN_ANNOUNCE_LAYOUTS or more, how many layouts it holds and how many pass the memory floor
 * (the most it simulates), then a line at most every SIM_PLAN_PROGRESS_LINE_S seconds
 * (*@last_line_us: when the last was written, g_get_monotonic_time()). */
static void sim_plan_report(const SimPlan *plan, const SimPlanOptions *o, guint done,
                            const GArray *cands, int64_t start_us, int64_t *last_line_us) {
    if (o->progress) {
        if (done > 0 && (done % SIM_PLAN_PROGRESS_EVERY == 0 || done == cands->len))
            sim_plan_progress(plan, done, cands->len, start_us);
        return;
    }
    if (done == 0 && cands->len >= SIM_PLAN_ANNOUNCE_LAYOUTS) {
        guint n_floor = 0;
        for (guint i = 0; i < cands->len; i++)
            n_floor += g_array_index(cands, SimPlanCandidate, i).floor_fits;
        fprintf(stderr,
                "plan: %u layouts, %u of them within device memory by the floor: at most "
                "%u to simulate\n",
                cands->len, n_floor, n_floor);
        return;
    }
    int64_t now = g_get_monotonic_time();
    if (done == 0 || done % SIM_PLAN_PROGRESS_EVERY != 0 ||
        now - *last_line_us < SIM_PLAN_PROGRESS_LINE_S * G_USEC_PER_SEC)
        return;
    *last_line_us = now;
    fprintf(stderr,
            "plan: %u/%u layouts, %" G_GINT64_FORMAT " simulated, %" G_GINT64_FORMAT " fit\n", done,
            cands->len, plan->n_simulated, (int64_t)plan->rows->len);
}

/* The base scenario of a plan: the model and hardware of @path with @overrides. Plan chooses
 * every layout key itself, so -b and -g take precedence over the file's layout: the file is
 * read on a neutral one-GPU layout (one stage, one micro-batch, one replica, no tensor,
 * context or expert parallelism, the job's @o->gpus as hardware.devices) with the micro-batch size
 * derived from the global batch, and the user's @overrides after it. The global batch is -b, else
 * the file's training.global_batch; a file that gives neither has its batch only in its own
 * layout, which is then read as given. */
static PpScenario *sim_plan_load_base(const char *path, const char *const *overrides,
                                      const SimPlanOptions *o, GError **error) {
    g_autoptr(GPtrArray) neutral = g_ptr_array_new_with_free_func(g_free);
    const char *const layout[] = {
        "pipeline.schedule=1f1b", "pipeline.mode=static",    "pipeline.stages=1",
        "pipeline.chunks=1",      "pipeline.microbatches=1", "pipeline.accumulation=1",
        "parallel.data=1",        "parallel.tensor=1",       "parallel.context=1",
        "parallel.expert=1",      "parallel.expert_tensor=1"};
    for (size_t i = 0; i < G_N_ELEMENTS(layout); i++)
        g_ptr_array_add(neutral, g_strdup(layout[i]));
    g_ptr_array_add(neutral, g_strdup_printf("hardware.devices=%d", o->gpus));
    if (o->global_batch > 0)
        g_ptr_array_add(neutral, g_strdup_printf("training.global_batch=%d", o->global_batch));
    for (const char *const *ov = overrides; ov && *ov; ov++)
        g_ptr_array_add(neutral, g_strdup(*ov));
    g_ptr_array_add(neutral, NULL);
    const char *const derive[] = {"pipeline.microbatch_size", NULL};
    g_autoptr(PpScenario) base =
        pp_scenario_load_deriving(path, (const char *const *)neutral->pdata, derive, NULL);
    if (base != NULL &&
        (o->global_batch > 0 || pp_scenario_key_given(base, "training", "global_batch")))
        return g_steal_pointer(&base);
    /* No global batch outside the file's layout, or a base that does not load on the neutral
     * layout either: the file as given (its own message, if it fails). */
    g_autoptr(GError) as_given = NULL;
    PpScenario *given = pp_scenario_load(path, overrides, &as_given);
    if (given == NULL && o->global_batch <= 0)
        g_set_error(error, as_given->domain, as_given->code,
                    "%s; plan sets every layout key itself, so with -b B (the global batch) "
                    "it reads no layout key of the file",
                    as_given->message);
    else if (given == NULL)
        g_propagate_error(error, g_steal_pointer(&as_given));
    return given;
}

SimPlan *sim_plan_run(const char *path, const char *const *overrides, const SimPlanOptions *o,
                      GError **error) {
    g_autoptr(PpScenario) base = sim_plan_load_base(path, overrides, o, error);
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
    plan->over_memory = g_array_new(FALSE, TRUE, sizeof(SimPlanRow));
    g_array_set_clear_func(plan->over_memory, sim_plan_row_clear);

    g_autoptr(GArray) cands = sim_plan_candidates(base, o, global_batch, plan->memory_bytes);
    plan->n_layouts = cands->len;
    if (cands->len == 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: no layout of %d GPUs with global batch %d: data x tensor x context x "
                    "stages must equal the GPUs, tensor divide model.heads, kv_heads, hidden and "
                    "ffn_hidden and be at most hardware.gpus_per_node = %d, stages be at most "
                    "model.layers = %d, and the data replicas divide the global batch",
                    path, o->gpus, global_batch, base->hardware.gpus_per_node, base->model.layers);
        return NULL;
    }
    size_t n_schedules = g_strv_length((char **)o->schedules);
    g_autoptr(GArray) best = g_array_new(FALSE, FALSE, sizeof(double));
    g_autofree double *kind_best = g_new0(double, n_schedules);
    SimPlanBound       bound = {.options = o, .best = best, .kind_best = kind_best};
    g_autoptr(PpSchedCache) cache = pp_sched_cache_new(SIM_PLAN_CACHE_OPS);
    int64_t start_us = g_get_monotonic_time(), last_line_us = start_us;
    sim_plan_report(plan, o, 0, cands, start_us, &last_line_us);
    for (guint i = 0; i < cands->len; i++) {
        sim_plan_try(plan, &bound, cache, base, &g_array_index(cands, SimPlanCandidate, i));
        sim_plan_report(plan, o, i + 1, cands, start_us, &last_line_us);
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

#define SIM_PLAN_N_SETTINGS 19

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
        {"parallel.context", SIM_PLAN_NUMBER, r->context, NULL},
        {"parallel.expert", SIM_PLAN_NUMBER, r->expert, NULL},
        {"parallel.expert_tensor", SIM_PLAN_NUMBER, r->expert_tensor, NULL},
        {"parallel.distributed_optimizer", SIM_PLAN_BOOL, r->zero >= 1, NULL},
        {"parallel.fsdp", SIM_PLAN_BOOL, r->zero == 3, NULL},
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
                           " dropped by the memory floor, %" G_GINT64_FORMAT
                           " by the memory-constrained partition, %" G_GINT64_FORMAT
                           " by the throughput bound, %" G_GINT64_FORMAT
                           " simulated (%" G_GINT64_FORMAT " over memory), %u fit",
                           plan->scenario, plan->gpus, plan->global_batch, plan->n_layouts,
                           plan->n_static, plan->n_partition, plan->n_bound, plan->n_simulated,
                           plan->n_over_memory, plan->rows->len);
    if (plan->headroom_bytes > 0)
        g_string_append_printf(out, " within %.3f GiB per GPU (%.3f GiB headroom)",
                               (double)plan->memory_bytes / SIM_PLAN_GIB,
                               (double)plan->headroom_bytes / SIM_PLAN_GIB);
    if (plan->n_failed > 0)
        g_string_append_printf(out, ", %" G_GINT64_FORMAT " failed (first: %s)", plan->n_failed,
                               plan->first_error);
    g_string_append(out, "\n\n");
    g_string_append(out, "rank  schedule       D    T    C    N   v   EP  ET  Z   b     m  "
                         "recompute       tokens/s     MFU     step ms  peak GiB  \xce\x94max\n");
    for (guint i = 0; i < plan->rows->len && (int32_t)i < top; i++) {
        const SimPlanRow *r = &g_array_index(plan->rows, SimPlanRow, i);
        g_string_append_printf(out,
                               "%4u  %-12s %4d %4d %4d %4d %3d %4d %3d %2d %3d %5d  %-9s %14.1f "
                               "%7.4f %11.3f %9.3f %5d\n",
                               i + 1, r->schedule, r->data, r->tensor, r->context, r->stages,
                               r->chunks, r->expert, r->expert_tensor, r->zero, r->microbatch_size,
                               r->microbatches, r->recompute, r->tokens_per_s, r->mfu,
                               (double)r->step_time_ns / 1e6,
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
        g_string_append_printf(
            out,
            "  %-12s rank %4d: D %d T %d C %d N %d v %d EP %d ET %d ZeRO %d b %d "
            "m %d %s, %.1f tokens/s, %.3f GiB\n",
            r->schedule, i + 1, r->data, r->tensor, r->context, r->stages, r->chunks, r->expert,
            r->expert_tensor, r->zero, r->microbatch_size, r->microbatches, r->recompute,
            r->tokens_per_s, (double)r->peak_memory_bytes / SIM_PLAN_GIB);
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
        {"context", r->context},
        {"stages", r->stages},
        {"expert", r->expert},
        {"expert_tensor", r->expert_tensor},
        {"zero", r->zero},
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
        {"dropped_bound", plan->n_bound},
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
