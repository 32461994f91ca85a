/* SPDX-License-Identifier: MIT
 * pp-sched-zb.c: the zero-bubble schedules of Qi et al. (ICLR 2024): the backward is split
 * into B (input gradient, on the critical path) and W (weight gradient, free to move), one
 * chunk per device, synchronous (U closes every step on every stage). zb-h1 and zb-h2 are
 * handcrafted; zb-1p and zb-2p come from a greedy list scheduler under a memory limit.
 */

/*
 * Accounting. A micro-batch holds one activation unit M_F on a stage from its F until its W
 * (in the paper B frees M_B of it and W the rest, M_W), so "in flight" below and n_buffers
 * count units with F done and W not done; zb-1p and zb-2p can count B's part finely (below).
 * Costs F, B, W per stage, c per hop; C = the largest stage span (first op start to last op
 * end on one stage) of one step, the paper's bubble definition; bubble = C - m(F+B+W).
 * 1F1B's bubble is (N-1)(F+B+W).
 *
 * One family. Stage s runs a_s warmup F, then for i = 0..m-1: B_i, then W_{i-d_s} once
 * i >= d_s, then the next F while any is left; the W still pending close the step. Its
 * peak in flight is min(a_s + d_s, m). The delay d_s is what lets the tail run: B passes
 * cross the pipeline back to back while the W they leave behind fill the gaps.
 *
 * zb-h1: a_s = N - s (1F1B's warmup plus its first steady F), d_s = s. Every stage peaks at
 *   min(N, m) units, 1F1B's stage-0 peak; later stages hold more units than in 1F1B, but
 *   only the small W part of the extra ones (the paper's "same peak memory"). This is
 *   forced: the closed form needs the last stage to defer N W's, so a per-stage limit of
 *   N - s cannot reach it. For m >= N and comm 0:
 *     makespan = C = m(F+B+W) + (N-1)(F+B-W)   (when B >= W; stage 0 ends last).
 * zb-h2: a_s = 2(N-s) - 1 (the extra warmup F fill the wait for the first gradient),
 *   d_s = 2s; peak min(2N-1, m) on every stage. For m >= 2N-1 and F+B+2c >= 2W:
 *     C = span of stage 0 = m(F+B+W) + (N-1)(F+B+2c-2W),
 *     makespan = max(C, (N-1)(F+c) + m(F+B+W)),
 *   the second term being the last stage's start plus its work (the layout is a
 *   parallelogram, so with F = B = W it is the last stage that ends last). For m < 2N-1
 *   its C is at most zb-h1's.
 * Lower bound: the last stage's final B cannot end before (N-1)(F+c) + m(F+B) + (m-P)W,
 * P the units it may hold, and stage 0 still needs (N-1)(B+c) for that gradient and one
 * W, so C >= m(F+B+W) + (N-1)(F+B+2c) - (P-1)W. zb-h2 meets it (P = 2N-1), and zb-h1 does
 * with comm 0 (P = N); with comm zb-h1 stays a little above it.
 *
 * zb-1p, zb-2p: every stage may hold min(N, m) (1p) or min(2N, m) (2p) units: the limit in
 * units of 1F1B's peak, N micro-batches, applied to every stage (the paper's M_limit).
 * n_buffers declares it, so the validator enforces it.
 * Fine-grained memory, params->mem_w_fraction = w = M_W / M_F in (0, 1) (0 or 1: whole
 * units, as above). The limit stays min(N, m) / min(2N, m) units of M_F on every stage, 1x /
 * 2x the min(N, m) M_F that 1F1B's stage 0 holds, but F counts +1, B -(1 - w), W -w: a
 * deferred W holds only w, so many more fit. The count is fixed-point (PP_ZB_MEM_UNIT per
 * M_F, w rounded up: a W is never counted below its share). In bytes stage s then holds at
 * most limit x M_F(s) (the caller passes the largest w of all stages), which is within 1x /
 * 2x of 1F1B's peak where M_F(s) <= M_F(0); a last stage whose logits make its M_F larger
 * can exceed it, as with whole units. Units with F done and W not done can exceed the limit:
 * n_buffers declares each stage's measured whole-unit peak.
 * The schedule comes from simulating one step in time with params f_ns, b_ns, w_ns, comm_ns
 * (all three zero: unit costs).
 * A stage that is free at time t takes, in this order: a ready B; a ready F if the limit
 * allows; a W to fill the gap; else it sleeps until its next input arrives. Pending W's
 * run in micro-batch order. Sixteen variants of three knobs are tried and the smallest C
 * kept (ties: the first): "alternate" (right after a B, a ready F goes before the next
 * ready B, 1F1B's rhythm: it keeps forwards flowing to the last stage, which the pure
 * B-first rule starves), "reserve" (stage s takes at most limit - (r s + q) F's before its
 * first B, (r, q) in {(0,0), (1,0), (2,0), (2,1)}: room to defer W's later, as d_s does in
 * zb-h1 (r = 1) and zb-h2 (r = 2)), "fit" (a W starts only if it ends by the next known
 * arrival). With F = B = W and comm 0, zb-1p reaches zb-h1's optimum, (N-1)F, a third of
 * 1F1B's bubble, and zb-2p reaches 0 for m >= 2N. No exact (ILP) refinement: with comm > 0
 * the greedy can end up a few comm delays behind the handcrafted schedule of equal memory.
 *
 * Steps. Every step repeats the one-step order with mb = step * m + i, then U. U has no
 * cross-stage dependency: stage s starts step k+1 once its own U and its inputs are done.
 * When stage 0 has the largest span C, step k+1 is step k shifted by C, so k steps take
 * (k-1) C + one step; when stage 0 also ends last (zb-h1; zb-h2 with B + c >= 2W), that
 * is k times one step. Otherwise the next step starts under the previous one's tail.
 */
