/* SPDX-License-Identifier: MIT
 * sim-import.c: `pacer-sim import megatron` (a Megatron-LM command line, or NeMo's
 * model.KEY=VALUE overrides of the same names) and `pacer-sim import deepspeed` (a DeepSpeed
 * JSON config) -> a scenario file. Each setting with a pacer key is written as that key; the
 * data-parallel size and the micro-batches per step follow from the world size (--gpus); the
 * settings without a key are listed in the file's header and on stderr, each with its reason.
 * The scenario is loaded once before it is written, so that what is written is valid, and it is
 * written atomically without replacing an existing file unless --force is given.
 */
#include "sim-import.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "sim-main.h"

/* One flag of the command: "--name" and the tokens after it up to the next flag. */
typedef struct {
    char    *name;  /* "--num-layers" */
    char    *value; /* "32"; "" for a switch; several tokens space-joined */
    gboolean used;  /* mapped to a key, or listed with a reason of its own */
} SimImportFlag;

static void sim_import_flag_free(gpointer p) {
    SimImportFlag *f = p;
    g_free(f->name);
    g_free(f->value);
    g_free(f);
}

/* An import in progress. */
typedef struct {
    const char *origin;  /* "megatron command", "FILE" for messages */
    GKeyFile   *kf;      /* the scenario being written */
    GPtrArray  *flags;   /* (element-type SimImportFlag) in command order */
    GPtrArray  *ignored; /* (element-type utf8) "--flag value: reason" */
    GError     *error;   /* the first bad value, or NULL */
} SimImport;

/* --- command tokens --- */

/* NeMo's names for the Megatron flags they mirror (model.NAME=VALUE): a whole path, or the
 * last name of one. */
static const struct {
    const char *nemo, *megatron;
} sim_import_nemo_names[] = {
    {"model.tokenizer.type", "--tokenizer-type"},
    {"use_flash_attention", "--use-flash-attn"},
    {"encoder_seq_length", "--seq-length"},
    {"activations_checkpoint_granularity", "--recompute-granularity"},
    {"activations_checkpoint_method", "--recompute-method"},
    {"activations_checkpoint_num_layers", "--recompute-num-layers"},
    {"num_moe_experts", "--num-experts"},
    {"virtual_pipeline_model_parallel_size", "--virtual-pipeline-model-parallel-size"},
};

static void sim_import_add_flag(SimImport *im, const char *name, const char *value) {
    SimImportFlag *f = g_new0(SimImportFlag, 1);
    f->name = g_strdup(name);
    f->value = g_strdup(value);
    g_ptr_array_add(im->flags, f);
}

/* A NeMo override "model.tensor_model_parallel_size=8" as the Megatron flag of the same name;
 * true/false switch a flag on or leave it out. Returns FALSE when @token is not one. */
static gboolean sim_import_nemo_token(SimImport *im, const char *token) {
    const char *eq = strchr(token, '=');
    if (token[0] == '-' || eq == NULL || eq == token)
        return FALSE;
    for (const char *c = token; c < eq; c++) {
        if (!g_ascii_islower(*c) && !g_ascii_isdigit(*c) && *c != '_' && *c != '.')
            return FALSE;
    }
    g_autofree char *path = g_strndup(token, (gsize)(eq - token));
    const char      *value = eq + 1;
    const char      *leaf = strrchr(path, '.') ? strrchr(path, '.') + 1 : path;
    g_autofree char *flag = NULL;
    if (strcmp(path, "trainer.precision") == 0) {
        /* bf16, bf16-mixed, 16-mixed, 32 ... */
        flag = g_strdup(g_str_has_prefix(value, "bf16") ? "--bf16"
                        : g_str_has_prefix(value, "16") ? "--fp16"
                                                        : "--trainer-precision");
        sim_import_add_flag(im, flag,
                            g_str_has_prefix(value, "bf16") || value[0] == '1' ? "" : value);
        return TRUE;
    }
    if (strcmp(path, "model.optim.name") == 0) {
        sim_import_add_flag(im,
                            strcmp(value, "distributed_fused_adam") == 0
                                ? "--use-distributed-optimizer"
                                : "--optimizer",
                            strcmp(value, "distributed_fused_adam") == 0 ? "" : value);
        return TRUE;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(sim_import_nemo_names) && flag == NULL; i++) {
        if (strcmp(path, sim_import_nemo_names[i].nemo) == 0 ||
            strcmp(leaf, sim_import_nemo_names[i].nemo) == 0)
            flag = g_strdup(sim_import_nemo_names[i].megatron);
    }
    if (flag == NULL) {
        flag = g_strconcat("--", leaf, NULL);
        g_strdelimit(flag + 2, "_", '-');
    }
    if (g_ascii_strcasecmp(value, "true") == 0)
        sim_import_add_flag(im, flag, "");
    else if (g_ascii_strcasecmp(value, "false") != 0 && g_ascii_strcasecmp(value, "null") != 0)
        sim_import_add_flag(im, flag, value);
    return TRUE;
}

/* Splits @args into flags. What comes before the training script (the launcher and its own
 * options: torchrun --nproc_per_node ... pretrain_gpt.py) is left out. */
static void sim_import_read_args(SimImport *im, const char *const *args) {
    size_t start = 0;
    for (size_t i = 0; args[i] != NULL; i++) {
        if (g_str_has_suffix(args[i], ".py"))
            start = i + 1;
    }
    SimImportFlag *last = NULL;
    for (size_t i = start; args[i] != NULL; i++) {
        const char *a = args[i];
        if (g_str_has_prefix(a, "--") && a[2] != '\0') {
            const char      *eq = strchr(a, '=');
            g_autofree char *name = eq ? g_strndup(a, (gsize)(eq - a)) : g_strdup(a);
            g_strdelimit(name, "_", '-'); /* argparse accepts neither spelling mixed; both seen */
            sim_import_add_flag(im, name, eq ? eq + 1 : "");
            last = eq ? NULL : g_ptr_array_index(im->flags, im->flags->len - 1);
        } else if (sim_import_nemo_token(im, a)) {
            last = NULL;
        } else if (last != NULL) {
            char *joined = last->value[0] ? g_strjoin(" ", last->value, a, NULL) : g_strdup(a);
            g_free(last->value);
            last->value = joined;
        } else {
            sim_import_add_flag(im, a, "");
        }
    }
}

