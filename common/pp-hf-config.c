/* SPDX-License-Identifier: MIT
 * pp-hf-config.c: Hugging Face config.json -> PpModelPreset (pp-hf-config.h). One table maps
 * each architecture pacer reads to a family of field names; each family's reader takes its
 * fields, collects the missing ones into one error, and checks every number against the range
 * of the scenario key it fills.
 */
#include "pp-hf-config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "pp-error.h"
#include "pp-partition.h"
#include "pp-scenario-private.h"

/* Field-name families: the architectures of one family name their fields alike. */
typedef enum {
    PP_HF_GPT2,     /* n_layer, n_embd, n_head, n_positions, n_inner; GELU MLP */
    PP_HF_LLAMA,    /* num_hidden_layers, hidden_size, ..., intermediate_size; SwiGLU */
    PP_HF_MIXTRAL,  /* Llama's plus num_local_experts, num_experts_per_tok */
    PP_HF_QWEN_MOE, /* Llama's plus num_experts, num_experts_per_tok, moe_intermediate_size */
    PP_HF_DEEPSEEK, /* latent attention (kv_lora_rank, ...), routed and shared experts */
    PP_HF_GPT_OSS,  /* Llama's plus num_local_experts, experts_per_token */
} PpHfFamily;

static const struct {
    const char *architecture; /* the config's architectures[0] */
    PpHfFamily  family;
} pp_hf_architectures[] = {
    {"GPT2LMHeadModel", PP_HF_GPT2},           {"LlamaForCausalLM", PP_HF_LLAMA},
    {"MistralForCausalLM", PP_HF_LLAMA},       {"MixtralForCausalLM", PP_HF_MIXTRAL},
    {"Qwen2ForCausalLM", PP_HF_LLAMA},         {"Qwen3ForCausalLM", PP_HF_LLAMA},
    {"Qwen3MoeForCausalLM", PP_HF_QWEN_MOE},   {"DeepseekV2ForCausalLM", PP_HF_DEEPSEEK},
    {"DeepseekV3ForCausalLM", PP_HF_DEEPSEEK}, {"GptOssForCausalLM", PP_HF_GPT_OSS},
};

/* One read in progress: the first bad value is kept, missing fields are gathered. */
typedef struct {
    const char *path;
    JsonObject *root;
    GString    *missing;  /* ", "-separated names of required fields the file lacks */
    GError     *bad;      /* the first field of the wrong type or range, or NULL */
    GPtrArray  *warnings; /* (element-type utf8) */
} PpHfReader;

/* The member @name of the file's object, or NULL when it is absent or null. */
static JsonNode *pp_hf_member(PpHfReader *r, const char *name) {
    JsonNode *node = json_object_get_member(r->root, name);
    return node != NULL && !JSON_NODE_HOLDS_NULL(node) ? node : NULL;
}

static void pp_hf_note_missing(PpHfReader *r, const char *name) {
    g_string_append_printf(r->missing, "%s%s", r->missing->len ? ", " : "", name);
}

/* Stores the whole number @name, in [lo, hi], in @out. Absent (or null): recorded as missing
 * when @required, else @out keeps its value. Returns TRUE when the file gave a valid one. */
static gboolean pp_hf_int(PpHfReader *r, const char *name, gboolean required, double lo, double hi,
                          int32_t *out) {
    JsonNode *node = pp_hf_member(r, name);
    if (node == NULL) {
        if (required)
            pp_hf_note_missing(r, name);
        return FALSE;
    }
    GType  type = JSON_NODE_HOLDS_VALUE(node) ? json_node_get_value_type(node) : G_TYPE_INVALID;
    double v = type == G_TYPE_INT64    ? (double)json_node_get_int(node)
               : type == G_TYPE_DOUBLE ? json_node_get_double(node)
                                       : NAN;
    if (r->bad == NULL && (isnan(v) || v != floor(v) || v < lo || v > hi)) {
        g_autofree char *text = json_to_string(node, FALSE);
        g_set_error(&r->bad, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: %s = %s: expected a whole number from %.0f to %.0f", r->path, name, text,
                    lo, hi);
    }
    if (r->bad != NULL)
        return FALSE;
    *out = (int32_t)v;
    return TRUE;
}

/* A model dimension (hidden, heads, widths): 1 .. PP_DIM_MAX. */
static void pp_hf_dim(PpHfReader *r, const char *name, int32_t *out) {
    pp_hf_int(r, name, TRUE, 1, PP_DIM_MAX, out);
}

/* TRUE when the boolean @name is given and true; FALSE when absent or false. */
static gboolean pp_hf_true(PpHfReader *r, const char *name) {
    JsonNode *node = pp_hf_member(r, name);
    return node != NULL && JSON_NODE_HOLDS_VALUE(node) &&
           json_node_get_value_type(node) == G_TYPE_BOOLEAN && json_node_get_boolean(node);
}

