/* SPDX-License-Identifier: MIT
 * test-bpe.c: the GPT-2 tokenizer against ids produced by OpenAI's algorithm (the npm package
 * gpt-3-encoder@1.1.4 under node), exact encode -> decode round trips on every corpus file, the
 * <|endoftext|> handling and the errors on bad vocabularies and bad input. The heap-based merge
 * is checked id for id against OpenAI's quadratic loop (kept here as the reference only) on
 * random text and long words. The cases that need the cache filled by scripts/fetch-data are
 * skipped without it.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "data-bpe.h"
#include "data-corpus.h"
#include "pp-error.h"
#include "test-util.h"

static DataBpe *test_bpe_load(void) {
    g_autoptr(GError) error = NULL;
    DataBpe *bpe = data_bpe_new_from_cache(NULL, &error);
    ck_assert_msg(bpe != NULL, "cannot load the GPT-2 vocabulary (run scripts/setup): %s",
                  error ? error->message : "");
    return bpe;
}

static GArray *test_bpe_encode(DataBpe *bpe, const char *text, DataBpeEncodeFlags flags) {
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_autoptr(GError) error = NULL;
    ck_assert_msg(data_bpe_encode(bpe, text, -1, flags, ids, &error), "encode failed: %s",
                  error ? error->message : "");
    return ids;
}

/* Reference ids from gpt-3-encoder@1.1.4's encode() (node), which follows encoder.py. */
static const struct {
    const char *text;
    int         n;
    int32_t     ids[24];
} test_bpe_refs[] = {
    {" hello world", 2, {23748, 995}},
    {"Hello world", 2, {15496, 995}},
    {"The quick brown fox jumps over the lazy dog.",
     10,
     {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}},
    {"I'm here, they're there; we've won't she'll he'd it's",
     18,
     {40, 1101, 994, 11, 484, 821, 612, 26, 356, 1053, 1839, 470, 673, 1183, 339, 1549, 340, 338}},
    {"  multiple   spaces\n\n\nnewlines\t\ttabs  ",
     15,
     {220, 3294, 220, 220, 9029, 628, 198, 3605, 6615, 197, 197, 8658, 82, 220, 220}},
    {"Numbers: 1234567890 and 3.14159, $1,000,000.",
     19,
     {49601, 25, 17031, 2231, 30924, 3829, 290, 513, 13, 1415, 19707, 11, 720, 16, 11, 830, 11, 830,
      13}},
    {"h\xc3\xa9llo w\xc3\xb6rld \xc3\xb1 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
     "\xf0\x9f\x98\x80",
     18,
     {71, 2634, 18798, 266, 30570, 335, 6184, 109, 40304, 10545, 245, 98, 17312, 105, 45739, 252,
      30325, 222}},
    {"Fellow-Citizens of the Senate and House of Representatives:",
     13,
     {37, 5037, 12, 34, 34100, 286, 262, 3845, 290, 2097, 286, 17132, 25}},
    /* U+3000 is \s for GPT-2's regex: each one is its own word before a letter. */
    {"x\xe3\x80\x80\xe3\x80\x80y", 6, {87, 5099, 222, 5099, 222, 88}},
    {"a\xc2\xa0\xc2\xa0 b", 3, {64, 4603, 275}},
    {"x\r\n\r\ny", 6, {87, 201, 198, 201, 198, 88}},
    {"tab\t\tend", 4, {8658, 197, 197, 437}},
    {"end.  ", 4, {437, 13, 220, 220}},
    {"It is 2021, and the year\xe2\x80\x99s end is near\xe2\x80\x94"
     "finally.",
     17,
     {1026, 318, 33448, 11, 290, 262, 614, 447, 247, 82, 886, 318, 1474, 960, 69, 3289, 13}},
    {" ", 1, {220}},
    {"", 0, {0}},
};

