/* SPDX-License-Identifier: MIT
 * sim-engine.h: runs a const PpSchedule against a SimCostModel in a discrete-event engine
 * ordered by (time_ns, stage, seq), and reports times, bubbles, versions and memory.
 * An op starts at max(end of the previous op on its device, end of each dependency + comm),
 * comm being latency + bytes / bandwidth across devices and 0 inside one.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-schedule.h"
#include "pp-trace.h"
#include "sim-cost.h"

G_BEGIN_DECLS

typedef struct {
    int32_t stage;
    int64_t busy_ns;           /* sum of op durations */
    int64_t span_ns;           /* first op start to last op end */
    int32_t peak_inflight;     /* (mb, chunk) units with F done and B/BW (or W) not done */
    int64_t peak_memory_bytes; /* static + stashed copies + live activations, max over time */
    int64_t peak_activation_bytes;
    int32_t delta_max;         /* max over mbs of version_b - version_f */
    int32_t delay_max;         /* max gradient delay (update that applies it - version_f) */
    int32_t weight_versions;   /* max distinct weight versions alive at once */
} SimStageResult;

typedef struct {
    int64_t makespan_ns;       /* first op start to last op end, whole run */
    int64_t step_time_ns;      /* one optimizer step (steady state for async schedules) */
    double  throughput_tokens_per_s;
    double  throughput_samples_per_s;
    double  bubble_fraction;   /* zero-bubble definition (C - m(F+B+W)) / C, C = largest
                                  stage span of one step */
    double  efficiency;        /* busy / (n_stages * makespan) */
    double  mfu;               /* 0 when the cost model has no FLOP rate */
    int32_t delta_max;
    int64_t peak_memory_bytes;
    int32_t n_stages;
    SimStageResult *stages;    /* (n_stages) */
    PpTrace *trace;            /* every op, version_f/version_b filled; (transfer full) */
    int64_t  n_ops_simulated;
} SimResult;

/* Runs @sched (validated) with @cost. Returns: (transfer full), or NULL with @error set when
 * the cost model does not fit the schedule (stage/chunk counts differ). */
SimResult *sim_engine_run(const PpSchedule *sched, const SimCostModel *cost, GError **error);
void       sim_result_free(SimResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimResult, sim_result_free)

G_END_DECLS