/* The last occurrence of flag @name, not marked; NULL if absent. */
static SimImportFlag *sim_import_find(SimImport *im, const char *name) {
    SimImportFlag *found = NULL;
    for (guint i = 0; i < im->flags->len; i++) {
        SimImportFlag *f = g_ptr_array_index(im->flags, i);
        if (strcmp(f->name, name) == 0)
            found = f;
    }
    return found;
}

/* The last occurrence of flag @name (argparse keeps the last), marked used; NULL if absent. */
static SimImportFlag *sim_import_take(SimImport *im, const char *name) {
    SimImportFlag *found = NULL;
    for (guint i = 0; i < im->flags->len; i++) {
        SimImportFlag *f = g_ptr_array_index(im->flags, i);
        if (strcmp(f->name, name) == 0) {
            f->used = TRUE;
            found = f;
        }
    }
    return found;
}

static gboolean G_GNUC_PRINTF(2, 3) sim_import_fail(SimImport *im, const char *fmt, ...) {
    if (im->error != NULL)
        return FALSE;
    va_list args;
    va_start(args, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, args);
    va_end(args);
    g_set_error(&im->error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE, "%s: %s",
                im->origin, text);
    return FALSE;
}

/* Switch @name is given (with no value). */
static gboolean sim_import_switch(SimImport *im, const char *name) {
    SimImportFlag *f = sim_import_take(im, name);
    if (f != NULL && f->value[0] != '\0')
        return sim_import_fail(im, "%s '%s': the flag takes no value", name, f->value);
    return f != NULL;
}

/* The whole number >= @min of flag @name in @out; FALSE when absent or bad (then noted). */
static gboolean sim_import_int(SimImport *im, const char *name, int64_t min, int64_t *out) {
    SimImportFlag *f = sim_import_take(im, name);
    if (f == NULL)
        return FALSE;
    char  *end = NULL;
    gint64 v = g_ascii_strtoll(f->value, &end, 10);
    if (f->value[0] == '\0' || *end != '\0' || v < min || v > G_MAXINT32)
        return sim_import_fail(im,
                               "%s '%s': expected a whole number from %" G_GINT64_FORMAT " to %d",
                               name, f->value, min, G_MAXINT32);
    *out = v;
    return TRUE;
}

static void G_GNUC_PRINTF(4, 5)
    sim_import_set(SimImport *im, const char *section, const char *key, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    g_autofree char *value = g_strdup_vprintf(fmt, args);
    va_end(args);
    g_key_file_set_string(im->kf, section, key, value);
}

/* Writes flag @name's whole number (>= @min) as section.key. */
static void sim_import_int_key(SimImport *im, const char *name, int64_t min, const char *section,
                               const char *key) {
    int64_t v = 0;
    if (sim_import_int(im, name, min, &v))
        sim_import_set(im, section, key, "%" G_GINT64_FORMAT, v);
}

/* Lists flag @name (if given) as ignored with @reason. */
static void sim_import_ignore(SimImport *im, const char *name, const char *reason) {
    SimImportFlag *f = sim_import_take(im, name);
    if (f != NULL)
        g_ptr_array_add(im->ignored, g_strdup_printf("%s%s%s: %s", f->name, f->value[0] ? " " : "",
                                                     f->value, reason));
}

/* The value of flag @name when it is one of @choices (NULL-terminated); NULL when absent or
 * not one of them (noted). */
static const char *sim_import_choice(SimImport *im, const char *name, const char *const *choices) {
    SimImportFlag *f = sim_import_take(im, name);
    if (f == NULL)
        return NULL;
    if (g_strv_contains(choices, f->value))
        return f->value;
    g_autofree char *valid = g_strjoinv(", ", (char **)choices);
    sim_import_fail(im, "%s '%s': expected one of %s", name, f->value, valid);
    return NULL;
}

/* --- Megatron-LM --- */

/* --moe-layer-freq: 1 (every layer), or "([0]*K+[1]*N)" / "[0,0,1,...]" with the zeros
 * leading: K dense layers. Another pattern is ignored with its reason. */
static void sim_import_moe_layer_freq(SimImport *im) {
    SimImportFlag *f = sim_import_take(im, "--moe-layer-freq");
    if (f == NULL || strcmp(f->value, "1") == 0)
        return;
    int64_t   dense = -1, moe = 0;
    char      tail = 0;
    long long k = 0, n = 0;
    if (sscanf(f->value, "([0]*%lld+[1]*%lld%c", &k, &n, &tail) == 3 && tail == ')' && k >= 0 &&
        n > 0) {
        dense = k;
        moe = n;
    } else if (f->value[0] == '[') {
        g_autofree char *inner = g_strndup(f->value + 1, strcspn(f->value + 1, "]"));
        g_auto(GStrv) items = g_strsplit(inner, ",", -1);
        dense = 0;
        for (char **it = items; *it; it++) {
            g_strstrip(*it);
            if (strcmp(*it, "0") == 0 && moe == 0)
                dense++;
            else if (strcmp(*it, "1") == 0)
                moe++;
            else
                dense = -1;
            if (dense < 0)
                break;
        }
    }
    if (dense < 0 || moe == 0) {
        g_ptr_array_add(im->ignored,
                        g_strdup_printf("--moe-layer-freq %s: pacer models leading dense layers "
                                        "then MoE layers only; every layer simulated as MoE",
                                        f->value));
        return;
    }
    sim_import_set(im, "model", "dense_layers", "%" G_GINT64_FORMAT, dense);
}

