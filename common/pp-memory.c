/* SPDX-License-Identifier: MIT
 * pp-memory.c: the memory model of docs/design.md §4.5 (pp-memory.h): parameters per block and
 * per end of the model, Korthikanti et al.'s activation bytes per block (generalised to
 * grouped-query attention, any FFN width and SwiGLU), fp32 logits.
 */
#include "pp-memory.h"

#include <math.h>

#include "pp-error.h"

/* The layer's dimensions with GPT-2's defaults filled in (pp-memory.h). */
typedef struct {
    double a, k, d, f;  /* heads, key/value heads, head width, FFN width */
    double n_ffn;       /* h x f matrices in the FFN: 2 (gelu) or 3 (swiglu) */
    double d_qk, d_v;   /* per-head query/key and value widths: d, d (MLA: nope + rope, v) */
    double attn_matrix; /* attention weights, pp_memory_attention_matrix_params() */
    double attn_small;  /* attention biases or latent norms: (a + 2k)d + h; MLA r_q + r_kv + h */
    double attn_acts;   /* attention activation bytes per token split over T: Q, K, V and the
                           projection's input, 2 bytes each: 4(ad + kd); MLA 4a(d_qk + d_v) */
    double latent_acts; /* MLA's latents per token, replicated over T: each latent's norm and
                           up-projection inputs 2(2r_q + 2r_kv) + the rotary key 2d_rope */
} PpMemoryDims;

static void pp_memory_dims(const PpMemoryShape *shape, PpMemoryDims *dims) {
    const double h = shape->hidden, a = shape->heads;
    dims->a = a;
    dims->k = shape->kv_heads > 0.0 ? shape->kv_heads : a;
    dims->d = shape->head_dim > 0.0 ? shape->head_dim : h / a;
    dims->f = shape->ffn_hidden > 0.0 ? shape->ffn_hidden : 4.0 * h;
    dims->n_ffn = shape->ffn_gated ? 3.0 : 2.0;
    if (!shape->mla) {
        dims->d_qk = dims->d_v = dims->d;
        dims->attn_matrix = h * (dims->a + 2.0 * dims->k) * dims->d + dims->a * dims->d * h;
        dims->attn_small = (dims->a + 2.0 * dims->k) * dims->d + h;
        dims->attn_acts = 4.0 * (dims->a * dims->d + dims->k * dims->d);
        dims->latent_acts = 0.0;
        return;
    }
    const double rq = shape->q_lora_rank, rkv = shape->kv_lora_rank;
    const double rope = shape->qk_rope_head_dim;
    dims->d_qk = shape->qk_nope_head_dim + rope;
    dims->d_v = shape->v_head_dim;
    const double q = rq > 0.0 ? h * rq + rq * a * dims->d_qk : h * a * dims->d_qk;
    dims->attn_matrix =
        q + h * (rkv + rope) + rkv * a * (shape->qk_nope_head_dim + dims->d_v) + a * dims->d_v * h;
    dims->attn_small = rq + rkv + h;
    dims->attn_acts = 4.0 * a * (dims->d_qk + dims->d_v);
    dims->latent_acts = 4.0 * rq + 4.0 * rkv + 2.0 * rope;
}

/* One expert's weights: n_ffn h f_e matrices and GPT-2-style biases (n_ffn - 1)f_e + h. */
static double pp_memory_expert_params(const PpMemoryShape *shape, const PpMemoryDims *dm) {
    const double h = shape->hidden, fe = shape->expert_ffn_hidden;
    return dm->n_ffn * h * fe + (dm->n_ffn - 1.0) * fe + h;
}

double pp_memory_attention_matrix_params(const PpMemoryShape *shape) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    return dm.attn_matrix;
}

double pp_memory_layer_matrix_params(const PpMemoryShape *shape) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    return dm.attn_matrix + dm.n_ffn * shape->hidden * dm.f;
}

double pp_memory_moe_layer_matrix_params(const PpMemoryShape *shape, gboolean active) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    const double h = shape->hidden;
    const double routed = active ? shape->experts_per_token : shape->experts;
    return dm.attn_matrix + h * shape->experts +
           (routed + shape->shared_experts) * dm.n_ffn * h * shape->expert_ffn_hidden;
}

