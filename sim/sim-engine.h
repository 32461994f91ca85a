/* SPDX-License-Identifier: MIT
 * sim-engine.h: runs a const PpSchedule against a SimCostModel in a discrete-event engine
 * ordered by (time_ns, stage, seq), and reports times, bubbles, versions and memory.
 * An op starts at max(end of the previous op on its device, end of each dependency + comm),
 * comm being latency + bytes / bandwidth across devices (the intra- or inter-node link) and 0
 * inside one; with data parallelism a U also waits for its stage's gradient all-reduce.
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
    int64_t busy_ns;               /* sum of op durations */
    int64_t span_ns;               /* first op start to last op end */
    int32_t peak_inflight;         /* (mb, chunk) units with F done and BW (split: W) not done */
    int64_t peak_memory_bytes;     /* static + stashed copies + live activations, max over time;
                                      accounted at op ends: F adds act_bytes, BW frees it; split:
                                      B frees act_b_bytes, W the rest */
    int64_t peak_activation_bytes; /* live activations, max over time */
    int32_t delta_max;             /* max over mbs of version_b - version_f */
    int32_t delay_max;             /* max gradient delay (update that applies it - version_f) */
    int32_t weight_versions;       /* max distinct weight versions alive at once: 1 under
                                      PP_WEIGHTS_CURRENT; STASHED: current version - oldest
                                      version an in-flight unit still needs + 1 */
    int64_t peak_stash_bytes;      /* stashed weight copies, (weight_versions - 1) *
                                      weight_copy_bytes: max over time */
    /* What peak_memory_bytes is made of, at the first moment it is reached:
     * peak_memory_bytes == static_bytes + stash_peak_bytes + activation_peak_bytes. Before any
     * op ends the stage holds static_bytes alone (time 0). */
    int64_t peak_time_ns;          /* end of the op that first reached the peak (0:
                                      the static bytes alone are the peak) */
    int64_t stash_peak_bytes;      /* stashed copies at that moment (<= peak_stash_bytes) */
    int64_t activation_peak_bytes; /* live activations then (<= peak_activation_bytes) */
    int64_t dp_wait_ns; /* data-parallel synchronisation the stage's U ops waited for beyond
                           their device being free: the exposed all-reduce time, whole run */
} SimStageResult;

/* One change of a stage's memory (the memory timeline): the values after the op that ended at
 * time_ns, total_bytes = static_bytes + stash_bytes + activation_bytes. */
typedef struct {
    int32_t stage;
    int64_t time_ns;
    int64_t activation_bytes; /* live activations */
    int64_t stash_bytes;      /* stashed weight copies */
    int64_t total_bytes;
} SimMemoryRow;

typedef struct {
    int64_t makespan_ns;            /* first op start to last op end, whole run */
    int64_t step_time_ns;           /* one optimizer step. Synchronous schedules: makespan /
                                       n_steps (steps are separated by a flush). Asynchronous:
                                       on the bottleneck stage (largest busy_ns, lowest index on
                                       ties) with K updates, (end of U[hi] - end of U[lo]) /
                                       (hi - lo), lo = K/4, hi = max(lo+1, 3K/4) capped at K-1:
                                       the steady-state update interval over the middle half of
                                       the run (truncated to ns); the makespan when K < 2 */
    double throughput_tokens_per_s; /* the whole job: tokens_per_mb * mb_per_step *
                                       data_parallel / step time */
    double throughput_samples_per_s;
    double bubble_fraction;         /* zero-bubble definition (C - m(F+B+W)) / C. Synchronous:
                                       C = the largest span of one stage's F/B/W/BW ops within
                                       one step, m(F+B+W) = the busiest stage's work in that step.
                                       Asynchronous: C = step time, m = mb_per_step, F+B+W the
                                       bottleneck stage's per-micro-batch work (all chunks);
                                       0 when C < m(F+B+W) (a run too short for a steady
                                       state). Always in [0, 1) */
    double efficiency;              /* busy / (n_stages * makespan) */
    double mfu;                     /* model FLOPs utilisation: flops_per_mb * mb_per_step / step
                                       time / (n_stages * tensor_parallel * peak_flops); 0 when
                                       peak_flops is 0 */
    double          hfu;            /* the same with hw_flops_per_mb (recomputation counted) */
    double          tflops_per_gpu; /* model FLOP/s per GPU / 1e12: mfu * peak_flops / 1e12 */
    int64_t         gpus;           /* n_stages * tensor_parallel * data_parallel */
    int32_t         delta_max;
    int64_t         peak_memory_bytes;
    int32_t         n_stages;
    SimStageResult *stages; /* (n_stages) */
    PpTrace        *trace;  /* every op, version_f/version_b filled; (transfer full) */
    int64_t         n_ops_simulated;
    /* The memory timeline (SimRunOptions.keep_memory_timeline), else NULL and 0: one row per
     * stage at time 0 (static bytes only), then one row each time an op's end changes a
     * stage's activations or stashed copies, in event order (time_ns, stage, program
     * order). Every stage's max total_bytes is its peak_memory_bytes. */
    SimMemoryRow *memory_timeline; /* (n_memory_rows) */
    int64_t       n_memory_rows;
} SimResult;

/* What a run records besides the reports. */
typedef struct {
    gboolean keep_trace;           /* FALSE: SimResult.trace is NULL (benchmarks, sweeps: the
                                      trace of a long run is ~56 bytes per op) */
    gboolean keep_memory_timeline; /* TRUE: fill SimResult.memory_timeline (~40 bytes per
                                      op); FALSE, the default, costs nothing */
} SimRunOptions;

/* Runs @sched (validated) with @cost. Returns: (transfer full), or NULL with @error set when
 * the cost model does not fit the schedule (stage/chunk counts differ). */
SimResult *sim_engine_run(const PpSchedule *sched, const SimCostModel *cost, GError **error);
/* Same as sim_engine_run() with @options (nullable: keep the trace, no memory timeline). */
SimResult *sim_engine_run_with(const PpSchedule *sched, const SimCostModel *cost,
                               const SimRunOptions *options, GError **error);

/* Dynamic mode: runs PACI's backpressure policy (pp_policy_paci_next) live instead of a
 * static program. @params: a kind with a run-time policy (PpSchedKindInfo.has_policy),
 * n_stages, accumulation, n_steps (n_steps * accumulation micro-batches); @cost: one chunk
 * per stage. Each stage decides its next op
 * whenever its state changes (an op of its own ends, an activation or gradient arrives);
 * events at the same instant are all applied before any stage decides. The executed ops are
 * recorded (PpPolicyRecorder) into a program of that kind, which is then run by sim_engine_run()
 * for the reports and the trace (its timing equals the live run's; asserted).
 * @program_out: (out) (transfer full) (nullable): the recorded program, for the executor.
 * Returns: (transfer full), or NULL with @error set on bad parameters. */
SimResult *sim_engine_run_policy(const PpScheduleParams *params, const SimCostModel *cost,
                                 PpSchedule **program_out, GError **error);
/* Same as sim_engine_run_policy() with @options for the replay of the recorded program
 * (nullable: keep the trace, no memory timeline). */
SimResult *sim_engine_run_policy_with(const PpScheduleParams *params, const SimCostModel *cost,
                                      const SimRunOptions *options, PpSchedule **program_out,
                                      GError **error);
void       sim_result_free(SimResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimResult, sim_result_free)

G_END_DECLS
