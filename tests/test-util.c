/* SPDX-License-Identifier: MIT
 * test-util.c: helpers shared by the Check test programs (see test-util.h).
 */
#include "test-util.h"

#include <check.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

char *test_util_tmp_dir_new(const char *tmpl) {
    g_autoptr(GError) error = NULL;
    char *dir = g_dir_make_tmp(tmpl, &error);
    ck_assert_msg(dir != NULL, "cannot make a folder from %s: %s", tmpl,
                  error ? error->message : "");
    return dir;
}

gboolean test_util_tmp_dir_remove(const char *dir) {
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    if (d == NULL)
        return FALSE;
    gboolean    ok = TRUE;
    const char *name;
    while ((name = g_dir_read_name(d)) != NULL) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        gboolean         is_dir =
            g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK);
        ok = (is_dir ? test_util_tmp_dir_remove(path) : g_unlink(path) == 0) && ok;
    }
    return g_rmdir(dir) == 0 && ok;
}

static int test_util_cmp_names(gconstpointer a, gconstpointer b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *test_util_list_dir(const char *dir) {
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    for (const char *name; (name = g_dir_read_name(d)) != NULL;)
        g_ptr_array_add(names, g_strdup(name));
    g_ptr_array_sort(names, test_util_cmp_names);
    g_ptr_array_add(names, NULL);
    return g_strjoinv(" ", (char **)names->pdata);
}

/* Appends a line per file under @dir/@rel (@rel nullable: @dir itself), recursively. */
static void test_util_snapshot_into(const char *dir, const char *rel, GPtrArray *out) {
    g_autofree char *path = rel ? g_build_filename(dir, rel, NULL) : g_strdup(dir);
    g_autoptr(GDir) d = g_dir_open(path, 0, NULL);
    ck_assert_msg(d != NULL, "cannot list %s", path);
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
        g_autofree char *sub = rel ? g_build_filename(rel, name, NULL) : g_strdup(name);
        g_autofree char *file = g_build_filename(dir, sub, NULL);
        if (g_file_test(file, G_FILE_TEST_IS_DIR)) {
            test_util_snapshot_into(dir, sub, out);
            continue;
        }
        gsize            len = 0;
        g_autofree char *bytes = test_util_read_file(file, &len);
        g_autofree char *sha = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (guchar *)bytes, len);
        g_ptr_array_add(out, g_strdup_printf("%s %" G_GSIZE_FORMAT " %s", sub, len, sha));
    }
}

char *test_util_snapshot(const char *dir) {
    g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func(g_free);
    test_util_snapshot_into(dir, NULL, lines);
    g_ptr_array_sort(lines, test_util_cmp_names);
    g_ptr_array_add(lines, NULL);
    return g_strjoinv("\n", (char **)lines->pdata);
}

void test_util_tmp_init(TestUtilTmp *t, const char *tmpl, const char *file_name) {
    t->dir = test_util_tmp_dir_new(tmpl);
    t->path = g_build_filename(t->dir, file_name, NULL);
}

void test_util_tmp_clear(TestUtilTmp *t) {
    test_util_tmp_dir_remove(t->dir);
    g_free(t->dir);
    g_free(t->path);
}

char *test_util_read_file(const char *path, gsize *len) {
    char *text = NULL;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(g_file_get_contents(path, &text, len, &error), "cannot read %s: %s", path,
                  error ? error->message : "");
    return text;
}

int test_util_spawn_status(const char *program, const char *const *args, const char *const *env_set,
                           char **out, char **err) {
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)program);
    for (const char *const *a = args; *a != NULL; a++)
        g_ptr_array_add(argv, (gpointer)*a);
    g_ptr_array_add(argv, NULL);
    g_auto(GStrv) envp = g_get_environ();
    for (const char *const *v = env_set; v && *v; v++) {
        g_auto(GStrv) kv = g_strsplit(*v, "=", 2);
        envp = g_environ_setenv(envp, kv[0], kv[1] ? kv[1] : "", TRUE);
    }
    g_autofree char *o = NULL, *e = NULL;
    int              wait_status = 0;
    g_autoptr(GError) error = NULL;
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &o,
                               &e, &wait_status, &error);
    ck_assert_msg(ok, "cannot run %s: %s", program, ok ? "" : error->message);
    if (out != NULL)
        *out = g_steal_pointer(&o);
    if (err != NULL)
        *err = g_steal_pointer(&e);
    return wait_status;
}