#include <math.h>

#include "pp-error.h"
#include "pp-sched-gen.h"

#define PP_ZB_MAX_STAGES 4096
#define PP_ZB_NEVER      G_MAXINT64
/* One unit M_F in the greedy's fixed-point memory count (integers: no rounding drift). */
#define PP_ZB_MEM_UNIT ((int64_t)1 << 20)

/* One entry of a stage's one-step order: an op on local micro-batch mb (0..m-1). */
typedef struct {
    PpOpKind kind; /* PP_OP_FORWARD, PP_OP_BACKWARD or PP_OP_WEIGHT */
    int32_t  mb;
} PpZbSlot;

/* One-step orders of all stages: stage s's 3m slots start at slots[s * 3m]. */
typedef struct {
    int32_t   n_stages;
    int32_t   m;
    PpZbSlot *slots; /* (n_stages, 3m) */
} PpZbOrder;

static void pp_zb_order_init(PpZbOrder *order, int32_t n_stages, int32_t m) {
    order->n_stages = n_stages;
    order->m = m;
    order->slots = g_new(PpZbSlot, (size_t)n_stages * 3 * m);
}

static void pp_zb_order_clear(PpZbOrder *order) {
    g_clear_pointer(&order->slots, g_free);
}

/* --- parameters and emission --- */

static gboolean pp_zb_check(const PpScheduleParams *params, const PpSchedKindInfo *info,
                            GError **error) {
    const char *kind = info->name;
    return pp_sched_check_param(kind, "n_stages", params->n_stages, 1, PP_ZB_MAX_STAGES, error) &&
           pp_sched_check_param(kind, "n_chunks", MAX(params->n_chunks, 1), info->min_chunks,
                                info->max_chunks, error) &&
           pp_sched_check_param(kind, "n_microbatches", params->n_microbatches, 1, G_MAXINT32,
                                error) &&
           pp_sched_check_param(kind, "n_steps", params->n_steps, 1, G_MAXINT32, error) &&
           pp_sched_check_size(kind, (int64_t)params->n_steps * params->n_microbatches,
                               params->n_stages, error);
}

/* Turns one-step orders into the schedule: every step repeats them on its own micro-batches
 * and ends with U; every stage declares @n_buffers units. */
