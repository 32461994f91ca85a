/* SPDX-License-Identifier: MIT
 * sim-engine.c: the discrete-event engine (docs/design.md §4.2). Each stage runs its program
 * in order; the one event is "op ends" (at most one per stage queued). An op starts when it
 * heads its program, its device is free and its dependencies ended (+ comm across devices).
 * State is in flat arrays by op id; the run ends with ns-3-style consistency checks. Dynamic
 * mode runs PACI's policy live and replays the program it recorded. */
#include "sim-engine.h"

#include <math.h>

#include "pp-checked.h"
#include "pp-error.h"
#include "pp-policy.h"
#include "pp-sched-gen.h"
#include "sim-queue.h"

typedef struct {
    int32_t  pc;             /* next program index to start */
    gboolean busy;           /* an op of this stage is in the queue */
    int64_t  free_ns;        /* end of the last op that ran */
    int32_t  version;        /* U ops ended so far: the current weight version */
    int32_t  n_updates;      /* U ops in the program */
    int32_t  inflight;       /* (mb, chunk) units with F ended and BW (or W) not ended */
    int64_t  act_live_bytes; /* activations held by those units */
    int64_t  stash_bytes;    /* stashed weight copies: (versions alive - 1) * copy bytes */
    int32_t  oldest;         /* STASHED: least F version an in-flight unit still needs */
    int32_t *need;           /* STASHED: (n_updates + 1) in-flight units per F version */
    int64_t *u_end_ns;       /* (n_updates) end time of each U, in program order */
    int64_t  first_start_ns;
    int64_t *grad_start_ns; /* (n_chunks) start of the chunk's last backward (BW or W) since
                               the last U: its gradient is complete at grad_end_ns */
    int64_t *grad_end_ns;   /* (n_chunks) its end; both 0 before any */
    int64_t  dp_free_ns;    /* the stage's data-parallel channel is free from here */
} SimStageState;

/* Per-op state, kept together so that releasing a successor touches one cache line. */
typedef struct {
    int64_t ready_ns; /* latest (dependency end + comm) seen so far */
    int32_t pending;  /* cross-op dependencies not ended yet */
} SimOpState;

typedef struct {
    const PpSchedule   *sched;
    const SimCostModel *cost;
    int64_t             comm_ns;       /* one cross-device hop inside a node */
    int64_t             comm_inter_ns; /* one hop between nodes */
    int32_t            *unit_vs;       /* (n_stages * n_chunks) virtual stage of (stage, chunk) */
    SimOpState         *ops;           /* (n_ops) by flat op id */
    int64_t            *copy_ns;       /* (n_ops) weight copy an F pays, or NULL */
    SimStageState      *st;            /* (n_stages) */
    int32_t             n_step_slots;  /* synchronous: n_steps + 1 (ops after the last U of a
                                          custom order fall in the extra slot) */
    int64_t   *step_first_ns;          /* synchronous: (n_stages, n_step_slots) first start */
    int64_t   *step_last_ns;           /* synchronous: (n_stages, n_step_slots) last F/B/W end */
    int64_t   *step_busy_ns;           /* synchronous: (n_stages, n_step_slots) F/B/W busy */
    SimQueue  *queue;
    gboolean  *dp_done; /* (n_chunks) scratch of sim_run_dp_sync() */
    SimResult *result;
    int64_t    memory_capacity; /* rows allocated in result->memory_timeline */
} SimRun;

/* Duration of @op, flat id @id (ns): the per-op array when @cost has one, else the cost
 * tables plus the op's weight copy (@copy_ns, nullable: sim_stash_copies()); BW costs
 * sim_cost_bw_ns(). */
static inline int64_t sim_run_op_dur(const SimCostModel *cost, const int64_t *copy_ns,
                                     const PpOp *op, int32_t id) {
    if (cost->op_dur_ns != NULL)
        return cost->op_dur_ns[id];
    if (op->kind == PP_OP_UPDATE)
        return cost->u_ns[op->stage];
    int32_t unit = op->stage * cost->n_chunks + op->chunk;
    switch (op->kind) {
    case PP_OP_FORWARD:
        return cost->f_ns[unit] + (copy_ns != NULL ? copy_ns[id] : 0);
    case PP_OP_BACKWARD:
        return cost->b_ns[unit];
    case PP_OP_WEIGHT:
        return cost->w_ns[unit];
    case PP_OP_BACKWARD_FULL:
        return sim_cost_bw_ns(cost, unit);
    default:
        PP_UNREACHABLE();
    }
}

/* Time from the end of an op on stage @from to its successor on stage @to being able to
 * start: 0 on one device, else one hop inside or between nodes (sim_cost_hop_ns()). */
static inline int64_t sim_run_hop_ns(const SimRun *run, int32_t from, int32_t to) {
    if (from == to)
        return 0;
    const int64_t *node = run->cost->stage_node;
    if (node == NULL || (node[from] >= 0 && node[from] == node[to]))
        return run->comm_ns;
    return run->comm_inter_ns;
}

/* Flat id of kind @kind of the (mb, chunk) that @op works on, on the same stage; -1 if none. */
static inline int32_t sim_run_sibling(const SimRun *run, const PpOp *op, PpOpKind kind) {
    const PpSchedule *sched = run->sched;
    int32_t           vs = run->unit_vs[op->stage * sched->n_chunks + op->chunk];
    return sched->mb_ops[((int64_t)op->mb * sched->n_vstages + vs) * PP_OP_N_KINDS + kind];
}

/* Flat id of the F of the unit that backward @op (flat id @id) works on: found among its
 * dependencies (B/BW depend on their F; W on its B, which does), which sit next to the op's
 * own entries in memory, unlike the (mb, vs) index. */
static inline int32_t sim_run_forward_of(const SimRun *run, const PpOp *op, int32_t id) {
    const PpSchedule *sched = run->sched;
    for (int32_t k = sched->dep_offset[id]; k < sched->dep_offset[id + 1]; k++) {
        PpOpRef     ref = sched->deps[k];
        const PpOp *dep = &sched->programs[ref.stage][ref.index];
        if (ref.stage != op->stage || dep->mb != op->mb || dep->chunk != op->chunk)
            continue;
        int32_t dep_id = sched->op_offset[ref.stage] + ref.index;
        if (dep->kind == PP_OP_FORWARD)
            return dep_id;
        if (dep->kind == PP_OP_BACKWARD)
            return sim_run_forward_of(run, dep, dep_id);
    }
    return -1;
}

