/* SPDX-License-Identifier: MIT
 * pp-schedule.h: PpSchedule, the one source of truth for what every stage runs.
 * A generator (pp-sched-*.c, looked up by name in pp-sched-registry.c) returns per-stage op
 * programs; pp_schedule_finish() derives the dependency graph once and validates it. The
 * simulator and the executor borrow the result read-only (const PpSchedule *).
 *
 * Programs hold compute ops only (F, B, W, BW, U). Communication is implied by dependencies
 * that cross devices: F(mb, vs) needs F(mb, vs-1); B/BW(mb, vs) needs B/BW(mb, vs+1) and
 * F(mb, vs); W(mb, vs) needs B(mb, vs); every op needs the op before it in its program.
 * "vs" is the virtual stage (model chunk position along the pipeline): 0..n_vstages-1.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-types.h"

G_BEGIN_DECLS

typedef struct _PpSchedKindInfo PpSchedKindInfo;

/* Parameters of a generator. Costs are used only by generators that search (zb-1p, zb-2p);
 * others ignore them. */
typedef struct {
    const PpSchedKindInfo *kind; /* the registry's record (pp_sched_kind_lookup(); the
                                    scenario's PpPipelineParams.kind) */
    int32_t n_stages;            /* devices N >= 1 */
    int32_t n_chunks;            /* model chunks per device v >= 1 (interleaved); 1 otherwise */
    int32_t n_microbatches;      /* m: micro-batches per optimizer step (flush, 2bw) */
    int32_t accumulation;        /* a: backwards per local update (async-1f1b = 1, paci) */
    int32_t n_steps;             /* optimizer steps in the run >= 1 */
    int64_t f_ns, b_ns, w_ns, comm_ns; /* per-chunk op costs for searching generators;
                                          b_ns is the B half when split, w_ns the W half */
    const char *order_file;            /* custom: CSV of per-stage op orders (nullable otherwise) */
    double      mem_w_fraction;        /* zb-1p, zb-2p: M_W / M_F in [0, 1], the share of a micro-
                                          batch's activations that only its W frees (B frees the
                                          rest); 0: whole units, held from F until W */
} PpScheduleParams;

/* Programs of the built-in kinds cover the whole run (n_steps steps). Flush kinds (gpipe,
 * 1f1b, interleaved, zb-*) end every step of m micro-batches with U on every stage. The
 * asynchronous kinds run one 1F1B program without flush and put U after every k-th BW
 * (pipedream and async-1f1b: k = 1, n_mb = n_steps; 2bw: k = m, n_mb = n_steps m; paci:
 * k = a, n_mb = n_steps a) and, when n_mb is not a multiple of k (policy runs), one final U
 * after the last BW so every gradient is applied: ceil(n_mb / k) updates per stage. Their
 * F/BW ops carry step mb / k. 2bw needs m >= N - 1 (two weight versions cover every
 * in-flight micro-batch only then). */

/* How an asynchronous schedule treats weights at backward time. */
typedef enum {
    PP_WEIGHTS_CURRENT, /* B uses the stage's current weights (flush schedules, async, paci) */
    PP_WEIGHTS_STASHED, /* B uses the version its F used (pipedream, 2bw) */
} PpWeightMode;

typedef struct _PpSchedule PpSchedule;
struct _PpSchedule {
    char    *kind; /* registry name */
    int32_t  n_stages;
    int32_t  n_chunks;
    int32_t  n_vstages;      /* n_stages * n_chunks */
    int32_t  n_mb;           /* micro-batches in the whole run */
    int32_t  n_steps;        /* optimizer steps in the run */
    int32_t  mb_per_step;    /* micro-batches per optimizer step (per stage, for async) */
    gboolean split_backward; /* TRUE: B and W ops; FALSE: BW ops */
    gboolean synchronous;    /* TRUE: every stage updates at the same step boundary
                                (flush); pipelined == unpipelined math */
    PpWeightMode weight_mode;
    int32_t     *vstage_stage;      /* (n_vstages) device that runs virtual stage vs */
    int32_t     *vstage_chunk;      /* (n_vstages) chunk index of vs on its device */
    int32_t     *n_buffers;         /* (n_stages) declared peak in-flight (mb, chunk) units */
    int32_t     *n_weight_versions; /* (n_stages) declared weight copies kept */
    int32_t     *n_ops;             /* (n_stages) program lengths */
    PpOp       **programs;          /* (n_stages)(n_ops[stage]) ordered programs */

