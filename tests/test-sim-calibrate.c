/* SPDX-License-Identifier: MIT
 * test-sim-calibrate.c: `pacer-sim calibrate`, run as a child process on traces the simulator
 * wrote with known costs (tests/data/sim/calibrate*.ini): it recovers per-stage F, B, W, fused
 * BW, U and the hop exactly, predicts held-out schedules and micro-batch counts to the
 * nanosecond, fits the kernel-efficiency curve and the link over micro-batch sizes and uses
 * them at a size it never saw, fits the operator model's constants back from traces of the
 * operator model (tests/data/sim/calibrate-operators.ini), scales runs by their speed reference,
 * predicts a held-out trace of data-parallel replicas with its reduction, writes a scenario
 * pacer-sim runs as is, and rejects bad input with exit status and message.
 */
#include <check.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-trace.h"
#include "test-util.h"

#define SIM_BIN  PP_BUILD_ROOT "/sim/pacer-sim"
#define DATA_DIR PP_SOURCE_ROOT "/tests/data/sim"

/* Simulates @scenario (tests/data/sim name) with @sets (NULL-terminated) into a fresh folder.
 * Returns: (transfer full): the folder. */
static char *simulate(const char *scenario, const char *const *sets) {
    g_autofree char *dir = test_util_tmp_dir_new("calibrate-XXXXXX");
    g_autofree char *path = g_strdup_printf("%s/%s", DATA_DIR, scenario);
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    g_ptr_array_add(args, path);
    for (const char *const *s = sets; s != NULL && *s != NULL; s++) {
        g_ptr_array_add(args, (gpointer) "--set");
        g_ptr_array_add(args, (gpointer)*s);
    }
    g_ptr_array_add(args, (gpointer) "--out");
    g_ptr_array_add(args, dir);
    g_ptr_array_add(args, NULL);
    g_autofree char *err = NULL;
    int              rc = test_util_spawn(SIM_BIN, (const char *const *)args->pdata, NULL, &err);
    ck_assert_msg(rc == 0, "pacer-sim %s: %s", scenario, err);
    return g_steal_pointer(&dir);
}

static char *ops_of(const char *dir) {
    return g_build_filename(dir, "ops.csv", NULL);
}

/* Runs `pacer-sim calibrate @args... --json`; asserts exit 0. Returns: (transfer full). */
static JsonNode *calibrate_json(const char *const *args) {
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer) "calibrate");
    for (const char *const *a = args; *a != NULL; a++)
        g_ptr_array_add(argv, (gpointer)*a);
    g_ptr_array_add(argv, (gpointer) "--json");
    g_ptr_array_add(argv, NULL);
    g_autofree char *out = NULL, *err = NULL;
    int              rc = test_util_spawn(SIM_BIN, (const char *const *)argv->pdata, &out, &err);
    ck_assert_msg(rc == 0, "calibrate exited %d: %s", rc, err);
    test_util_assert_json(out);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    ck_assert_msg(json_parser_load_from_data(parser, out, -1, &error), "JSON: %s",
                  error ? error->message : "");
    return json_node_copy(json_parser_get_root(parser));
}

static JsonObject *member(JsonNode *root, const char *name) {
    return json_object_get_object_member(json_node_get_object(root), name);
}

static JsonArray *array(JsonNode *root, const char *name) {
    return json_object_get_array_member(json_node_get_object(root), name);
}

/* Removes the folders simulate() made and frees their names. */
static void remove_dirs(char **dirs, int n) {
    for (int i = 0; i < n; i++) {
        ck_assert(test_util_tmp_dir_remove(dirs[i]));
        g_clear_pointer(&dirs[i], g_free);
    }
}

/* calibrate.ini's costs per stage (ns): F, B, W, fused BW, U, weight copy. */
static const int64_t known[3][6] = {
    {100000, 110000, 90000, 190000, 30000, 11000},
    {140000, 130000, 60000, 185000, 20000, 13000},
    {120000, 150000, 100000, 260000, 40000, 17000},
};

/* Fitted on zb-h1 (F, B, W, U) and 2bw with m = 8 (BW, the weight copy of stashing): every
 * stage's costs and the 5 us hop come back exactly (simulated ops have no dispatch gap), and
 * the held-out 1f1b (m = 4 and 8), paci, 2bw (m = 4) and zb-2p runs are predicted to the
 * nanosecond. The written scenario runs as is and equals the original. */
