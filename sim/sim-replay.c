/* SPDX-License-Identifier: MIT
 * sim-replay.c: matches a measured trace to the ops of the run's schedule, then runs the engine
 * twice, with each op's measured duration (replay) and with per-(stage, chunk, kind) medians
 * (calibrated), both without communication, and reports the three timelines side by side.
 * A measured run is a feasible schedule with its own durations, so the replay's as-soon-as-
 * possible times are never later than the measured ones.
 */
#include "sim-replay.h"

#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "sim-replay-dp.h"
#include "sim-report.h"

/* Appended to the errors of a trace whose rows do not fit the schedule. */
#define SIM_REPLAY_SEGMENT_HINT                                                                    \
    "; replay needs the trace of one run of the scenario's schedule: pacer-train cuts a run "      \
    "into segments at eval and checkpoint boundaries, each numbered from micro-batch 0, so "       \
    "train with --set run.eval_every=0 --set run.checkpoint_every=0 (or training.steps within "    \
    "one segment)"

#define SIM_REPLAY_OP_TEXT 128

/* Finds the op a trace row stands for. */
typedef struct {
    const PpSchedule *sched;
    int32_t          *u_offset; /* (n_stages + 1) prefix sums of the stages' U counts */
    int32_t          *u_ids;    /* (n_updates) flat id of update k of stage s at u_offset[s] + k */
} SimReplayIndex;

static void sim_replay_index_init(SimReplayIndex *ix, const PpSchedule *sched) {
    ix->sched = sched;
    ix->u_offset = g_new0(int32_t, sched->n_stages + 1);
    for (int32_t s = 0; s < sched->n_stages; s++) {
        ix->u_offset[s + 1] = ix->u_offset[s];
        for (int32_t i = 0; i < sched->n_ops[s]; i++)
            ix->u_offset[s + 1] += sched->programs[s][i].kind == PP_OP_UPDATE;
    }
    ix->u_ids = g_new(int32_t, MAX(ix->u_offset[sched->n_stages], 1));
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int32_t k = ix->u_offset[s];
        for (int32_t i = 0; i < sched->n_ops[s]; i++)
            if (sched->programs[s][i].kind == PP_OP_UPDATE)
                ix->u_ids[k++] = sched->op_offset[s] + i;
    }
}

static void sim_replay_index_clear(SimReplayIndex *ix) {
    g_free(ix->u_offset);
    g_free(ix->u_ids);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SimReplayIndex, sim_replay_index_clear)

/* Flat id of the op @row stands for: F/B/W/BW by (stage, kind, mb, chunk), U by stage and
 * update index (the step column). Returns -1 when the schedule has no such op. */
static int32_t sim_replay_index_find(const SimReplayIndex *ix, const PpTraceRow *row) {
    const PpSchedule *sched = ix->sched;
    if (row->stage < 0 || row->stage >= sched->n_stages)
        return -1;
    if (row->kind == PP_OP_UPDATE) {
        int32_t first = ix->u_offset[row->stage];
        int32_t n = ix->u_offset[row->stage + 1] - first;
        return row->step >= 0 && row->step < n ? ix->u_ids[first + row->step] : -1;
    }
    if ((int)row->kind < 0 || row->kind >= PP_OP_UPDATE || row->chunk < 0 ||
        row->chunk >= sched->n_chunks || row->mb < 0 || row->mb >= sched->n_mb)
        return -1;
    return pp_schedule_find_op(sched, row->kind, row->mb,
                               pp_schedule_vstage(sched, row->stage, row->chunk));
}

/* "F(mb=3, chunk=0) on stage 1" for a trace row. Returns @buf. */
static char *sim_replay_describe_row(const PpTraceRow *row, char *buf, size_t size) {
    PpOp op = {.kind = row->kind,
               .stage = row->stage,
               .mb = row->mb,
               .chunk = row->chunk,
               .step = row->step};
    return pp_op_describe(&op, buf, size);
}

/* "F(mb=3, chunk=0) on stage 1" for the schedule's op @id. Returns @buf. */
static char *sim_replay_describe_op(const PpSchedule *sched, int32_t id, char *buf, size_t size) {
    return pp_op_describe(pp_schedule_op(sched, pp_schedule_op_ref(sched, id)), buf, size);
}

/* Drift Δ the schedule gives the (mb, chunk) of F/B/W/BW @op. */
static int32_t sim_replay_schedule_delta(const PpSchedule *sched, const PpOp *op) {
    return pp_schedule_delta(sched, op->mb, pp_schedule_vstage(sched, op->stage, op->chunk));
}

/* Matches every compute row of @replica in the measured trace to one op of the schedule:
 * @row_of (n_ops) gets each op's trace row. Returns FALSE with PP_IO_ERROR_MISMATCH naming the
 * first row or op that does not fit (and the replica when the trace has several). */