/* Model shape: [model]. */
static void sim_import_megatron_model(SimImport *im) {
    sim_import_int_key(im, "--num-layers", 1, "model", "layers");
    int64_t hidden = 0, heads = 0, ffn = 0, groups = 0;
    if (sim_import_int(im, "--hidden-size", 1, &hidden))
        sim_import_set(im, "model", "hidden", "%" G_GINT64_FORMAT, hidden);
    if (sim_import_int(im, "--num-attention-heads", 1, &heads))
        sim_import_set(im, "model", "heads", "%" G_GINT64_FORMAT, heads);
    sim_import_int_key(im, "--seq-length", 1, "model", "seq_len");
    sim_import_int_key(im, "--vocab-size", 1, "model", "vocab");
    sim_import_int_key(im, "--kv-channels", 1, "model", "head_dim");
    gboolean gqa = sim_import_switch(im, "--group-query-attention");
    if (gqa && sim_import_int(im, "--num-query-groups", 1, &groups))
        sim_import_set(im, "model", "kv_heads", "%" G_GINT64_FORMAT, groups);
    else if (!gqa)
        sim_import_ignore(im, "--num-query-groups", "read only with --group-query-attention");
    gboolean swiglu = sim_import_switch(im, "--swiglu");
    if (swiglu)
        sim_import_set(im, "model", "ffn", "swiglu");
    if (!swiglu)
        sim_import_ignore(im, "--no-bias-swiglu-fusion", "read only with --swiglu");
    else if (sim_import_switch(im, "--no-bias-swiglu-fusion"))
        sim_import_set(im, "model", "swiglu_fusion", "false");
    /* Megatron ties the LM head to the word embedding unless told not to */
    if (!sim_import_switch(im, "--untie-embeddings-and-output-weights"))
        sim_import_set(im, "model", "tie_embeddings", "true");
    if (sim_import_int(im, "--ffn-hidden-size", 1, &ffn))
        sim_import_set(im, "model", "ffn_hidden", "%" G_GINT64_FORMAT, ffn);
    else if (swiglu && hidden > 0) /* Megatron's SwiGLU default: 2/3 of 4h, down to 64 */
        sim_import_set(im, "model", "ffn_hidden", "%" G_GINT64_FORMAT,
                       (int64_t)(4.0 * (double)hidden * 2.0 / 3.0 / 64.0) * 64);
    if (sim_import_switch(im, "--multi-latent-attention")) {
        /* Megatron's defaults for the latent ranks it leaves out */
        int64_t q = 0, kv = 32, nope = 128, rope = 64, v = 128;
        sim_import_int(im, "--q-lora-rank", 1, &q);
        sim_import_int(im, "--kv-lora-rank", 1, &kv);
        sim_import_int(im, "--qk-head-dim", 1, &nope);
        sim_import_int(im, "--qk-pos-emb-head-dim", 1, &rope);
        sim_import_int(im, "--v-head-dim", 1, &v);
        sim_import_set(im, "model", "attention", "mla");
        sim_import_set(im, "model", "q_lora_rank", "%" G_GINT64_FORMAT, q);
        sim_import_set(im, "model", "kv_lora_rank", "%" G_GINT64_FORMAT, kv);
        sim_import_set(im, "model", "qk_nope_head_dim", "%" G_GINT64_FORMAT, nope);
        sim_import_set(im, "model", "qk_rope_head_dim", "%" G_GINT64_FORMAT, rope);
        sim_import_set(im, "model", "v_head_dim", "%" G_GINT64_FORMAT, v);
    }
    int64_t experts = 0, expert_ffn = 0, shared = 0;
    if (sim_import_int(im, "--num-experts", 1, &experts))
        sim_import_set(im, "model", "experts", "%" G_GINT64_FORMAT, experts);
    sim_import_int_key(im, "--moe-router-topk", 1, "model", "experts_per_token");
    if (sim_import_int(im, "--moe-ffn-hidden-size", 1, &expert_ffn))
        sim_import_set(im, "model", "expert_ffn_hidden", "%" G_GINT64_FORMAT, expert_ffn);
    if (sim_import_int(im, "--moe-shared-expert-intermediate-size", 1, &shared)) {
        int64_t one = expert_ffn > 0 ? expert_ffn : ffn;
        if (one <= 0 || shared % one != 0)
            sim_import_fail(im,
                            "--moe-shared-expert-intermediate-size %" G_GINT64_FORMAT
                            ": expected a multiple of one expert's width (--moe-ffn-hidden-size "
                            "%" G_GINT64_FORMAT ")",
                            shared, one);
        else
            sim_import_set(im, "model", "shared_experts", "%" G_GINT64_FORMAT, shared / one);
    }
    sim_import_moe_layer_freq(im);
}

/* --recompute-modules (argparse nargs='*': names after the flag; NeMo's YAML list) with
 * --recompute-granularity selective, as model.recompute_modules; the scenario's check names
 * a module it does not know. */
static void sim_import_recompute_modules(SimImport *im, const char *granularity) {
    if (granularity == NULL || strcmp(granularity, "selective") != 0) {
        sim_import_ignore(im, "--recompute-modules",
                          "read with --recompute-granularity selective only");
        return;
    }
    SimImportFlag *f = sim_import_take(im, "--recompute-modules");
    if (f == NULL)
        return;
    g_auto(GStrv) parts = g_strsplit_set(f->value, " ,[]'\"", -1);
    g_autoptr(GString) names = g_string_new(NULL);
    for (char **p = parts; *p != NULL; p++) {
        if (**p != '\0')
            g_string_append_printf(names, "%s%s", names->len ? "," : "", *p);
    }
    if (names->len > 0)
        sim_import_set(im, "model", "recompute_modules", "%s", names->str);
}

/* Recomputation, precision, attention kernel: [model]. */
static void sim_import_megatron_compute(SimImport *im) {
    static const char *const granularity[] = {"full", "selective", NULL};
    static const char *const method[] = {"uniform", "block", NULL};
    static const char *const fp8[] = {"e4m3", "hybrid", NULL};
    static const char *const backend[] = {"flash", "fused", "auto", "unfused", "local", NULL};
    const char              *g = sim_import_choice(im, "--recompute-granularity", granularity);
    if (sim_import_switch(im, "--recompute-activations") && g == NULL)
        g = "selective";
    const char *how = sim_import_choice(im, "--recompute-method", method);
    int64_t     n = 0;
    gboolean    has_n = sim_import_int(im, "--recompute-num-layers", 1, &n);
    if (g != NULL)
        sim_import_set(im, "model", "recompute", "%s", g);
    /* Megatron reads the method and layer count with full recomputation only */
    if (g != NULL && strcmp(g, "full") == 0) {
        if (how != NULL)
            sim_import_set(im, "model", "recompute_method", "%s", how);
        if (has_n)
            sim_import_set(im, "model", "recompute_num_layers", "%" G_GINT64_FORMAT, n);
    } else {
        const char *reason = "read with --recompute-granularity full only";
        sim_import_ignore(im, "--recompute-method", reason);
        sim_import_ignore(im, "--recompute-num-layers", reason);
    }
    sim_import_recompute_modules(im, g);
    const gboolean fp16 = sim_import_switch(im, "--fp16");
    const gboolean bf16 = sim_import_switch(im, "--bf16");
    const gboolean fp8_on = sim_import_choice(im, "--fp8-format", fp8) != NULL;
    if (fp16)
        sim_import_set(im, "model", "precision", "fp16");
    if (bf16)
        sim_import_set(im, "model", "precision", "bf16");
    if (fp8_on)
        sim_import_set(im, "model", "precision", "fp8");
    /* The gradient buffer's dtype as Megatron's arguments.py sets it (docs/memory.md): fp32
     * with --accumulate-allreduce-grads-in-fp32 or bf16 parameters, the parameters' without
     * (fp16; bf16 with --grad-reduce-in-bf16). grad_bytes' default covers all but these. */
    const gboolean fp32_grads = sim_import_switch(im, "--accumulate-allreduce-grads-in-fp32");
    const gboolean bf16_grads = sim_import_switch(im, "--grad-reduce-in-bf16");
    if (fp32_grads)
        sim_import_set(im, "parallel", "grad_bytes", "4");
    else if ((bf16 && bf16_grads) || (fp16 && fp8_on))
        sim_import_set(im, "parallel", "grad_bytes", "2");
    const char *b = sim_import_choice(im, "--attention-backend", backend);
    if (b != NULL)
        sim_import_set(im, "model", "flash_attention", "%s",
                       strcmp(b, "unfused") == 0 || strcmp(b, "local") == 0 ? "false" : "true");
    if (sim_import_switch(im, "--use-flash-attn"))
        sim_import_set(im, "model", "flash_attention", "true");
}

