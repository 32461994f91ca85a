/* SPDX-License-Identifier: MIT
 * pp-sched-v.c: the V-shape schedules, two chunks per device placed down the stages and back
 * up (PP_PLACEMENT_V: chunk 0 of stage i is virtual stage i, chunk 1 is 2N - 1 - i), with the
 * backward split into B and W, synchronous (U closes every step on every stage).
 *
 * zb-v, the zero-bubble authors' V schedule (Qi et al., "Pipeline Parallelism with
 * Controllable Memory", 2024; the zero-bubble repository's handcrafted ZB-V): with
 * n = max(m, 2N - 1) micro-batches, stage i runs
 *   warmup:   2(N - i) - 1 F0, then i x (F1, F0), then (N - i) x (F1, B1, W1);
 *   steady:   (F0 while any is left, B0, W0, F1, B1, W1) until every F is done;
 *   cooldown: i x (B0, B1), then (N - i) x (B0, W0), then the pending W1's, then the W0's,
 * and with m < 2N - 1 the micro-batches >= m are left out (the pattern stays valid; the
 * gaps they leave are bubble). Chunk units peak at 2N on every stage: N micro-batches of a
 * full stage's activations, 1F1B's peak on stage 0, balanced over the stages. With F = B = W
 * per chunk and no communication every stage is busy from its first op to its last: the
 * longest stage span is 6m(F) exactly when m >= 2N - 1 (the paper's zero bubble).
 *
 * dualpipe-v, DeepSeek's DualPipe cut in half (DeepSeek-V3 report; the DualPipe repository's
 * DualPipeV), m >= 2N: stage i runs
 *   1: 2(N - i - 1) F0;  2: (i + 1) x (F0, F1);  3: (N - i - 1) x (B1, W1, F1);
 *   4: (m - 2N + i + 1) x (F0, B1 W1, F1, B0 W0);  5: (N - i - 1) x (B1 W1, F1, B0 W0);
 *   6: (i + 1) x (B1, B0), whose second half defers W to a FIFO queue;
 *   7: (N - i - 1) x (W, B0 with W deferred);  8: (i + 1) x W.
 * "B W" is a full backward (B then its W at once); the deferred W's run in queue (micro-batch)
 * order. DualPipe overlaps a forward chunk with a backward chunk of another micro-batch to hide
 * expert-parallel communication; the simulator has no such communication and runs each pair
 * back to back (F then B). Peak 2N + 1 chunk units (the repository's PP + 1).
 */
#include "pp-error.h"
#include "pp-sched-gen.h"

#define PP_V_MAX_STAGES 4096
#define PP_V_CHUNKS     2

/* Per-stage counters of the ops emitted so far, per chunk (micro-batch order per kind). */
typedef struct {
    PpSchedule *sched;
    int32_t     stage, step, base, m; /* base: first micro-batch of the step; m per step */
    int32_t     nf[PP_V_CHUNKS], nb[PP_V_CHUNKS], nw[PP_V_CHUNKS];
    /* dualpipe-v: chunks of the deferred W's, oldest first */
    int32_t *queue;
    int32_t  q_head, q_len;
} PpVStage;

/* Emits @kind of the next micro-batch of @chunk, skipping (but counting) padded ones >= m. */
static void pp_v_op(PpVStage *v, PpOpKind kind, int32_t chunk) {
    int32_t *count = kind == PP_OP_FORWARD ? v->nf : kind == PP_OP_BACKWARD ? v->nb : v->nw;
    int32_t  mb = count[chunk]++;
    if (mb < v->m)
        pp_sched_emit(v->sched, kind, v->stage, v->base + mb, chunk, v->step);
}

static gboolean pp_v_check(const PpScheduleParams *params, const PpSchedKindInfo *info,
                           GError **error) {
    const char *kind = info->name;
    return pp_sched_check_param(kind, "n_stages", params->n_stages, 1, PP_V_MAX_STAGES, error) &&
           pp_sched_check_param(kind, "n_chunks", params->n_chunks, info->min_chunks,
                                info->max_chunks, error) &&
           pp_sched_check_param(kind, "n_microbatches", params->n_microbatches, 1, G_MAXINT32,
                                error) &&
           pp_sched_check_param(kind, "n_steps", params->n_steps, 1, G_MAXINT32, error) &&
           pp_sched_check_size(kind, (int64_t)params->n_steps * params->n_microbatches,
                               (int64_t)params->n_stages * PP_V_CHUNKS, error);
}

