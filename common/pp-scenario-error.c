/* SPDX-License-Identifier: MIT
 * pp-scenario-error.c: the error every cross-key check of a scenario reports
 * (PP_SCENARIO_ERROR_INCONSISTENT, "PATH: message"). A file of its own so that the arrows
 * point one way: the checks (pp-scenario-check.c) call the blocks' checks
 * (pp-scenario-blocks.c), and both report through this file; nothing calls back into the
 * checks.
 */
#include <stdarg.h>

#include "pp-error.h"
#include "pp-scenario-private.h"

gboolean pp_scenario_inconsistent(const PpScenario *sc, GError **error, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT, "%s: %s", sc->path, msg);
    return FALSE;
}
