/* SPDX-License-Identifier: MIT
 * data-bpe.c: GPT-2 byte-level BPE. Text is cut into words by GPT-2's regex, each word's UTF-8
 * bytes start as one token per byte, then the adjacent pair of lowest merge rank is merged
 * (all its occurrences, left to right) until no pair has a rank: the result of OpenAI's
 * encoder.py, computed in O(n log n) per word with a heap of candidate pairs over a linked list
 * of symbols instead of one O(n) scan per merge. Words are cached.
 */
#include "data-bpe.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "pp-error.h"

/* Words, and bytes of words and their ids, cached before the cache is emptied: bounds memory
 * on unbounded inputs (a text of few, very long words included). */
#define DATA_BPE_CACHE_MAX       500000
#define DATA_BPE_CACHE_MAX_BYTES (64u << 20)

/* A pair of adjacent symbols that a merge could join, as it was when found. */
typedef struct {
    int32_t rank;  /* merge rank: 0 is vocab.bpe's first merge */
    int32_t pos;   /* byte offset of the left symbol in the word */
    int32_t left;  /* token id of the left symbol when queued */
    int32_t right; /* token id of the right one; stale once either symbol has changed */
} DataBpeCand;

struct _DataBpe {
    int32_t     n_vocab;
    GString    *tok_blob;     /* the raw bytes of every token, back to back */
    size_t     *tok_off;      /* (n_vocab + 1) offsets into tok_blob */
    int32_t     byte_id[256]; /* token of each single byte */
    GHashTable *merge_rank;   /* pair key (left << 16 | right) -> rank + 1 */
    int32_t    *merge_result; /* (n_merges) token made by the merge of each rank */
    int32_t     n_merges;
    int32_t     eot_id; /* id of "<|endoftext|>", -1 when the vocabulary lacks it */
    GRegex     *pattern;
    GHashTable *cache;       /* word bytes (char *) -> int32_t[1 + n]: n, then the ids */
    size_t      cache_bytes; /* the words' and id lists' bytes in the cache */
    GString    *scratch;     /* NUL-terminated copy of the current word, n bytes */
    /* The word being merged, a doubly linked list of symbols indexed by byte offset: */
    int32_t *sym;      /* (n) token id of the symbol starting at each byte, -1 inside one */
    int32_t *next;     /* (n) byte offset of the following symbol, n after the last */
    int32_t *prev;     /* (n) byte offset of the preceding symbol, -1 before the first */
    gsize    sym_cap;  /* bytes the three arrays hold */
    GArray  *heap;     /* DataBpeCand, a binary min-heap on (rank, pos) */
    GArray  *deferred; /* DataBpeCand ranked below the merge being applied (see merge loop) */
    uint8_t  fingerprint[DATA_BPE_FINGERPRINT_BYTES];
};

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the 68 others to
 * U+0100.. in byte order, so that every token is a printable string. */
static void data_bpe_byte_unicode_table(gunichar table[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        gboolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        table[b] = printable ? (gunichar)b : (gunichar)(256 + n++);
    }
    PP_ASSERT(n == 68);
}

static guint data_bpe_pair_key(int32_t left, int32_t right) {
    return ((guint)left << 16) | (guint)right;
}

/* Converts one encoder.json key (printable form) into raw bytes appended to @blob. */
static gboolean data_bpe_key_to_bytes(const char *key, const int unicode_byte[324], GString *blob,
                                      const char *path, GError **error) {
    for (const char *p = key; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        if (c >= 324 || unicode_byte[c] < 0) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s: token \"%s\" holds U+%04X, which is not in GPT-2's byte alphabet",
                        path, key, c);
            return FALSE;
        }
        g_string_append_c(blob, (char)unicode_byte[c]);
    }
    return TRUE;
}

