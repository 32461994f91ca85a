/* SPDX-License-Identifier: MIT
 * fuzz-targets.h: one entry function per parser that the fuzzers drive (fuzz-main.c, under
 * libFuzzer) and that test-fuzz-regressions replays in the normal build, so a crash found by
 * fuzzing is re-run by the default test suite through the very same code.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-checkpoint.h"
#include "gpt2-slice.h"

G_BEGIN_DECLS

/* Feeds @data (@size bytes, any content) to one parser. Parsers that read files get it as a
 * file in @scratch_dir (an existing folder the entry may overwrite files in). Properties that
 * must hold for every input (a decoded text equals the encoded one, a loaded scenario reloads
 * from its own text) are PP_ASSERTs: their failure is a bug, like a crash.
 * Returns TRUE when the parser accepted the input, FALSE with @error set when it refused it. */
typedef gboolean (*FuzzTargetFn)(const char *scratch_dir, const uint8_t *data, size_t size,
                                 GError **error);

typedef struct {
    const char  *name; /* "scenario", "custom-order", "safetensors", "shard", "bpe" */
    FuzzTargetFn run;
    const char  *what; /* the parser, in words */
} FuzzTarget;

/* Returns: (transfer none) the targets, ending with an entry whose name is NULL. */
const FuzzTarget *fuzz_targets(void);

/* Returns: (transfer none) (nullable) the target called @name. */
const FuzzTarget *fuzz_target_lookup(const char *name);

/* --- the model the safetensors target loads (fuzz-seeds writes checkpoints of it) --- */

/* L 2, C 16, NH 2, T 8, V 61 padded to 64. */
extern const Gpt2Config fuzz_ckpt_cfg;

/* Returns: (transfer full) a whole model of @cfg (embedding, blocks, head; batch 1), with the
 * head tied to wte when @tie_head. */
Gpt2Slice *fuzz_ckpt_slice_new(const Gpt2Config *cfg, int tie_head);

/* Returns: (transfer full) the sidecar tensors the target reads: "optim.m." + each tensor name
 * of @slice, shaped like it, pointing into @arena (gpt2_slice_n_params() floats, borrowed). */
ExecTensorList *fuzz_ckpt_state_list(Gpt2Slice *slice, float *arena);

G_END_DECLS
