/* SPDX-License-Identifier: MIT
 * pp-memory.h: the memory model of docs/design.md §4.5 (bf16 training with fp32 master weights
 * and Adam), shared by the simulator's cost model (sim/sim-cost.c) and the executor, which
 * logs it as the predicted bytes next to the bytes its device arenas really take. Plain
 * arithmetic on the model shape; no allocation.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* Training state per parameter by category, as Megatron-Core allocates it for bf16 training
 * (docs/memory.md): weights = bf16 copy (2) + fp32 master (4); gradients in the gradient
 * buffer's dtype (PpMemoryShape.grad_bytes: 4 for Megatron's fp32 main gradients, 2 for bf16);
 * optimizer state = Adam first and second moments in fp32 (4 + 4). A stashed weight version is
 * one more bf16 copy (2). A distributed optimizer (ZeRO-1) shards the master copy and the
 * moments over the data replicas (the experts' over the expert-data-parallel ranks). */
#define PP_MEMORY_BF16_WEIGHT_BYTES_PER_PARAM 2
#define PP_MEMORY_MASTER_BYTES_PER_PARAM      4
#define PP_MEMORY_WEIGHTS_BYTES_PER_PARAM     6
#define PP_MEMORY_GRADS_BYTES_PER_PARAM       2 /* a shape without grad_bytes (set by hand) */
#define PP_MEMORY_OPTIM_BYTES_PER_PARAM       8
#define PP_MEMORY_WEIGHT_COPY_BYTES_PER_PARAM 2
/* The caching allocator's reserve over what is allocated (fragmentation and the blocks it
 * rounds up to), a stated constant: reserved = allocated x (1 + this). */
#define PP_MEMORY_RESERVED_OVERHEAD 0.05

/* Activation recomputation (Korthikanti et al. 2022; [model] recompute). */
typedef enum {
    PP_RECOMPUTE_NONE,      /* every activation is stored */
    PP_RECOMPUTE_SELECTIVE, /* the named modules (PpRecomputeModule; default: the attention
                               core's scores, softmax and dropout) are recomputed */
    PP_RECOMPUTE_FULL,      /* checkpointed layers store their input; the backward reruns F */
    PP_RECOMPUTE_OP,        /* torchtitan's per-operator checkpointing: the attention core's and
                               every other matrix product's outputs are kept, the rest rerun */
} PpRecompute;
/* The modules selective recomputation reruns (Megatron-Core's recompute_modules,
 * megatron/core/transformer/transformer_config.py), as bits of a mask in this order. */
typedef enum {
    PP_RECOMPUTE_MODULE_CORE_ATTN = 1 << 0,      /* the attention core */
    PP_RECOMPUTE_MODULE_MOE_ACT = 1 << 1,        /* the routed experts' activation function */
    PP_RECOMPUTE_MODULE_LAYERNORM = 1 << 2,      /* the norms that are not fused into a linear */
    PP_RECOMPUTE_MODULE_MLA_UP_PROJ = 1 << 3,    /* MLA's up-projections and rotary */
    PP_RECOMPUTE_MODULE_MLP = 1 << 4,            /* a dense block's whole FFN */
    PP_RECOMPUTE_MODULE_MOE = 1 << 5,            /* an MoE block's whole MoE layer */
    PP_RECOMPUTE_MODULE_SHARED_EXPERTS = 1 << 6, /* the shared experts */
} PpRecomputeModule;
#define PP_RECOMPUTE_N_MODULES 7
/* Which layers full recomputation checkpoints (Megatron's recompute_method), with N =
 * recompute_layers: */
typedef enum {
    PP_RECOMPUTE_UNIFORM, /* every layer, in groups of N: each group stores its input and
                             reruns its N layers at once in the backward */
    PP_RECOMPUTE_BLOCK,   /* the first N layers of each virtual stage, one by one; the rest
                             store everything */
} PpRecomputeMethod;
/* How ZeRO-3 holds its shards ([parallel] fsdp_impl). */
typedef enum {
    PP_FSDP_MEGATRON, /* Megatron's custom FSDP: bf16 weight, fp32 master and gradient-dtype
                         shards; per gather the bf16 block, its bf16 gradient */
    PP_FSDP_TORCH2,   /* torch FSDP2 with bf16 compute, fp32 reduce: fp32 parameter (the
                         master) and fp32 gradient shards; per gather the bf16 block, its bf16
                         gradient and that gradient cast to fp32 for the reduce-scatter */
} PpFsdpImpl;
/* Tensor-parallel communication overlap (Transformer Engine's initialize_ub()) holds one
 * buffer of the micro-batch's full activation, b s h / C bf16 values, per overlapped GEMM:
 * the forward's qkv, proj, fc1 and fc2, the input gradients' qkv, proj, fc1 and fc2, the
 * weight gradients' qkv and fc1 (fp8 runs keep some in 1 byte: an upper bound). The
 * all-gathered layer input of sequence parallelism lands in one of them. */
