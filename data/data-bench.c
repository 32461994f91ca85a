/* SPDX-License-Identifier: MIT
 * data-bench.c: pacer-data-bench, the tokenizer's speed benchmark (not a test). Encodes
 * pathological single-word inputs (1 MB of one letter, of random letters, of digits, of
 * punctuation), 1 MB of random mixed text and the cached corpus, each with a fresh tokenizer
 * (empty word cache), and prints one table row per input: the median of a few runs in MB/s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data-bpe.h"
#include "data-corpus.h"

/* Runs per row: odd, so the median is one of them. */
#define DATA_BENCH_REPEATS 3
#define DATA_BENCH_BYTES   (1 << 20)

static uint64_t data_bench_rand(uint64_t *state) { /* xorshift64 */
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* DATA_BENCH_BYTES characters drawn uniformly from @set (ASCII, no spaces unless in @set). */
static GString *data_bench_draw(const char *set, uint64_t seed) {
    size_t   n_set = strlen(set);
    GString *s = g_string_sized_new(DATA_BENCH_BYTES);
    for (int i = 0; i < DATA_BENCH_BYTES; i++)
        g_string_append_c(s, set[data_bench_rand(&seed) % n_set]);
    return s;
}

/* About DATA_BENCH_BYTES of words, numbers, punctuation, whitespace runs and non-ASCII text. */
static GString *data_bench_mixed(uint64_t seed) {
    static const char *const pieces[] = {
        "the",
        " quick",
        " brown",
        "'s",
        " 1984",
        ",",
        ".",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        " caf\xc3\xa9",
        " \xe6\x97\xa5\xe6\x9c\xac",
        " \xf0\x9f\x98\x80",
        "\xe3\x80\x80",
        "--",
    };
    GString *s = g_string_sized_new(DATA_BENCH_BYTES + 16);
    while (s->len < DATA_BENCH_BYTES)
        g_string_append(s, pieces[data_bench_rand(&seed) % G_N_ELEMENTS(pieces)]);
    return s;
}

/* The cached corpus, every file back to back; NULL with @error set when it is missing. */
static GString *data_bench_corpus(GError **error) {
    g_autoptr(GPtrArray) files = data_corpus_find(NULL, NULL, error);
    if (!files)
        return NULL;
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < files->len; i++) {
        g_autofree char *text = NULL;
        gsize            len = 0;
        if (!g_file_get_contents(g_ptr_array_index(files, i), &text, &len, error)) {
            g_string_free(s, TRUE);
            return NULL;
        }
        g_string_append_len(s, text, (gssize)len);
    }
    return s;
}

static int data_bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times DATA_BENCH_REPEATS encodings of @text, each with a freshly loaded tokenizer, and prints
 * the row. Returns FALSE with @error set when the vocabulary cannot be loaded. */
static gboolean data_bench_row(const char *name, const GString *text, GError **error) {
    double secs[DATA_BENCH_REPEATS];
    guint  n_ids = 0;
    for (int r = 0; r < DATA_BENCH_REPEATS; r++) {
        g_autoptr(DataBpe) bpe = data_bpe_new_from_cache(NULL, error);
        if (!bpe)
            return FALSE;
        g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
        gint64   t0 = g_get_monotonic_time();
        gboolean ok =
            data_bpe_encode(bpe, text->str, (gssize)text->len, DATA_BPE_ENCODE_PLAIN, ids, error);
        secs[r] = (double)(g_get_monotonic_time() - t0) / 1e6;
        if (!ok)
            return FALSE;
        n_ids = ids->len;
    }
    qsort(secs, DATA_BENCH_REPEATS, sizeof secs[0], data_bench_cmp_double);
    double s = secs[DATA_BENCH_REPEATS / 2];
    printf("%-28s %10.2f %10u %10.3f %10.2f\n", name, (double)text->len / 1e6, n_ids, s,
           (double)text->len / 1e6 / s);
    return TRUE;
}

int main(void) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) corpus = data_bench_corpus(&error);
    if (!corpus) {
        fprintf(stderr, "pacer-data-bench: %s\n", error->message);
        return 1;
    }
    struct {
        const char *name;
        GString    *text;
    } rows[] = {
        {"1 MB one letter", data_bench_draw("a", 1)},
        {"1 MB random letters", data_bench_draw("abcdefghijklmnopqrstuvwxyz", 2)},
        {"1 MB random digits", data_bench_draw("0123456789", 3)},
        {"1 MB punctuation", data_bench_draw("!?.,;:-", 4)},
        {"1 MB mixed text", data_bench_mixed(5)},
        {"corpus (State of the Union)", g_string_new_len(corpus->str, (gssize)corpus->len)},
    };
    printf("%-28s %10s %10s %10s %10s\n", "input", "MB", "tokens", "median s", "MB/s");
    gboolean ok = TRUE;
    for (size_t i = 0; i < G_N_ELEMENTS(rows); i++) {
        ok = ok && data_bench_row(rows[i].name, rows[i].text, &error);
        g_string_free(rows[i].text, TRUE);
    }
    if (!ok) {
        fprintf(stderr, "pacer-data-bench: %s\n", error->message);
        return 1;
    }
    return 0;
}
