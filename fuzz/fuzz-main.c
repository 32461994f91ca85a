/* SPDX-License-Identifier: MIT
 * fuzz-main.c: the libFuzzer glue of one fuzz-TARGET executable (FUZZ_TARGET names it): a
 * scratch folder for parsers that read files, made once under $TMPDIR and removed at exit, and
 * each input handed to the target's entry function (fuzz-targets.h). Built by -Dfuzz=true.
 */
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz-targets.h"
#include "pp-error.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const FuzzTarget *fuzz_main_target;
static char             *fuzz_main_dir; /* scratch folder, flat */

static void fuzz_main_cleanup(void) {
    GDir *d = g_dir_open(fuzz_main_dir, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d));) {
        g_autofree char *path = g_build_filename(fuzz_main_dir, name, NULL);
        g_remove(path);
    }
    if (d)
        g_dir_close(d);
    g_rmdir(fuzz_main_dir);
    g_free(fuzz_main_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_main_target = fuzz_target_lookup(FUZZ_TARGET);
    PP_ASSERT(fuzz_main_target != NULL); /* meson builds one executable per table entry */
    g_autoptr(GError) error = NULL;
    fuzz_main_dir = g_dir_make_tmp("pacer-fuzz-XXXXXX", &error);
    if (!fuzz_main_dir) {
        fprintf(stderr, "fuzz-%s: cannot make a scratch folder: %s\n", FUZZ_TARGET, error->message);
        exit(1);
    }
    atexit(fuzz_main_cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g_autoptr(GError) error = NULL;
    gboolean ok = fuzz_main_target->run(fuzz_main_dir, data, size, &error);
    PP_ASSERT(ok == (error == NULL)); /* GError convention: FALSE exactly when set */
    return 0;
}
