/* SPDX-License-Identifier: MIT
 * test-sim-replay.c: `pacer-sim replay`, run as a child process. Replaying a simulated trace
 * without communication reproduces it op for op, and so does replaying one simulated with a
 * hop per message with --link and the same hop; replaying a real pacer-train run never
 * predicts a later op than measured and keeps the schedule's weight-version drift; a trace
 * with a missing, extra, repeated or reordered op exits 1 naming the op. A trace of two
 * data-parallel replicas replays as one pipeline with the exposed reduction before each U
 * (closed forms). In process: the
 * engine's per-op durations (SimCostModel.op_dur_ns).
 */
#include <check.h>
#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

#include "pp-scenario.h"
#include "pp-schedule.h"
#include "pp-error.h"
#include "pp-trace.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "test-util.h"

#define SIM_BIN   PP_BUILD_ROOT "/sim/pacer-sim"
#define TRAIN_BIN PP_BUILD_ROOT "/exec/pacer-train"
#define DATA_DIR  PP_SOURCE_ROOT "/tests/data/sim"

/* Simulated scenarios with explicit [costs] (tests/data/sim/NAME.ini). */
static const char *const sim_names[] = {"1f1b", "paci", "zb-h1", "interleaved"};

/* Runs `pacer-sim replay @scenario --trace @trace --json` (with --out @out_dir when non-NULL,
 * then @extra, nullable) and returns its JSON object; asserts exit 0. Returns: (transfer
 * full). */
static JsonNode *replay_json_with(const char *scenario, const char *trace, const char *out_dir,
                                  const char *const *extra) {
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    const char *const base[] = {"replay", scenario, "--trace", trace, "--json"};
    for (size_t i = 0; i < G_N_ELEMENTS(base); i++)
        g_ptr_array_add(args, (gpointer)base[i]);
    if (out_dir != NULL) {
        g_ptr_array_add(args, "--out");
        g_ptr_array_add(args, (gpointer)out_dir);
    }
    for (const char *const *e = extra; e && *e; e++)
        g_ptr_array_add(args, (gpointer)*e);
    g_ptr_array_add(args, NULL);
    g_autofree char *out = NULL, *err = NULL;
    int              rc = test_util_spawn(SIM_BIN, (const char *const *)args->pdata, &out, &err);
    ck_assert_msg(rc == 0, "replay %s exited %d: %s", trace, rc, err);
    test_util_assert_json(out);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    ck_assert_msg(json_parser_load_from_data(parser, out, -1, &error), "JSON: %s",
                  error ? error->message : "");
    return json_node_copy(json_parser_get_root(parser));
}

static JsonNode *replay_json(const char *scenario, const char *trace, const char *out_dir) {
    return replay_json_with(scenario, trace, out_dir, NULL);
}

static int64_t json_int(JsonNode *root, const char *name) {
    JsonObject *obj = json_node_get_object(root);
    ck_assert_msg(json_object_has_member(obj, name), "missing member %s", name);
    return json_object_get_int_member(obj, name);
}

static PpTrace *read_trace(const char *dir, const char *name) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) error = NULL;
    PpTrace *trace = pp_trace_read_csv(path, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "");
    return trace;
}

/* Simulates tests/data/sim/@name.ini with comm_us = @comm_us into @dir (--out). */
static void simulate(const char *name, const char *comm_us, const char *dir) {
    g_autofree char *path = g_strdup_printf("%s/%s.ini", DATA_DIR, name);
    g_autofree char *comm = g_strdup_printf("costs.comm_us=%s", comm_us);
    const char      *args[] = {path, "--set", comm, "--out", dir, NULL};
    g_autofree char *err = NULL;
    ck_assert_msg(test_util_spawn(SIM_BIN, args, NULL, &err) == 0, "pacer-sim %s: %s", name, err);
}

