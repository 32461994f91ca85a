/* SPDX-License-Identifier: MIT
 * pp-error.c: pp_abort, the GError domains of the schedule core, pp_file_read and
 * pp_file_write.
 */
#include "pp-error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* The quark names are stringified tokens: keep clang-format from spacing the dashes. */
// clang-format off
G_DEFINE_QUARK(pp-schedule-error-quark, pp_schedule_error)
G_DEFINE_QUARK(pp-scenario-error-quark, pp_scenario_error)
G_DEFINE_QUARK(pp-io-error-quark, pp_io_error)
// clang-format on

void pp_abort(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

gboolean pp_file_read(const char *path, const char *what, char **text, gsize *len, GError **error) {
    g_autoptr(GError) local = NULL;
    if (!g_file_get_contents(path, text, len, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot read %s%s%s: %s",
                    what ? what : "", what ? " " : "", path, local->message);
        return FALSE;
    }
    return TRUE;
}

gboolean pp_file_write(const char *path, const char *data, gsize len, GError **error) {
    g_autoptr(GError) local = NULL;
    if (!g_file_set_contents(path, data, (gssize)len, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot write %s: %s", path,
                    local->message);
        return FALSE;
    }
    return TRUE;
}
