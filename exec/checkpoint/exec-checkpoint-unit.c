/* SPDX-License-Identifier: MIT
 * exec-checkpoint-unit.c: checkpoint units (exec-checkpoint-unit.h): writing one into a
 * temporary folder and renaming it into place, its manifest, reading a unit back with every
 * file checked against the manifest, choosing the newest complete unit of a run, and removing
 * stale temporaries and old units.
 */
#include "exec-checkpoint-unit.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h> /* renameat2(), RENAME_EXCHANGE (_GNU_SOURCE: the root meson.build) */
#include <string.h>
#include <sys/stat.h>
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

/* Whether @name is a file pacer writes in a unit folder: one of the unit's files, or a
 * safetensors file's temporary (NAME.tmp-XXXXXX, exec_checkpoint_write()). */
static gboolean exec_ckpt_unit_is_own_file(const char *name) {
    if (strcmp(name, EXEC_CHECKPOINT_UNIT_MANIFEST) == 0)
        return TRUE;
    for (int i = 0; i < EXEC_CKPT_UNIT_N_FILES; i++) {
        size_t n = strlen(exec_ckpt_unit_files[i]);
        if (strncmp(name, exec_ckpt_unit_files[i], n) != 0)
            continue;
        if (name[n] == '\0')
            return TRUE;
        const char *tmp = name + n;
        if (g_str_has_prefix(tmp, ".tmp-") && strlen(tmp + 5) == 6 &&
            strspn(tmp + 5, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") == 6)
            return TRUE;
    }
    return FALSE;
}

/* Says why the entry @path stays: into @kept (nullable) as "PATH: WHY", else as the error. */
static gboolean exec_ckpt_unit_keep(GPtrArray *kept, const char *path, const char *why,
                                    GError **error) {
    if (kept) {
        g_ptr_array_add(kept, g_strdup_printf("%s: %s", path, why));
        return TRUE;
    }
    g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE,
                "cannot remove %s: %s; pacer removes only the unit folders it wrote", path, why);
    return FALSE;
}

/* The entries of the open folder @fd (@path, for messages) into @files when every one is a
 * regular file of a name pacer writes in a unit (exec_ckpt_unit_is_own_file()); otherwise
 * *@foreign (transfer full) says which is not. */
static gboolean exec_ckpt_unit_list_own(int fd, const char *path, GPtrArray *files, char **foreign,
                                        GError **error) {
    int  dup_fd = dup(fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (d == NULL) {
        int en = errno;
        if (dup_fd >= 0)
            close(dup_fd);
        return exec_ckpt_unit_io_error(error, "read folder", path, en);
    }
    for (struct dirent *e; *foreign == NULL && (e = readdir(d)) != NULL;) {
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (exec_ckpt_unit_is_own_file(e->d_name) &&
            fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            g_ptr_array_add(files, g_strdup(e->d_name));
        else
            *foreign =
                g_strdup_printf("it holds %s, which pacer did not write; left in place", e->d_name);
    }
    closedir(d);
    return TRUE;
}

/* Removes the unit folder @name of the open folder @parent_fd (@path: its path, for messages)
 * when it is one pacer wrote: a folder itself, never a link (O_NOFOLLOW), that holds only
 * regular files of the names pacer writes there. The files go by name relative to the
 * folder's descriptor (unlinkat), so nothing outside it is reached, then the folder. Anything
 * else stays, said in @kept (nullable: then it is an error). A missing entry is no error.
 * @was_removed (nullable) says whether it went. */
static gboolean exec_ckpt_unit_remove_at(int parent_fd, const char *name, const char *path,
                                         GPtrArray *kept, gboolean *was_removed, GError **error) {
    if (was_removed)
        *was_removed = FALSE;
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return TRUE;
        if (errno == ELOOP || errno == ENOTDIR)
            return exec_ckpt_unit_keep(kept, path,
                                       "a symbolic link or not a folder, left in place with "
                                       "what it points to",
                                       error);
        return exec_ckpt_unit_io_error(error, "open folder", path, errno);
    }
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *foreign = NULL;
    gboolean         ok = exec_ckpt_unit_list_own(fd, path, files, &foreign, error);
    if (ok && foreign)
        ok = exec_ckpt_unit_keep(kept, path, foreign, error);
    if (!ok || foreign) {
        close(fd);
        return ok;
    }
    for (guint i = 0; ok && i < files->len; i++) {
        const char *file = g_ptr_array_index(files, i);
        if (unlinkat(fd, file, 0) != 0 && errno != ENOENT) {
            g_autofree char *file_path = g_build_filename(path, file, NULL);
            ok = exec_ckpt_unit_io_error(error, "remove", file_path, errno);
        }
    }
    close(fd);
    if (!ok)
        return FALSE;
    if (unlinkat(parent_fd, name, AT_REMOVEDIR) != 0) {
        if (errno == ENOTEMPTY || errno == EEXIST)
            return exec_ckpt_unit_keep(kept, path,
                                       "something was added to it meanwhile; left "
                                       "in place",
                                       error);
        return exec_ckpt_unit_io_error(error, "remove", path, errno);
    }
    if (was_removed)
        *was_removed = TRUE;
    return TRUE;
}

/* Opens the folder @dir for exec_ckpt_unit_remove_at(): -1 with errno set when it cannot. */
static int exec_ckpt_unit_open_dir(const char *dir) {
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* exec_ckpt_unit_remove_at() of the folder @dir, by its parent; an error for anything kept. */
static gboolean exec_ckpt_unit_remove_dir(const char *dir, GError **error) {
    g_autofree char *parent = g_path_get_dirname(dir);
    g_autofree char *name = g_path_get_basename(dir);
    int              parent_fd = exec_ckpt_unit_open_dir(parent);
    if (parent_fd < 0)
        return exec_ckpt_unit_io_error(error, "open folder", parent, errno);
    gboolean ok = exec_ckpt_unit_remove_at(parent_fd, name, dir, NULL, NULL, error);
    close(parent_fd);
    return ok;
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
    /* Test hook: a storage slower than the peers' deadline. */
    const char *slow = g_getenv(EXEC_CHECKPOINT_SLOW_ENV);
    if (slow)
        g_usleep((gulong)(g_ascii_strtod(slow, NULL) * G_USEC_PER_SEC));
    return exec_ckpt_unit_sync_dir(tmp, error);
}

/* Renames the complete folder @tmp to @final. An existing @final (the same step written
 * before) is exchanged with it atomically and then removed from @tmp's name; where the file
 * system cannot exchange, it is removed first. */
static gboolean exec_ckpt_unit_place(const char *tmp, const char *final, GError **error) {
    if (g_rename(tmp, final) == 0)
        return TRUE;
    if (errno == ENOTDIR) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE,
                    "cannot rename %s into place: %s is a symbolic link or not a folder, which "
                    "pacer leaves in place; remove or rename it",
                    tmp, final);
        return FALSE;
    }
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
    if (!exec_ckpt_unit_remove_dir(tmp, error))
        return NULL;
    if (g_mkdir(tmp, 0755) != 0) {
        exec_ckpt_unit_io_error(error, "create", tmp, errno);
        return NULL;
    }
    if (!exec_ckpt_unit_write_files(tmp, data, error) || !exec_ckpt_unit_place(tmp, final, error)) {
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

/* Which entries of a units folder a removal takes, by name. */
typedef gboolean (*ExecCkptUnitPick)(const char *name);

/* Removes the entries of @units_dir that @pick takes, in name order, as
 * exec_ckpt_unit_remove_at() does, adding the paths removed to @removed and what stays to
 * @kept (both nullable). A missing @units_dir is no error. */
static gboolean exec_ckpt_unit_remove_picked(const char *units_dir, ExecCkptUnitPick pick,
                                             GPtrArray *removed, GPtrArray *kept, GError **error) {
    int fd = exec_ckpt_unit_open_dir(units_dir);
    if (fd < 0)
        return errno == ENOENT ? TRUE
                               : exec_ckpt_unit_io_error(error, "open folder", units_dir, errno);
    /* Collect first: removing while reading a folder may skip entries. */
    g_autoptr(GPtrArray) picked = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) d = g_dir_open(units_dir, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d)) != NULL;) {
        if (pick(name))
            g_ptr_array_add(picked, g_strdup(name));
    }
    g_ptr_array_sort(picked, exec_ckpt_unit_cmp_names);
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < picked->len; i++) {
        const char      *name = g_ptr_array_index(picked, i);
        g_autofree char *path = g_build_filename(units_dir, name, NULL);
        gboolean         gone = FALSE;
        ok = exec_ckpt_unit_remove_at(fd, name, path, kept, &gone, error);
        if (gone && removed)
            g_ptr_array_add(removed, g_steal_pointer(&path));
    }
    close(fd);
    return ok;
}