static PpSchedule *pp_zb_emit(const PpScheduleParams *params, const PpSchedKindInfo *info,
                              const PpZbOrder *order, int32_t n_buffers) {
    const int32_t n = params->n_stages, m = params->n_microbatches;
    PpSchedule   *sched = pp_schedule_alloc(info->name, n, info->min_chunks);
    sched->n_steps = params->n_steps;
    sched->mb_per_step = m;
    sched->n_mb = params->n_steps * m;
    sched->split_backward = TRUE;
    sched->synchronous = info->sync == PP_SCHED_SYNC;
    sched->weight_mode = info->weights;
    for (int32_t s = 0; s < n; s++) {
        const PpZbSlot *slots = &order->slots[(size_t)s * 3 * m];
        sched->n_buffers[s] = n_buffers;
        for (int32_t t = 0; t < params->n_steps; t++) {
            for (int32_t k = 0; k < 3 * m; k++)
                pp_sched_emit(sched, slots[k].kind, s, t * m + slots[k].mb, 0, t);
            pp_sched_emit(sched, PP_OP_UPDATE, s, -1, -1, t);
        }
    }
    return sched;
}

/* --- handcrafted: the (a_s, d_s) family --- */

/* Fills stage @s's one-step order: @warmup F, then per i: B_i, W_{i-delay} once i >= delay,
 * the next F if any; then the pending W's. */
static void pp_zb_family_stage(PpZbOrder *order, int32_t s, int32_t warmup, int32_t delay) {
    const int32_t m = order->m;
    PpZbSlot     *slots = &order->slots[(size_t)s * 3 * m];
    int32_t       k = 0, nf = 0, nw = 0;
    warmup = MIN(warmup, m);
    while (nf < warmup)
        slots[k++] = (PpZbSlot){PP_OP_FORWARD, nf++};
    for (int32_t i = 0; i < m; i++) {
        slots[k++] = (PpZbSlot){PP_OP_BACKWARD, i};
        if (i >= delay)
            slots[k++] = (PpZbSlot){PP_OP_WEIGHT, nw++};
        if (nf < m)
            slots[k++] = (PpZbSlot){PP_OP_FORWARD, nf++};
    }
    while (nw < m)
        slots[k++] = (PpZbSlot){PP_OP_WEIGHT, nw++};
    PP_ASSERT(k == 3 * m && nf == m); // B_i always follows F_i: warmup >= 1
}

static PpSchedule *pp_sched_build_zb_h1(const PpScheduleParams *params, GError **error) {
    if (!pp_zb_check(params, &pp_sched_kind_zb_h1, error))
        return NULL;
    const int32_t n = params->n_stages, m = params->n_microbatches;
    PpZbOrder     order;
    pp_zb_order_init(&order, n, m);
    for (int32_t s = 0; s < n; s++)
        pp_zb_family_stage(&order, s, n - s, s);
    PpSchedule *sched = pp_zb_emit(params, &pp_sched_kind_zb_h1, &order, MIN(n, m));
    pp_zb_order_clear(&order);
    return sched;
}

static PpSchedule *pp_sched_build_zb_h2(const PpScheduleParams *params, GError **error) {
    if (!pp_zb_check(params, &pp_sched_kind_zb_h2, error))
        return NULL;
    const int32_t n = params->n_stages, m = params->n_microbatches;
    PpZbOrder     order;
    pp_zb_order_init(&order, n, m);
    for (int32_t s = 0; s < n; s++)
        pp_zb_family_stage(&order, s, 2 * (n - s) - 1, 2 * s);
    PpSchedule *sched = pp_zb_emit(params, &pp_sched_kind_zb_h2, &order, MIN(2 * n - 1, m));
    pp_zb_order_clear(&order);
    return sched;
}

/* --- automatic: the greedy list scheduler --- */

/* Costs and knobs of one greedy run (see the top of the file). */
typedef struct {
    int64_t  f_ns, b_ns, w_ns, comm_ns;
    int32_t  limit;             /* units (M_F) a stage may hold */
    int64_t  w_mem;             /* M_W, freed at W, in PP_ZB_MEM_UNIT; the rest is freed at B */
    gboolean alternate;         /* after a B, a ready F before the next ready B */
    int32_t  reserve_per_stage; /* r: stage s keeps r s + q units free (but runs at */
    int32_t  reserve_base;      /* q: least one F) until its first B */
    gboolean fit;               /* a W only when it ends by the next known arrival */
} PpZbGreedyConfig;

