/* SPDX-License-Identifier: MIT
 * test-gpt2-table.c: the tensor table (kernels/gpt2-table.h), which the CPU slice
 * (kernels/gpt2-slice.h) is built on, on every kind of slice of a tiny GPT-2: the layout in
 * closed form, the index lookups, and an init that is bitwise the whole model's in any slice.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-slice.h"
#include "gpt2-table.h"

static const Gpt2Config tiny = {.L = 3, .C = 16, .NH = 2, .T = 8, .V = 37, .Vp = 128};

/* (layer_begin, layer_end, has_embedding, has_head, tie_head) of the slices tried */
static const int shapes[][5] = {
    {0, 3, 1, 1, 0}, /* whole model, untied head */
    {0, 3, 1, 1, 1}, /* whole model, tied head */
    {0, 1, 1, 0, 0}, /* first */
    {1, 2, 0, 0, 0}, /* middle */
    {2, 3, 0, 1, 0}, /* last */
    {3, 3, 0, 1, 0}, /* last, no block */
    {0, 0, 1, 0, 0}, /* first, no block */
};

static Gpt2SliceParams shape_params(int k) {
    Gpt2SliceParams p = {.model = tiny,
                         .layer_begin = shapes[k][0],
                         .layer_end = shapes[k][1],
                         .has_embedding = shapes[k][2],
                         .has_head = shapes[k][3],
                         .tie_head = shapes[k][4],
                         .B = 2,
                         .n_act_slots = 1};
    return p;
}

/* Tensors back to back in table order, as many floats as the GPT-2 layout has in closed form,
 * each found by its name; the CPU slice's arena has that length. */
START_TEST(test_table_layout) {
    Gpt2SliceParams p = shape_params(_i);
    Gpt2Table      *t = gpt2_table_new(&p);
    Gpt2Slice      *s = gpt2_slice_new(&p);
    size_t          C = (size_t)tiny.C, n_layers = (size_t)(p.layer_end - p.layer_begin);
    size_t          want = (p.has_embedding ? (size_t)(tiny.Vp + tiny.T) * C : 0) +
                  n_layers * (12 * C * C + 13 * C) +
                  (p.has_head ? 2 * C + (p.tie_head ? 0 : (size_t)tiny.Vp * C) : 0);
    ck_assert_uint_eq(gpt2_table_n_params(t), want);
    ck_assert_uint_eq(gpt2_slice_n_params(s), want);
    size_t next = 0;
    for (int i = 0; i < gpt2_table_n_tensors(t); i++) {
        const Gpt2Tensor *a = gpt2_table_tensor(t, i);
        ck_assert_uint_eq(a->offset, next);
        ck_assert_uint_eq(a->numel, (size_t)a->shape[0] * a->shape[1]);
        ck_assert_int_eq(a->is_matrix, a->ndim == 2);
        ck_assert_ptr_eq(gpt2_table_tensor_by_name(t, a->name), a);
        ck_assert_str_eq(gpt2_slice_tensor(s, i)->name, a->name);
        ck_assert_uint_eq(gpt2_slice_tensor(s, i)->offset, a->offset);
        next += a->numel;
    }
    ck_assert_uint_eq(next, want);
    ck_assert_ptr_null(gpt2_table_tensor_by_name(t, "h.99.ln_1.weight"));
    gpt2_slice_free(s);
    gpt2_table_free(t);
}
END_TEST

START_TEST(test_table_indices) {
    Gpt2SliceParams p = shape_params(_i);
    Gpt2Table      *t = gpt2_table_new(&p);
    const char     *ends[5] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias",
                               "lm_head.weight"};
    int idx[5] = {gpt2_table_wte(t), gpt2_table_wpe(t), gpt2_table_lnf_w(t), gpt2_table_lnf_b(t),
                  gpt2_table_head(t)};
    for (int k = 0; k < 5; k++) {
        const Gpt2Tensor *byname = gpt2_table_tensor_by_name(t, ends[k]);
        if (k == 4 && p.tie_head) {
            /* a tied head is wte */
            ck_assert_ptr_null(byname);
            ck_assert_int_eq(idx[4], idx[0]);
            continue;
        }
        if (!byname) {
            ck_assert_int_eq(idx[k], -1);
            continue;
        }
        ck_assert_ptr_eq(gpt2_table_tensor(t, idx[k]), byname);
    }
    static const char *suffix[GPT2_LT_N] = {
        "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
        "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    for (int l = 0; l < p.layer_end - p.layer_begin; l++) {
        for (int w = 0; w < GPT2_LT_N; w++) {
            char name[64];
            snprintf(name, sizeof name, "h.%d.%s", p.layer_begin + l, suffix[w]);
            const Gpt2Tensor *x = gpt2_table_tensor(t, gpt2_table_layer_tensor(t, l, w));
            ck_assert_str_eq(x->name, name);
        }
    }
    gpt2_table_free(t);
}
END_TEST

