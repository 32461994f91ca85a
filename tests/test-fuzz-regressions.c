/* SPDX-License-Identifier: MIT
 * test-fuzz-regressions.c: replays every file of tests/data/fuzz-regressions/TARGET/ (inputs
 * that once crashed, hung or leaked under scripts/fuzz) through the fuzz target's own entry
 * function in this build. Each must run to completion within TEST_FUZZ_MAX_MIB of memory (a
 * few bytes of input must not cost gigabytes); a file named error-* must be refused with a
 * GError, one named ok-* accepted. The bpe target needs the GPT-2 vocabulary cache.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fuzz-targets.h"
#include "pp-error.h"
#include "test-util.h"

#define TEST_FUZZ_DIR PP_SOURCE_ROOT "/tests/data/fuzz-regressions"
/* Address space a replay may add to what the test program has mapped when it starts. */
#define TEST_FUZZ_MAX_MIB 256

/* Caps this process's address space at what it maps now plus TEST_FUZZ_MAX_MIB: an input that
 * needs more makes an allocation fail, which aborts (g_malloc). Check runs each test in a
 * forked child, so the cap ends with the test (with CK_FORK=no it stays). */
static void test_fuzz_cap_memory(void) {
    g_autofree char *status = test_util_read_file("/proc/self/status", NULL);
    const char      *vm = strstr(status, "VmSize:");
    ck_assert_ptr_nonnull(vm);
    rlim_t        kib = (rlim_t)g_ascii_strtoull(vm + strlen("VmSize:"), NULL, 10);
    struct rlimit cap = {(kib + TEST_FUZZ_MAX_MIB * 1024) * 1024, RLIM_INFINITY};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &cap), 0);
}

static gint test_fuzz_cmp_names(gconstpointer a, gconstpointer b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The file names in @dir, sorted; an empty array when @dir does not exist. */
static GPtrArray *test_fuzz_list(const char *dir) {
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    GDir      *d = g_dir_open(dir, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d));)
        g_ptr_array_add(names, g_strdup(name));
    if (d)
        g_dir_close(d);
    g_ptr_array_sort(names, test_fuzz_cmp_names);
    return names;
}

static void test_fuzz_replay(const FuzzTarget *target, const char *path, const char *name) {
    gsize            len = 0;
    g_autofree char *data = test_util_read_file(path, &len);
    g_autofree char *scratch = test_util_tmp_dir_new("test-fuzz-XXXXXX");
    g_autoptr(GError) error = NULL;
    fprintf(stderr, "replaying %s\n", path); /* names the file if the run crashes */
    gboolean ok = target->run(scratch, (const uint8_t *)data, len, &error);
    ck_assert(test_util_tmp_dir_remove(scratch));
    ck_assert_msg(ok == (error == NULL), "%s: returned %d with error %s", path, ok,
                  error ? error->message : "(none)");
    /* The entry writes the files it reads: failing to open one is the environment's fault. */
    ck_assert_msg(!g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_OPEN), "%s: %s", path,
                  error ? error->message : "");
    if (g_str_has_prefix(name, "error-"))
        ck_assert_msg(!ok, "%s: accepted, expected a GError", path);
    else
        ck_assert_msg(ok, "%s: refused (%s), expected to be accepted", path, error->message);
}

/* Every regression file of target _i runs to completion with the expected outcome. */
START_TEST(test_fuzz_regressions_replay) {
    const FuzzTarget *target = &fuzz_targets()[_i];
    g_autofree char  *dir = g_build_filename(TEST_FUZZ_DIR, target->name, NULL);
    g_autoptr(GPtrArray) names = test_fuzz_list(dir);
    test_fuzz_cap_memory();
    for (guint k = 0; k < names->len; k++) {
        const char      *name = g_ptr_array_index(names, k);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        test_fuzz_replay(target, path, name);
    }
}
END_TEST

/* The folder holds only target folders of files named error-* or ok-*, so that no file is
 * silently skipped, and at least one file. */
START_TEST(test_fuzz_regressions_layout) {
    g_autoptr(GPtrArray) targets = test_fuzz_list(TEST_FUZZ_DIR);
    guint n_files = 0;
    for (guint i = 0; i < targets->len; i++) {
        const char *t = g_ptr_array_index(targets, i);
        ck_assert_msg(fuzz_target_lookup(t) != NULL, "%s/%s is not a fuzz target", TEST_FUZZ_DIR,
                      t);
        g_autofree char *dir = g_build_filename(TEST_FUZZ_DIR, t, NULL);
        g_autoptr(GPtrArray) names = test_fuzz_list(dir);
        for (guint k = 0; k < names->len; k++) {
            const char *name = g_ptr_array_index(names, k);
            ck_assert_msg(g_str_has_prefix(name, "error-") || g_str_has_prefix(name, "ok-"),
                          "%s/%s: name it error-* (refused) or ok-* (accepted)", dir, name);
        }
        n_files += names->len;
    }
    ck_assert_uint_ge(n_files, 1);
}
END_TEST

int main(void) {
    int n_targets = 0;
    while (fuzz_targets()[n_targets].name)
        n_targets++;
    Suite *s = suite_create("fuzz-regressions");
    TCase *tc = tcase_create("fuzz-regressions");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_fuzz_regressions_replay, 0, n_targets);
    tcase_add_test(tc, test_fuzz_regressions_layout);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
