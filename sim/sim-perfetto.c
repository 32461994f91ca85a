/* SPDX-License-Identifier: MIT
 * sim-perfetto.c: Chrome trace-event JSON for a simulated run. Compute ops are "X" events on
 * tid 0 of their stage's process. Every cross-device dependency becomes a transfer ("X" on a
 * communication thread of the sending stage, from the producer's end for one hop) and a flow
 * ("s" on the producer, "f" on the consumer). Overlapping transfers of one stage go to
 * separate lanes (threads), so every thread's slices nest. Built with exact integer printing.
 */
#include "sim-perfetto.h"

#include <string.h>

#include "pp-error.h"

/* What a transfer carries: activations (the consumer is an F) or gradients (B/BW). */
enum { SIM_PERFETTO_ACT, SIM_PERFETTO_GRAD, SIM_PERFETTO_N_CLASSES };

typedef struct {
    int64_t start_ns;
    int32_t sender;       /* stage that produced the data */
    int32_t cls;          /* SIM_PERFETTO_ACT or SIM_PERFETTO_GRAD */
    int32_t receiver;     /* consumer stage */
    int32_t consumer;     /* consumer's index in its program */
    int64_t producer_row; /* trace row of the producer */
    int64_t consumer_row; /* trace row of the consumer */
    int32_t lane;         /* communication lane on the sender, assigned after sorting */
} SimPerfettoTransfer;