typedef struct {
    int64_t  ready_ns;   /* next time the stage decides; PP_ZB_NEVER: waits for an input */
    int64_t  free_ns;    /* end of its last op */
    int64_t  first_ns;   /* start of its first op */
    int32_t  nf, nb, nw; /* F, B, W done; ops go in micro-batch order per kind */
    int64_t  mem;        /* activations held, PP_ZB_MEM_UNIT per M_F */
    int32_t  k;          /* slots filled */
    gboolean last_was_b; /* the last F or B it ran was a B */
} PpZbStage;

/* A wake-up of @stage at @t_ns in a binary min-heap on (t_ns, stage); stale entries (the
 * stage's ready_ns moved since) are skipped when popped. */
typedef struct {
    int64_t t_ns;
    int32_t stage;
} PpZbWake;

static gboolean pp_zb_wake_before(const PpZbWake *a, const PpZbWake *b) {
    return a->t_ns < b->t_ns || (a->t_ns == b->t_ns && a->stage < b->stage);
}

static void pp_zb_heap_push(GArray *heap, int64_t t_ns, int32_t stage) {
    PpZbWake w = {.t_ns = t_ns, .stage = stage};
    g_array_append_val(heap, w);
    PpZbWake *h = (PpZbWake *)(void *)heap->data;
    for (guint i = heap->len - 1; i > 0;) {
        guint parent = (i - 1) / 2;
        if (!pp_zb_wake_before(&h[i], &h[parent]))
            break;
        PpZbWake tmp = h[i];
        h[i] = h[parent];
        h[parent] = tmp;
        i = parent;
    }
}

static PpZbWake pp_zb_heap_pop(GArray *heap) {
    PP_ASSERT(heap->len > 0); // some stage can always act: the last one never waits forever
    PpZbWake *h = (PpZbWake *)(void *)heap->data;
    PpZbWake  top = h[0];
    h[0] = h[heap->len - 1];
    g_array_set_size(heap, heap->len - 1);
    for (guint i = 0;;) {
        guint l = 2 * i + 1, r = l + 1, best = i;
        if (l < heap->len && pp_zb_wake_before(&h[l], &h[best]))
            best = l;
        if (r < heap->len && pp_zb_wake_before(&h[r], &h[best]))
            best = r;
        if (best == i)
            break;
        PpZbWake tmp = h[i];
        h[i] = h[best];
        h[best] = tmp;
        i = best;
    }
    return top;
}

/* Input of stage @s arrives at @t_ns: wake it then if it would otherwise decide later. */
static void pp_zb_wake(GArray *heap, PpZbStage *st, int32_t s, int64_t t_ns) {
    int64_t at_ns = MAX(t_ns, st[s].free_ns);
    if (at_ns < st[s].ready_ns) {
        st[s].ready_ns = at_ns;
        pp_zb_heap_push(heap, at_ns, s);
    }
}

/* Runs the greedy for one step into @order. Returns C, the largest stage span (ns).
 * f_arr / b_arr: (n_stages, m) arrival time of the activation / gradient of each
 * micro-batch at each stage, -1 while unknown. */
