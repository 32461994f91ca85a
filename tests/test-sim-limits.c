/* SPDX-License-Identifier: MIT
 * test-sim-limits.c: the simulator never aborts or hangs on a value it accepts (issue 6). For
 * every numeric scenario key, the two ends of its valid range (pp_scenario_key_info) run on
 * four small scenarios (explicit costs, the analytic model, PACI's dynamic policy, 2BW's
 * weight stashing) or fail with a GError other than the key's range error; one step past
 * either end is that range error, naming the key. Seeded random combinations of the
 * simulator's keys run or fail with a GError, and every run that succeeds reports sane
 * figures.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "sim-report.h"

#define DATA_DIR PP_SOURCE_ROOT "/tests/data/sim"

/* The bases every key is tried on, with the overrides each needs. */
typedef struct {
    const char *file;
    const char *extra; /* (nullable) one more override */
} Base;

static const Base bases[] = {
    {DATA_DIR "/1f1b.ini", NULL},                    /* [costs], flush */
    {DATA_DIR "/gpt2-a100.ini", NULL},               /* analytic model, balanced split */
    {DATA_DIR "/paci.ini", "pipeline.mode=dynamic"}, /* [costs], PACI's live policy */
    {DATA_DIR "/1f1b.ini", "pipeline.schedule=2bw"}, /* [costs], weight stashing: stash_us */
};

/* @v in file units as an override value: whole numbers exactly, reals with 17 digits. */
static char *format_value(const PpScenarioKeyInfo *k, double v) {
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    if (k->whole)
        return g_strdup_printf("%.0f", v);
    return g_strdup(g_ascii_formatd(buf, sizeof buf, "%.17g", v));
}

/* The figures of a run that succeeded are finite and in their ranges. */
static void check_result(const SimJob *job, const char *what) {
    const SimResult *res = job->result;
    ck_assert_msg(res->makespan_ns >= 0 && res->step_time_ns >= 0, "%s: negative time", what);
    ck_assert_msg(isfinite(res->bubble_fraction) && res->bubble_fraction <= 1.0, "%s: bubble %g",
                  what, res->bubble_fraction);
    if (job->schedule->synchronous)
        ck_assert_msg(res->bubble_fraction >= 0.0, "%s: bubble %g", what, res->bubble_fraction);
    ck_assert_msg(res->efficiency >= 0.0 && res->efficiency <= 1.0, "%s: efficiency %g", what,
                  res->efficiency);
    ck_assert_msg(isfinite(res->throughput_tokens_per_s) && res->throughput_tokens_per_s >= 0.0,
                  "%s: throughput %g", what, res->throughput_tokens_per_s);
    ck_assert_msg(isfinite(res->mfu) && res->mfu >= 0.0, "%s: mfu %g", what, res->mfu);
    for (int32_t s = 0; s < res->n_stages; s++) {
        const SimStageResult *st = &res->stages[s];
        ck_assert_msg(st->busy_ns >= 0 && st->span_ns >= 0 && st->peak_memory_bytes >= 0,
                      "%s: stage %d", what, s);
        ck_assert_msg(st->busy_ns <= res->makespan_ns, "%s: stage %d busier than the run", what, s);
    }
}

/* Runs @base with the overrides @ov (NULL-terminated); returns TRUE when it ran. */
static gboolean run(const Base *base, const char *const *ov, const char *what, GError **error) {
    g_autoptr(GPtrArray) all = g_ptr_array_new();
    for (const char *const *o = ov; *o != NULL; o++)
        g_ptr_array_add(all, (gpointer)*o);
    if (base->extra != NULL)
        g_ptr_array_add(all, (gpointer)base->extra);
    g_ptr_array_add(all, NULL);
    g_autoptr(SimJob) job = sim_job_new(base->file, (const char *const *)all->pdata, FALSE, error);
    if (job == NULL) {
        ck_assert_msg(*error != NULL, "%s: no job and no error", what);
        return FALSE;
    }
    check_result(job, what);
    return TRUE;
}

