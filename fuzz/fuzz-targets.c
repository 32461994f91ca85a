/* SPDX-License-Identifier: MIT
 * fuzz-targets.c: the entry functions of fuzz-targets.h. Each runs one parser the way pacer
 * runs it (scenario text, custom order file, safetensors checkpoint and its .state sidecar,
 * token shard, BPE encoder) and checks what must hold of every input it accepts.
 */
#include "fuzz-targets.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "data-bpe.h"
#include "data-corpus.h"
#include "data-shard.h"
#include "exec-checkpoint.h"
#include "pp-error.h"
#include "pp-scenario.h"
#include "pp-schedule.h"

/* Largest model the safetensors target builds from a file's header (as pacer-train evaluate
 * does): bigger ones are valid but would only make each run slow. */
#define FUZZ_CKPT_MAX_DIM   64
#define FUZZ_CKPT_MAX_VOCAB 1024

const Gpt2Config fuzz_ckpt_cfg = {2, 16, 2, 8, 61, 64};

/* Writes @size bytes to @dir/@name; returns the path (transfer full), or NULL with @error.
 * (GLib 2.74's g_file_set_contents_full() with G_FILE_SET_CONTENTS_NONE does not truncate a
 * longer file it overwrites, and the other modes fsync: plain stdio here.) */
static char *fuzz_write(const char *dir, const char *name, const uint8_t *data, size_t size,
                        GError **error) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    FILE            *fp = fopen(path, "wb");
    gboolean         ok = fp && fwrite(data, 1, size, fp) == size;
    int              en = errno;
    if (fp && fclose(fp) != 0 && ok) {
        ok = FALSE;
        en = errno;
    }
    if (!ok) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot write scratch file %s: %s", path,
                    g_strerror(en));
        return NULL;
    }
    return g_steal_pointer(&path);
}

/* Keeps the first error of a sequence of calls in @first and drops the others. */
static void fuzz_keep_first(GError **first, GError *local) {
    if (!*first)
        *first = local;
    else
        g_clear_error(&local);
}

/* --- scenario text (pp_scenario_load_data) --- */

/* An accepted scenario reloads from its own text (pp_scenario_to_data), to the same text. */
static gboolean fuzz_run_scenario(const char *dir, const uint8_t *data, size_t size,
                                  GError **error) {
    (void)dir;
    g_autofree char *text = g_strndup((const char *)data, size);
    g_autoptr(PpScenario) sc = pp_scenario_load_data(text, "fuzz.ini", NULL, error);
    if (!sc)
        return FALSE;
    g_autofree char *saved = pp_scenario_to_data(sc);
    g_autoptr(GError) local = NULL;
    g_autoptr(PpScenario) again = pp_scenario_load_data(saved, "fuzz.ini", NULL, &local);
    if (!again)
        PP_ABORT("a scenario's own text does not load: %s\n%s", local->message, saved);
    g_autofree char *saved_again = pp_scenario_to_data(again);
    if (strcmp(saved, saved_again) != 0)
        PP_ABORT("a scenario's text changes when reloaded:\n%s\n---\n%s", saved, saved_again);
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    PP_ASSERT(sc->pipeline.mb_per_step >= 1);
    return TRUE;
}

/* --- custom order files (the "custom" schedule kind) --- */

static PpSchedule *fuzz_custom_build(const char *order_file, GError **error) {
    PpScheduleParams p = {
        .kind = pp_sched_kind_lookup("custom"),
        .n_stages = 1,
        .n_chunks = 1,
        .n_microbatches = 1,
        .accumulation = 1,
        .n_steps = 1,
        .order_file = order_file,
    };
    return pp_schedule_new(&p, error);
}

