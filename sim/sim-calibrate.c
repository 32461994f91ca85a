/* SPDX-License-Identifier: MIT
 * sim-calibrate.c: fits per-stage op times, dispatch overhead, the link and the kernel-
 * efficiency curve (with hardware.cost_model = operators also the operator model's constants,
 * sim-calibrate-ops.c) to measured traces (each matched to its schedule by sim_replay_new()),
 * writes them as a scenario with explicit per-stage [costs], and predicts every trace's
 * steady-state step time with them, measured and predicted by the same rule.
 */
#include "sim-calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-partition.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "sim-layout.h"
#include "sim-main.h"
#include "sim-replay-dp.h"
#include "sim-replay.h"
#include "sim-report.h"

/* Op durations above this many times their kind's median are one-off stalls (a page fault,
 * a descheduled thread), left out of the typical time: the steady state is a median of step
 * intervals, which such a stall moves little. */
#define SIM_CAL_OUTLIER 3.0

/* The CPU executor passes fp32 activations and gradients between stages. */
#define SIM_CAL_MSG_BYTES_PER_ELEM 4

/* Every sample the fit pools for one micro-batch size. */
typedef struct {
    int32_t  mb_size;   /* sequences */
    int64_t  tokens;    /* mb_size * seq_len */
    int64_t  msg_bytes; /* one activation message */
    GArray **dur;       /* (n_stages * PP_OP_N_KINDS) of int64_t: measured op durations, ns */
    GArray **copy_f;    /* (n_stages) of int64_t: durations of the F ops that copied the weights
                           (the first F of each version under stashing), not in dur */
    GArray *gaps;       /* int64_t: producer end -> consumer start when the consumer waited */
} SimCalSize;

/* A gap between two ops of a stage whose second op's inputs were there when the first ended:
 * dispatch overhead, if they were there early enough for the hop. */
typedef struct {
    int64_t gap_ns;   /* next start - previous end */
    int64_t slack_ns; /* previous end - latest cross-stage input end; G_MAXINT64 without one */
} SimCalGap;

/* The fit's state: samples by size, and what every size shares. */
typedef struct {
    int32_t    n_stages;
    GPtrArray *sizes;    /* (element-type SimCalSize) in order of first appearance */
    GArray   **dispatch; /* (n_stages) of SimCalGap */
    /* The model, from the first fit trace. */
    int32_t           layers, hidden, heads, seq_len, vocab;
    const PpScenario *base; /* the first fit trace's scenario: the operator model's sizes */
    int32_t *split;         /* (n_stages) layers per stage as pacer-train split them: the scenario's
                               run.layers_per_stage, else pp-partition's FLOP counts */
} SimCalFit;

static void sim_cal_size_free(gpointer data) {
    SimCalSize *z = data;
    /* n_stages * kinds arrays; the count is stored in the first NULL after them. */
    for (size_t i = 0; z->dur[i] != NULL; i++)
        g_array_unref(z->dur[i]);
    g_free(z->dur);
    for (size_t i = 0; z->copy_f[i] != NULL; i++)
        g_array_unref(z->copy_f[i]);
    g_free(z->copy_f);
    g_array_unref(z->gaps);
    g_free(z);
}

static void sim_cal_fit_clear(SimCalFit *fit) {
    if (fit->sizes != NULL)
        g_ptr_array_unref(fit->sizes);
    for (int32_t s = 0; fit->dispatch != NULL && s < fit->n_stages; s++)
        g_array_unref(fit->dispatch[s]);
    g_free(fit->dispatch);
    g_free(fit->split);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SimCalFit, sim_cal_fit_clear)

static void sim_cal_trace_free(gpointer data) {
    SimCalibrateTrace *t = data;
    g_free(t->trace_path);
    g_free(t->scenario_path);
    g_free(t->schedule);
    g_free(t->note);
    g_free(t->slowdown);
    g_free(t);
}

void sim_calibrate_free(SimCalibration *cal) {
    if (cal == NULL)
        return;
    g_free(cal->stages);
    if (cal->traces != NULL)
        g_ptr_array_unref(cal->traces);
    pp_scenario_free(cal->scenario);
    g_free(cal->scenario_text);
    g_free(cal);
}

/* --- small statistics --- */

static int sim_cal_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Median of @values (sorted in place): the middle one, or the truncated mean of the two middle
 * ones; -1 when empty. */
static int64_t sim_cal_median(GArray *values) {
    if (values->len == 0)
        return -1;
    g_array_sort(values, sim_cal_cmp_i64);
    const int64_t *v = (const int64_t *)values->data;
    guint          n = values->len;
    return n % 2 == 1 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

/* Least squares y = a + b x over @n points. Returns FALSE when the x are all equal. */
static gboolean sim_cal_line_fit(const double *x, const double *y, int32_t n, double *a,
                                 double *b) {
    double mx = 0, my = 0, sxx = 0, sxy = 0;
    for (int32_t i = 0; i < n; i++) {
        mx += x[i] / n;
        my += y[i] / n;
    }
    for (int32_t i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    if (!(sxx > 0.0))
        return FALSE;
    *b = sxy / sxx;
    *a = my - *b * mx;
    return TRUE;
}

/* --- steady state and cores --- */

gboolean sim_calibrate_steady_step(const PpTrace *trace, int32_t n_steps, int32_t skip_steps,
                                   const char *name, int32_t *lo, int32_t *hi, int64_t *step_ns,
                                   GError **error) {
    if (n_steps < skip_steps + 2 || n_steps < 2) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: %d optimizer steps leave no steady state after the first %d; train at "
                    "least %d steps",
                    name, n_steps, skip_steps, MAX(skip_steps + 2, 2));
        return FALSE;
    }
    g_autofree int64_t *end_ns = g_new(int64_t, n_steps); /* (n_steps) latest U end per step */
    for (int32_t j = 0; j < n_steps; j++)
        end_ns[j] = -1;
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *row = &trace->rows[i];
        if (row->kind == PP_OP_UPDATE && row->resource == PP_RESOURCE_COMPUTE && row->step >= 0 &&
            row->step < n_steps)
            end_ns[row->step] = MAX(end_ns[row->step], row->end_ns);
    }
    *lo = MAX(skip_steps, n_steps / 4);
    *hi = MIN(n_steps - 1, MAX(*lo + 1, 3 * n_steps / 4));
    g_autoptr(GArray) intervals = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int32_t j = *lo; j <= *hi; j++) {
        if (end_ns[j] < 0) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                        "%s: optimizer step %d has no U row; the steady state needs every "
                        "update of the run",
                        name, j);
            return FALSE;
        }
        if (j > *lo) {
            int64_t d = end_ns[j] - end_ns[j - 1];
            g_array_append_val(intervals, d);
        }
    }
    *step_ns = sim_cal_median(intervals);
    return TRUE;
}

char *sim_calibrate_cores_warning(const PpScenario *scenario, const char *name,
                                  int32_t processors) {
    SimLayout layout;
    sim_layout_init(&layout, scenario);
    int64_t threads = MAX(scenario->run.threads, 1);
    int64_t replicas = MAX(layout.data, 1);
    int64_t needed = (int64_t)scenario->pipeline.stages * replicas * threads;
    if (needed <= processors)
        return NULL;
    return g_strdup_printf(
        "%s: warning: %d stages x %" G_GINT64_FORMAT " replica(s) x %" G_GINT64_FORMAT
        " BLAS thread(s) need %" G_GINT64_FORMAT
        " cores and this machine has %d: if the run was measured here, its stages shared cores, "
        "while the simulator predicts one device per stage (rule: stages x parallel.data x "
        "max(run.threads, 1) <= processors)",
        name, scenario->pipeline.stages, replicas, threads, needed, processors);
}

/* --- the speed reference --- */

/* Median duration of @trace's speed-reference rows of @stage whose step is in [@lo, @hi]; -1
 * when there is none. */
static int64_t sim_cal_reference(const PpTrace *trace, int32_t stage, int32_t lo, int32_t hi) {
    g_autoptr(GArray) dur = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *row = &trace->rows[i];
        if (row->resource == PP_RESOURCE_REFERENCE && row->stage == stage && row->step >= lo &&
            row->step <= hi) {
            int64_t d = row->end_ns - row->start_ns;
            g_array_append_val(dur, d);
        }
    }
    return sim_cal_median(dur);
}

