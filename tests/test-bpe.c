/* SPDX-License-Identifier: MIT
 * test-bpe.c: the GPT-2 tokenizer against ids produced by OpenAI's algorithm (the npm package
 * gpt-3-encoder@1.1.4 under node), exact encode -> decode round trips on every corpus file, the
 * <|endoftext|> handling and the errors on bad vocabularies and bad input.
 * Needs the cache filled by scripts/fetch-data (scripts/setup).
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

START_TEST(test_bpe_tiny_vocabulary) {
    /* Merges "a b" -> 256, "ab c" -> 257: "abcab" = [257, 256], no <|endoftext|>. */
    g_autofree char *enc = test_bpe_tiny_encoder("\"ab\": 256, \"abc\": 257");
    g_autofree char *dir = test_bpe_write_vocab(enc, "#version: 0.2\na b\nab c\n");
    g_autoptr(GError) error = NULL;
    g_autoptr(DataBpe) bpe = data_bpe_new_from_dir(dir, &error);
    test_util_tmp_dir_remove(dir);
    ck_assert_msg(bpe != NULL, "%s", error ? error->message : "");
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

int main(void) {
    Suite *s = suite_create("bpe");
    TCase *tc = tcase_create("bpe");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_bpe_reference_ids, 0, G_N_ELEMENTS(test_bpe_refs));
    tcase_add_test(tc, test_bpe_vocabulary_shape);
    tcase_add_test(tc, test_bpe_corpus_round_trip);
    tcase_add_test(tc, test_bpe_endoftext);
    tcase_add_test(tc, test_bpe_bad_input);
    tcase_add_test(tc, test_bpe_tiny_vocabulary);
    tcase_add_loop_test(tc, test_bpe_bad_vocabulary, 0, G_N_ELEMENTS(test_bpe_bad_vocabs));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