/* Layout and batch: [pipeline], [parallel], [training]. */
/* --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity: Megatron's
 * drop-and-pad dispatch, whose all-to-all splits are fixed (parallel.moe_capacity_factor).
 * Without the padding the token counts still go to the host every layer and a balanced load
 * drops none at a factor >= 1: simulated dropless, said. */
static void sim_import_megatron_capacity(SimImport *im) {
    SimImportFlag *f = sim_import_take(im, "--moe-expert-capacity-factor");
    gboolean       pad = sim_import_switch(im, "--moe-pad-expert-input-to-capacity");
    if (f == NULL)
        return;
    char        *end = NULL;
    const double v = g_ascii_strtod(f->value, &end);
    if (f->value[0] == '\0' || *end != '\0' || !(v > 0.0) || !isfinite(v)) {
        sim_import_fail(im, "--moe-expert-capacity-factor '%s': expected a number above 0",
                        f->value);
        return;
    }
    if (pad)
        sim_import_set(im, "parallel", "moe_capacity_factor", "%s", f->value);
    else
        g_ptr_array_add(im->ignored,
                        g_strdup_printf("--moe-expert-capacity-factor %s: without "
                                        "--moe-pad-expert-input-to-capacity the token counts "
                                        "still reach the host; simulated dropless",
                                        f->value));
}

/* --cp-comm-type (one type, or one per layer): p2p is ring attention, a2a Ulysses
 * (parallel.context_comm); allgather and a2a+p2p, and a list that mixes types, are listed and
 * simulated as the ring. */
static void sim_import_megatron_cp_comm(SimImport *im) {
    SimImportFlag *f = sim_import_take(im, "--cp-comm-type");
    if (f == NULL)
        return;
    g_auto(GStrv) types = g_strsplit(f->value, " ", -1);
    gboolean same = types[0] != NULL;
    for (int i = 1; same && types[i] != NULL; i++)
        same = strcmp(types[i], types[0]) == 0;
    const char *const known[] = {"p2p", "a2a", "allgather", "a2a+p2p", NULL};
    for (int i = 0; types[i] != NULL; i++)
        if (!g_strv_contains(known, types[i])) {
            sim_import_fail(im, "--cp-comm-type '%s': expected p2p, a2a, allgather or a2a+p2p",
                            types[i]);
            return;
        }
    if (same && strcmp(types[0], "a2a") == 0)
        sim_import_set(im, "parallel", "context_comm", "a2a");
    else if (same && strcmp(types[0], "p2p") == 0)
        sim_import_set(im, "parallel", "context_comm", "ring");
    else
        g_ptr_array_add(im->ignored, g_strdup_printf("--cp-comm-type %s: simulated as ring "
                                                     "attention (parallel.context_comm = ring)",
                                                     f->value));
}