/* The end of each stage's reference row of each step, shifted like @r's measured times (replica
 * 0's rows in a data-parallel trace): (n_stages * n_steps), -1 where there is none. */
static int64_t *sim_cal_reference_ends(const SimReplay *r) {
    const PpSchedule *sched = r->schedule;
    size_t            n = (size_t)sched->n_stages * sched->n_steps;
    int64_t          *ends = g_new(int64_t, n);
    for (size_t i = 0; i < n; i++)
        ends[i] = -1;
    for (int64_t i = 0; i < r->measured->n_rows; i++) {
        const PpTraceRow *row = &r->measured->rows[i];
        if (row->resource == PP_RESOURCE_REFERENCE && row->replica == 0 && row->stage >= 0 &&
            row->stage < sched->n_stages && row->step >= 0 && row->step < sched->n_steps)
            ends[(size_t)row->stage * sched->n_steps + row->step] =
                row->end_ns - r->measured_origin_ns;
    }
    return ends;
}

/* --- collecting samples --- */

static SimCalSize *sim_cal_size_get(SimCalFit *fit, const PpScenario *sc) {
    for (guint i = 0; i < fit->sizes->len; i++) {
        SimCalSize *z = g_ptr_array_index(fit->sizes, i);
        if (z->mb_size == sc->pipeline.microbatch_size)
            return z;
    }
    SimCalSize *z = g_new0(SimCalSize, 1);
    z->mb_size = sc->pipeline.microbatch_size;
    z->tokens = (int64_t)z->mb_size * sc->model.seq_len;
    z->msg_bytes = z->tokens * sc->model.hidden * SIM_CAL_MSG_BYTES_PER_ELEM;
    size_t n = (size_t)fit->n_stages * PP_OP_N_KINDS;
    z->dur = g_new0(GArray *, n + 1); /* NULL-terminated for sim_cal_size_free() */
    for (size_t i = 0; i < n; i++)
        z->dur[i] = g_array_new(FALSE, FALSE, sizeof(int64_t));
    z->copy_f = g_new0(GArray *, fit->n_stages + 1); /* NULL-terminated */
    for (int32_t s = 0; s < fit->n_stages; s++)
        z->copy_f[s] = g_array_new(FALSE, FALSE, sizeof(int64_t));
    z->gaps = g_array_new(FALSE, FALSE, sizeof(int64_t));
    g_ptr_array_add(fit->sizes, z);
    return z;
}

/* Pools the durations, waits and dispatch gaps of @r's ops whose step is >= @skip; @scale
 * (nullable, n_stages) multiplies each stage's op durations (the fit's reference time over
 * this run's). */
static void sim_cal_collect(SimCalFit *fit, const SimReplay *r, int32_t skip, const double *scale) {
    const PpSchedule *sched = r->schedule;
    SimCalSize       *z = sim_cal_size_get(fit, r->scenario);
    gboolean          stashed = sched->weight_mode == PP_WEIGHTS_STASHED;
    /* The reference after a U keeps its stage busy: the gap after the U starts at its end. */
    g_autofree int64_t *ref_end = sim_cal_reference_ends(r);
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int32_t last_version = -1;
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            int32_t     id = sched->op_offset[s] + i;
            /* Under stashing the first F of each version copies the weights. */
            gboolean copies =
                stashed && op->kind == PP_OP_FORWARD && sched->version[id] != last_version;
            if (copies)
                last_version = sched->version[id];
            if (op->step < skip)
                continue;
            int64_t dur = r->measured_end_ns[id] - r->measured_start_ns[id];
            if (scale != NULL)
                dur = llround((double)dur * scale[s]);
            g_array_append_val(copies ? z->copy_f[s] : z->dur[s * PP_OP_N_KINDS + op->kind], dur);
            /* Before a U of data-parallel replicas the stage waited for the reduction. */
            if (i == 0 || (op->kind == PP_OP_UPDATE && r->replicas > 1))
                continue;
            /* The consumer waited when an input from another stage ended after its previous
             * op: the gap from that input's end to its start is the hop. Otherwise the gap
             * after its previous op is dispatch overhead. */
            int64_t prev_end = r->measured_end_ns[id - 1], input_end = -1;
            if (sched->programs[s][i - 1].kind == PP_OP_UPDATE &&
                sched->programs[s][i - 1].step < sched->n_steps)
                prev_end =
                    MAX(prev_end, ref_end[s * sched->n_steps + sched->programs[s][i - 1].step]);
            int32_t        n_deps = 0;
            const PpOpRef *deps = pp_schedule_deps(sched, (PpOpRef){s, i}, &n_deps);
            for (int32_t k = 0; k < n_deps; k++)
                if (deps[k].stage != s)
                    input_end =
                        MAX(input_end, r->measured_end_ns[pp_schedule_op_id(sched, deps[k])]);
            int64_t start = r->measured_start_ns[id];
            if (input_end > prev_end) {
                int64_t gap = MAX(start - input_end, 0);
                g_array_append_val(z->gaps, gap);
            } else {
                SimCalGap gap = {.gap_ns = MAX(start - prev_end, 0),
                                 .slack_ns = input_end < 0 ? G_MAXINT64 : prev_end - input_end};
                g_array_append_val(fit->dispatch[s], gap);
            }
        }
    }
}

/* --- the fit --- */

/* Forward FLOPs of one micro-batch through the whole model (pp-partition's counts). */
static double sim_cal_forward_flops(const SimCalFit *fit, int32_t mb_size) {
    return (double)mb_size *
           ((double)fit->layers * (double)pp_partition_layer_flops(fit->hidden, fit->seq_len) +
            (double)pp_partition_head_flops(fit->hidden, fit->seq_len, fit->vocab));
}

/* The typical time of kind @kind on @stage at size @z: the mean of its durations, those above
 * SIM_CAL_OUTLIER times the median left out; -1 without samples. The mean, not the median:
 * a steady state runs at the ops' mean speed, and op times are skewed to the slow side (on
 * the 2-core VM a stage's F had median 42 ms, mean 45 ms, 90th percentile 51 ms in one
 * run), so medians predicted even the fitted runs a few percent short
 * (docs/measured-vs-predicted.md). */
static int64_t sim_cal_size_typical(SimCalSize *z, int32_t stage, PpOpKind kind) {
    GArray *values = z->dur[stage * PP_OP_N_KINDS + kind];
    int64_t median = sim_cal_median(values);
    double  sum = 0.0;
    int64_t n = 0;
    for (guint i = 0; median >= 0 && i < values->len; i++) {
        int64_t v = g_array_index(values, int64_t, i);
        if ((double)v <= SIM_CAL_OUTLIER * (double)median) {
            sum += (double)v;
            n++;
        }
    }
    return n > 0 ? llround(sum / (double)n) : median;
}

/* Per-micro-batch compute time at size @z (F plus the backward, over all stages), or -1 when a
 * stage lacks F or a whole backward there. */
static int64_t sim_cal_size_mb_time(const SimCalFit *fit, SimCalSize *z) {
    int64_t total = 0;
    for (int32_t s = 0; s < fit->n_stages; s++) {
        int64_t f = sim_cal_size_typical(z, s, PP_OP_FORWARD);
        int64_t bw = sim_cal_size_typical(z, s, PP_OP_BACKWARD_FULL);
        int64_t b = sim_cal_size_typical(z, s, PP_OP_BACKWARD);
        int64_t w = sim_cal_size_typical(z, s, PP_OP_WEIGHT);
        if (bw < 0 && b >= 0 && w >= 0)
            bw = b + w;
        if (f < 0 || bw < 0)
            return -1;
        total += f + bw;
    }
    return total;
}

/* The kernel-efficiency curve: time per FLOP against 1 / tokens is a line (see
 * SimCalibration), fitted over the sizes whose every stage has F and a backward. */
