/* SPDX-License-Identifier: MIT
 * pp-scenario.c: scenario files (GKeyFile) -> PpScenario. One static key table drives the
 * defaults, parsing, --set overrides, unknown-key errors, freeing and pp_scenario_to_data.
 * Per section, the preset key (first in the table) fills the section, then explicit keys
 * override it; derived values and the cross-key consistency checks run last.
 */
#include "pp-scenario.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "pp-error.h"
#include "pp-presets.h"
#include "pp-schedule.h"

/* --- the key table --- */

typedef enum {
    PP_KEY_INT32,           /* whole number in [min, max] */
    PP_KEY_UINT64,          /* whole number >= 0 */
    PP_KEY_DOUBLE,          /* number in the range; stored as value * scale */
    PP_KEY_SCALED_INT64,    /* number in the range; stored as round(value * scale) */
    PP_KEY_BOOL,            /* true/false (or 1/0) */
    PP_KEY_STRING,          /* any text */
    PP_KEY_PATH,            /* a file, relative to the scenario file's folder */
    PP_KEY_ENUM,            /* one of choices */
    PP_KEY_SCHEDULE,        /* a schedule registry name */
    PP_KEY_MODEL_PRESET,    /* a pp-presets.h model; fills [model] */
    PP_KEY_HARDWARE_PRESET, /* a pp-presets.h device; fills [hardware] */
    PP_KEY_INT32_LIST,      /* comma-separated whole numbers in [min, max] */
    PP_KEY_STRING_LIST,     /* comma-separated non-empty texts */
} PpKeyType;

typedef enum {
    PP_KEY_REQUIRED = 1 << 0, /* must be given unless the section's preset fills it */
    PP_KEY_DERIVED = 1 << 1,  /* computed from other keys when absent (int32 -1 until then) */
    PP_KEY_OPTIONAL = 1 << 2, /* absent means NULL */
    PP_KEY_MIN_EXCL = 1 << 3, /* the range excludes min */
    PP_KEY_MAX_EXCL = 1 << 4, /* the range excludes max */
} PpKeyFlags;

typedef struct {
    const char        *section;
    const char        *key;
    PpKeyType          type;
    size_t             offset;       /* of the field in PpScenario */
    size_t             count_offset; /* INT32_LIST: of its int32_t length field */
    const char        *def;          /* default in file units; NULL: see flags */
    double             min, max;     /* valid range in file units (numbers, list elements) */
    double             scale;        /* stored unit per file unit (DOUBLE, SCALED_INT64) */
    const char *const *choices;      /* ENUM: NULL-terminated */
    unsigned           flags;
    const char        *description; /* one line; written as a comment by to_data */
} PpScenarioKey;

typedef struct {
    const char *name;
    gboolean    required; /* its REQUIRED keys are checked even when the section is absent */
} PpScenarioSection;

static const PpScenarioSection pp_scenario_sections[] = {
    {"model", TRUE},  {"hardware", FALSE}, {"pipeline", TRUE},   {"training", FALSE},
    {"costs", FALSE}, {"data", FALSE},     {"optimizer", FALSE}, {"run", FALSE},
};

static const char *const pp_mode_choices[] = {"static", "dynamic", NULL};
static const char *const pp_partition_choices[] = {"balanced", "even", NULL};
static const char *const pp_optimizer_choices[] = {"adamw", "muon", NULL};

#define PP_OFF(field) offsetof(PpScenario, field)
#define PP_I32_MAX    2147483647.0
/* Scaled int64 keys stay below 2^63 after scaling: 1e12 us is 1e15 ns, 1e9 GiB < 2^60. */
#define PP_US_MAX  1e12
#define PP_GIB_MAX 1e9

#define PP_INT(sec, k, field, d, lo, hi, fl, desc)                                                 \
    {                                                                                              \
        .section = sec, .key = k, .type = PP_KEY_INT32, .offset = PP_OFF(field), .def = d,         \
        .min = lo, .max = hi, .scale = 1.0, .flags = fl, .description = desc                       \
    }
#define PP_NUM(sec, k, field, d, lo, hi, sc, fl, desc)                                             \
    {                                                                                              \
        .section = sec, .key = k, .type = PP_KEY_DOUBLE, .offset = PP_OFF(field), .def = d,        \
        .min = lo, .max = hi, .scale = sc, .flags = fl, .description = desc                        \
    }
#define PP_SCALED(sec, k, field, d, hi, sc, fl, desc)                                              \
    {                                                                                              \
        .section = sec, .key = k, .type = PP_KEY_SCALED_INT64, .offset = PP_OFF(field), .def = d,  \
        .min = 0.0, .max = hi, .scale = sc, .flags = fl, .description = desc                       \
    }
#define PP_TEXT(sec, k, ty, field, d, fl, desc)                                                    \
    {                                                                                              \
        .section = sec, .key = k, .type = ty, .offset = PP_OFF(field), .def = d, .flags = fl,      \
        .description = desc                                                                        \
    }
#define PP_ENUM(sec, k, field, d, ch, desc)                                                        \
    {                                                                                              \
        .section = sec, .key = k, .type = PP_KEY_ENUM, .offset = PP_OFF(field), .def = d,          \
        .choices = ch, .description = desc                                                         \
    }

/* Order matters: a section's preset key comes first so that the keys after it override
 * the preset; sections appear in pp_scenario_sections order (to_data writes this order). */
