/* SPDX-License-Identifier: MIT
 * exec-checkpoint.c: safetensors reading (mapped, every offset validated before use, each
 * tensor checked against its recorded CRC-32C and for non-finite values) and writing (streamed
 * into a temporary file, fsync, rename), with the Hugging Face GPT-2 layout mapping: Conv1D
 * transposes for block matmuls, unpadded vocabulary rows, tied heads.
 */
#include "exec-checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec-crc32c.h"
#include "pp-error.h"

/* Metadata key prefix of a tensor's checksum: "pacer_crc32c.NAME" -> 8 lower-case hex digits. */
#define EXEC_CKPT_CRC_PREFIX       "pacer_crc32c."
#define EXEC_CKPT_PREFIX           "transformer."
#define EXEC_CKPT_METADATA_KEY     "__metadata__"
#define EXEC_CKPT_MAX_HEADER_BYTES ((guint64)100 << 20) /* safetensors' own limit is 100 MB */
/* Deepest [ or { nesting accepted in a header. Real headers nest 3 deep (root object, tensor
 * entry, shape array); json-glib parses recursively, so a deep one would overflow the stack. */
#define EXEC_CKPT_MAX_HEADER_DEPTH 8

/* --- tensor lists --- */

struct _ExecTensorList {
    GArray *entries; /* ExecTensorEntry */
};

static void exec_tensor_entry_clear(gpointer p) {
    ExecTensorEntry *e = p;
    g_free(e->name);
    if (e->owned)
        g_free(e->data);
}

ExecTensorList *exec_tensor_list_new(void) {
    ExecTensorList *list = g_new0(ExecTensorList, 1);
    list->entries = g_array_new(FALSE, TRUE, sizeof(ExecTensorEntry));
    g_array_set_clear_func(list->entries, exec_tensor_entry_clear);
    return list;
}

void exec_tensor_list_free(ExecTensorList *list) {
    if (!list)
        return;
    g_array_unref(list->entries);
    g_free(list);
}

void exec_tensor_list_add(ExecTensorList *list, const char *name, float *data, int ndim, int shape0,
                          int shape1) {
    PP_ASSERT((ndim == 1 && shape1 == 1) || ndim == 2);
    PP_ASSERT(shape0 >= 0 && shape1 >= 0 && data != NULL);
    ExecTensorEntry e = {g_strdup(name), data, ndim, {shape0, shape1}, FALSE};
    g_array_append_val(list->entries, e);
}

float *exec_tensor_list_add_owned(ExecTensorList *list, const char *name, int ndim, int shape0,
                                  int shape1) {
    PP_ASSERT(shape0 >= 0 && shape1 >= 0);
    float *data = g_new0(float, MAX((size_t)shape0 * (size_t)shape1, 1));
    exec_tensor_list_add(list, name, data, ndim, shape0, shape1);
    g_array_index(list->entries, ExecTensorEntry, list->entries->len - 1).owned = TRUE;
    return data;
}

void exec_tensor_list_add_slice(ExecTensorList *list, const Gpt2Slice *slice, float *base,
                                const char *prefix) {
    for (int i = 0; i < gpt2_slice_n_tensors(slice); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(slice, i);
        g_autofree char  *name = g_strconcat(prefix, t->name, NULL);
        exec_tensor_list_add(list, name, base + t->offset, t->ndim, t->shape[0],
                             t->ndim == 1 ? 1 : t->shape[1]);
    }
}

int exec_tensor_list_n(const ExecTensorList *list) {
    return (int)list->entries->len;
}

const ExecTensorEntry *exec_tensor_list_get(const ExecTensorList *list, int i) {
    PP_ASSERT(i >= 0 && (guint)i < list->entries->len);
    return &g_array_index(list->entries, ExecTensorEntry, i);
}

/* --- layout mapping --- */

/* How one pacer tensor appears in a file. */
typedef struct {
    int      ndim;
    int      shape[2];  /* file shape */
    gboolean transpose; /* file (IC, OC) <-> pacer (OC, IC) */
    int      rows;      /* pacer rows that exist in the file (wte/lm_head: V of Vp) */
} ExecCkptLayout;

static gboolean exec_ckpt_is_vocab(const char *name) {
    return strcmp(name, "wte.weight") == 0 || strcmp(name, "lm_head.weight") == 0;
}

/* @cfg NULL: raw layout (the state sidecar). */
static ExecCkptLayout exec_ckpt_layout(const Gpt2Config *cfg, const ExecTensorEntry *e) {
    ExecCkptLayout l = {e->ndim, {e->shape[0], e->ndim == 2 ? e->shape[1] : 1}, FALSE, e->shape[0]};
    if (!cfg || e->ndim != 2)
        return l;
    if (g_str_has_prefix(e->name, "h.")) {
        /* Every 2D tensor of a GPT-2 block is a Conv1D weight. */
        l.transpose = TRUE;
        l.shape[0] = e->shape[1];
        l.shape[1] = e->shape[0];
    } else if (exec_ckpt_is_vocab(e->name)) {
        PP_ASSERT(cfg->V <= e->shape[0]);
        l.rows = cfg->V;
        l.shape[0] = cfg->V;
    }
    return l;
}