double pp_memory_expert_matrix_params(const PpMemoryShape *shape) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    return (shape->experts_per_token + shape->shared_experts) * dm.n_ffn * shape->hidden *
           shape->expert_ffn_hidden;
}

double pp_memory_moe_routed_rows(double capacity_factor, double tokens, double experts_per_token,
                                 double experts) {
    if (!(capacity_factor > 0.0))
        return experts_per_token;
    PP_ASSERT(tokens > 0.0 && experts > 0.0);
    return experts * ceil(capacity_factor * tokens * experts_per_token / experts) / tokens;
}

double pp_memory_moe_routed_per_token(const PpMemoryShape *shape) {
    const double t = shape->tensor > 1.0 ? shape->tensor : 1.0;
    const double c = shape->context > 1.0 ? shape->context : 1.0;
    return pp_memory_moe_routed_rows(shape->moe_capacity_factor,
                                     shape->microbatch_size * shape->seq_len / (t * c),
                                     shape->experts_per_token, shape->experts);
}

double pp_memory_expert_run_params(const PpMemoryShape *shape) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    return (pp_memory_moe_routed_per_token(shape) + shape->shared_experts) * dm.n_ffn *
           shape->hidden * shape->expert_ffn_hidden;
}

double pp_memory_kv_width(const PpMemoryShape *shape) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    return shape->mla ? dm.a * (dm.d_qk + dm.d_v) : 2.0 * dm.k * dm.d;
}

double pp_memory_attention_width(const PpMemoryShape *shape) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    return dm.a * dm.d_qk + dm.a * dm.d_v;
}

/* One block's activation bytes per sbh before the tensor split, in three parts: @base
 * replicated over the tensor group unless sequence parallelism splits it, @sharded split over
 * it, @scores the attention scores (split over it). */
typedef struct {
    double base, sharded, scores;
} PpMemoryActParts;

/* The parts' bytes per sbh on one GPU of the tensor group. */
static double pp_memory_act_sum(const PpMemoryShape *shape, const PpMemoryActParts *p, double t) {
    return shape->sequence_parallel ? (p->base + p->sharded + p->scores) / t
                                    : p->base + (p->sharded + p->scores) / t;
}

guint pp_memory_recompute_modules(const PpMemoryShape *shape) {
    if (shape->recompute != PP_RECOMPUTE_SELECTIVE)
        return 0;
    return shape->recompute_modules != 0 ? shape->recompute_modules : PP_RECOMPUTE_MODULE_CORE_ATTN;
}

/* Takes from @p what selective recomputation of the modules of @shape drops in a dense (@moe
 * FALSE) or MoE block, as Megatron-Core's layer with Transformer Engine's specs saves it
 * (megatron/core/models/gpt/gpt_layer_specs.py: a norm that feeds one linear is fused into
 * it; MLA's input norm and an MoE block's pre-MLP norm are separate):
 * - core_attn: the attention scores, softmax and dropout (nothing with flash attention, whose
 *   kernel keeps none);
 * - layernorm: a separate norm's output, 2sbh each (base), which the linears after it would
 *   keep (output-discarding checkpoint; transformer_layer.py);
 * - mla_up_proj: the up-projected Q, K, V the attention core keeps, 2a(2d_qk + d_v) per token
 *   (multi_latent_attention.py: the latents and the rotary key stay as the checkpoint's inputs);
 * - mlp (dense block): the FFN's activations and its first linear's input 2sbh (the checkpoint
 *   keeps the MLP's input, the fused norm's input already counted);
 * - moe (MoE block): the whole MoE part, @moe_acts (its input, the pre-MLP norm's output, stays);
 * - shared_experts: their activations, S (4 or 6) f_e per token;
 * - moe_act: the routed experts' activation output, 2f_e per routed row (its input, the first
 *   linear's output, is the checkpoint's input; experts.py). */