static const PpScenarioKey pp_scenario_keys[] = {
    PP_TEXT("model", "preset", PP_KEY_MODEL_PRESET, model.preset, NULL, PP_KEY_OPTIONAL,
            "named shape that fills this section; the keys below override it"),
    PP_INT("model", "layers", model.layers, NULL, 1, PP_I32_MAX, PP_KEY_REQUIRED,
           "transformer blocks L"),
    PP_INT("model", "hidden", model.hidden, NULL, 1, PP_I32_MAX, PP_KEY_REQUIRED,
           "hidden size C (a multiple of heads)"),
    PP_INT("model", "heads", model.heads, NULL, 1, PP_I32_MAX, PP_KEY_REQUIRED,
           "attention heads NH"),
    PP_INT("model", "seq_len", model.seq_len, NULL, 1, PP_I32_MAX, PP_KEY_REQUIRED,
           "sequence length T in tokens"),
    PP_INT("model", "vocab", model.vocab, NULL, 1, PP_I32_MAX, PP_KEY_REQUIRED,
           "vocabulary size V"),
    PP_TEXT("model", "flash_attention", PP_KEY_BOOL, model.flash_attention, "false", 0,
            "true: fused attention stores no s x s scores; the simulator's activations per "
            "layer drop from sbh(34 + 5as/h) to 34sbh bytes"),

    PP_TEXT("hardware", "preset", PP_KEY_HARDWARE_PRESET, hardware.preset, NULL, PP_KEY_OPTIONAL,
            "named device that fills this section; the keys below override it"),
    PP_NUM("hardware", "peak_tflops", hardware.peak_flops, NULL, 0.0, INFINITY, 1e12,
           PP_KEY_REQUIRED | PP_KEY_MIN_EXCL, "dense bf16 TFLOP/s of one device"),
    PP_SCALED("hardware", "memory_gib", hardware.memory_bytes, NULL, PP_GIB_MAX, (double)(1 << 30),
              PP_KEY_REQUIRED | PP_KEY_MIN_EXCL, "device memory in GiB (2^30 bytes)"),
    PP_NUM("hardware", "mem_bw_gbps", hardware.mem_bw_bytes_per_s, NULL, 0.0, INFINITY, 1e9,
           PP_KEY_REQUIRED | PP_KEY_MIN_EXCL, "device memory bandwidth in GB/s (1e9 bytes/s)"),
    PP_NUM("hardware", "link_gbps", hardware.link_bw_bytes_per_s, NULL, 0.0, INFINITY, 1e9,
           PP_KEY_REQUIRED | PP_KEY_MIN_EXCL,
           "stage-to-stage link bandwidth in GB/s, one direction"),
    PP_SCALED("hardware", "link_latency_us", hardware.link_latency_ns, NULL, PP_US_MAX, 1e3,
              PP_KEY_REQUIRED, "latency of one stage-to-stage message in us"),
    PP_TEXT("hardware", "nvlink", PP_KEY_BOOL, hardware.nvlink, "false", 0,
            "true: the link is NVLink; false: PCIe"),
    PP_INT("hardware", "devices", hardware.devices, NULL, 1, PP_I32_MAX, PP_KEY_DERIVED,
           "devices available (>= pipeline.stages); absent: pipeline.stages"),
    PP_NUM("hardware", "kernel_eff_max", hardware.kernel_eff_max, "0.6", 0.0, 1.0, 1.0,
           PP_KEY_MIN_EXCL,
           "analytic cost model: share of peak_tflops that large micro-batches reach; "
           "eff(t) = kernel_eff_max * t / (t + kernel_eff_half_tokens) for t tokens"),
    PP_NUM("hardware", "kernel_eff_half_tokens", hardware.kernel_eff_half_tokens, "2048", 0.0,
           INFINITY, 1.0, 0,
           "analytic cost model: micro-batch tokens at which eff reaches half of kernel_eff_max"),

    PP_TEXT("pipeline", "schedule", PP_KEY_SCHEDULE, pipeline.schedule, NULL, PP_KEY_REQUIRED,
            "schedule registry name"),
    PP_INT("pipeline", "stages", pipeline.stages, NULL, 1, PP_I32_MAX, PP_KEY_REQUIRED,
           "pipeline stages N, one device each"),
    PP_INT("pipeline", "chunks", pipeline.chunks, "1", 1, PP_I32_MAX, 0,
           "model chunks per device v (interleaved only)"),
    PP_INT("pipeline", "microbatches", pipeline.microbatches, "1", 1, PP_I32_MAX, 0,
           "micro-batches m per optimizer step (flush schedules, 2bw, custom)"),
    PP_INT("pipeline", "accumulation", pipeline.accumulation, "1", 1, PP_I32_MAX, 0,
           "backward passes a per local update (paci; async-1f1b needs 1)"),
    PP_INT("pipeline", "microbatch_size", pipeline.microbatch_size, NULL, 1, PP_I32_MAX,
           PP_KEY_DERIVED, "sequences per micro-batch; absent: derived from global_batch"),
    PP_TEXT("pipeline", "order_file", PP_KEY_PATH, pipeline.order_file, NULL, PP_KEY_OPTIONAL,
            "custom schedule: CSV of per-stage op orders, relative to this file"),
    PP_ENUM("pipeline", "mode", pipeline.mode, "static", pp_mode_choices,
            "static: replay the program; dynamic: run the PACI policy live"),
    PP_ENUM("pipeline", "partition", pipeline.partition, "balanced", pp_partition_choices,
            "layers per virtual stage: balanced (smallest slowest stage within "
            "hardware.memory) or even; run.layers_per_stage overrides both"),

    PP_INT("training", "global_batch", training.global_batch, NULL, 1, PP_I32_MAX, PP_KEY_DERIVED,
           "sequences per optimizer step; absent: derived from the pipeline"),
    PP_INT("training", "steps", training.steps, "10", 1, PP_I32_MAX, 0, "optimizer steps"),

    PP_SCALED("costs", "forward_us", costs.forward_ns, NULL, PP_US_MAX, 1e3, PP_KEY_REQUIRED,
              "forward of one micro-batch through one full stage, us"),
    PP_SCALED("costs", "backward_us", costs.backward_ns, NULL, PP_US_MAX, 1e3, PP_KEY_REQUIRED,
              "input-gradient backward B of one full stage, us"),
    PP_SCALED("costs", "weight_us", costs.weight_ns, "0", PP_US_MAX, 1e3, 0,
              "weight-gradient backward W, us; a fused BW costs backward_us + weight_us"),
    PP_SCALED("costs", "comm_us", costs.comm_ns, "0", PP_US_MAX, 1e3, 0,
              "one stage-to-stage hop, us"),
    PP_SCALED("costs", "update_us", costs.update_ns, "0", PP_US_MAX, 1e3, 0,
              "optimizer step of one stage, us"),

    PP_TEXT("data", "paths", PP_KEY_STRING_LIST, data.paths, NULL, PP_KEY_OPTIONAL,
            "extra text files or folders, comma-separated; absent: the default corpus"),
    PP_TEXT("data", "cache_dir", PP_KEY_STRING, data.cache_dir, ".cache", 0,
            "folder for fetched packages and token shards"),
    PP_NUM("data", "val_fraction", data.val_fraction, "0.05", 0.0, 1.0, 1.0, PP_KEY_MAX_EXCL,
           "share of documents held out for validation"),

    PP_ENUM("optimizer", "name", optimizer.name, "adamw", pp_optimizer_choices,
            "adamw, or muon (AdamW for non-matrix parameters)"),
    PP_NUM("optimizer", "lr", optimizer.lr, "6e-4", 0.0, INFINITY, 1.0, 0, "peak learning rate"),
    PP_NUM("optimizer", "min_lr", optimizer.min_lr, "6e-5", 0.0, INFINITY, 1.0, 0,
           "learning rate at the end of the cosine decay (<= lr)"),
    PP_INT("optimizer", "warmup_steps", optimizer.warmup_steps, NULL, 0, PP_I32_MAX, PP_KEY_DERIVED,
           "linear warmup steps; absent: 10% of training.steps"),
    PP_NUM("optimizer", "weight_decay", optimizer.weight_decay, "0.1", 0.0, INFINITY, 1.0, 0,
           "decoupled weight decay"),
    PP_NUM("optimizer", "beta1", optimizer.beta1, "0.9", 0.0, 1.0, 1.0, PP_KEY_MAX_EXCL,
           "Adam first-moment decay"),
    PP_NUM("optimizer", "beta2", optimizer.beta2, "0.95", 0.0, 1.0, 1.0, PP_KEY_MAX_EXCL,
           "Adam second-moment decay"),
    PP_NUM("optimizer", "eps", optimizer.eps, "1e-8", 0.0, INFINITY, 1.0, PP_KEY_MIN_EXCL,
           "Adam denominator epsilon"),
    PP_NUM("optimizer", "momentum", optimizer.momentum, "0.95", 0.0, 1.0, 1.0, PP_KEY_MAX_EXCL,
           "muon momentum"),
    PP_NUM("optimizer", "muon_lr", optimizer.muon_lr, "0.02", 0.0, INFINITY, 1.0, 0,
           "muon peak learning rate for the blocks' matrices (same warmup and decay as lr)"),
    PP_INT("optimizer", "ns_steps", optimizer.ns_steps, "5", 1, PP_I32_MAX, 0,
           "muon Newton-Schulz iterations"),
    PP_NUM("optimizer", "grad_clip", optimizer.grad_clip, "1.0", 0.0, INFINITY, 1.0, 0,
           "per-stage clipping threshold on the gradient L2 norm; 0: off"),
    PP_TEXT("optimizer", "error_feedback", PP_KEY_BOOL, optimizer.error_feedback, "false", 0,
            "update-level error feedback for delayed updates"),

    PP_TEXT("run", "seed", PP_KEY_UINT64, run.seed, "1337", 0, "random seed"),
    PP_INT("run", "eval_every", run.eval_every, "0", 0, PP_I32_MAX, 0,
           "steps between validation passes; 0: only at the end"),
    PP_INT("run", "eval_batches", run.eval_batches, "8", 1, PP_I32_MAX, 0,
           "micro-batches per validation pass"),
    PP_INT("run", "checkpoint_every", run.checkpoint_every, "0", 0, PP_I32_MAX, 0,
           "steps between checkpoints; 0: only at the end"),
    PP_INT("run", "threads", run.threads, "0", 0, PP_I32_MAX, 0,
           "BLAS threads per worker; 0: automatic"),
    PP_TEXT("run", "backend", PP_KEY_STRING, run.backend, "cpu", 0,
            "executor backend: cpu, or another one this build has (pacer-train checks the name "
            "and lists the valid ones); the simulator ignores it"),
    {.section = "run",
     .key = "layers_per_stage",
     .type = PP_KEY_INT32_LIST,
     .offset = PP_OFF(run.layers_per_stage),
     .count_offset = PP_OFF(run.n_layers_per_stage),
     .min = 1,
     .max = PP_I32_MAX,
     .flags = PP_KEY_OPTIONAL,
     .description = "layers of each virtual stage, comma-separated; absent: balanced by cost"},
    PP_INT("run", "log_every", run.log_every, "1", 1, PP_I32_MAX, 0, "steps between log lines"),
    PP_NUM("run", "comm_timeout_s", run.comm_timeout_s, "300", 0.0, 604800.0, 1.0, PP_KEY_MIN_EXCL,
           "multi-process runs: seconds a process waits for a peer before it names the peer and "
           "the op it waited for and aborts the job (at most a week)"),
};

