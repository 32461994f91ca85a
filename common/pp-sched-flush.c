/* SPDX-License-Identifier: MIT
 * pp-sched-flush.c: the synchronous flush schedules. gpipe: per step all F then all BW, in
 * micro-batch order. 1f1b (PipeDream-Flush / Megatron / DeepSpeed): per step, stage s runs
 * min(N-s-1, m) warmup F, then (F, BW) pairs, then the cooldown BWs. Both end every step
 * with U on every stage, so pipelined math equals unpipelined math.
 */
#include "pp-error.h"
#include "pp-sched-gen.h"

/* Limits shared by every generator in this file. */
#define PP_FLUSH_MAX_STAGES 4096

static gboolean pp_sched_flush_check(const PpScheduleParams *params, const PpSchedKindInfo *info,
                                     GError **error) {
    const char *kind = info->name;
    return pp_sched_check_param(kind, "n_stages", params->n_stages, 1, PP_FLUSH_MAX_STAGES,
                                error) &&
           pp_sched_check_param(kind, "n_microbatches", params->n_microbatches, 1, G_MAXINT32,
                                error) &&
           pp_sched_check_param(kind, "n_steps", params->n_steps, 1, G_MAXINT32, error) &&
           pp_sched_check_size(kind, (int64_t)params->n_steps * params->n_microbatches,
                               params->n_stages, error);
}

static PpSchedule *pp_sched_flush_alloc(const PpScheduleParams *params,
                                        const PpSchedKindInfo  *info) {
    PpSchedule *sched = pp_schedule_alloc(info->name, params->n_stages, info->min_chunks);
    sched->n_steps = params->n_steps;
    sched->mb_per_step = params->n_microbatches;
    sched->n_mb = params->n_steps * params->n_microbatches;
    sched->synchronous = info->sync == PP_SCHED_SYNC;
    sched->weight_mode = info->weights;
    return sched;
}

static PpSchedule *pp_sched_build_gpipe(const PpScheduleParams *params, GError **error) {
    if (!pp_sched_flush_check(params, &pp_sched_kind_gpipe, error))
        return NULL;
    PpSchedule *sched = pp_sched_flush_alloc(params, &pp_sched_kind_gpipe);
    int32_t     m = params->n_microbatches;
    for (int32_t s = 0; s < params->n_stages; s++) {
        sched->n_buffers[s] = m;
        for (int32_t t = 0; t < params->n_steps; t++) {
            for (int32_t k = 0; k < m; k++)
                pp_sched_emit(sched, PP_OP_FORWARD, s, t * m + k, 0, t);
            for (int32_t k = 0; k < m; k++)
                pp_sched_emit(sched, PP_OP_BACKWARD_FULL, s, t * m + k, 0, t);
            pp_sched_emit(sched, PP_OP_UPDATE, s, -1, -1, t);
        }
    }
    return sched;
}

static PpSchedule *pp_sched_build_1f1b(const PpScheduleParams *params, GError **error) {
    if (!pp_sched_flush_check(params, &pp_sched_kind_1f1b, error))
        return NULL;
    PpSchedule *sched = pp_sched_flush_alloc(params, &pp_sched_kind_1f1b);
    int32_t     n = params->n_stages, m = params->n_microbatches;
    for (int32_t s = 0; s < n; s++) {
        int32_t warmup = MIN(n - s - 1, m);
        sched->n_buffers[s] = MIN(n - s, m);
        for (int32_t t = 0; t < params->n_steps; t++) {
            int32_t base = t * m, nf = 0, nb = 0;
            while (nf < warmup)
                pp_sched_emit(sched, PP_OP_FORWARD, s, base + nf++, 0, t);
            while (nf < m) {
                pp_sched_emit(sched, PP_OP_FORWARD, s, base + nf++, 0, t);
                pp_sched_emit(sched, PP_OP_BACKWARD_FULL, s, base + nb++, 0, t);
            }
            while (nb < m)
                pp_sched_emit(sched, PP_OP_BACKWARD_FULL, s, base + nb++, 0, t);
            pp_sched_emit(sched, PP_OP_UPDATE, s, -1, -1, t);
        }
    }
    return sched;
}

/* --- records --- */

const PpSchedKindInfo pp_sched_kind_gpipe = {
    PP_SCHED_KIND_FLUSH("gpipe", pp_sched_build_gpipe, "all F then all BW per step, flush"),
    .min_chunks = 1,
    .max_chunks = 1,
};

const PpSchedKindInfo pp_sched_kind_1f1b = {
    PP_SCHED_KIND_FLUSH("1f1b", pp_sched_build_1f1b,
                        "1F1B with flush (PipeDream-Flush, Megatron, DeepSpeed)"),
    .min_chunks = 1,
    .max_chunks = 1,
};
