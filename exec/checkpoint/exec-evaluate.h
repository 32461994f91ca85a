/* SPDX-License-Identifier: MIT
 * exec-evaluate.h: held-out loss of a checkpoint on a text (pacer-train evaluate). The text is
 * tokenised with the GPT-2 BPE and cut into windows x[i:i+T] with targets x[i+1:i+T+1],
 * i = 0, T, 2T, ...; the loss is the mean next-token cross-entropy over all targets, computed
 * with the CPU full-model slice (one window at a time).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* The safetensors file to evaluate for @checkpoint: @checkpoint itself when it is a file;
 * for a checkpoint unit, or a run folder (its newest complete unit: exec_checkpoint_unit_find()),
 * the unit's model.safetensors once it matches the unit's manifest. @notes (element-type utf8,
 * nullable): the units skipped and why, then which unit is evaluated.
 * Returns: (transfer full), or NULL with @error set (PP_IO_ERROR_*, naming the folder). */
char *exec_evaluate_resolve(const char *checkpoint, GPtrArray *notes, GError **error);

/* Evaluates @checkpoint (safetensors, see exec-checkpoint.h) on the text file @text_path.
 * @heads: attention heads, 0 = the checkpoint's n_head metadata. @seq_len: window length T,
 * 0 = the rows of wpe.weight (at most that). The vocabulary comes from the data cache
 * (data_cache_dir(NULL)/gpt2). @loss: (out) mean cross-entropy in nats; @tokens: (out) the
 * number of targets (windows * T; an incomplete last window is dropped).
 * Returns FALSE with @error set (PP_IO_ERROR_*): unreadable or malformed checkpoint or text, no
 * head count, heads not dividing C, seq_len over the checkpoint's positions, a text shorter than
 * one window (T + 1 tokens), a token outside the checkpoint's vocabulary, a weight that is NaN
 * or infinite (PP_IO_ERROR_NONFINITE naming the tensor), a loss that is not finite. */
gboolean exec_evaluate(const char *checkpoint, const char *text_path, int heads, int seq_len,
                       double *loss, int64_t *tokens, GError **error);

/* exec_evaluate() on ids already tokenised: @ids (@n_ids of them). */
gboolean exec_evaluate_ids(const char *checkpoint, const int32_t *ids, int64_t n_ids, int heads,
                           int seq_len, double *loss, int64_t *tokens, GError **error);

/* The scenario.ini of the pacer-train run that @checkpoint belongs to: @checkpoint/scenario.ini
 * for a run folder, RUN/scenario.ini for a unit RUN/checkpoints/step-NNNNNNNN or a file in one.
 * Returns: (transfer full), or NULL with PP_IO_ERROR_OPEN naming both places looked at. */
char *exec_evaluate_run_scenario(const char *checkpoint, GError **error);

/* exec_evaluate_ids() of @model on the windows the run of @scenario_path validates on
 * (exec_train_validate()): its data's val shard (built as training builds it when the cache
 * lacks it), the first min(run.eval_batches x pipeline.microbatch_size, windows in the shard)
 * windows of T tokens, T = @seq_len or else model.seq_len. @what: (out) (transfer full) the
 * split and windows, in words. Returns FALSE with @error set (the scenario's, the data's, or
 * PP_SCENARIO_ERROR_INVALID_VALUE when run.eval_batches is 0). */
gboolean exec_evaluate_val(const char *model, const char *scenario_path, int heads, int seq_len,
                           double *loss, int64_t *tokens, char **what, GError **error);

G_END_DECLS