/* --- field access --- */

#define PP_FIELD(sc, k, type)  ((type *)((char *)(sc) + (k)->offset))
#define PP_CFIELD(sc, k, type) ((const type *)((const char *)(sc) + (k)->offset))

static gboolean pp_key_is_text(PpKeyType type) {
    switch (type) {
    case PP_KEY_STRING:
    case PP_KEY_PATH:
    case PP_KEY_ENUM:
    case PP_KEY_SCHEDULE:
    case PP_KEY_MODEL_PRESET:
    case PP_KEY_HARDWARE_PRESET:
        return TRUE;
    default:
        return FALSE;
    }
}

static const PpScenarioSection *pp_scenario_section_find(const char *name) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_sections); i++) {
        if (strcmp(pp_scenario_sections[i].name, name) == 0)
            return &pp_scenario_sections[i];
    }
    return NULL;
}

static const PpScenarioKey *pp_scenario_key_find(const char *section, const char *key) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (strcmp(k->section, section) == 0 && strcmp(k->key, key) == 0)
            return k;
    }
    return NULL;
}

/* Returns: (transfer full): "preset, layers, ..." */
static char *pp_scenario_key_names(const char *section) {
    GString *names = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        if (strcmp(pp_scenario_keys[i].section, section) == 0)
            g_string_append_printf(names, "%s%s", names->len ? ", " : "", pp_scenario_keys[i].key);
    }
    return g_string_free(names, FALSE);
}