static void G_GNUC_PRINTF(2, 3) pp_hf_warn(PpHfReader *r, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, args);
    va_end(args);
    g_ptr_array_add(r->warnings, g_strdup_printf("%s: %s", r->path, text));
}

/* The context the model was pre-trained at (pp-hf-config.h): the length before a RoPE
 * extension, else gpt-oss's initial_context_length, else the position table's size. */
static void pp_hf_seq_len(PpHfReader *r, const char *positions, int32_t *out) {
    JsonNode *rope = pp_hf_member(r, "rope_scaling");
    if (rope != NULL && JSON_NODE_HOLDS_OBJECT(rope)) {
        JsonObject *scaling = json_node_get_object(rope);
        JsonNode   *orig = json_object_get_member(scaling, "original_max_position_embeddings");
        if (orig != NULL && JSON_NODE_HOLDS_VALUE(orig) &&
            json_node_get_value_type(orig) == G_TYPE_INT64) {
            int64_t v = json_node_get_int(orig);
            if (v >= 1 && v <= (int64_t)PP_DIM_MAX) {
                *out = (int32_t)v;
                return;
            }
        }
    }
    if (pp_hf_int(r, "initial_context_length", FALSE, 1, PP_DIM_MAX, out))
        return;
    pp_hf_dim(r, positions, out);
}

/* Warns when the file asks for sliding-window attention (Mistral's sliding_window, Qwen's
 * use_sliding_window, gpt-oss's layer_types): pacer counts full attention over seq_len. */
static void pp_hf_check_sliding(PpHfReader *r) {
    JsonNode *window = pp_hf_member(r, "sliding_window");
    JsonNode *use = json_object_get_member(r->root, "use_sliding_window");
    JsonNode *types = pp_hf_member(r, "layer_types");
    gboolean  used = use == NULL || pp_hf_true(r, "use_sliding_window");
    int       sliding = 0, n_types = 0;
    if (types != NULL && JSON_NODE_HOLDS_ARRAY(types)) {
        JsonArray *a = json_node_get_array(types);
        n_types = (int)json_array_get_length(a);
        for (int i = 0; i < n_types; i++) {
            const char *t = json_array_get_string_element(a, (guint)i);
            sliding += t != NULL && strcmp(t, "full_attention") != 0;
        }
    }
    if (window == NULL || !used)
        return;
    g_autofree char *w = json_to_string(window, FALSE);
    if (n_types > 0)
        pp_hf_warn(r,
                   "sliding_window = %s on %d of %d layers (layer_types): pacer counts full "
                   "attention over seq_len on every layer",
                   w, sliding, n_types);
    else
        pp_hf_warn(r,
                   "sliding_window = %s: pacer counts full attention over seq_len on every "
                   "layer",
                   w);
}

/* The fields GPT-2, Llama and their descendants share (Llama's names). */
static void pp_hf_read_llama(PpHfReader *r, PpModelPreset *m) {
    pp_hf_int(r, "num_hidden_layers", TRUE, 1, PP_PARTITION_MAX_LAYERS, &m->layers);
    pp_hf_dim(r, "hidden_size", &m->hidden);
    pp_hf_dim(r, "num_attention_heads", &m->heads);
    pp_hf_int(r, "num_key_value_heads", FALSE, 1, PP_DIM_MAX, &m->kv_heads);
    pp_hf_int(r, "head_dim", FALSE, 1, PP_DIM_MAX, &m->head_dim);
    pp_hf_int(r, "intermediate_size", TRUE, 1, PP_FFN_MAX, &m->ffn_hidden);
    pp_hf_dim(r, "vocab_size", &m->vocab);
    pp_hf_seq_len(r, "max_position_embeddings", &m->seq_len);
    m->ffn_gated = TRUE;
    pp_hf_check_sliding(r);
}

/* Qwen3-MoE's dense layers: mlp_only_layers = [0, 1, ..., k-1] are pacer's k leading dense
 * layers; any other pattern (or decoder_sparse_step > 1) is warned about. */
static void pp_hf_read_qwen_moe_pattern(PpHfReader *r, PpModelPreset *m) {
    int32_t step = 1;
    pp_hf_int(r, "decoder_sparse_step", FALSE, 1, PP_PARTITION_MAX_LAYERS, &step);
    if (step != 1)
        pp_hf_warn(r,
                   "decoder_sparse_step = %d: pacer makes every layer after the dense ones a "
                   "mixture of experts",
                   step);
    JsonNode *only = pp_hf_member(r, "mlp_only_layers");
    if (only == NULL || !JSON_NODE_HOLDS_ARRAY(only))
        return;
    JsonArray *a = json_node_get_array(only);
    guint      n = json_array_get_length(a);
    gboolean   prefix = TRUE;
    for (guint i = 0; i < n; i++)
        prefix = prefix && json_array_get_int_element(a, i) == (gint64)i;
    if (prefix)
        m->dense_layers = (int32_t)n;
    else
        pp_hf_warn(r,
                   "mlp_only_layers lists %u dense layers that are not the leading ones: pacer "
                   "counts none of them dense",
                   n);
}

