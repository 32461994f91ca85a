/* SPDX-License-Identifier: MIT
 * test-schedule.c: the schedule core. Every registered generator over a sweep of
 * (N, m, v, a, steps): validation, one F and one BW per (mb, vstage), op and U counts, peak
 * in-flight against the closed forms, weight versions and drift (PACI's ceil((N-1-s)/a)),
 * dependencies, custom order files (round trip, bad files) and the PP_ASSERT abort path.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-schedule.h"
#include "test-util.h"

#define ORDERS_DIR PP_SOURCE_ROOT "/scenarios/orders"

/* --- helpers --- */

/* @kind with N, v, m, a and @steps, no costs (test_util_schedule_params()); fails the test
 * when it does not build. Returns: (transfer full). */
static PpSchedule *build(const char *kind, int32_t n, int32_t v, int32_t m, int32_t a,
                         int32_t steps) {
    PpScheduleParams p = test_util_schedule_params(kind, n, v, m, a, steps);
    return test_util_schedule_build(&p);
}

static PpSchedule *build_custom(const char *path, GError **error) {
    PpScheduleParams p = {.kind = pp_sched_kind_lookup("custom"), .order_file = path};
    return pp_schedule_new(&p, error);
}

static int32_t ceil_div(int32_t x, int32_t y) {
    return (x + y - 1) / y;
}

/* Max over the program of stage @s of the distinct weight versions alive at once: the
 * versions the in-flight (mb, chunk) units' forwards used, plus the current version. */
static int32_t live_versions(const PpSchedule *sched, int32_t s) {
    g_autofree int32_t  *vf = g_new0(int32_t, (gsize)sched->n_mb * sched->n_chunks + 1);
    g_autofree gboolean *live = g_new0(gboolean, (gsize)sched->n_mb * sched->n_chunks + 1);
    int32_t              cur = 0, best = 0;
    for (int32_t i = 0; i < sched->n_ops[s]; i++) {
        const PpOp *op = &sched->programs[s][i];
        int32_t     u = op->mb * sched->n_chunks + op->chunk;
        if (op->kind == PP_OP_FORWARD) {
            vf[u] = cur;
            live[u] = TRUE;
        } else if (op->kind == PP_OP_BACKWARD_FULL || op->kind == PP_OP_BACKWARD) {
            live[u] = FALSE;
        } else if (op->kind == PP_OP_UPDATE) {
            cur++;
        }
        int32_t oldest = cur;
        for (int32_t k = 0; k < sched->n_mb * sched->n_chunks; k++) {
            if (live[k])
                oldest = MIN(oldest, vf[k]);
        }
        best = MAX(best, cur - oldest + 1);
    }
    return best;
}

/* Per stage: max over micro-batches of version_used(BW) - version_used(F) (@lag FALSE), or
 * of (stage version when BW runs) - version_used(F) (@lag TRUE). Chunk 0 only. */
static int32_t max_drift(const PpSchedule *sched, int32_t s, gboolean lag) {
    int32_t best = 0;
    int32_t vs = pp_schedule_vstage(sched, s, 0);
    for (int32_t mb = 0; mb < sched->n_mb; mb++) {
        PpOpRef f = pp_schedule_op_ref(sched, pp_schedule_find_op(sched, PP_OP_FORWARD, mb, vs));
        int32_t b_id = pp_schedule_find_op(sched, PP_OP_BACKWARD_FULL, mb, vs);
        PpOpRef b = pp_schedule_op_ref(sched, b_id);
        int32_t vb = lag ? sched->version[b_id] : pp_schedule_version_used(sched, b);
        best = MAX(best, vb - pp_schedule_version_used(sched, f));
    }
    return best;
}

static gboolean ref_in(PpOpRef ref, const PpOpRef *refs, int32_t n) {
    for (int32_t k = 0; k < n; k++) {
        if (refs[k].stage == ref.stage && refs[k].index == ref.index)
            return TRUE;
    }
    return FALSE;
}

/* Invariants every finished schedule satisfies, whatever its kind. */
static void check_structure(const PpSchedule *sched) {
    int32_t             nk = PP_OP_N_KINDS, total = pp_schedule_n_ops_total(sched);
    g_autofree int32_t *count = g_new0(int32_t, (gsize)sched->n_mb * sched->n_vstages * nk + 1);
    for (int32_t id = 0; id < total; id++) {
        PpOpRef ref = pp_schedule_op_ref(sched, id);
        ck_assert_int_eq(pp_schedule_op_id(sched, ref), id);
        const PpOp *op = pp_schedule_op(sched, ref);
        ck_assert_int_eq(op->stage, ref.stage);
        int32_t        n_deps = 0;
        const PpOpRef *deps = pp_schedule_deps(sched, ref, &n_deps);
        ck_assert_int_le(n_deps, 2);
        for (int32_t d = 0; d < n_deps; d++) {
            int32_t        n_succ = 0;
            const PpOpRef *succ = pp_schedule_succs(sched, deps[d], &n_succ);
            ck_assert(ref_in(ref, succ, n_succ));
        }
        if (op->kind == PP_OP_UPDATE) {
            ck_assert_int_eq(n_deps, 0);
            continue;
        }
        int32_t vs = pp_schedule_vstage(sched, op->stage, op->chunk);
        count[(op->mb * sched->n_vstages + vs) * nk + op->kind]++;
        ck_assert_int_eq(pp_schedule_find_op(sched, op->kind, op->mb, vs), id);
        /* The activation edge and the gradient edge, as pp-schedule.h describes them. */
        if (op->kind == PP_OP_FORWARD) {
            ck_assert_int_eq(n_deps, vs > 0 ? 1 : 0);
            if (vs > 0)
                ck_assert_int_eq(pp_schedule_op_id(sched, deps[0]),
                                 pp_schedule_find_op(sched, PP_OP_FORWARD, op->mb, vs - 1));
        } else if (op->kind == PP_OP_BACKWARD_FULL || op->kind == PP_OP_BACKWARD) {
            ck_assert_int_eq(n_deps, vs < sched->n_vstages - 1 ? 2 : 1);
            ck_assert_int_eq(pp_schedule_op_id(sched, deps[n_deps - 1]),
                             pp_schedule_find_op(sched, PP_OP_FORWARD, op->mb, vs));
            if (vs < sched->n_vstages - 1)
                ck_assert_int_eq(pp_schedule_op_id(sched, deps[0]),
                                 pp_schedule_find_op(sched, op->kind, op->mb, vs + 1));
        } else {
            ck_assert_int_eq(n_deps, 1);
            ck_assert_int_eq(pp_schedule_op_id(sched, deps[0]),
                             pp_schedule_find_op(sched, PP_OP_BACKWARD, op->mb, vs));
        }
    }
    /* Exactly one F and one BW (or one B and one W) per (mb, vstage). */
    for (int32_t u = 0; u < sched->n_mb * sched->n_vstages; u++) {
        ck_assert_int_eq(count[u * nk + PP_OP_FORWARD], 1);
        ck_assert_int_eq(count[u * nk + PP_OP_BACKWARD_FULL], sched->split_backward ? 0 : 1);
        ck_assert_int_eq(count[u * nk + PP_OP_BACKWARD], sched->split_backward ? 1 : 0);
        ck_assert_int_eq(count[u * nk + PP_OP_WEIGHT], sched->split_backward ? 1 : 0);
    }
    /* version = number of U before the op; U ops carry their index as step. */
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int32_t n_u = 0;
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            ck_assert_int_eq(sched->version[sched->op_offset[s] + i], n_u);
            if (op->kind == PP_OP_UPDATE)
                ck_assert_int_eq(op->step, n_u++);
        }
    }
    ck_assert(pp_schedule_validate(sched, NULL));
}

