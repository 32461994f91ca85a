/* SPDX-License-Identifier: MIT
 * pp-scenario.c: scenario files (GKeyFile) -> PpScenario: reading the text, overrides, parsing
 * every key of the table (pp-scenario-keys.c) in order, then the derived values and checks
 * (pp-scenario-check.c); and the accessors of [costs] and the memory shape (the typed readings
 * of single values are in pp-scenario-keys.c).
 */
#include "pp-scenario.h"

#include <string.h>

#include "pp-error.h"
#include "pp-scenario-private.h"

/* --- loading --- */

void pp_scenario_free(PpScenario *scenario) {
    if (scenario == NULL)
        return;
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (pp_key_is_text(k->type))
            g_free(*PP_FIELD(scenario, k, char *));
        else if (k->type == PP_KEY_INT32_LIST || k->type == PP_KEY_SCALED_LIST)
            g_free(*PP_FIELD(scenario, k, void *));
        else if (k->type == PP_KEY_STRING_LIST)
            g_strfreev(*PP_FIELD(scenario, k, char **));
    }
    g_strfreev(scenario->warnings);
    g_free(scenario->path);
    g_free(scenario);
}

/* A scenario holding every table default; DERIVED fields are -1. */
static PpScenario *pp_scenario_new_defaults(const char *name) {
    g_autoptr(PpScenario) sc = g_new0(PpScenario, 1);
    sc->path = g_strdup(name);
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (k->flags & PP_KEY_DERIVED) {
            if (k->type == PP_KEY_INT32)
                *PP_FIELD(sc, k, int32_t) = -1;
            else if (k->type == PP_KEY_DOUBLE)
                *PP_FIELD(sc, k, double) = -1.0;
            else if (k->type == PP_KEY_SCALED_INT64)
                *PP_FIELD(sc, k, int64_t) = -1;
            else
                PP_UNREACHABLE();
        } else if (k->def != NULL) {
            g_autoptr(GError) err = NULL;
            gboolean ok = pp_scenario_parse_value(sc, k, k->def, "<defaults>", NULL, &err);
            PP_ASSERT(ok); /* the table's defaults are valid values of their keys */
        }
    }
    return g_steal_pointer(&sc);
}

/* Rejects sections and keys that the table does not know. */
static gboolean pp_scenario_check_names(GKeyFile *kf, const char *name, GError **error) {
    g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
    for (char **g = groups; *g; g++) {
        if (pp_scenario_section_find(*g) == NULL) {
            g_autofree char *valid = pp_scenario_section_names();
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_UNKNOWN_SECTION,
                        "%s: unknown section [%s]; valid sections: %s", name, *g, valid);
            return FALSE;
        }
        g_auto(GStrv) keys = g_key_file_get_keys(kf, *g, NULL, NULL);
        for (char **key = keys; *key; key++) {
            if (pp_scenario_key_find(*g, *key) == NULL) {
                g_autofree char *hint = pp_scenario_unknown_key_hint(*g, *key);
                g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_UNKNOWN_KEY,
                            "%s: unknown key '%s' in [%s]; %s", name, *key, *g, hint);
                return FALSE;
            }
        }
    }
    return TRUE;
}

/* Writes each "section.key=value" of @overrides into @kf and records it in @origins
 * ("section.key" -> "override 'section.key=value'") so that messages name the override. */
static gboolean pp_scenario_apply_overrides(GKeyFile *kf, const char *const *overrides,
                                            GHashTable *origins, GError **error) {
    for (const char *const *o = overrides; o && *o; o++) {
        const char *eq = strchr(*o, '=');
        const char *dot = eq ? memchr(*o, '.', (size_t)(eq - *o)) : NULL;
        if (eq == NULL || dot == NULL || dot == *o || dot + 1 == eq) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                        "override '%s': expected section.key=value, e.g. pipeline.stages=8", *o);
            return FALSE;
        }
        g_autofree char *section = g_strstrip(g_strndup(*o, (size_t)(dot - *o)));
        g_autofree char *key = g_strstrip(g_strndup(dot + 1, (size_t)(eq - dot - 1)));
        g_autofree char *value = g_strstrip(g_strdup(eq + 1));
        if (pp_scenario_section_find(section) == NULL) {
            g_autofree char *valid = pp_scenario_section_names();
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_UNKNOWN_SECTION,
                        "override '%s': unknown section [%s]; valid sections: %s", *o, section,
                        valid);
            return FALSE;
        }
        if (pp_scenario_key_find(section, key) == NULL) {
            g_autofree char *hint = pp_scenario_unknown_key_hint(section, key);
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_UNKNOWN_KEY,
                        "override '%s': unknown key '%s' in [%s]; %s", *o, key, section, hint);
            return FALSE;
        }
        g_key_file_set_string(kf, section, key, value);
        g_hash_table_insert(origins, g_strdup_printf("%s.%s", section, key),
                            g_strdup_printf("override '%s'", *o));
    }
    return TRUE;
}