static void pp_hf_read_deepseek(PpHfReader *r, PpModelPreset *m) {
    pp_hf_int(r, "num_hidden_layers", TRUE, 1, PP_PARTITION_MAX_LAYERS, &m->layers);
    pp_hf_dim(r, "hidden_size", &m->hidden);
    pp_hf_dim(r, "num_attention_heads", &m->heads);
    pp_hf_int(r, "intermediate_size", TRUE, 1, PP_FFN_MAX, &m->ffn_hidden);
    pp_hf_dim(r, "vocab_size", &m->vocab);
    pp_hf_seq_len(r, "max_position_embeddings", &m->seq_len);
    m->ffn_gated = TRUE;
    /* q_lora_rank null (DeepSeek-V2-Lite): queries straight from hidden, pacer's 0 */
    pp_hf_int(r, "q_lora_rank", FALSE, 1, PP_DIM_MAX, &m->q_lora_rank);
    pp_hf_dim(r, "kv_lora_rank", &m->kv_lora_rank);
    pp_hf_dim(r, "qk_nope_head_dim", &m->qk_nope_head_dim);
    pp_hf_dim(r, "qk_rope_head_dim", &m->qk_rope_head_dim);
    pp_hf_dim(r, "v_head_dim", &m->v_head_dim);
    pp_hf_dim(r, "n_routed_experts", &m->experts);
    pp_hf_dim(r, "num_experts_per_tok", &m->experts_per_token);
    pp_hf_int(r, "n_shared_experts", FALSE, 0, PP_DIM_MAX, &m->shared_experts);
    pp_hf_int(r, "moe_intermediate_size", TRUE, 1, PP_FFN_MAX, &m->expert_ffn_hidden);
    pp_hf_int(r, "first_k_dense_replace", FALSE, 0, PP_PARTITION_MAX_LAYERS, &m->dense_layers);
    int32_t freq = 1, mtp = 0;
    pp_hf_int(r, "moe_layer_freq", FALSE, 1, PP_PARTITION_MAX_LAYERS, &freq);
    if (freq != 1)
        pp_hf_warn(r,
                   "moe_layer_freq = %d: pacer makes every layer after first_k_dense_replace a "
                   "mixture of experts",
                   freq);
    pp_hf_int(r, "num_nextn_predict_layers", FALSE, 0, PP_PARTITION_MAX_LAYERS, &mtp);
    if (mtp > 0)
        pp_hf_warn(r,
                   "num_nextn_predict_layers = %d: pacer does not count the multi-token "
                   "prediction module",
                   mtp);
}

static void pp_hf_read_family(PpHfReader *r, PpHfFamily family, PpModelPreset *m) {
    switch (family) {
    case PP_HF_GPT2:
        pp_hf_int(r, "n_layer", TRUE, 1, PP_PARTITION_MAX_LAYERS, &m->layers);
        pp_hf_dim(r, "n_embd", &m->hidden);
        pp_hf_dim(r, "n_head", &m->heads);
        pp_hf_dim(r, "vocab_size", &m->vocab);
        if (!pp_hf_int(r, "n_positions", FALSE, 1, PP_DIM_MAX, &m->seq_len))
            pp_hf_dim(r, "n_ctx", &m->seq_len);
        /* n_inner null: 4 * n_embd, pacer's default */
        pp_hf_int(r, "n_inner", FALSE, 1, PP_FFN_MAX, &m->ffn_hidden);
        return;
    case PP_HF_LLAMA:
        pp_hf_read_llama(r, m);
        return;
    case PP_HF_MIXTRAL:
        pp_hf_read_llama(r, m);
        pp_hf_dim(r, "num_local_experts", &m->experts);
        pp_hf_dim(r, "num_experts_per_tok", &m->experts_per_token);
        return;
    case PP_HF_QWEN_MOE:
        pp_hf_read_llama(r, m);
        pp_hf_dim(r, "num_experts", &m->experts);
        pp_hf_dim(r, "num_experts_per_tok", &m->experts_per_token);
        pp_hf_int(r, "moe_intermediate_size", TRUE, 1, PP_FFN_MAX, &m->expert_ffn_hidden);
        pp_hf_read_qwen_moe_pattern(r, m);
        return;
    case PP_HF_DEEPSEEK:
        pp_hf_read_deepseek(r, m);
        return;
    case PP_HF_GPT_OSS:
        pp_hf_read_llama(r, m);
        pp_hf_dim(r, "num_local_experts", &m->experts);
        if (!pp_hf_int(r, "experts_per_token", FALSE, 1, PP_DIM_MAX, &m->experts_per_token))
            pp_hf_dim(r, "num_experts_per_tok", &m->experts_per_token);
        return;
    }
    PP_UNREACHABLE();
}