static char *pp_scenario_section_names(void) {
    GString *names = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_sections); i++)
        g_string_append_printf(names, "%s[%s]", i ? ", " : "", pp_scenario_sections[i].name);
    return g_string_free(names, FALSE);
}

/* The preset name a section was given, or NULL (also for sections without a preset key). */
static const char *pp_scenario_section_preset(const PpScenario *sc, const char *section) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (strcmp(k->section, section) == 0 &&
            (k->type == PP_KEY_MODEL_PRESET || k->type == PP_KEY_HARDWARE_PRESET))
            return *PP_CFIELD(sc, k, char *);
    }
    return NULL;
}

/* Writes @v with the fewest significant digits (15 to 17) that read back as the same
 * double, locale-independent: 0.6 rather than 0.59999999999999998. Returns @buf. */
static char *pp_format_double(char *buf, size_t size, double v) {
    static const char *const formats[] = {"%.15g", "%.16g", "%.17g"};
    for (size_t i = 0; i < G_N_ELEMENTS(formats); i++) {
        g_ascii_formatd(buf, (int)size, formats[i], v);
        if (g_ascii_strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

/* Returns: (transfer full): the valid values of @k, for messages. */
static char *pp_scenario_key_expected(const PpScenarioKey *k) {
    char lo[G_ASCII_DTOSTR_BUF_SIZE], hi[G_ASCII_DTOSTR_BUF_SIZE];
    pp_format_double(lo, sizeof lo, k->min);
    pp_format_double(hi, sizeof hi, k->max);
    switch (k->type) {
    case PP_KEY_INT32:
        return g_strdup_printf("a whole number from %s to %s", lo, hi);
    case PP_KEY_INT32_LIST:
        return g_strdup_printf("comma-separated whole numbers from %s to %s", lo, hi);
    case PP_KEY_UINT64:
        return g_strdup("a whole number >= 0");
    case PP_KEY_DOUBLE:
    case PP_KEY_SCALED_INT64:
        if (isinf(k->max))
            return g_strdup_printf("a number %s %s", (k->flags & PP_KEY_MIN_EXCL) ? ">" : ">=", lo);
        return g_strdup_printf("a number in %c%s, %s%c", (k->flags & PP_KEY_MIN_EXCL) ? '(' : '[',
                               lo, hi, (k->flags & PP_KEY_MAX_EXCL) ? ')' : ']');
    case PP_KEY_BOOL:
        return g_strdup("true or false");
    case PP_KEY_ENUM:
        return g_strjoinv(", ", (char **)k->choices);
    case PP_KEY_SCHEDULE:
        return pp_sched_kind_names();
    case PP_KEY_MODEL_PRESET:
        return pp_preset_model_names();
    case PP_KEY_HARDWARE_PRESET:
        return pp_preset_hardware_names();
    case PP_KEY_STRING:
    case PP_KEY_PATH:
    case PP_KEY_STRING_LIST:
        return g_strdup("a non-empty text");
    }
    PP_UNREACHABLE();
}

/* --- value parsing --- */

typedef enum {
    PP_NUM_OK,
    PP_NUM_MALFORMED,
    PP_NUM_RANGE, /* syntactically fine but outside the key's range (or the machine's) */
} PpNumStatus;

static PpNumStatus pp_parse_int(const PpScenarioKey *k, const char *text, int64_t *out) {
    const char *digits = (text[0] == '+' || text[0] == '-') ? text + 1 : text;
    if (!g_ascii_isdigit(digits[0]))
        return PP_NUM_MALFORMED;
    char *end = NULL;
    errno = 0;
    gint64 v = g_ascii_strtoll(text, &end, 10);
    if (*end != '\0')
        return PP_NUM_MALFORMED;
    if (errno == ERANGE || (double)v < k->min || (double)v > k->max)
        return PP_NUM_RANGE;
    *out = v;
    return PP_NUM_OK;
}

static PpNumStatus pp_parse_double(const PpScenarioKey *k, const char *text, double *out) {
    if (text[0] == '\0')
        return PP_NUM_MALFORMED;
    char *end = NULL;
    errno = 0;
    double v = g_ascii_strtod(text, &end);
    if (*end != '\0' || isnan(v))
        return PP_NUM_MALFORMED;
    gboolean below = (k->flags & PP_KEY_MIN_EXCL) ? v <= k->min : v < k->min;
    gboolean above = (k->flags & PP_KEY_MAX_EXCL) ? v >= k->max : v > k->max;
    if (errno == ERANGE || isinf(v) || below || above)
        return PP_NUM_RANGE;
    *out = v;
    return PP_NUM_OK;
}

static gboolean pp_scenario_value_error(const PpScenarioKey *k, const char *origin,
                                        const char *value, const char *problem, GError **error) {
    g_autofree char *expected = pp_scenario_key_expected(k);
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                "%s: [%s] %s = '%s': %s; expected %s", origin, k->section, k->key, value, problem,
                expected);
    return FALSE;
}

static gboolean pp_scenario_num_error(const PpScenarioKey *k, const char *origin, const char *value,
                                      PpNumStatus status, GError **error) {
    const char *problem = status == PP_NUM_MALFORMED ? "not a number" : "out of range";
    if (status == PP_NUM_MALFORMED &&
        (k->type == PP_KEY_INT32 || k->type == PP_KEY_INT32_LIST || k->type == PP_KEY_UINT64))
        problem = "not a whole number";
    else if (status == PP_NUM_RANGE && value[0] == '-')
        problem = "negative or out of range";
    return pp_scenario_value_error(k, origin, value, problem, error);
}

static void pp_scenario_apply_model_preset(PpScenario *sc, const PpModelPreset *p) {
    sc->model.layers = p->layers;
    sc->model.hidden = p->hidden;
    sc->model.heads = p->heads;
    sc->model.seq_len = p->seq_len;
    sc->model.vocab = p->vocab;
}

static void pp_scenario_apply_hardware_preset(PpScenario *sc, const PpHardwarePreset *p) {
    sc->hardware.peak_flops = p->peak_flops;
    sc->hardware.memory_bytes = p->memory_bytes;
    sc->hardware.mem_bw_bytes_per_s = p->mem_bw_bytes_per_s;
    sc->hardware.link_bw_bytes_per_s = p->link_bw_bytes_per_s;
    sc->hardware.link_latency_ns = p->link_latency_ns;
    sc->hardware.nvlink = p->nvlink;
}

static gboolean pp_scenario_parse_list(const PpScenarioKey *k, const char *origin,
                                       const char *value, char ***items, GError **error) {
    g_auto(GStrv) parts = g_strsplit(value, ",", -1);
    for (char **p = parts; *p; p++) {
        g_strstrip(*p);
        if ((*p)[0] == '\0')
            return pp_scenario_value_error(k, origin, value, "empty list element", error);
    }
    *items = g_steal_pointer(&parts);
    return TRUE;
}

/* Parses @value (stripped) for key @k and stores it in @sc. @origin names where the value
 * came from (file or override) in messages; @base_dir (absolute) resolves PATH keys. */
static gboolean pp_scenario_parse_value(PpScenario *sc, const PpScenarioKey *k, const char *value,
                                        const char *origin, const char *base_dir, GError **error) {
    int64_t     iv = 0;
    double      dv = 0.0;
    PpNumStatus status;

    switch (k->type) {
    case PP_KEY_INT32:
        if ((status = pp_parse_int(k, value, &iv)) != PP_NUM_OK)
            return pp_scenario_num_error(k, origin, value, status, error);
        *PP_FIELD(sc, k, int32_t) = (int32_t)iv;
        return TRUE;
    case PP_KEY_UINT64: {
        if (!g_ascii_isdigit(value[0]))
            return pp_scenario_num_error(k, origin, value,
                                         value[0] == '-' ? PP_NUM_RANGE : PP_NUM_MALFORMED, error);
        char *end = NULL;
        errno = 0;
        guint64 v = g_ascii_strtoull(value, &end, 10);
        if (*end != '\0')
            return pp_scenario_num_error(k, origin, value, PP_NUM_MALFORMED, error);
        if (errno == ERANGE)
            return pp_scenario_num_error(k, origin, value, PP_NUM_RANGE, error);
        *PP_FIELD(sc, k, uint64_t) = v;
        return TRUE;
    }
    case PP_KEY_DOUBLE:
        if ((status = pp_parse_double(k, value, &dv)) != PP_NUM_OK)
            return pp_scenario_num_error(k, origin, value, status, error);
        *PP_FIELD(sc, k, double) = dv * k->scale;
        return TRUE;
    case PP_KEY_SCALED_INT64:
        if ((status = pp_parse_double(k, value, &dv)) != PP_NUM_OK)
            return pp_scenario_num_error(k, origin, value, status, error);
        *PP_FIELD(sc, k, int64_t) = (int64_t)llround(dv * k->scale);
        return TRUE;
    case PP_KEY_BOOL:
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
            *PP_FIELD(sc, k, gboolean) = TRUE;
        else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
            *PP_FIELD(sc, k, gboolean) = FALSE;
        else
            return pp_scenario_value_error(k, origin, value, "not a boolean", error);
        return TRUE;
    case PP_KEY_ENUM:
        if (!g_strv_contains(k->choices, value))
            return pp_scenario_value_error(k, origin, value, "unknown value", error);
        break;
    case PP_KEY_SCHEDULE:
        if (pp_sched_kind_lookup(value) == NULL)
            return pp_scenario_value_error(k, origin, value, "unknown schedule", error);
        break;
    case PP_KEY_MODEL_PRESET:
    case PP_KEY_HARDWARE_PRESET: {
        const PpModelPreset    *model = NULL;
        const PpHardwarePreset *hw = NULL;
        if (k->type == PP_KEY_MODEL_PRESET)
            model = pp_preset_model_lookup(value);
        else
            hw = pp_preset_hardware_lookup(value);
        if (model == NULL && hw == NULL) {
            g_autofree char *expected = pp_scenario_key_expected(k);
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_UNKNOWN_PRESET,
                        "%s: [%s] %s = '%s': unknown preset; valid presets: %s", origin, k->section,
                        k->key, value, expected);
            return FALSE;
        }
        if (model)
            pp_scenario_apply_model_preset(sc, model);
        else
            pp_scenario_apply_hardware_preset(sc, hw);
        break;
    }
    case PP_KEY_STRING:
    case PP_KEY_PATH:
        if (value[0] == '\0')
            return pp_scenario_value_error(k, origin, value, "empty", error);
        break;
    case PP_KEY_INT32_LIST: {
        g_auto(GStrv) items = NULL;
        if (!pp_scenario_parse_list(k, origin, value, &items, error))
            return FALSE;
        int32_t             n = (int32_t)g_strv_length(items);
        g_autofree int32_t *list = n ? g_new(int32_t, n) : NULL;
        for (int32_t i = 0; i < n; i++) {
            if ((status = pp_parse_int(k, items[i], &iv)) != PP_NUM_OK)
                return pp_scenario_num_error(k, origin, value, status, error);
            list[i] = (int32_t)iv;
        }
        g_free(*PP_FIELD(sc, k, int32_t *));
        *PP_FIELD(sc, k, int32_t *) = g_steal_pointer(&list);
        *(int32_t *)((char *)sc + k->count_offset) = n;
        return TRUE;
    }
    case PP_KEY_STRING_LIST: {
        g_auto(GStrv) items = NULL;
        if (!pp_scenario_parse_list(k, origin, value, &items, error))
            return FALSE;
        g_strfreev(*PP_FIELD(sc, k, char **));
        *PP_FIELD(sc, k, char **) = items[0] ? g_steal_pointer(&items) : NULL;
        return TRUE;
    }
    }

    /* Text keys that passed their check above. */
    PP_ASSERT(pp_key_is_text(k->type));
    char **field = PP_FIELD(sc, k, char *);
    g_free(*field);
    *field = k->type == PP_KEY_PATH ? g_canonicalize_filename(value, base_dir) : g_strdup(value);
    return TRUE;
}

/* --- formatting (pp_scenario_to_data) --- */

/* Returns: (transfer full) (nullable): the stored value of @k in file units; NULL when the
 * field is unset (optional texts and lists). */
static char *pp_scenario_format_value(const PpScenario *sc, const PpScenarioKey *k) {
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    switch (k->type) {
    case PP_KEY_INT32:
        return g_strdup_printf("%" G_GINT32_FORMAT, *PP_CFIELD(sc, k, int32_t));
    case PP_KEY_UINT64:
        return g_strdup_printf("%" G_GUINT64_FORMAT, *PP_CFIELD(sc, k, uint64_t));
    case PP_KEY_DOUBLE:
        return g_strdup(pp_format_double(buf, sizeof buf, *PP_CFIELD(sc, k, double) / k->scale));
    case PP_KEY_SCALED_INT64:
        return g_strdup(
            pp_format_double(buf, sizeof buf, (double)*PP_CFIELD(sc, k, int64_t) / k->scale));
    case PP_KEY_BOOL:
        return g_strdup(*PP_CFIELD(sc, k, gboolean) ? "true" : "false");
    case PP_KEY_INT32_LIST: {
        const int32_t *list = *PP_CFIELD(sc, k, int32_t *);
        int32_t        n = *(const int32_t *)((const char *)sc + k->count_offset);
        if (list == NULL)
            return NULL;
        GString *text = g_string_new(NULL);
        for (int32_t i = 0; i < n; i++)
            g_string_append_printf(text, "%s%" G_GINT32_FORMAT, i ? "," : "", list[i]);
        return g_string_free(text, FALSE);
    }
    case PP_KEY_STRING_LIST: {
        const char **list = *PP_CFIELD(sc, k, char **);
        return list ? g_strjoinv(",", (char **)list) : NULL;
    }
    case PP_KEY_STRING:
    case PP_KEY_PATH:
    case PP_KEY_ENUM:
    case PP_KEY_SCHEDULE:
    case PP_KEY_MODEL_PRESET:
    case PP_KEY_HARDWARE_PRESET:
        return g_strdup(*PP_CFIELD(sc, k, char *));
    }
    PP_UNREACHABLE();
}

char *pp_scenario_to_data(const PpScenario *scenario) {
    g_autoptr(GKeyFile) kf = g_key_file_new();
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if ((strcmp(k->section, "hardware") == 0 && !scenario->hardware.set) ||
            (strcmp(k->section, "costs") == 0 && !scenario->costs.set))
            continue;
        g_autofree char *value = pp_scenario_format_value(scenario, k);
        if (value == NULL)
            continue;
        g_key_file_set_string(kf, k->section, k->key, value);
        g_autofree char *comment = g_strdup_printf(" %s", k->description);
        g_key_file_set_comment(kf, k->section, k->key, comment, NULL);
    }
    g_autofree char *head = g_strdup_printf(
        " effective scenario of %s: every key, presets resolved, derived values filled in",
        scenario->path);
    g_key_file_set_comment(kf, NULL, NULL, head, NULL);
    return g_key_file_to_data(kf, NULL, NULL);
}