static void sim_import_megatron_layout(SimImport *im) {
    static const char *const dispatchers[] = {"alltoall", "allgather", "flex", NULL};
    static const char *const strategies[] = {"no_shard", "optim", "optim_grads",
                                             "optim_grads_params", NULL};
    int64_t                  stages = 1, layers = 0, per_vstage = 0, chunks = 0;
    sim_import_int(im, "--pipeline-model-parallel-size", 1, &stages);
    sim_import_set(im, "pipeline", "stages", "%" G_GINT64_FORMAT, stages);
    if (g_key_file_has_key(im->kf, "model", "layers", NULL))
        layers = g_key_file_get_int64(im->kf, "model", "layers", NULL);
    if (sim_import_int(im, "--num-layers-per-virtual-pipeline-stage", 1, &per_vstage)) {
        if (layers % (stages * per_vstage) != 0)
            sim_import_fail(im,
                            "--num-layers-per-virtual-pipeline-stage %" G_GINT64_FORMAT
                            ": --num-layers %" G_GINT64_FORMAT " is not a multiple of it times "
                            "the %" G_GINT64_FORMAT " pipeline stages",
                            per_vstage, layers, stages);
        else
            chunks = layers / (stages * per_vstage);
    }
    sim_import_int(im, "--virtual-pipeline-model-parallel-size", 1, &chunks);
    sim_import_int(im, "--num-virtual-stages-per-pipeline-rank", 1, &chunks);
    /* Megatron's schedules: interleaved 1F1B with virtual stages, else 1F1B */
    sim_import_set(im, "pipeline", "schedule", chunks > 1 ? "interleaved" : "1f1b");
    if (chunks > 1)
        sim_import_set(im, "pipeline", "chunks", "%" G_GINT64_FORMAT, chunks);
    sim_import_int_key(im, "--micro-batch-size", 1, "pipeline", "microbatch_size");
    sim_import_int_key(im, "--tensor-model-parallel-size", 1, "parallel", "tensor");
    sim_import_int_key(im, "--context-parallel-size", 1, "parallel", "context");
    sim_import_megatron_cp_comm(im);
    sim_import_int_key(im, "--expert-model-parallel-size", 1, "parallel", "expert");
    sim_import_int_key(im, "--expert-tensor-parallel-size", 1, "parallel", "expert_tensor");
    if (sim_import_switch(im, "--sequence-parallel"))
        sim_import_set(im, "parallel", "sequence_parallel", "true");
    if (sim_import_switch(im, "--use-distributed-optimizer"))
        sim_import_set(im, "parallel", "distributed_optimizer", "true");
    if (sim_import_switch(im, "--overlap-grad-reduce"))
        sim_import_set(im, "parallel", "overlap_grad_reduce", "true");
    if (sim_import_switch(im, "--tp-comm-overlap"))
        sim_import_set(im, "parallel", "tp_comm_overlap", "true");
    gboolean fsdp2 = sim_import_switch(im, "--use-torch-fsdp2");
    gboolean fsdp = sim_import_switch(im, "--use-custom-fsdp") || fsdp2;
    fsdp = sim_import_switch(im, "--use-megatron-fsdp") || fsdp;
    const char *strategy = sim_import_choice(im, "--data-parallel-sharding-strategy", strategies);
    if (fsdp && (strategy == NULL || strcmp(strategy, "optim_grads_params") == 0)) {
        sim_import_set(im, "parallel", "fsdp", "true");
        sim_import_set(im, "parallel", "fsdp_impl", fsdp2 ? "fsdp2" : "megatron");
    } else if (fsdp && strcmp(strategy, "no_shard") != 0) {
        /* ZeRO-1 (optim) and ZeRO-2 (optim_grads) shard the optimizer state like pacer's
         * distributed optimizer; ZeRO-2's gradient shards have no key */
        sim_import_set(im, "parallel", "distributed_optimizer", "true");
        if (strcmp(strategy, "optim_grads") == 0)
            g_ptr_array_add(im->ignored,
                            g_strdup("--data-parallel-sharding-strategy optim_grads: simulated as "
                                     "the distributed optimizer (gradients not sharded)"));
    }
    const char    *d = sim_import_choice(im, "--moe-token-dispatcher-type", dispatchers);
    gboolean       deepep = sim_import_switch(im, "--moe-enable-deepep");
    SimImportFlag *backend = sim_import_take(im, "--moe-flex-dispatcher-backend");
    if (d != NULL && strcmp(d, "alltoall") == 0)
        sim_import_set(im, "parallel", "moe_dispatcher", "alltoall");
    else if (d != NULL && strcmp(d, "allgather") == 0)
        g_ptr_array_add(im->ignored, g_strdup("--moe-token-dispatcher-type allgather: no "
                                              "all-gather dispatcher model; simulated as "
                                              "alltoall"));
    else if (d != NULL && backend != NULL && strcmp(backend->value, "hybridep") == 0)
        sim_import_set(im, "parallel", "moe_dispatcher", "hybridep");
    else if (d != NULL && (deepep || (backend != NULL && strcmp(backend->value, "deepep") == 0)))
        sim_import_set(im, "parallel", "moe_dispatcher", "deepep");
    else if (d != NULL)
        sim_import_fail(im, "--moe-token-dispatcher-type flex: expected --moe-enable-deepep or "
                            "--moe-flex-dispatcher-backend deepep or hybridep with it");
    sim_import_megatron_capacity(im);
    sim_import_int_key(im, "--global-batch-size", 1, "training", "global_batch");
}

/* Flags that have no key, each with why; every other unmapped flag is listed as having none. */
static const struct {
    const char *flag, *reason;
} sim_import_megatron_reasons[] = {
    {"--max-position-embeddings", "the run's sequence is --seq-length"},
    {"--train-iters", "pacer simulates training.steps identical steps"},
    {"--train-samples", "pacer simulates training.steps identical steps"},
    {"--rampup-batch-size", "pacer simulates the full --global-batch-size"},
    {"--fp8-recipe", "one fp8 rate per device (hardware.kernel_eff_fp8)"},
    {"--tokenizer-type", "the vocabulary is --vocab-size (or model.vocab)"},
};

static void sim_import_megatron(SimImport *im) {
    sim_import_megatron_model(im);
    sim_import_megatron_compute(im);
    sim_import_megatron_layout(im);
    /* Megatron's GPT-2 BPE tokenizer (named, or implied by a merges file) has 50257 tokens */
    SimImportFlag *tok = sim_import_find(im, "--tokenizer-type");
    gboolean       gpt2_bpe = tok != NULL ? strcmp(tok->value, "GPT2BPETokenizer") == 0
                                          : sim_import_find(im, "--merge-file") != NULL;
    if (!g_key_file_has_key(im->kf, "model", "vocab", NULL) && gpt2_bpe) {
        sim_import_set(im, "model", "vocab", "50257");
        if (tok != NULL)
            tok->used = TRUE;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(sim_import_megatron_reasons); i++) {
        SimImportFlag *f = sim_import_find(im, sim_import_megatron_reasons[i].flag);
        if (f != NULL && !f->used)
            sim_import_ignore(im, f->name, sim_import_megatron_reasons[i].reason);
    }
    for (guint i = 0; i < im->flags->len; i++) {
        SimImportFlag *f = g_ptr_array_index(im->flags, i);
        if (!f->used)
            g_ptr_array_add(im->ignored, g_strdup_printf("%s%s%s: no pacer key", f->name,
                                                         f->value[0] ? " " : "", f->value));
    }
}

/* --- DeepSpeed --- */

/* The whole number at @name in @obj (>= @min) into @out; FALSE when absent or "auto". */
static gboolean sim_import_json_int(SimImport *im, JsonObject *obj, const char *name, int64_t min,
                                    int64_t *out) {
    JsonNode *n = obj != NULL ? json_object_get_member(obj, name) : NULL;
    if (n == NULL || JSON_NODE_HOLDS_NULL(n))
        return FALSE;
    if (JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING &&
        strcmp(json_node_get_string(n), "auto") == 0)
        return FALSE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
        json_node_get_int(n) < min || json_node_get_int(n) > G_MAXINT32) {
        g_autofree char *text = json_to_string(n, FALSE);
        return sim_import_fail(im,
                               "%s = %s: expected a whole number from %" G_GINT64_FORMAT " to %d",
                               name, text, min, G_MAXINT32);
    }
    *out = json_node_get_int(n);
    return TRUE;
}

static gboolean sim_import_json_enabled(JsonObject *root, const char *section) {
    JsonNode *n = json_object_get_member(root, section);
    if (n == NULL || !JSON_NODE_HOLDS_OBJECT(n))
        return FALSE;
    JsonNode *e = json_object_get_member(json_node_get_object(n), "enabled");
    return e != NULL && JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_BOOLEAN &&
           json_node_get_boolean(e);
}