/* Parses every key in table order (presets before the keys that override them) and checks
 * that required keys are present. */
static gboolean pp_scenario_parse_keys(PpScenario *sc, GKeyFile *kf, GHashTable *origins,
                                       const char *base_dir, GError **error) {
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (!g_key_file_has_key(kf, k->section, k->key, NULL)) {
            const PpScenarioSection *section = pp_scenario_section_find(k->section);
            gboolean needed = section->required || g_key_file_has_group(kf, k->section);
            if ((k->flags & PP_KEY_REQUIRED) && needed &&
                pp_scenario_section_preset(sc, k->section) == NULL) {
                const PpScenarioKey *preset = pp_scenario_key_find(k->section, "preset");
                g_autofree char     *presets = preset ? pp_scenario_key_expected(preset) : NULL;
                g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_MISSING_KEY,
                            "%s: missing key [%s] %s (%s); add it%s%s%s%s", sc->path, k->section,
                            k->key, k->description, presets ? ", or a [" : "",
                            presets ? k->section : "", presets ? "] preset, one of: " : "",
                            presets ? presets : "");
                return FALSE;
            }
            continue;
        }
        g_autofree char *raw = g_key_file_get_string(kf, k->section, k->key, NULL);
        if (raw == NULL)
            raw = g_key_file_get_value(kf, k->section, k->key, NULL);
        g_strstrip(raw);
        g_autofree char *id = g_strdup_printf("%s.%s", k->section, k->key);
        const char      *origin = g_hash_table_lookup(origins, id);
        if (!pp_scenario_parse_value(sc, k, raw, origin ? origin : sc->path, base_dir, error))
            return FALSE;
    }
    sc->hardware.set = g_key_file_has_group(kf, "hardware");
    sc->costs.set = g_key_file_has_group(kf, "costs");
    return TRUE;
}

/* --- public API --- */

/* Refuses a key given twice in one section (GKeyFile keeps the last one silently): the
 * message names the section, the key and both lines. @text is what GKeyFile parsed, so
 * every line is blank, a comment, a [section] header or key=value (GKeyFile's rules:
 * leading blanks ignored, the key ends at the first '=' with trailing blanks dropped). */
static gboolean pp_scenario_check_duplicates(const char *text, const char *name, GError **error) {
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *section = NULL;
    for (int line = 1; lines[line - 1] != NULL; line++) {
        char *text_line = g_strstrip(lines[line - 1]);
        char *eq = strchr(text_line, '=');
        if (text_line[0] == '#' || text_line[0] == '\0')
            continue;
        if (text_line[0] == '[') {
            char *close = strchr(text_line, ']');
            g_free(section);
            section = g_strndup(text_line + 1, close ? (gsize)(close - text_line - 1) : 0);
            continue;
        }
        if (eq == NULL || section == NULL)
            continue;
        g_autofree char *key = g_strchomp(g_strndup(text_line, (gsize)(eq - text_line)));
        char            *id = g_strdup_printf("%s]%s", section, key);
        gpointer         first = g_hash_table_lookup(seen, id);
        if (first != NULL) {
            g_free(id);
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_PARSE,
                        "%s: line %d: [%s] %s is given a second time (first on line %d); give each "
                        "key once",
                        name, line, section, key, GPOINTER_TO_INT(first));
            return FALSE;
        }
        g_hash_table_insert(seen, id, GINT_TO_POINTER(line));
    }
    return TRUE;
}