/* Counts U ops on stage @s. */
static int32_t n_updates(const PpSchedule *sched, int32_t s) {
    int32_t n = 0;
    for (int32_t i = 0; i < sched->n_ops[s]; i++)
        n += sched->programs[s][i].kind == PP_OP_UPDATE;
    return n;
}

/* Kind-specific closed forms. @every: backwards per update (flush: m). */
static void check_kind(const PpSchedule *sched, int32_t n, int32_t v, int32_t m, int32_t a,
                       int32_t steps) {
    const char *kind = sched->kind;
    gboolean    flush =
        !strcmp(kind, "gpipe") || !strcmp(kind, "1f1b") || !strcmp(kind, "interleaved");
    int32_t every = flush || !strcmp(kind, "2bw") ? m : !strcmp(kind, "paci") ? a : 1;
    int32_t n_mb = steps * every;
    ck_assert_int_eq(sched->n_mb, n_mb);
    ck_assert_int_eq(sched->n_steps, steps);
    ck_assert_int_eq(sched->mb_per_step, every);
    ck_assert_int_eq(sched->n_stages, n);
    ck_assert_int_eq(sched->n_chunks, v);
    ck_assert_int_eq(sched->synchronous, flush);
    ck_assert(!sched->split_backward);
    gboolean stashed = !strcmp(kind, "pipedream") || !strcmp(kind, "2bw");
    ck_assert_int_eq(sched->weight_mode, stashed ? PP_WEIGHTS_STASHED : PP_WEIGHTS_CURRENT);
    for (int32_t s = 0; s < n; s++) {
        int32_t peak = MIN(n - s, n_mb);
        if (!strcmp(kind, "gpipe"))
            peak = m;
        else if (!strcmp(kind, "1f1b"))
            peak = MIN(n - s, m);
        else if (!strcmp(kind, "interleaved"))
            peak = MIN(2 * (n - s - 1) + (v - 1) * n + 1, m * v);
        ck_assert_int_eq(pp_schedule_peak_inflight(sched, s), peak);
        ck_assert_int_eq(sched->n_buffers[s], peak);
        /* One F and one BW per (mb, chunk) plus ceil(n_mb / every) = steps updates. */
        ck_assert_int_eq(sched->n_ops[s], 2 * n_mb * v + steps);
        ck_assert_int_eq(n_updates(sched, s), steps);
        int32_t versions = !strcmp(kind, "pipedream") ? n - s : !strcmp(kind, "2bw") ? 2 : 1;
        ck_assert_int_eq(sched->n_weight_versions[s], versions);
        if (stashed)
            ck_assert_int_le(live_versions(sched, s), versions);
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            if (op->kind == PP_OP_UPDATE)
                continue;
            ck_assert_int_eq(op->step, op->mb / every);
            /* Flush: every op of a micro-batch computes with the version of its step. */
            if (flush)
                ck_assert_int_eq(sched->version[sched->op_offset[s] + i], op->step);
        }
    }
}

/* --- the sweep: every registered kind (custom has its own tests below) --- */

static gboolean is_zero_bubble(const char *kind) {
    return g_str_has_prefix(kind, "zb-");
}

/* Whether check_kind() knows @kind's closed forms (docs/design.md §3.2); a kind registered
 * later gets the record-driven checks of test_registry_records and check_generic(). */
static gboolean has_closed_form(const char *kind) {
    static const char *const known[] = {"gpipe", "1f1b",       "interleaved", "pipedream",
                                        "2bw",   "async-1f1b", "paci"};
    for (size_t i = 0; i < G_N_ELEMENTS(known); i++) {
        if (strcmp(kind, known[i]) == 0)
            return TRUE;
    }
    return FALSE;
}

/* What holds for any kind: the declared buffers cover the peak, and the run has the
 * record's micro-batches and one update per step on every stage. */
static void check_generic(const PpSchedule *sched, const PpSchedKindInfo *info, int32_t m,
                          int32_t a, int32_t steps) {
    ck_assert_int_eq(sched->mb_per_step, pp_sched_kind_mb_per_step(info, m, a));
    ck_assert_int_eq(sched->n_mb, steps * sched->mb_per_step);
    for (int32_t s = 0; s < sched->n_stages; s++) {
        ck_assert_int_le(pp_schedule_peak_inflight(sched, s), sched->n_buffers[s]);
        ck_assert_int_eq(n_updates(sched, s), steps);
    }
}

/* Checks for the zero-bubble kinds (their closed forms are tested with their generator):
 * synchronous split-backward steps of m micro-batches, U closing every step. */