START_TEST(test_recovers_costs) {
    const char *const zb[] = {"pipeline.schedule=zb-h1", NULL};
    const char *const tbw8[] = {"pipeline.schedule=2bw", "pipeline.microbatches=8", NULL};
    const char *const m8[] = {"pipeline.microbatches=8", NULL};
    const char *const paci[] = {"pipeline.schedule=paci", NULL};
    const char *const tbw[] = {"pipeline.schedule=2bw", NULL};
    const char *const zb2[] = {"pipeline.schedule=zb-2p", NULL};
    char             *dirs[] = {simulate("calibrate.ini", zb),   simulate("calibrate.ini", tbw8),
                                simulate("calibrate.ini", NULL), simulate("calibrate.ini", m8),
                                simulate("calibrate.ini", paci), simulate("calibrate.ini", tbw),
                                simulate("calibrate.ini", zb2)};
    char             *o[G_N_ELEMENTS(dirs)];
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++)
        o[i] = ops_of(dirs[i]);
    g_autofree char  *out = g_build_filename(dirs[0], "calibrated.ini", NULL);
    const char *const args[] = {o[0],      o[1], "--check", o[2], "--check", o[3], "--check", o[4],
                                "--check", o[5], "--check", o[6], "--out",   out,  NULL};
    g_autoptr(JsonNode) root = calibrate_json(args);

    JsonArray *stages = array(root, "stages");
    ck_assert_int_eq(json_array_get_length(stages), 3);
    static const char *const keys[] = {"f_ns", "b_ns", "w_ns", "bw_ns", "u_ns", "stash_ns"};
    for (guint s = 0; s < 3; s++) {
        JsonObject *st = json_array_get_object_element(stages, s);
        for (int k = 0; k < 6; k++)
            ck_assert_int_eq(json_object_get_int_member(st, keys[k]), known[s][k]);
        ck_assert_int_eq(json_object_get_int_member(st, "dispatch_ns"), 0);
    }
    JsonObject *link = member(root, "link");
    ck_assert_int_eq(json_object_get_int_member(link, "latency_ns"), 5000);
    ck_assert_int_eq(json_object_get_int_member(link, "comm_ns"), 5000);
    ck_assert_int_gt(json_object_get_int_member(link, "waits"), 0);
    ck_assert(!json_object_get_boolean_member(member(root, "kernel_efficiency"), "fitted"));

    JsonArray *traces = array(root, "traces");
    ck_assert_int_eq(json_array_get_length(traces), G_N_ELEMENTS(dirs));
    for (guint i = 0; i < G_N_ELEMENTS(dirs); i++) {
        JsonObject *t = json_array_get_object_element(traces, i);
        ck_assert_str_eq(json_object_get_string_member(t, "role"), i < 2 ? "fit" : "check");
        int64_t measured = json_object_get_int_member(t, "measured_step_ns");
        ck_assert_int_gt(measured, 0);
        ck_assert_int_eq(json_object_get_int_member(t, "predicted_step_ns"), measured);
        /* 12 steps: the window is steps 3..9 */
        ck_assert_int_eq(json_object_get_int_member(t, "lo_step"), 3);
        ck_assert_int_eq(json_object_get_int_member(t, "hi_step"), 9);
    }

    /* The written scenario (the first fit trace's, zb-h1): pacer-sim runs it and gets the
     * original run's figures. */
    const char *const run_cal[] = {out, "--json", NULL};
    g_autofree char  *orig_path = g_strdup_printf("%s/calibrate.ini", DATA_DIR);
    const char *const run_orig[] = {orig_path, "--set", "pipeline.schedule=zb-h1", "--json", NULL};
    g_autofree char  *a = NULL, *b = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, run_cal, &a, &err), 0);
    ck_assert_int_eq(test_util_spawn(SIM_BIN, run_orig, &b, NULL), 0);
    const char *sa = strstr(a, "\"step_time_ns\""), *sb = strstr(b, "\"step_time_ns\"");
    ck_assert_ptr_nonnull(sa);
    ck_assert_ptr_nonnull(sb);
    ck_assert_int_eq(strtoll(strchr(sa, ':') + 1, NULL, 10),
                     strtoll(strchr(sb, ':') + 1, NULL, 10));
    g_autofree char *text = test_util_read_file(out, NULL);
    ck_assert_ptr_nonnull(strstr(text, "forward_us=100,140,120\n"));
    ck_assert_ptr_nonnull(strstr(text, "fused_backward_us=190,185,260\n"));
    ck_assert_ptr_nonnull(strstr(text, "stash_us=11,13,17\n"));
    ck_assert_ptr_nonnull(strstr(text, "grad_bytes=4\n")); /* pacer-train's fp32 gradients */
    ck_assert_ptr_nonnull(strstr(text, "first 1 optimizer step(s) left out"));
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++)
        g_free(o[i]);
    remove_dirs(dirs, G_N_ELEMENTS(dirs));
}
END_TEST

