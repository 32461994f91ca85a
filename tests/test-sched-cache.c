/* SPDX-License-Identifier: MIT
 * test-sched-cache.c: the schedule cache (common/pp-sched-cache.h) gives the program
 * pp_schedule_new() builds, op for op, and its peak in-flight counts; a kind whose generator
 * ignores costs is built once for any costs, one that reads them (zb-1p, zb-2p) once per
 * costs; a dropped schedule comes back the same; an error is returned again.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-sched-cache.h"
#include "pp-schedule.h"

/* Valid parameters of kind @info on 4 stages: 8 micro-batches, a = 4 (or the record's), two
 * chunks for a multi-chunk kind, 2 steps, op costs scaled by @scale. */
static PpScheduleParams cache_params(const PpSchedKindInfo *info, int64_t scale) {
    return (PpScheduleParams){
        .kind = info,
        .n_stages = 4,
        .n_chunks = MAX(info->min_chunks, MIN(2, info->max_chunks)),
        .n_microbatches = 8,
        .accumulation = info->fixed_accumulation > 0 ? info->fixed_accumulation : 4,
        .n_steps = 2,
        .f_ns = 100 * scale,
        .b_ns = 130 * scale,
        .w_ns = 70 * scale,
        .comm_ns = 10,
        .mem_w_fraction = 0.5,
    };
}

/* @a and @b run the same programs. */
static void assert_same_programs(const PpSchedule *a, const PpSchedule *b) {
    ck_assert_int_eq(a->n_stages, b->n_stages);
    ck_assert_int_eq(a->n_chunks, b->n_chunks);
    ck_assert_int_eq(a->n_mb, b->n_mb);
    for (int32_t s = 0; s < a->n_stages; s++) {
        ck_assert_int_eq(a->n_ops[s], b->n_ops[s]);
        ck_assert_int_eq(a->n_buffers[s], b->n_buffers[s]);
        ck_assert(memcmp(a->programs[s], b->programs[s], sizeof(PpOp) * (size_t)a->n_ops[s]) == 0);
    }
}

static int n_kinds(void) {
    int n = 0;
    while (pp_sched_kinds()[n] != NULL)
        n++;
    return n;
}

/* Every kind but custom (its order file is test-schedule's): the cached program and counts
 * are pp_schedule_new()'s; other costs reuse it unless the record says the generator reads
 * them, and then give that costs' own program. */
START_TEST(test_cache_equals_fresh) {
    const PpSchedKindInfo *info = pp_sched_kinds()[_i];
    if (info->needs_order_file)
        return;
    g_autoptr(GError) error = NULL;
    PpScheduleParams params = cache_params(info, 1);
    g_autoptr(PpSchedule) fresh = pp_schedule_new(&params, &error);
    ck_assert_msg(fresh != NULL, "%s: %s", info->name, error ? error->message : "");
    g_autoptr(PpSchedCache) cache = pp_sched_cache_new(1 << 20);
    const int32_t *peak = pp_sched_cache_peak_inflight(cache, &params, &error);
    ck_assert_ptr_nonnull(peak);
    for (int32_t s = 0; s < fresh->n_stages; s++)
        ck_assert_int_eq(peak[s], pp_schedule_peak_inflight(fresh, s));
    const PpSchedule *cached = pp_sched_cache_schedule(cache, &params, &error);
    ck_assert_ptr_nonnull(cached);
    assert_same_programs(cached, fresh);
    int64_t built, reused;
    pp_sched_cache_counts(cache, &built, &reused);
    ck_assert_int_eq(built, 1);
    ck_assert_int_eq(reused, 1);

    PpScheduleParams other = cache_params(info, 3);
    g_autoptr(PpSchedule) other_fresh = pp_schedule_new(&other, &error);
    ck_assert_ptr_nonnull(other_fresh);
    assert_same_programs(pp_sched_cache_schedule(cache, &other, &error), other_fresh);
    pp_sched_cache_counts(cache, &built, &reused);
    ck_assert_int_eq(built, info->reads_costs ? 2 : 1);
}
END_TEST

/* With no budget only the last schedule is held: asking again for a dropped one builds the
 * same program, and its counts were kept. */
START_TEST(test_cache_drops_and_rebuilds) {
    g_autoptr(GError) error = NULL;
    g_autoptr(PpSchedCache) cache = pp_sched_cache_new(0);
    PpScheduleParams a = cache_params(pp_sched_kind_lookup("1f1b"), 1);
    PpScheduleParams b = cache_params(pp_sched_kind_lookup("paci"), 1);
    g_autoptr(PpSchedule) fresh = pp_schedule_new(&a, &error);
    ck_assert_ptr_nonnull(pp_sched_cache_schedule(cache, &a, &error));
    ck_assert_ptr_nonnull(pp_sched_cache_schedule(cache, &b, &error)); /* drops a */
    ck_assert_ptr_nonnull(pp_sched_cache_peak_inflight(cache, &a, &error));
    int64_t built, reused;
    pp_sched_cache_counts(cache, &built, &reused);
    ck_assert_int_eq(built, 2); /* a's counts outlive its program */
    assert_same_programs(pp_sched_cache_schedule(cache, &a, &error), fresh);
    pp_sched_cache_counts(cache, &built, &reused);
    ck_assert_int_eq(built, 3);
    ck_assert_int_eq(reused, 1);
}
END_TEST

/* A key whose build fails gives its error on every call, built once. */
START_TEST(test_cache_error) {
    g_autoptr(PpSchedCache) cache = pp_sched_cache_new(1 << 20);
    PpScheduleParams params = cache_params(pp_sched_kind_lookup("interleaved"), 1);
    params.n_microbatches = 6; /* not a multiple of 4 stages */
    for (int k = 0; k < 2; k++) {
        g_autoptr(GError) error = NULL;
        ck_assert_ptr_null(pp_sched_cache_schedule(cache, &params, &error));
        ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
        ck_assert_ptr_nonnull(strstr(error->message, "not a multiple of n_stages"));
        g_clear_error(&error);
        ck_assert_ptr_null(pp_sched_cache_peak_inflight(cache, &params, &error));
        ck_assert_ptr_nonnull(error);
    }
    int64_t built, reused;
    pp_sched_cache_counts(cache, &built, &reused);
    ck_assert_int_eq(built, 1);
    ck_assert_int_eq(reused, 3);
}
END_TEST

static Suite *sched_cache_suite(void) {
    Suite *s = suite_create("sched-cache");
    TCase *tc = tcase_create("cache");
    tcase_add_loop_test(tc, test_cache_equals_fresh, 0, n_kinds());
    tcase_add_test(tc, test_cache_drops_and_rebuilds);
    tcase_add_test(tc, test_cache_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(sched_cache_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