/* "[section] key = 'value': " starts the range error of the key (pp-scenario-keys.c). */
static char *range_error_prefix(const PpScenarioKeyInfo *k, const char *value) {
    return g_strdup_printf("[%s] %s = '%s': ", k->section, k->key, value);
}

/* Overrides that give every base the section of @k, whose required keys would otherwise be
 * missing: a device preset for [hardware], forward and backward times for [costs]. The key's
 * own override comes after them and wins. */
static void add_section(GPtrArray *ov, const PpScenarioKeyInfo *k) {
    if (strcmp(k->section, "hardware") == 0)
        g_ptr_array_add(ov, g_strdup("hardware.preset=a100-sxm"));
    if (strcmp(k->section, "costs") == 0) {
        g_ptr_array_add(ov, g_strdup("costs.forward_us=10"));
        g_ptr_array_add(ov, g_strdup("costs.backward_us=12"));
    }
}

/* One key: both ends run or fail otherwise than by the key's range; one past is its range
 * error on every base. */
START_TEST(test_key_extremes) {
    PpScenarioKeyInfo k;
    pp_scenario_key_info((size_t)_i, &k);
    if (!k.numeric)
        return;
    double           lo = k.min_excluded ? nextafter(k.min, INFINITY) : k.min;
    double           hi = k.max_excluded ? nextafter(k.max, -INFINITY) : k.max;
    g_autofree char *lo_text = format_value(&k, lo), *hi_text = format_value(&k, hi);
    /* one past each end: the excluded bound itself, or the next number out */
    g_autofree char *below = k.min_excluded ? format_value(&k, k.min)
                             : k.whole      ? format_value(&k, k.min - 1.0)
                                            : format_value(&k, nextafter(k.min, -INFINITY));
    g_autofree char *above = k.max_excluded ? format_value(&k, k.max)
                             : k.whole      ? format_value(&k, k.max + 1.0)
                                            : format_value(&k, nextafter(k.max, INFINITY));
    if (k.whole && k.max > (double)G_MAXINT64) {
        /* run.seed: 2^64 - 1 is no double; its end and the number past it, as text */
        g_free(hi_text);
        g_free(above);
        hi_text = g_strdup_printf("%" G_GUINT64_FORMAT, G_MAXUINT64);
        above = g_strdup("18446744073709551616");
    }

    const char *const inside[] = {lo_text, hi_text};
    const char *const outside[] = {below, above};
    for (size_t b = 0; b < G_N_ELEMENTS(bases); b++) {
        for (size_t v = 0; v < 4; v++) {
            const char *value = v < 2 ? inside[v] : outside[v - 2];
            g_autoptr(GPtrArray) ov = g_ptr_array_new_with_free_func(g_free);
            add_section(ov, &k);
            g_ptr_array_add(ov, g_strdup_printf("%s.%s=%s", k.section, k.key, value));
            g_autofree char *what =
                g_strdup_printf("%s on %s", (char *)ov->pdata[ov->len - 1], bases[b].file);
            g_ptr_array_add(ov, NULL);
            const char *const *ovs = (const char *const *)ov->pdata;
            g_autoptr(GError) error = NULL;
            g_autofree char *prefix = range_error_prefix(&k, value);
            if (v >= 2) {
                /* one past an end: the key's range error */
                ck_assert_msg(!run(&bases[b], ovs, what, &error), "%s ran", what);
                ck_assert_msg(
                    g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE),
                    "%s: %s", what, error->message);
                ck_assert_msg(strstr(error->message, prefix) != NULL, "%s: '%s' not in: %s", what,
                              prefix, error->message);
                continue;
            }
            if (run(&bases[b], ovs, what, &error))
                continue;
            /* an end of the range: refused only by a combination check */
            ck_assert_msg(strstr(error->message, prefix) == NULL, "%s: refused as out of range: %s",
                          what, error->message);
        }
    }
}
END_TEST

/* --- random combinations --- */

/* xorshift64*: a fixed seed gives the same cases on every run. */
static uint64_t rng_next(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(2685821657736338717);
}

static double rng_unit(uint64_t *state) {
    return (double)(rng_next(state) >> 11) / 9007199254740992.0; /* [0, 1) */
}

