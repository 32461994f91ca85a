/* SPDX-License-Identifier: MIT
 * test-gemm.c: the CPU kernels' matrix product and worker threads (kernels/kern-gemm.h,
 * kernels/kern-pool.h): every transpose case, ragged edges, strides, alpha and beta against a
 * double-precision reference; BLAS's rules for alpha 0, K 0 and beta 0; results bitwise
 * independent of the thread count (ragged blocks of rows and of columns, K deeper than
 * OpenBLAS's k-blocks) and of nesting; OpenBLAS left on one thread; the pool runs each task
 * exactly once. tests/meson.build runs it under every OpenBLAS core type the CPU supports.
 */
#include <cblas.h>
#include <check.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kern-gemm.h"
#include "kern-pool.h"
#include "kern-util.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* A product with padded strides: op(A) (M, K), op(B) (K, N), C (M, N). */
typedef struct {
    KernGemmTrans ta, tb;
    int           M, N, K, lda, ldb, ldc;
    float         alpha, beta;
    float        *A, *B, *C, *C0; /* C0: C before the call */
} Prod;

static void prod_init(Prod *p, KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K, float alpha,
                      float beta, uint64_t seed) {
    *p = (Prod){.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta};
    p->lda = (ta == KERN_GEMM_TRANS ? M : K) + 3;
    p->ldb = (tb == KERN_GEMM_TRANS ? K : N) + 5;
    p->ldc = N + 7;
    size_t na = (size_t)(ta == KERN_GEMM_TRANS ? K : M) * p->lda;
    size_t nb = (size_t)(tb == KERN_GEMM_TRANS ? N : K) * p->ldb;
    size_t nc = (size_t)M * p->ldc;
    p->A = kern_xmalloc((na + 1) * sizeof(float));
    p->B = kern_xmalloc((nb + 1) * sizeof(float));
    p->C = kern_xmalloc((nc + 1) * sizeof(float));
    p->C0 = kern_xmalloc((nc + 1) * sizeof(float));
    uint64_t rng = kern_rng_seed(seed);
    for (size_t i = 0; i < na; i++)
        p->A[i] = kern_rng_uniform(&rng) - 0.5f;
    for (size_t i = 0; i < nb; i++)
        p->B[i] = kern_rng_uniform(&rng) - 0.5f;
    for (size_t i = 0; i < nc; i++)
        p->C0[i] = kern_rng_uniform(&rng) - 0.5f;
    memcpy(p->C, p->C0, nc * sizeof(float));
}

static void prod_clear(Prod *p) {
    free(p->A);
    free(p->B);
    free(p->C);
    free(p->C0);
}

static void prod_run(Prod *p) {
    kern_gemm(p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B, p->ldb, p->beta, p->C,
              p->ldc);
}

static double op_a(const Prod *p, int i, int k) {
    return p->ta == KERN_GEMM_TRANS ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k];
}

static double op_b(const Prod *p, int k, int j) {
    return p->tb == KERN_GEMM_TRANS ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j];
}

/* Every element within float rounding of the double result (relative to the sum of the
 * terms' magnitudes), and the stride padding of C untouched. */
static void prod_check(const Prod *p, const char *what) {
    for (int i = 0; i < p->M; i++) {
        for (int j = 0; j < p->N; j++) {
            double s = 0.0, mag = 0.0;
            for (int k = 0; k < p->K; k++) {
                double t = op_a(p, i, k) * op_b(p, k, j);
                s += t;
                mag += fabs(t);
            }
            /* beta 0: C's old value (maybe NaN) does not count */
            double bc0 = p->beta != 0.0f ? p->beta * (double)p->C0[(size_t)i * p->ldc + j] : 0.0;
            double ref = p->alpha * s + bc0;
            double tol = 1e-5 * (fabs(p->alpha) * mag + fabs(bc0)) + 1e-30;
            double got = p->C[(size_t)i * p->ldc + j];
            ck_assert_msg(fabs(got - ref) <= tol, "%s: C[%d][%d] = %.9g, want %.9g", what, i, j,
                          got, ref);
        }
        for (int j = p->N; j < p->ldc; j++)
            ck_assert_msg(memcmp(&p->C[(size_t)i * p->ldc + j], &p->C0[(size_t)i * p->ldc + j],
                                 sizeof(float)) == 0,
                          "%s: padding C[%d][%d] written", what, i, j);
    }
}