/* The gradient buffer's bytes: DeepSpeed accumulates gradients in data_types.grad_accum_dtype,
 * the model's dtype when absent (deepspeed/runtime/engine.py, get_data_types()), so bf16 runs
 * keep 2-byte gradients unless it says fp32 (its DtypeEnum names). */
static void sim_import_deepspeed_grads(SimImport *im, JsonObject *root) {
    static const char *const fp32[] = {"fp32", "float32", "float", "torch.float32", NULL};
    static const char *const half[] = {"fp16",          "float16",        "half",
                                       "torch.float16", "bf16",           "bfloat16",
                                       "bfloat",        "torch.bfloat16", NULL};
    JsonNode                *types = json_object_get_member(root, "data_types");
    JsonNode                *acc = types != NULL && JSON_NODE_HOLDS_OBJECT(types)
                                       ? json_object_get_member(json_node_get_object(types), "grad_accum_dtype")
                                       : NULL;
    if (acc == NULL || JSON_NODE_HOLDS_NULL(acc)) {
        if (sim_import_json_enabled(root, "bf16"))
            sim_import_set(im, "parallel", "grad_bytes", "2");
        return;
    }
    const char *name = JSON_NODE_HOLDS_VALUE(acc) && json_node_get_value_type(acc) == G_TYPE_STRING
                           ? json_node_get_string(acc)
                           : "";
    if (g_strv_contains(fp32, name))
        sim_import_set(im, "parallel", "grad_bytes", "4");
    else if (g_strv_contains(half, name))
        sim_import_set(im, "parallel", "grad_bytes", "2");
    else
        sim_import_fail(im, "data_types.grad_accum_dtype = '%s': expected fp32, fp16 or bf16",
                        name);
}

/* Sets the per-replica batch from DeepSpeed's three numbers; the data-parallel size comes
 * later (sim_import_derive) and checks train_batch_size against them. */
static void sim_import_deepspeed(SimImport *im, JsonObject *root) {
    int64_t  micro = 0, accumulation = 0, batch = 0, stage = 0, stages = 0;
    gboolean has_micro = sim_import_json_int(im, root, "train_micro_batch_size_per_gpu", 1, &micro);
    gboolean has_acc =
        sim_import_json_int(im, root, "gradient_accumulation_steps", 1, &accumulation);
    gboolean has_batch = sim_import_json_int(im, root, "train_batch_size", 1, &batch);
    if (has_micro)
        sim_import_set(im, "pipeline", "microbatch_size", "%" G_GINT64_FORMAT, micro);
    if (has_acc)
        sim_import_set(im, "pipeline", "microbatches", "%" G_GINT64_FORMAT, accumulation);
    if (has_batch)
        sim_import_set(im, "training", "global_batch", "%" G_GINT64_FORMAT, batch);
    JsonNode *pipe = json_object_get_member(root, "pipeline");
    if (pipe != NULL && JSON_NODE_HOLDS_OBJECT(pipe) &&
        sim_import_json_int(im, json_node_get_object(pipe), "stages", 1, &stages))
        sim_import_set(im, "pipeline", "stages", "%" G_GINT64_FORMAT, stages);
    else
        sim_import_set(im, "pipeline", "stages", "1");
    sim_import_set(im, "pipeline", "schedule", "1f1b"); /* DeepSpeed's pipeline: 1F1B */
    JsonNode *zero = json_object_get_member(root, "zero_optimization");
    if (zero != NULL && JSON_NODE_HOLDS_OBJECT(zero) &&
        sim_import_json_int(im, json_node_get_object(zero), "stage", 0, &stage)) {
        if (stage > 3)
            sim_import_fail(
                im, "zero_optimization.stage = %" G_GINT64_FORMAT ": expected 0, 1, 2 or 3", stage);
        else if (stage == 3)
            sim_import_set(im, "parallel", "fsdp", "true");
        else if (stage >= 1)
            sim_import_set(im, "parallel", "distributed_optimizer", "true");
        if (stage == 2)
            g_ptr_array_add(im->ignored, g_strdup("zero_optimization.stage 2: simulated as ZeRO-1 "
                                                  "(gradients not sharded)"));
    }
    if (sim_import_json_enabled(root, "bf16"))
        sim_import_set(im, "model", "precision", "bf16");
    if (sim_import_json_enabled(root, "fp16"))
        sim_import_set(im, "model", "precision", "fp16");
    sim_import_deepspeed_grads(im, root);
    static const char *const read[] = {"train_micro_batch_size_per_gpu",
                                       "gradient_accumulation_steps",
                                       "train_batch_size",
                                       "pipeline",
                                       "zero_optimization",
                                       "bf16",
                                       "fp16",
                                       "data_types",
                                       NULL};
    g_autoptr(GList) members = json_object_get_members(root);
    for (GList *l = members; l != NULL; l = l->next) {
        if (!g_strv_contains(read, l->data))
            g_ptr_array_add(im->ignored, g_strdup_printf("%s: no pacer key", (char *)l->data));
    }
}

/* --- the scenario --- */

/* The positive whole number at section.key of the scenario being written (@fallback when
 * absent); a --set that gave something else is noted. */
static int64_t sim_import_key_int(SimImport *im, const char *section, const char *key,
                                  int64_t fallback) {
    if (!g_key_file_has_key(im->kf, section, key, NULL))
        return fallback;
    g_autofree char *text = g_key_file_get_string(im->kf, section, key, NULL);
    char            *end = NULL;
    gint64           v = g_ascii_strtoll(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || v < 1 || v > G_MAXINT32) {
        sim_import_fail(im, "[%s] %s = '%s': expected a whole number from 1 to %d", section, key,
                        text, G_MAXINT32);
        return fallback;
    }
    return v;
}

