/* SPDX-License-Identifier: MIT
 * test-calibrate-cpu.c (suite `slow`): measured vs predicted on the CPU executor. Trains
 * scenarios/calibrate-cpu.ini (2 stages, one BLAS thread each) with zb-h1 (F, B, W, U) and
 * 2BW m = 8 (fused BW, the weight copy of stashing) to calibrate on, and with four held-out
 * configurations to predict: 1F1B m = 4, ZB-2p, 2BW m = 4 and PACI a = 4. Every configuration
 * runs ROUNDS times, interleaved (round 1 runs all six, then round 2, ...): on the development
 * VM a whole run is now and then 10-70% slower than the others (every op of a stage,
 * overlapped by the other stage or not), at times several in a row, and one run per
 * configuration then misses by as much. The fit pools the op times of every fit run
 * (per-stage medians), and each held-out configuration's measured step time is the median over its
 * rounds. Asserts each predicted step time within 5% of that median and the flush/PACI throughput
 * ratio within 5% of the measured one. Steady state: the median step interval over steps 7..22 of
 * 30 (pacer-sim calibrate's rule), the first step's ops left out of the fit. Needs 2 processors
 * (exit 77, skipped, otherwise) and an idle machine: other load lengthens ops at random. Not
 * reliable on the development VM even so: in two of five sittings 2bw-m4 was predicted
 * 6.5-7.6% short while its own runs spread by 16% (README, "Tests and benchmarks").
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
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert_msg(json_parser_load_from_data(parser, out, -1, NULL), "no JSON: %s", out);
    JsonArray *traces =
        json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "traces");
    ck_assert_int_eq(json_array_get_length(traces), N_CONFIGS * ROUNDS);

    /* Traces come back in argument order. A configuration's prediction is one figure (the
     * same fit, the same schedule); its measurement is the median over the rounds. */
    int    failures = 0;
    double measured[N_CONFIGS], predicted[N_CONFIGS];
    printf("\n%-10s %-6s %-26s %12s %12s %8s\n", "config", "role", "measured ms per round",
           "median ms", "predicted ms", "ratio");
    for (size_t i = 0; i < N_CONFIGS; i++) {
        double   rounds[ROUNDS];
        GString *list = g_string_new(NULL);
        for (int r = 0; r < ROUNDS; r++) {
            JsonObject *t = json_array_get_object_element(traces, (guint)(i * ROUNDS + r));
            rounds[r] = (double)json_object_get_int_member(t, "measured_step_ns");
            double p = (double)json_object_get_int_member(t, "predicted_step_ns");
            if (r == 0)
                predicted[i] = p;
            ck_assert_msg(p == predicted[i], "%s: round %d predicted %.0f ns, round 1 %.0f ns",
                          configs[i].name, r + 1, p, predicted[i]);
            g_string_append_printf(list, "%s%.1f", r ? " " : "", rounds[r] / 1e6);
        }
        measured[i] = median(rounds, ROUNDS);
        double ratio = measured[i] > 0 ? predicted[i] / measured[i] : 0.0;
        printf("%-10s %-6s %-26s %12.3f %12.3f %8.4f\n", configs[i].name,
               configs[i].fit ? "fit" : "check", list->str, measured[i] / 1e6, predicted[i] / 1e6,
               ratio);
        g_string_free(list, TRUE);
        if (!configs[i].fit && !(fabs(ratio - 1.0) <= TOLERANCE)) {
            fprintf(stderr, "%s: predicted / measured step time %.4f is not within %.0f%%\n",
                    configs[i].name, ratio, TOLERANCE * 100);
            failures++;
        }
    }
    /* Flush over PACI: the same tokens per step, so the throughput ratio is paci's step
     * time over 1f1b's. */
    double ratio_measured = measured[PACI] / measured[FLUSH],
           ratio_predicted = predicted[PACI] / predicted[FLUSH];
    printf("throughput 1f1b/paci: measured %.4f, predicted %.4f (%.4f)\n", ratio_measured,
           ratio_predicted, ratio_predicted / ratio_measured);
    if (!(fabs(ratio_predicted / ratio_measured - 1.0) <= TOLERANCE)) {
        fprintf(stderr, "flush/paci throughput ratio: predicted %.4f, measured %.4f\n",
                ratio_predicted, ratio_measured);
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