/* An accepted order, written back with pp_schedule_write_order(), reads as the same ops. */
static gboolean fuzz_run_custom_order(const char *dir, const uint8_t *data, size_t size,
                                      GError **error) {
    g_autofree char *path = fuzz_write(dir, "order.csv", data, size, error);
    if (!path)
        return FALSE;
    g_autoptr(PpSchedule) sched = fuzz_custom_build(path, error);
    if (!sched)
        return FALSE;
    g_autoptr(GError) local = NULL;
    g_autofree char *again_path = g_build_filename(dir, "order-again.csv", NULL);
    if (!pp_schedule_write_order(sched, again_path, &local))
        PP_ABORT("cannot write the order back: %s", local->message);
    g_autoptr(PpSchedule) again = fuzz_custom_build(again_path, &local);
    if (!again)
        PP_ABORT("an order written by pp_schedule_write_order does not load: %s", local->message);
    PP_ASSERT(again->n_stages == sched->n_stages && again->n_chunks == sched->n_chunks);
    for (int32_t s = 0; s < sched->n_stages; s++) {
        PP_ASSERT(again->n_ops[s] == sched->n_ops[s]);
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *a = &sched->programs[s][i], *b = &again->programs[s][i];
            PP_ASSERT(a->kind == b->kind && a->mb == b->mb && a->chunk == b->chunk);
        }
    }
    return TRUE;
}

/* --- safetensors checkpoints and their .state sidecar --- */

Gpt2Slice *fuzz_ckpt_slice_new(const Gpt2Config *cfg, int tie_head) {
    Gpt2SliceParams p = {
        .model = *cfg,
        .layer_begin = 0,
        .layer_end = cfg->L,
        .has_embedding = 1,
        .has_head = 1,
        .tie_head = tie_head,
        .B = 1,
        .n_act_slots = 1,
    };
    return gpt2_slice_new(&p);
}

ExecTensorList *fuzz_ckpt_state_list(Gpt2Slice *slice, float *arena) {
    ExecTensorList *list = exec_tensor_list_new();
    exec_tensor_list_add_slice(list, slice, arena, "optim.m.");
    return list;
}

/* Loads @path into a fresh model of @cfg (weights only). */
static gboolean fuzz_ckpt_load_model(const char *path, const Gpt2Config *cfg, int tie_head,
                                     GError **error) {
    Gpt2Slice      *slice = fuzz_ckpt_slice_new(cfg, tie_head);
    ExecTensorList *list = exec_tensor_list_new();
    exec_tensor_list_add_slice(list, slice, gpt2_slice_params(slice), "");
    gboolean ok = exec_checkpoint_load(path, cfg, list, NULL, error);
    exec_tensor_list_free(list);
    gpt2_slice_free(slice);
    return ok;
}

/* The header's model as pacer-train evaluate reads it (exec_checkpoint_info), then the weights
 * into the model it describes when that is small, into fuzz_ckpt_cfg's model, and the same
 * bytes as the .state sidecar: metadata alone, then optimizer moments. Every call runs; the
 * first error is returned. */
static gboolean fuzz_run_safetensors(const char *dir, const uint8_t *data, size_t size,
                                     GError **error) {
    g_autofree char *path = fuzz_write(dir, "model.safetensors", data, size, error);
    g_autofree char *state_path =
        path ? fuzz_write(dir, "model.safetensors.state", data, size, error) : NULL;
    if (!state_path)
        return FALSE;
    GError            *first = NULL, *local = NULL;
    ExecCheckpointInfo info;
    g_autoptr(GHashTable) meta = NULL;
    if (exec_checkpoint_info(path, &info, &meta, &local)) {
        const Gpt2Config *c = &info.cfg;
        PP_ASSERT(meta != NULL);
        PP_ASSERT(c->L >= 1 && c->C >= 1 && c->T >= 1 && c->V >= 1 && c->NH >= 0);
        PP_ASSERT(c->Vp >= c->V && c->Vp % 128 == 0);
        if (c->L <= 4 && c->C <= FUZZ_CKPT_MAX_DIM && c->T <= FUZZ_CKPT_MAX_DIM &&
            c->V <= FUZZ_CKPT_MAX_VOCAB) {
            Gpt2Config cfg = *c;
            cfg.NH = c->NH > 0 && c->C % c->NH == 0 ? c->NH : 1;
            if (!fuzz_ckpt_load_model(path, &cfg, !info.has_head, &local))
                fuzz_keep_first(&first, local);
        }
    } else {
        fuzz_keep_first(&first, local);
    }
    local = NULL;
    if (!fuzz_ckpt_load_model(path, &fuzz_ckpt_cfg, 0, &local))
        fuzz_keep_first(&first, local);

    Gpt2Slice      *slice = fuzz_ckpt_slice_new(&fuzz_ckpt_cfg, 0);
    float          *arena = g_new0(float, gpt2_slice_n_params(slice));
    ExecTensorList *none = exec_tensor_list_new(), *state = fuzz_ckpt_state_list(slice, arena);
    g_autoptr(GHashTable) state_meta = NULL;
    local = NULL;
    if (!exec_checkpoint_load_state(path, none, &state_meta, &local))
        fuzz_keep_first(&first, local);
    local = NULL;
    if (!exec_checkpoint_load_state(path, state, NULL, &local))
        fuzz_keep_first(&first, local);
    exec_tensor_list_free(none);
    exec_tensor_list_free(state);
    g_free(arena);
    gpt2_slice_free(slice);
    if (first) {
        g_propagate_error(error, first);
        return FALSE;
    }
    return TRUE;
}

