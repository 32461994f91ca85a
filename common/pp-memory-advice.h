/* SPDX-License-Identifier: MIT
 * pp-memory-advice.h: what a person can change when a configuration does not fit its devices:
 * the scenario keys that lower the peak memory (docs/design.md §4.5), each with its value now,
 * for the simulator's and the executor's out-of-memory messages.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-scenario.h"

G_BEGIN_DECLS

/* "what lowers it: KEY (now VALUE) ...; ..." for @scenario: smaller micro-batches,
 * recomputation, flash attention, more stages, more tensor parallelism, more context
 * parallelism, more expert
 * parallelism (with experts), the distributed
 * optimizer (with data parallelism), each left out where it is already at its most frugal
 * setting; then a larger device (hardware.memory_gib).
 * Returns: (transfer full). */
char *pp_memory_advice(const PpScenario *scenario);

/* "X GiB, Y GiB over the device's Z GiB" for a peak of @need_bytes against @limit_bytes.
 * Returns: (transfer full). */
char *pp_memory_over(int64_t need_bytes, int64_t limit_bytes);

G_END_DECLS