/* Appends @ns as microseconds with three decimals ("12.345"), exactly. */
static void sim_perfetto_append_us(GString *out, int64_t ns) {
    PP_ASSERT(ns >= 0);
    g_string_append_printf(out, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

static void sim_perfetto_append_name(GString *out, const PpSchedule *sched, const PpTraceRow *row) {
    if (row->kind == PP_OP_UPDATE) {
        g_string_append_printf(out, "U step=%d", row->step);
        return;
    }
    g_string_append_printf(out, "%s mb=%d", pp_op_kind_name(row->kind), row->mb);
    if (sched->n_chunks > 1)
        g_string_append_printf(out, " chunk=%d", row->chunk);
}

static void sim_perfetto_append_meta(GString *out, const char *what, int32_t pid, int32_t tid,
                                     const char *key, const char *value, int32_t number) {
    g_string_append_printf(out,
                           "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                           "\"args\":{\"%s\":",
                           what, pid, tid, key);
    if (value != NULL)
        g_string_append_printf(out, "\"%s\"}},\n", value);
    else
        g_string_append_printf(out, "%d}},\n", number);
}

static gint sim_perfetto_transfer_cmp(gconstpointer pa, gconstpointer pb) {
    const SimPerfettoTransfer *a = pa, *b = pb;
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns ? -1 : 1;
    if (a->sender != b->sender)
        return a->sender < b->sender ? -1 : 1;
    if (a->cls != b->cls)
        return a->cls < b->cls ? -1 : 1;
    if (a->receiver != b->receiver)
        return a->receiver < b->receiver ? -1 : 1;
    if (a->consumer != b->consumer)
        return a->consumer < b->consumer ? -1 : 1;
    return a->producer_row < b->producer_row ? -1 : (a->producer_row > b->producer_row);
}

/* Collects one transfer per cross-device dependency, sorted by start time. */
static GArray *sim_perfetto_collect_transfers(const PpSchedule *sched, const SimResult *result,
                                              const SimCostModel *cost) {
    const PpTrace *trace = result->trace;
    /* (n_ops_total) trace row of each flat op id, + 1; 0: none (U ops are not looked up) */
    g_autofree int64_t *row_of = g_new0(int64_t, pp_schedule_n_ops_total(sched));
    for (int64_t r = 0; r < trace->n_rows; r++) {
        const PpTraceRow *row = &trace->rows[r];
        if (row->resource != PP_RESOURCE_COMPUTE || row->kind == PP_OP_UPDATE)
            continue;
        int32_t id = pp_schedule_find_op(sched, row->kind, row->mb,
                                         pp_schedule_vstage(sched, row->stage, row->chunk));
        PP_ASSERT(id >= 0);
        row_of[id] = r + 1;
    }

    GArray *transfers = g_array_new(FALSE, TRUE, sizeof(SimPerfettoTransfer));
    for (int32_t s = 0; s < sched->n_stages; s++) {
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            PpOpRef        ref = {s, i};
            const PpOp    *op = pp_schedule_op(sched, ref);
            int32_t        n_deps;
            const PpOpRef *deps = pp_schedule_deps(sched, ref, &n_deps);
            for (int32_t d = 0; d < n_deps; d++) {
                if (deps[d].stage == s)
                    continue;
                const PpOp *prod = pp_schedule_op(sched, deps[d]);
                int64_t     pr = row_of[pp_schedule_op_id(sched, deps[d])];
                int64_t     cr = row_of[pp_schedule_op_id(sched, ref)];
                /* The engine traces every op it runs: a missing row is an engine bug. */
                PP_ASSERT(pr > 0 && cr > 0);
                SimPerfettoTransfer t = {
                    .start_ns = trace->rows[pr - 1].end_ns,
                    .sender = prod->stage,
                    .cls = op->kind == PP_OP_FORWARD ? SIM_PERFETTO_ACT : SIM_PERFETTO_GRAD,
                    .receiver = s,
                    .consumer = i,
                    .producer_row = pr - 1,
                    .consumer_row = cr - 1,
                };
                g_array_append_val(transfers, t);
            }
        }
    }
    g_array_sort(transfers, sim_perfetto_transfer_cmp);

    /* Greedy interval colouring per (sender, class): the first lane free at the start. */
    GArray **lane_end = g_new0(GArray *, (gsize)sched->n_stages * SIM_PERFETTO_N_CLASSES);
    for (guint k = 0; k < transfers->len; k++) {
        SimPerfettoTransfer *t = &g_array_index(transfers, SimPerfettoTransfer, k);
        GArray             **ends = &lane_end[t->sender * SIM_PERFETTO_N_CLASSES + t->cls];
        if (*ends == NULL)
            *ends = g_array_new(FALSE, FALSE, sizeof(int64_t));
        guint lane = 0;
        while (lane < (*ends)->len && g_array_index(*ends, int64_t, lane) > t->start_ns)
            lane++;
        int64_t end = t->start_ns + sim_cost_hop_ns(cost, t->sender, t->receiver);
        if (lane == (*ends)->len)
            g_array_append_val(*ends, end);
        else
            g_array_index(*ends, int64_t, lane) = end;
        t->lane = (int32_t)lane;
    }
    for (int32_t k = 0; k < sched->n_stages * SIM_PERFETTO_N_CLASSES; k++)
        if (lane_end[k] != NULL)
            g_array_unref(lane_end[k]);
    g_free(lane_end);
    return transfers;
}

/* Communication thread of (class, lane): tids 1, 2 for lane 0, then 3, 4, ... */
static int32_t sim_perfetto_comm_tid(int32_t cls, int32_t lane) {
    return 1 + lane * SIM_PERFETTO_N_CLASSES + cls;
}

char *sim_perfetto_format(const PpSchedule *sched, const SimCostModel *cost,
                          const SimResult *result) {
    const PpTrace *trace = result->trace;
    g_autoptr(GArray) transfers = sim_perfetto_collect_transfers(sched, result, cost);
    GString *out = g_string_new(NULL);

    g_string_append_printf(out,
                           "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"schedule\":\"%s\","
                           "\"stages\":%d,\"chunks\":%d,\"microbatches\":%d},\n"
                           "\"traceEvents\":[\n",
                           sched->kind, sched->n_stages, sched->n_chunks, sched->n_mb);

    /* Threads: compute, then each communication lane in use (the highest lane per class). */
    g_autofree int32_t *n_lanes = g_new0(int32_t, (gsize)sched->n_stages * SIM_PERFETTO_N_CLASSES);
    for (guint k = 0; k < transfers->len; k++) {
        const SimPerfettoTransfer *t = &g_array_index(transfers, SimPerfettoTransfer, k);
        int32_t                   *n = &n_lanes[t->sender * SIM_PERFETTO_N_CLASSES + t->cls];
        *n = MAX(*n, t->lane + 1);
    }
    for (int32_t s = 0; s < sched->n_stages; s++) {
        char name[32];
        g_snprintf(name, sizeof name, "stage %d", s);
        sim_perfetto_append_meta(out, "process_name", s, 0, "name", name, 0);
        sim_perfetto_append_meta(out, "process_sort_index", s, 0, "sort_index", NULL, s);
        sim_perfetto_append_meta(out, "thread_name", s, 0, "name", "compute", 0);
        for (int32_t cls = 0; cls < SIM_PERFETTO_N_CLASSES; cls++) {
            for (int32_t lane = 0; lane < n_lanes[s * SIM_PERFETTO_N_CLASSES + cls]; lane++) {
                g_snprintf(name, sizeof name, "send %s %d",
                           cls == SIM_PERFETTO_ACT ? "activations" : "gradients", lane);
                sim_perfetto_append_meta(out, "thread_name", s, sim_perfetto_comm_tid(cls, lane),
                                         "name", name, 0);
            }
        }
    }

    for (int64_t r = 0; r < trace->n_rows; r++) {
        const PpTraceRow *row = &trace->rows[r];
        if (row->resource != PP_RESOURCE_COMPUTE)
            continue;
        g_string_append(out, "{\"name\":\"");
        sim_perfetto_append_name(out, sched, row);
        g_string_append_printf(out, "\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":",
                               pp_op_kind_name(row->kind), row->stage);
        sim_perfetto_append_us(out, row->start_ns);
        g_string_append(out, ",\"dur\":");
        sim_perfetto_append_us(out, row->end_ns - row->start_ns);
        g_string_append_printf(out,
                               ",\"args\":{\"mb\":%d,\"chunk\":%d,\"step\":%d,"
                               "\"version_f\":%d,\"version_b\":%d}},\n",
                               row->mb, row->chunk, row->step, row->version_f, row->version_b);
    }

    for (guint k = 0; k < transfers->len; k++) {
        const SimPerfettoTransfer *t = &g_array_index(transfers, SimPerfettoTransfer, k);
        const PpTraceRow          *prod = &trace->rows[t->producer_row];
        const PpTraceRow          *cons = &trace->rows[t->consumer_row];
        int64_t                    flow_id = (int64_t)k + 1;

        g_string_append(out, "{\"name\":\"");
        sim_perfetto_append_name(out, sched, prod);
        g_string_append_printf(out,
                               " to stage %d\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,"
                               "\"tid\":%d,\"ts\":",
                               t->receiver, t->cls == SIM_PERFETTO_ACT ? "act" : "grad", t->sender,
                               sim_perfetto_comm_tid(t->cls, t->lane));
        sim_perfetto_append_us(out, t->start_ns);
        g_string_append(out, ",\"dur\":");
        sim_perfetto_append_us(out, sim_cost_hop_ns(cost, t->sender, t->receiver));
        g_string_append(out, "},\n");

        /* The flow leaves from the producer's last nanosecond (inside its slice, so the
         * viewer binds it there) and arrives at the consumer's start ("bp":"e": the slice
         * that encloses that instant). */
        g_string_append_printf(out,
                               "{\"name\":\"dep\",\"cat\":\"dep\",\"ph\":\"s\",\"id\":%lld,"
                               "\"pid\":%d,\"tid\":0,\"ts\":",
                               (long long)flow_id, prod->stage);
        sim_perfetto_append_us(out, MAX(prod->start_ns, prod->end_ns - 1));
        g_string_append_printf(out,
                               "},\n{\"name\":\"dep\",\"cat\":\"dep\",\"ph\":\"f\","
                               "\"bp\":\"e\",\"id\":%lld,\"pid\":%d,\"tid\":0,\"ts\":",
                               (long long)flow_id, cons->stage);
        sim_perfetto_append_us(out, cons->start_ns);
        g_string_append(out, "},\n");
    }

    /* Every event line ends in ",\n"; JSON allows no trailing comma. */
    if (g_str_has_suffix(out->str, ",\n"))
        g_string_truncate(out, out->len - 2);
    g_string_append(out, "\n]}\n");
    return g_string_free(out, FALSE);
}

gboolean sim_perfetto_write(const PpSchedule *sched, const SimCostModel *cost,
                            const SimResult *result, const char *path, GError **error) {
    g_autofree char *text = sim_perfetto_format(sched, cost, result);
    return pp_file_write(path, text, strlen(text), error);
}