static gboolean sim_replay_match_replica(const SimReplay *r, const SimReplayIndex *ix,
                                         int32_t replica, int64_t *row_of, GError **error) {
    const PpSchedule *sched = r->schedule;
    const PpTrace    *trace = r->measured;
    const int32_t     n_ops = pp_schedule_n_ops_total(sched);
    char              what[SIM_REPLAY_OP_TEXT], prev[SIM_REPLAY_OP_TEXT], of[32] = "";

    if (r->replicas > 1)
        g_snprintf(of, sizeof of, " of replica %d", replica);
    for (int32_t id = 0; id < n_ops; id++)
        row_of[id] = -1;
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *row = &trace->rows[i];
        if (row->resource != PP_RESOURCE_COMPUTE || row->replica != replica)
            continue;
        int32_t id = sim_replay_index_find(ix, row);
        sim_replay_describe_row(row, what, sizeof what);
        if (id < 0) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                        "%s: measured op %s%s matches no op of schedule '%s' (N=%d, v=%d, %d "
                        "micro-batches, %d steps)" SIM_REPLAY_SEGMENT_HINT,
                        r->trace_path, what, of, sched->kind, sched->n_stages, sched->n_chunks,
                        sched->n_mb, sched->n_steps);
            return FALSE;
        }
        if (row_of[id] >= 0) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                        "%s: measured op %s%s appears more than once" SIM_REPLAY_SEGMENT_HINT,
                        r->trace_path, what, of);
            return FALSE;
        }
        if (row->end_ns < row->start_ns) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                        "%s: measured op %s%s ends at %" G_GINT64_FORMAT
                        " ns, before it starts at %" G_GINT64_FORMAT " ns",
                        r->trace_path, what, of, row->end_ns, row->start_ns);
            return FALSE;
        }
        row_of[id] = i;
    }
    for (int32_t id = 0; id < n_ops; id++) {
        if (row_of[id] >= 0)
            continue;
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: op %s of schedule '%s' has no measured row%s" SIM_REPLAY_SEGMENT_HINT,
                    r->trace_path, sim_replay_describe_op(sched, id, what, sizeof what),
                    sched->kind, of);
        return FALSE;
    }
    /* One device runs one op at a time, in its program's order. */
    for (int32_t s = 0; s < sched->n_stages; s++) {
        for (int32_t i = 1; i < sched->n_ops[s]; i++) {
            int32_t           id = sched->op_offset[s] + i;
            const PpTraceRow *cur = &trace->rows[row_of[id]],
                             *before = &trace->rows[row_of[id - 1]];
            if (cur->start_ns >= before->end_ns)
                continue;
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                        "%s: measured op %s%s starts at %" G_GINT64_FORMAT
                        " ns, before %s, the op before it in stage %d's program of schedule "
                        "'%s', ends at %" G_GINT64_FORMAT
                        " ns: the run followed another order (another pipeline.schedule, or "
                        "pipeline.mode = dynamic, which decides the order at run time)",
                        r->trace_path, sim_replay_describe_op(sched, id, what, sizeof what), of,
                        cur->start_ns, sim_replay_describe_op(sched, id - 1, prev, sizeof prev), s,
                        sched->kind, before->end_ns);
            return FALSE;
        }
    }
    return TRUE;
}

/* The reduce rows of @replica, each with the U it precedes, into @rows (cleared first).
 * Returns FALSE with PP_IO_ERROR_MISMATCH naming a row that precedes no U of the schedule. */
static gboolean sim_replay_reduce_rows(const SimReplay *r, const SimReplayIndex *ix,
                                       int32_t replica, GArray *rows, GError **error) {
    char what[SIM_REPLAY_OP_TEXT];
    g_array_set_size(rows, 0);
    for (int64_t i = 0; i < r->measured->n_rows; i++) {
        const PpTraceRow *row = &r->measured->rows[i];
        if (row->resource != PP_RESOURCE_REDUCE || row->replica != replica)
            continue;
        int32_t id = row->kind == PP_OP_UPDATE ? sim_replay_index_find(ix, row) : -1;
        if (id < 0) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                        "%s: reduce row %s of replica %d precedes no U of schedule '%s' (a "
                        "reduce row carries the columns of the U it comes before)",
                        r->trace_path, sim_replay_describe_row(row, what, sizeof what), replica,
                        r->schedule->kind);
            return FALSE;
        }
        SimReplayDpRow dp = {.u_id = id, .start_ns = row->start_ns, .end_ns = row->end_ns};
        g_array_append_val(rows, dp);
    }
    return TRUE;
}