#define PP_MEMORY_TP_OVERLAP_BUFFERS 10
/* Bytes per logit at the loss: the output layer's bf16 logits (2) and the fp32 copy Megatron's
 * vocab-parallel cross-entropy makes of them and turns into the softmax it keeps for the
 * backward (4; megatron/core/tensor_parallel/cross_entropy.py, calculate_logits_max(): the
 * caller still holds the bf16 logits). The backward has the same 6 at its start: the fp32
 * gradient, written over the softmax, and its bf16 cast. */
#define PP_MEMORY_LOGIT_BYTES 6

/* The model shape the memory model reads (doubles: products of dimensions stay exact below
 * 2^53 for every accepted scenario, and the callers check their sums). */
typedef struct {
    double      microbatch_size;   /* b sequences */
    double      seq_len;           /* s */
    double      hidden;            /* h */
    double      heads;             /* a */
    double      vocab;             /* V */
    gboolean    flash_attention;   /* no stored s x s attention scores */
    double      tensor;            /* T-way tensor parallelism (0 or 1: none) */
    gboolean    sequence_parallel; /* Megatron sequence parallelism shards the rest over T */
    gboolean    tp_comm_overlap;   /* userbuffers with it (PP_MEMORY_TP_OVERLAP_BUFFERS) */
    PpRecompute recompute;
    guint       recompute_modules; /* with PP_RECOMPUTE_SELECTIVE: PpRecomputeModule bits;
                                      0: PP_RECOMPUTE_MODULE_CORE_ATTN (Megatron's default) */
    double zero_shards;            /* replicas sharing the master weights and moments (ZeRO-1);
                                      0 or 1: none */
    /* The layer beyond GPT-2's; 0 (or FALSE) gives GPT-2's value, so a shape filled without
     * them (the executor's) is the GPT-2 layer. */
    double   kv_heads;   /* k key/value heads (grouped-query attention); 0: heads */
    double   head_dim;   /* d; 0: hidden / heads */
    double   ffn_hidden; /* f; 0: 4 * hidden */
    gboolean ffn_gated;  /* SwiGLU: three h x f matrices (gate, up, down) instead of two */
    /* Multi-head latent attention (DeepSeek-V2/V3, [model] attention = mla): queries and
     * keys/values pass through low-rank latents; kv_heads and head_dim are then unused. */
    gboolean mla;
    double   q_lora_rank;      /* r_q: query latent width; 0: queries straight from h */
    double   kv_lora_rank;     /* r_kv: key/value latent width */
    double   qk_nope_head_dim; /* per-head query/key width without rotary embedding */
    double   qk_rope_head_dim; /* per-head rotary width (the rotary key is shared by heads) */
    double   v_head_dim;       /* per-head value width */
    /* Mixture of experts ([model] experts > 0): every layer from dense_layers on replaces its
     * FFN by a router of E logits, E routed experts (each token goes to K of them) and S
     * shared experts, all gelu or swiglu of width expert_ffn_hidden. */
    double  experts;             /* E; 0: dense model */
    double  experts_per_token;   /* K */
    double  shared_experts;      /* S */
    double  expert_ffn_hidden;   /* f_e */
    int32_t dense_layers;        /* leading dense layers */
    double  expert;              /* EP ranks sharing the routed experts (0 or 1: none) */
    double  expert_tensor;       /* ranks splitting each routed expert (0 or 1: none) */
    double  moe_capacity_factor; /* > 0: token-dropping dispatch, each expert padded to its
                                    capacity (pp_memory_moe_routed_rows()); 0: dropless */
    double fsdp_shards;          /* ZeRO-3: ranks sharding the bf16 weights and gradients too
                                    (with the master weights and moments; 0 or 1: none) */
    double context;              /* C context-parallel ranks, each holding s/C tokens of every
                                    sequence: activations and logits / C (0 or 1: none) */
    double grad_bytes;           /* bytes per parameter of the gradient buffer: 4 (fp32 main
                                    gradients) or 2 (bf16); 0: 2 */
    double expert_zero_shards;   /* ranks sharing the routed experts' master weights and
                                    moments (ZeRO-1) or all their state (ZeRO-3): the
                                    expert-data-parallel group, data x tensor x context /
                                    (expert x expert_tensor); 0: zero_shards */
    PpRecomputeMethod recompute_method; /* with PP_RECOMPUTE_FULL */
    int32_t           recompute_layers; /* N of recompute_method; 0 or 1: one layer */
    PpFsdpImpl        fsdp_impl;        /* with fsdp_shards > 1 */
    double            msg_bytes;        /* one stage-to-stage activation message on this GPU
                                           (0: a single stage, no pipeline buffers) */
    gboolean tied_embeddings; /* the LM head is the word embedding: one copy where one virtual
                                 stage holds both ends (model.tie_embeddings) */
    gboolean swiglu_unfused;  /* SwiGLU as separate kernels, which also keep the silu output:
                                 8f bytes per token instead of 6f (model.swiglu_fusion) */
} PpMemoryShape;