/* The analytic model at micro-batch sizes 1, 2 and 4 (peak 100 TFLOP/s, kernel_eff_max 0.5,
 * kernel_eff_half_tokens 1024, link 8 us + bytes / 25 GB/s): calibrate finds 50 TFLOP/s and
 * 1024 tokens, a latency of 8 us (within the fit's rounding, 2 ns) and 50 GB/s for its fp32
 * message (the simulator's is bf16, half the bytes), and predicts size 3, which no fit trace
 * ran, within rounding. */
START_TEST(test_kernel_curve_and_link) {
    const char *const b1[] = {"pipeline.microbatch_size=1", NULL};
    const char *const b2[] = {"pipeline.microbatch_size=2", NULL};
    const char *const b4[] = {"pipeline.microbatch_size=4", NULL};
    const char *const b3[] = {"pipeline.microbatch_size=3", "pipeline.schedule=paci", NULL};
    char *dirs[] = {simulate("calibrate-analytic.ini", b1), simulate("calibrate-analytic.ini", b2),
                    simulate("calibrate-analytic.ini", b4), simulate("calibrate-analytic.ini", b3)};
    g_autofree char *o0 = ops_of(dirs[0]), *o1 = ops_of(dirs[1]), *o2 = ops_of(dirs[2]),
                    *o3 = ops_of(dirs[3]);
    const char *const args[] = {o0, o1, o2, "--check", o3, "--microbatch-size", "3", NULL};
    g_autoptr(JsonNode) root = calibrate_json(args);
    JsonObject *k = member(root, "kernel_efficiency");
    ck_assert(json_object_get_boolean_member(k, "fitted"));
    ck_assert(!json_object_has_member(json_node_get_object(root), "operators")); /* the curve */
    ck_assert_int_eq(json_object_get_int_member(k, "sizes"), 3);
    ck_assert_double_eq_tol(json_object_get_double_member(k, "peak_tflops"), 50.0, 1e-3);
    ck_assert_double_eq_tol(json_object_get_double_member(k, "half_tokens"), 1024.0, 0.5);
    JsonObject *link = member(root, "link");
    ck_assert_int_le(llabs(json_object_get_int_member(link, "latency_ns") - 8000), 2);
    ck_assert_double_eq_tol(json_object_get_double_member(link, "bytes_per_ns"), 50.0, 1e-3);
    /* hop at size 3: 8 us + 3 x 256 x 512 x 2 bytes / 25 GB/s */
    ck_assert_int_le(llabs(json_object_get_int_member(link, "comm_ns") - 39458), 1);
    JsonArray *traces = array(root, "traces");
    for (guint i = 0; i < json_array_get_length(traces); i++) {
        JsonObject *t = json_array_get_object_element(traces, i);
        double      ratio = json_object_get_double_member(t, "ratio");
        ck_assert_msg(fabs(ratio - 1.0) < 1e-4, "trace %u: ratio %.6f", i, ratio);
    }
    remove_dirs(dirs, G_N_ELEMENTS(dirs));
}
END_TEST

/* Replaces every "KEY=..." line of @dir's scenario.ini with @lines (NULL-terminated
 * "KEY=VALUE" strings), so that the fit cannot start from the constants that made the trace. */
