/* SPDX-License-Identifier: MIT
 * data-main.c: pacer-data, the command-line face of the data library.
 *   pacer-data prepare [--cache DIR] [--val-fraction F] [--out DIR] [PATH...]  build shards
 *   pacer-data encode [--cache DIR] [--special] FILE                           text -> ids
 *   pacer-data decode [--cache DIR] [FILE]                                     ids -> text
 * Exit status: 0 success, 1 bad input (message on stderr), 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data-bpe.h"
#include "data-corpus.h"
#include "pp-error.h"

#define DATA_MAIN_USAGE                                                                            \
    "usage: pacer-data COMMAND [OPTION...]\n"                                                      \
    "  prepare [--cache DIR] [--val-fraction F] [--out DIR] [PATH...]\n"                           \
    "          tokenise PATHs (.txt files or folders; default: the cached State of the Union\n"    \
    "          corpus) into train.bin and val.bin shards\n"                                        \
    "  encode  [--cache DIR] [--special] FILE   print the token ids of FILE (- = stdin)\n"         \
    "  decode  [--cache DIR] [FILE]             print the text of the ids in FILE (stdin)\n"

/* Reads all of @path ("-" or NULL: stdin) into @out. */
static gboolean data_main_read(const char *path, GString *out, GError **error) {
    if (path && strcmp(path, "-") != 0) {
        g_autofree char *text = NULL;
        gsize            len = 0;
        if (!pp_file_read(path, NULL, &text, &len, error))
            return FALSE;
        g_string_append_len(out, text, (gssize)len);
        return TRUE;
    }
    char   buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
        g_string_append_len(out, buf, (gssize)n);
    if (ferror(stdin)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot read stdin: %s",
                    g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}

/* Parses the options of one command; argv[0] is the command. Returns FALSE on usage errors. */
static gboolean data_main_parse(int *argc, char ***argv, const char *params,
                                const GOptionEntry *entries, GError **error) {
    g_autoptr(GOptionContext) ctx = g_option_context_new(params);
    g_option_context_add_main_entries(ctx, entries, NULL);
    return g_option_context_parse(ctx, argc, argv, error);
}

static int data_main_prepare(int argc, char **argv, GError **error) {
    g_autofree char   *cache = NULL, *out = NULL;
    double             val_fraction = DATA_VAL_FRACTION_DEFAULT;
    const GOptionEntry entries[] = {
        {"cache", 0, 0, G_OPTION_ARG_FILENAME, &cache,
         "Cache folder (default: $PACER_CACHE or "
         "the source tree's .cache)",
         "DIR"},
        {"val-fraction", 0, 0, G_OPTION_ARG_DOUBLE, &val_fraction,
         "Share of documents in the validation split, in [0, 1) (default 0.1)", "F"},
        {"out", 0, 0, G_OPTION_ARG_FILENAME, &out,
         "Write train.bin and val.bin here (default: the cache, keyed by the inputs)", "DIR"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    if (!data_main_parse(&argc, &argv, "prepare [PATH...]", entries, error))
        return 2;
    DataCorpusParams params;
    data_params_init(&params);
    params.cache_dir = cache;
    params.out_dir = out;
    params.val_fraction = val_fraction;
    g_autofree const char **paths = g_new0(const char *, argc); /* NULL-terminated */
    for (int i = 1; i < argc; i++)
        paths[i - 1] = argv[i];
    params.paths = paths;
    g_autofree char *train_path = NULL, *val_path = NULL;
    DataSplitStats   train, val;
    if (!data_prepare(&params, &train_path, &val_path, &train, &val, error))
        return 1;
    printf("train: %" G_GINT64_FORMAT " docs, %" G_GINT64_FORMAT " tokens -> %s\n", train.n_docs,
           train.n_tokens, train_path);
    printf("val: %" G_GINT64_FORMAT " docs, %" G_GINT64_FORMAT " tokens -> %s\n", val.n_docs,
           val.n_tokens, val_path);
    return 0;
}

static int data_main_encode(int argc, char **argv, GError **error) {
    g_autofree char   *cache = NULL;
    gboolean           special = FALSE;
    const GOptionEntry entries[] = {
        {"cache", 0, 0, G_OPTION_ARG_FILENAME, &cache, "Cache folder holding gpt2/", "DIR"},
        {"special", 0, 0, G_OPTION_ARG_NONE, &special,
         "Encode a literal " DATA_BPE_EOT_TEXT " as its token", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    if (!data_main_parse(&argc, &argv, "encode FILE", entries, error))
        return 2;
    if (argc != 2) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "encode takes one FILE (- for stdin), got %d", argc - 1);
        return 2;
    }
    g_autoptr(DataBpe) bpe = data_bpe_new_from_cache(cache, error);
    g_autoptr(GString) text = g_string_new(NULL);
    if (!bpe || !data_main_read(argv[1], text, error))
        return 1;
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    if (!data_bpe_encode(bpe, text->str, (gssize)text->len,
                         special ? DATA_BPE_ENCODE_SPECIAL : DATA_BPE_ENCODE_PLAIN, ids, error)) {
        g_prefix_error(error, "%s: ", argv[1]);
        return 1;
    }
    for (guint i = 0; i < ids->len; i++)
        printf(i ? " %d" : "%d", g_array_index(ids, int32_t, i));
    printf("\n");
    return 0;
}

static int data_main_decode(int argc, char **argv, GError **error) {
    g_autofree char   *cache = NULL;
    const GOptionEntry entries[] = {
        {"cache", 0, 0, G_OPTION_ARG_FILENAME, &cache, "Cache folder holding gpt2/", "DIR"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    if (!data_main_parse(&argc, &argv, "decode [FILE]", entries, error))
        return 2;
    if (argc > 2) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "decode takes at most one FILE, got %d", argc - 1);
        return 2;
    }
    const char *path = argc == 2 ? argv[1] : "-";
    g_autoptr(DataBpe) bpe = data_bpe_new_from_cache(cache, error);
    g_autoptr(GString) text = g_string_new(NULL);
    if (!bpe || !data_main_read(path, text, error))
        return 1;
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_auto(GStrv) words = g_strsplit_set(text->str, " \t\r\n", -1);
    for (char **w = words; *w; w++) {
        if (**w == '\0')
            continue;
        gint64 v = 0;
        if (!g_ascii_string_to_signed(*w, 10, 0, G_MAXINT32, &v, NULL)) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s: \"%s\" (item %u) is not a token id; expected non-negative integers "
                        "separated by spaces",
                        path, *w, ids->len + 1);
            return 1;
        }
        int32_t id = (int32_t)v;
        g_array_append_val(ids, id);
    }
    g_autoptr(GString) out = g_string_new(NULL);
    if (!data_bpe_decode(bpe, (const int32_t *)(void *)ids->data, ids->len, out, error)) {
        g_prefix_error(error, "%s: ", path);
        return 1;
    }
    fwrite(out->str, 1, out->len, stdout);
    return 0;
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv, GError **error);
    } commands[] = {
        {"prepare", data_main_prepare},
        {"encode", data_main_encode},
        {"decode", data_main_decode},
    };
    if (argc < 2) {
        fputs(DATA_MAIN_USAGE, stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(DATA_MAIN_USAGE, stdout);
        return 0;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        g_autoptr(GError) error = NULL;
        int rc = commands[i].run(argc - 1, argv + 1, &error);
        if (rc != 0) {
            fprintf(stderr, "pacer-data %s: %s\n", argv[1], error ? error->message : "failed");
            if (rc == 2)
                fputs(DATA_MAIN_USAGE, stderr);
        }
        return rc;
    }
    fprintf(stderr, "pacer-data: unknown command \"%s\"\n%s", argv[1], DATA_MAIN_USAGE);
    return 2;
}
