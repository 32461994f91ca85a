/* SPDX-License-Identifier: MIT
 * test-sim-tta.c: `pacer-sim tta` on the synthetic runs of tests/data/tta (1f1b m = 4, 8 and
 * paci a = 4, 8, three evaluations each at 10, 20 and 30 updates): times, linear
 * interpolation, never-reached thresholds and both speedups against hand-computed numbers;
 * step times given, measured from log.csv and simulated on a target scenario; the CSV files;
 * bad input.
 */
#include <check.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test-util.h"

#define SIM_BIN PP_BUILD_ROOT "/sim/pacer-sim"
#define TTA_DIR PP_SOURCE_ROOT "/tests/data/tta"
#define TOL     1e-9

/* Runs `pacer-sim tta @args... --json`; asserts exit 0. Returns: (transfer full). */
static JsonNode *tta_json(const char *const *args) {
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer) "tta");
    for (const char *const *a = args; *a != NULL; a++)
        g_ptr_array_add(argv, (gpointer)*a);
    g_ptr_array_add(argv, (gpointer) "--json");
    g_ptr_array_add(argv, NULL);
    g_autofree char *out = NULL, *err = NULL;
    int              rc = test_util_spawn(SIM_BIN, (const char *const *)argv->pdata, &out, &err);
    ck_assert_msg(rc == 0, "tta exited %d: %s", rc, err);
    test_util_assert_json(out);
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert_msg(json_parser_load_from_data(parser, out, -1, NULL), "not JSON: %s", out);
    return json_node_copy(json_parser_get_root(parser));
}

static JsonObject *run_of(JsonNode *root, guint i) {
    JsonArray *runs = json_object_get_array_member(json_node_get_object(root), "runs");
    return json_array_get_object_element(runs, i);
}

static JsonObject *cell_of(JsonNode *root, guint run, guint threshold) {
    JsonArray *t = json_object_get_array_member(run_of(root, run), "thresholds");
    return json_array_get_object_element(t, threshold);
}

#define RUNS TTA_DIR "/f4", TTA_DIR "/f8", TTA_DIR "/p4", TTA_DIR "/p8"
#define GIVEN                                                                                      \
    "--step-ms", "f4=100", "--step-ms", "f8=150", "--step-ms", "p4=50", "--step-ms", "p8=80"

/* Thresholds 4.5, 3.5 and 2 with the given step times (ms) f4 100, f8 150, p4 50, p8 80.
 * 4.5: f4 15 updates (halfway 5.0 -> 4.0) = 1.5 s; f8 11.25 (4.6 -> 3.8) = 1.6875 s; p4 15 =
 * 0.75 s; p8 already 4.4 at its first evaluation: 10 updates = 0.8 s, flagged. Best flush
 * 1.5 s (f4); matched: p4 against f4, p8 against f8.
 * 3.5: f4 exactly at 30 = 3 s; f8 27.5 = 4.125 s; p4 never (lowest 3.9); p8 21.666... (3.6 ->
 * 3.0) = 1.7333... s. 2: nobody. */