/* --- loading --- */

void pp_scenario_free(PpScenario *scenario) {
    if (scenario == NULL)
        return;
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (pp_key_is_text(k->type))
            g_free(*PP_FIELD(scenario, k, char *));
        else if (k->type == PP_KEY_INT32_LIST)
            g_free(*PP_FIELD(scenario, k, int32_t *));
        else if (k->type == PP_KEY_STRING_LIST)
            g_strfreev(*PP_FIELD(scenario, k, char **));
    }
    g_free(scenario->path);
    g_free(scenario);
}

/* A scenario holding every table default; DERIVED int32 fields are -1. */
static PpScenario *pp_scenario_new_defaults(const char *name) {
    g_autoptr(PpScenario) sc = g_new0(PpScenario, 1);
    sc->path = g_strdup(name);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (k->flags & PP_KEY_DERIVED) {
            PP_ASSERT(k->type == PP_KEY_INT32);
            *PP_FIELD(sc, k, int32_t) = -1;
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
                g_autofree char *valid = pp_scenario_key_names(*g);
                g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_UNKNOWN_KEY,
                            "%s: unknown key '%s' in [%s]; valid keys: %s", name, *key, *g, valid);
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
            g_autofree char *valid = pp_scenario_key_names(section);
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_UNKNOWN_KEY,
                        "override '%s': unknown key '%s' in [%s]; valid keys: %s", *o, key, section,
                        valid);
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
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
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