/* --- bounds: every clock and byte count of a run fits int64 --- */

/* One hop of @latency_ns on a link of @bytes_per_ns when it stays within PP_CHECKED_MAX;
 * FALSE otherwise. */
static gboolean sim_bound_link(const SimCostModel *cost, int64_t latency_ns, double bytes_per_ns,
                               int64_t *hop_ns) {
    if (bytes_per_ns <= 0.0 || cost->act_msg_bytes == 0) {
        *hop_ns = latency_ns;
        return latency_ns <= PP_CHECKED_MAX;
    }
    int64_t transfer_ns;
    return pp_checked_round((double)cost->act_msg_bytes / bytes_per_ns, &transfer_ns) &&
           pp_checked_add(latency_ns, transfer_ns, hop_ns);
}

/* The longest hop (sim_cost_comm_ns, and the inter-node one when stages sit on nodes) when it
 * stays within PP_CHECKED_MAX; FALSE otherwise. */
static gboolean sim_bound_hop(const SimCostModel *cost, int64_t *hop_ns) {
    if (!sim_bound_link(cost, cost->comm_latency_ns, cost->comm_bytes_per_ns, hop_ns))
        return FALSE;
    int64_t inter_ns;
    if (cost->stage_node == NULL)
        return TRUE;
    if (!sim_bound_link(cost, cost->comm_inter_latency_ns, cost->comm_inter_bytes_per_ns,
                        &inter_ns))
        return FALSE;
    *hop_ns = MAX(*hop_ns, inter_ns);
    return TRUE;
}

static gboolean sim_bound_time_error(double total_ns, int64_t n_ops, GError **error) {
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                "the run's %" G_GINT64_FORMAT " ops and their hops add up to %.3g ns, beyond "
                "the simulator's clock of 2^62 ns (146 years); lower training.steps, "
                "pipeline.microbatches or pipeline.accumulation, or the op times ([costs] or "
                "the model and [hardware])",
                n_ops, total_ns);
    return FALSE;
}

/* Bounds a stage's memory: its static bytes, @n_copies stashed weight copies and @n_units live
 * units of its largest per-unit activations. */
static gboolean sim_bound_memory(const SimCostModel *cost, int32_t stage, int64_t n_copies,
                                 int64_t n_units, GError **error) {
    int64_t act_bytes = 0, bytes;
    for (int32_t c = 0; c < cost->n_chunks; c++)
        act_bytes = MAX(act_bytes, cost->act_bytes[stage * cost->n_chunks + c]);
    if (pp_checked_add_mul(cost->static_bytes[stage], n_copies, cost->weight_copy_bytes[stage],
                           &bytes) &&
        pp_checked_add_mul(bytes, n_units, act_bytes, &bytes))
        return TRUE;
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                "stage %d may hold %.3g bytes (%" G_GINT64_FORMAT " static, %" G_GINT64_FORMAT
                " weight copies of %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                " live units of %" G_GINT64_FORMAT
                "), beyond the simulator's limit of 2^62 bytes; shrink the model "
                "or pipeline.microbatch_size",
                stage,
                (double)cost->static_bytes[stage] +
                    (double)n_copies * (double)cost->weight_copy_bytes[stage] +
                    (double)n_units * (double)act_bytes,
                cost->static_bytes[stage], n_copies, cost->weight_copy_bytes[stage], n_units,
                act_bytes);
    return FALSE;
}

/* The weight copies of a stashing schedule: the first F of each weight version on a stage
 * copies the stage's weights (stash_copy_ns), as the executor does. Returns: (transfer full)
 * (nullable): (n_ops) ns per flat op id, 0 for every other op; NULL when nothing copies (no
 * stash_copy_ns, per-op durations, or a schedule that does not stash). */
static int64_t *sim_stash_copies(const PpSchedule *sched, const SimCostModel *cost) {
    if (cost->stash_copy_ns == NULL || cost->op_dur_ns != NULL ||
        sched->weight_mode != PP_WEIGHTS_STASHED)
        return NULL;
    int64_t *copy_ns = g_new0(int64_t, MAX(pp_schedule_n_ops_total(sched), 1));
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int32_t last = -1;
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            int32_t id = sched->op_offset[s] + i;
            if (sched->programs[s][i].kind == PP_OP_FORWARD && sched->version[id] != last) {
                copy_ns[id] = cost->stash_copy_ns[s];
                last = sched->version[id];
            }
        }
    }
    return copy_ns;
}

/* Checks that a run of @sched with @cost keeps every integer within PP_CHECKED_MAX. An op
 * starts when its device is free or one hop after a dependency ends, so no time exceeds the
 * sum of every op's duration plus one hop per op; a stage holds at most its declared peak
 * in-flight units (n_buffers) of activations and, when stashing, one copy per update.
 * Returns FALSE with @error (PP_SCENARIO_ERROR_INCONSISTENT) otherwise. */
static gboolean sim_run_check_bounds(const PpSchedule *sched, const SimCostModel *cost,
                                     GError **error) {
    int64_t             hop_ns, total_ns = 0, n_ops = pp_schedule_n_ops_total(sched);
    double              total = 0.0; /* the same sum in floating point, for the message */
    gboolean            fits = sim_bound_hop(cost, &hop_ns);
    g_autofree int64_t *copy_ns = sim_stash_copies(sched, cost);
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int64_t n_updates = 0;
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            int64_t     dur_ns = sim_run_op_dur(cost, copy_ns, op, sched->op_offset[s] + i);
            total += (double)dur_ns + (fits ? (double)hop_ns : 0.0);
            fits = fits && pp_checked_add(total_ns, dur_ns, &total_ns) &&
                   pp_checked_add(total_ns, hop_ns, &total_ns);
            n_updates += op->kind == PP_OP_UPDATE;
        }
        int64_t copies = sched->weight_mode == PP_WEIGHTS_STASHED ? n_updates : 0;
        if (!sim_bound_memory(cost, s, copies, sched->n_buffers[s], error))
            return FALSE;
    }
    return fits || sim_bound_time_error(total, n_ops, error);
}

