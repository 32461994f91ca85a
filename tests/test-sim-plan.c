/* SPDX-License-Identifier: MIT
 * test-sim-plan.c: pacer-sim plan and the cluster figures of a run, through the built binary:
 * the plan's counts add up, its rows are valid layouts of G GPUs and the global batch,
 * ranked by throughput, within memory and equal to a direct simulation of the same layout;
 * what it drops for static memory cannot run; no progress off a terminal; bad usage; and the
 * JSON's gpus / MFU / HFU equal the in-process engine's.
 */
#include <check.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "test-util.h"

#define SIM_BIN  PP_BUILD_ROOT "/sim/pacer-sim"
#define CLUSTER  PP_SOURCE_ROOT "/tests/data/sim/cluster.ini"
#define N_GPUS   32
#define GB_TOTAL 64

static JsonObject *parse_object(const char *text, JsonParser *parser) {
    g_autoptr(GError) error = NULL;
    test_util_assert_json(text);
    ck_assert_msg(json_parser_load_from_data(parser, text, -1, &error), "JSON: %s",
                  error ? error->message : "");
    return json_node_get_object(json_parser_get_root(parser));
}

/* Runs `pacer-sim plan CLUSTER --gpus 32 --json` with @extra arguments (NULL-terminated,
 * at most 4); returns stdout, asserts exit 0 and an empty stderr. */
static char *run_plan(const char *const *extra) {
    const char *args[16] = {"plan",   CLUSTER, "--gpus", G_STRINGIFY(N_GPUS),
                            "--json", "--top", "1000"};
    size_t      n = 7;
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    g_autofree char *out = NULL, *err = NULL;
    int              status = test_util_spawn(SIM_BIN, args, &out, &err);
    ck_assert_msg(status == 0, "plan exited %d: %s", status, err);
    ck_assert_str_eq(err, ""); /* stderr is a pipe here: no progress lines */
    return g_steal_pointer(&out);
}

START_TEST(test_plan_rows) {
    const char *const extra[] = {"--schedules", "1f1b,interleaved,zb-v,paci", NULL};
    g_autofree char  *out = run_plan(extra);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *plan = parse_object(out, parser);
    int64_t     layouts = json_object_get_int_member(plan, "layouts");
    int64_t     simulated = json_object_get_int_member(plan, "simulated");
    ck_assert_int_eq(json_object_get_int_member(plan, "failed"), 0);
    ck_assert_int_eq(layouts, json_object_get_int_member(plan, "dropped_static") +
                                  json_object_get_int_member(plan, "dropped_partition") +
                                  simulated);
    JsonArray *rows = json_object_get_array_member(plan, "rows");
    ck_assert_int_eq(json_array_get_length(rows),
                     simulated - json_object_get_int_member(plan, "over_memory"));
    ck_assert_int_eq(json_array_get_length(rows), json_object_get_int_member(plan, "fit"));
    ck_assert_int_gt(json_array_get_length(rows), 10);
    double prev = INFINITY;
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *r = json_array_get_object_element(rows, i);
        int64_t     d = json_object_get_int_member(r, "data");
        int64_t     t = json_object_get_int_member(r, "tensor");
        int64_t     n = json_object_get_int_member(r, "stages");
        ck_assert_int_eq(d * t * n, N_GPUS);
        ck_assert_int_eq(json_object_get_int_member(r, "microbatch_size") *
                             json_object_get_int_member(r, "microbatches") * d,
                         GB_TOTAL);
        ck_assert_int_le(json_object_get_int_member(r, "peak_memory_bytes"), (int64_t)80 << 30);
        double tp = json_object_get_double_member(r, "throughput_tokens_per_s");
        ck_assert(tp <= prev);
        prev = tp;
    }
    /* the best row, simulated directly, gives the same figures */
    JsonObject      *best = json_array_get_object_element(rows, 0);
    const char      *kind = json_object_get_string_member(best, "schedule");
    g_autofree char *s1 = g_strdup_printf("pipeline.schedule=%s", kind);
    g_autofree char *s2 = g_strdup_printf("pipeline.stages=%" G_GINT64_FORMAT,
                                          json_object_get_int_member(best, "stages"));
    g_autofree char *s3 = g_strdup_printf("pipeline.chunks=%" G_GINT64_FORMAT,
                                          json_object_get_int_member(best, "chunks"));
    int64_t          m = json_object_get_int_member(best, "microbatches");
    g_autofree char *s4 = g_strdup_printf("pipeline.microbatches=%" G_GINT64_FORMAT, m);
    g_autofree char *s5 = g_strdup_printf("pipeline.accumulation=%" G_GINT64_FORMAT,
                                          strcmp(kind, "paci") == 0 ? m : 1);
    g_autofree char *s6 = g_strdup_printf("pipeline.microbatch_size=%" G_GINT64_FORMAT,
                                          json_object_get_int_member(best, "microbatch_size"));
    g_autofree char *s7 = g_strdup_printf("parallel.data=%" G_GINT64_FORMAT,
                                          json_object_get_int_member(best, "data"));
    g_autofree char *s8 = g_strdup_printf("parallel.tensor=%" G_GINT64_FORMAT,
                                          json_object_get_int_member(best, "tensor"));
    g_autofree char *s9 =
        g_strdup_printf("model.recompute=%s", json_object_get_string_member(best, "recompute"));
    g_autofree char *s10 =
        g_strdup_printf("parallel.sequence_parallel=%s",
                        json_object_get_int_member(best, "tensor") > 1 ? "true" : "false");
    const char       *steps = strcmp(kind, "paci") == 0 ? "training.steps=8" : "training.steps=1";
    const char *const args[] = {CLUSTER, "--json",
                                "-s",    s1,
                                "-s",    s2,
                                "-s",    s3,
                                "-s",    s4,
                                "-s",    s5,
                                "-s",    s6,
                                "-s",    s7,
                                "-s",    s8,
                                "-s",    s9,
                                "-s",    s10,
                                "-s",    steps,
                                "-s",    "training.global_batch=64",
                                NULL};
    g_autofree char  *run = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &run, &err), 0);
    g_autoptr(JsonParser) p2 = json_parser_new();
    JsonObject *direct = parse_object(run, p2);
    ck_assert_double_eq(json_object_get_double_member(direct, "throughput_tokens_per_s"),
                        json_object_get_double_member(best, "throughput_tokens_per_s"));
    ck_assert_int_eq(json_object_get_int_member(direct, "peak_memory_bytes"),
                     json_object_get_int_member(best, "peak_memory_bytes"));
    ck_assert_int_eq(json_object_get_int_member(direct, "gpus"), N_GPUS);
}
END_TEST

