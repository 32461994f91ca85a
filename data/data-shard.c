/* SPDX-License-Identifier: MIT
 * data-shard.c: writing (atomic, little-endian) and reading (validated) token shards.
 */
#include "data-shard.h"

#include <string.h>

#include "pp-error.h"

/* Header field offsets, bytes. */
enum {
    DATA_SHARD_OFF_MAGIC = 0,
    DATA_SHARD_OFF_VERSION = 4,
    DATA_SHARD_OFF_N_TOKENS = 8,
    DATA_SHARD_OFF_N_VOCAB = 16,
    DATA_SHARD_OFF_FINGERPRINT = 24,
};

struct _DataShard {
    uint64_t  n_tokens;
    int32_t   n_vocab;
    uint16_t *tokens; /* (n_tokens) host order */
    uint8_t   fingerprint[DATA_BPE_FINGERPRINT_BYTES];
};

static void data_shard_put_u32(uint8_t *p, uint32_t v) {
    v = GUINT32_TO_LE(v);
    memcpy(p, &v, sizeof v);
}

static void data_shard_put_u64(uint8_t *p, uint64_t v) {
    v = GUINT64_TO_LE(v);
    memcpy(p, &v, sizeof v);
}

static uint32_t data_shard_get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return GUINT32_FROM_LE(v);
}

static uint64_t data_shard_get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return GUINT64_FROM_LE(v);
}

gboolean data_shard_write(const char *path, const uint16_t *tokens, uint64_t n_tokens,
                          int32_t n_vocab, const uint8_t *fingerprint, GError **error) {
    PP_ASSERT(n_vocab > 0 && n_vocab <= 65536);
    gsize               size_bytes = DATA_SHARD_HEADER_BYTES + (gsize)n_tokens * sizeof(uint16_t);
    g_autofree uint8_t *buf = g_malloc0(size_bytes);
    memcpy(buf + DATA_SHARD_OFF_MAGIC, DATA_SHARD_MAGIC, 4);
    data_shard_put_u32(buf + DATA_SHARD_OFF_VERSION, DATA_SHARD_VERSION);
    data_shard_put_u64(buf + DATA_SHARD_OFF_N_TOKENS, n_tokens);
    data_shard_put_u32(buf + DATA_SHARD_OFF_N_VOCAB, (uint32_t)n_vocab);
    memcpy(buf + DATA_SHARD_OFF_FINGERPRINT, fingerprint, DATA_BPE_FINGERPRINT_BYTES);
    uint8_t *body = buf + DATA_SHARD_HEADER_BYTES;
    for (uint64_t i = 0; i < n_tokens; i++) {
        PP_ASSERT(tokens[i] < n_vocab);
        uint16_t le = GUINT16_TO_LE(tokens[i]);
        memcpy(body + 2 * i, &le, sizeof le);
    }
    g_autoptr(GError) local = NULL;
    if (!g_file_set_contents_full(path, (const char *)buf, (gssize)size_bytes,
                                  G_FILE_SET_CONTENTS_CONSISTENT, 0644, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot write token shard %s: %s", path,
                    local->message);
        return FALSE;
    }
    return TRUE;
}

DataShard *data_shard_open(const char *path, const uint8_t *expected_fingerprint, GError **error) {
    g_autofree char *raw = NULL;
    gsize            len = 0;
    if (!pp_file_read(path, "token shard", &raw, &len, error))
        return NULL;
    const uint8_t *buf = (const uint8_t *)raw;
    if (len < DATA_SHARD_HEADER_BYTES) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "token shard %s: %zu bytes, shorter than the %d-byte header (truncated file?)",
                    path, (size_t)len, DATA_SHARD_HEADER_BYTES);
        return NULL;
    }
    if (memcmp(buf + DATA_SHARD_OFF_MAGIC, DATA_SHARD_MAGIC, 4) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s is not a pacer token shard: magic %02X %02X %02X %02X, expected \"%s\"",
                    path, buf[0], buf[1], buf[2], buf[3], DATA_SHARD_MAGIC);
        return NULL;
    }
    uint32_t version = data_shard_get_u32(buf + DATA_SHARD_OFF_VERSION);
    if (version != DATA_SHARD_VERSION) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "token shard %s: format version %u, this pacer reads version %u (rebuild it "
                    "with pacer-data prepare)",
                    path, version, DATA_SHARD_VERSION);
        return NULL;
    }
    uint64_t n_tokens = data_shard_get_u64(buf + DATA_SHARD_OFF_N_TOKENS);
    uint32_t n_vocab = data_shard_get_u32(buf + DATA_SHARD_OFF_N_VOCAB);
    uint64_t body_bytes = len - DATA_SHARD_HEADER_BYTES;
    if (n_tokens > G_MAXUINT64 / 2 || body_bytes != 2 * n_tokens) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "token shard %s: the header says %" G_GUINT64_FORMAT
                    " tokens but the file holds %" G_GUINT64_FORMAT
                    " bytes of tokens (truncated or appended to)",
                    path, n_tokens, body_bytes);
        return NULL;
    }
    if (n_vocab == 0 || n_vocab > 65536) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "token shard %s: vocabulary size %u, expected 1 to 65536", path, n_vocab);
        return NULL;
    }
    if (expected_fingerprint && memcmp(buf + DATA_SHARD_OFF_FINGERPRINT, expected_fingerprint,
                                       DATA_BPE_FINGERPRINT_BYTES) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "token shard %s was built with another vocabulary (fingerprint differs from "
                    "encoder.json + vocab.bpe); rebuild it with pacer-data prepare",
                    path);
        return NULL;
    }

    g_autoptr(DataShard) shard = g_new0(DataShard, 1);
    shard->n_tokens = n_tokens;
    shard->n_vocab = (int32_t)n_vocab;
    memcpy(shard->fingerprint, buf + DATA_SHARD_OFF_FINGERPRINT, DATA_BPE_FINGERPRINT_BYTES);
    shard->tokens = g_new(uint16_t, n_tokens);
    const uint8_t *body = buf + DATA_SHARD_HEADER_BYTES;
    for (uint64_t i = 0; i < n_tokens; i++) {
        uint16_t le;
        memcpy(&le, body + 2 * i, sizeof le);
        shard->tokens[i] = GUINT16_FROM_LE(le);
        if (shard->tokens[i] >= n_vocab) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "token shard %s: token %" G_GUINT64_FORMAT
                        " is %u, outside the vocabulary [0, %u)",
                        path, i, shard->tokens[i], n_vocab);
            return NULL;
        }
    }
    return g_steal_pointer(&shard);
}

void data_shard_free(DataShard *shard) {
    if (!shard)
        return;
    g_free(shard->tokens);
    g_free(shard);
}

const uint16_t *data_shard_tokens(const DataShard *shard, uint64_t *n_tokens) {
    *n_tokens = shard->n_tokens;
    return shard->tokens;
}

int32_t data_shard_n_vocab(const DataShard *shard) {
    return shard->n_vocab;
}

const uint8_t *data_shard_fingerprint(const DataShard *shard) {
    return shard->fingerprint;
}
