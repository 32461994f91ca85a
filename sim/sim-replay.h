/* SPDX-License-Identifier: MIT
 * sim-replay.h: `pacer-sim replay`: a measured trace (pacer-train --out DIR/ops.csv) against the
 * simulator's predictions for the same schedule, op by op. "Replay" runs the engine with each
 * op's measured duration and no communication; "calibrated" runs it with the medians of the
 * measured durations per (stage, chunk, kind). With the link model both add each message's
 * hop between stages ([hardware] link, pacer-train's fp32 activations). Both start at 0 ns;
 * measured times are shifted so that the first measured op starts at 0 ns.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdint.h>

#include "pp-scenario.h"
#include "pp-schedule.h"
#include "pp-trace.h"
#include "sim-cost.h"
#include "sim-engine.h"

G_BEGIN_DECLS

typedef struct {
    int32_t stage;
    int64_t measured_busy_ns;   /* sum of the stage's measured op durations */
    int64_t measured_span_ns;   /* first measured start to last measured end on the stage */
    int64_t replay_span_ns;     /* the same in the replay prediction */
    int64_t calibrated_span_ns; /* the same in the calibrated prediction */
} SimReplayStage;

/* One comparison; every array is indexed by the schedule's flat op id. */
typedef struct {
    PpScenario *scenario;
    char       *trace_path;
    PpSchedule *schedule;
    PpTrace    *measured;           /* the trace as read, every row */
    int64_t     measured_origin_ns; /* the trace's start of its first compute row: subtracted
                                       from every measured time below */
    int64_t *measured_start_ns;     /* (n_ops) shifted: the first measured op starts at 0 */
    int64_t *measured_end_ns;       /* (n_ops) */
    int32_t *measured_delta;        /* (n_ops) version_b - version_f of the op's row; 0 on U */
    int64_t *replay_start_ns;       /* (n_ops) */
    int64_t *calibrated_start_ns;   /* (n_ops) */
    /* Medians of the measured durations: f/b/w per (stage, chunk), b the BW median and w 0
     * when the backward is fused; u per stage (the median of an absent kind is 0). */
    SimCostModel   *calibrated_cost;
    SimResult      *replay;     /* trace kept */
    SimResult      *calibrated; /* trace kept */
    SimReplayStage *stages;     /* (n_stages) */
    int64_t         measured_makespan_ns;
    double          mean_abs_start_diff_ns; /* mean over ops of |measured - replay start| */
    int32_t         measured_delta_max;     /* max over the trace's F/B/W/BW rows */
    int32_t         delta_mismatches; /* ops whose measured drift differs from the schedule's */
    int64_t         hop_ns;           /* one message between stages in both predictions; 0: none */
    /* Data parallelism (docs/design.md §4.9): the trace's replica column holds D replicas. */
    int32_t  replicas;         /* D >= 1 */
    int64_t *measured_sync_ns; /* (n_ops) D > 1: on each U the exposed reduction before it,
                                  the minimum over the replicas (sim_replay_dp_sync()); 0 on
                                  other ops. NULL when D = 1 */
    int64_t *grad_bytes;       /* (n_stages) D > 1: fp32 gradient bytes pacer-train reduces
                                  (sim_replay_dp_grad_bytes()); else NULL */
    int64_t *median_sync_ns;   /* (n_stages) D > 1: median over the stage's U of
                                  measured_sync_ns; else NULL */
    int64_t *model_sync_ns;    /* (n_stages) D > 1: sim_replay_dp_model_ns() of grad_bytes, -1
                                  without a [hardware] link; else NULL */
} SimReplay;

/* Loads the scenario @scenario_path with @overrides (NULL-terminated, nullable), builds its
 * schedule (static programs: pp_scenario_schedule_params + pp_schedule_new), reads
 * @trace_path and matches every compute row to one op: F/B/W/BW by (stage, kind, mb, chunk),
 * U by (stage, update index in the step column). Then runs both predictions, with @link each
 * message between stages costing hardware.link_latency_us + B T C 4 bytes / link_gbps (the
 * fp32 activation pacer-train sends; PP_SCENARIO_ERROR_INVALID_VALUE when the scenario has
 * no [hardware] link), else nothing.
 * Returns: (transfer full), or NULL with @error set: scenario and schedule errors as
 * pp_scenario_load() and pp_schedule_new(); the trace's as pp_trace_read_csv(); a trace that
 * does not fit the schedule (an op without a row, a row without an op or matching two, a
 * stage whose rows follow another order or overlap) PP_IO_ERROR_MISMATCH naming
 * @trace_path and the op. */
SimReplay *sim_replay_new(const char *scenario_path, const char *const *overrides,
                          const char *trace_path, gboolean link, GError **error);
void       sim_replay_free(SimReplay *replay);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimReplay, sim_replay_free)

/* The readable table (per stage, then the run). Returns: (transfer full). */
char *sim_replay_format(const SimReplay *replay);
/* The same figures as one JSON object (keys in docs/measured-vs-predicted.md).
 * Returns: (transfer full). */
JsonNode *sim_replay_build_json(const SimReplay *replay);
/* Creates @dir and writes ops.csv (the replay prediction), calibrated.csv (the calibrated
 * one) and compare.csv (per op: stage,op,mb,chunk,step and the start and end in ns measured,
 * replayed and calibrated, in the schedule's op order), each atomically. Returns FALSE with @error
 * set (PP_IO_ERROR) on failure. */
gboolean sim_replay_write_dir(const SimReplay *replay, const char *dir, GError **error);

G_END_DECLS