/* Parses encoder.json into id -> bytes and fills @ids (printable key -> id) for the merges. */
static gboolean data_bpe_load_encoder(DataBpe *bpe, const char *path, const char *data, gsize len,
                                      GHashTable *ids, GError **error) {
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!json_parser_load_from_data(parser, data, (gssize)len, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT, "%s: not valid JSON: %s", path,
                    local->message);
        return FALSE;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s: expected a JSON object mapping token strings to ids", path);
        return FALSE;
    }
    JsonObject *obj = json_node_get_object(root);
    guint       n = json_object_get_size(obj);
    if (n == 0 || n > 65536) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s: %u tokens; a vocabulary needs 1 to 65536 (ids are stored as uint16)", path,
                    n);
        return FALSE;
    }
    gunichar byte_unicode[256];
    int      unicode_byte[324];
    data_bpe_byte_unicode_table(byte_unicode);
    for (int c = 0; c < 324; c++)
        unicode_byte[c] = -1;
    for (int b = 0; b < 256; b++)
        unicode_byte[byte_unicode[b]] = b;

    /* Every id 0..n-1 exactly once: collect keys per id, then lay out bytes in id order. */
    g_autofree const char **key_of = g_new0(const char *, n);
    g_autoptr(GList) members = json_object_get_members(obj);
    for (GList *l = members; l; l = l->next) {
        const char *key = l->data;
        JsonNode   *v = json_object_get_member(obj, key);
        if (!JSON_NODE_HOLDS_VALUE(v) || json_node_get_value_type(v) != G_TYPE_INT64) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s: token \"%s\" maps to a non-integer; ids must be integers", path, key);
            return FALSE;
        }
        gint64 id = json_node_get_int(v);
        if (id < 0 || id >= n || key_of[id]) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s: token \"%s\" has id %" G_GINT64_FORMAT
                        "; ids must be distinct and in [0, %u)",
                        path, key, id, n);
            return FALSE;
        }
        key_of[id] = key;
    }
    bpe->n_vocab = (int32_t)n;
    bpe->tok_off = g_new(size_t, n + 1);
    for (guint id = 0; id < n; id++) {
        bpe->tok_off[id] = bpe->tok_blob->len;
        if (!data_bpe_key_to_bytes(key_of[id], unicode_byte, bpe->tok_blob, path, error))
            return FALSE;
        g_hash_table_insert(ids, g_strdup(key_of[id]), GINT_TO_POINTER((int)id + 1));
    }
    bpe->tok_off[n] = bpe->tok_blob->len;
    bpe->eot_id = GPOINTER_TO_INT(g_hash_table_lookup(ids, DATA_BPE_EOT_TEXT)) - 1;

    for (int b = 0; b < 256; b++) {
        char s[8];
        s[g_unichar_to_utf8(byte_unicode[b], s)] = '\0';
        int id1 = GPOINTER_TO_INT(g_hash_table_lookup(ids, s));
        if (id1 == 0) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s: no token for byte 0x%02X (\"%s\"); a byte-level vocabulary has one "
                        "per byte",
                        path, b, s);
            return FALSE;
        }
        bpe->byte_id[b] = id1 - 1;
    }
    return TRUE;
}

/* Parses vocab.bpe: a "#version" line, then one merge "A B" per line in rank order. */
static gboolean data_bpe_load_merges(DataBpe *bpe, const char *path, char *data, GHashTable *ids,
                                     GError **error) {
    g_auto(GStrv) lines = g_strsplit(data, "\n", -1);
    guint n_lines = g_strv_length(lines);
    while (n_lines > 0 && lines[n_lines - 1][0] == '\0')
        n_lines--;
    guint first = (n_lines > 0 && g_str_has_prefix(lines[0], "#version")) ? 1 : 0;
    bpe->merge_result = g_new(int32_t, n_lines);
    bpe->n_merges = 0;
    for (guint i = first; i < n_lines; i++) {
        char *line = lines[i];
        char *sp = strchr(line, ' ');
        if (!sp || sp == line || sp[1] == '\0' || strchr(sp + 1, ' ')) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s:%u: \"%s\" is not a merge; expected two tokens separated by one space",
                        path, i + 1, line);
            return FALSE;
        }
        *sp = '\0';
        g_autofree char *joined = g_strconcat(line, sp + 1, NULL);
        int              left = GPOINTER_TO_INT(g_hash_table_lookup(ids, line)) - 1;
        int              right = GPOINTER_TO_INT(g_hash_table_lookup(ids, sp + 1)) - 1;
        int              result = GPOINTER_TO_INT(g_hash_table_lookup(ids, joined)) - 1;
        if (left < 0 || right < 0 || result < 0) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s:%u: merge \"%s %s\" uses or makes a token missing from encoder.json",
                        path, i + 1, line, sp + 1);
            return FALSE;
        }
        guint key = data_bpe_pair_key(left, right);
        /* GPT-2's file has no repeated pair: reject one rather than pick one of its ranks. */
        if (g_hash_table_contains(bpe->merge_rank, GUINT_TO_POINTER(key))) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s:%u: merge \"%s %s\" appears twice", path, i + 1, line, sp + 1);
            return FALSE;
        }
        g_hash_table_insert(bpe->merge_rank, GUINT_TO_POINTER(key),
                            GINT_TO_POINTER(bpe->n_merges + 1));
        bpe->merge_result[bpe->n_merges++] = result;
    }
    return TRUE;
}

