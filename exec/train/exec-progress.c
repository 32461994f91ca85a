/* SPDX-License-Identifier: MIT
 * exec-progress.c: pacer-train's terminal output (see exec-progress.h for the three modes).
 */
#include "exec-progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "pp-error.h"

struct _ExecProgress {
    FILE            *out;
    ExecProgressMode mode;
    int32_t          log_every;
    size_t           line_len; /* characters of the '\r' line on screen, 0 when none */
};

ExecProgressMode exec_progress_mode_detect(FILE *out, gboolean quiet) {
    const char *ci = g_getenv("CI");
    if (quiet || (ci && g_ascii_strcasecmp(ci, "true") == 0))
        return EXEC_PROGRESS_QUIET;
    return isatty(fileno(out)) ? EXEC_PROGRESS_TTY : EXEC_PROGRESS_PLAIN;
}

ExecProgress *exec_progress_new(FILE *out, ExecProgressMode mode, int32_t log_every) {
    PP_ASSERT(log_every >= 1);
    ExecProgress *progress = g_new0(ExecProgress, 1);
    progress->out = out;
    progress->mode = mode;
    progress->log_every = log_every;
    return progress;
}

void exec_progress_free(ExecProgress *progress) {
    if (!progress)
        return;
    if (progress->line_len > 0) {
        fputc('\n', progress->out);
        fflush(progress->out);
    }
    g_free(progress);
}

char *exec_progress_format(const ExecProgressStep *step) {
    int32_t done = step->step + 1, done_here = done - step->first_step;
    PP_ASSERT(done_here >= 1);
    double  eta = step->elapsed_s / done_here * (step->total_steps - done);
    int64_t eta_s = (int64_t)llround(eta > 0.0 ? eta : 0.0);
    return g_strdup_printf("step %d/%d | loss %.4f | lr %.2e | %.0f tok/s | ETA %" G_GINT64_FORMAT
                           "m%02" G_GINT64_FORMAT "s",
                           done, step->total_steps, step->loss, step->lr, step->tokens_per_s,
                           eta_s / 60, eta_s % 60);
}

static void exec_progress_clear_line(ExecProgress *progress) {
    if (progress->line_len == 0)
        return;
    fprintf(progress->out, "\r%*s\r", (int)progress->line_len, "");
    progress->line_len = 0;
}

void exec_progress_step(ExecProgress *progress, const ExecProgressStep *step) {
    if (progress->mode == EXEC_PROGRESS_QUIET)
        return;
    g_autofree char *line = exec_progress_format(step);
    if (progress->mode == EXEC_PROGRESS_TTY) {
        size_t len = strlen(line);
        /* Pad over a longer previous line instead of clearing: no flicker. */
        fprintf(progress->out, "\r%s%*s", line,
                (int)(progress->line_len > len ? progress->line_len - len : 0), "");
        progress->line_len = MAX(len, progress->line_len);
    } else if ((step->step + 1) % progress->log_every == 0 || step->step + 1 == step->total_steps) {
        fprintf(progress->out, "%s\n", line);
    }
    fflush(progress->out);
}

void exec_progress_note(ExecProgress *progress, gboolean always, const char *fmt, ...) {
    if (progress->mode == EXEC_PROGRESS_QUIET && !always)
        return;
    /* quiet mode keeps stdout for the final summary: what is always said goes to stderr */
    FILE *to = progress->mode == EXEC_PROGRESS_QUIET ? stderr : progress->out;
    exec_progress_clear_line(progress);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(to, fmt, ap);
    va_end(ap);
    fputc('\n', to);
    fflush(to);
}
