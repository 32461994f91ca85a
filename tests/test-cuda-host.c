/* SPDX-License-Identifier: MIT
 * test-cuda-host.c: the host-only parts of the CUDA kernels library, which run without a
 * GPU: embedding-backward buckets, slice parameter checks, arena sizes (closed forms and
 * invariants, GPT-2 124M in bf16 as a worked example) and the attention scratch size.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-cuda.h"
#include "gpt2-slice-cuda.h"
#include "kern-cuda.h"
#include "kern-util.h"

static size_t round256(size_t b) {
    return (b + 255) & ~(size_t)255;
}

START_TEST(test_buckets_known) {
    const int32_t tokens[6] = {3, 1, 3, 0, 1, 3};
    int32_t       order[6], starts[7];
    int64_t       scratch[6];
    int           n = gpt2_cuda_encoder_buckets(order, starts, scratch, tokens, 6);
    ck_assert_int_eq(n, 3);
    const int32_t want_order[6] = {3, 1, 4, 0, 2, 5}, want_starts[4] = {0, 1, 3, 6};
    ck_assert_mem_eq(order, want_order, sizeof want_order);
    ck_assert_mem_eq(starts, want_starts, sizeof want_starts);
}
END_TEST

START_TEST(test_buckets_random) {
    enum { N = 500, V = 40 };
    int32_t  tokens[N], order[N], starts[N + 1];
    int64_t  scratch[N];
    int      seen[N] = {0};
    uint64_t rng = kern_rng_seed(5);
    for (int i = 0; i < N; i++)
        tokens[i] = (int32_t)(kern_rng_u32(&rng) % V);
    int n = gpt2_cuda_encoder_buckets(order, starts, scratch, tokens, N);
    ck_assert_int_ge(n, 1);
    ck_assert_int_le(n, V);
    ck_assert_int_eq(starts[0], 0);
    ck_assert_int_eq(starts[n], N);
    for (int u = 0; u < n; u++) {
        ck_assert_int_lt(starts[u], starts[u + 1]);
        int tok = tokens[order[starts[u]]];
        if (u > 0) /* buckets by ascending token, one per distinct token */
            ck_assert_int_gt(tok, tokens[order[starts[u - 1]]]);
        for (int k = starts[u]; k < starts[u + 1]; k++) {
            ck_assert_int_eq(tokens[order[k]], tok);
            if (k > starts[u]) /* positions ascending inside a bucket */
                ck_assert_int_gt(order[k], order[k - 1]);
            seen[order[k]]++;
        }
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(seen[i], 1);
}
END_TEST

static Gpt2CudaSliceParams tiny_params(KernDtype dt) {
    Gpt2CudaSliceParams p;
    memset(&p, 0, sizeof p);
    p.slice.model = (Gpt2Config){.L = 2, .C = 16, .NH = 2, .T = 8, .V = 37, .Vp = 128};
    p.slice.layer_begin = 0;
    p.slice.layer_end = 2;
    p.slice.has_embedding = 1;
    p.slice.has_head = 1;
    p.slice.B = 2;
    p.slice.n_act_slots = 3;
    p.dtype = dt;
    return p;
}