int test_util_spawn(const char *program, const char *const *args, char **out, char **err) {
    int wait_status = test_util_spawn_status(program, args, NULL, out, err);
    ck_assert_msg(WIFEXITED(wait_status), "%s did not exit normally", program);
    return WEXITSTATUS(wait_status);
}

GPid test_util_spawn_piped(const char *program, const char *const *args, int *stdout_fd) {
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)program);
    for (const char *const *a = args; *a != NULL; a++)
        g_ptr_array_add(argv, (gpointer)*a);
    g_ptr_array_add(argv, NULL);
    GPid pid = 0;
    g_autoptr(GError) error = NULL;
    gboolean ok = g_spawn_async_with_pipes(NULL, (char **)argv->pdata, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDERR_TO_DEV_NULL,
                                           NULL, NULL, &pid, NULL, stdout_fd, NULL, &error);
    ck_assert_msg(ok, "cannot start %s: %s", program, ok ? "" : error->message);
    return pid;
}

void test_util_collect_files(const char *dir, const char *suffix, GPtrArray *out) {
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_DIR))
            test_util_collect_files(path, suffix, out);
        else if (g_str_has_suffix(name, suffix))
            g_ptr_array_add(out, g_steal_pointer(&path));
    }
}

PpScheduleParams test_util_schedule_params(const char *kind, int32_t n_stages, int32_t n_chunks,
                                           int32_t m, int32_t a, int32_t n_steps) {
    return (PpScheduleParams){.kind = kind != NULL ? pp_sched_kind_lookup(kind) : NULL,
                              .n_stages = n_stages,
                              .n_chunks = n_chunks,
                              .n_microbatches = m,
                              .accumulation = a,
                              .n_steps = n_steps};
}

PpSchedule *test_util_schedule_build(const PpScheduleParams *params) {
    g_autoptr(GError) error = NULL;
    PpSchedule *sched = pp_schedule_new(params, &error);
    ck_assert_msg(sched != NULL, "%s N=%d v=%d m=%d a=%d steps=%d: %s",
                  params->kind ? params->kind->name : "(none)", params->n_stages, params->n_chunks,
                  params->n_microbatches, params->accumulation, params->n_steps,
                  error ? error->message : "");
    return sched;
}

PpSchedule *test_util_schedule_new(const char *kind, int32_t n_stages, int32_t n_chunks, int32_t m,
                                   int32_t a, int32_t n_steps) {
    PpScheduleParams params = test_util_schedule_params(kind, n_stages, n_chunks, m, a, n_steps);
    params.f_ns = params.b_ns = params.w_ns = 1000;
    return test_util_schedule_build(&params);
}

void test_util_case(const char *name) {
    fprintf(stderr, "case %s\n", name);
}

PpSchedule *test_util_scenario_schedule_new(const PpScenario *sc) {
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    return test_util_schedule_build(&params);
}

void test_util_program_versions(const PpSchedule *sched, const PpTraceRow *row, int32_t *version_f,
                                int32_t *version_b) {
    ck_assert_int_ne(row->kind, PP_OP_UPDATE);
    int32_t vs = pp_schedule_vstage(sched, row->stage, row->chunk);
    int32_t f = pp_schedule_find_op(sched, PP_OP_FORWARD, row->mb, vs);
    int32_t b = pp_schedule_find_op(
        sched, sched->split_backward ? PP_OP_BACKWARD : PP_OP_BACKWARD_FULL, row->mb, vs);
    ck_assert_int_ge(f, 0);
    ck_assert_int_ge(b, 0);
    *version_f = pp_schedule_version_used(sched, pp_schedule_op_ref(sched, f));
    *version_b = pp_schedule_version_used(sched, pp_schedule_op_ref(sched, b));
}

char *test_util_cache_dir(void) {
    /* the rule of data_cache_dir() in data/data-corpus.c, without linking the data library */
    const char *env = g_getenv("PACER_CACHE");
    if (env && *env)
        return g_strdup(env);
    return g_build_filename(PP_SOURCE_ROOT, ".cache", NULL);
}

void test_util_data_init(TestUtilData *d) {
    g_autofree char *cache = test_util_cache_dir();
    g_autofree char *encoder = g_build_filename(cache, "gpt2", "encoder.json", NULL);
    g_autofree char *vocab = g_build_filename(cache, "gpt2", "vocab.bpe", NULL);
    g_autofree char *corpus = g_build_filename(cache, "sotu", NULL);
    d->have_data = g_file_test(encoder, G_FILE_TEST_IS_REGULAR) &&
                   g_file_test(vocab, G_FILE_TEST_IS_REGULAR) &&
                   g_file_test(corpus, G_FILE_TEST_IS_DIR);
    d->skipped = g_ptr_array_new_with_free_func(g_free);
}