    /* Derived by pp_schedule_finish(); generators leave them NULL. */
    int32_t *op_offset;   /* (n_stages + 1) prefix sums of n_ops: flat op id =
                             op_offset[stage] + index */
    int32_t *dep_offset;  /* (n_ops_total + 1) CSR of cross-op dependencies */
    PpOpRef *deps;        /* at most 2 per op; the in-program predecessor is implied */
    int32_t *succ_offset; /* (n_ops_total + 1) CSR of successors (cross-op deps) */
    PpOpRef *succ;
    int32_t *version; /* (n_ops_total) number of U ops before the op in its stage
                         program: the stage's weight version when the op starts */
    int32_t *mb_ops;  /* (n_mb, n_vstages, PP_OP_N_KINDS) flat id of kind K of
                         (mb, vs) at [(mb * n_vstages + vs) * PP_OP_N_KINDS + K];
                         -1 when absent (the U column is always -1) */
};

/* --- construction --- */

/* Builds the schedule of kind @params->kind, derives its dependencies and validates it.
 * Returns: (transfer full): a finished schedule, or NULL with @error set
 * (PP_SCHEDULE_ERROR_UNKNOWN_KIND, naming the valid kinds, when @params->kind is NULL). */
PpSchedule *pp_schedule_new(const PpScheduleParams *params, GError **error);

/* Allocates an empty schedule with @n_stages programs and vstage tables for @n_chunks chunks
 * laid out by the registry placement of @kind (pp_placement_vstage(); Megatron's layout vs =
 * chunk * n_stages + stage for PP_PLACEMENT_LOOP; generators may rewrite the tables).
 * For generators. Returns: (transfer full). */
PpSchedule *pp_schedule_alloc(const char *kind, int32_t n_stages, int32_t n_chunks);

/* Appends @op to the program of op->stage. For generators. */
void pp_schedule_append(PpSchedule *sched, const PpOp *op);

/* Derives the dependency graph and runs pp_schedule_validate(). Called by pp_schedule_new()
 * after the generator; generators do not call it. */
gboolean pp_schedule_finish(PpSchedule *sched, GError **error);

void pp_schedule_free(PpSchedule *sched);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PpSchedule, pp_schedule_free)

/* --- validation (the contract both consumers rely on) --- */

/* Checks: exactly one F and one BW (or one B and one W) per (mb, vstage); no op twice;
 * on each stage F before its B/BW and B before its W; the graph is acyclic (Kahn);
 * peak in-flight per stage <= n_buffers. Returns FALSE and sets @error with a message that
 * names the offending op ("stage 2 op 17 B(mb=5, chunk=0)"). A cycle is reported as
 * PP_SCHEDULE_ERROR_DEADLOCK naming an op that lies on the cycle.
 * In-flight counting: pp_op_inflight_change() (pp-types.h). Requires a schedule that went through
 * pp_schedule_finish(). */
gboolean pp_schedule_validate(const PpSchedule *sched, GError **error);

/* Peak number of (mb, chunk) units in flight on @stage (pp_op_inflight_change(), as for
 * validation) over its program. Works on unfinished schedules too (generators use it to
 * declare n_buffers). */
int32_t pp_schedule_peak_inflight(const PpSchedule *sched, int32_t stage);
/* The same count per virtual stage: the peak number of each virtual stage's micro-batches
 * between their F and the op that frees their activations (an executor's activation slots).
 * Returns: (transfer full) (n_vstages). */
int32_t *pp_schedule_vstage_peak_inflight(const PpSchedule *sched);

/* --- queries --- */

static inline int32_t pp_schedule_n_ops_total(const PpSchedule *sched) {
    return sched->op_offset[sched->n_stages];
}
/* Flat id of an op reference. */
static inline int32_t pp_schedule_op_id(const PpSchedule *sched, PpOpRef ref) {
    return sched->op_offset[ref.stage] + ref.index;
}
static inline const PpOp *pp_schedule_op(const PpSchedule *sched, PpOpRef ref) {
    return &sched->programs[ref.stage][ref.index];
}
/* Cross-op dependencies of op @ref (excluding its program predecessor). Sets *n (0..2).
 * Returns: (transfer none). */
const PpOpRef *pp_schedule_deps(const PpSchedule *sched, PpOpRef ref, int32_t *n);
/* Ops that depend on @ref through a cross-op edge. Returns: (transfer none). */
const PpOpRef *pp_schedule_succs(const PpSchedule *sched, PpOpRef ref, int32_t *n);
/* Reference of flat op id @id (0..n_ops_total-1). */
PpOpRef pp_schedule_op_ref(const PpSchedule *sched, int32_t id);
/* Flat id of op @kind (F, B, W or BW) of (@mb, @vstage), or -1 when the schedule has none. */
int32_t pp_schedule_find_op(const PpSchedule *sched, PpOpKind kind, int32_t mb, int32_t vstage);
/* Weight version (number of updates its stage had applied) that op @ref computes with:
 * F and U use the stage's current version; B, BW and W use the current version under
 * PP_WEIGHTS_CURRENT and the version the same (mb, chunk)'s F used under PP_WEIGHTS_STASHED
 * (pp_schedule_backward_version()). */