static PpSchedule *pp_v_alloc(const PpScheduleParams *params, const PpSchedKindInfo *info) {
    PP_ASSERT(info->min_chunks == PP_V_CHUNKS && info->max_chunks == PP_V_CHUNKS);
    PpSchedule *sched = pp_schedule_alloc(info->name, params->n_stages, PP_V_CHUNKS);
    sched->n_steps = params->n_steps;
    sched->mb_per_step = params->n_microbatches;
    sched->n_mb = params->n_steps * params->n_microbatches;
    sched->split_backward = TRUE;
    sched->synchronous = info->sync == PP_SCHED_SYNC;
    sched->weight_mode = info->weights;
    return sched;
}

/* Declares every stage's measured peak of (mb, chunk) units. */
static void pp_v_declare_buffers(PpSchedule *sched) {
    for (int32_t s = 0; s < sched->n_stages; s++)
        sched->n_buffers[s] = pp_schedule_peak_inflight(sched, s);
}

/* --- zb-v --- */

/* One step of stage @v->stage (see the top of the file); @n: micro-batches with padding. */
static void pp_zb_v_step(PpVStage *v, int32_t n_stages, int32_t n) {
    const int32_t i = v->stage;
    for (int32_t k = 0; k < 2 * (n_stages - i) - 1; k++)
        pp_v_op(v, PP_OP_FORWARD, 0);
    for (int32_t k = 0; k < i; k++) {
        pp_v_op(v, PP_OP_FORWARD, 1);
        pp_v_op(v, PP_OP_FORWARD, 0);
    }
    for (int32_t k = 0; k < n_stages - i; k++) {
        pp_v_op(v, PP_OP_FORWARD, 1);
        pp_v_op(v, PP_OP_BACKWARD, 1);
        pp_v_op(v, PP_OP_WEIGHT, 1);
    }
    while (v->nf[1] < v->nf[0] || v->nf[0] < n) {
        if (v->nf[0] < n)
            pp_v_op(v, PP_OP_FORWARD, 0);
        pp_v_op(v, PP_OP_BACKWARD, 0);
        pp_v_op(v, PP_OP_WEIGHT, 0);
        pp_v_op(v, PP_OP_FORWARD, 1);
        pp_v_op(v, PP_OP_BACKWARD, 1);
        pp_v_op(v, PP_OP_WEIGHT, 1);
    }
    for (int32_t k = 0; k < i; k++) {
        pp_v_op(v, PP_OP_BACKWARD, 0);
        pp_v_op(v, PP_OP_BACKWARD, 1);
    }
    for (int32_t k = 0; k < n_stages - i; k++) {
        pp_v_op(v, PP_OP_BACKWARD, 0);
        pp_v_op(v, PP_OP_WEIGHT, 0);
    }
    while (v->nw[1] < v->nb[1])
        pp_v_op(v, PP_OP_WEIGHT, 1);
    while (v->nw[0] < v->nb[0])
        pp_v_op(v, PP_OP_WEIGHT, 0);
    PP_ASSERT(v->nf[0] == n && v->nf[1] == n && v->nb[0] == n && v->nb[1] == n && v->nw[0] == n &&
              v->nw[1] == n);
}

static PpSchedule *pp_sched_build_zb_v(const PpScheduleParams *params, GError **error) {
    if (!pp_v_check(params, &pp_sched_kind_zb_v, error))
        return NULL;
    const int32_t n_stages = params->n_stages, m = params->n_microbatches;
    const int32_t n = MAX(m, 2 * n_stages - 1);
    PpSchedule   *sched = pp_v_alloc(params, &pp_sched_kind_zb_v);
    for (int32_t s = 0; s < n_stages; s++) {
        for (int32_t t = 0; t < params->n_steps; t++) {
            PpVStage v = {.sched = sched, .stage = s, .step = t, .base = t * m, .m = m};
            pp_zb_v_step(&v, n_stages, n);
            pp_sched_emit(sched, PP_OP_UPDATE, s, -1, -1, t);
        }
    }
    pp_v_declare_buffers(sched);
    return sched;
}

/* --- dualpipe-v --- */

/* A backward of @chunk: B and its W at once, or (@defer) B with W queued. */
static void pp_dualpipe_v_backward(PpVStage *v, int32_t chunk, gboolean defer) {
    pp_v_op(v, PP_OP_BACKWARD, chunk);
    if (!defer) {
        pp_v_op(v, PP_OP_WEIGHT, chunk);
        return;
    }
    v->queue[(v->q_head + v->q_len++) % (2 * v->m)] = chunk;
}

/* The oldest deferred W. */
static void pp_dualpipe_v_weight(PpVStage *v) {
    PP_ASSERT(v->q_len > 0);
    int32_t chunk = v->queue[v->q_head];
    v->q_head = (v->q_head + 1) % (2 * v->m);
    v->q_len--;
    pp_v_op(v, PP_OP_WEIGHT, chunk);
}

