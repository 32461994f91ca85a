/* SPDX-License-Identifier: MIT
 * test-sim-cli.c: the pacer-sim command line, run as a child process (g_spawn_sync): --out
 * files are byte-identical across reruns, --json equals sim_engine_run called in-process,
 * trace.json is consistent with the run, bad input exits 1 (2 for usage errors) with one
 * stderr line naming the culprit, and compare/sweep/schedules give the right rows.
 */
#include <check.h>
#include <csv.h>
#include <float.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp-error.h"
#include "pp-json.h"
#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "sim-json.h"
#include "test-util.h"

#define SIM_BIN  PP_BUILD_ROOT "/sim/pacer-sim"
#define DATA_DIR PP_SOURCE_ROOT "/tests/data/sim"
/* Shipped scenarios the bad-input cases modify. */
#define DEFAULT_INI PP_SOURCE_ROOT "/scenarios/default.ini"
#define CUSTOM_INI  PP_SOURCE_ROOT "/scenarios/custom-1f1b-n2.ini"

/* Scenario files exercised by the loop tests (tests/data/sim/NAME.ini). */
static const char *const scenario_names[] = {"1f1b", "interleaved", "paci", "gpt2-a100"};

/* Runs pacer-sim with @args (NULL-terminated); captures stdout/stderr (nullable outputs).
 * Returns its exit status. */
static int run_cli(const char *const *args, char **out, char **err) {
    return test_util_spawn(SIM_BIN, args, out, err);
}

static char *scenario_path(const char *name) {
    return g_strdup_printf("%s/%s.ini", DATA_DIR, name);
}

/* Every --json output: strict JSON first (json-glib's parser is lenient), then the tree. */
static JsonNode *parse_json(const char *text) {
    test_util_assert_json(text);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    ck_assert_msg(json_parser_load_from_data(parser, text, -1, &error), "JSON: %s",
                  error ? error->message : "");
    return json_node_copy(json_parser_get_root(parser));
}

/* An integer member: must be a JSON integer, not a real. */
static int64_t json_int(JsonObject *obj, const char *name) {
    JsonNode *node = json_object_get_member(obj, name);
    ck_assert_msg(node != NULL, "missing member %s", name);
    ck_assert_msg(json_node_get_value_type(node) == G_TYPE_INT64, "%s is not an integer", name);
    return json_node_get_int(node);
}

/* The in-process reference: the same scenario through the same library calls; its cost model
 * goes to @cost_out (nullable). */