static void check_zero_bubble(const PpSchedule *sched, int32_t n, int32_t m, int32_t steps) {
    ck_assert(sched->split_backward);
    ck_assert(sched->synchronous);
    ck_assert_int_eq(sched->n_stages, n);
    ck_assert_int_eq(sched->n_mb, m * steps);
    for (int32_t s = 0; s < n; s++) {
        ck_assert_int_eq(n_updates(sched, s), steps);
        ck_assert_int_eq(sched->n_ops[s], 3 * m * steps + steps);
        ck_assert_int_le(pp_schedule_peak_inflight(sched, s), sched->n_buffers[s]);
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            if (op->kind != PP_OP_UPDATE)
                ck_assert_int_eq(sched->version[sched->op_offset[s] + i], op->mb / m);
        }
    }
}

static int32_t n_registered(void) {
    int32_t n = 0;
    for (const PpSchedKindInfo *const *k = pp_sched_kinds(); *k != NULL; k++)
        n++;
    return n;
}

START_TEST(test_sweep) {
    const PpSchedKindInfo *info = pp_sched_kinds()[_i];
    const char            *kind = info->name;
    if (info->needs_order_file)
        return;
    static const int32_t stages[] = {1, 2, 3, 4, 8};
    gboolean             uses_m = info->batch == PP_BATCH_MICROBATCHES;
    gboolean uses_a = info->batch == PP_BATCH_ACCUMULATION && info->fixed_accumulation == 0;
    gboolean v_shape = info->placement == PP_PLACEMENT_V; /* closed forms: test-sched-v.c */
    int32_t  n_built = 0;
    for (size_t ni = 0; ni < G_N_ELEMENTS(stages); ni++) {
        int32_t n = stages[ni];
        for (int32_t m = 1; m <= (uses_m ? 2 * n + 1 : 1); m++) {
            for (int32_t v = info->min_chunks; v <= MIN(info->max_chunks, 3); v++) {
                for (int32_t a = 1; a <= (uses_a ? 5 : 1); a++) {
                    for (int32_t steps = 1; steps <= 3; steps += 2) {
                        if (!pp_sched_kind_check_microbatches(
                                info, n, pp_sched_kind_mb_per_step(info, m, a), NULL))
                            continue;
                        g_autoptr(PpSchedule) sched = build(kind, n, v, m, a, steps);
                        check_structure(sched);
                        if (v_shape)
                            ck_assert_int_le(pp_schedule_peak_inflight(sched, 0), 2 * n + 1);
                        else if (is_zero_bubble(kind))
                            check_zero_bubble(sched, n, m, steps);
                        else if (has_closed_form(kind))
                            check_kind(sched, n, v, m, a, steps);
                        else
                            check_generic(sched, info, m, a, steps);
                        n_built++;
                    }
                }
            }
        }
    }
    ck_assert_int_gt(n_built, 9);
}
END_TEST

/* Every kind's schedule follows its registry row (pp_schedule_new() asserts the weights and
 * synchrony; here the batch rule, the chunk range and the policy's requirements), and the
 * shared counters agree with independent counts: pp_schedule_delta() with the versions its
 * F and B use, per-vstage peaks with the per-stage peak. */
START_TEST(test_registry_rules) {
    const PpSchedKindInfo *info = pp_sched_kinds()[_i];
    if (info->needs_order_file)
        return;
    const int32_t n = 4, m = 2 * n, a = 2, steps = 2, v = info->max_chunks > 1 ? 2 : 1;
    ck_assert_int_ge(info->min_chunks, 1);
    ck_assert_int_ge(info->max_chunks, info->min_chunks);
    g_autoptr(PpSchedule) sched = build(info->name, n, v, m, a, steps);
    ck_assert_int_eq(sched->n_chunks, v);
    ck_assert_int_eq(sched->mb_per_step, pp_sched_kind_mb_per_step(info, m, a));
    ck_assert_int_eq(sched->n_mb, steps * sched->mb_per_step);
    ck_assert_int_eq(sched->weight_mode, info->weights);
    ck_assert_int_eq(sched->synchronous, info->sync == PP_SCHED_SYNC);
    if (info->has_policy) {
        /* PACI's policy keeps one weight copy and updates each stage on its own. */
        ck_assert_int_eq(info->weights, PP_WEIGHTS_CURRENT);
        ck_assert_int_eq(info->sync, PP_SCHED_ASYNC);
        ck_assert_int_eq(info->max_chunks, 1);
    }
    for (int32_t mb = 0; mb < sched->n_mb; mb++) {
        for (int32_t vs = 0; vs < sched->n_vstages; vs++) {
            int32_t f = pp_schedule_find_op(sched, PP_OP_FORWARD, mb, vs);
            int32_t b = pp_schedule_find_op(
                sched, sched->split_backward ? PP_OP_BACKWARD : PP_OP_BACKWARD_FULL, mb, vs);
            ck_assert_int_eq(pp_schedule_delta(sched, mb, vs),
                             pp_schedule_version_used(sched, pp_schedule_op_ref(sched, b)) -
                                 pp_schedule_version_used(sched, pp_schedule_op_ref(sched, f)));
        }
    }
    g_autofree int32_t *peaks = pp_schedule_vstage_peak_inflight(sched);
    for (int32_t s = 0; s < n; s++) {
        int32_t sum = 0, most = 0;
        for (int32_t c = 0; c < v; c++) {
            int32_t p = peaks[pp_schedule_vstage(sched, s, c)];
            ck_assert_int_ge(p, 1);
            sum += p;
            most = MAX(most, p);
        }
        /* A stage's units are its chunks' units: its peak lies between theirs and their sum. */
        ck_assert_int_ge(pp_schedule_peak_inflight(sched, s), most);
        ck_assert_int_le(pp_schedule_peak_inflight(sched, s), sum);
        if (v == 1)
            ck_assert_int_eq(pp_schedule_peak_inflight(sched, s), sum);
    }
}
END_TEST

/* Every registered record is self-consistent and declares what its generator builds, so a
 * newly registered kind is checked here without editing the test: the micro-batch rule
 * (pp_sched_kind_check_microbatches()) accepts exactly the counts the generator builds, and
 * only counts whose program the declared weight copies cover;
 * weight copies, stashing and synchrony match the built program; plan chunk choices lie in
 * the chunk range. */
