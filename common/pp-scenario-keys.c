/* SPDX-License-Identifier: MIT
 * pp-scenario-keys.c: the scenario key table and its values. One static key table drives the
 * defaults, parsing, --set overrides, unknown-key errors, freeing and pp_scenario_to_data.
 * Per section, the preset key (first in the table) fills the section, then explicit keys
 * override it. The typed readings of the values (pp_scenario_recompute, pp_scenario_gpus, ...)
 * live here too, below everything that parses and checks a scenario.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "pp-error.h"
#include "pp-hf-config.h"
#include "pp-presets.h"
#include "pp-scenario-private.h"

/* --- the key table --- */

static const PpScenarioSection pp_scenario_sections[] = {
    {"model", TRUE},     {"hardware", FALSE},  {"pipeline", TRUE},
    {"parallel", FALSE}, {"training", FALSE},  {"costs", FALSE},
    {"data", FALSE},     {"optimizer", FALSE}, {"run", FALSE},
};

static const char *const pp_mode_choices[] = {"static", "dynamic", NULL};
static const char *const pp_partition_choices[] = {"balanced", "even", NULL};
static const char *const pp_moe_dispatcher_choices[] = {"alltoall", "deepep", "hybridep", NULL};
static const char *const pp_optimizer_choices[] = {"adamw", "muon", NULL};
/* PpRecompute order */
static const char *const pp_recompute_choices[] = {"none", "selective", "full", "op", NULL};
/* PpRecomputeModule bit order (Megatron-Core's recompute_modules names) */
static const char *const pp_recompute_module_names[] = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts", NULL};
static const char *const pp_precision_choices[] = {"fp32", "bf16", NULL};
/* PpRecomputeMethod order */
static const char *const pp_recompute_method_choices[] = {"uniform", "block", NULL};
/* PpFsdpImpl order */
static const char *const pp_fsdp_impl_choices[] = {"megatron", "fsdp2", NULL};
/* PpContextComm order */
static const char *const pp_context_comm_choices[] = {"ring", "a2a", NULL};
/* [model] ffn: the first is GPT-2's two-matrix MLP, the second the gated three-matrix one */
static const char *const pp_ffn_choices[] = {"gelu", "swiglu", NULL};
static const char *const pp_model_precision_choices[] = {"bf16", "fp8", "fp16", NULL};
static const char *const pp_attention_flops_choices[] = {"full", "causal", NULL};
static const char *const pp_attention_choices[] = {"mha", "mla", NULL};
/* [hardware] cost_model: the first is the whole-layer curve */
static const char *const pp_cost_model_choices[] = {"curve", "operators", NULL};