/* Row of @trace for the op (stage, kind, mb, chunk, step) of @row; fails when absent. */
static const PpTraceRow *find_row(const PpTrace *trace, const PpTraceRow *row) {
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *r = &trace->rows[i];
        if (r->stage == row->stage && r->kind == row->kind && r->mb == row->mb &&
            r->chunk == row->chunk && r->step == row->step)
            return r;
    }
    ck_abort_msg("no row for stage %d %s mb %d chunk %d step %d", row->stage,
                 pp_op_kind_name(row->kind), row->mb, row->chunk, row->step);
    return NULL;
}

/* A simulated run of tests/data/sim/NAME.ini and a folder for its replay's files. */
typedef struct {
    char *sim_dir, *rep_dir;
    char *scenario, *ops; /* sim_dir/scenario.ini, sim_dir/ops.csv */
} SimRun;

/* Simulates @name with comm_us = @comm_us into a new folder. */
static void sim_run_init(SimRun *r, const char *name, const char *comm_us) {
    r->sim_dir = test_util_tmp_dir_new("replay-sim-XXXXXX");
    r->rep_dir = test_util_tmp_dir_new("replay-out-XXXXXX");
    simulate(name, comm_us, r->sim_dir);
    r->scenario = g_build_filename(r->sim_dir, "scenario.ini", NULL);
    r->ops = g_build_filename(r->sim_dir, "ops.csv", NULL);
}

static void sim_run_clear(SimRun *r) {
    ck_assert(test_util_tmp_dir_remove(r->sim_dir));
    ck_assert(test_util_tmp_dir_remove(r->rep_dir));
    g_free(r->sim_dir);
    g_free(r->rep_dir);
    g_free(r->scenario);
    g_free(r->ops);
}

/* (a) Without communication the simulated run is the replay's ASAP schedule: same rows. */
START_TEST(test_replay_simulated) {
    const char *name = sim_names[_i];
    SimRun      run;
    sim_run_init(&run, name, "0");
    g_autoptr(JsonNode) root = replay_json(run.scenario, run.ops, run.rep_dir);

    g_autoptr(PpTrace) sim = read_trace(run.sim_dir, "ops.csv");
    g_autoptr(PpTrace) rep = read_trace(run.rep_dir, "ops.csv");
    g_autoptr(PpTrace) cal = read_trace(run.rep_dir, "calibrated.csv");
    int64_t makespan = 0;
    for (int64_t i = 0; i < sim->n_rows; i++)
        makespan = MAX(makespan, sim->rows[i].end_ns);
    ck_assert_int_eq(json_int(root, "ops_matched"), sim->n_rows);
    ck_assert_int_eq(json_int(root, "measured_makespan_ns"), makespan);
    ck_assert_int_eq(json_int(root, "replay_makespan_ns"), makespan);
    /* Uniform [costs]: the medians are the costs, so calibrated is the same run. */
    ck_assert_int_eq(json_int(root, "calibrated_makespan_ns"), makespan);
    ck_assert(json_object_get_double_member(json_node_get_object(root), "mean_abs_start_diff_ns") ==
              0.0);
    ck_assert_int_eq(json_int(root, "delta_mismatches"), 0);
    ck_assert_int_eq(json_int(root, "measured_delta_max"), json_int(root, "predicted_delta_max"));
    ck_assert_int_eq(json_int(root, "hop_ns"), 0);
    ck_assert_int_eq(rep->n_rows, sim->n_rows);
    ck_assert_int_eq(cal->n_rows, sim->n_rows);
    for (int64_t i = 0; i < sim->n_rows; i++) {
        const PpTraceRow *a = &sim->rows[i], *b = &rep->rows[i], *c = &cal->rows[i];
        ck_assert_msg(memcmp(a, b, sizeof *a) == 0 && memcmp(a, c, sizeof *a) == 0,
                      "%s: row %lld differs", name, (long long)i);
    }
    /* compare.csv: one line per op; measured, replayed and calibrated times all agree. */
    g_autofree char *compare_path = g_build_filename(run.rep_dir, "compare.csv", NULL);
    g_autofree char *compare = test_util_read_file(compare_path, NULL);
    g_auto(GStrv) lines = g_strsplit(g_strstrip(compare), "\n", -1);
    ck_assert_uint_eq(g_strv_length(lines), (guint)sim->n_rows + 1);
    ck_assert_str_eq(lines[0], "stage,op,mb,chunk,step,measured_start_ns,measured_end_ns,"
                               "replay_start_ns,replay_end_ns,calibrated_start_ns,"
                               "calibrated_end_ns");
    for (guint i = 1; lines[i] != NULL; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
        ck_assert_uint_eq(g_strv_length(f), 11);
        ck_assert_str_eq(f[5], f[7]);
        ck_assert_str_eq(f[5], f[9]);
        ck_assert_str_eq(f[6], f[8]);
        ck_assert_str_eq(f[6], f[10]);
    }
    sim_run_clear(&run);
}
END_TEST

