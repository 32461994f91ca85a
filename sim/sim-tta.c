/* SPDX-License-Identifier: MIT
 * sim-tta.c: time to accuracy from measured training curves and per-run step times. The
 * validation loss is interpolated linearly between logged evaluations; a threshold a run never
 * reaches is reported as not reached, never extrapolated.
 */
#include "sim-tta.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "pp-schedule.h"
#include "pp-trace.h"
#include "sim-main.h"
#include "sim-report.h"

static void sim_tta_run_free(gpointer data) {
    SimTtaRun *r = data;
    g_free(r->name);
    g_free(r->log_path);
    g_free(r->schedule);
    g_free(r->eval_updates);
    g_free(r->eval_tokens);
    g_free(r->eval_loss);
    g_free(r);
}

void sim_tta_free(SimTta *tta) {
    if (tta == NULL)
        return;
    if (tta->runs != NULL)
        g_ptr_array_unref(tta->runs);
    g_free(tta->thresholds);
    g_free(tta->cells);
    g_free(tta->target);
    g_free(tta);
}

/* --- reading log.csv --- */

typedef struct {
    const char *path;
    int32_t     col_step, col_tokens, col_val, col_tps; /* -1 until the header names them */
    GArray     *updates, *tokens, *loss;                /* double: the evaluations */
    GArray     *tps;                                    /* double: tokens/s of every step */
} SimTtaLog;

static gboolean sim_tta_number(const char *text, double *out) {
    char *end = NULL;
    errno = 0;
    double v = g_ascii_strtod(text, &end);
    if (text[0] == '\0' || *end != '\0' || errno == ERANGE || !isfinite(v))
        return FALSE;
    *out = v;
    return TRUE;
}

static gboolean sim_tta_log_row(char **fields, int32_t n_fields, int64_t line, void *user_data,
                                GError **error) {
    SimTtaLog *log = user_data;
    if (log->col_step < 0) {
        for (int32_t i = 0; i < n_fields; i++) {
            if (strcmp(fields[i], "step") == 0)
                log->col_step = i;
            else if (strcmp(fields[i], "tokens") == 0)
                log->col_tokens = i;
            else if (strcmp(fields[i], "val_loss") == 0)
                log->col_val = i;
            else if (strcmp(fields[i], "tokens_per_s") == 0)
                log->col_tps = i;
        }
        if (log->col_step < 0 || log->col_tokens < 0 || log->col_val < 0 || log->col_tps < 0) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s:%" G_GINT64_FORMAT ": the header needs the columns step, tokens, "
                        "val_loss and tokens_per_s (pacer-train's log.csv)",
                        log->path, line);
            return FALSE;
        }
        return TRUE;
    }
    int32_t need = MAX(MAX(log->col_step, log->col_tokens), MAX(log->col_val, log->col_tps));
    double  step = 0, tokens = 0, loss = 0, tps = 0;
    if (n_fields <= need || !sim_tta_number(fields[log->col_step], &step) || step < 0 ||
        !sim_tta_number(fields[log->col_tokens], &tokens) ||
        !sim_tta_number(fields[log->col_tps], &tps) ||
        (fields[log->col_val][0] != '\0' && !sim_tta_number(fields[log->col_val], &loss))) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s:%" G_GINT64_FORMAT ": expected numbers in step, tokens and tokens_per_s "
                    "and an empty or numeric val_loss",
                    log->path, line);
        return FALSE;
    }
    g_array_append_val(log->tps, tps);
    if (fields[log->col_val][0] == '\0')
        return TRUE;
    double updates = step + 1; /* a row's losses are measured after its step's update */
    g_array_append_val(log->updates, updates);
    g_array_append_val(log->tokens, tokens);
    g_array_append_val(log->loss, loss);
    return TRUE;
}

/* --- one run --- */