/* Matches every replica's compute rows to the schedule (each replica runs the whole program)
 * and fills the measured arrays: per op the mean over the replicas of its start and end, each
 * replica's times shifted so that its first op starts at 0 (the ranks' clocks need not share
 * an origin); with several replicas also the exposed reduction before every U, the minimum
 * over the replicas (sim_replay_dp_sync(): the last replica to arrive waits for no one).
 * Returns FALSE with PP_IO_ERROR_MISMATCH naming the first row or op that does not fit. */
static gboolean sim_replay_match(SimReplay *r, const SimReplayIndex *ix, GError **error) {
    const PpSchedule   *sched = r->schedule;
    const PpTrace      *trace = r->measured;
    const int32_t       n_ops = pp_schedule_n_ops_total(sched), D = r->replicas;
    g_autofree int64_t *row_of = g_new(int64_t, MAX(n_ops, 1)); /* (n_ops) trace row */
    g_autofree int64_t *start = g_new(int64_t, MAX(n_ops, 1));  /* (n_ops) one replica's */
    g_autofree int64_t *end = g_new(int64_t, MAX(n_ops, 1));    /* (n_ops) */
    g_autofree int64_t *sync = g_new(int64_t, MAX(n_ops, 1));   /* (n_ops) */
    g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(SimReplayDpRow));

    r->measured_start_ns = g_new0(int64_t, MAX(n_ops, 1));
    r->measured_end_ns = g_new0(int64_t, MAX(n_ops, 1));
    r->measured_delta = g_new0(int32_t, MAX(n_ops, 1));
    if (D > 1)
        r->measured_sync_ns = g_new(int64_t, MAX(n_ops, 1));
    for (int32_t rep = 0; rep < D; rep++) {
        if (!sim_replay_match_replica(r, ix, rep, row_of, error))
            return FALSE;
        int64_t first_ns = G_MAXINT64;
        for (int32_t id = 0; id < n_ops; id++)
            first_ns = MIN(first_ns, trace->rows[row_of[id]].start_ns);
        if (rep == 0)
            r->measured_origin_ns = first_ns;
        for (int32_t id = 0; id < n_ops; id++) {
            const PpTraceRow *row = &trace->rows[row_of[id]];
            start[id] = row->start_ns;
            end[id] = row->end_ns;
            r->measured_start_ns[id] += row->start_ns - first_ns;
            r->measured_end_ns[id] += row->end_ns - first_ns;
            if (rep == 0 && row->kind != PP_OP_UPDATE)
                r->measured_delta[id] = row->version_b - row->version_f;
        }
        if (D == 1)
            break;
        if (!sim_replay_reduce_rows(r, ix, rep, rows, error))
            return FALSE;
        sim_replay_dp_sync(sched, start, end, (SimReplayDpRow *)rows->data, rows->len, sync);
        for (int32_t id = 0; id < n_ops; id++)
            r->measured_sync_ns[id] = rep == 0 ? sync[id] : MIN(r->measured_sync_ns[id], sync[id]);
    }
    /* The mean of ordered, non-overlapping timelines is ordered and non-overlapping too. */
    for (int32_t id = 0; id < n_ops; id++) {
        r->measured_start_ns[id] /= D;
        r->measured_end_ns[id] /= D;
    }
    return TRUE;
}

static int sim_replay_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The median of @n durations (sorts @buf): the middle one, or the truncated mean of the two
 * middle ones; 0 when @n is 0. */
static int64_t sim_replay_median_of(int64_t *buf, size_t n) {
    if (n == 0)
        return 0;
    qsort(buf, n, sizeof *buf, sim_replay_cmp_i64);
    return n % 2 == 1 ? buf[n / 2] : buf[n / 2 - 1] + (buf[n / 2] - buf[n / 2 - 1]) / 2;
}

/* Median measured duration (ns) of the @kind ops of @stage on @chunk (any chunk for U): the
 * sim_replay_median_of() them. @buf has room for the stage's ops. */
static int64_t sim_replay_median(const SimReplay *r, int32_t stage, int32_t chunk, PpOpKind kind,
                                 int64_t *buf) {
    const PpSchedule *sched = r->schedule;
    size_t            n = 0;
    for (int32_t i = 0; i < sched->n_ops[stage]; i++) {
        const PpOp *op = &sched->programs[stage][i];
        int32_t     id = sched->op_offset[stage] + i;
        if (op->kind == kind && (kind == PP_OP_UPDATE || op->chunk == chunk))
            buf[n++] = r->measured_end_ns[id] - r->measured_start_ns[id];
    }
    return sim_replay_median_of(buf, n);
}

/* The reduction between replicas per stage: the bytes pacer-train reduces, the median over
 * the stage's U of the measured exposed reduction, and the link model's figure. Returns FALSE
 * with @error set when the scenario's layers do not split (sim_replay_dp_grad_bytes()). */