static SimResult *run_in_process(const char *path, SimCostModel **cost_out) {
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(path, NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(PpSchedule) sched = test_util_scenario_schedule_new(sc);
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    SimResult *res = sim_engine_run(sched, cost, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");
    if (cost_out != NULL)
        *cost_out = g_steal_pointer(&cost);
    return res;
}

/* Whether file @name has the same bytes in @dir_a and @dir_b; its length in @dir_a goes to
 * @len_a (nullable). */
static gboolean same_file(const char *dir_a, const char *dir_b, const char *name, gsize *len_a) {
    g_autofree char *pa = g_build_filename(dir_a, name, NULL);
    g_autofree char *pb = g_build_filename(dir_b, name, NULL);
    gsize            la, lb;
    g_autofree char *ta = test_util_read_file(pa, &la);
    g_autofree char *tb = test_util_read_file(pb, &lb);
    if (len_a != NULL)
        *len_a = la;
    return la == lb && memcmp(ta, tb, la) == 0;
}

/* --- --out: reruns are byte-identical --- */

START_TEST(test_out_deterministic) {
    g_autofree char *path = scenario_path(scenario_names[_i]);
    g_autofree char *dir1 = test_util_tmp_dir_new("pacer-sim-a-XXXXXX");
    g_autofree char *dir2 = test_util_tmp_dir_new("pacer-sim-b-XXXXXX");
    const char      *a1[] = {path, "--out", dir1, NULL};
    const char      *a2[] = {path, "--out", dir2, NULL};
    ck_assert_int_eq(run_cli(a1, NULL, NULL), 0);
    ck_assert_int_eq(run_cli(a2, NULL, NULL), 0);

    const char *const files[] = {"memory.csv", "ops.csv",     "scenario.ini",
                                 "stages.csv", "summary.csv", "trace.json"};
    int               n_files = 0;
    g_autoptr(GDir) d = g_dir_open(dir1, 0, NULL);
    while (g_dir_read_name(d) != NULL)
        n_files++;
    ck_assert_int_eq(n_files, G_N_ELEMENTS(files)); /* no temporary files left behind */
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        gsize    len = 0;
        gboolean same = same_file(dir1, dir2, files[i], &len);
        ck_assert_msg(len > 0, "%s is empty", files[i]);
        ck_assert_msg(same, "%s differs between runs", files[i]);
    }

    /* scenario.ini is the effective scenario: simulating it gives the same ops.csv. */
    g_autofree char *ini = g_build_filename(dir1, "scenario.ini", NULL);
    g_autofree char *dir3 = test_util_tmp_dir_new("pacer-sim-c-XXXXXX");
    const char      *a3[] = {ini, "--out", dir3, NULL};
    ck_assert_int_eq(run_cli(a3, NULL, NULL), 0);
    ck_assert(same_file(dir1, dir3, "ops.csv", NULL));

    ck_assert(test_util_tmp_dir_remove(dir1));
    ck_assert(test_util_tmp_dir_remove(dir2));
    ck_assert(test_util_tmp_dir_remove(dir3));
}
END_TEST

/* --- --json equals the engine in-process --- */

START_TEST(test_json_matches_engine) {
    g_autofree char *path = scenario_path(scenario_names[_i]);
    const char      *args[] = {path, "--json", NULL};
    g_autofree char *out = NULL;
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    g_autoptr(JsonNode) root = parse_json(out);
    JsonObject   *obj = json_node_get_object(root);
    SimCostModel *cost_raw = NULL;
    g_autoptr(SimResult) ref = run_in_process(path, &cost_raw);
    g_autoptr(SimCostModel) cost = cost_raw;

    ck_assert_int_eq(json_int(obj, "step_time_ns"), ref->step_time_ns);
    ck_assert_int_eq(json_int(obj, "makespan_ns"), ref->makespan_ns);
    ck_assert_int_eq(json_int(obj, "delta_max"), ref->delta_max);
    ck_assert_int_eq(json_int(obj, "peak_memory_bytes"), ref->peak_memory_bytes);
    ck_assert_int_eq(json_int(obj, "n_stages"), ref->n_stages);
    ck_assert_int_eq(json_int(obj, "ops_simulated"), ref->n_ops_simulated);
    /* json-glib writes doubles with 17 significant digits: they round-trip exactly. */
    ck_assert_double_eq(json_object_get_double_member(obj, "throughput_tokens_per_s"),
                        ref->throughput_tokens_per_s);
    ck_assert_double_eq(json_object_get_double_member(obj, "throughput_samples_per_s"),
                        ref->throughput_samples_per_s);
    ck_assert_double_eq(json_object_get_double_member(obj, "bubble_fraction"),
                        ref->bubble_fraction);
    ck_assert_double_eq(json_object_get_double_member(obj, "efficiency"), ref->efficiency);
    ck_assert_double_eq(json_object_get_double_member(obj, "mfu"), ref->mfu);

    JsonArray *stages = json_object_get_array_member(obj, "stages");
    ck_assert_int_eq(json_array_get_length(stages), ref->n_stages);
    for (int32_t s = 0; s < ref->n_stages; s++) {
        JsonObject           *st = json_array_get_object_element(stages, s);
        const SimStageResult *r = &ref->stages[s];
        ck_assert_int_eq(json_int(st, "stage"), s);
        ck_assert_int_eq(json_int(st, "busy_ns"), r->busy_ns);
        ck_assert_int_eq(json_int(st, "span_ns"), r->span_ns);
        ck_assert_int_eq(json_int(st, "peak_inflight"), r->peak_inflight);
        ck_assert_int_eq(json_int(st, "peak_memory_bytes"), r->peak_memory_bytes);
        ck_assert_int_eq(json_int(st, "delta_max"), r->delta_max);
        ck_assert_int_eq(json_int(st, "delay_max"), r->delay_max);
        ck_assert_int_eq(json_int(st, "weight_versions"), r->weight_versions);
        /* memory by category, flat and as the "memory" object: the parts of the peak */
        ck_assert_int_eq(json_int(st, "weights_bytes"), cost->weights_bytes[s]);
        ck_assert_int_eq(json_int(st, "grads_bytes"), cost->grads_bytes[s]);
        ck_assert_int_eq(json_int(st, "optim_bytes"), cost->optim_bytes[s]);
        ck_assert_int_eq(json_int(st, "stash_peak_bytes"), r->stash_peak_bytes);
        ck_assert_int_eq(json_int(st, "activation_peak_bytes"), r->activation_peak_bytes);
        ck_assert_int_eq(json_int(st, "peak_stash_bytes"), r->peak_stash_bytes);
        ck_assert_int_eq(json_int(st, "peak_time_ns"), r->peak_time_ns);
        ck_assert_int_gt(cost->weights_bytes[s], 0);
        JsonObject *mem = json_object_get_object_member(st, "memory");
        ck_assert_ptr_nonnull(mem);
        ck_assert_int_eq(json_object_get_size(mem), 9);
        ck_assert_int_eq(json_int(mem, "buffer_bytes"), cost->buffer_bytes[s]);
        ck_assert_int_eq(json_int(st, "buffer_bytes"), cost->buffer_bytes[s]);
        /* the caching allocator's reserve: 5% over the allocated peak */
        ck_assert_int_eq(json_int(mem, "reserved_bytes"),
                         llround((double)r->peak_memory_bytes * 1.05));
        ck_assert_int_eq(json_int(mem, "total_bytes"), r->peak_memory_bytes);
        ck_assert_int_eq(json_int(mem, "time_ns"), r->peak_time_ns);
        ck_assert_int_eq(json_int(mem, "weights_bytes"), cost->weights_bytes[s]);
        ck_assert_int_eq(json_int(mem, "grads_bytes"), cost->grads_bytes[s]);
        ck_assert_int_eq(json_int(mem, "optim_bytes"), cost->optim_bytes[s]);
        ck_assert_int_eq(json_int(mem, "stash_bytes"), r->stash_peak_bytes);
        ck_assert_int_eq(json_int(mem, "activation_bytes"), r->activation_peak_bytes);
        ck_assert_int_eq(json_int(mem, "weights_bytes") + json_int(mem, "grads_bytes") +
                             json_int(mem, "optim_bytes") + json_int(mem, "buffer_bytes") +
                             json_int(mem, "stash_bytes") + json_int(mem, "activation_bytes"),
                         json_int(mem, "total_bytes"));
    }
}
END_TEST

/* The summary labels whose figure each is: the schedule bubble of the busiest stage's step
 * and the utilisation of all stages over the run (docs/simulator.md: 0.0051 next to 0.7379 for
 * PACI on the default scenario), with the JSON's values; efficiency = sum of busy / (N x makespan).
 */
START_TEST(test_summary_labels) {
    const char      *text_args[] = {DEFAULT_INI, "--set", "pipeline.schedule=paci", NULL};
    const char      *json_args[] = {DEFAULT_INI, "--set", "pipeline.schedule=paci", "--json", NULL};
    g_autofree char *text = NULL, *json = NULL;
    ck_assert_int_eq(run_cli(text_args, &text, NULL), 0);
    ck_assert_int_eq(run_cli(json_args, &json, NULL), 0);
    g_autoptr(JsonNode) root = parse_json(json);
    JsonObject *obj = json_node_get_object(root);
    double      bubble = json_object_get_double_member(obj, "bubble_fraction");
    double      efficiency = json_object_get_double_member(obj, "efficiency");
    JsonArray  *stages = json_object_get_array_member(obj, "stages");
    int64_t     busy_ns = 0;
    for (guint s = 0; s < json_array_get_length(stages); s++)
        busy_ns += json_int(json_array_get_object_element(stages, s), "busy_ns");
    ck_assert_double_eq_tol(
        efficiency,
        (double)busy_ns / ((double)json_array_get_length(stages) * json_int(obj, "makespan_ns")),
        1e-12);
    g_autofree char *bubble_line = g_strdup_printf(
        "\nbubble      %.4f (schedule bubble: idle share of the busiest stage's step, "
        "(C - m(F+B+W))/C)\n",
        bubble);
    g_autofree char *efficiency_line = g_strdup_printf(
        "\nefficiency  %.4f (mean stage utilisation over the whole run, fill, drain and lighter "
        "stages included: busy / (N x makespan))\n",
        efficiency);
    ck_assert_msg(strstr(text, bubble_line) != NULL, "no \"%s\" in:\n%s", bubble_line, text);
    ck_assert_msg(strstr(text, efficiency_line) != NULL, "no \"%s\" in:\n%s", efficiency_line,
                  text);
    ck_assert_ptr_nonnull(strstr(bubble_line, "0.0051"));
    ck_assert_ptr_nonnull(strstr(efficiency_line, "0.7379"));
}
END_TEST

/* --- --set and --steps reach the run: closed forms with comm and update costs zeroed --- */

typedef struct {
    const char *name;
    int64_t     makespan_ns; /* F = 10, B = 12, W = 8 us; N = 4, m = 8 */
} ClosedForm;

static const ClosedForm closed_forms[] = {
    {"1f1b", (8 + 4 - 1) * 30000},                         /* (m + N - 1)(F + B + W) */
    {"interleaved", 8 * 30000 + (4 - 1) * 30000 / 2},      /* m(F+B+W) + (N-1)(F+B+W)/v, v = 2 */
    {"zb-h1", 8 * 30000 + (4 - 1) * (10 + 12 - 8) * 1000}, /* m(F+B+W) + (N-1)(F+B-W) */
};

START_TEST(test_closed_form) {
    const ClosedForm *c = &closed_forms[_i];
    g_autofree char  *path = scenario_path(c->name);
    const char       *args[] = {path,      "--set", "costs.comm_us=0", "--set", "costs.update_us=0",
                                "--steps", "1",     "--json",          NULL};
    g_autofree char  *out = NULL;
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    g_autoptr(JsonNode) root = parse_json(out);
    JsonObject *obj = json_node_get_object(root);
    ck_assert_int_eq(json_int(obj, "steps"), 1);
    ck_assert_int_eq(json_int(obj, "makespan_ns"), c->makespan_ns);
    ck_assert_int_eq(json_int(obj, "step_time_ns"), c->makespan_ns);
}
END_TEST

/* --- zb-2p from a scenario counts memory finely (M_W / M_F from the cost model) --- */

typedef struct {
    const char *path;   /* from the source root */
    const char *set[4]; /* extra --set values (NULL-terminated) */
} ZbFineCase;

/* [costs] with the model's bytes, and the analytic model (m = 16 so that 2N < m; the even
 * layer split: the paper's 2x bound is for equal stages, while the cost-balanced split gives
 * the stage before the LM head more layers and zb-2p keeps more units in flight there). */
static const ZbFineCase zb_fine_cases[] = {
    {"scenarios/zb/zb-6.2b-p8-m24.ini", {NULL}},
    {"tests/data/sim/gpt2-a100.ini",
     {"pipeline.microbatches=16", "training.global_batch=64", "pipeline.partition=even", NULL}},
};

/* Runs pacer-sim on @c with @schedule; returns the parsed --json. */
static JsonNode *zb_fine_cli(const ZbFineCase *c, const char *path, const char *schedule) {
    g_autofree char *kind = g_strdup_printf("pipeline.schedule=%s", schedule);
    GPtrArray       *args = g_ptr_array_new();
    g_ptr_array_add(args, (gpointer)path);
    g_ptr_array_add(args, "--set");
    g_ptr_array_add(args, kind);
    for (int k = 0; c->set[k] != NULL; k++) {
        g_ptr_array_add(args, "--set");
        g_ptr_array_add(args, (gpointer)c->set[k]);
    }
    g_ptr_array_add(args, "--json");
    g_ptr_array_add(args, NULL);
    g_autofree char *out = NULL;
    int              status = run_cli((const char *const *)args->pdata, &out, NULL);
    g_ptr_array_free(args, TRUE);
    ck_assert_int_eq(status, 0);
    return parse_json(out);
}

/* pacer-sim builds zb-2p with sim_cost_schedule_params' M_W / M_F, with [costs] and with
 * the analytic model: the run equals the in-process one built that way, some stage holds
 * more than 2N whole units (only the fine count allows it), and every stage's peak
 * activation bytes stay within 2x 1F1B's largest stage peak (the paper's limit). */
START_TEST(test_zb_fine_memory) {
    const ZbFineCase *c = &zb_fine_cases[_i];
    g_autofree char  *path = g_build_filename(PP_SOURCE_ROOT, c->path, NULL);
    g_autoptr(JsonNode) zb_root = zb_fine_cli(c, path, "zb-2p");
    g_autoptr(JsonNode) ref_root = zb_fine_cli(c, path, "1f1b");
    JsonObject *zb = json_node_get_object(zb_root);
    JsonArray  *ref_stages = json_object_get_array_member(json_node_get_object(ref_root), "stages");
    int64_t     ref_peak = 0; // bytes
    for (guint s = 0; s < json_array_get_length(ref_stages); s++)
        ref_peak = MAX(ref_peak, json_int(json_array_get_object_element(ref_stages, s),
                                          "peak_activation_bytes"));

    g_autoptr(GError) error = NULL;
    const char *overrides[] = {"pipeline.schedule=zb-2p", c->set[0], c->set[1], c->set[2], NULL};
    g_autoptr(PpScenario) sc = pp_scenario_load(path, overrides, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    sim_cost_schedule_params(cost, &params);
    ck_assert_double_gt(params.mem_w_fraction, 0.0);
    ck_assert_double_lt(params.mem_w_fraction, 1.0);
    g_autoptr(PpSchedule) sched = test_util_schedule_build(&params);
    g_autoptr(SimResult) res = sim_engine_run(sched, cost, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");

    ck_assert_int_eq(json_int(zb, "step_time_ns"), res->step_time_ns);
    ck_assert_double_eq(json_object_get_double_member(zb, "bubble_fraction"), res->bubble_fraction);
    JsonArray *stages = json_object_get_array_member(zb, "stages");
    ck_assert_int_eq(json_array_get_length(stages), res->n_stages);
    int32_t max_units = 0;
    for (int32_t s = 0; s < res->n_stages; s++) {
        JsonObject *st = json_array_get_object_element(stages, s);
        ck_assert_int_eq(json_int(st, "peak_inflight"), res->stages[s].peak_inflight);
        ck_assert_int_eq(json_int(st, "peak_activation_bytes"),
                         res->stages[s].peak_activation_bytes);
        ck_assert_int_le(json_int(st, "peak_activation_bytes"), 2 * ref_peak);
        max_units = MAX(max_units, res->stages[s].peak_inflight);
    }
    ck_assert_int_gt(max_units, 2 * res->n_stages);
}
END_TEST

/* --- pipeline.mode = dynamic: PACI's policy run live records the static program --- */

START_TEST(test_dynamic_mode) {
    g_autofree char *path = scenario_path("paci");
    g_autofree char *dir_s = test_util_tmp_dir_new("pacer-sim-st-XXXXXX");
    g_autofree char *dir_d = test_util_tmp_dir_new("pacer-sim-dy-XXXXXX");
    const char      *a_s[] = {path, "--out", dir_s, NULL};
    const char      *a_d[] = {path, "--set", "pipeline.mode=dynamic", "--out", dir_d, NULL};
    ck_assert_int_eq(run_cli(a_s, NULL, NULL), 0);
    ck_assert_int_eq(run_cli(a_d, NULL, NULL), 0);
    /* Deterministic costs: the live policy makes the same decisions as the static program. */
    const char *const same[] = {"ops.csv", "stages.csv", "memory.csv", "trace.json"};
    for (size_t i = 0; i < G_N_ELEMENTS(same); i++)
        ck_assert_msg(same_file(dir_s, dir_d, same[i], NULL), "%s differs", same[i]);
    g_autofree char *summary_path = g_build_filename(dir_d, "summary.csv", NULL);
    g_autofree char *summary = test_util_read_file(summary_path, NULL);
    ck_assert_ptr_nonnull(strstr(summary, "\"dynamic\""));
    ck_assert(test_util_tmp_dir_remove(dir_s));
    ck_assert(test_util_tmp_dir_remove(dir_d));
}
END_TEST

/* --- trace.json agrees with the run --- */

/* Microseconds as printed ("12.345") back to integer ns, exactly. */
static int64_t us_to_ns(JsonNode *node) {
    return (int64_t)llround(json_node_get_double(node) * 1000.0);
}

START_TEST(test_perfetto_consistent) {
    g_autofree char *path = scenario_path(scenario_names[_i]);
    g_autofree char *dir = test_util_tmp_dir_new("pacer-sim-p-XXXXXX");
    const char      *args[] = {path, "--out", dir, NULL};
    ck_assert_int_eq(run_cli(args, NULL, NULL), 0);
    g_autofree char *trace_path = g_build_filename(dir, "trace.json", NULL);
    g_autofree char *text = test_util_read_file(trace_path, NULL);
    g_autoptr(JsonNode) root = parse_json(text);
    g_autoptr(SimResult) ref = run_in_process(path, NULL);

    JsonArray *events = json_object_get_array_member(json_node_get_object(root), "traceEvents");
    g_autofree int64_t *busy_ns = g_new0(int64_t, ref->n_stages); /* (n_stages) */
    int64_t             n_compute = 0, n_transfers = 0, n_starts = 0, n_finishes = 0;
    int64_t             id_sum_s = 0, id_sum_f = 0;
    /* the end of the last slice seen on each thread */
    typedef struct {
        int64_t pid, tid, end_ns;
    } ThreadEnd;
    g_autoptr(GArray) last = g_array_new(FALSE, FALSE, sizeof(ThreadEnd));
    for (guint i = 0; i < json_array_get_length(events); i++) {
        JsonObject *ev = json_array_get_object_element(events, i);
        const char *ph = json_object_get_string_member(ev, "ph");
        int64_t     pid = json_object_get_int_member(ev, "pid");
        ck_assert(pid >= 0 && pid < ref->n_stages);
        if (strcmp(ph, "X") == 0) {
            /* Slices of one thread come in time order and never overlap (they must nest). */
            int64_t tid = json_object_get_int_member(ev, "tid");
            int64_t start = us_to_ns(json_object_get_member(ev, "ts"));
            int64_t end = start + us_to_ns(json_object_get_member(ev, "dur"));
            guint   k = 0;
            while (k < last->len && !(g_array_index(last, ThreadEnd, k).pid == pid &&
                                      g_array_index(last, ThreadEnd, k).tid == tid))
                k++;
            if (k == last->len) {
                ThreadEnd entry = {pid, tid, end};
                g_array_append_val(last, entry);
            } else {
                ck_assert_int_ge(start, g_array_index(last, ThreadEnd, k).end_ns);
                g_array_index(last, ThreadEnd, k).end_ns = end;
            }
        }
        if (strcmp(ph, "X") == 0 && json_object_get_int_member(ev, "tid") == 0) {
            busy_ns[pid] += us_to_ns(json_object_get_member(ev, "dur"));
            n_compute++;
        } else if (strcmp(ph, "X") == 0) {
            n_transfers++;
        } else if (strcmp(ph, "s") == 0) {
            n_starts++;
            id_sum_s += json_object_get_int_member(ev, "id");
        } else if (strcmp(ph, "f") == 0) {
            n_finishes++;
            id_sum_f += json_object_get_int_member(ev, "id");
            ck_assert_str_eq(json_object_get_string_member(ev, "bp"), "e");
        } else {
            ck_assert_str_eq(ph, "M");
        }
    }
    /* One compute slice per op; each stage's slices add up to its busy time. */
    int64_t n_ops = 0;
    for (int64_t r = 0; r < ref->trace->n_rows; r++)
        n_ops += ref->trace->rows[r].resource == PP_RESOURCE_COMPUTE;
    ck_assert_int_eq(n_compute, n_ops);
    for (int32_t s = 0; s < ref->n_stages; s++)
        ck_assert_int_eq(busy_ns[s], ref->stages[s].busy_ns);
    /* Each cross-device dependency: one transfer and one s/f flow pair with the same id. */
    ck_assert_int_gt(n_transfers, 0);
    ck_assert_int_eq(n_starts, n_transfers);
    ck_assert_int_eq(n_finishes, n_transfers);
    ck_assert_int_eq(id_sum_s, id_sum_f);
    ck_assert_int_eq(id_sum_s, n_transfers * (n_transfers + 1) / 2);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --- bad input --- */

typedef struct {
    const char *args[12]; /* after the program name; "@" is replaced by the 1f1b scenario */
    int         status;
    const char *needle; /* must appear in stderr */
} BadCase;

static const BadCase bad_cases[] = {
    {{DATA_DIR "/no-such-file.ini"}, 1, "no-such-file.ini"},
    {{DATA_DIR "/bad-unknown-key.ini"}, 1, "stagez"},
    {{"@", "--set", "pipeline.stagez=4"}, 1, "stagez"},
    {{"@", "--set", "pipeline.schedule=warp"}, 1, "warp"},
    {{"@", "--set", "pipeline.stages=4x"}, 1, "4x"},
    {{"@", "--set", "costs.forward_us=-5"}, 1, "-5"},
    {{"@", "--set", "training.global_batch=7"}, 1, "global_batch"},
    {{DATA_DIR "/deadlock.ini"}, 1, "cycle"},
    {{"compare", "@", "--schedules", "1f1b,warp"}, 1, "warp"},
    {{"@", "--out", "/dev/null/out"}, 1, "/dev/null/out"},
    {{"sweep", "@", "--sweep", "pipeline.stages=2", "--out", "/dev/null/s.csv"},
     1,
     "/dev/null/s.csv"},
    {{"sweep", DATA_DIR "/no-such-file.ini", "--sweep", "pipeline.stages=2,4"},
     1,
     "no-such-file.ini"},
    {{"@", "--bogus"}, 2, "--bogus"},
    {{"@", "--set", "stages"}, 2, "stages"},
    {{"@", "--steps", "-1"}, 2, "--steps"},
    {{"--json"}, 2, "SCENARIO"},
    {{"sweep", "@"}, 2, "--sweep"},
    {{"sweep", "@", "--sweep", "pipeline.stages"}, 2, "pipeline.stages"},
    {{"schedules", "extra"}, 2, "extra"},
    /* Issue 6: values each key accepts alone used to abort (134), hang or run silently
     * wrong; now each is a one-line error naming the keys. */
    {{"@", "--set", "costs.forward_us=1e12", "--set", "costs.backward_us=1e12", "--set",
      "pipeline.microbatches=100", "--steps", "1000"},
     1,
     "beyond the simulator's clock of 2^62 ns"},
    {{DATA_DIR "/paci.ini", "--set", "pipeline.mode=dynamic", "--set", "costs.forward_us=1e12",
      "--set", "costs.backward_us=1e12", "--steps", "10000"},
     1,
     "beyond the simulator's clock of 2^62 ns"},
    {{DEFAULT_INI, "--set", "model.hidden=2147483647", "--set", "model.heads=1"},
     1,
     "[model] hidden = '2147483647'"},
    {{DEFAULT_INI, "--set", "hardware.kernel_eff_max=1e-300"},
     1,
     "hardware.kernel_eff_max = 1e-300"},
    {{DEFAULT_INI, "--set", "model.hidden=4194304", "--set", "hardware.memory_gib=1e9"},
     1,
     "model.hidden = 4194304"},
    {{PP_SOURCE_ROOT "/scenarios/paci/gpt2m-b128-1f1b-m4.ini", "--set", "model.hidden=4194304",
      "--set", "pipeline.partition=even"},
     1,
     "model.hidden = 4194304"},
    {{DEFAULT_INI, "--set", "model.layers=2000000000"}, 1, "[model] layers = '2000000000'"},
    {{DEFAULT_INI, "--set", "hardware.memory_gib=10"}, 1, "(hardware.memory_gib)"},
    {{DATA_DIR "/two-updates.ini"}, 1, "U on stage 0 applies no gradient"},
    {{CUSTOM_INI, "--steps", "3"}, 1, "[training] steps = 3"},
    {{CUSTOM_INI, "--set", "pipeline.microbatches=5"}, 1, "[pipeline] microbatches = 5"},
    {{DATA_DIR "/bad-duplicate-key.ini"},
     1,
     "line 15: [pipeline] stages is given a second time (first on line 12)"},
};

START_TEST(test_bad_input) {
    const BadCase   *c = &bad_cases[_i];
    g_autofree char *path = scenario_path("1f1b");
    const char      *args[G_N_ELEMENTS(c->args) + 1] = {NULL};
    for (size_t i = 0; i < G_N_ELEMENTS(c->args) && c->args[i] != NULL; i++)
        args[i] = strcmp(c->args[i], "@") == 0 ? path : c->args[i];
    g_autofree char *out = NULL, *err = NULL;
    int              status = run_cli(args, &out, &err);
    ck_assert_msg(status == c->status, "case %d: status %d, want %d (stderr: %s)", _i, status,
                  c->status, err);
    ck_assert_msg(g_str_has_prefix(err, "pacer-sim: "), "case %d: stderr '%s'", _i, err);
    ck_assert_msg(strstr(err, c->needle) != NULL, "case %d: '%s' not in stderr '%s'", _i, c->needle,
                  err);
    if (c->status == 1 && strcmp(c->args[0], "compare") != 0) {
        /* Input errors: exactly one line. */
        const char *nl = strchr(err, '\n');
        ck_assert_msg(nl != NULL && nl[1] == '\0', "case %d: not one line: '%s'", _i, err);
    }
}
END_TEST

/* --- out of memory --- */

/* A configuration over its devices' memory says by how much in GiB and which keys would help,
 * with their values now, leaving out the ones already at their most frugal setting: at the
 * partition (no split fits) and in the summary (an even split that would not fit). */
START_TEST(test_out_of_memory_advice) {
    const char      *base = PP_SOURCE_ROOT "/scenarios/default.ini";
    const char      *tight[] = {base, "--set", "hardware.memory_gib=20", NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_int_eq(run_cli(tight, &out, &err), 1);
    const char *const want[] = {"needs 21.750 GiB",
                                "1.813 GiB over the limit of 19.938 GiB",
                                "pipeline.microbatch_size (now 16",
                                "model.recompute = selective",
                                "model.flash_attention = true",
                                "pipeline.stages (now 8",
                                "hardware.memory_gib"};
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++)
        ck_assert_msg(strstr(err, want[i]) != NULL, "'%s' not in '%s'", want[i], err);

    const char *frugal[] = {base,
                            "--set",
                            "hardware.memory_gib=0.5",
                            "--set",
                            "model.recompute=full",
                            "--set",
                            "model.flash_attention=true",
                            "--set",
                            "training.global_batch=8",
                            "--set",
                            "pipeline.microbatch_size=1",
                            NULL};
    g_free(err);
    err = NULL;
    ck_assert_int_eq(run_cli(frugal, NULL, &err), 1);
    ck_assert_msg(strstr(err, "pipeline.stages (now 8") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "microbatch_size (now") == NULL, "%s", err);
    ck_assert_msg(strstr(err, "model.recompute =") == NULL, "%s", err);
    ck_assert_msg(strstr(err, "flash_attention = true") == NULL, "%s", err);

    const char *even[] = {
        base, "--set", "hardware.memory_gib=20", "--set", "pipeline.partition=even", NULL};
    g_free(out);
    out = NULL;
    ck_assert_int_eq(run_cli(even, &out, NULL), 0);
    ck_assert_msg(strstr(out, "it would not fit: 44.158 GiB, 24.158 GiB over the device's "
                              "20.000 GiB; what lowers it:") != NULL,
                  "%s", out);
}
END_TEST

/* Interleaving: what must fit is a device, the sum of its chunks (issue 21 §6). The
 * DeepSeek-V3-like job on GB200 with 4 stages of 4 chunks and 64-way expert parallelism: on
 * 230 GiB devices its fullest chunk needs more than 50 GiB, over a quarter of the device, the
 * old per-chunk limit, which no split met; its devices fit, and every stage's simulated peak is
 * within the device. On the preset's 186 GB the frugal split's fullest device needs 208.496
 * GiB (the routed experts' master weights and moments shared by 2 expert-data-parallel ranks,
 * not 128): the error says so, by how much, and which keys would help. */
START_TEST(test_interleaved_device_memory) {
    const char      *ds = PP_SOURCE_ROOT "/scenarios/cluster/deepseek-v3-like.ini";
    const char      *fits[] = {ds,      "--json",
                               "--set", "hardware.preset=gb200",
                               "--set", "hardware.memory_gib=230",
                               "--set", "pipeline.schedule=interleaved",
                               "--set", "pipeline.stages=4",
                               "--set", "pipeline.chunks=4",
                               NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_int_eq(run_cli(fits, &out, &err), 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert(json_parser_load_from_data(parser, out, -1, NULL));
    JsonObject *run = json_node_get_object(json_parser_get_root(parser));
    JsonArray  *stages = json_object_get_array_member(run, "stages");
    ck_assert_uint_eq(json_array_get_length(stages), 4);
    for (guint i = 0; i < 4; i++) {
        int64_t peak = json_object_get_int_member(json_array_get_object_element(stages, i),
                                                  "peak_memory_bytes");
        ck_assert_int_le(peak, INT64_C(230) << 30);
        ck_assert_int_gt(peak, INT64_C(50) << 30); /* more than the old per-chunk share */
    }

    const char *preset[] = {ds,
                            "--set",
                            "hardware.preset=gb200",
                            "--set",
                            "pipeline.schedule=interleaved",
                            "--set",
                            "pipeline.stages=4",
                            "--set",
                            "pipeline.chunks=4",
                            NULL};
    g_free(out), g_free(err);
    out = err = NULL;
    ck_assert_int_eq(run_cli(preset, &out, &err), 1);
    const char *const want[] = {"16 virtual stages on 4 devices",
                                "needs 208.496 GiB (223870772224 bytes) on its fullest device",
                                "35.379 GiB over the limit of 173.117 GiB",
                                "more pipeline.stages (now 4",
                                "more parallel.expert (now 64",
                                "parallel.fsdp = true",
                                "model.recompute = selective"};
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++)
        ck_assert_msg(strstr(err, want[i]) != NULL, "'%s' not in '%s'", want[i], err);
}
END_TEST

/* --- output folders --- */

/* pacer-sim --out and replay --out never write into a pacer-train run's folder (its log.csv
 * marks it): they stop, naming the folder and a folder of their own, and change nothing. */
START_TEST(test_out_refuses_training_run) {
    g_autofree char *sim_dir = test_util_tmp_dir_new("pacer-sim-run-XXXXXX");
    g_autofree char *path = scenario_path("1f1b");
    const char      *sim[] = {path, "--out", sim_dir, NULL};
    ck_assert_int_eq(run_cli(sim, NULL, NULL), 0);

    g_autofree char *run = test_util_tmp_dir_new("pacer-train-run-XXXXXX");
    g_autofree char *log = g_build_filename(run, "log.csv", NULL);
    g_autofree char *ops = g_build_filename(run, "ops.csv", NULL);
    ck_assert(g_file_set_contents(log, "step,tokens\n1,64\n", -1, NULL));
    ck_assert(g_file_set_contents(ops, "measured\n", -1, NULL));
    g_autofree char   *before = test_util_snapshot(run);
    g_autofree char   *sim_ops = g_build_filename(sim_dir, "ops.csv", NULL);
    g_autofree char   *sim_ini = g_build_filename(sim_dir, "scenario.ini", NULL);
    const char        *into[] = {path, "--out", run, NULL};
    const char        *replay[] = {"replay", sim_ini, "--trace", sim_ops, "--out", run, NULL};
    const char *const *cmds[] = {into, replay};
    for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
        g_autofree char *err = NULL;
        ck_assert_int_eq(run_cli(cmds[i], NULL, &err), 1);
        g_autofree char *want =
            g_strdup_printf("--out %s holds a pacer-train run (log.csv): pacer-sim would "
                            "overwrite its ops.csv and scenario.ini, so nothing was written",
                            run);
        ck_assert_msg(strstr(err, want) != NULL, "%s", err);
        g_autofree char *after = test_util_snapshot(run);
        ck_assert_str_eq(after, before);
    }
    g_autofree char *pred = g_build_filename(run, "pred", NULL);
    const char      *inside[] = {"replay", sim_ini, "--trace", sim_ops, "--out", pred, NULL};
    ck_assert_int_eq(run_cli(inside, NULL, NULL), 0);
    ck_assert(test_util_tmp_dir_remove(run));
    ck_assert(test_util_tmp_dir_remove(sim_dir));
}
END_TEST

/* --- compare --- */

/* The compare rule on both kinds of cost: explicit [costs] keep the micro-batch size (2),
 * analytic costs keep the global batch (32). */
typedef struct {
    const char *scenario;
    int32_t     microbatch_size[6]; /* per kind below */
    int32_t     global_batch[6];
} CompareCase;

static const char *const compare_kinds[] = {"1f1b",  "gpipe", "interleaved",
                                            "zb-2p", "paci",  "async-1f1b"};
static const CompareCase compare_cases[] = {
    {"1f1b", {2, 2, 2, 2, 2, 2}, {16, 16, 16, 16, 16, 2}},
    {"gpt2-a100", {4, 4, 4, 4, 4, 32}, {32, 32, 32, 32, 32, 32}},
};

START_TEST(test_compare) {
    const CompareCase *c = &compare_cases[_i];
    g_autofree char   *path = scenario_path(c->scenario);
    const char        *list = "1f1b,gpipe,interleaved,zb-2p,paci,async-1f1b";
    const char        *args[] = {"compare", path, "--schedules", list, "--json", NULL};
    g_autofree char   *out = NULL;
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    g_autoptr(JsonNode) root = parse_json(out);
    JsonArray *rows = json_object_get_array_member(json_node_get_object(root), "schedules");
    ck_assert_int_eq(json_array_get_length(rows), G_N_ELEMENTS(compare_kinds));
    int64_t first_ns = 0;
    double  first_tps = 0.0;
    for (guint i = 0; i < G_N_ELEMENTS(compare_kinds); i++) {
        const char *kind = compare_kinds[i];
        JsonObject *row = json_array_get_object_element(rows, i);
        ck_assert_str_eq(json_object_get_string_member(row, "schedule"), kind);
        ck_assert(!json_object_has_member(row, "error"));
        int64_t step_ns = json_int(row, "step_time_ns");
        double  tps = json_object_get_double_member(row, "throughput_tokens_per_s");
        double  speedup = json_object_get_double_member(row, "speedup");
        ck_assert_int_gt(step_ns, 0);
        if (i == 0) {
            first_ns = step_ns;
            first_tps = tps;
        }
        ck_assert_double_eq_tol(speedup, tps / first_tps, 1e-12);
        /* Equal global batches: the speedup is the step time ratio. */
        if (json_int(row, "global_batch") == c->global_batch[0])
            ck_assert_double_eq_tol(speedup, (double)first_ns / (double)step_ns, 1e-9);
        ck_assert_int_eq(json_int(row, "microbatch_size"), c->microbatch_size[i]);
        ck_assert_int_eq(json_int(row, "global_batch"), c->global_batch[i]);
        /* The rule: interleaved gets 2 chunks, paci accumulates over m = 8, async-1f1b 1. */
        ck_assert_int_eq(json_int(row, "chunks"), strcmp(kind, "interleaved") == 0 ? 2 : 1);
        if (strcmp(kind, "paci") == 0)
            ck_assert_int_eq(json_int(row, "accumulation"), 8);
        if (strcmp(kind, "async-1f1b") == 0)
            ck_assert_int_eq(json_int(row, "accumulation"), 1);
    }

    /* The table: a header and one line per schedule, in the given order. */
    const char      *targs[] = {"compare", path, "--schedules", list, NULL};
    g_autofree char *table = NULL;
    ck_assert_int_eq(run_cli(targs, &table, NULL), 0);
    g_auto(GStrv) lines = g_strsplit(table, "\n", -1);
    ck_assert_int_eq(g_strv_length(lines), G_N_ELEMENTS(compare_kinds) + 2); /* header, "" */
    for (guint i = 0; i < G_N_ELEMENTS(compare_kinds); i++)
        ck_assert(g_str_has_prefix(lines[i + 1], compare_kinds[i]));
}
END_TEST

/* --- sweep --- */

typedef struct {
    GPtrArray *rows;   /* (element-type GPtrArray of char *) */
    GPtrArray *fields; /* the row being read */
} CsvRows;

static void csv_on_field(void *data, size_t len, void *user) {
    CsvRows *r = user;
    g_ptr_array_add(r->fields, g_strndup(data, len));
}

static void csv_on_row(int c, void *user) {
    (void)c;
    CsvRows *r = user;
    g_ptr_array_add(r->rows, r->fields);
    r->fields = g_ptr_array_new_with_free_func(g_free);
}

/* Parses CSV text with libcsv. Returns: (transfer full) rows of fields. */
static GPtrArray *parse_csv(const char *text) {
    struct csv_parser p;
    CsvRows           r = {g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref),
                           g_ptr_array_new_with_free_func(g_free)};
    ck_assert_int_eq(csv_init(&p, CSV_STRICT), 0);
    size_t len = strlen(text);
    ck_assert_uint_eq(csv_parse(&p, text, len, csv_on_field, csv_on_row, &r), len);
    csv_fini(&p, csv_on_field, csv_on_row, &r);
    csv_free(&p);
    g_ptr_array_unref(r.fields);
    return r.rows;
}

static const char *field(GPtrArray *rows, guint row, guint col) {
    GPtrArray *f = g_ptr_array_index(rows, row);
    ck_assert_uint_lt(col, f->len);
    return g_ptr_array_index(f, col);
}

START_TEST(test_sweep) {
    g_autofree char *path = scenario_path("1f1b");
    g_autofree char *dir = test_util_tmp_dir_new("pacer-sim-s-XXXXXX");
    g_autofree char *csv_path = g_build_filename(dir, "sweep.csv", NULL);
    const char      *args[] = {
             "sweep", path, "--sweep", "pipeline.stages=2,4", "--sweep", "pipeline.microbatches=4,8,0",
             NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    g_autoptr(GPtrArray) rows = parse_csv(out);
    ck_assert_uint_eq(rows->len, 1 + 2 * 3);

    const char *const header[] = {"pipeline.stages",
                                  "pipeline.microbatches",
                                  "step_time_ns",
                                  "throughput_tokens_per_s",
                                  "throughput_samples_per_s",
                                  "bubble_fraction",
                                  "efficiency",
                                  "delta_max",
                                  "peak_memory_bytes",
                                  "error"};
    for (guint c = 0; c < G_N_ELEMENTS(header); c++)
        ck_assert_str_eq(field(rows, 0, c), header[c]);
    const char *const stages[] = {"2", "2", "2", "4", "4", "4"};
    const char *const mbs[] = {"4", "8", "0", "4", "8", "0"};
    for (guint i = 0; i < 6; i++) {
        ck_assert_uint_eq(((GPtrArray *)g_ptr_array_index(rows, i + 1))->len, G_N_ELEMENTS(header));
        ck_assert_str_eq(field(rows, i + 1, 0), stages[i]);
        ck_assert_str_eq(field(rows, i + 1, 1), mbs[i]);
        gboolean bad = strcmp(mbs[i], "0") == 0;
        /* microbatches = 0 is out of range: an error message and no figures. */
        ck_assert_int_eq(field(rows, i + 1, 9)[0] != '\0', bad);
        ck_assert_int_eq(field(rows, i + 1, 2)[0] != '\0', !bad);
        if (bad)
            ck_assert_ptr_nonnull(strstr(field(rows, i + 1, 9), "microbatches"));
    }
    ck_assert_ptr_nonnull(strstr(err, "2 of 6 sweep points failed"));

    /* The point that equals the scenario file has its step time. */
    const char      *jargs[] = {path, "--json", NULL};
    g_autofree char *json = NULL;
    ck_assert_int_eq(run_cli(jargs, &json, NULL), 0);
    g_autoptr(JsonNode) root = parse_json(json);
    g_autofree char *want =
        g_strdup_printf("%" G_GINT64_FORMAT, json_int(json_node_get_object(root), "step_time_ns"));
    ck_assert_str_eq(field(rows, 5, 2), want);

    /* --out FILE.csv holds exactly what stdout showed. */
    const char      *oargs[] = {"sweep",   path,
                                "--sweep", "pipeline.stages=2,4",
                                "--sweep", "pipeline.microbatches=4,8,0",
                                "--out",   csv_path,
                                NULL};
    g_autofree char *quiet = NULL;
    ck_assert_int_eq(run_cli(oargs, &quiet, NULL), 0);
    ck_assert_str_eq(quiet, "");
    g_autofree char *written = test_util_read_file(csv_path, NULL);
    ck_assert_str_eq(written, out);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* The step time of one run of @path with @sets (NULL-terminated "section.key=value"). */
static int64_t run_step_ns(const char *path, const char *const *sets) {
    const char *args[16] = {path, "--json"};
    size_t      n = 2;
    for (size_t i = 0; sets[i] != NULL; i++) {
        ck_assert_uint_lt(n + 2, G_N_ELEMENTS(args));
        args[n++] = "--set";
        args[n++] = sets[i];
    }
    args[n] = NULL;
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_msg(run_cli(args, &out, &err) == 0, "%s: %s", path, err);
    g_autoptr(JsonNode) root = parse_json(out);
    return json_int(json_node_get_object(root), "step_time_ns");
}

/* GPT-2 XL on 2 stages x 8 data-parallel replicas, global batch 512 = 8 x 16 x 4 (issue 21
 * §5): every compare row runs with the scenario's 4 sequences per micro-batch, since each of
 * the 8 replicas runs 16 micro-batches per update (m or, for paci, a): 512 / (16 x 8) = 4, and
 * a row's step time is the plain run's with the same keys. */
START_TEST(test_compare_data_parallel) {
    g_autofree char *path = scenario_path("gpt2xl-dp8");
    const char      *args[] = {"compare", path, "--schedules", "1f1b,zb-2p,paci", "--json", NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_msg(run_cli(args, &out, &err) == 0, "%s", err);
    g_autoptr(JsonNode) root = parse_json(out);
    JsonArray *rows = json_object_get_array_member(json_node_get_object(root), "schedules");
    ck_assert_int_eq(json_array_get_length(rows), 3);
    const char *const kinds[] = {"1f1b", "zb-2p", "paci"};
    const int32_t     data = 8, per_update = 16, global_batch = 512;
    for (guint i = 0; i < 3; i++) {
        JsonObject *row = json_array_get_object_element(rows, i);
        ck_assert_str_eq(json_object_get_string_member(row, "schedule"), kinds[i]);
        ck_assert_msg(!json_object_has_member(row, "error"), "%s: %s", kinds[i],
                      json_object_has_member(row, "error")
                          ? json_object_get_string_member(row, "error")
                          : "");
        ck_assert_int_eq(json_int(row, "global_batch"), global_batch);
        ck_assert_int_eq(json_int(row, "microbatch_size"), global_batch / (per_update * data));
        ck_assert_int_eq(json_int(row, "microbatch_size") * per_update * data, global_batch);
        ck_assert_int_eq(json_int(row, "accumulation"), i == 2 ? per_update : 1);
        g_autofree char  *kind = g_strdup_printf("pipeline.schedule=%s", kinds[i]);
        g_autofree char  *acc = g_strdup_printf("pipeline.accumulation=%" G_GINT64_FORMAT,
                                                json_int(row, "accumulation"));
        const char *const sets[] = {kind, acc, NULL};
        ck_assert_int_eq(json_int(row, "step_time_ns"), run_step_ns(path, sets));
    }
}
END_TEST

/* Sweeping the micro-batches of the same scenario (which gives both the micro-batch size and
 * the global batch) keeps the global batch and the 8 replicas: the size becomes 512 / (m x
 * 8); paci's points run a = m (issue 17), so its rows follow m instead of staying flat. */
START_TEST(test_sweep_data_parallel) {
    g_autofree char *path = scenario_path("gpt2xl-dp8");
    const char      *args[] = {"sweep",   path,
                               "--sweep", "pipeline.schedule=1f1b,paci",
                               "--sweep", "pipeline.microbatches=8,16,32",
                               NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(err, "3 sweep points of an accumulating schedule (paci) ran "
                                      "pipeline.accumulation = pipeline.microbatches"));
    ck_assert_ptr_null(strstr(err, "failed"));
    g_autoptr(GPtrArray) rows = parse_csv(out);
    ck_assert_uint_eq(rows->len, 1 + 2 * 3);
    const char *const kinds[] = {"1f1b", "paci"};
    const int32_t     ms[] = {8, 16, 32};
    int64_t           paci_ns[3];
    for (guint i = 0; i < 6; i++) {
        const char *kind = kinds[i / 3];
        int32_t     m = ms[i % 3];
        ck_assert_str_eq(field(rows, i + 1, 0), kind);
        ck_assert_str_eq(field(rows, i + 1, 9), "");
        g_autofree char  *k = g_strdup_printf("pipeline.schedule=%s", kind);
        g_autofree char  *mb = g_strdup_printf("pipeline.microbatches=%d", m);
        g_autofree char  *acc = g_strdup_printf("pipeline.accumulation=%d", i < 3 ? 1 : m);
        g_autofree char  *size = g_strdup_printf("pipeline.microbatch_size=%d", 512 / (m * 8));
        const char *const sets[] = {k, mb, acc, size, NULL};
        g_autofree char  *want = g_strdup_printf("%" G_GINT64_FORMAT, run_step_ns(path, sets));
        ck_assert_str_eq(field(rows, i + 1, 2), want);
        if (i >= 3)
            paci_ns[i - 3] = g_ascii_strtoll(want, NULL, 10);
    }
    /* not flat: a changes the step */
    ck_assert(paci_ns[0] != paci_ns[1] && paci_ns[1] != paci_ns[2]);
}
END_TEST

/* An interrupted sweep to stdout keeps the rows it computed (issue 6): each row is flushed as
 * it is done. The child is killed as soon as its first row arrives; what it printed must be
 * the header and whole rows, a prefix of the full sweep, and the kill must find it still
 * running (a sweep that printed only at the end shows everything or nothing). */
START_TEST(test_sweep_streams) {
    g_autofree char *path = scenario_path("gpt2-a100");
    GString         *values = g_string_new("training.steps=1");
    for (int i = 2; i <= 400; i++)
        g_string_append_printf(values, ",%d", i);
    g_autofree char *spec = g_string_free(values, FALSE);
    const char      *args[] = {"sweep", path, "--sweep", spec, NULL};

    int      fd = -1;
    GPid     pid = test_util_spawn_piped(SIM_BIN, args, &fd);
    GString *got = g_string_new(NULL);
    char     buf[4096];
    int      n_lines = 0;
    while (n_lines < 2) {
        ssize_t n = read(fd, buf, sizeof buf);
        ck_assert_int_gt(n, 0); /* the child must not close stdout before its first row */
        g_string_append_len(got, buf, n);
        n_lines = 0;
        for (const char *c = got->str; (c = strchr(c, '\n')) != NULL; c++)
            n_lines++;
    }
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
        g_string_append_len(got, buf, n);
    close(fd);
    int wait_status = 0;
    ck_assert_int_eq(waitpid(pid, &wait_status, 0), pid);
    g_spawn_close_pid(pid);
    ck_assert_msg(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL,
                  "the sweep had finished before its first row arrived");
    g_autofree char *partial = g_string_free(got, FALSE);

    g_autofree char *full = NULL;
    ck_assert_int_eq(run_cli(args, &full, NULL), 0);
    g_autoptr(GPtrArray) all = parse_csv(full);
    ck_assert_uint_eq(all->len, 401);
    ck_assert(g_str_has_suffix(partial, "\n")); /* whole rows only */
    ck_assert(g_str_has_prefix(full, partial));
    g_autoptr(GPtrArray) rows = parse_csv(partial);
    ck_assert_uint_ge(rows->len, 2);
    ck_assert_uint_lt(rows->len, all->len);
    ck_assert_str_eq(field(rows, 1, 0), "1");
    ck_assert_str_ne(field(rows, 1, 1), ""); /* the first point ran */
}
END_TEST

/* Every shipped scenario runs (issue 6: three under scenarios/paci/ did not). */
START_TEST(test_shipped_scenarios) {
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    test_util_collect_files(PP_SOURCE_ROOT "/scenarios", ".ini", files);
    ck_assert_uint_ge(files->len, 24);
    for (guint i = 0; i < files->len; i++) {
        const char      *path = g_ptr_array_index(files, i);
        const char      *args[] = {path, "--json", NULL};
        g_autofree char *out = NULL, *err = NULL;
        int              status = run_cli(args, &out, &err);
        ck_assert_msg(status == 0, "%s: exit %d: %s", path, status, err);
        g_autoptr(JsonNode) root = parse_json(out);
        JsonObject *obj = json_node_get_object(root);
        ck_assert_msg(json_int(obj, "step_time_ns") > 0, "%s: no step time", path);
        ck_assert_msg(json_int(obj, "peak_memory_bytes") > 0, "%s: no memory", path);
    }
}
END_TEST

/* --- memory by category: stages.csv and memory.csv --- */

static int64_t field_int(GPtrArray *rows, guint row, guint col) {
    const char *text = field(rows, row, col);
    char       *end = NULL;
    int64_t     value = g_ascii_strtoll(text, &end, 10);
    ck_assert_msg(*text != '\0' && *end == '\0', "row %u column %u: '%s' is not an integer", row,
                  col, text);
    return value;
}

/* stages.csv keeps its columns and appends the categories; each peak is the sum of its parts.
 * memory.csv: every row adds up, time never goes back, each stage starts at time 0 with its
 * static bytes and reaches exactly its peaks. Loop index: scenario_names. */
START_TEST(test_memory_csv) {
    g_autofree char *path = scenario_path(scenario_names[_i]);
    g_autofree char *dir = test_util_tmp_dir_new("pacer-sim-m-XXXXXX");
    const char      *args[] = {path, "--out", dir, NULL};
    ck_assert_int_eq(run_cli(args, NULL, NULL), 0);

    g_autofree char *stages_path = g_build_filename(dir, "stages.csv", NULL);
    g_autofree char *stages_text = test_util_read_file(stages_path, NULL);
    g_autoptr(GPtrArray) stages = parse_csv(stages_text);
    const char *const header[] = {"stage",
                                  "busy_ns",
                                  "span_ns",
                                  "peak_inflight",
                                  "peak_memory_bytes",
                                  "peak_activation_bytes",
                                  "delta_max",
                                  "delay_max",
                                  "weight_versions",
                                  "weights_bytes",
                                  "grads_bytes",
                                  "optim_bytes",
                                  "stash_peak_bytes",
                                  "activation_peak_bytes",
                                  "peak_stash_bytes",
                                  "peak_time_ns",
                                  "buffer_bytes",
                                  "peak_reserved_bytes"};
    ck_assert_uint_eq(((GPtrArray *)g_ptr_array_index(stages, 0))->len, G_N_ELEMENTS(header));
    for (guint c = 0; c < G_N_ELEMENTS(header); c++)
        ck_assert_str_eq(field(stages, 0, c), header[c]);
    const guint n_stages = stages->len - 1;
    ck_assert_uint_ge(n_stages, 2);
    g_autofree int64_t *static_bytes = g_new0(int64_t, n_stages); /* (n_stages) */
    for (guint s = 0; s < n_stages; s++) {
        ck_assert_int_eq(field_int(stages, s + 1, 0), s);
        static_bytes[s] = field_int(stages, s + 1, 9) + field_int(stages, s + 1, 10) +
                          field_int(stages, s + 1, 11) + field_int(stages, s + 1, 16);
        ck_assert_int_eq(field_int(stages, s + 1, 17),
                         llround((double)field_int(stages, s + 1, 4) * 1.05));
        ck_assert_int_gt(static_bytes[s], 0);
        ck_assert_int_eq(static_bytes[s] + field_int(stages, s + 1, 12) +
                             field_int(stages, s + 1, 13),
                         field_int(stages, s + 1, 4));
        ck_assert_int_le(field_int(stages, s + 1, 12), field_int(stages, s + 1, 14));
        ck_assert_int_le(field_int(stages, s + 1, 13), field_int(stages, s + 1, 5));
    }

    g_autofree char *memory_path = g_build_filename(dir, "memory.csv", NULL);
    g_autofree char *memory_text = test_util_read_file(memory_path, NULL);
    g_autoptr(GPtrArray) memory = parse_csv(memory_text);
    const char *const mheader[] = {"stage", "time_ns", "activation_bytes", "stash_bytes",
                                   "total_bytes"};
    for (guint c = 0; c < G_N_ELEMENTS(mheader); c++)
        ck_assert_str_eq(field(memory, 0, c), mheader[c]);
    ck_assert_uint_gt(memory->len, 1 + n_stages);
    g_autofree int64_t *max_total = g_new0(int64_t, n_stages); /* (n_stages) */
    g_autofree int64_t *max_act = g_new0(int64_t, n_stages);   /* (n_stages) */
    g_autofree int64_t *max_stash = g_new0(int64_t, n_stages); /* (n_stages) */
    int64_t             last_ns = 0;
    for (guint r = 1; r < memory->len; r++) {
        int64_t s = field_int(memory, r, 0), t = field_int(memory, r, 1);
        int64_t act = field_int(memory, r, 2), stash = field_int(memory, r, 3);
        ck_assert(s >= 0 && s < n_stages);
        ck_assert_int_ge(t, last_ns);
        last_ns = t;
        if (r <= n_stages) {
            /* one row per stage at time 0: static bytes only */
            ck_assert_int_eq(s, r - 1);
            ck_assert_int_eq(t, 0);
            ck_assert_int_eq(act + stash, 0);
        }
        ck_assert_int_eq(field_int(memory, r, 4), static_bytes[s] + act + stash);
        max_total[s] = MAX(max_total[s], field_int(memory, r, 4));
        max_act[s] = MAX(max_act[s], act);
        max_stash[s] = MAX(max_stash[s], stash);
    }
    for (guint s = 0; s < n_stages; s++) {
        ck_assert_int_eq(max_total[s], field_int(stages, s + 1, 4));
        ck_assert_int_eq(max_act[s], field_int(stages, s + 1, 5));
        ck_assert_int_eq(max_stash[s], field_int(stages, s + 1, 14));
    }
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --- the bubble of short runs --- */

static const char *const short_schedules[] = {"gpipe",     "1f1b", "zb-h1",      "zb-2p",
                                              "pipedream", "2bw",  "async-1f1b", "paci"};

/* Runs shorter than the pipeline's fill: GPT-2 Medium on rtx-pro-6000, micro-batch 64, each
 * schedule on 2, 4 and 8 stages, 1 to 4 steps, m = a = 1, 2 or 4 micro-batches per step and
 * every recomputation mode: the bubble is in [0, 1). PACI on 2 stages, a = 2, 3 steps with
 * full recomputation (-0.016), 4 stages, 2 steps (-0.074) and selective (-0.0008) used to be
 * negative: their update interval, measured in the drain, is shorter than a step's work. */
/* The bubble of @kind on GPT-2 Medium (default.ini), micro-batch 64, with @stages stages,
 * @steps steps, m = a = @a and @recompute; FALSE when the scenario refuses the configuration
 * (a stage that does not fit the device's memory, async-1f1b with a > 1, 2bw with fewer
 * micro-batches than stages - 1). */
static gboolean short_run_bubble(const char *kind, int32_t stages, int32_t steps, int32_t a,
                                 const char *recompute, double *bubble) {
    g_autoptr(GPtrArray) o = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(o, g_strdup_printf("pipeline.schedule=%s", kind));
    g_ptr_array_add(o, g_strdup_printf("pipeline.stages=%d", stages));
    g_ptr_array_add(o, g_strdup_printf("pipeline.microbatches=%d", a));
    g_ptr_array_add(o, g_strdup_printf("pipeline.accumulation=%d", a));
    /* pipedream's global batch is one micro-batch; the others' a or m of them */
    g_ptr_array_add(o, g_strdup_printf("training.global_batch=%d",
                                       g_str_equal(kind, "pipedream") ? 64 : 64 * a));
    g_ptr_array_add(o, g_strdup_printf("training.steps=%d", steps));
    g_ptr_array_add(o, g_strdup_printf("model.recompute=%s", recompute));
    g_ptr_array_add(o, NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(DEFAULT_INI, (const char *const *)o->pdata, &error);
    if (sc == NULL)
        return FALSE;
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    g_autoptr(PpSchedule) sched = pp_schedule_new(&params, &error);
    g_autoptr(SimCostModel) cost = sched ? sim_cost_new_from_scenario(sc, &error) : NULL;
    if (cost == NULL)
        return FALSE;
    g_autoptr(SimResult) res = sim_engine_run(sched, cost, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");
    *bubble = res->bubble_fraction;
    return TRUE;
}

START_TEST(test_short_run_bubble) {
    static const char *const recompute[] = {"none", "selective", "full"};
    const char              *kind = short_schedules[_i];
    int                      n_runs = 0;
    for (int32_t stages = 2; stages <= 8; stages *= 2)
        for (int32_t steps = 1; steps <= 4; steps++)
            for (int32_t a = 1; a <= 4; a *= 2)
                for (guint r = 0; r < G_N_ELEMENTS(recompute); r++) {
                    double bubble = -1.0;
                    if (!short_run_bubble(kind, stages, steps, a, recompute[r], &bubble))
                        continue;
                    ck_assert_msg(bubble >= 0.0 && bubble < 1.0,
                                  "%s, %d stages, %d steps, a = m = %d, recompute %s: bubble %.6f",
                                  kind, stages, steps, a, recompute[r], bubble);
                    n_runs++;
                }
    ck_assert_int_ge(n_runs, 20);
    if (g_str_equal(kind, "paci")) {
        /* the three reported runs: no steady state, so no bubble */
        double bubble = -1.0;
        ck_assert(short_run_bubble(kind, 2, 3, 2, "full", &bubble));
        ck_assert_double_eq(bubble, 0.0);
        ck_assert(short_run_bubble(kind, 4, 2, 2, "full", &bubble));
        ck_assert_double_eq(bubble, 0.0);
        ck_assert(short_run_bubble(kind, 2, 3, 2, "selective", &bubble));
        ck_assert_double_eq(bubble, 0.0);
    }
}
END_TEST

/* --- JSON: numbers, the tree writer, the strict check --- */

static const struct {
    double      value;
    const char *text;
} json_numbers[] = {
    {0.5, "0.5"},
    {2, "2.0"},
    {-0.0, "-0.0"},
    {0.1, "0.10000000000000001"},
    {1e20, "1e+20"},
    {-2.5e-300, "-2.5e-300"},
    {1e-7, "9.9999999999999995e-08"},
    {DBL_MAX, "1.7976931348623157e+308"},
    {NAN, "null"},
    {INFINITY, "null"},
    {-INFINITY, "null"},
};

/* Each double is written as the text above: strict JSON that reads back as the same double
 * (NaN and infinity as null). */
START_TEST(test_json_numbers) {
    g_autoptr(GString) out = g_string_new(NULL);
    pp_json_append_double(out, json_numbers[_i].value);
    ck_assert_str_eq(out->str, json_numbers[_i].text);
    test_util_assert_json(out->str);
    if (isfinite(json_numbers[_i].value)) {
        double back = g_ascii_strtod(out->str, NULL);
        ck_assert(memcmp(&back, &json_numbers[_i].value, sizeof back) == 0);
    }
}
END_TEST

/* Texts the strict check refuses (json-glib's parser takes some of them) and accepts. */
static const char *const json_bad[] = {
    "1e+20.0", "nan",   "NaN", "Infinity",  "-Infinity", "[1,]", "{\"a\":1,}", "01",
    "1.",      ".5",    "+1",  "[1] x",     "{'a':1}",   "",     "\"\t\"",     "\"\\x\"",
    "[1 2]",   "{1:2}", "tru", "\"\\u12\"", "// c\n1",   "-",    "1e",         "[",
};
static const char *const json_good[] = {
    "0",
    "-0.0",
    "1e+20",
    "1E-5",
    "[]",
    "{}",
    " {\"a\" : [1, 2.5, null, true, false]}\n",
    "\"\\u00e9 \\n \\/ \xc3\xa9\"",
    "[[[]]]",
    "{\"\" : {}}",
};

START_TEST(test_json_strict) {
    for (guint i = 0; i < G_N_ELEMENTS(json_bad); i++)
        ck_assert_msg(!test_util_json_strict(json_bad[i], NULL), "accepted: %s", json_bad[i]);
    for (guint i = 0; i < G_N_ELEMENTS(json_good); i++) {
        g_autofree char *why = NULL;
        ck_assert_msg(test_util_json_strict(json_good[i], &why), "refused %s: %s", json_good[i],
                      why);
    }
}
END_TEST

/* sim_json_to_string() lays a tree out as json-glib's indented generator does (for doubles
 * that generator writes validly), and writes 1e20, NaN and infinity validly. */
START_TEST(test_json_tree) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name \"q\"\n");
    json_builder_add_string_value(b, "tab\there \x01 \xc3\xa9");
    json_builder_set_member_name(b, "ints");
    json_builder_begin_array(b);
    json_builder_add_int_value(b, -3);
    json_builder_add_int_value(b, G_MAXINT64);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "empty");
    json_builder_begin_array(b);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "nested");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "none");
    json_builder_begin_object(b);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "x");
    json_builder_add_double_value(b, 0.25);
    json_builder_set_member_name(b, "ok");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_set_member_name(b, "nothing");
    json_builder_add_null_value(b);
    json_builder_end_object(b);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *ours = sim_json_to_string(root);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_pretty(gen, TRUE);
    json_generator_set_indent(gen, 2);
    json_generator_set_root(gen, root);
    g_autofree char *theirs = json_generator_to_data(gen, NULL);
    ck_assert_str_eq(ours, theirs);
    test_util_assert_json(ours);

    g_autoptr(JsonBuilder) odd = json_builder_new();
    json_builder_begin_array(odd);
    json_builder_add_double_value(odd, 1e20);
    json_builder_add_double_value(odd, NAN);
    json_builder_add_double_value(odd, -INFINITY);
    json_builder_end_array(odd);
    g_autoptr(JsonNode) odd_root = json_builder_get_root(odd);
    g_autofree char *odd_text = sim_json_to_string(odd_root);
    ck_assert_str_eq(odd_text, "[\n  1e+20,\n  null,\n  null\n]");
}
END_TEST

/* --- schedules --- */

/* --hf-config: the same run as the scenario with the config's shape written as [model] keys,
 * to the byte of --json; the config's sliding window is named once on stderr; --set and the
 * scenario's own keys override the file's. */
START_TEST(test_hf_config_option) {
    const char       *hf = PP_SOURCE_ROOT "/tests/data/hf/mistral-7b-v0.1.json";
    const char *const by_file[] = {
        DEFAULT_INI, "--hf-config", hf,       "--set", "model.seq_len=1024",
        "--steps",   "2",           "--json", NULL};
    const char *const by_hand[] = {DEFAULT_INI,
                                   "--set",
                                   "model.layers=32",
                                   "--set",
                                   "model.hidden=4096",
                                   "--set",
                                   "model.heads=32",
                                   "--set",
                                   "model.kv_heads=8",
                                   "--set",
                                   "model.ffn=swiglu",
                                   "--set",
                                   "model.ffn_hidden=14336",
                                   "--set",
                                   "model.vocab=32000",
                                   "--set",
                                   "model.seq_len=1024",
                                   "--steps",
                                   "2",
                                   "--json",
                                   NULL};
    g_autofree char  *out_file = NULL, *err_file = NULL, *out_hand = NULL, *err_hand = NULL;
    ck_assert_int_eq(run_cli(by_file, &out_file, &err_file), 0);
    ck_assert_int_eq(run_cli(by_hand, &out_hand, &err_hand), 0);
    ck_assert_ptr_nonnull(strstr(err_file, "pacer-sim: warning: "));
    ck_assert_ptr_nonnull(strstr(err_file, "sliding_window = 4096"));
    ck_assert_ptr_null(strstr(strstr(err_file, "sliding_window") + 1, "sliding_window"));
    ck_assert_str_eq(err_hand, "");
    /* the JSON differs in the model's name only */
    g_autoptr(JsonNode) a = parse_json(out_file);
    g_autoptr(JsonNode) b = parse_json(out_hand);
    JsonObject *oa = json_node_get_object(a), *ob = json_node_get_object(b);
    ck_assert_str_eq(json_object_get_string_member(oa, "model"), "mistral-7b-v0.1.json");
    ck_assert_str_eq(json_object_get_string_member(ob, "model"), "gpt2-medium");
    json_object_set_string_member(oa, "model", "same");
    json_object_set_string_member(ob, "model", "same");
    g_autofree char *ta = json_to_string(a, FALSE);
    g_autofree char *tb = json_to_string(b, FALSE);
    ck_assert_str_eq(ta, tb);

    const char *const missing[] = {DEFAULT_INI, "--hf-config", "no-such.json", NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_cli(missing, NULL, &err), 1);
    ck_assert_ptr_nonnull(strstr(err, "[model] hf_config"));
    ck_assert_ptr_nonnull(strstr(err, "no-such.json"));
}
END_TEST

START_TEST(test_schedules) {
    const char      *args[] = {"schedules", NULL};
    g_autofree char *out = NULL;
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
    guint n = 0;
    for (const PpSchedKindInfo *const *k = pp_sched_kinds(); *k != NULL; k++, n++) {
        ck_assert_ptr_nonnull(lines[n]);
        g_auto(GStrv) words = g_strsplit_set(lines[n], " ", 2);
        ck_assert_str_eq(words[0], (*k)->name);
        ck_assert_ptr_nonnull(strstr(lines[n], (*k)->summary));
    }
    ck_assert_int_eq(g_strv_length(lines), n + 1); /* the text ends with a newline */
}
END_TEST

static Suite *sim_cli_suite(void) {
    Suite *s = suite_create("sim-cli");
    TCase *tc = tcase_create("outputs");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_out_deterministic, 0, G_N_ELEMENTS(scenario_names));
    tcase_add_loop_test(tc, test_json_matches_engine, 0, G_N_ELEMENTS(scenario_names));
    tcase_add_test(tc, test_summary_labels);
    tcase_add_loop_test(tc, test_perfetto_consistent, 0, G_N_ELEMENTS(scenario_names));
    tcase_add_loop_test(tc, test_closed_form, 0, G_N_ELEMENTS(closed_forms));
    tcase_add_test(tc, test_dynamic_mode);
    tcase_add_loop_test(tc, test_memory_csv, 0, G_N_ELEMENTS(scenario_names));
    tcase_add_loop_test(tc, test_zb_fine_memory, 0, G_N_ELEMENTS(zb_fine_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_loop_test(tc, test_bad_input, 0, G_N_ELEMENTS(bad_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("commands");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_compare, 0, G_N_ELEMENTS(compare_cases));
    tcase_add_test(tc, test_sweep);
    tcase_add_test(tc, test_compare_data_parallel);
    tcase_add_test(tc, test_sweep_data_parallel);
    tcase_add_test(tc, test_sweep_streams);
    tcase_add_test(tc, test_shipped_scenarios);
    tcase_add_test(tc, test_schedules);
    tcase_add_test(tc, test_out_of_memory_advice);
    tcase_add_test(tc, test_interleaved_device_memory);
    tcase_add_test(tc, test_out_refuses_training_run);
    suite_add_tcase(s, tc);
    tc = tcase_create("short-runs");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_short_run_bubble, 0, G_N_ELEMENTS(short_schedules));
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_add_loop_test(tc, test_json_numbers, 0, G_N_ELEMENTS(json_numbers));
    tcase_add_test(tc, test_json_strict);
    tcase_add_test(tc, test_json_tree);
    tcase_add_test(tc, test_hf_config_option);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(sim_cli_suite());
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
