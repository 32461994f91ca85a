/* SPDX-License-Identifier: MIT
 * test-exec-layout.c: the model layout every backend allocates from (exec_model_layout_new(),
 * exec/backend/exec-layout.c): each virtual stage's slice argument from the partition
 * (exec_layout_slice_params()), its tensor table (ExecTensor records) and flat size equal to
 * the model's own table, each tensor's roles equal to what the CPU optimizer allocates for it
 * (AdamW, Muon, error feedback), the optimizer's hyperparameters (exec_layout_optim()), and the
 * message and batch sizes in closed form.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "exec-layout-impl.h"
#include "gpt2-table.h"

static const Gpt2Config tiny = {.L = 4, .C = 16, .NH = 2, .T = 8, .V = 37, .Vp = 64};
enum { B = 3, N_VSTAGES = 3 };

/* The layout of tiny over 3 virtual stages (layers 0-1, 2, 3) driven by @optim. */
static ExecModelLayout *layout_new(const KernOptimParams *optim, PpPartition **partition) {
    int64_t           cost[4] = {1, 1, 1, 1};
    PpPartitionParams pp = {
        .n_layers = tiny.L, .n_vstages = N_VSTAGES, .mode = PP_PARTITION_EVEN, .layer_cost = cost};
    *partition = pp_partition_new(&pp, NULL);
    ck_assert_ptr_nonnull(*partition);
    const int32_t act_slots[N_VSTAGES] = {3, 2, 1};
    return exec_model_layout_new(&tiny, B, *partition, act_slots, optim);
}

/* Slice arguments, tables and sizes: the partition's layer ranges, the ends on the first and
 * last virtual stage, the untied head, the activation slots, and the model's table. */
START_TEST(test_layout_slices) {
    const KernOptimParams adamw = {.kind = KERN_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.95f};
    PpPartition          *partition = NULL;
    ExecModelLayout      *layout = layout_new(&adamw, &partition);
    ck_assert_int_eq(layout->n_vstages, N_VSTAGES);
    ck_assert_uint_eq(layout->batch_tokens, (size_t)B * tiny.T);
    ck_assert_uint_eq(layout->msg_floats, (size_t)B * tiny.T * tiny.C);
    ck_assert_float_eq(exec_layout_optim(layout)->beta2, 0.95f);
    const int32_t act_slots[N_VSTAGES] = {3, 2, 1};
    for (int32_t vs = 0; vs < N_VSTAGES; vs++) {
        const ExecVstageLayout *v = &layout->vstages[vs];
        const Gpt2SliceParams  *slice = exec_layout_slice_params(layout, vs);
        ck_assert_int_eq(slice->layer_begin, partition->layer_begin[vs]);
        ck_assert_int_eq(slice->layer_end, partition->layer_end[vs]);
        ck_assert_int_eq(slice->has_embedding, vs == 0);
        ck_assert_int_eq(slice->has_head, vs == N_VSTAGES - 1);
        ck_assert_int_eq(slice->tie_head, 0);
        ck_assert_int_eq(slice->B, B);
        ck_assert_int_eq(slice->n_act_slots, act_slots[vs]);
        ck_assert_mem_eq(&slice->model, &tiny, sizeof tiny);
        Gpt2Table *table = gpt2_table_new(slice);
        ck_assert_uint_eq(v->n_params, gpt2_table_n_params(table));
        ck_assert_int_eq(v->n_tensors, gpt2_table_n_tensors(table));
        size_t offset = 0;
        for (int i = 0; i < v->n_tensors; i++) {
            const Gpt2Tensor *want = gpt2_table_tensor(table, i);
            const ExecTensor *got = &v->tensors[i];
            ck_assert_str_eq(got->name, want->name);
            ck_assert_ptr_ne(got->name, want->name); /* the layout's own copy */
            ck_assert_uint_eq(got->offset, offset);
            ck_assert_uint_eq(got->offset, want->offset);
            ck_assert_uint_eq(got->numel, want->numel);
            ck_assert_int_eq(got->ndim, want->ndim);
            ck_assert_int_eq(got->shape[0], want->shape[0]);
            ck_assert_int_eq(got->shape[1], want->shape[1]);
            ck_assert_int_eq(got->is_matrix, want->is_matrix);
            offset += got->numel;
        }
        ck_assert_uint_eq(offset, v->n_params);
        gpt2_table_free(table);
    }
    /* A reference outlives the caller's. */
    ExecModelLayout *kept = exec_model_layout_ref(layout);
    exec_model_layout_unref(layout);
    ck_assert_str_eq(kept->vstages[0].tensors[0].name, "wte.weight");
    exec_model_layout_unref(kept);
    pp_partition_free(partition);
}
END_TEST

/* Roles: params and grads always; the optimizer state the CPU optimizer allocates for the
 * tensor (AdamW m and v, or Muon's momentum for the blocks' matrices); prev_update with error
 * feedback. Loop index: 0 AdamW, 1 Muon, 2 Muon with error feedback. */
START_TEST(test_layout_roles) {
    KernOptimParams  optim = {.kind = _i == 0 ? KERN_OPTIM_ADAMW : KERN_OPTIM_MUON,
                              .beta1 = 0.9f,
                              .beta2 = 0.95f,
                              .muon_momentum = 0.95f,
                              .muon_lr_ratio = 1.0f,
                              .muon_ns_steps = 5,
                              .error_feedback = _i == 2};
    PpPartition     *partition = NULL;
    ExecModelLayout *layout = layout_new(&optim, &partition);
    const guint      base =
        EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_PARAMS) | EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_GRADS);
    const guint adam =
        EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_ADAM_M) | EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_ADAM_V);
    const guint muon = EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_MUON_MOMENTUM);
    const guint prev = _i == 2 ? EXEC_TENSOR_ROLE_BIT(EXEC_TENSOR_PREV_UPDATE) : 0u;
    int         n_muon = 0;
    for (int32_t vs = 0; vs < N_VSTAGES; vs++) {
        const ExecVstageLayout *v = &layout->vstages[vs];
        Gpt2Slice              *slice = gpt2_slice_new(exec_layout_slice_params(layout, vs));
        KernOptim              *opt = kern_optim_new(exec_layout_optim(layout), slice);
        ck_assert_int_eq(kern_optim_prev_update(opt) != NULL, _i == 2);
        for (int i = 0; i < v->n_tensors; i++) {
            float *first = NULL, *second = NULL;
            int    is_muon = kern_optim_tensor_state(opt, i, &first, &second);
            ck_assert_uint_eq(v->tensors[i].roles, base | (is_muon ? muon : adam) | prev);
            ck_assert_int_eq(is_muon,
                             _i > 0 && gpt2_slice_tensor(slice, i)->kind == GPT2_TENSOR_HIDDEN);
            n_muon += is_muon;
        }
        kern_optim_free(opt);
        gpt2_slice_free(slice);
    }
    /* Four matrices per block under Muon. */
    ck_assert_int_eq(n_muon, _i > 0 ? 4 * tiny.L : 0);
    exec_model_layout_unref(layout);
    pp_partition_free(partition);
}
END_TEST

static Suite *layout_suite(void) {
    Suite *s = suite_create("exec-layout");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, test_layout_slices);
    tcase_add_loop_test(tc, test_layout_roles, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(layout_suite());
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
