/* SPDX-License-Identifier: MIT
 * test-shard.c: token shards (byte layout, round trip, each corruption and the vocabulary
 * mismatch), the document split rule, corpus discovery and shard building on the fixtures in
 * tests/data/text, and the input-keyed shard cache of data_prepare(). The corpus tests need
 * the GPT-2 vocabulary in the cache (scripts/fetch-data) and are skipped without it.
 */
#include <check.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "data-corpus.h"
#include "data-shard.h"
#include "pp-error.h"
#include "test-util.h"

#define TEST_TEXT_DIR PP_SOURCE_ROOT "/tests/data/text"

/* A fresh temporary folder with tokens.bin in it; test_util_tmp_clear() removes it. */
static void test_shard_tmp_init(TestUtilTmp *t) {
    test_util_tmp_init(t, "test-shard-XXXXXX", "tokens.bin");
}

static const uint8_t test_fp_a[DATA_BPE_FINGERPRINT_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8};
static const uint8_t test_fp_b[DATA_BPE_FINGERPRINT_BYTES] = {1, 2, 3, 4, 5, 6, 7, 9};

/* Writes @n tokens (i * 7919 mod 50257) with vocabulary 50257 and fingerprint A. */
static void test_shard_write_ramp(const char *path, uint64_t n) {
    g_autofree uint16_t *tok = g_new(uint16_t, n + 1);
    for (uint64_t i = 0; i < n; i++)
        tok[i] = (uint16_t)((i * 7919) % 50257);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(data_shard_write(path, tok, n, 50257, test_fp_a, &error), "%s",
                  error ? error->message : "");
}

START_TEST(test_shard_round_trip) {
    const uint64_t n = 10007;
    TestUtilTmp    t;
    test_shard_tmp_init(&t);
    test_shard_write_ramp(t.path, n);

    /* The byte layout: magic, version 1, count, vocabulary, fingerprint, then LE uint16. */
    g_autofree char *raw = NULL;
    gsize            len = 0;
    ck_assert(g_file_get_contents(t.path, &raw, &len, NULL));
    ck_assert_uint_eq(len, DATA_SHARD_HEADER_BYTES + 2 * n);
    const uint8_t *b = (const uint8_t *)raw;
    ck_assert(memcmp(b, "PPTK", 4) == 0);
    ck_assert_uint_eq(b[4] | b[5] << 8 | b[6] << 16 | (uint32_t)b[7] << 24, 1);
    ck_assert_uint_eq(b[8] | b[9] << 8 | b[10] << 16, n);
    ck_assert_uint_eq(b[11] | b[12] | b[13] | b[14] | b[15], 0);
    ck_assert_uint_eq(b[16] | b[17] << 8 | b[18] << 16, 50257);
    ck_assert(memcmp(b + 24, test_fp_a, DATA_BPE_FINGERPRINT_BYTES) == 0);
    uint64_t i5 = 5;
    ck_assert_uint_eq(b[256 + 2 * i5] | b[256 + 2 * i5 + 1] << 8, (5 * 7919) % 50257);

    g_autoptr(GError) error = NULL;
    g_autoptr(DataShard) shard = data_shard_open(t.path, test_fp_a, &error);
    ck_assert_msg(shard != NULL, "%s", error ? error->message : "");
    uint64_t        got_n = 0;
    const uint16_t *tok = data_shard_tokens(shard, &got_n);
    ck_assert_uint_eq(got_n, n);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_uint_eq(tok[i], (i * 7919) % 50257);
    ck_assert_int_eq(data_shard_n_vocab(shard), 50257);
    ck_assert(memcmp(data_shard_fingerprint(shard), test_fp_a, DATA_BPE_FINGERPRINT_BYTES) == 0);
    /* Without an expected fingerprint any vocabulary is accepted. */
    g_autoptr(DataShard) any = data_shard_open(t.path, NULL, NULL);
    ck_assert_ptr_nonnull(any);
    test_util_tmp_clear(&t);
}
END_TEST

START_TEST(test_shard_empty) {
    TestUtilTmp t;
    test_shard_tmp_init(&t);
    test_shard_write_ramp(t.path, 0);
    g_autoptr(DataShard) shard = data_shard_open(t.path, test_fp_a, NULL);
    ck_assert_ptr_nonnull(shard);
    uint64_t n = 1;
    data_shard_tokens(shard, &n);
    ck_assert_uint_eq(n, 0);
    test_util_tmp_clear(&t);
}
END_TEST