/* Splits "[NAME=]PATH" and finds log.csv and scenario.ini. */
static SimTtaRun *sim_tta_run_new(const char *spec, char **scenario_path) {
    SimTtaRun  *r = g_new0(SimTtaRun, 1);
    const char *eq = strchr(spec, '=');
    const char *path = eq != NULL ? eq + 1 : spec;
    r->log_path = g_file_test(path, G_FILE_TEST_IS_DIR) ? g_build_filename(path, "log.csv", NULL)
                                                        : g_strdup(path);
    g_autofree char *dir = g_path_get_dirname(r->log_path);
    *scenario_path = g_build_filename(dir, "scenario.ini", NULL);
    r->name = eq != NULL ? g_strndup(spec, (gsize)(eq - spec)) : g_path_get_basename(dir);
    return r;
}

/* Reads @r's scenario (schedule, micro-batches per update, tokens per update) and log. */
static gboolean sim_tta_run_load(SimTtaRun *r, const char *scenario_path, SimTtaLog *log,
                                 GError **error) {
    g_autoptr(PpScenario) sc = pp_scenario_load(scenario_path, NULL, error);
    if (sc == NULL)
        return FALSE;
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    g_autoptr(PpSchedule) sched = pp_schedule_new(&params, error);
    if (sched == NULL)
        return FALSE;
    r->schedule = g_strdup(sc->pipeline.schedule);
    r->mb_per_step = sc->pipeline.mb_per_step;
    r->flush = sched->synchronous;
    r->tokens_per_update = (int64_t)sc->training.global_batch * sc->model.seq_len;

    *log = (SimTtaLog){
        .path = r->log_path, .col_step = -1, .col_tokens = -1, .col_val = -1, .col_tps = -1};
    log->updates = g_array_new(FALSE, FALSE, sizeof(double));
    log->tokens = g_array_new(FALSE, FALSE, sizeof(double));
    log->loss = g_array_new(FALSE, FALSE, sizeof(double));
    log->tps = g_array_new(FALSE, FALSE, sizeof(double));
    if (!pp_csv_read(r->log_path, sim_tta_log_row, log, error))
        return FALSE;
    if (log->loss->len == 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s: no validation loss in any row; train with run.eval_every > 0 so that "
                    "the curve has points",
                    r->log_path);
        return FALSE;
    }
    r->n_evals = (int32_t)log->loss->len;
    r->eval_updates = (double *)g_array_free(g_steal_pointer(&log->updates), FALSE);
    r->eval_tokens = (double *)g_array_free(g_steal_pointer(&log->tokens), FALSE);
    r->eval_loss = (double *)g_array_free(g_steal_pointer(&log->loss), FALSE);
    r->lowest_loss = r->eval_loss[0];
    for (int32_t i = 1; i < r->n_evals; i++)
        r->lowest_loss = MIN(r->lowest_loss, r->eval_loss[i]);
    return TRUE;
}

static int sim_tta_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The run's measured step time: tokens per update over the median tokens/s of its steps
 * [max(skip, K/4), max(lo + 1, 3K/4)) of K. */
static gboolean sim_tta_measured_step(SimTtaRun *r, GArray *tps, int32_t skip, GError **error) {
    int32_t k = (int32_t)tps->len, lo = MAX(skip, k / 4), hi = MIN(k, MAX(lo + 1, 3 * k / 4));
    if (lo >= k) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s: %d logged steps leave none after the first %d for a measured step time; "
                    "give --step-ms %s=MS or --target SCENARIO",
                    r->log_path, k, skip, r->name);
        return FALSE;
    }
    g_autofree double *v = g_memdup2((double *)tps->data + lo, sizeof(double) * (size_t)(hi - lo));
    qsort(v, (size_t)(hi - lo), sizeof *v, sim_tta_cmp_double);
    int32_t n = hi - lo;
    double  median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
    if (!(median > 0.0)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s: tokens_per_s is not positive in the steady state", r->log_path);
        return FALSE;
    }
    r->step_ns = llround((double)r->tokens_per_update / median * 1e9);
    r->step_tokens = r->tokens_per_update;
    r->step_source = SIM_TTA_STEP_MEASURED;
    return TRUE;
}