int32_t pp_schedule_version_used(const PpSchedule *sched, PpOpRef ref);
/* Drift Δ of micro-batch @mb on virtual stage @vstage: the version its B (or BW) computes
 * with minus the version its F used (pp_schedule_delta_ids()). The one definition of Δ: the
 * simulator's reports, `pacer-sim replay` and the executor's log all use it. */
int32_t pp_schedule_delta(const PpSchedule *sched, int32_t mb, int32_t vstage);

/* pp_schedule_version_used() of backward op @b_id (B, BW or W, flat id) of the unit whose F
 * has flat id @f_id, without the lookup (per-op loops that already know both ids). */
static inline int32_t pp_schedule_backward_version(const PpSchedule *sched, int32_t f_id,
                                                   int32_t b_id) {
    return sched->weight_mode == PP_WEIGHTS_STASHED ? sched->version[f_id] : sched->version[b_id];
}
/* pp_schedule_delta() of the unit whose F has flat id @f_id and whose B (or BW) has @b_id. */
static inline int32_t pp_schedule_delta_ids(const PpSchedule *sched, int32_t f_id, int32_t b_id) {
    return pp_schedule_backward_version(sched, f_id, b_id) - sched->version[f_id];
}
/* Virtual stage of (stage, chunk). */
int32_t pp_schedule_vstage(const PpSchedule *sched, int32_t stage, int32_t chunk);
/* Formats "F(mb=3, chunk=0) on stage 1" into @buf. Returns @buf. */
char *pp_op_describe(const PpOp *op, char *buf, size_t size);
/* Writes the programs as a custom order CSV (stage,index,op,mb,chunk): the format the
 * "custom" generator reads. Returns FALSE and sets @error on I/O failure. */
gboolean pp_schedule_write_order(const PpSchedule *sched, const char *path, GError **error);

/* --- registry --- */

typedef PpSchedule *(*PpSchedBuildFn)(const PpScheduleParams *params, GError **error);

/* Where virtual stage vs runs, with N stages: chunk c = vs / N, position i = vs % N. */
typedef enum {
    PP_PLACEMENT_LOOP, /* stage i for every chunk (Megatron's interleaved layout) */
    PP_PLACEMENT_V,    /* even chunks on stage i, odd chunks on stage N - 1 - i: the model
                          goes down the stages and back up (ZB-V, DualPipe-V) */
} PpPlacement;

/* How a kind forms one optimizer step (per stage, for asynchronous kinds) from the
 * micro-batch keys: the scenario's global batch is microbatch_size times this count. */
typedef enum {
    PP_BATCH_MICROBATCHES, /* m = pipeline.microbatches (flush kinds, 2bw, custom) */
    PP_BATCH_ACCUMULATION, /* a = pipeline.accumulation backwards per local update (paci) */
    PP_BATCH_SINGLE,       /* 1: an update after every backward (pipedream) */
} PpBatchRule;

/* Whether every stage updates at the same step boundary. */
typedef enum {
    PP_SCHED_ASYNC,          /* stages update on their own, no flush */
    PP_SCHED_SYNC,           /* flush: pipelined == unpipelined math */
    PP_SCHED_SYNC_FROM_ORDER /* decided by the order file (custom) */
} PpSchedSync;

/* Chunk counts pacer-sim plan may try for one kind (PpSchedKindInfo.plan_chunks). */
#define PP_SCHED_PLAN_CHUNKS 4

/* PpSchedKindInfo.weight_copies of a kind that keeps one copy per micro-batch in flight:
 * N - s on stage s (pipedream). */
#define PP_SCHED_COPIES_IN_FLIGHT (-1)

/* One schedule kind and its rules, exported by the file of its generator
 * (pp_sched_kind_paci in pp-sched-async.c, ...) and listed in pp-sched-registry.c. Every
 * consumer (scenario checks, sweeps, the planner, the simulator's and the executor's dynamic
 * mode) asks these fields instead of comparing names, and generators read their fixed
 * properties from them. pp_schedule_new() asserts that a built schedule agrees. */