/* One step of stage @v->stage (see the top of the file). */
static void pp_dualpipe_v_step(PpVStage *v, int32_t n_stages) {
    const int32_t i = v->stage, m = v->m;
    for (int32_t k = 0; k < 2 * (n_stages - i - 1); k++)
        pp_v_op(v, PP_OP_FORWARD, 0);
    for (int32_t k = 0; k < i + 1; k++) {
        pp_v_op(v, PP_OP_FORWARD, 0);
        pp_v_op(v, PP_OP_FORWARD, 1);
    }
    for (int32_t k = 0; k < n_stages - i - 1; k++) {
        pp_dualpipe_v_backward(v, 1, TRUE);
        pp_dualpipe_v_weight(v);
        pp_v_op(v, PP_OP_FORWARD, 1);
    }
    for (int32_t k = 0; k < m - 2 * n_stages + i + 1; k++) {
        pp_v_op(v, PP_OP_FORWARD, 0);
        pp_dualpipe_v_backward(v, 1, FALSE);
        pp_v_op(v, PP_OP_FORWARD, 1);
        pp_dualpipe_v_backward(v, 0, FALSE);
    }
    for (int32_t k = 0; k < n_stages - i - 1; k++) {
        pp_dualpipe_v_backward(v, 1, FALSE);
        pp_v_op(v, PP_OP_FORWARD, 1);
        pp_dualpipe_v_backward(v, 0, FALSE);
    }
    /* Step 6: the second half of the (B1, B0) pairs defer their W; odd stages switch before
     * the B1 of the middle pair, even stages between its B1 and B0. */
    gboolean defer = FALSE;
    for (int32_t k = 0; k < i + 1; k++) {
        if (k == (i + 1) / 2 && i % 2 == 1)
            defer = TRUE;
        pp_dualpipe_v_backward(v, 1, defer);
        if (k == (i + 1) / 2 && i % 2 == 0)
            defer = TRUE;
        pp_dualpipe_v_backward(v, 0, defer);
    }
    for (int32_t k = 0; k < n_stages - i - 1; k++) {
        pp_dualpipe_v_weight(v);
        pp_dualpipe_v_backward(v, 0, TRUE);
    }
    for (int32_t k = 0; k < i + 1; k++)
        pp_dualpipe_v_weight(v);
    PP_ASSERT(v->q_len == 0);
    for (int32_t c = 0; c < PP_V_CHUNKS; c++)
        PP_ASSERT(v->nf[c] == m && v->nb[c] == m && v->nw[c] == m);
}

static PpSchedule *pp_sched_build_dualpipe_v(const PpScheduleParams *params, GError **error) {
    if (!pp_v_check(params, &pp_sched_kind_dualpipe_v, error))
        return NULL;
    /* m >= 2N: the record's rule, checked by pp_schedule_new() before this runs */
    const int32_t n_stages = params->n_stages, m = params->n_microbatches;
    PP_ASSERT((int64_t)m >= 2 * (int64_t)n_stages);
    PpSchedule         *sched = pp_v_alloc(params, &pp_sched_kind_dualpipe_v);
    g_autofree int32_t *queue = g_new(int32_t, 2 * (size_t)m); /* (2m) deferred W chunks */
    for (int32_t s = 0; s < n_stages; s++) {
        for (int32_t t = 0; t < params->n_steps; t++) {
            PpVStage v = {
                .sched = sched, .stage = s, .step = t, .base = t * m, .m = m, .queue = queue};
            pp_dualpipe_v_step(&v, n_stages);
            pp_sched_emit(sched, PP_OP_UPDATE, s, -1, -1, t);
        }
    }
    pp_v_declare_buffers(sched);
    return sched;
}

/* --- records --- */

/* Two chunks per device, placed in a V. */
#define PP_V_KIND(kind_name, fn, text)                                                             \
    PP_SCHED_KIND_FLUSH(kind_name, fn, text),                                                      \
        .min_chunks = PP_V_CHUNKS, .max_chunks = PP_V_CHUNKS, .placement = PP_PLACEMENT_V

const PpSchedKindInfo pp_sched_kind_zb_v = {
    PP_V_KIND("zb-v", pp_sched_build_zb_v,
              "zero-bubble V schedule: 2 chunks per device in a V, B/W split, 1F1B's peak memory")};

const PpSchedKindInfo pp_sched_kind_dualpipe_v = {
    PP_V_KIND("dualpipe-v", pp_sched_build_dualpipe_v,
              "DeepSeek's DualPipe cut in half: 2 chunks per device in a V, F/B pairs, m >= 2N"),
    .mb_min_per_stage = 2,
};