#define PP_OFF(field) offsetof(PpScenario, field)

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
const PpScenarioKey pp_scenario_keys[] = {
    PP_TEXT("model", "preset", PP_KEY_MODEL_PRESET, model.preset, NULL, PP_KEY_OPTIONAL,
            "named shape that fills this section; the keys below override it"),
    PP_TEXT("model", "hf_config", PP_KEY_HF_CONFIG, model.hf_config, NULL, PP_KEY_OPTIONAL,
            "a Hugging Face config.json, relative to this file, whose shape fills this section "
            "after preset; the keys below override it"),
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
            "activation recomputation (simulator): none, selective (the modules of "
            "recompute_modules are recomputed in the backward; default: attention scores, "
            "softmax and dropout), full (only each layer's input is kept; the backward reruns "
            "the forward) or op (torchtitan's per-operator checkpointing: the attention core's "
            "and every other matrix product's outputs are kept, the rest recomputed)"),
    PP_TEXT("model", "recompute_modules", PP_KEY_STRING_LIST, model.recompute_modules, NULL,
            PP_KEY_OPTIONAL,
            "with recompute = selective, the modules recomputed (Megatron's recompute_modules), "
            "comma-separated: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, "
            "shared_experts; absent: core_attn"),
    PP_ENUM("model", "recompute_method", model.recompute_method, "uniform",
            pp_recompute_method_choices,
            "with recompute = full, which layers are checkpointed (Megatron's "
            "recompute_method): uniform (every layer, in groups of recompute_num_layers that each "
            "store their input) or block (the first recompute_num_layers of each virtual stage; "
            "the rest store everything)"),
    PP_INT("model", "recompute_num_layers", model.recompute_num_layers, "1", 1,
           PP_PARTITION_MAX_LAYERS, 0,
           "with recompute = full: the layers of one checkpointed group (uniform) or the "
           "checkpointed layers of each virtual stage (block)"),
    PP_INT("model", "kv_heads", model.kv_heads, NULL, 1, PP_DIM_MAX, PP_KEY_DERIVED,
           "key/value heads, dividing heads (grouped-query attention); absent: heads"),
    PP_INT("model", "head_dim", model.head_dim, NULL, 1, PP_DIM_MAX, PP_KEY_DERIVED,
           "width of one attention head; absent: hidden / heads"),
    PP_ENUM("model", "ffn", model.ffn, "gelu", pp_ffn_choices,
            "feed-forward block: gelu (two hidden x ffn_hidden matrices) or swiglu (three: "
            "gate, up and down)"),
    PP_INT("model", "ffn_hidden", model.ffn_hidden, NULL, 1, PP_FFN_MAX, PP_KEY_DERIVED,
           "feed-forward inner width; absent: 4 * hidden"),
    PP_TEXT("model", "swiglu_fusion", PP_KEY_BOOL, model.swiglu_fusion, "true", 0,
            "swiglu only (simulator memory): true, Megatron's fused bias-SwiGLU kernel, which "
            "stores the gate and up outputs and their product (6 bytes per token and FFN "
            "unit); false, separate kernels (--no-bias-swiglu-fusion, Megatron's legacy "
            "model, plain torch) that also keep the silu output (8)"),
    PP_TEXT("model", "tie_embeddings", PP_KEY_BOOL, model.tie_embeddings, "false", 0,
            "true: the LM head is the word embedding (Megatron without "
            "--untie-embeddings-and-output-weights); the simulator's memory counts one copy "
            "where one virtual stage holds both ends; with pipeline stages the last keeps its "
            "own copy, as Megatron does"),
    PP_ENUM("model", "precision", model.precision, "bf16", pp_model_precision_choices,
            "the layers' matrix products (simulator): bf16 at hardware.peak_tflops, fp8 at "
            "hardware.peak_fp8_tflops (attention scores and the LM head stay bf16), or fp16 "
            "(bf16's rate and bytes; sets parallel.grad_bytes' default to 2)"),
    PP_ENUM("model", "attention_flops", model.attention_flops, "full", pp_attention_flops_choices,
            "attention score FLOPs (simulator): full counts and computes all s x s scores "
            "(Megatron's convention), causal half of them (a causal kernel skips the masked "
            "half)"),
    PP_ENUM("model", "attention", model.attention, "mha", pp_attention_choices,
            "attention block: mha (multi-head or grouped-query: kv_heads, head_dim) or mla "
            "(DeepSeek's multi-head latent attention: the five keys below)"),
    PP_INT("model", "q_lora_rank", model.q_lora_rank, "0", 0, PP_DIM_MAX, 0,
           "mla: query latent width; 0: queries projected straight from hidden"),
    PP_INT("model", "kv_lora_rank", model.kv_lora_rank, "0", 0, PP_DIM_MAX, 0,
           "mla: key/value latent width (> 0 with mla)"),
    PP_INT("model", "qk_nope_head_dim", model.qk_nope_head_dim, "0", 0, PP_DIM_MAX, 0,
           "mla: per-head query/key width without rotary embedding (> 0 with mla)"),
    PP_INT("model", "qk_rope_head_dim", model.qk_rope_head_dim, "0", 0, PP_DIM_MAX, 0,
           "mla: per-head rotary query/key width, the rotary key shared by all heads"),
    PP_INT("model", "v_head_dim", model.v_head_dim, "0", 0, PP_DIM_MAX, 0,
           "mla: per-head value width (> 0 with mla)"),
    PP_INT("model", "experts", model.experts, "0", 0, PP_DIM_MAX, 0,
           "routed experts per mixture-of-experts layer; 0: a dense model"),
    PP_INT("model", "experts_per_token", model.experts_per_token, "0", 0, PP_DIM_MAX, 0,
           "routed experts each token runs through, 1..experts (with experts > 0)"),
    PP_INT("model", "shared_experts", model.shared_experts, "0", 0, PP_DIM_MAX, 0,
           "experts every token runs through besides the routed ones"),
    PP_INT("model", "expert_ffn_hidden", model.expert_ffn_hidden, NULL, 1, PP_FFN_MAX,
           PP_KEY_DERIVED,
           "one expert's FFN inner width (ffn and its gating apply); absent: "
           "ffn_hidden"),
    PP_INT("model", "dense_layers", model.dense_layers, "0", 0, PP_PARTITION_MAX_LAYERS, 0,
           "leading dense layers (FFN of ffn_hidden) before the mixture-of-experts layers"),

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
    PP_INT("hardware", "nics_per_node", hardware.nics_per_node, "1", 1, PP_REPLICAS_MAX, 0,
           "NICs of a node a tensor-parallel group or context-parallel ring spanning nodes "
           "drives at once, each at internode_gbps (rail-optimised: one per GPU)"),
    PP_SCALED("hardware", "collective_us", hardware.collective_ns, "0", PP_US_MAX, 1e3, 0,
              "fixed cost of one collective (all-reduce, all-gather, reduce-scatter, "
              "all-to-all) in us, before its steps' link latencies (NCCL's base latency)"),
    PP_NUM("hardware", "allreduce_busbw_gbps", hardware.allreduce_busbw_bytes_per_s, "0", 0.0,
           PP_RATE_MAX, 1e9, 0,
           "bus bandwidth of the data-parallel collectives in GB/s, as nccl-tests reports a "
           "measured all-reduce's busbw (pacer-bench-comm prints pacer-train's); 0: the links'"),
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
    PP_NUM("hardware", "kernel_eff_fp8", hardware.kernel_eff_fp8, "1", 0.0, 1.0, 1.0,
           PP_KEY_MIN_EXCL,
           "analytic cost model: fp8 matrix products (model.precision = fp8) reach "
           "kernel_eff_fp8 x eff of peak_fp8_tflops; 1: the full fp8 rate"),
    PP_NUM("hardware", "alltoall_eff", hardware.alltoall_eff, "1", 0.0, 1.0, 1.0, PP_KEY_MIN_EXCL,
           "analytic cost model: an expert all-to-all moves its bytes at alltoall_eff x the "
           "link bandwidths (link_gbps, internode_gbps); 1: the full bandwidth"),
    PP_ENUM("hardware", "cost_model", hardware.cost_model, "curve", pp_cost_model_choices,
            "analytic cost model: curve (a layer's FLOPs at the kernel-efficiency curve) or "
            "operators (each matrix product by its shape, attention, memory-bound operators by "
            "bytes, a host floor of launch_us per operator)"),
    PP_SCALED("hardware", "launch_us", hardware.launch_ns, "0", PP_US_MAX, 1e3, 0,
              "cost_model = operators: the host's time to launch one operator; a pass takes at "
              "least its operators' launches"),
    PP_INT("hardware", "sms", hardware.sms, "0", 0, 1 << 16, 0,
           "cost_model = operators: multiprocessors a matrix product's 128 x 128 tiles fill in "
           "waves; 0: no wave quantisation"),

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
    PP_TEXT("parallel", "fsdp", PP_KEY_BOOL, parallel.fsdp, "false", 0,
            "fully sharded data parallelism (ZeRO-3, simulator): weights, gradients and Adam's "
            "state sharded over data x context; each layer's weights are all-gathered for its "
            "forward and backward and its gradients reduce-scattered, overlapped with the "
            "neighbouring layers' compute"),
    PP_ENUM("parallel", "fsdp_impl", parallel.fsdp_impl, "megatron", pp_fsdp_impl_choices,
            "with fsdp: megatron (Megatron's custom FSDP: bf16 weight, fp32 master and gradient "
            "shards) or fsdp2 (torch FSDP2: fp32 parameter and gradient shards, the bf16 "
            "weights only gathered); sets the memory model's bytes (simulator)"),
    PP_INT("parallel", "context", parallel.context, "1", 1, PP_TENSOR_MAX, 0,
           "context-parallel ranks C, each holding 1/C of every sequence; ring attention "
           "passes key/value blocks between them (simulator)"),
    PP_ENUM("parallel", "context_comm", parallel.context_comm, "ring", pp_context_comm_choices,
            "how the context-parallel ranks share attention: ring (key/value blocks passed "
            "rank to rank under the attention) or a2a (Ulysses: all-to-alls of q, k, v and the "
            "output turn sequence shards into head shards; the heads per tensor rank must "
            "divide by context) (simulator)"),
    PP_TEXT("parallel", "tp_comm_overlap", PP_KEY_BOOL, parallel.tp_comm_overlap, "false", 0,
            "the tensor-parallel all-gathers and reduce-scatters run under their GEMMs "
            "(Megatron's --tp-comm-overlap; needs sequence_parallel with tensor > 1): only "
            "their excess over the GEMMs, at least 1/tensor of them, is charged (simulator)"),
    PP_INT("parallel", "expert", parallel.expert, "1", 1, PP_REPLICAS_MAX, 0,
           "expert-parallel ranks EP sharing each MoE layer's routed experts, out of tensor x "
           "data (simulator)"),
    PP_INT("parallel", "expert_tensor", parallel.expert_tensor, NULL, 1, PP_TENSOR_MAX,
           PP_KEY_DERIVED,
           "ranks splitting each routed expert's FFN; expert x expert_tensor divides tensor x "
           "data (simulator); absent: tensor"),
    PP_TEXT("parallel", "moe_a2a_overlap", PP_KEY_BOOL, parallel.moe_a2a_overlap, "false", 0,
            "the expert all-to-alls of one micro-batch run under another micro-batch's "
            "compute, only their excess over the layer's compute is charged (simulator)"),
    PP_ENUM("parallel", "moe_dispatcher", parallel.moe_dispatcher, "alltoall",
            pp_moe_dispatcher_choices,
            "how an MoE layer's tokens reach their experts: alltoall (Megatron's all-to-all "
            "dispatcher, sized on the host), deepep or hybridep (fused dispatch and combine "
            "kernels; simulator)"),
    PP_NUM("parallel", "moe_capacity_factor", parallel.moe_capacity_factor, "0", 0.0, PP_DIM_MAX,
           1.0, 0,
           "token-dropping MoE dispatch: each expert runs ceil(moe_capacity_factor x tokens x "
           "experts_per_token / experts) of a rank's routed tokens, padded to that capacity, "
           "with no token counts on the host; 0: dropless (simulator)"),
    PP_TEXT("parallel", "overlap_grad_reduce", PP_KEY_BOOL, parallel.overlap_grad_reduce, "false",
            0,
            "the data-parallel gradient all-reduce starts layer by layer during a chunk's last "
            "backward instead of after it (simulator)"),
    PP_INT("parallel", "grad_bytes", parallel.grad_bytes, NULL, 1, 8, PP_KEY_DERIVED,
           "bytes per parameter of the gradient buffer, which the data-parallel reduction "
           "moves: 4 (fp32) or 2 (fp16, bf16); absent: Megatron's rule, 2 with model.precision "
           "= fp16, else 4 (bf16 and fp8 accumulate and reduce gradients in fp32) (simulator)"),

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