/* The step time of @r's schedule, m and a on @target. */
static gboolean sim_tta_target_step(SimTtaRun *r, const char *target, const PpScenario *own,
                                    GError **error) {
    const PpScenarioDelta delta = {.kind = own->pipeline.kind,
                                   .microbatches = own->pipeline.microbatches,
                                   .accumulation = own->pipeline.accumulation,
                                   .chunks = own->pipeline.chunks};
    g_autoptr(GError) local = NULL;
    g_autoptr(PpScenario) base = pp_scenario_load(target, NULL, &local);
    PpScenario *sc = base != NULL ? pp_scenario_with(base, &delta, &local) : NULL;
    g_autoptr(SimJob) job = sc != NULL ? sim_job_new_from_scenario(sc, FALSE, &local) : NULL;
    if (job == NULL) {
        g_set_error(error, local->domain, local->code,
                    "run %s (%s, m = %d, a = %d) on the target: %s", r->name,
                    own->pipeline.schedule, own->pipeline.microbatches, own->pipeline.accumulation,
                    local->message);
        return FALSE;
    }
    r->step_ns = job->result->step_time_ns;
    r->step_tokens = (int64_t)job->scenario->training.global_batch * job->scenario->model.seq_len;
    r->step_source = SIM_TTA_STEP_TARGET;
    return TRUE;
}

/* --- the table --- */

/* Where @r's validation loss first reaches @threshold, interpolated linearly between the
 * evaluations around it, on @axis. Returns FALSE when it never does. */
static gboolean sim_tta_cross(const SimTtaRun *r, double threshold, SimTtaAxis axis,
                              double *progress, gboolean *at_first) {
    const double *x = axis == SIM_TTA_UPDATES ? r->eval_updates : r->eval_tokens;
    for (int32_t i = 0; i < r->n_evals; i++) {
        if (r->eval_loss[i] > threshold)
            continue;
        *at_first = i == 0;
        if (i == 0) {
            *progress = x[0];
        } else {
            double f = (r->eval_loss[i - 1] - threshold) / (r->eval_loss[i - 1] - r->eval_loss[i]);
            *progress = x[i - 1] + f * (x[i] - x[i - 1]);
        }
        return TRUE;
    }
    return FALSE;
}

static double sim_tta_time_s(const SimTtaRun *r, double progress, SimTtaAxis axis) {
    double ns = axis == SIM_TTA_UPDATES
                    ? progress * (double)r->step_ns
                    : progress * (double)r->step_ns / (double)MAX(r->step_tokens, 1);
    return ns / 1e9;
}

static void sim_tta_fill(SimTta *tta) {
    const int32_t n_runs = (int32_t)tta->runs->len, nt = tta->n_thresholds;
    tta->cells = g_new0(SimTtaCell, (size_t)MAX(n_runs * nt, 1));
    for (int32_t t = 0; t < nt; t++) {
        for (int32_t i = 0; i < n_runs; i++) {
            const SimTtaRun *r = g_ptr_array_index(tta->runs, i);
            SimTtaCell      *c = &tta->cells[i * nt + t];
            c->reached =
                sim_tta_cross(r, tta->thresholds[t], tta->axis, &c->progress, &c->at_first);
            if (c->reached)
                c->time_s = sim_tta_time_s(r, c->progress, tta->axis);
        }
        for (int32_t i = 0; i < n_runs; i++) {
            const SimTtaRun *r = g_ptr_array_index(tta->runs, i);
            SimTtaCell      *c = &tta->cells[i * nt + t];
            double           best = 0, matched = 0;
            for (int32_t j = 0; j < n_runs; j++) {
                const SimTtaRun  *f = g_ptr_array_index(tta->runs, j);
                const SimTtaCell *fc = &tta->cells[j * nt + t];
                if (!f->flush || !fc->reached)
                    continue;
                if (best == 0 || fc->time_s < best)
                    best = fc->time_s;
                if (f->mb_per_step == r->mb_per_step && (matched == 0 || fc->time_s < matched))
                    matched = fc->time_s;
            }
            if (c->reached && c->time_s > 0) {
                c->speedup_best = best / c->time_s;
                c->speedup_matched = matched / c->time_s;
            }
        }
    }
}