/* --- correctness --- */

/* _i: threads; each case covers the four transpose combinations */
START_TEST(test_gemm_reference) {
    kern_set_threads(_i);
    static const int dims[] = {1, 3, 8, 9, 33, 70};
    static const struct { float alpha, beta; } ab[] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, -0.75f}};
    uint64_t seed = 1;
    for (int t = 0; t < 4; t++) {
        KernGemmTrans ta = t & 1 ? KERN_GEMM_TRANS : KERN_GEMM_NO_TRANS;
        KernGemmTrans tb = t & 2 ? KERN_GEMM_TRANS : KERN_GEMM_NO_TRANS;
        for (size_t m = 0; m < N_ELEMS(dims); m++) {
            for (size_t n = 0; n < N_ELEMS(dims); n++) {
                for (size_t k = 0; k < N_ELEMS(dims); k++) {
                    Prod p;
                    prod_init(&p, ta, tb, dims[m], dims[n], dims[k], ab[seed % 3].alpha,
                              ab[seed % 3].beta, seed);
                    seed++;
                    prod_run(&p);
                    prod_check(&p, "small");
                    prod_clear(&p);
                }
            }
        }
        /* deep, and big enough to be split among threads; then too short to split */
        Prod p;
        prod_init(&p, ta, tb, 300, 90, 1037, 1.0f, 1.0f, seed++);
        prod_run(&p);
        prod_check(&p, "split by rows");
        prod_clear(&p);
        prod_init(&p, ta, tb, 70, 333, 1037, 0.5f, 0.0f, seed++);
        prod_run(&p);
        prod_check(&p, "wide");
        prod_clear(&p);
    }
}
END_TEST

START_TEST(test_gemm_special_scalars) {
    Prod p;
    /* beta 0 never reads C: NaN there does not leak */
    prod_init(&p, KERN_GEMM_NO_TRANS, KERN_GEMM_TRANS, 20, 40, 16, 1.0f, 0.0f, 7);
    for (int i = 0; i < p.M; i++)
        for (int j = 0; j < p.N; j++)
            p.C[(size_t)i * p.ldc + j] = p.C0[(size_t)i * p.ldc + j] = NAN;
    prod_run(&p);
    prod_check(&p, "beta 0 over NaN");
    prod_clear(&p);
    /* K = 0 and alpha = 0 scale C by beta without reading A or B */
    prod_init(&p, KERN_GEMM_TRANS, KERN_GEMM_NO_TRANS, 5, 6, 0, 1.0f, 0.5f, 8);
    prod_run(&p);
    prod_check(&p, "K 0");
    prod_clear(&p);
    prod_init(&p, KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, 5, 6, 4, 0.0f, 2.0f, 9);
    p.A[0] = NAN;
    p.B[0] = INFINITY;
    prod_run(&p);
    for (int i = 0; i < p.M; i++)
        for (int j = 0; j < p.N; j++)
            ck_assert_float_eq(p.C[(size_t)i * p.ldc + j], 2.0f * p.C0[(size_t)i * p.ldc + j]);
    prod_clear(&p);
    /* alpha 0 and beta 0 over NaN everywhere: zeros, on a product large enough to be cut */
    prod_init(&p, KERN_GEMM_TRANS, KERN_GEMM_NO_TRANS, 200, 300, 64, 0.0f, 0.0f, 10);
    ck_assert((double)p.M * p.N * p.K >= KERN_GEMM_SERIAL_MACS);
    p.A[0] = p.B[0] = NAN;
    for (int i = 0; i < p.M; i++)
        for (int j = 0; j < p.N; j++)
            p.C[(size_t)i * p.ldc + j] = NAN;
    prod_run(&p);
    for (int i = 0; i < p.M; i++)
        for (int j = 0; j < p.N; j++)
            ck_assert_float_eq(p.C[(size_t)i * p.ldc + j], 0.0f);
    prod_clear(&p);
    /* beta 0 over NaN on a product cut into several blocks of rows and of columns */
    for (int wide = 0; wide < 2; wide++) {
        prod_init(&p, KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, wide ? 100 : 700, wide ? 700 : 100,
                  400, 1.0f, 0.0f, 11 + (uint64_t)wide);
        for (int i = 0; i < p.M; i++)
            for (int j = 0; j < p.N; j++)
                p.C[(size_t)i * p.ldc + j] = p.C0[(size_t)i * p.ldc + j] = NAN;
        prod_run(&p);
        prod_check(&p, wide ? "beta 0 over NaN, blocks of columns" : "beta 0 over NaN, of rows");
        prod_clear(&p);
    }
}
END_TEST