static int64_t pp_zb_greedy_run(const PpZbGreedyConfig *cfg, PpZbOrder *order) {
    const int32_t n = order->n_stages, m = order->m;
    int64_t      *f_arr = g_new(int64_t, (size_t)n * m); // (n_stages, m) ns
    int64_t      *b_arr = g_new(int64_t, (size_t)n * m); // (n_stages, m) ns
    PpZbStage    *st = g_new0(PpZbStage, n);
    GArray       *heap = g_array_new(FALSE, FALSE, sizeof(PpZbWake));
    for (size_t i = 0; i < (size_t)n * m; i++) {
        f_arr[i] = i < (size_t)m ? 0 : -1; // stage 0 has every input at time 0
        b_arr[i] = -1;
    }
    for (int32_t s = 0; s < n; s++) {
        st[s].first_ns = -1;
        pp_zb_heap_push(heap, 0, s);
    }

    int32_t n_done = 0;
    while (n_done < n) {
        PpZbWake      wake = pp_zb_heap_pop(heap);
        const int32_t s = wake.stage;
        PpZbStage    *me = &st[s];
        if (wake.t_ns != me->ready_ns || me->k == 3 * m)
            continue;
        const int64_t  t = wake.t_ns;
        const int64_t *fa = &f_arr[(size_t)s * m], *ba = &b_arr[(size_t)s * m];
        const int32_t  warm_cap =
            MAX(1, cfg->limit - cfg->reserve_per_stage * s - cfg->reserve_base);
        const gboolean f_room = me->nf < m &&
                                me->mem + PP_ZB_MEM_UNIT <= cfg->limit * PP_ZB_MEM_UNIT &&
                                (me->nb > 0 || me->nf < warm_cap);
        const gboolean b_ok = me->nb < m && ba[me->nb] >= 0 && ba[me->nb] <= t;
        const gboolean f_ok = f_room && fa[me->nf] >= 0 && fa[me->nf] <= t;
        int64_t        next_ns = PP_ZB_NEVER; // next known arrival this stage could use
        if (me->nb < m && ba[me->nb] > t)
            next_ns = ba[me->nb];
        if (f_room && fa[me->nf] > t)
            next_ns = MIN(next_ns, fa[me->nf]);

        PpZbSlot slot;
        int64_t  dur_ns;
        if (f_ok && (!b_ok || (cfg->alternate && me->last_was_b))) {
            slot = (PpZbSlot){PP_OP_FORWARD, me->nf++};
            dur_ns = cfg->f_ns;
            me->mem += PP_ZB_MEM_UNIT;
            me->last_was_b = FALSE;
        } else if (b_ok) {
            slot = (PpZbSlot){PP_OP_BACKWARD, me->nb++};
            dur_ns = cfg->b_ns;
            me->mem -= PP_ZB_MEM_UNIT - cfg->w_mem;
            me->last_was_b = TRUE;
        } else if (me->nw < me->nb &&
                   (!cfg->fit || next_ns == PP_ZB_NEVER || t + cfg->w_ns <= next_ns)) {
            slot = (PpZbSlot){PP_OP_WEIGHT, me->nw++};
            dur_ns = cfg->w_ns;
            me->mem -= cfg->w_mem;
        } else {
            me->ready_ns = next_ns;
            if (next_ns != PP_ZB_NEVER)
                pp_zb_heap_push(heap, next_ns, s);
            continue;
        }

        const int64_t end_ns = t + dur_ns;
        order->slots[(size_t)s * 3 * m + me->k++] = slot;
        if (me->first_ns < 0)
            me->first_ns = t;
        me->free_ns = end_ns;
        me->ready_ns = end_ns;
        if (me->k == 3 * m)
            n_done++;
        else
            pp_zb_heap_push(heap, end_ns, s);
        if (slot.kind == PP_OP_FORWARD && s + 1 < n) {
            f_arr[(size_t)(s + 1) * m + slot.mb] = end_ns + cfg->comm_ns;
            pp_zb_wake(heap, st, s + 1, end_ns + cfg->comm_ns);
        } else if (slot.kind == PP_OP_FORWARD) {
            b_arr[(size_t)s * m + slot.mb] = end_ns; // the last stage feeds its own B
        } else if (slot.kind == PP_OP_BACKWARD && s > 0) {
            b_arr[(size_t)(s - 1) * m + slot.mb] = end_ns + cfg->comm_ns;
            pp_zb_wake(heap, st, s - 1, end_ns + cfg->comm_ns);
        }
    }

    int64_t c_ns = 0;
    for (int32_t s = 0; s < n; s++)
        c_ns = MAX(c_ns, st[s].free_ns - st[s].first_ns);
    g_array_free(heap, TRUE);
    g_free(st);
    g_free(b_arr);
    g_free(f_arr);
    return c_ns;
}