/* ExecCkptUnitPick: another process's temporary unit. */
static gboolean exec_ckpt_unit_pick_stale(const char *name) {
    int32_t pid;
    return exec_ckpt_unit_parse_tmp_name(name, &pid) && pid != (int32_t)getpid();
}

/* ExecCkptUnitPick: a unit or a temporary one. */
static gboolean exec_ckpt_unit_pick_any(const char *name) {
    int32_t n;
    return exec_ckpt_unit_parse_name(name, &n) || exec_ckpt_unit_parse_tmp_name(name, &n);
}

gboolean exec_checkpoint_units_remove_stale(const char *units_dir, GPtrArray *removed,
                                            GPtrArray *kept, GError **error) {
    return exec_ckpt_unit_remove_picked(units_dir, exec_ckpt_unit_pick_stale, removed, kept, error);
}

gboolean exec_checkpoint_units_remove_all(const char *units_dir, GPtrArray *removed,
                                          GPtrArray *kept, GError **error) {
    GStatBuf st;
    if (g_lstat(units_dir, &st) != 0)
        return errno == ENOENT ? TRUE : exec_ckpt_unit_io_error(error, "read", units_dir, errno);
    if (!S_ISDIR(st.st_mode))
        return exec_ckpt_unit_keep(kept, units_dir,
                                   "a symbolic link or not a folder, left in place with what it "
                                   "points to",
                                   error);
    if (!exec_ckpt_unit_remove_picked(units_dir, exec_ckpt_unit_pick_any, removed, kept, error))
        return FALSE;
    /* Another tool's files keep the folder (and themselves). */
    if (g_rmdir(units_dir) == 0) {
        if (removed)
            g_ptr_array_add(removed, g_strdup(units_dir));
    } else if (errno != ENOTEMPTY && errno != EEXIST) {
        return exec_ckpt_unit_io_error(error, "remove", units_dir, errno);
    }
    return TRUE;
}