/* Every registered kind the planner can generate is planned from its record alone: it gets
 * layouts, none fails, and each row's chunks and micro-batches are ones its record allows. A
 * newly registered kind is covered without editing the test. */
START_TEST(test_plan_every_kind) {
    const PpSchedKindInfo *info = pp_sched_kinds()[_i];
    if (info->needs_order_file)
        return; /* plan refuses it (test_plan_bad) */
    const char *const extra[] = {"--schedules", info->name, NULL};
    g_autofree char  *out = run_plan(extra);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *plan = parse_object(out, parser);
    ck_assert_int_gt(json_object_get_int_member(plan, "layouts"), 0);
    ck_assert_int_eq(json_object_get_int_member(plan, "failed"), 0);
    JsonArray *rows = json_object_get_array_member(plan, "rows");
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *r = json_array_get_object_element(rows, i);
        ck_assert_str_eq(json_object_get_string_member(r, "schedule"), info->name);
        int32_t  n = (int32_t)json_object_get_int_member(r, "stages");
        int32_t  m = (int32_t)json_object_get_int_member(r, "microbatches");
        int32_t  v = (int32_t)json_object_get_int_member(r, "chunks");
        gboolean listed = info->plan_chunks[0] == 0 && v == info->min_chunks;
        for (int32_t c = 0; c < PP_SCHED_PLAN_CHUNKS; c++)
            listed = listed || (info->plan_chunks[c] > 0 && v == info->plan_chunks[c]);
        ck_assert_msg(listed, "%s: chunks %d", info->name, v);
        ck_assert(pp_sched_kind_check_microbatches(info, n, m, NULL));
    }
}
END_TEST

/* With 8 GiB devices the 1.3B model's state alone (16 B per parameter) does not fit on one
 * or two GPUs per replica: the plan drops those layouts before simulating, and a direct run
 * of one of them fails in the partition with the memory error. The plan is deterministic. */