static char *exec_ckpt_shape_str(int ndim, const gint64 *shape) {
    GString *s = g_string_new("(");
    for (int i = 0; i < ndim; i++)
        g_string_append_printf(s, i ? ", %" G_GINT64_FORMAT : "%" G_GINT64_FORMAT, shape[i]);
    g_string_append(s, ")");
    return g_string_free(s, FALSE);
}

/* --- reading --- */

typedef struct {
    char   *name; /* without "transformer." */
    char   *dtype;
    int     ndim;
    gint64  shape[8];
    guint64 begin, end; /* byte offsets into the data section */
} ExecCkptFileTensor;

typedef struct {
    const char    *path;
    GMappedFile   *map;
    const uint8_t *data; /* start of the data section */
    guint64        data_bytes;
    GHashTable    *tensors;     /* name -> ExecCkptFileTensor * */
    GHashTable    *metadata;    /* char * -> char * */
    gboolean       checksummed; /* the metadata records CRC-32Cs: every tensor needs one */
} ExecCkptFile;

static void exec_ckpt_file_tensor_free(gpointer p) {
    ExecCkptFileTensor *t = p;
    g_free(t->name);
    g_free(t->dtype);
    g_free(t);
}

static void exec_ckpt_file_clear(ExecCkptFile *f) {
    if (f->map)
        g_mapped_file_unref(f->map);
    if (f->tensors)
        g_hash_table_unref(f->tensors);
    if (f->metadata)
        g_hash_table_unref(f->metadata);
    memset(f, 0, sizeof *f);
}