static gboolean data_bpe_read(const char *path, char **data, gsize *len, GError **error) {
    g_autoptr(GError) local = NULL;
    if (!g_file_get_contents(path, data, len, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                    "cannot read the GPT-2 vocabulary file %s: %s (run scripts/setup to fetch "
                    "it)",
                    path, local->message);
        return FALSE;
    }
    return TRUE;
}

DataBpe *data_bpe_new(const char *encoder_json_path, const char *vocab_bpe_path, GError **error) {
    g_autofree char *enc_data = NULL, *bpe_data = NULL;
    gsize            enc_len = 0, bpe_len = 0;
    if (!data_bpe_read(encoder_json_path, &enc_data, &enc_len, error) ||
        !data_bpe_read(vocab_bpe_path, &bpe_data, &bpe_len, error))
        return NULL;

    g_autoptr(DataBpe) bpe = g_new0(DataBpe, 1);
    bpe->tok_blob = g_string_new(NULL);
    bpe->merge_rank = g_hash_table_new(g_direct_hash, g_direct_equal);
    bpe->cache = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    bpe->scratch = g_string_new(NULL);
    bpe->heap = g_array_new(FALSE, FALSE, sizeof(DataBpeCand));
    bpe->deferred = g_array_new(FALSE, FALSE, sizeof(DataBpeCand));

    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(sum, (const guchar *)enc_data, (gssize)enc_len);
    g_checksum_update(sum, (const guchar *)bpe_data, (gssize)bpe_len);
    gsize fp_len = sizeof bpe->fingerprint;
    g_checksum_get_digest(sum, bpe->fingerprint, &fp_len);
    PP_ASSERT(fp_len == DATA_BPE_FINGERPRINT_BYTES);

    g_autoptr(GHashTable) ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    if (!data_bpe_load_encoder(bpe, encoder_json_path, enc_data, enc_len, ids, error) ||
        !data_bpe_load_merges(bpe, vocab_bpe_path, bpe_data, ids, error))
        return NULL;

    bpe->pattern = g_regex_new(DATA_BPE_PATTERN, G_REGEX_OPTIMIZE, 0, NULL);
    PP_ASSERT(bpe->pattern != NULL); /* a constant pattern: failing to compile is a bug */
    return g_steal_pointer(&bpe);
}

DataBpe *data_bpe_new_from_dir(const char *dir, GError **error) {
    g_autofree char *enc = g_build_filename(dir, "encoder.json", NULL);
    g_autofree char *voc = g_build_filename(dir, "vocab.bpe", NULL);
    return data_bpe_new(enc, voc, error);
}