/* --- derived values and consistency --- */

/* The registry entry of the scenario's schedule (the key parser accepted only its names). */
static const PpSchedKindInfo *pp_scenario_kind(const PpScenario *sc) {
    const PpSchedKindInfo *info = pp_sched_kind_lookup(sc->pipeline.schedule);
    PP_ASSERT(info != NULL);
    return info;
}

static gboolean G_GNUC_PRINTF(3, 4)
    pp_scenario_inconsistent(const PpScenario *sc, GError **error, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT, "%s: %s", sc->path, msg);
    return FALSE;
}

/* global_batch = microbatch_size * k, k per the schedule's batch rule; fills whichever of
 * the two is absent. */
static gboolean pp_scenario_derive_batch(PpScenario *sc, GError **error) {
    PpPipelineParams      *p = &sc->pipeline;
    int32_t               *gb = &sc->training.global_batch;
    const PpSchedKindInfo *info = pp_scenario_kind(sc);
    const char            *count_key = "microbatches";
    int32_t count = pp_sched_kind_mb_per_step(info, p->microbatches, p->accumulation);
    switch (info->batch) {
    case PP_BATCH_MICROBATCHES:
        break;
    case PP_BATCH_ACCUMULATION:
        count_key = "accumulation";
        break;
    case PP_BATCH_SINGLE:
        count_key = NULL;
        break;
    }
    g_autofree char *factor =
        count_key ? g_strdup_printf(" * [pipeline] %s = %d", count_key, count) : g_strdup("");

    if (p->microbatch_size < 0 && *gb < 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_MISSING_KEY,
                    "%s: missing key [training] global_batch or [pipeline] microbatch_size; "
                    "give one (schedule %s: global_batch = microbatch_size%s%s)",
                    sc->path, p->schedule, count_key ? " * " : "", count_key ? count_key : "");
        return FALSE;
    }
    if (p->microbatch_size < 0) {
        if (*gb % count != 0)
            return pp_scenario_inconsistent(
                sc, error,
                "[training] global_batch = %d is not a multiple of [pipeline] %s = %d "
                "(schedule %s); change one, or give [pipeline] microbatch_size",
                *gb, count_key, count, p->schedule);
        p->microbatch_size = *gb / count;
        return TRUE;
    }
    if ((int64_t)p->microbatch_size * count > G_MAXINT32)
        return pp_scenario_inconsistent(sc, error, "[pipeline] microbatch_size = %d%s is too large",
                                        p->microbatch_size, factor);
    int32_t product = p->microbatch_size * count;
    if (*gb < 0) {
        *gb = product;
        return TRUE;
    }
    if (*gb != product)
        return pp_scenario_inconsistent(
            sc, error,
            "[training] global_batch = %d but [pipeline] microbatch_size = %d%s gives %d "
            "sequences per step (schedule %s); set global_batch = %d or omit one of them",
            *gb, p->microbatch_size, factor, product, p->schedule, product);
    return TRUE;
}

