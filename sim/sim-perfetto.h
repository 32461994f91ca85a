/* SPDX-License-Identifier: MIT
 * sim-perfetto.h: writes a simulated run as a Chrome trace-event JSON file (trace.json), the
 * format chrome://tracing and ui.perfetto.dev open. One process per stage; a compute thread
 * (tid 0) and communication threads; flow arrows from each cross-device producer to its
 * consumer. Times are microseconds printed exactly from integer nanoseconds.
 */
#pragma once

#include <glib.h>

#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"

G_BEGIN_DECLS

/* Formats the trace of @result (a run of @sched with @cost). Returns: (transfer full). */
char *sim_perfetto_format(const PpSchedule *sched, const SimCostModel *cost,
                          const SimResult *result);

/* Writes sim_perfetto_format() to @path atomically. Returns FALSE and sets @error
 * (PP_IO_ERROR_WRITE) on failure. */
gboolean sim_perfetto_write(const PpSchedule *sched, const SimCostModel *cost,
                            const SimResult *result, const char *path, GError **error);

G_END_DECLS
