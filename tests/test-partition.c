/* SPDX-License-Identifier: MIT
 * test-partition.c: the layer-to-virtual-stage partition (common/pp-partition.h) shared by
 * the executor and the simulator: closed-form costs, even splits, head-heavy splits,
 * optimality against exhaustive search (transformer costs; random per-block costs and
 * memories, with and without a memory limit), the memory-infeasible error, explicit
 * run.layers_per_stage and its errors.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-partition.h"

/* Transformer blocks of equal cost and the head on the last virtual stage, as the executor
 * builds them; @layer_cost is (L) scratch. */
static PpPartitionParams transformer_params(int32_t L, int32_t C, int32_t T, int32_t V,
                                            int32_t n_vstages, int64_t *layer_cost) {
    for (int32_t i = 0; i < L; i++)
        layer_cost[i] = pp_partition_layer_flops(C, T);
    PpPartitionParams p = {.n_layers = L,
                           .n_vstages = n_vstages,
                           .layer_cost = layer_cost,
                           .last_cost = pp_partition_head_flops(C, T, V)};
    return p;
}

static PpPartition *partition_balanced(int32_t L, int32_t C, int32_t T, int32_t V,
                                       int32_t n_vstages) {
    int64_t           layer_cost[64];
    PpPartitionParams p = transformer_params(L, C, T, V, n_vstages, layer_cost);
    g_autoptr(GError) error = NULL;
    PpPartition *part = pp_partition_new(&p, &error);
    ck_assert_ptr_nonnull(part);
    ck_assert_ptr_null(error);
    return part;
}

static void check_counts(const PpPartition *part, const int32_t *expected) {
    for (int32_t vs = 0; vs < part->n_vstages; vs++)
        ck_assert_int_eq(part->layer_end[vs] - part->layer_begin[vs], expected[vs]);
}

START_TEST(test_partition_flops) {
    /* GPT-2 small block: 24*1024*768^2 + 4*1024^2*768; head 2*1024*768*50257. */
    ck_assert_int_eq(pp_partition_layer_flops(768, 1024), INT64_C(17716740096));
    ck_assert_int_eq(pp_partition_head_flops(768, 1024, 50257), INT64_C(79047426048));
}
END_TEST

START_TEST(test_partition_even) {
    /* A negligible head: 10 blocks over 4 stages split 3,3,2,2 (remainder to the front). */
    g_autoptr(PpPartition) part = partition_balanced(10, 64, 16, 1, 4);
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
    int64_t layer = pp_partition_layer_flops(32, 16);
    ck_assert_int_eq(layer, 425984);
    ck_assert_int_eq(pp_partition_head_flops(32, 16, 832), 2 * layer);
    g_autoptr(PpPartition) part = partition_balanced(8, 32, 16, 832, 4);
    const int32_t expected[] = {2, 2, 3, 1};
    check_counts(part, expected);
    ck_assert_int_eq(part->max_cost, 3 * layer);
    ck_assert_int_eq(part->cost[3], 3 * layer);
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
                g_autoptr(PpPartition) part = partition_balanced(L, 32, 16, vocabs[i], V);
                int64_t layer = pp_partition_layer_flops(32, 16);
                int64_t head = pp_partition_head_flops(32, 16, vocabs[i]);
                ck_assert_int_eq(part->max_cost, brute_force_best(L, V, layer, head));
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
    const int32_t     counts[] = {1, 3, 2};
    int64_t           layer_cost[6];
    PpPartitionParams p = transformer_params(6, 32, 16, 64, 3, layer_cost);
    p.layers_per_vstage = counts;
    g_autoptr(GError) error = NULL;
    g_autoptr(PpPartition) part = pp_partition_new(&p, &error);
    ck_assert_ptr_nonnull(part);
    check_counts(part, counts);
    ck_assert_int_eq(part->layer_begin[2], 4);
}
END_TEST

