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

/* Common program of kind @info over @n_mb micro-batches: warmup min(N-s, n_mb) F, then (BW, F)
 * pairs, then the remaining BWs; U after every @every-th BW and after the last BW when n_mb
 * is not a multiple of @every, so every gradient is applied. F/BW ops carry step mb / @every,
 * U ops their index. Weights and weight copies come from the record. */
static PpSchedule *pp_sched_async_program(const PpSchedKindInfo *info, int32_t n_stages,
                                          int32_t n_mb, int32_t every) {
    PpSchedule *sched = pp_schedule_alloc(info->name, n_stages, info->min_chunks);
    sched->n_mb = n_mb;
    sched->mb_per_step = every;
    sched->n_steps = (n_mb + every - 1) / every;
    sched->synchronous = info->sync == PP_SCHED_SYNC;
    sched->weight_mode = info->weights;
    for (int32_t s = 0; s < n_stages; s++) {
        int32_t warmup = MIN(n_stages - s, n_mb);
        int32_t nf = 0, nb = 0, nu = 0;
        sched->n_buffers[s] = warmup;
        sched->n_weight_versions[s] = pp_sched_kind_weight_copies(info, n_stages, s);
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

/* Builds kind @info: k = pp_sched_kind_mb_per_step() backwards per update (its batch rule:
 * pipedream 1, 2bw m, async-1f1b its fixed a = 1, paci a), n_steps k micro-batches. */
static PpSchedule *pp_sched_async_build(const PpSchedKindInfo *info, const PpScheduleParams *params,
                                        GError **error) {
    const char   *kind = info->name;
    const int32_t every =
        pp_sched_kind_mb_per_step(info, params->n_microbatches, params->accumulation);
    const char *every_name =
        info->batch == PP_BATCH_MICROBATCHES ? "n_microbatches" : "accumulation";
    if (!pp_sched_check_param(kind, "n_stages", params->n_stages, 1, PP_ASYNC_MAX_STAGES, error) ||
        !pp_sched_check_param(kind, "n_steps", params->n_steps, 1, G_MAXINT32, error) ||
        !pp_sched_check_param(kind, every_name, every, 1, G_MAXINT32, error) ||
        !pp_sched_check_size(kind, (int64_t)params->n_steps * every, params->n_stages, error))
        return NULL;
    return pp_sched_async_program(info, params->n_stages, params->n_steps * every, every);
}

static PpSchedule *pp_sched_build_pipedream(const PpScheduleParams *params, GError **error) {
    return pp_sched_async_build(&pp_sched_kind_pipedream, params, error);
}

/* Stage s needs the versions of its in-flight forwards plus the current one; between a
 * micro-batch's F and BW the stage updates ceil((N-1-s)/m) times, so two versions suffice
 * exactly when m >= N-1 (the record's micro-batch rule). */
static PpSchedule *pp_sched_build_2bw(const PpScheduleParams *params, GError **error) {
    return pp_sched_async_build(&pp_sched_kind_2bw, params, error);
}

static PpSchedule *pp_sched_build_async_1f1b(const PpScheduleParams *params, GError **error) {
    return pp_sched_async_build(&pp_sched_kind_async_1f1b, params, error);
}

static PpSchedule *pp_sched_build_paci(const PpScheduleParams *params, GError **error) {
    return pp_sched_async_build(&pp_sched_kind_paci, params, error);
}

/* --- records --- */

/* The asynchronous kinds share the program shape: one chunk, no flush. */
#define PP_ASYNC_KIND(kind_name, fn, text, rule, mode)                                             \
    .name = kind_name, .build = fn, .summary = text, .batch = rule, .weights = mode,               \
    .sync = PP_SCHED_ASYNC, .min_chunks = 1, .max_chunks = 1

const PpSchedKindInfo pp_sched_kind_pipedream = {
    PP_ASYNC_KIND("pipedream", pp_sched_build_pipedream,
                  "async 1F1B, update after every backward, weight stashing (N-s versions)",
                  PP_BATCH_SINGLE, PP_WEIGHTS_STASHED),
    .weight_copies = PP_SCHED_COPIES_IN_FLIGHT,
};

const PpSchedKindInfo pp_sched_kind_2bw = {
    PP_ASYNC_KIND("2bw", pp_sched_build_2bw,
                  "PipeDream-2BW: async 1F1B, update every m backwards, two weight versions",
                  PP_BATCH_MICROBATCHES, PP_WEIGHTS_STASHED),
    .weight_copies = 2,
    .mb_min_per_stage = 1,
    .mb_min_offset = -1,
    .mb_min_reason = "so two weight versions cannot hold every in-flight micro-batch's weights "
                     "(or use 'pipedream')",
};

const PpSchedKindInfo pp_sched_kind_async_1f1b = {
    PP_ASYNC_KIND("async-1f1b", pp_sched_build_async_1f1b,
                  "async 1F1B without stashing, update after every backward (PACI with a = 1)",
                  PP_BATCH_ACCUMULATION, PP_WEIGHTS_CURRENT),
    .fixed_accumulation = 1,
    .has_policy = TRUE,
};

const PpSchedKindInfo pp_sched_kind_paci = {
    PP_ASYNC_KIND("paci", pp_sched_build_paci,
                  "PACI: async 1F1B, local accumulation over a backwards, backpressure q < N - s",
                  PP_BATCH_ACCUMULATION, PP_WEIGHTS_CURRENT),
    .has_policy = TRUE,
};
