/* SPDX-License-Identifier: MIT
 * pp-memory.c: the memory model of docs/design.md §4.5 (pp-memory.h): parameters per block and
 * per end of the model, Korthikanti et al.'s activation bytes per block (generalised to
 * grouped-query attention, any FFN width and SwiGLU), fp32 logits.
 */
#include "pp-memory.h"

#include <math.h>

/* The layer's dimensions with GPT-2's defaults filled in (pp-memory.h). */
typedef struct {
    double a, k, d, f; /* heads, key/value heads, head width, FFN width */
    double n_ffn;      /* h x f matrices in the FFN: 2 (gelu) or 3 (swiglu) */
} PpMemoryDims;

static void pp_memory_dims(const PpMemoryShape *shape, PpMemoryDims *dims) {
    const double h = shape->hidden, a = shape->heads;
    dims->a = a;
    dims->k = shape->kv_heads > 0.0 ? shape->kv_heads : a;
    dims->d = shape->head_dim > 0.0 ? shape->head_dim : h / a;
    dims->f = shape->ffn_hidden > 0.0 ? shape->ffn_hidden : 4.0 * h;
    dims->n_ffn = shape->ffn_gated ? 3.0 : 2.0;
}

double pp_memory_layer_matrix_params(const PpMemoryShape *shape) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    const double h = shape->hidden;
    return h * (dm.a + 2.0 * dm.k) * dm.d + dm.a * dm.d * h + dm.n_ffn * h * dm.f;
}

double pp_memory_attention_width(const PpMemoryShape *shape) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    return dm.a * dm.d;
}

/* Activation bytes per sbh of one block (Korthikanti et al. 2022, §4.1 and Table 2) and the
 * share of them that only W frees. Korthikanti's 34sbh + 5as^2b, term by term in bf16: the
 * attention block keeps its input (2sbh), Q, K, V (2sb each of ad, kd, kd), the projection's
 * input (2sb ad) and a dropout mask (sbh); the FFN its input (2sbh), the activation's input
 * and output (2sbf each; SwiGLU: gate, up and their product, 6sbf) and a dropout mask (sbh);
 * the two LayerNorms their inputs (4sbh). In sbh units: 10 + X with
 * X = (4(ad + kd) + 4f or 6f) / h, which is 24 for GPT-2's layer (ad = kd = h, f = 4h).
 * Without recomputation sbh(10 + X/T + 5as/(hT)): LayerNorm inputs, the two h-wide GEMM
 * inputs and dropout masks (10sbh) are replicated across the tensor group unless sequence
 * parallelism splits them; the 5as/h term is the attention scores, softmax and dropout mask
 * (a query heads: grouped-query attention shares K and V, not the scores), which flash
 * attention and selective recomputation never store. Full recomputation keeps the layer input
 * alone, 2sbh (split over T with sequence parallelism). */
static void pp_memory_layer_act(const PpMemoryShape *shape, double t, double *per_sbh,
                                double *w_share) {
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    const double   s = shape->seq_len, h = shape->hidden, a = shape->heads;
    const double   scores = shape->flash_attention ? 0.0 : 5.0 * a * s / h;
    const double   ffn_acts = shape->ffn_gated ? 6.0 : 4.0; /* per sbf */
    const double   sharded = (4.0 * (dm.a * dm.d + dm.k * dm.d) + ffn_acts * dm.f) / h;
    const gboolean sp = shape->sequence_parallel;
    double         kept = 0.0; /* the scores' share still stored */
    *per_sbh = 0.0;
    switch (shape->recompute) {
    case PP_RECOMPUTE_NONE:
        *per_sbh = sp ? (10.0 + sharded + scores) / t : 10.0 + sharded / t + scores / t;
        kept = scores;
        break;
    case PP_RECOMPUTE_SELECTIVE:
        *per_sbh = sp ? (10.0 + sharded) / t : 10.0 + sharded / t;
        break;
    case PP_RECOMPUTE_FULL:
        *per_sbh = sp ? 2.0 / t : 2.0;
        break;
    }
    /* The weight-gradient pass needs the GEMM inputs: all but the block input's 2sbh and the
     * scores, 32sbh of the unsharded 34sbh + 5as^2b for GPT-2's layer (the zero-bubble paper's
     * M_W), (8 + X)sbh in general: the same share of the sharded bytes. With full
     * recomputation the split backward keeps the layer input until W (the recomputed tensors
     * of one layer are transient). */
    *w_share =
        shape->recompute == PP_RECOMPUTE_FULL ? 1.0 : (8.0 + sharded) / (10.0 + sharded + kept);
}