/* Fills [parallel] data and [pipeline] microbatches from the world size and the batch. */
static void sim_import_derive(SimImport *im, int64_t gpus) {
    GKeyFile *kf = im->kf;
    int64_t   tensor = sim_import_key_int(im, "parallel", "tensor", 1);
    int64_t   context = sim_import_key_int(im, "parallel", "context", 1);
    int64_t   stages = sim_import_key_int(im, "pipeline", "stages", 1);
    int64_t   model = tensor * context * stages;
    if (im->error != NULL)
        return;
    if (gpus % model != 0) {
        sim_import_fail(im,
                        "--gpus %" G_GINT64_FORMAT " is not a multiple of tensor %" G_GINT64_FORMAT
                        " x context %" G_GINT64_FORMAT " x pipeline %" G_GINT64_FORMAT
                        " = %" G_GINT64_FORMAT " GPUs",
                        gpus, tensor, context, stages, model);
        return;
    }
    int64_t data = gpus / model;
    sim_import_set(im, "parallel", "data", "%" G_GINT64_FORMAT, data);
    gboolean has_b = g_key_file_has_key(kf, "pipeline", "microbatch_size", NULL);
    gboolean has_m = g_key_file_has_key(kf, "pipeline", "microbatches", NULL);
    gboolean has_g = g_key_file_has_key(kf, "training", "global_batch", NULL);
    int64_t  b = sim_import_key_int(im, "pipeline", "microbatch_size", 1);
    if (!has_b)
        sim_import_set(im, "pipeline", "microbatch_size", "1");
    if (has_g) {
        int64_t g = sim_import_key_int(im, "training", "global_batch", 1);
        if (im->error == NULL && g % (b * data) != 0) {
            sim_import_fail(im,
                            "global batch %" G_GINT64_FORMAT " is not a multiple of the "
                            "micro-batch size %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                            " data-parallel replicas (--gpus %" G_GINT64_FORMAT ")",
                            g, b, data, gpus);
            return;
        }
        int64_t m = g / (b * data);
        int64_t given_m = sim_import_key_int(im, "pipeline", "microbatches", m);
        if (has_m && given_m != m)
            sim_import_fail(
                im,
                "train_batch_size %" G_GINT64_FORMAT " is not micro-batch %" G_GINT64_FORMAT
                " x gradient_accumulation_steps %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                " data-parallel replicas (--gpus %" G_GINT64_FORMAT ")",
                g, b, given_m, data, gpus);
        sim_import_set(im, "pipeline", "microbatches", "%" G_GINT64_FORMAT, m);
    } else if (has_m) {
        int64_t m = sim_import_key_int(im, "pipeline", "microbatches", 1);
        sim_import_set(im, "training", "global_batch", "%" G_GINT64_FORMAT, m * b * data);
    } else {
        sim_import_fail(im, "no global batch (--global-batch-size, train_batch_size or "
                            "gradient_accumulation_steps)");
    }
}

/* Applies each "section.key=value" of @sets over the imported keys. */
static gboolean sim_import_apply_sets(GKeyFile *kf, const char *const *sets, GError **error) {
    for (const char *const *s = sets; s != NULL && *s != NULL; s++) {
        const char *eq = strchr(*s, '=');
        const char *dot = strchr(*s, '.');
        if (eq == NULL || dot == NULL || dot > eq || dot == *s || dot + 1 == eq) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--set '%s': expected section.key=value", *s);
            return FALSE;
        }
        g_autofree char *section = g_strndup(*s, (gsize)(dot - *s));
        g_autofree char *key = g_strndup(dot + 1, (gsize)(eq - dot - 1));
        g_key_file_set_string(kf, section, key, eq + 1);
    }
    return TRUE;
}

/* Writes @text to @path through a temporary file in the same folder: rename() over the file
 * with @force, else link(), which refuses an existing @path. */
static gboolean sim_import_write(const char *path, const char *text, gboolean force,
                                 GError **error) {
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *tmpl = g_strdup_printf("%s/.%s.XXXXXX", dir, base);
    int              fd = g_mkstemp(tmpl);
    if (fd < 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot write in %s: %s",
                    dir, g_strerror(errno));
        return FALSE;
    }
    FILE    *fp = fdopen(fd, "w");
    gboolean ok = fp != NULL && fputs(text, fp) >= 0;
    ok = fp != NULL && fflush(fp) == 0 && fsync(fileno(fp)) == 0 && ok;
    int saved = errno;
    ok = (fp != NULL ? fclose(fp) == 0 : close(fd) == 0) && ok;
    if (ok && force)
        ok = rename(tmpl, path) == 0;
    else if (ok) {
        ok = link(tmpl, path) == 0;
        saved = errno;
        g_unlink(tmpl);
        if (!ok && saved == EEXIST) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                        "%s exists; give --force to replace it", path);
            return FALSE;
        }
    }
    if (!ok) {
        saved = errno ? errno : saved;
        g_unlink(tmpl);
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved), "cannot write %s: %s",
                    path, g_strerror(saved));
    }
    return ok;
}

/* The launch command in @path: one command, lines joined by a trailing backslash, comments
 * and blank lines skipped. Returns: (transfer full), or NULL with @error. */
static GStrv sim_import_read_command(const char *path, GError **error) {
    g_autofree char *text = NULL;
    g_autoptr(GError) err = NULL;
    if (!g_file_get_contents(path, &text, NULL, &err)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_NOT_FOUND, "%s: %s", path,
                    err->message);
        return NULL;
    }
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    GString *joined = g_string_new(NULL);
    for (char **l = lines; *l; l++) {
        char *line = g_strstrip(*l);
        if (line[0] == '#' || line[0] == '\0')
            continue;
        size_t   len = strlen(line);
        gboolean more = len > 0 && line[len - 1] == '\\';
        if (more)
            line[len - 1] = ' ';
        g_string_append_printf(joined, "%s ", line);
    }
    g_autofree char *command = g_string_free(joined, FALSE);
    GStrv            argv = NULL;
    if (!g_shell_parse_argv(command, NULL, &argv, &err)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_PARSE, "%s: not a command line: %s",
                    path, err->message);
        return NULL;
    }
    for (char **a = argv; *a; a++) {
        if (strchr(*a, '$') != NULL) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_PARSE,
                        "%s: '%s' is an unexpanded shell variable; give the command as it ran "
                        "(e.g. from the job's log, or echo it in the script)",
                        path, *a);
            g_strfreev(argv);
            return NULL;
        }
    }
    return argv;
}

/* --- the command --- */

static const char sim_import_description[] =
    "Formats:\n"
    "  megatron   a Megatron-LM command line after --, or in --from FILE (one command, lines\n"
    "             joined by backslashes); NeMo's model.NAME=VALUE overrides of the same names\n"
    "  deepspeed  a DeepSpeed JSON config (batch, gradient accumulation, ZeRO stage, pipeline\n"
    "             stages); the model comes from --hf-config or --set model.*\n"
    "--gpus N is the world size, which a launch command leaves to its launcher. The scenario\n"
    "is written to --out FILE (never over an existing file without --force) or stdout; the\n"
    "settings without a pacer key are listed in its header and on stderr. See sim/README.md.";