SimTta *sim_tta_new(const SimTtaParams *params, GError **error) {
    PP_ASSERT(params->runs != NULL && params->n_thresholds >= 1 && params->skip_steps >= 0);
    g_autoptr(SimTta) tta = g_new0(SimTta, 1);
    tta->axis = params->axis;
    tta->runs = g_ptr_array_new_with_free_func(sim_tta_run_free);
    tta->thresholds = g_memdup2(params->thresholds, sizeof(double) * params->n_thresholds);
    tta->n_thresholds = params->n_thresholds;
    tta->target = g_strdup(params->target);
    g_autoptr(GHashTable) given = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (const char *const *s = params->step_ms; s != NULL && *s != NULL; s++) {
        const char *eq = strchr(*s, '=');
        double      ms = 0;
        if (eq == NULL || eq == *s || !sim_tta_number(eq + 1, &ms) || !(ms > 0)) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--step-ms '%s': expected NAME=MS with a positive step time in ms", *s);
            return NULL;
        }
        g_hash_table_insert(given, g_strndup(*s, (gsize)(eq - *s)), (gpointer)(eq + 1));
    }
    g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
    for (const char *const *spec = params->runs; *spec != NULL; spec++) {
        g_autofree char *scenario_path = NULL;
        SimTtaRun       *r = sim_tta_run_new(*spec, &scenario_path);
        g_ptr_array_add(tta->runs, r);
        if (g_hash_table_contains(names, r->name)) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "two runs are named '%s'; name them: NAME=PATH", r->name);
            return NULL;
        }
        g_hash_table_add(names, r->name);
        SimTtaLog log = {0};
        gboolean  ok = sim_tta_run_load(r, scenario_path, &log, error);
        g_autoptr(GArray) tps = log.tps;
        if (log.updates)
            g_array_unref(log.updates);
        if (log.tokens)
            g_array_unref(log.tokens);
        if (log.loss)
            g_array_unref(log.loss);
        if (!ok)
            return NULL;
        const char *ms = g_hash_table_lookup(given, r->name);
        if (ms != NULL) {
            r->step_ns = llround(g_ascii_strtod(ms, NULL) * 1e6);
            r->step_tokens = r->tokens_per_update;
            r->step_source = SIM_TTA_STEP_GIVEN;
        } else if (params->target != NULL) {
            g_autoptr(PpScenario) own = pp_scenario_load(scenario_path, NULL, error);
            if (own == NULL || !sim_tta_target_step(r, params->target, own, error))
                return NULL;
        } else if (!sim_tta_measured_step(r, tps, params->skip_steps, error)) {
            return NULL;
        }
    }
    GHashTableIter it;
    gpointer       key;
    g_hash_table_iter_init(&it, given);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        if (!g_hash_table_contains(names, key)) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--step-ms names '%s', which is no run", (const char *)key);
            return NULL;
        }
    }
    sim_tta_fill(tta);
    return g_steal_pointer(&tta);
}

/* --- reports --- */

static const char *sim_tta_source_name(SimTtaStepSource source) {
    switch (source) {
    case SIM_TTA_STEP_GIVEN:
        return "given";
    case SIM_TTA_STEP_TARGET:
        return "target";
    case SIM_TTA_STEP_MEASURED:
        return "measured";
    }
    PP_UNREACHABLE();
}

static const char *sim_tta_axis_name(SimTtaAxis axis) {
    return axis == SIM_TTA_UPDATES ? "updates" : "tokens";
}

