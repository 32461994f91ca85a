/* SPDX-License-Identifier: MIT
 * data-bpe.h: GPT-2's byte-level BPE tokenizer (encoder.json + vocab.bpe), byte-identical to
 * OpenAI's encoder: GPT-2's pre-tokenisation regex, merges by rank, a per-word cache.
 * Token ids are int32_t; the vocabulary has 50257 entries, <|endoftext|> = 50256.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

#define DATA_BPE_EOT               50256 /* id of <|endoftext|> in GPT-2's vocabulary */
#define DATA_BPE_EOT_TEXT          "<|endoftext|>"
#define DATA_BPE_FINGERPRINT_BYTES 32 /* sha256 */

/* GPT-2's pre-tokenisation pattern, verbatim (encoder.py): the text is cut into the words it
 * matches and each word is merged alone. GRegex compiles UTF-8 patterns with Unicode properties
 * for \s, so \s matches U+3000 as Python's regex module does. */
#define DATA_BPE_PATTERN                                                                           \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

typedef struct _DataBpe DataBpe;

typedef enum {
    DATA_BPE_ENCODE_PLAIN = 0,        /* "<|endoftext|>" in the text is ordinary characters */
    DATA_BPE_ENCODE_SPECIAL = 1 << 0, /* a literal "<|endoftext|>" becomes DATA_BPE_EOT */
} DataBpeEncodeFlags;

/* --- construction --- */

/* Loads @encoder_json_path (token string -> id) and @vocab_bpe_path (merges, one "A B" per
 * line after a "#version" line; line order = rank). Checks that every merge's parts and result
 * are tokens and that every byte has a token.
 * Returns: (transfer full) the tokenizer, or NULL with @error set (PP_IO_ERROR_OPEN when a file
 * cannot be read, PP_IO_ERROR_CORRUPT naming the file and line/key that is malformed). */
DataBpe *data_bpe_new(const char *encoder_json_path, const char *vocab_bpe_path, GError **error);

/* Loads @dir/encoder.json and @dir/vocab.bpe (the layout scripts/fetch-data writes into
 * cache/gpt2). A missing file's message says to run scripts/setup. */
DataBpe *data_bpe_new_from_dir(const char *dir, GError **error);

/* Frees @bpe (NULL is accepted). */
void data_bpe_free(DataBpe *bpe);

/* --- queries --- */

/* Number of token ids (50257 for GPT-2). */
int32_t data_bpe_n_vocab(const DataBpe *bpe);

/* Id of the "<|endoftext|>" token (DATA_BPE_EOT in GPT-2's vocabulary), -1 when absent. */
int32_t data_bpe_eot(const DataBpe *bpe);

/* sha256 of encoder.json's bytes followed by vocab.bpe's bytes: identifies the vocabulary in
 * shard headers. Returns: (transfer none) DATA_BPE_FINGERPRINT_BYTES bytes. */
const uint8_t *data_bpe_fingerprint(const DataBpe *bpe);

/* The raw bytes token @id stands for (not NUL-terminated), length in @len_bytes.
 * @id must be in [0, n_vocab) (PP_ASSERT). Returns: (transfer none). */
const char *data_bpe_token_bytes(const DataBpe *bpe, int32_t id, size_t *len_bytes);

/* Rank of the merge that joins token @left with token @right (its line in vocab.bpe after the
 * "#version" line, from 0), or -1 when vocab.bpe has none; the joined token's id goes to @merged
 * (nullable) when there is one. Both ids must be in [0, n_vocab) (PP_ASSERT). */
int32_t data_bpe_merge_rank(const DataBpe *bpe, int32_t left, int32_t right, int32_t *merged);

/* --- encode / decode --- */

/* Appends the ids of @text (@len_bytes bytes, or -1 for NUL-terminated) to @out (a GArray of
 * int32_t). Not thread-safe: the word cache inside @bpe is updated. With
 * DATA_BPE_ENCODE_SPECIAL and a vocabulary without "<|endoftext|>": FALSE, PP_IO_ERROR_MISMATCH.
 * Returns FALSE and sets PP_IO_ERROR_CORRUPT when @text is not valid UTF-8 (naming the byte
 * offset) or longer than G_MAXINT bytes; @out is then unchanged. Time: O(n log n) for a word
 * of n bytes, so no input is quadratic. */
gboolean data_bpe_encode(DataBpe *bpe, const char *text, gssize len_bytes, DataBpeEncodeFlags flags,
                         GArray *out, GError **error);

/* Appends the bytes of @ids (@n_ids of them) to @out. Exact inverse of data_bpe_encode.
 * Returns FALSE and sets PP_IO_ERROR_CORRUPT naming the position of the first id outside
 * [0, n_vocab). */
gboolean data_bpe_decode(const DataBpe *bpe, const int32_t *ids, size_t n_ids, GString *out,
                         GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(DataBpe, data_bpe_free)

G_END_DECLS
