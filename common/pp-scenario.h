/* SPDX-License-Identifier: MIT
 * pp-scenario.h: scenario files (GKeyFile .ini) shared by pacer-sim and pacer-train.
 * Sections: [model] [hardware] [pipeline] [parallel] [training] [costs] (simulator and
 * executor; [parallel] beyond one pipeline is the simulator's), [data] [optimizer] [run]
 * (executor). Presets fill a section; explicit keys override them;
 * "--set section.key=value" overrides both. Unknown sections/keys and inconsistent
 * combinations are GErrors in PP_SCENARIO_ERROR that name the file, key and valid values.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-memory.h"
#include "pp-partition.h"
#include "pp-schedule.h"

G_BEGIN_DECLS

/* How an MoE layer's tokens reach their experts (parallel.moe_dispatcher; docs/cost-model.md,
 * Multi-head latent attention and mixtures of experts). */
typedef enum {
    PP_MOE_DISPATCHER_ALLTOALL, /* Megatron's all-to-all dispatcher: permutation kernels around
                                   an NCCL all-to-all sized on the host */
    PP_MOE_DISPATCHER_DEEPEP,   /* DeepEP's fused dispatch and combine kernels */
    PP_MOE_DISPATCHER_HYBRIDEP, /* HybridEP's fused dispatch and combine kernels */
} PpMoeDispatcher;

/* How the context-parallel ranks share attention (parallel.context_comm; docs/cluster.md,
 * Context parallelism), Megatron's --cp-comm-type. */
typedef enum {
    PP_CONTEXT_COMM_RING, /* ring attention: key/value blocks passed rank to rank (p2p) */
    PP_CONTEXT_COMM_A2A,  /* Ulysses: all-to-alls turn sequence shards into head shards */
} PpContextComm;

typedef struct {
    char *preset;                 /* "gpt2", "gpt2-medium", ..., "zb-28.3b"; NULL when none */
    char *hf_config;              /* absolute path of the Hugging Face config.json that filled
                                     the shape after the preset (pp-hf-config.h); NULL: none */
    int32_t  layers;              /* transformer blocks L */
    int32_t  hidden;              /* C */
    int32_t  heads;               /* NH */
    int32_t  seq_len;             /* T */
    int32_t  vocab;               /* V (50257 for GPT-2; kernels pad to a multiple of 128) */
    gboolean flash_attention;     /* TRUE: attention scores are never stored (the simulator's
                                     activation memory drops the 5as/h term) */
    char *recompute;              /* "none", "selective", "full" (Korthikanti et al. 2022) or
                                     "op" (torchtitan's per-operator checkpointing) */
    char **recompute_modules;     /* selective: NULL-terminated Megatron module names
                                     (PpRecomputeModule); NULL: core_attn */
    char *recompute_method;       /* full: "uniform" (groups of recompute_num_layers) or "block"
                                     (the first recompute_num_layers of each virtual stage) */
    int32_t recompute_num_layers; /* N of recompute_method (default 1) */
    /* Layer shape beyond GPT-2's (docs/cost-model.md, "Model shapes"): grouped-query attention and
     * a gated FFN. Each defaults to the GPT-2 layer when absent. */
    int32_t kv_heads;        /* key/value heads, dividing heads (default heads: multi-head) */
    int32_t head_dim;        /* width of one head (default hidden / heads) */
    char   *ffn;             /* "gelu" (two hidden x ffn_hidden matrices) or "swiglu" (three) */
    int32_t ffn_hidden;      /* FFN inner width (default 4 * hidden) */
    char   *precision;       /* "bf16", "fp8" or "fp16" (bf16's rate, 2-byte gradients) */
    char   *attention_flops; /* "full" (every s x s score counted) or "causal" (half) */

    /* The memory of the FFN's activation and of the LM head (docs/memory.md). */
    gboolean swiglu_fusion;  /* swiglu: TRUE (default) one fused kernel that recomputes the
                                silu output; FALSE separate kernels that keep it */
    gboolean tie_embeddings; /* the LM head is the word embedding: one copy where one virtual
                                stage holds both ends */
    /* Multi-head latent attention (DeepSeek-V3's names; docs/cost-model.md, "Model shapes"). */
    char   *attention;        /* "mha" (multi-head or grouped-query) or "mla" */
    int32_t q_lora_rank;      /* query latent width; 0: queries straight from hidden */
    int32_t kv_lora_rank;     /* key/value latent width */
    int32_t qk_nope_head_dim; /* per-head query/key width without rotary embedding */
    int32_t qk_rope_head_dim; /* per-head rotary width */
    int32_t v_head_dim;       /* per-head value width */
    /* Mixture of experts (experts 0: dense). */
    int32_t experts;           /* routed experts per MoE layer */
    int32_t experts_per_token; /* routed experts each token runs through */
    int32_t shared_experts;    /* experts every token runs through */
    int32_t expert_ffn_hidden; /* one expert's FFN inner width */
    int32_t dense_layers;      /* leading dense layers before the MoE layers */
} PpModelParams;