char *sim_tta_format(const SimTta *tta) {
    GString *out = g_string_new(NULL);
    int32_t  n_first = 0;
    g_string_append_printf(
        out,
        "time to accuracy: time = %s x the step time%s; the validation loss is interpolated "
        "linearly between logged evaluations; a threshold a run never reaches is \"not "
        "reached\" (never extrapolated)%s%s\n\n",
        tta->axis == SIM_TTA_UPDATES ? "optimizer updates" : "tokens / tokens per step",
        tta->axis == SIM_TTA_UPDATES ? "" : "'s tokens", tta->target ? "; target " : "",
        tta->target ? tta->target : "");
    g_string_append(out, "run                  schedule   flush  mb/update    step ms  source    "
                         "evals  last val\n");
    for (guint i = 0; i < tta->runs->len; i++) {
        const SimTtaRun *r = g_ptr_array_index(tta->runs, i);
        g_string_append_printf(out, "%-20s %-10s %5s %10d %10.3f  %-8s %6d %9.4f\n", r->name,
                               r->schedule, r->flush ? "yes" : "no", r->mb_per_step,
                               (double)r->step_ns / 1e6, sim_tta_source_name(r->step_source),
                               r->n_evals, r->eval_loss[r->n_evals - 1]);
    }
    for (int32_t t = 0; t < tta->n_thresholds; t++) {
        g_string_append_printf(out, "\nval loss <= %g\n", tta->thresholds[t]);
        g_string_append_printf(out,
                               "run                  %12s      time s  speedup best  speedup "
                               "matched\n",
                               sim_tta_axis_name(tta->axis));
        for (guint i = 0; i < tta->runs->len; i++) {
            const SimTtaRun  *r = g_ptr_array_index(tta->runs, i);
            const SimTtaCell *c = &tta->cells[i * tta->n_thresholds + t];
            if (!c->reached) {
                g_string_append_printf(out, "%-20s not reached (lowest %.4f)\n", r->name,
                                       r->lowest_loss);
                continue;
            }
            g_string_append_printf(out, "%-20s %12.2f%s %10.3f", r->name, c->progress,
                                   c->at_first ? "*" : " ", c->time_s);
            n_first += c->at_first;
            if (c->speedup_best > 0)
                g_string_append_printf(out, " %13.3f", c->speedup_best);
            else
                g_string_append_printf(out, " %13s", "-");
            if (c->speedup_matched > 0)
                g_string_append_printf(out, " %16.3f\n", c->speedup_matched);
            else
                g_string_append_printf(out, " %16s\n", "-");
        }
    }
    if (n_first > 0)
        g_string_append(out, "\n* below the threshold at the first evaluation already: an upper "
                             "bound\n");
    return g_string_free(out, FALSE);
}

