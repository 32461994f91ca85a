/* SPDX-License-Identifier: MIT
 * test-published.c: every published run in scenarios/published is simulated and its figure,
 * on the source's own convention (scenarios/published/published.csv: iteration time,
 * TFLOP/s per GPU by Megatron's Eq. 3 or by model FLOPs, MFU, or tokens per second per GPU),
 * stays within the error bound stored for it and within 15%; the tokens-per-second rows (mixtures
 * of experts, context parallelism, fp8) keep a median error of at most 10% and their source's model
 * FLOPs per token are the cost model's within 1%; within each group of layouts a source compares,
 * the simulated ranking is the published one; and the CSV and the folder list the same files.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "test-util.h"

#define PUB_DIR PP_SOURCE_ROOT "/scenarios/published"

typedef struct {
    char  *file, *metric, *groups; /* groups: ';'-separated, "-" for none */
    double published, bound;
    double predicted; /* in the metric's unit */
    double pub_rate;  /* published sequences per second per GPU */
    double pred_rate; /* simulated sequences per second per GPU */
} PubRow;

static void pub_row_clear(gpointer data) {
    PubRow *r = data;
    g_free(r->file);
    g_free(r->metric);
    g_free(r->groups);
}

static GArray *pub_rows(void) {
    g_autofree char *text = test_util_read_file(PUB_DIR "/published.csv", NULL);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    GArray *rows = g_array_new(FALSE, TRUE, sizeof(PubRow));
    g_array_set_clear_func(rows, pub_row_clear);
    ck_assert_str_eq(lines[0], "file,metric,published,bound,group");
    for (size_t i = 1; lines[i] != NULL; i++) {
        if (lines[i][0] == '\0')
            continue;
        g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
        ck_assert_msg(g_strv_length(f) == 5, "published.csv line %zu: %s", i + 1, lines[i]);
        PubRow r = {.file = g_strdup(f[0]),
                    .metric = g_strdup(f[1]),
                    .published = g_ascii_strtod(f[2], NULL),
                    .bound = g_ascii_strtod(f[3], NULL),
                    .groups = g_strdup(f[4])};
        ck_assert(r.published > 0 && r.bound > 0);
        g_array_append_val(rows, r);
    }
    return rows;
}

/* Megatron's per-iteration FLOPs of B sequences: Narayanan et al. 2021 Eq. 3 (@eq3, full
 * recomputation counted: 96 B s l h^2 (1 + s/6h + V/16lh)) or the model FLOPs (72 B s l h^2
 * (1 + s/6h + V/12lh), Korthikanti et al. 2022 Appendix A). */
