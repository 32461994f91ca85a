/* SPDX-License-Identifier: MIT
 * exec-layout.c: the model layout every backend allocates from (exec-backend.h, its
 * constructor and kernel arguments in exec-layout-impl.h): each virtual stage's slice argument
 * (the one place the partition becomes GPT-2 slices: layer range, ends, untied head), its
 * tensor table (ExecTensor records) and flat size from the model's table (gpt2-table.h), each
 * tensor's optimizer roles from the optimizer's rule (kern_optim_uses_muon()), and the message
 * and batch sizes. Plain host data; no arena is allocated.
 */
#include <string.h>

#include "exec-layout-impl.h"
#include "gpt2-table.h"
#include "pp-error.h"

/* What the layout keeps for the model's kernels (exec-layout-impl.h reads it). */
struct _ExecLayoutKernels {
    Gpt2SliceParams *slice; /* (n_vstages) each virtual stage's slice argument */
    KernOptimParams  optim;
};

/* The roles of tensor @t under @optim: params and grads always, then the optimizer state it
 * has and error feedback's previous update. */
static guint exec_layout_roles(const KernOptimParams *optim, const Gpt2Tensor *t) {
    guint roles =
        EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_PARAMS) | EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_GRADS);
    if (kern_optim_uses_muon(optim, t))
        roles |= EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_MUON_MOMENTUM);
    else
        roles |=
            EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_ADAM_M) | EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_ADAM_V);
    if (optim->error_feedback)
        roles |= EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_PREV_UPDATE);
    return roles;
}

/* Fills @v's table and flat size from the model's table of the slice @slice. */
static void exec_layout_vstage_table(ExecVstageLayout *v, const Gpt2SliceParams *slice,
                                     const KernOptimParams *optim) {
    Gpt2Table *table = gpt2_table_new(slice);
    v->n_params = gpt2_table_n_params(table);
    v->n_tensors = gpt2_table_n_tensors(table);
    v->tensors = g_new(ExecTensor, MAX(v->n_tensors, 1));
    GString           *names = g_string_new(NULL);
    g_autofree size_t *at = g_new(size_t, MAX(v->n_tensors, 1));
    for (int i = 0; i < v->n_tensors; i++) {
        const Gpt2Tensor *t = gpt2_table_tensor(table, i);
        v->tensors[i] = (ExecTensor){
            .offset = t->offset,
            .numel = t->numel,
            .ndim = t->ndim,
            .shape = {t->shape[0], t->shape[1]},
            .is_matrix = t->is_matrix != 0,
            .roles = exec_layout_roles(optim, t),
        };
        at[i] = names->len;
        g_string_append_len(names, t->name, (gssize)strlen(t->name) + 1);
    }
    v->names = g_string_free(names, FALSE);
    for (int i = 0; i < v->n_tensors; i++)
        v->tensors[i].name = v->names + at[i];
    gpt2_table_free(table);
}

ExecModelLayout *exec_model_layout_new(const Gpt2Config *model, int32_t B,
                                       const PpPartition *partition, const int32_t *act_slots,
                                       const KernOptimParams *optim) {
    PP_ASSERT(B >= 1 && partition->n_vstages >= 1);
    ExecModelLayout *layout = g_rc_box_new0(ExecModelLayout);
    int32_t          n = partition->n_vstages;
    layout->n_vstages = n;
    layout->vstages = g_new0(ExecVstageLayout, n);
    layout->batch_tokens = (size_t)B * (size_t)model->T;
    layout->msg_floats = layout->batch_tokens * (size_t)model->C;
    layout->kernels = g_new0(ExecLayoutKernels, 1);
    layout->kernels->slice = g_new0(Gpt2SliceParams, n);
    layout->kernels->optim = *optim;
    for (int32_t vs = 0; vs < n; vs++) {
        PP_ASSERT(act_slots[vs] >= 1);
        Gpt2SliceParams *slice = &layout->kernels->slice[vs];
        *slice = (Gpt2SliceParams){
            .model = *model,
            .layer_begin = partition->layer_begin[vs],
            .layer_end = partition->layer_end[vs],
            .has_embedding = vs == 0,
            .has_head = vs == n - 1,
            /* Untied head on every split, even a single stage, so that any partition is the
             * same model. Tying wte and lm_head across stages would need an all-reduce of the
             * tied gradient between the first and last stage before every update. */
            .tie_head = 0,
            .B = B,
            .n_act_slots = act_slots[vs],
        };
        exec_layout_vstage_table(&layout->vstages[vs], slice, optim);
    }
    return layout;
}

const Gpt2SliceParams *exec_layout_slice_params(const ExecModelLayout *layout, int32_t vs) {
    PP_ASSERT(vs >= 0 && vs < layout->n_vstages);
    return &layout->kernels->slice[vs];
}

const KernOptimParams *exec_layout_optim(const ExecModelLayout *layout) {
    return &layout->kernels->optim;
}

ExecModelLayout *exec_model_layout_ref(ExecModelLayout *layout) {
    return g_rc_box_acquire(layout);
}

static void exec_model_layout_clear(gpointer data) {
    ExecModelLayout *layout = data;
    for (int32_t vs = 0; vs < layout->n_vstages; vs++) {
        g_free(layout->vstages[vs].tensors);
        g_free(layout->vstages[vs].names);
    }
    g_free(layout->vstages);
    g_free(layout->kernels->slice);
    g_free(layout->kernels);
}

void exec_model_layout_unref(ExecModelLayout *layout) {
    if (layout)
        g_rc_box_release_full(layout, exec_model_layout_clear);
}