typedef struct {
    char  *preset;         /* "a100-sxm", "h100-sxm", "h200-sxm", "rtx-pro-6000", "l40s" */
    double peak_flops;     /* dense bf16 FLOP/s of one device */
    double peak_fp8_flops; /* dense fp8 FLOP/s of one device; 0: none (model.precision = fp8
                              is refused) */
    int64_t  memory_bytes; /* device memory */
    double   mem_bw_bytes_per_s;
    double   link_bw_bytes_per_s; /* stage-to-stage link (NVLink or PCIe) */
    int64_t  link_latency_ns;
    gboolean nvlink;  /* TRUE: NVLink; FALSE: PCIe */
    int32_t  devices; /* defaults to the layout's GPUs, data * tensor * stages */
    /* Nodes: GPUs [k * gpus_per_node, (k + 1) * gpus_per_node) share the intra-node link
     * (link_bw_bytes_per_s, link_latency_ns); messages between nodes use the inter-node one.
     * Absent (no preset): one node holds every GPU, and the inter-node link equals the
     * intra-node one. */
    int32_t gpus_per_node;
    double  internode_bw_bytes_per_s; /* one GPU's link to other nodes, one direction */
    int64_t internode_latency_ns;
    /* NICs of a node that one collective spanning nodes drives at once, each at
     * internode_bw_bytes_per_s (rail-optimised fabrics: one per GPU); 1: one NIC. */
    int32_t nics_per_node;
    /* The fixed cost of one collective (an all-reduce, all-gather, reduce-scatter or
     * all-to-all) before its per-step latencies: NCCL's base latency of a collective (>= 0). */
    int64_t collective_ns;
    /* The data-parallel group's collectives (the gradient all-reduce, FSDP's gathers) move
     * their bytes at this bus bandwidth, as nccl-tests reports a measured all-reduce's busbw
     * (bytes / time x 2(D - 1) / D), on either side of a node boundary; 0: at the links'. */
    double allreduce_busbw_bytes_per_s;
    /* Kernel efficiency of the simulator's analytic cost model: a micro-batch of t tokens
     * reaches eff(t) = kernel_eff_max * t / (t + kernel_eff_half_tokens) of peak_flops. */
    double kernel_eff_max;         /* in (0, 1] */
    double kernel_eff_half_tokens; /* >= 0 */
    /* ... times h / (h + kernel_eff_half_hidden) for the model's hidden size h (0: no such
     * term): narrow models run more memory-bound work per GEMM FLOP. */
    double kernel_eff_half_hidden; /* >= 0 */
    /* fp8 matrix products (model.precision = fp8) reach kernel_eff_fp8 x eff of
     * peak_fp8_flops: the casts and scaling that an fp8 product adds (docs/cost-model.md). */
    double kernel_eff_fp8; /* in (0, 1] */
    /* An expert all-to-all moves its bytes at alltoall_eff x the link bandwidths: many small
     * peer-to-peer transfers, the routing metadata and the token permutation around them. */
    double alltoall_eff; /* in (0, 1] */
    /* The simulator's cost model: "curve" (a layer's FLOPs at the kernel-efficiency curve
     * above) or "operators" (each operator by what bounds it; docs/cost-model.md, The operator
     * cost model: kernel_eff_max is then the matmul ceiling, kernel_eff_half_hidden and
     * kernel_eff_half_tokens a product's K and M at which it halves). */
    char   *cost_model;
    int64_t launch_ns; /* operators: the host's time to launch one operator (>= 0) */
    int32_t sms;       /* operators: multiprocessors a product's tiles fill in waves; 0: none */
    /* TRUE when the scenario has a [hardware] section; FALSE (CPU training, explicit
     * [costs]): preset is NULL and peak_flops .. nvlink are 0; devices is still derived and
     * kernel_eff_max, kernel_eff_half_tokens keep their defaults. */
    gboolean set;
} PpHardwareParams;

