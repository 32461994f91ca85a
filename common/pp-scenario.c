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
#include "pp-sched-gen.h"

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

static const PpScenarioSection pp_scenario_sections[] = {
    {"model", TRUE},     {"hardware", FALSE},  {"pipeline", TRUE},
    {"parallel", FALSE}, {"training", FALSE},  {"costs", FALSE},
    {"data", FALSE},     {"optimizer", FALSE}, {"run", FALSE},
};

static const char *const pp_mode_choices[] = {"static", "dynamic", NULL};
static const char *const pp_partition_choices[] = {"balanced", "even", NULL};
static const char *const pp_optimizer_choices[] = {"adamw", "muon", NULL};
/* PpRecompute order */
static const char *const pp_recompute_choices[] = {"none", "selective", "full", NULL};
static const char *const pp_precision_choices[] = {"fp32", "bf16", NULL};
/* [model] ffn: the first is GPT-2's two-matrix MLP, the second the gated three-matrix one */
static const char *const pp_ffn_choices[] = {"gelu", "swiglu", NULL};
static const char *const pp_model_precision_choices[] = {"bf16", "fp8", NULL};
static const char *const pp_attention_flops_choices[] = {"full", "causal", NULL};

#define PP_OFF(field) offsetof(PpScenario, field)

/* The valid ranges, from what the arithmetic holds (sim/README.md lists them per key). Each
 * key is bounded alone here; products of keys (FLOPs, bytes, the run's total time) are
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
/* A per-stage [costs] time list: one value for every stage, or one per stage. */
#define PP_STAGE_US(k, field, count, d, fl, desc)                                                  \
    {                                                                                              \
        .section = "costs", .key = k, .type = PP_KEY_SCALED_LIST, .offset = PP_OFF(field),         \
        .count_offset = PP_OFF(count), .def = d, .min = 0.0, .max = PP_US_MAX, .scale = 1e3,       \
        .flags = fl, .description = desc                                                           \
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
    PP_INT("model", "layers", model.layers, NULL, 1, PP_PARTITION_MAX_LAYERS, PP_KEY_REQUIRED,
           "transformer blocks L"),
    PP_INT("model", "hidden", model.hidden, NULL, 1, PP_DIM_MAX, PP_KEY_REQUIRED,
           "hidden size C (a multiple of heads)"),
    PP_INT("model", "heads", model.heads, NULL, 1, PP_DIM_MAX, PP_KEY_REQUIRED,
           "attention heads NH"),
    PP_INT("model", "seq_len", model.seq_len, NULL, 1, PP_DIM_MAX, PP_KEY_REQUIRED,
           "sequence length T in tokens"),
    PP_INT("model", "vocab", model.vocab, NULL, 1, PP_DIM_MAX, PP_KEY_REQUIRED,
           "vocabulary size V"),
    PP_TEXT("model", "flash_attention", PP_KEY_BOOL, model.flash_attention, "false", 0,
            "true: fused attention stores no s x s scores; the simulator's activations per "
            "layer drop from sbh(34 + 5as/h) to 34sbh bytes"),
    PP_ENUM("model", "recompute", model.recompute, "none", pp_recompute_choices,
            "activation recomputation (simulator): none, selective (attention scores, softmax "
            "and dropout are recomputed in the backward) or full (only each layer's input is "
            "kept; the backward reruns the forward)"),
    PP_INT("model", "kv_heads", model.kv_heads, NULL, 1, PP_DIM_MAX, PP_KEY_DERIVED,
           "key/value heads, dividing heads (grouped-query attention); absent: heads"),
    PP_INT("model", "head_dim", model.head_dim, NULL, 1, PP_DIM_MAX, PP_KEY_DERIVED,
           "width of one attention head; absent: hidden / heads"),
    PP_ENUM("model", "ffn", model.ffn, "gelu", pp_ffn_choices,
            "feed-forward block: gelu (two hidden x ffn_hidden matrices) or swiglu (three: "
            "gate, up and down)"),
    PP_INT("model", "ffn_hidden", model.ffn_hidden, NULL, 1, PP_FFN_MAX, PP_KEY_DERIVED,
           "feed-forward inner width; absent: 4 * hidden"),
    PP_ENUM("model", "precision", model.precision, "bf16", pp_model_precision_choices,
            "the layers' matrix products (simulator): bf16 at hardware.peak_tflops, or fp8 at "
            "hardware.peak_fp8_tflops (attention scores and the LM head stay bf16)"),
    PP_ENUM("model", "attention_flops", model.attention_flops, "full", pp_attention_flops_choices,
            "attention score FLOPs (simulator): full counts and computes all s x s scores "
            "(Megatron's convention), causal half of them (a causal kernel skips the masked "
            "half)"),

    PP_TEXT("hardware", "preset", PP_KEY_HARDWARE_PRESET, hardware.preset, NULL, PP_KEY_OPTIONAL,
            "named device that fills this section; the keys below override it"),
    PP_NUM("hardware", "peak_tflops", hardware.peak_flops, NULL, 0.0, PP_RATE_MAX, 1e12,
           PP_KEY_REQUIRED | PP_KEY_MIN_EXCL, "dense bf16 TFLOP/s of one device"),
    PP_NUM("hardware", "peak_fp8_tflops", hardware.peak_fp8_flops, "0", 0.0, PP_RATE_MAX, 1e12, 0,
           "dense fp8 TFLOP/s of one device (model.precision = fp8); 0: none"),
    PP_SCALED("hardware", "memory_gib", hardware.memory_bytes, NULL, PP_GIB_MAX, (double)(1 << 30),
              PP_KEY_REQUIRED | PP_KEY_MIN_EXCL, "device memory in GiB (2^30 bytes)"),
    PP_NUM("hardware", "mem_bw_gbps", hardware.mem_bw_bytes_per_s, NULL, 0.0, PP_RATE_MAX, 1e9,
           PP_KEY_REQUIRED | PP_KEY_MIN_EXCL, "device memory bandwidth in GB/s (1e9 bytes/s)"),
    PP_NUM("hardware", "link_gbps", hardware.link_bw_bytes_per_s, NULL, 0.0, PP_RATE_MAX, 1e9,
           PP_KEY_REQUIRED | PP_KEY_MIN_EXCL,
           "stage-to-stage link bandwidth in GB/s, one direction"),
    PP_SCALED("hardware", "link_latency_us", hardware.link_latency_ns, NULL, PP_US_MAX, 1e3,
              PP_KEY_REQUIRED, "latency of one stage-to-stage message in us"),
    PP_TEXT("hardware", "nvlink", PP_KEY_BOOL, hardware.nvlink, "false", 0,
            "true: the link is NVLink; false: PCIe"),
    PP_INT("hardware", "devices", hardware.devices, NULL, 1, PP_I32_MAX, PP_KEY_DERIVED,
           "devices available (>= parallel.data * parallel.tensor * pipeline.stages); absent: "
           "that product"),
    PP_INT("hardware", "gpus_per_node", hardware.gpus_per_node, NULL, 1, PP_REPLICAS_MAX,
           PP_KEY_DERIVED,
           "GPUs per node, joined by link_gbps; absent (no preset): one node holds every GPU"),
    PP_NUM("hardware", "internode_gbps", hardware.internode_bw_bytes_per_s, NULL, 0.0, PP_RATE_MAX,
           1e9, PP_KEY_DERIVED | PP_KEY_MIN_EXCL,
           "one GPU's link to other nodes in GB/s, one direction; absent (no preset): "
           "link_gbps"),
    PP_SCALED("hardware", "internode_latency_us", hardware.internode_latency_ns, NULL, PP_US_MAX,
              1e3, PP_KEY_DERIVED,
              "latency of one message between nodes in us; absent (no preset): link_latency_us"),
    PP_NUM("hardware", "kernel_eff_max", hardware.kernel_eff_max, "0.6", 0.0, 1.0, 1.0,
           PP_KEY_MIN_EXCL,
           "analytic cost model: share of peak_tflops that large micro-batches reach; "
           "eff(t) = kernel_eff_max * t / (t + kernel_eff_half_tokens) for t tokens"),
    PP_NUM("hardware", "kernel_eff_half_tokens", hardware.kernel_eff_half_tokens, "2048", 0.0,
           PP_TOKENS_MAX, 1.0, 0,
           "analytic cost model: micro-batch tokens at which eff reaches half of kernel_eff_max"),
    PP_NUM("hardware", "kernel_eff_half_hidden", hardware.kernel_eff_half_hidden, "0", 0.0,
           PP_DIM_MAX, 1.0, 0,
           "analytic cost model: eff is also scaled by h / (h + kernel_eff_half_hidden) for the "
           "model's hidden size h; 0: no hidden-size term"),

    PP_TEXT("pipeline", "schedule", PP_KEY_SCHEDULE, pipeline.schedule, NULL, PP_KEY_REQUIRED,
            "schedule registry name"),
    PP_INT("pipeline", "stages", pipeline.stages, NULL, 1, PP_STAGES_MAX, PP_KEY_REQUIRED,
           "pipeline stages N, one device each"),
    PP_INT("pipeline", "chunks", pipeline.chunks, "1", 1, PP_CHUNKS_MAX, 0,
           "model chunks per device v (interleaved only)"),
    PP_INT("pipeline", "microbatches", pipeline.microbatches, "1", 1, PP_COUNT_MAX, 0,
           "micro-batches m per optimizer step (flush schedules, 2bw, custom)"),
    PP_INT("pipeline", "accumulation", pipeline.accumulation, "1", 1, PP_COUNT_MAX, 0,
           "backward passes a per local update (paci; async-1f1b needs 1)"),
    PP_INT("pipeline", "microbatch_size", pipeline.microbatch_size, NULL, 1, PP_DIM_MAX,
           PP_KEY_DERIVED, "sequences per micro-batch; absent: derived from global_batch"),
    PP_TEXT("pipeline", "order_file", PP_KEY_PATH, pipeline.order_file, NULL, PP_KEY_OPTIONAL,
            "custom schedule: CSV of per-stage op orders, relative to this file"),
    PP_ENUM("pipeline", "mode", pipeline.mode, "static", pp_mode_choices,
            "static: replay the program; dynamic: run the PACI policy live"),
    PP_ENUM("pipeline", "partition", pipeline.partition, "balanced", pp_partition_choices,
            "layers per virtual stage: balanced (smallest slowest stage within "
            "hardware.memory_gib) or even; run.layers_per_stage overrides both"),

    PP_INT("parallel", "data", parallel.data, "1", 1, PP_REPLICAS_MAX, 0,
           "data-parallel replicas D of the pipeline (simulator; pacer-train runs 1)"),
    PP_INT("parallel", "tensor", parallel.tensor, "1", 1, PP_TENSOR_MAX, 0,
           "tensor-parallel degree T of every stage, dividing model.heads (simulator; "
           "pacer-train runs 1)"),
    PP_TEXT("parallel", "sequence_parallel", PP_KEY_BOOL, parallel.sequence_parallel, "false", 0,
            "Megatron sequence parallelism: LayerNorm and dropout activations split over the "
            "tensor group too (simulator)"),
    PP_TEXT("parallel", "distributed_optimizer", PP_KEY_BOOL, parallel.distributed_optimizer,
            "false", 0,
            "ZeRO-1: fp32 master weights and Adam moments sharded over the data replicas "
            "(simulator)"),
    PP_TEXT("parallel", "overlap_grad_reduce", PP_KEY_BOOL, parallel.overlap_grad_reduce, "false",
            0,
            "the data-parallel gradient all-reduce starts layer by layer during a chunk's last "
            "backward instead of after it (simulator)"),

    PP_INT("training", "global_batch", training.global_batch, NULL, 1, PP_I32_MAX, PP_KEY_DERIVED,
           "sequences per optimizer step, all data replicas together; absent: derived from the "
           "pipeline"),
    PP_INT("training", "steps", training.steps, "10", 1, PP_COUNT_MAX, 0, "optimizer steps"),

    PP_STAGE_US("forward_us", costs.forward_stage_ns, costs.n_forward_stage, NULL, PP_KEY_REQUIRED,
                "forward of one micro-batch through one full stage, us; one value for every "
                "stage or one per stage, comma-separated"),
    PP_STAGE_US("backward_us", costs.backward_stage_ns, costs.n_backward_stage, NULL,
                PP_KEY_REQUIRED,
                "input-gradient backward B of one full stage, us; one value or one per stage"),
    PP_STAGE_US("weight_us", costs.weight_stage_ns, costs.n_weight_stage, "0", 0,
                "weight-gradient backward W, us; one value or one per stage"),
    PP_SCALED("costs", "comm_us", costs.comm_ns, "0", PP_US_MAX, 1e3, 0,
              "one stage-to-stage hop, us"),
    PP_STAGE_US("update_us", costs.update_stage_ns, costs.n_update_stage, "0", 0,
                "optimizer step of one stage, us; one value or one per stage"),
    PP_STAGE_US("fused_backward_us", costs.fused_stage_ns, costs.n_fused_stage, NULL,
                PP_KEY_OPTIONAL,
                "fused backward BW of one full stage, us; one value or one per stage; absent: "
                "backward_us + weight_us"),
    PP_STAGE_US("stash_us", costs.stash_stage_ns, costs.n_stash_stage, NULL, PP_KEY_OPTIONAL,
                "copying a stage's weights, us, paid by the first forward of each weight "
                "version under weight stashing (pipedream, 2bw); one value or one per stage"),

    PP_TEXT("data", "paths", PP_KEY_STRING_LIST, data.paths, NULL, PP_KEY_OPTIONAL,
            "extra text files or folders, comma-separated; absent: the default corpus"),
    PP_TEXT("data", "cache_dir", PP_KEY_STRING, data.cache_dir, ".cache", 0,
            "folder for fetched packages and token shards"),
    PP_NUM("data", "val_fraction", data.val_fraction, "0.05", 0.0, 1.0, 1.0, PP_KEY_MAX_EXCL,
           "share of documents held out for validation"),

    PP_ENUM("optimizer", "name", optimizer.name, "adamw", pp_optimizer_choices,
            "adamw, or muon (AdamW for non-matrix parameters)"),
    PP_NUM("optimizer", "lr", optimizer.lr, "6e-4", 0.0, PP_F32_MAX, 1.0, 0, "peak learning rate"),
    PP_NUM("optimizer", "min_lr", optimizer.min_lr, "6e-5", 0.0, PP_F32_MAX, 1.0, 0,
           "learning rate at the end of the cosine decay (<= lr)"),
    PP_INT("optimizer", "warmup_steps", optimizer.warmup_steps, NULL, 0, PP_COUNT_MAX,
           PP_KEY_DERIVED, "linear warmup steps; absent: 10% of training.steps"),
    PP_NUM("optimizer", "weight_decay", optimizer.weight_decay, "0.1", 0.0, PP_F32_MAX, 1.0, 0,
           "decoupled weight decay"),
    PP_NUM("optimizer", "beta1", optimizer.beta1, "0.9", 0.0, 1.0, 1.0, PP_KEY_MAX_EXCL,
           "Adam first-moment decay"),
    PP_NUM("optimizer", "beta2", optimizer.beta2, "0.95", 0.0, 1.0, 1.0, PP_KEY_MAX_EXCL,
           "Adam second-moment decay"),
    PP_NUM("optimizer", "eps", optimizer.eps, "1e-8", PP_F32_MIN_NORM, PP_F32_MAX, 1.0, 0,
           "Adam denominator epsilon"),
    PP_NUM("optimizer", "momentum", optimizer.momentum, "0.95", 0.0, 1.0, 1.0, PP_KEY_MAX_EXCL,
           "muon momentum"),
    PP_NUM("optimizer", "muon_lr", optimizer.muon_lr, "0.02", 0.0, PP_F32_MAX, 1.0, 0,
           "muon peak learning rate for the blocks' matrices (same warmup and decay as lr)"),
    PP_INT("optimizer", "ns_steps", optimizer.ns_steps, "5", 1, PP_NS_STEPS_MAX, 0,
           "muon Newton-Schulz iterations"),
    PP_NUM("optimizer", "grad_clip", optimizer.grad_clip, "1.0", 0.0, PP_F32_MAX, 1.0, 0,
           "per-stage clipping threshold on the gradient L2 norm; 0: off"),
    PP_TEXT("optimizer", "error_feedback", PP_KEY_BOOL, optimizer.error_feedback, "false", 0,
            "update-level error feedback for delayed updates"),

    {.section = "run",
     .key = "seed",
     .type = PP_KEY_UINT64,
     .offset = PP_OFF(run.seed),
     .def = "1337",
     .min = 0.0,
     .max = 18446744073709551615.0,
     .description = "random seed"},
    PP_INT("run", "eval_every", run.eval_every, "0", 0, PP_COUNT_MAX, 0,
           "steps between validation passes; 0: only at the end"),
    PP_INT("run", "eval_batches", run.eval_batches, "8", 1, PP_COUNT_MAX, 0,
           "micro-batches per validation pass"),
    PP_INT("run", "checkpoint_every", run.checkpoint_every, "0", 0, PP_COUNT_MAX, 0,
           "steps between checkpoints; 0: only at the end"),
    PP_INT("run", "keep_checkpoints", run.keep_checkpoints, "3", 0, PP_COUNT_MAX, 0,
           "newest complete checkpoints kept in OUT/checkpoints; 0: all"),
    PP_INT("run", "threads", run.threads, "0", 0, PP_THREADS_MAX, 0,
           "kernel threads per worker; 0: automatic"),
    PP_TEXT("run", "speed_reference", PP_KEY_BOOL, run.speed_reference, "false", 0,
            "true: after each U every stage's worker times a fixed matrix product (about 1.5 ms "
            "on one core) and ops.csv gets a reference row for it, so that pacer-sim calibrate "
            "sees how fast each stage's core ran (cpu backend; the simulator ignores it)"),
    PP_TEXT("run", "backend", PP_KEY_STRING, run.backend, "cpu", 0,
            "executor backend: cpu, or another one this build has (pacer-train checks the name "
            "and lists the valid ones); the simulator ignores it"),
    {.section = "run",
     .key = "layers_per_stage",
     .type = PP_KEY_INT32_LIST,
     .offset = PP_OFF(run.layers_per_stage),
     .count_offset = PP_OFF(run.n_layers_per_stage),
     .min = 1,
     .max = PP_PARTITION_MAX_LAYERS,
     .flags = PP_KEY_OPTIONAL,
     .description = "layers of each virtual stage, comma-separated; absent: balanced by cost"},
    PP_INT("run", "log_every", run.log_every, "1", 1, PP_COUNT_MAX, 0, "steps between log lines"),
    PP_NUM("run", "comm_timeout_s", run.comm_timeout_s, "300", 0.0, PP_TIMEOUT_S_MAX, 1.0,
           PP_KEY_MIN_EXCL,
           "multi-process runs: seconds a process waits for a peer before it names the peer and "
           "the op it waited for and aborts the job (at most a week)"),
    {.section = "run",
     .key = "devices",
     .type = PP_KEY_INT32_LIST,
     .offset = PP_OFF(run.devices),
     .count_offset = PP_OFF(run.n_devices),
     .min = 0,
     .max = PP_DEVICE_ID_MAX,
     .flags = PP_KEY_OPTIONAL,
     .description = "device id of each stage, comma-separated (e.g. 0,0,0,0 puts 4 stages on "
                    "device 0); absent: stages spread over the visible devices"},
    {.section = "run",
     .key = "precision",
     .type = PP_KEY_ENUM,
     .offset = PP_OFF(run.precision),
     .choices = pp_precision_choices,
     .flags = PP_KEY_OPTIONAL,
     .description = "activations and compute weights: fp32 or bf16 (fp32 master weights either "
                    "way); absent: the backend's default, fp32 on cpu (its only one), bf16 on "
                    "cuda"},
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
    case PP_KEY_SCALED_LIST:
        return g_strdup_printf("numbers from %s to %s: one for every stage, or one per stage, "
                               "comma-separated",
                               lo, hi);
    case PP_KEY_UINT64:
        return g_strdup_printf("a whole number from 0 to %" G_GUINT64_FORMAT, G_MAXUINT64);
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
    char  *end = NULL;
    double v = g_ascii_strtod(text, &end);
    if (*end != '\0' || isnan(v))
        return PP_NUM_MALFORMED;
    /* No errno test: ERANGE also flags an underflow to a subnormal or 0, which the range
     * check judges; an overflow is infinite. */
    gboolean below = (k->flags & PP_KEY_MIN_EXCL) ? v <= k->min : v < k->min;
    gboolean above = (k->flags & PP_KEY_MAX_EXCL) ? v >= k->max : v > k->max;
    if (isinf(v) || below || above)
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
    /* A GPT-2-shaped preset leaves the layer keys to their defaults (derived from the above). */
    sc->model.kv_heads = p->kv_heads > 0 ? p->kv_heads : -1;
    sc->model.ffn_hidden = p->ffn_hidden > 0 ? p->ffn_hidden : -1;
    g_free(sc->model.ffn);
    sc->model.ffn = g_strdup(pp_ffn_choices[p->ffn_gated ? 1 : 0]);
}

