/* SPDX-License-Identifier: MIT
 * fuzz-seeds.c: fuzz-seeds OUTDIR writes the generated part of the seed corpus (scripts/fuzz
 * adds the shipped scenarios, orders and texts): small checkpoints of fuzz_ckpt_cfg's model
 * (f32 with its .state sidecar, bf16, tied head) and of a tiny one, token shards, order files of
 * the built-in schedules and a Unicode text, each into OUTDIR/TARGET/.
 */
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "data-shard.h"
#include "fuzz-targets.h"
#include "kern-util.h"
#include "pp-error.h"
#include "pp-schedule.h"

static gboolean fuzz_seeds_checkpoints(const char *dir, GError **error) {
    g_autoptr(GHashTable) meta = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(meta, "pacer_step", "3");
    g_hash_table_insert(meta, "note", "[\"quoted\" {brackets}]");
    /* A model small enough (under 1 KB) for mutations to reach its header often. */
    static const Gpt2Config tiny = {1, 4, 1, 2, 3, 128};
    struct {
        const char       *name;
        const Gpt2Config *cfg;
        int               tie_head;
        ExecDtype         dtype;
        gboolean          with_state;
    } files[] = {
        {"model-f32", &fuzz_ckpt_cfg, 0, EXEC_DTYPE_F32, TRUE},
        {"model-bf16", &fuzz_ckpt_cfg, 0, EXEC_DTYPE_BF16, FALSE},
        {"model-tied", &fuzz_ckpt_cfg, 1, EXEC_DTYPE_F32, FALSE},
        {"model-tiny", &tiny, 1, EXEC_DTYPE_BF16, TRUE},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        Gpt2Slice *slice = fuzz_ckpt_slice_new(files[i].cfg, files[i].tie_head);
        gpt2_slice_init_params(slice, 1 + i);
        float *arena = g_new0(float, gpt2_slice_n_params(slice));
        for (size_t k = 0; k < gpt2_slice_n_params(slice); k++)
            arena[k] = (float)k * 1e-3f;
        ExecTensorList *model = exec_tensor_list_new();
        exec_tensor_list_add_slice(model, slice, gpt2_slice_params(slice), "");
        ExecTensorList  *state = files[i].with_state ? fuzz_ckpt_state_list(slice, arena) : NULL;
        g_autofree char *path = g_build_filename(dir, files[i].name, NULL);
        g_autofree char *state_path = g_strconcat(path, ".state", NULL);
        gboolean         ok =
            exec_checkpoint_write(path, files[i].cfg, model, meta, files[i].dtype, NULL, error) &&
            (state == NULL ||
             exec_checkpoint_write(state_path, NULL, state, meta, EXEC_DTYPE_F32, NULL, error));
        exec_tensor_list_free(model);
        exec_tensor_list_free(state);
        g_free(arena);
        gpt2_slice_free(slice);
        if (!ok)
            return FALSE;
    }
    return TRUE;
}

static gboolean fuzz_seeds_shards(const char *dir, GError **error) {
    uint16_t tokens[64];
    uint8_t  fingerprint[DATA_BPE_FINGERPRINT_BYTES];
    uint64_t rng = kern_rng_seed(7);
    for (size_t i = 0; i < G_N_ELEMENTS(tokens); i++)
        tokens[i] = (uint16_t)(kern_rng_u32(&rng) % DATA_BPE_EOT);
    for (size_t i = 0; i < sizeof fingerprint; i++)
        fingerprint[i] = (uint8_t)i;
    g_autofree char *a = g_build_filename(dir, "shard-64", NULL);
    g_autofree char *b = g_build_filename(dir, "shard-empty", NULL);
    return data_shard_write(a, tokens, G_N_ELEMENTS(tokens), DATA_BPE_EOT + 1, fingerprint,
                            error) &&
           data_shard_write(b, tokens, 0, 256, fingerprint, error);
}

static gboolean fuzz_seeds_orders(const char *dir, GError **error) {
    /* kind, N, v, m, a, steps */
    static const struct {
        const char *kind;
        int32_t     n_stages, n_chunks, m, a, n_steps;
    } kinds[] = {
        {"gpipe", 2, 1, 3, 1, 1}, {"1f1b", 3, 1, 4, 1, 2}, {"interleaved", 2, 2, 4, 1, 1},
        {"zb-h1", 2, 1, 3, 1, 1}, {"paci", 2, 1, 1, 2, 2},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(kinds); i++) {
        PpScheduleParams p = {.kind = pp_sched_kind_lookup(kinds[i].kind),
                              .n_stages = kinds[i].n_stages,
                              .n_chunks = kinds[i].n_chunks,
                              .n_microbatches = kinds[i].m,
                              .accumulation = kinds[i].a,
                              .n_steps = kinds[i].n_steps};
        g_autoptr(PpSchedule) sched = pp_schedule_new(&p, error);
        g_autofree char *name = g_strdup_printf("order-%s.csv", p.kind->name);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (!sched || !pp_schedule_write_order(sched, path, error))
            return FALSE;
    }
    return TRUE;
}

static gboolean fuzz_seeds_texts(const char *dir, GError **error) {
    /* First byte: the flags (bit 0 set: <|endoftext|> is special). */
    static const char text[] = "\x01Hello, world! It's 2024 <|endoftext|>caf\xc3\xa9 "
                               "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\t\t  \n\n x\xe3\x80\x80y";
    g_autofree char  *path = g_build_filename(dir, "text-unicode", NULL);
    return g_file_set_contents(path, text, sizeof text - 1, error);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz-seeds OUTDIR\n");
        return 2;
    }
    static const struct {
        const char *target;
        gboolean (*write)(const char *dir, GError **error);
    } parts[] = {
        {"safetensors", fuzz_seeds_checkpoints},
        {"shard", fuzz_seeds_shards},
        {"custom-order", fuzz_seeds_orders},
        {"bpe", fuzz_seeds_texts},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
        g_autofree char *dir = g_build_filename(argv[1], parts[i].target, NULL);
        g_autoptr(GError) error = NULL;
        if (g_mkdir_with_parents(dir, 0755) != 0 || !parts[i].write(dir, &error)) {
            fprintf(stderr, "fuzz-seeds: %s: %s\n", dir, error ? error->message : "cannot create");
            return 1;
        }
    }
    return 0;
}