START_TEST(test_bpe_reference_ids) {
    g_autoptr(DataBpe) bpe = test_bpe_load();
    const char *t = test_bpe_refs[_i].text;
    g_autoptr(GArray) ids = test_bpe_encode(bpe, t, DATA_BPE_ENCODE_PLAIN);
    ck_assert_int_eq(ids->len, test_bpe_refs[_i].n);
    for (int k = 0; k < test_bpe_refs[_i].n; k++)
        ck_assert_int_eq(g_array_index(ids, int32_t, k), test_bpe_refs[_i].ids[k]);
    g_autoptr(GString) back = g_string_new(NULL);
    ck_assert(data_bpe_decode(bpe, (const int32_t *)(void *)ids->data, ids->len, back, NULL));
    ck_assert_str_eq(back->str, t);
}
END_TEST

START_TEST(test_bpe_vocabulary_shape) {
    g_autoptr(DataBpe) bpe = test_bpe_load();
    ck_assert_int_eq(data_bpe_n_vocab(bpe), 50257);
    ck_assert_int_eq(data_bpe_eot(bpe), DATA_BPE_EOT);
    /* sha256(encoder.json || vocab.bpe) of gpt-3-encoder@1.1.4 */
    static const char expect[] = "00f404d36600411e497efb3df08d3b4e094f0820e2595afcb7cbd0c4353d4fcb";
    GString          *hex = g_string_new(NULL);
    for (int i = 0; i < DATA_BPE_FINGERPRINT_BYTES; i++)
        g_string_append_printf(hex, "%02x", data_bpe_fingerprint(bpe)[i]);
    ck_assert_str_eq(hex->str, expect);
    g_string_free(hex, TRUE);
    size_t      len = 0;
    const char *b = data_bpe_token_bytes(bpe, 220, &len);
    ck_assert_uint_eq(len, 1);
    ck_assert_int_eq(b[0], ' ');
    b = data_bpe_token_bytes(bpe, 198, &len);
    ck_assert_uint_eq(len, 1);
    ck_assert_int_eq(b[0], '\n');
}
END_TEST

/* Every speech: ids equal to node's (count and FNV-1a 64 over the id sequence of all files in
 * name order) and decode(encode(text)) == text byte for byte. */
START_TEST(test_bpe_corpus_round_trip) {
    g_autoptr(DataBpe) bpe = test_bpe_load();
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) files = data_corpus_find(NULL, NULL, &error);
    ck_assert_msg(files != NULL, "no corpus (run scripts/setup): %s", error ? error->message : "");
    ck_assert_uint_eq(files->len, 233);
    uint64_t hash = 0xcbf29ce484222325ull, n_total = 0;
    for (guint i = 0; i < files->len; i++) {
        g_autofree char *text = NULL;
        gsize            len = 0;
        ck_assert(g_file_get_contents(g_ptr_array_index(files, i), &text, &len, NULL));
        g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
        ck_assert(data_bpe_encode(bpe, text, (gssize)len, DATA_BPE_ENCODE_PLAIN, ids, NULL));
        for (guint k = 0; k < ids->len; k++) {
            hash ^= (uint64_t)g_array_index(ids, int32_t, k);
            hash *= 0x100000001b3ull;
        }
        n_total += ids->len;
        g_autoptr(GString) back = g_string_new(NULL);
        ck_assert(data_bpe_decode(bpe, (const int32_t *)(void *)ids->data, ids->len, back, NULL));
        ck_assert_uint_eq(back->len, len);
        ck_assert_msg(memcmp(back->str, text, len) == 0, "round trip differs: %s",
                      (const char *)g_ptr_array_index(files, i));
    }
    ck_assert_uint_eq(n_total, 2074279);
    ck_assert_uint_eq(hash, 0x05ee1cc3299a30efull);
}
END_TEST

