/* SPDX-License-Identifier: MIT
 * exec-checkpoint-unit.c: checkpoint units (exec-checkpoint-unit.h): writing one into a
 * temporary folder and renaming it into place, its manifest, reading a unit back with every
 * file checked against the manifest, choosing the newest complete unit of a run, and removing
 * stale temporaries and old units.
 */
#include "exec-checkpoint-unit.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h> /* renameat2(), RENAME_EXCHANGE (_GNU_SOURCE: the root meson.build) */
#include <string.h>
#include <unistd.h>

#include "pp-error.h"

#define EXEC_CKPT_UNIT_FORMAT  "pacer-checkpoint"
#define EXEC_CKPT_UNIT_VERSION 1
/* A manifest is a few hundred bytes. json-glib parses nesting recursively (a header nested
 * about 100000 deep overflows an 8 MiB stack), so the size bound also bounds the depth. */
#define EXEC_CKPT_UNIT_MAX_MANIFEST_BYTES (16 << 10)
#define EXEC_CKPT_UNIT_N_FILES            3

/* The files a manifest names, in the order they are written. */
static const char *const exec_ckpt_unit_files[EXEC_CKPT_UNIT_N_FILES] = {
    EXEC_CHECKPOINT_UNIT_MODEL,
    EXEC_CHECKPOINT_UNIT_STATE,
    EXEC_CHECKPOINT_UNIT_LOG,
};

typedef struct {
    guint64  size_bytes;
    char     sha256[65]; /* lower-case hex */
    gboolean verified;   /* its SHA-256 was checked */
} ExecCkptUnitFile;

struct _ExecCheckpointUnit {
    char            *dir;
    int32_t          step;
    char            *run;
    GHashTable      *identity;                      /* (nullable) char * -> char * */
    ExecCkptUnitFile files[EXEC_CKPT_UNIT_N_FILES]; /* as exec_ckpt_unit_files */
};

/* --- names --- */

char *exec_checkpoint_unit_name(int32_t step) {
    return g_strdup_printf("step-%08d", step);
}

/* Parses the decimal digits at @s (1 to 10, nothing after them) into @value <= G_MAXINT32. */
static gboolean exec_ckpt_unit_parse_digits(const char *s, int32_t *value) {
    size_t n = strspn(s, "0123456789");
    gint64 v = 0;
    if (n == 0 || n > 10 || s[n] != '\0' ||
        !g_ascii_string_to_signed(s, 10, 0, G_MAXINT32, &v, NULL))
        return FALSE;
    *value = (int32_t)v;
    return TRUE;
}

/* Whether @name is a unit folder's name as exec_checkpoint_unit_name() spells it; its step in
 * @step. */
static gboolean exec_ckpt_unit_parse_name(const char *name, int32_t *step) {
    if (!g_str_has_prefix(name, "step-") || !exec_ckpt_unit_parse_digits(name + 5, step))
        return FALSE;
    g_autofree char *canonical = exec_checkpoint_unit_name(*step);
    return strcmp(name, canonical) == 0;
}

/* Whether @name is a temporary unit folder's name, .step-DIGITS.tmp-DIGITS; the writer's pid
 * in @pid. */
static gboolean exec_ckpt_unit_parse_tmp_name(const char *name, int32_t *pid) {
    const char *tmp = strstr(name, ".tmp-");
    int32_t     step;
    if (!g_str_has_prefix(name, ".step-") || tmp == NULL)
        return FALSE;
    g_autofree char *digits = g_strndup(name + 6, (gsize)(tmp - name - 6));
    return exec_ckpt_unit_parse_digits(digits, &step) && exec_ckpt_unit_parse_digits(tmp + 5, pid);
}

/* --- file system helpers --- */

static gboolean exec_ckpt_unit_io_error(GError **error, const char *what, const char *path,
                                        int en) {
    g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot %s %s: %s", what, path,
                g_strerror(en));
    return FALSE;
}

/* Removes the folder @dir and the files in it (unit folders hold files only). */
static gboolean exec_ckpt_unit_remove_dir(const char *dir, GError **error) {
    g_autoptr(GError) local = NULL;
    g_autoptr(GDir) d = g_dir_open(dir, 0, &local);
    if (!d) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot remove %s: %s", dir,
                    local->message);
        return FALSE;
    }
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_unlink(path) != 0)
            return exec_ckpt_unit_io_error(error, "remove", path, errno);
    }
    if (g_rmdir(dir) != 0)
        return exec_ckpt_unit_io_error(error, "remove", dir, errno);
    return TRUE;
}