/* The time @stage's gradients are synchronised across the data replicas, for the U that
 * heads its program (every backward before it has ended). Each chunk's all-reduce
 * (dp_sync_ns) is ready once its gradient is: at the end of the chunk's last backward since
 * the previous U, or with dp_overlap when its first layer's share of that backward is done
 * (start + duration / layers). The stage's channel runs them one at a time, in ready order
 * (ties: chunk index), from when the previous U's synchronisation ended; with overlap a
 * chunk's all-reduce still ends no earlier than its last layer's share after the backward
 * (end + sync / layers). With per-U times (op_sync_ns) the U of flat id @id instead waits for
 * one piece of that length from the latest chunk's gradient. Resets the chunks' gradient
 * times for the next window. */
static int64_t sim_run_dp_sync(SimRun *run, int32_t stage, int32_t id) {
    const SimCostModel *cost = run->cost;
    SimStageState      *st = &run->st[stage];
    const int32_t       v = cost->n_chunks;
    int64_t             free_ns = st->dp_free_ns;
    gboolean           *done = run->dp_done; /* (n_chunks) chunk already scheduled */
    for (int32_t c = 0; c < v; c++)
        done[c] = cost->op_sync_ns != NULL;
    if (cost->op_sync_ns != NULL) {
        int64_t ready = free_ns;
        for (int32_t c = 0; c < v; c++)
            ready = MAX(ready, st->grad_end_ns[c]);
        free_ns = ready + cost->op_sync_ns[id];
    }
    for (int32_t k = 0; k < v && cost->op_sync_ns == NULL; k++) {
        int32_t best = -1;
        int64_t best_ready = 0;
        for (int32_t c = 0; c < v; c++) {
            if (done[c])
                continue;
            int32_t unit = stage * v + c;
            int64_t ready = st->grad_end_ns[c];
            if (cost->dp_overlap)
                ready = st->grad_start_ns[c] +
                        (st->grad_end_ns[c] - st->grad_start_ns[c]) / cost->dp_pieces[unit];
            if (best < 0 || ready < best_ready) {
                best = c;
                best_ready = ready;
            }
        }
        done[best] = TRUE;
        int32_t unit = stage * v + best;
        int64_t end_ns = MAX(free_ns, best_ready) + cost->dp_sync_ns[unit];
        if (cost->dp_overlap)
            end_ns =
                MAX(end_ns, st->grad_end_ns[best] + cost->dp_sync_ns[unit] / cost->dp_pieces[unit]);
        free_ns = end_ns;
    }
    for (int32_t c = 0; c < v; c++)
        st->grad_start_ns[c] = st->grad_end_ns[c] = free_ns;
    st->dp_free_ns = free_ns;
    return free_ns;
}

/* Starts the head of @stage's program if the device is idle and its dependencies ended:
 * start = max(device free, latest dependency end + comm); queues its end. */
static void sim_run_try_start(SimRun *run, int32_t stage) {
    const PpSchedule *sched = run->sched;
    SimStageState    *st = &run->st[stage];
    if (st->busy || st->pc == sched->n_ops[stage])
        return;
    int32_t id = sched->op_offset[stage] + st->pc;
    if (run->ops[id].pending > 0)
        return;
    const PpOp *op = &sched->programs[stage][st->pc];
    int64_t     start_ns = MAX(st->free_ns, run->ops[id].ready_ns);
    if (op->kind == PP_OP_UPDATE && run->cost->dp_sync_ns != NULL) {
        int64_t synced_ns = sim_run_dp_sync(run, stage, id);
        if (synced_ns > start_ns) {
            run->result->stages[stage].dp_wait_ns += synced_ns - start_ns;
            start_ns = synced_ns;
        }
    }
    if (st->pc == 0)
        st->first_start_ns = start_ns;
    st->busy = TRUE;
    sim_queue_push(run->queue, start_ns + sim_run_op_dur(run->cost, run->copy_ns, op, id), stage,
                   id);
}

/* Appends @stage's memory at @time_ns, @stash_bytes of stashed copies and its live
 * activations, to the timeline (sized for one row per stage plus one per op). */
static void sim_run_memory_row(SimRun *run, int32_t stage, int64_t time_ns, int64_t stash_bytes) {
    SimResult           *res = run->result;
    const SimStageState *st = &run->st[stage];
    PP_ASSERT(res->n_memory_rows < run->memory_capacity);
    res->memory_timeline[res->n_memory_rows++] = (SimMemoryRow){
        .stage = stage,
        .time_ns = time_ns,
        .activation_bytes = st->act_live_bytes,
        .stash_bytes = stash_bytes,
        .total_bytes = run->cost->static_bytes[stage] + stash_bytes + st->act_live_bytes};
}

/* Accounts the end of op @id on @stage at @end_ns: busy time, spans, weight versions, memory,
 * in-flight units, drift and delay, and its trace row. */
