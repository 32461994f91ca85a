/* SPDX-License-Identifier: MIT
 * pp-policy.c: PACI's local decision rule (backward first, then a forward while the
 * in-flight count is below N - stage, an update after every a-th backward) and the
 * recorder that turns a policy run into the equivalent static program of its kind.
 */
#include "pp-policy.h"

#include "pp-error.h"

void pp_policy_state_init(PpPolicyState *state, int32_t stage, int32_t n_stages,
                          int32_t accumulation, int32_t n_mb) {
    PP_ASSERT(n_stages >= 1 && stage >= 0 && stage < n_stages);
    PP_ASSERT(accumulation >= 1 && n_mb >= 0);
    *state = (PpPolicyState){
        .stage = stage,
        .n_stages = n_stages,
        .accumulation = accumulation,
        .n_mb = n_mb,
        .next_f_mb = 0,
        .q = 0,
        .f_input_ready = stage == 0,
        .b_ready_mb = -1,
        .backwards_since_update = 0,
    };
}

PpOpKind pp_policy_paci_next(const PpPolicyState *state, int32_t *mb) {
    *mb = -1;
    gboolean all_backwarded = state->next_f_mb == state->n_mb && state->q == 0;
    if (state->backwards_since_update == state->accumulation ||
        (all_backwarded && state->backwards_since_update > 0))
        return PP_OP_UPDATE;
    if (state->b_ready_mb >= 0) {
        *mb = state->b_ready_mb;
        return PP_OP_BACKWARD_FULL;
    }
    if (state->q < state->n_stages - state->stage && state->f_input_ready &&
        state->next_f_mb < state->n_mb) {
        *mb = state->next_f_mb;
        return PP_OP_FORWARD;
    }
    return PP_OP_N_KINDS;
}

void pp_policy_state_apply(PpPolicyState *state, PpOpKind kind, int32_t mb) {
    switch (kind) {
    case PP_OP_FORWARD:
        PP_ASSERT(mb == state->next_f_mb && mb < state->n_mb); // forwards run in mb order
        state->next_f_mb++;
        state->q++;
        break;
    case PP_OP_BACKWARD_FULL:
        PP_ASSERT(state->q > 0 && mb >= 0 && mb < state->next_f_mb);
        state->q--;
        state->backwards_since_update++;
        PP_ASSERT(state->backwards_since_update <= state->accumulation);
        break;
    case PP_OP_UPDATE:
        PP_ASSERT(state->backwards_since_update > 0);
        state->backwards_since_update = 0;
        break;
    default:
        PP_ABORT("a PACI policy runs F, BW and U ops, not %s", pp_op_kind_name(kind));
    }
}

gboolean pp_policy_state_done(const PpPolicyState *state) {
    return state->next_f_mb == state->n_mb && state->q == 0 && state->backwards_since_update == 0;
}

/* --- recorder --- */

struct _PpPolicyRecorder {
    PpSchedule *sched; /* being filled; NULL once finished */
    int32_t     accumulation;
    int32_t    *n_updates; /* (n_stages) U ops recorded per stage */
};

PpPolicyRecorder *pp_policy_recorder_new(const PpSchedKindInfo *info, int32_t n_stages,
                                         int32_t accumulation, int32_t n_mb) {
    PP_ASSERT(info != NULL && info->has_policy);
    PP_ASSERT(info->weights == PP_WEIGHTS_CURRENT && info->sync == PP_SCHED_ASYNC);
    PP_ASSERT(n_stages >= 1 && accumulation >= 1 && n_mb >= 1);
    PpPolicyRecorder *rec = g_new0(PpPolicyRecorder, 1);
    rec->sched = pp_schedule_alloc(info->name, n_stages, 1);
    rec->accumulation = accumulation;
    rec->n_updates = g_new0(int32_t, n_stages);
    PpSchedule *sched = rec->sched;
    sched->n_mb = n_mb;
    sched->mb_per_step = accumulation;
    sched->n_steps = (n_mb + accumulation - 1) / accumulation;
    sched->synchronous = FALSE;
    sched->weight_mode = PP_WEIGHTS_CURRENT;
    for (int32_t s = 0; s < n_stages; s++)
        sched->n_buffers[s] = MIN(n_stages - s, n_mb);
    return rec;
}

void pp_policy_recorder_free(PpPolicyRecorder *rec) {
    if (rec == NULL)
        return;
    pp_schedule_free(rec->sched);
    g_free(rec->n_updates);
    g_free(rec);
}

void pp_policy_recorder_record(PpPolicyRecorder *rec, int32_t stage, PpOpKind kind, int32_t mb) {
    PP_ASSERT(rec->sched != NULL); // not finished yet
    PP_ASSERT(stage >= 0 && stage < rec->sched->n_stages);
    PP_ASSERT(kind == PP_OP_FORWARD || kind == PP_OP_BACKWARD_FULL || kind == PP_OP_UPDATE);
    PpOp op = {.kind = kind, .stage = stage, .mb = -1, .chunk = -1};
    if (kind == PP_OP_UPDATE) {
        op.step = rec->n_updates[stage]++;
    } else {
        op.mb = mb;
        op.chunk = 0;
        op.step = mb / rec->accumulation; // the window of a backwards it falls in
    }
    pp_schedule_append(rec->sched, &op);
}

PpSchedule *pp_policy_recorder_finish(PpPolicyRecorder *rec, GError **error) {
    PP_ASSERT(rec->sched != NULL);
    g_autoptr(PpSchedule) sched = g_steal_pointer(&rec->sched);
    if (!pp_schedule_finish(sched, error))
        return NULL;
    return g_steal_pointer(&sched);
}