START_TEST(test_registry_records) {
    const PpSchedKindInfo *info = pp_sched_kinds()[_i];
    ck_assert_ptr_nonnull(info->name);
    ck_assert_int_gt(strlen(info->name), 0);
    ck_assert_ptr_nonnull(info->summary);
    ck_assert(info->build != NULL);
    ck_assert_ptr_eq(pp_sched_kind_lookup(info->name), info); /* names are unique */
    ck_assert_int_ge(info->min_chunks, 1);
    ck_assert_int_ge(info->max_chunks, info->min_chunks);
    for (int32_t c = 0, prev = 0; c < PP_SCHED_PLAN_CHUNKS && info->plan_chunks[c] > 0; c++) {
        ck_assert_int_gt(info->plan_chunks[c], prev);
        ck_assert_int_ge(info->plan_chunks[c], info->min_chunks);
        ck_assert_int_le(info->plan_chunks[c], info->max_chunks);
        prev = info->plan_chunks[c];
    }
    if (info->fixed_accumulation > 0)
        ck_assert_int_eq(info->batch, PP_BATCH_ACCUMULATION);
    ck_assert_int_ge(info->mb_min_per_stage, 0);
    ck_assert(info->weight_copies >= 0 || info->weight_copies == PP_SCHED_COPIES_IN_FLIGHT);
    /* stashing needs more than one copy; current weights need one */
    ck_assert_int_eq(info->weights == PP_WEIGHTS_STASHED,
                     pp_sched_kind_weight_copies(info, 4, 0) > 1);
    if (info->needs_order_file)
        return; /* the order file decides the rest (test_custom_*) */

    /* The rule accepts exactly what the generator builds. */
    const int32_t v = info->min_chunks;
    int32_t       n_accepted = 0;
    for (int32_t n = 1; n <= 5; n++) {
        for (int32_t m = 1; m <= 3 * n + 2; m++) {
            const int32_t a = info->fixed_accumulation > 0 ? info->fixed_accumulation : m;
            const int32_t k = pp_sched_kind_mb_per_step(info, m, a);
            g_autoptr(GError) rule = NULL;
            gboolean         takes = pp_sched_kind_check_microbatches(info, n, k, &rule);
            PpScheduleParams p = test_util_schedule_params(info->name, n, v, m, a, 3);
            g_autoptr(GError) error = NULL;
            g_autoptr(PpSchedule) sched = pp_schedule_new(&p, &error);
            ck_assert_msg((sched != NULL) == takes, "%s N=%d m=%d a=%d: rule %s, generator %s",
                          info->name, n, m, a, takes ? "accepts" : rule->message,
                          sched != NULL ? "builds" : error->message);
            if (!takes)
                ck_assert(
                    g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
            /* what the rule accepts is sound: the declared copies hold every live version */
            for (int32_t s = 0; takes && info->weights == PP_WEIGHTS_STASHED && s < n; s++)
                ck_assert_int_le(live_versions(sched, s), sched->n_weight_versions[s]);
            n_accepted += takes;
        }
    }
    ck_assert_int_gt(n_accepted, 0);

    /* Declared properties against the program, on a full pipeline. */
    const int32_t n = 4, m = 2 * n, a = info->fixed_accumulation > 0 ? info->fixed_accumulation : 2;
    g_autoptr(PpSchedule) sched = build(info->name, n, v, m, a, 3);
    const int32_t k = pp_sched_kind_mb_per_step(info, m, a);
    ck_assert_int_eq(sched->mb_per_step, k);
    ck_assert_int_eq(sched->n_mb, 3 * k);
    int32_t most_live = 0, off_step = 0;
    for (int32_t s = 0; s < n; s++) {
        ck_assert_int_eq(sched->n_weight_versions[s], pp_sched_kind_weight_copies(info, n, s));
        if (info->weights == PP_WEIGHTS_STASHED)
            ck_assert_int_le(live_versions(sched, s), sched->n_weight_versions[s]);
        most_live = MAX(most_live, live_versions(sched, s));
        /* an update after every k micro-batches' last backwards, the program ends with one */
        int32_t closed = 0, n_u = 0;
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            if (op->kind == PP_OP_UPDATE) {
                ck_assert_int_eq(closed, k * sched->n_chunks);
                closed = 0;
                n_u++;
                continue;
            }
            closed += pp_op_inflight_change(op->kind) < 0;
            off_step += sched->version[sched->op_offset[s] + i] != op->step;
        }
        ck_assert_int_eq(closed, 0);
        ck_assert_int_eq(n_u, sched->n_steps);
    }
    /* stashed: some stage keeps several versions alive */
    if (info->weights == PP_WEIGHTS_STASHED)
        ck_assert_int_gt(most_live, 1);
    /* synchronous: U only at step ends, every op at its step's version; asynchronous: some op
     * runs past an update of its own step's count */
    if (info->sync == PP_SCHED_SYNC)
        ck_assert_int_eq(off_step, 0);
    else
        ck_assert_int_gt(off_step, 0);
}
END_TEST

/* The in-flight rule: F opens a unit, its last backward (BW, or W when split) closes it. */
START_TEST(test_inflight_rule) {
    ck_assert_int_eq(pp_op_inflight_change(PP_OP_FORWARD), 1);
    ck_assert_int_eq(pp_op_inflight_change(PP_OP_BACKWARD), 0);
    ck_assert_int_eq(pp_op_inflight_change(PP_OP_WEIGHT), -1);
    ck_assert_int_eq(pp_op_inflight_change(PP_OP_BACKWARD_FULL), -1);
    ck_assert_int_eq(pp_op_inflight_change(PP_OP_UPDATE), 0);
    /* 1f1b: virtual stage s holds min(N - s, m) micro-batches. */
    g_autoptr(PpSchedule) sched = build("1f1b", 4, 1, 3, 1, 2);
    g_autofree int32_t *peaks = pp_schedule_vstage_peak_inflight(sched);
    for (int32_t s = 0; s < 4; s++)
        ck_assert_int_eq(peaks[s], MIN(4 - s, 3));
}
END_TEST

/* --- closed forms on specific programs --- */