START_TEST(test_plan_memory) {
    const char *const extra[] = {"--set", "hardware.memory_gib=8", NULL};
    g_autofree char  *out = run_plan(extra);
    g_autofree char  *again = run_plan(extra);
    ck_assert_str_eq(out, again);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *plan = parse_object(out, parser);
    ck_assert_int_gt(json_object_get_int_member(plan, "dropped_static"), 0);
    ck_assert_int_gt(json_object_get_int_member(plan, "dropped_partition"), 0);
    JsonArray *rows = json_object_get_array_member(plan, "rows");
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *r = json_array_get_object_element(rows, i);
        ck_assert_int_le(json_object_get_int_member(r, "peak_memory_bytes"), (int64_t)8 << 30);
        ck_assert_int_ge(
            json_object_get_int_member(r, "tensor") * json_object_get_int_member(r, "stages"), 4);
    }
    const char *const args[] = {CLUSTER,
                                "-s",
                                "hardware.memory_gib=8",
                                "-s",
                                "pipeline.schedule=1f1b",
                                "-s",
                                "pipeline.chunks=1",
                                "-s",
                                "pipeline.stages=1",
                                "-s",
                                "parallel.tensor=1",
                                "-s",
                                "parallel.data=32",
                                "-s",
                                "pipeline.microbatches=2",
                                "-s",
                                "pipeline.microbatch_size=1",
                                NULL};
    g_autofree char  *run = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &run, &err), 1);
    ck_assert_ptr_nonnull(strstr(err, "fits the device memory limit"));
}
END_TEST

static const struct {
    const char *args[8];
    int         status;
    const char *needle;
} plan_bad[] = {
    {{"plan", CLUSTER}, 2, "--gpus G >= 1"},
    {{"plan", CLUSTER, "--gpus", "8", "--schedules", "custom"}, 2, "not a schedule plan"},
    {{"plan", CLUSTER, "--gpus", "8", "--schedules", "1f1b,,paci"}, 2, "empty schedule name"},
    {{"plan", CLUSTER, "--gpus", "1000003"}, 1, "no layout of 1000003 GPUs"},
    {{"plan", PP_SOURCE_ROOT "/tests/data/sim/1f1b.ini", "--gpus", "8"}, 1, "[hardware]"},
};

START_TEST(test_plan_bad) {
    g_autofree char *out = NULL, *err = NULL;
    int              status = test_util_spawn(SIM_BIN, plan_bad[_i].args, &out, &err);
    ck_assert_int_eq(status, plan_bad[_i].status);
    ck_assert_msg(strstr(err, plan_bad[_i].needle) != NULL, "%s", err);
}
END_TEST

/* A cluster run's JSON: gpus, MFU, HFU and TFLOP/s per GPU as the engine computes them. */
START_TEST(test_cluster_json) {
    const char *const args[] = {CLUSTER, "--json", "-s", "model.recompute=selective", NULL};
    g_autofree char  *out = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &out, &err), 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *obj = parse_object(out, parser);

    const char *const o[] = {"model.recompute=selective", NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(CLUSTER, o, &error);
    ck_assert_ptr_nonnull(sc);
    g_autoptr(PpSchedule) sched = test_util_scenario_schedule_new(sc);
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_ptr_nonnull(cost);
    g_autoptr(SimResult) res = sim_engine_run(sched, cost, &error);
    ck_assert_ptr_nonnull(res);
    ck_assert_int_eq(json_object_get_int_member(obj, "gpus"), 16);
    ck_assert_int_eq(json_object_get_int_member(obj, "data_parallel"), 2);
    ck_assert_int_eq(json_object_get_int_member(obj, "tensor_parallel"), 2);
    ck_assert_double_eq(json_object_get_double_member(obj, "mfu"), res->mfu);
    ck_assert_double_eq(json_object_get_double_member(obj, "hfu"), res->hfu);
    ck_assert_double_eq(json_object_get_double_member(obj, "tflops_per_gpu"), res->tflops_per_gpu);
    ck_assert_double_eq(json_object_get_double_member(obj, "throughput_tokens_per_s"),
                        res->throughput_tokens_per_s);
    ck_assert(res->hfu > res->mfu);
    JsonArray *stages = json_object_get_array_member(obj, "stages");
    for (guint s = 0; s < json_array_get_length(stages); s++)
        ck_assert_int_eq(
            json_object_get_int_member(json_array_get_object_element(stages, s), "dp_wait_ns"),
            res->stages[s].dp_wait_ns);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sim-plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_plan_rows);
    int32_t n_kinds = 0;
    while (pp_sched_kinds()[n_kinds] != NULL)
        n_kinds++;
    tcase_add_loop_test(tc, test_plan_every_kind, 0, n_kinds);
    tcase_add_test(tc, test_plan_memory);
    tcase_add_loop_test(tc, test_plan_bad, 0, G_N_ELEMENTS(plan_bad));
    tcase_add_test(tc, test_cluster_json);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