/* fsync of the folder @dir, so that the names created or renamed in it are durable. */
static gboolean exec_ckpt_unit_sync_dir(const char *dir, GError **error) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return exec_ckpt_unit_io_error(error, "open folder", dir, errno);
    /* EINVAL: a file system that cannot sync folders; its renames are what they are. */
    int en = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    if (en != 0 && en != EINVAL)
        return exec_ckpt_unit_io_error(error, "sync folder", dir, en);
    return TRUE;
}

/* Writes @text to the new file @path with fsync; its size and SHA-256 into @digest
 * (nullable). */
static gboolean exec_ckpt_unit_write_text(const char *path, const char *text,
                                          ExecCheckpointDigest *digest, GError **error) {
    size_t n = strlen(text);
    int    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return exec_ckpt_unit_io_error(error, "create", path, errno);
    size_t done = 0;
    int    en = 0;
    while (done < n && en == 0) {
        ssize_t w = write(fd, text + done, n - done);
        if (w > 0)
            done += (size_t)w;
        else if (w == 0 || errno != EINTR)
            en = w == 0 ? EIO : errno;
    }
    if (en == 0 && fsync(fd) != 0)
        en = errno;
    if (close(fd) != 0 && en == 0)
        en = errno;
    if (en != 0)
        return exec_ckpt_unit_io_error(error, "write", path, en);
    if (digest) {
        g_autofree char *sha = g_compute_checksum_for_string(G_CHECKSUM_SHA256, text, (gssize)n);
        digest->size_bytes = n;
        g_strlcpy(digest->sha256, sha, sizeof digest->sha256);
    }
    return TRUE;
}

/* The test hook of EXEC_CHECKPOINT_KILL_ENV. */
static void exec_ckpt_unit_kill_point(const char *point, int32_t step) {
    const char *at = g_getenv(EXEC_CHECKPOINT_KILL_ENV);
    if (at == NULL)
        return;
    g_autofree char *at_step = g_strdup_printf("%s@%d", point, step);
    if (strcmp(at, point) == 0 || strcmp(at, at_step) == 0)
        raise(SIGKILL);
}

/* --- the manifest --- */

/* The manifest of the unit @data whose files have @digests (as exec_ckpt_unit_files).
 * Returns: (transfer full) JSON text. */
static char *exec_ckpt_unit_manifest(const ExecCheckpointUnitData *data,
                                     const ExecCheckpointDigest   *digests) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "format");
    json_builder_add_string_value(b, EXEC_CKPT_UNIT_FORMAT);
    json_builder_set_member_name(b, "version");
    json_builder_add_int_value(b, EXEC_CKPT_UNIT_VERSION);
    json_builder_set_member_name(b, "step");
    json_builder_add_int_value(b, data->step);
    json_builder_set_member_name(b, "run");
    json_builder_add_string_value(b, data->run);
    if (data->identity) {
        json_builder_set_member_name(b, "identity");
        json_builder_begin_object(b);
        for (const char *const *p = data->identity; *p; p += 2) {
            json_builder_set_member_name(b, p[0]);
            json_builder_add_string_value(b, p[1]);
        }
        json_builder_end_object(b);
    }
    json_builder_set_member_name(b, "files");
    json_builder_begin_object(b);
    for (int i = 0; i < EXEC_CKPT_UNIT_N_FILES; i++) {
        json_builder_set_member_name(b, exec_ckpt_unit_files[i]);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "bytes");
        json_builder_add_int_value(b, (gint64)digests[i].size_bytes);
        json_builder_set_member_name(b, "sha256");
        json_builder_add_string_value(b, digests[i].sha256);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    g_autofree char *text = json_generator_to_data(gen, NULL);
    return g_strconcat(text, "\n", NULL);
}

static gboolean exec_ckpt_unit_corrupt(GError **error, const char *path, const char *what) {
    g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT, "%s: %s", path, what);
    return FALSE;
}