/* Damage applied to a valid 100-token shard, and the error it must give. */
typedef enum {
    TEST_DAMAGE_TRUNCATE,   /* drop the last byte */
    TEST_DAMAGE_APPEND,     /* one byte too many */
    TEST_DAMAGE_SHORT,      /* only 100 bytes of header */
    TEST_DAMAGE_MAGIC,      /* "PPTX" */
    TEST_DAMAGE_VERSION,    /* version 2 */
    TEST_DAMAGE_TOKEN,      /* a token id 60000 >= 50257 */
    TEST_DAMAGE_VOCABULARY, /* fingerprint of another vocabulary */
    TEST_DAMAGE_MISSING,    /* no file */
} TestDamage;

static const struct {
    TestDamage  damage;
    int         code;
    const char *needle;
} test_shard_damages[] = {
    {TEST_DAMAGE_TRUNCATE, PP_IO_ERROR_CORRUPT, "truncated"},
    {TEST_DAMAGE_APPEND, PP_IO_ERROR_CORRUPT, "header says 100 tokens"},
    {TEST_DAMAGE_SHORT, PP_IO_ERROR_CORRUPT, "shorter than the 256-byte header"},
    {TEST_DAMAGE_MAGIC, PP_IO_ERROR_CORRUPT, "not a pacer token shard"},
    {TEST_DAMAGE_VERSION, PP_IO_ERROR_CORRUPT, "version 2"},
    {TEST_DAMAGE_TOKEN, PP_IO_ERROR_CORRUPT, "60000"},
    {TEST_DAMAGE_VOCABULARY, PP_IO_ERROR_MISMATCH, "another vocabulary"},
    {TEST_DAMAGE_MISSING, PP_IO_ERROR_OPEN, "cannot read"},
};

START_TEST(test_shard_errors) {
    TestUtilTmp t;
    test_shard_tmp_init(&t);
    test_shard_write_ramp(t.path, 100);
    g_autofree char *raw = NULL;
    gsize            len = 0;
    ck_assert(g_file_get_contents(t.path, &raw, &len, NULL));
    const uint8_t *expect_fp = test_fp_a;
    switch (test_shard_damages[_i].damage) {
    case TEST_DAMAGE_TRUNCATE:
        len -= 1;
        break;
    case TEST_DAMAGE_APPEND:
        raw = g_realloc(raw, len + 1);
        raw[len++] = 0;
        break;
    case TEST_DAMAGE_SHORT:
        len = 100;
        break;
    case TEST_DAMAGE_MAGIC:
        raw[3] = 'X';
        break;
    case TEST_DAMAGE_VERSION:
        raw[4] = 2;
        break;
    case TEST_DAMAGE_TOKEN:
        raw[256 + 2 * 17] = (char)(60000 & 0xff);
        raw[256 + 2 * 17 + 1] = (char)(60000 >> 8);
        break;
    case TEST_DAMAGE_VOCABULARY:
        expect_fp = test_fp_b;
        break;
    case TEST_DAMAGE_MISSING:
        break;
    }
    if (test_shard_damages[_i].damage == TEST_DAMAGE_MISSING)
        ck_assert_int_eq(g_remove(t.path), 0);
    else
        ck_assert(g_file_set_contents(t.path, raw, (gssize)len, NULL));
    g_autoptr(GError) error = NULL;
    DataShard *shard = data_shard_open(t.path, expect_fp, &error);
    ck_assert_ptr_null(shard);
    ck_assert_msg(g_error_matches(error, PP_IO_ERROR, test_shard_damages[_i].code),
                  "wrong error: %s", error ? error->message : "(none)");
    ck_assert_msg(strstr(error->message, t.path) != NULL, "message lacks the path: %s",
                  error->message);
    ck_assert_msg(strstr(error->message, test_shard_damages[_i].needle) != NULL,
                  "message \"%s\" lacks \"%s\"", error->message, test_shard_damages[_i].needle);
    test_util_tmp_clear(&t);
}
END_TEST