static void pp_memory_act_drop(const PpMemoryShape *shape, const PpMemoryDims *dm, gboolean moe,
                               double moe_acts, PpMemoryActParts *p) {
    const guint  sel = pp_memory_recompute_modules(shape);
    const double h = shape->hidden, fe = shape->expert_ffn_hidden;
    if (sel & PP_RECOMPUTE_MODULE_CORE_ATTN)
        p->scores = 0.0;
    if (sel & PP_RECOMPUTE_MODULE_LAYERNORM)
        p->base -= 2.0 * ((shape->mla ? 1.0 : 0.0) + (moe ? 1.0 : 0.0));
    if ((sel & PP_RECOMPUTE_MODULE_MLA_UP_PROJ) && shape->mla)
        p->sharded -= 2.0 * dm->a * (2.0 * dm->d_qk + dm->d_v) / h;
    if (!moe) {
        if (sel & PP_RECOMPUTE_MODULE_MLP) {
            p->base -= 2.0;
            p->sharded -= (shape->ffn_gated ? 6.0 : 4.0) * dm->f / h;
        }
        return;
    }
    if (sel & PP_RECOMPUTE_MODULE_MOE) {
        p->sharded -= moe_acts / h;
        return;
    }
    if (sel & PP_RECOMPUTE_MODULE_SHARED_EXPERTS)
        p->sharded -= shape->shared_experts * (shape->ffn_gated ? 6.0 : 4.0) * fe / h;
    if (sel & PP_RECOMPUTE_MODULE_MOE_ACT)
        p->sharded -= 2.0 * pp_memory_moe_routed_per_token(shape) * fe / h;
}

/* The saved outputs among @n matrix products run in this order, bytes per token: torchtitan's
 * policy keeps the first, third, ... (its count of aten.mm calls is odd). */
static double pp_memory_op_saved(const double *bytes, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i += 2)
        sum += bytes[i];
    return sum;
}

/* Bytes per token on one GPU that torchtitan's per-operator checkpointing keeps of one block
 * (model.recompute = op; torchtitan/distributed/activation_checkpoint.py, SelectiveAC): the
 * block's input (the checkpoint's), the outputs of the attention core (2a d_v and its fp32
 * log-sum-exp 4a) and of every other aten.mm in the order torchtitan's llama3 and
 * deepseek_v3 blocks run them (wq, wk, wv, wo, w1, w3, w2; MLA wq_a, wq_b, wkv_a, wkv_b, wo:
 * column-parallel outputs over T, MLA's down-projections replicated, a row-parallel output the
 * h-wide partial sum before its reduction), the reduce-scatters' outputs (sequence parallelism,
 * 2h/T each, two per block) and an MoE block's all-to-all outputs (2h per routed row each way
 * with expert parallelism); the router (forced to recompute) and the experts' grouped products
 * (not in the saved set) are rerun, as are the norms, activations and rotary. */
static double pp_memory_op_token_bytes(const PpMemoryShape *shape, const PpMemoryDims *dm,
                                       gboolean moe, double t) {
    const double h = shape->hidden, a = dm->a, f = dm->f;
    const double S = shape->sequence_parallel ? t : 1.0;
    double       mm[8]; /* the block's products in order, output bytes per token */
    int          n = 0;
    if (!shape->mla) {
        mm[n++] = 2.0 * a * dm->d / t;
        mm[n++] = 2.0 * dm->k * dm->d / t;
        mm[n++] = 2.0 * dm->k * dm->d / t;
    } else {
        const double rope = shape->qk_rope_head_dim;
        if (shape->q_lora_rank > 0.0)
            mm[n++] = 2.0 * shape->q_lora_rank;
        mm[n++] = 2.0 * a * dm->d_qk / t;
        mm[n++] = 2.0 * (shape->kv_lora_rank + rope);
        mm[n++] = 2.0 * a * (shape->qk_nope_head_dim + dm->d_v) / t;
    }
    mm[n++] = 2.0 * h; /* wo */
    double ffn = moe ? shape->shared_experts * shape->expert_ffn_hidden : f;
    if (ffn > 0.0) {
        mm[n++] = 2.0 * ffn / t;
        if (shape->ffn_gated)
            mm[n++] = 2.0 * ffn / t;
        mm[n++] = 2.0 * h;
    }
    double bytes = 2.0 * h / S + pp_memory_op_saved(mm, n) + (2.0 * a * dm->d_v + 4.0 * a) / t;
    if (t > 1.0 && shape->sequence_parallel)
        bytes += 2.0 * 2.0 * h / t;
    if (moe && shape->expert > 1.0)
        bytes += 2.0 * 2.0 * h * pp_memory_moe_routed_per_token(shape) / t;
    return bytes;
}