/* Member @key of @o as an integer in [@lo, @hi]. */
static gboolean exec_ckpt_unit_get_int(JsonObject *o, const char *key, gint64 lo, gint64 hi,
                                       gint64 *value) {
    JsonNode *n = json_object_get_member(o, key);
    if (!n || json_node_get_value_type(n) != G_TYPE_INT64)
        return FALSE;
    *value = json_node_get_int(n);
    return *value >= lo && *value <= hi;
}

/* Member @key of @o as a string (transfer none), or NULL. */
static const char *exec_ckpt_unit_get_str(JsonObject *o, const char *key) {
    JsonNode *n = json_object_get_member(o, key);
    return n && json_node_get_value_type(n) == G_TYPE_STRING ? json_node_get_string(n) : NULL;
}

static gboolean exec_ckpt_unit_is_sha256(const char *s) {
    return s && strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

/* The optional member identity of the manifest @o of @path into @unit: an object whose
 * members are strings. */
static gboolean exec_ckpt_unit_parse_identity(ExecCheckpointUnit *unit, const char *path,
                                              JsonObject *o, GError **error) {
    JsonNode *in = json_object_get_member(o, "identity");
    if (in == NULL)
        return TRUE;
    JsonObject *identity = JSON_NODE_HOLDS_OBJECT(in) ? json_node_get_object(in) : NULL;
    g_autoptr(GList) names = identity ? json_object_get_members(identity) : NULL;
    unit->identity = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (GList *l = names; l; l = l->next) {
        const char *value = exec_ckpt_unit_get_str(identity, l->data);
        if (value == NULL)
            break;
        g_hash_table_insert(unit->identity, g_strdup(l->data), g_strdup(value));
    }
    if (identity && g_hash_table_size(unit->identity) == g_list_length(names))
        return TRUE;
    return exec_ckpt_unit_corrupt(error, path,
                                  "identity must be an object whose members are strings");
}

/* Parses the manifest @text (@len bytes) of @path into @unit (step, run, identity, files). */
static gboolean exec_ckpt_unit_parse_manifest(ExecCheckpointUnit *unit, const char *path,
                                              const char *text, gsize len, GError **error) {
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!json_parser_load_from_data(parser, text, (gssize)len, &local)) {
        g_autofree char *what = g_strdup_printf("not valid JSON: %s", local->message);
        return exec_ckpt_unit_corrupt(error, path, what);
    }
    JsonNode   *root = json_parser_get_root(parser);
    JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    gint64      version = 0, step = 0;
    const char *run = o ? exec_ckpt_unit_get_str(o, "run") : NULL;
    if (!o || g_strcmp0(exec_ckpt_unit_get_str(o, "format"), EXEC_CKPT_UNIT_FORMAT) != 0 ||
        !exec_ckpt_unit_get_int(o, "version", EXEC_CKPT_UNIT_VERSION, EXEC_CKPT_UNIT_VERSION,
                                &version) ||
        !exec_ckpt_unit_get_int(o, "step", 0, G_MAXINT32, &step) || !run)
        return exec_ckpt_unit_corrupt(error, path,
                                      "a manifest is an object with format \"" EXEC_CKPT_UNIT_FORMAT
                                      "\", version 1, step (0 to 2^31 - 1), run and files");
    JsonNode   *fn = json_object_get_member(o, "files");
    JsonObject *files = fn && JSON_NODE_HOLDS_OBJECT(fn) ? json_node_get_object(fn) : NULL;
    if (!files || json_object_get_size(files) != EXEC_CKPT_UNIT_N_FILES)
        return exec_ckpt_unit_corrupt(error, path,
                                      "files must name exactly " EXEC_CHECKPOINT_UNIT_MODEL
                                      ", " EXEC_CHECKPOINT_UNIT_STATE
                                      " and " EXEC_CHECKPOINT_UNIT_LOG);
    for (int i = 0; i < EXEC_CKPT_UNIT_N_FILES; i++) {
        JsonNode   *en = json_object_get_member(files, exec_ckpt_unit_files[i]);
        JsonObject *e = en && JSON_NODE_HOLDS_OBJECT(en) ? json_node_get_object(en) : NULL;
        gint64      bytes = 0;
        const char *sha = e ? exec_ckpt_unit_get_str(e, "sha256") : NULL;
        if (!e || !exec_ckpt_unit_get_int(e, "bytes", 0, G_MAXINT64, &bytes) ||
            !exec_ckpt_unit_is_sha256(sha)) {
            g_autofree char *what =
                g_strdup_printf("files.\"%s\" needs bytes (an integer >= 0) and sha256 (64 "
                                "lower-case hex digits)",
                                exec_ckpt_unit_files[i]);
            return exec_ckpt_unit_corrupt(error, path, what);
        }
        unit->files[i].size_bytes = (guint64)bytes;
        g_strlcpy(unit->files[i].sha256, sha, sizeof unit->files[i].sha256);
    }
    unit->step = (int32_t)step;
    unit->run = g_strdup(run);
    return exec_ckpt_unit_parse_identity(unit, path, o, error);
}