/* Builds zb-1p (@mult 1) or zb-2p (@mult 2): the best of the greedy's sixteen variants. */
static PpSchedule *pp_zb_build_auto(const PpScheduleParams *params, const PpSchedKindInfo *info,
                                    int32_t mult, GError **error) {
    const char *kind = info->name;
    if (!pp_zb_check(params, info, error))
        return NULL;
    if (params->f_ns < 0 || params->b_ns < 0 || params->w_ns < 0 || params->comm_ns < 0) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s': costs f_ns = %" G_GINT64_FORMAT ", b_ns = %" G_GINT64_FORMAT
                    ", w_ns = %" G_GINT64_FORMAT ", comm_ns = %" G_GINT64_FORMAT
                    " must not be negative; valid: >= 0 (f, b, w all 0: unit costs)",
                    kind, params->f_ns, params->b_ns, params->w_ns, params->comm_ns);
        return NULL;
    }
    const double w_frac = params->mem_w_fraction;
    if (!(w_frac >= 0.0 && w_frac <= 1.0)) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s': mem_w_fraction = %g is out of range; valid: [0, 1], "
                    "M_W / M_F (0: whole units, held from F until W)",
                    kind, w_frac);
        return NULL;
    }
    const int32_t    n = params->n_stages, m = params->n_microbatches;
    const gboolean   unit = params->f_ns == 0 && params->b_ns == 0 && params->w_ns == 0;
    PpZbGreedyConfig cfg = {
        .f_ns = unit ? 1 : params->f_ns,
        .b_ns = unit ? 1 : params->b_ns,
        .w_ns = unit ? 1 : params->w_ns,
        .comm_ns = unit ? 0 : params->comm_ns,
        .limit = (int32_t)MIN((int64_t)mult * n, m),
        /* rounded up: a deferred W is never counted below its true share */
        .w_mem = w_frac == 0.0 ? PP_ZB_MEM_UNIT : (int64_t)ceil(w_frac * (double)PP_ZB_MEM_UNIT),
    };
    PpZbOrder best, trial;
    pp_zb_order_init(&best, n, m);
    pp_zb_order_init(&trial, n, m);
    static const int32_t reserves[4][2] = {{0, 0}, {1, 0}, {2, 0}, {2, 1}}; // (r, q)
    int64_t              best_ns = PP_ZB_NEVER;
    for (int32_t v = 0; v < 16; v++) {
        cfg.reserve_per_stage = reserves[v / 4][0];
        cfg.reserve_base = reserves[v / 4][1];
        cfg.alternate = (v & 2) == 0;
        cfg.fit = (v & 1) != 0;
        int64_t c_ns = pp_zb_greedy_run(&cfg, &trial);
        if (c_ns < best_ns) {
            best_ns = c_ns;
            PpZbSlot *tmp = best.slots;
            best.slots = trial.slots;
            trial.slots = tmp;
        }
    }
    PpSchedule *sched = pp_zb_emit(params, info, &best, cfg.limit);
    if (cfg.w_mem < PP_ZB_MEM_UNIT) {
        /* The byte limit, not a unit count, bounded the search: declare the units it left. */
        for (int32_t s = 0; s < n; s++)
            sched->n_buffers[s] = pp_schedule_peak_inflight(sched, s);
    }
    pp_zb_order_clear(&trial);
    pp_zb_order_clear(&best);
    return sched;
}

static PpSchedule *pp_sched_build_zb_1p(const PpScheduleParams *params, GError **error) {
    return pp_zb_build_auto(params, &pp_sched_kind_zb_1p, 1, error);
}

static PpSchedule *pp_sched_build_zb_2p(const PpScheduleParams *params, GError **error) {
    return pp_zb_build_auto(params, &pp_sched_kind_zb_2p, 2, error);
}

/* --- records --- */

/* The zero-bubble kinds differ only in name, generator and summary. */
#define PP_ZB_KIND(kind_name, fn, text)                                                            \
    PP_SCHED_KIND_FLUSH(kind_name, fn, text), .min_chunks = 1, .max_chunks = 1

const PpSchedKindInfo pp_sched_kind_zb_h1 = {PP_ZB_KIND(
    "zb-h1", pp_sched_build_zb_h1, "zero-bubble handcrafted ZB-H1 (B/W split, 1F1B memory)")};
const PpSchedKindInfo pp_sched_kind_zb_h2 = {PP_ZB_KIND(
    "zb-h2", pp_sched_build_zb_h2, "zero-bubble handcrafted ZB-H2 (B/W split, more memory)")};
const PpSchedKindInfo pp_sched_kind_zb_1p = {
    PP_ZB_KIND("zb-1p", pp_sched_build_zb_1p,
               "zero-bubble automatic schedule under 1x 1F1B's peak activations (greedy)"),
    .reads_costs = TRUE,
};
const PpSchedKindInfo pp_sched_kind_zb_2p = {
    PP_ZB_KIND("zb-2p", pp_sched_build_zb_2p,
               "zero-bubble automatic schedule under 2x 1F1B's peak activations (greedy)"),
    .reads_costs = TRUE,
};