/* Bytes per element of a safetensors dtype, 0 when unknown. */
static int exec_ckpt_dtype_bytes(const char *dtype) {
    static const struct {
        const char *name;
        int         bytes;
    } sizes[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
        {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
        {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
        if (strcmp(dtype, sizes[i].name) == 0)
            return sizes[i].bytes;
    return 0;
}

static gboolean exec_ckpt_corrupt(GError **error, const char *path, const char *what) {
    g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT, "checkpoint %s: %s", path, what);
    return FALSE;
}

static int exec_ckpt_cmp_offsets(gconstpointer a, gconstpointer b) {
    const ExecCkptFileTensor *x = *(const ExecCkptFileTensor *const *)a;
    const ExecCkptFileTensor *y = *(const ExecCkptFileTensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The tensors of @f in data order. Returns: (transfer container) ExecCkptFileTensor *s. */
static GPtrArray *exec_ckpt_by_offset(const ExecCkptFile *f) {
    GPtrArray     *order = g_ptr_array_new();
    GHashTableIter it;
    gpointer       value;
    g_hash_table_iter_init(&it, f->tensors);
    while (g_hash_table_iter_next(&it, NULL, &value))
        g_ptr_array_add(order, value);
    g_ptr_array_sort(order, exec_ckpt_cmp_offsets);
    return order;
}

/* The safetensors rule for data_offsets: in offset order the tensors cover the data section
 * exactly, each starting where the one before it ends, the first at 0 and the last ending at
 * the end of the file, so a shifted or overlapping range is refused, naming the tensor. */
static gboolean exec_ckpt_check_offsets(ExecCkptFile *f, GError **error) {
    g_autoptr(GPtrArray) order = exec_ckpt_by_offset(f);
    guint64                   at = 0;
    const ExecCkptFileTensor *prev = NULL;
    for (guint i = 0; i < order->len; i++) {
        const ExecCkptFileTensor *t = g_ptr_array_index(order, i);
        if (t->begin != at) {
            g_autofree char *what =
                prev ? g_strdup_printf("tensor \"%s\" starts at data byte %" G_GUINT64_FORMAT
                                       " but \"%s\" before it ends at byte %" G_GUINT64_FORMAT
                                       " (data_offsets must cover the data contiguously)",
                                       t->name, t->begin, prev->name, at)
                     : g_strdup_printf("the first tensor, \"%s\", starts at data byte "
                                       "%" G_GUINT64_FORMAT " instead of 0",
                                       t->name, t->begin);
            return exec_ckpt_corrupt(error, f->path, what);
        }
        at = t->end;
        prev = t;
    }
    if (at != f->data_bytes) {
        g_autofree char *what = g_strdup_printf("the tensors end at data byte %" G_GUINT64_FORMAT
                                                " but the data section holds %" G_GUINT64_FORMAT
                                                " bytes (data_offsets must cover it exactly)",
                                                at, f->data_bytes);
        return exec_ckpt_corrupt(error, f->path, what);
    }
    return TRUE;
}

/* Parses one tensor's header entry. */
static gboolean exec_ckpt_parse_tensor(ExecCkptFile *f, const char *key, JsonNode *node,
                                       GError **error) {
    g_autofree char *what = NULL;
    JsonObject      *o = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    JsonNode        *dt = o ? json_object_get_member(o, "dtype") : NULL;
    JsonNode        *sh = o ? json_object_get_member(o, "shape") : NULL;
    JsonNode        *off = o ? json_object_get_member(o, "data_offsets") : NULL;
    if (!dt || !sh || !off || json_node_get_value_type(dt) != G_TYPE_STRING ||
        !JSON_NODE_HOLDS_ARRAY(sh) || !JSON_NODE_HOLDS_ARRAY(off)) {
        what = g_strdup_printf("header entry \"%s\" needs dtype (string), shape and "
                               "data_offsets (arrays)",
                               key);
        return exec_ckpt_corrupt(error, f->path, what);
    }
    JsonArray          *sa = json_node_get_array(sh), *oa = json_node_get_array(off);
    ExecCkptFileTensor *t = g_new0(ExecCkptFileTensor, 1);
    t->name =
        g_strdup(g_str_has_prefix(key, EXEC_CKPT_PREFIX) ? key + strlen(EXEC_CKPT_PREFIX) : key);
    t->dtype = g_strdup(json_node_get_string(dt));
    if (g_hash_table_contains(f->tensors, t->name)) {
        what = g_strdup_printf("tensor \"%s\" appears twice (with and without \"%s\")", t->name,
                               EXEC_CKPT_PREFIX);
        exec_ckpt_file_tensor_free(t);
        return exec_ckpt_corrupt(error, f->path, what);
    }
    g_hash_table_insert(f->tensors, t->name, t);
    guint    nd = json_array_get_length(sa);
    gboolean ok = nd <= G_N_ELEMENTS(t->shape) && json_array_get_length(oa) == 2;
    guint64  numel = 1;
    for (guint i = 0; ok && i < nd; i++) {
        JsonNode *d = json_array_get_element(sa, i);
        ok = json_node_get_value_type(d) == G_TYPE_INT64 && json_node_get_int(d) >= 0;
        t->shape[i] = ok ? json_node_get_int(d) : 0;
        /* Bytes are numel times at most 8: a product that wraps could match any span. */
        if (ok && !(g_uint64_checked_mul(&numel, numel, (guint64)t->shape[i]) &&
                    numel <= G_MAXUINT64 / 8)) {
            what = g_strdup_printf("tensor \"%s\": shape dimension %u (%" G_GINT64_FORMAT
                                   ") makes more than 2^61 elements",
                                   key, i, t->shape[i]);
            return exec_ckpt_corrupt(error, f->path, what);
        }
    }
    t->ndim = (int)nd;
    for (guint i = 0; ok && i < 2; i++) {
        JsonNode *d = json_array_get_element(oa, i);
        ok = json_node_get_value_type(d) == G_TYPE_INT64 && json_node_get_int(d) >= 0;
        if (ok)
            *(i == 0 ? &t->begin : &t->end) = (guint64)json_node_get_int(d);
    }
    if (!ok || t->begin > t->end) {
        what = g_strdup_printf("tensor \"%s\": malformed shape or data_offsets", key);
        return exec_ckpt_corrupt(error, f->path, what);
    }
    if (t->end > f->data_bytes) {
        what = g_strdup_printf("tensor \"%s\" ends at data byte %" G_GUINT64_FORMAT
                               " but the file holds %" G_GUINT64_FORMAT
                               " bytes of data (truncated file)",
                               key, t->end, f->data_bytes);
        return exec_ckpt_corrupt(error, f->path, what);
    }
    int eb = exec_ckpt_dtype_bytes(t->dtype);
    if (eb > 0 && t->end - t->begin != numel * (guint64)eb) {
        what = g_strdup_printf("tensor \"%s\": data_offsets span %" G_GUINT64_FORMAT
                               " bytes, its %s shape needs %" G_GUINT64_FORMAT,
                               key, t->end - t->begin, t->dtype, numel * (guint64)eb);
        return exec_ckpt_corrupt(error, f->path, what);
    }
    return TRUE;
}

/* Checks, before json-glib sees it, that the header @json (@len bytes) nests arrays and objects
 * at most EXEC_CKPT_MAX_HEADER_DEPTH deep (brackets inside strings not counted). json-glib also
 * takes comments and single-quoted strings, which could hide brackets from this count: JSON has
 * neither, so '/' or '\'' outside a string is refused too. */
static gboolean exec_ckpt_check_header_depth(const char *path, const char *json, guint64 len,
                                             GError **error) {
    int      depth = 0;
    gboolean in_string = FALSE;
    for (guint64 i = 0; i < len; i++) {
        char c = json[i];
        if (in_string) {
            if (c == '\\')
                i++; /* the escaped character cannot end the string */
            else if (c == '"')
                in_string = FALSE;
        } else if (c == '"') {
            in_string = TRUE;
        } else if (c == '[' || c == '{') {
            if (++depth > EXEC_CKPT_MAX_HEADER_DEPTH) {
                g_autofree char *what = g_strdup_printf("header nests arrays or objects more than "
                                                        "%d deep (at header byte %" G_GUINT64_FORMAT
                                                        "); a safetensors header nests 3 deep",
                                                        EXEC_CKPT_MAX_HEADER_DEPTH, i);
                return exec_ckpt_corrupt(error, path, what);
            }
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == '/' || c == '\'') {
            g_autofree char *what = g_strdup_printf(
                "header holds '%c' outside a string at header byte %" G_GUINT64_FORMAT
                "; safetensors headers are plain JSON, without comments or single quotes",
                c, i);
            return exec_ckpt_corrupt(error, path, what);
        }
    }
    return TRUE;
}

static gboolean exec_ckpt_file_open(ExecCkptFile *f, const char *path, GError **error) {
    memset(f, 0, sizeof *f);
    f->path = path;
    g_autoptr(GError) local = NULL;
    f->map = g_mapped_file_new(path, FALSE, &local);
    if (!f->map) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot read checkpoint %s: %s", path,
                    local->message);
        return FALSE;
    }
    const uint8_t *raw = (const uint8_t *)g_mapped_file_get_contents(f->map);
    guint64        len = g_mapped_file_get_length(f->map);
    if (len < 8)
        return exec_ckpt_corrupt(error, path, "shorter than the 8-byte header length");
    guint64 hlen;
    memcpy(&hlen, raw, sizeof hlen);
    hlen = GUINT64_FROM_LE(hlen);
    if (hlen > EXEC_CKPT_MAX_HEADER_BYTES || hlen > len - 8) {
        g_autofree char *what = g_strdup_printf("header length %" G_GUINT64_FORMAT
                                                " exceeds the file (%" G_GUINT64_FORMAT
                                                " bytes) or 100 MB: not a safetensors file",
                                                hlen, len);
        return exec_ckpt_corrupt(error, path, what);
    }
    if (!exec_ckpt_check_header_depth(path, (const char *)raw + 8, hlen, error))
        return FALSE;
    f->data = raw + 8 + hlen;
    f->data_bytes = len - 8 - hlen;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, (const char *)raw + 8, (gssize)hlen, &local)) {
        g_autofree char *what = g_strdup_printf("header is not valid JSON: %s", local->message);
        return exec_ckpt_corrupt(error, path, what);
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return exec_ckpt_corrupt(error, path, "header is not a JSON object");
    f->tensors = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, exec_ckpt_file_tensor_free);
    f->metadata = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    JsonObject *obj = json_node_get_object(root);
    g_autoptr(GList) members = json_object_get_members(obj);
    for (GList *l = members; l; l = l->next) {
        const char *key = l->data;
        JsonNode   *node = json_object_get_member(obj, key);
        if (strcmp(key, EXEC_CKPT_METADATA_KEY) != 0) {
            if (!exec_ckpt_parse_tensor(f, key, node, error))
                return FALSE;
            continue;
        }
        if (!JSON_NODE_HOLDS_OBJECT(node))
            return exec_ckpt_corrupt(error, path, EXEC_CKPT_METADATA_KEY " is not an object");
        JsonObject *m = json_node_get_object(node);
        g_autoptr(GList) keys = json_object_get_members(m);
        for (GList *k = keys; k; k = k->next) {
            JsonNode *v = json_object_get_member(m, k->data);
            if (json_node_get_value_type(v) != G_TYPE_STRING) {
                g_autofree char *what = g_strdup_printf(
                    EXEC_CKPT_METADATA_KEY " value of \"%s\" is not a string", (char *)k->data);
                return exec_ckpt_corrupt(error, path, what);
            }
            g_hash_table_insert(f->metadata, g_strdup(k->data), g_strdup(json_node_get_string(v)));
            f->checksummed = f->checksummed || g_str_has_prefix(k->data, EXEC_CKPT_CRC_PREFIX);
        }
    }
    return exec_ckpt_check_offsets(f, error);
}