typedef struct {
    char   *schedule;        /* registry name */
    int32_t stages;          /* N */
    int32_t chunks;          /* v */
    int32_t microbatches;    /* m per optimizer step (flush, 2bw) */
    int32_t accumulation;    /* a (paci, async-1f1b: 1) */
    int32_t microbatch_size; /* sequences per micro-batch */
    char   *order_file;      /* custom schedule CSV, resolved relative to the scenario file */
    char   *mode;            /* "static" (replay the program) or "dynamic" (run the policy) */
    char   *partition;       /* "balanced" (by cost, within hardware.memory_gib) or "even" layers
                                per virtual stage; run.layers_per_stage overrides both */
    /* Resolved once when the scenario loads (pp_scenario_load(), pp_scenario_with()): */
    const PpSchedKindInfo *kind; /* the registry record of schedule */
    int32_t mb_per_step; /* micro-batches one stage processes per optimizer step, by the kind's
                            batch rule: microbatches (flush, 2bw, custom), accumulation (paci,
                            async-1f1b) or 1 (pipedream) */
} PpPipelineParams;

/* The parallel layout around the simulated pipeline ([parallel]). GPUs = data * tensor *
 * stages, ranked tensor innermost, then data, then pipeline stage (docs/cluster.md). */
typedef struct {
    int32_t  data;                  /* D: identical pipeline replicas */
    int32_t  tensor;                /* T: tensor-parallel degree inside each stage */
    gboolean sequence_parallel;     /* Megatron sequence parallelism (with T > 1) */
    gboolean distributed_optimizer; /* ZeRO-1: fp32 master weights and Adam moments sharded
                                       over the D replicas */
    gboolean overlap_grad_reduce;   /* the gradient all-reduce starts layer by layer during
                                       the last backward instead of after it */
    int32_t grad_bytes;             /* bytes per parameter of the gradient buffer, which the
                                       data-parallel reduction moves: 4 (fp32) or 2 (fp16,
                                       bf16); -1 until derived (pp_scenario_grad_bytes()) */
    gboolean fsdp;                  /* ZeRO-3: weights, gradients and optimizer state sharded
                                       over data x context, each layer gathered per pass */
    char *fsdp_impl;                /* "megatron" (Megatron's custom FSDP) or "fsdp2" (torch
                                       FSDP2): how ZeRO-3 holds its shards (docs/memory.md) */
    int32_t context;                /* C: context-parallel ranks, each holding 1/C of every
                                       sequence (docs/cluster.md) */
    char    *context_comm;          /* "ring" or "a2a": how they share attention */
    gboolean tp_comm_overlap;       /* the tensor-parallel all-gathers and reduce-scatters run
                                       under their GEMMs (Megatron's --tp-comm-overlap,
                                       Transformer Engine's userbuffers; docs/cluster.md) */
    int32_t expert;                 /* EP: ranks sharing an MoE layer's routed experts, carved
                                       out of tensor x data (docs/cost-model.md) */
    int32_t  expert_tensor;         /* ranks splitting each routed expert (default tensor) */
    gboolean moe_a2a_overlap;       /* the expert all-to-alls of one micro-batch run under
                                       another's compute (docs/cost-model.md) */
    char *moe_dispatcher;           /* "alltoall", "deepep" or "hybridep": how the tokens reach
                                       the experts (docs/cost-model.md) */
    double moe_capacity_factor;     /* > 0: each expert takes ceil(factor x tokens x K / E) of a
                                       rank's routed tokens, padded to it, dropping the rest;
                                       0: dropless (docs/cost-model.md) */
} PpParallelParams;

