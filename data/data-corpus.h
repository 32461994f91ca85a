/* SPDX-License-Identifier: MIT
 * data-corpus.h: from text files to train/val token shards. Finds the corpus (the State of the
 * Union speeches scripts/fetch-data puts in the cache, or given files/folders of .txt), treats
 * each file as one document, splits documents deterministically, tokenises them and writes one
 * shard per split with <|endoftext|> before every document. Shards are cached by their inputs.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "data-bpe.h"

G_BEGIN_DECLS

#define DATA_VAL_FRACTION_DEFAULT 0.1
#define DATA_CACHE_ENV            "PACER_CACHE"

/* What to build; set defaults with data_params_init(). Strings are borrowed. */
typedef struct {
    const char        *cache_dir; /* NULL: $PACER_CACHE, else the source tree's .cache */
    const char *const *paths;     /* NULL-terminated .txt files or folders of .txt files;
                                     NULL or empty: the cache's sotu/ speeches */
    double      val_fraction;     /* share of documents in val, in [0, 1) */
    const char *out_dir;          /* NULL: cache/shards/<key of the inputs>, reused when
                                     present; else always (re)built there */
} DataCorpusParams;

/* Document and token counts of one split. */
typedef struct {
    int64_t n_docs;
    int64_t n_tokens; /* including one <|endoftext|> per document */
} DataSplitStats;

/* Sets @params to the defaults (everything NULL, val_fraction DATA_VAL_FRACTION_DEFAULT). */
void data_params_init(DataCorpusParams *params);

/* The cache folder: @cache_dir if not NULL, else $PACER_CACHE, else <source root>/.cache.
 * Returns: (transfer full). */
char *data_cache_dir(const char *cache_dir);

/* Loads the GPT-2 vocabulary from @cache_dir/gpt2 (NULL: data_cache_dir(NULL)).
 * Returns: (transfer full) or NULL with @error set (its message says to run scripts/setup). */
DataBpe *data_bpe_new_from_cache(const char *cache_dir, GError **error);

/* Expands @paths (NULL-terminated; NULL or empty: @cache_dir/sotu) into the document files:
 * a file is itself, a folder gives its *.txt files sorted by name; argument order is kept.
 * Returns: (transfer full) array of (transfer full) paths, or NULL with PP_IO_ERROR_OPEN naming
 * a path that does not exist or a folder without .txt files. */
GPtrArray *data_corpus_find(const char *const *paths, const char *cache_dir, GError **error);

/* Whether document @index (0-based, in corpus order) belongs to the validation split: every
 * document where floor((index + 1) * val_fraction) > floor(index * val_fraction), so that the
 * first n documents hold floor(n * val_fraction) of them, evenly spread (0.1: 9, 19, 29, ...). */
gboolean data_corpus_is_val(int64_t index, double val_fraction);

/* Tokenises @files and writes @train_path and @val_path (each document: <|endoftext|>, then
 * its tokens). @train and @val (nullable) receive the counts.
 * Returns FALSE with @error set on unreadable files, non-UTF-8 text or a failed write. */
gboolean data_corpus_build(DataBpe *bpe, GPtrArray *files, double val_fraction,
                           const char *train_path, const char *val_path, DataSplitStats *train,
                           DataSplitStats *val, GError **error);

/* Builds (or, without out_dir, reuses from the cache when present and valid) the train and
 * val shards for @params. @train_path, @val_path: (out) (transfer full). @train, @val
 * (nullable): counts of each split.
 * Returns FALSE with @error set (PP_IO_ERROR_*; a missing default corpus or vocabulary says to
 * run scripts/setup; PP_SCENARIO_ERROR_INVALID_VALUE for val_fraction outside [0, 1)). */
gboolean data_prepare(const DataCorpusParams *params, char **train_path, char **val_path,
                      DataSplitStats *train, DataSplitStats *val, GError **error);

/* data_prepare() without the counts: what the trainer calls before its first step. */
gboolean data_prepare_default(const DataCorpusParams *params, char **train_path, char **val_path,
                              GError **error);

G_END_DECLS