/* (a') With communication the simulated run is feasible for the replay but not ASAP without
 * comm: every op starts no later, and the makespan shrinks. */
START_TEST(test_replay_simulated_comm) {
    SimRun run;
    sim_run_init(&run, sim_names[_i], "1");
    g_autoptr(JsonNode) root = replay_json(run.scenario, run.ops, run.rep_dir);
    g_autoptr(PpTrace) sim = read_trace(run.sim_dir, "ops.csv");
    g_autoptr(PpTrace) rep = read_trace(run.rep_dir, "ops.csv");
    for (int64_t i = 0; i < sim->n_rows; i++) {
        const PpTraceRow *r = find_row(rep, &sim->rows[i]);
        ck_assert_int_le(r->start_ns, sim->rows[i].start_ns);
        ck_assert_int_eq(r->end_ns - r->start_ns, sim->rows[i].end_ns - sim->rows[i].start_ns);
    }
    ck_assert_int_lt(json_int(root, "replay_makespan_ns"), json_int(root, "measured_makespan_ns"));
    sim_run_clear(&run);
}
END_TEST

/* (a'') The run of (a') replayed with --link and a [hardware] link of the same 1 us hop (and
 * a bandwidth so large that the bytes add nothing): the same rows, op for op. Without a
 * [hardware] link, --link is refused naming the keys. */
START_TEST(test_replay_simulated_link) {
    const char *name = sim_names[_i];
    SimRun      run;
    sim_run_init(&run, name, "1");
    const char *const link[] = {"--link",
                                "--set",
                                "hardware.preset=h100-sxm",
                                "--set",
                                "hardware.link_latency_us=1",
                                "--set",
                                "hardware.link_gbps=1e9",
                                NULL};
    g_autoptr(JsonNode) root = replay_json_with(run.scenario, run.ops, run.rep_dir, link);
    g_autoptr(PpTrace) sim = read_trace(run.sim_dir, "ops.csv");
    g_autoptr(PpTrace) rep = read_trace(run.rep_dir, "ops.csv");
    ck_assert_int_eq(json_int(root, "hop_ns"), 1000);
    ck_assert_int_eq(json_int(root, "replay_makespan_ns"), json_int(root, "measured_makespan_ns"));
    ck_assert_int_eq(rep->n_rows, sim->n_rows);
    for (int64_t i = 0; i < sim->n_rows; i++)
        ck_assert_msg(memcmp(&sim->rows[i], &rep->rows[i], sizeof(PpTraceRow)) == 0,
                      "%s: row %lld differs", name, (long long)i);
    const char      *args[] = {"replay", run.scenario, "--trace", run.ops, "--link", NULL};
    g_autofree char *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, NULL, &err), 1);
    ck_assert_msg(strstr(err, "replay --link needs [hardware] link_latency_us and link_gbps"), "%s",
                  err);
    sim_run_clear(&run);
}
END_TEST

/* Schedules trained for real in (b): one asynchronous with drift, one with split backward. */
static const char *const train_schedules[] = {"paci", "zb-h1"};

/* (b) A real tiny pacer-train run: every op matched, the replay never later than measured,
 * and each micro-batch's measured drift equals the schedule's. */
