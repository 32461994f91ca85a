/* SPDX-License-Identifier: MIT
 * test-trace.c: the trace schema. Write/read round trips every field exactly, sorting gives
 * a total order (same file whatever the append order), writes are atomic (no PATH.tmp left),
 * and malformed files fail with PP_IO_ERROR naming file, line and column.
 */
#include <check.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-trace.h"
#include "test-util.h"

/* A fixture directory per test (checked fixtures run in the forked child). */
static char *tmp_dir;

static void setup(void) {
    tmp_dir = test_util_tmp_dir_new("pp-trace-XXXXXX");
}

static void teardown(void) {
    test_util_tmp_dir_remove(tmp_dir);
    g_free(tmp_dir);
}

static char *tmp_path(const char *name) {
    return g_build_filename(tmp_dir, name, NULL);
}

/* Eight rows covering every op kind and resource, U rows, negative and 64-bit values. */
static const PpTraceRow sample_rows[] = {
    {0, PP_OP_FORWARD, 0, 0, 0, 0, 1000, 0, 0, PP_RESOURCE_COMPUTE, 0},
    {1, PP_OP_FORWARD, 0, 1, 0, 1500, 2500, 0, 0, PP_RESOURCE_COMPUTE, 0},
    {0, PP_OP_FORWARD, 0, 0, 0, 1000, 1500, 0, 0, PP_RESOURCE_SEND, 0},
    {1, PP_OP_BACKWARD, 0, 1, 0, 2500, 4500, 0, 1, PP_RESOURCE_RECV, 0},
    {1, PP_OP_WEIGHT, 7, 2, 3, 5000000000000LL, 5000000000001LL, 2, 3, PP_RESOURCE_COMPUTE, 0},
    {0, PP_OP_UPDATE, -1, -1, 4, 9000, 9100, -1, -1, PP_RESOURCE_COMPUTE, 0},
    {0, PP_OP_BACKWARD_FULL, 2, 0, 1, 1000, 1200, 1, 1, PP_RESOURCE_COMPUTE, 0},
    {0, PP_OP_UPDATE, -1, -1, 4, 9100, 10400, -1, -1, PP_RESOURCE_REFERENCE, 0},
};

static void assert_rows_equal(const PpTraceRow *a, const PpTraceRow *b) {
    ck_assert_int_eq(a->stage, b->stage);
    ck_assert_int_eq(a->kind, b->kind);
    ck_assert_int_eq(a->mb, b->mb);
    ck_assert_int_eq(a->chunk, b->chunk);
    ck_assert_int_eq(a->step, b->step);
    ck_assert_int_eq(a->start_ns, b->start_ns);
    ck_assert_int_eq(a->end_ns, b->end_ns);
    ck_assert_int_eq(a->version_f, b->version_f);
    ck_assert_int_eq(a->version_b, b->version_b);
    ck_assert_int_eq(a->resource, b->resource);
    ck_assert_int_eq(a->replica, b->replica);
}

/* Data-parallel replicas (pacer-train's parallel.data): a replica column, read back, and
 * kept apart by the sort; a reduce row. */