static void sim_cal_fit_curve(SimCalibration *cal, const SimCalFit *fit) {
    int32_t            n = (int32_t)fit->sizes->len, k = 0;
    g_autofree double *x = g_new(double, MAX(n, 1)), *y = g_new(double, MAX(n, 1));
    for (int32_t i = 0; i < n; i++) {
        SimCalSize *z = g_ptr_array_index(fit->sizes, i);
        int64_t     t = sim_cal_size_mb_time(fit, z);
        if (t < 0)
            continue;
        x[k] = 1.0 / (double)z->tokens;
        y[k] = (double)t / (3.0 * sim_cal_forward_flops(fit, z->mb_size));
        k++;
    }
    cal->n_curve_sizes = k;
    double a = 0, b = 0;
    if (k < 2 || !sim_cal_line_fit(x, y, k, &a, &b) || !(a > 0.0))
        return;
    cal->have_curve = TRUE;
    cal->ns_per_flop = a;
    /* A rate that does not grow with the micro-batch: a flat curve at the mean rate. */
    cal->half_tokens = b > 0.0 ? b / a : 0.0;
    if (b <= 0.0) {
        double mean = 0;
        for (int32_t i = 0; i < k; i++)
            mean += y[i] / k;
        cal->ns_per_flop = mean;
    }
}

/* Fills @fit's split from @sc (the first fit trace's scenario): the layers per stage
 * pacer-train ran. */
static gboolean sim_cal_fit_split(SimCalFit *fit, const PpScenario *sc, GError **error) {
    const int32_t n = fit->n_stages;
    if (sc->run.layers_per_stage != NULL) {
        fit->split = g_memdup2(sc->run.layers_per_stage, sizeof(int32_t) * (size_t)n);
        return TRUE;
    }
    g_autoptr(PpPartition) part =
        pp_partition_new_gpt2_flops(fit->layers, fit->hidden, fit->seq_len, fit->vocab, n,
                                    pp_scenario_partition_mode(sc), NULL, error);
    if (part == NULL)
        return FALSE;
    fit->split = g_new(int32_t, n);
    for (int32_t s = 0; s < n; s++)
        fit->split[s] = part->layer_end[s] - part->layer_begin[s];
    return TRUE;
}

/* The operator model's constants (sim-calibrate-ops.h) from every stage's typical F, B, W and
 * BW at every size, priced on @base. */
static gboolean sim_cal_fit_operators(SimCalibration *cal, const SimCalFit *fit,
                                      const PpScenario *base, GError **error) {
    static const PpOpKind kinds[] = {PP_OP_FORWARD, PP_OP_BACKWARD, PP_OP_WEIGHT,
                                     PP_OP_BACKWARD_FULL};
    g_autoptr(GArray) samples = g_array_new(FALSE, FALSE, sizeof(SimCalOpSample));
    for (guint i = 0; i < fit->sizes->len; i++) {
        SimCalSize *z = g_ptr_array_index(fit->sizes, i);
        for (int32_t s = 0; s < fit->n_stages; s++)
            for (size_t k = 0; k < G_N_ELEMENTS(kinds); k++) {
                SimCalOpSample x = {z->mb_size, s, kinds[k], sim_cal_size_typical(z, s, kinds[k])};
                if (x.ns > 0)
                    g_array_append_val(samples, x);
            }
    }
    return sim_calibrate_fit_operators(base, fit->split, (const SimCalOpSample *)samples->data,
                                       (int32_t)samples->len, &cal->operators, error);
}

/* The link: per size the median wait; one size gives the latency, several a line in bytes
 * (a falling line: unlimited bandwidth, the mean as latency). */
static void sim_cal_fit_link(SimCalibration *cal, const SimCalFit *fit) {
    int32_t            n = (int32_t)fit->sizes->len, k = 0;
    g_autofree double *x = g_new(double, MAX(n, 1)), *y = g_new(double, MAX(n, 1));
    for (int32_t i = 0; i < n; i++) {
        SimCalSize *z = g_ptr_array_index(fit->sizes, i);
        cal->n_link_waits += (int32_t)z->gaps->len;
        if (z->gaps->len == 0)
            continue;
        x[k] = (double)z->msg_bytes;
        y[k] = (double)sim_cal_median(z->gaps);
        k++;
    }
    cal->n_link_sizes = k;
    if (k == 0)
        return;
    double a = 0, b = 0, mean = 0;
    for (int32_t i = 0; i < k; i++)
        mean += y[i] / k;
    if (k >= 2 && sim_cal_line_fit(x, y, k, &a, &b) && b > 0.0 && a >= 0.0) {
        cal->link_latency_ns = llround(a);
        cal->link_bytes_per_ns = 1.0 / b;
    } else {
        cal->link_latency_ns = llround(mean);
    }
}

/* A stage's weight copy: the median over its copying F ops (all sizes) of their excess over
 * the typical plain F at their size, at least 0; -1 without such ops. */
static int64_t sim_cal_stash(const SimCalFit *fit, int32_t stage) {
    g_autoptr(GArray) excess = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = 0; i < fit->sizes->len; i++) {
        SimCalSize *z = g_ptr_array_index(fit->sizes, i);
        int64_t     f = sim_cal_size_typical(z, stage, PP_OP_FORWARD);
        for (guint k = 0; f >= 0 && k < z->copy_f[stage]->len; k++) {
            int64_t e = MAX(g_array_index(z->copy_f[stage], int64_t, k) - f, 0);
            g_array_append_val(excess, e);
        }
    }
    return sim_cal_median(excess);
}

/* A stage's dispatch overhead: the median of its gaps whose inputs were there at least one
 * hop (the fitted latency) before the previous op ended, so that no hop hides in them; 0 when
 * there is none. */
static int64_t sim_cal_dispatch(const SimCalibration *cal, const GArray *gaps) {
    g_autoptr(GArray) clean = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = 0; i < gaps->len; i++) {
        const SimCalGap *g = &g_array_index(gaps, SimCalGap, i);
        if (g->slack_ns >= cal->link_latency_ns)
            g_array_append_val(clean, g->gap_ns);
    }
    return MAX(sim_cal_median(clean), 0);
}

/* Time of @kind on @stage for micro-batches of @mb_size sequences: the typical time measured
 * at that size, else the one measured at the nearest size scaled by the fitted operator model
 * (its time at this size over that size's), or without it by the curve, (t + half) / (t0 +
 * half); -1 when neither exists. Includes the stage's dispatch overhead. */
static int64_t sim_cal_cost_at(const SimCalibration *cal, const SimCalFit *fit, int32_t stage,
                               PpOpKind kind, int32_t mb_size) {
    SimCalSize *best = NULL;
    int64_t     best_value = -1;
    for (guint i = 0; i < fit->sizes->len; i++) {
        SimCalSize *z = g_ptr_array_index(fit->sizes, i);
        int64_t     v = sim_cal_size_typical(z, stage, kind);
        if (v < 0)
            continue;
        if (best == NULL || abs(z->mb_size - mb_size) < abs(best->mb_size - mb_size)) {
            best = z;
            best_value = v;
        }
    }
    if (best == NULL)
        return -1;
    int64_t dispatch = cal->stages[stage].dispatch_ns;
    if (kind == PP_OP_UPDATE) /* the speed reference runs right after every U */
        return best_value + dispatch + MAX(cal->stages[stage].reference_ns, 0);
    if (best->mb_size == mb_size)
        return best_value + dispatch;
    if (cal->operators.fitted) { /* scaled by the fitted operator model */
        int64_t p = sim_calibrate_operators_ns(fit->base, fit->split, &cal->operators, mb_size,
                                               stage, kind);
        int64_t p0 = sim_calibrate_operators_ns(fit->base, fit->split, &cal->operators,
                                                best->mb_size, stage, kind);
        if (p < 0 || p0 <= 0)
            return -1;
        return llround((double)best_value * (double)p / (double)p0) + dispatch;
    }
    if (!cal->have_curve)
        return -1;
    double t = (double)mb_size * fit->seq_len, t0 = (double)best->tokens;
    return llround((double)best_value * (t + cal->half_tokens) / (t0 + cal->half_tokens)) +
           dispatch;
}

/* One hop for micro-batches of @mb_size sequences. */
static int64_t sim_cal_comm_at(const SimCalibration *cal, const SimCalFit *fit, int32_t mb_size) {
    int64_t hop = cal->link_latency_ns;
    if (cal->link_bytes_per_ns > 0.0)
        hop += llround((double)mb_size * fit->seq_len * fit->hidden * SIM_CAL_MSG_BYTES_PER_ELEM /
                       cal->link_bytes_per_ns);
    return hop;
}