typedef struct {
    int32_t global_batch; /* sequences per optimizer step, all D replicas together */
    int32_t steps;        /* optimizer steps */
} PpTrainingParams;

typedef struct {
    gboolean set; /* TRUE when [costs] gave explicit times */
    /* Full-stage times (all of a stage's chunks) in ns. forward_us, backward_us, weight_us,
     * update_us and fused_backward_us each take one value for every stage or one value per
     * stage (stage 0 first); the *_stage_ns lists hold them as given and
     * pp_scenario_stage_cost_ns() reads a stage's entry. The scalars are the largest entry: the
     * bottleneck that searching generators plan with. */
    int64_t  forward_ns;        /* largest forward F of one micro-batch */
    int64_t  backward_ns;       /* largest B (input gradient), or the B part of BW */
    int64_t  weight_ns;         /* largest W (weight gradient) */
    int64_t  comm_ns;           /* one stage-to-stage hop */
    int64_t  update_ns;         /* largest optimizer step (default 0) */
    int64_t *forward_stage_ns;  /* (n_forward_stage) */
    int32_t  n_forward_stage;   /* 1 or pipeline.stages (0 without [costs]) */
    int64_t *backward_stage_ns; /* (n_backward_stage) */
    int32_t  n_backward_stage;  /* 1 or pipeline.stages */
    int64_t *weight_stage_ns;   /* (n_weight_stage) */
    int32_t  n_weight_stage;    /* 1 or pipeline.stages */
    int64_t *update_stage_ns;   /* (n_update_stage) */
    int32_t  n_update_stage;    /* 1 or pipeline.stages */
    int64_t *fused_stage_ns;    /* (n_fused_stage) fused backward BW, or NULL: a BW costs
                                   backward + weight of its stage */
    int32_t  n_fused_stage;     /* 0, 1 or pipeline.stages */
    int64_t *stash_stage_ns;    /* (n_stash_stage) copying a stage's weights for stashing
                                   (pipedream, 2bw), or NULL: free */
    int32_t n_stash_stage;      /* 0, 1 or pipeline.stages */
} PpCostParams;

typedef struct {
    char **paths;        /* NULL-terminated extra text files/dirs; NULL: default corpus */
    char  *cache_dir;    /* where fetched packages and shards live (default .cache) */
    double val_fraction; /* share of documents held out for validation */
} PpDataParams;

typedef struct {
    char    *name;   /* "adamw" or "muon" */
    double   lr;     /* peak learning rate */
    double   min_lr; /* end of the cosine decay */
    int32_t  warmup_steps;
    double   weight_decay;
    double   beta1, beta2, eps;
    double   momentum;       /* muon */
    double   muon_lr;        /* muon peak lr (hidden matrices); follows lr's schedule */
    int32_t  ns_steps;       /* muon Newton-Schulz iterations */
    double   grad_clip;      /* per-stage clipping threshold on the L2 norm; 0 = off */
    gboolean error_feedback; /* update-level error feedback */
} PpOptimizerParams;

