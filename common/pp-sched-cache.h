/* SPDX-License-Identifier: MIT
 * pp-sched-cache.h: finished schedules kept across calls, for a search that builds the same
 * schedule for many layouts (pacer-sim plan: every tensor, context, expert, ZeRO and
 * recomputation choice of one pipeline shape runs one program).
 *
 * An entry is keyed by everything its generator reads from PpScheduleParams: the kind, stages,
 * chunks, micro-batches, accumulation and steps; the op costs and mem_w_fraction only for a
 * kind whose record says its generator reads them (PpSchedKindInfo.reads_costs: zb-1p,
 * zb-2p); the order file's path only for a kind that reads one (custom). Two calls with equal
 * keys therefore get the same program pp_schedule_new() would build, or the same error.
 *
 * Each entry keeps its stages' peak in-flight counts (small) for the cache's whole life, and
 * its finished schedule until the schedules held exceed the cache's op budget: the least
 * recently used are dropped first (never the one just built) and rebuilt when asked again.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-schedule.h"

G_BEGIN_DECLS

typedef struct _PpSchedCache PpSchedCache;

/* An empty cache that holds finished schedules of at most @max_ops ops in all (besides the
 * one built last, whatever its size). Returns: (transfer full). */
PpSchedCache *pp_sched_cache_new(int64_t max_ops);
void          pp_sched_cache_free(PpSchedCache *cache);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PpSchedCache, pp_sched_cache_free)

/* The finished schedule pp_schedule_new(@params) builds, from the cache when an equal key
 * was built before. Returns: (transfer none): valid until the next call on @cache, or NULL
 * with @error set (the generator's error, the same for every call with this key). */
const PpSchedule *pp_sched_cache_schedule(PpSchedCache *cache, const PpScheduleParams *params,
                                          GError **error);

/* The peak in-flight (mb, chunk) units of every stage of that schedule
 * (pp_schedule_peak_inflight()), without building it again when its key was built before.
 * Returns: (transfer none) (n_stages): valid until @cache is freed, or NULL with @error set
 * as pp_sched_cache_schedule(). */
const int32_t *pp_sched_cache_peak_inflight(PpSchedCache *cache, const PpScheduleParams *params,
                                            GError **error);

/* Counters, for benchmarks and tests: schedules built (pp_schedule_new() calls) and calls
 * answered without building. */
void pp_sched_cache_counts(const PpSchedCache *cache, int64_t *built, int64_t *reused);

G_END_DECLS