START_TEST(test_replica_column) {
    const PpTraceRow rows[] = {
        {0, PP_OP_FORWARD, 0, 0, 0, 0, 1000, 0, 0, PP_RESOURCE_COMPUTE, 1},
        {0, PP_OP_FORWARD, 0, 0, 0, 0, 1000, 0, 0, PP_RESOURCE_COMPUTE, 0},
        {0, PP_OP_UPDATE, -1, -1, 0, 2000, 2500, -1, -1, PP_RESOURCE_REDUCE, 1},
    };
    g_autoptr(PpTrace) trace = pp_trace_new();
    for (size_t i = 0; i < G_N_ELEMENTS(rows); i++)
        pp_trace_append(trace, &rows[i]);
    pp_trace_sort(trace);
    ck_assert_int_eq(trace->rows[0].replica, 0);
    ck_assert_int_eq(trace->rows[1].replica, 1);
    g_autofree char *path = tmp_path("replicas.csv");
    ck_assert(pp_trace_write_csv(trace, path, NULL));
    g_autofree char *text = NULL;
    ck_assert(g_file_get_contents(path, &text, NULL, NULL));
    ck_assert(g_str_has_prefix(text,
                               "stage,op,mb,chunk,step,start_ns,end_ns,version_f,"
                               "version_b,resource,replica\n0,F,0,0,0,0,1000,0,0,compute,0\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n0,U,-1,-1,0,2000,2500,-1,-1,reduce,1\n"));
    g_autoptr(GError) error = NULL;
    g_autoptr(PpTrace) back = pp_trace_read_csv(path, &error);
    ck_assert_msg(back != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(back->n_rows, 3);
    for (int64_t i = 0; i < back->n_rows; i++)
        assert_rows_equal(&back->rows[i], &trace->rows[i]);
}
END_TEST

START_TEST(test_round_trip) {
    g_autoptr(PpTrace) trace = pp_trace_new();
    for (size_t i = 0; i < G_N_ELEMENTS(sample_rows); i++)
        pp_trace_append(trace, &sample_rows[i]);
    ck_assert_int_eq(trace->n_rows, (int64_t)G_N_ELEMENTS(sample_rows));
    g_autofree char *path = tmp_path("trace.csv");
    g_autoptr(GError) error = NULL;
    ck_assert(pp_trace_write_csv(trace, path, &error));
    g_autofree char *tmp = g_strconcat(path, ".tmp", NULL);
    ck_assert(!g_file_test(tmp, G_FILE_TEST_EXISTS)); // renamed into place
    g_autoptr(PpTrace) back = pp_trace_read_csv(path, &error);
    ck_assert_msg(back != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(back->n_rows, trace->n_rows);
    for (int64_t i = 0; i < trace->n_rows; i++)
        assert_rows_equal(&back->rows[i], &trace->rows[i]);
    g_autofree char *text = NULL;
    ck_assert(g_file_get_contents(path, &text, NULL, NULL));
    ck_assert(g_str_has_prefix(text, "stage,op,mb,chunk,step,start_ns,end_ns,version_f,"
                                     "version_b,resource\n0,F,0,0,0,0,1000,0,0,compute\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n0,U,-1,-1,4,9000,9100,-1,-1,compute\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n0,U,-1,-1,4,9100,10400,-1,-1,reference\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n1,W,7,2,3,5000000000000,5000000000001,2,3,compute\n"));
}
END_TEST

START_TEST(test_sort_total_order) {
    /* Two append orders, one file. */
    g_autoptr(PpTrace) fwd = pp_trace_new();
    g_autoptr(PpTrace) rev = pp_trace_new();
    size_t n = G_N_ELEMENTS(sample_rows);
    for (size_t i = 0; i < n; i++) {
        pp_trace_append(fwd, &sample_rows[i]);
        pp_trace_append(rev, &sample_rows[n - 1 - i]);
    }
    pp_trace_sort(fwd);
    pp_trace_sort(rev);
    for (int64_t i = 0; i < fwd->n_rows; i++)
        assert_rows_equal(&fwd->rows[i], &rev->rows[i]);
    /* (start_ns, stage, resource, end_ns, ...): the three rows at 1000 ns come as
     * stage 0 compute BW (end 1200), stage 0 send F, then stage 1 starts at 1500. */
    ck_assert_int_eq(fwd->rows[0].start_ns, 0);
    ck_assert_int_eq(fwd->rows[1].kind, PP_OP_BACKWARD_FULL);
    ck_assert_int_eq(fwd->rows[2].resource, PP_RESOURCE_SEND);
    ck_assert_int_eq(fwd->rows[3].stage, 1);
    for (int64_t i = 1; i < fwd->n_rows; i++)
        ck_assert_int_le(fwd->rows[i - 1].start_ns, fwd->rows[i].start_ns);
    g_autofree char *pa = tmp_path("a.csv");
    g_autofree char *pb = tmp_path("b.csv");
    ck_assert(pp_trace_write_csv(fwd, pa, NULL));
    ck_assert(pp_trace_write_csv(rev, pb, NULL));
    g_autofree char *ta = NULL, *tb = NULL;
    ck_assert(g_file_get_contents(pa, &ta, NULL, NULL));
    ck_assert(g_file_get_contents(pb, &tb, NULL, NULL));
    ck_assert_str_eq(ta, tb);
}
END_TEST

START_TEST(test_many_rows) {
    g_autoptr(PpTrace) trace = pp_trace_new();
    for (int32_t i = 0; i < 10000; i++) {
        PpTraceRow row = {
            i % 7, PP_OP_FORWARD,       i, 0, i / 100, 3 * (int64_t)i, 3 * (int64_t)i + 2, 0,
            0,     PP_RESOURCE_COMPUTE, 0};
        pp_trace_append(trace, &row);
    }
    g_autofree char *path = tmp_path("many.csv");
    ck_assert(pp_trace_write_csv(trace, path, NULL));
    g_autoptr(PpTrace) back = pp_trace_read_csv(path, NULL);
    ck_assert_ptr_nonnull(back);
    ck_assert_int_eq(back->n_rows, 10000);
    ck_assert_int_eq(back->rows[9999].end_ns, 3 * 9999 + 2);
    ck_assert_int_eq(back->rows[9999].stage, 9999 % 7);
}
END_TEST

START_TEST(test_bad_files) {
    static const char header[] =
        "stage,op,mb,chunk,step,start_ns,end_ns,version_f,version_b,resource\n";
    static const struct {
        const char *body;
        const char *needle;
    } cases[] = {
        {"0,F,0,0,0,0,10,0,0,compute\n0,F,1,0,0,x,10,0,0,compute\n",
         ":3: column 6 (start_ns): 'x' is not an integer"},
        {"0,Q,0,0,0,0,10,0,0,compute\n", ":2: column 2 (op): 'Q'"},
        {"0,F,0,0,0,0,10,0,0,disk\n", ":2: column 10 (resource): 'disk'"},
        {"0,F,0,0,0,0,10,0,0\n", ":2: 9 columns"},
        {"0,F,0,0,0,0,10,0,\"0,compute\n", ":2: not a valid CSV line"},
        {"0,F,0,0,0,0,10,0,99999999999,compute\n", ":2: column 9 (version_b)"},
    };
    g_autofree char *path = tmp_path("bad.csv");
    for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
        g_autofree char *text = g_strconcat(header, cases[k].body, NULL);
        ck_assert(g_file_set_contents(path, text, -1, NULL));
        g_autoptr(GError) error = NULL;
        ck_assert_ptr_null(pp_trace_read_csv(path, &error));
        ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT));
        ck_assert_msg(strstr(error->message, cases[k].needle) != NULL, "case %zu: %s", k,
                      error->message);
        ck_assert_ptr_nonnull(strstr(error->message, path));
    }
    g_autoptr(GError) error = NULL;
    ck_assert(g_file_set_contents(path, "stage,op,mb\n", -1, NULL));
    ck_assert_ptr_null(pp_trace_read_csv(path, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT));
    g_clear_error(&error);
    ck_assert(g_file_set_contents(path,
                                  "stage,op,mb,chunk,step,begin_ns,end_ns,version_f,version_b,"
                                  "resource\n",
                                  -1, NULL));
    ck_assert_ptr_null(pp_trace_read_csv(path, &error));
    ck_assert_ptr_nonnull(strstr(error->message, "column 6 of the header is 'begin_ns'"));
    g_clear_error(&error);
    ck_assert(g_file_set_contents(path, "", -1, NULL));
    ck_assert_ptr_null(pp_trace_read_csv(path, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT));
    g_clear_error(&error);
    g_autofree char *missing = tmp_path("missing.csv");
    ck_assert_ptr_null(pp_trace_read_csv(missing, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_OPEN));
    ck_assert_ptr_nonnull(strstr(error->message, "missing.csv"));
}
END_TEST

