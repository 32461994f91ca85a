/* SPDX-License-Identifier: MIT
 * sim-calibrate.h: `pacer-sim calibrate`: fits the simulator's cost model to measured executor
 * traces (pacer-train --out DIR: DIR/ops.csv next to DIR/scenario.ini): per-stage F, B, W, BW
 * and U times, the per-op dispatch overhead, the link (latency, bandwidth) from the gaps a
 * waiting consumer saw, and the kernel-efficiency curve when the traces span several
 * micro-batch sizes, and with hardware.cost_model = operators the operator model's constants
 * (sim-calibrate-ops.h). Writes a scenario with explicit per-stage [costs] and predicts the
 * steady-state step time of every trace (fitted or held out) with it.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdint.h>

#include "pp-scenario.h"
#include "pp-trace.h"
#include "sim-calibrate-ops.h"

G_BEGIN_DECLS

typedef struct {
    const char *const *fit_traces;   /* NULL-terminated ops.csv paths, at least one */
    const char *const *check_traces; /* (nullable) NULL-terminated: predicted, not fitted */
    int32_t            skip_steps;   /* ops of the first skip_steps optimizer steps are left
                                        out of the fit (one-off costs), >= 0 */
    int32_t microbatch_size;         /* sequences per micro-batch of the written costs; 0:
                                        the first fit trace's */
} SimCalibrateParams;

/* One measured trace and its prediction with the calibrated costs. */
typedef struct {
    char    *trace_path;
    char    *scenario_path; /* the scenario.ini next to the trace */
    gboolean fit;           /* TRUE: the fit used it; FALSE: held out (--check) */
    char    *schedule;
    int32_t  n_stages;
    int32_t  microbatches;    /* pipeline.microbatches (m) */
    int32_t  accumulation;    /* pipeline.accumulation (a) */
    int32_t  microbatch_size; /* sequences */
    int32_t  steps;           /* optimizer steps of the run */
    int32_t  threads;         /* run.threads */
    int32_t  replicas;        /* data-parallel replicas in the trace (predicted with the
                                 reduction before every U, sim-calibrate.c) */
    /* Steady state: the median of the intervals between the ends of consecutive optimizer
     * steps j -> j + 1 (a step ends with the last stage's U of update j), j in [lo, hi). */
    int32_t lo_step, hi_step;
    int64_t measured_step_ns;
    int64_t predicted_step_ns; /* 0 when not predicted (note says why) */
    /* The speed reference (run.speed_reference, docs/measured-vs-predicted.md): each stage's
     * median reference time over steps lo..hi of this run divided by the fit's
     * (SimCalibrateStage.reference_ns): above 1, the stage's core ran slower than in the fit runs.
     * NULL when this trace or a fit trace has no reference rows. */
    double *slowdown;         /* (n_stages) */
    int64_t adjusted_step_ns; /* predicted with every stage's costs times its slowdown; 0
                                 without slowdowns or without a prediction */
    char *note;               /* (nullable) a caveat, or why predicted_step_ns is 0 */
} SimCalibrateTrace;

/* The fitted costs of one stage at the calibration's micro-batch size: means of the measured
 * durations (those above 3 times the median left out) plus the stage's dispatch overhead, -1 where
 * no op of that kind was measured (at that size, or at another size scaled by the kernel-efficiency
 * curve). */
typedef struct {
    int32_t stage;
    int64_t f_ns, b_ns, w_ns, bw_ns, u_ns;
    int64_t stash_ns;     /* copying the stage's weights (the first F of a weight version
                             under stashing pays it over a plain F), -1 when no stashing run
                             (pipedream, 2bw) was fitted */
    int64_t dispatch_ns;  /* median gap between an op's end and the next op's start on the
                             stage when the next op's inputs were already there */
    int32_t n_samples;    /* measured op durations the fit used on this stage */
    int64_t reference_ns; /* the speed reference on this stage: the median over the fit traces
                             of each one's median reference time (steps after the skipped
                             ones); each fit trace's op times were scaled by this over its own
                             before pooling, and u_ns includes it (it follows every U). -1 when
                             a fit trace has no reference rows: nothing scaled */
} SimCalibrateStage;