/* The field of DERIVED key @k as a number; -1 while it is absent (not yet derived). */
static gboolean pp_scenario_key_absent(const PpScenario *sc, const PpScenarioKey *k) {
    switch (k->type) {
    case PP_KEY_INT32:
        return *PP_CFIELD(sc, k, int32_t) < 0;
    case PP_KEY_DOUBLE:
        return *PP_CFIELD(sc, k, double) < 0.0;
    case PP_KEY_SCALED_INT64:
        return *PP_CFIELD(sc, k, int64_t) < 0;
    default:
        PP_UNREACHABLE(); /* the table's DERIVED keys are numbers */
    }
}

static void pp_scenario_key_set_absent(PpScenario *sc, const PpScenarioKey *k) {
    switch (k->type) {
    case PP_KEY_INT32:
        *PP_FIELD(sc, k, int32_t) = -1;
        return;
    case PP_KEY_DOUBLE:
        *PP_FIELD(sc, k, double) = -1.0;
        return;
    case PP_KEY_SCALED_INT64:
        *PP_FIELD(sc, k, int64_t) = -1;
        return;
    default:
        PP_UNREACHABLE();
    }
}

/* Records in sc->derived_keys which DERIVED keys the parsed file left absent. */
static void pp_scenario_note_derived(PpScenario *sc) {
    sc->derived_keys = 0;
    uint32_t bit = 1;
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (!(k->flags & PP_KEY_DERIVED))
            continue;
        PP_ASSERT(bit != 0); /* at most 32 DERIVED keys */
        if (pp_scenario_key_absent(sc, k))
            sc->derived_keys |= bit;
        bit <<= 1;
    }
}

/* The bit of DERIVED key @k in sc->derived_keys (0 for any other key). */
static uint32_t pp_scenario_derived_bit(const PpScenarioKey *k) {
    uint32_t bit = 1;
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        const PpScenarioKey *ki = &pp_scenario_keys[i];
        if (!(ki->flags & PP_KEY_DERIVED))
            continue;
        if (ki == k)
            return bit;
        bit <<= 1;
    }
    return 0;
}

gboolean pp_scenario_key_given(const PpScenario *scenario, const char *section, const char *key) {
    const PpScenarioKey *k = pp_scenario_key_find(section, key);
    const uint32_t       bit = k != NULL ? pp_scenario_derived_bit(k) : 0;
    if (bit == 0)
        PP_ABORT("[%s] %s is not a key derived when absent", section, key);
    return !(scenario->derived_keys & bit);
}

/* Marks absent again every DERIVED key that sc->derived_keys says was derived. */
static void pp_scenario_reset_derived(PpScenario *sc) {
    uint32_t bit = 1;
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (!(k->flags & PP_KEY_DERIVED))
            continue;
        if (sc->derived_keys & bit)
            pp_scenario_key_set_absent(sc, k);
        bit <<= 1;
    }
}

/* A deep copy of @base: every text and list of the table is duplicated.
 * Returns: (transfer full). */
static PpScenario *pp_scenario_copy(const PpScenario *base) {
    PpScenario *sc = g_memdup2(base, sizeof *base);
    sc->path = g_strdup(base->path);
    sc->warnings = g_strdupv(base->warnings);
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        int32_t n = k->count_offset ? *(const int32_t *)((const char *)base + k->count_offset) : 0;
        if (pp_key_is_text(k->type))
            *PP_FIELD(sc, k, char *) = g_strdup(*PP_CFIELD(base, k, char *));
        else if (k->type == PP_KEY_INT32_LIST)
            *PP_FIELD(sc, k, int32_t *) =
                g_memdup2(*PP_CFIELD(base, k, int32_t *), sizeof(int32_t) * (size_t)n);
        else if (k->type == PP_KEY_SCALED_LIST)
            *PP_FIELD(sc, k, int64_t *) =
                g_memdup2(*PP_CFIELD(base, k, int64_t *), sizeof(int64_t) * (size_t)n);
        else if (k->type == PP_KEY_STRING_LIST)
            *PP_FIELD(sc, k, char **) = g_strdupv((char **)*PP_CFIELD(base, k, char **));
    }
    return sc;
}