char *pp_hf_config_architectures(void) {
    GString *names = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_hf_architectures); i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "", pp_hf_architectures[i].architecture);
    return g_string_free(names, FALSE);
}

/* The family of the file's architectures[0], or FALSE with @error naming the field. */
static gboolean pp_hf_family(PpHfReader *r, PpHfFamily *family, const char **name, GError **error) {
    JsonNode        *node = pp_hf_member(r, "architectures");
    const char      *arch = NULL;
    g_autofree char *known = pp_hf_config_architectures();
    if (node != NULL && JSON_NODE_HOLDS_ARRAY(node) &&
        json_array_get_length(json_node_get_array(node)) > 0) {
        JsonNode *first = json_array_get_element(json_node_get_array(node), 0);
        if (JSON_NODE_HOLDS_VALUE(first) && json_node_get_value_type(first) == G_TYPE_STRING)
            arch = json_node_get_string(first);
    }
    if (arch == NULL) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_MISSING_KEY,
                    "%s: no architectures field (a list naming the model class, e.g. "
                    "[\"LlamaForCausalLM\"]); pacer reads %s",
                    r->path, known);
        return FALSE;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(pp_hf_architectures); i++) {
        if (strcmp(arch, pp_hf_architectures[i].architecture) == 0) {
            *family = pp_hf_architectures[i].family;
            *name = pp_hf_architectures[i].architecture;
            return TRUE;
        }
    }
    /* Say which of the common decoder fields the file lacks too: with them, the shape can be
     * written into [model] by hand. */
    static const char *const common[] = {"num_hidden_layers",   "hidden_size",
                                         "num_attention_heads", "intermediate_size",
                                         "vocab_size",          "max_position_embeddings"};
    GString                 *lacking = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(common); i++) {
        if (pp_hf_member(r, common[i]) == NULL)
            g_string_append_printf(lacking, "%s%s", lacking->len ? ", " : "", common[i]);
    }
    g_autofree char *missing = g_string_free(lacking, FALSE);
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                "%s: architectures = \"%s\" is not one pacer reads (%s); write its shape as "
                "[model] keys instead%s%s",
                r->path, arch, known, missing[0] ? "; the file also lacks " : "", missing);
    return FALSE;
}

gboolean pp_hf_config_read(const char *path, PpModelPreset *shape, GStrv *warnings,
                           GError **error) {
    *warnings = NULL;
    /* A FIFO or a device (/dev/zero) would never end: only regular files are read. */
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_NOT_FOUND,
                    "%s: cannot read the Hugging Face config: no such regular file", path);
        return FALSE;
    }
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) err = NULL;
    if (!json_parser_load_from_file(parser, path, &err)) {
        g_set_error(error, PP_SCENARIO_ERROR,
                    err->domain == JSON_PARSER_ERROR ? PP_SCENARIO_ERROR_PARSE
                                                     : PP_SCENARIO_ERROR_NOT_FOUND,
                    "%s: cannot read the Hugging Face config: %s", path, err->message);
        return FALSE;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_PARSE,
                    "%s: a Hugging Face config is one JSON object ({...})", path);
        return FALSE;
    }
    g_autoptr(GString) missing = g_string_new(NULL);
    g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
    PpHfReader r = {
        .path = path, .root = json_node_get_object(root), .missing = missing, .warnings = notes};
    PpHfFamily  family = PP_HF_LLAMA;
    const char *arch = NULL;
    if (!pp_hf_family(&r, &family, &arch, error))
        return FALSE;
    PpModelPreset m = {.name = arch};
    pp_hf_read_family(&r, family, &m);
    if (r.bad != NULL) {
        g_propagate_error(error, r.bad);
        return FALSE;
    }
    if (missing->len > 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_MISSING_KEY,
                    "%s: architectures = \"%s\" but the file lacks %s; add them, or write the "
                    "shape as [model] keys",
                    path, arch, missing->str);
        return FALSE;
    }
    if (pp_hf_true(&r, "tie_word_embeddings"))
        pp_hf_warn(&r,
                   "tie_word_embeddings = true: pacer counts a separate LM head (vocab x hidden "
                   "more weights on the last stage than the tied model has) unless [model] "
                   "tie_embeddings = true is set");
    *shape = m;
    g_ptr_array_add(notes, NULL);
    *warnings = (GStrv)g_ptr_array_steal(notes, NULL);
    return TRUE;
}
