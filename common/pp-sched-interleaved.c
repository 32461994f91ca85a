/* SPDX-License-Identifier: MIT
 * pp-sched-interleaved.c: Megatron's interleaved 1F1B with v = n_chunks model chunks per
 * device (virtual stage vs = chunk * N + stage). Per step, a stage's k-th forward (k over
 * m * v) runs chunk (k / N) % v of micro-batch (k / (N v)) N + k % N, its k-th backward the
 * same micro-batch on chunk v - 1 - (k / N) % v. Warmup min(2(N-s-1) + (v-1)N, m v) forwards,
 * then (F, BW) pairs, then the cooldown; U at the end of every step (synchronous).
 */
#include "pp-error.h"
#include "pp-sched-gen.h"

#define PP_INTERLEAVED_MAX_STAGES 4096

static PpSchedule *pp_sched_build_interleaved(const PpScheduleParams *params, GError **error) {
    const PpSchedKindInfo *info = &pp_sched_kind_interleaved;
    const char            *kind = info->name;
    if (!pp_sched_check_param(kind, "n_stages", params->n_stages, 1, PP_INTERLEAVED_MAX_STAGES,
                              error) ||
        !pp_sched_check_param(kind, "n_chunks", params->n_chunks, info->min_chunks,
                              info->max_chunks, error) ||
        !pp_sched_check_param(kind, "n_microbatches", params->n_microbatches, 1, G_MAXINT32,
                              error) ||
        !pp_sched_check_param(kind, "n_steps", params->n_steps, 1, G_MAXINT32, error) ||
        !pp_sched_check_size(kind, (int64_t)params->n_steps * params->n_microbatches,
                             (int64_t)params->n_stages * params->n_chunks, error))
        return NULL;
    /* m % N == 0: the record's rule, checked by pp_schedule_new() before this runs */
    int32_t n = params->n_stages, v = params->n_chunks, m = params->n_microbatches;
    PP_ASSERT(m % n == 0);
    PpSchedule *sched = pp_schedule_alloc(kind, n, v);
    sched->n_steps = params->n_steps;
    sched->mb_per_step = m;
    sched->n_mb = params->n_steps * m;
    sched->synchronous = info->sync == PP_SCHED_SYNC;
    sched->weight_mode = info->weights;
    int32_t units = m * v; // (mb, chunk) forwards per stage and step
    for (int32_t s = 0; s < n; s++) {
        int32_t warmup = MIN(2 * (n - s - 1) + (v - 1) * n, units);
        sched->n_buffers[s] = MIN(warmup + 1, units);
        for (int32_t t = 0; t < params->n_steps; t++) {
            int32_t base = t * m, nf = 0, nb = 0;
            while (nf < units || nb < units) {
                gboolean forward = nf < units && (nf < warmup || nb == nf - warmup);
                int32_t  k = forward ? nf++ : nb++;
                int32_t  group = (k / n) % v;
                int32_t  mb = base + (k / (n * v)) * n + k % n;
                if (forward)
                    pp_sched_emit(sched, PP_OP_FORWARD, s, mb, group, t);
                else
                    pp_sched_emit(sched, PP_OP_BACKWARD_FULL, s, mb, v - 1 - group, t);
            }
            pp_sched_emit(sched, PP_OP_UPDATE, s, -1, -1, t);
        }
    }
    return sched;
}

const PpSchedKindInfo pp_sched_kind_interleaved = {
    PP_SCHED_KIND_FLUSH("interleaved", pp_sched_build_interleaved,
                        "Megatron interleaved 1F1B, n_chunks chunks per device, m % N == 0"),
    .min_chunks = 1,
    .max_chunks = 64,
    .mb_multiple_of_stages = TRUE,
    .plan_chunks = {2, 4, 8}, /* v = 1 is 1f1b */
};