static float exec_ckpt_get(const uint8_t *p, gboolean bf16) {
    uint32_t bits;
    if (bf16) {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        bits = (uint32_t)GUINT16_FROM_LE(h) << 16;
    } else {
        memcpy(&bits, p, sizeof bits);
        bits = GUINT32_FROM_LE(bits);
    }
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* Index of the first NaN or infinity among the @n values at @src (file order), or -1. */
static gint64 exec_ckpt_first_nonfinite(const uint8_t *src, guint64 n, gboolean bf16) {
    size_t eb = bf16 ? 2 : 4;
    for (guint64 k = 0; k < n; k++) {
        if (!isfinite(exec_ckpt_get(src + k * eb, bf16)))
            return (gint64)k;
    }
    return -1;
}

/* "NaN at element K (index [i, j] of shape (R, C))": where element @k (row-major) of a tensor
 * of @ndim dims @shape is, and what it holds (@v). Returns: (transfer full). */
static char *exec_ckpt_nonfinite_str(float v, gint64 k, int ndim, const gint64 *shape) {
    gint64 index[8] = {0}, rest = k;
    for (int d = ndim - 1; d >= 0; d--) {
        index[d] = shape[d] > 0 ? rest % shape[d] : 0;
        rest = shape[d] > 0 ? rest / shape[d] : 0;
    }
    g_autofree char *at = exec_ckpt_shape_str(ndim, index);
    g_autofree char *of = exec_ckpt_shape_str(ndim, shape);
    at[0] = '[';
    at[strlen(at) - 1] = ']';
    return g_strdup_printf("%s at element %" G_GINT64_FORMAT " (index %s of shape %s)",
                           isnan(v) ? "NaN" : (v > 0 ? "+inf" : "-inf"), k, at, of);
}

/* Checks file tensor @t before it is used: its bytes against the CRC-32C the metadata records
 * for it (PP_IO_ERROR_CORRUPT on a mismatch, or when the file records checksums but none for
 * @t), then every value for NaN and infinity (PP_IO_ERROR_NONFINITE naming the first). */
static gboolean exec_ckpt_check_tensor(const ExecCkptFile *f, const ExecCkptFileTensor *t,
                                       GError **error) {
    const uint8_t   *src = f->data + t->begin;
    g_autofree char *key = g_strconcat(EXEC_CKPT_CRC_PREFIX, t->name, NULL);
    const char      *want = g_hash_table_lookup(f->metadata, key);
    if (want || f->checksummed) {
        g_autofree char *got = g_strdup_printf("%08x", exec_crc32c(0, src, t->end - t->begin));
        if (g_strcmp0(want, got) != 0) {
            g_autofree char *what =
                want ? g_strdup_printf("tensor \"%s\" fails its checksum: %s records CRC-32C %s, "
                                       "its data has %s (the file is damaged)",
                                       t->name, key, want, got)
                     : g_strdup_printf("tensor \"%s\" has no %s though the file records "
                                       "checksums (the header is damaged)",
                                       t->name, key);
            return exec_ckpt_corrupt(error, f->path, what);
        }
    }
    gboolean bf16 = strcmp(t->dtype, "BF16") == 0;
    if (!bf16 && strcmp(t->dtype, "F32") != 0)
        return TRUE;
    gint64 bad = exec_ckpt_first_nonfinite(src, (t->end - t->begin) / (bf16 ? 2 : 4), bf16);
    if (bad >= 0) {
        g_autofree char *where = exec_ckpt_nonfinite_str(
            exec_ckpt_get(src + (guint64)bad * (bf16 ? 2 : 4), bf16), bad, t->ndim, t->shape);
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_NONFINITE,
                    "checkpoint %s: tensor \"%s\" holds %s; weights and optimizer state must "
                    "be finite",
                    f->path, t->name, where);
        return FALSE;
    }
    return TRUE;
}