static void sim_run_account(SimRun *run, int32_t stage, int32_t id, int64_t end_ns) {
    const PpSchedule   *sched = run->sched;
    const SimCostModel *cost = run->cost;
    SimStageState      *st = &run->st[stage];
    SimStageResult     *sr = &run->result->stages[stage];
    const PpOp         *op = &sched->programs[stage][id - sched->op_offset[stage]];
    const int64_t       dur_ns = sim_run_op_dur(run->cost, run->copy_ns, op, id);
    const int64_t       start_ns = end_ns - dur_ns;
    const gboolean      stashed = sched->weight_mode == PP_WEIGHTS_STASHED;
    const int64_t       act_before_bytes = st->act_live_bytes;
    int32_t             unit = op->stage * cost->n_chunks + op->chunk;
    int32_t             version_f = -1, version_b = -1;

    sr->busy_ns += dur_ns;
    if (sched->synchronous && op->kind != PP_OP_UPDATE) {
        PP_ASSERT(op->step >= 0 && op->step < run->n_step_slots);
        int64_t k = (int64_t)stage * run->n_step_slots + op->step;
        if (run->step_last_ns[k] < 0)
            run->step_first_ns[k] = start_ns;
        run->step_last_ns[k] = end_ns;
        run->step_busy_ns[k] += dur_ns;
    }

    switch (op->kind) {
    case PP_OP_FORWARD: {
        version_f = sched->version[id];
        /* The schedule's static count and the engine's running count must agree. */
        PP_ASSERT(version_f == st->version);
        if (run->result->trace != NULL)
            version_b = pp_schedule_backward_version(
                sched, id,
                sim_run_sibling(run, op,
                                sched->split_backward ? PP_OP_BACKWARD : PP_OP_BACKWARD_FULL));
        st->act_live_bytes += cost->act_bytes[unit];
        if (stashed)
            st->need[version_f]++;
        break;
    }
    case PP_OP_BACKWARD:
    case PP_OP_BACKWARD_FULL:
    case PP_OP_WEIGHT: {
        if (op->kind != PP_OP_BACKWARD) { /* the chunk's weight gradient is complete */
            st->grad_start_ns[op->chunk] = start_ns;
            st->grad_end_ns[op->chunk] = end_ns;
        }
        int32_t f_id = sim_run_forward_of(run, op, id);
        int32_t b_id = op->kind == PP_OP_WEIGHT ? sim_run_sibling(run, op, PP_OP_BACKWARD) : id;
        PP_ASSERT(f_id >= 0 && b_id >= 0);
        version_f = sched->version[f_id];
        version_b = pp_schedule_backward_version(sched, f_id, b_id);
        if (op->kind != PP_OP_WEIGHT)
            sr->delta_max = MAX(sr->delta_max, pp_schedule_delta_ids(sched, f_id, b_id));
        if (op->kind == PP_OP_BACKWARD) {
            st->act_live_bytes -= cost->act_b_bytes[unit];
            break;
        }
        /* The weight gradient is complete: the next U on this stage (index = updates ended
         * so far) applies it, if the program has one. */
        if (st->version < st->n_updates)
            sr->delay_max = MAX(sr->delay_max, st->version - version_f);
        st->act_live_bytes -= op->kind == PP_OP_WEIGHT
                                  ? cost->act_bytes[unit] - cost->act_b_bytes[unit]
                                  : cost->act_bytes[unit];
        if (stashed) {
            PP_ASSERT(st->need[version_f] > 0); /* the unit was counted at its F */
            st->need[version_f]--;
        }
        break;
    }
    case PP_OP_UPDATE:
        PP_ASSERT(st->version < st->n_updates);
        st->u_end_ns[st->version++] = end_ns;
        break;
    default:
        PP_UNREACHABLE();
    }
    st->inflight += pp_op_inflight_change(op->kind);
    PP_ASSERT(st->inflight >= 0 && st->act_live_bytes >= 0);

    /* Distinct weight versions alive: the current one plus, under stashing, every version
     * back to the oldest one an in-flight unit still needs. New units always take the
     * current version, so the oldest needed version never moves back. */
    int32_t versions = 1;
    if (stashed) {
        while (st->oldest < st->version && st->need[st->oldest] == 0)
            st->oldest++;
        versions = st->version - st->oldest + 1;
    }
    int64_t stash_bytes = (int64_t)(versions - 1) * cost->weight_copy_bytes[stage];
    int64_t memory_bytes = cost->static_bytes[stage] + stash_bytes + st->act_live_bytes;
    sr->weight_versions = MAX(sr->weight_versions, versions);
    sr->peak_inflight = MAX(sr->peak_inflight, st->inflight);
    sr->peak_activation_bytes = MAX(sr->peak_activation_bytes, st->act_live_bytes);
    sr->peak_stash_bytes = MAX(sr->peak_stash_bytes, stash_bytes);
    if (memory_bytes > sr->peak_memory_bytes) {
        /* the first moment of the peak and what it is made of */
        sr->peak_memory_bytes = memory_bytes;
        sr->peak_time_ns = end_ns;
        sr->stash_peak_bytes = stash_bytes;
        sr->activation_peak_bytes = st->act_live_bytes;
    }
    if (run->result->memory_timeline != NULL &&
        (st->act_live_bytes != act_before_bytes || stash_bytes != st->stash_bytes))
        sim_run_memory_row(run, stage, end_ns, stash_bytes);
    st->stash_bytes = stash_bytes;

    if (run->result->trace != NULL) {
        PpTraceRow row = {.stage = stage,
                          .kind = op->kind,
                          .mb = op->mb,
                          .chunk = op->chunk,
                          .step = op->step,
                          .start_ns = start_ns,
                          .end_ns = end_ns,
                          .version_f = version_f,
                          .version_b = version_b,
                          .resource = PP_RESOURCE_COMPUTE};
        pp_trace_append(run->result->trace, &row);
    }
}

/* The event loop: pop the least (end time, stage, seq), account the op, release its stage
 * and its successors, start whatever became startable. */
static void sim_run_loop(SimRun *run) {
    const PpSchedule *sched = run->sched;
    const int32_t     n_stages = sched->n_stages;
    int64_t           now_ns = 0;
    int64_t           n_done = 0;
    SimEvent          ev;

    for (int32_t s = 0; s < n_stages; s++)
        sim_run_try_start(run, s);
    while (sim_queue_pop(run->queue, &ev)) {
        PP_ASSERT(ev.time_ns >= now_ns); /* time never goes backwards */
        now_ns = ev.time_ns;
        const int32_t  stage = ev.stage, id = ev.payload;
        SimStageState *st = &run->st[stage];
        PP_ASSERT(st->busy && id == sched->op_offset[stage] + st->pc);
        sim_run_account(run, stage, id, now_ns);
        n_done++;
        st->busy = FALSE;
        st->free_ns = now_ns;
        st->pc++;
        for (int32_t k = sched->succ_offset[id]; k < sched->succ_offset[id + 1]; k++) {
            PpOpRef     ref = sched->succ[k];
            int32_t     sid = sched->op_offset[ref.stage] + ref.index;
            int64_t     arrive_ns = now_ns + sim_run_hop_ns(run, stage, ref.stage);
            SimOpState *succ = &run->ops[sid];
            succ->ready_ns = MAX(succ->ready_ns, arrive_ns);
            PP_ASSERT(succ->pending > 0); /* each dependency ends once */
            if (--succ->pending == 0 && ref.stage != stage)
                sim_run_try_start(run, ref.stage);
        }
        sim_run_try_start(run, stage);
    }

    /* ns-3-style end-of-run consistency: the queue drained, every op ran exactly once. */
    PP_ASSERT(sim_queue_length(run->queue) == 0);
    PP_ASSERT(n_done == pp_schedule_n_ops_total(sched));
    for (int32_t s = 0; s < n_stages; s++) {
        PP_ASSERT(!run->st[s].busy && run->st[s].pc == sched->n_ops[s]);
        PP_ASSERT(run->st[s].version == run->st[s].n_updates);
        PP_ASSERT(run->st[s].inflight == 0);
    }
}