/* --- determinism --- */

/* C of one product with @threads threads, (transfer full). */
static float *gemm_with_threads(KernGemmTrans ta, KernGemmTrans tb, int M, int N, int K,
                                int threads) {
    kern_set_threads(threads);
    Prod p;
    prod_init(&p, ta, tb, M, N, K, 1.0f, 1.0f, 11);
    prod_run(&p);
    float *c = p.C;
    p.C = NULL;
    prod_clear(&p);
    return c;
}

/* Shapes above KERN_GEMM_SERIAL_MACS, so that they are cut into blocks (of rows, or of columns
 * when wider than tall), ragged against the blocks and OpenBLAS's register tiles, with K from
 * one OpenBLAS k-block to several; and the model's own shapes (T 256, B 4, C 256). */
static const struct {
    int M, N, K;
} det_shapes[] = {{301, 517, 700},   {517, 301, 700},   {1000, 33, 2049}, {97, 1003, 129},
                  {1024, 768, 256},  {1024, 256, 1024}, {256, 768, 1024}, {1024, 1200, 256},
                  {1213, 256, 1024}, {64, 4000, 256}};

/* _i: shape; each case covers the four transpose combinations */
START_TEST(test_gemm_thread_count_bitwise) {
    int    M = det_shapes[_i].M, N = det_shapes[_i].N, K = det_shapes[_i].K;
    size_t bytes = (size_t)M * (N + 7) * sizeof(float);
    ck_assert((double)M * N * K >= KERN_GEMM_SERIAL_MACS);
    for (int t = 0; t < 4; t++) {
        KernGemmTrans ta = t & 1 ? KERN_GEMM_TRANS : KERN_GEMM_NO_TRANS;
        KernGemmTrans tb = t & 2 ? KERN_GEMM_TRANS : KERN_GEMM_NO_TRANS;
        float        *one = gemm_with_threads(ta, tb, M, N, K, 1);
        for (int threads = 2; threads <= 3; threads++) {
            float *many = gemm_with_threads(ta, tb, M, N, K, threads);
            ck_assert_msg(memcmp(one, many, bytes) == 0, "%dx%dx%d trans %d: %d threads differ", M,
                          N, K, t, threads);
            free(many);
        }
        free(one);
    }
    /* the team supplies the threads: OpenBLAS's own pool stays unused */
    ck_assert_int_eq(openblas_get_num_threads(), 1);
}
END_TEST

/* Products called from inside tasks run on the task's thread alone, with the same result. */
typedef struct {
    Prod *prods; /* (tasks) */
} NestedArgs;

static void nested_task(void *arg, int task) {
    NestedArgs *a = arg;
    ck_assert_int_eq(kern_pool_workers(), 1);
    prod_run(&a->prods[task]);
}