/* The calibrated cost model for @sched run at @mb_size, every stage's op times multiplied by
 * its @slowdown (nullable, n_stages), or NULL with *@why set (transfer full) when an op kind
 * it runs was never measured. */
static SimCostModel *sim_cal_cost_model(const SimCalibration *cal, const SimCalFit *fit,
                                        const PpSchedule *sched, int32_t mb_size,
                                        const double *slowdown, char **why) {
    g_autoptr(SimCostModel) cost =
        sim_cost_new_uniform(fit->n_stages, 1, 0, 0, 0, sim_cal_comm_at(cal, fit, mb_size));
    cost->bw_ns = g_new0(int64_t, fit->n_stages);
    for (int32_t s = 0; s < fit->n_stages; s++) {
        int64_t f = sim_cal_cost_at(cal, fit, s, PP_OP_FORWARD, mb_size);
        int64_t b = sim_cal_cost_at(cal, fit, s, PP_OP_BACKWARD, mb_size);
        int64_t w = sim_cal_cost_at(cal, fit, s, PP_OP_WEIGHT, mb_size);
        int64_t bw = sim_cal_cost_at(cal, fit, s, PP_OP_BACKWARD_FULL, mb_size);
        int64_t u = sim_cal_cost_at(cal, fit, s, PP_OP_UPDATE, mb_size);
        if (bw < 0 && b >= 0 && w >= 0)
            bw = b + w - cal->stages[s].dispatch_ns; /* one op: one dispatch */
        const char *missing = f < 0                              ? "F"
                              : u < 0                            ? "U"
                              : sched->split_backward && b < 0   ? "B"
                              : sched->split_backward && w < 0   ? "W"
                              : !sched->split_backward && bw < 0 ? "BW"
                                                                 : NULL;
        if (missing != NULL) {
            *why = g_strdup_printf(
                "not predicted: no %s time for stage %d at micro-batch size %d: calibrate with a "
                "trace that "
                "runs %s ops%s",
                missing, s, mb_size, missing,
                cal->have_curve ? "" : " at this size (or traces at two sizes for the curve)");
            return NULL;
        }
        double k = slowdown != NULL ? slowdown[s] : 1.0;
        cost->f_ns[s] = llround((double)f * k);
        cost->b_ns[s] = llround((double)MAX(b, 0) * k);
        cost->w_ns[s] = llround((double)MAX(w, 0) * k);
        cost->bw_ns[s] = llround((double)bw * k);
        cost->u_ns[s] = llround((double)u * k);
        if (cal->stages[s].stash_ns >= 0) {
            if (cost->stash_copy_ns == NULL)
                cost->stash_copy_ns = g_new0(int64_t, fit->n_stages);
            cost->stash_copy_ns[s] = llround((double)cal->stages[s].stash_ns * k);
        }
    }
    if (sched->weight_mode == PP_WEIGHTS_STASHED && cost->stash_copy_ns == NULL)
        *why = g_strdup("predicted without weight copies: no stashing run (pipedream, 2bw) "
                        "was fitted to measure them");
    return g_steal_pointer(&cost);
}

/* --- loading the traces --- */

/* The scenario.ini in @trace_path's folder. Returns: (transfer full). */
static char *sim_cal_scenario_path(const char *trace_path) {
    g_autofree char *dir = g_path_get_dirname(trace_path);
    return g_build_filename(dir, "scenario.ini", NULL);
}

/* Matches @trace_path to its scenario.ini's schedule. Returns: (transfer full), or NULL. */
static SimReplay *sim_cal_load(const char *trace_path, GError **error) {
    g_autofree char *scenario = sim_cal_scenario_path(trace_path);
    if (!g_file_test(scenario, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                    "%s: no scenario.ini next to the trace (%s); calibrate reads pacer-train "
                    "--out DIR, which writes DIR/ops.csv and DIR/scenario.ini",
                    trace_path, scenario);
        return NULL;
    }
    return sim_replay_new(scenario, NULL, trace_path, FALSE, error);
}

/* Checks that @r runs the model and pipeline of @fit. */
static gboolean sim_cal_check_same(const SimCalFit *fit, const SimReplay *r, const char *first,
                                   GError **error) {
    const PpScenario    *sc = r->scenario;
    const PpModelParams *m = &sc->model;
    if (sc->pipeline.chunks != 1) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: pipeline.chunks = %d: calibrate fits full stages and takes runs with "
                    "pipeline.chunks = 1 (an interleaved run's chunks hold different layers)",
                    r->trace_path, sc->pipeline.chunks);
        return FALSE;
    }
    if (sc->pipeline.stages == fit->n_stages && m->layers == fit->layers &&
        m->hidden == fit->hidden && m->heads == fit->heads && m->seq_len == fit->seq_len &&
        m->vocab == fit->vocab)
        return TRUE;
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                "%s: %d stages of a model with L=%d, C=%d, NH=%d, T=%d, V=%d, but %s has %d "
                "stages of L=%d, C=%d, NH=%d, T=%d, V=%d: calibrate takes runs of one model on "
                "one pipeline",
                r->trace_path, sc->pipeline.stages, m->layers, m->hidden, m->heads, m->seq_len,
                m->vocab, first, fit->n_stages, fit->layers, fit->hidden, fit->heads, fit->seq_len,
                fit->vocab);
    return FALSE;
}

/* Data-parallel replicas (@r's trace has D > 1): each stage's reduction before its U, on the
 * stage's own channel after its last backward, costs the link model's figure for the fp32
 * gradients the executor reduces over the trace scenario's [hardware] link (give it the
 * figures pacer-bench-comm fits), or without a link the trace's own median reduction. */
static void sim_cal_add_reduction(SimCostModel *cost, const SimReplay *r) {
    const int32_t n = r->schedule->n_stages; /* calibrate takes one chunk per stage */
    cost->data_parallel = r->replicas;
    cost->dp_sync_ns = g_new(int64_t, n);
    cost->dp_pieces = g_new(int32_t, n);
    for (int32_t s = 0; s < n; s++) {
        cost->dp_sync_ns[s] = r->model_sync_ns[s] >= 0 ? r->model_sync_ns[s] : r->median_sync_ns[s];
        cost->dp_pieces[s] = 1;
    }
}

/* The steady-state step of @r's schedule simulated with the calibrated costs at @mb_size
 * times @slowdown (nullable), in *@step_ns; 0 with *@why set (transfer full) when a cost is
 * missing. Returns FALSE with @error when the simulation fails. */
static gboolean sim_cal_predict_step(const SimCalibration *cal, const SimCalFit *fit,
                                     const SimReplay *r, int32_t mb_size, const double *slowdown,
                                     int64_t *step_ns, char **why, GError **error) {
    g_autoptr(SimCostModel) cost =
        sim_cal_cost_model(cal, fit, r->schedule, mb_size, slowdown, why);
    if (cost == NULL)
        return TRUE;
    if (r->replicas > 1)
        sim_cal_add_reduction(cost, r);
    g_autoptr(SimResult) res = sim_engine_run(r->schedule, cost, error);
    if (res == NULL)
        return FALSE;
    int32_t lo = 0, hi = 0;
    return sim_calibrate_steady_step(res->trace, r->schedule->n_steps, cal->skip_steps,
                                     "the prediction", &lo, &hi, step_ns, error);
}