START_TEST(test_bpe_endoftext) {
    g_autoptr(DataBpe) bpe = test_bpe_load();
    /* Plain text: the marker is ordinary characters, as in encoder.py. */
    static const int32_t plain[] = {64, 27, 91, 437, 1659, 5239, 91, 29, 65};
    g_autoptr(GArray) a = test_bpe_encode(bpe, "a<|endoftext|>b", DATA_BPE_ENCODE_PLAIN);
    ck_assert_uint_eq(a->len, G_N_ELEMENTS(plain));
    for (guint k = 0; k < a->len; k++)
        ck_assert_int_eq(g_array_index(a, int32_t, k), plain[k]);
    /* Special: one token, text around it encoded separately. */
    g_autoptr(GArray) s =
        test_bpe_encode(bpe, "a<|endoftext|>b<|endoftext|>", DATA_BPE_ENCODE_SPECIAL);
    ck_assert_uint_eq(s->len, 4);
    ck_assert_int_eq(g_array_index(s, int32_t, 0), 64);
    ck_assert_int_eq(g_array_index(s, int32_t, 1), DATA_BPE_EOT);
    ck_assert_int_eq(g_array_index(s, int32_t, 2), 65);
    ck_assert_int_eq(g_array_index(s, int32_t, 3), DATA_BPE_EOT);
    g_autoptr(GString) back = g_string_new(NULL);
    ck_assert(data_bpe_decode(bpe, (const int32_t *)(void *)s->data, s->len, back, NULL));
    ck_assert_str_eq(back->str, "a<|endoftext|>b<|endoftext|>");
}
END_TEST

START_TEST(test_bpe_bad_input) {
    g_autoptr(DataBpe) bpe = test_bpe_load();
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_autoptr(GError) error = NULL;
    ck_assert(!data_bpe_encode(bpe, "ok \xff\xfe", -1, DATA_BPE_ENCODE_PLAIN, ids, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT));
    ck_assert_ptr_nonnull(strstr(error->message, "offset 3"));
    g_clear_error(&error);
    static const int32_t bad[] = {15496, 50257};
    g_autoptr(GString) out = g_string_new(NULL);
    ck_assert(!data_bpe_decode(bpe, bad, 2, out, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT));
    ck_assert_ptr_nonnull(strstr(error->message, "50257"));
}
END_TEST

/* Writes a vocabulary into a fresh temporary folder; returns the folder. */
static char *test_bpe_write_vocab(const char *encoder_json, const char *vocab_bpe) {
    char            *dir = test_util_tmp_dir_new("test-bpe-XXXXXX");
    g_autofree char *e = g_build_filename(dir, "encoder.json", NULL);
    g_autofree char *v = g_build_filename(dir, "vocab.bpe", NULL);
    if (encoder_json)
        ck_assert(g_file_set_contents(e, encoder_json, -1, NULL));
    if (vocab_bpe)
        ck_assert(g_file_set_contents(v, vocab_bpe, -1, NULL));
    return dir;
}

/* A complete 256-byte alphabet plus the merges given: builds encoder.json text. */
static char *test_bpe_tiny_encoder(const char *extra) {
    GString *s = g_string_new("{");
    int      n = 0;
    for (int b = 0; b < 256; b++) {
        gboolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        gunichar c = printable ? (gunichar)b : (gunichar)(256 + n++);
        char     u[8];
        u[g_unichar_to_utf8(c, u)] = '\0';
        if (c == '"' || c == '\\')
            g_string_append_printf(s, "\"\\%s\": %d,", u, b);
        else
            g_string_append_printf(s, "\"%s\": %d,", u, b);
    }
    g_string_append(s, extra);
    g_string_append(s, "}");
    return g_string_free(s, FALSE);
}

/* Loads the byte alphabet plus the tokens @encoder_extra with the merges of @vocab_bpe. */
static DataBpe *test_bpe_tiny_new(const char *encoder_extra, const char *vocab_bpe) {
    g_autofree char *enc = test_bpe_tiny_encoder(encoder_extra);
    g_autofree char *dir = test_bpe_write_vocab(enc, vocab_bpe);
    g_autoptr(GError) error = NULL;
    DataBpe *bpe = data_bpe_new_from_dir(dir, &error);
    test_util_tmp_dir_remove(dir);
    ck_assert_msg(bpe != NULL, "%s", error ? error->message : "");
    return bpe;
}