static void rewrite_scenario(const char *dir, const char *const *lines) {
    g_autofree char *path = g_build_filename(dir, "scenario.ini", NULL);
    g_autofree char *text = test_util_read_file(path, NULL);
    for (const char *const *l = lines; *l != NULL; l++) {
        g_autofree char *key = g_strndup(*l, strchr(*l, '=') - *l);
        g_autofree char *pattern = g_strdup_printf("^%s=.*$", key);
        g_autoptr(GRegex) re = g_regex_new(pattern, G_REGEX_MULTILINE, 0, NULL);
        ck_assert(g_regex_match(re, text, 0, NULL));
        char *replaced = g_regex_replace_literal(re, text, -1, 0, *l, 0, NULL);
        g_free(text);
        text = replaced;
    }
    ck_assert(g_file_set_contents(path, text, -1, NULL));
}

/* The operator cost model (calibrate-operators.ini: kernel_eff_max 0.55, kernel_eff_half_hidden
 * 384, launch_us 40), simulated at micro-batch sizes 1, 2, 4 and 8, each trace's scenario.ini
 * then set to other constants (0.3, 0, 0): calibrate fits the three back to 0.1% (measured:
 * 0.549997, 383.996, 40.000 us), finds the host floor bounding some passes, predicts every
 * trace and a held-out size 3 within 0.1%, and writes a scenario with cost_model = operators
 * and the fitted keys. */
START_TEST(test_operator_constants) {
    static const char *const sizes[] = {"pipeline.microbatch_size=1", "pipeline.microbatch_size=2",
                                        "pipeline.microbatch_size=4", "pipeline.microbatch_size=8",
                                        "pipeline.microbatch_size=3"};
    static const char *const wrong[] = {"kernel_eff_max=0.3", "kernel_eff_half_hidden=0",
                                        "launch_us=0", NULL};
    char                    *dirs[G_N_ELEMENTS(sizes)], *o[G_N_ELEMENTS(sizes)];
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        const char *const set[] = {sizes[i], NULL};
        dirs[i] = simulate("calibrate-operators.ini", set);
        rewrite_scenario(dirs[i], wrong);
        o[i] = ops_of(dirs[i]);
    }
    g_autofree char  *out = g_build_filename(dirs[0], "calibrated.ini", NULL);
    const char *const args[] = {o[0], o[1], o[2], o[3], "--check", o[4], "--out", out, NULL};
    g_autoptr(JsonNode) root = calibrate_json(args);
    ck_assert_msg(json_object_has_member(json_node_get_object(root), "operators"),
                  "no operators fit");
    JsonObject *op = member(root, "operators");
    ck_assert_double_eq_tol(json_object_get_double_member(op, "kernel_eff_max"), 0.55, 0.55e-3);
    ck_assert_double_eq_tol(json_object_get_double_member(op, "kernel_eff_half_hidden"), 384.0,
                            0.384);
    ck_assert_int_le(llabs(json_object_get_int_member(op, "launch_ns") - 40000), 40);
    ck_assert_int_gt(json_object_get_int_member(op, "launch_bound"), 0);
    ck_assert_int_eq(json_object_get_int_member(op, "sizes"), 4);
    ck_assert_double_le(json_object_get_double_member(op, "rms_rel_err"), 1e-3);
    JsonArray *traces = array(root, "traces");
    ck_assert_int_eq(json_array_get_length(traces), 5);
    for (guint i = 0; i < json_array_get_length(traces); i++) {
        double ratio =
            json_object_get_double_member(json_array_get_object_element(traces, i), "ratio");
        ck_assert_msg(fabs(ratio - 1.0) < 1e-3, "trace %u: ratio %.6f", i, ratio);
    }
    g_autofree char *text = test_util_read_file(out, NULL);
    ck_assert_ptr_nonnull(strstr(text, "\ncost_model=operators\n"));
    const char *eff = strstr(text, "\nkernel_eff_max=");
    const char *half = strstr(text, "\nkernel_eff_half_hidden=");
    const char *launch = strstr(text, "\nlaunch_us=");
    ck_assert(eff != NULL && half != NULL && launch != NULL);
    ck_assert_double_eq_tol(g_ascii_strtod(eff + strlen("\nkernel_eff_max="), NULL), 0.55, 0.55e-3);
    ck_assert_double_eq_tol(g_ascii_strtod(half + strlen("\nkernel_eff_half_hidden="), NULL), 384.0,
                            0.384);
    ck_assert_double_eq_tol(g_ascii_strtod(launch + strlen("\nlaunch_us="), NULL), 40.0, 0.04);
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
        g_free(o[i]);
    remove_dirs(dirs, G_N_ELEMENTS(dirs));
}
END_TEST