/* Replaces the text field @field with a copy of @value. */
static void pp_scenario_set_text(char **field, const char *value) {
    g_free(*field);
    *field = g_strdup(value);
}

PpScenario *pp_scenario_with(const PpScenario *base, const PpScenarioDelta *delta, GError **error) {
    g_autoptr(PpScenario) sc = pp_scenario_copy(base);
    pp_scenario_reset_derived(sc);
    PpPipelineParams *p = &sc->pipeline;
    if (delta->kind != NULL)
        pp_scenario_set_text(&p->schedule, delta->kind->name);
    const struct {
        const char *section, *key;
        int32_t     value;
    } counts[] = {
        {"pipeline", "stages", delta->stages},
        {"pipeline", "chunks", delta->chunks},
        {"pipeline", "microbatches", delta->microbatches},
        {"pipeline", "accumulation", delta->accumulation},
        {"pipeline", "microbatch_size", delta->microbatch_size},
        {"training", "global_batch", delta->global_batch},
        {"training", "steps", delta->steps},
        {"parallel", "data", delta->data},
        {"parallel", "tensor", delta->tensor},
        {"parallel", "context", delta->context},
        {"parallel", "expert", delta->expert},
        {"parallel", "expert_tensor", delta->expert_tensor},
        {"hardware", "devices", delta->devices},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(counts); i++) {
        const PpScenarioKey *k = pp_scenario_key_find(counts[i].section, counts[i].key);
        PP_ASSERT(k != NULL && k->type == PP_KEY_INT32 && counts[i].value >= 0);
        if (counts[i].value == 0)
            continue;
        if (counts[i].value < k->min || counts[i].value > k->max) {
            g_autofree char *expected = pp_scenario_key_expected(k);
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                        "%s: [%s] %s = %d: out of range; expected %s", sc->path, k->section, k->key,
                        counts[i].value, expected);
            return NULL;
        }
        *PP_FIELD(sc, k, int32_t) = counts[i].value;
        sc->derived_keys &= ~pp_scenario_derived_bit(k); /* given now, as an override is */
    }
    if (delta->set_recompute) {
        pp_scenario_set_text(&sc->model.recompute, pp_recompute_name(delta->recompute));
        if (delta->recompute != PP_RECOMPUTE_SELECTIVE)
            g_clear_pointer(&sc->model.recompute_modules, g_strfreev);
        if (delta->recompute != PP_RECOMPUTE_FULL) { /* the full-only keys to their defaults */
            pp_scenario_set_text(&sc->model.recompute_method, "uniform");
            sc->model.recompute_num_layers = 1;
        }
    }
    if (delta->set_sequence_parallel)
        sc->parallel.sequence_parallel = delta->sequence_parallel;
    if (delta->set_sharding) {
        sc->parallel.distributed_optimizer = delta->distributed_optimizer;
        sc->parallel.fsdp = delta->fsdp;
        if (!delta->fsdp)
            pp_scenario_set_text(&sc->parallel.fsdp_impl, "megatron");
    }
    if (delta->static_mode)
        pp_scenario_set_text(&p->mode, "static");
    if (!pp_scenario_check(sc, error))
        return NULL;
    return g_steal_pointer(&sc);
}

static PpScenario *pp_scenario_from_key_file(GKeyFile *kf, const char *name, const char *base_dir,
                                             const char *const *overrides,
                                             const char *const *derive, GError **error) {
    if (!pp_scenario_check_names(kf, name, error))
        return NULL;
    g_autoptr(GHashTable) origins = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    if (!pp_scenario_apply_overrides(kf, overrides, origins, error))
        return NULL;
    /* an override of model.recompute to another mode drops the file's selective modules, as
     * pp_scenario_with() does (one given beside it in the overrides is kept, and checked) */
    g_autofree char *recompute = g_key_file_get_string(kf, "model", "recompute", NULL);
    if (g_hash_table_contains(origins, "model.recompute") &&
        !g_hash_table_contains(origins, "model.recompute_modules") &&
        g_strcmp0(recompute, "selective") != 0)
        g_key_file_remove_key(kf, "model", "recompute_modules", NULL);
    for (const char *const *d = derive; d && *d; d++) {
        const char          *dot = strchr(*d, '.');
        g_autofree char     *section = dot ? g_strndup(*d, (gsize)(dot - *d)) : NULL;
        const PpScenarioKey *k = dot ? pp_scenario_key_find(section, dot + 1) : NULL;
        PP_ASSERT(k != NULL && (k->flags & PP_KEY_DERIVED)); /* callers name derived keys */
        g_key_file_remove_key(kf, k->section, k->key, NULL);
    }
    g_autoptr(PpScenario) sc = pp_scenario_new_defaults(name);
    if (!pp_scenario_parse_keys(sc, kf, origins, base_dir, error))
        return NULL;
    pp_scenario_note_derived(sc);
    if (!pp_scenario_check(sc, error))
        return NULL;
    return g_steal_pointer(&sc);
}