/* Activation bytes per sbh of one block (Korthikanti et al. 2022, §4.1 and Table 2), the share
 * of them that only W frees, and what the backward rebuilds of them, for an FFN (or MoE) part
 * of @ffn_acts bytes per token (@moe: an MoE block's).
 * Korthikanti's 34sbh + 5as^2b, term by term in bf16: the attention block keeps its input
 * (2sbh), Q, K, V (2sb each of ad, kd, kd), the projection's input (2sb ad) and a dropout mask
 * (sbh); the FFN its input (2sbh), the activation's input and output (2sbf each; SwiGLU: gate,
 * up and their product, 6sbf) and a dropout mask (sbh); the two LayerNorms their inputs
 * (4sbh). In sbh units: 10 + X with X = (4(ad + kd) + 4f or 6f) / h, which is 24 for GPT-2's
 * layer (ad = kd = h, f = 4h). MLA adds its latents (replicated over T) and keeps a-head Q, K,
 * V of widths d_qk, d_qk, d_v. Without recomputation sbh(10 + X/T + 5as/(hT)): LayerNorm
 * inputs, the two h-wide GEMM inputs and dropout masks (10sbh) are replicated across the
 * tensor group unless sequence parallelism splits them; the 5as/h term is the attention
 * scores, softmax and dropout mask (a query heads: grouped-query attention shares K and V, not
 * the scores), which flash attention never stores. Selective recomputation drops its modules'
 * bytes (pp_memory_act_drop()), per-operator checkpointing keeps what
 * pp_memory_op_token_bytes() says; @rerun_sbh is what either drops, which the backward of one
 * block rebuilds at once. Full recomputation stores what a block it does not checkpoint
 * stores without recomputation (the checkpointed ones' inputs are counted per unit,
 * pp_memory_unit_act_bytes()). */
static void pp_memory_layer_act(const PpMemoryShape *shape, const PpMemoryDims *dm, double ffn_acts,
                                gboolean moe, double t, double *per_sbh, double *w_share,
                                double *rerun_sbh) {
    const double     s = shape->seq_len, h = shape->hidden, a = shape->heads;
    PpMemoryActParts all = {
        .base = 10.0 + dm->latent_acts / h, /* replicated without sequence parallel */
        .sharded = (dm->attn_acts + ffn_acts) / h,
        .scores = shape->flash_attention ? 0.0 : 5.0 * a * s / h,
    };
    const double whole = pp_memory_act_sum(shape, &all, t);
    if (shape->recompute == PP_RECOMPUTE_OP) {
        *per_sbh = pp_memory_op_token_bytes(shape, dm, moe, t) / h;
        /* W needs all of it but the block input */
        const double input = 2.0 / (shape->sequence_parallel ? t : 1.0);
        *w_share = (*per_sbh - input) / *per_sbh;
        *rerun_sbh = MAX(whole - *per_sbh, 0.0);
        return;
    }
    PpMemoryActParts kept = all;
    pp_memory_act_drop(shape, dm, moe, moe ? ffn_acts : 0.0, &kept);
    *per_sbh = pp_memory_act_sum(shape, &kept, t);
    *rerun_sbh = whole - *per_sbh;
    /* The weight-gradient pass needs the GEMM inputs: all but the block input's 2sbh and the
     * scores, 32sbh of the unsharded 34sbh + 5as^2b for GPT-2's layer (the zero-bubble paper's
     * M_W), (8 + X)sbh in general: the same share of the sharded bytes. */
    *w_share =
        (MAX(kept.base - 2.0, 0.0) + kept.sharded) / (kept.base + kept.sharded + kept.scores);
}

/* Stores one block's activation bytes, the part B frees and what its backward rebuilds, for
 * @ffn_acts FFN bytes/token. */