gboolean pp_key_is_text(PpKeyType type) {
    switch (type) {
    case PP_KEY_STRING:
    case PP_KEY_PATH:
    case PP_KEY_ENUM:
    case PP_KEY_SCHEDULE:
    case PP_KEY_MODEL_PRESET:
    case PP_KEY_HARDWARE_PRESET:
    case PP_KEY_HF_CONFIG:
        return TRUE;
    default:
        return FALSE;
    }
}

const PpScenarioSection *pp_scenario_section_find(const char *name) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_sections); i++) {
        if (strcmp(pp_scenario_sections[i].name, name) == 0)
            return &pp_scenario_sections[i];
    }
    return NULL;
}

const PpScenarioKey *pp_scenario_key_find(const char *section, const char *key) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (strcmp(k->section, section) == 0 && strcmp(k->key, key) == 0)
            return k;
    }
    return NULL;
}

/* Returns: (transfer full): "preset, layers, ..." */
char *pp_scenario_key_names(const char *section) {
    GString *names = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        if (strcmp(pp_scenario_keys[i].section, section) == 0)
            g_string_append_printf(names, "%s%s", names->len ? ", " : "", pp_scenario_keys[i].key);
    }
    return g_string_free(names, FALSE);
}

/* Keys earlier versions read and this one does not, with what took their place. */
static const struct {
    const char *section, *key, *why;
} pp_retired_keys[] = {
    {"hardware", "moe_host_us_per_expert",
     "the MoE layer's host wait now follows from hardware.launch_us and "
     "parallel.moe_dispatcher (docs/cost-model.md, Dispatcher and host sync); remove the key"},
};