/* --- writing --- */

/* Writes every file of @data into the fresh folder @tmp, the manifest last, and syncs it. */
static gboolean exec_ckpt_unit_write_files(const char *tmp, const ExecCheckpointUnitData *data,
                                           GError **error) {
    ExecCheckpointDigest digests[EXEC_CKPT_UNIT_N_FILES];
    g_autofree char     *model = g_build_filename(tmp, EXEC_CHECKPOINT_UNIT_MODEL, NULL);
    g_autofree char     *state = g_build_filename(tmp, EXEC_CHECKPOINT_UNIT_STATE, NULL);
    g_autofree char     *log = g_build_filename(tmp, EXEC_CHECKPOINT_UNIT_LOG, NULL);
    g_autofree char     *manifest = g_build_filename(tmp, EXEC_CHECKPOINT_UNIT_MANIFEST, NULL);
    if (!exec_checkpoint_write(model, data->model_cfg, data->model, NULL, EXEC_DTYPE_F32,
                               &digests[0], error))
        return FALSE;
    exec_ckpt_unit_kill_point("after-model", data->step);
    if (!exec_checkpoint_write(state, NULL, data->state, data->state_metadata, EXEC_DTYPE_F32,
                               &digests[1], error))
        return FALSE;
    exec_ckpt_unit_kill_point("after-state", data->step);
    if (!exec_ckpt_unit_write_text(log, data->log, &digests[2], error))
        return FALSE;
    exec_ckpt_unit_kill_point("before-manifest", data->step);
    g_autofree char *text = exec_ckpt_unit_manifest(data, digests);
    if (!exec_ckpt_unit_write_text(manifest, text, NULL, error))
        return FALSE;
    exec_ckpt_unit_kill_point("before-rename", data->step);
    return exec_ckpt_unit_sync_dir(tmp, error);
}

/* Renames the complete folder @tmp to @final. An existing @final (the same step written
 * before) is exchanged with it atomically and then removed from @tmp's name; where the file
 * system cannot exchange, it is removed first. */
static gboolean exec_ckpt_unit_place(const char *tmp, const char *final, GError **error) {
    if (g_rename(tmp, final) == 0)
        return TRUE;
    if (errno != ENOTEMPTY && errno != EEXIST)
        return exec_ckpt_unit_io_error(error, "rename into place", tmp, errno);
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0)
        return exec_ckpt_unit_remove_dir(tmp, error);
    if (errno != EINVAL && errno != ENOSYS)
        return exec_ckpt_unit_io_error(error, "exchange with the existing unit", final, errno);
    if (!exec_ckpt_unit_remove_dir(final, error))
        return FALSE;
    if (g_rename(tmp, final) != 0)
        return exec_ckpt_unit_io_error(error, "rename into place", tmp, errno);
    return TRUE;
}