static gboolean pp_scenario_check(PpScenario *sc, GError **error) {
    const PpModelParams   *m = &sc->model;
    PpPipelineParams      *p = &sc->pipeline;
    const PpSchedKindInfo *kind = pp_scenario_kind(sc);

    if (m->hidden % m->heads != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[model] hidden = %d is not a multiple of [model] heads = %d; "
            "choose heads that divide hidden",
            m->hidden, m->heads);
    if (p->stages > m->layers)
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] stages = %d exceeds [model] layers = %d; "
                                        "use at most %d stages",
                                        p->stages, m->layers, m->layers);
    if (p->chunks < kind->min_chunks || p->chunks > kind->max_chunks) {
        g_autofree char *multi = pp_sched_kind_multi_chunk_names();
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] chunks = %d but schedule %s runs %d..%d "
                                        "chunks per device; set chunks in that range (more "
                                        "than one chunk needs [pipeline] schedule = %s)",
                                        p->chunks, p->schedule, kind->min_chunks, kind->max_chunks,
                                        multi);
    }
    if ((int64_t)p->stages * p->chunks > m->layers)
        return pp_scenario_inconsistent(
            sc, error,
            "[pipeline] stages = %d times [pipeline] chunks = %d exceeds "
            "[model] layers = %d; every chunk needs a layer, lower stages or chunks",
            p->stages, p->chunks, m->layers);
    if (kind->mb_multiple_of_stages && p->microbatches % p->stages != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[pipeline] microbatches = %d is not a multiple of [pipeline] "
            "stages = %d, which %s needs; use a multiple of stages",
            p->microbatches, p->stages, p->schedule);
    if (kind->fixed_accumulation > 0 && p->accumulation != kind->fixed_accumulation)
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] accumulation = %d but schedule %s takes "
                                        "accumulation = %d (%s); set accumulation = %d or use "
                                        "schedule paci",
                                        p->accumulation, p->schedule, kind->fixed_accumulation,
                                        kind->summary, kind->fixed_accumulation);
    if (strcmp(p->mode, "dynamic") == 0 && !kind->has_policy) {
        g_autofree char *policy_kinds = pp_sched_kind_policy_names();
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] mode = dynamic runs the PACI policy but "
                                        "[pipeline] schedule = %s has none; use a schedule with "
                                        "a run-time policy (%s) or mode static",
                                        p->schedule, policy_kinds);
    }
    if (!pp_scenario_derive_batch(sc, error))
        return FALSE;

    if (kind->needs_order_file) {
        if (p->order_file == NULL)
            return pp_scenario_inconsistent(
                sc, error,
                "[pipeline] schedule = %s needs [pipeline] order_file; add the "
                "path of a CSV of per-stage op orders (stage,index,op,mb,chunk)",
                p->schedule);
        if (!g_file_test(p->order_file, G_FILE_TEST_IS_REGULAR)) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_NOT_FOUND,
                        "%s: [pipeline] order_file = '%s' does not exist or is not a file "
                        "(relative paths start at the scenario file's folder)",
                        sc->path, p->order_file);
            return FALSE;
        }
    }

    if (sc->hardware.devices < 0)
        sc->hardware.devices = p->stages;
    if (sc->hardware.devices < p->stages)
        return pp_scenario_inconsistent(
            sc, error,
            "[hardware] devices = %d is fewer than [pipeline] stages = %d; "
            "each stage needs its own device; raise devices or omit it",
            sc->hardware.devices, p->stages);

    if (sc->run.layers_per_stage != NULL) {
        int64_t sum = 0;
        int32_t want = p->stages * p->chunks;
        for (int32_t i = 0; i < sc->run.n_layers_per_stage; i++)
            sum += sc->run.layers_per_stage[i];
        if (sc->run.n_layers_per_stage != want)
            return pp_scenario_inconsistent(
                sc, error,
                "[run] layers_per_stage has %d entries but [pipeline] stages = %d "
                "times chunks = %d needs %d; give one entry per virtual stage",
                sc->run.n_layers_per_stage, p->stages, p->chunks, want);
        if (sum != m->layers)
            return pp_scenario_inconsistent(sc, error,
                                            "[run] layers_per_stage sums to %" G_GINT64_FORMAT
                                            " but [model] "
                                            "layers = %d; make the entries add up to %d",
                                            sum, m->layers, m->layers);
    }

    PpOptimizerParams *o = &sc->optimizer;
    if (o->warmup_steps < 0)
        o->warmup_steps = sc->training.steps / 10;
    if (o->warmup_steps >= sc->training.steps)
        return pp_scenario_inconsistent(sc, error,
                                        "[optimizer] warmup_steps = %d is not below [training] "
                                        "steps = %d; the cosine decay needs at least one step "
                                        "after the warmup, use at most %d",
                                        o->warmup_steps, sc->training.steps,
                                        sc->training.steps - 1);
    if (o->min_lr > o->lr)
        return pp_scenario_inconsistent(sc, error,
                                        "[optimizer] min_lr = %g exceeds [optimizer] lr = %g; "
                                        "the cosine decay ends at min_lr <= lr",
                                        o->min_lr, o->lr);
    return TRUE;
}