void pp_memory_model(const PpMemoryShape *shape, PpMemoryModel *model) {
    const double b = shape->microbatch_size, s = shape->seq_len, h = shape->hidden;
    const double V = shape->vocab;
    const double t = shape->tensor > 1.0 ? shape->tensor : 1.0;
    const double zero = shape->zero_shards > 1.0 ? shape->zero_shards : 1.0;
    /* Parameters: per block the matrices (12h^2 for GPT-2's layer) plus GPT-2's biases and
     * LayerNorms, 13h there: QKV (a + 2k)d, projection h, FFN f + h (SwiGLU 2f + h),
     * LayerNorms 4h; embeddings Vh + sh, final LayerNorm 2h + head Vh; each GPU of a tensor
     * group holds 1/T of them (LayerNorms and biases counted as split too, < 0.1% of a
     * block). */
    PpMemoryDims dm;
    pp_memory_dims(shape, &dm);
    const double small = (dm.a + 2.0 * dm.k) * dm.d + h + (dm.n_ffn - 1.0) * dm.f + h + 4.0 * h;
    model->layer_params = (pp_memory_layer_matrix_params(shape) + small) / t;
    model->embed_params = (V * h + s * h) / t;
    model->head_params = (V * h + 2.0 * h) / t;
    model->weights_bpp =
        PP_MEMORY_BF16_WEIGHT_BYTES_PER_PARAM + PP_MEMORY_MASTER_BYTES_PER_PARAM / zero;
    model->optim_bpp = PP_MEMORY_OPTIM_BYTES_PER_PARAM / zero;
    model->state_bpp = model->weights_bpp + PP_MEMORY_GRADS_BYTES_PER_PARAM + model->optim_bpp;
    double per_sbh, w_share;
    pp_memory_layer_act(shape, t, &per_sbh, &w_share);
    model->layer_act_bytes = s * b * h * per_sbh;
    model->layer_act_b_bytes = model->layer_act_bytes - model->layer_act_bytes * w_share;
    model->logits_bytes = b * s * V * PP_MEMORY_LOGIT_BYTES / t; /* vocab-parallel head */
}

double pp_memory_vstage_params(const PpMemoryModel *model, int32_t n_layers, gboolean first,
                               gboolean last) {
    return n_layers * model->layer_params + (first ? model->embed_params : 0.0) +
           (last ? model->head_params : 0.0);
}

double pp_memory_unit_act_bytes(const PpMemoryModel *model, int32_t n_layers, gboolean last) {
    return n_layers * model->layer_act_bytes + (last ? model->logits_bytes : 0.0);
}

double pp_memory_unit_act_b_bytes(const PpMemoryModel *model, int32_t n_layers, gboolean last) {
    return n_layers * model->layer_act_b_bytes + (last ? model->logits_bytes : 0.0);
}

void pp_memory_vstage_bytes(const PpMemoryModel *model, int32_t n_layers, gboolean first,
                            gboolean last, int32_t live_units, int32_t extra_versions,
                            PpMemoryBytes *bytes) {
    double params = pp_memory_vstage_params(model, n_layers, first, last);
    bytes->static_bytes = llround(params * model->weights_bpp) +
                          llround(params * PP_MEMORY_GRADS_BYTES_PER_PARAM) +
                          llround(params * model->optim_bpp);
    bytes->stash_bytes =
        (int64_t)extra_versions * llround(params * PP_MEMORY_WEIGHT_COPY_BYTES_PER_PARAM);
    bytes->act_bytes =
        (int64_t)live_units * llround(pp_memory_unit_act_bytes(model, n_layers, last));
    bytes->total_bytes = bytes->static_bytes + bytes->stash_bytes + bytes->act_bytes;
}