static void pp_scenario_apply_hardware_preset(PpScenario *sc, const PpHardwarePreset *p) {
    sc->hardware.peak_flops = p->peak_flops;
    sc->hardware.peak_fp8_flops = p->peak_fp8_flops;
    sc->hardware.memory_bytes = p->memory_bytes;
    sc->hardware.mem_bw_bytes_per_s = p->mem_bw_bytes_per_s;
    sc->hardware.link_bw_bytes_per_s = p->link_bw_bytes_per_s;
    sc->hardware.link_latency_ns = p->link_latency_ns;
    sc->hardware.nvlink = p->nvlink;
    sc->hardware.gpus_per_node = p->gpus_per_node;
    sc->hardware.internode_bw_bytes_per_s = p->internode_bw_bytes_per_s;
    sc->hardware.internode_latency_ns = p->internode_latency_ns;
    if (p->calibrated) {
        sc->hardware.kernel_eff_max = p->kernel_eff_max;
        sc->hardware.kernel_eff_half_tokens = p->kernel_eff_half_tokens;
        sc->hardware.kernel_eff_half_hidden = p->kernel_eff_half_hidden;
    }
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

    /* GKeyFile hands non-UTF-8 values over raw (unescaped), so they would not survive
     * pp_scenario_to_data() and a reload unchanged. */
    if (!g_utf8_validate(value, -1, NULL)) {
        g_autofree char *shown = g_utf8_make_valid(value, -1);
        return pp_scenario_value_error(k, origin, shown, "not valid UTF-8", error);
    }
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
    case PP_KEY_SCALED_LIST: {
        g_auto(GStrv) items = NULL;
        if (!pp_scenario_parse_list(k, origin, value, &items, error))
            return FALSE;
        int32_t n = (int32_t)g_strv_length(items);
        if (n == 0)
            return pp_scenario_value_error(k, origin, value, "empty", error);
        g_autofree int64_t *list = g_new(int64_t, n);
        for (int32_t i = 0; i < n; i++) {
            if ((status = pp_parse_double(k, items[i], &dv)) != PP_NUM_OK)
                return pp_scenario_num_error(k, origin, value, status, error);
            list[i] = (int64_t)llround(dv * k->scale);
        }
        g_free(*PP_FIELD(sc, k, int64_t *));
        *PP_FIELD(sc, k, int64_t *) = g_steal_pointer(&list);
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
    case PP_KEY_SCALED_LIST: {
        const int64_t *list = *PP_CFIELD(sc, k, int64_t *);
        int32_t        n = *(const int32_t *)((const char *)sc + k->count_offset);
        if (list == NULL)
            return NULL;
        GString *text = g_string_new(NULL);
        for (int32_t i = 0; i < n; i++)
            g_string_append_printf(text, "%s%s", i ? "," : "",
                                   pp_format_double(buf, sizeof buf, (double)list[i] / k->scale));
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

char *pp_scenario_value(const PpScenario *scenario, const char *section, const char *key) {
    const PpScenarioKey *k = pp_scenario_key_find(section, key);
    PP_ASSERT(k != NULL); /* callers name keys of the table */
    return pp_scenario_format_value(scenario, k);
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
        else if (k->type == PP_KEY_INT32_LIST || k->type == PP_KEY_SCALED_LIST)
            g_free(*PP_FIELD(scenario, k, void *));
        else if (k->type == PP_KEY_STRING_LIST)
            g_strfreev(*PP_FIELD(scenario, k, char **));
    }
    g_free(scenario->path);
    g_free(scenario);
}

/* A scenario holding every table default; DERIVED fields are -1. */
static PpScenario *pp_scenario_new_defaults(const char *name) {
    g_autoptr(PpScenario) sc = g_new0(PpScenario, 1);
    sc->path = g_strdup(name);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
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

/* global_batch = microbatch_size * k * parallel.data, k per the schedule's batch rule; fills
 * whichever of the two is absent. */
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
    /* Every data replica runs the pipeline's micro-batches: the step's sequences are D times
     * one pipeline's. */
    const int32_t data = sc->parallel.data;
    g_autoptr(GString) factor_text = g_string_new(NULL);
    if (count_key != NULL)
        g_string_append_printf(factor_text, " * [pipeline] %s = %d", count_key, count);
    if (data > 1)
        g_string_append_printf(factor_text, " * [parallel] data = %d", data);
    const char *factor = factor_text->str;
    if ((int64_t)count * data > G_MAXINT32)
        return pp_scenario_inconsistent(sc, error, "the step's micro-batches%s exceed %d", factor,
                                        G_MAXINT32);
    count *= data;

    if (p->microbatch_size < 0 && *gb < 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_MISSING_KEY,
                    "%s: missing key [training] global_batch or [pipeline] microbatch_size; "
                    "give one (schedule %s: global_batch = microbatch_size%s%s%s)",
                    sc->path, p->schedule, count_key ? " * " : "", count_key ? count_key : "",
                    data > 1 ? " * data" : "");
        return FALSE;
    }
    if (p->microbatch_size < 0) {
        if (*gb % count != 0) {
            if (data > 1)
                g_string_append_printf(factor_text, " = %d", count);
            return pp_scenario_inconsistent(
                sc, error,
                "[training] global_batch = %d is not a multiple of %s (schedule %s); "
                "change one, or give [pipeline] microbatch_size",
                *gb, factor_text->str + 3, p->schedule);
        }
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

/* Checks that a per-stage [costs] list named @key holds 1 or pipeline.stages values (or none:
 * absent) and returns its largest entry in *@max_ns (0 when absent). */
static gboolean pp_scenario_check_stage_list(const PpScenario *sc, const char *key,
                                             const int64_t *list, int32_t n, int64_t *max_ns,
                                             GError **error) {
    *max_ns = 0;
    for (int32_t i = 0; i < n; i++)
        *max_ns = MAX(*max_ns, list[i]);
    if (n <= 1 || n == sc->pipeline.stages)
        return TRUE;
    return pp_scenario_inconsistent(sc, error,
                                    "[costs] %s has %d values but [pipeline] stages = %d; give "
                                    "one value for every stage or one per stage",
                                    key, n, sc->pipeline.stages);
}

/* The scalar [costs] fields: each per-stage list's largest entry, after checking its length. */
static gboolean pp_scenario_derive_costs(PpScenario *sc, GError **error) {
    PpCostParams *c = &sc->costs;
    int64_t       extra_max = 0; /* unused: no scalar for fused_backward_us and stash_us */
    if (!c->set)
        return TRUE;
    return pp_scenario_check_stage_list(sc, "forward_us", c->forward_stage_ns, c->n_forward_stage,
                                        &c->forward_ns, error) &&
           pp_scenario_check_stage_list(sc, "backward_us", c->backward_stage_ns,
                                        c->n_backward_stage, &c->backward_ns, error) &&
           pp_scenario_check_stage_list(sc, "weight_us", c->weight_stage_ns, c->n_weight_stage,
                                        &c->weight_ns, error) &&
           pp_scenario_check_stage_list(sc, "update_us", c->update_stage_ns, c->n_update_stage,
                                        &c->update_ns, error) &&
           pp_scenario_check_stage_list(sc, "fused_backward_us", c->fused_stage_ns,
                                        c->n_fused_stage, &extra_max, error) &&
           pp_scenario_check_stage_list(sc, "stash_us", c->stash_stage_ns, c->n_stash_stage,
                                        &extra_max, error);
}

/* A custom order fixes the run: its stages, its optimizer steps (U ops per stage; an order
 * without U ops is one step) and its micro-batches. pipeline.stages, training.steps (which
 * pacer-sim --steps sets) and pipeline.microbatches must say the same, or the reports would
 * describe another run. Errors come from reading the order (PP_SCHEDULE_ERROR_PARSE) or are
 * PP_SCENARIO_ERROR_INCONSISTENT. */
static gboolean pp_scenario_check_order(const PpScenario *sc, GError **error) {
    const PpPipelineParams *p = &sc->pipeline;
    const PpSchedKindInfo  *kind = pp_scenario_kind(sc);
    PpScheduleParams        params = {.kind = kind->name, .order_file = p->order_file};
    g_autoptr(GError) local = NULL;
    g_autoptr(PpSchedule) order = kind->build(&params, &local);
    if (order == NULL) {
        g_set_error(error, local->domain, local->code, "%s: %s", sc->path, local->message);
        return FALSE;
    }
    int32_t steps = MAX(order->n_steps, 1);
    if (order->n_stages != p->stages)
        return pp_scenario_inconsistent(
            sc, error, "[pipeline] stages = %d but order_file '%s' has %d stages; set stages = %d",
            p->stages, p->order_file, order->n_stages, order->n_stages);
    if (sc->training.steps != steps)
        return pp_scenario_inconsistent(
            sc, error,
            "[training] steps = %d but order_file '%s' runs %d optimizer steps (U ops per "
            "stage); a custom order fixes its steps: set steps = %d (pacer-sim --steps sets "
            "training.steps)",
            sc->training.steps, p->order_file, steps, steps);
    if ((int64_t)p->microbatches * steps != order->n_mb)
        return pp_scenario_inconsistent(
            sc, error,
            "[pipeline] microbatches = %d per step but order_file '%s' runs %d micro-batches "
            "in %d steps; give the order's micro-batches per step%s",
            p->microbatches, p->order_file, order->n_mb, steps,
            order->n_mb % steps == 0 ? "" : " (the order's steps must be equal)");
    return TRUE;
}

/* [parallel] against [model] and [hardware]: tensor divides the heads, the job's GPUs fit
 * int32_t and the devices; derives hardware.devices, gpus_per_node and the inter-node link
 * when absent. */
static gboolean pp_scenario_check_layout(PpScenario *sc, GError **error) {
    const PpParallelParams *par = &sc->parallel;
    PpHardwareParams       *hw = &sc->hardware;
    if (sc->model.heads % par->tensor != 0 || sc->model.hidden % par->tensor != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] tensor = %d does not divide [model] heads = %d and hidden = %d; "
            "tensor parallelism splits whole heads, choose a divisor of both",
            par->tensor, sc->model.heads, sc->model.hidden);
    if (sc->model.kv_heads % par->tensor != 0 || sc->model.ffn_hidden % par->tensor != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] tensor = %d does not divide [model] kv_heads = %d and ffn_hidden = %d; "
            "tensor parallelism splits whole key/value heads and the FFN's columns (Megatron "
            "needs both), choose a divisor of both",
            par->tensor, sc->model.kv_heads, sc->model.ffn_hidden);
    int64_t gpus = pp_scenario_gpus(sc);
    if (gpus > G_MAXINT32)
        return pp_scenario_inconsistent(
            sc, error,
            "[parallel] data = %d times tensor = %d times [pipeline] "
            "stages = %d is %" G_GINT64_FORMAT " GPUs, more than %d; lower one of them",
            par->data, par->tensor, sc->pipeline.stages, gpus, G_MAXINT32);
    if (hw->devices < 0)
        hw->devices = (int32_t)gpus;
    if (hw->devices < gpus)
        return pp_scenario_inconsistent(
            sc, error,
            "[hardware] devices = %d is fewer than the %" G_GINT64_FORMAT
            " GPUs of the layout ([parallel] data = %d x tensor = %d x [pipeline] stages = %d); "
            "each stage of each replica needs its own devices; raise devices or omit it",
            hw->devices, gpus, par->data, par->tensor, sc->pipeline.stages);
    if (hw->gpus_per_node < 0)
        hw->gpus_per_node = hw->devices; /* one node */
    if (hw->internode_bw_bytes_per_s < 0.0)
        hw->internode_bw_bytes_per_s = hw->link_bw_bytes_per_s;
    if (hw->internode_latency_ns < 0)
        hw->internode_latency_ns = hw->link_latency_ns;
    return TRUE;
}

/* The layer keys beyond GPT-2's: head_dim = hidden / heads (which must then divide), kv_heads
 * = heads and ffn_hidden = 4 * hidden when absent; kv_heads must divide heads. */
static gboolean pp_scenario_derive_layer(PpScenario *sc, GError **error) {
    PpModelParams *m = &sc->model;
    if (m->head_dim < 0) {
        if (m->hidden % m->heads != 0)
            return pp_scenario_inconsistent(
                sc, error,
                "[model] hidden = %d is not a multiple of [model] heads = %d; "
                "choose heads that divide hidden (or give [model] head_dim)",
                m->hidden, m->heads);
        m->head_dim = m->hidden / m->heads;
    }
    if (m->kv_heads < 0)
        m->kv_heads = m->heads;
    if (m->heads % m->kv_heads != 0)
        return pp_scenario_inconsistent(
            sc, error,
            "[model] kv_heads = %d does not divide [model] heads = %d; grouped-query attention "
            "shares each key/value head among heads / kv_heads query heads: choose a divisor "
            "of heads (1..%d)",
            m->kv_heads, m->heads, m->heads);
    if (m->ffn_hidden < 0) {
        if ((int64_t)m->hidden * 4 > (int64_t)PP_FFN_MAX)
            return pp_scenario_inconsistent(sc, error,
                                            "[model] ffn_hidden = 4 * hidden = %" G_GINT64_FORMAT
                                            " exceeds %.0f; give [model] ffn_hidden",
                                            (int64_t)m->hidden * 4, PP_FFN_MAX);
        m->ffn_hidden = m->hidden * 4;
    }
    return TRUE;
}

static gboolean pp_scenario_check(PpScenario *sc, GError **error) {
    const PpModelParams   *m = &sc->model;
    PpPipelineParams      *p = &sc->pipeline;
    const PpSchedKindInfo *kind = pp_scenario_kind(sc);

    if (!pp_scenario_derive_layer(sc, error))
        return FALSE;
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
    g_autoptr(GError) rule = NULL;
    if (!pp_sched_kind_check_microbatches(
            kind, p->stages, pp_sched_kind_mb_per_step(kind, p->microbatches, p->accumulation),
            &rule))
        return pp_scenario_inconsistent(sc, error,
                                        "[pipeline] microbatches = %d, stages = %d: %s; change "
                                        "[pipeline] microbatches or stages",
                                        p->microbatches, p->stages, rule->message);
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
    if (!pp_scenario_derive_batch(sc, error) || !pp_scenario_derive_costs(sc, error))
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
        if (!pp_scenario_check_order(sc, error))
            return FALSE;
    }

    if (!pp_scenario_check_layout(sc, error))
        return FALSE;
    if (pp_scenario_precision_fp8(sc) && sc->hardware.set && !(sc->hardware.peak_fp8_flops > 0.0))
        return pp_scenario_inconsistent(
            sc, error,
            "[model] precision = fp8 runs the matrix products at the device's fp8 rate, but "
            "[hardware]%s%s has none (peak_fp8_tflops = 0); give [hardware] peak_fp8_tflops "
            "(dense, in (0, %g]) or use precision = bf16",
            sc->hardware.preset ? " preset = " : "", sc->hardware.preset ? sc->hardware.preset : "",
            PP_RATE_MAX);

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

    if (sc->run.devices != NULL && sc->run.n_devices != p->stages)
        return pp_scenario_inconsistent(sc, error,
                                        "[run] devices has %d entries but [pipeline] stages = %d; "
                                        "give one device id per stage (ids may repeat)",
                                        sc->run.n_devices, p->stages);

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
    return pp_scenario_from_key_file(kf, path, base_dir, overrides, error);
}