typedef struct {
    int32_t            n_stages;
    int32_t            skip_steps;
    int32_t            microbatch_size; /* of the costs */
    int64_t            tokens_per_mb;   /* microbatch_size * seq_len */
    SimCalibrateStage *stages;          /* (n_stages) */
    /* Link: a hop costs latency + message bytes / bandwidth. The message is one micro-batch's
     * fp32 activations (or gradients): microbatch_size * seq_len * hidden * 4 bytes. */
    int64_t link_latency_ns;
    double  link_bytes_per_ns; /* 0: not identifiable (one message size) or not measurable */
    int64_t link_msg_bytes;    /* at microbatch_size */
    int64_t comm_ns;           /* one hop at microbatch_size */
    int32_t n_link_waits;      /* consumer waits measured */
    int32_t n_link_sizes;      /* distinct message sizes among them */
    /* Kernel efficiency: per-micro-batch compute time (F + B + W, or F + BW, summed over the
     * stages) per model FLOP = ns_per_flop * (1 + half_tokens / tokens), i.e. a rate of
     * eff(t) = t / (t + half_tokens) times 1e9 / ns_per_flop FLOP/s. */
    gboolean have_curve;  /* traces at >= 2 micro-batch sizes */
    double   ns_per_flop; /* at infinitely large micro-batches */
    double   half_tokens; /* hardware.kernel_eff_half_tokens */
    int32_t  n_curve_sizes;
    /* With hardware.cost_model = operators in the first fit trace's scenario: the operator
     * model's constants fitted to every measured F, B, W and BW (sim-calibrate-ops.h), written
     * into the calibrated scenario's [hardware]; fitted is FALSE with the curve. */
    SimCalOperators operators;
    GPtrArray      *traces;   /* (element-type SimCalibrateTrace) fitted ones first, in order */
    PpScenario     *scenario; /* the calibrated scenario (the first fit trace's, with [costs]) */
    char           *scenario_text; /* its key-file text with the calibration as comments */
} SimCalibration;

/* Reads every trace and its scenario.ini, checks that they describe one model on one
 * pipeline (same stages and model shape; pipeline.chunks = 1), fits the costs and predicts
 * every trace. Returns: (transfer full), or NULL with @error set: a trace without its
 * scenario.ini (PP_IO_ERROR_OPEN), the scenario and trace errors of sim_replay_new(),
 * traces of different models or stage counts, or too few steps (PP_SCENARIO_ERROR_
 * INCONSISTENT naming both files). */
SimCalibration *sim_calibrate_new(const SimCalibrateParams *params, GError **error);
void            sim_calibrate_free(SimCalibration *cal);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimCalibration, sim_calibrate_free)

/* The readable report. Returns: (transfer full). */
char *sim_calibrate_format(const SimCalibration *cal);
/* The same as one JSON object (keys in docs/measured-vs-predicted.md). Returns: (transfer full). */
JsonNode *sim_calibrate_build_json(const SimCalibration *cal);

/* Steady-state step time of a trace of @n_steps optimizer steps: t_j = the latest end of a U
 * row with step j; the median of t_{j+1} - t_j over j in [lo, hi), lo = max(@skip_steps,
 * n_steps / 4), hi = min(n_steps - 1, max(lo + 1, 3 n_steps / 4)). Returns FALSE with
 * @error (PP_SCENARIO_ERROR_INCONSISTENT naming @name) when the trace has fewer than
 * @skip_steps + 2 steps or a step without U. */
gboolean sim_calibrate_steady_step(const PpTrace *trace, int32_t n_steps, int32_t skip_steps,
                                   const char *name, int32_t *lo, int32_t *hi, int64_t *step_ns,
                                   GError **error);

/* The cores a run used: when @scenario's stages times max(run.threads, 1) exceed @processors,
 * stages shared cores and the simulator, which models one device per stage, predicts the run
 * as if they had not. Returns: (transfer full) (nullable): the warning naming @name, or NULL. */
char *sim_calibrate_cores_warning(const PpScenario *scenario, const char *name, int32_t processors);

/* `pacer-sim calibrate`: the command line (argv[0] is the command name). Returns the exit
 * status. */
int sim_calibrate_main(int argc, char **argv);

G_END_DECLS
