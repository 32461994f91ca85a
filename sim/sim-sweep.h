/* SPDX-License-Identifier: MIT
 * sim-sweep.h: the two multi-run commands of pacer-sim. compare runs several schedules on one
 * scenario (with a documented rule that keeps the global batch comparable); sweep runs the
 * cartesian product of values of scenario keys and writes one CSV row per point, a failing
 * point reporting its error in a column instead of stopping the sweep.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>

#include "sim-report.h"

G_BEGIN_DECLS

/* --- compare --- */

typedef struct {
    char   *schedule; /* registry name */
    SimJob *job;      /* (nullable): NULL when this schedule failed */
    char   *error;    /* (nullable): the failure's message */
    double  speedup;  /* tokens/s over the first schedule's (= the first's step time over this
                         one's when their global batches are equal); 0 when either failed */
} SimCompareRow;

/* Runs each of @kinds (NULL-terminated) on the scenario @path with @overrides, setting per run
 * pipeline.schedule and, as the rule in docs/simulator.md says:
 * - pipeline.chunks: the scenario's, clamped to the kind's registry range; a multi-chunk kind
 *   (interleaved) gets 2 when that leaves 1; other kinds 1;
 * - pipeline.accumulation: an accumulating kind (paci) the scenario's m (its own a when the
 *   scenario's kind accumulates too), a fixed accumulation (async-1f1b: 1) as the registry
 *   says, others the scenario's a;
 * - the batch, with k the kind's micro-batches per update (pp_sched_kind_mb_per_step(): m, a
 *   or 1): analytic costs keep training.global_batch and set the micro-batch size to
 *   global_batch / k (a kind whose k does not divide it fails); explicit [costs], which are
 *   the times of the scenario's micro-batch, keep its size and set global_batch = size * k.
 * A schedule that fails gives a row with its error.
 * Returns: (transfer full) (element-type SimCompareRow): rows in the order of @kinds, or NULL
 * with @error set when the base scenario itself does not load. */
GPtrArray *sim_sweep_compare(const char *path, const char *const *overrides,
                             const char *const *kinds, GError **error);

/* The side-by-side table. Returns: (transfer full). */
char *sim_sweep_compare_format(const GPtrArray *rows);
/* {"scenario": ..., "schedules": [{...}]}. Returns: (transfer full). */
JsonNode *sim_sweep_compare_build_json(const char *path, const GPtrArray *rows);

/* --- sweep --- */

typedef struct {
    char  *key;    /* "section.key" */
    char **values; /* (NULL-terminated) */
} SimSweepAxis;

/* Parses "section.key=v1,v2,..." into @axis (cleared with sim_sweep_axis_clear()).
 * Returns FALSE and sets @error (G_OPTION_ERROR_BAD_VALUE, a usage error) on bad syntax. */
gboolean sim_sweep_axis_parse(const char *spec, SimSweepAxis *axis, GError **error);
void     sim_sweep_axis_clear(SimSweepAxis *axis);
/* Points in the cartesian product of @axes: the product of their value counts. */
int64_t sim_sweep_n_points(const SimSweepAxis *axes, int32_t n_axes);

/* Runs every point of the cartesian product of @axes (in order, the last varying fastest) on
 * @path with @overrides and writes the CSV to @out: the swept keys, step_time_ns,
 * throughput_tokens_per_s, throughput_samples_per_s, bubble_fraction, efficiency, delta_max,
 * peak_memory_bytes, error. @out is flushed after the header and after every row, so the
 * rows of an interrupted sweep are out already. @base is @path loaded with @overrides, or
 * NULL when it does not load alone (then the points get no rules): each point's batch and
 * accumulation follow sim_sweep_point_rules() (docs/simulator.md). Sets *@n_failed to the number
 * of points with an error and *@n_mapped to the points of an accumulating schedule that ran
 * a = m. Returns FALSE and sets @error (PP_IO_ERROR_WRITE) when writing @out fails;
 * the sweep stops there. */
gboolean sim_sweep_run(const char *path, const char *const *overrides, const PpScenario *base,
                       const SimSweepAxis *axes, int32_t n_axes, FILE *out, int32_t *n_failed,
                       int32_t *n_mapped, GError **error);

G_END_DECLS