START_TEST(test_partition_even_mode) {
    /* pipeline.partition = even ignores costs: 10 blocks over 4 stages, 3,3,2,2, even with a
     * head worth 2 blocks; the head-heavy case above then has a larger max cost. */
    int64_t           layer_cost[10];
    PpPartitionParams p = transformer_params(10, 32, 16, 832, 4, layer_cost);
    p.mode = PP_PARTITION_EVEN;
    g_autoptr(PpPartition) part = pp_partition_new(&p, NULL);
    const int32_t expected[] = {3, 3, 2, 2};
    check_counts(part, expected);
    int64_t layer = pp_partition_layer_flops(32, 16);
    ck_assert_int_eq(part->cost[3], 4 * layer);
    ck_assert_int_eq(part->max_cost, 4 * layer);
    p.mode = PP_PARTITION_BALANCED;
    g_autoptr(PpPartition) balanced = pp_partition_new(&p, NULL);
    ck_assert_int_eq(balanced->max_cost, 3 * layer);
}
END_TEST

START_TEST(test_partition_errors) {
    const int32_t     zero[] = {0, 4};
    const int32_t     short_sum[] = {1, 2};
    int64_t           layer_cost[4];
    PpPartitionParams p = transformer_params(4, 32, 16, 64, 2, layer_cost);
    p.layers_per_vstage = zero;
    GError *error = NULL;
    ck_assert_ptr_null(pp_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "run.layers_per_stage"));
    g_clear_error(&error);

    p.layers_per_vstage = short_sum;
    ck_assert_ptr_null(pp_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "sum to 3"));
    g_clear_error(&error);

    p.layers_per_vstage = NULL;
    p.n_vstages = 5;
    ck_assert_ptr_null(pp_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "model.layers=4"));
    g_clear_error(&error);
}
END_TEST

/* --- random instances against exhaustive search --- */