/* Predicts @r's steady-state step with the calibrated costs and fills @t. */
static gboolean sim_cal_predict(const SimCalibration *cal, const SimCalFit *fit, const SimReplay *r,
                                SimCalibrateTrace *t, GError **error) {
    const PpScenario *sc = r->scenario;
    t->schedule = g_strdup(sc->pipeline.schedule);
    t->n_stages = sc->pipeline.stages;
    t->microbatches = sc->pipeline.microbatches;
    t->accumulation = sc->pipeline.accumulation;
    t->microbatch_size = sc->pipeline.microbatch_size;
    t->steps = r->schedule->n_steps;
    t->threads = sc->run.threads;
    t->replicas = r->replicas;
    if (!sim_calibrate_steady_step(r->measured, r->schedule->n_steps, cal->skip_steps,
                                   r->trace_path, &t->lo_step, &t->hi_step, &t->measured_step_ns,
                                   error))
        return FALSE;
    if (!sim_cal_predict_step(cal, fit, r, t->microbatch_size, NULL, &t->predicted_step_ns,
                              &t->note, error))
        return FALSE;
    if (r->replicas > 1 && t->predicted_step_ns > 0) {
        gboolean         model = r->model_sync_ns[0] >= 0;
        g_autofree char *was = t->note;
        t->note = g_strdup_printf(
            "%s%s%d replicas: the reduction before each U %s", was ? was : "", was ? "; " : "",
            r->replicas,
            model ? "from the fp32 gradient bytes over the scenario's [hardware] link"
                  : "as this trace measured it (its scenario has no [hardware] link)");
    }
    /* The same with each stage's speed in this run, when the fit and this run timed the
     * reference. */
    if (t->predicted_step_ns == 0 || cal->stages[0].reference_ns < 0)
        return TRUE;
    g_autofree double *slowdown = g_new(double, fit->n_stages);
    for (int32_t s = 0; s < fit->n_stages; s++) {
        int64_t ref = sim_cal_reference(r->measured, s, t->lo_step, t->hi_step);
        if (ref < 0)
            return TRUE;
        slowdown[s] = (double)ref / (double)cal->stages[s].reference_ns;
    }
    g_autofree char *why = NULL;
    if (!sim_cal_predict_step(cal, fit, r, t->microbatch_size, slowdown, &t->adjusted_step_ns, &why,
                              error))
        return FALSE;
    t->slowdown = g_steal_pointer(&slowdown);
    return TRUE;
}

/* --- the written scenario --- */

/* Replaces the per-stage list at @list (count @n) with @values (n_stages entries). */
static void sim_cal_set_list(int64_t **list, int32_t *n, const int64_t *values, int32_t n_stages) {
    g_free(*list);
    *list = g_memdup2(values, sizeof(int64_t) * (size_t)n_stages);
    *n = n_stages;
}

/* The calibrated scenario: the first fit trace's, at the calibration's micro-batch size, with
 * explicit per-stage [costs] and the executor's layer split in run.layers_per_stage (the
 * memory model's split under [costs]). */
static gboolean sim_cal_make_scenario(SimCalibration *cal, const SimCalFit *fit,
                                      const char *scenario_path, GError **error) {
    g_autoptr(PpScenario) sc = pp_scenario_load(scenario_path, NULL, error);
    if (sc == NULL)
        return FALSE;
    const int32_t       n = fit->n_stages;
    g_autofree int64_t *f = g_new(int64_t, n), *b = g_new(int64_t, n), *w = g_new(int64_t, n),
                       *bw = g_new(int64_t, n), *u = g_new(int64_t, n);
    gboolean have_split = TRUE, have_fused = TRUE;
    for (int32_t s = 0; s < n; s++) {
        const SimCalibrateStage *st = &cal->stages[s];
        if (st->f_ns < 0 || st->u_ns < 0 || (st->bw_ns < 0 && (st->b_ns < 0 || st->w_ns < 0))) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                        "%s: stage %d has no measured %s at micro-batch size %d (after the first "
                        "%d steps): give traces with more steps, at this size, or lower "
                        "--skip-steps",
                        scenario_path, s,
                        st->f_ns < 0   ? "F"
                        : st->u_ns < 0 ? "U"
                                       : "backward",
                        cal->microbatch_size, cal->skip_steps);
            return FALSE;
        }
        have_split = have_split && st->b_ns >= 0 && st->w_ns >= 0;
        have_fused = have_fused && st->bw_ns >= 0;
        f[s] = st->f_ns;
        u[s] = st->u_ns;
        bw[s] = st->bw_ns;
        b[s] = st->b_ns;
        w[s] = st->w_ns;
    }
    /* Without B and W: a fused BW as backward_us, W = 0 (split schedules then need a split
     * trace). With both: B and W, and the fused time as fused_backward_us. */
    for (int32_t s = 0; s < n; s++) {
        if (!have_split) {
            b[s] = bw[s];
            w[s] = 0;
        }
    }
    PpCostParams *c = &sc->costs;
    c->set = TRUE;
    g_clear_pointer(&c->stash_stage_ns, g_free);
    c->n_stash_stage = 0;
    if (cal->stages[0].stash_ns >= 0) {
        g_autofree int64_t *copy = g_new(int64_t, n);
        for (int32_t s = 0; s < n; s++)
            copy[s] = MAX(cal->stages[s].stash_ns, 0);
        sim_cal_set_list(&c->stash_stage_ns, &c->n_stash_stage, copy, n);
    }
    sim_cal_set_list(&c->forward_stage_ns, &c->n_forward_stage, f, n);
    sim_cal_set_list(&c->backward_stage_ns, &c->n_backward_stage, b, n);
    sim_cal_set_list(&c->weight_stage_ns, &c->n_weight_stage, w, n);
    sim_cal_set_list(&c->update_stage_ns, &c->n_update_stage, u, n);
    g_clear_pointer(&c->fused_stage_ns, g_free);
    c->n_fused_stage = 0;
    if (have_split && have_fused)
        sim_cal_set_list(&c->fused_stage_ns, &c->n_fused_stage, bw, n);
    c->comm_ns = cal->comm_ns;
    sc->pipeline.microbatch_size = cal->microbatch_size;
    sc->training.global_batch = cal->microbatch_size * sc->pipeline.mb_per_step;

    /* The executor's split, so that memory follows it. */
    if (sc->run.layers_per_stage == NULL) {
        sc->run.layers_per_stage = g_memdup2(fit->split, sizeof(int32_t) * (size_t)n);
        sc->run.n_layers_per_stage = n;
    }
    if (cal->operators.fitted) {
        sc->hardware.kernel_eff_max = cal->operators.kernel_eff_max;
        sc->hardware.kernel_eff_half_hidden = cal->operators.kernel_eff_half_hidden;
        sc->hardware.launch_ns = cal->operators.launch_ns;
    }
    /* pacer-train reduces fp32 gradients between data-parallel replicas. */
    sc->parallel.grad_bytes = SIM_REPLAY_DP_GRAD_BYTES_PER_PARAM;
    cal->scenario = g_steal_pointer(&sc);
    return TRUE;
}

/* Every stage's reference_ns: the median over the fit traces (the first of @replays, as in
 * cal->traces) of each one's own median reference time after @skip steps. Returns: (transfer
 * full) those own medians, (n_traces * n_stages), -1 for held-out traces; or NULL, every
 * reference_ns -1, when a fit trace lacks reference rows on a stage (or its median is 0 ns). */
static int64_t *sim_cal_fit_reference(SimCalibration *cal, GPtrArray *replays, int32_t skip) {
    int32_t             n = cal->n_stages;
    g_autofree int64_t *own = g_new(int64_t, (size_t)replays->len * n);
    for (int32_t s = 0; s < n; s++) {
        g_autoptr(GArray) medians = g_array_new(FALSE, FALSE, sizeof(int64_t));
        for (guint i = 0; i < replays->len; i++) {
            int64_t *m = &own[(size_t)i * n + s];
            *m = -1;
            if (!((SimCalibrateTrace *)g_ptr_array_index(cal->traces, i))->fit)
                continue;
            *m = sim_cal_reference(((SimReplay *)g_ptr_array_index(replays, i))->measured, s, skip,
                                   G_MAXINT32);
            if (*m <= 0) {
                for (int32_t k = 0; k < n; k++)
                    cal->stages[k].reference_ns = -1;
                return NULL;
            }
            g_array_append_val(medians, *m);
        }
        cal->stages[s].reference_ns = sim_cal_median(medians);
    }
    return g_steal_pointer(&own);
}

/* Number of traces the fit used. */
static int32_t sim_cal_n_fit(const SimCalibration *cal) {
    int32_t n = 0;
    for (guint i = 0; i < cal->traces->len; i++)
        n += ((const SimCalibrateTrace *)g_ptr_array_index(cal->traces, i))->fit;
    return n;
}

