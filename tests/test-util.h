/* SPDX-License-Identifier: MIT
 * test-util.h: helpers shared by the Check test programs: scratch folders, folder listings,
 * whole-file reads, finding files, running a built binary as a child process and building a
 * schedule from its parameters or from a scenario. Each one aborts the calling test (ck_abort) with
 * a message naming what failed.
 */
#pragma once

#include <check.h>
#include <glib.h>
#include <stdint.h>

#include "pp-scenario.h"
#include "pp-schedule.h"
#include "pp-trace.h"

/* A fresh temporary folder from @tmpl ("name-XXXXXX"); transfer full. */
char *test_util_tmp_dir_new(const char *tmpl);

/* Removes everything in @dir, recursively (without following symbolic links), then @dir
 * itself. Returns TRUE when every removal succeeded (callers that care assert it). */
gboolean test_util_tmp_dir_remove(const char *dir);

/* The names in @dir, sorted (strcmp) and joined with single spaces ("" when empty).
 * Returns: (transfer full). */
char *test_util_list_dir(const char *dir);

/* Every file under @dir, recursively, one line each: its path under @dir, its size and its
 * SHA-256, sorted and joined with newlines: equal snapshots mean nothing was changed.
 * Returns: (transfer full). */
char *test_util_snapshot(const char *dir);

/* A scratch folder and one file path in it. */
typedef struct {
    char *dir;  /* the folder, from test_util_tmp_dir_new() */
    char *path; /* dir/<file name> (the file itself is not created) */
} TestUtilTmp;

/* Makes the folder from @tmpl and sets path to @file_name inside it. */
void test_util_tmp_init(TestUtilTmp *t, const char *tmpl, const char *file_name);

/* Removes the folder and everything in it (missing entries are fine) and frees both paths. */
void test_util_tmp_clear(TestUtilTmp *t);

/* The whole contents of @path (NUL-terminated; length in @len, nullable); transfer full. */
char *test_util_read_file(const char *path, gsize *len);

/* Runs @program with @args (NULL-terminated, without argv[0]); captures stdout and stderr
 * into @out and @err (nullable: discarded; transfer full). The child must exit normally;
 * returns its exit status. */
int test_util_spawn(const char *program, const char *const *args, char **out, char **err);

/* Starts @program with @args (NULL-terminated, without argv[0]) in the background, its stdout
 * on a pipe (*@stdout_fd, transfer full: close it) and its stderr discarded. The caller
 * reaps the child (waitpid) and may signal it first. Returns its pid. */
GPid test_util_spawn_piped(const char *program, const char *const *args, int *stdout_fd);

/* Appends to @out (element-type char *, transfer full) every file under @dir, recursively,
 * whose name ends with @suffix. */
void test_util_collect_files(const char *dir, const char *suffix, GPtrArray *out);

/* Runs @program as test_util_spawn() does, with @env_set ("NAME=VALUE" strings,
 * NULL-terminated, nullable) added to the environment, and returns its raw wait status
 * (WIFEXITED / WIFSIGNALED tell how it ended). */
int test_util_spawn_status(const char *program, const char *const *args, const char *const *env_set,
                           char **out, char **err);

/* --- schedule fixtures --- */

/* The generator parameters of @kind (a registry name, looked up; NULL: no record) with
 * N = @n_stages, v = @n_chunks, m, a and @n_steps; no costs (f_ns = b_ns = w_ns = comm_ns = 0),
 * no order file, mem_w_fraction 0. Tests that expect an error start from these and change one
 * field. */
PpScheduleParams test_util_schedule_params(const char *kind, int32_t n_stages, int32_t n_chunks,
                                           int32_t m, int32_t a, int32_t n_steps);

/* pp_schedule_new(@params); aborts the test with the parameters and the error when it fails.
 * Returns: (transfer full). */
PpSchedule *test_util_schedule_build(const PpScheduleParams *params);

/* pp_schedule_new() of @kind with N = @n_stages, v = @n_chunks, m, a, @n_steps and F = B = W
 * = 1000 ns, no communication cost. */