/* Per-part quantities of the model on one GPU (parameters, bytes per live micro-batch): with
 * tensor parallelism every count below is that GPU's 1/T share. */
typedef struct {
    double layer_params; /* per block, (matrices + biases + LayerNorms) / T: GPT-2's
                            (12h^2 + 13h) / T; in general pp_memory_layer_matrix_params()
                            + (a + 2k)d + 2h + (f or 2f) + 4h, all over T */
    double embed_params; /* (V h + s h) / T (virtual stage 0) */
    double head_params;  /* final LayerNorm + untied head: (V h + 2h) / T (last vstage) */
    double weights_bpp;  /* bytes per parameter: bf16 copy + master (sharded by ZeRO-1;
                            both by ZeRO-3; FSDP2: the fp32 shard alone) */
    double grads_bpp;    /* gradient buffer, grad_bytes (sharded by ZeRO-3) */
    double optim_bpp;    /* Adam moments (sharded by ZeRO-1) */
    double state_bpp;    /* weights + gradients + optimizer */

    /* the head of a virtual stage that also holds the embedding: with tied embeddings its
     * final LayerNorm 2h / T, else head_params */
    double tied_head_params;
    /* the same for the routed experts, sharded over expert_zero_shards instead */
    double expert_weights_bpp, expert_grads_bpp, expert_optim_bpp, expert_state_bpp;
    double fsdp_buffer_bytes; /* ZeRO-3 (fsdp_shards > 1): per device, the gathered bf16
                                 weights of the current and the prefetched block and one
                                 block's gradients before their reduce-scatter (bf16; FSDP2
                                 also their fp32 cast), (2 x 2 + 2 (+ 4)) bytes x the largest
                                 block's unsharded parameters; else 0 */
    double comm_buffer_bytes; /* pipeline buffers: a received gradient and a sent activation
                                 in flight, 2 x msg_bytes; + with sequence parallelism the
                                 all-gathered layer input 2bsh/C a GEMM reads (with
                                 tp_comm_overlap PP_MEMORY_TP_OVERLAP_BUFFERS of them) */
    double layer_act_bytes;   /* activations of one block per live micro-batch, M_F: without
                                 T, recomputation or flash sb(34h + 5as) for GPT-2's layer,
                                 sb(10h + 4(ad + kd) + 4f (gelu) or 6f (swiglu) + 5as) in
                                 general (pp-memory.c); under full recomputation the value of
                                 a block that is not checkpointed (block method) */
    double layer_act_b_bytes; /* the part a split backward frees at B, M_B: sb(2h + 5as) in the
                                 plain case; W frees the rest */
    double layer_rerun_bytes; /* what selective or per-operator recomputation drops of a
                                 block's activations, rebuilt in its backward; else 0 */
    double layer_input_bytes; /* a checkpointed block's stored input, 2bsh (/T with sequence
                                 parallelism) / C */
    double logits_bytes;      /* logits at the loss per live micro-batch, 6bsV / T (last vstage) */
    /* An MoE block (layers >= first_moe_layer; G_MAXINT32 for a dense model): attention, S
     * shared experts and LayerNorms over T, the router replicated, the E routed experts over
     * expert x expert_tensor ranks; activations as a dense block's with the FFN's replaced by
     * K + S experts' and the routed tokens' copies (pp-memory.c). */
    int32_t first_moe_layer;
    double  moe_layer_params;
    double  moe_expert_params; /* the routed experts' share of moe_layer_params */
    double  moe_layer_act_bytes;
    double  moe_layer_act_b_bytes;
    double  moe_layer_rerun_bytes;
    /* Full recomputation (recompute FULL): method and N; otherwise recompute_layers is 0 */
    PpRecompute       recompute;
    PpRecomputeMethod recompute_method;
    int32_t           recompute_layers;
} PpMemoryModel;

