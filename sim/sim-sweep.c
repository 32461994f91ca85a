/* SPDX-License-Identifier: MIT
 * sim-sweep.c: pacer-sim compare (several schedules, one scenario) and sweep (cartesian
 * product over scenario keys). Compare derives each row from the loaded scenario by a typed
 * change (pp_scenario_with()); sweep appends each point's values, which the user gave as text,
 * as "section.key=value" overrides after the --set ones. Either way every run goes through the
 * same scenario checks.
 */
#include "sim-sweep.h"

#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "sim-layout.h"

/* A NULL-terminated override list: @base (nullable) then the extras that the caller
 * appends. Returns: (transfer full). */
static GPtrArray *sim_sweep_overrides_new(const char *const *base) {
    GPtrArray *ov = g_ptr_array_new_with_free_func(g_free);
    for (size_t i = 0; base != NULL && base[i] != NULL; i++)
        g_ptr_array_add(ov, g_strdup(base[i]));
    return ov;
}

static const char *const *sim_sweep_overrides_terminate(GPtrArray *ov) {
    g_ptr_array_add(ov, NULL);
    return (const char *const *)ov->pdata;
}

/* --- compare --- */

static void sim_sweep_compare_row_free(gpointer data) {
    SimCompareRow *row = data;
    g_free(row->schedule);
    sim_job_free(row->job);
    g_free(row->error);
    g_free(row);
}

/* The typed change that runs @kind under the comparison rule (sim-sweep.h). Returns FALSE
 * with @error set when @kind is unknown or cannot keep the scenario's global batch. */
static gboolean sim_sweep_compare_delta(const PpScenario *base, const char *kind,
                                        PpScenarioDelta *delta, GError **error) {
    const PpSchedKindInfo *info = pp_sched_kind_lookup(kind);
    if (info == NULL) {
        g_autofree char *names = pp_sched_kind_names();
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "unknown schedule '%s'; valid: %s", kind, names);
        return FALSE;
    }
    const PpPipelineParams *p = &base->pipeline;
    /* Chunks: the scenario's within the kind's range; a multi-chunk kind (interleaved) run with
     * one chunk would be its one-chunk sibling, so it gets 2. */
    int32_t chunks = CLAMP(p->chunks, info->min_chunks, info->max_chunks);
    if (chunks == 1 && info->max_chunks > 1)
        chunks = 2;
    /* Accumulation: a kind that accumulates (paci) updates every m backwards, the
     * micro-batches of one flush step, unless the scenario's kind accumulates too; a fixed
     * accumulation (async-1f1b) wins. */
    int32_t accumulation = p->accumulation;
    if (info->batch == PP_BATCH_ACCUMULATION && p->kind->batch != PP_BATCH_ACCUMULATION)
        accumulation = p->microbatches;
    if (info->fixed_accumulation > 0)
        accumulation = info->fixed_accumulation;
    /* Every data replica runs the pipeline's micro-batches: a step holds per_update x data
     * micro-batches (the scenario checked that the product fits int32_t for its own kind;
     * per_update is the scenario's m or a here). */
    SimLayout layout;
    sim_layout_init(&layout, base);
    int32_t per_update = pp_sched_kind_mb_per_step(info, p->microbatches, accumulation);
    int64_t per_step = (int64_t)per_update * layout.data;
    int32_t mbs = p->microbatch_size;
    int32_t global_batch = base->training.global_batch;
    if (base->costs.set) {
        /* Explicit [costs] are the times of the scenario's micro-batch: keep its size. */
        if ((int64_t)mbs * per_step > G_MAXINT32) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                        "micro-batch size %d x %" G_GINT64_FORMAT
                        " micro-batches per step of %s exceeds %d sequences",
                        mbs, per_step, kind, G_MAXINT32);
            return FALSE;
        }
        global_batch = (int32_t)(mbs * per_step);
    } else if (global_batch % per_step == 0) {
        /* Analytic costs follow the micro-batch size: keep the global batch. */
        mbs = (int32_t)(global_batch / per_step);
    } else {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "global batch %d is not a multiple of the %d micro-batches per update of "
                    "%s times parallel.data = %d replicas; choose a global batch that is",
                    global_batch, per_update, kind, layout.data);
        return FALSE;
    }
    *delta = (PpScenarioDelta){.kind = info,
                               .chunks = chunks,
                               .accumulation = accumulation,
                               .microbatch_size = mbs,
                               .global_batch = global_batch};
    return TRUE;
}