START_TEST(test_params_check) {
    Gpt2CudaSliceParams p = tiny_params(KERN_DTYPE_F32);
    ck_assert_ptr_null(gpt2_cuda_slice_params_check(&p));
    Gpt2CudaSliceParams bad;
    bad = p;
    bad.slice.model.NH = 3; /* 16 % 3 != 0 */
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad = p;
    bad.slice.model.Vp = 36; /* < V */
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad = p;
    bad.slice.layer_end = 3; /* > L */
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad = p;
    bad.slice.layer_begin = 1; /* embedding not on block 0 */
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad = p;
    bad.slice.layer_end = 1; /* head not after block L-1 */
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad = p;
    bad.slice.has_head = 0;
    bad.slice.layer_end = 1;
    bad.slice.tie_head = 1; /* tie without both ends */
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad = p;
    bad.slice.n_act_slots = 0;
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad = p;
    bad.slice.B = 0;
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad = p;
    bad.dtype = KERN_DTYPE_N;
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    /* bf16: C 24 with NH 2 gives head size 12, not a multiple of 8; Vp 132 likewise */
    bad = tiny_params(KERN_DTYPE_BF16);
    ck_assert_ptr_null(gpt2_cuda_slice_params_check(&bad));
    bad.slice.model.C = 24;
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad.dtype = KERN_DTYPE_F32; /* fine in fp32 */
    ck_assert_ptr_null(gpt2_cuda_slice_params_check(&bad));
    bad = tiny_params(KERN_DTYPE_BF16);
    bad.slice.model.Vp = 132;
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    /* flash attention: bf16 with a head size of 32, 64 or 128 only */
    bad = tiny_params(KERN_DTYPE_BF16);
    bad.flash_attention = 1; /* head size 8 */
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    bad.slice.model.C = 128; /* head size 64 */
    ck_assert_ptr_null(gpt2_cuda_slice_params_check(&bad));
    bad.dtype = KERN_DTYPE_F32;
    ck_assert_ptr_nonnull(gpt2_cuda_slice_params_check(&bad));
    ck_assert_int_eq(gpt2_cuda_flash_attention_supported(768, 12, KERN_DTYPE_BF16), 1);
    ck_assert_int_eq(gpt2_cuda_flash_attention_supported(1024, 16, KERN_DTYPE_BF16), 1);
    ck_assert_int_eq(gpt2_cuda_flash_attention_supported(96, 2, KERN_DTYPE_BF16), 0);
}
END_TEST

START_TEST(test_attention_scratch) {
    /* B 2, T 8, C 16, NH 2: fp32 scores and dt d-scores (B NH T T), seven (B T C) head buffers */
    for (int dt = 0; dt < KERN_DTYPE_N; dt++) {
        size_t esz = kern_dtype_size((KernDtype)dt);
        size_t want = round256(2 * 2 * 8 * 8 * 4) + round256(2 * 2 * 8 * 8 * esz) +
                      7 * round256(2 * 8 * 16 * esz);
        ck_assert_uint_eq(gpt2_cuda_attention_scratch_bytes(2, 8, 16, 2, (KernDtype)dt), want);
    }
}
END_TEST

START_TEST(test_sizes_tiny) {
    /* closed forms: n_params of the tiny model; every buffer rounded to 256 bytes */
    size_t n_params = 2 * 128 * 16 + 8 * 16 + 2 * (12 * 16 * 16 + 13 * 16) + 2 * 16;
    for (int dt = 0; dt < KERN_DTYPE_N; dt++) {
        Gpt2CudaSliceParams p = tiny_params((KernDtype)dt);
        Gpt2CudaSliceSizes  z;
        gpt2_cuda_slice_sizes(&p, &z);
        size_t esz = kern_dtype_size((KernDtype)dt);
        size_t N = 16, C = 16, nc = N * C * esz, nf = N * 4, att = 2 * 2 * 8 * 8 * esz;
        size_t layer = 7 * round256(nc) + 4 * round256(nf) + 2 * round256(3 * nc) +
                       3 * round256(4 * nc) + round256(att);
        size_t head = 2 * round256(3 * nc) + 2 * round256(nc) + 2 * round256(nf) +
                      round256(N * 128 * esz) + 4 * round256(N * 4) + round256((N + 1) * 4);
        ck_assert_uint_eq(z.params_bytes, round256(n_params * 4));
        ck_assert_uint_eq(z.grads_bytes, round256(n_params * 4));
        ck_assert_uint_eq(z.compute_params_bytes,
                          dt == KERN_DTYPE_F32 ? 0 : round256(n_params * 2));
        ck_assert_uint_eq(z.act_slot_bytes, head + 2 * layer);
        ck_assert_uint_eq(z.acts_bytes, 3 * z.act_slot_bytes);
        ck_assert_uint_eq(z.scratch_bytes, round256(nc) + gpt2_cuda_attention_scratch_bytes(
                                                              2, 8, 16, 2, (KernDtype)dt));
        ck_assert_uint_eq(z.total_bytes, z.params_bytes + z.compute_params_bytes + z.grads_bytes +
                                             z.acts_bytes + z.scratch_bytes);
    }
}
END_TEST