/* Step time of an asynchronous run: the mean interval between consecutive U ends on
 * @stage over the middle half of its updates (U index K/4 to 3K/4), so that the warmup and
 * the drain are left out. Falls back to the makespan when the stage updates at most once. */
static int64_t sim_run_async_step_time(const SimRun *run, int32_t stage, int64_t makespan_ns) {
    const SimStageState *st = &run->st[stage];
    int32_t              k = st->n_updates;
    if (k < 2)
        return makespan_ns;
    int32_t lo = k / 4;
    int32_t hi = MIN(k - 1, MAX(lo + 1, (3 * k) / 4));
    return (st->u_end_ns[hi] - st->u_end_ns[lo]) / (hi - lo);
}

/* Fills the run-level reports from the per-stage state (docs/design.md §4.6). */
static void sim_run_report(SimRun *run) {
    const PpSchedule   *sched = run->sched;
    const SimCostModel *cost = run->cost;
    SimResult          *res = run->result;
    const int32_t       n_stages = sched->n_stages;
    int64_t             first_ns = G_MAXINT64, last_ns = 0, busy_ns = 0;

    for (int32_t s = 0; s < n_stages; s++) {
        SimStageResult *sr = &res->stages[s];
        if (sched->n_ops[s] == 0)
            continue;
        sr->span_ns = run->st[s].free_ns - run->st[s].first_start_ns;
        first_ns = MIN(first_ns, run->st[s].first_start_ns);
        last_ns = MAX(last_ns, run->st[s].free_ns);
        busy_ns += sr->busy_ns;
        res->delta_max = MAX(res->delta_max, sr->delta_max);
        res->peak_memory_bytes = MAX(res->peak_memory_bytes, sr->peak_memory_bytes);
    }
    res->makespan_ns = first_ns <= last_ns ? last_ns - first_ns : 0;
    res->efficiency =
        res->makespan_ns > 0 ? (double)busy_ns / ((double)n_stages * res->makespan_ns) : 0.0;

    if (sched->synchronous) {
        /* Steps are separated by a flush: one step is the run over n_steps (a custom order
         * without updates is one step). Bubble: C is the largest span of one stage's F/B/W
         * ops within one step, m(F+B+W) the busiest stage's work in that step (the bottleneck,
         * as for async schedules; with uniform stages every stage's work). */
        res->step_time_ns = res->makespan_ns / MAX(sched->n_steps, 1);
        int64_t c_ns = 0, work_ns = 0;
        for (int32_t j = 0; j < run->n_step_slots; j++) {
            int64_t step_c_ns = 0, step_work_ns = 0;
            for (int32_t s = 0; s < n_stages; s++) {
                int64_t k = (int64_t)s * run->n_step_slots + j;
                if (run->step_last_ns[k] < 0)
                    continue;
                step_c_ns = MAX(step_c_ns, run->step_last_ns[k] - run->step_first_ns[k]);
                step_work_ns = MAX(step_work_ns, run->step_busy_ns[k]);
            }
            if (step_c_ns > c_ns) {
                c_ns = step_c_ns;
                work_ns = step_work_ns;
            }
        }
        res->bubble_fraction = c_ns > 0 ? (double)(c_ns - work_ns) / (double)c_ns : 0.0;
    } else {
        /* The bottleneck stage is the busiest one (lowest index on ties); C = step time,
         * m(F+B+W) = micro-batches per step times its per-micro-batch work. */
        int32_t bottleneck = 0;
        for (int32_t s = 1; s < n_stages; s++)
            if (res->stages[s].busy_ns > res->stages[bottleneck].busy_ns)
                bottleneck = s;
        res->step_time_ns = sim_run_async_step_time(run, bottleneck, res->makespan_ns);
        int64_t work_ns = 0;
        for (int32_t c = 0; c < cost->n_chunks; c++) {
            int32_t unit = bottleneck * cost->n_chunks + c;
            work_ns +=
                cost->f_ns[unit] + (sched->split_backward ? cost->b_ns[unit] + cost->w_ns[unit]
                                                          : sim_cost_bw_ns(cost, unit));
        }
        work_ns *= sched->mb_per_step;
        /* A run too short for a steady state measures its update interval where the window
         * holds the pipeline's drain (fewer forwards per update than m): it can be shorter
         * than m(F+B+W), and the run shows no steady-state bubble: 0, never below (README,
         * "What the figures mean"). */
        res->bubble_fraction = res->step_time_ns > work_ns ? (double)(res->step_time_ns - work_ns) /
                                                                 (double)res->step_time_ns
                                                           : 0.0;
    }

    /* The D replicas run the same pipeline in lockstep: the job does D times its work in the
     * same step time on D times its GPUs. */
    const int32_t replicas = cost->data_parallel;
    const double  gpus_per_replica =
        (double)n_stages * cost->tensor_parallel * cost->context_parallel;
    res->gpus = (int64_t)n_stages * cost->tensor_parallel * cost->context_parallel * replicas;
    if (res->step_time_ns > 0) {
        double steps_per_s = 1e9 / (double)res->step_time_ns;
        res->throughput_tokens_per_s =
            (double)cost->tokens_per_mb * sched->mb_per_step * replicas * steps_per_s;
        res->throughput_samples_per_s =
            (double)cost->samples_per_mb * sched->mb_per_step * replicas * steps_per_s;
        if (cost->peak_flops > 0.0) {
            double per_gpu = (double)sched->mb_per_step * steps_per_s / gpus_per_replica;
            res->mfu = cost->flops_per_mb * per_gpu / cost->peak_flops;
            res->hfu = cost->hw_flops_per_mb * per_gpu / cost->peak_flops;
            res->tflops_per_gpu = cost->flops_per_mb * per_gpu / 1e12;
        }
    }
}