static uint64_t xorshift64(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

/* An instance with per-block costs and memories; arrays sized for L <= 10, V <= 4. */
typedef struct {
    PpPartitionParams p;
    int64_t           cost[10], stat[10], act[10];
    int32_t           live[4];
} RandomInstance;

static void random_instance(RandomInstance *r, uint64_t *rng, int32_t L, int32_t V) {
    memset(r, 0, sizeof(*r));
    for (int32_t i = 0; i < L; i++) {
        r->cost[i] = (int64_t)(xorshift64(rng) % 100);
        r->stat[i] = 1 + (int64_t)(xorshift64(rng) % 50);
        r->act[i] = (int64_t)(xorshift64(rng) % 20);
    }
    for (int32_t vs = 0; vs < V; vs++)
        r->live[vs] = (int32_t)(xorshift64(rng) % 5);
    r->p = (PpPartitionParams){
        .n_layers = L,
        .n_vstages = V,
        .layer_cost = r->cost,
        .first_cost = (int64_t)(xorshift64(rng) % 60),
        .last_cost = (int64_t)(xorshift64(rng) % 200),
        .layer_static_bytes = r->stat,
        .layer_act_bytes = r->act,
        .live_units = r->live,
        .first_static_bytes = (int64_t)(xorshift64(rng) % 80),
        .first_act_bytes = (int64_t)(xorshift64(rng) % 10),
        .last_static_bytes = (int64_t)(xorshift64(rng) % 80),
        .last_act_bytes = (int64_t)(xorshift64(rng) % 30),
    };
}

/* Cost and memory of virtual stage @vs holding blocks [a, b), summed directly. */
static void stage_eval(const RandomInstance *r, int32_t vs, int32_t a, int32_t b, int64_t *cost,
                       int64_t *mem) {
    int64_t c = 0, st = 0, ac = 0;
    for (int32_t i = a; i < b; i++) {
        c += r->cost[i];
        st += r->stat[i];
        ac += r->act[i];
    }
    if (vs == 0) {
        c += r->p.first_cost;
        st += r->p.first_static_bytes;
        ac += r->p.first_act_bytes;
    }
    if (vs == r->p.n_vstages - 1) {
        c += r->p.last_cost;
        st += r->p.last_static_bytes;
        ac += r->p.last_act_bytes;
    }
    *cost = c;
    *mem = st + r->live[vs] * ac;
}

/* Over every composition of L blocks into V parts >= 1: the smallest max cost among those
 * whose every stage fits @limit (0: no limit; INT64_MAX when none fits) and the smallest
 * max memory of any. */
static void brute_force_random(const RandomInstance *r, int64_t limit, int64_t *best_cost,
                               int64_t *best_mem) {
    int32_t L = r->p.n_layers, V = r->p.n_vstages;
    *best_cost = *best_mem = INT64_MAX;
    for (uint32_t mask = 0; mask < (1u << (L - 1)); mask++) {
        if (__builtin_popcount(mask) != V - 1)
            continue;
        int64_t worst_cost = 0, worst_mem = 0;
        int32_t vs = 0, begin = 0;
        for (int32_t end = 1; end <= L; end++) {
            if (end < L && !(mask & (1u << (end - 1))))
                continue;
            int64_t c, m;
            stage_eval(r, vs, begin, end, &c, &m);
            worst_cost = MAX(worst_cost, c);
            worst_mem = MAX(worst_mem, m);
            vs++;
            begin = end;
        }
        *best_mem = MIN(*best_mem, worst_mem);
        if (limit == 0 || worst_mem <= limit)
            *best_cost = MIN(*best_cost, worst_cost);
    }
}

/* The partition covers [0, L) with non-empty contiguous ranges, reports its own costs and
 * memories, and fits @limit. */
static void check_partition(const RandomInstance *r, const PpPartition *part, int64_t limit) {
    int32_t begin = 0;
    int64_t worst = 0;
    for (int32_t vs = 0; vs < r->p.n_vstages; vs++) {
        ck_assert_int_eq(part->layer_begin[vs], begin);
        ck_assert_int_gt(part->layer_end[vs], begin);
        int64_t c, m;
        stage_eval(r, vs, begin, part->layer_end[vs], &c, &m);
        ck_assert_int_eq(part->cost[vs], c);
        if (limit > 0) {
            ck_assert_int_eq(part->mem_bytes[vs], m);
            ck_assert_int_le(m, limit);
        }
        worst = MAX(worst, c);
        begin = part->layer_end[vs];
    }
    ck_assert_int_eq(begin, r->p.n_layers);
    ck_assert_int_eq(part->max_cost, worst);
}

START_TEST(test_partition_random_brute_force) {
    uint64_t rng = UINT64_C(0x9e3779b97f4a7c15);
    int32_t  n_feasible = 0, n_infeasible = 0;
    for (int32_t trial = 0; trial < 3000; trial++) {
        int32_t        L = 1 + (int32_t)(xorshift64(&rng) % 10);
        int32_t        V = 1 + (int32_t)(xorshift64(&rng) % (uint64_t)MIN(L, 4));
        RandomInstance r;
        random_instance(&r, &rng, L, V);

        /* Unconstrained (the memory arrays are ignored without a limit). */
        int64_t best_cost, best_mem;
        brute_force_random(&r, 0, &best_cost, &best_mem);
        g_autoptr(PpPartition) free_part = pp_partition_new(&r.p, NULL);
        ck_assert_ptr_nonnull(free_part);
        ck_assert_ptr_null(free_part->mem_bytes);
        check_partition(&r, free_part, 0);
        ck_assert_int_eq(free_part->max_cost, best_cost);

        /* A limit between below the smallest feasible peak and well above it. */
        int64_t limit = best_mem - 20 + (int64_t)(xorshift64(&rng) % 200);
        if (limit < 1)
            limit = 1;
        r.p.mem_limit_bytes = limit;
        brute_force_random(&r, limit, &best_cost, &best_mem);
        GError *error = NULL;
        g_autoptr(PpPartition) part = pp_partition_new(&r.p, &error);
        if (best_cost == INT64_MAX) {
            ck_assert_ptr_null(part);
            ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
            g_autofree char *need =
                g_strdup_printf(" GiB (%" G_GINT64_FORMAT " bytes) on its fullest", best_mem);
            g_autofree char *lim = g_strdup_printf(" GiB (%" G_GINT64_FORMAT " bytes) per", limit);
            ck_assert_ptr_nonnull(strstr(error->message, need));
            ck_assert_ptr_nonnull(strstr(error->message, lim));
            g_clear_error(&error);
            n_infeasible++;
        } else {
            ck_assert_ptr_nonnull(part);
            check_partition(&r, part, limit);
            ck_assert_int_eq(part->max_cost, best_cost);
            n_feasible++;
        }
    }
    /* Both branches are exercised. */
    ck_assert_int_gt(n_feasible, 1000);
    ck_assert_int_gt(n_infeasible, 100);
}
END_TEST

START_TEST(test_partition_memory_infeasible) {
    /* 4 blocks of 10 static bytes + 5 activation bytes per live unit over 2 stages with 3 and
     * 1 live units: the 2,2 split needs 20 + 3 * 10 = 50 and 20 + 10 = 30; 1,3 needs
     * 10 + 15 = 25 and 30 + 15 = 45; the best peak is 1,3's 45 bytes, so a 44-byte limit has
     * no partition and the message names both numbers; 45 bytes admits exactly 1,3. */
    const int64_t     cost[] = {1, 1, 1, 1}, stat[] = {10, 10, 10, 10}, act[] = {5, 5, 5, 5};
    const int32_t     live[] = {3, 1};
    PpPartitionParams p = {.n_layers = 4,
                           .n_vstages = 2,
                           .layer_cost = cost,
                           .mem_limit_bytes = 44,
                           .layer_static_bytes = stat,
                           .layer_act_bytes = act,
                           .live_units = live};
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(pp_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "GiB (44 bytes) per"));
    ck_assert_ptr_nonnull(strstr(error->message, "GiB (45 bytes) on its fullest"));
    ck_assert_ptr_nonnull(strstr(error->message, "hardware.memory_gib"));

    p.mem_limit_bytes = 45;
    g_autoptr(PpPartition) part = pp_partition_new(&p, NULL);
    const int32_t expected[] = {1, 3};
    check_counts(part, expected);
    ck_assert_int_eq(part->max_cost, 3);
    ck_assert_int_eq(part->mem_bytes[0], 25);
    ck_assert_int_eq(part->mem_bytes[1], 45);
    /* Without the limit the even 2,2 split has the smaller max cost 2. */
    p.mem_limit_bytes = 0;
    g_autoptr(PpPartition) unconstrained = pp_partition_new(&p, NULL);
    ck_assert_int_eq(unconstrained->max_cost, 2);
}
END_TEST

