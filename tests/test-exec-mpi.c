/* SPDX-License-Identifier: MIT
 * test-exec-mpi.c: pacer-train with one process per stage (scripts/mpirun-local, -np 2 and 4)
 * against the same run on threads in one process: bitwise the same checkpoint unit (every
 * weight and the optimizer state), log.csv but its measured tokens/s, the same ops with the
 * program's weight versions (measured Δ = the program's); resume across processes, also after
 * a kill inside a checkpoint write; dynamic mode; and the failures: a world size that is not
 * the stage count, a fresh run into another run's folder, a NaN storm, a rank killed or stopped
 * mid-run (every rank exits, naming the dead peer; the test bounds its time), and a rank stopped
 * at start-up, on resume or at the end (the first line of stderr names it). Data parallelism
 * (parallel.data = 2 replicas of 2 and 4 stages): run to run, against one pipeline, resume
 * after a kill, a stopped rank.
 * With PACER_TEST_BACKEND=cuda (the gpu suite's test-exec-mpi-cuda) every run, the one-process
 * one included, is on the CUDA backend in fp32: ranks on one GPU share it over the host-staged
 * transport; the program exits 77 (skip) when pacer-train sees no CUDA device.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp-error.h"
#include "pp-partition.h"
#include "pp-scenario.h"
#include "pp-schedule.h"
#include "pp-trace.h"
#include "test-util.h"

#define TRAIN_BIN    PP_BUILD_ROOT "/exec/pacer-train"
#define MPIRUN_LOCAL PP_SOURCE_ROOT "/scripts/mpirun-local"
/* Seconds any one run may take before the harness stops it (a hang is a failure), times
 * mpi_slowdown(). */
#define RUN_LIMIT_S 240

/* CK_TIMEOUT_MULTIPLIER (Check's own; scripts/test --sanitize sets it): instrumented runs are
 * several times slower, so the run limit and run.comm_timeout_s grow with it. 1 when unset. */
static int mpi_slowdown(void) {
    const char *m = g_getenv("CK_TIMEOUT_MULTIPLIER");
    int         k = m ? atoi(m) : 1;
    return k > 1 ? k : 1;
}

/* A tiny GPT-2 (8 layers of 32 channels, 16 tokens; the LM head is the real 50257-way one),
 * two steps, one BLAS thread per worker, the repository's data cache. */
static const char *const base_sets[] = {
    "model.layers=8",         "model.hidden=32",
    "model.heads=2",          "model.seq_len=16",
    "training.steps=2",       "optimizer.warmup_steps=1",
    "run.eval_batches=1",     "run.threads=1",
    "run.comm_timeout_s=120", "data.cache_dir=" PP_SOURCE_ROOT "/.cache",
};

/* The overrides of PACER_TEST_BACKEND (NULL-ended; empty: the CPU backend). */
static const char *backend_sets[3];

typedef struct {
    int   status; /* exit status (124: the harness's time limit) */
    char *out;    /* stdout */
    char *err;    /* stderr */
    GStrv sets;   /* scenario overrides */
} Run;

static void run_clear(Run *r) {
    g_free(r->out);
    g_free(r->err);
    g_strfreev(r->sets);
}

/* The command that runs pacer-train on @np processes (0: one process, threads) with the base
 * overrides, then @sets (NULL-terminated, nullable), then @args (nullable), writing into @dir;
 * *@each (nullable) gets every override. Returns: (transfer full) a NULL-ended argv. */
static GPtrArray *train_argv(int np, const char *dir, const char *const *sets,
                             const char *const *args, GStrv *each) {
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GStrvBuilder) all_sets = g_strv_builder_new();
    if (np > 0) {
        g_ptr_array_add(argv, g_strdup(MPIRUN_LOCAL));
        g_ptr_array_add(argv, g_strdup("-np"));
        g_ptr_array_add(argv, g_strdup_printf("%d", np));
    }
    g_ptr_array_add(argv, g_strdup(TRAIN_BIN));
    g_ptr_array_add(argv, g_strdup(PP_SOURCE_ROOT "/scenarios/train-tiny.ini"));
    for (size_t i = 0; i < G_N_ELEMENTS(base_sets); i++)
        g_strv_builder_add(all_sets, base_sets[i]);
    if (mpi_slowdown() > 1) { /* (a case's own run.comm_timeout_s comes later and wins) */
        g_autofree char *t = g_strdup_printf("run.comm_timeout_s=%d", 120 * mpi_slowdown());
        g_strv_builder_add(all_sets, t);
    }
    for (const char *const *s = backend_sets; *s; s++)
        g_strv_builder_add(all_sets, *s);
    for (const char *const *s = sets; s && *s; s++)
        g_strv_builder_add(all_sets, *s);
    g_auto(GStrv) sets_all = g_strv_builder_end(all_sets);
    for (char **s = sets_all; *s; s++) {
        g_ptr_array_add(argv, g_strdup("--set"));
        g_ptr_array_add(argv, g_strdup(*s));
    }
    for (const char *const *a = args; a && *a; a++)
        g_ptr_array_add(argv, g_strdup(*a));
    g_ptr_array_add(argv, g_strdup("--quiet"));
    g_ptr_array_add(argv, g_strdup("--out"));
    g_ptr_array_add(argv, g_strdup(dir));
    g_ptr_array_add(argv, NULL);
    if (each)
        *each = g_steal_pointer(&sets_all);
    return argv;
}

/* Runs pacer-train as train_argv() says, under the harness's time limit; @fault
 * (nullable) is a test hook for the ranks, "NAME=VALUE" (PACER_TEST_FAULT, PACER_TEST_KILL_AT,
 * PACER_TEST_STALL_AT, PACER_TEST_CMA_REFUSE or PACER_TEST_SLOW_WRITE_S); all are unset
 * otherwise. */
static void run_train(Run *r, int np, const char *dir, const char *const *sets,
                      const char *const *args, const char *fault) {
    g_auto(GStrv) each = NULL;
    g_autoptr(GPtrArray) cmd = train_argv(np, dir, sets, args, &each);
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    const char *const prefix[] = {"timeout", "-k", "10"};
    for (size_t i = 0; i < G_N_ELEMENTS(prefix); i++)
        g_ptr_array_add(argv, g_strdup(prefix[i]));
    g_ptr_array_add(argv, g_strdup_printf("%d", RUN_LIMIT_S * mpi_slowdown()));
    for (guint i = 0; i + 1 < cmd->len; i++)
        g_ptr_array_add(argv, g_strdup(g_ptr_array_index(cmd, i)));
    g_ptr_array_add(argv, NULL);

    g_auto(GStrv) env = g_get_environ();
    env = g_environ_unsetenv(env, "PACER_TEST_FAULT");
    env = g_environ_unsetenv(env, "PACER_TEST_KILL_AT");
    env = g_environ_unsetenv(env, "PACER_TEST_STALL_AT");
    env = g_environ_unsetenv(env, "PACER_TEST_SLOW_WRITE_S");
    env = g_environ_unsetenv(env, "PACER_TEST_REPLICA_DATA");
    env = g_environ_unsetenv(env, "PACER_TEST_CMA_REFUSE");
    if (fault) {
        g_auto(GStrv) kv = g_strsplit(fault, "=", 2);
        env = g_environ_setenv(env, kv[0], kv[1], TRUE);
    }
    int wait_status = 0;
    g_autoptr(GError) error = NULL;
    *r = (Run){.sets = g_strdupv(each)};
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, env, G_SPAWN_SEARCH_PATH, NULL, NULL,
                               &r->out, &r->err, &wait_status, &error);
    ck_assert_msg(ok, "cannot run pacer-train: %s", ok ? "" : error->message);
    ck_assert_msg(WIFEXITED(wait_status), "pacer-train did not exit normally");
    r->status = WEXITSTATUS(wait_status);
    ck_assert_msg(r->status != 124, "pacer-train (np %d) hung: stopped after %d s\n%s", np,
                  RUN_LIMIT_S * mpi_slowdown(), r->err);
}

/* Runs and requires success. */
static void run_ok(Run *r, int np, const char *dir, const char *const *sets,
                   const char *const *args) {
    run_train(r, np, dir, sets, args, NULL);
    ck_assert_msg(r->status == 0, "pacer-train (np %d) exited %d:\n%s", np, r->status, r->err);
}

static char *read_in(const char *dir, const char *name, gsize *len) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    return test_util_read_file(path, len);
}

/* @dir_a/@name and @dir_b/@name hold the same bytes. */
static void assert_same_file(const char *dir_a, const char *dir_b, const char *name) {
    gsize            la = 0, lb = 0;
    g_autofree char *a = read_in(dir_a, name, &la);
    g_autofree char *b = read_in(dir_b, name, &lb);
    ck_assert_msg(la == lb && memcmp(a, b, la) == 0, "%s differs between %s and %s", name, dir_a,
                  dir_b);
}

/* Log columns: tokens (1), the measured tokens_per_s (6). */
#define LOG_TOKENS       (1u << 1)
#define LOG_TOKENS_PER_S (1u << 6)

/* @dir_a/@name and @dir_b/@name, both log.csv files: the same rows, every column but those in
 * the mask @skip. */