/* The scenario text: a header saying how it was calibrated, then every key. */
static char *sim_cal_scenario_text(const SimCalibration *cal) {
    GString *out = g_string_new(NULL);
    g_string_append_printf(out,
                           "# Calibrated by pacer-sim calibrate from %d measured trace(s) (the "
                           "first: %s).\n",
                           sim_cal_n_fit(cal),
                           ((SimCalibrateTrace *)g_ptr_array_index(cal->traces, 0))->trace_path);
    g_string_append_printf(out,
                           "# [costs] are explicit per-stage means of the measured ops at "
                           "micro-batch size %d (durations\n# above %g times the median left "
                           "out), ops of the first %d optimizer step(s) left out (one-off\n# "
                           "costs), each plus its stage's dispatch gap.\n",
                           cal->microbatch_size, SIM_CAL_OUTLIER, cal->skip_steps);
    g_string_append_printf(out, "# comm_us is one hop: latency %.3f us%s (%d consumer waits).\n",
                           cal->link_latency_ns / 1e3,
                           cal->link_bytes_per_ns > 0.0 ? " + message bytes / bandwidth" : "",
                           cal->n_link_waits);
    if (cal->stages[0].reference_ns >= 0)
        g_string_append(out,
                        "# The runs timed a speed reference after every U (run.speed_reference): "
                        "op times are\n# scaled to the fit runs' typical reference time, and "
                        "update_us includes it.\n");
    g_string_append(out, "# parallel.grad_bytes = 4: pacer-train reduces fp32 gradients; "
                         "--set parallel.data=D predicts D\n# replicas over the [hardware] link "
                         "(link_latency_us, link_gbps: pacer-bench-comm's fit).\n");
    if (cal->have_curve)
        g_string_append_printf(
            out,
            "# Kernel efficiency over %d micro-batch sizes: for the analytic model use [hardware]"
            "\n# peak_tflops = %.6g with kernel_eff_max = 1 and kernel_eff_half_tokens = %.6g.\n",
            cal->n_curve_sizes, 1e-3 / cal->ns_per_flop, cal->half_tokens);
    const SimCalOperators *op = &cal->operators;
    if (op->fitted)
        g_string_append_printf(
            out,
            "# Operator cost model fitted to %d measured F/B/W/BW times over %d micro-batch "
            "size(s)\n# (rms error %.2f%%): [hardware] kernel_eff_max = %.6g, "
            "kernel_eff_half_hidden = %.6g,\n# launch_us = %.3f (%s);\n# they price the "
            "operators once [costs] is removed.\n",
            op->n_samples, op->n_sizes, 100.0 * op->rms_rel_err, op->kernel_eff_max,
            op->kernel_eff_half_hidden, (double)op->launch_ns / 1e3,
            op->n_launch_bound > 0 ? "the host floor bounds some passes"
                                   : "an upper bound: no measured pass was launch-bound");
    g_autofree char *keys = pp_scenario_to_data(cal->scenario);
    g_string_append(out, keys);
    return g_string_free(out, FALSE);
}

/* --- entry point --- */

SimCalibration *sim_calibrate_new(const SimCalibrateParams *params, GError **error) {
    PP_ASSERT(params->fit_traces != NULL && params->fit_traces[0] != NULL);
    PP_ASSERT(params->skip_steps >= 0 && params->microbatch_size >= 0);
    g_autoptr(SimCalibration) cal = g_new0(SimCalibration, 1);
    g_auto(SimCalFit) fit = {0};
    cal->skip_steps = params->skip_steps;
    cal->traces = g_ptr_array_new_with_free_func(sim_cal_trace_free);
    g_autoptr(GPtrArray) replays = g_ptr_array_new_with_free_func((GDestroyNotify)sim_replay_free);

    /* Load and match every trace; the first fixes the model and pipeline. */
    const char *const *lists[] = {params->fit_traces, params->check_traces};
    for (int32_t l = 0; l < 2; l++) {
        for (const char *const *p = lists[l]; p != NULL && *p != NULL; p++) {
            SimReplay *r = sim_cal_load(*p, error);
            if (r == NULL)
                return NULL;
            g_ptr_array_add(replays, r);
            if (replays->len == 1) {
                const PpModelParams *m = &r->scenario->model;
                fit.n_stages = r->scenario->pipeline.stages;
                fit.layers = m->layers;
                fit.hidden = m->hidden;
                fit.heads = m->heads;
                fit.seq_len = m->seq_len;
                fit.vocab = m->vocab;
                fit.sizes = g_ptr_array_new_with_free_func(sim_cal_size_free);
                fit.dispatch = g_new(GArray *, fit.n_stages);
                for (int32_t s = 0; s < fit.n_stages; s++)
                    fit.dispatch[s] = g_array_new(FALSE, FALSE, sizeof(SimCalGap));
            }
            if (!sim_cal_check_same(&fit, r, params->fit_traces[0], error))
                return NULL;
            SimCalibrateTrace *t = g_new0(SimCalibrateTrace, 1);
            t->trace_path = g_strdup(*p);
            t->scenario_path = g_strdup(r->scenario->path);
            t->fit = l == 0;
            g_ptr_array_add(cal->traces, t);
        }
    }
    cal->n_stages = fit.n_stages;
    cal->stages = g_new0(SimCalibrateStage, fit.n_stages);
    g_autofree int64_t *own_ref = sim_cal_fit_reference(cal, replays, params->skip_steps);
    for (guint i = 0; i < replays->len; i++) {
        const SimReplay   *r = g_ptr_array_index(replays, i);
        SimCalibrateTrace *t = g_ptr_array_index(cal->traces, i);
        if (!t->fit)
            continue;
        /* Each fit run's op times at the fit's reference speed. */
        g_autofree double *scale = NULL;
        if (own_ref != NULL) {
            scale = g_new(double, fit.n_stages);
            for (int32_t s = 0; s < fit.n_stages; s++)
                scale[s] = (double)cal->stages[s].reference_ns /
                           (double)own_ref[(size_t)i * fit.n_stages + s];
        }
        sim_cal_collect(&fit, r, params->skip_steps, scale);
    }

    SimReplay *first = g_ptr_array_index(replays, 0);
    cal->microbatch_size = params->microbatch_size > 0 ? params->microbatch_size
                                                       : first->scenario->pipeline.microbatch_size;
    cal->tokens_per_mb = (int64_t)cal->microbatch_size * fit.seq_len;
    sim_cal_fit_link(cal, &fit);
    for (int32_t s = 0; s < fit.n_stages; s++) {
        cal->stages[s].stage = s;
        cal->stages[s].dispatch_ns = sim_cal_dispatch(cal, fit.dispatch[s]);
        cal->stages[s].stash_ns = sim_cal_stash(&fit, s);
    }
    sim_cal_fit_curve(cal, &fit);
    fit.base = first->scenario;
    if (!sim_cal_fit_split(&fit, first->scenario, error))
        return NULL;
    if (pp_scenario_cost_operators(first->scenario) &&
        !sim_cal_fit_operators(cal, &fit, first->scenario, error))
        return NULL;
    cal->link_msg_bytes =
        (int64_t)cal->microbatch_size * fit.seq_len * fit.hidden * SIM_CAL_MSG_BYTES_PER_ELEM;
    cal->comm_ns = sim_cal_comm_at(cal, &fit, cal->microbatch_size);
    for (int32_t s = 0; s < fit.n_stages; s++) {
        SimCalibrateStage *st = &cal->stages[s];
        st->f_ns = sim_cal_cost_at(cal, &fit, s, PP_OP_FORWARD, cal->microbatch_size);
        st->b_ns = sim_cal_cost_at(cal, &fit, s, PP_OP_BACKWARD, cal->microbatch_size);
        st->w_ns = sim_cal_cost_at(cal, &fit, s, PP_OP_WEIGHT, cal->microbatch_size);
        st->bw_ns = sim_cal_cost_at(cal, &fit, s, PP_OP_BACKWARD_FULL, cal->microbatch_size);
        st->u_ns = sim_cal_cost_at(cal, &fit, s, PP_OP_UPDATE, cal->microbatch_size);
        for (guint i = 0; i < fit.sizes->len; i++) {
            SimCalSize *z = g_ptr_array_index(fit.sizes, i);
            for (int32_t k = 0; k < PP_OP_N_KINDS; k++)
                st->n_samples += (int32_t)z->dur[s * PP_OP_N_KINDS + k]->len;
        }
    }
    if (!sim_cal_make_scenario(cal, &fit, first->scenario->path, error))
        return NULL;
    for (guint i = 0; i < replays->len; i++)
        if (!sim_cal_predict(cal, &fit, g_ptr_array_index(replays, i),
                             g_ptr_array_index(cal->traces, i), error))
            return NULL;
    cal->scenario_text = sim_cal_scenario_text(cal);
    return g_steal_pointer(&cal);
}