static gboolean sim_replay_reduction(SimReplay *r, GError **error) {
    const PpSchedule *sched = r->schedule;
    r->grad_bytes = sim_replay_dp_grad_bytes(r->scenario, error);
    if (r->grad_bytes == NULL)
        return FALSE;
    r->median_sync_ns = g_new0(int64_t, sched->n_stages);
    r->model_sync_ns = g_new0(int64_t, sched->n_stages);
    int32_t longest = 1;
    for (int32_t s = 0; s < sched->n_stages; s++)
        longest = MAX(longest, sched->n_ops[s]);
    g_autofree int64_t *buf = g_new(int64_t, longest); /* (longest program) reductions */
    for (int32_t s = 0; s < sched->n_stages; s++) {
        size_t n = 0;
        for (int32_t i = 0; i < sched->n_ops[s]; i++)
            if (sched->programs[s][i].kind == PP_OP_UPDATE)
                buf[n++] = r->measured_sync_ns[sched->op_offset[s] + i];
        r->median_sync_ns[s] = sim_replay_median_of(buf, n);
        r->model_sync_ns[s] = sim_replay_dp_model_ns(r->scenario, r->replicas, r->grad_bytes[s]);
    }
    return TRUE;
}

/* Bytes of one activation or gradient pacer-train sends between stages: (B, T, C) fp32. */
static int64_t sim_replay_msg_bytes(const PpScenario *sc) {
    return (int64_t)sc->pipeline.microbatch_size * sc->model.seq_len * sc->model.hidden * 4;
}

/* The calibrated cost model: medians per (stage, chunk, kind), and with r->link the hop of
 * the scenario's link (else no communication); with @per_op, every op also gets its own
 * measured duration (the replay model).
 * Returns: (transfer full). */
static SimCostModel *sim_replay_cost_new(const SimReplay *r, gboolean per_op) {
    const PpSchedule *sched = r->schedule;
    const int32_t     n_ops = pp_schedule_n_ops_total(sched);
    SimCostModel     *cost = sim_cost_new_uniform(sched->n_stages, sched->n_chunks, 0, 0, 0, 0);
    int32_t           longest = 1;
    for (int32_t s = 0; s < sched->n_stages; s++)
        longest = MAX(longest, sched->n_ops[s]);
    g_autofree int64_t *buf = g_new(int64_t, longest); /* (longest program) durations */
    for (int32_t s = 0; s < sched->n_stages; s++) {
        for (int32_t c = 0; c < sched->n_chunks; c++) {
            int32_t unit = s * sched->n_chunks + c;
            cost->f_ns[unit] = sim_replay_median(r, s, c, PP_OP_FORWARD, buf);
            if (sched->split_backward) {
                cost->b_ns[unit] = sim_replay_median(r, s, c, PP_OP_BACKWARD, buf);
                cost->w_ns[unit] = sim_replay_median(r, s, c, PP_OP_WEIGHT, buf);
            } else {
                cost->b_ns[unit] = sim_replay_median(r, s, c, PP_OP_BACKWARD_FULL, buf);
            }
        }
        cost->u_ns[s] = sim_replay_median(r, s, 0, PP_OP_UPDATE, buf);
    }
    if (r->hop_ns > 0) {
        cost->comm_latency_ns = r->scenario->hardware.link_latency_ns;
        cost->comm_bytes_per_ns = r->scenario->hardware.link_bw_bytes_per_s / 1e9;
        cost->act_msg_bytes = sim_replay_msg_bytes(r->scenario);
    }
    if (per_op) {
        cost->op_dur_ns = g_new(int64_t, MAX(n_ops, 1));
        cost->n_op_durs = n_ops;
        for (int32_t id = 0; id < n_ops; id++)
            cost->op_dur_ns[id] = r->measured_end_ns[id] - r->measured_start_ns[id];
    }
    if (r->replicas > 1) {
        /* Each stage's reduction, measured or (with the link) the model's, on the stage's
         * own channel before its U: split evenly over its chunks, or per U in the replay. */
        const int32_t v = sched->n_chunks;
        cost->data_parallel = r->replicas;
        cost->dp_sync_ns = g_new(int64_t, sched->n_stages * v);
        cost->dp_pieces = g_new(int32_t, sched->n_stages * v);
        for (int32_t u = 0; u < sched->n_stages * v; u++) {
            int32_t s = u / v;
            cost->dp_sync_ns[u] = (r->hop_ns > 0 ? r->model_sync_ns[s] : r->median_sync_ns[s]) / v;
            cost->dp_pieces[u] = 1;
        }
        if (per_op) {
            cost->op_sync_ns = g_new0(int64_t, MAX(n_ops, 1));
            for (int32_t id = 0; id < n_ops; id++) {
                const PpOp *op = pp_schedule_op(sched, pp_schedule_op_ref(sched, id));
                if (op->kind == PP_OP_UPDATE)
                    cost->op_sync_ns[id] =
                        r->hop_ns > 0 ? r->model_sync_ns[op->stage] : r->measured_sync_ns[id];
            }
        }
    }
    return cost;
}