static void assert_same_log_cols(const char *dir_a, const char *dir_b, const char *name,
                                 unsigned skip) {
    g_autofree char *a = read_in(dir_a, name, NULL);
    g_autofree char *b = read_in(dir_b, name, NULL);
    g_auto(GStrv) la = g_strsplit(g_strchomp(a), "\n", -1);
    g_auto(GStrv) lb = g_strsplit(g_strchomp(b), "\n", -1);
    ck_assert_int_eq(g_strv_length(la), g_strv_length(lb));
    ck_assert_int_gt(g_strv_length(la), 1);
    for (guint i = 0; la[i]; i++) {
        g_auto(GStrv) ca = g_strsplit(la[i], ",", -1), cb = g_strsplit(lb[i], ",", -1);
        ck_assert_int_eq(g_strv_length(ca), 8);
        ck_assert_int_eq(g_strv_length(cb), 8);
        for (int col = 0; col < 8; col++) {
            if (i == 0 || !(skip & (1u << col)))
                ck_assert_msg(strcmp(ca[col], cb[col]) == 0, "%s line %u column %d: %s vs %s", name,
                              i, col, ca[col], cb[col]);
        }
    }
}

/* The same rows, every column but the measured tokens_per_s. */
static void assert_same_log_file(const char *dir_a, const char *dir_b, const char *name) {
    assert_same_log_cols(dir_a, dir_b, name, LOG_TOKENS_PER_S);
}

static void assert_same_log(const char *dir_a, const char *dir_b) {
    assert_same_log_file(dir_a, dir_b, "log.csv");
}

/* The checkpoint units of @step in both run folders: complete (a manifest), the same weights
 * and optimizer state byte for byte, and the same log rows but the columns in @skip. */
static void assert_same_unit_cols(const char *dir_a, const char *dir_b, int32_t step,
                                  unsigned skip) {
    g_autofree char *unit = g_strdup_printf("checkpoints/step-%08d", step);
    const char      *bytes[] = {"model.safetensors", "state.safetensors"};
    for (size_t i = 0; i < G_N_ELEMENTS(bytes); i++) {
        g_autofree char *name = g_build_filename(unit, bytes[i], NULL);
        assert_same_file(dir_a, dir_b, name);
    }
    g_autofree char *manifest_a = g_build_filename(dir_a, unit, "manifest.json", NULL);
    g_autofree char *manifest_b = g_build_filename(dir_b, unit, "manifest.json", NULL);
    ck_assert_msg(g_file_test(manifest_a, G_FILE_TEST_IS_REGULAR), "no %s", manifest_a);
    ck_assert_msg(g_file_test(manifest_b, G_FILE_TEST_IS_REGULAR), "no %s", manifest_b);
    g_autofree char *log = g_build_filename(unit, "log.csv", NULL);
    assert_same_log_cols(dir_a, dir_b, log, skip);
}

static void assert_same_unit(const char *dir_a, const char *dir_b, int32_t step) {
    assert_same_unit_cols(dir_a, dir_b, step, LOG_TOKENS_PER_S);
}

static PpTrace *read_trace(const char *dir) {
    g_autofree char *path = g_build_filename(dir, "ops.csv", NULL);
    g_autoptr(GError) error = NULL;
    PpTrace *trace = pp_trace_read_csv(path, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "");
    return trace;
}