static void pp_memory_block_act(const PpMemoryShape *shape, const PpMemoryDims *dm, double ffn_acts,
                                gboolean moe, double t, double *act_bytes, double *act_b_bytes,
                                double *rerun_bytes) {
    double per_sbh, w_share, rerun_sbh;
    pp_memory_layer_act(shape, dm, ffn_acts, moe, t, &per_sbh, &w_share, &rerun_sbh);
    const double c = shape->context > 1.0 ? shape->context : 1.0;
    const double sbh = shape->seq_len * shape->microbatch_size * shape->hidden / c;
    *act_bytes = sbh * per_sbh;
    *act_b_bytes = *act_bytes - *act_bytes * w_share;
    *rerun_bytes = sbh * rerun_sbh;
}

/* The FFN's stored activation bytes per token and unit of its width: GeLU's input and output
 * (4); SwiGLU's gate and up outputs and their product (6), and the silu output too (8) when
 * it runs as separate kernels (Megatron without bias_swiglu_fusion, its legacy model, plain
 * torch: silu(gate) * up keeps both factors), where the fused kernel recomputes it. */
static double pp_memory_ffn_act_bytes(const PpMemoryShape *shape) {
    if (!shape->ffn_gated)
        return 4.0;
    return shape->swiglu_unfused ? 8.0 : 6.0;
}

/* An MoE block's FFN activation bytes per token: the K + S experts' activation inputs and
 * outputs (2f_e each, SwiGLU 3), the K dispatched copies of the token (2h, the experts' GEMM
 * input) and of the experts' outputs (2h, for the routing weights' gradient), and the fp32
 * router probabilities 4E; with a capacity factor the experts' rows as padded or dropped (R
 * = pp_memory_moe_routed_per_token() in place of K). */
static double pp_memory_moe_ffn_acts(const PpMemoryShape *shape) {
    const double ffn_acts = pp_memory_ffn_act_bytes(shape); /* per token and f_e */
    const double k = pp_memory_moe_routed_per_token(shape);
    return (k + shape->shared_experts) * ffn_acts * shape->expert_ffn_hidden +
           4.0 * k * shape->hidden + 4.0 * shape->experts;
}

/* Bytes per parameter of weights, gradients and Adam moments with the master weights and
 * moments over @zero ranks and, under ZeRO-3, everything over @fsdp ranks (docs/memory.md). */
static void pp_memory_bpp(const PpMemoryShape *shape, double zero, double fsdp, double *weights,
                          double *grads, double *optim) {
    const double g = shape->grad_bytes > 0.0 ? shape->grad_bytes : PP_MEMORY_GRADS_BYTES_PER_PARAM;
    *optim = PP_MEMORY_OPTIM_BYTES_PER_PARAM / zero;
    if (fsdp > 1.0 && shape->fsdp_impl == PP_FSDP_TORCH2) {
        /* the fp32 parameter shard is the optimizer's; its gradient shard is fp32 too */
        *weights = PP_MEMORY_MASTER_BYTES_PER_PARAM / fsdp;
        *grads = 4.0 / fsdp;
        return;
    }
    *weights =
        PP_MEMORY_BF16_WEIGHT_BYTES_PER_PARAM / fsdp + PP_MEMORY_MASTER_BYTES_PER_PARAM / zero;
    *grads = g / fsdp;
}

