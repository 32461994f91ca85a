/* SPDX-License-Identifier: MIT
 * exec-train-log.c: what pacer-train records and shows: per-step accounting fed by the last
 * stage's losses (tokens/s, the progress line), log.csv rows (a resumed run starts from the
 * rows of the checkpoint it resumes), scenario.ini and ops.csv.
 */
#include "exec-train-private.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <time.h>

#include "pp-error.h"

static const char exec_train_log_header[] =
    "step,tokens,train_loss,val_loss,lr,grad_norm,tokens_per_s,delta_max\n";

double exec_train_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- live accounting and progress --- */

void exec_train_live_begin(ExecTrainLive *live, int32_t step0, int32_t seg, int32_t version0) {
    live->step0 = step0;
    live->seg = seg;
    live->version0 = version0;
    live->count = g_new0(int32_t, seg);
    live->sum = g_new0(double, seg);
    live->tokens_per_s = g_new0(double, seg);
}

void exec_train_live_end(ExecTrainLive *live) {
    g_clear_pointer(&live->count, g_free);
    g_clear_pointer(&live->sum, g_free);
    g_clear_pointer(&live->tokens_per_s, g_free);
}

void exec_train_on_loss(gpointer user_data, int32_t mb, int32_t step, float loss) {
    ExecTrainLive *live = user_data;
    (void)mb;
    PP_ASSERT(step >= 0 && step < live->seg);
    live->sum[step] += loss;
    if (++live->count[step] < live->mb_per_step)
        return;
    double now = exec_train_now_s();
    live->tokens_per_s[step] = (double)live->tokens_per_step / MAX(now - live->t_last_s, 1e-9);
    live->t_last_s = now;
    ExecProgressStep show = {
        .step = live->step0 + step,
        .first_step = live->first_step,
        .total_steps = live->total_steps,
        .loss = live->sum[step] / live->count[step],
        /* what stage 0 applies at its step-th update of the segment (as the log row) */
        .lr = exec_pipeline_update_lr(live->pipeline, live->version0 + step),
        .tokens_per_s = live->tokens_per_s[step],
        .elapsed_s = now - live->t_start_s,
    };
    exec_progress_step(live->progress, &show);
    if (show.step == live->sigint_at)
        raise(SIGINT);
}

/* --- log.csv --- */

GString *exec_train_log_new(const char *resumed, int32_t start) {
    GString *log = g_string_new(exec_train_log_header);
    if (resumed == NULL)
        return log;
    g_auto(GStrv) lines = g_strsplit(resumed, "\n", -1);
    for (guint i = 1; lines[0] && lines[i] && lines[i][0]; i++) {
        if (g_ascii_strtoll(lines[i], NULL, 10) < start)
            g_string_append_printf(log, "%s\n", lines[i]);
    }
    return log;
}

void exec_train_log_append(GString *log, const ExecTrainRow *row) {
    g_autofree char *val =
        isnan(row->val_loss) ? g_strdup("") : g_strdup_printf("%.6f", row->val_loss);
    g_string_append_printf(log, "%d,%" G_GINT64_FORMAT ",%.6f,%s,%.6e,%.6f,%.1f,%d\n", row->step,
                           row->tokens, row->train_loss, val, row->lr, row->grad_norm,
                           row->tokens_per_s, row->delta_max);
}

gboolean exec_train_write_file(const char *path, const char *text, GError **error) {
    GError *local = NULL;
    if (!g_file_set_contents(path, text, -1, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "%s: %s", path, local->message);
        g_error_free(local);
        return FALSE;
    }
    return TRUE;
}

gboolean exec_train_log_write(const GString *log, const char *dir, GError **error) {
    g_autofree char *path = g_build_filename(dir, "log.csv", NULL);
    return exec_train_write_file(path, log->str, error);
}

/* --- other outputs --- */

gboolean exec_train_outputs_begin(const PpScenario *sc, const char *dir, GError **error) {
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "%s: cannot create: %s", dir,
                    g_strerror(errno));
        return FALSE;
    }
    g_autofree char *ini = pp_scenario_to_data(sc);
    g_autofree char *path = g_build_filename(dir, "scenario.ini", NULL);
    return exec_train_write_file(path, ini, error);
}

gboolean exec_train_write_ops(const ExecPipeline *pipeline, const char *dir, GError **error) {
    const PpTrace *src = exec_pipeline_trace(pipeline);
    g_autoptr(PpTrace) trace = pp_trace_new();
    for (int64_t i = 0; i < src->n_rows; i++)
        pp_trace_append(trace, &src->rows[i]);
    pp_trace_sort(trace);
    g_autofree char *path = g_build_filename(dir, "ops.csv", NULL);
    return pp_trace_write_csv(trace, path, error);
}
