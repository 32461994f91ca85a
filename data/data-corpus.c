/* SPDX-License-Identifier: MIT
 * data-corpus.c: corpus discovery, the document-level train/val split, shard building and the
 * input-keyed shard cache (cache/shards/<sha256 of vocabulary, split rule and file contents>).
 */
#include "data-corpus.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "data-shard.h"
#include "pp-error.h"

/* Bumped when the shard contents for the same inputs would change (split rule, layout). */
#define DATA_CORPUS_KEY_VERSION "pacer-shards 1"

void data_params_init(DataCorpusParams *params) {
    memset(params, 0, sizeof *params);
    params->val_fraction = DATA_VAL_FRACTION_DEFAULT;
}

char *data_cache_dir(const char *cache_dir) {
    if (cache_dir)
        return g_strdup(cache_dir);
    const char *env = g_getenv(DATA_CACHE_ENV);
    if (env && *env)
        return g_strdup(env);
    return g_build_filename(PP_SOURCE_ROOT, ".cache", NULL);
}

DataBpe *data_bpe_new_from_cache(const char *cache_dir, GError **error) {
    g_autofree char *cache = data_cache_dir(cache_dir);
    g_autofree char *dir = g_build_filename(cache, "gpt2", NULL);
    return data_bpe_new_from_dir(dir, error);
}

static gint data_corpus_cmp_path(gconstpointer a, gconstpointer b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends @dir's *.txt files, sorted by name. */
static gboolean data_corpus_add_dir(GPtrArray *files, const char *dir, const char *hint,
                                    GError **error) {
    g_autoptr(GError) local = NULL;
    g_autoptr(GDir) d = g_dir_open(dir, 0, &local);
    if (!d) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot list corpus folder %s: %s%s", dir,
                    local->message, hint);
        return FALSE;
    }
    g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_str_has_suffix(name, ".txt") && g_file_test(path, G_FILE_TEST_IS_REGULAR))
            g_ptr_array_add(found, g_steal_pointer(&path));
    }
    if (found->len == 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "corpus folder %s holds no .txt files%s",
                    dir, hint);
        return FALSE;
    }
    g_ptr_array_sort(found, data_corpus_cmp_path);
    for (guint i = 0; i < found->len; i++)
        g_ptr_array_add(files, g_strdup(g_ptr_array_index(found, i)));
    return TRUE;
}

GPtrArray *data_corpus_find(const char *const *paths, const char *cache_dir, GError **error) {
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    if (!paths || !paths[0]) {
        g_autofree char *cache = data_cache_dir(cache_dir);
        g_autofree char *sotu = g_build_filename(cache, "sotu", NULL);
        if (!data_corpus_add_dir(files, sotu, " (run scripts/setup to fetch the default corpus)",
                                 error))
            return NULL;
        return g_steal_pointer(&files);
    }
    for (const char *const *p = paths; *p; p++) {
        if (g_file_test(*p, G_FILE_TEST_IS_DIR)) {
            if (!data_corpus_add_dir(files, *p, "", error))
                return NULL;
        } else if (g_file_test(*p, G_FILE_TEST_IS_REGULAR)) {
            g_ptr_array_add(files, g_strdup(*p));
        } else {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                        "corpus path %s is neither a file nor a folder of .txt files", *p);
            return NULL;
        }
    }
    return g_steal_pointer(&files);
}

gboolean data_corpus_is_val(int64_t index, double val_fraction) {
    PP_ASSERT(index >= 0 && val_fraction >= 0.0 && val_fraction < 1.0);
    return floor((double)(index + 1) * val_fraction) > floor((double)index * val_fraction);
}

/* Narrows int32 ids to the shard's uint16 and writes them. */
static gboolean data_corpus_write(const char *path, GArray *ids, const DataBpe *bpe,
                                  GError **error) {
    g_autofree uint16_t *tok = g_new(uint16_t, ids->len + 1);
    for (guint i = 0; i < ids->len; i++) {
        int32_t id = g_array_index(ids, int32_t, i);
        PP_ASSERT(id >= 0 && id < 65536); /* data_bpe_new bounds the vocabulary */
        tok[i] = (uint16_t)id;
    }
    return data_shard_write(path, tok, ids->len, data_bpe_n_vocab(bpe), data_bpe_fingerprint(bpe),
                            error);
}