/* --- token shards --- */

/* An accepted shard opens again when its own fingerprint is expected, and not with another. */
static gboolean fuzz_run_shard(const char *dir, const uint8_t *data, size_t size, GError **error) {
    g_autofree char *path = fuzz_write(dir, "shard.bin", data, size, error);
    if (!path)
        return FALSE;
    g_autoptr(DataShard) shard = data_shard_open(path, NULL, error);
    if (!shard)
        return FALSE;
    uint64_t        n = 0;
    const uint16_t *tokens = data_shard_tokens(shard, &n);
    PP_ASSERT(n == (size - DATA_SHARD_HEADER_BYTES) / 2);
    for (uint64_t i = 0; i < n; i++)
        PP_ASSERT(tokens[i] < data_shard_n_vocab(shard));
    uint8_t fp[DATA_BPE_FINGERPRINT_BYTES];
    memcpy(fp, data_shard_fingerprint(shard), sizeof fp);
    g_autoptr(DataShard) same = data_shard_open(path, fp, NULL);
    PP_ASSERT(same != NULL);
    fp[0] ^= 1;
    g_autoptr(GError) local = NULL;
    g_autoptr(DataShard) other = data_shard_open(path, fp, &local);
    PP_ASSERT(other == NULL && g_error_matches(local, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    return TRUE;
}

/* --- the BPE encoder --- */

/* GPT-2's tokenizer from the data cache, loaded once (the fuzzer runs in one thread). */
static DataBpe *fuzz_bpe(GError **error) {
    static DataBpe *bpe;
    if (!bpe)
        bpe = data_bpe_new_from_cache(NULL, error);
    return bpe;
}

/* The first byte picks the flags (bit 0: <|endoftext|> is special), the rest is the text.
 * Valid UTF-8 encodes and decodes back to itself; anything else is refused. */
static gboolean fuzz_run_bpe(const char *dir, const uint8_t *data, size_t size, GError **error) {
    (void)dir;
    DataBpe *bpe = fuzz_bpe(error);
    if (!bpe || size == 0)
        return bpe != NULL;
    DataBpeEncodeFlags flags = (data[0] & 1) ? DATA_BPE_ENCODE_SPECIAL : DATA_BPE_ENCODE_PLAIN;
    const char        *text = (const char *)data + 1;
    size_t             len = size - 1;
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    gboolean valid = g_utf8_validate_len(text, len, NULL);
    if (!data_bpe_encode(bpe, text, (gssize)len, flags, ids, error)) {
        PP_ASSERT(!valid && ids->len == 0);
        return FALSE;
    }
    PP_ASSERT(valid);
    g_autoptr(GString) back = g_string_new(NULL);
    PP_ASSERT(data_bpe_decode(bpe, (const int32_t *)(void *)ids->data, ids->len, back, NULL));
    PP_ASSERT(back->len == len && memcmp(back->str, text, len) == 0);
    return TRUE;
}

/* --- registry --- */

static const FuzzTarget fuzz_target_table[] = {
    {"scenario", fuzz_run_scenario, "scenario key files (common/pp-scenario*.c)"},
    {"custom-order", fuzz_run_custom_order, "custom order CSV files (common/pp-sched-custom.c)"},
    {"safetensors", fuzz_run_safetensors, "safetensors checkpoints + .state (exec-checkpoint.c)"},
    {"shard", fuzz_run_shard, "token shards (data-shard.c)"},
    {"bpe", fuzz_run_bpe, "the GPT-2 BPE encoder (data-bpe.c)"},
    {NULL, NULL, NULL},
};

const FuzzTarget *fuzz_targets(void) {
    return fuzz_target_table;
}

const FuzzTarget *fuzz_target_lookup(const char *name) {
    for (const FuzzTarget *t = fuzz_target_table; t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}