void pp_memory_model(const PpMemoryShape *shape, PpMemoryModel *model) {
    const double b = shape->microbatch_size, s = shape->seq_len, h = shape->hidden;
    const double V = shape->vocab;
    const double t = shape->tensor > 1.0 ? shape->tensor : 1.0;
    const double c = shape->context > 1.0 ? shape->context : 1.0;
    const double zero = shape->zero_shards > 1.0 ? shape->zero_shards : 1.0;
    const double fsdp = shape->fsdp_shards > 1.0 ? shape->fsdp_shards : 1.0;
    /* the expert-data-parallel ranks: ZeRO shards the experts over them, FSDP as well */
    const double ezero =
        shape->expert_zero_shards > 0.0 ? MAX(shape->expert_zero_shards, 1.0) : zero;
    /* Parameters: per block the matrices (12h^2 for GPT-2's layer) plus GPT-2's biases and
     * LayerNorms, 13h there: QKV (a + 2k)d, projection h, FFN f + h (SwiGLU 2f + h),
     * LayerNorms 4h; embeddings Vh + sh, final LayerNorm 2h + head Vh; each GPU of a tensor
     * group holds 1/T of them (LayerNorms and biases counted as split too, < 0.1% of a
     * block). */
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    const double small = dm.attn_small + (dm.n_ffn - 1.0) * dm.f + h + 4.0 * h;
    model->layer_params = (pp_memory_layer_matrix_params(shape) + small) / t;
    model->embed_params = (V * h + s * h) / t;
    model->head_params = (V * h + 2.0 * h) / t;
    /* Megatron ties the head to the word embedding on the GPU that holds both; with pipeline
     * stages the last keeps a copy of its own (megatron/core/models/common/language_module/
     * language_module.py, setup_embeddings_and_output_layer()) */
    model->tied_head_params = shape->tied_embeddings ? 2.0 * h / t : model->head_params;
    pp_memory_bpp(shape, zero, fsdp, &model->weights_bpp, &model->grads_bpp, &model->optim_bpp);
    model->state_bpp = model->weights_bpp + model->grads_bpp + model->optim_bpp;
    pp_memory_bpp(shape, ezero, fsdp > 1.0 ? ezero : 1.0, &model->expert_weights_bpp,
                  &model->expert_grads_bpp, &model->expert_optim_bpp);
    model->expert_state_bpp =
        model->expert_weights_bpp + model->expert_grads_bpp + model->expert_optim_bpp;
    const double ffn_acts = pp_memory_ffn_act_bytes(shape) * dm.f; /* per token */
    pp_memory_block_act(shape, &dm, ffn_acts, FALSE, t, &model->layer_act_bytes,
                        &model->layer_act_b_bytes, &model->layer_rerun_bytes);
    const gboolean sp = shape->sequence_parallel && t > 1.0;
    model->layer_input_bytes = 2.0 * b * s * h / (sp ? t : 1.0) / c;
    model->logits_bytes = b * s * V * PP_MEMORY_LOGIT_BYTES / t / c; /* vocab-parallel head */
    model->recompute = shape->recompute;
    model->recompute_method = shape->recompute_method;
    model->recompute_layers =
        shape->recompute == PP_RECOMPUTE_FULL ? MAX(shape->recompute_layers, 1) : 0;
    const double sp_buffers = !sp                      ? 0.0
                              : shape->tp_comm_overlap ? PP_MEMORY_TP_OVERLAP_BUFFERS
                                                       : 1.0;
    model->comm_buffer_bytes = 2.0 * shape->msg_bytes + sp_buffers * 2.0 * b * s * h / c;
    model->first_moe_layer = G_MAXINT32;
    model->moe_layer_params = model->moe_expert_params = 0.0;
    model->moe_layer_act_bytes = model->moe_layer_act_b_bytes = model->moe_layer_rerun_bytes = 0.0;
    /* ZeRO-3's gathers per block: the current and the prefetched bf16 block, one block's bf16
     * gradient (FSDP2 with fp32 gradients: and its fp32 cast for the reduce-scatter) */
    const double gathered =
        2.0 * PP_MEMORY_BF16_WEIGHT_BYTES_PER_PARAM + 2.0 +
        (shape->fsdp_impl == PP_FSDP_TORCH2 && shape->grad_bytes > 2.0 ? shape->grad_bytes : 0.0);
    model->fsdp_buffer_bytes = fsdp > 1.0 ? gathered * model->layer_params : 0.0;
    if (!(shape->experts > 0.0))
        return;
    /* An MoE block on one GPU: attention, LayerNorms and shared experts over T, the router
     * replicated, the routed experts over expert x expert_tensor ranks. */
    const double ep = shape->expert > 1.0 ? shape->expert : 1.0;
    const double etp = shape->expert_tensor > 1.0 ? shape->expert_tensor : 1.0;
    const double expert = pp_memory_expert_params(shape, &dm);
    model->first_moe_layer = MAX(shape->dense_layers, 0);
    model->moe_expert_params = shape->experts * expert / (ep * etp);
    model->moe_layer_params =
        (dm.attn_matrix + dm.attn_small + 4.0 * h + shape->shared_experts * expert) / t +
        h * shape->experts + model->moe_expert_params;
    pp_memory_block_act(shape, &dm, pp_memory_moe_ffn_acts(shape), TRUE, t,
                        &model->moe_layer_act_bytes, &model->moe_layer_act_b_bytes,
                        &model->moe_layer_rerun_bytes);
    if (fsdp > 1.0)
        model->fsdp_buffer_bytes = gathered * MAX(model->layer_params, model->moe_layer_params);
}

