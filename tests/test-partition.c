/* SPDX-License-Identifier: MIT
 * test-partition.c: the executor's layer-to-virtual-stage partition (exec/exec-partition.h):
 * closed-form costs, even splits, head-heavy splits, optimality against exhaustive search,
 * explicit run.layers_per_stage and its errors.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "exec-partition.h"
#include "pp-error.h"

static ExecPartition *partition_balanced(int32_t L, int32_t C, int32_t T, int32_t V,
                                         int32_t n_vstages) {
    ExecPartitionParams p = {
        .n_layers = L, .hidden = C, .seq_len = T, .vocab = V, .n_vstages = n_vstages};
    g_autoptr(GError) error = NULL;
    ExecPartition *part = exec_partition_new(&p, &error);
    ck_assert_ptr_nonnull(part);
    ck_assert_ptr_null(error);
    return part;
}

static void check_counts(const ExecPartition *part, const int32_t *expected) {
    for (int32_t vs = 0; vs < part->n_vstages; vs++)
        ck_assert_int_eq(part->layer_end[vs] - part->layer_begin[vs], expected[vs]);
}

START_TEST(test_partition_flops) {
    /* GPT-2 small block: 24*1024*768^2 + 4*1024^2*768; head 2*1024*768*50257. */
    ck_assert_int_eq(exec_partition_layer_flops(768, 1024), INT64_C(17716740096));
    ck_assert_int_eq(exec_partition_head_flops(768, 1024, 50257), INT64_C(79047426048));
}
END_TEST

START_TEST(test_partition_even) {
    /* A negligible head: 10 blocks over 4 stages split 3,3,2,2 (remainder to the front). */
    g_autoptr(ExecPartition) part = partition_balanced(10, 64, 16, 1, 4);
    const int32_t expected[] = {3, 3, 2, 2};
    check_counts(part, expected);
    ck_assert_int_eq(part->layer_begin[0], 0);
    ck_assert_int_eq(part->layer_end[3], 10);
    for (int32_t vs = 1; vs < 4; vs++)
        ck_assert_int_eq(part->layer_begin[vs], part->layer_end[vs - 1]);
}
END_TEST

START_TEST(test_partition_head_heavy) {
    /* C=32, T=16: a block costs 425984 FLOPs; V=832 makes the head 851968 = 2 blocks.
     * 8 blocks over 4 stages: the optimum is 3 blocks of cost per stage, the last stage
     * holds 1 block + head, and the even-share rule gives 2,2,3,1. */
    int64_t layer = exec_partition_layer_flops(32, 16);
    ck_assert_int_eq(layer, 425984);
    ck_assert_int_eq(exec_partition_head_flops(32, 16, 832), 2 * layer);
    g_autoptr(ExecPartition) part = partition_balanced(8, 32, 16, 832, 4);
    const int32_t expected[] = {2, 2, 3, 1};
    check_counts(part, expected);
    ck_assert_int_eq(part->max_flops_per_seq, 3 * layer);
    ck_assert_int_eq(part->flops_per_seq[3], 3 * layer);
}
END_TEST

/* Smallest max cost over every composition of L blocks into V parts >= 1 (exhaustive). */
static int64_t brute_force_best(int32_t L, int32_t V, int64_t layer, int64_t head) {
    int64_t best = INT64_MAX;
    int32_t n[16];
    /* Enumerate compositions by the cut positions as a bit mask over L-1 gaps. */
    for (uint32_t mask = 0; mask < (1u << (L - 1)); mask++) {
        if (__builtin_popcount(mask) != V - 1)
            continue;
        int32_t k = 0, count = 1;
        for (int32_t gap = 0; gap < L - 1; gap++) {
            if (mask & (1u << gap)) {
                n[k++] = count;
                count = 1;
            } else {
                count++;
            }
        }
        n[k] = count;
        int64_t worst = 0;
        for (int32_t vs = 0; vs < V; vs++) {
            int64_t cost = n[vs] * layer + (vs == V - 1 ? head : 0);
            worst = cost > worst ? cost : worst;
        }
        best = worst < best ? worst : best;
    }
    return best;
}

START_TEST(test_partition_optimal) {
    const int32_t vocabs[] = {1, 300, 832, 2000, 9000};
    for (int32_t L = 1; L <= 10; L++) {
        for (int32_t V = 1; V <= L; V++) {
            for (size_t i = 0; i < G_N_ELEMENTS(vocabs); i++) {
                g_autoptr(ExecPartition) part = partition_balanced(L, 32, 16, vocabs[i], V);
                int64_t layer = exec_partition_layer_flops(32, 16);
                int64_t head = exec_partition_head_flops(32, 16, vocabs[i]);
                ck_assert_int_eq(part->max_flops_per_seq, brute_force_best(L, V, layer, head));
                int32_t begin = 0;
                for (int32_t vs = 0; vs < V; vs++) {
                    ck_assert_int_eq(part->layer_begin[vs], begin);
                    ck_assert_int_gt(part->layer_end[vs], part->layer_begin[vs]);
                    begin = part->layer_end[vs];
                }
                ck_assert_int_eq(begin, L);
            }
        }
    }
}
END_TEST

START_TEST(test_partition_explicit) {
    const int32_t       counts[] = {1, 3, 2};
    ExecPartitionParams p = {.n_layers = 6,
                             .hidden = 32,
                             .seq_len = 16,
                             .vocab = 64,
                             .n_vstages = 3,
                             .layers_per_vstage = counts};
    g_autoptr(GError) error = NULL;
    g_autoptr(ExecPartition) part = exec_partition_new(&p, &error);
    ck_assert_ptr_nonnull(part);
    check_counts(part, counts);
    ck_assert_int_eq(part->layer_begin[2], 4);
}
END_TEST

START_TEST(test_partition_errors) {
    const int32_t       zero[] = {0, 4};
    const int32_t       short_sum[] = {1, 2};
    ExecPartitionParams p = {.n_layers = 4,
                             .hidden = 32,
                             .seq_len = 16,
                             .vocab = 64,
                             .n_vstages = 2,
                             .layers_per_vstage = zero};
    GError             *error = NULL;
    ck_assert_ptr_null(exec_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "run.layers_per_stage"));
    g_clear_error(&error);

    p.layers_per_vstage = short_sum;
    ck_assert_ptr_null(exec_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "sum to 3"));
    g_clear_error(&error);

    p.layers_per_vstage = NULL;
    p.n_vstages = 5;
    ck_assert_ptr_null(exec_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "model.layers=4"));
    g_clear_error(&error);
}
END_TEST

int main(void) {
    Suite *s = suite_create("partition");
    TCase *tc = tcase_create("partition");
    tcase_add_test(tc, test_partition_flops);
    tcase_add_test(tc, test_partition_even);
    tcase_add_test(tc, test_partition_head_heavy);
    tcase_add_test(tc, test_partition_optimal);
    tcase_add_test(tc, test_partition_explicit);
    tcase_add_test(tc, test_partition_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