/* --- public API --- */

static PpScenario *pp_scenario_from_key_file(GKeyFile *kf, const char *name, const char *base_dir,
                                             const char *const *overrides, GError **error) {
    if (!pp_scenario_check_names(kf, name, error))
        return NULL;
    g_autoptr(GHashTable) origins = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    if (!pp_scenario_apply_overrides(kf, overrides, origins, error))
        return NULL;
    g_autoptr(PpScenario) sc = pp_scenario_new_defaults(name);
    if (!pp_scenario_parse_keys(sc, kf, origins, base_dir, error))
        return NULL;
    if (!pp_scenario_check(sc, error))
        return NULL;
    return g_steal_pointer(&sc);
}

PpScenario *pp_scenario_load(const char *path, const char *const *overrides, GError **error) {
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) err = NULL;
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &err)) {
        gboolean io = err->domain == G_FILE_ERROR;
        g_set_error(error, PP_SCENARIO_ERROR,
                    io ? PP_SCENARIO_ERROR_NOT_FOUND : PP_SCENARIO_ERROR_PARSE, "%s: %s%s", path,
                    io ? "cannot read scenario: " : "", err->message);
        return NULL;
    }
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base_dir = g_canonicalize_filename(dir, NULL);
    return pp_scenario_from_key_file(kf, path, base_dir, overrides, error);
}

PpScenario *pp_scenario_load_data(const char *data, const char *name, const char *const *overrides,
                                  GError **error) {
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) err = NULL;
    if (!g_key_file_load_from_data(kf, data, (gsize)-1, G_KEY_FILE_NONE, &err)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_PARSE, "%s: %s", name,
                    err->message);
        return NULL;
    }
    return pp_scenario_from_key_file(kf, name, NULL, overrides, error);
}

void pp_scenario_schedule_params(const PpScenario *scenario, PpScheduleParams *params) {
    const PpPipelineParams *p = &scenario->pipeline;
    const PpCostParams     *c = &scenario->costs;
    memset(params, 0, sizeof *params);
    params->kind = p->schedule;
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

int32_t pp_scenario_mb_per_step(const PpScenario *scenario) {
    return pp_sched_kind_mb_per_step(pp_scenario_kind(scenario), scenario->pipeline.microbatches,
                                     scenario->pipeline.accumulation);
}

PpPartitionMode pp_scenario_partition_mode(const PpScenario *scenario) {
    PP_ASSERT(scenario->pipeline.partition != NULL);
    return strcmp(scenario->pipeline.partition, "even") == 0 ? PP_PARTITION_EVEN
                                                             : PP_PARTITION_BALANCED;
}