char *exec_checkpoint_unit_write(const char *units_dir, const ExecCheckpointUnitData *data,
                                 GError **error) {
    PP_ASSERT(data->step >= 0); /* the caller's step count */
    if (!g_file_test(units_dir, G_FILE_TEST_IS_DIR)) {
        /* The first unit: the folder's own name must be durable too. */
        g_autofree char *parent = g_path_get_dirname(units_dir);
        if (g_mkdir_with_parents(units_dir, 0755) != 0) {
            exec_ckpt_unit_io_error(error, "create", units_dir, errno);
            return NULL;
        }
        if (!exec_ckpt_unit_sync_dir(parent, error))
            return NULL;
    }
    g_autofree char *name = exec_checkpoint_unit_name(data->step);
    g_autofree char *tmp_name = g_strdup_printf(".%s.tmp-%d", name, (int)getpid());
    g_autofree char *tmp = g_build_filename(units_dir, tmp_name, NULL);
    g_autofree char *final = g_build_filename(units_dir, name, NULL);
    /* Left by this process's own failed attempt at this step (another process's are removed
     * at its start: exec_checkpoint_units_remove_stale()). */
    if (g_file_test(tmp, G_FILE_TEST_IS_DIR) && !exec_ckpt_unit_remove_dir(tmp, error))
        return NULL;
    if (g_mkdir(tmp, 0755) != 0) {
        exec_ckpt_unit_io_error(error, "create", tmp, errno);
        return NULL;
    }
    if (!exec_ckpt_unit_write_files(tmp, data, error) || !exec_ckpt_unit_place(tmp, final, error)) {
        if (g_file_test(tmp, G_FILE_TEST_IS_DIR))
            exec_ckpt_unit_remove_dir(tmp, NULL); /* best effort: the first error is the news */
        return NULL;
    }
    if (!exec_ckpt_unit_sync_dir(units_dir, error))
        return NULL;
    exec_ckpt_unit_kill_point("after-rename", data->step);
    return g_steal_pointer(&final);
}

/* --- reading --- */

void exec_checkpoint_unit_free(ExecCheckpointUnit *unit) {
    if (!unit)
        return;
    g_free(unit->dir);
    g_free(unit->run);
    g_clear_pointer(&unit->identity, g_hash_table_unref);
    g_free(unit);
}

ExecCheckpointUnit *exec_checkpoint_unit_open(const char *dir, GError **error) {
    g_autoptr(ExecCheckpointUnit) unit = g_new0(ExecCheckpointUnit, 1);
    unit->dir = g_strdup(dir);
    g_autofree char *path = g_build_filename(dir, EXEC_CHECKPOINT_UNIT_MANIFEST, NULL);
    GStatBuf         st;
    if (g_stat(path, &st) != 0) {
        int en = errno;
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                    "checkpoint %s is incomplete: cannot read its " EXEC_CHECKPOINT_UNIT_MANIFEST
                    " (%s); a unit is complete only once its manifest is written",
                    dir, g_strerror(en));
        return NULL;
    }
    if (st.st_size > EXEC_CKPT_UNIT_MAX_MANIFEST_BYTES) {
        g_autofree char *what =
            g_strdup_printf("%" G_GINT64_FORMAT " bytes; a manifest has at "
                            "most %d",
                            (gint64)st.st_size, EXEC_CKPT_UNIT_MAX_MANIFEST_BYTES);
        exec_ckpt_unit_corrupt(error, path, what);
        return NULL;
    }
    g_autofree char *text = NULL;
    gsize            len = 0;
    if (!pp_file_read(path, "checkpoint manifest", &text, &len, error) ||
        !exec_ckpt_unit_parse_manifest(unit, path, text, len, error))
        return NULL;
    g_autofree char *base = g_path_get_basename(dir);
    int32_t          named = 0;
    if (exec_ckpt_unit_parse_name(base, &named) && named != unit->step) {
        g_autofree char *what =
            g_strdup_printf("records step %d but the folder is %s", unit->step, base);
        exec_ckpt_unit_corrupt(error, path, what);
        return NULL;
    }
    for (int i = 0; i < EXEC_CKPT_UNIT_N_FILES; i++) {
        g_autofree char *file = g_build_filename(dir, exec_ckpt_unit_files[i], NULL);
        g_autofree char *what = NULL;
        if (g_stat(file, &st) != 0)
            what = g_strdup("missing, though the manifest names it");
        else if ((guint64)st.st_size != unit->files[i].size_bytes)
            what = g_strdup_printf("%" G_GINT64_FORMAT " bytes, the manifest records "
                                   "%" G_GUINT64_FORMAT,
                                   (gint64)st.st_size, unit->files[i].size_bytes);
        if (what) {
            exec_ckpt_unit_corrupt(error, file, what);
            return NULL;
        }
    }
    return g_steal_pointer(&unit);
}

const char *exec_checkpoint_unit_dir(const ExecCheckpointUnit *unit) {
    return unit->dir;
}

int32_t exec_checkpoint_unit_step(const ExecCheckpointUnit *unit) {
    return unit->step;
}