/* Sets up the flat per-op and per-stage state of a run. */
static void sim_run_init(SimRun *run, const PpSchedule *sched, const SimCostModel *cost,
                         gboolean keep_trace, gboolean keep_memory_timeline) {
    const int32_t n_stages = sched->n_stages, n_ops = pp_schedule_n_ops_total(sched);
    run->sched = sched;
    run->cost = cost;
    run->comm_ns = sim_cost_comm_ns(cost);
    run->comm_inter_ns = sim_cost_comm_inter_ns(cost);

    run->unit_vs = g_new(int32_t, (size_t)n_stages * sched->n_chunks);
    for (int32_t s = 0; s < n_stages; s++)
        for (int32_t c = 0; c < sched->n_chunks; c++)
            run->unit_vs[s * sched->n_chunks + c] = pp_schedule_vstage(sched, s, c);

    run->ops = g_new(SimOpState, MAX(n_ops, 1));
    for (int32_t id = 0; id < n_ops; id++)
        run->ops[id] = (SimOpState){.ready_ns = 0,
                                    .pending = sched->dep_offset[id + 1] - sched->dep_offset[id]};

    run->copy_ns = sim_stash_copies(sched, cost);

    run->st = g_new0(SimStageState, n_stages);
    for (int32_t s = 0; s < n_stages; s++) {
        SimStageState *st = &run->st[s];
        /* the static categories make up static_bytes (sim-cost.h) */
        PP_ASSERT(cost->static_bytes[s] == cost->weights_bytes[s] + cost->grads_bytes[s] +
                                               cost->optim_bytes[s] + cost->buffer_bytes[s]);
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            PP_ASSERT(sim_run_op_dur(run->cost, run->copy_ns, op, sched->op_offset[s] + i) >= 0);
            if (op->kind == PP_OP_UPDATE)
                st->n_updates++;
        }
        st->u_end_ns = g_new0(int64_t, MAX(st->n_updates, 1));
        st->grad_start_ns = g_new0(int64_t, sched->n_chunks);
        st->grad_end_ns = g_new0(int64_t, sched->n_chunks);
        if (sched->weight_mode == PP_WEIGHTS_STASHED)
            st->need = g_new0(int32_t, st->n_updates + 1);
    }
    if (sched->synchronous) {
        run->n_step_slots = sched->n_steps + 1;
        size_t n = (size_t)n_stages * run->n_step_slots;
        run->step_first_ns = g_new0(int64_t, n);
        run->step_last_ns = g_new(int64_t, n);
        run->step_busy_ns = g_new0(int64_t, n);
        for (size_t k = 0; k < n; k++)
            run->step_last_ns[k] = -1;
    }
    run->queue = sim_queue_new((size_t)n_stages + 1);
    run->dp_done = g_new(gboolean, sched->n_chunks);

    SimResult *res = g_new0(SimResult, 1);
    res->n_stages = n_stages;
    res->stages = g_new0(SimStageResult, n_stages);
    for (int32_t s = 0; s < n_stages; s++) {
        /* before any op ends a stage holds its static bytes: the peak so far, at time 0 */
        res->stages[s].stage = s;
        res->stages[s].peak_memory_bytes = cost->static_bytes[s];
    }
    res->n_ops_simulated = n_ops;
    if (keep_trace) {
        /* One row per op: size the transparent row array once instead of doubling. */
        res->trace = pp_trace_new();
        res->trace->rows = g_renew(PpTraceRow, res->trace->rows, MAX(n_ops, 1));
        res->trace->capacity = MAX(n_ops, 1);
    }
    run->result = res;
    if (keep_memory_timeline) {
        run->memory_capacity = (int64_t)n_stages + n_ops;
        res->memory_timeline = g_new(SimMemoryRow, run->memory_capacity);
        for (int32_t s = 0; s < n_stages; s++)
            sim_run_memory_row(run, s, 0, 0);
    }
}

static void sim_run_clear(SimRun *run) {
    for (int32_t s = 0; s < run->sched->n_stages; s++) {
        g_free(run->st[s].need);
        g_free(run->st[s].u_end_ns);
        g_free(run->st[s].grad_start_ns);
        g_free(run->st[s].grad_end_ns);
    }
    g_free(run->st);
    g_free(run->unit_vs);
    g_free(run->ops);
    g_free(run->copy_ns);
    g_free(run->step_first_ns);
    g_free(run->step_last_ns);
    g_free(run->step_busy_ns);
    sim_queue_free(run->queue);
    g_free(run->dp_done);
    sim_result_free(run->result);
}

SimResult *sim_engine_run_with(const PpSchedule *sched, const SimCostModel *cost,
                               const SimRunOptions *options, GError **error) {
    if (cost->n_stages != sched->n_stages || cost->n_chunks != sched->n_chunks) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s' has %d stages x %d chunks but the cost model has %d x %d; "
                    "build both from the same pipeline.stages and pipeline.chunks",
                    sched->kind, sched->n_stages, sched->n_chunks, cost->n_stages, cost->n_chunks);
        return NULL;
    }
    PP_ASSERT(sched->op_offset != NULL && sched->mb_ops != NULL); /* finished schedule */
    if (cost->op_dur_ns != NULL && cost->n_op_durs != pp_schedule_n_ops_total(sched)) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s' has %d ops but the cost model gives %d per-op durations",
                    sched->kind, pp_schedule_n_ops_total(sched), cost->n_op_durs);
        return NULL;
    }
    if (cost->op_sync_ns != NULL && (cost->op_dur_ns == NULL || cost->dp_sync_ns == NULL)) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s': per-U synchronisation times need per-op durations and the "
                    "data-parallel synchronisation (op_sync_ns with op_dur_ns and dp_sync_ns)",
                    sched->kind);
        return NULL;
    }
    if (!sim_run_check_bounds(sched, cost, error))
        return NULL;
    SimRun run = {0};
    sim_run_init(&run, sched, cost, options == NULL || options->keep_trace,
                 options != NULL && options->keep_memory_timeline);
    sim_run_loop(&run);
    sim_run_report(&run);
    if (run.result->trace != NULL)
        pp_trace_sort(run.result->trace);
    SimResult *result = g_steal_pointer(&run.result);
    sim_run_clear(&run);
    return result;
}