PpSchedule *test_util_schedule_new(const char *kind, int32_t n_stages, int32_t n_chunks, int32_t m,
                                   int32_t a, int32_t n_steps);

/* Writes "case @name" to stderr: a table-driven loop test calls it first, so that the log of a
 * failing case names it (Check reports only the loop index). */
void test_util_case(const char *name);

/* The schedule of scenario @sc as the simulator builds it before its cost model fills the
 * costs (pp_scenario_schedule_params() then test_util_schedule_build()). Returns: (transfer
 * full). */
PpSchedule *test_util_scenario_schedule_new(const PpScenario *sc);

/* Appends to @out the trace of replica @replica of a data-parallel run whose every U waited
 * @sync_ns for the reduction between replicas, made from @sim, a simulated flush run without
 * reductions (every op of a step after the previous step's U): an op of step j starts j
 * @sync_ns later than in @sim (a U, of update j: j + 1), plus @origin_ns. Replica 0 writes each
 * reduction as two overlapping reduce rows, any other replica as one row that starts 500 ns
 * before the op before the U ends (that overlap with compute is not exposed). */
void test_util_append_replica(PpTrace *out, const PpTrace *sim, int32_t replica, int64_t sync_ns,
                              int64_t origin_ns);

/* The weight versions @sched implies for the op of trace row @row (F, B, W or BW of a
 * one-segment run): those of its micro-batch's F and backward (B, or BW) on its virtual
 * stage (pp_schedule_version_used()). */
void test_util_program_versions(const PpSchedule *sched, const PpTraceRow *row, int32_t *version_f,
                                int32_t *version_b);

/* --- cases that need the fetched data --- */

/* The data cache the tests read, as the programs find it (data_cache_dir()): $PACER_CACHE
 * when set and not empty, else the source tree's .cache. Returns: (transfer full). */
char *test_util_cache_dir(void);

/* The reason printed for a case left out without the data (names scripts/fetch-data). */
#define TEST_UTIL_NO_DATA                                                                          \
    "needs the GPT-2 vocabulary and the corpus in the data cache: run scripts/fetch-data"

/* The cases of one test program that need the data scripts/fetch-data puts in the cache
 * (the GPT-2 vocabulary and the corpus). Without it they are left out of their TCase and
 * reported as skipped; the other cases still run. */
typedef struct {
    gboolean   have_data; /* the cache holds gpt2/encoder.json, gpt2/vocab.bpe and sotu/ */
    GPtrArray *skipped;   /* element-type char *: the names of the cases left out */
} TestUtilData;

/* Looks at the cache (test_util_cache_dir()). */
void test_util_data_init(TestUtilData *d);

/* tcase_add_loop_test(@tc, @test, @start, @end) when the data is there, else records the
 * case as skipped. */
void test_util_data_add(TestUtilData *d, TCase *tc, const TTest *test, int start, int end);

/* Runs @s (transfer full) as every test program's main() does and returns its exit status
 * (EXIT_SUCCESS when no case failed). Under TAP on stdout (CK_TAP_LOG_FILE_NAME=-, as
 * tests/meson.build runs them) each skipped case becomes an "ok N - NAME # SKIP reason" line
 * before the plan; otherwise one "SKIP NAME: reason" line each. Frees what @d holds. */
int test_util_data_run(TestUtilData *d, Suite *s);

/* --- strict JSON --- */

/* TRUE when @text is one JSON value (RFC 8259) with optional white space around it: no NaN,
 * Infinity, "1e+20.0", trailing commas, comments or control characters in strings (json-glib's
 * parser accepts some of these, so tests of JSON outputs check here first). Else FALSE with
 * @why (nullable; transfer full) naming the byte offset and what was expected. */
gboolean test_util_json_strict(const char *text, char **why);

/* Aborts the test (ck_abort) unless test_util_json_strict(@text); the message shows @text. */
void test_util_assert_json(const char *text);