/* The schedule a one-segment run replayed (its scenario.ini). */
static PpSchedule *run_schedule(const char *dir) {
    g_autofree char *path = g_build_filename(dir, "scenario.ini", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(path, NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    return test_util_scenario_schedule_new(sc);
}

static int row_key_cmp(const void *pa, const void *pb) {
    const PpTraceRow *a = pa, *b = pb;
    if (a->stage != b->stage)
        return a->stage - b->stage;
    if (a->kind != b->kind)
        return (int)a->kind - (int)b->kind;
    if (a->mb != b->mb)
        return a->mb - b->mb;
    if (a->chunk != b->chunk)
        return a->chunk - b->chunk;
    return a->step - b->step;
}

/* ops.csv of a one-segment multi-process run against the threaded run's and the program:
 * every op once, each with the weight versions the program implies (so measured Δ =
 * version_b - version_f is the program's), and no two ops of one stage overlap. */
static void assert_trace(const char *mp_dir, const char *th_dir) {
    g_autoptr(PpSchedule) sched = run_schedule(mp_dir);
    g_autoptr(PpTrace) mp = read_trace(mp_dir);
    g_autoptr(PpTrace) th = read_trace(th_dir);
    ck_assert_int_eq(mp->n_rows, pp_schedule_n_ops_total(sched));
    ck_assert_int_eq(th->n_rows, mp->n_rows);
    g_autofree int64_t *last_end = g_new0(int64_t, sched->n_stages);
    for (int64_t i = 0; i < mp->n_rows; i++) {
        const PpTraceRow *r = &mp->rows[i];
        ck_assert_int_ge(r->start_ns, last_end[r->stage]);
        last_end[r->stage] = r->end_ns;
        if (r->kind == PP_OP_UPDATE)
            continue;
        int32_t want_f, want_b;
        test_util_program_versions(sched, r, &want_f, &want_b);
        ck_assert_int_eq(r->version_f, want_f);
        ck_assert_int_eq(r->version_b, want_b);
    }
    qsort(mp->rows, (size_t)mp->n_rows, sizeof(PpTraceRow), row_key_cmp);
    qsort(th->rows, (size_t)th->n_rows, sizeof(PpTraceRow), row_key_cmp);
    for (int64_t i = 0; i < mp->n_rows; i++) {
        ck_assert_int_eq(row_key_cmp(&mp->rows[i], &th->rows[i]), 0);
        ck_assert_int_eq(mp->rows[i].version_f, th->rows[i].version_f);
        ck_assert_int_eq(mp->rows[i].version_b, th->rows[i].version_b);
    }
}

/* Lines of @text that contain @needle. */
static int count_lines(const char *text, const char *needle) {
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    int n = 0;
    for (char **l = lines; *l; l++)
        n += strstr(*l, needle) != NULL;
    return n;
}

/* --- one process per stage == threads --- */

typedef struct {
    const char *schedule;
    int         np;
    const char *extra[4]; /* chunks, micro-batches, accumulation, optimizer (NULL-ended) */
} MpiCase;

static const MpiCase equal_cases[] = {
    {"1f1b", 2, {"pipeline.microbatches=4", NULL}},
    {"1f1b", 4, {"pipeline.microbatches=4", NULL}},
    {"interleaved", 2, {"pipeline.chunks=2", "pipeline.microbatches=4", NULL}},
    {"interleaved", 4, {"pipeline.chunks=2", "pipeline.microbatches=4", NULL}},
    {"zb-2p", 2, {"pipeline.microbatches=4", NULL}},
    {"zb-2p", 4, {"pipeline.microbatches=4", NULL}},
    {"2bw", 2, {"pipeline.microbatches=4", NULL}},
    {"2bw", 4, {"pipeline.microbatches=4", NULL}},
    {"paci", 2, {"pipeline.accumulation=2", "pipeline.microbatches=1", NULL}},
    {"paci", 4, {"pipeline.accumulation=2", "pipeline.microbatches=1", NULL}},
    /* Muon with error feedback: every optimizer role of the checkpoint crosses processes. */
    {"1f1b",
     2,
     {"pipeline.microbatches=2", "optimizer.name=muon", "optimizer.error_feedback=true"}},
};

/* The overrides of @c: its schedule, stages and extras. Returns: (transfer full). */
static GStrv case_sets(const MpiCase *c) {
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_autofree char *schedule = g_strdup_printf("pipeline.schedule=%s", c->schedule);
    g_autofree char *stages = g_strdup_printf("pipeline.stages=%d", c->np);
    g_strv_builder_add(b, schedule);
    g_strv_builder_add(b, stages);
    for (int i = 0; i < 4 && c->extra[i]; i++)
        g_strv_builder_add(b, c->extra[i]);
    return g_strv_builder_end(b);
}

START_TEST(test_mpi_equals_threads) {
    const MpiCase *c = &equal_cases[_i];
    g_auto(GStrv) sets = case_sets(c);
    g_autofree char *mp_dir = test_util_tmp_dir_new("mpi-mp-XXXXXX");
    g_autofree char *th_dir = test_util_tmp_dir_new("mpi-th-XXXXXX");
    Run              mp, th;
    run_ok(&mp, c->np, mp_dir, (const char *const *)sets, NULL);
    run_ok(&th, 0, th_dir, (const char *const *)sets, NULL);
    /* Rank 0 alone prints the summary and the memory of every rank's stage. */
    ck_assert_int_eq(count_lines(mp.out, "pacer-train: "), 2);
    ck_assert_int_eq(count_lines(mp.out, "pacer-train: memory "), 1);
    assert_same_unit(mp_dir, th_dir, 2);
    assert_same_file(mp_dir, th_dir, "scenario.ini");
    assert_same_log(mp_dir, th_dir);
    assert_trace(mp_dir, th_dir);
    run_clear(&mp);
    run_clear(&th);
    ck_assert(test_util_tmp_dir_remove(mp_dir));
    ck_assert(test_util_tmp_dir_remove(th_dir));
}
END_TEST

/* --- data parallelism: D replicas of the pipeline --- */

/* The D = 2 cases: D x N processes. */
typedef struct {
    const char *schedule;
    int         stages;
    const char *batch;     /* this replica's micro-batches (or accumulation) per step */
    const char *one_batch; /* one pipeline's with D = 2 times as many */
} DataCase;

/* The first N_DATA_NARROW cases (2 stages, 4 processes) run in the default suite; the 4-stage
 * ones (8 processes on this machine's cores) in the slow suite, tag "data-wide". */
enum { N_DATA_NARROW = 4 };
static const DataCase data_cases[] = {
    {"1f1b", 2, "pipeline.microbatches=2", "pipeline.microbatches=4"},
    {"zb-2p", 2, "pipeline.microbatches=2", "pipeline.microbatches=4"},
    {"2bw", 2, "pipeline.microbatches=2", "pipeline.microbatches=4"},
    {"paci", 2, "pipeline.accumulation=2", "pipeline.accumulation=4"},
    {"1f1b", 4, "pipeline.microbatches=4", "pipeline.microbatches=8"},
    {"zb-2p", 4, "pipeline.microbatches=4", "pipeline.microbatches=8"},
    {"2bw", 4, "pipeline.microbatches=4", "pipeline.microbatches=8"},
    {"paci", 4, "pipeline.accumulation=2", "pipeline.accumulation=4"},
};

/* The overrides of @c with @data replicas running @batch. Returns: (transfer full). */
static GStrv data_case_sets(const DataCase *c, int data, const char *batch) {
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_autofree char *schedule = g_strdup_printf("pipeline.schedule=%s", c->schedule);
    g_autofree char *stages = g_strdup_printf("pipeline.stages=%d", c->stages);
    g_autofree char *replicas = g_strdup_printf("parallel.data=%d", data);
    g_strv_builder_add_many(b, schedule, stages, replicas, batch, NULL);
    if (strcmp(c->schedule, "paci") == 0)
        g_strv_builder_add(b, "pipeline.microbatches=1");
    return g_strv_builder_end(b);
}

/* Column @col of the row of @step in @dir/log.csv. Returns: (transfer full). */
static char *log_cell(const char *dir, int step, int col) {
    g_autofree char *text = read_in(dir, "log.csv", NULL);
    g_auto(GStrv) lines = g_strsplit(g_strchomp(text), "\n", -1);
    for (guint i = 1; lines[i]; i++) {
        g_auto(GStrv) cells = g_strsplit(lines[i], ",", -1);
        if (g_strv_length(cells) == 8 && atoi(cells[0]) == step)
            return g_strdup(cells[col]);
    }
    ck_abort_msg("%s/log.csv has no row of step %d", dir, step);
    return NULL;
}

/* Column @name of @dir/memory.csv, one cell per (stage, replica) row: (stages * replicas), at
 * stage * replicas + replica, the rows checked to come in that order. Returns: (transfer
 * full). */
static int64_t *memory_column(const char *dir, int stages, int replicas, const char *name) {
    g_autofree char *text = read_in(dir, "memory.csv", NULL);
    g_auto(GStrv) lines = g_strsplit(g_strchomp(text), "\n", -1);
    ck_assert_int_eq(g_strv_length(lines), 1 + stages * replicas);
    g_auto(GStrv) header = g_strsplit(lines[0], ",", -1);
    ck_assert_str_eq(header[0], "stage");
    ck_assert_str_eq(header[1], "replica");
    guint col = 0;
    while (header[col] && strcmp(header[col], name) != 0)
        col++;
    ck_assert_msg(header[col] != NULL, "memory.csv has no column %s", name);
    int64_t *cells = g_new(int64_t, stages * replicas);
    for (int i = 0; i < stages * replicas; i++) {
        g_auto(GStrv) row = g_strsplit(lines[1 + i], ",", -1);
        ck_assert_uint_eq(g_strv_length(row), g_strv_length(header));
        ck_assert_int_eq(atoi(row[0]), i / replicas);
        ck_assert_int_eq(atoi(row[1]), i % replicas);
        cells[i] = g_ascii_strtoll(row[col], NULL, 10);
    }
    return cells;
}

/* The shards' granularity: KERN_GRAD_NORM_CHUNK floats (kernels/optim-cpu.h). */
enum { GRAD_NORM_CHUNK_FLOATS = 65536 };

/* memory.csv of a replicated run (@full_dir) and of the same run with a sharded optimizer
 * (@zero_dir), 2 replicas of @stages stages: every process holds the whole parameters and
 * gradients either way; the shards' optimizer state adds up to a replica's whole state, each
 * within one chunk of the gradient norm (AdamW: 2 floats per parameter) of half of it; the
 * memory model predicts half the moments. */
static void assert_zero_memory(const char *full_dir, const char *zero_dir, int stages) {
    const char *const same[] = {"params_bytes", "grads_bytes", "act_bytes"};
    for (size_t k = 0; k < G_N_ELEMENTS(same); k++) {
        g_autofree int64_t *full = memory_column(full_dir, stages, 2, same[k]);
        g_autofree int64_t *zero = memory_column(zero_dir, stages, 2, same[k]);
        for (int i = 0; i < 2 * stages; i++)
            ck_assert_int_eq(zero[i], full[i]);
    }
    g_autofree int64_t *full = memory_column(full_dir, stages, 2, "optim_bytes");
    g_autofree int64_t *zero = memory_column(zero_dir, stages, 2, "optim_bytes");
    g_autofree int64_t *full_p = memory_column(full_dir, stages, 2, "predicted_optim_bytes");
    g_autofree int64_t *zero_p = memory_column(zero_dir, stages, 2, "predicted_optim_bytes");
    for (int s = 0; s < stages; s++) {
        int64_t whole = full[2 * s];
        ck_assert_int_eq(full[2 * s + 1], whole);
        ck_assert_int_eq(zero[2 * s] + zero[2 * s + 1], whole);
        ck_assert_int_le(llabs(2 * zero[2 * s] - whole), 2 * 4 * GRAD_NORM_CHUNK_FLOATS);
        ck_assert_int_gt(zero[2 * s + 1], 0);
        for (int r = 0; r < 2; r++)
            ck_assert_int_eq(2 * zero_p[2 * s + r], full_p[2 * s + r]);
    }
}

/* @trace, of @replicas replicas of @sched's one segment: every replica ran every op of the
 * program once (compute rows) and @per_update reduction rows for each of its updates (1: the
 * reduction before it; 2 with a sharded optimizer: and the all-gather of the parameters after
 * it). */
static void assert_replica_rows(const PpTrace *trace, const PpSchedule *sched, int replicas,
                                int per_update) {
    g_autofree int64_t *compute = g_new0(int64_t, replicas);
    g_autofree int64_t *updates = g_new0(int64_t, replicas);
    g_autofree int64_t *reduce = g_new0(int64_t, replicas);
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *r = &trace->rows[i];
        ck_assert_int_lt(r->replica, replicas);
        if (r->resource == PP_RESOURCE_REDUCE) {
            ck_assert_int_eq(r->kind, PP_OP_UPDATE);
            ck_assert_int_le(r->start_ns, r->end_ns);
            reduce[r->replica]++;
            continue;
        }
        compute[r->replica]++;
        updates[r->replica] += r->kind == PP_OP_UPDATE;
    }
    for (int d = 0; d < replicas; d++) {
        ck_assert_int_eq(compute[d], pp_schedule_n_ops_total(sched));
        ck_assert_int_eq(reduce[d], per_update * updates[d]);
    }
}

/* ops.csv of a one-segment run of @replicas replicas: assert_replica_rows(), and every op with
 * the program's weight versions. */
static void assert_replica_trace(const char *dir, int replicas, int per_update) {
    g_autoptr(PpSchedule) sched = run_schedule(dir);
    g_autoptr(PpTrace) trace = read_trace(dir);
    assert_replica_rows(trace, sched, replicas, per_update);
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *r = &trace->rows[i];
        if (r->resource == PP_RESOURCE_REDUCE || r->kind == PP_OP_UPDATE)
            continue;
        int32_t want_f, want_b;
        test_util_program_versions(sched, r, &want_f, &want_b);
        ck_assert_int_eq(r->version_f, want_f);
        ck_assert_int_eq(r->version_b, want_b);
    }
}

/* D = 2 replicas of an N-stage pipeline (2N processes), for each schedule:
 * - run to run, bitwise the same checkpoint unit and log (but tokens/s);
 * - with every replica reading the same data, each update reduces two equal gradients,
 *   (g + g) / 2 = g exactly: bitwise one pipeline's run (threads) with this replica's batch;
 * - with their own data, the replicas read the global batch one pipeline with twice the
 *   micro-batches reads: step 0 (initial weights everywhere) has the same mean loss to the
 *   last printed digit; for the flush schedules, whose math is that pipeline's but for the
 *   grouping of the gradient sum, the validation loss after the run agrees to 1e-4;
 * - for 1f1b and paci, with a sharded optimizer (ZeRO-1, parallel.distributed_optimizer):
 *   bitwise the replicated run (unit and log but tokens/s), a reduction before and an
 *   all-gather after every update in the trace, each replica's optimizer state its shard's in
 *   memory.csv. */