double pp_memory_model_params(const PpMemoryShape *shape, int32_t n_layers, gboolean active) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    const double h = shape->hidden, V = shape->vocab, s = shape->seq_len;
    const double dense_block = pp_memory_layer_matrix_params(shape) + dm.attn_small +
                               (dm.n_ffn - 1.0) * dm.f + h + 4.0 * h;
    double n_dense = n_layers, params = V * h + s * h + V * h + 2.0 * h;
    if (shape->experts > 0.0) {
        n_dense = MIN(MAX(shape->dense_layers, 0), n_layers);
        const double routed = active ? shape->experts_per_token : shape->experts;
        const double moe_block =
            dm.attn_matrix + dm.attn_small + 4.0 * h + h * shape->experts +
            (routed + shape->shared_experts) * pp_memory_expert_params(shape, &dm);
        params += (n_layers - n_dense) * moe_block;
    }
    return params + n_dense * dense_block;
}

int32_t pp_memory_moe_layers(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers) {
    int64_t end = (int64_t)layer_begin + n_layers;
    int64_t first = MAX((int64_t)layer_begin, (int64_t)model->first_moe_layer);
    return end > first ? (int32_t)(end - first) : 0;
}

/* @dense_value per dense block plus @moe_value per MoE block of the span (the MoE term
 * only when there is one, so that a dense model's sums are the plain product). */
static double pp_memory_span(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                             double dense_value, double moe_value) {
    int32_t n_moe = pp_memory_moe_layers(model, layer_begin, n_layers);
    double  sum = (n_layers - n_moe) * dense_value;
    return n_moe > 0 ? sum + n_moe * moe_value : sum;
}

double pp_memory_vstage_params(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                               gboolean first, gboolean last) {
    return pp_memory_span(model, layer_begin, n_layers, model->layer_params,
                          model->moe_layer_params) +
           (first ? model->embed_params : 0.0) +
           (last ? (first ? model->tied_head_params : model->head_params) : 0.0);
}

/* Blocks of the @n_layers whose inputs full recomputation checkpoints. */
int32_t pp_memory_recomputed_layers(const PpMemoryModel *model, int32_t n_layers) {
    if (model->recompute != PP_RECOMPUTE_FULL)
        return 0;
    return model->recompute_method == PP_RECOMPUTE_BLOCK ? MIN(model->recompute_layers, n_layers)
                                                         : n_layers;
}

/* The stored activations of the blocks, @b_part: the part B frees. Full recomputation: a
 * checkpointed input per group of N (uniform) or per each of the first N blocks (block), which
 * B keeps for W, plus what the unchecked blocks store. */
static double pp_memory_unit_blocks(const PpMemoryModel *model, int32_t layer_begin,
                                    int32_t n_layers, gboolean b_part) {
    double dense = b_part ? model->layer_act_b_bytes : model->layer_act_bytes;
    double moe = b_part ? model->moe_layer_act_b_bytes : model->moe_layer_act_bytes;
    if (model->recompute != PP_RECOMPUTE_FULL)
        return pp_memory_span(model, layer_begin, n_layers, dense, moe);
    const double  input = b_part ? 0.0 : model->layer_input_bytes;
    const int32_t n = model->recompute_layers;
    if (model->recompute_method == PP_RECOMPUTE_UNIFORM)
        return ((n_layers + n - 1) / n) * input;
    const int32_t k = MIN(n, n_layers);
    return k * input + pp_memory_span(model, layer_begin + k, n_layers - k, dense, moe);
}