/* The same model without a host floor (launch_us 0) at sizes 2, 4 and 8: the ceiling and the
 * short-reduction term come back within 0.1%, and no measured pass is launch-bound, so the
 * fitted launch_us is only an upper bound (launch_bound 0). */
START_TEST(test_operator_launch_unbound) {
    static const char *const sizes[] = {"pipeline.microbatch_size=2", "pipeline.microbatch_size=4",
                                        "pipeline.microbatch_size=8"};
    static const char *const wrong[] = {"kernel_eff_max=0.3", "kernel_eff_half_hidden=0", NULL};
    char                    *dirs[G_N_ELEMENTS(sizes)], *o[G_N_ELEMENTS(sizes)];
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        const char *const set[] = {sizes[i], "hardware.launch_us=0", NULL};
        dirs[i] = simulate("calibrate-operators.ini", set);
        rewrite_scenario(dirs[i], wrong);
        o[i] = ops_of(dirs[i]);
    }
    const char *const args[] = {o[0], o[1], o[2], NULL};
    g_autoptr(JsonNode) root = calibrate_json(args);
    JsonObject *op = member(root, "operators");
    ck_assert_double_eq_tol(json_object_get_double_member(op, "kernel_eff_max"), 0.55, 0.55e-3);
    ck_assert_double_eq_tol(json_object_get_double_member(op, "kernel_eff_half_hidden"), 384.0,
                            0.384);
    ck_assert_int_eq(json_object_get_int_member(op, "launch_bound"), 0);
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
        g_free(o[i]);
    remove_dirs(dirs, G_N_ELEMENTS(dirs));
}
END_TEST

/* Makes @dir's simulated trace look like pacer-train's with run.speed_reference: the last
 * @ref_ns[stage] of every U becomes a reference row (the scenario's update_us holds both). */
static void split_references(const char *dir, const int64_t ref_ns[3]) {
    g_autofree char *path = ops_of(dir);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpTrace) trace = pp_trace_read_csv(path, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "");
    int64_t n = trace->n_rows;
    for (int64_t i = 0; i < n; i++) {
        PpTraceRow *u = &trace->rows[i];
        if (u->kind != PP_OP_UPDATE || u->resource != PP_RESOURCE_COMPUTE)
            continue;
        ck_assert_int_gt(u->end_ns - u->start_ns, ref_ns[u->stage]);
        PpTraceRow ref = *u;
        ref.resource = PP_RESOURCE_REFERENCE;
        ref.start_ns = u->end_ns - ref_ns[u->stage];
        u->end_ns = ref.start_ns;
        pp_trace_append(trace, &ref); /* may move the rows: u is not used after this */
    }
    pp_trace_sort(trace);
    ck_assert(pp_trace_write_csv(trace, path, &error));
}

/* The speed reference (50 us after every U): fitted on zb-h1, 2BW m = 8 and a zb-h1 whose
 * stage 2 ran 1.25x slower on every op and its reference alike, calibrate scales that run back
 * and recovers every cost exactly, U including the reference; it predicts a held-out 1F1B whose
 * stage 1 ran 1.2x slower short, and with the slowdown it reads off the reference rows to the
 * nanosecond; a trace without reference rows gets no adjusted prediction. */