START_TEST(test_mpi_data) {
    const DataCase *c = &data_cases[_i];
    g_auto(GStrv) sets = data_case_sets(c, 2, c->batch);
    g_auto(GStrv) one_sets = data_case_sets(c, 1, c->batch);
    g_auto(GStrv) wide_sets = data_case_sets(c, 1, c->one_batch);
    g_autofree char *a_dir = test_util_tmp_dir_new("mpi-dp-a-XXXXXX");
    g_autofree char *b_dir = test_util_tmp_dir_new("mpi-dp-b-XXXXXX");
    g_autofree char *same_dir = test_util_tmp_dir_new("mpi-dp-same-XXXXXX");
    g_autofree char *one_dir = test_util_tmp_dir_new("mpi-dp-one-XXXXXX");
    g_autofree char *wide_dir = test_util_tmp_dir_new("mpi-dp-wide-XXXXXX");
    int              np = 2 * c->stages;
    Run              a, b, same, one, wide;
    run_ok(&a, np, a_dir, (const char *const *)sets, NULL);
    run_ok(&b, np, b_dir, (const char *const *)sets, NULL);
    ck_assert_int_eq(count_lines(a.out, "pacer-train: "), 2); /* summary and memory, rank 0 */
    ck_assert_int_eq(count_lines(a.out, "pacer-train: memory "), 1);
    assert_same_unit(a_dir, b_dir, 2);
    assert_same_log(a_dir, b_dir);
    assert_replica_trace(a_dir, 2, 1);
    if (strcmp(c->schedule, "1f1b") == 0 || strcmp(c->schedule, "paci") == 0) {
        g_autoptr(GStrvBuilder) zb = g_strv_builder_new();
        g_strv_builder_addv(zb, (const char **)sets);
        g_strv_builder_add(zb, "parallel.distributed_optimizer=true");
        g_auto(GStrv) zero_sets = g_strv_builder_end(zb);
        g_autofree char *zero_dir = test_util_tmp_dir_new("mpi-dp-zero-XXXXXX");
        Run              zero;
        run_ok(&zero, np, zero_dir, (const char *const *)zero_sets, NULL);
        assert_same_unit(a_dir, zero_dir, 2);
        assert_same_log(a_dir, zero_dir);
        assert_replica_trace(zero_dir, 2, 2);
        assert_zero_memory(a_dir, zero_dir, c->stages);
        run_clear(&zero);
        ck_assert(test_util_tmp_dir_remove(zero_dir));
    }

    run_train(&same, np, same_dir, (const char *const *)sets, NULL, "PACER_TEST_REPLICA_DATA=same");
    ck_assert_msg(same.status == 0, "exit %d:\n%s", same.status, same.err);
    run_ok(&one, 0, one_dir, (const char *const *)one_sets, NULL);
    /* (the tokens column counts both replicas' sequences: twice one pipeline's) */
    assert_same_unit_cols(same_dir, one_dir, 2, LOG_TOKENS | LOG_TOKENS_PER_S);
    assert_same_log_cols(same_dir, one_dir, "log.csv", LOG_TOKENS | LOG_TOKENS_PER_S);
    g_autofree char *tokens_dp = log_cell(same_dir, 1, 1), *tokens_one = log_cell(one_dir, 1, 1);
    ck_assert_int_eq(g_ascii_strtoll(tokens_dp, NULL, 10),
                     2 * g_ascii_strtoll(tokens_one, NULL, 10));

    run_ok(&wide, 0, wide_dir, (const char *const *)wide_sets, NULL);
    g_autofree char *loss_a = log_cell(a_dir, 0, 2), *loss_wide = log_cell(wide_dir, 0, 2);
    ck_assert_str_eq(loss_a, loss_wide);
    if (strcmp(c->schedule, "1f1b") == 0 || strcmp(c->schedule, "zb-2p") == 0) {
        g_autofree char *val_a = log_cell(a_dir, 1, 3), *val_wide = log_cell(wide_dir, 1, 3);
        ck_assert_double_eq_tol(g_ascii_strtod(val_a, NULL), g_ascii_strtod(val_wide, NULL), 1e-4);
    }
    Run *runs[] = {&a, &b, &same, &one, &wide};
    for (size_t i = 0; i < G_N_ELEMENTS(runs); i++)
        run_clear(runs[i]);
    const char *dirs[] = {a_dir, b_dir, same_dir, one_dir, wide_dir};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++)
        ck_assert(test_util_tmp_dir_remove(dirs[i]));
}
END_TEST

/* 2 replicas of 2-stage PACI (4 processes), stopped at the step-2 checkpoint, resumed and
 * killed (rank 0) inside the step-4 unit's write, resumed again: bitwise the uninterrupted
 * data-parallel run with the same boundaries (both units and the log). The first and the last
 * part run with a sharded optimizer (ZeRO-1: each replica writes its part of the optimizer
 * state, and resuming gives each its part back), the killed one and the uninterrupted run
 * without: the units are the same either way. */
START_TEST(test_mpi_data_resume) {
#define DATA_RESUME_SETS                                                                           \
    "pipeline.schedule=paci", "pipeline.stages=2", "parallel.data=2", "pipeline.accumulation=2",   \
        "pipeline.microbatches=1", "training.steps=4", "run.checkpoint_every=2",                   \
        "run.eval_every=2"
    const char *const sets[] = {DATA_RESUME_SETS, NULL};
    const char *const zero_sets[] = {DATA_RESUME_SETS, "parallel.distributed_optimizer=true", NULL};
#undef DATA_RESUME_SETS
    g_autofree char  *mp_dir = test_util_tmp_dir_new("mpi-dp-resume-XXXXXX");
    g_autofree char  *straight_dir = test_util_tmp_dir_new("mpi-dp-straight-XXXXXX");
    const char *const stop[] = {"--stop-at", "2", NULL};
    const char *const resume[] = {"--resume", mp_dir, NULL};
    Run               a, killed, b, straight;
    run_ok(&a, 4, mp_dir, zero_sets, stop);
    run_train(&killed, 4, mp_dir, sets, resume, "PACER_TEST_KILL_AT=before-rename@4");
    ck_assert_msg(killed.status != 0 && strstr(killed.err, "process rank 0 ") != NULL,
                  "exit %d: %s", killed.status, killed.err);
    run_ok(&b, 4, mp_dir, zero_sets, resume);
    ck_assert_ptr_nonnull(strstr(b.out, ", 4 steps,"));
    run_ok(&straight, 4, straight_dir, sets, NULL);
    assert_same_unit(mp_dir, straight_dir, 2);
    assert_same_unit(mp_dir, straight_dir, 4);
    assert_same_log(mp_dir, straight_dir);
    run_clear(&a);
    run_clear(&killed);
    run_clear(&b);
    run_clear(&straight);
    ck_assert(test_util_tmp_dir_remove(mp_dir));
    ck_assert(test_util_tmp_dir_remove(straight_dir));
}
END_TEST

/* PACI's policy live in both replicas of a 2-stage pipeline (4 processes): every replica runs
 * every op once, each update after its reduction, within PACI's drift bound. */
START_TEST(test_mpi_data_dynamic) {
    const int32_t     N = 2, a = 2;
    const char *const sets[] = {"pipeline.schedule=paci",
                                "pipeline.stages=2",
                                "parallel.data=2",
                                "pipeline.accumulation=2",
                                "pipeline.microbatches=1",
                                "training.steps=3",
                                NULL};
    const char *const dynamic[] = {"--dynamic", NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-dp-dynamic-XXXXXX");
    Run               r;
    run_ok(&r, 2 * N, dir, sets, dynamic);
    g_autoptr(PpSchedule) sched = run_schedule(dir);
    g_autoptr(PpTrace) trace = read_trace(dir);
    assert_replica_rows(trace, sched, 2, 1);
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *row = &trace->rows[i];
        if (row->resource == PP_RESOURCE_COMPUTE && row->kind != PP_OP_UPDATE)
            ck_assert_int_le(row->version_b - row->version_f, (N - 1 - row->stage + a - 1) / a);
    }
    run_clear(&r);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Whether some reduce row of @trace overlaps a backward (B, BW or W) row of the same stage and
 * replica in time. */
static gboolean reduce_overlaps_backward(const PpTrace *trace) {
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *r = &trace->rows[i];
        if (r->resource != PP_RESOURCE_REDUCE)
            continue;
        for (int64_t j = 0; j < trace->n_rows; j++) {
            const PpTraceRow *b = &trace->rows[j];
            gboolean backward = b->kind == PP_OP_BACKWARD || b->kind == PP_OP_BACKWARD_FULL ||
                                b->kind == PP_OP_WEIGHT;
            if (b->resource == PP_RESOURCE_COMPUTE && backward && b->stage == r->stage &&
                b->replica == r->replica && r->start_ns < b->end_ns && b->start_ns < r->end_ns)
                return TRUE;
        }
    }
    return FALSE;
}

/* The reduce rows before each U of @stage in @dir's one-segment run with the overlapped
 * reduction on the CPU backend: one per non-empty gradient bucket of each of the stage's
 * virtual stages (gpt2_table_bucket(): a block each, the embeddings on the first virtual stage,
 * ln_f and the head on the last), split as the executor splits the model, plus @extra. */