START_TEST(test_given_step_times) {
    const char *const args[] = {RUNS, "--threshold", "4.5,3.5", "--threshold", "2", GIVEN, NULL};
    g_autoptr(JsonNode) root = tta_json(args);
    static const struct {
        gboolean reached, first;
        double   progress, time_s, best, matched;
    } want[4][3] = {
        {{TRUE, FALSE, 15, 1.5, 1, 1}, {TRUE, FALSE, 30, 3, 1, 1}, {FALSE}},
        {{TRUE, FALSE, 11.25, 1.6875, 1.5 / 1.6875, 1},
         {TRUE, FALSE, 27.5, 4.125, 3 / 4.125, 1},
         {FALSE}},
        {{TRUE, FALSE, 15, 0.75, 2, 2}, {FALSE}, {FALSE}},
        {{TRUE, TRUE, 10, 0.8, 1.5 / 0.8, 1.6875 / 0.8},
         {TRUE, FALSE, 20 + 10.0 / 6, (20 + 10.0 / 6) * 0.08, 3 / ((20 + 10.0 / 6) * 0.08),
          4.125 / ((20 + 10.0 / 6) * 0.08)},
         {FALSE}},
    };
    static const char *const names[] = {"f4", "f8", "p4", "p8"};
    for (guint r = 0; r < 4; r++) {
        JsonObject *run = run_of(root, r);
        ck_assert_str_eq(json_object_get_string_member(run, "name"), names[r]);
        ck_assert_str_eq(json_object_get_string_member(run, "step_source"), "given");
        ck_assert(json_object_get_boolean_member(run, "flush") == (r < 2));
        ck_assert_int_eq(json_object_get_int_member(run, "mb_per_update"), r % 2 == 0 ? 4 : 8);
        for (guint t = 0; t < 3; t++) {
            JsonObject *c = cell_of(root, r, t);
            ck_assert_msg(json_object_get_boolean_member(c, "reached") == want[r][t].reached,
                          "run %s threshold %u", names[r], t);
            if (!want[r][t].reached)
                continue;
            ck_assert(json_object_get_boolean_member(c, "at_first_evaluation") == want[r][t].first);
            ck_assert_double_eq_tol(json_object_get_double_member(c, "progress"),
                                    want[r][t].progress, TOL);
            ck_assert_double_eq_tol(json_object_get_double_member(c, "time_s"), want[r][t].time_s,
                                    TOL);
            ck_assert_double_eq_tol(json_object_get_double_member(c, "speedup_best"),
                                    want[r][t].best, TOL);
            ck_assert_double_eq_tol(json_object_get_double_member(c, "speedup_matched"),
                                    want[r][t].matched, TOL);
        }
    }
    /* The table says which runs never reach a threshold and flags the upper bound. */
    const char *const text_args[] = {"tta", RUNS, "--threshold", "3.5,4.5", GIVEN, NULL};
    g_autofree char  *text = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, text_args, &text, NULL), 0);
    ck_assert_ptr_nonnull(strstr(text, "p4                   not reached (lowest 3.9000)"));
    ck_assert_ptr_nonnull(strstr(text, "interpolated linearly between logged evaluations"));
    ck_assert_ptr_nonnull(strstr(text, "10.00*"));
}
END_TEST

/* Without a step time the run's own: tokens per update (4 sequences x 128) over the median
 * tokens_per_s of logged steps 7..21 of 30 (1000; the first three steps log 2000 and are left
 * out): 0.512 s. With --x tokens and given times, time = tokens x step / tokens per update. */
START_TEST(test_measured_and_tokens) {
    const char *const args[] = {TTA_DIR "/f4", "--threshold", "4.5", NULL};
    g_autoptr(JsonNode) root = tta_json(args);
    ck_assert_str_eq(json_object_get_string_member(run_of(root, 0), "step_source"), "measured");
    ck_assert_int_eq(json_object_get_int_member(run_of(root, 0), "step_time_ns"), 512000000);
    ck_assert_double_eq_tol(json_object_get_double_member(cell_of(root, 0, 0), "time_s"),
                            15 * 0.512, TOL);

    const char *const tok[] = {"a=" TTA_DIR "/f8/log.csv",
                               "--threshold",
                               "4.5",
                               "--x",
                               "tokens",
                               "--step-ms",
                               "a=150",
                               NULL};
    g_autoptr(JsonNode) t = tta_json(tok);
    /* 11.25 updates of 8 x 128 tokens */
    ck_assert_double_eq_tol(json_object_get_double_member(cell_of(t, 0, 0), "progress"),
                            11.25 * 1024, TOL);
    ck_assert_double_eq_tol(json_object_get_double_member(cell_of(t, 0, 0), "time_s"), 1.6875, TOL);
}
END_TEST

/* A threshold of 1e20: json-glib alone wrote "val_loss" : 1e+20.0, which no JSON parser
 * accepts (tta_json() checks strictly). Every run is below it at its first evaluation. */
START_TEST(test_huge_threshold) {
    const char *const args[] = {TTA_DIR "/f4", TTA_DIR "/p4", "--threshold", "1e20", "--step-ms",
                                "f4=100",      "--step-ms",   "p4=50",       NULL};
    g_autoptr(JsonNode) root = tta_json(args);
    for (guint r = 0; r < 2; r++) {
        JsonObject *c = cell_of(root, r, 0);
        ck_assert_double_eq(json_object_get_double_member(c, "val_loss"), 1e20);
        ck_assert(json_object_get_boolean_member(c, "reached"));
        ck_assert(json_object_get_boolean_member(c, "at_first_evaluation"));
        ck_assert_double_eq_tol(json_object_get_double_member(c, "progress"), 10, TOL);
    }
}
END_TEST