/* Per-stage and run figures from the matched trace and both predictions. */
static void sim_replay_summarize(SimReplay *r, const SimReplayIndex *ix) {
    const PpSchedule *sched = r->schedule;
    const int32_t     n_ops = pp_schedule_n_ops_total(sched);

    r->replay_start_ns = g_new(int64_t, MAX(n_ops, 1));
    r->calibrated_start_ns = g_new(int64_t, MAX(n_ops, 1));
    for (int64_t i = 0; i < r->replay->trace->n_rows; i++) {
        const PpTraceRow *row = &r->replay->trace->rows[i];
        int32_t           id = sim_replay_index_find(ix, row);
        PP_ASSERT(id >= 0); /* the engine runs the schedule's own ops */
        r->replay_start_ns[id] = row->start_ns;
    }
    for (int64_t i = 0; i < r->calibrated->trace->n_rows; i++) {
        const PpTraceRow *row = &r->calibrated->trace->rows[i];
        int32_t           id = sim_replay_index_find(ix, row);
        PP_ASSERT(id >= 0);
        r->calibrated_start_ns[id] = row->start_ns;
    }

    r->stages = g_new0(SimReplayStage, sched->n_stages);
    double abs_diff_ns = 0.0;
    for (int32_t s = 0; s < sched->n_stages; s++) {
        SimReplayStage *st = &r->stages[s];
        st->stage = s;
        st->replay_span_ns = r->replay->stages[s].span_ns;
        st->calibrated_span_ns = r->calibrated->stages[s].span_ns;
        if (sched->n_ops[s] == 0)
            continue;
        int32_t first = sched->op_offset[s], last = sched->op_offset[s + 1] - 1;
        /* Matched rows follow the program's order without overlap (sim_replay_match). */
        st->measured_span_ns = r->measured_end_ns[last] - r->measured_start_ns[first];
        r->measured_makespan_ns = MAX(r->measured_makespan_ns, r->measured_end_ns[last]);
        for (int32_t id = first; id <= last; id++) {
            const PpOp *op = &sched->programs[s][id - first];
            st->measured_busy_ns += r->measured_end_ns[id] - r->measured_start_ns[id];
            abs_diff_ns += (double)llabs(r->measured_start_ns[id] - r->replay_start_ns[id]);
            if (op->kind == PP_OP_UPDATE)
                continue;
            r->measured_delta_max = MAX(r->measured_delta_max, r->measured_delta[id]);
            r->delta_mismatches += r->measured_delta[id] != sim_replay_schedule_delta(sched, op);
        }
    }
    r->mean_abs_start_diff_ns = n_ops > 0 ? abs_diff_ns / n_ops : 0.0;
}

SimReplay *sim_replay_new(const char *scenario_path, const char *const *overrides,
                          const char *trace_path, gboolean link, GError **error) {
    g_autoptr(SimReplay) r = g_new0(SimReplay, 1);
    r->trace_path = g_strdup(trace_path);
    r->scenario = pp_scenario_load(scenario_path, overrides, error);
    if (r->scenario == NULL)
        return NULL;
    const PpHardwareParams *hw = &r->scenario->hardware;
    if (link && !(hw->link_bw_bytes_per_s > 0.0)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: replay --link needs [hardware] link_latency_us and link_gbps (e.g. "
                    "--set hardware.preset=h100-sxm --set hardware.link_latency_us=US --set "
                    "hardware.link_gbps=GBPS, measured by pacer-bench-comm)",
                    r->scenario->path);
        return NULL;
    }
    if (link) {
        SimCostModel hop = {.comm_latency_ns = hw->link_latency_ns,
                            .comm_bytes_per_ns = hw->link_bw_bytes_per_s / 1e9,
                            .act_msg_bytes = sim_replay_msg_bytes(r->scenario)};
        /* At least 1 ns, so that a zero latency with a huge bandwidth still counts as on. */
        r->hop_ns = MAX(sim_cost_comm_ns(&hop), 1);
    }
    /* The schedule pacer-train builds: searching generators get [costs] or nothing. */
    PpScheduleParams params;
    pp_scenario_schedule_params(r->scenario, &params);
    r->schedule = pp_schedule_new(&params, error);
    if (r->schedule == NULL)
        return NULL;
    r->measured = pp_trace_read_csv(trace_path, error);
    if (r->measured == NULL)
        return NULL;
    r->replicas = 1;
    for (int64_t i = 0; i < r->measured->n_rows; i++)
        r->replicas = MAX(r->replicas, r->measured->rows[i].replica + 1);
    g_auto(SimReplayIndex) ix = {0};
    sim_replay_index_init(&ix, r->schedule);
    if (!sim_replay_match(r, &ix, error))
        return NULL;
    if (r->replicas > 1 && !sim_replay_reduction(r, error))
        return NULL;

    g_autoptr(SimCostModel) replay_cost = sim_replay_cost_new(r, TRUE);
    r->calibrated_cost = sim_replay_cost_new(r, FALSE);
    r->replay = sim_engine_run(r->schedule, replay_cost, error);
    if (r->replay == NULL)
        return NULL;
    r->calibrated = sim_engine_run(r->schedule, r->calibrated_cost, error);
    if (r->calibrated == NULL)
        return NULL;
    sim_replay_summarize(r, &ix);
    return g_steal_pointer(&r);
}