static int overlap_rows_per_update(const char *dir, const PpSchedule *sched, int32_t stage,
                                   int extra) {
    g_autofree char *path = g_build_filename(dir, "scenario.ini", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(path, NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    const PpModelParams *m = &sc->model;
    int32_t              n_vstages = sched->n_stages * sched->n_chunks;
    g_autoptr(PpPartition) part = pp_partition_new_gpt2_flops(
        m->layers, m->hidden, m->seq_len, m->vocab, n_vstages, pp_scenario_partition_mode(sc),
        sc->run.layers_per_stage, &error);
    ck_assert_msg(part != NULL, "%s", error ? error->message : "");
    int rows = extra;
    for (int32_t c = 0; c < sched->n_chunks; c++) {
        int32_t vs = pp_schedule_vstage(sched, stage, c);
        rows += part->layer_end[vs] - part->layer_begin[vs] + (vs == 0) + (vs == n_vstages - 1);
    }
    return rows;
}

/* The overlapped reduction's rows in @dir's ops.csv (2 replicas): every op once per replica,
 * and before each U of a stage overlap_rows_per_update() reduce rows (@extra: 2 with a sharded
 * optimizer, the norm's exchange and the all-gather). */
static void assert_overlap_rows(const char *dir, int extra) {
    g_autoptr(PpSchedule) sched = run_schedule(dir);
    g_autoptr(PpTrace) trace = read_trace(dir);
    int32_t             n = sched->n_stages;
    g_autofree int64_t *reduce = g_new0(int64_t, 2 * n); /* (replica, stage) */
    g_autofree int64_t *updates = g_new0(int64_t, 2 * n);
    g_autofree int64_t *compute = g_new0(int64_t, 2);
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *r = &trace->rows[i];
        ck_assert_int_lt(r->replica, 2);
        if (r->resource == PP_RESOURCE_REDUCE) {
            ck_assert_int_eq(r->kind, PP_OP_UPDATE);
            ck_assert_int_le(r->start_ns, r->end_ns);
            reduce[r->replica * n + r->stage]++;
            continue;
        }
        compute[r->replica]++;
        updates[r->replica * n + r->stage] += r->kind == PP_OP_UPDATE;
    }
    for (int d = 0; d < 2; d++) {
        ck_assert_int_eq(compute[d], pp_schedule_n_ops_total(sched));
        for (int32_t s = 0; s < n; s++)
            ck_assert_int_eq(reduce[d * n + s],
                             overlap_rows_per_update(dir, sched, s, extra) * updates[d * n + s]);
    }
}

/* The overlapped reduction (parallel.overlap_grad_reduce) on 2 replicas of a 2-stage pipeline,
 * each bucket of a virtual stage's gradients (a block, the head, the embeddings) reduced as
 * soon as the window's last backward has finished it:
 * - 1f1b, one virtual stage per stage, so only the stage's own last BW can hide it; 16 blocks
 *   of 64 channels and 4 sequences per micro-batch, so that stage 0's BW (all blocks: the
 *   head weighs more) lasts long after its first bucket, much longer than a woken thread
 *   waits for a core on a loaded machine;
 * - interleaved, 2 chunks and 4 micro-batches: the other chunk's backwards hide it too, alone
 *   and with a sharded optimizer.
 * Bitwise the reduction at U (unit and log but tokens/s); one reduce row per non-empty bucket
 * and update (with the sharded optimizer also the norm's exchange and the all-gather); some
 * reduce row overlapping a backward row of its stage (1f1b: the stage's last BW before the U,
 * which its reduction overlaps). */
START_TEST(test_mpi_data_overlap) {
    static const struct {
        const char *sets[5];
        gboolean    zero;
    } cases[] = {
        {{"pipeline.schedule=1f1b", "model.layers=16", "model.hidden=64",
          "pipeline.microbatch_size=4", "pipeline.microbatches=2"},
         FALSE},
        {{"pipeline.schedule=interleaved", "pipeline.chunks=2", "pipeline.microbatches=4"}, TRUE},
    };
#define DATA_OVERLAP_SETS                                                                          \
    "pipeline.stages=2", "parallel.data=2", cases[_i].sets[0], cases[_i].sets[1],                  \
        cases[_i].sets[2], cases[_i].sets[3], cases[_i].sets[4]
    /* (NULL-ended at the first unset entry of the case's sets) */
    const char *const plain[] = {DATA_OVERLAP_SETS, NULL};
    const char *const overlap[] = {"parallel.overlap_grad_reduce=true", DATA_OVERLAP_SETS, NULL};
    const char *const zero[] = {"parallel.overlap_grad_reduce=true",
                                "parallel.distributed_optimizer=true", DATA_OVERLAP_SETS, NULL};
#undef DATA_OVERLAP_SETS
    const char *const *sets[] = {overlap, zero};
    const int          extra[] = {0, 2};
    g_autofree char   *plain_dir = test_util_tmp_dir_new("mpi-dp-plain-XXXXXX");
    Run                base;
    run_ok(&base, 4, plain_dir, plain, NULL);
    for (size_t k = 0; k < (cases[_i].zero ? 2 : 1); k++) {
        g_autofree char *dir = test_util_tmp_dir_new("mpi-dp-overlap-XXXXXX");
        Run              r;
        run_ok(&r, 4, dir, sets[k], NULL);
        assert_same_unit(plain_dir, dir, 2);
        assert_same_log(plain_dir, dir);
        assert_overlap_rows(dir, extra[k]);
        g_autoptr(PpTrace) trace = read_trace(dir);
        ck_assert_msg(reduce_overlaps_backward(trace), "no reduction overlapped a backward");
        run_clear(&r);
        ck_assert(test_util_tmp_dir_remove(dir));
    }
    run_clear(&base);
    ck_assert(test_util_tmp_dir_remove(plain_dir));
}
END_TEST

/* A world size that is not parallel.data x pipeline.stages: every rank says so. A learning
 * rate that makes every gradient non-finite: the replicas of a stage skip together (they
 * share the reduced gradients), and every rank reports the same error, without an abort of
 * the job. Rank 3 (stage 1 of replica 1) stopped mid-run: the job ends within the deadline,
 * and every rank that reports a missed deadline names rank 3 (its pipeline neighbour waits
 * for its gradient, its replica peer for its part of the reduction). The deadline is 10 s, as
 * in the other deadline cases: with 3 s a healthy rank of a loaded 2-core machine missed it. */
START_TEST(test_mpi_data_failures) {
    const char *const sets[] = {"pipeline.stages=2",      "parallel.data=2",
                                "pipeline.schedule=1f1b", "pipeline.microbatches=4",
                                "run.comm_timeout_s=10",  NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-dp-fail-XXXXXX");
    Run               size, stopped;
    run_train(&size, 2, dir, sets, NULL, NULL);
    ck_assert_int_ne(size.status, 0);
    const char *say = "parallel.data = 2 replicas of pipeline.stages = 2, but the job has 2 "
                      "processes";
    ck_assert_msg(count_lines(size.err, say) == 2, "%s", size.err);
    const char *const storm[] = {
        "pipeline.stages=2", "parallel.data=2",       "pipeline.schedule=1f1b", "training.steps=8",
        "optimizer.lr=1e30", "optimizer.min_lr=1e30", "optimizer.grad_clip=0",  NULL};
    Run nan;
    run_train(&nan, 4, dir, storm, NULL, NULL);
    ck_assert_int_ne(nan.status, 0);
    const char *nonfinite = "consecutive updates (up to update 3) had non-finite gradients";
    ck_assert_msg(count_lines(nan.err, nonfinite) == 4 && strstr(nan.err, "MPI_ABORT") == NULL,
                  "%s", nan.err);
    const char *const overwrite[] = {"--overwrite", NULL};
    int64_t           start = g_get_monotonic_time();
    run_train(&stopped, 4, dir, sets, overwrite, "PACER_TEST_FAULT=stop:3:3");
    double elapsed_s = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
    ck_assert_int_ne(stopped.status, 0);
    ck_assert_msg(elapsed_s < 90.0, "the job took %.1f s", elapsed_s);
    int reports = count_lines(stopped.err, "may have died or hung");
    ck_assert_msg(reports >= 1 &&
                      count_lines(stopped.err, "rank 3 may have died or hung") == reports,
                  "stderr:\n%s", stopped.err);
    run_clear(&size);
    run_clear(&nan);
    run_clear(&stopped);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Rank 1's probe of process_vm_readv fails (PACER_TEST_CMA_REFUSE), rank 0's succeeds: the
 * gradient reduction's large messages would fail inside Open MPI ("invalid bml for rdma get",
 * exit 255, nothing of pacer's). Every rank stops at start-up with pacer's line naming both
 * ranks' mechanisms and the remedy; where no rank may use the single copy, both chose none and
 * the run succeeds. */
START_TEST(test_mpi_data_cma_one_refused) {
    const char *const sets[] = {"pipeline.stages=1", "parallel.data=2", NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-cma-XXXXXX");
    Run               r;
    run_train(&r, 2, dir, sets, NULL, "PACER_TEST_CMA_REFUSE=1");
    ck_assert_msg(strstr(r.err, "invalid bml") == NULL, "%s", r.err);
    const char *say = "rank 0 cma (its probe), rank 1 none (its probe), and Open MPI would fail "
                      "the job at its first large message";
    ck_assert_msg(r.status == 0 ? strstr(r.err, say) == NULL : count_lines(r.err, say) == 2,
                  "exit %d: %s", r.status, r.err);
    run_clear(&r);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* D = 2 x N = 2, one rank stopped (SIGSTOP) inside the gradient reduction after posting
 * some of its parts (PACER_TEST_FAULT=stop-reduce:RANK:PARTS): the ranks waiting for it
 * directly (its replica peer in the reduction or all-gather, its pipeline neighbour) and those
 * waiting for a waiting rank (the probe's answer names what it waits for) all end at it: the
 * first line of stderr names the stopped rank, on every repetition (before the probes reached
 * into replays, 5 of 8 such stops named a rank that was itself waiting). */
static const char *const blame_faults[] = {"3:1", "2:1", "3:0", "2:0", "1:1", "3:1"};

START_TEST(test_mpi_data_blame) {
    const char *const sets[] = {"pipeline.stages=2",
                                "parallel.data=2",
                                "pipeline.schedule=1f1b",
                                "pipeline.microbatches=4",
                                "training.steps=4",
                                "run.comm_timeout_s=10",
                                NULL};
    const char       *fault = blame_faults[_i];
    g_autofree char  *hook = g_strconcat("PACER_TEST_FAULT=stop-reduce:", fault, NULL);
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-dp-blame-XXXXXX");
    g_autofree char  *stopped = g_strndup(fault, strchr(fault, ':') - fault);
    g_autofree char  *named = g_strdup_printf("rank %s may have died or hung", stopped);
    Run               r;
    run_train(&r, 4, dir, sets, NULL, hook);
    ck_assert_int_ne(r.status, 0);
    g_auto(GStrv) lines = g_strsplit(r.err, "\n", -1);
    const char *first = NULL; /* the first line but the hook's own */
    for (char **l = lines; *l && first == NULL; l++)
        if (strstr(*l, "PACER_TEST_FAULT") == NULL)
            first = *l;
    ck_assert_msg(first && strstr(first, named), "%s: stderr:\n%s", hook, r.err);
    run_clear(&r);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --- resume across processes --- */

/* paci (asynchronous: segment boundaries are part of the math) on 4 processes, stopped at the
 * step-2 checkpoint, resumed from the run folder and killed (rank 0, SIGKILL) inside the step-4
 * unit's write: the job ends, the step-2 unit stays the newest complete one, and resuming
 * again (its newest complete unit, named on rank 0's stderr in quiet mode) equals 4 uninterrupted
 * steps on threads with the same boundaries: both units byte for byte and the log. The step-2 unit
 * the processes wrote also resumes on threads to the same end. */
START_TEST(test_mpi_resume) {
    const char *const sets[] = {"pipeline.schedule=paci",  "pipeline.stages=4",
                                "pipeline.accumulation=2", "pipeline.microbatches=1",
                                "training.steps=4",        "run.checkpoint_every=2",
                                "run.eval_every=2",        NULL};
    g_autofree char  *mp_dir = test_util_tmp_dir_new("mpi-resume-XXXXXX");
    g_autofree char  *th_dir = test_util_tmp_dir_new("mpi-straight-XXXXXX");
    const char *const stop[] = {"--stop-at", "2", NULL};
    const char *const resume[] = {"--resume", mp_dir, NULL};
    Run               a, killed, b, th;
    run_ok(&a, 4, mp_dir, sets, stop);
    ck_assert_ptr_nonnull(strstr(a.out, ", 2 steps,"));
    run_train(&killed, 4, mp_dir, sets, resume, "PACER_TEST_KILL_AT=before-rename@4");
    ck_assert_msg(killed.status != 0 && strstr(killed.err, "process rank 0 ") != NULL,
                  "exit %d: %s", killed.status, killed.err);
    g_autofree char *unit4 = g_build_filename(mp_dir, "checkpoints", "step-00000004", NULL);
    ck_assert(!g_file_test(unit4, G_FILE_TEST_EXISTS));
    run_ok(&b, 4, mp_dir, sets, resume);
    ck_assert_ptr_nonnull(strstr(b.out, ", 4 steps,"));
    /* Rank 0 removed the killed write's temporary folder and said so. */
    ck_assert_msg(strstr(b.err, "left by an interrupted checkpoint write") != NULL, "%s", b.err);
    g_autofree char *units = g_build_filename(mp_dir, "checkpoints", NULL);
    g_autoptr(GDir) dir = g_dir_open(units, 0, NULL);
    ck_assert_ptr_nonnull(dir);
    for (const char *name; (name = g_dir_read_name(dir)) != NULL;)
        ck_assert_msg(name[0] != '.', "%s/%s left behind", units, name);
    ck_assert_msg(count_lines(b.err, "resuming from ") == 1 &&
                      strstr(b.err, "checkpoints/step-00000002 (step 2)") != NULL,
                  "%s", b.err);
    run_ok(&th, 0, th_dir, sets, NULL);
    assert_same_unit(mp_dir, th_dir, 2);
    assert_same_unit(mp_dir, th_dir, 4);
    assert_same_log(mp_dir, th_dir);
    /* The unit the processes wrote resumes on threads too, to the same end. */
    g_autofree char  *unit = g_build_filename(mp_dir, "checkpoints", "step-00000002", NULL);
    g_autofree char  *x_dir = test_util_tmp_dir_new("mpi-cross-XXXXXX");
    const char *const cross[] = {"--resume", unit, NULL};
    Run               x;
    run_ok(&x, 0, x_dir, sets, cross);
    assert_same_unit(x_dir, th_dir, 4);
    assert_same_log(x_dir, th_dir);
    run_clear(&a);
    run_clear(&killed);
    run_clear(&b);
    run_clear(&th);
    run_clear(&x);
    ck_assert(test_util_tmp_dir_remove(mp_dir));
    ck_assert(test_util_tmp_dir_remove(th_dir));
    ck_assert(test_util_tmp_dir_remove(x_dir));
}
END_TEST

/* --- dynamic mode --- */

/* PACI's policy live on 4 processes: each rank decides from what has arrived. The order may
 * differ from a threaded run's, but every op runs once and no stage drifts past PACI's bound
 * ceil((N - 1 - s) / a). */
START_TEST(test_mpi_dynamic) {
    const int32_t     N = 4, a = 2;
    const char *const sets[] = {"pipeline.schedule=paci",  "pipeline.stages=4",
                                "pipeline.accumulation=2", "pipeline.microbatches=1",
                                "training.steps=3",        NULL};
    const char *const dynamic[] = {"--dynamic", NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-dynamic-XXXXXX");
    Run               r;
    run_ok(&r, N, dir, sets, dynamic);
    g_autoptr(PpSchedule) sched = run_schedule(dir);
    g_autoptr(PpTrace) trace = read_trace(dir);
    ck_assert_int_eq(trace->n_rows, pp_schedule_n_ops_total(sched));
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *row = &trace->rows[i];
        if (row->kind != PP_OP_UPDATE)
            ck_assert_int_le(row->version_b - row->version_f, (N - 1 - row->stage + a - 1) / a);
    }
    run_clear(&r);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --- failures --- */

/* Two processes for a 4-stage scenario: every rank says so and the job exits non-zero. */
START_TEST(test_mpi_world_size) {
    const char *const sets[] = {"pipeline.stages=4", NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-size-XXXXXX");
    Run               r;
    run_train(&r, 2, dir, sets, NULL, NULL);
    ck_assert_int_ne(r.status, 0);
    const char *say = "pipeline.stages = 4, but the job has 2 processes";
    ck_assert_msg(count_lines(r.err, "pacer-train: rank 0: ") == 1 &&
                      count_lines(r.err, "pacer-train: rank 1: ") == 1 &&
                      count_lines(r.err, say) == 2,
                  "%s", r.err);
    run_clear(&r);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* A learning rate that makes every gradient non-finite: the stage that first skips
 * max_nonfinite updates in a row stops the run, and every rank reports its error. */
START_TEST(test_mpi_nan_storm) {
    const char *const sets[] = {"pipeline.stages=2",
                                "pipeline.schedule=1f1b",
                                "training.steps=8",
                                "optimizer.lr=1e30",
                                "optimizer.min_lr=1e30",
                                "optimizer.grad_clip=0",
                                NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-nan-XXXXXX");
    Run               r;
    run_train(&r, 2, dir, sets, NULL, NULL);
    ck_assert_int_ne(r.status, 0);
    const char *say = "consecutive updates (up to update 3) had non-finite gradients";
    ck_assert_msg(count_lines(r.err, say) == 2 && strstr(r.err, "pacer-train: rank 0: stage") &&
                      strstr(r.err, "pacer-train: rank 1: stage"),
                  "%s", r.err);
    run_clear(&r);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Rank 1 of 2 dies (SIGKILL) or stops answering (SIGSTOP) after its third message. Killed:
 * the launcher ends the job and names the rank and the signal. Stopped: rank 0 gives up after
 * run.comm_timeout_s, names the op and rank 1, and aborts the job. Either way nothing hangs
 * (run_train() fails a run that outlives its limit). */
START_TEST(test_mpi_dead_peer) {
    const char *const sets[] = {"pipeline.stages=2", "pipeline.schedule=1f1b",
                                "pipeline.microbatches=4", "run.comm_timeout_s=2", NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-dead-XXXXXX");
    Run               killed, stopped;
    run_train(&killed, 2, dir, sets, NULL, "PACER_TEST_FAULT=kill:1:3");
    ck_assert_int_ne(killed.status, 0);
    ck_assert_msg(strstr(killed.err, "process rank 1 ") != NULL &&
                      strstr(killed.err, "exited on signal 9") != NULL,
                  "%s", killed.err);
    /* The killed run wrote scenario.ini: this one starts over. */
    const char *const overwrite[] = {"--overwrite", NULL};
    run_train(&stopped, 2, dir, sets, overwrite, "PACER_TEST_FAULT=stop:1:3");
    ck_assert_int_ne(stopped.status, 0);
    ck_assert_msg(strstr(stopped.err, "pacer-train: rank 0: the gradient for BW(mb=") &&
                      strstr(stopped.err, "from rank 1 did not arrive within 2 s "
                                          "(run.comm_timeout_s)"),
                  "%s", stopped.err);
    run_clear(&killed);
    run_clear(&stopped);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --- the launcher --- */

/* The state letter of process @pid (/proc/PID/stat; 'Z' a zombie), or 0 when there is none. */
static char proc_state(GPid pid) {
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return 0;
    const char *close = strrchr(stat, ')'); /* the name may hold spaces and parentheses */
    return close && close[1] == ' ' ? close[2] : 0;
}

/* The processes whose parent is @parent. Returns: (transfer full) GPid values. */
static GArray *proc_children(GPid parent) {
    GArray *out = g_array_new(FALSE, FALSE, sizeof(GPid));
    g_autoptr(GDir) proc = g_dir_open("/proc", 0, NULL);
    for (const char *name; proc && (name = g_dir_read_name(proc)) != NULL;) {
        gint64 pid = 0;
        if (!g_ascii_string_to_signed(name, 10, 1, G_MAXINT32, &pid, NULL))
            continue;
        g_autofree char *path = g_strdup_printf("/proc/%s/stat", name);
        g_autofree char *stat = NULL;
        if (!g_file_get_contents(path, &stat, NULL, NULL))
            continue;
        const char *close = strrchr(stat, ')');
        int         ppid = 0;
        if (close && sscanf(close + 2, "%*c %d", &ppid) == 1 && ppid == (int)parent) {
            GPid child = (GPid)pid;
            g_array_append_val(out, child);
        }
    }
    return out;
}

/* The launcher dies (SIGKILL to mpirun, as when a wrapper's signal ends it and the ranks go on):
 * within a few seconds no rank is left, and the run folder is one a resume continues: every
 * checkpoint unit complete, and --resume on threads runs from the newest. */
START_TEST(test_mpi_launcher_killed) {
    const char *const sets[] = {"pipeline.stages=2",
                                "pipeline.schedule=1f1b",
                                "pipeline.microbatches=2",
                                "training.steps=100000",
                                "run.checkpoint_every=2",
                                "run.keep_checkpoints=2",
                                NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-launcher-XXXXXX");
    g_autoptr(GPtrArray) argv = train_argv(2, dir, sets, NULL, NULL);
    GPid mpirun = 0;
    g_autoptr(GError) error = NULL;
    gboolean ok = g_spawn_async(NULL, (char **)argv->pdata, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL |
                                    G_SPAWN_STDERR_TO_DEV_NULL,
                                NULL, NULL, &mpirun, &error);
    ck_assert_msg(ok, "cannot start mpirun: %s", ok ? "" : error->message);
    /* Training is under way once the step-4 unit is there (start-up takes seconds). */
    g_autofree char *unit = g_build_filename(dir, "checkpoints", "step-00000004", NULL);
    int64_t          limit = g_get_monotonic_time() + (int64_t)RUN_LIMIT_S * G_USEC_PER_SEC;
    while (!g_file_test(unit, G_FILE_TEST_IS_DIR) && g_get_monotonic_time() < limit &&
           waitpid(mpirun, NULL, WNOHANG) == 0)
        g_usleep(50000);
    ck_assert_msg(g_file_test(unit, G_FILE_TEST_IS_DIR), "no %s", unit);
    g_autoptr(GArray) ranks = proc_children(mpirun);
    ck_assert_int_eq(ranks->len, 2);
    ck_assert_int_eq(kill(mpirun, SIGKILL), 0);
    ck_assert_int_eq(waitpid(mpirun, NULL, 0), mpirun);
    g_spawn_close_pid(mpirun);
    int64_t killed = g_get_monotonic_time();
    guint   left = ranks->len;
    while (left > 0 && g_get_monotonic_time() - killed < 5 * G_USEC_PER_SEC) {
        g_usleep(20000);
        left = 0;
        for (guint i = 0; i < ranks->len; i++) {
            char state = proc_state(g_array_index(ranks, GPid, i));
            left += state != 0 && state != 'Z';
        }
    }
    double gone_s = (double)(g_get_monotonic_time() - killed) / G_USEC_PER_SEC;
    for (guint i = 0; i < ranks->len && left > 0; i++) /* leave nothing running */
        kill(g_array_index(ranks, GPid, i), SIGKILL);
    ck_assert_msg(left == 0, "%u of %u ranks still ran %.1f s after mpirun was killed", left,
                  ranks->len, gone_s);
    /* Every unit the run left is complete (interrupted writes are hidden temporaries). */
    g_autofree char *units = g_build_filename(dir, "checkpoints", NULL);
    g_autoptr(GDir) listing = g_dir_open(units, 0, NULL);
    ck_assert_ptr_nonnull(listing);
    int newest = 0, step = 0;
    for (const char *name; (name = g_dir_read_name(listing)) != NULL;) {
        g_autofree char *manifest = g_build_filename(units, name, "manifest.json", NULL);
        ck_assert_msg(name[0] == '.' || g_file_test(manifest, G_FILE_TEST_IS_REGULAR),
                      "%s/%s has no manifest", units, name);
        if (sscanf(name, "step-%d", &step) == 1)
            newest = MAX(newest, step);
    }
    ck_assert_int_ge(newest, 4);
    g_autofree char  *stop = g_strdup_printf("%d", newest + 1);
    const char *const resume[] = {"--resume", dir, "--stop-at", stop, NULL};
    g_autofree char  *th_dir = test_util_tmp_dir_new("mpi-launcher-resume-XXXXXX");
    Run               again;
    run_ok(&again, 0, th_dir, sets, resume);
    ck_assert_msg(strstr(again.err, "resuming from ") != NULL, "%s", again.err);
    run_clear(&again);
    ck_assert(test_util_tmp_dir_remove(th_dir));
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --- the output folder --- */

/* A fresh run into the folder of a finished run: on 2 processes every rank stops with the
 * message a threaded run gives (nothing hangs) and the folder is unchanged; --overwrite starts
 * over on processes as on threads. */
START_TEST(test_mpi_out_folder) {
    const char *const sets[] = {"pipeline.stages=2", "pipeline.schedule=1f1b",
                                "pipeline.microbatches=2", NULL};
    const char *const overwrite[] = {"--overwrite", NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-out-XXXXXX");
    Run               first, mp, th, over;
    run_ok(&first, 2, dir, sets, NULL);
    g_autofree char *before = test_util_snapshot(dir);
    run_train(&mp, 2, dir, sets, NULL, NULL);
    run_train(&th, 0, dir, sets, NULL, NULL);
    ck_assert_int_ne(mp.status, 0);
    ck_assert_int_eq(th.status, 1);
    g_autofree char *said = g_strdup_printf(
        "--out %s holds log.csv, ops.csv, scenario.ini, memory.csv, checkpoints of another run: "
        "nothing was changed. Continue that run with --resume %s, start over with --overwrite",
        dir, dir);
    g_autofree char *threaded = g_strdup_printf("pacer-train: %s", said);
    g_autofree char *rank0 = g_strdup_printf("pacer-train: rank 0: %s", said);
    g_autofree char *rank1 = g_strdup_printf("pacer-train: rank 1: %s", said);
    ck_assert_msg(strstr(th.err, threaded) != NULL, "%s", th.err);
    ck_assert_msg(count_lines(mp.err, rank0) == 1 && count_lines(mp.err, rank1) == 1, "%s", mp.err);
    g_autofree char *after = test_util_snapshot(dir);
    ck_assert_str_eq(after, before);
    run_ok(&over, 2, dir, sets, overwrite);
    g_autofree char *removed = g_strdup_printf("--overwrite: removed %s/log.csv", dir);
    ck_assert_msg(count_lines(over.err, removed) == 1, "%s", over.err);
    g_autofree char *removed_memory = g_strdup_printf("--overwrite: removed %s/memory.csv", dir);
    ck_assert_msg(count_lines(over.err, removed_memory) == 1, "%s", over.err);
    run_clear(&first);
    run_clear(&mp);
    run_clear(&th);
    run_clear(&over);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* A rank that stops (SIGSTOP, PACER_TEST_STALL_AT=RANK:POINT) at a point of start-up or of the
 * end; the first line of the job's stderr must contain @first, a peer naming it. */
typedef struct {
    int         np;
    const char *stall_at;
    const char *first;
} StallCase;

static const StallCase stall_cases[] = {
    /* Before MPI's start-up: the peers' MPI_Init_thread waits. */
    {2, "1:start",
     "pacer-train: rank 0: MPI's start-up (MPI_Init_thread, MPI_Comm_dup) did not complete "
     "within 10 s (run.comm_timeout_s); rank 1 may have died or hung"},
    /* The agreement on the scenario: rank 2 waits for rank 0's verdict, rank 0 for rank 1's
     * status; rank 0 names rank 1 first. */
    {3, "1:loading the scenario",
     "pacer-train: rank 0: the status at loading the scenario from rank 1 did not arrive "
     "within 10 s (run.comm_timeout_s); rank 1 may have died or hung"},
    /* Rank 0 itself: the others wait for its verdict. */
    {3, "0:opening the data",
     "rank 0's verdict at opening the data from rank 0 did not arrive within 10 s "
     "(run.comm_timeout_s); rank 0 may have died or hung"},
    /* The last agreement, after the final gathers. */
    {2, "1:writing log.csv and ops.csv",
     "pacer-train: rank 0: the status at writing log.csv and ops.csv from rank 1 did not "
     "arrive within 10 s (run.comm_timeout_s); rank 1 may have died or hung"},
    /* Before MPI's shut-down: the peers' MPI_Finalize waits. */
    {2, "1:finish",
     "pacer-train: rank 0: MPI's shut-down (MPI_Finalize) did not complete within 10 s "
     "(run.comm_timeout_s); rank 1 may have died or hung"},
};

/* Runs pacer-train on @np processes in @dir with @args (nullable) and rank RANK stopped at
 * POINT (@stall_at, "RANK:POINT"): the job ends well within the harness's limit, non-zero, and
 * its first line of stderr, before Open MPI's own report, contains @first. */
static void run_stalled(int np, const char *dir, const char *const *args, const char *stall_at,
                        const char *first) {
    g_autofree char  *stages = g_strdup_printf("pipeline.stages=%d", np);
    const char *const sets[] = {stages, "pipeline.schedule=1f1b", "pipeline.microbatches=4",
                                "run.comm_timeout_s=10", NULL};
    g_autofree char  *fault = g_strconcat("PACER_TEST_STALL_AT=", stall_at, NULL);
    Run               r;
    int64_t           start = g_get_monotonic_time();
    run_train(&r, np, dir, sets, args, fault);
    double elapsed_s = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
    ck_assert_int_ne(r.status, 0);
    /* Start-up, two steps and the deadline with its probe take 20-30 s on 2 busy cores. */
    ck_assert_msg(elapsed_s < 90.0, "%s: the job took %.1f s", stall_at, elapsed_s);
    g_auto(GStrv) lines = g_strsplit(r.err, "\n", 2);
    ck_assert_msg(lines[0] && strstr(lines[0], first), "%s: stderr:\n%s", stall_at, r.err);
    run_clear(&r);
}

/* Every wait for a peer has run.comm_timeout_s, start-up and shut-down included. */
START_TEST(test_mpi_stall) {
    const StallCase *c = &stall_cases[_i];
    g_autofree char *dir = test_util_tmp_dir_new("mpi-stall-XXXXXX");
    run_stalled(c->np, dir, NULL, c->stall_at, c->first);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Loading a checkpoint: rank 1 stops before the ranks agree on how rank 0's read went. */
START_TEST(test_mpi_stall_resume) {
    const char *const sets[] = {"pipeline.stages=2", "pipeline.schedule=1f1b",
                                "pipeline.microbatches=4", NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-stall-resume-XXXXXX");
    const char *const stop[] = {"--stop-at", "1", NULL};
    const char *const resume[] = {"--resume", dir, NULL};
    Run               a;
    run_ok(&a, 2, dir, sets, stop);
    run_clear(&a);
    run_stalled(2, dir, resume, "1:reading the checkpoint",
                "pacer-train: rank 0: the status at reading the checkpoint from rank 1 did not "
                "arrive within 10 s (run.comm_timeout_s); rank 1 may have died or hung");
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* A checkpoint write (rank 0's alone) that takes 12 s, longer than run.comm_timeout_s = 5 and
 * its probe together: the peers wait for it and the job ends well, with the unit in place. */
START_TEST(test_mpi_slow_checkpoint) {
    const char *const sets[] = {"pipeline.stages=2", "pipeline.schedule=1f1b",
                                "pipeline.microbatches=4", "run.comm_timeout_s=5", NULL};
    g_autofree char  *dir = test_util_tmp_dir_new("mpi-slow-write-XXXXXX");
    Run               r;
    int64_t           start = g_get_monotonic_time();
    run_train(&r, 2, dir, sets, NULL, "PACER_TEST_SLOW_WRITE_S=12");
    double elapsed_s = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
    ck_assert_msg(r.status == 0, "exited %d:\n%s", r.status, r.err);
    ck_assert_msg(elapsed_s >= 12.0, "the write was not slowed: %.1f s", elapsed_s);
    g_autofree char *unit = g_build_filename(dir, "checkpoints", "step-00000002", NULL);
    ck_assert(g_file_test(unit, G_FILE_TEST_IS_DIR));
    run_clear(&r);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* PACER_TEST_BACKEND=cuda: FALSE when pacer-train sees no CUDA device (the program skips). */
static gboolean backend_usable(void) {
    const char *backend = g_getenv("PACER_TEST_BACKEND");
    if (backend == NULL || strcmp(backend, "cpu") == 0)
        return TRUE;
    static char set_backend[64];
    g_snprintf(set_backend, sizeof set_backend, "run.backend=%s", backend);
    backend_sets[0] = set_backend;
    backend_sets[1] = "run.precision=fp32";
    /* Outside a Check test: no ck_assert here. */
    g_autofree char *dir = g_dir_make_tmp("mpi-probe-XXXXXX", NULL);
    if (dir == NULL)
        return FALSE;
    const char      *argv[] = {TRAIN_BIN, PP_SOURCE_ROOT "/scenarios/train-tiny.ini",
                               "--set",   set_backend,
                               "--set",   "training.steps=2",
                               "--set",   "optimizer.warmup_steps=1",
                               "--set",   "data.cache_dir=" PP_SOURCE_ROOT "/.cache",
                               "--quiet", "--out",
                               dir,       NULL};
    g_autofree char *err = NULL;
    int              status = 0;
    gboolean         ran =
        g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL, NULL, &err, &status, NULL);
    test_util_tmp_dir_remove(dir);
    return ran && (err == NULL || strstr(err, "no CUDA device is visible") == NULL);
}

int main(void) {
    if (!backend_usable()) {
        printf("SKIP: PACER_TEST_BACKEND=%s and pacer-train sees no CUDA device\n",
               g_getenv("PACER_TEST_BACKEND"));
        return 77;
    }
    g_autofree char *mpirun = g_find_program_in_path("mpirun");
    if (!g_file_test(PP_SOURCE_ROOT "/.cache/gpt2", G_FILE_TEST_IS_DIR) || mpirun == NULL) {
        /* TAP: the whole program skips. */
        printf(
            "1..0 # SKIP needs mpirun (scripts/setup) and the data cache (scripts/fetch-data)\n");
        return EXIT_SUCCESS;
    }
    Suite *s = suite_create("exec-mpi");
    TCase *tc = tcase_create("exec-mpi");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_mpi_equals_threads, 0, G_N_ELEMENTS(equal_cases));
    tcase_add_test(tc, test_mpi_resume);
    tcase_add_test(tc, test_mpi_dynamic);
    tcase_add_test(tc, test_mpi_world_size);
    tcase_add_test(tc, test_mpi_nan_storm);
    tcase_add_test(tc, test_mpi_dead_peer);
    tcase_add_loop_test(tc, test_mpi_stall, 0, G_N_ELEMENTS(stall_cases));
    tcase_add_test(tc, test_mpi_stall_resume);
    suite_add_tcase(s, tc);
    /* Tagged "data" and "data-wide": tests/meson.build runs them as their own tests,
     * test-exec-mpi-data (default suite) and test-exec-mpi-data-wide (slow suite). */
    TCase *data = tcase_create("exec-mpi-data");
    tcase_set_tags(data, "data");
    tcase_set_timeout(data, 600);
    tcase_add_loop_test(data, test_mpi_data, 0, N_DATA_NARROW);
    tcase_add_test(data, test_mpi_data_resume);
    tcase_add_test(data, test_mpi_data_dynamic);
    tcase_add_test(data, test_mpi_data_failures);
    suite_add_tcase(s, data);
    /* (its own case: CK_RUN_CASE=exec-mpi-data-overlap CK_INCLUDE_TAGS=data runs it alone) */
    TCase *overlap = tcase_create("exec-mpi-data-overlap");
    tcase_set_tags(overlap, "data");
    tcase_set_timeout(overlap, 600);
    tcase_add_loop_test(overlap, test_mpi_data_overlap, 0, 2);
    suite_add_tcase(s, overlap);
    TCase *wide = tcase_create("exec-mpi-data-wide");
    tcase_set_tags(wide, "data-wide");
    tcase_set_timeout(wide, 1200);
    tcase_add_loop_test(wide, test_mpi_data, N_DATA_NARROW, G_N_ELEMENTS(data_cases));
    suite_add_tcase(s, wide);
    TCase *cma = tcase_create("exec-mpi-cma"); /* 2 replicas: in test-exec-mpi-data */
    tcase_set_tags(cma, "data");
    tcase_set_timeout(cma, 300);
    tcase_add_test(cma, test_mpi_data_cma_one_refused);
    suite_add_tcase(s, cma);
    TCase *blame = tcase_create("exec-mpi-data-blame"); /* in test-exec-mpi-data */
    tcase_set_tags(blame, "data");
    tcase_set_timeout(blame, 900);
    tcase_add_loop_test(blame, test_mpi_data_blame, 0, G_N_ELEMENTS(blame_faults));
    suite_add_tcase(s, blame);
    TCase *launcher = tcase_create("exec-mpi-launcher"); /* CK_RUN_CASE runs it alone */
    tcase_set_timeout(launcher, 600);
    tcase_add_test(launcher, test_mpi_launcher_killed);
    suite_add_tcase(s, launcher);
    TCase *out = tcase_create("exec-mpi-out"); /* CK_RUN_CASE=exec-mpi-out runs it alone */
    tcase_set_timeout(out, 600);
    tcase_add_test(out, test_mpi_out_folder);
    suite_add_tcase(s, out);
    TCase *slow = tcase_create("exec-mpi-slow-write"); /* CK_RUN_CASE=exec-mpi-slow-write */
    tcase_set_timeout(slow, 300);
    tcase_add_test(slow, test_mpi_slow_checkpoint);
    suite_add_tcase(s, slow);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