/* --target: each run's step time is the target simulated with the run's schedule, m and a. */
START_TEST(test_target) {
    g_autofree char  *target = g_strdup(PP_SOURCE_ROOT "/scenarios/default.ini");
    const char *const args[] = {RUNS, "--threshold", "4.5", "--target", target, NULL};
    g_autoptr(JsonNode) root = tta_json(args);
    static const char *const sets[4][2] = {{"pipeline.schedule=1f1b", "pipeline.microbatches=4"},
                                           {"pipeline.schedule=1f1b", "pipeline.microbatches=8"},
                                           {"pipeline.schedule=paci", "pipeline.accumulation=4"},
                                           {"pipeline.schedule=paci", "pipeline.accumulation=8"}};
    for (guint r = 0; r < 4; r++) {
        const char *const sim_args[] = {target,     "--set",  sets[r][0], "--set",
                                        sets[r][1], "--json", NULL};
        g_autofree char  *out = NULL;
        ck_assert_int_eq(test_util_spawn(SIM_BIN, sim_args, &out, NULL), 0);
        const char *at = strstr(out, "\"step_time_ns\" : ");
        ck_assert_ptr_nonnull(at);
        int64_t want = g_ascii_strtoll(at + strlen("\"step_time_ns\" : "), NULL, 10);
        ck_assert_str_eq(json_object_get_string_member(run_of(root, r), "step_source"), "target");
        ck_assert_int_eq(json_object_get_int_member(run_of(root, r), "step_time_ns"), want);
    }
}
END_TEST