gboolean data_corpus_build(DataBpe *bpe, GPtrArray *files, double val_fraction,
                           const char *train_path, const char *val_path, DataSplitStats *train,
                           DataSplitStats *val, GError **error) {
    int32_t eot = data_bpe_eot(bpe);
    if (eot < 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "the vocabulary has no " DATA_BPE_EOT_TEXT " token to separate documents");
        return FALSE;
    }
    g_autoptr(GArray) train_ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_autoptr(GArray) val_ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    GArray        *ids[2] = {train_ids, val_ids};
    DataSplitStats stats[2] = {{0, 0}, {0, 0}};
    for (guint i = 0; i < files->len; i++) {
        const char      *path = g_ptr_array_index(files, i);
        int              split = data_corpus_is_val(i, val_fraction) ? 1 : 0;
        g_autofree char *text = NULL;
        gsize            len = 0;
        g_autoptr(GError) local = NULL;
        if (!pp_file_read(path, "corpus file", &text, &len, error))
            return FALSE;
        g_array_append_val(ids[split], eot);
        if (!data_bpe_encode(bpe, text, (gssize)len, DATA_BPE_ENCODE_PLAIN, ids[split], &local)) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT, "corpus file %s: %s", path,
                        local->message);
            return FALSE;
        }
        stats[split].n_docs++;
    }
    for (int s = 0; s < 2; s++)
        stats[s].n_tokens = ids[s]->len;
    if (!data_corpus_write(train_path, ids[0], bpe, error) ||
        !data_corpus_write(val_path, ids[1], bpe, error))
        return FALSE;
    if (train)
        *train = stats[0];
    if (val)
        *val = stats[1];
    return TRUE;
}

/* Hex sha256 over the vocabulary, the split rule and every file's contents, in order. */
static char *data_corpus_key(const DataBpe *bpe, GPtrArray *files, double val_fraction,
                             GError **error) {
    g_autoptr(GChecksum) key = g_checksum_new(G_CHECKSUM_SHA256);
    char line[64];
    g_checksum_update(key, (const guchar *)DATA_CORPUS_KEY_VERSION "\n", -1);
    g_checksum_update(key, data_bpe_fingerprint(bpe), DATA_BPE_FINGERPRINT_BYTES);
    g_snprintf(line, sizeof line, "\nval_fraction %.17g\n", val_fraction);
    g_checksum_update(key, (const guchar *)line, -1);
    for (guint i = 0; i < files->len; i++) {
        const char      *path = g_ptr_array_index(files, i);
        g_autofree char *text = NULL;
        gsize            len = 0;
        if (!pp_file_read(path, "corpus file", &text, &len, error))
            return NULL;
        g_autofree char *doc =
            g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)text, len);
        g_checksum_update(key, (const guchar *)doc, -1);
        g_checksum_update(key, (const guchar *)"\n", 1);
    }
    return g_strdup(g_checksum_get_string(key));
}

/* Counts of an existing shard pair, or FALSE when either is missing or invalid. */
static gboolean data_corpus_reuse(const DataBpe *bpe, const char *train_path, const char *val_path,
                                  guint n_files, double val_fraction, DataSplitStats *train,
                                  DataSplitStats *val) {
    const char    *paths[2] = {train_path, val_path};
    DataSplitStats stats[2] = {{0, 0}, {0, 0}};
    for (int s = 0; s < 2; s++) {
        g_autoptr(DataShard) shard = data_shard_open(paths[s], data_bpe_fingerprint(bpe), NULL);
        if (!shard)
            return FALSE;
        uint64_t n = 0;
        data_shard_tokens(shard, &n);
        stats[s].n_tokens = (int64_t)n;
    }
    for (guint i = 0; i < n_files; i++)
        stats[data_corpus_is_val(i, val_fraction) ? 1 : 0].n_docs++;
    if (train)
        *train = stats[0];
    if (val)
        *val = stats[1];
    return TRUE;
}

gboolean data_prepare(const DataCorpusParams *params, char **train_path, char **val_path,
                      DataSplitStats *train, DataSplitStats *val, GError **error) {
    if (!(params->val_fraction >= 0.0 && params->val_fraction < 1.0)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "val_fraction %g is outside [0, 1)", params->val_fraction);
        return FALSE;
    }
    g_autofree char *cache = data_cache_dir(params->cache_dir);
    g_autoptr(DataBpe) bpe = data_bpe_new_from_cache(cache, error);
    if (!bpe)
        return FALSE;
    g_autoptr(GPtrArray) files = data_corpus_find(params->paths, cache, error);
    if (!files)
        return FALSE;

    g_autofree char *out = NULL;
    if (params->out_dir) {
        out = g_strdup(params->out_dir);
    } else {
        g_autofree char *key = data_corpus_key(bpe, files, params->val_fraction, error);
        if (!key)
            return FALSE;
        key[16] = '\0';
        out = g_build_filename(cache, "shards", key, NULL);
    }
    g_autofree char *tp = g_build_filename(out, "train.bin", NULL);
    g_autofree char *vp = g_build_filename(out, "val.bin", NULL);
    gboolean         reused = !params->out_dir &&
                      data_corpus_reuse(bpe, tp, vp, files->len, params->val_fraction, train, val);
    if (!reused) {
        if (g_mkdir_with_parents(out, 0755) != 0) {
            int e = errno;
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot create shard folder %s: %s",
                        out, g_strerror(e));
            return FALSE;
        }
        if (!data_corpus_build(bpe, files, params->val_fraction, tp, vp, train, val, error))
            return FALSE;
    }
    *train_path = g_steal_pointer(&tp);
    *val_path = g_steal_pointer(&vp);
    return TRUE;
}

gboolean data_prepare_default(const DataCorpusParams *params, char **train_path, char **val_path,
                              GError **error) {
    return data_prepare(params, train_path, val_path, NULL, NULL, error);
}
