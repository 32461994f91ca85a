/* SPDX-License-Identifier: MIT
 * exec-train-data.c: pacer-train's data: the token shards, the window of every training
 * sequence (a pure function of its index and the seed) and the validation loss over the val
 * shard's leading windows.
 */
#include "exec-train-private.h"

#include <string.h>

#include "pp-error.h"

uint64_t exec_train_window(uint64_t seed, int64_t seq, uint64_t n_tokens, int32_t T) {
    PP_ASSERT(n_tokens > (uint64_t)T);
    uint64_t z = seed + (uint64_t)seq * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z % (n_tokens - (uint64_t)T);
}

int64_t exec_train_global_mb(int64_t mb, int32_t D, int32_t d, int32_t m) {
    PP_ASSERT(mb >= 0 && D >= 1 && d >= 0 && d < D && m >= 1);
    return (mb / m * D + d) * m + mb % m;
}

void exec_train_fill(gpointer user_data, int64_t mb, int32_t *tokens, int32_t *targets) {
    const ExecTrainData *d = user_data;
    int64_t              g =
        d->replicas > 1 ? exec_train_global_mb(mb, d->replicas, d->replica, d->mb_per_step) : mb;
    for (int32_t b = 0; b < d->B; b++) {
        uint64_t off = exec_train_window(d->seed, g * d->B + b, d->n_tokens, d->T);
        for (int32_t t = 0; t < d->T; t++) {
            tokens[b * d->T + t] = d->tokens[off + t];
            targets[b * d->T + t] = d->tokens[off + t + 1];
        }
    }
}

/* Opens the shard at @path; @fingerprint (nullable): the vocabulary it must have been built
 * with (data_shard_open() refuses another). */
static gboolean exec_train_open_shard(const char *path, const uint8_t *fingerprint, int32_t T,
                                      int32_t V, DataShard **out, ExecTrainData *data,
                                      GError **error) {
    DataShard *shard = data_shard_open(path, fingerprint, error);
    if (!shard)
        return FALSE;
    data->tokens = data_shard_tokens(shard, &data->n_tokens);
    if (data->n_tokens <= (uint64_t)T + 1 || data_shard_n_vocab(shard) > V) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "%s: %" G_GUINT64_FORMAT " tokens of a %d-token vocabulary; training needs "
                    "more than model.seq_len + 1 = %d tokens and a vocabulary <= model.vocab=%d",
                    path, data->n_tokens, data_shard_n_vocab(shard), T + 1, V);
        data_shard_free(shard);
        return FALSE;
    }
    *out = shard;
    return TRUE;
}

gboolean exec_train_open_shards(const ExecTrainParams *params, int32_t T, int32_t V,
                                DataShard **train_shard, ExecTrainData *train,
                                DataShard **val_shard, ExecTrainData *val, GError **error) {
    const uint8_t *want = params->vocab_fingerprint;
    if (!exec_train_open_shard(params->train_path, want, T, V, train_shard, train, error) ||
        !exec_train_open_shard(params->val_path, want, T, V, val_shard, val, error))
        return FALSE;
    if (memcmp(data_shard_fingerprint(*train_shard), data_shard_fingerprint(*val_shard),
               DATA_BPE_FINGERPRINT_BYTES) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "token shards %s and %s were built with different vocabularies (their "
                    "fingerprints differ); rebuild both with pacer-data prepare",
                    params->train_path, params->val_path);
        return FALSE;
    }
    return TRUE;
}

gboolean exec_train_validate(ExecPipeline *pipeline, const ExecTrainData *val, int32_t n_batches,
                             double *loss, GError **error) {
    int32_t             B = val->B, T = val->T;
    g_autofree int32_t *tokens = g_new(int32_t, (size_t)B * T);  /* (B, T) */
    g_autofree int32_t *targets = g_new(int32_t, (size_t)B * T); /* (B, T) */
    double              sum = 0.0;
    uint64_t            windows = (val->n_tokens - 1) / (uint64_t)T;
    for (int32_t i = 0; i < n_batches; i++) {
        for (int32_t b = 0; b < B; b++) {
            uint64_t off = ((uint64_t)i * B + b) % windows * (uint64_t)T;
            for (int32_t t = 0; t < T; t++) {
                tokens[b * T + t] = val->tokens[off + t];
                targets[b * T + t] = val->tokens[off + t + 1];
            }
        }
        float batch_loss = 0.0f;
        if (!exec_pipeline_evaluate(pipeline, tokens, targets, &batch_loss, error))
            return FALSE;
        sum += batch_loss;
    }
    *loss = sum / n_batches;
    return TRUE;
}