/* Reads file tensor @file_name (after prefix removal) into @e, laid out by @l. */
static gboolean exec_ckpt_read_tensor(const ExecCkptFile *f, const char *file_name,
                                      const ExecTensorEntry *e, ExecCkptLayout l, GError **error) {
    const ExecCkptFileTensor *t = g_hash_table_lookup(f->tensors, file_name);
    if (!t) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "checkpoint %s has no tensor \"%s\" (nor \"" EXEC_CKPT_PREFIX "%s\")", f->path,
                    file_name, file_name);
        return FALSE;
    }
    gboolean bf16 = strcmp(t->dtype, "BF16") == 0;
    if (!bf16 && strcmp(t->dtype, "F32") != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "checkpoint %s: tensor \"%s\" has dtype %s; pacer reads F32 and BF16", f->path,
                    file_name, t->dtype);
        return FALSE;
    }
    gint64   want[2] = {l.shape[0], l.shape[1]};
    gboolean same = t->ndim == l.ndim;
    for (int i = 0; same && i < l.ndim; i++)
        same = t->shape[i] == want[i];
    if (!same) {
        g_autofree char *got = exec_ckpt_shape_str(t->ndim, t->shape);
        g_autofree char *exp = exec_ckpt_shape_str(l.ndim, want);
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "checkpoint %s: tensor \"%s\" has shape %s in the file, the model expects %s",
                    f->path, e->name, got, exp);
        return FALSE;
    }
    if (!exec_ckpt_check_tensor(f, t, error))
        return FALSE;
    const uint8_t *src = f->data + t->begin;
    size_t         eb = bf16 ? 2 : 4;
    size_t         cols = (size_t)e->shape[1]; /* pacer columns (1 for 1D) */
    if (l.transpose) {
        /* file (IC, OC) row-major -> pacer (OC, IC) */
        size_t ic = (size_t)l.shape[0], oc = (size_t)l.shape[1];
        for (size_t i = 0; i < ic; i++)
            for (size_t o = 0; o < oc; o++)
                e->data[o * ic + i] = exec_ckpt_get(src + (i * oc + o) * eb, bf16);
    } else {
        size_t n = (size_t)l.rows * cols;
        for (size_t k = 0; k < n; k++)
            e->data[k] = exec_ckpt_get(src + k * eb, bf16);
        memset(e->data + n, 0, ((size_t)e->shape[0] - (size_t)l.rows) * cols * sizeof(float));
    }
    return TRUE;
}