JsonNode *sim_tta_build_json(const SimTta *tta) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "axis");
    json_builder_add_string_value(b, sim_tta_axis_name(tta->axis));
    json_builder_set_member_name(b, "runs");
    json_builder_begin_array(b);
    for (guint i = 0; i < tta->runs->len; i++) {
        const SimTtaRun *r = g_ptr_array_index(tta->runs, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, r->name);
        json_builder_set_member_name(b, "schedule");
        json_builder_add_string_value(b, r->schedule);
        json_builder_set_member_name(b, "flush");
        json_builder_add_boolean_value(b, r->flush);
        json_builder_set_member_name(b, "mb_per_update");
        json_builder_add_int_value(b, r->mb_per_step);
        json_builder_set_member_name(b, "step_time_ns");
        json_builder_add_int_value(b, r->step_ns);
        json_builder_set_member_name(b, "step_source");
        json_builder_add_string_value(b, sim_tta_source_name(r->step_source));
        json_builder_set_member_name(b, "thresholds");
        json_builder_begin_array(b);
        for (int32_t t = 0; t < tta->n_thresholds; t++) {
            const SimTtaCell *c = &tta->cells[i * tta->n_thresholds + t];
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "val_loss");
            json_builder_add_double_value(b, tta->thresholds[t]);
            json_builder_set_member_name(b, "reached");
            json_builder_add_boolean_value(b, c->reached);
            json_builder_set_member_name(b, "progress");
            json_builder_add_double_value(b, c->progress);
            json_builder_set_member_name(b, "at_first_evaluation");
            json_builder_add_boolean_value(b, c->at_first);
            json_builder_set_member_name(b, "time_s");
            json_builder_add_double_value(b, c->time_s);
            json_builder_set_member_name(b, "speedup_best");
            json_builder_add_double_value(b, c->speedup_best);
            json_builder_set_member_name(b, "speedup_matched");
            json_builder_add_double_value(b, c->speedup_matched);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* Appends @v to @out as %.6f (the C locale's format whatever the process locale). */
static void sim_tta_csv_double(GString *out, double v) {
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append_printf(out, ",%s", sim_report_format_double(buf, v));
}

char *sim_tta_csv(const SimTta *tta) {
    GString *out = g_string_new("run,schedule,flush,mb_per_update,step_time_ns,step_source,"
                                "val_loss,reached,");
    g_string_append_printf(out, "%s,time_s,speedup_best,speedup_matched\n",
                           sim_tta_axis_name(tta->axis));
    for (guint i = 0; i < tta->runs->len; i++) {
        const SimTtaRun *r = g_ptr_array_index(tta->runs, i);
        for (int32_t t = 0; t < tta->n_thresholds; t++) {
            const SimTtaCell *c = &tta->cells[i * tta->n_thresholds + t];
            g_string_append_printf(out, "%s,%s,%d,%d,%" G_GINT64_FORMAT ",%s", r->name, r->schedule,
                                   r->flush, r->mb_per_step, r->step_ns,
                                   sim_tta_source_name(r->step_source));
            sim_tta_csv_double(out, tta->thresholds[t]);
            g_string_append_printf(out, ",%d", c->reached);
            sim_tta_csv_double(out, c->progress);
            sim_tta_csv_double(out, c->time_s);
            sim_tta_csv_double(out, c->speedup_best);
            sim_tta_csv_double(out, c->speedup_matched);
            g_string_append_c(out, '\n');
        }
    }
    return g_string_free(out, FALSE);
}

char *sim_tta_curves_csv(const SimTta *tta) {
    GString *out = g_string_new("run,updates,tokens,time_s,val_loss\n");
    for (guint i = 0; i < tta->runs->len; i++) {
        const SimTtaRun *r = g_ptr_array_index(tta->runs, i);
        for (int32_t e = 0; e < r->n_evals; e++) {
            double x = tta->axis == SIM_TTA_UPDATES ? r->eval_updates[e] : r->eval_tokens[e];
            g_string_append(out, r->name);
            sim_tta_csv_double(out, r->eval_updates[e]);
            sim_tta_csv_double(out, r->eval_tokens[e]);
            sim_tta_csv_double(out, sim_tta_time_s(r, x, tta->axis));
            sim_tta_csv_double(out, r->eval_loss[e]);
            g_string_append_c(out, '\n');
        }
    }
    return g_string_free(out, FALSE);
}

/* --- command line --- */

typedef struct {
    char   **thresholds;
    char   **step_ms;
    char    *target;
    char    *axis;
    char    *out;
    gboolean json;
    gint     skip_steps;
} SimTtaOptions;

static void sim_tta_options_clear(SimTtaOptions *o) {
    g_strfreev(o->thresholds);
    g_strfreev(o->step_ms);
    g_free(o->target);
    g_free(o->axis);
    g_free(o->out);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SimTtaOptions, sim_tta_options_clear)

/* Parses every --threshold (each a comma-separated list) into @out. */
static gboolean sim_tta_parse_thresholds(char **specs, GArray *out, GError **error) {
    for (char **s = specs; s != NULL && *s != NULL; s++) {
        g_auto(GStrv) parts = g_strsplit(*s, ",", -1);
        for (char **p = parts; *p != NULL; p++) {
            double v = 0;
            if (!sim_tta_number(g_strstrip(*p), &v)) {
                g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                            "--threshold '%s': '%s' is not a number", *s, *p);
                return FALSE;
            }
            g_array_append_val(out, v);
        }
    }
    if (out->len > 0)
        return TRUE;
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                "tta needs --threshold LOSS[,LOSS...] (validation losses to reach)");
    return FALSE;
}

