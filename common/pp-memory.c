/* SPDX-License-Identifier: MIT
 * pp-memory.c: the memory model of docs/design.md §4.5 (pp-memory.h): parameters per block and
 * per end of the model, Korthikanti et al.'s activation bytes per block, fp32 logits.
 */
#include "pp-memory.h"

#include <math.h>

void pp_memory_model(const PpMemoryShape *shape, PpMemoryModel *model) {
    const double b = shape->microbatch_size, s = shape->seq_len, h = shape->hidden;
    const double a = shape->heads, V = shape->vocab;
    /* 16-bit activations, no recomputation: M_F = sb(34h + 5as) = M_B + M_W with
     * M_B = sb(2h + 5as) freed at B and M_W = 32sbh at W. The 5as term is the attention
     * scores, softmax and dropout mask; flash attention recomputes them and stores none. */
    const double scores = shape->flash_attention ? 0.0 : 5.0 * a * s;
    model->layer_params = 12.0 * h * h + 13.0 * h;
    model->embed_params = V * h + s * h;
    model->head_params = V * h + 2.0 * h;
    model->layer_act_bytes = s * b * (34.0 * h + scores);
    model->layer_act_b_bytes = s * b * (2.0 * h + scores);
    model->logits_bytes = b * s * V * PP_MEMORY_LOGIT_BYTES;
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
    bytes->static_bytes = llround(params * PP_MEMORY_WEIGHTS_BYTES_PER_PARAM) +
                          llround(params * PP_MEMORY_GRADS_BYTES_PER_PARAM) +
                          llround(params * PP_MEMORY_OPTIM_BYTES_PER_PARAM);
    bytes->stash_bytes =
        (int64_t)extra_versions * llround(params * PP_MEMORY_WEIGHT_COPY_BYTES_PER_PARAM);
    bytes->act_bytes =
        (int64_t)live_units * llround(pp_memory_unit_act_bytes(model, n_layers, last));
    bytes->total_bytes = bytes->static_bytes + bytes->stash_bytes + bytes->act_bytes;
}