/* A value in [lo, hi] (file units), log-uniform over positive ranges so that every order of
 * magnitude is drawn, with each end drawn one time in eight. */
static double rng_value(uint64_t *state, const PpScenarioKeyInfo *k) {
    double   lo = k->min_excluded ? nextafter(k->min, INFINITY) : k->min;
    double   hi = k->max_excluded ? nextafter(k->max, -INFINITY) : k->max;
    uint64_t pick = rng_next(state) % 8;
    if (pick == 0)
        return lo;
    if (pick == 1)
        return hi;
    double from = MAX(lo, k->whole ? 1.0 : 1e-12), v;
    v = exp(log(from) + rng_unit(state) * (log(hi) - log(from)));
    v = k->whole ? floor(v) : v;
    return MIN(MAX(v, lo), hi);
}

/* The keys the simulator reads (the executor's [data] [optimizer] [run] keys only parse);
 * the [costs] times are lists (one value, or one per stage), drawn as one value. */
static gboolean sim_key(const PpScenarioKeyInfo *k) {
    static const char *const sections[] = {"model", "hardware", "pipeline", "training", "costs"};
    for (size_t i = 0; i < G_N_ELEMENTS(sections); i++)
        if (strcmp(k->section, sections[i]) == 0)
            return k->numeric && (!k->list || strcmp(k->section, "costs") == 0);
    return FALSE;
}

/* Micro-batch units a run of @ov on @base would simulate; 0 when it does not load. Keeps
 * the random cases fast: the engine takes about a microsecond per op. */
static int64_t run_units(const Base *base, const char *const *ov) {
    g_autoptr(PpScenario) sc = pp_scenario_load(base->file, ov, NULL);
    if (sc == NULL)
        return 0;
    return (int64_t)sc->pipeline.mb_per_step * sc->training.steps * sc->pipeline.stages *
           sc->pipeline.chunks;
}

START_TEST(test_random_combinations) {
    g_autoptr(GArray) keys = g_array_new(FALSE, FALSE, sizeof(PpScenarioKeyInfo));
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        PpScenarioKeyInfo k;
        pp_scenario_key_info(i, &k);
        if (sim_key(&k))
            g_array_append_val(keys, k);
    }
    ck_assert_uint_ge(keys->len, 20);
    uint64_t state = UINT64_C(0x9e3779b97f4a7c15);
    int      n_ran = 0, n_refused = 0, n_skipped = 0;
    for (int trial = 0; trial < 1500; trial++) {
        const Base *base = &bases[rng_next(&state) % G_N_ELEMENTS(bases)];
        int         n_keys = 1 + (int)(rng_next(&state) % 4);
        g_autoptr(GPtrArray) ov = g_ptr_array_new_with_free_func(g_free);
        const PpScenarioKeyInfo *picked[4];
        for (int j = 0; j < n_keys; j++) {
            picked[j] = &g_array_index(keys, PpScenarioKeyInfo, rng_next(&state) % keys->len);
            add_section(ov, picked[j]);
        }
        for (int j = 0; j < n_keys; j++) {
            g_autofree char *value = format_value(picked[j], rng_value(&state, picked[j]));
            g_ptr_array_add(ov,
                            g_strdup_printf("%s.%s=%s", picked[j]->section, picked[j]->key, value));
        }
        g_ptr_array_add(ov, NULL);
        const char *const *ovs = (const char *const *)ov->pdata;
        if (run_units(base, ovs) > 20000) {
            n_skipped++;
            continue;
        }
        g_autofree char *what = g_strjoinv(" ", (char **)ov->pdata);
        g_autoptr(GError) error = NULL;
        if (run(base, ovs, what, &error))
            n_ran++;
        else
            n_refused++;
    }
    /* Both outcomes are exercised. */
    ck_assert_int_gt(n_ran, 400);
    ck_assert_int_gt(n_refused, 200);
    ck_assert_int_lt(n_skipped, 200);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sim-limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_key_extremes, 0, (int)pp_scenario_n_keys());
    tcase_add_test(tc, test_random_combinations);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