void sim_replay_free(SimReplay *replay) {
    if (replay == NULL)
        return;
    pp_scenario_free(replay->scenario);
    g_free(replay->trace_path);
    pp_schedule_free(replay->schedule);
    pp_trace_free(replay->measured);
    g_free(replay->measured_start_ns);
    g_free(replay->measured_end_ns);
    g_free(replay->measured_delta);
    g_free(replay->measured_sync_ns);
    g_free(replay->grad_bytes);
    g_free(replay->median_sync_ns);
    g_free(replay->model_sync_ns);
    g_free(replay->replay_start_ns);
    g_free(replay->calibrated_start_ns);
    sim_cost_free(replay->calibrated_cost);
    sim_result_free(replay->replay);
    sim_result_free(replay->calibrated);
    g_free(replay->stages);
    g_free(replay);
}

/* --- reports --- */

/* @ns as milliseconds with three decimals, by integer arithmetic. Returns @buf. */
static char *sim_replay_ms(char *buf, size_t size, int64_t ns) {
    int64_t us = ns / 1000;
    g_snprintf(buf, size, "%lld.%03lld", (long long)(us / 1000), (long long)(us % 1000));
    return buf;
}

/* @part / @whole, 0 when @whole is 0. */
static double sim_replay_ratio(int64_t part, int64_t whole) {
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

/* The per-stage reduction table of a data-parallel trace. */
static void sim_replay_format_reduction(const SimReplay *r, GString *out) {
    const PpHardwareParams *hw = &r->scenario->hardware;
    char                    a[32], b[32];
    g_string_append_printf(out,
                           "\nreduction between the %d replicas before each U (measured: the "
                           "exposed reduce rows, minimum over replicas, median over U;\nmodel: "
                           "2(D-1)(latency + bytes/D/bandwidth)",
                           r->replicas);
    if (hw->link_bw_bytes_per_s > 0.0)
        g_string_append_printf(out, ", [hardware] link %.1f us, %.3f GB/s)%s\n",
                               hw->link_latency_ns / 1e3, hw->link_bw_bytes_per_s / 1e9,
                               r->hop_ns > 0 ? "; the predictions use the model" : "");
    else
        g_string_append(out, ": no [hardware] link)\n");
    g_string_append(out, "stage   grad bytes  measured ms     model ms\n");
    for (int32_t s = 0; s < r->schedule->n_stages; s++)
        g_string_append_printf(
            out, "%5d %12" G_GINT64_FORMAT " %12s %12s\n", s, r->grad_bytes[s],
            sim_replay_ms(a, sizeof a, r->median_sync_ns[s]),
            r->model_sync_ns[s] >= 0 ? sim_replay_ms(b, sizeof b, r->model_sync_ns[s]) : "-");
}

char *sim_replay_format(const SimReplay *r) {
    const PpSchedule   *sched = r->schedule;
    const SimCostModel *cal = r->calibrated_cost;
    GString            *out = g_string_new(NULL);
    char                a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32];

    g_string_append_printf(out, "scenario    %s\n", r->scenario->path);
    g_string_append_printf(out, "trace       %s (%d ops matched)\n", r->trace_path,
                           pp_schedule_n_ops_total(sched));
    g_string_append_printf(out, "schedule    %s, N=%d, v=%d, %d micro-batches, %d steps\n",
                           sched->kind, sched->n_stages, sched->n_chunks, sched->n_mb,
                           sched->n_steps);
    if (r->replicas > 1)
        g_string_append_printf(out,
                               "replicas    %d (data parallel): every replica matched; measured "
                               "times are the replicas' mean per op\n",
                               r->replicas);
    if (r->hop_ns > 0)
        g_string_append_printf(out,
                               "predictions with %s ms per message between stages ([hardware] "
                               "link, %" G_GINT64_FORMAT "-byte fp32 activations)\n\n",
                               sim_replay_ms(a, sizeof a, r->hop_ns),
                               sim_replay_msg_bytes(r->scenario));
    else
        g_string_append(out, "predictions without communication\n\n");
    g_string_append(out, "            measured            predicted span       "
                         "measured median op\n");
    g_string_append(out, "stage      busy ms    span ms    replay ms     calib ms  chunk"
                         "     F ms  B/BW ms     W ms     U ms\n");
    for (int32_t s = 0; s < sched->n_stages; s++) {
        const SimReplayStage *st = &r->stages[s];
        for (int32_t k = 0; k < sched->n_chunks; k++) {
            int32_t unit = s * sched->n_chunks + k;
            if (k == 0)
                g_string_append_printf(out, "%5d %12s %10s %12s %12s", s,
                                       sim_replay_ms(a, sizeof a, st->measured_busy_ns),
                                       sim_replay_ms(b, sizeof b, st->measured_span_ns),
                                       sim_replay_ms(c, sizeof c, st->replay_span_ns),
                                       sim_replay_ms(d, sizeof d, st->calibrated_span_ns));
            else
                g_string_append_printf(out, "%5s %12s %10s %12s %12s", "", "", "", "", "");
            g_string_append_printf(
                out, " %6d %8s %8s %8s %8s\n", k, sim_replay_ms(e, sizeof e, cal->f_ns[unit]),
                sim_replay_ms(f, sizeof f, cal->b_ns[unit]),
                sched->split_backward ? sim_replay_ms(g, sizeof g, cal->w_ns[unit]) : "-",
                k == 0 ? sim_replay_ms(h, sizeof h, cal->u_ns[s]) : "");
        }
    }
    if (r->replicas > 1)
        sim_replay_format_reduction(r, out);
    g_string_append(out, "\n");
    g_string_append_printf(
        out,
        "makespan    measured %s ms, replay %s ms (%.3f of measured), calibrated %s ms (%.3f of "
        "measured)\n",
        sim_replay_ms(a, sizeof a, r->measured_makespan_ns),
        sim_replay_ms(b, sizeof b, r->replay->makespan_ns),
        sim_replay_ratio(r->replay->makespan_ns, r->measured_makespan_ns),
        sim_replay_ms(c, sizeof c, r->calibrated->makespan_ns),
        sim_replay_ratio(r->calibrated->makespan_ns, r->measured_makespan_ns));
    g_string_append_printf(out, "start gap   mean |measured - replay start| %.3f ms over %d ops\n",
                           r->mean_abs_start_diff_ns / 1e6, pp_schedule_n_ops_total(sched));
    g_string_append_printf(out,
                           "\xce\x94max        measured %d, predicted %d; %d ops whose measured "
                           "drift differs from the schedule's\n",
                           r->measured_delta_max, r->replay->delta_max, r->delta_mismatches);
    return g_string_free(out, FALSE);
}

