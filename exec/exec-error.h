/* SPDX-License-Identifier: MIT
 * exec-error.h: the executor's GError domain, shared by the replay loop (exec.c), the training
 * loop and every backend without any of them including another's header.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define EXEC_ERROR (exec_error_quark())
GQuark exec_error_quark(void);

typedef enum {
    EXEC_ERROR_SHAPE,       /* a schedule or model that does not fit the pipeline's state */
    EXEC_ERROR_NONFINITE,   /* a stage skipped max_nonfinite consecutive updates */
    EXEC_ERROR_BACKEND,     /* a backend this build does not have, or one that cannot start */
    EXEC_ERROR_TENSOR,      /* no tensor of that name and role on a virtual stage, or another
                               size than the caller's buffer */
    EXEC_ERROR_NOT_LOCAL,   /* the virtual stage's state lives in another process */
    EXEC_ERROR_COMM,        /* a peer process did not answer within run.comm_timeout_s, or the
                               transport between processes failed (exec-comm.h) */
    EXEC_ERROR_INTERRUPTED, /* the replay was stopped from outside (exec_pipeline_interrupt():
                               SIGINT or SIGTERM in pacer-train) */
} ExecError;

G_END_DECLS
