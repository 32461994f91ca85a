/* SPDX-License-Identifier: MIT
 * sim-tta.h: `pacer-sim tta`: time to accuracy. Combines measured training curves (pacer-train's
 * log.csv: validation loss against optimizer updates and tokens) with a step time per run
 * (given, simulated on a target scenario with the run's schedule, or measured from the run's
 * ops.csv) and reports when each run reaches given validation-loss thresholds, with its
 * speedup over the fastest flush run ("best") and over the flush run with the same number of
 * micro-batches per update ("matched").
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* How a run's progress maps to time. */
typedef enum {
    SIM_TTA_UPDATES, /* time = optimizer updates x the run's step time */
    SIM_TTA_TOKENS,  /* time = training tokens / the step's tokens per second (the step time
                        over the target's tokens per update, or the run's own) */
} SimTtaAxis;

/* Where a run's step time came from. */
typedef enum {
    SIM_TTA_STEP_GIVEN,    /* --step-ms NAME=MS */
    SIM_TTA_STEP_TARGET,   /* simulated on --target with the run's schedule, m and a */
    SIM_TTA_STEP_MEASURED, /* the steady state of the run's own ops.csv */
} SimTtaStepSource;

typedef struct {
    char    *name;
    char    *log_path;
    char    *schedule;
    int32_t  mb_per_step; /* micro-batches per update: m (flush, 2bw), a (paci), 1 (pipedream) */
    gboolean flush;       /* a synchronous schedule (flush between steps) */
    int64_t  tokens_per_update; /* of the run: global_batch x seq_len */
    int64_t  step_ns;
    int64_t  step_tokens; /* tokens one step of step_ns covers (the target's, or the run's) */
    SimTtaStepSource step_source;
    int32_t          n_evals;
    double          *eval_updates; /* (n_evals) updates done at each evaluation (step + 1) */
    double          *eval_tokens;  /* (n_evals) */
    double          *eval_loss;    /* (n_evals) validation loss */
    double           lowest_loss;  /* the lowest of eval_loss */
} SimTtaRun;

/* One run at one threshold. */
typedef struct {
    gboolean reached;
    double   progress; /* updates or tokens (the axis) at which the loss reaches the threshold,
                          interpolated linearly between the two evaluations around it; at the
                          first evaluation when that one is already below it */
    gboolean at_first; /* the first evaluation was already below: progress is an upper bound */
    double   time_s;
    double   speedup_best;    /* fastest flush run's time / this run's; 0 when either is absent */
    double   speedup_matched; /* the same against the fastest flush run with this run's
                                 micro-batches per update; 0 when none reached it */
} SimTtaCell;

typedef struct {
    SimTtaAxis  axis;
    GPtrArray  *runs;       /* (element-type SimTtaRun) in argument order */
    double     *thresholds; /* (n_thresholds) in the order given */
    int32_t     n_thresholds;
    SimTtaCell *cells;  /* (n_runs * n_thresholds) run-major */
    char       *target; /* (nullable) the target scenario */
} SimTta;

typedef struct {
    const char *const *runs;       /* NULL-terminated "[NAME=]PATH": a pacer-train --out folder
                                      or its log.csv; scenario.ini must be next to it */
    const char *const *step_ms;    /* (nullable) NULL-terminated "NAME=MS" */
    const char        *target;     /* (nullable) scenario to simulate each run's schedule on */
    const double      *thresholds; /* (n_thresholds) validation losses */
    int32_t            n_thresholds;
    SimTtaAxis         axis;
    int32_t            skip_steps; /* one-off steps left out of a measured step time */
} SimTtaParams;

/* Reads every run, finds its step time, and fills the table. Returns: (transfer full), or
 * NULL with @error set: an unreadable or malformed log.csv or scenario.ini (naming the file
 * and line), a log without validation losses, a --step-ms for no run, a run without a step
 * time, a target scenario that cannot run the run's schedule. */
SimTta *sim_tta_new(const SimTtaParams *params, GError **error);
void    sim_tta_free(SimTta *tta);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimTta, sim_tta_free)

/* The readable table. Returns: (transfer full). */
char *sim_tta_format(const SimTta *tta);
/* One JSON object (keys in docs/measured-vs-predicted.md). Returns: (transfer full). */
JsonNode *sim_tta_build_json(const SimTta *tta);
/* tta.csv: one row per run and threshold. Returns: (transfer full). */
char *sim_tta_csv(const SimTta *tta);
/* curves.csv: run,updates,tokens,time_s,val_loss for every evaluation. Returns: (transfer
 * full). */
char *sim_tta_curves_csv(const SimTta *tta);

/* `pacer-sim tta`: the command line (argv[0] is the command name). Returns the exit status. */
int sim_tta_main(int argc, char **argv);

G_END_DECLS
