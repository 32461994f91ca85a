/* SPDX-License-Identifier: MIT
 * test-golden.c: golden traces. pacer-sim simulates tiny scenarios (tests/data/sim/NAME.ini,
 * explicit [costs]) and its ops.csv must equal tests/data/golden/NAME.csv byte for byte.
 * PP_UPDATE_GOLDEN=1 rewrites the golden files instead (review the diff before committing).
 */
#include <check.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define SIM_BIN    PP_BUILD_ROOT "/sim/pacer-sim"
#define DATA_DIR   PP_SOURCE_ROOT "/tests/data/sim"
#define GOLDEN_DIR PP_SOURCE_ROOT "/tests/data/golden"

static const char *const golden_names[] = {"1f1b", "interleaved", "zb-h1", "paci"};

/* Runs pacer-sim on tests/data/sim/@name.ini with --out @dir; returns its exit status. */
static int run_sim(const char *name, const char *dir, char **err) {
    g_autofree char *scenario = g_strdup_printf("%s/%s.ini", DATA_DIR, name);
    const char      *argv[] = {SIM_BIN, scenario, "--out", dir, NULL};
    int              wait_status = 0;
    g_autoptr(GError) error = NULL;
    gboolean ok = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                               NULL, err, &wait_status, &error);
    ck_assert_msg(ok, "spawn %s: %s", SIM_BIN, ok ? "" : error->message);
    ck_assert(WIFEXITED(wait_status));
    return WEXITSTATUS(wait_status);
}

START_TEST(test_golden_ops) {
    const char      *name = golden_names[_i];
    g_autofree char *dir = g_dir_make_tmp("pacer-golden-XXXXXX", NULL);
    ck_assert_ptr_nonnull(dir);
    g_autofree char *err = NULL;
    int              status = run_sim(name, dir, &err);
    ck_assert_msg(status == 0, "%s: exit %d: %s", name, status, err);

    g_autofree char *ops_path = g_build_filename(dir, "ops.csv", NULL);
    g_autofree char *golden_path = g_strdup_printf("%s/%s.csv", GOLDEN_DIR, name);
    g_autofree char *ops = NULL, *golden = NULL;
    gsize            ops_len = 0, golden_len = 0;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(g_file_get_contents(ops_path, &ops, &ops_len, &error), "%s",
                  error ? error->message : "");

    const char *update = g_getenv("PP_UPDATE_GOLDEN");
    if (update != NULL && strcmp(update, "1") == 0) {
        ck_assert_msg(g_file_set_contents(golden_path, ops, (gssize)ops_len, &error), "%s",
                      error ? error->message : "");
    } else {
        ck_assert_msg(g_file_get_contents(golden_path, &golden, &golden_len, NULL),
                      "%s is missing: run with PP_UPDATE_GOLDEN=1 to create it", golden_path);
        /* On a mismatch, name the first line that differs. */
        if (ops_len != golden_len || memcmp(ops, golden, ops_len) != 0) {
            g_auto(GStrv) got = g_strsplit(ops, "\n", -1);
            g_auto(GStrv) want = g_strsplit(golden, "\n", -1);
            guint line = 0;
            while (got[line] != NULL && want[line] != NULL && strcmp(got[line], want[line]) == 0)
                line++;
            ck_abort_msg("%s: ops.csv differs from %s at line %u: got '%s', want '%s'", name,
                         golden_path, line + 1, got[line] ? got[line] : "(end)",
                         want[line] ? want[line] : "(end)");
        }
    }

    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *entry;
    while ((entry = g_dir_read_name(d)) != NULL) {
        g_autofree char *p = g_build_filename(dir, entry, NULL);
        ck_assert_int_eq(g_unlink(p), 0);
    }
    ck_assert_int_eq(g_rmdir(dir), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("ops");
    tcase_add_loop_test(tc, test_golden_ops, 0, G_N_ELEMENTS(golden_names));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