/* Writes @text to DIR/@name atomically. */
static gboolean sim_tta_write(const char *dir, const char *name, char *text, GError **error) {
    g_autofree char *owned = text;
    g_autofree char *path = g_build_filename(dir, name, NULL);
    return pp_file_write(path, owned, strlen(owned), error);
}

/* What makes a tta input, for the messages below. */
#define SIM_TTA_MAKE_RUN                                                                           \
    "a RUN is a pacer-train --out folder (log.csv with validation losses and scenario.ini); make " \
    "one with: build/exec/pacer-train SCENARIO --set run.eval_every=N --out "

/* Before anything is read: each RUN's PATH exists, and its folder holds log.csv and
 * scenario.ini. Returns FALSE with a PP_IO_ERROR_OPEN naming the first path that is missing
 * or wrong and the command that makes it. */
static gboolean sim_tta_check_runs(const char *const *runs, GError **error) {
    for (const char *const *spec = runs; *spec != NULL; spec++) {
        const char *eq = strchr(*spec, '=');
        const char *path = eq != NULL ? eq + 1 : *spec;
        if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                        "RUN %s: no such folder or file; " SIM_TTA_MAKE_RUN "%s", path, path);
            return FALSE;
        }
        gboolean         is_dir = g_file_test(path, G_FILE_TEST_IS_DIR);
        g_autofree char *log = is_dir ? g_build_filename(path, "log.csv", NULL) : g_strdup(path);
        g_autofree char *dir = g_path_get_dirname(log);
        g_autofree char *scenario = g_build_filename(dir, "scenario.ini", NULL);
        g_autofree char *sim_summary = g_build_filename(dir, "summary.csv", NULL);
        const char      *sim_out = g_file_test(sim_summary, G_FILE_TEST_EXISTS)
                                       ? " (its summary.csv says it is a pacer-sim --out folder: "
                                         "tta needs training runs)"
                                       : "";
        if (is_dir && !g_file_test(log, G_FILE_TEST_IS_REGULAR)) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                        "%s: missing: %s is no pacer-train run folder%s; " SIM_TTA_MAKE_RUN "%s",
                        log, path, sim_out, path);
            return FALSE;
        }
        if (!g_file_test(scenario, G_FILE_TEST_IS_REGULAR)) {
            g_set_error(
                error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                "%s: missing next to %s: tta reads the run's schedule, m, a and batch from "
                "the scenario.ini that pacer-train --out writes beside log.csv; " SIM_TTA_MAKE_RUN
                "%s",
                scenario, log, dir);
            return FALSE;
        }
    }
    return TRUE;
}