PpScenario *pp_scenario_load_data(const char *data, const char *name, const char *const *overrides,
                                  GError **error) {
    g_autoptr(GKeyFile) kf = pp_scenario_parse_text(data, strlen(data), name, error);
    if (kf == NULL)
        return NULL;
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

void pp_scenario_memory_shape(const PpScenario *scenario, PpMemoryShape *shape) {
    const PpParallelParams *par = &scenario->parallel;
    *shape = (PpMemoryShape){.microbatch_size = scenario->pipeline.microbatch_size,
                             .seq_len = scenario->model.seq_len,
                             .hidden = scenario->model.hidden,
                             .heads = scenario->model.heads,
                             .vocab = scenario->model.vocab,
                             .flash_attention = scenario->model.flash_attention,
                             .tensor = par->tensor,
                             .sequence_parallel = par->sequence_parallel,
                             .recompute = pp_scenario_recompute(scenario),
                             .zero_shards = par->distributed_optimizer ? par->data : 1,
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
                             .expert_tensor = par->expert_tensor};
}

gboolean pp_scenario_attention_mla(const PpScenario *scenario) {
    return g_strcmp0(scenario->model.attention, "mla") == 0;
}

gboolean pp_scenario_ffn_gated(const PpScenario *scenario) {
    return g_strcmp0(scenario->model.ffn, "swiglu") == 0;
}

gboolean pp_scenario_precision_fp8(const PpScenario *scenario) {
    return g_strcmp0(scenario->model.precision, "fp8") == 0;
}

gboolean pp_scenario_attention_causal(const PpScenario *scenario) {
    return g_strcmp0(scenario->model.attention_flops, "causal") == 0;
}

PpRecompute pp_scenario_recompute(const PpScenario *scenario) {
    const char *r = scenario->model.recompute;
    PP_ASSERT(r != NULL);
    for (int i = 0; pp_recompute_choices[i] != NULL; i++) {
        if (strcmp(r, pp_recompute_choices[i]) == 0)
            return (PpRecompute)i;
    }
    PP_UNREACHABLE(); /* the key table accepts only the choices */
}

int64_t pp_scenario_gpus(const PpScenario *scenario) {
    /* each factor <= 2^20 or < 2^31 (key ranges): the product fits int64_t */
    return (int64_t)scenario->parallel.data * scenario->parallel.tensor * scenario->pipeline.stages;
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

PpPartitionMode pp_scenario_partition_mode(const PpScenario *scenario) {
    PP_ASSERT(scenario->pipeline.partition != NULL);
    return strcmp(scenario->pipeline.partition, "even") == 0 ? PP_PARTITION_EVEN
                                                             : PP_PARTITION_BALANCED;
}

size_t pp_scenario_n_keys(void) {
    return G_N_ELEMENTS(pp_scenario_keys);
}

void pp_scenario_key_info(size_t index, PpScenarioKeyInfo *info) {
    PP_ASSERT(index < G_N_ELEMENTS(pp_scenario_keys));
    const PpScenarioKey *k = &pp_scenario_keys[index];
    gboolean             whole =
        k->type == PP_KEY_INT32 || k->type == PP_KEY_INT32_LIST || k->type == PP_KEY_UINT64;
    *info = (PpScenarioKeyInfo){
        .section = k->section,
        .key = k->key,
        .numeric = whole || k->type == PP_KEY_DOUBLE || k->type == PP_KEY_SCALED_INT64 ||
                   k->type == PP_KEY_SCALED_LIST,
        .whole = whole,
        .list = k->type == PP_KEY_INT32_LIST || k->type == PP_KEY_SCALED_LIST,
        .min = k->min,
        .max = k->max,
        .min_excluded = (k->flags & PP_KEY_MIN_EXCL) != 0,
        .max_excluded = (k->flags & PP_KEY_MAX_EXCL) != 0,
    };
}