GPtrArray *sim_sweep_compare(const char *path, const char *const *overrides,
                             const char *const *kinds, GError **error) {
    g_autoptr(PpScenario) base = pp_scenario_load(path, overrides, error);
    if (base == NULL)
        return NULL;
    GPtrArray *rows = g_ptr_array_new_with_free_func(sim_sweep_compare_row_free);
    for (size_t k = 0; kinds[k] != NULL; k++) {
        SimCompareRow *row = g_new0(SimCompareRow, 1);
        g_autoptr(GError) local = NULL;
        row->schedule = g_strdup(kinds[k]);
        PpScenarioDelta delta;
        if (sim_sweep_compare_delta(base, kinds[k], &delta, &local)) {
            PpScenario *sc = pp_scenario_with(base, &delta, &local);
            if (sc != NULL)
                row->job = sim_job_new_from_scenario(sc, FALSE, &local);
        }
        if (row->job == NULL)
            row->error = g_strdup(local->message);
        g_ptr_array_add(rows, row);
    }
    const SimCompareRow *first = rows->len > 0 ? g_ptr_array_index(rows, 0) : NULL;
    if (first == NULL || first->job == NULL || first->job->result->throughput_tokens_per_s <= 0.0)
        return rows;
    for (guint i = 0; i < rows->len; i++) {
        SimCompareRow *row = g_ptr_array_index(rows, i);
        if (row->job != NULL)
            row->speedup = row->job->result->throughput_tokens_per_s /
                           first->job->result->throughput_tokens_per_s;
    }
    return rows;
}

char *sim_sweep_compare_format(const GPtrArray *rows) {
    GString *out = g_string_new(NULL);
    /* Δ ("\xce\x94") takes two bytes for one column: one pad space more in its header. */
    g_string_append(out, "schedule         step ms      tokens/s  samples/s  speedup  bubble  "
                         "\xce\x94max  peak GiB\n");
    for (guint i = 0; i < rows->len; i++) {
        const SimCompareRow *row = g_ptr_array_index(rows, i);
        if (row->job == NULL) {
            g_string_append_printf(out, "%-12s error: %s\n", row->schedule, row->error);
            continue;
        }
        const SimResult *res = row->job->result;
        int64_t          us = res->step_time_ns / 1000;
        char             ms[64];
        g_snprintf(ms, sizeof ms, "%lld.%03lld", (long long)(us / 1000), (long long)(us % 1000));
        g_string_append_printf(out, "%-12s %11s %13.1f %10.3f %8.3f %7.4f %5d %9.3f\n",
                               row->schedule, ms, res->throughput_tokens_per_s,
                               res->throughput_samples_per_s, row->speedup, res->bubble_fraction,
                               res->delta_max,
                               (double)res->peak_memory_bytes / (1024.0 * 1024.0 * 1024.0));
    }
    return g_string_free(out, FALSE);
}

