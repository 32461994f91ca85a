/* SPDX-License-Identifier: MIT
 * pp-policy.h: schedules as local decision rules. PACI's backpressure is a policy a stage
 * evaluates at run time from its own state (inputs arrived, in-flight count q, accumulation
 * counter); a PpPolicyRecorder turns the ops a policy run executed into a finished
 * PpSchedule of the kind that ran ("paci", or "async-1f1b", PACI with a = 1: the registry's
 * kinds with has_policy), the program the executor replays. The simulator drives the policy
 * in dynamic mode; so can the executor, on heterogeneous devices.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-schedule.h"
#include "pp-types.h"

G_BEGIN_DECLS

/* What stage @stage knows when it picks its next op. The driver owns f_input_ready and
 * b_ready_mb (they depend on messages); pp_policy_state_apply() updates the rest. */
typedef struct {
    int32_t  stage;         /* 0-indexed; stage 0 receives the data */
    int32_t  n_stages;      /* N */
    int32_t  accumulation;  /* a: backwards per local update */
    int32_t  n_mb;          /* micro-batches in the run */
    int32_t  next_f_mb;     /* next micro-batch to forward (forwards run in mb order) */
    int32_t  q;             /* forwards whose backward has not run yet */
    gboolean f_input_ready; /* activation of next_f_mb arrived (always TRUE on stage 0) */
    int32_t  b_ready_mb;    /* lowest mb whose gradient (on the last stage: whose F) is ready
                               and whose BW has not run; -1 if none */
    int32_t backwards_since_update;
} PpPolicyState;

/* Sets @state to the start of a run: nothing forwarded, nothing ready but stage 0's input. */
void pp_policy_state_init(PpPolicyState *state, int32_t stage, int32_t n_stages,
                          int32_t accumulation, int32_t n_mb);

/* PACI's rule. Returns, in this order of priority:
 * PP_OP_UPDATE when backwards_since_update == accumulation, or when the stage has run every
 * backward of the run and a partial window is left (backwards_since_update > 0, so every
 * gradient is applied: ceil(n_mb / a) updates per stage);
 * PP_OP_BACKWARD_FULL with *mb = b_ready_mb when a gradient is ready (backward first);
 * PP_OP_FORWARD with *mb = next_f_mb when q < N - stage (backpressure: stage 0 holds at most
 * N micro-batches, the last stage 1), its input is ready and next_f_mb < n_mb;
 * PP_OP_N_KINDS otherwise (wait; *mb = -1). */
PpOpKind pp_policy_paci_next(const PpPolicyState *state, int32_t *mb);

/* Advances @state past op @kind on micro-batch @mb (F: next_f_mb and q up; BW: q down,
 * backwards_since_update up; U: backwards_since_update to 0). Does not touch
 * f_input_ready and b_ready_mb. */
void pp_policy_state_apply(PpPolicyState *state, PpOpKind kind, int32_t mb);

/* TRUE when the stage has forwarded, backwarded and applied every micro-batch. */
gboolean pp_policy_state_done(const PpPolicyState *state);

/* --- recording a policy run as a program --- */

typedef struct _PpPolicyRecorder PpPolicyRecorder;

/* Returns: (transfer full): a recorder for a policy run of kind @info (a registry record with
 * has_policy) of @n_mb micro-batches on @n_stages stages with accumulation @accumulation
 * (all >= 1). */
PpPolicyRecorder *pp_policy_recorder_new(const PpSchedKindInfo *info, int32_t n_stages,
                                         int32_t accumulation, int32_t n_mb);
void              pp_policy_recorder_free(PpPolicyRecorder *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PpPolicyRecorder, pp_policy_recorder_free)

/* Appends op @kind (F, BW or U; @mb -1 for U) that @stage executed, in execution order. */
void pp_policy_recorder_record(PpPolicyRecorder *rec, int32_t stage, PpOpKind kind, int32_t mb);

/* Turns the recorded ops into a finished, validated schedule of the recorder's kind (same
 * fields as that kind's static generator: n_buffers min(N-s, n_mb), one weight version,
 * current weights). The recorder is empty afterwards and accepts no more ops.
 * Returns: (transfer full), or NULL with @error set when the run is not a valid program
 * (a micro-batch not run on every stage, ...). */
PpSchedule *pp_policy_recorder_finish(PpPolicyRecorder *rec, GError **error);

G_END_DECLS