const char *exec_checkpoint_unit_run(const ExecCheckpointUnit *unit) {
    return unit->run;
}

GHashTable *exec_checkpoint_unit_identity(const ExecCheckpointUnit *unit) {
    return unit->identity;
}

/* SHA-256 of the file @path (lower-case hex into @sha256), and its size. */
static gboolean exec_ckpt_unit_hash_file(const char *path, char *sha256, guint64 *size_bytes,
                                         GError **error) {
    g_autoptr(GError) local = NULL;
    GMappedFile *map = g_mapped_file_new(path, FALSE, &local);
    if (!map) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot read %s: %s", path,
                    local->message);
        return FALSE;
    }
    const guchar *data = (const guchar *)g_mapped_file_get_contents(map);
    gsize         len = g_mapped_file_get_length(map);
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    for (gsize at = 0; at < len; at += 64 << 20)
        g_checksum_update(sum, data + at, (gssize)MIN(len - at, (gsize)64 << 20));
    g_strlcpy(sha256, g_checksum_get_string(sum), 65);
    *size_bytes = len;
    g_mapped_file_unref(map);
    return TRUE;
}

char *exec_checkpoint_unit_verified_path(ExecCheckpointUnit *unit, const char *name,
                                         GError **error) {
    int i = 0;
    while (i < EXEC_CKPT_UNIT_N_FILES && strcmp(exec_ckpt_unit_files[i], name) != 0)
        i++;
    PP_ASSERT(i < EXEC_CKPT_UNIT_N_FILES); /* callers pass the EXEC_CHECKPOINT_UNIT_* names */
    ExecCkptUnitFile *file = &unit->files[i];
    g_autofree char  *path = g_build_filename(unit->dir, name, NULL);
    if (file->verified)
        return g_steal_pointer(&path);
    char    sha[65];
    guint64 size = 0;
    if (!exec_ckpt_unit_hash_file(path, sha, &size, error))
        return NULL;
    if (size != file->size_bytes || strcmp(sha, file->sha256) != 0) {
        /* Name the damaged tensor when the data is what changed. */
        if (g_str_has_suffix(name, ".safetensors") && !exec_checkpoint_verify(path, error))
            return NULL;
        g_autofree char *what = g_strdup_printf(
            "%" G_GUINT64_FORMAT " bytes of SHA-256 %s; the manifest records %" G_GUINT64_FORMAT
            " bytes of SHA-256 %s (the file is damaged)",
            size, sha, file->size_bytes, file->sha256);
        exec_ckpt_unit_corrupt(error, path, what);
        return NULL;
    }
    file->verified = TRUE;
    return g_steal_pointer(&path);
}

gboolean exec_checkpoint_unit_read_model(ExecCheckpointUnit *unit, const Gpt2Config *cfg,
                                         ExecTensorList *model, GError **error) {
    g_autofree char *path =
        exec_checkpoint_unit_verified_path(unit, EXEC_CHECKPOINT_UNIT_MODEL, error);
    return path && exec_checkpoint_load(path, cfg, model, NULL, error);
}

gboolean exec_checkpoint_unit_read_state(ExecCheckpointUnit *unit, ExecTensorList *state,
                                         GHashTable **metadata, GError **error) {
    g_autofree char *path =
        exec_checkpoint_unit_verified_path(unit, EXEC_CHECKPOINT_UNIT_STATE, error);
    return path && exec_checkpoint_load_state(path, state, metadata, error);
}

char *exec_checkpoint_unit_read_log(ExecCheckpointUnit *unit, GError **error) {
    g_autofree char *path =
        exec_checkpoint_unit_verified_path(unit, EXEC_CHECKPOINT_UNIT_LOG, error);
    char *text = NULL;
    if (!path || !pp_file_read(path, "checkpoint log", &text, NULL, error))
        return NULL;
    return text;
}

/* --- choosing a unit --- */

static int exec_ckpt_unit_cmp_desc(gconstpointer a, gconstpointer b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x < y) - (x > y);
}