void pp_memory_model(const PpMemoryShape *shape, PpMemoryModel *model);
/* The PpRecomputeModule bits selective recomputation reruns for @shape: its
 * recompute_modules (0: the attention core) with PP_RECOMPUTE_SELECTIVE, else 0. */
guint pp_memory_recompute_modules(const PpMemoryShape *shape);

/* Weights of one dense block's matrix products, the whole layer (not split over T):
 * attention (pp_memory_attention_matrix_params()) + FFN 2hf (gelu) or 3hf (swiglu); 12h^2 for
 * GPT-2's layer. A forward pass costs 2 FLOPs per such weight and token. */
double pp_memory_layer_matrix_params(const PpMemoryShape *shape);
/* Weights of one block's attention matrices: multi-head or grouped-query QKV h(a + 2k)d +
 * output projection adh; MLA h r_q + r_q a(d_nope + d_rope) (or h a(d_nope + d_rope) without
 * a query latent) + h(r_kv + d_rope) + r_kv a(d_nope + d_v) + a d_v h. */
double pp_memory_attention_matrix_params(const PpMemoryShape *shape);
/* Weights of one MoE block's matrix products: attention + router hE + (E + S) experts of
 * n_ffn h f_e (@active FALSE, the total) or K + S of them (@active TRUE, what one token
 * runs through: a forward costs 2 FLOPs per active weight and token). */
double pp_memory_moe_layer_matrix_params(const PpMemoryShape *shape, gboolean active);
/* Weights of the K + S experts one token runs through in an MoE block, (K + S) n_ffn h f_e:
 * the expert part of pp_memory_moe_layer_matrix_params(@shape, TRUE). */
double pp_memory_expert_matrix_params(const PpMemoryShape *shape);
/* The routed expert rows one token costs an MoE block, on average over the @tokens N one rank
 * routes: @experts_per_token K when dropless (@capacity_factor 0, the load balanced); with a
 * capacity factor cf > 0 each of the @experts E takes capacity = ceil(cf N K / E) rows, padded
 * to it when fewer arrive and dropping the rest (Megatron's get_capacity() with
 * moe_pad_expert_input_to_capacity): E x capacity / N, cf K rounded up to whole rows per
 * expert (below K when cf < 1). */
double pp_memory_moe_routed_rows(double capacity_factor, double tokens, double experts_per_token,
                                 double experts);
/* pp_memory_moe_routed_rows() for @shape's rank, N = bs / (T C) (Megatron's MoE needs sequence
 * parallelism with T > 1: each rank routes its 1/T of the tokens). */
double pp_memory_moe_routed_per_token(const PpMemoryShape *shape);
/* Weights of the experts one token's rows run through in an MoE block as dispatched: (R + S)
 * n_ffn h f_e with R = pp_memory_moe_routed_per_token(); pp_memory_expert_matrix_params()
 * when dropless. Their FLOPs are the time the experts take; the model's FLOPs stay K's. */
double pp_memory_expert_run_params(const PpMemoryShape *shape);
/* Query/key plus value width a(d_qk + d_v) of one block (2h for GPT-2's layer, d_qk = d_v =
 * d; MLA d_qk = d_nope + d_rope): the attention scores and the weighted sum cost
 * 2bs^2 a(d_qk + d_v) FLOPs in the forward, all scores counted. */
