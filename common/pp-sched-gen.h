/* SPDX-License-Identifier: MIT
 * pp-sched-gen.h: the generators behind the registry (pp-sched-registry.c), one prototype
 * per schedule kind, plus the parameter checks they share. Internal to libppcore: consumers
 * call pp_schedule_new() with a kind name instead.
 */
#pragma once

#include "pp-schedule.h"

G_BEGIN_DECLS

/* --- generators (PpSchedBuildFn); each returns an unfinished schedule or NULL + @error --- */

PpSchedule *pp_sched_build_gpipe(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_1f1b(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_interleaved(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_zb_h1(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_zb_h2(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_zb_1p(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_zb_2p(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_pipedream(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_2bw(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_async_1f1b(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_paci(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_zb_v(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_dualpipe_v(const PpScheduleParams *params, GError **error);
PpSchedule *pp_sched_build_custom(const PpScheduleParams *params, GError **error);

/* --- shared parameter checks --- */

/* Most chunks per device interleaved accepts (its registry row's max_chunks). */
#define PP_INTERLEAVED_MAX_CHUNKS 64

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