START_TEST(test_shard_split_rule) {
    int64_t n_val = 0;
    for (int64_t i = 0; i < 233; i++) {
        gboolean v = data_corpus_is_val(i, 0.1);
        ck_assert_int_eq(v, i % 10 == 9);
        n_val += v;
    }
    ck_assert_int_eq(n_val, 23);
    for (int64_t i = 0; i < 50; i++) {
        ck_assert(!data_corpus_is_val(i, 0.0));
        ck_assert_int_eq(data_corpus_is_val(i, 0.5), i % 2 == 1);
    }
    /* floor(n * f) documents in val after any n: spread evenly */
    int64_t k = 0;
    for (int64_t i = 0; i < 1000; i++) {
        k += data_corpus_is_val(i, 0.37);
        ck_assert_int_eq(k, (int64_t)((double)(i + 1) * 0.37));
    }
}
END_TEST

START_TEST(test_shard_corpus_find) {
    const char *const dir_only[] = {TEST_TEXT_DIR, NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) files = data_corpus_find(dir_only, NULL, &error);
    ck_assert_msg(files != NULL, "%s", error ? error->message : "");
    ck_assert_uint_eq(files->len, 3); /* notes.md is not a .txt */
    ck_assert(g_str_has_suffix(g_ptr_array_index(files, 0), "doc-a.txt"));
    ck_assert(g_str_has_suffix(g_ptr_array_index(files, 2), "doc-c.txt"));
    /* A file first, then a folder: argument order kept. */
    const char *const mixed[] = {TEST_TEXT_DIR "/doc-c.txt", TEST_TEXT_DIR, NULL};
    g_autoptr(GPtrArray) files2 = data_corpus_find(mixed, NULL, NULL);
    ck_assert_uint_eq(files2->len, 4);
    ck_assert(g_str_has_suffix(g_ptr_array_index(files2, 0), "doc-c.txt"));
    ck_assert(g_str_has_suffix(g_ptr_array_index(files2, 1), "doc-a.txt"));
    const char *const missing[] = {TEST_TEXT_DIR "/nope.txt", NULL};
    GPtrArray        *none = data_corpus_find(missing, NULL, &error);
    ck_assert_ptr_null(none);
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_OPEN));
    ck_assert_ptr_nonnull(strstr(error->message, "nope.txt"));
    g_clear_error(&error);
    /* An empty cache: the message says how to fill it. */
    TestUtilTmp t;
    test_shard_tmp_init(&t);
    none = data_corpus_find(NULL, t.dir, &error);
    ck_assert_ptr_null(none);
    ck_assert_ptr_nonnull(strstr(error->message, "scripts/setup"));
    test_util_tmp_clear(&t);
}
END_TEST

static DataBpe *test_shard_bpe(void) {
    g_autoptr(GError) error = NULL;
    DataBpe *bpe = data_bpe_new_from_cache(NULL, &error);
    ck_assert_msg(bpe != NULL, "cannot load the GPT-2 vocabulary (run scripts/setup): %s",
                  error ? error->message : "");
    return bpe;
}

/* Decodes a shard back to text. */
static char *test_shard_text(const DataBpe *bpe, const char *path) {
    g_autoptr(GError) error = NULL;
    g_autoptr(DataShard) shard = data_shard_open(path, data_bpe_fingerprint(bpe), &error);
    ck_assert_msg(shard != NULL, "%s", error ? error->message : "");
    uint64_t            n = 0;
    const uint16_t     *tok = data_shard_tokens(shard, &n);
    g_autofree int32_t *ids = g_new(int32_t, n + 1);
    for (uint64_t i = 0; i < n; i++)
        ids[i] = tok[i];
    GString *s = g_string_new(NULL);
    ck_assert(data_bpe_decode(bpe, ids, n, s, NULL));
    return g_string_free(s, FALSE);
}

static char *test_shard_read(const char *name) {
    g_autofree char *p = g_build_filename(TEST_TEXT_DIR, name, NULL);
    return test_util_read_file(p, NULL);
}

/* Three documents, val_fraction 0.34: a and b in train, c in val; each shard decodes to its
 * documents, each preceded by <|endoftext|>. */
