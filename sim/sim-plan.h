/* SPDX-License-Identifier: MIT
 * sim-plan.h: pacer-sim plan, the layout search. For a GPU count and a global batch it
 * enumerates data x tensor x context x pipeline layouts, expert layouts of MoE models, ZeRO
 * stages, schedules, chunks, micro-batch sizes and recomputation, drops what cannot fit in
 * device memory before simulating (a memory floor, then the memory-constrained layer
 * partition), simulates the rest and ranks them by the whole job's throughput. docs/cluster.md
 * states the enumeration rules.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* The ZeRO stages plan knows: 0 replicated training state, 1 parallel.distributed_optimizer,
 * 3 parallel.fsdp. */
#define SIM_PLAN_MAX_ZERO 3

typedef struct {
    int32_t            gpus;           /* G = D T C N */
    int32_t            global_batch;   /* sequences per step; <= 0: the scenario's */
    const char *const *schedules;      /* NULL-terminated registry names */
    int32_t            max_microbatch; /* largest micro-batch size tried (sequences) */
    int32_t            top;  /* rows printed (>= 1): a candidate that can reach neither these
                                nor its schedule's best is not simulated */
    int64_t  headroom_bytes; /* device memory a row must leave free (>= 0) */
    int32_t  zero[SIM_PLAN_MAX_ZERO]; /* ZeRO stages tried, in order: 0, 1 or 3 */
    size_t   n_zero;                  /* 1..SIM_PLAN_MAX_ZERO */
    gboolean progress;                /* redraw a progress line (stderr a terminal, no CI) */
} SimPlanOptions;

/* One simulated layout (SimPlan.rows: those that fit, SimPlan.over_memory: those that do not). */
typedef struct {
    char   *schedule;
    int32_t data, tensor, context, stages, chunks;
    int32_t expert, expert_tensor; /* parallel.expert, expert_tensor (1, 1 for a dense model) */
    int32_t zero;                  /* ZeRO stage 0, 1 or 3 */
    int32_t microbatch_size, microbatches; /* microbatches: per step (a for paci) */
    int32_t accumulation;                  /* pipeline.accumulation it ran */
    int32_t steps;                         /* optimizer steps simulated */
    char   *recompute;
    double  tokens_per_s; /* whole job */
    int64_t step_time_ns;
    double  mfu;
    int64_t peak_memory_bytes; /* largest stage */
    int32_t delta_max;
} SimPlanRow;

typedef struct {
    char   *scenario;  /* the file */
    GStrv   overrides; /* the user's "section.key=value" (--set), applied before a row's */
    GStrv   schedules; /* SimPlanOptions.schedules, in their order */
    int32_t gpus, global_batch;
    int64_t memory_bytes;   /* one device's, less the headroom: what a row may use */
    int64_t headroom_bytes; /* SimPlanOptions.headroom_bytes */
    GArray *rows;           /* (SimPlanRow) fitting layouts, best throughput first */
    GArray *over_memory;    /* (SimPlanRow) simulated layouts whose peak exceeded memory_bytes,
                               in the order they were simulated */
    int64_t n_layouts;      /* candidates enumerated */
    int64_t n_static;       /* dropped: the memory floor (training state plus one micro-batch's
                               activations, over the stages) exceeds memory */
    int64_t n_partition;    /* dropped: no layer split fits memory (before simulating) */
    int64_t n_bound;        /* dropped: its throughput bound reaches neither the best top rows
                               nor its schedule's best so far (before simulating) */
    int64_t n_simulated;
    int64_t n_over_memory; /* simulated, but the peak exceeded memory */
    int64_t n_failed;      /* any other error (its first message kept) */
    char   *first_error;
} SimPlan;

/* Runs the search on @path with @overrides (the scenario's [model], [hardware] and the
 * [parallel] keys the search does not set stay). Returns: (transfer full), or NULL with
 * @error set when the scenario cannot be read, has no [hardware] or no layout is possible
 * (bad --gpus, batch). */
SimPlan *sim_plan_run(const char *path, const char *const *overrides, const SimPlanOptions *options,
                      GError **error);
void     sim_plan_free(SimPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimPlan, sim_plan_free)

/* The pacer-sim command line that simulates @row alone: @plan's scenario file with the
 * user's --set overrides (those the row does not set) and then every key the search set for
 * the row. Returns: (transfer full). */
char *sim_plan_row_command(const SimPlan *plan, const SimPlanRow *row);

/* The best @top rows as a table, with the counts, the best row of each schedule (its rank in
 * the whole ranking) and the best row's command line. Returns: (transfer full). */
char *sim_plan_format(const SimPlan *plan, int32_t top);
/* The same as one JSON object ("rows": the best @top, each with its overrides as "set", an
 * object of "section.key": value, and "command"; "best_per_schedule": one object per schedule,
 * "fits" and, when it does, "rank" and the row's members). Returns: (transfer full). */
JsonNode *sim_plan_build_json(const SimPlan *plan, int32_t top);

/* Writes every simulated layout to @path as CSV (sim-plan-csv.c; docs/cluster.md lists the
 * columns): the fitting rows by rank, then those over memory (rank empty, fits 0), each with
 * the memory limit, so that plots/plan.gp draws the search from this file alone. Atomic
 * (temporary file and rename). Returns FALSE with @error (PP_IO_ERROR) when it cannot write. */
gboolean sim_plan_write_csv(const SimPlan *plan, const char *path, GError **error);

G_END_DECLS
