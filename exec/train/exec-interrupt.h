/* SPDX-License-Identifier: MIT
 * exec-interrupt.h: Ctrl-C (SIGINT) and SIGTERM during pacer-train. While a pipeline is
 * attached, the first such signal stops its replay as soon as possible and cleanly
 * (exec_pipeline_interrupt(): the ops that ran stay in the trace, the training loop writes
 * log.csv and ops.csv and returns EXEC_ERROR_INTERRUPTED, and the last checkpoint unit is what
 * a resume continues from). A second signal, or one while no pipeline is attached (start-up,
 * the final summary), ends the process as the signal's default action does. The signals are
 * watched by GLib (g_unix_signal_source_new()) on a thread of this object's own.
 */
#pragma once

#include <glib.h>

#include "exec.h"

G_BEGIN_DECLS

typedef struct _ExecInterrupt           ExecInterrupt;
typedef struct _ExecInterruptAttachment ExecInterruptAttachment;

/* Starts watching SIGINT and SIGTERM. Returns: (transfer full). */
ExecInterrupt *exec_interrupt_new(void);
/* Stops watching (the signals' default actions are back). Accepts NULL. */
void exec_interrupt_free(ExecInterrupt *interrupt);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecInterrupt, exec_interrupt_free)

/* Attaches @pipeline (borrowed) to @interrupt (nullable: then nothing happens) until the
 * returned attachment is freed: declare it after the pipeline's g_autoptr so that it goes
 * first. Returns: (transfer full) (nullable). */
ExecInterruptAttachment *exec_interrupt_attach(ExecInterrupt *interrupt, ExecPipeline *pipeline);
void                     exec_interrupt_attachment_free(ExecInterruptAttachment *attachment);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecInterruptAttachment, exec_interrupt_attachment_free)

/* The signal that interrupted the attached pipeline (SIGINT or SIGTERM), 0 when none did.
 * @interrupt: (nullable). */
int exec_interrupt_signal(const ExecInterrupt *interrupt);

G_END_DECLS