gboolean exec_checkpoint_load(const char *path, const Gpt2Config *cfg, ExecTensorList *model,
                              GHashTable **metadata, GError **error) {
    ExecCkptFile f;
    gboolean     ok = exec_ckpt_file_open(&f, path, error);
    for (int i = 0; ok && i < exec_tensor_list_n(model); i++) {
        const ExecTensorEntry *e = exec_tensor_list_get(model, i);
        const char            *from = e->name;
        /* GPT-2 files tie the head to wte and carry no lm_head.weight. */
        if (strcmp(e->name, "lm_head.weight") == 0 && !g_hash_table_contains(f.tensors, from))
            from = "wte.weight";
        ok = exec_ckpt_read_tensor(&f, from, e, exec_ckpt_layout(cfg, e), error);
    }
    if (ok && metadata)
        *metadata = g_hash_table_ref(f.metadata);
    exec_ckpt_file_clear(&f);
    return ok;
}

gboolean exec_checkpoint_load_state(const char *path, ExecTensorList *state, GHashTable **metadata,
                                    GError **error) {
    ExecCkptFile f;
    gboolean     ok = exec_ckpt_file_open(&f, path, error);
    for (int i = 0; ok && i < exec_tensor_list_n(state); i++) {
        const ExecTensorEntry *e = exec_tensor_list_get(state, i);
        ok = exec_ckpt_read_tensor(&f, e->name, e, exec_ckpt_layout(NULL, e), error);
    }
    if (ok && metadata)
        *metadata = g_hash_table_ref(f.metadata);
    exec_ckpt_file_clear(&f);
    return ok;
}

gboolean exec_checkpoint_verify(const char *path, GError **error) {
    ExecCkptFile f;
    gboolean     ok = exec_ckpt_file_open(&f, path, error);
    if (ok) {
        /* In data order, so that the first damaged tensor of the file is the one named. */
        g_autoptr(GPtrArray) order = exec_ckpt_by_offset(&f);
        for (guint i = 0; ok && i < order->len; i++)
            ok = exec_ckpt_check_tensor(&f, g_ptr_array_index(order, i), error);
    }
    exec_ckpt_file_clear(&f);
    return ok;
}

gboolean exec_checkpoint_info(const char *path, ExecCheckpointInfo *info, GHashTable **metadata,
                              GError **error) {
    ExecCkptFile f;
    if (!exec_ckpt_file_open(&f, path, error)) {
        exec_ckpt_file_clear(&f);
        return FALSE;
    }
    memset(info, 0, sizeof *info);
    const ExecCkptFileTensor *wte = g_hash_table_lookup(f.tensors, "wte.weight");
    const ExecCkptFileTensor *wpe = g_hash_table_lookup(f.tensors, "wpe.weight");
    const ExecCkptFileTensor *ln1 = g_hash_table_lookup(f.tensors, "h.0.ln_1.weight");
    gboolean                  ok = wte && wpe && ln1 && wte->ndim == 2 && wpe->ndim == 2 &&
                  wte->shape[1] == wpe->shape[1] && wte->shape[0] > 0 && wpe->shape[0] > 0 &&
                  wte->shape[1] > 0 && wte->shape[0] <= G_MAXINT32 - 128 &&
                  wpe->shape[0] <= G_MAXINT32 && wte->shape[1] <= G_MAXINT32;
    if (!ok) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "checkpoint %s is not a GPT-2 model: it needs wte.weight (V, C), "
                    "wpe.weight (T, C) and h.0.*, with V, T and C from 1 to 2^31 - 1",
                    path);
        exec_ckpt_file_clear(&f);
        return FALSE;
    }
    info->cfg.V = (int)wte->shape[0];
    info->cfg.Vp = (info->cfg.V + 127) / 128 * 128;
    info->cfg.C = (int)wte->shape[1];
    info->cfg.T = (int)wpe->shape[0];
    for (int l = 0;; l++) {
        g_autofree char *name = g_strdup_printf("h.%d.ln_1.weight", l);
        if (!g_hash_table_contains(f.tensors, name))
            break;
        info->cfg.L = l + 1;
    }
    const char *nh = g_hash_table_lookup(f.metadata, "n_head");
    gint64      v = 0;
    if (nh && g_ascii_string_to_signed(nh, 10, 1, G_MAXINT32, &v, NULL))
        info->cfg.NH = (int)v;
    info->has_head = g_hash_table_contains(f.tensors, "lm_head.weight");
    if (metadata)
        *metadata = g_hash_table_ref(f.metadata);
    exec_ckpt_file_clear(&f);
    return TRUE;
}

/* --- writing --- */

static uint16_t exec_ckpt_bf16_round(float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(bits >> 16);
}

