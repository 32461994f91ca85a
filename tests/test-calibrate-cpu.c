/* SPDX-License-Identifier: MIT
 * test-calibrate-cpu.c (suite `slow`): measured vs predicted on the CPU executor. Trains
 * scenarios/calibrate-cpu.ini (2 stages, one BLAS thread each, run.speed_reference on) with
 * zb-h1 (F, B, W, U) and 2BW m = 8 (fused BW, the weight copy of stashing) to calibrate on, and
 * with four held-out configurations to predict: 1F1B m = 4, ZB-2p, 2BW m = 4 and PACI a = 4.
 * Every configuration runs ROUNDS times, interleaved (round 1 runs all six, then round 2, ...).
 * On the development VM a core now and then runs a whole run 5-15% slower than usual (every op
 * of its stage alike), so each run also times a fixed kernel on each stage after every update,
 * and pacer-sim calibrate turns that into each stage's slowdown in that run. The fit scales
 * every fit run's op times by it and pools them; each held-out run is predicted with its own
 * stages' slowdowns (the "adjusted" prediction: the run contributes how fast its cores were,
 * not its op times). Asserts, per held-out configuration, the median over its rounds of
 * adjusted / measured step time within 5%, and the same for the flush/PACI throughput ratio.
 * It prints the plain prediction (one figure, against the median measured step) too. Steady
 * state: the median step interval over steps 7..22 of 30 (pacer-sim calibrate's rule), the
 * first step's ops left out of the fit. Needs 2 processors (exit 77, skipped, otherwise) and
 * an idle machine: other load lengthens ops at random.
 */
#include <check.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test-util.h"

#define SIM_BIN   PP_BUILD_ROOT "/sim/pacer-sim"
#define TRAIN_BIN PP_BUILD_ROOT "/exec/pacer-train"
#define SCENARIO  PP_SOURCE_ROOT "/scenarios/calibrate-cpu.ini"
#define TOLERANCE 0.05
#define ROUNDS    5

typedef struct {
    const char *name;
    const char *schedule;
    const char *count; /* pipeline.microbatches=m or pipeline.accumulation=a */
    gboolean    fit;
    char       *dirs[ROUNDS];
} Config;