/* Interleaving puts several virtual stages on one device, and what must fit is the device
 * (issue 21 §6): 8 blocks of cost 1 and 10 static bytes over 4 virtual stages on 2 devices
 * (vs 0, 2 on device 0; vs 1, 3 on device 1), the head's 30 bytes on vs 3. The even split
 * 2,2,2,2 puts 40 bytes on device 0 and 20 + 50 = 70 on device 1: it fits a 70-byte device,
 * though its head chunk (50) exceeds half the device, the old per-chunk limit, under which
 * no split fits (vs 3 needs at least 40 > 35). At 69 bytes the best split moves blocks off
 * device 1: a1 + a3 <= 3, so device 0 holds 5 and a stage 3 (3,1,3,1: 60 and 50 bytes). At
 * 49 bytes device 1 needs at least 20 + 30 = 50: nothing fits, and the message names the
 * split with the smallest fullest chunk (2,2,3,1, chunks at most 40 bytes: 50 and 60 bytes on
 * the devices), its fullest device and the excess. */
START_TEST(test_partition_device_memory) {
    const int64_t     cost[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t     stat[8] = {10, 10, 10, 10, 10, 10, 10, 10}, act[8] = {0};
    const int32_t     live[4] = {1, 1, 1, 1}, device[4] = {0, 1, 0, 1};
    PpPartitionParams p = {.n_layers = 8,
                           .n_vstages = 4,
                           .layer_cost = cost,
                           .mem_limit_bytes = 70,
                           .vstage_device = device,
                           .n_devices = 2,
                           .layer_static_bytes = stat,
                           .layer_act_bytes = act,
                           .live_units = live,
                           .last_static_bytes = 30};
    g_autoptr(GError) error = NULL;
    g_autoptr(PpPartition) fits = pp_partition_new(&p, &error);
    ck_assert_ptr_nonnull(fits);
    const int32_t even[] = {2, 2, 2, 2};
    check_counts(fits, even);
    ck_assert_int_eq(fits->max_cost, 2);
    ck_assert_int_eq(fits->mem_bytes[3], 50);
    ck_assert_int_eq(fits->mem_bytes[1] + fits->mem_bytes[3], 70);

    p.mem_limit_bytes = 69;
    g_autoptr(PpPartition) moved = pp_partition_new(&p, &error);
    ck_assert_ptr_nonnull(moved);
    const int32_t off[] = {3, 1, 3, 1};
    check_counts(moved, off);
    ck_assert_int_eq(moved->max_cost, 3);
    ck_assert_int_eq(moved->mem_bytes[0] + moved->mem_bytes[2], 60);
    ck_assert_int_eq(moved->mem_bytes[1] + moved->mem_bytes[3], 50);

    /* each chunk alone on its own device: the old per-chunk view, 35 bytes, fits nothing */
    p.mem_limit_bytes = 35;
    p.vstage_device = NULL;
    ck_assert_ptr_null(pp_partition_new(&p, &error));
    g_clear_error(&error);

    p.mem_limit_bytes = 49;
    p.vstage_device = device;
    ck_assert_ptr_null(pp_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    const char *const want[] = {"4 virtual stages on 2 devices",
                                "(60 bytes) on its fullest device (1)",
                                "over the limit of 0.000 GiB (49 bytes) per device"};
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++)
        ck_assert_msg(strstr(error->message, want[i]) != NULL, "'%s' not in '%s'", want[i],
                      error->message);
}
END_TEST

/* Costs and bytes that int64 cannot sum are an error, not a wrapped sum (issue 6: hidden =
 * 4194304 gave a negative bubble with exit 0); blocks past PP_PARTITION_MAX_LAYERS too. */
START_TEST(test_partition_overflow) {
    /* Exact while they fit, INT64_MAX (which pp_partition_new() refuses) beyond. */
    ck_assert_int_eq(pp_partition_layer_flops(4194304, 1024), INT64_C(432363156413612032));
    ck_assert_int_eq(pp_partition_head_flops(4194304, 1024, 50257), INT64_C(431704342790144));
    ck_assert_int_eq(pp_partition_layer_flops(16777216, 16777216), INT64_MAX);
    ck_assert_int_eq(pp_partition_head_flops(16777216, 16777216, 16777216), INT64_MAX);

    /* 24 blocks of GPT-2 Medium's depth at hidden 4194304, 16 sequences: 6.9e18 each. */
    int64_t cost[24], stat[24], act[24];
    for (int32_t i = 0; i < 24; i++) {
        cost[i] = 16 * pp_partition_layer_flops(4194304, 1024);
        stat[i] = 1000;
        act[i] = INT64_C(1) << 58;
    }
    PpPartitionParams p = {.n_layers = 24, .n_vstages = 8, .layer_cost = cost};
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(pp_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "model.hidden"));
    g_clear_error(&error);

    /* Costs that fit, but 8 live units of 24 blocks' 2^58 activation bytes do not. */
    for (int32_t i = 0; i < 24; i++)
        cost[i] = 1;
    const int32_t live[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    p.mem_limit_bytes = INT64_C(1) << 40;
    p.layer_static_bytes = stat;
    p.layer_act_bytes = act;
    p.live_units = live;
    ck_assert_ptr_null(pp_partition_new(&p, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    ck_assert_ptr_nonnull(strstr(error->message, "micro-batches in flight"));
    g_clear_error(&error);

    int64_t deep_cost[PP_PARTITION_MAX_LAYERS + 1];
    for (int32_t i = 0; i <= PP_PARTITION_MAX_LAYERS; i++)
        deep_cost[i] = 1;
    PpPartitionParams deep = {
        .n_layers = PP_PARTITION_MAX_LAYERS, .n_vstages = 4, .layer_cost = deep_cost};
    g_autoptr(PpPartition) part = pp_partition_new(&deep, &error);
    ck_assert_ptr_nonnull(part);
    deep.n_layers++;
    ck_assert_ptr_null(pp_partition_new(&deep, &error));
    ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(error->message, "model.layers=1025"));
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
    tcase_add_test(tc, test_partition_even_mode);
    tcase_add_test(tc, test_partition_errors);
    tcase_add_test(tc, test_partition_random_brute_force);
    tcase_add_test(tc, test_partition_memory_infeasible);
    tcase_add_test(tc, test_partition_device_memory);
    tcase_add_test(tc, test_partition_overflow);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