/* Any partition starts from the same model: every tensor of a slice inits bitwise as the
 * same-named tensor of the whole model; gains 1, biases 0, padded vocabulary rows 0, the rest
 * drawn; gpt2_slice_init_params() puts each tensor's init at its offset. */
START_TEST(test_table_init_partition) {
    Gpt2SliceParams p = shape_params(_i), whole_p = shape_params(p.tie_head ? 1 : 0);
    Gpt2Table      *t = gpt2_table_new(&p), *whole = gpt2_table_new(&whole_p);
    Gpt2Slice      *s = gpt2_slice_new(&p);
    for (uint64_t seed = 1; seed <= 2; seed++) {
        gpt2_slice_init_params(s, seed);
        for (int i = 0; i < gpt2_table_n_tensors(t); i++) {
            const Gpt2Tensor *x = gpt2_table_tensor(t, i);
            const Gpt2Tensor *w = gpt2_table_tensor_by_name(whole, x->name);
            ck_assert_ptr_nonnull(w);
            float *v = malloc(x->numel * sizeof(float)), *ref = malloc(x->numel * sizeof(float));
            gpt2_table_init_tensor(t, i, seed, v);
            gpt2_table_init_tensor(whole, (int)(w - gpt2_table_tensor(whole, 0)), seed, ref);
            ck_assert_mem_eq(v, ref, x->numel * sizeof(float));
            ck_assert_mem_eq(v, gpt2_slice_params(s) + x->offset, x->numel * sizeof(float));
            size_t drawn = x->shape[0] == tiny.Vp ? (size_t)tiny.V * x->shape[1] : x->numel;
            for (size_t j = 0; j < x->numel; j++) {
                if (x->kind == GPT2_TENSOR_GAIN)
                    ck_assert_float_eq(v[j], 1.0f);
                else if (x->kind == GPT2_TENSOR_BIAS || j >= drawn)
                    ck_assert_float_eq(v[j], 0.0f);
                else
                    ck_assert(v[j] != 0.0f && fabsf(v[j]) < 0.2f); /* std 0.02 or less */
            }
            free(ref);
            free(v);
        }
    }
    gpt2_slice_free(s);
    gpt2_table_free(whole);
    gpt2_table_free(t);
}
END_TEST

/* The gradient buckets tile the flat array from its end to its start: the head's 3 tensors
 * (ln_f only when tied), each block's 12 from the last block to the first, the 2 embeddings;
 * buckets a slice does not hold are empty. */
START_TEST(test_table_buckets) {
    Gpt2SliceParams p = shape_params(_i);
    Gpt2Table      *t = gpt2_table_new(&p);
    int             n_layers = p.layer_end - p.layer_begin;
    ck_assert_int_eq(gpt2_table_n_buckets(t), n_layers + 2);
    size_t end = gpt2_table_n_params(t);
    for (int k = 0; k < gpt2_table_n_buckets(t); k++) {
        size_t lo, hi;
        gpt2_table_bucket(t, k, &lo, &hi);
        ck_assert_uint_eq(hi, end);
        int first, last; /* the bucket's tensors, -1 when none */
        if (k == 0) {
            first = p.has_head ? gpt2_table_lnf_w(t) : -1;
            last = p.has_head ? gpt2_table_n_tensors(t) - 1 : -1;
        } else if (k == n_layers + 1) {
            first = p.has_embedding ? gpt2_table_wte(t) : -1;
            last = p.has_embedding ? gpt2_table_wpe(t) : -1;
        } else {
            first = gpt2_table_layer_tensor(t, n_layers - k, GPT2_LT_LN1_W);
            last = gpt2_table_layer_tensor(t, n_layers - k, GPT2_LT_FCPROJ_B);
        }
        if (first < 0) {
            ck_assert_uint_eq(lo, hi);
        } else {
            ck_assert_uint_eq(lo, gpt2_table_tensor(t, first)->offset);
            ck_assert_uint_eq(hi, gpt2_table_tensor(t, last)->offset +
                                      gpt2_table_tensor(t, last)->numel);
        }
        end = lo;
    }
    ck_assert_uint_eq(end, 0);
    gpt2_table_free(t);
}
END_TEST

static Suite *table_suite(void) {
    Suite *s = suite_create("gpt2-table");
    TCase *tc = tcase_create("table");
    int    n = (int)(sizeof shapes / sizeof shapes[0]);
    tcase_add_loop_test(tc, test_table_layout, 0, n);
    tcase_add_loop_test(tc, test_table_indices, 0, n);
    tcase_add_loop_test(tc, test_table_init_partition, 0, n);
    tcase_add_loop_test(tc, test_table_buckets, 0, n);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(table_suite());
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