/* Parses @data (named @name in messages) into a new key file, refusing repeated keys.
 * Returns: (transfer full), or NULL with @error set (PP_SCENARIO_ERROR_PARSE). */
static GKeyFile *pp_scenario_parse_text(const char *data, gsize len, const char *name,
                                        GError **error) {
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) err = NULL;
    if (!g_key_file_load_from_data(kf, data, len, G_KEY_FILE_NONE, &err)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_PARSE, "%s: %s", name,
                    err->message);
        return NULL;
    }
    if (!pp_scenario_check_duplicates(data, name, error))
        return NULL;
    return g_steal_pointer(&kf);
}

PpScenario *pp_scenario_load(const char *path, const char *const *overrides, GError **error) {
    return pp_scenario_load_deriving(path, overrides, NULL, error);
}

PpScenario *pp_scenario_load_deriving(const char *path, const char *const *overrides,
                                      const char *const *derive, GError **error) {
    g_autofree char *text = NULL;
    gsize            len = 0;
    g_autoptr(GError) err = NULL;
    if (!g_file_get_contents(path, &text, &len, &err)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_NOT_FOUND,
                    "%s: cannot read scenario: %s", path, err->message);
        return NULL;
    }
    g_autoptr(GKeyFile) kf = pp_scenario_parse_text(text, len, path, error);
    if (kf == NULL)
        return NULL;
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base_dir = g_canonicalize_filename(dir, NULL);
    return pp_scenario_from_key_file(kf, path, base_dir, overrides, derive, error);
}

PpScenario *pp_scenario_load_data(const char *data, const char *name, const char *const *overrides,
                                  GError **error) {
    g_autoptr(GKeyFile) kf = pp_scenario_parse_text(data, strlen(data), name, error);
    if (kf == NULL)
        return NULL;
    return pp_scenario_from_key_file(kf, name, NULL, overrides, NULL, error);
}

void pp_scenario_schedule_params(const PpScenario *scenario, PpScheduleParams *params) {
    const PpPipelineParams *p = &scenario->pipeline;
    const PpCostParams     *c = &scenario->costs;
    memset(params, 0, sizeof *params);
    params->kind = p->kind;
    params->n_stages = p->stages;
    params->n_chunks = p->chunks;
    params->n_microbatches = p->microbatches;
    params->accumulation = p->accumulation;
    params->n_steps = scenario->training.steps;
    params->order_file = p->order_file;
    if (c->set) {
        /* [costs] are full-stage times; a chunk holds 1/chunks of the stage's layers. */
        params->f_ns = c->forward_ns / p->chunks;
        params->b_ns = c->backward_ns / p->chunks;
        params->w_ns = c->weight_ns / p->chunks;
        params->comm_ns = c->comm_ns;
    }
}