/* --- reports --- */

/* @ns as milliseconds with three decimals, "-" when negative (not measured). Returns @buf. */
static char *sim_cal_ms(char *buf, size_t size, int64_t ns) {
    if (ns < 0)
        g_snprintf(buf, size, "-");
    else
        g_snprintf(buf, size, "%.3f", (double)ns / 1e6);
    return buf;
}

char *sim_calibrate_format(const SimCalibration *cal) {
    GString *out = g_string_new(NULL);
    char     a[32], b[32], c[32], d[32], e[32], g[32], h[32];
    g_string_append_printf(out,
                           "calibrate   %d stages, costs at micro-batch size %d (%" G_GINT64_FORMAT
                           " tokens); ops of the first %d optimizer step(s) left out (one-off "
                           "costs)\n\n",
                           cal->n_stages, cal->microbatch_size, cal->tokens_per_mb,
                           cal->skip_steps);
    g_string_append(out, "stage     F ms     B ms     W ms    BW ms     U ms  copy ms   ref ms  "
                         "dispatch us  samples\n");
    for (int32_t s = 0; s < cal->n_stages; s++) {
        const SimCalibrateStage *st = &cal->stages[s];
        g_string_append_printf(
            out, "%5d %8s %8s %8s %8s %8s %8s %8s %12.1f %8d\n", s,
            sim_cal_ms(a, sizeof a, st->f_ns), sim_cal_ms(b, sizeof b, st->b_ns),
            sim_cal_ms(c, sizeof c, st->w_ns), sim_cal_ms(d, sizeof d, st->bw_ns),
            sim_cal_ms(e, sizeof e, st->u_ns), sim_cal_ms(g, sizeof g, st->stash_ns),
            sim_cal_ms(h, sizeof h, st->reference_ns), (double)st->dispatch_ns / 1e3,
            st->n_samples);
    }
    if (cal->stages[0].reference_ns >= 0)
        g_string_append(out, "(ref: the speed reference after every U, included in U; op times "
                             "scaled to the fit runs' reference time)\n");
    g_string_append_printf(out, "\nlink        latency %.1f us", cal->link_latency_ns / 1e3);
    if (cal->link_bytes_per_ns > 0.0)
        g_string_append_printf(out, ", bandwidth %.3f GB/s", cal->link_bytes_per_ns);
    else
        g_string_append(out, cal->n_link_sizes < 2 ? ", bandwidth not identifiable (one message "
                                                     "size)"
                                                   : ", no cost growing with message size");
    g_string_append_printf(out, "; hop %.1f us for %" G_GINT64_FORMAT " bytes (%d waits)\n",
                           cal->comm_ns / 1e3, cal->link_msg_bytes, cal->n_link_waits);
    if (cal->have_curve)
        g_string_append_printf(out,
                               "kernel eff  peak_tflops %.6g (kernel_eff_max 1), "
                               "kernel_eff_half_tokens %.1f, from %d micro-batch sizes\n",
                               1e-3 / cal->ns_per_flop, cal->half_tokens, cal->n_curve_sizes);
    else
        g_string_append(out, "kernel eff  not fitted: needs traces at two or more micro-batch "
                             "sizes\n");
    const SimCalOperators *op = &cal->operators;
    if (op->fitted)
        g_string_append_printf(out,
                               "operators   kernel_eff_max %.6g, kernel_eff_half_hidden %.6g, "
                               "launch_us %.3f%s; %d times over %d size(s), rms error %.2f%%\n",
                               op->kernel_eff_max, op->kernel_eff_half_hidden,
                               (double)op->launch_ns / 1e3,
                               op->n_launch_bound > 0 ? "" : " (upper bound: none launch-bound)",
                               op->n_samples, op->n_sizes, 100.0 * op->rms_rel_err);

    g_string_append(out, "\nsteady-state step time (median step interval over steps lo..hi); "
                         "adjusted: predicted with each stage's slowdown (its reference time in "
                         "this run over the fit's)\n");
    g_string_append(out, "role   schedule      m    a   mbs  steps  lo..hi   measured ms  "
                         "predicted ms   ratio   adjusted ms   ratio  slowdown  trace\n");
    for (guint i = 0; i < cal->traces->len; i++) {
        const SimCalibrateTrace *t = g_ptr_array_index(cal->traces, i);
        g_autofree char         *range = g_strdup_printf("%d..%d", t->lo_step, t->hi_step);
        g_string_append_printf(
            out, "%-6s %-10s %4d %4d %5d %6d %7s %13s %13s", t->fit ? "fit" : "check", t->schedule,
            t->microbatches, t->accumulation, t->microbatch_size, t->steps, range,
            sim_cal_ms(a, sizeof a, t->measured_step_ns),
            t->predicted_step_ns > 0 ? sim_cal_ms(b, sizeof b, t->predicted_step_ns) : "-");
        if (t->predicted_step_ns > 0 && t->measured_step_ns > 0)
            g_string_append_printf(out, " %7.3f",
                                   (double)t->predicted_step_ns / (double)t->measured_step_ns);
        else
            g_string_append_printf(out, " %7s", "-");
        if (t->adjusted_step_ns > 0 && t->measured_step_ns > 0) {
            g_string_append_printf(out, " %13s %7.3f  ",
                                   sim_cal_ms(a, sizeof a, t->adjusted_step_ns),
                                   (double)t->adjusted_step_ns / (double)t->measured_step_ns);
            for (int32_t s = 0; s < cal->n_stages; s++)
                g_string_append_printf(out, "%s%.3f", s ? "/" : "", t->slowdown[s]);
        } else {
            g_string_append_printf(out, " %13s %7s  -", "-", "-");
        }
        g_string_append_printf(out, "  %s\n", t->trace_path);
        if (t->note != NULL)
            g_string_append_printf(out, "       %s\n", t->note);
    }
    return g_string_free(out, FALSE);
}

static void sim_cal_json_int(JsonBuilder *b, const char *name, int64_t value) {
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

static void sim_cal_json_double(JsonBuilder *b, const char *name, double value) {
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, value);
}