START_TEST(test_speed_reference) {
    /* calibrate.ini's costs with U + 50 us, and stage 2 (stage 1) times 1.25 (1.2). */
    const char *const zb[] = {"pipeline.schedule=zb-h1", "costs.update_us=80,70,90", NULL};
    const char *const tbw8[] = {"pipeline.schedule=2bw", "pipeline.microbatches=8",
                                "costs.update_us=80,70,90", NULL};
    const char *const zb_slow[] = {
        "pipeline.schedule=zb-h1",         "costs.forward_us=100,140,150",
        "costs.backward_us=110,130,187.5", "costs.weight_us=90,60,125",
        "costs.update_us=80,70,112.5",     NULL};
    const char *const flush_slow[] = {
        "costs.forward_us=100,168,120", "costs.backward_us=110,156,150",
        "costs.fused_backward_us=190,222,260", "costs.update_us=80,84,90", NULL};
    char         *dirs[] = {simulate("calibrate.ini", zb), simulate("calibrate.ini", tbw8),
                            simulate("calibrate.ini", zb_slow), simulate("calibrate.ini", flush_slow),
                            simulate("calibrate.ini", NULL)};
    const int64_t plain[3] = {50000, 50000, 50000};
    split_references(dirs[0], plain);
    split_references(dirs[1], plain);
    split_references(dirs[2], (const int64_t[3]){50000, 50000, 62500});
    split_references(dirs[3], (const int64_t[3]){50000, 60000, 50000});
    g_autofree char *o0 = ops_of(dirs[0]), *o1 = ops_of(dirs[1]), *o2 = ops_of(dirs[2]),
                    *o3 = ops_of(dirs[3]), *o4 = ops_of(dirs[4]);
    const char *const args[] = {o0, o1, o2, "--check", o3, "--check", o4, NULL};
    g_autoptr(JsonNode) root = calibrate_json(args);

    JsonArray               *stages = array(root, "stages");
    static const char *const keys[] = {"f_ns", "b_ns", "w_ns", "bw_ns", "u_ns", "stash_ns"};
    for (guint s = 0; s < 3; s++) {
        JsonObject *st = json_array_get_object_element(stages, s);
        for (int k = 0; k < 6; k++)
            ck_assert_int_eq(json_object_get_int_member(st, keys[k]),
                             known[s][k] + (k == 4 ? 50000 : 0));
        ck_assert_int_eq(json_object_get_int_member(st, "reference_ns"), 50000);
    }
    JsonArray   *traces = array(root, "traces");
    const double slowdown[][3] = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1.25}, {1, 1.2, 1}};
    for (guint i = 0; i < 4; i++) {
        JsonObject *t = json_array_get_object_element(traces, i);
        int64_t     measured = json_object_get_int_member(t, "measured_step_ns");
        int64_t     predicted = json_object_get_int_member(t, "predicted_step_ns");
        ck_assert_int_eq(json_object_get_int_member(t, "adjusted_step_ns"), measured);
        if (i >= 2) /* the slow runs: the plain prediction is short */
            ck_assert_int_lt(predicted, measured);
        else
            ck_assert_int_eq(predicted, measured);
        JsonArray *k = json_object_get_array_member(t, "slowdown");
        ck_assert_int_eq(json_array_get_length(k), 3);
        for (guint s = 0; s < 3; s++)
            ck_assert_double_eq_tol(json_array_get_double_element(k, s), slowdown[i][s], 1e-12);
    }
    JsonObject *bare = json_array_get_object_element(traces, 4);
    ck_assert_int_gt(json_object_get_int_member(bare, "predicted_step_ns"), 0);
    ck_assert_int_eq(json_object_get_int_member(bare, "adjusted_step_ns"), 0);
    ck_assert_int_eq(json_array_get_length(json_object_get_array_member(bare, "slowdown")), 0);
    remove_dirs(dirs, G_N_ELEMENTS(dirs));
}
END_TEST

/* Bad input: exit 2 without a trace, exit 1 naming the file for a trace without
 * scenario.ini, another model, interleaved chunks, too few steps; a split schedule held out
 * from a fit without B and W is reported as not predicted, saying why. */
/* A held-out trace of 2 data-parallel replicas whose every U waited X = 70 us for the
 * reduction (the 1f1b run of calibrate.ini, rebuilt per replica by test_util_append_replica()):
 * fitted on the single pipeline, its prediction adds the reduction the trace measured (its
 * scenario has no [hardware] link) before each U, which is exactly its measured step. */
