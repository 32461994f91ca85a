/* SPDX-License-Identifier: MIT
 * exec-progress.h: what pacer-train prints while it trains. On a terminal one progress line
 * (step, loss, lr, tokens/s, ETA) rewritten in place with '\r'; otherwise a plain line every
 * log_every steps; in quiet mode (--quiet, or CI=true) nothing until the final summary.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

G_BEGIN_DECLS

typedef enum {
    EXEC_PROGRESS_TTY,   /* '\r' line rewritten in place */
    EXEC_PROGRESS_PLAIN, /* a line every log_every steps */
    EXEC_PROGRESS_QUIET, /* only the final summary and errors */
} ExecProgressMode;

/* One step's numbers as shown. */
typedef struct {
    int32_t step;       /* 0-based optimizer step just completed */
    int32_t first_step; /* 0-based first step this process ran (> 0 after a resume) */
    int32_t total_steps;
    double  loss; /* mean training loss of the step (nats) */
    double  lr;
    double  tokens_per_s;
    double  elapsed_s; /* since this process started training (at first_step) */
} ExecProgressStep;

typedef struct _ExecProgress ExecProgress;

/* Chooses the mode: QUIET when @quiet or the environment has CI=true, else TTY when @out is a
 * terminal (isatty), else PLAIN. */
ExecProgressMode exec_progress_mode_detect(FILE *out, gboolean quiet);

/* @out: borrowed stream (stdout); @log_every >= 1 (PLAIN mode). Returns: (transfer full). */
ExecProgress *exec_progress_new(FILE *out, ExecProgressMode mode, int32_t log_every);
void          exec_progress_free(ExecProgress *progress);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecProgress, exec_progress_free)

/* Formats "step 12/40 | loss 5.1234 | lr 6.00e-04 | 12345 tok/s | ETA 1m05s" into a newly
 * allocated string; ETA = elapsed / (step + 1 - first_step) * (total - step - 1), rounded to
 * seconds: the rate of the steps this process ran (steps a resumed checkpoint holds took no
 * time here). Returns: (transfer full). */
char *exec_progress_format(const ExecProgressStep *step);

/* Shows a completed step according to the mode. */
void exec_progress_step(ExecProgress *progress, const ExecProgressStep *step);
/* Prints a line that must stay (validation loss, checkpoint written): on a terminal it first
 * clears the progress line. Not printed in QUIET mode unless @always, and then to stderr. */
void exec_progress_note(ExecProgress *progress, gboolean always, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

G_END_DECLS