/* --out DIR: tta.csv has a row per run and threshold, curves.csv one per evaluation. */
START_TEST(test_out_files) {
    g_autofree char  *dir = test_util_tmp_dir_new("tta-XXXXXX");
    const char *const args[] = {"tta", RUNS, "--threshold", "4.5,2", GIVEN, "--out", dir, NULL};
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, NULL, NULL), 0);
    g_autofree char *tta_path = g_build_filename(dir, "tta.csv", NULL);
    g_autofree char *curves_path = g_build_filename(dir, "curves.csv", NULL);
    g_autofree char *tta = test_util_read_file(tta_path, NULL);
    g_autofree char *curves = test_util_read_file(curves_path, NULL);
    ck_assert_ptr_nonnull(strstr(tta, "run,schedule,flush,mb_per_update,step_time_ns,step_source,"
                                      "val_loss,reached,updates,time_s,speedup_best,"
                                      "speedup_matched\n"));
    ck_assert_ptr_nonnull(strstr(tta, "\np4,paci,0,4,50000000,given,4.500000,1,15.000000,"
                                      "0.750000,2.000000,2.000000\n"));
    ck_assert_ptr_nonnull(strstr(tta, "\nf8,1f1b,1,8,150000000,given,2.000000,0,"));
    g_auto(GStrv) lines = g_strsplit(g_strstrip(curves), "\n", -1);
    ck_assert_uint_eq(g_strv_length(lines), 1 + 4 * 3);
    ck_assert_str_eq(lines[1], "f4,10.000000,5120.000000,1.000000,5.000000");
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Bad input: exit 2 for usage, 1 naming the file (and line) for bad logs. */
START_TEST(test_bad_input) {
    g_autofree char *dir = test_util_tmp_dir_new("tta-bad-XXXXXX");
    g_autofree char *scenario = test_util_read_file(TTA_DIR "/f4/scenario.ini", NULL);
    g_autofree char *ini = g_build_filename(dir, "scenario.ini", NULL);
    g_autofree char *log = g_build_filename(dir, "log.csv", NULL);
    ck_assert(g_file_set_contents(ini, scenario, -1, NULL));
    const struct {
        const char *log_text; /* NULL: keep the synthetic f4 run */
        const char *args[8];
        int         rc;
        const char *needle;
    } cases[] = {
        {NULL, {"tta", TTA_DIR "/f4", NULL}, 2, "--threshold"},
        {NULL, {"tta", "--threshold", "4", NULL}, 2, "at least one RUN"},
        {NULL, {"tta", TTA_DIR "/f4", "--threshold", "4,x", NULL}, 2, "'x' is not a number"},
        {NULL,
         {"tta", TTA_DIR "/f4", "--threshold", "4", "--step-ms", "f5=1", NULL},
         2,
         "'f5', which is no run"},
        {NULL,
         {"tta", TTA_DIR "/f4", TTA_DIR "/f4", "--threshold", "4", NULL},
         2,
         "two runs are named 'f4'"},
        {"step,tokens,val_loss,tokens_per_s\n0,512,,1000\n",
         {"tta", log, "--threshold", "4", NULL},
         1,
         "no validation loss"},
        {"step,tokens,val_loss,tokens_per_s\n0,512,abc,1000\n",
         {"tta", log, "--threshold", "4", NULL},
         1,
         "log.csv:2: expected numbers"},
        {"step,tokens,loss\n", {"tta", log, "--threshold", "4", NULL}, 1, "needs the columns"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        if (cases[i].log_text != NULL)
            ck_assert(g_file_set_contents(log, cases[i].log_text, -1, NULL));
        g_autofree char *err = NULL;
        int              rc = test_util_spawn(SIM_BIN, cases[i].args, NULL, &err);
        ck_assert_msg(rc == cases[i].rc, "case %zu: exit %d, want %d: %s", i, rc, cases[i].rc, err);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL, "case %zu: '%s' not in: %s", i,
                      cases[i].needle, err);
    }
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* A RUN that is not a pacer-train --out folder is refused before anything is read, naming the
 * exact path that is missing and the command that makes a run folder (exit 1). */
START_TEST(test_missing_inputs) {
    g_autofree char *dir = test_util_tmp_dir_new("tta-missing-XXXXXX");
    g_autofree char *absent = g_build_filename(dir, "flush-m4", NULL);
    g_autofree char *empty = g_build_filename(dir, "empty", NULL);
    g_autofree char *empty_log = g_build_filename(empty, "log.csv", NULL);
    g_autofree char *sim_out = g_build_filename(dir, "sim", NULL);
    g_autofree char *sim_summary = g_build_filename(sim_out, "summary.csv", NULL);
    g_autofree char *sim_log = g_build_filename(sim_out, "log.csv", NULL);
    g_autofree char *bare = g_build_filename(dir, "bare", NULL);
    g_autofree char *bare_log = g_build_filename(bare, "log.csv", NULL);
    g_autofree char *bare_ini = g_build_filename(bare, "scenario.ini", NULL);
    g_autofree char *log_text = test_util_read_file(TTA_DIR "/f4/log.csv", NULL);
    ck_assert_int_eq(g_mkdir(empty, 0755), 0);
    ck_assert_int_eq(g_mkdir(sim_out, 0755), 0);
    ck_assert_int_eq(g_mkdir(bare, 0755), 0);
    ck_assert(g_file_set_contents(sim_summary, "schedule\n", -1, NULL));
    ck_assert(g_file_set_contents(bare_log, log_text, -1, NULL));
    const char *make = "a RUN is a pacer-train --out folder (log.csv with validation losses and "
                       "scenario.ini); make one with: build/exec/pacer-train SCENARIO --set "
                       "run.eval_every=N --out ";
    g_autofree char *absent_msg =
        g_strdup_printf("pacer-sim: RUN %s: no such folder or file; %s%s\n", absent, make, absent);
    g_autofree char *empty_msg =
        g_strdup_printf("pacer-sim: %s: missing: %s is no pacer-train run folder; %s%s\n",
                        empty_log, empty, make, empty);
    g_autofree char *sim_msg = g_strdup_printf(
        "pacer-sim: %s: missing: %s is no pacer-train run folder (its summary.csv says it is a "
        "pacer-sim --out folder: tta needs training runs); %s%s\n",
        sim_log, sim_out, make, sim_out);
    g_autofree char *bare_msg = g_strdup_printf(
        "pacer-sim: %s: missing next to %s: tta reads the run's schedule, m, a and batch from the "
        "scenario.ini that pacer-train --out writes beside log.csv; %s%s\n",
        bare_ini, bare_log, make, bare);
    const struct {
        const char *run, *message;
    } cases[] = {
        {absent, absent_msg}, {empty, empty_msg},   {sim_out, sim_msg},
        {bare, bare_msg},     {bare_log, bare_msg}, /* the log.csv itself, as RUN */
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        /* a sound run first: every RUN is checked before any is read */
        const char      *args[] = {"tta", TTA_DIR "/f4", cases[i].run, "--threshold", "4", NULL};
        g_autofree char *out = NULL, *err = NULL;
        int              rc = test_util_spawn(SIM_BIN, args, &out, &err);
        ck_assert_msg(rc == 1, "case %zu: exit %d: %s", i, rc, err);
        ck_assert_str_eq(err, cases[i].message);
        ck_assert_str_eq(out, "");
    }
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

static Suite *tta_suite(void) {
    Suite *s = suite_create("sim-tta");
    TCase *tc = tcase_create("tta");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_given_step_times);
    tcase_add_test(tc, test_measured_and_tokens);
    tcase_add_test(tc, test_huge_threshold);
    tcase_add_test(tc, test_target);
    tcase_add_test(tc, test_out_files);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_missing_inputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(tta_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