START_TEST(test_shard_build) {
    g_autoptr(DataBpe) bpe = test_shard_bpe();
    TestUtilTmp t;
    test_shard_tmp_init(&t);
    DataCorpusParams params;
    data_params_init(&params);
    ck_assert_double_eq(params.val_fraction, DATA_VAL_FRACTION_DEFAULT);
    const char *const paths[] = {TEST_TEXT_DIR, NULL};
    params.paths = paths;
    params.val_fraction = 0.34;
    params.out_dir = t.dir;
    g_autofree char *train = NULL, *val = NULL;
    DataSplitStats   st_train, st_val;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(data_prepare(&params, &train, &val, &st_train, &st_val, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(st_train.n_docs, 2);
    ck_assert_int_eq(st_val.n_docs, 1);

    g_autofree char *a = test_shard_read("doc-a.txt");
    g_autofree char *b = test_shard_read("doc-b.txt");
    g_autofree char *c = test_shard_read("doc-c.txt");
    g_autofree char *want_train = g_strconcat("<|endoftext|>", a, "<|endoftext|>", b, NULL);
    g_autofree char *want_val = g_strconcat("<|endoftext|>", c, NULL);
    g_autofree char *got_train = test_shard_text(bpe, train);
    g_autofree char *got_val = test_shard_text(bpe, val);
    ck_assert_str_eq(got_train, want_train);
    ck_assert_str_eq(got_val, want_val);

    /* Token counts: one <|endoftext|> + the document's own tokens, per document. */
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    ck_assert(data_bpe_encode(bpe, a, -1, DATA_BPE_ENCODE_PLAIN, ids, NULL));
    ck_assert(data_bpe_encode(bpe, b, -1, DATA_BPE_ENCODE_PLAIN, ids, NULL));
    ck_assert_int_eq(st_train.n_tokens, (int64_t)ids->len + 2);
    g_autoptr(DataShard) s = data_shard_open(train, NULL, NULL);
    uint64_t        n = 0;
    const uint16_t *tok = data_shard_tokens(s, &n);
    ck_assert_uint_eq(n, ids->len + 2);
    ck_assert_uint_eq(tok[0], DATA_BPE_EOT);
    test_util_tmp_clear(&t);
}
END_TEST

/* data_prepare_default keys the shards by the inputs, reuses them and rebuilds a broken one. */
START_TEST(test_shard_prepare_cache) {
    DataCorpusParams params;
    data_params_init(&params);
    const char *const paths[] = {TEST_TEXT_DIR, NULL};
    params.paths = paths;
    params.val_fraction = 0.5;
    g_autofree char *train = NULL, *val = NULL, *train2 = NULL, *val2 = NULL;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(data_prepare_default(&params, &train, &val, &error), "%s",
                  error ? error->message : "");
    g_autofree char *cache = data_cache_dir(NULL);
    ck_assert(g_str_has_prefix(train, cache));
    ck_assert(g_str_has_suffix(train, "train.bin"));

    /* Same inputs: same files, not rewritten (an atomic rewrite would change the inode). */
    g_autofree char *raw = NULL;
    gsize            len = 0;
    ck_assert(g_file_get_contents(train, &raw, &len, NULL));
    GStatBuf before, after;
    ck_assert_int_eq(g_stat(train, &before), 0);
    ck_assert(data_prepare_default(&params, &train2, &val2, NULL));
    ck_assert_str_eq(train, train2);
    ck_assert_str_eq(val, val2);
    ck_assert_int_eq(g_stat(train, &after), 0);
    ck_assert_uint_eq(before.st_ino, after.st_ino);

    /* Break train.bin: the next call rebuilds it identically. */
    ck_assert(g_file_set_contents(train, "garbage", -1, NULL));
    g_free(train2);
    g_free(val2);
    ck_assert(data_prepare_default(&params, &train2, &val2, NULL));
    g_autofree char *raw2 = NULL;
    gsize            len2 = 0;
    ck_assert(g_file_get_contents(train2, &raw2, &len2, NULL));
    ck_assert_uint_eq(len2, len);
    ck_assert(memcmp(raw, raw2, len) == 0);

    /* Another split rule: another key, another folder. */
    g_autofree char *train3 = NULL, *val3 = NULL;
    params.val_fraction = 0.0;
    DataSplitStats st_train, st_val;
    ck_assert(data_prepare(&params, &train3, &val3, &st_train, &st_val, NULL));
    ck_assert_str_ne(train3, train);
    ck_assert_int_eq(st_train.n_docs, 3);
    ck_assert_int_eq(st_val.n_docs, 0);
    ck_assert_int_eq(st_val.n_tokens, 0);

    params.val_fraction = 1.0;
    g_autofree char *t4 = NULL, *v4 = NULL;
    ck_assert(!data_prepare(&params, &t4, &v4, NULL, NULL, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
}
END_TEST

/* Runs pacer-data with @args; returns its exit status, output in @out/@err (transfer full). */
static int test_shard_run(const char *const *args, char **out, char **err) {
    return test_util_spawn(PP_BUILD_ROOT "/data/pacer-data", args, out, err);
}

/* pacer-data encode/decode/prepare: outputs and exit statuses (0 ok, 1 bad input, 2 usage). */
START_TEST(test_shard_cli) {
    g_autoptr(DataBpe) bpe = test_shard_bpe();
    g_autofree char *a = test_shard_read("doc-a.txt");
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    ck_assert(data_bpe_encode(bpe, a, -1, DATA_BPE_ENCODE_PLAIN, ids, NULL));
    GString *want = g_string_new(NULL);
    for (guint i = 0; i < ids->len; i++)
        g_string_append_printf(want, i ? " %d" : "%d", g_array_index(ids, int32_t, i));
    g_string_append_c(want, '\n');

    g_autofree char  *out = NULL, *err = NULL;
    const char *const enc[] = {"encode", TEST_TEXT_DIR "/doc-a.txt", NULL};
    ck_assert_int_eq(test_shard_run(enc, &out, &err), 0);
    ck_assert_str_eq(out, want->str);

    TestUtilTmp t;
    test_shard_tmp_init(&t);
    ck_assert(g_file_set_contents(t.path, want->str, -1, NULL));
    g_string_free(want, TRUE);
    const char *const dec[] = {"decode", t.path, NULL};
    g_free(out);
    g_free(err);
    ck_assert_int_eq(test_shard_run(dec, &out, &err), 0);
    ck_assert_str_eq(out, a);

    ck_assert(g_file_set_contents(t.path, "15496 x", -1, NULL));
    g_free(out);
    g_free(err);
    ck_assert_int_eq(test_shard_run(dec, &out, &err), 1);
    ck_assert_ptr_nonnull(strstr(err, "\"x\" (item 2) is not a token id"));

    const char *const prep[] = {"prepare", "--out",       t.dir, "--val-fraction",
                                "0.34",    TEST_TEXT_DIR, NULL};
    g_free(out);
    g_free(err);
    ck_assert_int_eq(test_shard_run(prep, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "train: 2 docs"));
    ck_assert_ptr_nonnull(strstr(out, "val: 1 docs"));

    const char *const bad_path[] = {"prepare", "--out", t.dir, TEST_TEXT_DIR "/nope", NULL};
    g_free(out);
    g_free(err);
    ck_assert_int_eq(test_shard_run(bad_path, &out, &err), 1);
    ck_assert_ptr_nonnull(strstr(err, "nope"));

    const char *const unknown[] = {"frobnicate", NULL};
    g_free(out);
    g_free(err);
    ck_assert_int_eq(test_shard_run(unknown, &out, &err), 2);
    test_util_tmp_clear(&t);
}
END_TEST

int main(void) {
    Suite       *s = suite_create("shard");
    TCase       *tc = tcase_create("shard");
    TestUtilData data;
    test_util_data_init(&data);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_shard_round_trip);
    tcase_add_test(tc, test_shard_empty);
    tcase_add_loop_test(tc, test_shard_errors, 0, G_N_ELEMENTS(test_shard_damages));
    tcase_add_test(tc, test_shard_split_rule);
    tcase_add_test(tc, test_shard_corpus_find);
    /* These tokenise with the GPT-2 vocabulary: skipped without scripts/fetch-data. */
    test_util_data_add(&data, tc, test_shard_build, 0, 1);
    test_util_data_add(&data, tc, test_shard_prepare_cache, 0, 1);
    test_util_data_add(&data, tc, test_shard_cli, 0, 1);
    suite_add_tcase(s, tc);
    return test_util_data_run(&data, s);
}