void data_bpe_free(DataBpe *bpe) {
    if (!bpe)
        return;
    if (bpe->tok_blob)
        g_string_free(bpe->tok_blob, TRUE);
    g_free(bpe->tok_off);
    if (bpe->merge_rank)
        g_hash_table_unref(bpe->merge_rank);
    g_free(bpe->merge_result);
    if (bpe->pattern)
        g_regex_unref(bpe->pattern);
    if (bpe->cache)
        g_hash_table_unref(bpe->cache);
    if (bpe->scratch)
        g_string_free(bpe->scratch, TRUE);
    g_free(bpe->sym);
    g_free(bpe->next);
    g_free(bpe->prev);
    if (bpe->heap)
        g_array_unref(bpe->heap);
    if (bpe->deferred)
        g_array_unref(bpe->deferred);
    g_free(bpe);
}

int32_t data_bpe_n_vocab(const DataBpe *bpe) {
    return bpe->n_vocab;
}

int32_t data_bpe_eot(const DataBpe *bpe) {
    return bpe->eot_id;
}

const uint8_t *data_bpe_fingerprint(const DataBpe *bpe) {
    return bpe->fingerprint;
}

const char *data_bpe_token_bytes(const DataBpe *bpe, int32_t id, size_t *len_bytes) {
    PP_ASSERT(id >= 0 && id < bpe->n_vocab);
    *len_bytes = bpe->tok_off[id + 1] - bpe->tok_off[id];
    return bpe->tok_blob->str + bpe->tok_off[id];
}

/* Rank of merging token @left with token @right, -1 when vocab.bpe has no such merge. */
static int32_t data_bpe_rank(const DataBpe *bpe, int32_t left, int32_t right) {
    gpointer r =
        g_hash_table_lookup(bpe->merge_rank, GUINT_TO_POINTER(data_bpe_pair_key(left, right)));
    return GPOINTER_TO_INT(r) - 1;
}