/* Adds "@name": @value to the object being built. */
static void sim_replay_json_int(JsonBuilder *b, const char *name, int64_t value) {
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

JsonNode *sim_replay_build_json(const SimReplay *r) {
    const PpSchedule   *sched = r->schedule;
    const SimCostModel *cal = r->calibrated_cost;
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "scenario");
    json_builder_add_string_value(b, r->scenario->path);
    json_builder_set_member_name(b, "trace");
    json_builder_add_string_value(b, r->trace_path);
    json_builder_set_member_name(b, "schedule");
    json_builder_add_string_value(b, sched->kind);
    sim_replay_json_int(b, "n_stages", sched->n_stages);
    sim_replay_json_int(b, "chunks", sched->n_chunks);
    sim_replay_json_int(b, "microbatches_run", sched->n_mb);
    sim_replay_json_int(b, "steps", sched->n_steps);
    sim_replay_json_int(b, "ops_matched", pp_schedule_n_ops_total(sched));
    sim_replay_json_int(b, "hop_ns", r->hop_ns);
    sim_replay_json_int(b, "measured_makespan_ns", r->measured_makespan_ns);
    sim_replay_json_int(b, "replay_makespan_ns", r->replay->makespan_ns);
    sim_replay_json_int(b, "calibrated_makespan_ns", r->calibrated->makespan_ns);
    json_builder_set_member_name(b, "replay_ratio");
    json_builder_add_double_value(
        b, sim_replay_ratio(r->replay->makespan_ns, r->measured_makespan_ns));
    json_builder_set_member_name(b, "calibrated_ratio");
    json_builder_add_double_value(
        b, sim_replay_ratio(r->calibrated->makespan_ns, r->measured_makespan_ns));
    json_builder_set_member_name(b, "mean_abs_start_diff_ns");
    json_builder_add_double_value(b, r->mean_abs_start_diff_ns);
    sim_replay_json_int(b, "measured_delta_max", r->measured_delta_max);
    sim_replay_json_int(b, "predicted_delta_max", r->replay->delta_max);
    sim_replay_json_int(b, "delta_mismatches", r->delta_mismatches);
    sim_replay_json_int(b, "replicas", r->replicas);

    json_builder_set_member_name(b, "stages");
    json_builder_begin_array(b);
    for (int32_t s = 0; s < sched->n_stages; s++) {
        const SimReplayStage *st = &r->stages[s];
        json_builder_begin_object(b);
        sim_replay_json_int(b, "stage", s);
        sim_replay_json_int(b, "measured_busy_ns", st->measured_busy_ns);
        sim_replay_json_int(b, "measured_span_ns", st->measured_span_ns);
        sim_replay_json_int(b, "replay_span_ns", st->replay_span_ns);
        sim_replay_json_int(b, "calibrated_span_ns", st->calibrated_span_ns);
        sim_replay_json_int(b, "median_u_ns", cal->u_ns[s]);
        if (r->replicas > 1) {
            sim_replay_json_int(b, "grad_bytes", r->grad_bytes[s]);
            sim_replay_json_int(b, "median_reduce_ns", r->median_sync_ns[s]);
            sim_replay_json_int(b, "model_reduce_ns", r->model_sync_ns[s]);
        }
        json_builder_set_member_name(b, "chunks");
        json_builder_begin_array(b);
        for (int32_t k = 0; k < sched->n_chunks; k++) {
            int32_t unit = s * sched->n_chunks + k;
            json_builder_begin_object(b);
            sim_replay_json_int(b, "chunk", k);
            sim_replay_json_int(b, "median_f_ns", cal->f_ns[unit]);
            sim_replay_json_int(b, "median_b_ns", cal->b_ns[unit]);
            sim_replay_json_int(b, "median_w_ns", cal->w_ns[unit]);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* compare.csv: every op measured, replayed and calibrated. Returns: (transfer full). */
static char *sim_replay_compare_csv(const SimReplay *r) {
    const PpSchedule   *sched = r->schedule;
    const SimCostModel *cal = r->calibrated_cost;
    GString *out = g_string_new("stage,op,mb,chunk,step,measured_start_ns,measured_end_ns,"
                                "replay_start_ns,replay_end_ns,calibrated_start_ns,"
                                "calibrated_end_ns\n");
    for (int32_t id = 0; id < pp_schedule_n_ops_total(sched); id++) {
        const PpOp *op = pp_schedule_op(sched, pp_schedule_op_ref(sched, id));
        int64_t     measured = r->measured_end_ns[id] - r->measured_start_ns[id];
        int32_t     unit = op->stage * sched->n_chunks + MAX(op->chunk, 0);
        int64_t     dur = op->kind == PP_OP_FORWARD    ? cal->f_ns[unit]
                          : op->kind == PP_OP_BACKWARD ? cal->b_ns[unit]
                          : op->kind == PP_OP_WEIGHT   ? cal->w_ns[unit]
                          : op->kind == PP_OP_UPDATE   ? cal->u_ns[op->stage]
                                                       : sim_cost_bw_ns(cal, unit);
        g_string_append_printf(out,
                               "%d,%s,%d,%d,%d,%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT
                               ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT
                               ",%" G_GINT64_FORMAT "\n",
                               op->stage, pp_op_kind_name(op->kind), op->mb, op->chunk, op->step,
                               r->measured_start_ns[id], r->measured_end_ns[id],
                               r->replay_start_ns[id], r->replay_start_ns[id] + measured,
                               r->calibrated_start_ns[id], r->calibrated_start_ns[id] + dur);
    }
    return g_string_free(out, FALSE);
}

gboolean sim_replay_write_dir(const SimReplay *r, const char *dir, GError **error) {
    if (!sim_report_make_out_dir(dir, error))
        return FALSE;
    g_autofree char *ops = g_build_filename(dir, "ops.csv", NULL);
    g_autofree char *calibrated = g_build_filename(dir, "calibrated.csv", NULL);
    g_autofree char *compare = g_build_filename(dir, "compare.csv", NULL);
    g_autofree char *text = sim_replay_compare_csv(r);
    return pp_trace_write_csv(r->replay->trace, ops, error) &&
           pp_trace_write_csv(r->calibrated->trace, calibrated, error) &&
           pp_file_write(compare, text, strlen(text), error);
}