static double pub_flops(const PpScenario *sc, gboolean eq3) {
    const double B = sc->training.global_batch, s = sc->model.seq_len, l = sc->model.layers;
    const double h = sc->model.hidden, V = sc->model.vocab;
    if (eq3)
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

/* Loads published file @file into @sc and returns its cost model; both must build.
 * Returns: (transfer full). */
static SimCostModel *pub_cost(const char *file, PpScenario **sc) {
    g_autofree char *path = g_build_filename(PUB_DIR, file, NULL);
    g_autoptr(GError) error = NULL;
    *sc = pp_scenario_load(path, NULL, &error);
    ck_assert_msg(*sc != NULL, "%s", error ? error->message : "");
    SimCostModel *cost = sim_cost_new_from_scenario(*sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    return cost;
}

/* Simulates row @r and fills predicted, pub_rate and pred_rate. */
static void pub_simulate(PubRow *r) {
    g_autoptr(PpScenario) sc = NULL;
    g_autoptr(SimCostModel) cost = pub_cost(r->file, &sc);
    g_autoptr(GError) error = NULL;
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    sim_cost_schedule_params(cost, &params);
    g_autoptr(PpSchedule) sched = test_util_schedule_build(&params);
    SimRunOptions options = {.keep_trace = FALSE};
    g_autoptr(SimResult) res = sim_engine_run_with(sched, cost, &options, &error);
    ck_assert_msg(res != NULL, "%s", error ? error->message : "");

    const double gpus = (double)res->gpus, peak = sc->hardware.peak_flops;
    const double step_s = res->step_time_ns / 1e9, B = sc->training.global_batch;
    double       pub_step_s; /* the published figure as an iteration time */
    if (strcmp(r->metric, "iteration_s") == 0) {
        r->predicted = step_s;
        pub_step_s = r->published;
    } else if (strcmp(r->metric, "tflops_eq3") == 0) {
        r->predicted = pub_flops(sc, TRUE) / (step_s * gpus) / 1e12;
        pub_step_s = pub_flops(sc, TRUE) / (r->published * 1e12 * gpus);
    } else if (strcmp(r->metric, "mfu") == 0) {
        r->predicted = res->mfu;
        pub_step_s = pub_flops(sc, FALSE) / (r->published * peak * gpus);
        /* the engine's MFU is the same model-FLOP convention */
        ck_assert_double_eq_tol(res->mfu, pub_flops(sc, FALSE) / (step_s * gpus * peak), 1e-9);
    } else if (strcmp(r->metric, "tokens_per_gpu") == 0) {
        const double tokens = B * sc->model.seq_len; /* per step, all replicas */
        r->predicted = tokens / (step_s * gpus);
        pub_step_s = tokens / (r->published * gpus);
    } else {
        ck_assert_str_eq(r->metric, "tflops_model");
        r->predicted = res->tflops_per_gpu;
        pub_step_s = pub_flops(sc, FALSE) / (r->published * 1e12 * gpus);
    }
    r->pub_rate = B / (pub_step_s * gpus);
    r->pred_rate = B / (step_s * gpus);
}

/* The goal every row meets, whatever its stored bound (docs/published-runs.md, Checked against
 * published runs). */
#define PUB_ROW_GOAL 0.15

/* Each row within its stored bound and within PUB_ROW_GOAL; the file list matches the
 * folder. */
START_TEST(test_published_rows) {
    g_autoptr(GArray) rows = pub_rows();
    g_autoptr(GHashTable) listed = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < rows->len; i++) {
        PubRow *r = &g_array_index(rows, PubRow, i);
        pub_simulate(r);
        double err = r->predicted / r->published - 1.0;
        ck_assert_msg(fabs(err) <= r->bound,
                      "%s: predicted %g, published %g: error %+.1f%% above "
                      "the stored bound %.0f%%",
                      r->file, r->predicted, r->published, 100 * err, 100 * r->bound);
        ck_assert_msg(fabs(err) <= PUB_ROW_GOAL, "%s: error %+.1f%% beyond the goal of %.0f%%",
                      r->file, 100 * err, 100 * PUB_ROW_GOAL);
        g_hash_table_add(listed, r->file);
    }
    g_autoptr(GDir) dir = g_dir_open(PUB_DIR, 0, NULL);
    ck_assert_ptr_nonnull(dir);
    guint       n_ini = 0;
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) {
        if (!g_str_has_suffix(name, ".ini"))
            continue;
        ck_assert_msg(g_hash_table_contains(listed, name), "%s has no row in published.csv", name);
        n_ini++;
    }
    ck_assert_int_eq(n_ini, rows->len);
}
END_TEST