START_TEST(test_bpe_tiny_vocabulary) {
    /* Merges "a b" -> 256, "ab c" -> 257: "abcab" = [257, 256], no <|endoftext|>. */
    g_autoptr(DataBpe) bpe =
        test_bpe_tiny_new("\"ab\": 256, \"abc\": 257", "#version: 0.2\na b\nab c\n");
    g_autoptr(GError) error = NULL;
    ck_assert_int_eq(data_bpe_n_vocab(bpe), 258);
    ck_assert_int_eq(data_bpe_eot(bpe), -1);
    g_autoptr(GArray) ids = test_bpe_encode(bpe, "abcab", DATA_BPE_ENCODE_PLAIN);
    ck_assert_uint_eq(ids->len, 2);
    ck_assert_int_eq(g_array_index(ids, int32_t, 0), 257);
    ck_assert_int_eq(g_array_index(ids, int32_t, 1), 256);
    ck_assert(!data_bpe_encode(bpe, "x", -1, DATA_BPE_ENCODE_SPECIAL, ids, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
}
END_TEST

/* Bad vocabularies: each gives its error code and names the file. */
static const struct {
    const char *encoder_extra; /* NULL: no encoder.json at all; "!": not JSON */
    const char *vocab_bpe;
    int         code;
    const char *needle;
} test_bpe_bad_vocabs[] = {
    {NULL, "#version: 0.2\n", PP_IO_ERROR_OPEN, "scripts/setup"},
    {"!", "#version: 0.2\n", PP_IO_ERROR_CORRUPT, "encoder.json"},
    {"\"ab\": 256", "#version: 0.2\na b\nab\n", PP_IO_ERROR_CORRUPT, "vocab.bpe:3"},
    {"\"ab\": 256", "#version: 0.2\na q\n", PP_IO_ERROR_CORRUPT, "vocab.bpe:2"},
    {"\"ab\": 256", "#version: 0.2\na b\na b\n", PP_IO_ERROR_CORRUPT, "twice"},
    {"\"ab\": 300", "#version: 0.2\n", PP_IO_ERROR_CORRUPT, "id 300"},
    {"\"ab\": \"x\"", "#version: 0.2\n", PP_IO_ERROR_CORRUPT, "non-integer"},
};

START_TEST(test_bpe_bad_vocabulary) {
    const char      *extra = test_bpe_bad_vocabs[_i].encoder_extra;
    g_autofree char *enc = NULL;
    if (extra && strcmp(extra, "!") == 0)
        enc = g_strdup("{\"a\": ");
    else if (extra)
        enc = test_bpe_tiny_encoder(extra);
    g_autofree char *dir = test_bpe_write_vocab(enc, test_bpe_bad_vocabs[_i].vocab_bpe);
    g_autoptr(GError) error = NULL;
    DataBpe *bpe = data_bpe_new_from_dir(dir, &error);
    test_util_tmp_dir_remove(dir);
    ck_assert_ptr_null(bpe);
    ck_assert(g_error_matches(error, PP_IO_ERROR, test_bpe_bad_vocabs[_i].code));
    ck_assert_msg(strstr(error->message, test_bpe_bad_vocabs[_i].needle) != NULL,
                  "message \"%s\" lacks \"%s\"", error->message, test_bpe_bad_vocabs[_i].needle);
}
END_TEST

/* --- reference: OpenAI's merge loop, one O(n) scan per merge --- */

/* Token id of each single byte, found among the vocabulary's one-byte tokens. */
static void test_bpe_byte_ids(const DataBpe *bpe, int32_t byte_id[256]) {
    for (int b = 0; b < 256; b++)
        byte_id[b] = -1;
    for (int32_t id = 0; id < data_bpe_n_vocab(bpe); id++) {
        size_t      len = 0;
        const char *t = data_bpe_token_bytes(bpe, id, &len);
        if (len == 1)
            byte_id[(guint8)t[0]] = id;
    }
    for (int b = 0; b < 256; b++)
        ck_assert_int_ge(byte_id[b], 0);
}

/* Appends the ids of one word: find the lowest-ranked adjacent pair, merge all its occurrences
 * left to right without overlap, repeat until no pair has a rank (encoder.py's bpe()). */
static void test_bpe_reference_word(const DataBpe *bpe, const int32_t byte_id[256],
                                    const char *word, gint len, GArray *out) {
    g_autofree int32_t *sym = g_new(int32_t, len); /* (n) current symbols */
    gint                n = len;
    for (gint i = 0; i < n; i++)
        sym[i] = byte_id[(guint8)word[i]];
    while (n > 1) {
        int32_t best = -1, merged = -1;
        for (gint i = 0; i + 1 < n; i++) {
            int32_t r = data_bpe_merge_rank(bpe, sym[i], sym[i + 1], NULL);
            if (r >= 0 && (best < 0 || r < best))
                best = r;
        }
        if (best < 0)
            break;
        gint out_n = 0;
        for (gint i = 0; i < n;) {
            if (i + 1 < n && data_bpe_merge_rank(bpe, sym[i], sym[i + 1], &merged) == best) {
                sym[out_n++] = merged;
                i += 2;
            } else {
                sym[out_n++] = sym[i++];
            }
        }
        n = out_n;
    }
    g_array_append_vals(out, sym, (guint)n);
}

/* The reference encoder: GPT-2's regex cuts @text into words, each merged alone. */
static GArray *test_bpe_reference_encode(const DataBpe *bpe, const int32_t byte_id[256],
                                         const char *text, gsize len) {
    GArray *out = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_autoptr(GRegex) re = g_regex_new(DATA_BPE_PATTERN, 0, 0, NULL);
    g_autoptr(GMatchInfo) mi = NULL;
    ck_assert_ptr_nonnull(re);
    g_regex_match_full(re, text, (gssize)len, 0, 0, &mi, NULL);
    for (; g_match_info_matches(mi); g_match_info_next(mi, NULL)) {
        gint start = 0, end = 0;
        g_match_info_fetch_pos(mi, 0, &start, &end);
        test_bpe_reference_word(bpe, byte_id, text + start, end - start, out);
    }
    return out;
}

/* Encodes @text with the library and the reference and asserts the same ids. */
static void test_bpe_assert_reference(DataBpe *bpe, const int32_t byte_id[256], const char *text,
                                      gsize len) {
    g_autoptr(GArray) want = test_bpe_reference_encode(bpe, byte_id, text, len);
    g_autoptr(GArray) got = g_array_new(FALSE, FALSE, sizeof(int32_t));
    ck_assert(data_bpe_encode(bpe, text, (gssize)len, DATA_BPE_ENCODE_PLAIN, got, NULL));
    ck_assert_uint_eq(got->len, want->len);
    for (guint k = 0; k < got->len; k++)
        ck_assert_msg(g_array_index(got, int32_t, k) == g_array_index(want, int32_t, k),
                      "id %u of a %zu-byte text: %d, the reference gives %d", k, (size_t)len,
                      g_array_index(got, int32_t, k), g_array_index(want, int32_t, k));
}

static uint64_t test_bpe_rand(uint64_t *state) { /* xorshift64 */
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Characters random text is drawn from: letters, digits, apostrophes, punctuation, ASCII and
 * Unicode whitespace (runs of it), accents, CJK, emoji. */
static const char *const test_bpe_alphabet[] = {
    "a",
    "e",
    "t",
    "s",
    "q",
    "Z",
    "0",
    "7",
    "'",
    "'s",
    ".",
    ",",
    "!",
    "$",
    "-",
    " ",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "\r\n",
    "\xc2\xa0",
    "\xe3\x80\x80",
    "\xc3\xa9",
    "\xc3\xb1",
    "\xce\xb1",
    "\xd0\xb6",
    "\xe6\x97\xa5",
    "\xe2\x80\x94",
    "\xf0\x9f\x98\x80",
};

/* Random text: 0-400 pieces from the alphabet above or random code points (any byte
 * length), one test per seed. */
START_TEST(test_bpe_random_text_matches_reference) {
    g_autoptr(DataBpe) bpe = test_bpe_load();
    int32_t byte_id[256];
    test_bpe_byte_ids(bpe, byte_id);
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(_i + 1);
    for (int text_i = 0; text_i < 50; text_i++) {
        g_autoptr(GString) text = g_string_new(NULL);
        int n_pieces = (int)(test_bpe_rand(&rng) % 401);
        for (int k = 0; k < n_pieces; k++) {
            uint64_t r = test_bpe_rand(&rng);
            if (r % 8 != 0) {
                g_string_append(text,
                                test_bpe_alphabet[(r >> 8) % G_N_ELEMENTS(test_bpe_alphabet)]);
                continue;
            }
            gunichar c = (gunichar)((r >> 8) % 0x110000);
            if (c == 0 || (c >= 0xD800 && c <= 0xDFFF))
                c = 0xFFFD;
            g_string_append_unichar(text, c);
        }
        test_bpe_assert_reference(bpe, byte_id, text->str, text->len);
    }
}
END_TEST

/* Long single words, where the quadratic loop was slow and the heap does many merges. */
START_TEST(test_bpe_long_words_match_reference) {
    g_autoptr(DataBpe) bpe = test_bpe_load();
    int32_t byte_id[256];
    test_bpe_byte_ids(bpe, byte_id);
    uint64_t                 rng = 12345;
    static const char *const sets[] = {"a", "abcdefghijklmnopqrstuvwxyz", "0123456789", "ab", "!?"};
    for (size_t k = 0; k < G_N_ELEMENTS(sets); k++) {
        size_t           n_set = strlen(sets[k]);
        g_autofree char *word = g_malloc(3001);
        for (int i = 0; i < 3000; i++)
            word[i] = sets[k][test_bpe_rand(&rng) % n_set];
        word[3000] = '\0';
        test_bpe_assert_reference(bpe, byte_id, word, 3000);
    }
}
END_TEST

/* A vocabulary whose later merge outranks an earlier one ("aa a" before "a a"): a merge can
 * make a pair of lower rank than its own. OpenAI's loop first merges every occurrence of the
 * current pair: "aaaa" -> [aa, aa], not [aaa, a]; "aaa" -> [aa, a] -> [aaa]. */
START_TEST(test_bpe_lower_rank_made_by_merge) {
    g_autoptr(DataBpe) bpe =
        test_bpe_tiny_new("\"aa\": 256, \"aaa\": 257", "#version: 0.2\naa a\na a\n");
    g_autoptr(GArray) four = test_bpe_encode(bpe, "aaaa", DATA_BPE_ENCODE_PLAIN);
    ck_assert_uint_eq(four->len, 2);
    ck_assert_int_eq(g_array_index(four, int32_t, 0), 256);
    ck_assert_int_eq(g_array_index(four, int32_t, 1), 256);
    g_autoptr(GArray) three = test_bpe_encode(bpe, "aaa", DATA_BPE_ENCODE_PLAIN);
    ck_assert_uint_eq(three->len, 1);
    ck_assert_int_eq(g_array_index(three, int32_t, 0), 257);
    int32_t byte_id[256];
    test_bpe_byte_ids(bpe, byte_id);
    for (int n = 1; n <= 40; n++) {
        g_autofree char *word = g_strnfill((gsize)n, 'a');
        test_bpe_assert_reference(bpe, byte_id, word, (gsize)n);
    }
}
END_TEST

int main(void) {
    Suite       *s = suite_create("bpe");
    TCase       *tc = tcase_create("bpe");
    TestUtilData data;
    test_util_data_init(&data);
    tcase_set_timeout(tc, 30);
    /* The GPT-2 vocabulary and the corpus: skipped without scripts/fetch-data. */
    test_util_data_add(&data, tc, test_bpe_reference_ids, 0, G_N_ELEMENTS(test_bpe_refs));
    test_util_data_add(&data, tc, test_bpe_vocabulary_shape, 0, 1);
    test_util_data_add(&data, tc, test_bpe_corpus_round_trip, 0, 1);
    test_util_data_add(&data, tc, test_bpe_endoftext, 0, 1);
    test_util_data_add(&data, tc, test_bpe_bad_input, 0, 1);
    test_util_data_add(&data, tc, test_bpe_random_text_matches_reference, 0, 4);
    test_util_data_add(&data, tc, test_bpe_long_words_match_reference, 0, 1);
    /* Small vocabularies written by the tests. */
    tcase_add_test(tc, test_bpe_tiny_vocabulary);
    tcase_add_loop_test(tc, test_bpe_bad_vocabulary, 0, G_N_ELEMENTS(test_bpe_bad_vocabs));
    tcase_add_test(tc, test_bpe_lower_rank_made_by_merge);
    suite_add_tcase(s, tc);
    return test_util_data_run(&data, s);
}
