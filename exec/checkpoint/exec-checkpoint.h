/* SPDX-License-Identifier: MIT
 * exec-checkpoint.h: safetensors files with Hugging Face GPT-2 names and layouts, so real GPT-2
 * weights load and pacer's checkpoints open in other tools: a model file (f32 or bf16) and raw
 * files (f32, names and shapes as given: optimizer state). pacer records a CRC-32C per tensor
 * in the metadata and checks it, the data offsets and every value (finite) on load. A training
 * checkpoint is a folder of such files (exec-checkpoint-unit.h).
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

/* --- writing --- */

typedef enum {
    EXEC_DTYPE_F32,  /* "F32" */
    EXEC_DTYPE_BF16, /* "BF16": saved with round-to-nearest-even, read back exactly widened */
} ExecDtype;

/* What exec_checkpoint_write() wrote. */
typedef struct {
    guint64 size_bytes; /* the whole file */
    char    sha256[65]; /* SHA-256 of the whole file, lower-case hex */
} ExecCheckpointDigest;

/* Writes @list to @path as safetensors (a temporary file next to it, fsync, rename), elements
 * as @dtype. With @cfg, a model file in Hugging Face GPT-2 layout: block matmul weights
 * transposed to Conv1D's (IC, OC), wte and lm_head cut to @cfg->V rows, names as given (pacer
 * saves an untied head as lm_head.weight; a tied model has none), and metadata n_layer, n_head,
 * n_embd, n_ctx, vocab_size (from @cfg) and format "pt". With @cfg NULL, a raw file: names,
 * shapes and element order as in @list. Either way the metadata holds the string pairs of
 * @metadata (nullable, char * -> char *), which may add keys but not replace pacer's, and
 * "pacer_crc32c.NAME": the CRC-32C (exec-crc32c.h) of tensor NAME's bytes in the file, 8
 * lower-case hex digits. @digest: (out) (optional) the file's size and SHA-256.
 * Returns FALSE with @error set and nothing left at @path's side: PP_IO_ERROR_WRITE naming the
 * file on I/O failure, PP_IO_ERROR_NONFINITE naming the tensor and the first element that is
 * NaN or infinite in the file (a value finite in f32 may overflow bf16). */
gboolean exec_checkpoint_write(const char *path, const Gpt2Config *cfg, ExecTensorList *list,
                               const GHashTable *metadata, ExecDtype dtype,
                               ExecCheckpointDigest *digest, GError **error);

/* exec_checkpoint_write() of a model file (@cfg not NULL) in f32 without a digest. */
gboolean exec_checkpoint_save(const char *path, const Gpt2Config *cfg, ExecTensorList *model,
                              const GHashTable *metadata, GError **error);

/* --- reading --- */

/* Fills every entry of @model (pacer layout, shapes as in the list; wte/lm_head (Vp, C) with
 * @cfg->V rows in the file and padded rows zeroed) from @path. File names may carry a
 * "transformer." prefix; F32 and BF16 are read; tensors in the file but not in @model are
 * ignored (a stage loads its own part). Without lm_head.weight in the file the head is tied:
 * an lm_head.weight entry receives wte. Each tensor read is checked first: against its
 * "pacer_crc32c.NAME" when the file records checksums (files from other tools have none), and
 * for NaN and infinity. @metadata: (out) (optional) (transfer full) the file's __metadata__ as
 * char * -> char *.
 * Returns FALSE with @error set: PP_IO_ERROR_OPEN (cannot read), PP_IO_ERROR_CORRUPT (a header
 * longer than 100 MB or than the file, JSON that is malformed or nests arrays/objects more than
 * 8 deep, a shape of more than 2^61 elements, data_offsets that do not cover the data section
 * contiguously in order, truncated data, unknown dtype, a tensor whose CRC-32C differs or is
 * missing: the message names the file and the tensor), PP_IO_ERROR_MISMATCH (a missing tensor, a
 * shape that differs: the message names the tensor and both shapes, or a dtype other than
 * F32/BF16), PP_IO_ERROR_NONFINITE (the tensor and its first NaN or infinite element). */
gboolean exec_checkpoint_load(const char *path, const Gpt2Config *cfg, ExecTensorList *model,
                              GHashTable **metadata, GError **error);

/* Reads the raw safetensors file @path (exec_checkpoint_write() with no cfg: optimizer state)
 * into @state (entries by name, numel must match) and its metadata (out, optional, transfer
 * full). Errors as exec_checkpoint_load(). */
gboolean exec_checkpoint_load_state(const char *path, ExecTensorList *state, GHashTable **metadata,
                                    GError **error);

/* Checks every tensor of @path as exec_checkpoint_load() checks the ones it reads (checksum,
 * then finite values), in data order. Errors as exec_checkpoint_load(). */
gboolean exec_checkpoint_verify(const char *path, GError **error);

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