static int pub_double_cmp(gconstpointer a, gconstpointer b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The tokens-per-second rows (docs/published-runs.md, Checked against published runs: mixtures of
 * experts, context parallelism, fp8) keep a median |error| of at most 10%, beside each row's
 * own bound. */
START_TEST(test_published_tokens_median) {
    g_autoptr(GArray) rows = pub_rows();
    g_autoptr(GArray) errs = g_array_new(FALSE, FALSE, sizeof(double));
    for (guint i = 0; i < rows->len; i++) {
        PubRow *r = &g_array_index(rows, PubRow, i);
        if (strcmp(r->metric, "tokens_per_gpu") != 0)
            continue;
        pub_simulate(r);
        double err = fabs(r->predicted / r->published - 1.0);
        g_array_append_val(errs, err);
    }
    ck_assert_int_ge(errs->len, 10);
    g_array_sort(errs, pub_double_cmp);
    const guint  n = errs->len;
    const double median =
        n % 2 ? g_array_index(errs, double, n / 2)
              : 0.5 * (g_array_index(errs, double, n / 2 - 1) + g_array_index(errs, double, n / 2));
    ck_assert_msg(median <= 0.10, "median |error| of the %u tokens/s rows: %.1f%% (goal 10%%)", n,
                  100 * median);
}
END_TEST

/* Megatron-Bridge's other column, model TFLOP/s per GPU, for the same rows (25.11 and 25.09
 * tables, as each file's comment quotes it): over the row's tokens/s it gives the FLOPs the source
 * counts per token, an independent check of the presets and of pacer's FLOP count (6 N_active per
 * token plus the causal half of the attention scores, docs/cost-model.md, Model shapes). */
static const struct {
    const char *file;
    double      tflops;
} mbridge_tflops[] = {
    {"mbridge-gb200-deepseek-v3-bf16.ini", 782},
    {"mbridge-gb200-deepseek-v3-fp8.ini", 1003},
    {"mbridge-gb200-qwen3-235b-bf16.ini", 728},
    {"mbridge-gb200-qwen3-30b-fp8.ini", 547},
    {"mbridge-gb200-llama3-405b-fp8.ini", 2053},
    {"mbridge-gb200-llama3-70b-fp8-fsdp.ini", 1937},
    {"mbridge-gb200-llama3-8b-fp8.ini", 1622},
    {"mbridge-b200-llama3-405b-fp8-cp2.ini", 1667},
    {"mbridge-b200-qwen3-235b-fp8.ini", 484},
    {"mbridge-b200-llama3-8b-fp8.ini", 1576},
    {"mbridge-b200-qwen3-30b-fp8.ini", 214},
    {"mbridge-b200-qwen3-30b-fp8-tokendrop.ini", 416},
    {"mbridge-h100-llama3-405b-fp8-cp2.ini", 737},
    {"mbridge-h100-llama3-70b-fp8.ini", 719},
    {"mbridge-h100-qwen3-235b-fp8.ini", 233},
    {"mbridge-h100-llama3-8b-fp8-fsdp.ini", 744},
};

/* The source's FLOPs per token equal the cost model's model FLOPs per token within 1%. */
START_TEST(test_published_flops_per_token) {
    g_autoptr(GArray) rows = pub_rows();
    guint n_checked = 0;
    for (guint i = 0; i < rows->len; i++) {
        const PubRow *r = &g_array_index(rows, PubRow, i);
        if (strcmp(r->metric, "tokens_per_gpu") != 0)
            continue;
        double tflops = 0.0;
        for (size_t j = 0; j < G_N_ELEMENTS(mbridge_tflops); j++)
            if (strcmp(mbridge_tflops[j].file, r->file) == 0)
                tflops = mbridge_tflops[j].tflops;
        ck_assert_msg(tflops > 0.0, "%s: no model TFLOP/s in mbridge_tflops", r->file);
        g_autoptr(PpScenario) sc = NULL;
        g_autoptr(SimCostModel) cost = pub_cost(r->file, &sc);
        const double source = tflops * 1e12 / r->published;
        const double pacer = cost->flops_per_mb / (double)cost->tokens_per_mb;
        ck_assert_msg(fabs(pacer / source - 1.0) <= 0.01,
                      "%s: %.4g FLOPs a token, the source's %.4g", r->file, pacer, source);
        n_checked++;
    }
    ck_assert_uint_eq(n_checked, G_N_ELEMENTS(mbridge_tflops));
}
END_TEST

/* Within every group, the simulated order of per-GPU throughput is the published order. */
START_TEST(test_published_rankings) {
    g_autoptr(GArray) rows = pub_rows();
    g_autoptr(GHashTable) groups =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    for (guint i = 0; i < rows->len; i++) {
        PubRow *r = &g_array_index(rows, PubRow, i);
        if (strcmp(r->groups, "-") == 0)
            continue;
        pub_simulate(r);
        g_auto(GStrv) names = g_strsplit(r->groups, ";", -1);
        for (char **g = names; *g != NULL; g++) {
            GPtrArray *members = g_hash_table_lookup(groups, *g);
            if (members == NULL) {
                members = g_ptr_array_new();
                g_hash_table_insert(groups, g_strdup(*g), members);
            }
            g_ptr_array_add(members, r);
        }
    }
    ck_assert_int_ge(g_hash_table_size(groups), 5);
    GHashTableIter it;
    gpointer       key, value;
    g_hash_table_iter_init(&it, groups);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        GPtrArray *m = value;
        ck_assert_int_ge(m->len, 2);
        for (guint a = 0; a < m->len; a++) {
            for (guint b = 0; b < m->len; b++) {
                const PubRow *x = g_ptr_array_index(m, a), *y = g_ptr_array_index(m, b);
                if (x->pub_rate > y->pub_rate)
                    ck_assert_msg(x->pred_rate > y->pred_rate,
                                  "group %s: %s is published faster than %s but simulated slower",
                                  (const char *)key, x->file, y->file);
            }
        }
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("published");
    TCase *tc = tcase_create("published");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_published_rows);
    tcase_add_test(tc, test_published_tokens_median);
    tcase_add_test(tc, test_published_flops_per_token);
    tcase_add_test(tc, test_published_rankings);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
