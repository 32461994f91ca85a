/* SPDX-License-Identifier: MIT
 * data-shard.h: token shards, the binary files pacer-data writes once and the trainer reads.
 * Layout (little-endian): a 256-byte header (uint32 magic "PPTK", uint32 version 1, uint64
 * token count, uint32 vocabulary size, uint32 zero, 32-byte sha256 vocabulary fingerprint,
 * zeros), then the tokens as uint16.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "data-bpe.h"

G_BEGIN_DECLS

#define DATA_SHARD_MAGIC        "PPTK"
#define DATA_SHARD_VERSION      1u
#define DATA_SHARD_HEADER_BYTES 256

typedef struct _DataShard DataShard;

/* Writes @n_tokens tokens (each < @n_vocab <= 65536) to @path atomically (a temporary file
 * renamed over @path). @fingerprint: DATA_BPE_FINGERPRINT_BYTES bytes naming the vocabulary.
 * Returns FALSE and sets PP_IO_ERROR_WRITE naming the file when it cannot be written. */
gboolean data_shard_write(const char *path, const uint16_t *tokens, uint64_t n_tokens,
                          int32_t n_vocab, const uint8_t *fingerprint, GError **error);

/* Reads the shard at @path into memory and validates it. When @expected_fingerprint is not
 * NULL, a shard made with another vocabulary is rejected.
 * Returns: (transfer full) the shard, or NULL with @error set: PP_IO_ERROR_OPEN (cannot read),
 * PP_IO_ERROR_CORRUPT (short header, wrong magic, unknown version, size not matching the token
 * count, token id outside the vocabulary), PP_IO_ERROR_MISMATCH (other vocabulary); every
 * message names @path. */
DataShard *data_shard_open(const char *path, const uint8_t *expected_fingerprint, GError **error);

/* Frees @shard (NULL is accepted). */
void data_shard_free(DataShard *shard);

/* Returns: (transfer none) the tokens, valid until data_shard_free(); count in @n_tokens. */
const uint16_t *data_shard_tokens(const DataShard *shard, uint64_t *n_tokens);

/* Vocabulary size recorded in the header. */
int32_t data_shard_n_vocab(const DataShard *shard);

/* Returns: (transfer none) the DATA_BPE_FINGERPRINT_BYTES-byte vocabulary fingerprint. */
const uint8_t *data_shard_fingerprint(const DataShard *shard);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(DataShard, data_shard_free)

G_END_DECLS