SimResult *sim_engine_run(const PpSchedule *sched, const SimCostModel *cost, GError **error) {
    return sim_engine_run_with(sched, cost, NULL, error);
}

/* --- dynamic mode: PACI's policy, live --- */

/* Event payloads of a policy run: mb * SIM_POLICY_N_EVENTS + what happened. */
typedef enum {
    SIM_POLICY_END_F,       /* the stage's forward of mb ended */
    SIM_POLICY_END_BW,      /* the stage's backward of mb ended */
    SIM_POLICY_END_U,       /* the stage's update ended (mb 0) */
    SIM_POLICY_ARRIVE_ACT,  /* mb's activation reached the stage */
    SIM_POLICY_ARRIVE_GRAD, /* mb's gradient reached the stage */
    SIM_POLICY_N_EVENTS
} SimPolicyEvent;

typedef struct {
    PpPolicyState state;
    gboolean      busy;
    gboolean      dirty;     /* its state changed since it last decided */
    int32_t       n_f_done;  /* forwards ended (mb order) */
    int32_t       n_bw_done; /* backwards ended (mb order) */
    int32_t       n_act;     /* activations arrived: mbs 0..n_act-1 */
    int32_t       n_grad;    /* gradients arrived: mbs 0..n_grad-1 */
} SimPolicyStage;

/* Runs the policy; records every executed op into @rec. Returns the end of the last op. */
static int64_t sim_policy_loop(const SimCostModel *cost, int32_t n_stages, int32_t a, int32_t n_mb,
                               PpPolicyRecorder *rec) {
    g_autofree SimPolicyStage *st = g_new0(SimPolicyStage, n_stages);
    g_autofree int32_t        *dirty = g_new(int32_t, n_stages); /* (n_stages) stages to decide */
    int32_t                    n_dirty = 0;
    g_autoptr(SimQueue) queue = sim_queue_new(4 * (size_t)n_stages);
    int64_t  now_ns = 0;
    SimEvent ev;

    for (int32_t s = 0; s < n_stages; s++) {
        pp_policy_state_init(&st[s].state, s, n_stages, a, n_mb);
        st[s].dirty = TRUE;
        dirty[n_dirty++] = s;
    }
    for (;;) {
        /* Decide on every stage whose state changed; the stages' choices at one instant are
         * independent (an op changes nothing elsewhere before it ends). */
        for (int32_t k = 0; k < n_dirty; k++) {
            SimPolicyStage *p = &st[dirty[k]];
            int32_t         s = dirty[k];
            p->dirty = FALSE;
            if (p->busy)
                continue;
            /* Gradients reach a stage in mb order (its neighbour runs backwards in order and
             * every hop costs the same), so the lowest ready one is the next in order. */
            p->state.f_input_ready = s == 0 || p->n_act > p->state.next_f_mb;
            int32_t ready = s == n_stages - 1 ? p->n_f_done : p->n_grad;
            p->state.b_ready_mb = ready > p->n_bw_done ? p->n_bw_done : -1;
            int32_t  mb;
            PpOpKind kind = pp_policy_paci_next(&p->state, &mb);
            if (kind == PP_OP_N_KINDS)
                continue;
            int64_t        dur_ns;
            SimPolicyEvent what;
            if (kind == PP_OP_FORWARD) {
                dur_ns = cost->f_ns[s];
                what = SIM_POLICY_END_F;
            } else if (kind == PP_OP_BACKWARD_FULL) {
                dur_ns = sim_cost_bw_ns(cost, s);
                what = SIM_POLICY_END_BW;
            } else {
                PP_ASSERT(kind == PP_OP_UPDATE);
                dur_ns = cost->u_ns[s];
                what = SIM_POLICY_END_U;
                mb = 0;
            }
            pp_policy_recorder_record(rec, s, kind, kind == PP_OP_UPDATE ? -1 : mb);
            pp_policy_state_apply(&p->state, kind, kind == PP_OP_UPDATE ? -1 : mb);
            p->busy = TRUE;
            sim_queue_push(queue, now_ns + dur_ns, s, mb * SIM_POLICY_N_EVENTS + what);
        }
        n_dirty = 0;
        if (!sim_queue_pop(queue, &ev))
            break;
        /* Apply every event of this instant before anyone decides again. */
        PP_ASSERT(ev.time_ns >= now_ns); /* time never goes backwards */
        now_ns = ev.time_ns;
        for (;;) {
            int32_t         s = ev.stage, mb = ev.payload / SIM_POLICY_N_EVENTS;
            SimPolicyStage *p = &st[s];
            switch ((SimPolicyEvent)(ev.payload % SIM_POLICY_N_EVENTS)) {
            case SIM_POLICY_END_F:
                PP_ASSERT(p->busy && mb == p->n_f_done);
                p->busy = FALSE;
                p->n_f_done++;
                if (s < n_stages - 1)
                    sim_queue_push(queue, now_ns + sim_cost_hop_ns(cost, s, s + 1), s + 1,
                                   mb * SIM_POLICY_N_EVENTS + SIM_POLICY_ARRIVE_ACT);
                break;
            case SIM_POLICY_END_BW:
                PP_ASSERT(p->busy && mb == p->n_bw_done);
                p->busy = FALSE;
                p->n_bw_done++;
                if (s > 0)
                    sim_queue_push(queue, now_ns + sim_cost_hop_ns(cost, s, s - 1), s - 1,
                                   mb * SIM_POLICY_N_EVENTS + SIM_POLICY_ARRIVE_GRAD);
                break;
            case SIM_POLICY_END_U:
                PP_ASSERT(p->busy);
                p->busy = FALSE;
                break;
            case SIM_POLICY_ARRIVE_ACT:
                PP_ASSERT(mb == p->n_act); /* activations arrive in mb order */
                p->n_act++;
                break;
            case SIM_POLICY_ARRIVE_GRAD:
                PP_ASSERT(mb == p->n_grad); /* gradients arrive in mb order */
                p->n_grad++;
                break;
            default:
                PP_UNREACHABLE();
            }
            if (!p->dirty) {
                p->dirty = TRUE;
                dirty[n_dirty++] = s;
            }
            const SimEvent *next = sim_queue_peek(queue);
            if (next == NULL || next->time_ns != now_ns)
                break;
            sim_queue_pop(queue, &ev);
        }
    }
    /* The policy must finish the run: every stage forwarded, backwarded and applied all. */
    for (int32_t s = 0; s < n_stages; s++)
        PP_ASSERT(!st[s].busy && pp_policy_state_done(&st[s].state));
    return now_ns;
}