typedef struct {
    uint64_t seed;
    int32_t  eval_every;         /* steps between validation passes; 0 = only at the end */
    int32_t  eval_batches;       /* micro-batches per validation pass */
    int32_t  checkpoint_every;   /* steps; 0 = only at the end when --out is given */
    int32_t  keep_checkpoints;   /* newest complete units kept; 0 = all */
    int32_t  threads;            /* kernel threads per worker (0 = automatic) */
    gboolean speed_reference;    /* time a fixed kernel on every stage after each U */
    char    *backend;            /* executor backend name (pacer-train checks it) */
    int32_t *layers_per_stage;   /* (n_layers_per_stage) in virtual-stage order, or NULL:
                                    balanced by cost */
    int32_t  n_layers_per_stage; /* stages * chunks when layers_per_stage is set, else 0 */
    int32_t  log_every;
    double   comm_timeout_s; /* multi-process runs: deadline of every wait for a peer, > 0 */
    int32_t *devices;        /* (n_devices) device id of each stage (GPU backends), or NULL: the
                                backend spreads the stages over the visible devices */
    int32_t n_devices;       /* pipeline.stages when devices is set, else 0 */
    char   *precision;       /* "fp32" or "bf16", or NULL: the backend's default (cpu: fp32, cuda:
                                bf16) */
} PpRunParams;

typedef struct _PpScenario PpScenario;
struct _PpScenario {
    char             *path; /* the file it came from (or "<defaults>") */
    PpModelParams     model;
    PpHardwareParams  hardware;
    PpPipelineParams  pipeline;
    PpParallelParams  parallel;
    PpTrainingParams  training;
    PpCostParams      costs;
    PpDataParams      data;
    PpOptimizerParams optimizer;
    PpRunParams       run;
    /* NULL-terminated warnings about what the inputs describe and the model does not capture
     * (model.hf_config's sliding windows, tied embeddings, ...), each naming its file and
     * field, for the command line to print; NULL when none. */
    char **warnings;
    /* Private to pp-scenario.c: bit j set when the j-th DERIVED key of the table was absent
     * (derived), so that pp_scenario_with() derives it again for the changed scenario. */
    uint32_t derived_keys;
};

/* Loads @path and applies @overrides ("section.key=value", NULL-terminated, nullable), then
 * derives absent values (global_batch or microbatch_size, hardware.devices, warmup_steps)
 * and checks consistency. Relative order_file paths start at @path's folder; the stored
 * order_file is absolute. Errors are PP_SCENARIO_ERROR_* (pp-error.h): NOT_FOUND (also for
 * a missing order_file), PARSE, UNKNOWN_SECTION, UNKNOWN_KEY, INVALID_VALUE (also a
 * malformed override), UNKNOWN_PRESET, INCONSISTENT, MISSING_KEY.
 * Batch rule per schedule: paci and async-1f1b: global_batch = microbatch_size *
 * accumulation; pipedream: global_batch = microbatch_size; all others (flush, 2bw,
 * custom): global_batch = microbatch_size * microbatches; each times parallel.data.
 * Returns: (transfer full), or NULL with @error set. */
PpScenario *pp_scenario_load(const char *path, const char *const *overrides, GError **error);
/* Same, and the keys named in @derive ("section.key", NULL-terminated, nullable; keys derived
 * when absent: microbatch_size, global_batch, ...) are derived as if the file and @overrides
 * did not give them (a sweep point that keeps the global batch re-derives the micro-batch
 * size). */
PpScenario *pp_scenario_load_deriving(const char *path, const char *const *overrides,
                                      const char *const *derive, GError **error);
/* Same as pp_scenario_load(), from an in-memory key file text (tests); @name is used in messages
 * and as scenario->path; relative order_file paths start at the current directory. */
PpScenario *pp_scenario_load_data(const char *data, const char *name, const char *const *overrides,
                                  GError **error);
void        pp_scenario_free(PpScenario *scenario);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PpScenario, pp_scenario_free)