void test_util_data_add(TestUtilData *d, TCase *tc, const TTest *test, int start, int end) {
    if (d->have_data) {
        _tcase_add_test(tc, test, 0, 0, start, end);
        return;
    }
    for (int i = start; i < end; i++)
        g_ptr_array_add(d->skipped, end - start > 1 ? g_strdup_printf("%s:%d", test->name, i)
                                                    : g_strdup(test->name));
}

/* Copies Check's TAP from @path to stdout without its plan line; returns the number of test
 * lines. */
static int test_util_copy_tap(const char *path) {
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    int n = 0;
    for (char **l = lines; *l; l++) {
        if (**l == '\0' || g_str_has_prefix(*l, "1.."))
            continue;
        if (g_str_has_prefix(*l, "ok ") || g_str_has_prefix(*l, "not ok "))
            n++;
        printf("%s\n", *l);
    }
    return n;
}

int test_util_data_run(TestUtilData *d, Suite *s) {
    g_autofree char *tap = g_strdup(g_getenv("CK_TAP_LOG_FILE_NAME"));
    gboolean         tap_stdout = d->skipped->len > 0 && tap && g_str_equal(tap, "-");
    /* Check prints its plan after the last case; with skipped cases to add, its TAP goes to a
     * file and is copied without the plan, which is printed after them. */
    /* (outside a test: no ck_assert here) */
    g_autofree char *tap_dir = tap_stdout ? g_dir_make_tmp("test-tap-XXXXXX", NULL) : NULL;
    if (tap_stdout && tap_dir == NULL)
        g_error("cannot make a temporary folder for the TAP output");
    g_autofree char *tap_path = tap_dir ? g_build_filename(tap_dir, "tap", NULL) : NULL;
    if (tap_path)
        g_setenv("CK_TAP_LOG_FILE_NAME", tap_path, TRUE);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    fflush(stdout);
    if (tap_path) {
        int n = test_util_copy_tap(tap_path);
        for (guint i = 0; i < d->skipped->len; i++)
            printf("ok %d - %s # SKIP %s\n", ++n, (const char *)d->skipped->pdata[i],
                   TEST_UTIL_NO_DATA);
        printf("1..%d\n", n);
        g_setenv("CK_TAP_LOG_FILE_NAME", tap, TRUE);
        test_util_tmp_dir_remove(tap_dir);
    } else {
        for (guint i = 0; i < d->skipped->len; i++)
            printf("SKIP %s: %s\n", (const char *)d->skipped->pdata[i], TEST_UTIL_NO_DATA);
    }
    fflush(stdout);
    g_clear_pointer(&d->skipped, g_ptr_array_unref);
    return n_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* A strict recursive-descent JSON reader (RFC 8259) that only checks. */
typedef struct {
    const char *text;
    const char *p;
    const char *expected; /* what was expected where it stopped */
} TestUtilJson;

static gboolean test_util_json_value(TestUtilJson *j, int depth);

static void test_util_json_space(TestUtilJson *j) {
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
        j->p++;
}

static gboolean test_util_json_fail(TestUtilJson *j, const char *expected) {
    j->expected = expected;
    return FALSE;
}

static gboolean test_util_json_digits(TestUtilJson *j) {
    if (!g_ascii_isdigit(*j->p))
        return test_util_json_fail(j, "a digit");
    while (g_ascii_isdigit(*j->p))
        j->p++;
    return TRUE;
}

static gboolean test_util_json_number(TestUtilJson *j) {
    if (*j->p == '-')
        j->p++;
    if (*j->p == '0')
        j->p++; /* no leading zeros: "01" stops after the 0 */
    else if (!test_util_json_digits(j))
        return FALSE;
    if (*j->p == '.') {
        j->p++;
        if (!test_util_json_digits(j))
            return FALSE;
    }
    if (*j->p == 'e' || *j->p == 'E') {
        j->p++;
        if (*j->p == '+' || *j->p == '-')
            j->p++;
        if (!test_util_json_digits(j))
            return FALSE;
    }
    return TRUE;
}

static gboolean test_util_json_string(TestUtilJson *j) {
    if (*j->p != '"')
        return test_util_json_fail(j, "a string");
    j->p++;
    while (*j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c == '\0' || c < 0x20)
            return test_util_json_fail(j, "a closing quote (no control characters in strings)");
        if (c == '\\') {
            j->p++;
            if (*j->p == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (!g_ascii_isxdigit(j->p[k]))
                        return test_util_json_fail(j, "four hex digits after \\u");
                j->p += 4;
            } else if (*j->p == '\0' || strchr("\"\\/bfnrt", *j->p) == NULL) {
                return test_util_json_fail(j, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
            }
        }
        j->p++;
    }
    j->p++;
    return TRUE;
}

static gboolean test_util_json_literal(TestUtilJson *j, const char *word) {
    if (strncmp(j->p, word, strlen(word)) != 0)
        return test_util_json_fail(j, "a value");
    j->p += strlen(word);
    return TRUE;
}

/* '{' or '[' at j->p: members or elements up to the closing bracket. */
static gboolean test_util_json_container(TestUtilJson *j, int depth) {
    char close = *j->p == '{' ? '}' : ']';
    j->p++;
    test_util_json_space(j);
    if (*j->p == close) {
        j->p++;
        return TRUE;
    }
    for (;;) {
        if (close == '}') {
            if (!test_util_json_string(j))
                return FALSE;
            test_util_json_space(j);
            if (*j->p != ':')
                return test_util_json_fail(j, "':'");
            j->p++;
        }
        if (!test_util_json_value(j, depth + 1))
            return FALSE;
        test_util_json_space(j);
        if (*j->p == close) {
            j->p++;
            return TRUE;
        }
        if (*j->p != ',')
            return test_util_json_fail(j, close == '}' ? "',' or '}'" : "',' or ']'");
        j->p++;
        test_util_json_space(j); /* then a member or element: "[1,]" fails there */
    }
}

static gboolean test_util_json_value(TestUtilJson *j, int depth) {
    if (depth > 256)
        return test_util_json_fail(j, "less nesting (256 levels at most)");
    test_util_json_space(j);
    switch (*j->p) {
    case '{':
    case '[':
        return test_util_json_container(j, depth);
    case '"':
        return test_util_json_string(j);
    case 't':
        return test_util_json_literal(j, "true");
    case 'f':
        return test_util_json_literal(j, "false");
    case 'n':
        return test_util_json_literal(j, "null");
    default:
        if (*j->p == '-' || g_ascii_isdigit(*j->p))
            return test_util_json_number(j);
        return test_util_json_fail(j, "a value");
    }
}

gboolean test_util_json_strict(const char *text, char **why) {
    const char *end = NULL;
    if (!g_utf8_validate(text, -1, &end)) {
        if (why)
            *why = g_strdup_printf("byte %td: not UTF-8", end - text);
        return FALSE;
    }
    TestUtilJson j = {text, text, NULL};
    gboolean     ok = test_util_json_value(&j, 0);
    if (ok) {
        test_util_json_space(&j);
        ok = *j.p == '\0' || test_util_json_fail(&j, "the end of the text");
    }
    if (!ok && why)
        *why =
            g_strdup_printf("byte %td: expected %s, found \"%.12s\"", j.p - text, j.expected, j.p);
    return ok;
}

void test_util_assert_json(const char *text) {
    g_autofree char *why = NULL;
    ck_assert_msg(text != NULL, "no JSON text");
    ck_assert_msg(test_util_json_strict(text, &why), "not strict JSON (%s): %s", why, text);
}

void test_util_append_replica(PpTrace *out, const PpTrace *sim, int32_t replica, int64_t sync_ns,
                              int64_t origin_ns) {
    for (int64_t i = 0; i < sim->n_rows; i++) {
        PpTraceRow row = sim->rows[i];
        int64_t    shift = origin_ns + (row.step + (row.kind == PP_OP_UPDATE)) * sync_ns;
        row.start_ns += shift;
        row.end_ns += shift;
        row.replica = replica;
        pp_trace_append(out, &row);
        if (row.kind != PP_OP_UPDATE)
            continue;
        PpTraceRow reduce = row;
        reduce.resource = PP_RESOURCE_REDUCE;
        reduce.end_ns = row.start_ns;
        if (replica == 0) {
            reduce.start_ns = row.start_ns - sync_ns;
            reduce.end_ns = row.start_ns - sync_ns / 2;
            pp_trace_append(out, &reduce);
            reduce.start_ns = row.start_ns - 3 * sync_ns / 4;
            reduce.end_ns = row.start_ns;
        } else {
            reduce.start_ns = row.start_ns - sync_ns - 500;
        }
        pp_trace_append(out, &reduce);
    }
}