START_TEST(test_1f1b_program) {
    /* N = 2, m = 3, one step: exactly scenarios/orders/1f1b-n2-m3.csv. */
    g_autoptr(PpSchedule) gen = build("1f1b", 2, 1, 3, 1, 1);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpSchedule) file = build_custom(ORDERS_DIR "/1f1b-n2-m3.csv", &error);
    ck_assert_msg(file != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(file->n_stages, 2);
    ck_assert_int_eq(file->n_mb, 3);
    ck_assert(file->synchronous);
    for (int32_t s = 0; s < 2; s++) {
        ck_assert_int_eq(gen->n_ops[s], file->n_ops[s]);
        for (int32_t i = 0; i < gen->n_ops[s]; i++) {
            ck_assert_int_eq(gen->programs[s][i].kind, file->programs[s][i].kind);
            ck_assert_int_eq(gen->programs[s][i].mb, file->programs[s][i].mb);
        }
        ck_assert_int_eq(file->n_buffers[s], gen->n_buffers[s]);
    }
}
END_TEST

START_TEST(test_interleaved_program) {
    /* N = 2, v = 2, m = 2: stage 0 warms up with 2(N-1) + (v-1)N = 4 = m v forwards. */
    g_autoptr(PpSchedule) sched = build("interleaved", 2, 2, 2, 1, 1);
    static const int32_t s0[][3] = {
        {PP_OP_FORWARD, 0, 0},       {PP_OP_FORWARD, 1, 0},       {PP_OP_FORWARD, 0, 1},
        {PP_OP_FORWARD, 1, 1},       {PP_OP_BACKWARD_FULL, 0, 1}, {PP_OP_BACKWARD_FULL, 1, 1},
        {PP_OP_BACKWARD_FULL, 0, 0}, {PP_OP_BACKWARD_FULL, 1, 0},
    };
    /* Stage 1 warms up with 2 forwards, then (F, BW) pairs. */
    static const int32_t s1[][3] = {
        {PP_OP_FORWARD, 0, 0},       {PP_OP_FORWARD, 1, 0},       {PP_OP_FORWARD, 0, 1},
        {PP_OP_BACKWARD_FULL, 0, 1}, {PP_OP_FORWARD, 1, 1},       {PP_OP_BACKWARD_FULL, 1, 1},
        {PP_OP_BACKWARD_FULL, 0, 0}, {PP_OP_BACKWARD_FULL, 1, 0},
    };
    for (int32_t i = 0; i < 8; i++) {
        ck_assert_int_eq(sched->programs[0][i].kind, s0[i][0]);
        ck_assert_int_eq(sched->programs[0][i].mb, s0[i][1]);
        ck_assert_int_eq(sched->programs[0][i].chunk, s0[i][2]);
        ck_assert_int_eq(sched->programs[1][i].kind, s1[i][0]);
        ck_assert_int_eq(sched->programs[1][i].mb, s1[i][1]);
        ck_assert_int_eq(sched->programs[1][i].chunk, s1[i][2]);
    }
    ck_assert_int_eq(sched->programs[0][8].kind, PP_OP_UPDATE);
    /* vs = chunk * N + stage */
    ck_assert_int_eq(pp_schedule_vstage(sched, 1, 1), 3);
    ck_assert_int_eq(sched->vstage_stage[2], 0);
    ck_assert_int_eq(sched->vstage_chunk[2], 1);
}
END_TEST

/* PACI drift. Between a micro-batch's F and its BW, stage s (0-indexed) runs N-1-s other
 * backwards in steady state (F(j) follows BW(j-N+s); BW(j-N+s+1) .. BW(j-1) come before
 * BW(j)). A U follows every a-th backward, so the number of updates in between is the
 * number of multiples of a among N-1-s consecutive integers: at most ceil((N-1-s)/a), and
 * exactly that for the micro-batches whose window starts on a multiple. */
START_TEST(test_paci_drift) {
    static const int32_t stages[] = {4, 8, 16, 32};
    int32_t              n = stages[_i];
    for (int32_t a = 1; a <= 16; a++) {
        int32_t steps = ceil_div(2 * n, a) + 3; // enough micro-batches for the steady state
        g_autoptr(PpSchedule) sched = build("paci", n, 1, 1, a, steps);
        for (int32_t s = 0; s < n; s++)
            ck_assert_int_eq(max_drift(sched, s, FALSE), ceil_div(n - 1 - s, a));
    }
}
END_TEST

START_TEST(test_paci_drift_exceeds_paper_bound) {
    /* N = 8, a = 3: the measured maximum on stage 0 is ceil(7/3) = 3, above the paper's
     * floor((N-1)/a) = 2. */
    g_autoptr(PpSchedule) sched = build("paci", 8, 1, 1, 3, 12);
    ck_assert_int_eq(max_drift(sched, 0, FALSE), 3);
    ck_assert_int_gt(max_drift(sched, 0, FALSE), (8 - 1) / 3);
    /* N = 8, a = 4 (the paper's configuration): ceil(7/4) = 2 = floor(7/4) + 1 */
    g_autoptr(PpSchedule) a4 = build("paci", 8, 1, 1, 4, 12);
    ck_assert_int_eq(max_drift(a4, 0, FALSE), 2);
    ck_assert_int_eq(max_drift(a4, 7, FALSE), 0);
}
END_TEST

START_TEST(test_stashed_drift) {
    /* Stashed weights: the backward uses its forward's version, Δ = 0, while the stage's
     * version moves on by N-1-s updates (pipedream, one per backward) or ceil((N-1-s)/m) = 1
     * (2bw with m >= N-1). */
    for (int32_t n = 2; n <= 8; n *= 2) {
        g_autoptr(PpSchedule) pd = build("pipedream", n, 1, 1, 1, 4 * n);
        g_autoptr(PpSchedule) bw2 = build("2bw", n, 1, n, 1, 6);
        g_autoptr(PpSchedule) as = build("async-1f1b", n, 1, 1, 1, 4 * n);
        for (int32_t s = 0; s < n; s++) {
            ck_assert_int_eq(max_drift(pd, s, FALSE), 0);
            ck_assert_int_eq(max_drift(pd, s, TRUE), n - 1 - s);
            ck_assert_int_eq(live_versions(pd, s), n - s);
            ck_assert_int_eq(max_drift(bw2, s, FALSE), 0);
            ck_assert_int_eq(max_drift(bw2, s, TRUE), s < n - 1 ? 1 : 0);
            ck_assert_int_eq(live_versions(bw2, s), s < n - 1 ? 2 : 1);
            /* async-1f1b = paci with a = 1: the drift is the lag. */
            ck_assert_int_eq(max_drift(as, s, FALSE), n - 1 - s);
        }
    }
}
END_TEST