int sim_tta_main(int argc, char **argv) {
    g_auto(SimTtaOptions) o = {.skip_steps = 1};
    const GOptionEntry entries[] = {
        {"threshold", 'l', 0, G_OPTION_ARG_STRING_ARRAY, &o.thresholds,
         "Validation losses to reach (repeatable, or comma-separated)", "LOSS[,LOSS...]"},
        {"target", 't', 0, G_OPTION_ARG_FILENAME, &o.target,
         "Simulate each run's schedule, m and a on this scenario for its step time", "SCENARIO"},
        {"step-ms", 's', 0, G_OPTION_ARG_STRING_ARRAY, &o.step_ms,
         "A run's step time in ms (repeatable; overrides --target for that run)", "NAME=MS"},
        {"x", 'x', 0, G_OPTION_ARG_STRING, &o.axis, "Progress measure: updates (default) or tokens",
         "updates|tokens"},
        {"skip-steps", 'k', 0, G_OPTION_ARG_INT, &o.skip_steps,
         "Steps left out of a measured step time (default 1)", "N"},
        SIM_MAIN_OPTION_OUT(&o.out, "Write tta.csv and curves.csv into DIR", "DIR"),
        SIM_MAIN_OPTION_JSON(&o.json, "Print one JSON object"),
        SIM_MAIN_OPTION_END,
    };
    g_autoptr(GError) error = NULL;
    if (!sim_main_parse(
            &argc, &argv, "RUN... - time to reach validation-loss thresholds",
            "Combine measured training curves with per-run step times: for each threshold, when "
            "each run first reaches it, and its speedup over the fastest flush run (best) and "
            "over the fastest flush run with as many micro-batches per update (matched).",
            "RUN is [NAME=]PATH, PATH a pacer-train --out folder or its log.csv (scenario.ini\n"
            "next to it gives the schedule, m, a and the batch); NAME defaults to the folder.\n"
            "Step time per run: --step-ms NAME=MS, else the --target scenario simulated with\n"
            "the run's schedule, m and a, else the run's own (tokens per update over the\n"
            "median tokens_per_s of its logged steps max(N, K/4) .. 3K/4). The loss is\n"
            "interpolated linearly between logged evaluations; a threshold a run never reaches\n"
            "is reported as not reached. See docs/measured-vs-predicted.md.",
            entries, &error))
        return sim_main_fail(NULL, error);
    g_autoptr(GArray) thresholds = g_array_new(FALSE, FALSE, sizeof(double));
    SimTtaAxis axis = SIM_TTA_UPDATES;
    if (argc < 2)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "tta needs at least one RUN (a pacer-train --out folder or its log.csv)");
    else if (o.axis != NULL && strcmp(o.axis, "updates") != 0 && strcmp(o.axis, "tokens") != 0)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--x '%s': expected updates or tokens", o.axis);
    else if (o.skip_steps < 0)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--skip-steps %d: expected a number of steps >= 0", o.skip_steps);
    else
        sim_tta_parse_thresholds(o.thresholds, thresholds, &error);
    if (error != NULL)
        return sim_main_fail(NULL, error);
    if (o.axis != NULL && strcmp(o.axis, "tokens") == 0)
        axis = SIM_TTA_TOKENS;

    if (!sim_tta_check_runs((const char *const *)argv + 1, &error))
        return sim_main_fail(NULL, error);
    SimTtaParams params = {.runs = (const char *const *)argv + 1,
                           .step_ms = (const char *const *)o.step_ms,
                           .target = o.target,
                           .thresholds = (const double *)thresholds->data,
                           .n_thresholds = (int32_t)thresholds->len,
                           .axis = axis,
                           .skip_steps = o.skip_steps};
    g_autoptr(SimTta) tta = sim_tta_new(&params, &error);
    if (tta == NULL)
        return sim_main_fail(NULL, error);
    if (o.out != NULL) {
        if (g_mkdir_with_parents(o.out, 0755) != 0) {
            g_set_error(&error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot create directory: %s",
                        g_strerror(errno));
            return sim_main_fail(o.out, error);
        }
        if (!sim_tta_write(o.out, "tta.csv", sim_tta_csv(tta), &error) ||
            !sim_tta_write(o.out, "curves.csv", sim_tta_curves_csv(tta), &error))
            return sim_main_fail(o.out, error);
    }
    if (o.json) {
        sim_main_print_json(sim_tta_build_json(tta));
    } else {
        g_autofree char *text = sim_tta_format(tta);
        fputs(text, stdout);
    }
    return 0;
}
