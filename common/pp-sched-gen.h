/* SPDX-License-Identifier: MIT
 * pp-sched-gen.h: the schedule kinds behind the registry (pp-sched-registry.c), one record
 * per kind exported by its generator's file, plus the parameter checks they share. Internal to
 * libppcore: consumers call pp_schedule_new() with a kind name instead.
 */
#pragma once

#include "pp-schedule.h"

G_BEGIN_DECLS

/* --- the kinds: each file defines its records next to its generators (PpSchedBuildFn, each
 * returning an unfinished schedule or NULL + @error); pp-sched-registry.c lists them --- */

extern const PpSchedKindInfo pp_sched_kind_gpipe, pp_sched_kind_1f1b; /* pp-sched-flush.c */
extern const PpSchedKindInfo pp_sched_kind_interleaved;
extern const PpSchedKindInfo pp_sched_kind_zb_h1, pp_sched_kind_zb_h2; /* pp-sched-zb.c */
extern const PpSchedKindInfo pp_sched_kind_zb_1p, pp_sched_kind_zb_2p;
extern const PpSchedKindInfo pp_sched_kind_zb_v, pp_sched_kind_dualpipe_v; /* pp-sched-v.c */
extern const PpSchedKindInfo pp_sched_kind_pipedream, pp_sched_kind_2bw;   /* pp-sched-async.c */
extern const PpSchedKindInfo pp_sched_kind_async_1f1b, pp_sched_kind_paci;
extern const PpSchedKindInfo pp_sched_kind_custom;

/* The fields every flush kind shares (records start with it and add their chunk range):
 * micro-batches per step m, current weights, synchronous. */
#define PP_SCHED_KIND_FLUSH(kind_name, fn, text)                                                   \
    .name = kind_name, .build = fn, .summary = text, .batch = PP_BATCH_MICROBATCHES,               \
    .weights = PP_WEIGHTS_CURRENT, .sync = PP_SCHED_SYNC

/* --- shared parameter checks --- */

/* Largest n_mb * n_vstages a generator accepts (keeps flat op ids well inside int32_t). */
#define PP_SCHED_MAX_UNITS (1 << 24)

/* Checks @min <= @value <= @max for the parameter called @name of schedule @kind. Returns
 * FALSE and sets PP_SCHEDULE_ERROR_INVALID_PARAMS ("schedule 'paci': n_stages = 0 is out of
 * range; valid: 1..4096") otherwise. */
gboolean pp_sched_check_param(const char *kind, const char *name, int32_t value, int32_t min,
                              int32_t max, GError **error);

/* Checks that @n_mb micro-batches over @n_vstages virtual stages stay within
 * PP_SCHED_MAX_UNITS. Returns FALSE and sets PP_SCHEDULE_ERROR_INVALID_PARAMS otherwise. */
gboolean pp_sched_check_size(const char *kind, int64_t n_mb, int64_t n_vstages, GError **error);

/* --- emitting ops --- */

/* Appends op (@kind, @stage, @mb, @chunk, @step) to @sched (pp_schedule_append). */
void pp_sched_emit(PpSchedule *sched, PpOpKind kind, int32_t stage, int32_t mb, int32_t chunk,
                   int32_t step);

G_END_DECLS