/* A typed change to a loaded scenario (pp_scenario_with()): plan rows, compare rows and tta
 * targets are variants of one scenario. A field left 0 (NULL, FALSE) keeps the scenario's
 * value; the counts take the key table's ranges. */
typedef struct {
    const PpSchedKindInfo *kind;            /* pipeline.schedule */
    int32_t                stages;          /* pipeline.stages */
    int32_t                chunks;          /* pipeline.chunks */
    int32_t                microbatches;    /* pipeline.microbatches */
    int32_t                accumulation;    /* pipeline.accumulation */
    int32_t                microbatch_size; /* pipeline.microbatch_size */
    int32_t                global_batch;    /* training.global_batch */
    int32_t                steps;           /* training.steps */
    int32_t                data;            /* parallel.data */
    int32_t                tensor;          /* parallel.tensor */
    int32_t                context;         /* parallel.context */
    int32_t                expert;          /* parallel.expert */
    int32_t                expert_tensor;   /* parallel.expert_tensor */
    int32_t                devices;         /* hardware.devices */
    gboolean               set_recompute;   /* TRUE: model.recompute = recompute */
    PpRecompute            recompute;
    gboolean               set_sequence_parallel; /* TRUE: parallel.sequence_parallel = ... */
    gboolean               sequence_parallel;
    gboolean               set_sharding; /* TRUE: parallel.distributed_optimizer and fsdp */
    gboolean               distributed_optimizer;
    gboolean               fsdp;
    gboolean               static_mode; /* TRUE: pipeline.mode = static */
} PpScenarioDelta;

/* @base changed by @delta, then checked and derived as pp_scenario_load() does: the values
 * @base derived (absent from its file, e.g. microbatch_size from global_batch) are derived
 * again, so the result equals loading @base's file with the same values given as
 * "section.key=value" overrides. Errors are those of pp_scenario_load()'s checks
 * (PP_SCENARIO_ERROR_INCONSISTENT, MISSING_KEY, NOT_FOUND, or the order file's).
 * Returns: (transfer full), or NULL with @error set. */
PpScenario *pp_scenario_with(const PpScenario *base, const PpScenarioDelta *delta, GError **error);

/* The effective scenario as key-file text: every key of every section (presets resolved,
 * derived values filled in, durations in us, order_file absolute), each with its
 * description as a comment; [hardware] and [costs] only when set. Loading the text gives
 * the same scenario. Returns: (transfer full). */
char *pp_scenario_to_data(const PpScenario *scenario);

/* TRUE when the file or an override gave @section.@key, FALSE when the scenario derived it.
 * The key must be one that is derived when absent
 * (microbatch_size, global_batch, devices, ...; another aborts). */
gboolean pp_scenario_key_given(const PpScenario *scenario, const char *section, const char *key);

/* The value of @section.@key as pp_scenario_to_data() writes it (file units). The key must be
 * one of the table's (an unknown one aborts). Returns: (transfer full) (nullable): NULL when
 * an optional key is unset. */
char *pp_scenario_value(const PpScenario *scenario, const char *section, const char *key);

/* One key of the scenario table, for tools and tests that walk every key. */
typedef struct {
    const char *section;
    const char *key;
    gboolean    numeric;      /* a number, a whole number or a list of whole numbers */
    gboolean    whole;        /* whole numbers only */
    gboolean    list;         /* comma-separated (each element in the range) */
    double      min, max;     /* valid range in file units (numeric keys) */
    gboolean    min_excluded; /* the range is (min, ... */
    gboolean    max_excluded; /* ..., max) */
} PpScenarioKeyInfo;

/* The number of keys in the scenario table. */
size_t pp_scenario_n_keys(void);
/* Fills @info with key @index (< pp_scenario_n_keys()), in table order; its strings are
 * static. */
void pp_scenario_key_info(size_t index, PpScenarioKeyInfo *info);

/* Fills schedule parameters from the scenario (borrowed strings). f_ns/b_ns/w_ns/comm_ns
 * are the [costs] per chunk (stage time / chunks) when set, else 0 (the simulator fills
 * them from its cost model). */