START_TEST(test_async_few_microbatches) {
    /* Fewer micro-batches than stages: warmup capped by n_mb. */
    g_autoptr(PpSchedule) pd = build("pipedream", 8, 1, 1, 1, 3);
    g_autoptr(PpSchedule) paci = build("paci", 8, 1, 1, 2, 1);
    check_structure(pd);
    check_structure(paci);
    for (int32_t s = 0; s < 8; s++) {
        ck_assert_int_eq(pp_schedule_peak_inflight(pd, s), MIN(8 - s, 3));
        ck_assert_int_eq(paci->n_buffers[s], MIN(8 - s, 2));
    }
}
END_TEST

/* --- construction by hand --- */

static PpSchedule *two_stage_base(void) {
    PpSchedule *sched = pp_schedule_alloc("test", 2, 1);
    sched->n_mb = 1;
    sched->n_buffers[0] = sched->n_buffers[1] = 1;
    return sched;
}

static void emit(PpSchedule *sched, PpOpKind kind, int32_t stage, int32_t mb) {
    PpOp op = {.kind = kind,
               .stage = stage,
               .mb = kind == PP_OP_UPDATE ? -1 : mb,
               .chunk = kind == PP_OP_UPDATE ? -1 : 0};
    pp_schedule_append(sched, &op);
}