static gboolean data_bpe_cand_less(const DataBpeCand *a, const DataBpeCand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void data_bpe_heap_push(GArray *heap, const DataBpeCand *c) {
    g_array_append_val(heap, *c);
    DataBpeCand *h = (DataBpeCand *)(void *)heap->data;
    for (guint i = heap->len - 1; i > 0;) {
        guint parent = (i - 1) / 2;
        if (!data_bpe_cand_less(&h[i], &h[parent]))
            break;
        DataBpeCand t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

/* Moves h[i] down until neither child is smaller (a heap of @len entries below it). */
static void data_bpe_heap_sift_down(DataBpeCand *h, guint len, guint i) {
    for (;;) {
        guint l = 2 * i + 1, r = l + 1, min = i;
        if (l < len && data_bpe_cand_less(&h[l], &h[min]))
            min = l;
        if (r < len && data_bpe_cand_less(&h[r], &h[min]))
            min = r;
        if (min == i)
            return;
        DataBpeCand t = h[i];
        h[i] = h[min];
        h[min] = t;
        i = min;
    }
}

static DataBpeCand data_bpe_heap_pop(GArray *heap) {
    DataBpeCand *h = (DataBpeCand *)(void *)heap->data;
    DataBpeCand  top = h[0];
    h[0] = h[heap->len - 1];
    g_array_set_size(heap, heap->len - 1);
    data_bpe_heap_sift_down(h, heap->len, 0);
    return top;
}

/* Queues the pair of symbols at @pos and after it when a merge joins them: on the heap, or on
 * bpe->deferred when it ranks below @pass_rank, the rank whose occurrences are being merged. */
static void data_bpe_add_cand(DataBpe *bpe, int32_t pos, int32_t pass_rank) {
    DataBpeCand c = {0, pos, bpe->sym[pos], bpe->sym[bpe->next[pos]]};
    c.rank = data_bpe_rank(bpe, c.left, c.right);
    if (c.rank < 0)
        return;
    if (c.rank < pass_rank)
        g_array_append_val(bpe->deferred, c);
    else if (pass_rank < 0)
        g_array_append_val(bpe->heap, c); /* the first candidates, heapified together */
    else
        data_bpe_heap_push(bpe->heap, &c);
}

int32_t data_bpe_merge_rank(const DataBpe *bpe, int32_t left, int32_t right, int32_t *merged) {
    PP_ASSERT(left >= 0 && left < bpe->n_vocab && right >= 0 && right < bpe->n_vocab);
    int32_t rank = data_bpe_rank(bpe, left, right);
    if (rank >= 0 && merged)
        *merged = bpe->merge_result[rank];
    return rank;
}

/* Merges the @n-byte word in bpe->scratch; the symbols are left in bpe->sym/next. OpenAI's
 * loop finds the lowest-ranked adjacent pair, merges all its occurrences left to right, and
 * repeats. Here every adjacent pair with a rank sits on a heap ordered by (rank, pos), so
 * popping gives that pair's occurrences left to right; a merge relinks the list in O(1) and
 * queues the two pairs it makes, and entries whose symbols changed since are skipped when
 * popped. A merge never makes another occurrence of its own pair (the joined token is longer
 * than either part), but with an arbitrary vocab.bpe it can make a pair of lower rank: that
 * one waits in bpe->deferred until the current rank's occurrences are done, as in OpenAI's
 * loop. At most 3n candidates: O(n log n). */
static void data_bpe_merge(DataBpe *bpe, int32_t n) {
    if ((gsize)n > bpe->sym_cap) {
        bpe->sym_cap = MAX((gsize)n, 2 * bpe->sym_cap);
        bpe->sym = g_renew(int32_t, bpe->sym, bpe->sym_cap);
        bpe->next = g_renew(int32_t, bpe->next, bpe->sym_cap);
        bpe->prev = g_renew(int32_t, bpe->prev, bpe->sym_cap);
    }
    for (int32_t i = 0; i < n; i++) {
        bpe->sym[i] = bpe->byte_id[(guint8)bpe->scratch->str[i]];
        bpe->next[i] = i + 1;
        bpe->prev[i] = i - 1;
    }
    g_array_set_size(bpe->heap, 0);
    g_array_set_size(bpe->deferred, 0);
    for (int32_t i = 0; i + 1 < n; i++)
        data_bpe_add_cand(bpe, i, -1);
    for (guint i = bpe->heap->len / 2; i-- > 0;) /* Floyd's O(n) heap construction */
        data_bpe_heap_sift_down((DataBpeCand *)(void *)bpe->heap->data, bpe->heap->len, i);
    int32_t pass_rank = -1;
    for (;;) {
        if (bpe->deferred->len > 0 &&
            (bpe->heap->len == 0 ||
             ((DataBpeCand *)(void *)bpe->heap->data)[0].rank != pass_rank)) {
            for (guint k = 0; k < bpe->deferred->len; k++)
                data_bpe_heap_push(bpe->heap, &g_array_index(bpe->deferred, DataBpeCand, k));
            g_array_set_size(bpe->deferred, 0);
        }
        if (bpe->heap->len == 0)
            break;
        DataBpeCand c = data_bpe_heap_pop(bpe->heap);
        int32_t     p = c.pos, q = bpe->next[p];
        if (bpe->sym[p] != c.left || q >= n || bpe->sym[q] != c.right)
            continue; /* stale: a merge has changed one of the two symbols */
        pass_rank = c.rank;
        bpe->sym[p] = bpe->merge_result[c.rank];
        bpe->sym[q] = -1;
        bpe->next[p] = bpe->next[q];
        if (bpe->next[p] < n)
            bpe->prev[bpe->next[p]] = p;
        if (bpe->prev[p] >= 0)
            data_bpe_add_cand(bpe, bpe->prev[p], pass_rank);
        if (bpe->next[p] < n)
            data_bpe_add_cand(bpe, p, pass_rank);
    }
}

/* Runs the merges on the word in bpe->scratch; returns the cached id list (n, ids...). */
static const int32_t *data_bpe_word(DataBpe *bpe) {
    const int32_t *hit = g_hash_table_lookup(bpe->cache, bpe->scratch->str);
    if (hit)
        return hit;
    int32_t n = (int32_t)bpe->scratch->len;
    data_bpe_merge(bpe, n);
    int32_t n_syms = 0;
    for (int32_t i = 0; i < n; i = bpe->next[i])
        n_syms++;
    size_t bytes = (size_t)n + 1 + ((size_t)n_syms + 1) * sizeof(int32_t);
    if (g_hash_table_size(bpe->cache) >= DATA_BPE_CACHE_MAX ||
        bpe->cache_bytes + bytes > DATA_BPE_CACHE_MAX_BYTES) {
        g_hash_table_remove_all(bpe->cache);
        bpe->cache_bytes = 0;
    }
    bpe->cache_bytes += bytes;
    int32_t *entry = g_new(int32_t, (gsize)n_syms + 1);
    entry[0] = n_syms;
    int32_t k = 1;
    for (int32_t i = 0; i < n; i = bpe->next[i])
        entry[k++] = bpe->sym[i];
    g_hash_table_insert(bpe->cache, g_strdup(bpe->scratch->str), entry);
    return entry;
}

/* Encodes valid UTF-8 @text without special tokens. */
static void data_bpe_encode_plain(DataBpe *bpe, const char *text, gssize len, GArray *out) {
    if (len == 0)
        return;
    g_autoptr(GMatchInfo) mi = NULL;
    g_autoptr(GError) local = NULL;
    gint prev_end = 0;
    g_regex_match_full(bpe->pattern, text, len, 0, 0, &mi, &local);
    PP_ASSERT(local == NULL); /* matching valid UTF-8 with a compiled pattern cannot fail */
    while (g_match_info_matches(mi)) {
        gint start = 0, end = 0;
        g_match_info_fetch_pos(mi, 0, &start, &end);
        /* Every character is \s, \p{L}, \p{N} or none of them: the words tile the text. */
        PP_ASSERT(start == prev_end && end > start);
        g_string_truncate(bpe->scratch, 0);
        g_string_append_len(bpe->scratch, text + start, end - start);
        const int32_t *ids = data_bpe_word(bpe);
        g_array_append_vals(out, ids + 1, (guint)ids[0]);
        prev_end = end;
        g_match_info_next(mi, &local);
        PP_ASSERT(local == NULL);
    }
    PP_ASSERT(prev_end == len);
}

gboolean data_bpe_encode(DataBpe *bpe, const char *text, gssize len_bytes, DataBpeEncodeFlags flags,
                         GArray *out, GError **error) {
    PP_ASSERT(g_array_get_element_size(out) == sizeof(int32_t));
    size_t      len = len_bytes < 0 ? strlen(text) : (size_t)len_bytes;
    const char *bad = NULL;
    if (len > G_MAXINT) { /* GRegex reports match offsets as int */
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "text of %zu bytes; the tokenizer takes at most %d bytes per call (split the "
                    "text into documents)",
                    len, G_MAXINT);
        return FALSE;
    }
    if (!g_utf8_validate_len(text, len, &bad)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "text is not valid UTF-8 at byte offset %td (byte 0x%02X); GPT-2's tokenizer "
                    "reads UTF-8 without NUL bytes",
                    bad - text, (guint8)*bad);
        return FALSE;
    }
    const size_t eot_len = strlen(DATA_BPE_EOT_TEXT);
    if ((flags & DATA_BPE_ENCODE_SPECIAL) && bpe->eot_id < 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "the vocabulary has no " DATA_BPE_EOT_TEXT " token to encode specially");
        return FALSE;
    }
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *hit = NULL;
        if (flags & DATA_BPE_ENCODE_SPECIAL)
            hit = memmem(p, (size_t)(end - p), DATA_BPE_EOT_TEXT, eot_len);
        const char *stop = hit ? hit : end;
        data_bpe_encode_plain(bpe, p, stop - p, out);
        if (!hit)
            break;
        g_array_append_val(out, bpe->eot_id);
        p = hit + eot_len;
    }
    return TRUE;
}

gboolean data_bpe_decode(const DataBpe *bpe, const int32_t *ids, size_t n_ids, GString *out,
                         GError **error) {
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= bpe->n_vocab) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "token %zu is %d, outside the vocabulary [0, %d)", i, ids[i], bpe->n_vocab);
            return FALSE;
        }
        size_t      n = 0;
        const char *b = data_bpe_token_bytes(bpe, ids[i], &n);
        g_string_append_len(out, b, (gssize)n);
    }
    return TRUE;
}