START_TEST(test_gemm_nested_in_tasks) {
    enum { TASKS = 6 };
    kern_set_threads(3);
    Prod       prods[TASKS], ref;
    NestedArgs a = {.prods = prods};
    for (int i = 0; i < TASKS; i++)
        prod_init(&prods[i], KERN_GEMM_NO_TRANS, KERN_GEMM_TRANS, 90, 130, 300, 1.0f, 0.0f, 20);
    kern_parallel_for(TASKS, nested_task, &a);
    prod_init(&ref, KERN_GEMM_NO_TRANS, KERN_GEMM_TRANS, 90, 130, 300, 1.0f, 0.0f, 20);
    prod_run(&ref);
    for (int i = 0; i < TASKS; i++) {
        ck_assert_mem_eq(prods[i].C, ref.C, (size_t)ref.M * ref.ldc * sizeof(float));
        prod_clear(&prods[i]);
    }
    prod_clear(&ref);
}
END_TEST

/* --- pool --- */

typedef struct {
    atomic_int *hits; /* (n) */
} CountArgs;

static void count_task(void *arg, int task) {
    CountArgs *a = arg;
    atomic_fetch_add(&a->hits[task], 1);
}

static void count_range(void *arg, size_t begin, size_t end) {
    CountArgs *a = arg;
    for (size_t i = begin; i < end; i++)
        atomic_fetch_add(&a->hits[i], 1);
}

START_TEST(test_pool_each_task_once) {
    enum { N = 1000 };
    static atomic_int hits[N];
    CountArgs         a = {.hits = hits};
    for (int threads = 1; threads <= 4; threads++) {
        kern_set_threads(threads);
        for (int round = 0; round < 50; round++) {
            int n = 1 + (round * 37) % N;
            for (int i = 0; i < N; i++)
                atomic_store(&hits[i], 0);
            kern_parallel_for(n, count_task, &a);
            for (int i = 0; i < N; i++)
                ck_assert_int_eq(atomic_load(&hits[i]), i < n);
            for (int i = 0; i < N; i++)
                atomic_store(&hits[i], 0);
            kern_parallel_range((size_t)n, 7, count_range, &a);
            for (int i = 0; i < N; i++)
                ck_assert_int_eq(atomic_load(&hits[i]), i < n);
        }
    }
    ck_assert_int_eq(kern_get_threads(), 4);
    /* zero tasks: nothing runs */
    kern_parallel_for(0, count_task, &a);
    kern_parallel_range(0, 1, count_range, &a);
}
END_TEST

START_TEST(test_pool_scratch) {
    float *s = kern_thread_scratch(KERN_SCRATCH_ATTENTION, 100);
    ck_assert_uint_eq((uintptr_t)s % 64, 0);
    s[99] = 1.0f;
    ck_assert_ptr_eq(kern_thread_scratch(KERN_SCRATCH_ATTENTION, 50), s);
    float *t = kern_thread_scratch(KERN_SCRATCH_SUMS, 100);
    ck_assert_ptr_ne(t, s);
    float *big = kern_thread_scratch(KERN_SCRATCH_ATTENTION, 1 << 20);
    big[(1 << 20) - 1] = 2.0f;
    ck_assert_uint_eq((uintptr_t)big % 64, 0);
}
END_TEST

/* The core type the environment asks for is the one OpenBLAS runs (tests/blas-coretype.sh runs
 * this program under each), so those runs really check each kernel family. */
START_TEST(test_gemm_coretype_honoured) {
    const char *want = getenv("OPENBLAS_CORETYPE");
    if (want == NULL || *want == '\0')
        return;
    ck_assert_msg(strcasecmp(openblas_get_corename(), want) == 0,
                  "OPENBLAS_CORETYPE=%s but OpenBLAS runs its %s kernels", want,
                  openblas_get_corename());
}
END_TEST

static Suite *gemm_suite(void) {
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_gemm_reference, 1, 4);
    tcase_add_test(tc, test_gemm_special_scalars);
    tcase_add_test(tc, test_gemm_coretype_honoured);
    tcase_add_loop_test(tc, test_gemm_thread_count_bitwise, 0, N_ELEMS(det_shapes));
    tcase_add_test(tc, test_gemm_nested_in_tasks);
    tcase_add_test(tc, test_pool_each_task_once);
    tcase_add_test(tc, test_pool_scratch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(gemm_suite());
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}