gboolean exec_checkpoint_units_prune(const char *units_dir, int32_t step, int32_t keep,
                                     GPtrArray *removed, GPtrArray *kept, GError **error) {
    g_autoptr(GArray) steps = exec_ckpt_unit_list(units_dir);
    int fd = exec_ckpt_unit_open_dir(units_dir);
    if (fd < 0)
        return errno == ENOENT ? TRUE
                               : exec_ckpt_unit_io_error(error, "open folder", units_dir, errno);
    int32_t  n_complete = 0;
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < steps->len; i++) {
        int32_t          s = g_array_index(steps, int32_t, i);
        g_autofree char *name = exec_checkpoint_unit_name(s);
        g_autofree char *dir = g_build_filename(units_dir, name, NULL);
        if (s > step || (keep > 0 && n_complete >= keep)) {
            gboolean gone = FALSE;
            ok = exec_ckpt_unit_remove_at(fd, name, dir, kept, &gone, error);
            if (gone && removed)
                g_ptr_array_add(removed, g_steal_pointer(&dir));
            continue;
        }
        /* Only a folder itself counts as a unit kept: a link is none of pacer's. */
        GStatBuf st;
        if (g_lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        g_autoptr(ExecCheckpointUnit) unit = exec_checkpoint_unit_open(dir, NULL);
        n_complete += unit != NULL;
    }
    close(fd);
    return ok;
}