START_TEST(test_quoted_and_crlf) {
    /* libcsv handles quoting; CRLF line ends are accepted. */
    g_autofree char *path = tmp_path("quoted.csv");
    ck_assert(g_file_set_contents(path,
                                  "stage,op,mb,chunk,step,start_ns,end_ns,version_f,version_b,"
                                  "resource\r\n\"2\",\"BW\",3,0,1,10,20,1,2,\"recv\"\r\n",
                                  -1, NULL));
    g_autoptr(GError) error = NULL;
    g_autoptr(PpTrace) trace = pp_trace_read_csv(path, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(trace->n_rows, 1);
    ck_assert_int_eq(trace->rows[0].stage, 2);
    ck_assert_int_eq(trace->rows[0].kind, PP_OP_BACKWARD_FULL);
    ck_assert_int_eq(trace->rows[0].resource, PP_RESOURCE_RECV);
}
END_TEST

START_TEST(test_write_fails) {
    g_autoptr(PpTrace) trace = pp_trace_new();
    g_autofree char *path = g_build_filename(tmp_dir, "no-such-dir", "t.csv", NULL);
    g_autoptr(GError) error = NULL;
    ck_assert(!pp_trace_write_csv(trace, path, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_OPEN));
    ck_assert_ptr_nonnull(strstr(error->message, "no-such-dir"));
}
END_TEST

START_TEST(test_resource_names) {
    ck_assert_str_eq(pp_resource_name(PP_RESOURCE_SEND), "send");
    ck_assert_int_eq(pp_resource_from_name("compute"), PP_RESOURCE_COMPUTE);
    ck_assert_int_eq(pp_resource_from_name("net"), PP_RESOURCE_N_KINDS);
}
END_TEST

static Suite *trace_suite(void) {
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("csv");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_sort_total_order);
    tcase_add_test(tc, test_many_rows);
    tcase_add_test(tc, test_bad_files);
    tcase_add_test(tc, test_quoted_and_crlf);
    tcase_add_test(tc, test_write_fails);
    tcase_add_test(tc, test_resource_names);
    tcase_add_test(tc, test_replica_column);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(trace_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