START_TEST(test_sizes_gpt2_124m) {
    /* GPT-2 124M, one slice, tied head, B 16 x T 1024, bf16, one slot: 124.5M params; per block
     * 25 (N, C) bf16 buffers + att (B, NH, T, T) bf16 + 4 (N) fp32 rows; the head: probs
     * (N, Vp) bf16 */
    Gpt2CudaSliceParams p;
    memset(&p, 0, sizeof p);
    p.slice.model = (Gpt2Config){.L = 12, .C = 768, .NH = 12, .T = 1024, .V = 50257, .Vp = 50304};
    p.slice.layer_end = 12;
    p.slice.has_embedding = 1;
    p.slice.has_head = 1;
    p.slice.tie_head = 1;
    p.slice.B = 16;
    p.slice.n_act_slots = 1;
    p.dtype = KERN_DTYPE_BF16;
    Gpt2CudaSliceSizes z;
    gpt2_cuda_slice_sizes(&p, &z);
    size_t n_params = 50304 * 768 + 1024 * 768 + 12 * (12 * 768 * 768 + 13 * 768) + 2 * 768;
    ck_assert_uint_eq(z.params_bytes, round256(n_params * 4));
    size_t N = 16 * 1024, NC = N * 768;
    size_t layer = 25 * NC * 2 + (size_t)16 * 12 * 1024 * 1024 * 2 + 4 * N * 4;
    size_t head = 2 * 13 * NC * 2 + 2 * NC * 2 + 2 * N * 4 + N * 50304 * 2 + (5 * N + 1) * 4;
    /* rounding adds at most 255 bytes per buffer (17 per block, 12 in the head) */
    ck_assert_uint_ge(z.act_slot_bytes, head + 12 * layer);
    ck_assert_uint_le(z.act_slot_bytes, head + 12 * layer + (12 + 12 * 17) * 255);
    /* flash attention keeps one fp32 log-sum-exp per (b, h, t) instead of the probabilities,
     * and its scratch is one fp32 per (b, h, t) */
    p.flash_attention = 1;
    Gpt2CudaSliceSizes f;
    gpt2_cuda_slice_sizes(&p, &f);
    size_t bht = (size_t)16 * 12 * 1024;
    ck_assert_uint_eq(z.act_slot_bytes - f.act_slot_bytes,
                      12 * (round256(bht * 1024 * 2) - round256(bht * 4)));
    ck_assert_uint_eq(f.scratch_bytes, round256(NC * 2) + round256(bht * 4));
}
END_TEST

/* Without a usable device the query says why, in the CUDA runtime's words; with one it gives
 * no reason. CUDA_VISIBLE_DEVICES="" (set before the runtime starts: each test runs in its own
 * child) hides every device, so the first case holds on a GPU machine too. */
START_TEST(test_device_query_hidden) {
    ck_assert_int_eq(setenv("CUDA_VISIBLE_DEVICES", "", 1), 0);
    const char *why = (const char *)"unset";
    ck_assert_int_eq(kern_cuda_device_query(&why), 0);
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strlen(why) > 8 && strcmp(why, "unset") != 0, "reason '%s'", why);
    ck_assert_int_eq(kern_cuda_device_count(), 0);
}
END_TEST

START_TEST(test_device_query_consistent) {
    const char *why = (const char *)"unset";
    int         n = kern_cuda_device_query(&why);
    ck_assert_int_ge(n, 0);
    if (n == 0)
        ck_assert_msg(why && strlen(why) > 8 && strcmp(why, "unset") != 0, "reason '%s'", why);
    else
        ck_assert_ptr_null(why);
    ck_assert_int_eq(kern_cuda_device_count(), n);
    ck_assert_int_eq(kern_cuda_device_query(NULL), n);
}
END_TEST

static Suite *host_suite(void) {
    Suite *s = suite_create("cuda-host");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, test_buckets_known);
    tcase_add_test(tc, test_buckets_random);
    tcase_add_test(tc, test_params_check);
    tcase_add_test(tc, test_attention_scratch);
    tcase_add_test(tc, test_sizes_tiny);
    tcase_add_test(tc, test_sizes_gpt2_124m);
    tcase_add_test(tc, test_device_query_hidden);
    tcase_add_test(tc, test_device_query_consistent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(host_suite());
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