/* Trains round @round of @config into a fresh folder. */
static void train(Config *config, int round) {
    config->dirs[round] = test_util_tmp_dir_new("calibrate-cpu-XXXXXX");
    g_autofree char *schedule = g_strdup_printf("pipeline.schedule=%s", config->schedule);
    const char      *args[] = {SCENARIO,
                               "--set",
                               schedule,
                               "--set",
                               config->count,
                               "--set",
                               "data.cache_dir=" PP_SOURCE_ROOT "/.cache",
                               "--quiet",
                               "--out",
                               config->dirs[round],
                               NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_msg(test_util_spawn(TRAIN_BIN, args, &out, &err) == 0, "pacer-train %s: %s",
                  config->name, err);
    printf("round %d %-10s %s", round + 1, config->name, out);
    fflush(stdout); /* Check forks the test: unflushed output would be lost */
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of @n values (sorts them). */
static double median(double *values, size_t n) {
    qsort(values, n, sizeof *values, compare_double);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

START_TEST(test_calibrate_cpu) {
    g_autofree char *load = NULL;
    if (g_file_get_contents("/proc/loadavg", &load, NULL, NULL))
        printf("load average before: %s", load);
    Config configs[] = {
        {"zb-h1", "zb-h1", "pipeline.microbatches=4", TRUE, {NULL}},
        {"2bw-m8", "2bw", "pipeline.microbatches=8", TRUE, {NULL}},
        {"1f1b-m4", "1f1b", "pipeline.microbatches=4", FALSE, {NULL}},
        {"zb-2p", "zb-2p", "pipeline.microbatches=4", FALSE, {NULL}},
        {"2bw-m4", "2bw", "pipeline.microbatches=4", FALSE, {NULL}},
        {"paci-a4", "paci", "pipeline.accumulation=4", FALSE, {NULL}},
    };
    enum { N_CONFIGS = G_N_ELEMENTS(configs), FLUSH = 2, PACI = 5 };
    for (int r = 0; r < ROUNDS; r++)
        for (size_t i = 0; i < N_CONFIGS; i++)
            train(&configs[i], r);

    /* Traces in configuration order, each configuration's rounds together. */
    g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(args, g_strdup("calibrate"));
    for (size_t i = 0; i < N_CONFIGS; i++)
        for (int r = 0; r < ROUNDS; r++) {
            if (!configs[i].fit)
                g_ptr_array_add(args, g_strdup("--check"));
            g_ptr_array_add(args, g_build_filename(configs[i].dirs[r], "ops.csv", NULL));
        }
    g_ptr_array_add(args, g_strdup("--json"));
    g_ptr_array_add(args, NULL);
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_msg(test_util_spawn(SIM_BIN, (const char *const *)args->pdata, &out, &err) == 0,
                  "pacer-sim calibrate: %s", err);
    test_util_assert_json(out);
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert_msg(json_parser_load_from_data(parser, out, -1, NULL), "no JSON: %s", out);
    JsonArray *traces =
        json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "traces");
    ck_assert_int_eq(json_array_get_length(traces), N_CONFIGS * ROUNDS);

    /* Traces come back in argument order. A configuration's plain prediction is one figure
     * (the same fit, the same schedule), held against the median of its measured rounds. The
     * adjusted prediction is per round (each run's own stage slowdowns, from its speed
     * reference), held against that round's measurement: the configuration's figure is the
     * median over its rounds of adjusted / measured. */
    int    failures = 0;
    double ratio_adj[N_CONFIGS][ROUNDS], adjusted[N_CONFIGS][ROUNDS], measured[N_CONFIGS][ROUNDS];
    printf("\n%-10s %-6s %-36s %9s %9s %7s %7s  %s\n", "config", "role", "measured ms per round",
           "median", "predicted", "ratio", "adjusted", "slowdown per round (stage 0/1)");
    for (size_t i = 0; i < N_CONFIGS; i++) {
        double   predicted = 0, sorted[ROUNDS];
        GString *list = g_string_new(NULL), *slow = g_string_new(NULL);
        for (int r = 0; r < ROUNDS; r++) {
            JsonObject *t = json_array_get_object_element(traces, (guint)(i * ROUNDS + r));
            measured[i][r] = (double)json_object_get_int_member(t, "measured_step_ns");
            adjusted[i][r] = (double)json_object_get_int_member(t, "adjusted_step_ns");
            double p = (double)json_object_get_int_member(t, "predicted_step_ns");
            if (r == 0)
                predicted = p;
            ck_assert_msg(p == predicted, "%s: round %d predicted %.0f ns, round 1 %.0f ns",
                          configs[i].name, r + 1, p, predicted);
            ck_assert_msg(adjusted[i][r] > 0,
                          "%s round %d: no adjusted prediction (no speed "
                          "reference rows?)",
                          configs[i].name, r + 1);
            ratio_adj[i][r] = adjusted[i][r] / measured[i][r];
            sorted[r] = measured[i][r];
            JsonArray *k = json_object_get_array_member(t, "slowdown");
            g_string_append_printf(list, "%s%.1f", r ? " " : "", measured[i][r] / 1e6);
            g_string_append_printf(slow, "%s%.3f/%.3f", r ? " " : "",
                                   json_array_get_double_element(k, 0),
                                   json_array_get_double_element(k, 1));
        }
        double med = median(sorted, ROUNDS);
        double adj_ratios[ROUNDS];
        memcpy(adj_ratios, ratio_adj[i], sizeof adj_ratios);
        double adj = median(adj_ratios, ROUNDS);
        printf("%-10s %-6s %-36s %9.3f %9.3f %7.4f %7.4f   %s\n", configs[i].name,
               configs[i].fit ? "fit" : "check", list->str, med / 1e6, predicted / 1e6,
               predicted / med, adj, slow->str);
        g_string_free(list, TRUE);
        g_string_free(slow, TRUE);
        if (!configs[i].fit && !(fabs(adj - 1.0) <= TOLERANCE)) {
            fprintf(stderr,
                    "%s: adjusted / measured step time %.4f (median over rounds) is not "
                    "within %.0f%%\n",
                    configs[i].name, adj, TOLERANCE * 100);
            failures++;
        }
    }
    /* Flush over PACI: the same tokens per step, so the throughput ratio is paci's step time
     * over 1f1b's; per round, predicted (adjusted) against measured, then the median. */
    double ratio_rounds[ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        ratio_rounds[r] =
            (adjusted[PACI][r] / adjusted[FLUSH][r]) / (measured[PACI][r] / measured[FLUSH][r]);
    double ratio = median(ratio_rounds, ROUNDS);
    printf("throughput 1f1b/paci: predicted (adjusted) over measured %.4f (median over rounds)\n",
           ratio);
    if (!(fabs(ratio - 1.0) <= TOLERANCE)) {
        fprintf(stderr, "flush/paci throughput ratio: predicted over measured %.4f\n", ratio);
        failures++;
    }
    g_clear_pointer(&load, g_free);
    if (g_file_get_contents("/proc/loadavg", &load, NULL, NULL))
        printf("load average after: %s", load);
    fflush(stdout);
    for (size_t i = 0; i < N_CONFIGS; i++)
        for (int r = 0; r < ROUNDS; r++)
            ck_assert_msg(test_util_tmp_dir_remove(configs[i].dirs[r]), "cannot remove %s",
                          configs[i].dirs[r]);
    ck_assert_msg(failures == 0, "%d prediction(s) off by more than %.0f%% (see above)", failures,
                  TOLERANCE * 100);
}
END_TEST

int main(void) {
    if (g_get_num_processors() < 2) {
        printf("skip: 2 stages need 2 processors, this machine has %u\n", g_get_num_processors());
        return 77;
    }
    Suite *s = suite_create("calibrate-cpu");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, test_calibrate_cpu);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