START_TEST(test_replay_measured) {
    const char      *kind = train_schedules[_i];
    g_autofree char *run_dir = test_util_tmp_dir_new("replay-run-XXXXXX");
    g_autofree char *rep_dir = test_util_tmp_dir_new("replay-out-XXXXXX");
    g_autofree char *schedule = g_strdup_printf("pipeline.schedule=%s", kind);
    g_autofree char *data_cache = test_util_cache_dir();
    g_autofree char *cache_set = g_strconcat("data.cache_dir=", data_cache, NULL);
    const char      *train_args[] = {PP_SOURCE_ROOT "/scenarios/train-tiny.ini",
                                     "--set",
                                     schedule,
                                     "--set",
                                     "pipeline.microbatches=4",
                                     "--set",
                                     "training.steps=3",
                                     "--set",
                                     "run.eval_every=0",
                                     "--set",
                                     "run.eval_batches=1",
                                     "--set",
                                     "optimizer.warmup_steps=1",
                                     "--set",
                                     "model.layers=4",
                                     "--set",
                                     "model.hidden=64",
                                     "--set",
                                     "model.heads=2",
                                     "--set",
                                     "model.seq_len=16",
                                     "--set",
                                     cache_set,
                                     "--quiet",
                                     "--out",
                                     run_dir,
                                     NULL};
    g_autofree char *err = NULL;
    ck_assert_msg(test_util_spawn(TRAIN_BIN, train_args, NULL, &err) == 0, "pacer-train: %s", err);

    g_autofree char *scenario = g_build_filename(run_dir, "scenario.ini", NULL);
    g_autofree char *ops = g_build_filename(run_dir, "ops.csv", NULL);
    g_autoptr(JsonNode) root = replay_json(scenario, ops, rep_dir);
    g_autoptr(PpTrace) measured = read_trace(run_dir, "ops.csv");
    g_autoptr(PpTrace) rep = read_trace(rep_dir, "ops.csv");
    ck_assert_int_eq(json_int(root, "ops_matched"), measured->n_rows);
    ck_assert_int_eq(rep->n_rows, measured->n_rows);
    ck_assert_int_le(json_int(root, "replay_makespan_ns"), json_int(root, "measured_makespan_ns"));
    ck_assert_int_gt(json_int(root, "calibrated_makespan_ns"), 0);
    ck_assert_int_eq(json_int(root, "delta_mismatches"), 0);

    /* The schedule the run replayed, for the drift each micro-batch should have. */
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(scenario, NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(PpSchedule) sched = test_util_scenario_schedule_new(sc);
    ck_assert_int_eq(measured->n_rows, pp_schedule_n_ops_total(sched));

    int64_t first_ns = G_MAXINT64;
    int32_t delta_max = 0;
    for (int64_t i = 0; i < measured->n_rows; i++)
        first_ns = MIN(first_ns, measured->rows[i].start_ns);
    for (int64_t i = 0; i < measured->n_rows; i++) {
        const PpTraceRow *m = &measured->rows[i];
        const PpTraceRow *r = find_row(rep, m);
        ck_assert_int_le(r->start_ns, m->start_ns - first_ns);
        ck_assert_int_eq(r->end_ns - r->start_ns, m->end_ns - m->start_ns);
        if (m->kind == PP_OP_UPDATE)
            continue;
        int32_t version_f, version_b;
        test_util_program_versions(sched, m, &version_f, &version_b);
        int32_t delta = version_b - version_f;
        ck_assert_int_eq(m->version_b - m->version_f, delta);
        ck_assert_int_eq(r->version_b - r->version_f, delta);
        delta_max = MAX(delta_max, delta);
    }
    ck_assert_int_eq(json_int(root, "measured_delta_max"), delta_max);
    ck_assert_int_eq(json_int(root, "predicted_delta_max"), delta_max);
    if (g_str_equal(kind, "paci"))
        ck_assert_int_eq(delta_max, 1); /* a = 4 on 4 stages: stage 0 drifts by one update */
    ck_assert(test_util_tmp_dir_remove(run_dir));
    ck_assert(test_util_tmp_dir_remove(rep_dir));
}
END_TEST

/* (d) Two data-parallel replicas: replica 0's reductions took X = 40 us, replica 1's 2X. Each
 * replica is matched on its own origin; measured times are the replicas' mean (X and 2X:
 * 1.5X per step); the reduction is the exposed union of reduce rows, the smaller of the two
 * (X), so the replay and the calibrated run are the simulated run plus X per step. With
 * --link the model gives 2 (D - 1)(latency + bytes / D / bandwidth) of each stage's fp32
 * gradients. */
START_TEST(test_replay_replicas) {
    const int64_t X = 40000;
    SimRun        run;
    sim_run_init(&run, "1f1b", "0");
    g_autoptr(PpTrace) sim = read_trace(run.sim_dir, "ops.csv");
    g_autoptr(PpTrace) dp = pp_trace_new();
    test_util_append_replica(dp, sim, 0, X, 0);
    test_util_append_replica(dp, sim, 1, 2 * X, 777);
    g_autofree char *trace = g_build_filename(run.rep_dir, "dp.csv", NULL);
    g_autoptr(GError) error = NULL;
    ck_assert(pp_trace_write_csv(dp, trace, &error));

    int64_t makespan = 0;
    for (int64_t i = 0; i < sim->n_rows; i++)
        makespan = MAX(makespan, sim->rows[i].end_ns);
    const int64_t steps = 2;
    g_autoptr(JsonNode) root = replay_json(run.scenario, trace, NULL);
    ck_assert_int_eq(json_int(root, "replicas"), 2);
    ck_assert_int_eq(json_int(root, "ops_matched"), sim->n_rows);
    ck_assert_int_eq(json_int(root, "measured_makespan_ns"), makespan + steps * 3 * X / 2);
    ck_assert_int_eq(json_int(root, "replay_makespan_ns"), makespan + steps * X);
    ck_assert_int_eq(json_int(root, "calibrated_makespan_ns"), makespan + steps * X);
    ck_assert_int_eq(json_int(root, "delta_mismatches"), 0);

    /* 8 layers of 12h^2 + 13h over 4 stages (2 each: the head costs less than a layer);
     * embeddings (V + s)h on stage 0, final LayerNorm and head Vh + 2h on stage 3. */
    const int64_t h = 64, V = 256, s = 64, layer = 12 * h * h + 13 * h;
    const int64_t params[] = {2 * layer + (V + s) * h, 2 * layer, 2 * layer,
                              2 * layer + V * h + 2 * h};
    const char   *link[] = {"--set", "hardware.preset=h100-sxm",    "--set", "hardware.link_gbps=8",
                            "--set", "hardware.link_latency_us=10", NULL};
    g_autoptr(JsonNode) linked = replay_json_with(run.scenario, trace, NULL, link);
    for (int k = 0; k < 2; k++) {
        JsonArray *stages =
            json_object_get_array_member(json_node_get_object(k == 0 ? root : linked), "stages");
        for (guint st = 0; st < 4; st++) {
            JsonObject *o = json_array_get_object_element(stages, st);
            int64_t     bytes = 4 * params[st];
            ck_assert_int_eq(json_object_get_int_member(o, "grad_bytes"), bytes);
            ck_assert_int_eq(json_object_get_int_member(o, "median_reduce_ns"), X);
            /* 8 GB/s is 8 bytes per ns: 2 (latency + bytes / 2 / 8). */
            ck_assert_int_eq(json_object_get_int_member(o, "model_reduce_ns"),
                             k == 0 ? -1 : 2 * (10000 + bytes / 16));
        }
    }
    sim_run_clear(&run);
}
END_TEST

/* How (c) breaks a simulated 1f1b trace (N=4, m=8, 2 steps: micro-batches 0..15); in a trace of
 * two data-parallel replicas every replica must hold every op, and a reduce row must precede a
 * U. */
typedef enum {
    BREAK_DROP,
    BREAK_EXTRA,
    BREAK_REPEAT,
    BREAK_ORDER,
    BREAK_REPLICA,
    BREAK_REDUCE
} BreakKind;

static const struct {
    BreakKind   how;
    const char *expect[2]; /* substrings of the stderr line */
} break_cases[] = {
    {BREAK_DROP, {"F(mb=3, chunk=0) on stage 2", "has no measured row"}},
    {BREAK_EXTRA, {"F(mb=16, chunk=0) on stage 0", "matches no op of schedule '1f1b'"}},
    {BREAK_REPEAT, {"F(mb=3, chunk=0) on stage 2", "run.eval_every=0"}},
    {BREAK_ORDER, {"stage 0's program of schedule '1f1b'", "another order"}},
    {BREAK_REPLICA, {"F(mb=3, chunk=0) on stage 2", "has no measured row of replica 1"}},
    {BREAK_REDUCE, {"reduce row F(mb=3, chunk=0) on stage 2 of replica 0", "precedes no U"}},
};

/* (c) A trace that does not fit the schedule: exit 1, one stderr line naming the op. */
START_TEST(test_replay_mismatch) {
    g_autofree char *dir = test_util_tmp_dir_new("replay-bad-XXXXXX");
    g_autofree char *scenario = g_build_filename(dir, "scenario.ini", NULL);
    g_autofree char *bad = g_build_filename(dir, "bad.csv", NULL);
    simulate("1f1b", "0", dir);
    if (break_cases[_i].how == BREAK_ORDER) {
        /* Same ops, GPipe's order: all forwards before the backwards. */
        g_autofree char *gpipe = g_build_filename(dir, "gpipe", NULL);
        const char      *args[] = {DATA_DIR "/1f1b.ini",
                                   "--set",
                                   "pipeline.schedule=gpipe",
                                   "--set",
                                   "costs.comm_us=0",
                                   "--out",
                                   gpipe,
                                   NULL};
        ck_assert_int_eq(test_util_spawn(SIM_BIN, args, NULL, NULL), 0);
        g_autoptr(PpTrace) trace = read_trace(gpipe, "ops.csv");
        g_autoptr(GError) error = NULL;
        ck_assert(pp_trace_write_csv(trace, bad, &error));
        ck_assert(test_util_tmp_dir_remove(gpipe));
    } else {
        g_autoptr(PpTrace) trace = read_trace(dir, "ops.csv");
        g_autoptr(PpTrace) out = pp_trace_new();
        for (int64_t i = 0; i < trace->n_rows; i++) {
            const PpTraceRow *row = &trace->rows[i];
            gboolean          picked =
                row->stage == 2 && row->kind == PP_OP_FORWARD && row->mb == 3 && row->chunk == 0;
            if (!(picked && break_cases[_i].how == BREAK_DROP))
                pp_trace_append(out, row);
            if (picked && break_cases[_i].how == BREAK_REPEAT)
                pp_trace_append(out, row);
            if (break_cases[_i].how == BREAK_REPLICA && !picked) { /* all but one again */
                PpTraceRow twin = *row;
                twin.replica = 1;
                pp_trace_append(out, &twin);
            }
            if (break_cases[_i].how == BREAK_REDUCE && picked) { /* a reduce row on an F */
                PpTraceRow reduce = *row;
                reduce.resource = PP_RESOURCE_REDUCE;
                pp_trace_append(out, &reduce);
                reduce.resource = PP_RESOURCE_COMPUTE;
                reduce.replica = 1;
                pp_trace_append(out, &reduce);
            }
        }
        if (break_cases[_i].how == BREAK_EXTRA) {
            int64_t    last_ns = trace->rows[trace->n_rows - 1].end_ns;
            PpTraceRow extra = {.stage = 0,
                                .kind = PP_OP_FORWARD,
                                .mb = 16,
                                .chunk = 0,
                                .step = 2,
                                .start_ns = last_ns,
                                .end_ns = last_ns + 10,
                                .resource = PP_RESOURCE_COMPUTE};
            pp_trace_append(out, &extra);
        }
        g_autoptr(GError) error = NULL;
        ck_assert(pp_trace_write_csv(out, bad, &error));
    }
    const char      *args[] = {"replay", scenario, "--trace", bad, NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &out, &err), 1);
    ck_assert_str_eq(out, "");
    g_autofree char *expect_prefix = g_strdup_printf("pacer-sim: %s: ", bad);
    ck_assert_msg(g_str_has_prefix(err, expect_prefix), "stderr: %s", err);
    ck_assert_int_eq(strchr(err, '\n') - err + 1, strlen(err)); /* one line */
    for (int k = 0; k < 2; k++)
        ck_assert_msg(strstr(err, break_cases[_i].expect[k]) != NULL, "stderr lacks '%s': %s",
                      break_cases[_i].expect[k], err);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Per-op durations replace the tables op by op; a wrong count and dynamic mode are errors. */
START_TEST(test_engine_op_durations) {
    g_autoptr(PpSchedule) sched = test_util_schedule_new("1f1b", 4, 1, 8, 1, 2);
    g_autoptr(SimCostModel) cost = sim_cost_new_uniform(4, 1, 1000, 1000, 1000, 0);
    const int32_t n_ops = pp_schedule_n_ops_total(sched);
    cost->op_dur_ns = g_new(int64_t, n_ops);
    cost->n_op_durs = n_ops;
    for (int32_t id = 0; id < n_ops; id++)
        cost->op_dur_ns[id] = 100 + 7 * id; /* distinct per op */
    g_autoptr(GError) error = NULL;
    g_autoptr(SimResult) res = sim_engine_run(sched, cost, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int64_t busy_ns = 0;
        for (int32_t id = sched->op_offset[s]; id < sched->op_offset[s + 1]; id++)
            busy_ns += cost->op_dur_ns[id];
        ck_assert_int_eq(res->stages[s].busy_ns, busy_ns);
    }
    for (int64_t i = 0; i < res->trace->n_rows; i++) {
        const PpTraceRow *row = &res->trace->rows[i];
        if (row->kind == PP_OP_UPDATE)
            continue;
        int32_t id = pp_schedule_find_op(sched, row->kind, row->mb,
                                         pp_schedule_vstage(sched, row->stage, row->chunk));
        ck_assert_int_eq(row->end_ns - row->start_ns, cost->op_dur_ns[id]);
    }

    cost->n_op_durs = n_ops - 1;
    ck_assert_ptr_null(sim_engine_run(sched, cost, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
    ck_assert_ptr_nonnull(strstr(error->message, "per-op durations"));
    g_clear_error(&error);
    PpScheduleParams params = test_util_schedule_params("paci", 4, 1, 0, 2, 2);
    ck_assert_ptr_null(sim_engine_run_policy(&params, cost, NULL, &error));
    ck_assert(g_error_matches(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS));
}
END_TEST

static Suite *sim_replay_suite(TestUtilData *data) {
    Suite *s = suite_create("sim-replay");
    TCase *tc = tcase_create("engine");
    tcase_add_test(tc, test_engine_op_durations);
    suite_add_tcase(s, tc);
    tc = tcase_create("simulated");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_replay_simulated, 0, G_N_ELEMENTS(sim_names));
    tcase_add_loop_test(tc, test_replay_simulated_comm, 0, G_N_ELEMENTS(sim_names));
    tcase_add_loop_test(tc, test_replay_simulated_link, 0, G_N_ELEMENTS(sim_names));
    tcase_add_test(tc, test_replay_replicas);
    suite_add_tcase(s, tc);
    tc = tcase_create("measured");
    tcase_set_timeout(tc, 60);
    /* pacer-train tokenises with the GPT-2 vocabulary: skipped without scripts/fetch-data. */
    test_util_data_add(data, tc, test_replay_measured, 0, G_N_ELEMENTS(train_schedules));
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_replay_mismatch, 0, G_N_ELEMENTS(break_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    TestUtilData data;
    test_util_data_init(&data);
    return test_util_data_run(&data, sim_replay_suite(&data));
}
