/* SPDX-License-Identifier: MIT
 * pp-scenario-private.h: what the scenario files share inside libppcore. The key table and
 * its value parsing and formatting live in pp-scenario-keys.c, the derived values and the
 * cross-key checks in pp-scenario-check.c, loading and the public API in pp-scenario.c.
 */
#pragma once

#include <stddef.h>

#include "pp-scenario.h"
#include "pp-sched-gen.h"

G_BEGIN_DECLS

/* The valid ranges, from what the arithmetic holds (docs/simulator-keys.md lists them per
 * key). Each key is bounded alone here; products of keys (FLOPs, bytes, the run's total time) are
 * checked where they are formed (sim-cost.c, sim-engine.c, pp-partition.c) against 2^62. */
#define PP_I32_MAX 2147483647.0
/* Counts of steps and micro-batches: a schedule holds at most 2^24 (micro-batch, virtual
 * stage) units (PP_SCHED_MAX_UNITS), so no larger count can run. */
#define PP_COUNT_MAX 16777216.0
/* Stages: every generator's limit; chunks: interleaved's and custom orders'. */
#define PP_STAGES_MAX 4096.0
#define PP_CHUNKS_MAX 64.0
/* Model dimensions and sequences per micro-batch: 2^24, so that the product of any two is
 * below 2^48 and exact in a double; the cost model's larger products are checked. */
#define PP_DIM_MAX 16777216.0
/* FFN width: up to 4 x the largest hidden size, so that its default 4 * hidden is in range;
 * its products with another dimension stay below 2^51, exact in a double. */
#define PP_FFN_MAX 67108864.0
/* Tokens a micro-batch can hold (microbatch_size x seq_len <= 2^48). */
#define PP_TOKENS_MAX 281474976710656.0
/* Rates (TFLOP/s, GB/s): finite once scaled; the times they give are checked. */
#define PP_RATE_MAX 1e9
/* Scaled int64 keys stay below 2^62 after scaling: 1e12 us is 1e15 ns, 1e9 GiB < 2^60. */
#define PP_US_MAX  1e12
#define PP_GIB_MAX 1e9
/* The executor's kernels compute in fp32 (largest finite 3.4e38, smallest normal 1.2e-38). */
#define PP_F32_MAX      1e38
#define PP_F32_MIN_NORM 1e-37
/* Newton-Schulz iterations per muon update (5 is usual) and kernel threads per worker. */
#define PP_NS_STEPS_MAX 100.0
#define PP_THREADS_MAX  1024.0
/* Layout limits: 2^20 replicas or GPUs per node, 1024-way tensor parallelism; their product
 * with the stages is checked against int32_t when the scenario loads. */
#define PP_REPLICAS_MAX 1048576.0
#define PP_TENSOR_MAX   1024.0
/* Device ids of one process: CUDA numbers the visible devices from 0; the backend checks each
 * id against the devices it sees. */
#define PP_DEVICE_ID_MAX 1023.0
/* A multi-process run's wait for a peer: positive, at most a week. */
#define PP_TIMEOUT_S_MAX 604800.0

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
    PP_KEY_HF_CONFIG,       /* a Hugging Face config.json (pp-hf-config.h), relative to the
                               scenario file's folder; fills [model] after its preset */
    PP_KEY_INT32_LIST,      /* comma-separated whole numbers in [min, max] */
    PP_KEY_STRING_LIST,     /* comma-separated non-empty texts */
    PP_KEY_SCALED_LIST,     /* comma-separated numbers in the range, stored as int64_t
                               round(value * scale) each */
} PpKeyType;

typedef enum {
    PP_KEY_REQUIRED = 1 << 0, /* must be given unless the section's preset fills it */
    PP_KEY_DERIVED = 1 << 1,  /* computed from other keys when absent (-1 until then; INT32,
                                 DOUBLE or SCALED_INT64 keys) */
    PP_KEY_OPTIONAL = 1 << 2, /* absent means NULL */
    PP_KEY_MIN_EXCL = 1 << 3, /* the range excludes min */
    PP_KEY_MAX_EXCL = 1 << 4, /* the range excludes max */
} PpKeyFlags;

typedef struct {
    const char        *section;
    const char        *key;
    PpKeyType          type;
    size_t             offset;       /* of the field in PpScenario */
    size_t             count_offset; /* INT32_LIST, SCALED_LIST: of its int32_t length */
    const char        *def;          /* default in file units; NULL: see flags */
    double             min, max;     /* valid range in file units (numbers, list elements) */
    double             scale;        /* stored unit per file unit (DOUBLE, SCALED_*) */
    const char *const *choices;      /* ENUM: NULL-terminated */
    unsigned           flags;
    const char        *description; /* one line; written as a comment by to_data */
} PpScenarioKey;

typedef struct {
    const char *name;
    gboolean    required; /* its REQUIRED keys are checked even when the section is absent */
} PpScenarioSection;

#define PP_FIELD(sc, k, type)  ((type *)((char *)(sc) + (k)->offset))
#define PP_CFIELD(sc, k, type) ((const type *)((const char *)(sc) + (k)->offset))

/* The key table, in the order described in pp-scenario-keys.c; pp_scenario_n_keys() entries. */
extern const PpScenarioKey pp_scenario_keys[];

gboolean pp_key_is_text(PpKeyType type);
/* NULL when @name is not a section of the table. */
const PpScenarioSection *pp_scenario_section_find(const char *name);
/* NULL when @section.@key is not in the table. */
const PpScenarioKey *pp_scenario_key_find(const char *section, const char *key);
/* Returns: (transfer full): the keys of @section, "preset, layers, ...". */
char *pp_scenario_key_names(const char *section);
/* Returns: (transfer full): what to say of the unknown @section.@key: why it was retired and
 * what replaced it, or "valid keys: ..." of @section. */
char *pp_scenario_unknown_key_hint(const char *section, const char *key);
/* Returns: (transfer full): every section, "[model], [hardware], ...". */
char *pp_scenario_section_names(void);
/* The preset name (or Hugging Face config) that filled @section, or NULL (also for sections
 * without a preset key). */
const char *pp_scenario_section_preset(const PpScenario *sc, const char *section);
/* Returns: (transfer full): the valid values of @k, for messages. */
char *pp_scenario_key_expected(const PpScenarioKey *k);
/* Parses @value (stripped) for key @k and stores it in @sc. @origin names where the value
 * came from (file or override) in messages; @base_dir (absolute) resolves PATH keys. */
gboolean pp_scenario_parse_value(PpScenario *sc, const PpScenarioKey *k, const char *value,
                                 const char *origin, const char *base_dir, GError **error);

/* Sets @error to PP_SCENARIO_ERROR_INCONSISTENT, "PATH: message"; returns FALSE
 * (pp-scenario-error.c). */
gboolean G_GNUC_PRINTF(3, 4)
    pp_scenario_inconsistent(const PpScenario *sc, GError **error, const char *fmt, ...);
/* The attention and mixture-of-experts keys against each other and the layout
 * (pp-scenario-blocks.c); derives expert_ffn_hidden and parallel.expert_tensor. */
gboolean pp_scenario_check_blocks(PpScenario *sc, GError **error);
/* Resolves pipeline.kind and mb_per_step, derives the absent values and checks the keys against
 * each other (PP_SCENARIO_ERROR_*). */
gboolean pp_scenario_check(PpScenario *sc, GError **error);

G_END_DECLS
