/* SPDX-License-Identifier: MIT
 * pp-hf-config.h: a model's shape read from its Hugging Face config.json ([model] hf_config,
 * pacer-sim --hf-config). The reader knows the field names of each architecture it models
 * (GPT-2, Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, DeepSeek-V2/V3, gpt-oss) and
 * names the attention variants pacer does not model in warnings rather than dropping them.
 */
#pragma once

#include <glib.h>

#include "pp-presets.h"

G_BEGIN_DECLS

/* Reads the config.json at @path into @shape, a preset record whose name is the
 * architecture (static text). The sequence length is the context the model was pre-trained at:
 * rope_scaling.original_max_position_embeddings when the file extends it, else
 * initial_context_length, else max_position_embeddings (n_positions for GPT-2).
 * @warnings: (out) (transfer full): NULL-terminated messages naming the fields of what the
 * file describes and pacer does not model (sliding windows, tied embeddings, multi-token
 * prediction, MoE layer patterns), empty when none.
 * Returns FALSE and sets @error (PP_SCENARIO_ERROR): NOT_FOUND when the file cannot be read,
 * PARSE when it is not a JSON object, INVALID_VALUE for an architecture pacer does not read
 * or a field of the wrong type or range, MISSING_KEY naming the fields the architecture
 * needs and the file lacks. Every message starts with @path. */
gboolean pp_hf_config_read(const char *path, PpModelPreset *shape, GStrv *warnings, GError **error);

/* Returns: (transfer full): "GPT2LMHeadModel, LlamaForCausalLM, ..." for messages and docs. */
char *pp_hf_config_architectures(void);

G_END_DECLS
