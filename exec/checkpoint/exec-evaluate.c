/* SPDX-License-Identifier: MIT
 * exec-evaluate.c: checkpoint -> one CPU slice holding the whole model (B = 1) -> mean loss over
 * consecutive non-overlapping windows of the tokenised text. A checkpoint unit or run folder
 * is resolved to its verified model file first.
 */
#include "exec-evaluate.h"

#include <math.h>
#include <string.h>

#include "data-corpus.h"
#include "exec-checkpoint-unit.h"
#include "exec-checkpoint.h"
#include "gpt2-slice.h"
#include "pp-error.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Gpt2Slice, gpt2_slice_free)

/* ExecCheckpointUnitReadFn: the unit's model file, checked against its manifest, into
 * *(char **)@user_data. */
static gboolean exec_evaluate_read_unit(ExecCheckpointUnit *unit, gpointer user_data,
                                        GError **error) {
    char **model = user_data;
    *model = exec_checkpoint_unit_verified_path(unit, EXEC_CHECKPOINT_UNIT_MODEL, error);
    return *model != NULL;
}

char *exec_evaluate_resolve(const char *checkpoint, GPtrArray *notes, GError **error) {
    if (!g_file_test(checkpoint, G_FILE_TEST_IS_DIR))
        return g_strdup(checkpoint);
    char *model = NULL;
    g_autoptr(ExecCheckpointUnit) unit =
        exec_checkpoint_unit_find(checkpoint, exec_evaluate_read_unit, &model, notes, error);
    if (!unit)
        return NULL;
    if (notes)
        g_ptr_array_add(notes,
                        g_strdup_printf("evaluating %s (step %d)", exec_checkpoint_unit_dir(unit),
                                        exec_checkpoint_unit_step(unit)));
    return model;
}

gboolean exec_evaluate_ids(const char *checkpoint, const int32_t *ids, int64_t n_ids, int heads,
                           int seq_len, double *loss, int64_t *tokens, GError **error) {
    ExecCheckpointInfo info;
    if (!exec_checkpoint_info(checkpoint, &info, NULL, error))
        return FALSE;
    Gpt2Config cfg = info.cfg;
    const int  T_file = cfg.T;
    cfg.NH = heads > 0 ? heads : cfg.NH;
    if (cfg.NH <= 0 || cfg.C % cfg.NH != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "checkpoint %s: %d attention heads for %d channels; give a head count that "
                    "divides C (the checkpoint's n_head metadata is %s)",
                    checkpoint, cfg.NH, cfg.C, info.cfg.NH > 0 ? "used" : "absent");
        return FALSE;
    }
    cfg.T = seq_len > 0 ? seq_len : T_file;
    if (cfg.T > T_file) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "sequence length %d exceeds the %d positions of checkpoint %s", cfg.T, T_file,
                    checkpoint);
        return FALSE;
    }
    int64_t n_windows = n_ids > 0 ? (n_ids - 1) / cfg.T : 0;
    if (n_windows == 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                    "the text has %" G_GINT64_FORMAT " tokens; evaluating with sequence length "
                    "%d needs at least %d",
                    n_ids, cfg.T, cfg.T + 1);
        return FALSE;
    }
    for (int64_t i = 0; i < n_windows * cfg.T + 1; i++) {
        if (ids[i] < 0 || ids[i] >= cfg.V) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH,
                        "token %" G_GINT64_FORMAT " of the text is %d, outside the vocabulary "
                        "of checkpoint %s (%d tokens)",
                        i, ids[i], checkpoint, cfg.V);
            return FALSE;
        }
    }

    Gpt2SliceParams sp = {
        .model = cfg,
        .layer_begin = 0,
        .layer_end = cfg.L,
        .has_embedding = 1,
        .has_head = 1,
        .tie_head = info.has_head ? 0 : 1,
        .B = 1,
        .n_act_slots = 1,
    };
    g_autoptr(Gpt2Slice) slice = gpt2_slice_new(&sp);
    float *params = gpt2_slice_params(slice);

    /* Every tensor loads in place except wpe, read whole (T_file, C) and cut to T rows. */
    g_autofree float *wpe_full = g_new(float, (size_t)T_file *(size_t)cfg.C);
    g_autoptr(ExecTensorList) list = exec_tensor_list_new();
    const Gpt2Tensor *wpe = NULL;
    for (int i = 0; i < gpt2_slice_n_tensors(slice); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(slice, i);
        if (strcmp(t->name, "wpe.weight") == 0) {
            wpe = t;
            exec_tensor_list_add(list, t->name, wpe_full, 2, T_file, cfg.C);
        } else {
            exec_tensor_list_add(list, t->name, params + t->offset, t->ndim, t->shape[0],
                                 t->ndim == 1 ? 1 : t->shape[1]);
        }
    }
    PP_ASSERT(wpe != NULL && wpe->shape[0] == cfg.T); /* the first slice holds wpe (T, C) */
    if (!exec_checkpoint_load(checkpoint, &cfg, list, NULL, error))
        return FALSE;
    memcpy(params + wpe->offset, wpe_full, (size_t)cfg.T * (size_t)cfg.C * sizeof(float));

    double sum = 0.0;
    for (int64_t w = 0; w < n_windows; w++) {
        const int32_t *x = ids + w * cfg.T; // (1, T) inputs, targets x + 1
        float          window_loss = 0.0f;
        gpt2_slice_forward(slice, params, 0, x, NULL, x + 1, NULL, &window_loss);
        sum += window_loss; /* every window has T targets: the mean of means is the mean */
        if (!isfinite(window_loss)) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_NONFINITE,
                        "checkpoint %s: the loss of window %" G_GINT64_FORMAT
                        " (tokens %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
                        ") is not finite though every weight is",
                        checkpoint, w, w * cfg.T, (w + 1) * cfg.T);
            return FALSE;
        }
    }
    *loss = sum / (double)n_windows;
    *tokens = n_windows * cfg.T;
    return TRUE;
}

gboolean exec_evaluate(const char *checkpoint, const char *text_path, int heads, int seq_len,
                       double *loss, int64_t *tokens, GError **error) {
    g_autoptr(DataBpe) bpe = data_bpe_new_from_cache(NULL, error);
    if (!bpe)
        return FALSE;
    g_autofree char *text = NULL;
    gsize            len = 0;
    if (!pp_file_read(text_path, "evaluation text", &text, &len, error))
        return FALSE;
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    if (!data_bpe_encode(bpe, text, (gssize)len, DATA_BPE_ENCODE_PLAIN, ids, error)) {
        g_prefix_error(error, "%s: ", text_path);
        return FALSE;
    }
    return exec_evaluate_ids(checkpoint, (const int32_t *)(void *)ids->data, ids->len, heads,
                             seq_len, loss, tokens, error);
}