/* sim_run_check_bounds() for the policy run before it exists: each stage runs @n_mb
 * forwards and fused backwards and @n_steps updates (one weight copy), holding at most
 * n_stages units in flight (PACI's backpressure). */
static gboolean sim_policy_check_bounds(const SimCostModel *cost, int32_t n_mb, int32_t n_steps,
                                        GError **error) {
    int64_t  hop_ns, total_ns = 0, n_ops = (2 * (int64_t)n_mb + n_steps) * cost->n_stages;
    double   total = 0.0;
    gboolean fits = sim_bound_hop(cost, &hop_ns);
    for (int32_t s = 0; s < cost->n_stages; s++) {
        /* per micro-batch: F and BW, each followed by a hop; per step: U and a hop */
        const int64_t per_mb[] = {cost->f_ns[s],
                                  cost->bw_ns != NULL ? cost->bw_ns[s] : cost->b_ns[s],
                                  cost->bw_ns != NULL ? 0 : cost->w_ns[s], hop_ns, hop_ns};
        const int64_t per_step[] = {cost->u_ns[s], hop_ns};
        for (size_t k = 0; k < G_N_ELEMENTS(per_mb); k++) {
            total += (double)n_mb * (double)per_mb[k];
            fits = fits && pp_checked_add_mul(total_ns, n_mb, per_mb[k], &total_ns);
        }
        for (size_t k = 0; k < G_N_ELEMENTS(per_step); k++) {
            total += (double)n_steps * (double)per_step[k];
            fits = fits && pp_checked_add_mul(total_ns, n_steps, per_step[k], &total_ns);
        }
        if (!sim_bound_memory(cost, s, 0, cost->n_stages, error))
            return FALSE;
    }
    return fits || sim_bound_time_error(total, n_ops, error);
}

SimResult *sim_engine_run_policy_with(const PpScheduleParams *params, const SimCostModel *cost,
                                      const SimRunOptions *options, PpSchedule **program_out,
                                      GError **error) {
    const PpSchedKindInfo *info = params->kind;
    if (info == NULL || !info->has_policy) {
        g_autofree char *policy_kinds = pp_sched_kind_policy_names();
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s' has no run-time policy; dynamic mode runs %s only "
                    "(use pipeline.mode = static for other schedules)",
                    info != NULL ? info->name : "(none)", policy_kinds);
        return NULL;
    }
    const char   *kind = info->name;
    const int32_t a = pp_sched_kind_mb_per_step(info, params->n_microbatches, params->accumulation);
    if (!pp_sched_check_param(kind, "n_stages", params->n_stages, 1, G_MAXINT32, error) ||
        !pp_sched_check_param(kind, "accumulation", a, 1, G_MAXINT32, error) ||
        !pp_sched_check_param(kind, "n_steps", params->n_steps, 1, G_MAXINT32, error) ||
        !pp_sched_check_size(kind, (int64_t)params->n_steps * a, params->n_stages, error))
        return NULL;
    if (cost->op_dur_ns != NULL) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "dynamic '%s' decides its ops at run time: per-op durations (a replayed "
                    "trace) need a static program",
                    kind);
        return NULL;
    }
    if (cost->dp_sync_ns != NULL) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "dynamic 'paci' runs one pipeline's policy: with %d data-parallel replicas "
                    "every U waits for its stage's all-reduce, which the live policy does not "
                    "model; use pipeline.mode = static (the paci program) or parallel.data = 1",
                    cost->data_parallel);
        return NULL;
    }
    if (cost->n_stages != params->n_stages || cost->n_chunks != 1) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "dynamic '%s' needs a cost model of %d stages x 1 chunk, got %d x %d", kind,
                    params->n_stages, cost->n_stages, cost->n_chunks);
        return NULL;
    }
    const int32_t n_mb = params->n_steps * a;
    if (!sim_policy_check_bounds(cost, n_mb, params->n_steps, error))
        return NULL;
    g_autoptr(PpPolicyRecorder) rec = pp_policy_recorder_new(info, params->n_stages, a, n_mb);
    int64_t end_ns = sim_policy_loop(cost, params->n_stages, a, n_mb, rec);
    g_autoptr(PpSchedule) program = pp_policy_recorder_finish(rec, error);
    if (program == NULL)
        return NULL;
    SimResult *result = sim_engine_run_with(program, cost, options, error);
    if (result == NULL)
        return NULL;
    /* Replaying the recorded program reproduces the live run's timing. */
    PP_ASSERT(result->makespan_ns == end_ns);
    if (program_out != NULL)
        *program_out = g_steal_pointer(&program);
    return result;
}

SimResult *sim_engine_run_policy(const PpScheduleParams *params, const SimCostModel *cost,
                                 PpSchedule **program_out, GError **error) {
    return sim_engine_run_policy_with(params, cost, NULL, program_out, error);
}

void sim_result_free(SimResult *result) {
    if (result == NULL)
        return;
    g_free(result->stages);
    g_free(result->memory_timeline);
    if (result->trace != NULL)
        pp_trace_free(result->trace);
    g_free(result);
}