static int exec_ckpt_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The JSON header for @list (offsets in list order), padded with spaces to 8 bytes. */
static char *exec_ckpt_header(const Gpt2Config *cfg, ExecTensorList *list, GHashTable *meta,
                              int elem_bytes, const char *dtype, gsize *len) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, EXEC_CKPT_METADATA_KEY);
    json_builder_begin_object(b);
    guint                n_keys = 0;
    g_autofree gpointer *keys = g_hash_table_get_keys_as_array(meta, &n_keys);
    qsort(keys, n_keys, sizeof *keys, exec_ckpt_cmp_str); /* deterministic output */
    for (guint i = 0; i < n_keys; i++) {
        json_builder_set_member_name(b, keys[i]);
        json_builder_add_string_value(b, g_hash_table_lookup(meta, keys[i]));
    }
    json_builder_end_object(b);
    guint64 off = 0;
    for (int i = 0; i < exec_tensor_list_n(list); i++) {
        const ExecTensorEntry *e = exec_tensor_list_get(list, i);
        ExecCkptLayout         l = exec_ckpt_layout(cfg, e);
        guint64 bytes = (guint64)l.shape[0] * (guint64)l.shape[1] * (guint64)elem_bytes;
        json_builder_set_member_name(b, e->name);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "dtype");
        json_builder_add_string_value(b, dtype);
        json_builder_set_member_name(b, "shape");
        json_builder_begin_array(b);
        for (int d = 0; d < l.ndim; d++)
            json_builder_add_int_value(b, l.shape[d]);
        json_builder_end_array(b);
        json_builder_set_member_name(b, "data_offsets");
        json_builder_begin_array(b);
        json_builder_add_int_value(b, (gint64)off);
        json_builder_add_int_value(b, (gint64)(off + bytes));
        json_builder_end_array(b);
        json_builder_end_object(b);
        off += bytes;
    }
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    GString *s = g_string_new(NULL);
    json_generator_to_gstring(gen, s);
    while (s->len % 8 != 0)
        g_string_append_c(s, ' ');
    *len = s->len;
    return g_string_free(s, FALSE);
}

/* Tensor @e of a file with layout @l and @eb-byte elements (4: f32, 2: bf16) as its bytes in
 * the file (row-major in the file's shape, little-endian) into @buf. */
static void exec_ckpt_encode(const ExecTensorEntry *e, ExecCkptLayout l, int eb, GByteArray *buf) {
    size_t n = (size_t)l.shape[0] * (size_t)l.shape[1];
    g_byte_array_set_size(buf, (guint)(n * (size_t)eb));
    for (size_t k = 0; k < n; k++) {
        size_t src = k;
        if (l.transpose) {
            size_t row = k / (size_t)l.shape[1], col = k % (size_t)l.shape[1];
            src = col * (size_t)l.shape[0] + row; /* pacer (OC, IC): [col][row] */
        }
        float v = e->data[src];
        if (eb == 2) {
            uint16_t h = GUINT16_TO_LE(exec_ckpt_bf16_round(v));
            memcpy(buf->data + 2 * k, &h, 2);
        } else {
            uint32_t bits;
            memcpy(&bits, &v, 4);
            bits = GUINT32_TO_LE(bits);
            memcpy(buf->data + 4 * k, &bits, 4);
        }
    }
}

/* Writes the safetensors file of @list (header @header, @hlen bytes) to a fresh temporary file
 * next to @path, hashing every byte into @sha and counting them in *@n_bytes; returns its name
 * in @tmp_path (transfer full). @cfg NULL: raw layout. */
static gboolean exec_ckpt_write(const char *path, const Gpt2Config *cfg, ExecTensorList *list,
                                const char *header, gsize hlen, int eb, GChecksum *sha,
                                guint64 *n_bytes, char **tmp_path, GError **error) {
    g_autofree char *tmp = g_strconcat(path, ".tmp-XXXXXX", NULL);
    int              fd = g_mkstemp_full(tmp, O_RDWR, 0644);
    if (fd < 0) {
        int en = errno;
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE,
                    "cannot create a temporary file for checkpoint %s: %s", path, g_strerror(en));
        return FALSE;
    }
    FILE *fp = fdopen(fd, "wb");
    PP_ASSERT(fp != NULL); /* fdopen on a fresh descriptor fails only on OOM */
    guint64 hlen_le = GUINT64_TO_LE((guint64)hlen);
    g_checksum_update(sha, (const guchar *)&hlen_le, 8);
    g_checksum_update(sha, (const guchar *)header, (gssize)hlen);
    gboolean ok = fwrite(&hlen_le, 8, 1, fp) == 1 && fwrite(header, 1, hlen, fp) == hlen;
    *n_bytes = 8 + hlen;
    g_autoptr(GByteArray) buf = g_byte_array_new();
    for (int i = 0; ok && i < exec_tensor_list_n(list); i++) {
        const ExecTensorEntry *e = exec_tensor_list_get(list, i);
        exec_ckpt_encode(e, exec_ckpt_layout(cfg, e), eb, buf);
        g_checksum_update(sha, buf->data, buf->len);
        *n_bytes += buf->len;
        ok = fwrite(buf->data, 1, buf->len, fp) == buf->len;
    }
    ok = ok && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int en = errno;
    ok = (fclose(fp) == 0) && ok;
    if (!ok) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot write checkpoint %s: %s", path,
                    g_strerror(en));
        g_remove(tmp);
        return FALSE;
    }
    *tmp_path = g_steal_pointer(&tmp);
    return TRUE;
}

