/* SPDX-License-Identifier: MIT
 * test-golden.c: golden traces. pacer-sim simulates tiny scenarios (tests/data/sim/NAME.ini,
 * explicit [costs]) and its ops.csv must equal tests/data/golden/NAME.csv byte for byte.
 * PP_UPDATE_GOLDEN=1 rewrites the golden files instead (review the diff before committing).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "test-util.h"

#define SIM_BIN    PP_BUILD_ROOT "/sim/pacer-sim"
#define DATA_DIR   PP_SOURCE_ROOT "/tests/data/sim"
#define GOLDEN_DIR PP_SOURCE_ROOT "/tests/data/golden"

static const char *const golden_names[] = {"1f1b", "interleaved", "zb-h1", "paci"};

/* Runs pacer-sim on tests/data/sim/@name.ini with --out @dir; returns its exit status. */
static int run_sim(const char *name, const char *dir, char **err) {
    g_autofree char *scenario = g_strdup_printf("%s/%s.ini", DATA_DIR, name);
    const char      *args[] = {scenario, "--out", dir, NULL};
    return test_util_spawn(SIM_BIN, args, NULL, err);
}

START_TEST(test_golden_ops) {
    const char      *name = golden_names[_i];
    g_autofree char *dir = test_util_tmp_dir_new("pacer-golden-XXXXXX");
    g_autofree char *err = NULL;
    int              status = run_sim(name, dir, &err);
    ck_assert_msg(status == 0, "%s: exit %d: %s", name, status, err);

    g_autofree char *ops_path = g_build_filename(dir, "ops.csv", NULL);
    g_autofree char *golden_path = g_strdup_printf("%s/%s.csv", GOLDEN_DIR, name);
    gsize            ops_len = 0, golden_len = 0;
    g_autofree char *ops = test_util_read_file(ops_path, &ops_len);
    g_autofree char *golden = NULL;
    g_autoptr(GError) error = NULL;

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

    ck_assert(test_util_tmp_dir_remove(dir));
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
