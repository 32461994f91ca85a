/* SPDX-License-Identifier: MIT
 * pp-sched-async.c: asynchronous 1F1B without flush: pipedream (update after every
 * backward, weight stashing), 2bw (PipeDream-2BW: update every m backwards, two weight
 * versions), async-1f1b (update after every backward, current weights) and paci (update
 * after every a-th backward, current weights, backpressure q < N - s). One program covers
 * the whole run: stage s runs min(N-s, n_mb) warmup F, then (BW, F) pairs, then drains.
 *
 * PACI drift. In stage s's program F(j) (j >= N-s) comes right after BW(j-N+s) and its U,
 * and the backwards between F(j) and BW(j) are BW(j-N+s+1) .. BW(j-1): N-1-s of them. A U
 * follows BW(i) when (i+1) % a == 0, so the updates between F(j) and BW(j) are the
 * multiples of a in the N-1-s consecutive integers j-N+s+2 .. j; as j runs over every
 * residue mod a the maximum is ceil((N-1-s)/a), reached once the pipeline is full. This
 * exceeds the bound floor((N-1)/a) stated by the PACI paper for some (N, a), e.g. N = 8,
 * a = 3, s = 0: ceil(7/3) = 3 > floor(7/3) = 2.
 */
#include "pp-error.h"
#include "pp-sched-gen.h"

#define PP_ASYNC_MAX_STAGES 4096

/* Common program: warmup min(N-s, n_mb) F, then (BW, F) pairs, then the remaining BWs;
 * U after every @every-th BW and after the last BW when n_mb is not a multiple of @every,
 * so every gradient is applied. F/BW ops carry step mb / @every, U ops their index. */
static PpSchedule *pp_sched_async_build(const char *kind, int32_t n_stages, int32_t n_mb,
                                        int32_t every, PpWeightMode mode) {
    PpSchedule *sched = pp_schedule_alloc(kind, n_stages, 1);
    sched->n_mb = n_mb;
    sched->mb_per_step = every;
    sched->n_steps = (n_mb + every - 1) / every;
    sched->synchronous = FALSE;
    sched->weight_mode = mode;
    for (int32_t s = 0; s < n_stages; s++) {
        int32_t warmup = MIN(n_stages - s, n_mb);
        int32_t nf = 0, nb = 0, nu = 0;
        sched->n_buffers[s] = warmup;
        while (nf < warmup) {
            pp_sched_emit(sched, PP_OP_FORWARD, s, nf, 0, nf / every);
            nf++;
        }
        while (nb < n_mb) {
            pp_sched_emit(sched, PP_OP_BACKWARD_FULL, s, nb, 0, nb / every);
            nb++;
            if (nb % every == 0 || nb == n_mb)
                pp_sched_emit(sched, PP_OP_UPDATE, s, -1, -1, nu++);
            if (nf < n_mb) {
                pp_sched_emit(sched, PP_OP_FORWARD, s, nf, 0, nf / every);
                nf++;
            }
        }
    }
    return sched;
}

static gboolean pp_sched_async_check(const char *kind, int32_t n_stages, int32_t n_steps,
                                     int32_t every, const char *every_name, GError **error) {
    return pp_sched_check_param(kind, "n_stages", n_stages, 1, PP_ASYNC_MAX_STAGES, error) &&
           pp_sched_check_param(kind, "n_steps", n_steps, 1, G_MAXINT32, error) &&
           pp_sched_check_param(kind, every_name, every, 1, G_MAXINT32, error) &&
           pp_sched_check_size(kind, (int64_t)n_steps * every, n_stages, error);
}

PpSchedule *pp_sched_build_pipedream(const PpScheduleParams *params, GError **error) {
    if (!pp_sched_async_check("pipedream", params->n_stages, params->n_steps, 1, "accumulation",
                              error))
        return NULL;
    PpSchedule *sched =
        pp_sched_async_build("pipedream", params->n_stages, params->n_steps, 1, PP_WEIGHTS_STASHED);
    for (int32_t s = 0; s < params->n_stages; s++)
        sched->n_weight_versions[s] = params->n_stages - s; // one per micro-batch in flight
    return sched;
}

PpSchedule *pp_sched_build_2bw(const PpScheduleParams *params, GError **error) {
    if (!pp_sched_async_check("2bw", params->n_stages, params->n_steps, params->n_microbatches,
                              "n_microbatches", error))
        return NULL;
    /* Stage s needs the versions of its in-flight forwards plus the current one; between a
     * micro-batch's F and BW the stage updates ceil((N-1-s)/m) times, so two versions
     * suffice exactly when m >= N-1. */
    if (params->n_microbatches < params->n_stages - 1) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '2bw': n_microbatches = %d is below n_stages - 1 = %d, so two "
                    "weight versions cannot hold every in-flight micro-batch's weights; "
                    "valid: n_microbatches >= %d (or use 'pipedream')",
                    params->n_microbatches, params->n_stages - 1, params->n_stages - 1);
        return NULL;
    }
    PpSchedule *sched =
        pp_sched_async_build("2bw", params->n_stages, params->n_steps * params->n_microbatches,
                             params->n_microbatches, PP_WEIGHTS_STASHED);
    for (int32_t s = 0; s < params->n_stages; s++)
        sched->n_weight_versions[s] = 2;
    return sched;
}

PpSchedule *pp_sched_build_async_1f1b(const PpScheduleParams *params, GError **error) {
    if (!pp_sched_async_check("async-1f1b", params->n_stages, params->n_steps, 1, "accumulation",
                              error))
        return NULL;
    return pp_sched_async_build("async-1f1b", params->n_stages, params->n_steps, 1,
                                PP_WEIGHTS_CURRENT);
}

PpSchedule *pp_sched_build_paci(const PpScheduleParams *params, GError **error) {
    if (!pp_sched_async_check("paci", params->n_stages, params->n_steps, params->accumulation,
                              "accumulation", error))
        return NULL;
    return pp_sched_async_build("paci", params->n_stages, params->n_steps * params->accumulation,
                                params->accumulation, PP_WEIGHTS_CURRENT);
}