START_TEST(test_replicas_check) {
    const int64_t    X = 70000;
    char            *dirs[] = {simulate("calibrate.ini", NULL), simulate("calibrate.ini", NULL)};
    g_autofree char *fit = ops_of(dirs[0]), *dp = ops_of(dirs[1]);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpTrace) sim = pp_trace_read_csv(dp, &error);
    ck_assert_msg(sim != NULL, "%s", error ? error->message : "");
    g_autoptr(PpTrace) two = pp_trace_new();
    test_util_append_replica(two, sim, 0, X, 0);
    test_util_append_replica(two, sim, 1, X, 777);
    ck_assert(pp_trace_write_csv(two, dp, &error));

    const char *const args[] = {fit, "--check", dp, NULL};
    g_autoptr(JsonNode) root = calibrate_json(args);
    JsonObject *f = json_array_get_object_element(array(root, "traces"), 0);
    JsonObject *t = json_array_get_object_element(array(root, "traces"), 1);
    ck_assert_int_eq(json_object_get_int_member(f, "replicas"), 1);
    ck_assert_int_eq(json_object_get_int_member(t, "replicas"), 2);
    int64_t single = json_object_get_int_member(f, "measured_step_ns");
    ck_assert_int_eq(json_object_get_int_member(t, "measured_step_ns"), single + X);
    ck_assert_int_eq(json_object_get_int_member(t, "predicted_step_ns"), single + X);
    ck_assert_ptr_nonnull(
        strstr(json_object_get_string_member(t, "note"), "as this trace measured"));
    remove_dirs(dirs, G_N_ELEMENTS(dirs));
}
END_TEST

START_TEST(test_bad_input) {
    char *dirs[] = {
        simulate("calibrate.ini", NULL),
        simulate("calibrate.ini", (const char *const[]){"model.layers=9", NULL}),
        simulate("calibrate.ini", (const char *const[]){"training.steps=2", NULL}),
        simulate("calibrate.ini",
                 (const char *const[]){"pipeline.schedule=interleaved", "pipeline.chunks=2",
                                       "pipeline.microbatches=3", NULL}),
        simulate("calibrate.ini", (const char *const[]){"pipeline.schedule=zb-h1", NULL})};
    g_autofree char *o0 = ops_of(dirs[0]), *o1 = ops_of(dirs[1]), *o2 = ops_of(dirs[2]),
                    *o3 = ops_of(dirs[3]), *o4 = ops_of(dirs[4]);
    g_autofree char *lonely_dir = test_util_tmp_dir_new("calibrate-XXXXXX");
    g_autofree char *lonely = g_build_filename(lonely_dir, "ops.csv", NULL);
    g_autofree char *trace_text = test_util_read_file(o0, NULL);
    ck_assert(g_file_set_contents(lonely, trace_text, -1, NULL));

    const struct {
        const char *args[4];
        int         rc;
        const char *needle;
    } cases[] = {
        {{"calibrate", NULL}, 2, "at least one TRACE"},
        {{"calibrate", o0, "--skip-steps=-1", NULL}, 2, "--skip-steps -1"},
        {{"calibrate", lonely, NULL}, 1, "no scenario.ini next to the trace"},
        {{"calibrate", o0, o1, NULL}, 1, "one model on one pipeline"},
        {{"calibrate", o2, NULL}, 1, "no steady state"},
        {{"calibrate", o3, NULL}, 1, "pipeline.chunks = 1"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *err = NULL;
        int              rc = test_util_spawn(SIM_BIN, cases[i].args, NULL, &err);
        ck_assert_msg(rc == cases[i].rc, "case %zu: exit %d, want %d: %s", i, rc, cases[i].rc, err);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL, "case %zu: '%s' not in: %s", i,
                      cases[i].needle, err);
    }
    /* Fused only, then a split schedule held out: not predicted, with the reason. */
    const char *const args[] = {o0, "--check", o4, NULL};
    g_autoptr(JsonNode) root = calibrate_json(args);
    JsonObject *t = json_array_get_object_element(array(root, "traces"), 1);
    ck_assert_int_eq(json_object_get_int_member(t, "predicted_step_ns"), 0);
    ck_assert_ptr_nonnull(strstr(json_object_get_string_member(t, "note"), "no B time"));
    ck_assert(test_util_tmp_dir_remove(lonely_dir));
    remove_dirs(dirs, G_N_ELEMENTS(dirs));
}
END_TEST

static Suite *calibrate_suite(void) {
    Suite *s = suite_create("sim-calibrate");
    TCase *tc = tcase_create("calibrate");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_recovers_costs);
    tcase_add_test(tc, test_kernel_curve_and_link);
    tcase_add_test(tc, test_operator_constants);
    tcase_add_test(tc, test_operator_launch_unbound);
    tcase_add_test(tc, test_speed_reference);
    tcase_add_test(tc, test_replicas_check);
    tcase_add_test(tc, test_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(calibrate_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