START_TEST(test_manual_ok_and_queries) {
    g_autoptr(PpSchedule) sched = two_stage_base();
    emit(sched, PP_OP_FORWARD, 0, 0);
    emit(sched, PP_OP_BACKWARD_FULL, 0, 0);
    emit(sched, PP_OP_UPDATE, 0, 0);
    emit(sched, PP_OP_FORWARD, 1, 0);
    emit(sched, PP_OP_BACKWARD_FULL, 1, 0);
    emit(sched, PP_OP_UPDATE, 1, 0);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(pp_schedule_finish(sched, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(pp_schedule_n_ops_total(sched), 6);
    PpOpRef ref = pp_schedule_op_ref(sched, 4);
    ck_assert_int_eq(ref.stage, 1);
    ck_assert_int_eq(ref.index, 1);
    int32_t        n = 0;
    const PpOpRef *deps = pp_schedule_deps(sched, (PpOpRef){.stage = 0, .index = 1}, &n);
    ck_assert_int_eq(n, 2); // BW(0) on stage 0: gradient from stage 1 and its own F
    ck_assert_int_eq(deps[0].stage, 1);
    ck_assert_int_eq(deps[0].index, 1);
    ck_assert_int_eq(deps[1].stage, 0);
    ck_assert_int_eq(deps[1].index, 0);
    const PpOpRef *succ = pp_schedule_succs(sched, (PpOpRef){.stage = 0, .index = 0}, &n);
    ck_assert_int_eq(n, 2); // F(0) on stage 0 feeds F(0) on stage 1 and BW(0) on stage 0
    ck_assert_int_eq(succ[0].stage, 0);
    ck_assert_int_eq(succ[1].stage, 1);
    char buf[96];
    ck_assert_str_eq(pp_op_describe(&sched->programs[1][1], buf, sizeof buf),
                     "BW(mb=0, chunk=0) on stage 1");
    PpOp u = {.kind = PP_OP_UPDATE, .stage = 0, .mb = -1, .chunk = -1, .step = 2};
    ck_assert_str_eq(pp_op_describe(&u, buf, sizeof buf), "U(step=2) on stage 0");
    ck_assert_str_eq(pp_op_kind_name(PP_OP_BACKWARD_FULL), "BW");
    ck_assert_int_eq(pp_op_kind_from_name("W"), PP_OP_WEIGHT);
    ck_assert_int_eq(pp_op_kind_from_name("X"), PP_OP_N_KINDS);
}
END_TEST

START_TEST(test_manual_buffers) {
    g_autoptr(PpSchedule) sched = two_stage_base();
    sched->n_mb = 2;
    for (int32_t s = 0; s < 2; s++) {
        emit(sched, PP_OP_FORWARD, s, 0);
        emit(sched, PP_OP_FORWARD, s, 1);
        emit(sched, PP_OP_BACKWARD_FULL, s, 0);
        emit(sched, PP_OP_BACKWARD_FULL, s, 1);
    }
    g_autoptr(GError) error = NULL;
    ck_assert(!pp_schedule_finish(sched, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_BUFFERS));
    ck_assert_ptr_nonnull(strstr(error->message, "stage 0 op 1 F(mb=1, chunk=0)"));
}
END_TEST

START_TEST(test_manual_order) {
    g_autoptr(PpSchedule) sched = two_stage_base();
    emit(sched, PP_OP_FORWARD, 0, 0);
    emit(sched, PP_OP_BACKWARD_FULL, 0, 0);
    emit(sched, PP_OP_BACKWARD_FULL, 1, 0);
    emit(sched, PP_OP_FORWARD, 1, 0);
    g_autoptr(GError) error = NULL;
    ck_assert(!pp_schedule_finish(sched, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_ORDER));
    ck_assert_ptr_nonnull(strstr(error->message, "stage 1 op 0 BW(mb=0, chunk=0)"));
}
END_TEST

START_TEST(test_manual_missing) {
    g_autoptr(PpSchedule) sched = two_stage_base();
    emit(sched, PP_OP_FORWARD, 0, 0);
    emit(sched, PP_OP_BACKWARD_FULL, 0, 0);
    emit(sched, PP_OP_FORWARD, 1, 0);
    g_autoptr(GError) error = NULL;
    ck_assert(!pp_schedule_finish(sched, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_MISSING_OP));
    ck_assert_ptr_nonnull(strstr(error->message, "BW(mb=0, chunk=0) on stage 1 is missing"));
}
END_TEST

START_TEST(test_manual_duplicate) {
    g_autoptr(PpSchedule) sched = two_stage_base();
    emit(sched, PP_OP_FORWARD, 0, 0);
    emit(sched, PP_OP_FORWARD, 0, 0);
    g_autoptr(GError) error = NULL;
    ck_assert(!pp_schedule_finish(sched, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_DUPLICATE_OP));
    ck_assert_ptr_nonnull(strstr(error->message, "stage 0 op 1 F(mb=0, chunk=0) duplicates "
                                                 "stage 0 op 0"));
}
END_TEST

START_TEST(test_append_bad_stage_aborts) {
    g_autoptr(PpSchedule) sched = two_stage_base();
    emit(sched, PP_OP_FORWARD, 2, 0); // stage 2 of a 2-stage schedule: PP_ASSERT
}
END_TEST

/* --- bad parameters --- */

START_TEST(test_unknown_kind) {
    PpScheduleParams p = test_util_schedule_params("zigzag", 2, 0, 2, 0, 1);
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(pp_schedule_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_UNKNOWN_KIND));
    ck_assert_ptr_nonnull(strstr(error->message, "gpipe, 1f1b, interleaved"));
    g_autofree char *names = pp_sched_kind_names();
    ck_assert_ptr_nonnull(strstr(error->message, names));
    ck_assert_ptr_null(pp_sched_kind_lookup("zigzag"));
    ck_assert_ptr_nonnull(pp_sched_kind_lookup("paci"));
    int32_t n = 0;
    for (const PpSchedKindInfo *const *k = pp_sched_kinds(); *k != NULL; k++, n++)
        ck_assert_ptr_nonnull((*k)->summary);
    ck_assert_int_ge(n, 8);
}
END_TEST

START_TEST(test_interleaved_needs_multiple) {
    PpScheduleParams p = test_util_schedule_params("interleaved", 4, 2, 6, 0, 1);
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(pp_schedule_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
    ck_assert_ptr_nonnull(strstr(error->message, "n_microbatches = 6"));
    ck_assert_ptr_nonnull(strstr(error->message, "n_stages = 4"));
}
END_TEST

START_TEST(test_bad_params) {
    static const struct {
        const char *kind;
        int32_t     n, v, m, a, steps;
        const char *needle;
    } cases[] = {
        {"gpipe", 0, 1, 1, 1, 1, "n_stages = 0"},
        {"1f1b", 2, 1, 0, 1, 1, "n_microbatches = 0"},
        {"1f1b", 2, 1, 2, 1, 0, "n_steps = 0"},
        {"interleaved", 2, 0, 2, 1, 1, "n_chunks = 0"},
        {"pipedream", -1, 1, 1, 1, 1, "n_stages = -1"},
        {"2bw", 8, 1, 4, 1, 1, "n_microbatches = 4 is below"},
        {"async-1f1b", 2, 1, 1, 1, 0, "n_steps = 0"},
        {"paci", 4, 1, 1, 0, 1, "accumulation = 0"},
        {"paci", 5000, 1, 1, 1, 1, "n_stages = 5000"},
        {"paci", 4, 1, 1, 1 << 20, 1 << 10, "too large"},
    };
    for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
        PpScheduleParams p = test_util_schedule_params(cases[k].kind, cases[k].n, cases[k].v,
                                                       cases[k].m, cases[k].a, cases[k].steps);
        g_autoptr(GError) error = NULL;
        ck_assert_ptr_null(pp_schedule_new(&p, &error));
        ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
        ck_assert_msg(strstr(error->message, cases[k].needle) != NULL, "%s", error->message);
        ck_assert_ptr_nonnull(strstr(error->message, cases[k].kind));
    }
}
END_TEST

/* --- custom order files --- */

START_TEST(test_custom_examples) {
    g_autoptr(GError) error = NULL;
    g_autoptr(PpSchedule) split = build_custom(ORDERS_DIR "/split-n2-m2.csv", &error);
    ck_assert_msg(split != NULL, "%s", error ? error->message : "");
    ck_assert(split->split_backward);
    ck_assert(split->synchronous);
    ck_assert_int_eq(split->n_mb, 2);
    ck_assert_int_eq(split->n_steps, 1);
    ck_assert_int_eq(split->n_buffers[0], 2);
    ck_assert_int_eq(split->n_buffers[1], 2); // F(1) runs before W(0) frees mb 0
    check_structure(split);

    g_autoptr(PpSchedule) dead = build_custom(ORDERS_DIR "/deadlock-n2.csv", &error);
    ck_assert_ptr_null(dead);
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_DEADLOCK));
    /* The cycle: F(1)@1 needs F(1)@0, after BW(0)@0, which needs BW(0)@1, after F(1)@1.
     * BW(1) on either stage is stuck too but is not on the cycle. */
    const char *on_cycle[] = {"stage 0 op 1 BW(mb=0", "stage 0 op 2 F(mb=1", "stage 1 op 1 F(mb=1",
                              "stage 1 op 2 BW(mb=0"};
    gboolean    named = FALSE;
    for (int k = 0; k < 4; k++)
        named = named || strstr(error->message, on_cycle[k]) != NULL;
    ck_assert_msg(named, "%s", error->message);
}
END_TEST

START_TEST(test_custom_round_trip) {
    g_autofree char *dir = test_util_tmp_dir_new("pp-sched-XXXXXX");
    static const struct {
        const char *kind;
        int32_t     n, v, m, a, steps;
    } cases[] = {
        {"1f1b", 4, 1, 6, 1, 2},
        {"interleaved", 2, 3, 4, 1, 2},
        {"paci", 4, 1, 1, 3, 3},
    };
    for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
        g_autoptr(PpSchedule) gen =
            build(cases[k].kind, cases[k].n, cases[k].v, cases[k].m, cases[k].a, cases[k].steps);
        g_autofree char *path = g_build_filename(dir, "order.csv", NULL);
        g_autoptr(GError) error = NULL;
        ck_assert(pp_schedule_write_order(gen, path, &error));
        g_autoptr(PpSchedule) back = build_custom(path, &error);
        ck_assert_msg(back != NULL, "%s", error ? error->message : "");
        ck_assert_int_eq(back->n_stages, gen->n_stages);
        ck_assert_int_eq(back->n_chunks, gen->n_chunks);
        ck_assert_int_eq(back->n_mb, gen->n_mb);
        ck_assert_int_eq(back->n_steps, gen->n_steps);
        ck_assert_int_eq(back->synchronous, gen->synchronous);
        for (int32_t s = 0; s < gen->n_stages; s++) {
            ck_assert_int_eq(back->n_buffers[s], gen->n_buffers[s]);
            ck_assert_int_eq(back->n_ops[s], gen->n_ops[s]);
            ck_assert(memcmp(back->programs[s], gen->programs[s],
                             sizeof(PpOp) * (size_t)gen->n_ops[s]) == 0);
        }
    }
    test_util_tmp_dir_remove(dir);
}
END_TEST

