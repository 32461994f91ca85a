/* SPDX-License-Identifier: MIT
 * exec-train-out.c: whether pacer-train may write into its output folder. A folder that holds
 * any file a run writes there (log.csv, ops.csv, scenario.ini, memory.csv, checkpoints/) holds
 * a run: only a resume of that run continues in it, and only --overwrite starts over there,
 * removing those files and the checkpoint units and nothing else.
 */
#include "exec-train-private.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "exec-checkpoint-unit.h"
#include "pp-error.h"

/* What a run writes in its folder: these files, then the units folder. */
#define EXEC_TRAIN_OUT_N_FILES 4
static const char *const exec_train_out_names[EXEC_TRAIN_OUT_N_FILES + 1] = {
    "log.csv", "ops.csv", "scenario.ini", "memory.csv", EXEC_CHECKPOINT_UNITS_DIR,
};

/* The names of @dir that mark a run, ", "-separated ("" when none). Returns: (transfer full). */
static char *exec_train_out_marks(const char *dir) {
    GString *marks = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(exec_train_out_names); i++) {
        GStatBuf         st;
        g_autofree char *path = g_build_filename(dir, exec_train_out_names[i], NULL);
        if (g_lstat(path, &st) == 0)
            g_string_append_printf(marks, "%s%s", marks->len ? ", " : "", exec_train_out_names[i]);
    }
    return g_string_free(marks, FALSE);
}

/* ExecCheckpointUnitReadFn that takes any unit whose manifest and files check out. */
static gboolean exec_train_out_any_unit(ExecCheckpointUnit *unit, gpointer user_data,
                                        GError **error) {
    (void)unit;
    (void)user_data;
    (void)error;
    return TRUE;
}

/* Whether @dir holds a complete checkpoint unit, one a --resume of it could start from. */
static gboolean exec_train_out_has_unit(const char *dir) {
    g_autoptr(ExecCheckpointUnit) unit =
        exec_checkpoint_unit_find(dir, exec_train_out_any_unit, NULL, NULL, NULL);
    return unit != NULL;
}

/* Whether @unit_dir (a unit folder) lies in @dir/checkpoints, the same folder however named. */
static gboolean exec_train_out_holds_unit(const char *dir, const char *unit_dir) {
    g_autofree char *units = g_path_get_dirname(unit_dir);
    g_autofree char *run = g_path_get_dirname(units);
    g_autofree char *base = g_path_get_basename(units);
    GStatBuf         a, b;
    return g_strcmp0(base, EXEC_CHECKPOINT_UNITS_DIR) == 0 && g_stat(run, &a) == 0 &&
           g_stat(dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void exec_train_say_kept(const GPtrArray *kept) {
    for (guint i = 0; kept && i < kept->len; i++)
        g_message("not removed: %s", (const char *)g_ptr_array_index(kept, i));
}

/* Whether every name of a run in @dir is what pacer-train writes there: a regular file, and
 * checkpoints/ a folder, each itself (lstat). A symbolic link or another kind of entry of such
 * a name is refused with PP_IO_ERROR_EXISTS naming it before anything is removed. */
static gboolean exec_train_out_check_kinds(const char *dir, GError **error) {
    for (size_t i = 0; i < G_N_ELEMENTS(exec_train_out_names); i++) {
        GStatBuf         st;
        g_autofree char *path = g_build_filename(dir, exec_train_out_names[i], NULL);
        gboolean         folder = i == EXEC_TRAIN_OUT_N_FILES;
        if (g_lstat(path, &st) != 0 || (folder ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))
            continue;
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_EXISTS,
                    "--overwrite: %s is %s, not the %s pacer-train writes there: nothing was "
                    "changed (pacer never removes through a link nor what it did not write); "
                    "move it away yourself or give another --out",
                    path, S_ISLNK(st.st_mode) ? "a symbolic link" : "of another kind",
                    folder ? "folder" : "file");
        return FALSE;
    }
    return TRUE;
}

/* Removes what a run wrote in @dir, saying what in the log. */
static gboolean exec_train_out_remove(const char *dir, GError **error) {
    if (!exec_train_out_check_kinds(dir, error))
        return FALSE;
    g_autoptr(GPtrArray) removed = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *units = g_build_filename(dir, EXEC_CHECKPOINT_UNITS_DIR, NULL);
    gboolean         ok = exec_checkpoint_units_remove_all(units, removed, kept, error);
    for (size_t i = 0; ok && i < EXEC_TRAIN_OUT_N_FILES; i++) {
        g_autofree char *path = g_build_filename(dir, exec_train_out_names[i], NULL);
        /* A regular file (checked above); unlink never follows a link that replaced it. */
        if (g_unlink(path) == 0) {
            g_ptr_array_add(removed, g_steal_pointer(&path));
        } else if (errno != ENOENT) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "--overwrite: cannot remove %s: %s",
                        path, g_strerror(errno));
            ok = FALSE;
        }
    }
    for (guint i = 0; i < removed->len; i++)
        g_message("--overwrite: removed %s", (const char *)g_ptr_array_index(removed, i));
    exec_train_say_kept(kept);
    return ok;
}

gboolean exec_train_out_prepare(const char *dir, const char *resumed_unit, gboolean overwrite,
                                GError **error) {
    g_autofree char *marks = exec_train_out_marks(dir);
    gboolean         own = resumed_unit && exec_train_out_holds_unit(dir, resumed_unit);
    if (own && overwrite) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_EXISTS,
                    "--overwrite would remove %s, the checkpoint --resume continues from: give "
                    "one of the two (--resume continues the run in %s; --overwrite starts over "
                    "without it)",
                    resumed_unit, dir);
        return FALSE;
    }
    if (marks[0] == '\0' || own)
        return TRUE;
    if (overwrite)
        return exec_train_out_remove(dir, error);
    if (!exec_train_out_has_unit(dir)) {
        /* A run stopped before its first unit: there is nothing a --resume could continue. */
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_EXISTS,
                    "--out %s holds %s of another run%s, which wrote no complete checkpoint unit "
                    "(nothing to resume): nothing was changed. Start over with --overwrite "
                    "(removes log.csv, ops.csv, scenario.ini, memory.csv and the checkpoint "
                    "units there, nothing else), or give another --out",
                    dir, marks, resumed_unit ? " than the one --resume continues" : "");
        return FALSE;
    }
    g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_EXISTS,
                "--out %s holds %s of another run%s: nothing was changed. Continue that run "
                "with --resume %s, start over with --overwrite (removes log.csv, ops.csv, "
                "scenario.ini, memory.csv and the checkpoint units there, nothing else), or "
                "give another --out",
                dir, marks, resumed_unit ? " than the one --resume continues" : "", dir);
    return FALSE;
}