void pp_scenario_memory_shape(const PpScenario *scenario, PpMemoryShape *shape) {
    const PpParallelParams *par = &scenario->parallel;
    *shape = (PpMemoryShape){.microbatch_size = scenario->pipeline.microbatch_size,
                             .seq_len = scenario->model.seq_len,
                             .hidden = scenario->model.hidden,
                             .heads = scenario->model.heads,
                             .vocab = scenario->model.vocab,
                             .flash_attention = scenario->model.flash_attention,
                             .tied_embeddings = scenario->model.tie_embeddings,
                             .swiglu_unfused = !scenario->model.swiglu_fusion,
                             .tensor = par->tensor,
                             .sequence_parallel = par->sequence_parallel,
                             .tp_comm_overlap = par->tp_comm_overlap,
                             .recompute = pp_scenario_recompute(scenario),
                             .recompute_modules = pp_scenario_recompute_modules(scenario),
                             .zero_shards = par->distributed_optimizer || par->fsdp
                                                ? (double)par->data * par->context
                                                : 1,
                             .kv_heads = scenario->model.kv_heads,
                             .head_dim = scenario->model.head_dim,
                             .ffn_hidden = scenario->model.ffn_hidden,
                             .ffn_gated = pp_scenario_ffn_gated(scenario),
                             .mla = pp_scenario_attention_mla(scenario),
                             .q_lora_rank = scenario->model.q_lora_rank,
                             .kv_lora_rank = scenario->model.kv_lora_rank,
                             .qk_nope_head_dim = scenario->model.qk_nope_head_dim,
                             .qk_rope_head_dim = scenario->model.qk_rope_head_dim,
                             .v_head_dim = scenario->model.v_head_dim,
                             .experts = scenario->model.experts,
                             .experts_per_token = scenario->model.experts_per_token,
                             .shared_experts = scenario->model.shared_experts,
                             .expert_ffn_hidden = scenario->model.expert_ffn_hidden,
                             .dense_layers = scenario->model.dense_layers,
                             .expert = par->expert,
                             .expert_tensor = par->expert_tensor,
                             .moe_capacity_factor = par->moe_capacity_factor,
                             .fsdp_shards = par->fsdp ? (double)par->data * par->context : 1,
                             .context = par->context,
                             .grad_bytes = pp_scenario_grad_bytes(scenario),
                             .recompute_method = pp_scenario_recompute_method(scenario),
                             .recompute_layers = scenario->model.recompute_num_layers,
                             .fsdp_impl = pp_scenario_fsdp_impl(scenario)};
    /* the experts' state is sharded over the expert-data-parallel ranks (Megatron-Core's
     * expert_data_parallel_size: the data x tensor x context ranks of a stage over expert x
     * expert_tensor) */
    if (par->distributed_optimizer || par->fsdp)
        shape->expert_zero_shards = (double)par->data * MAX(par->tensor, 1) * par->context /
                                    ((double)MAX(par->expert, 1) * MAX(par->expert_tensor, 1));
    if (scenario->pipeline.stages > 1) /* one bf16 activation message on this GPU */
        shape->msg_bytes = (double)scenario->pipeline.microbatch_size * scenario->model.seq_len *
                           scenario->model.hidden * 2.0 / MAX(par->tensor, 1) /
                           MAX(par->context, 1);
}

/* Entry @stage of a list of @n values (its only one when @n is 1), or @fallback when absent. */
static int64_t pp_scenario_list_entry(const int64_t *list, int32_t n, int32_t stage,
                                      int64_t fallback) {
    if (list == NULL || n == 0)
        return fallback;
    PP_ASSERT(stage >= 0 && (n == 1 || stage < n));
    return list[n == 1 ? 0 : stage];
}

int64_t pp_scenario_stage_cost_ns(const PpCostParams *c, PpOpKind kind, int32_t stage) {
    switch (kind) {
    case PP_OP_FORWARD:
        return pp_scenario_list_entry(c->forward_stage_ns, c->n_forward_stage, stage,
                                      c->forward_ns);
    case PP_OP_BACKWARD:
        return pp_scenario_list_entry(c->backward_stage_ns, c->n_backward_stage, stage,
                                      c->backward_ns);
    case PP_OP_WEIGHT:
        return pp_scenario_list_entry(c->weight_stage_ns, c->n_weight_stage, stage, c->weight_ns);
    case PP_OP_UPDATE:
        return pp_scenario_list_entry(c->update_stage_ns, c->n_update_stage, stage, c->update_ns);
    case PP_OP_BACKWARD_FULL:
        return pp_scenario_list_entry(c->fused_stage_ns, c->n_fused_stage, stage, -1);
    case PP_OP_N_KINDS:
        break;
    }
    PP_UNREACHABLE();
}

int64_t pp_scenario_stash_ns(const PpCostParams *c, int32_t stage) {
    return pp_scenario_list_entry(c->stash_stage_ns, c->n_stash_stage, stage, 0);
}