double pp_memory_unit_act_bytes(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                                gboolean last) {
    return pp_memory_unit_blocks(model, layer_begin, n_layers, FALSE) +
           (last ? model->logits_bytes : 0.0);
}

double pp_memory_unit_act_b_bytes(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                                  gboolean last) {
    return pp_memory_unit_blocks(model, layer_begin, n_layers, TRUE) +
           (last ? model->logits_bytes : 0.0);
}

double pp_memory_unit_recompute_bytes(const PpMemoryModel *model, int32_t layer_begin,
                                      int32_t n_layers) {
    if (n_layers < 1)
        return 0.0;
    if (model->recompute != PP_RECOMPUTE_FULL) {
        const int32_t n_moe = pp_memory_moe_layers(model, layer_begin, n_layers);
        return MAX(n_moe < n_layers ? model->layer_rerun_bytes : 0.0,
                   n_moe > 0 ? model->moe_layer_rerun_bytes : 0.0);
    }
    /* uniform: groups of N from the unit's first block; block: each checkpointed block alone */
    const int32_t group =
        model->recompute_method == PP_RECOMPUTE_UNIFORM ? model->recompute_layers : 1;
    const int32_t end = layer_begin + pp_memory_recomputed_layers(model, n_layers);
    double        most = 0.0;
    for (int32_t g = layer_begin; g < end; g += group)
        most = MAX(most, pp_memory_span(model, g, MIN(group, end - g), model->layer_act_bytes,
                                        model->moe_layer_act_bytes));
    return most;
}

double pp_memory_layer_stored_bytes(const PpMemoryModel *model, gboolean moe) {
    if (model->recompute != PP_RECOMPUTE_FULL)
        return moe ? model->moe_layer_act_bytes : model->layer_act_bytes;
    return model->recompute_method == PP_RECOMPUTE_UNIFORM
               ? model->layer_input_bytes / model->recompute_layers
               : model->layer_input_bytes;
}

double pp_memory_layer_state_bytes(const PpMemoryModel *model) {
    return model->layer_params * model->state_bpp;
}

double pp_memory_moe_layer_state_bytes(const PpMemoryModel *model) {
    return (model->moe_layer_params - model->moe_expert_params) * model->state_bpp +
           model->moe_expert_params * model->expert_state_bpp;
}

void pp_memory_vstage_state(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                            gboolean first, gboolean last, PpMemoryBytes *bytes) {
    const double params = pp_memory_vstage_params(model, layer_begin, n_layers, first, last);
    const double experts =
        pp_memory_moe_layers(model, layer_begin, n_layers) * model->moe_expert_params;
    const double rest = params - experts;
    bytes->params_bytes = llround(rest * model->weights_bpp + experts * model->expert_weights_bpp);
    bytes->grads_bytes = llround(rest * model->grads_bpp + experts * model->expert_grads_bpp);
    bytes->optim_bytes = llround(rest * model->optim_bpp + experts * model->expert_optim_bpp);
    bytes->static_bytes = bytes->params_bytes + bytes->grads_bytes + bytes->optim_bytes;
}

int64_t pp_memory_reserved_bytes(int64_t allocated_bytes) {
    return llround((double)allocated_bytes * (1.0 + PP_MEMORY_RESERVED_OVERHEAD));
}

void pp_memory_vstage_bytes(const PpMemoryModel *model, int32_t layer_begin, int32_t n_layers,
                            gboolean first, gboolean last, int32_t live_units,
                            int32_t extra_versions, PpMemoryBytes *bytes) {
    double params = pp_memory_vstage_params(model, layer_begin, n_layers, first, last);
    pp_memory_vstage_state(model, layer_begin, n_layers, first, last, bytes);
    bytes->stash_bytes =
        (int64_t)extra_versions * llround(params * PP_MEMORY_WEIGHT_COPY_BYTES_PER_PARAM);
    bytes->act_bytes =
        (int64_t)live_units * llround(pp_memory_unit_act_bytes(model, layer_begin, n_layers, last));
    bytes->total_bytes = bytes->static_bytes + bytes->stash_bytes + bytes->act_bytes;
}
