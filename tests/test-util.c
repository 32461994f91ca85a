/* SPDX-License-Identifier: MIT
 * test-util.c: helpers shared by the Check test programs (see test-util.h).
 */
#include "test-util.h"

#include <check.h>
#include <glib/gstdio.h>
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

PpSchedule *test_util_schedule_new(const char *kind, int32_t n_stages, int32_t n_chunks, int32_t m,
                                   int32_t a, int32_t n_steps) {
    PpScheduleParams params = {.kind = kind,
                               .n_stages = n_stages,
                               .n_chunks = n_chunks,
                               .n_microbatches = m,
                               .accumulation = a,
                               .n_steps = n_steps,
                               .f_ns = 1000,
                               .b_ns = 1000,
                               .w_ns = 1000,
                               .comm_ns = 0};
    g_autoptr(GError) error = NULL;
    PpSchedule *sched = pp_schedule_new(&params, &error);
    ck_assert_msg(sched != NULL, "%s N=%d v=%d m=%d a=%d steps=%d: %s", kind, n_stages, n_chunks, m,
                  a, n_steps, error ? error->message : "");
    return sched;
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