char *pp_scenario_unknown_key_hint(const char *section, const char *key) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_retired_keys); i++) {
        if (strcmp(pp_retired_keys[i].section, section) == 0 &&
            strcmp(pp_retired_keys[i].key, key) == 0)
            return g_strdup_printf("retired: %s", pp_retired_keys[i].why);
    }
    g_autofree char *valid = pp_scenario_key_names(section);
    return g_strdup_printf("valid keys: %s", valid);
}

char *pp_scenario_section_names(void) {
    GString *names = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_sections); i++)
        g_string_append_printf(names, "%s[%s]", i ? ", " : "", pp_scenario_sections[i].name);
    return g_string_free(names, FALSE);
}

/* The preset name (or Hugging Face config) that filled @section, or NULL (also for sections
 * without a preset key). */
const char *pp_scenario_section_preset(const PpScenario *sc, const char *section) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_scenario_keys); i++) {
        const PpScenarioKey *k = &pp_scenario_keys[i];
        if (strcmp(k->section, section) == 0 &&
            (k->type == PP_KEY_MODEL_PRESET || k->type == PP_KEY_HARDWARE_PRESET ||
             k->type == PP_KEY_HF_CONFIG) &&
            *PP_CFIELD(sc, k, char *) != NULL)
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
char *pp_scenario_key_expected(const PpScenarioKey *k) {
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
    case PP_KEY_HF_CONFIG: {
        g_autofree char *archs = pp_hf_config_architectures();
        return g_strdup_printf("the path of a Hugging Face config.json of %s", archs);
    }
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
    sc->model.head_dim = p->head_dim > 0 ? p->head_dim : -1;
    g_free(sc->model.attention);
    sc->model.attention = g_strdup(pp_attention_choices[p->kv_lora_rank > 0 ? 1 : 0]);
    sc->model.q_lora_rank = p->q_lora_rank;
    sc->model.kv_lora_rank = p->kv_lora_rank;
    sc->model.qk_nope_head_dim = p->qk_nope_head_dim;
    sc->model.qk_rope_head_dim = p->qk_rope_head_dim;
    sc->model.v_head_dim = p->v_head_dim;
    sc->model.experts = p->experts;
    sc->model.experts_per_token = p->experts_per_token;
    sc->model.shared_experts = p->shared_experts;
    sc->model.expert_ffn_hidden = p->expert_ffn_hidden > 0 ? p->expert_ffn_hidden : -1;
    sc->model.dense_layers = p->dense_layers;
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
    sc->hardware.nics_per_node = MAX(p->nics_per_node, 1);
    sc->hardware.collective_ns = p->collective_ns;
    /* a family member's calibration is its fitted sibling's (pp-presets.h) */
    const PpHardwarePreset *fit =
        p->calibration_of != NULL ? pp_preset_hardware_lookup(p->calibration_of) : p;
    PP_ASSERT(fit != NULL && (p->calibration_of == NULL || fit->calibrated));
    if (fit->calibrated) {
        sc->hardware.kernel_eff_max = fit->kernel_eff_max;
        sc->hardware.kernel_eff_half_tokens = fit->kernel_eff_half_tokens;
        sc->hardware.kernel_eff_half_hidden = fit->kernel_eff_half_hidden;
        sc->hardware.kernel_eff_fp8 = fit->kernel_eff_fp8;
        sc->hardware.alltoall_eff = fit->alltoall_eff;
        g_free(sc->hardware.cost_model);
        sc->hardware.cost_model = g_strdup(pp_cost_model_choices[fit->operator_costs ? 1 : 0]);
        sc->hardware.launch_ns = fit->launch_ns;
    }
    sc->hardware.sms = p->sms;
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
gboolean pp_scenario_parse_value(PpScenario *sc, const PpScenarioKey *k, const char *value,
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
    case PP_KEY_HF_CONFIG: {
        if (value[0] == '\0')
            return pp_scenario_value_error(k, origin, value, "empty", error);
        g_autofree char *path = g_canonicalize_filename(value, base_dir);
        PpModelPreset    shape;
        g_auto(GStrv) warnings = NULL;
        g_autoptr(GError) err = NULL;
        if (!pp_hf_config_read(path, &shape, &warnings, &err)) {
            g_set_error(error, PP_SCENARIO_ERROR, err->code, "%s: [%s] %s: %s", origin, k->section,
                        k->key, err->message);
            return FALSE;
        }
        pp_scenario_apply_model_preset(sc, &shape);
        /* the file replaced every shape field a preset set: the preset no longer names it */
        g_clear_pointer(&sc->model.preset, g_free);
        g_strfreev(sc->warnings);
        sc->warnings = warnings[0] != NULL ? g_steal_pointer(&warnings) : NULL;
        g_free(*PP_FIELD(sc, k, char *));
        *PP_FIELD(sc, k, char *) = g_steal_pointer(&path);
        return TRUE;
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
    case PP_KEY_HF_CONFIG:
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

PpRecompute pp_scenario_recompute(const PpScenario *scenario) {
    const char *r = scenario->model.recompute;
    PP_ASSERT(r != NULL);
    for (int i = 0; pp_recompute_choices[i] != NULL; i++) {
        if (strcmp(r, pp_recompute_choices[i]) == 0)
            return (PpRecompute)i;
    }
    PP_UNREACHABLE(); /* the key table accepts only the choices */
}

const char *pp_recompute_name(PpRecompute recompute) {
    PP_ASSERT(recompute >= PP_RECOMPUTE_NONE && recompute <= PP_RECOMPUTE_OP);
    return pp_recompute_choices[recompute];
}

const char *pp_recompute_module_name(guint bit) {
    PP_ASSERT(bit < PP_RECOMPUTE_N_MODULES);
    return pp_recompute_module_names[bit];
}

gboolean pp_recompute_module_lookup(const char *name, guint *module) {
    for (guint i = 0; pp_recompute_module_names[i] != NULL; i++) {
        if (strcmp(name, pp_recompute_module_names[i]) == 0) {
            *module = 1u << i;
            return TRUE;
        }
    }
    return FALSE;
}

guint pp_scenario_recompute_modules(const PpScenario *scenario) {
    if (pp_scenario_recompute(scenario) != PP_RECOMPUTE_SELECTIVE)
        return 0;
    guint mask = 0;
    for (char **name = scenario->model.recompute_modules; name != NULL && *name != NULL; name++) {
        guint module;
        PP_ASSERT(pp_recompute_module_lookup(*name, &module)); /* pp_scenario_check() */
        mask |= module;
    }
    return mask != 0 ? mask : PP_RECOMPUTE_MODULE_CORE_ATTN;
}

PpRecomputeMethod pp_scenario_recompute_method(const PpScenario *scenario) {
    return g_strcmp0(scenario->model.recompute_method, "block") == 0 ? PP_RECOMPUTE_BLOCK
                                                                     : PP_RECOMPUTE_UNIFORM;
}

PpContextComm pp_scenario_context_comm(const PpScenario *scenario) {
    return g_strcmp0(scenario->parallel.context_comm, "a2a") == 0 ? PP_CONTEXT_COMM_A2A
                                                                  : PP_CONTEXT_COMM_RING;
}

PpFsdpImpl pp_scenario_fsdp_impl(const PpScenario *scenario) {
    return g_strcmp0(scenario->parallel.fsdp_impl, "fsdp2") == 0 ? PP_FSDP_TORCH2
                                                                 : PP_FSDP_MEGATRON;
}

gboolean pp_scenario_cost_operators(const PpScenario *scenario) {
    return g_strcmp0(scenario->hardware.cost_model, "operators") == 0;
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

int32_t pp_scenario_grad_bytes(const PpScenario *scenario) {
    if (scenario->parallel.grad_bytes > 0)
        return scenario->parallel.grad_bytes;
    /* Megatron-LM (docs/memory.md): fp32 main gradients with bf16 parameters, fp16 ones with
     * fp16 parameters */
    return g_strcmp0(scenario->model.precision, "fp16") == 0 ? 2 : 4;
}

gboolean pp_scenario_attention_causal(const PpScenario *scenario) {
    return g_strcmp0(scenario->model.attention_flops, "causal") == 0;
}

int64_t pp_scenario_gpus(const PpScenario *scenario) {
    /* each factor <= 2^20 or < 2^31 (key ranges): the product fits int64_t */
    return (int64_t)scenario->parallel.data * scenario->parallel.tensor *
           scenario->parallel.context * scenario->pipeline.stages;
}

PpPartitionMode pp_scenario_partition_mode(const PpScenario *scenario) {
    PP_ASSERT(scenario->pipeline.partition != NULL);
    return strcmp(scenario->pipeline.partition, "even") == 0 ? PP_PARTITION_EVEN
                                                             : PP_PARTITION_BALANCED;
}

PpMoeDispatcher pp_scenario_moe_dispatcher(const PpScenario *scenario) {
    const char *name = scenario->parallel.moe_dispatcher;
    PP_ASSERT(name != NULL);
    if (strcmp(name, "deepep") == 0)
        return PP_MOE_DISPATCHER_DEEPEP;
    return strcmp(name, "hybridep") == 0 ? PP_MOE_DISPATCHER_HYBRIDEP : PP_MOE_DISPATCHER_ALLTOALL;
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