int sim_import_main(int argc, char **argv) {
    /* What follows "--" is the imported command, not ours to parse. */
    int cut = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            cut = i;
            break;
        }
    }
    gint     gpus = 0;
    gboolean force = FALSE;
    g_auto(GStrv) sets = NULL;
    g_autofree char   *out = NULL, *from = NULL, *hf_config = NULL;
    const GOptionEntry entries[] = {
        {"gpus", 'g', 0, G_OPTION_ARG_INT, &gpus, "World size: the GPUs of the run", "N"},
        {"out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Write the scenario to FILE", "FILE"},
        {"force", 'f', 0, G_OPTION_ARG_NONE, &force, "Replace an existing --out FILE", NULL},
        {"from", 0, 0, G_OPTION_ARG_FILENAME, &from, "megatron: read the command from FILE",
         "FILE"},
        SIM_MAIN_OPTION_SET(&sets),
        SIM_MAIN_OPTION_HF_CONFIG(&hf_config),
        SIM_MAIN_OPTION_END,
    };
    g_autoptr(GError) error = NULL;
    int    own_argc = cut;
    char **own_argv = g_new0(char *, (gsize)cut + 1);
    memcpy(own_argv, argv, sizeof(char *) * (size_t)cut);
    g_autofree char **own_free = own_argv;
    if (!sim_main_parse(&own_argc, &own_argv,
                        "megatron|deepspeed [CONFIG.json] --gpus N [-- ARGS...] - write a scenario "
                        "from a launch configuration",
                        "Turn a Megatron-LM/NeMo command line or a DeepSpeed config into a "
                        "scenario file that reproduces the run.",
                        sim_import_description, entries, &error))
        return sim_main_fail(NULL, error);
    const char *format = own_argc >= 2 ? own_argv[1] : NULL;
    gboolean    megatron = g_strcmp0(format, "megatron") == 0;
    if (!megatron && g_strcmp0(format, "deepspeed") != 0)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "expected the format, megatron or deepspeed, got %s", format ? format : "none");
    else if (gpus < 1)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--gpus N: expected the run's world size, a positive number of GPUs");
    else if (megatron && (own_argc != 2 || (from != NULL) == (cut < argc)))
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "megatron: give the command after -- or in --from FILE (one of them)");
    else if (!megatron && (own_argc != 3 || cut < argc || from != NULL))
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "deepspeed: give one CONFIG.json (and no command)");
    else if (force && out == NULL)
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--force needs --out FILE");
    if (error != NULL)
        return sim_main_fail(NULL, error);

    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GPtrArray) flags = g_ptr_array_new_with_free_func(sim_import_flag_free);
    g_autoptr(GPtrArray) ignored = g_ptr_array_new_with_free_func(g_free);
    SimImport im = {.kf = kf, .flags = flags, .ignored = ignored};
    /* [model] first, so that the file reads in the scenario's usual order */
    if (hf_config != NULL) {
        g_autofree char *abs = g_canonicalize_filename(hf_config, NULL);
        g_key_file_set_string(kf, "model", "hf_config", abs);
    }
    g_auto(GStrv) command = NULL;
    const char *source = NULL;
    if (megatron) {
        if (from != NULL && (command = sim_import_read_command(from, &error)) == NULL)
            return sim_main_fail(from, error);
        im.origin = from != NULL ? from : "megatron command";
        sim_import_read_args(&im, from != NULL ? (const char *const *)command
                                               : (const char *const *)argv + cut + 1);
        sim_import_megatron(&im);
        source = im.origin;
    } else {
        source = own_argv[2];
        im.origin = source;
        g_autoptr(JsonParser) parser = json_parser_new();
        g_autoptr(GError) err = NULL;
        if (!json_parser_load_from_file(parser, source, &err)) {
            g_set_error(&error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_PARSE,
                        "not a DeepSpeed JSON config: %s", err->message);
            return sim_main_fail(source, error);
        }
        JsonNode *root = json_parser_get_root(parser);
        if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
            g_set_error(&error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_PARSE,
                        "a DeepSpeed config is one JSON object ({...})");
            return sim_main_fail(source, error);
        }
        sim_import_deepspeed(&im, json_node_get_object(root));
    }
    if (im.error == NULL && !sim_import_apply_sets(kf, (const char *const *)sets, &im.error))
        return sim_main_fail(NULL, im.error);
    if (im.error == NULL)
        sim_import_derive(&im, gpus);
    if (im.error != NULL) {
        g_autoptr(GError) e = im.error;
        return sim_main_fail(NULL, e);
    }

    /* The header: where the scenario came from and what it left out. */
    GString *head = g_string_new(NULL);
    g_string_append_printf(head, " Imported by pacer-sim import %s --gpus %d from %s.", format,
                           gpus, source);
    if (!g_key_file_has_group(kf, "hardware"))
        g_string_append(head, "\n No [hardware]: add one (e.g. --set hardware.preset=h100-sxm) "
                              "before simulating.");
    if (ignored->len > 0)
        g_string_append(head, "\n Ignored (no pacer key, or simulated as said):");
    for (guint i = 0; i < ignored->len; i++) {
        g_string_append_printf(head, "\n   %s", (char *)g_ptr_array_index(ignored, i));
        fprintf(stderr, "pacer-sim: import: ignored %s\n", (char *)g_ptr_array_index(ignored, i));
    }
    g_autofree char *comment = g_string_free(head, FALSE);
    g_key_file_set_comment(kf, NULL, NULL, comment, NULL);
    g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);

    /* What is written must load as a scenario. */
    g_autoptr(PpScenario) check = pp_scenario_load_data(text, "imported scenario", NULL, &error);
    if (check == NULL)
        return sim_main_fail(NULL, error);
    if (!g_key_file_has_group(kf, "hardware"))
        fprintf(stderr, "pacer-sim: import: no [hardware]: add one (e.g. --set "
                        "hardware.preset=h100-sxm) before simulating\n");
    if (out == NULL) {
        fputs(text, stdout);
        return 0;
    }
    if (!sim_import_write(out, text, force, &error))
        return sim_main_fail(NULL, error);
    return 0;
}