double pp_memory_attention_width(const PpMemoryShape *shape);
/* Key plus value width per token that ring attention passes between context-parallel ranks:
 * 2kd (MLA: the a heads' materialised keys and values, a(d_qk + d_v)). */
double pp_memory_kv_width(const PpMemoryShape *shape);
/* The whole model's parameters as the memory model counts them (embeddings, blocks with their
 * small terms, final LayerNorm and untied head, unsplit) for @n_layers blocks: every one
 * (@active FALSE) or those one token runs through (@active TRUE: K + S experts per MoE
 * block). */
double pp_memory_model_params(const PpMemoryShape *shape, int32_t n_layers, gboolean active);

/* Parameters of a virtual stage of @n_layers blocks from block @layer_begin (+ embeddings when
 * @first, + head when @last). */
double pp_memory_vstage_params(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                               gboolean first, gboolean last);
/* Activation bytes of one live (micro-batch, virtual stage) unit, and the part B frees:
 * under full recomputation the checkpointed inputs and the blocks it does not checkpoint. */
double pp_memory_unit_act_bytes(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                                gboolean last);
double pp_memory_unit_act_b_bytes(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                                  gboolean last);
/* The transient bytes the backward of a unit rebuilds at once: under full recomputation the
 * activations of one group of recompute_layers blocks (uniform) or of one block (block
 * method); under selective or per-operator recomputation what one block dropped (the larger
 * of a dense and an MoE block of the unit); 0 otherwise. */
double pp_memory_unit_recompute_bytes(const PpMemoryModel *model, int32_t layer_begin,
                                      int32_t n_layers);
/* Blocks of the @n_layers from @layer_begin whose forward the backward reruns. */
int32_t pp_memory_recomputed_layers(const PpMemoryModel *model, int32_t n_layers);
/* What one dense (@moe FALSE) or MoE block adds to a live unit's activations, for a layer
 * partition that sums blocks: the block's bytes, under full recomputation its checkpointed
 * input (uniform: shared by recompute_layers blocks; block method: as if every block of the
 * stage were checkpointed, which undercounts the blocks past the first N). */
double pp_memory_layer_stored_bytes(const PpMemoryModel *model, gboolean moe);
/* Training state (weights, gradients, optimizer) of one dense and one MoE block, bytes. */
double pp_memory_layer_state_bytes(const PpMemoryModel *model);
double pp_memory_moe_layer_state_bytes(const PpMemoryModel *model);
/* How many of the @n_layers blocks from @layer_begin are MoE blocks. */
int32_t pp_memory_moe_layers(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers);

/* A virtual stage's predicted peak bytes by category. */
typedef struct {
    int64_t params_bytes; /* weights: bf16 copy + master (weights_bpp per parameter) */
    int64_t grads_bytes;  /* gradients (grads_bpp per parameter) */
    int64_t optim_bytes;  /* Adam moments (optim_bpp per parameter) */
    int64_t static_bytes; /* params_bytes + grads_bytes + optim_bytes */
    int64_t stash_bytes;  /* extra stashed weight versions, 2 bytes per parameter each */
    int64_t act_bytes;    /* live units x activation bytes per unit */
    int64_t total_bytes;  /* the sum */
} PpMemoryBytes;

/* The state of a virtual stage: params_bytes, grads_bytes, optim_bytes and static_bytes of
 * @bytes (the other fields untouched), the routed experts at their own bytes per parameter. */
void pp_memory_vstage_state(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                            gboolean first, gboolean last, PpMemoryBytes *bytes);
/* What the caching allocator reserves for @allocated_bytes: allocated x (1 +
 * PP_MEMORY_RESERVED_OVERHEAD), rounded. */
int64_t pp_memory_reserved_bytes(int64_t allocated_bytes);

/* The predicted peak of a virtual stage holding @n_layers blocks from @layer_begin (+ the
 * ends) with @live_units micro-batches' activations alive at once and @extra_versions stashed
 * weight versions beyond the current one: each category rounded to whole bytes as the
 * simulator rounds it. */
void pp_memory_vstage_bytes(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                            gboolean first, gboolean last, int32_t live_units,
                            int32_t extra_versions, PpMemoryBytes *bytes);

G_END_DECLS