START_TEST(test_custom_bad_files) {
    static const struct {
        const char *text;
        gint        code; /* in PP_SCHEDULE_ERROR */
        const char *needle;
    } cases[] = {
        {"stage,index,op,mb,chunk\n0,0,F,0,0\n0,1,X,0,0\n", PP_SCHEDULE_ERROR_PARSE,
         ":3: field 'op' = 'X'"},
        {"stage,index,op,mb,chunk\n0,0,F,zero,0\n", PP_SCHEDULE_ERROR_PARSE,
         ":2: field 'mb' = 'zero'"},
        {"stage,index,op,mb,chunk\n0,0,F,0\n", PP_SCHEDULE_ERROR_PARSE, ":2: 4 fields"},
        {"stage,idx,op,mb,chunk\n", PP_SCHEDULE_ERROR_PARSE, ":1: field 'index' = 'idx'"},
        {"stage,index,op,mb,chunk\n0,0,U,3,-1\n", PP_SCHEDULE_ERROR_PARSE, ":2: field 'mb' = '3'"},
        {"stage,index,op,mb,chunk\n0,0,F,0,0\n0,2,BW,0,0\n", PP_SCHEDULE_ERROR_PARSE,
         ":3: field 'index' = 2 leaves a gap"},
        {"stage,index,op,mb,chunk\n0,0,F,0,0\n0,0,BW,0,0\n", PP_SCHEDULE_ERROR_PARSE,
         "repeats line 2"},
        {"stage,index,op,mb,chunk\n", PP_SCHEDULE_ERROR_PARSE, "no ops"},
        {"stage,index,op,mb,chunk\n0,0,F,0,0\n0,1,F,0,0\n0,2,BW,0,0\n",
         PP_SCHEDULE_ERROR_DUPLICATE_OP, "stage 0 op 1 F(mb=0, chunk=0) duplicates"},
        {"stage,index,op,mb,chunk\n0,0,F,0,0\n0,1,F,1,0\n0,2,BW,1,0\n",
         PP_SCHEDULE_ERROR_MISSING_OP, "BW(mb=0, chunk=0) on stage 0 is missing"},
        {"stage,index,op,mb,chunk\n0,0,F,0,0\n0,1,B,0,0\n0,2,W,0,0\n0,3,F,1,0\n0,4,BW,1,0\n",
         PP_SCHEDULE_ERROR_MISSING_OP, "stage 0 op 4 BW(mb=1, chunk=0) does not fit a split"},
        {"stage,index,op,mb,chunk\n0,0,BW,0,0\n0,1,F,0,0\n", PP_SCHEDULE_ERROR_ORDER,
         "stage 0 op 0 BW(mb=0, chunk=0) runs before stage 0 op 1 F(mb=0, chunk=0)"},
    };
    g_autofree char *dir = test_util_tmp_dir_new("pp-sched-XXXXXX");
    g_autofree char *path = g_build_filename(dir, "bad.csv", NULL);
    for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
        ck_assert(g_file_set_contents(path, cases[k].text, -1, NULL));
        g_autoptr(GError) error = NULL;
        g_autoptr(PpSchedule) sched = build_custom(path, &error);
        ck_assert_ptr_null(sched);
        ck_assert_msg(g_error_matches(error, PP_SCHEDULE_ERROR, cases[k].code), "case %zu: %s", k,
                      error->message);
        ck_assert_msg(strstr(error->message, cases[k].needle) != NULL, "case %zu: %s", k,
                      error->message);
        if (cases[k].code == PP_SCHEDULE_ERROR_PARSE)
            ck_assert_ptr_nonnull(strstr(error->message, path));
    }
    test_util_tmp_dir_remove(dir);

    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(build_custom(ORDERS_DIR "/no-such-file.csv", &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_OPEN));
    ck_assert_ptr_nonnull(strstr(error->message, "no-such-file.csv"));
    g_clear_error(&error);
    ck_assert_ptr_null(build_custom(NULL, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
}
END_TEST

static Suite *schedule_suite(void) {
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("generators");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_sweep, 0, n_registered());
    tcase_add_loop_test(tc, test_registry_rules, 0, n_registered());
    tcase_add_loop_test(tc, test_registry_records, 0, n_registered());
    tcase_add_test(tc, test_inflight_rule);
    tcase_add_test(tc, test_1f1b_program);
    tcase_add_test(tc, test_interleaved_program);
    tcase_add_loop_test(tc, test_paci_drift, 0, 4);
    tcase_add_test(tc, test_paci_drift_exceeds_paper_bound);
    tcase_add_test(tc, test_stashed_drift);
    tcase_add_test(tc, test_async_few_microbatches);
    suite_add_tcase(s, tc);

    tc = tcase_create("validation");
    tcase_add_test(tc, test_manual_ok_and_queries);
    tcase_add_test(tc, test_manual_buffers);
    tcase_add_test(tc, test_manual_order);
    tcase_add_test(tc, test_manual_missing);
    tcase_add_test(tc, test_manual_duplicate);
    tcase_add_test_raise_signal(tc, test_append_bad_stage_aborts, SIGABRT);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_unknown_kind);
    tcase_add_test(tc, test_interleaved_needs_multiple);
    tcase_add_test(tc, test_bad_params);
    suite_add_tcase(s, tc);

    tc = tcase_create("custom");
    tcase_add_test(tc, test_custom_examples);
    tcase_add_test(tc, test_custom_round_trip);
    tcase_add_test(tc, test_custom_bad_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(schedule_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