JsonNode *sim_sweep_compare_build_json(const char *path, const GPtrArray *rows) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "scenario");
    json_builder_add_string_value(b, path);
    json_builder_set_member_name(b, "schedules");
    json_builder_begin_array(b);
    for (guint i = 0; i < rows->len; i++) {
        const SimCompareRow *row = g_ptr_array_index(rows, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "schedule");
        json_builder_add_string_value(b, row->schedule);
        if (row->job == NULL) {
            json_builder_set_member_name(b, "error");
            json_builder_add_string_value(b, row->error);
            json_builder_end_object(b);
            continue;
        }
        const SimResult *res = row->job->result;
        json_builder_set_member_name(b, "chunks");
        json_builder_add_int_value(b, row->job->schedule->n_chunks);
        json_builder_set_member_name(b, "accumulation");
        json_builder_add_int_value(b, row->job->scenario->pipeline.accumulation);
        json_builder_set_member_name(b, "microbatch_size");
        json_builder_add_int_value(b, row->job->scenario->pipeline.microbatch_size);
        json_builder_set_member_name(b, "global_batch");
        json_builder_add_int_value(b, row->job->scenario->training.global_batch);
        json_builder_set_member_name(b, "step_time_ns");
        json_builder_add_int_value(b, res->step_time_ns);
        json_builder_set_member_name(b, "throughput_tokens_per_s");
        json_builder_add_double_value(b, res->throughput_tokens_per_s);
        json_builder_set_member_name(b, "throughput_samples_per_s");
        json_builder_add_double_value(b, res->throughput_samples_per_s);
        json_builder_set_member_name(b, "speedup");
        json_builder_add_double_value(b, row->speedup);
        json_builder_set_member_name(b, "bubble_fraction");
        json_builder_add_double_value(b, res->bubble_fraction);
        json_builder_set_member_name(b, "delta_max");
        json_builder_add_int_value(b, res->delta_max);
        json_builder_set_member_name(b, "peak_memory_bytes");
        json_builder_add_int_value(b, res->peak_memory_bytes);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* --- sweep --- */

gboolean sim_sweep_axis_parse(const char *spec, SimSweepAxis *axis, GError **error) {
    const char *eq = strchr(spec, '=');
    const char *dot = strchr(spec, '.');
    if (eq == NULL || dot == NULL || dot > eq || dot == spec || dot + 1 == eq || eq[1] == '\0') {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--sweep '%s': expected section.key=v1,v2,...", spec);
        return FALSE;
    }
    g_auto(GStrv) values = g_strsplit(eq + 1, ",", -1);
    for (size_t i = 0; values[i] != NULL; i++) {
        if (values[i][0] == '\0') {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--sweep '%s': value %zu is empty", spec, i + 1);
            return FALSE;
        }
    }
    axis->key = g_strndup(spec, (gsize)(eq - spec));
    axis->values = g_steal_pointer(&values);
    return TRUE;
}

void sim_sweep_axis_clear(SimSweepAxis *axis) {
    g_clear_pointer(&axis->key, g_free);
    g_clear_pointer(&axis->values, g_strfreev);
}

int64_t sim_sweep_n_points(const SimSweepAxis *axes, int32_t n_axes) {
    int64_t n_points = 1;
    for (int32_t k = 0; k < n_axes; k++)
        n_points *= g_strv_length(axes[k].values);
    return n_points;
}

static void sim_sweep_csv_field(FILE *fp, const char *value) {
    csv_fwrite(fp, value, strlen(value));
}

/* The index of the axis that sweeps @key, or -1. */
static int32_t sim_sweep_axis_find(const SimSweepAxis *axes, int32_t n_axes, const char *key) {
    for (int32_t k = 0; k < n_axes; k++) {
        if (strcmp(axes[k].key, key) == 0)
            return k;
    }
    return -1;
}

/* Appends to @ov the overrides, and sets *@derive to the key to derive (or NULL), that keep
 * point @digit (one value index per axis) comparable (docs/simulator.md, sweep). A kind that
 * accumulates (paci) counts its update's micro-batches in pipeline.accumulation: a sweep of
 * pipeline.microbatches without an accumulation axis sets a = m for it. When @base gives both
 * pipeline.microbatch_size and training.global_batch and no axis sets either, the point keeps the
 * global batch (analytic costs) or the micro-batch size (explicit [costs], the times of that size)
 * and derives the other from its own micro-batches per update and data replicas. Returns TRUE when
 * it set a = m. */
static gboolean sim_sweep_point_rules(const PpScenario *base, const SimSweepAxis *axes,
                                      int32_t n_axes, const int32_t *digit, GPtrArray *ov,
                                      const char **derive) {
    *derive = NULL;
    if (base == NULL)
        return FALSE; /* the points are checked one by one */
    int32_t m_axis = sim_sweep_axis_find(axes, n_axes, "pipeline.microbatches");
    int32_t kind_axis = sim_sweep_axis_find(axes, n_axes, "pipeline.schedule");
    if (sim_sweep_axis_find(axes, n_axes, "pipeline.microbatch_size") < 0 &&
        sim_sweep_axis_find(axes, n_axes, "training.global_batch") < 0 &&
        pp_scenario_key_given(base, "pipeline", "microbatch_size") &&
        pp_scenario_key_given(base, "training", "global_batch"))
        *derive = base->costs.set ? "training.global_batch" : "pipeline.microbatch_size";
    if (m_axis < 0 || sim_sweep_axis_find(axes, n_axes, "pipeline.accumulation") >= 0)
        return FALSE;
    /* an unknown schedule name fails the point when it loads */
    const PpSchedKindInfo *kind =
        kind_axis >= 0 ? pp_sched_kind_lookup(axes[kind_axis].values[digit[kind_axis]])
                       : base->pipeline.kind;
    if (kind == NULL || kind->batch != PP_BATCH_ACCUMULATION || kind->fixed_accumulation > 0)
        return FALSE;
    g_ptr_array_add(
        ov, g_strdup_printf("pipeline.accumulation=%s", axes[m_axis].values[digit[m_axis]]));
    return TRUE;
}

gboolean sim_sweep_run(const char *path, const char *const *overrides, const PpScenario *base,
                       const SimSweepAxis *axes, int32_t n_axes, FILE *out, int32_t *n_failed,
                       int32_t *n_mapped, GError **error) {
    g_autofree int32_t *n_values = g_new0(int32_t, n_axes); /* (n_axes) */
    int64_t             n_points = sim_sweep_n_points(axes, n_axes);
    for (int32_t k = 0; k < n_axes; k++) {
        n_values[k] = (int32_t)g_strv_length(axes[k].values);
        PP_ASSERT(n_values[k] > 0); /* sim_sweep_axis_parse() rejects empty lists */
    }

    for (int32_t k = 0; k < n_axes; k++) {
        sim_sweep_csv_field(out, axes[k].key);
        fputc(',', out);
    }
    fputs("step_time_ns,throughput_tokens_per_s,throughput_samples_per_s,bubble_fraction,"
          "efficiency,delta_max,peak_memory_bytes,error\n",
          out);
    fflush(out);

    *n_failed = 0;
    *n_mapped = 0;
    for (int64_t p = 0; p < n_points && !ferror(out); p++) {
        g_autoptr(GPtrArray) ov = sim_sweep_overrides_new(overrides);
        /* Mixed-radix digits of p, the last axis least significant. */
        g_autofree int32_t *digit = g_new0(int32_t, n_axes); /* (n_axes) */
        int64_t             rest = p;
        for (int32_t k = n_axes - 1; k >= 0; k--) {
            digit[k] = (int32_t)(rest % n_values[k]);
            rest /= n_values[k];
        }
        for (int32_t k = 0; k < n_axes; k++) {
            const char *value = axes[k].values[digit[k]];
            g_ptr_array_add(ov, g_strdup_printf("%s=%s", axes[k].key, value));
            sim_sweep_csv_field(out, value);
            fputc(',', out);
        }
        const char *derive[2] = {NULL, NULL};
        if (sim_sweep_point_rules(base, axes, n_axes, digit, ov, &derive[0]))
            (*n_mapped)++;
        g_autoptr(GError) local = NULL;
        PpScenario *sc =
            pp_scenario_load_deriving(path, sim_sweep_overrides_terminate(ov), derive, &local);
        g_autoptr(SimJob) job = sc != NULL ? sim_job_new_from_scenario(sc, FALSE, &local) : NULL;
        if (job == NULL) {
            (*n_failed)++;
            fputs(",,,,,,,", out);
            sim_sweep_csv_field(out, local->message);
            fputc('\n', out);
        } else {
            const SimResult *res = job->result;
            char             d[4][G_ASCII_DTOSTR_BUF_SIZE];
            fprintf(out, "%lld,%s,%s,%s,%s,%d,%lld,\n", (long long)res->step_time_ns,
                    sim_report_format_double(d[0], res->throughput_tokens_per_s),
                    sim_report_format_double(d[1], res->throughput_samples_per_s),
                    sim_report_format_double(d[2], res->bubble_fraction),
                    sim_report_format_double(d[3], res->efficiency), res->delta_max,
                    (long long)res->peak_memory_bytes);
        }
        /* Each row leaves as soon as it is computed: an interrupted sweep keeps its rows. */
        fflush(out);
    }
    if (ferror(out)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot write the sweep's rows: %s",
                    g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}