void pp_scenario_schedule_params(const PpScenario *scenario, PpScheduleParams *params);
/* The [costs] time (ns) of op @kind on @stage, one full stage: F forward, B backward, W weight,
 * U update, BW the fused backward. A list's entry for @stage (its only entry when it holds one
 * value); without a list (a hand-filled PpCostParams) the scalar field; BW without
 * fused_backward_us: -1 (the caller charges B + W). */
int64_t pp_scenario_stage_cost_ns(const PpCostParams *costs, PpOpKind kind, int32_t stage);
/* [costs] stash_us of @stage in ns: the time to copy its weights, 0 without the key. */
int64_t pp_scenario_stash_ns(const PpCostParams *costs, int32_t stage);
/* The memory model's shape (pp-memory.h) of @scenario: model, micro-batch and layout. */
void pp_scenario_memory_shape(const PpScenario *scenario, PpMemoryShape *shape);
/* TRUE when model.ffn is swiglu (three hidden x ffn_hidden matrices per layer). Like the two
 * below, a NULL string (a PpScenario filled by hand) reads as the key's default: FALSE. */
gboolean pp_scenario_ffn_gated(const PpScenario *scenario);
/* TRUE when model.precision is fp8. */
gboolean pp_scenario_precision_fp8(const PpScenario *scenario);
/* Bytes per parameter of the gradient buffer: parallel.grad_bytes when given, else
 * Megatron-LM's default for model.precision (docs/memory.md): 2 for fp16, 4 for bf16 and fp8
 * (and for a NULL precision, read as bf16). */
int32_t pp_scenario_grad_bytes(const PpScenario *scenario);
/* TRUE when model.attention is mla (multi-head latent attention). */
gboolean pp_scenario_attention_mla(const PpScenario *scenario);
/* TRUE when model.attention_flops is causal (half the s x s score FLOPs). */
gboolean pp_scenario_attention_causal(const PpScenario *scenario);
/* TRUE when hardware.cost_model is operators (the operator-level cost model). */
gboolean pp_scenario_cost_operators(const PpScenario *scenario);
/* model.recompute as a PpRecompute. */
PpRecompute pp_scenario_recompute(const PpScenario *scenario);
/* The model.recompute value of @recompute: "none", "selective", "full" or "op" (static). */
const char *pp_recompute_name(PpRecompute recompute);
/* model.recompute_modules as PpRecomputeModule bits: core_attn when the key is absent, 0
 * unless recompute = selective. */
guint pp_scenario_recompute_modules(const PpScenario *scenario);
/* The recompute_modules name of PpRecomputeModule bit number @bit (static). */
const char *pp_recompute_module_name(guint bit);
/* The PpRecomputeModule bit of the module @name in @module; FALSE when there is none. */
gboolean pp_recompute_module_lookup(const char *name, guint *module);
/* model.recompute_method as a PpRecomputeMethod (NULL: uniform). */
PpRecomputeMethod pp_scenario_recompute_method(const PpScenario *scenario);
/* parallel.fsdp_impl as a PpFsdpImpl (NULL: megatron). */
PpFsdpImpl pp_scenario_fsdp_impl(const PpScenario *scenario);
/* GPUs of the whole job: parallel.data * parallel.tensor * parallel.context *
 * pipeline.stages (checked to fit int32_t when the scenario loads). */
int64_t pp_scenario_gpus(const PpScenario *scenario);
/* pipeline.partition as a PpPartitionMode. */
PpPartitionMode pp_scenario_partition_mode(const PpScenario *scenario);
/* parallel.context_comm as a PpContextComm. */
PpContextComm pp_scenario_context_comm(const PpScenario *scenario);
/* parallel.moe_dispatcher as a PpMoeDispatcher. */
PpMoeDispatcher pp_scenario_moe_dispatcher(const PpScenario *scenario);

G_END_DECLS