struct _PpSchedKindInfo {
    const char    *name;
    PpSchedBuildFn build;
    const char    *summary; /* one line for --help */
    PpBatchRule    batch;
    /* > 0: pipeline.accumulation must equal it (async-1f1b: 1, PACI with a = 1); 0: any */
    int32_t fixed_accumulation;
    /* valid pipeline.chunks (model chunks per device) */
    int32_t min_chunks, max_chunks;
    /* The micro-batches per step k (pp_sched_kind_mb_per_step()) it accepts on N stages, a
     * rule applied by pp_sched_kind_check_microbatches() alone: k % N == 0 when
     * mb_multiple_of_stages (interleaved); k >= mb_min_per_stage N + mb_min_offset (2bw:
     * N - 1, dualpipe-v: 2N); mb_min_reason (nullable) says why, in the error message. */
    gboolean    mb_multiple_of_stages;
    int32_t     mb_min_per_stage, mb_min_offset;
    const char *mb_min_reason;
    /* dynamic mode runs it live: PACI's backpressure policy with
     * a = pp_sched_kind_mb_per_step() (async-1f1b: a = 1) */
    gboolean     has_policy;
    PpWeightMode weights; /* stashing (pipedream, 2bw) or current weights */
    /* weight copies a stage keeps (PpSchedule.n_weight_versions, pp_sched_kind_weight_copies()):
     * 0 means 1; PP_SCHED_COPIES_IN_FLIGHT: N - s */
    int32_t     weight_copies;
    PpSchedSync sync;
    gboolean    needs_order_file; /* reads PpScheduleParams.order_file (custom) */
    /* reads PpScheduleParams' op costs and mem_w_fraction (zb-1p, zb-2p search with them);
     * other generators build the same program for any costs, so one schedule serves every
     * cost model of its shape (pp-sched-cache.h) */
    gboolean    reads_costs;
    PpPlacement placement; /* how pp_schedule_alloc() lays out its virtual stages */
    /* chunk counts pacer-sim plan tries, ascending, 0-terminated; none listed: min_chunks */
    int32_t plan_chunks[PP_SCHED_PLAN_CHUNKS];
};

/* Returns: (transfer none): the registry entry for @name, or NULL. */
const PpSchedKindInfo *pp_sched_kind_lookup(const char *name);
/* Returns: (transfer none): the registered kinds, NULL-terminated, in the order --help and
 * error messages list them. */
const PpSchedKindInfo *const *pp_sched_kinds(void);
/* Returns: (transfer full): "gpipe, 1f1b, ..." for error messages. */
char *pp_sched_kind_names(void);
/* Returns: (transfer full): the names of the kinds with a run-time policy ("async-1f1b, paci"),
 * for error messages. */
char *pp_sched_kind_policy_names(void);
/* Returns: (transfer full): the names of the kinds that run several chunks per device. */
char *pp_sched_kind_multi_chunk_names(void);
/* Micro-batches per optimizer step of kind @info under its batch rule, from the scenario's
 * pipeline.microbatches @microbatches and pipeline.accumulation @accumulation (a fixed
 * accumulation wins over @accumulation). For custom, the order file decides; this is the
 * count the scenario's batch arithmetic uses. */
int32_t pp_sched_kind_mb_per_step(const PpSchedKindInfo *info, int32_t microbatches,
                                  int32_t accumulation);
/* Checks the micro-batches per step @microbatches (pp_sched_kind_mb_per_step()) of kind
 * @info on @n_stages stages against its rule (mb_multiple_of_stages, mb_min_*): the one place
 * that rule is applied, by pp_schedule_new(), the scenario checks and the planner. Returns
 * FALSE and sets PP_SCHEDULE_ERROR_INVALID_PARAMS ("schedule 'interleaved': n_microbatches =
 * 6 is not a multiple of n_stages = 4; ...") otherwise. */
gboolean pp_sched_kind_check_microbatches(const PpSchedKindInfo *info, int32_t n_stages,
                                          int32_t microbatches, GError **error);
/* Weight copies stage @stage of @n_stages keeps under kind @info (its weight_copies). */
int32_t pp_sched_kind_weight_copies(const PpSchedKindInfo *info, int32_t n_stages, int32_t stage);
/* The placement of kind @name (PP_PLACEMENT_LOOP for names the registry does not know). */
PpPlacement pp_sched_kind_placement(const char *name);
/* Device (*@stage) and chunk index on it (*@chunk) of virtual stage @vs under @placement,
 * with @n_stages stages. */
void pp_placement_vstage(PpPlacement placement, int32_t n_stages, int32_t vs, int32_t *stage,
                         int32_t *chunk);

G_END_DECLS