/* The steps of the unit folders in @units_dir, newest first (empty when it cannot be read). */
static GArray *exec_ckpt_unit_list(const char *units_dir) {
    GArray *steps = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_autoptr(GDir) d = g_dir_open(units_dir, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d)) != NULL;) {
        int32_t          step;
        g_autofree char *path = g_build_filename(units_dir, name, NULL);
        if (exec_ckpt_unit_parse_name(name, &step) && g_file_test(path, G_FILE_TEST_IS_DIR))
            g_array_append_val(steps, step);
    }
    g_array_sort(steps, exec_ckpt_unit_cmp_desc);
    return steps;
}

/* Opens @dir and runs @read on it. */
static ExecCheckpointUnit *exec_ckpt_unit_try(const char *dir, ExecCheckpointUnitReadFn read,
                                              gpointer user_data, GError **error) {
    g_autoptr(ExecCheckpointUnit) unit = exec_checkpoint_unit_open(dir, error);
    if (!unit || !read(unit, user_data, error))
        return NULL;
    return g_steal_pointer(&unit);
}

/* The newest unit of the run folder @run that @read accepts, skipping incomplete and damaged
 * ones. */
static ExecCheckpointUnit *exec_ckpt_unit_find_in_run(const char              *run,
                                                      ExecCheckpointUnitReadFn read,
                                                      gpointer user_data, GPtrArray *notes,
                                                      GError **error) {
    g_autofree char *units_dir = g_build_filename(run, EXEC_CHECKPOINT_UNITS_DIR, NULL);
    g_autoptr(GArray) steps = exec_ckpt_unit_list(units_dir);
    g_autoptr(GString) why = g_string_new(NULL);
    for (guint i = 0; i < steps->len; i++) {
        g_autofree char    *name = exec_checkpoint_unit_name(g_array_index(steps, int32_t, i));
        g_autofree char    *dir = g_build_filename(units_dir, name, NULL);
        GError             *local = NULL;
        ExecCheckpointUnit *unit = exec_ckpt_unit_try(dir, read, user_data, &local);
        if (unit)
            return unit;
        if (!g_error_matches(local, PP_IO_ERROR, PP_IO_ERROR_OPEN) &&
            !g_error_matches(local, PP_IO_ERROR, PP_IO_ERROR_CORRUPT)) {
            g_propagate_error(error, local);
            return NULL;
        }
        if (notes)
            g_ptr_array_add(notes, g_strdup_printf("skipped %s: %s", dir, local->message));
        g_string_append_printf(why, "; %s: %s", name, local->message);
        g_error_free(local);
    }
    if (steps->len == 0)
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                    "%s holds no checkpoint (folders step-NNNNNNNN): nothing to resume", units_dir);
    else
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT, "%s holds no complete checkpoint%s",
                    units_dir, why->str);
    return NULL;
}

ExecCheckpointUnit *exec_checkpoint_unit_find(const char *path, ExecCheckpointUnitReadFn read,
                                              gpointer user_data, GPtrArray *notes,
                                              GError **error) {
    if (!g_file_test(path, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                    "checkpoint %s: %s; give a checkpoint unit (RUN/" EXEC_CHECKPOINT_UNITS_DIR
                    "/step-NNNNNNNN) or a run folder holding " EXEC_CHECKPOINT_UNITS_DIR "/",
                    path,
                    g_file_test(path, G_FILE_TEST_EXISTS) ? "not a folder"
                                                          : "no such file or folder");
        return NULL;
    }
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *manifest = g_build_filename(path, EXEC_CHECKPOINT_UNIT_MANIFEST, NULL);
    g_autofree char *units_dir = g_build_filename(path, EXEC_CHECKPOINT_UNITS_DIR, NULL);
    int32_t          step;
    if (exec_ckpt_unit_parse_name(base, &step) || g_file_test(manifest, G_FILE_TEST_EXISTS))
        return exec_ckpt_unit_try(path, read, user_data, error);
    if (g_file_test(units_dir, G_FILE_TEST_IS_DIR))
        return exec_ckpt_unit_find_in_run(path, read, user_data, notes, error);
    g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                "%s is neither a checkpoint unit (it has no " EXEC_CHECKPOINT_UNIT_MANIFEST
                ") nor a run folder (it has no " EXEC_CHECKPOINT_UNITS_DIR "/)",
                path);
    return NULL;
}

/* --- housekeeping --- */