JsonNode *sim_calibrate_build_json(const SimCalibration *cal) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    sim_cal_json_int(b, "n_stages", cal->n_stages);
    sim_cal_json_int(b, "microbatch_size", cal->microbatch_size);
    sim_cal_json_int(b, "skip_steps", cal->skip_steps);
    json_builder_set_member_name(b, "stages");
    json_builder_begin_array(b);
    for (int32_t s = 0; s < cal->n_stages; s++) {
        const SimCalibrateStage *st = &cal->stages[s];
        json_builder_begin_object(b);
        sim_cal_json_int(b, "stage", s);
        sim_cal_json_int(b, "f_ns", st->f_ns);
        sim_cal_json_int(b, "b_ns", st->b_ns);
        sim_cal_json_int(b, "w_ns", st->w_ns);
        sim_cal_json_int(b, "bw_ns", st->bw_ns);
        sim_cal_json_int(b, "u_ns", st->u_ns);
        sim_cal_json_int(b, "stash_ns", st->stash_ns);
        sim_cal_json_int(b, "dispatch_ns", st->dispatch_ns);
        sim_cal_json_int(b, "samples", st->n_samples);
        sim_cal_json_int(b, "reference_ns", st->reference_ns);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "link");
    json_builder_begin_object(b);
    sim_cal_json_int(b, "latency_ns", cal->link_latency_ns);
    sim_cal_json_double(b, "bytes_per_ns", cal->link_bytes_per_ns);
    sim_cal_json_int(b, "msg_bytes", cal->link_msg_bytes);
    sim_cal_json_int(b, "comm_ns", cal->comm_ns);
    sim_cal_json_int(b, "waits", cal->n_link_waits);
    sim_cal_json_int(b, "sizes", cal->n_link_sizes);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "kernel_efficiency");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "fitted");
    json_builder_add_boolean_value(b, cal->have_curve);
    sim_cal_json_int(b, "sizes", cal->n_curve_sizes);
    sim_cal_json_double(b, "ns_per_flop", cal->have_curve ? cal->ns_per_flop : 0.0);
    sim_cal_json_double(b, "peak_tflops", cal->have_curve ? 1e-3 / cal->ns_per_flop : 0.0);
    sim_cal_json_double(b, "half_tokens", cal->half_tokens);
    json_builder_end_object(b);
    if (cal->operators.fitted) {
        const SimCalOperators *op = &cal->operators;
        json_builder_set_member_name(b, "operators");
        json_builder_begin_object(b);
        sim_cal_json_double(b, "kernel_eff_max", op->kernel_eff_max);
        sim_cal_json_double(b, "kernel_eff_half_hidden", op->kernel_eff_half_hidden);
        sim_cal_json_int(b, "launch_ns", op->launch_ns);
        sim_cal_json_int(b, "launch_bound", op->n_launch_bound);
        sim_cal_json_int(b, "samples", op->n_samples);
        sim_cal_json_int(b, "sizes", op->n_sizes);
        sim_cal_json_double(b, "rms_rel_err", op->rms_rel_err);
        json_builder_end_object(b);
    }
    json_builder_set_member_name(b, "traces");
    json_builder_begin_array(b);
    for (guint i = 0; i < cal->traces->len; i++) {
        const SimCalibrateTrace *t = g_ptr_array_index(cal->traces, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "trace");
        json_builder_add_string_value(b, t->trace_path);
        json_builder_set_member_name(b, "role");
        json_builder_add_string_value(b, t->fit ? "fit" : "check");
        json_builder_set_member_name(b, "schedule");
        json_builder_add_string_value(b, t->schedule);
        sim_cal_json_int(b, "microbatches", t->microbatches);
        sim_cal_json_int(b, "accumulation", t->accumulation);
        sim_cal_json_int(b, "microbatch_size", t->microbatch_size);
        sim_cal_json_int(b, "steps", t->steps);
        sim_cal_json_int(b, "replicas", t->replicas);
        sim_cal_json_int(b, "lo_step", t->lo_step);
        sim_cal_json_int(b, "hi_step", t->hi_step);
        sim_cal_json_int(b, "measured_step_ns", t->measured_step_ns);
        sim_cal_json_int(b, "predicted_step_ns", t->predicted_step_ns);
        sim_cal_json_double(b, "ratio",
                            t->predicted_step_ns > 0 && t->measured_step_ns > 0
                                ? (double)t->predicted_step_ns / (double)t->measured_step_ns
                                : 0.0);
        sim_cal_json_int(b, "adjusted_step_ns", t->adjusted_step_ns);
        sim_cal_json_double(b, "adjusted_ratio",
                            t->adjusted_step_ns > 0 && t->measured_step_ns > 0
                                ? (double)t->adjusted_step_ns / (double)t->measured_step_ns
                                : 0.0);
        json_builder_set_member_name(b, "slowdown");
        json_builder_begin_array(b);
        for (int32_t s = 0; t->slowdown != NULL && s < cal->n_stages; s++)
            json_builder_add_double_value(b, t->slowdown[s]);
        json_builder_end_array(b);
        if (t->note != NULL) {
            json_builder_set_member_name(b, "note");
            json_builder_add_string_value(b, t->note);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* --- command line --- */

typedef struct {
    char   **checks;
    char    *out;
    gboolean json;
    gint     skip_steps;
    gint     microbatch_size;
} SimCalOptions;

static void sim_cal_options_clear(SimCalOptions *o) {
    g_strfreev(o->checks);
    g_free(o->out);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SimCalOptions, sim_cal_options_clear)

int sim_calibrate_main(int argc, char **argv) {
    g_auto(SimCalOptions) o = {.skip_steps = 1};
    const GOptionEntry entries[] = {
        {"check", 'c', 0, G_OPTION_ARG_FILENAME_ARRAY, &o.checks,
         "Predict this trace too, without fitting it (repeatable)", "TRACE"},
        SIM_MAIN_OPTION_OUT(&o.out, "Write the calibrated scenario to FILE", "SCENARIO"),
        {"skip-steps", 'k', 0, G_OPTION_ARG_INT, &o.skip_steps,
         "Leave the ops of the first N optimizer steps out of the fit (default 1)", "N"},
        {"microbatch-size", 'b', 0, G_OPTION_ARG_INT, &o.microbatch_size,
         "Write the costs for micro-batches of B sequences (default: the first trace's)", "B"},
        SIM_MAIN_OPTION_JSON(&o.json, "Print the calibration as one JSON object"),
        SIM_MAIN_OPTION_END,
    };
    g_autoptr(GError) error = NULL;
    if (!sim_main_parse(
            &argc, &argv, "TRACE... - fit the cost model to measured runs",
            "Fit per-stage F, B, W, BW and U times, the per-op dispatch overhead, the link and "
            "(with runs at several micro-batch sizes) the kernel-efficiency curve, and with "
            "hardware.cost_model = operators the operator model's kernel_eff_max, "
            "kernel_eff_half_hidden and launch_us, to pacer-train traces, write them as a scenario "
            "with explicit per-stage [costs], and predict every "
            "trace's steady-state step time with them.",
            "Each TRACE is pacer-train --out DIR's DIR/ops.csv; DIR/scenario.ini must be next to\n"
            "it, and the run one segment (run.eval_every = 0, run.checkpoint_every = 0). All\n"
            "traces run one model on one pipeline (chunks = 1). The steady-state step time is\n"
            "the median interval between consecutive optimizer steps' ends over steps\n"
            "max(N, K/4) .. 3K/4 of a K-step run, measured and predicted alike. See\n"
            "docs/measured-vs-predicted.md.",
            entries, &error))
        return sim_main_fail(NULL, error);
    if (argc < 2)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "calibrate needs at least one TRACE (pacer-train --out DIR writes "
                    "DIR/ops.csv)");
    else if (o.skip_steps < 0)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--skip-steps %d: expected a number of steps >= 0", o.skip_steps);
    else if (o.microbatch_size < 0)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--microbatch-size %d: expected a positive number of sequences",
                    o.microbatch_size);
    if (error != NULL)
        return sim_main_fail(NULL, error);

    SimCalibrateParams params = {.fit_traces = (const char *const *)argv + 1,
                                 .check_traces = (const char *const *)o.checks,
                                 .skip_steps = o.skip_steps,
                                 .microbatch_size = o.microbatch_size};
    g_autoptr(SimCalibration) cal = sim_calibrate_new(&params, &error);
    if (cal == NULL)
        return sim_main_fail(NULL, error);
    /* One warning for the first trace that needs more cores than this machine has. */
    int32_t          processors = (int32_t)g_get_num_processors(), n_over = 0;
    g_autofree char *warning = NULL;
    for (guint i = 0; i < cal->traces->len; i++) {
        const SimCalibrateTrace *t = g_ptr_array_index(cal->traces, i);
        PpScenario               sc = {.pipeline.stages = t->n_stages,
                                       .parallel.data = t->replicas,
                                       .run.threads = t->threads};
        g_autofree char         *w = sim_calibrate_cores_warning(&sc, t->trace_path, processors);
        n_over += w != NULL;
        if (w != NULL && warning == NULL)
            warning = g_steal_pointer(&w);
    }
    if (warning != NULL)
        fprintf(stderr, "pacer-sim: %s; %d of %u traces alike\n", warning, n_over,
                cal->traces->len);
    if (o.out != NULL &&
        !pp_file_write(o.out, cal->scenario_text, strlen(cal->scenario_text), &error))
        return sim_main_fail(o.out, error);
    if (o.json) {
        sim_main_print_json(sim_calibrate_build_json(cal));
    } else {
        g_autofree char *text = sim_calibrate_format(cal);
        fputs(text, stdout);
        if (o.out != NULL)
            printf("\nscenario    %s (explicit per-stage [costs]; pacer-sim runs it as is)\n",
                   o.out);
    }
    return 0;
}
