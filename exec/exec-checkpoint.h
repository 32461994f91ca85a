/* SPDX-License-Identifier: MIT
 * exec-checkpoint.h: safetensors checkpoints with Hugging Face GPT-2 names and layouts, so real
 * GPT-2 weights load and pacer's checkpoints open in other tools. The model file PATH holds the
 * weights (f32 or bf16); the sidecar PATH.state (safetensors too, raw f32, no layout changes)
 * holds optimizer state and any counters the caller puts in its metadata. Both are written
 * atomically (temporary file + rename).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "gpt2-slice.h"

G_BEGIN_DECLS

/* --- tensor lists --- */

/* One tensor in pacer's layout: matmul weights (OC, IC), wte/lm_head (Vp, C) with padded rows.
 * The data is borrowed (a caller's array) or owned by the list (a host copy the caller fills
 * from a backend or loads into, exec_tensor_list_add_owned()). */
typedef struct {
    char    *name;     /* Hugging Face name without "transformer." (owned by the list) */
    float   *data;     /* (shape[0], shape[1]) or (shape[0]) floats */
    int      ndim;     /* 1 or 2 */
    int      shape[2]; /* shape[1] = 1 when ndim is 1 */
    gboolean owned;    /* the list frees @data */
} ExecTensorEntry;

typedef struct _ExecTensorList ExecTensorList;

/* Returns: (transfer full) an empty list. */
ExecTensorList *exec_tensor_list_new(void);
/* Frees @list and its names, not the tensor data (NULL is accepted). */
void exec_tensor_list_free(ExecTensorList *list);

/* Appends one tensor; @name is copied, @data borrowed. A 1D tensor passes shape1 = 1. */
void exec_tensor_list_add(ExecTensorList *list, const char *name, float *data, int ndim, int shape0,
                          int shape1);

/* Appends a tensor whose data the list owns: shape0 x shape1 floats, zeroed (a 1D tensor
 * passes shape1 = 1). Returns: (transfer none): the data, valid until the list is freed. */
float *exec_tensor_list_add_owned(ExecTensorList *list, const char *name, int ndim, int shape0,
                                  int shape1);

/* Appends every tensor of @slice's table, pointing into @base (an array of
 * gpt2_slice_n_params() floats laid out like the slice's params: the params themselves, the
 * grads or an optimizer moment), each named @prefix + the tensor's name (@prefix may be "").
 * The executor calls it once per stage to gather a whole model in one list. */
void exec_tensor_list_add_slice(ExecTensorList *list, const Gpt2Slice *slice, float *base,
                                const char *prefix);

/* Number of entries, and entry @i (transfer none; 0 <= i < n). */
int                    exec_tensor_list_n(const ExecTensorList *list);
const ExecTensorEntry *exec_tensor_list_get(const ExecTensorList *list, int i);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecTensorList, exec_tensor_list_free)

/* --- model checkpoints --- */

typedef enum {
    EXEC_DTYPE_F32,  /* "F32" */
    EXEC_DTYPE_BF16, /* "BF16": saved with round-to-nearest-even, read back exactly widened */
} ExecDtype;

/* Writes @model (pacer layout) to @path as safetensors in Hugging Face GPT-2 layout: block
 * matmul weights transposed to Conv1D's (IC, OC), wte and lm_head cut to @cfg->V rows, names as
 * given (pacer saves an untied head as lm_head.weight; a tied model has none). The metadata
 * holds n_layer, n_head, n_embd, n_ctx, vocab_size (from @cfg), format "pt", then the string
 * pairs of @metadata (nullable, char * -> char *), which may add keys but not replace those.
 * Returns FALSE and sets PP_IO_ERROR_WRITE naming the file on I/O failure. */
gboolean exec_checkpoint_save(const char *path, const Gpt2Config *cfg, ExecTensorList *model,
                              const GHashTable *metadata, GError **error);

/* exec_checkpoint_save() with a weight @dtype and an optional sidecar: when @state is not NULL,
 * PATH.state receives its tensors as raw f32 (names and data as given) and @state_metadata
 * (nullable; step, RNG state, data position, per-stage counters as strings). Both files are
 * complete before either is renamed into place. */
gboolean exec_checkpoint_save_full(const char *path, const Gpt2Config *cfg, ExecTensorList *model,
                                   const GHashTable *metadata, ExecDtype dtype,
                                   ExecTensorList *state, const GHashTable *state_metadata,
                                   GError **error);

/* Fills every entry of @model (pacer layout, shapes as in the list; wte/lm_head (Vp, C) with
 * @cfg->V rows in the file and padded rows zeroed) from @path. File names may carry a
 * "transformer." prefix; F32 and BF16 are read; tensors in the file but not in @model are
 * ignored (a stage loads its own part). Without lm_head.weight in the file the head is tied:
 * an lm_head.weight entry receives wte. @metadata: (out) (optional) (transfer full) the file's
 * __metadata__ as char * -> char *.
 * Returns FALSE with @error set: PP_IO_ERROR_OPEN (cannot read), PP_IO_ERROR_CORRUPT (a header
 * longer than 100 MB or than the file, JSON that is malformed or nests arrays/objects more than 8
 * deep, a shape of more than 2^61 elements, offsets outside the data, truncated data, unknown
 * dtype), PP_IO_ERROR_MISMATCH (a missing tensor, a shape that differs: the message names the
 * tensor and both shapes, or a dtype other than F32/BF16). */
gboolean exec_checkpoint_load(const char *path, const Gpt2Config *cfg, ExecTensorList *model,
                              GHashTable **metadata, GError **error);

/* Reads PATH.state into @state (entries by name, numel must match) and its metadata (out,
 * optional, transfer full). Errors as exec_checkpoint_load(). */
gboolean exec_checkpoint_load_state(const char *path, ExecTensorList *state, GHashTable **metadata,
                                    GError **error);

/* What a checkpoint holds, read from the shapes of its tensors. */
typedef struct {
    Gpt2Config cfg;    /* L, C, T (wpe rows), V (wte rows), Vp = V rounded up to 128, NH from
                          metadata n_head or 0 when absent */
    gboolean has_head; /* lm_head.weight present (untied) */
} ExecCheckpointInfo;

/* Reads the header of @path into @info. @metadata: (out) (optional) (transfer full).
 * Returns FALSE with @error set as exec_checkpoint_load(), or PP_IO_ERROR_MISMATCH when
 * wte.weight, wpe.weight or block 0 is missing, or V, T or C is 0 or over 2^31 - 1. */
gboolean exec_checkpoint_info(const char *path, ExecCheckpointInfo *info, GHashTable **metadata,
                              GError **error);

G_END_DECLS