static int exec_ckpt_unit_cmp_names(gconstpointer a, gconstpointer b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Removes the folder @name of @units_dir, adding its path to @removed (nullable). */
static gboolean exec_ckpt_unit_remove_named(const char *units_dir, const char *name,
                                            GPtrArray *removed, GError **error) {
    g_autofree char *path = g_build_filename(units_dir, name, NULL);
    if (!exec_ckpt_unit_remove_dir(path, error))
        return FALSE;
    if (removed)
        g_ptr_array_add(removed, g_steal_pointer(&path));
    return TRUE;
}

/* Which folders of a units folder a removal takes. */
typedef gboolean (*ExecCkptUnitPick)(const char *units_dir, const char *name);

/* Removes the folders of @units_dir that @pick takes, in name order, adding their paths to
 * @removed (nullable). A missing @units_dir is no error. */
static gboolean exec_ckpt_unit_remove_picked(const char *units_dir, ExecCkptUnitPick pick,
                                             GPtrArray *removed, GError **error) {
    g_autoptr(GDir) d = g_dir_open(units_dir, 0, NULL);
    if (!d)
        return TRUE;
    /* Collect first: removing while reading a folder may skip entries. */
    g_autoptr(GPtrArray) picked = g_ptr_array_new_with_free_func(g_free);
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
        if (pick(units_dir, name))
            g_ptr_array_add(picked, g_strdup(name));
    }
    g_ptr_array_sort(picked, exec_ckpt_unit_cmp_names);
    for (guint i = 0; i < picked->len; i++) {
        if (!exec_ckpt_unit_remove_named(units_dir, g_ptr_array_index(picked, i), removed, error))
            return FALSE;
    }
    return TRUE;
}

/* ExecCkptUnitPick: another process's temporary unit. */
static gboolean exec_ckpt_unit_pick_stale(const char *units_dir, const char *name) {
    (void)units_dir;
    int32_t pid;
    return exec_ckpt_unit_parse_tmp_name(name, &pid) && pid != (int32_t)getpid();
}

/* ExecCkptUnitPick: a unit or a temporary one, a real folder (lstat: a link is not a folder
 * pacer wrote, and what it points to stays). */
static gboolean exec_ckpt_unit_pick_any(const char *units_dir, const char *name) {
    int32_t          n;
    GStatBuf         st;
    g_autofree char *path = g_build_filename(units_dir, name, NULL);
    return (exec_ckpt_unit_parse_name(name, &n) || exec_ckpt_unit_parse_tmp_name(name, &n)) &&
           g_lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

gboolean exec_checkpoint_units_remove_stale(const char *units_dir, GPtrArray *removed,
                                            GError **error) {
    return exec_ckpt_unit_remove_picked(units_dir, exec_ckpt_unit_pick_stale, removed, error);
}

gboolean exec_checkpoint_units_remove_all(const char *units_dir, GPtrArray *removed,
                                          GError **error) {
    if (!g_file_test(units_dir, G_FILE_TEST_IS_DIR))
        return TRUE;
    if (!exec_ckpt_unit_remove_picked(units_dir, exec_ckpt_unit_pick_any, removed, error))
        return FALSE;
    /* Another tool's files keep the folder (and themselves); a link to one stays. */
    if (g_rmdir(units_dir) == 0) {
        if (removed)
            g_ptr_array_add(removed, g_strdup(units_dir));
    } else if (errno != ENOTEMPTY && errno != EEXIST && errno != ENOTDIR) {
        return exec_ckpt_unit_io_error(error, "remove", units_dir, errno);
    }
    return TRUE;
}

gboolean exec_checkpoint_units_prune(const char *units_dir, int32_t step, int32_t keep,
                                     GPtrArray *removed, GError **error) {
    g_autoptr(GArray) steps = exec_ckpt_unit_list(units_dir);
    int32_t n_complete = 0;
    for (guint i = 0; i < steps->len; i++) {
        int32_t          s = g_array_index(steps, int32_t, i);
        g_autofree char *name = exec_checkpoint_unit_name(s);
        if (s > step || (keep > 0 && n_complete >= keep)) {
            if (!exec_ckpt_unit_remove_named(units_dir, name, removed, error))
                return FALSE;
            continue;
        }
        g_autofree char *dir = g_build_filename(units_dir, name, NULL);
        g_autoptr(ExecCheckpointUnit) unit = exec_checkpoint_unit_open(dir, NULL);
        n_complete += unit != NULL;
    }
    return TRUE;
}