/* A copy of @user (nullable) with the entries of @fixed (nullable) on top. */
static GHashTable *exec_ckpt_merge_metadata(const GHashTable *user, GHashTable *fixed) {
    GHashTable    *m = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    GHashTableIter it;
    gpointer       k, v;
    if (user) {
        g_hash_table_iter_init(&it, (GHashTable *)user);
        while (g_hash_table_iter_next(&it, &k, &v))
            g_hash_table_insert(m, g_strdup(k), g_strdup(v));
    }
    if (fixed) {
        g_hash_table_iter_init(&it, fixed);
        while (g_hash_table_iter_next(&it, &k, &v))
            g_hash_table_insert(m, g_strdup(k), g_strdup(v));
    }
    return m;
}

/* The metadata pacer writes: @user's pairs, then (with @cfg) the model's shape keys and format
 * "pt", then the CRC-32C of every tensor's bytes in the file, each computed from @list encoded
 * with @eb-byte elements. Returns: (transfer full), or NULL with PP_IO_ERROR_NONFINITE naming
 * the first tensor that holds NaN or infinity once encoded. */
static GHashTable *exec_ckpt_file_metadata(const char *path, const Gpt2Config *cfg,
                                           ExecTensorList *list, const GHashTable *user, int eb,
                                           GError **error) {
    g_autoptr(GHashTable) fixed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    if (cfg) {
        g_hash_table_insert(fixed, g_strdup("n_layer"), g_strdup_printf("%d", cfg->L));
        g_hash_table_insert(fixed, g_strdup("n_head"), g_strdup_printf("%d", cfg->NH));
        g_hash_table_insert(fixed, g_strdup("n_embd"), g_strdup_printf("%d", cfg->C));
        g_hash_table_insert(fixed, g_strdup("n_ctx"), g_strdup_printf("%d", cfg->T));
        g_hash_table_insert(fixed, g_strdup("vocab_size"), g_strdup_printf("%d", cfg->V));
        g_hash_table_insert(fixed, g_strdup("format"), g_strdup("pt"));
    }
    g_autoptr(GByteArray) buf = g_byte_array_new();
    for (int i = 0; i < exec_tensor_list_n(list); i++) {
        const ExecTensorEntry *e = exec_tensor_list_get(list, i);
        ExecCkptLayout         l = exec_ckpt_layout(cfg, e);
        exec_ckpt_encode(e, l, eb, buf);
        gint64 bad = exec_ckpt_first_nonfinite(buf->data, buf->len / (guint)eb, eb == 2);
        if (bad >= 0) {
            gint64           shape[2] = {l.shape[0], l.shape[1]};
            g_autofree char *where = exec_ckpt_nonfinite_str(
                exec_ckpt_get(buf->data + (guint64)bad * (guint64)eb, eb == 2), bad, l.ndim, shape);
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_NONFINITE,
                        "cannot write checkpoint %s: tensor \"%s\" holds %s (in the file's "
                        "layout); a checkpoint holds finite values only",
                        path, e->name, where);
            return NULL;
        }
        g_hash_table_insert(fixed, g_strconcat(EXEC_CKPT_CRC_PREFIX, e->name, NULL),
                            g_strdup_printf("%08x", exec_crc32c(0, buf->data, buf->len)));
    }
    return exec_ckpt_merge_metadata(user, fixed);
}

gboolean exec_checkpoint_write(const char *path, const Gpt2Config *cfg, ExecTensorList *list,
                               const GHashTable *metadata, ExecDtype dtype,
                               ExecCheckpointDigest *digest, GError **error) {
    int eb = dtype == EXEC_DTYPE_BF16 ? 2 : 4;
    g_autoptr(GHashTable) meta = exec_ckpt_file_metadata(path, cfg, list, metadata, eb, error);
    if (!meta)
        return FALSE;
    gsize            hlen = 0;
    g_autofree char *header =
        exec_ckpt_header(cfg, list, meta, eb, dtype == EXEC_DTYPE_BF16 ? "BF16" : "F32", &hlen);
    g_autoptr(GChecksum) sha = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree char *tmp = NULL;
    guint64          n_bytes = 0;
    if (!exec_ckpt_write(path, cfg, list, header, hlen, eb, sha, &n_bytes, &tmp, error))
        return FALSE;
    if (g_rename(tmp, path) != 0) {
        int en = errno;
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot rename %s to %s: %s", tmp, path,
                    g_strerror(en));
        g_remove(tmp);
        return FALSE;
    }
    if (digest) {
        digest->size_bytes = n_bytes;
        g_strlcpy(digest->sha256, g_checksum_get_string(sha), sizeof digest->sha256);
    }
    return TRUE;
}

gboolean exec_checkpoint_save(const char *path, const Gpt2Config *cfg, ExecTensorList *model,
                              const GHashTable *metadata, GError **error) {
    return exec_checkpoint_write(path, cfg, model, metadata, EXEC_DTYPE_F32, NULL, error);
}
