/* SPDX-License-Identifier: MIT
 * test-sim-plan.c: pacer-sim plan and the cluster figures of a run, through the built binary:
 * the plan's counts add up, its rows are valid layouts of G GPUs and the global batch,
 * ranked by throughput, within memory and equal to a direct simulation of the same layout;
 * what it drops for static memory cannot run; no progress off a terminal; bad usage; and the
 * JSON's gpus / MFU / HFU equal the in-process engine's.
 */
#include <check.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp-scenario.h"
#include "pp-trace.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "test-util.h"

#define SIM_BIN  PP_BUILD_ROOT "/sim/pacer-sim"
#define CLUSTER  PP_SOURCE_ROOT "/tests/data/sim/cluster.ini"
#define N_GPUS   32
#define GB_TOTAL 64

static JsonObject *parse_object(const char *text, JsonParser *parser) {
    g_autoptr(GError) error = NULL;
    test_util_assert_json(text);
    ck_assert_msg(json_parser_load_from_data(parser, text, -1, &error), "JSON: %s",
                  error ? error->message : "");
    return json_node_get_object(json_parser_get_root(parser));
}

/* Runs `pacer-sim plan CLUSTER --gpus 32 --json` with @extra arguments (NULL-terminated,
 * at most 8); returns stdout, asserts exit 0 and an empty stderr. */
static char *run_plan(const char *const *extra) {
    const char *args[16] = {"plan",   CLUSTER, "--gpus", G_STRINGIFY(N_GPUS),
                            "--json", "--top", "100000"};
    size_t      n = 7;
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    g_autofree char *out = NULL, *err = NULL;
    int              status = test_util_spawn(SIM_BIN, args, &out, &err);
    ck_assert_msg(status == 0, "plan exited %d: %s", status, err);
    ck_assert_str_eq(err, ""); /* stderr is a pipe here: no progress lines */
    return g_steal_pointer(&out);
}

/* Simulates plan row @row of @path alone, with the overrides of its "set" object (the
 * row's "command" says the same), and training.steps = @steps when > 0. Returns the run's JSON
 * object, parsed by @parser. */
static JsonObject *run_row_alone(const char *path, JsonObject *row, int64_t steps,
                                 JsonParser *parser) {
    JsonObject *set = json_object_get_object_member(row, "set");
    g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GString) command = g_string_new("pacer-sim ");
    g_string_append(command, path);
    g_ptr_array_add(args, g_strdup(path));
    g_ptr_array_add(args, g_strdup("--json"));
    g_autoptr(GList) members = json_object_get_members(set);
    for (GList *m = members; m != NULL; m = m->next) {
        const char *key = m->data;
        JsonNode   *v = json_object_get_member(set, key);
        char       *o;
        if (json_node_get_value_type(v) == G_TYPE_INT64)
            o = g_strdup_printf("%s=%" G_GINT64_FORMAT, key, json_node_get_int(v));
        else if (json_node_get_value_type(v) == G_TYPE_BOOLEAN)
            o = g_strdup_printf("%s=%s", key, json_node_get_boolean(v) ? "true" : "false");
        else
            o = g_strdup_printf("%s=%s", key, json_node_get_string(v));
        g_string_append_printf(command, " --set %s", o);
        g_ptr_array_add(args, g_strdup("--set"));
        g_ptr_array_add(args, o);
    }
    ck_assert_str_eq(json_object_get_string_member(row, "command"), command->str);
    if (steps > 0) {
        g_ptr_array_add(args, g_strdup("--set"));
        g_ptr_array_add(args, g_strdup_printf("training.steps=%" G_GINT64_FORMAT, steps));
    }
    g_ptr_array_add(args, NULL);
    g_autofree char *out = NULL, *err = NULL;
    int status = test_util_spawn(SIM_BIN, (const char *const *)args->pdata, &out, &err);
    ck_assert_msg(status == 0, "%s (steps %" G_GINT64_FORMAT "): %s", command->str, steps, err);
    return parse_object(out, parser);
}

START_TEST(test_plan_rows) {
    /* a user override travels into every row's "set" and command */
    const char *const extra[] = {"--schedules", "1f1b,interleaved,zb-v,paci", "--set",
                                 "hardware.memory_gib=79", NULL};
    g_autofree char  *out = run_plan(extra);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *plan = parse_object(out, parser);
    int64_t     layouts = json_object_get_int_member(plan, "layouts");
    int64_t     simulated = json_object_get_int_member(plan, "simulated");
    ck_assert_int_eq(json_object_get_int_member(plan, "failed"), 0);
    ck_assert_int_eq(json_object_get_int_member(plan, "dropped_bound"), 0); /* --top 100000 */
    ck_assert_int_eq(layouts, json_object_get_int_member(plan, "dropped_static") +
                                  json_object_get_int_member(plan, "dropped_partition") +
                                  simulated);
    JsonArray *rows = json_object_get_array_member(plan, "rows");
    ck_assert_int_eq(json_array_get_length(rows),
                     simulated - json_object_get_int_member(plan, "over_memory"));
    ck_assert_int_eq(json_array_get_length(rows), json_object_get_int_member(plan, "fit"));
    ck_assert_int_gt(json_array_get_length(rows), 10);
    double prev = INFINITY;
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *r = json_array_get_object_element(rows, i);
        int64_t     d = json_object_get_int_member(r, "data");
        int64_t     t = json_object_get_int_member(r, "tensor");
        int64_t     n = json_object_get_int_member(r, "stages");
        ck_assert_int_eq(d * t * json_object_get_int_member(r, "context") * n, N_GPUS);
        ck_assert_int_eq(json_object_get_int_member(r, "microbatch_size") *
                             json_object_get_int_member(r, "microbatches") * d,
                         GB_TOTAL);
        ck_assert_int_le(json_object_get_int_member(r, "peak_memory_bytes"), (int64_t)79 << 30);
        double tp = json_object_get_double_member(r, "throughput_tokens_per_s");
        ck_assert(tp <= prev);
        prev = tp;
    }
    /* the best row of each schedule, in --schedules order: the first of its kind */
    const char *const kinds[] = {"1f1b", "interleaved", "zb-v", "paci"};
    JsonArray        *best_of = json_object_get_array_member(plan, "best_per_schedule");
    ck_assert_uint_eq(json_array_get_length(best_of), G_N_ELEMENTS(kinds));
    for (guint k = 0; k < G_N_ELEMENTS(kinds); k++) {
        JsonObject *bo = json_array_get_object_element(best_of, k);
        ck_assert(json_object_get_boolean_member(bo, "fits"));
        ck_assert_str_eq(json_object_get_string_member(bo, "schedule"), kinds[k]);
        int64_t rank = json_object_get_int_member(bo, "rank");
        ck_assert_int_ge(rank, 1);
        for (int64_t i = 0; i < rank; i++) {
            JsonObject *r = json_array_get_object_element(rows, (guint)i);
            ck_assert_int_eq(strcmp(json_object_get_string_member(r, "schedule"), kinds[k]) == 0,
                             i == rank - 1);
        }
        JsonObject *r = json_array_get_object_element(rows, (guint)rank - 1);
        ck_assert_str_eq(json_object_get_string_member(bo, "command"),
                         json_object_get_string_member(r, "command"));
    }

    /* the best row, simulated directly with its "set", gives the same figures */
    JsonObject *best = json_array_get_object_element(rows, 0);
    g_autoptr(JsonParser) p2 = json_parser_new();
    ck_assert_str_eq(json_object_get_string_member(json_object_get_object_member(best, "set"),
                                                   "hardware.memory_gib"),
                     "79");
    JsonObject *direct = run_row_alone(CLUSTER, best, 0, p2);
    ck_assert_double_eq(json_object_get_double_member(direct, "throughput_tokens_per_s"),
                        json_object_get_double_member(best, "throughput_tokens_per_s"));
    ck_assert_int_eq(json_object_get_int_member(direct, "peak_memory_bytes"),
                     json_object_get_int_member(best, "peak_memory_bytes"));
    ck_assert_int_eq(json_object_get_int_member(direct, "gpus"), N_GPUS);
}
END_TEST

/* The ranked rows hold when simulated alone for twice the plan's steps (issue 21 §4): on the
 * Llama-3-405B-like cluster at 16,384 GPUs, each of the top 10 and the first 3 paci rows of
 * the ranking that need more than 8 steps to fill their pipeline (64 stages with 4 to 16
 * micro-batches per update: 16 to 64 steps) still fits device memory, has the plan's Δmax
 * and a step time within 2% of the plan's. The top rows run context parallelism. */
START_TEST(test_plan_rows_hold_alone) {
    const char      *path = PP_SOURCE_ROOT "/scenarios/cluster/llama3-405b-like.ini";
    const char      *args[] = {"plan", path, "--gpus", "16384", "--json", "--top", "100000", NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &out, &err), 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *rows = json_object_get_array_member(parse_object(out, parser), "rows");
    ck_assert_uint_gt(json_array_get_length(rows), 10);
    int32_t n_long = 0, n_context = 0;
    for (guint i = 0; i < json_array_get_length(rows) && (i < 10 || n_long < 3); i++) {
        JsonObject *row = json_array_get_object_element(rows, i);
        int64_t     steps =
            json_object_get_int_member(json_object_get_object_member(row, "set"), "training.steps");
        int64_t  stages = json_object_get_int_member(row, "stages");
        int64_t  a = json_object_get_int_member(json_object_get_object_member(row, "set"),
                                                "pipeline.accumulation");
        gboolean paci = strcmp(json_object_get_string_member(row, "schedule"), "paci") == 0;
        if (paci) /* at least four pipeline fills of N / a updates each */
            ck_assert_int_ge(steps, 4 * ((stages + a - 1) / a));
        if (i >= 10 && !(paci && steps > 8))
            continue;
        n_long += paci && steps > 8;
        n_context += json_object_get_int_member(row, "context") > 1;
        g_autoptr(JsonParser) p2 = json_parser_new();
        JsonObject *alone = run_row_alone(path, row, 2 * steps, p2);
        ck_assert_int_le(json_object_get_int_member(alone, "peak_memory_bytes"), (int64_t)80 << 30);
        ck_assert_int_eq(json_object_get_int_member(alone, "delta_max"),
                         json_object_get_int_member(row, "delta_max"));
        double plan_ns = (double)json_object_get_int_member(row, "step_time_ns");
        double alone_ns = (double)json_object_get_int_member(alone, "step_time_ns");
        ck_assert_msg(fabs(alone_ns / plan_ns - 1.0) <= 0.02, "row %u: %.0f ns alone, %.0f in plan",
                      i + 1, alone_ns, plan_ns);
    }
    ck_assert_int_eq(n_long, 3); /* rows that the old 8 steps did not fill */
    ck_assert_int_gt(n_context, 0);
}
END_TEST

/* The first row of @rows for which @member is above @above, or NULL. */
static JsonObject *first_row_above(JsonArray *rows, const char *member, int64_t above) {
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *r = json_array_get_object_element(rows, i);
        if (json_object_get_int_member(r, member) > above)
            return r;
    }
    return NULL;
}

/* Plan searches context, expert and ZeRO layouts (issue 21 §4) on a small mixture of experts
 * whose file holds context 2 in its own layout: every row is a layout of the 16 GPUs
 * (D T C N = 16, 2C dividing seq_len, EP dividing the 8 experts and EP x expert_tensor
 * dividing the stage's T C D ranks, its set saying the same), and the best row with context
 * > 1, with expert > 1, with expert_tensor > 1 and with fsdp, each simulated alone with its
 * set, gives the plan's throughput and peak to the bit. */
START_TEST(test_plan_moe_axes) {
    const char      *path = PP_SOURCE_ROOT "/tests/data/sim/cluster-moe.ini";
    const char      *args[] = {"plan",  path,     "--gpus",      "16",        "--json",
                               "--top", "100000", "--schedules", "1f1b,paci", NULL};
    g_autofree char *out = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &out, &err), 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *plan = parse_object(out, parser);
    ck_assert_int_eq(json_object_get_int_member(plan, "failed"), 0);
    JsonArray *rows = json_object_get_array_member(plan, "rows");
    ck_assert_uint_gt(json_array_get_length(rows), 0);
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *r = json_array_get_object_element(rows, i);
        JsonObject *set = json_object_get_object_member(r, "set");
        int64_t     d = json_object_get_int_member(r, "data");
        int64_t     t = json_object_get_int_member(r, "tensor");
        int64_t     c = json_object_get_int_member(r, "context");
        int64_t     n = json_object_get_int_member(r, "stages");
        int64_t     ep = json_object_get_int_member(r, "expert");
        int64_t     et = json_object_get_int_member(r, "expert_tensor");
        int64_t     zero = json_object_get_int_member(r, "zero");
        ck_assert_int_eq(d * t * c * n, 16);
        ck_assert_int_eq(4096 % (2 * c), 0);
        ck_assert_int_eq(8 % ep, 0);
        ck_assert_int_eq((t * c * d) % (ep * et), 0);
        ck_assert(et == 1 || et == t);
        ck_assert(zero == 1 || zero == 3);
        ck_assert_int_eq(json_object_get_int_member(set, "parallel.context"), c);
        ck_assert_int_eq(json_object_get_int_member(set, "parallel.expert"), ep);
        ck_assert_int_eq(json_object_get_int_member(set, "parallel.expert_tensor"), et);
        ck_assert(json_object_get_boolean_member(set, "parallel.distributed_optimizer"));
        ck_assert(json_object_get_boolean_member(set, "parallel.fsdp") == (zero == 3));
    }
    JsonObject *picks[] = {first_row_above(rows, "context", 1), first_row_above(rows, "expert", 1),
                           first_row_above(rows, "expert_tensor", 1),
                           first_row_above(rows, "zero", 1)};
    for (size_t k = 0; k < G_N_ELEMENTS(picks); k++) {
        ck_assert_ptr_nonnull(picks[k]);
        g_autoptr(JsonParser) p2 = json_parser_new();
        JsonObject *alone = run_row_alone(path, picks[k], 0, p2);
        ck_assert_int_eq(json_object_get_int_member(alone, "gpus"), 16);
        ck_assert_double_eq(json_object_get_double_member(alone, "throughput_tokens_per_s"),
                            json_object_get_double_member(picks[k], "throughput_tokens_per_s"));
        ck_assert_int_eq(json_object_get_int_member(alone, "peak_memory_bytes"),
                         json_object_get_int_member(picks[k], "peak_memory_bytes"));
    }
}
END_TEST

/* The throughput bound drops candidates that can reach neither the printed rows nor their
 * schedule's best, and changes neither: with --top 5 the rows are the first 5 of the whole
 * ranking and each schedule's best is the same layout with the same figures. */
START_TEST(test_plan_bound) {
    const char *const top5[] = {"--top", "5", NULL};
    g_autofree char  *bounded = run_plan(top5);
    g_autofree char  *whole = run_plan(NULL);
    g_autoptr(JsonParser) p1 = json_parser_new();
    g_autoptr(JsonParser) p2 = json_parser_new();
    JsonObject *b = parse_object(bounded, p1), *w = parse_object(whole, p2);
    ck_assert_int_gt(json_object_get_int_member(b, "dropped_bound"), 0);
    ck_assert_int_eq(json_object_get_int_member(b, "simulated") +
                         json_object_get_int_member(b, "dropped_bound"),
                     json_object_get_int_member(w, "simulated"));
    JsonArray *rows = json_object_get_array_member(b, "rows");
    JsonArray *all = json_object_get_array_member(w, "rows");
    ck_assert_uint_eq(json_array_get_length(rows), 5);
    for (guint i = 0; i < 5; i++) {
        JsonObject *x = json_array_get_object_element(rows, i);
        JsonObject *y = json_array_get_object_element(all, i);
        ck_assert_str_eq(json_object_get_string_member(x, "command"),
                         json_object_get_string_member(y, "command"));
        ck_assert_int_eq(json_object_get_int_member(x, "step_time_ns"),
                         json_object_get_int_member(y, "step_time_ns"));
    }
    JsonArray *bb = json_object_get_array_member(b, "best_per_schedule");
    JsonArray *wb = json_object_get_array_member(w, "best_per_schedule");
    ck_assert_uint_eq(json_array_get_length(bb), json_array_get_length(wb));
    for (guint k = 0; k < json_array_get_length(bb); k++) {
        JsonObject *x = json_array_get_object_element(bb, k);
        JsonObject *y = json_array_get_object_element(wb, k);
        ck_assert(json_object_get_boolean_member(x, "fits") ==
                  json_object_get_boolean_member(y, "fits"));
        if (!json_object_get_boolean_member(x, "fits"))
            continue;
        ck_assert_str_eq(json_object_get_string_member(x, "command"),
                         json_object_get_string_member(y, "command"));
        ck_assert_double_eq(json_object_get_double_member(x, "throughput_tokens_per_s"),
                            json_object_get_double_member(y, "throughput_tokens_per_s"));
    }
}
END_TEST

/* --headroom 60 on 80 GiB devices: every row leaves 60 GiB free, and the rows are exactly
 * those of the plan without headroom whose peak is within 20 GiB, in the same order (what
 * the static check drops has more than 20 GiB of state, so its peak would not fit either). */
START_TEST(test_plan_headroom) {
    const char *const extra[] = {"--headroom", "60", NULL};
    g_autofree char  *with = run_plan(extra);
    g_autofree char  *without = run_plan(NULL);
    g_autoptr(JsonParser) p1 = json_parser_new();
    g_autoptr(JsonParser) p2 = json_parser_new();
    JsonObject   *h = parse_object(with, p1);
    JsonObject   *all = parse_object(without, p2);
    const int64_t limit = (int64_t)20 << 30;
    ck_assert_int_eq(json_object_get_int_member(h, "memory_bytes"), limit);
    ck_assert_int_eq(json_object_get_int_member(h, "headroom_bytes"), (int64_t)60 << 30);
    ck_assert_int_eq(json_object_get_int_member(all, "memory_bytes"), (int64_t)80 << 30);
    ck_assert_int_eq(json_object_get_int_member(all, "headroom_bytes"), 0);
    JsonArray *rows = json_object_get_array_member(h, "rows");
    JsonArray *every = json_object_get_array_member(all, "rows");
    guint      k = 0;
    for (guint i = 0; i < json_array_get_length(every); i++) {
        JsonObject *r = json_array_get_object_element(every, i);
        if (json_object_get_int_member(r, "peak_memory_bytes") > limit)
            continue;
        ck_assert_uint_lt(k, json_array_get_length(rows));
        JsonObject *q = json_array_get_object_element(rows, k++);
        ck_assert_str_eq(json_object_get_string_member(q, "command"),
                         json_object_get_string_member(r, "command"));
        ck_assert_int_eq(json_object_get_int_member(q, "step_time_ns"),
                         json_object_get_int_member(r, "step_time_ns"));
    }
    ck_assert_uint_eq(k, json_array_get_length(rows));
    ck_assert_uint_gt(k, 0);
    ck_assert_uint_lt(k, json_array_get_length(every));

    /* nothing fits 0.1 GiB: every schedule says so */
    const char *const tight[] = {"--headroom", "79.9", NULL};
    g_autofree char  *none = run_plan(tight);
    g_autoptr(JsonParser) p3 = json_parser_new();
    JsonObject *n = parse_object(none, p3);
    ck_assert_int_eq(json_object_get_int_member(n, "fit"), 0);
    JsonArray *best_of = json_object_get_array_member(n, "best_per_schedule");
    ck_assert_uint_gt(json_array_get_length(best_of), 0);
    for (guint i = 0; i < json_array_get_length(best_of); i++) {
        JsonObject *bo = json_array_get_object_element(best_of, i);
        ck_assert(!json_object_get_boolean_member(bo, "fits"));
        ck_assert(!json_object_has_member(bo, "rank"));
    }
}
END_TEST

/* plan.csv's rows as text fields: (element-type GStrv), the header first. */
static gboolean collect_csv_row(char **fields, int32_t n_fields, int64_t line, void *user_data,
                                GError **error) {
    (void)line;
    (void)error;
    GPtrArray *rows = user_data;
    GStrv      copy = g_new0(char *, (gsize)n_fields + 1);
    for (int32_t i = 0; i < n_fields; i++)
        copy[i] = g_strdup(fields[i]);
    g_ptr_array_add(rows, copy);
    return TRUE;
}

/* Column @name of the CSV row @row under @header. */
static const char *csv_field(char **header, char **row, const char *name) {
    for (int i = 0; header[i] != NULL; i++) {
        if (strcmp(header[i], name) == 0)
            return row[i];
    }
    ck_abort_msg("plan.csv has no column %s", name);
    return NULL;
}

/* plan --out DIR: plan.csv, read back with libcsv, holds every simulated layout: the fitting
 * ones in the order and with the numbers of plan's JSON rows (to the bit: integers exact,
 * doubles read back equal) and of its table (as printed), then those over memory, none of
 * them within the limit; the counts are the JSON's. */
START_TEST(test_plan_csv) {
    g_autofree char  *dir = test_util_tmp_dir_new("plan-csv-XXXXXX");
    const char *const extra[] = {"--headroom", "60", "--out", dir, NULL};
    g_autofree char  *json = run_plan(extra);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject      *plan = parse_object(json, parser);
    g_autofree char *csv = g_build_filename(dir, "plan.csv", NULL);
    g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(pp_csv_read(csv, collect_csv_row, rows, &error), "%s",
                  error ? error->message : "");
    char **header = g_ptr_array_index(rows, 0);
    ck_assert_int_eq(g_strv_length(header), 21);
    JsonArray *ranked = json_object_get_array_member(plan, "rows");
    guint      n_fit = json_array_get_length(ranked);
    int64_t    n_over = json_object_get_int_member(plan, "over_memory");
    int64_t    limit = json_object_get_int_member(plan, "memory_bytes");
    ck_assert_int_eq(n_fit, json_object_get_int_member(plan, "fit"));
    ck_assert_int_gt(n_over, 10);
    ck_assert_uint_eq(rows->len, 1 + n_fit + (guint)n_over);
    ck_assert_int_eq(n_fit + n_over, json_object_get_int_member(plan, "simulated"));
    for (guint i = 1; i < rows->len; i++) {
        char **r = g_ptr_array_index(rows, i);
        ck_assert_int_eq(g_ascii_strtoll(csv_field(header, r, "memory_limit_bytes"), NULL, 10),
                         limit);
        int64_t peak = g_ascii_strtoll(csv_field(header, r, "peak_memory_bytes"), NULL, 10);
        if (i > n_fit) {
            ck_assert_str_eq(csv_field(header, r, "rank"), "");
            ck_assert_str_eq(csv_field(header, r, "fits"), "0");
            ck_assert_int_gt(peak, limit);
            continue;
        }
        JsonObject *q = json_array_get_object_element(ranked, i - 1);
        ck_assert_int_eq(g_ascii_strtoll(csv_field(header, r, "rank"), NULL, 10), i);
        ck_assert_str_eq(csv_field(header, r, "fits"), "1");
        ck_assert_str_eq(csv_field(header, r, "schedule"),
                         json_object_get_string_member(q, "schedule"));
        ck_assert_str_eq(csv_field(header, r, "recompute"),
                         json_object_get_string_member(q, "recompute"));
        const char *const ints[] = {"data",          "tensor",       "context",
                                    "stages",        "chunks",       "expert",
                                    "expert_tensor", "zero",         "microbatch_size",
                                    "microbatches",  "step_time_ns", "peak_memory_bytes",
                                    "delta_max"};
        for (size_t k = 0; k < G_N_ELEMENTS(ints); k++)
            ck_assert_int_eq(g_ascii_strtoll(csv_field(header, r, ints[k]), NULL, 10),
                             json_object_get_int_member(q, ints[k]));
        ck_assert(g_ascii_strtod(csv_field(header, r, "tokens_per_s"), NULL) ==
                  json_object_get_double_member(q, "throughput_tokens_per_s"));
        ck_assert(g_ascii_strtod(csv_field(header, r, "mfu"), NULL) ==
                  json_object_get_double_member(q, "mfu"));
    }

    /* the table's first row, as printed, from the CSV's rank 1 */
    const char *const args[] = {"plan",  CLUSTER, "--gpus", G_STRINGIFY(N_GPUS), "--headroom", "60",
                                "--top", "1",     NULL};
    g_autofree char  *table = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &table, &err), 0);
    char           **r = g_ptr_array_index(rows, 1);
    g_autofree char *want = g_strdup_printf(
        "%14.1f %7.4f %11.3f %9.3f", g_ascii_strtod(csv_field(header, r, "tokens_per_s"), NULL),
        g_ascii_strtod(csv_field(header, r, "mfu"), NULL),
        (double)g_ascii_strtoll(csv_field(header, r, "step_time_ns"), NULL, 10) / 1e6,
        (double)g_ascii_strtoll(csv_field(header, r, "peak_memory_bytes"), NULL, 10) /
            (1024.0 * 1024.0 * 1024.0));
    ck_assert_msg(strstr(table, "\n   1  ") != NULL && strstr(table, want) != NULL,
                  "'%s' not in the table:\n%s", want, table);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* On a terminal (a pseudo-terminal from script(1)) the search reports layouts done of the
 * total and the time left; with CI set it stays quiet there too. */
START_TEST(test_plan_progress_terminal) {
    g_autofree char *script = g_find_program_in_path("script");
    g_autofree char *env = g_find_program_in_path("env");
    ck_assert_msg(script != NULL && env != NULL, "script(1) and env(1) are needed (util-linux)");
    g_autofree char *cmd =
        g_strdup_printf("%s plan %s --gpus %d >/dev/null", SIM_BIN, CLUSTER, N_GPUS);
    const char *const tty[] = {"-u", "CI", script, "-qec", cmd, "/dev/null", NULL};
    g_autofree char  *out = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(env, tty, &out, &err), 0);
    g_autofree char *json = run_plan(NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    int64_t          n = json_object_get_int_member(parse_object(json, parser), "layouts");
    g_autofree char *last =
        g_strdup_printf("plan: %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT " layouts", n, n);
    ck_assert_msg(strstr(out, last) != NULL, "no final progress line in: %s", out);
    ck_assert_msg(strstr(out, " ETA ") != NULL, "no ETA in: %s", out);
    const char *const ci[] = {"CI=1", script, "-qec", cmd, "/dev/null", NULL};
    g_autofree char  *quiet = NULL, *err2 = NULL;
    ck_assert_int_eq(test_util_spawn(env, ci, &quiet, &err2), 0);
    ck_assert_str_eq(quiet, "");
}
END_TEST

/* Every registered kind the planner can generate is planned from its record alone: it gets
 * layouts, none fails, and each row's chunks and micro-batches are ones its record allows. A
 * newly registered kind is covered without editing the test. */
START_TEST(test_plan_every_kind) {
    const PpSchedKindInfo *info = pp_sched_kinds()[_i];
    if (info->needs_order_file)
        return; /* plan refuses it (test_plan_bad) */
    const char *const extra[] = {"--schedules", info->name, NULL};
    g_autofree char  *out = run_plan(extra);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *plan = parse_object(out, parser);
    ck_assert_int_gt(json_object_get_int_member(plan, "layouts"), 0);
    ck_assert_int_eq(json_object_get_int_member(plan, "failed"), 0);
    JsonArray *rows = json_object_get_array_member(plan, "rows");
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *r = json_array_get_object_element(rows, i);
        ck_assert_str_eq(json_object_get_string_member(r, "schedule"), info->name);
        int32_t  n = (int32_t)json_object_get_int_member(r, "stages");
        int32_t  m = (int32_t)json_object_get_int_member(r, "microbatches");
        int32_t  v = (int32_t)json_object_get_int_member(r, "chunks");
        gboolean listed = info->plan_chunks[0] == 0 && v == info->min_chunks;
        for (int32_t c = 0; c < PP_SCHED_PLAN_CHUNKS; c++)
            listed = listed || (info->plan_chunks[c] > 0 && v == info->plan_chunks[c]);
        ck_assert_msg(listed, "%s: chunks %d", info->name, v);
        ck_assert(pp_sched_kind_check_microbatches(info, n, m, NULL));
    }
}
END_TEST

/* With 8 GiB devices the 1.3B model's state alone (16 B per parameter, replicated: --zero 0)
 * does not fit on one or two GPUs per replica: the plan drops those layouts before
 * simulating, and a direct run of one of them fails in the partition with the memory error.
 * The plan is deterministic. */
START_TEST(test_plan_memory) {
    const char *const extra[] = {"--set", "hardware.memory_gib=8", "--zero", "0", NULL};
    g_autofree char  *out = run_plan(extra);
    g_autofree char  *again = run_plan(extra);
    ck_assert_str_eq(out, again);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *plan = parse_object(out, parser);
    ck_assert_int_gt(json_object_get_int_member(plan, "dropped_static"), 0);
    ck_assert_int_gt(json_object_get_int_member(plan, "dropped_partition"), 0);
    JsonArray *rows = json_object_get_array_member(plan, "rows");
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *r = json_array_get_object_element(rows, i);
        ck_assert_int_le(json_object_get_int_member(r, "peak_memory_bytes"), (int64_t)8 << 30);
        ck_assert_int_ge(
            json_object_get_int_member(r, "tensor") * json_object_get_int_member(r, "stages"), 4);
    }
    const char *const args[] = {CLUSTER,
                                "-s",
                                "hardware.memory_gib=8",
                                "-s",
                                "pipeline.schedule=1f1b",
                                "-s",
                                "pipeline.chunks=1",
                                "-s",
                                "pipeline.stages=1",
                                "-s",
                                "parallel.tensor=1",
                                "-s",
                                "parallel.data=32",
                                "-s",
                                "pipeline.microbatches=2",
                                "-s",
                                "pipeline.microbatch_size=1",
                                NULL};
    g_autofree char  *run = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &run, &err), 1);
    ck_assert_ptr_nonnull(strstr(err, "fits the device memory limit"));
}
END_TEST

/* -b takes precedence over the file's layout keys: CLUSTER with an inconsistent layout (3
 * interleaved stages cannot hold 8 micro-batches) plans exactly as CLUSTER with -b 64, its
 * own batch; without -b its batch lives only in that layout, and the error says to give -b. */
START_TEST(test_plan_layout_precedence) {
    g_autofree char *text = test_util_read_file(CLUSTER, NULL);
    char            *at = strstr(text, "stages = 4");
    ck_assert_ptr_nonnull(at);
    at[9] = '3';
    TestUtilTmp tmp;
    test_util_tmp_init(&tmp, "plan-layout-XXXXXX", "bad-layout.ini");
    ck_assert(g_file_set_contents(tmp.path, text, -1, NULL));

    const char *const bad_args[] = {"plan",  tmp.path, "--gpus", G_STRINGIFY(N_GPUS),   "--json",
                                    "--top", "100000", "-b",     G_STRINGIFY(GB_TOTAL), NULL};
    g_autofree char  *out = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, bad_args, &out, &err), 0);
    const char *const b_extra[] = {"-b", G_STRINGIFY(GB_TOTAL), NULL};
    g_autofree char  *good = run_plan(b_extra);
    g_autoptr(JsonParser) p1 = json_parser_new();
    g_autoptr(JsonParser) p2 = json_parser_new();
    JsonArray *bad_rows = json_object_get_array_member(parse_object(out, p1), "rows");
    JsonArray *rows = json_object_get_array_member(parse_object(good, p2), "rows");
    ck_assert_uint_gt(json_array_get_length(rows), 0);
    ck_assert_uint_eq(json_array_get_length(bad_rows), json_array_get_length(rows));
    for (guint i = 0; i < json_array_get_length(rows); i++) {
        JsonObject *a = json_array_get_object_element(bad_rows, i);
        JsonObject *b = json_array_get_object_element(rows, i);
        ck_assert_str_eq(json_object_get_string_member(a, "schedule"),
                         json_object_get_string_member(b, "schedule"));
        ck_assert_int_eq(json_object_get_int_member(a, "step_time_ns"),
                         json_object_get_int_member(b, "step_time_ns"));
        ck_assert_int_eq(json_object_get_int_member(a, "peak_memory_bytes"),
                         json_object_get_int_member(b, "peak_memory_bytes"));
    }

    const char *const no_b[] = {"plan", tmp.path, "--gpus", G_STRINGIFY(N_GPUS), NULL};
    g_free(out), g_free(err);
    out = err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, no_b, &out, &err), 1);
    ck_assert_msg(strstr(err, "stages = 3") && strstr(err, "with -b B (the global batch)"), "%s",
                  err);
    test_util_tmp_clear(&tmp);
}
END_TEST

static const struct {
    const char *args[8];
    int         status;
    const char *needle;
} plan_bad[] = {
    {{"plan", CLUSTER}, 2, "--gpus G >= 1"},
    {{"plan", CLUSTER, "--gpus", "8", "--schedules", "custom"}, 2, "not a schedule plan"},
    {{"plan", CLUSTER, "--gpus", "8", "--schedules", "1f1b,,paci"}, 2, "empty schedule name"},
    {{"plan", CLUSTER, "--gpus", "1000003"}, 1, "no layout of 1000003 GPUs"},
    /* the largest values the parser accepts end with an answer, not SIGFPE */
    {{"plan", CLUSTER, "--gpus", "2147483647"}, 1, "no layout of 2147483647 GPUs"},
    {{"plan", CLUSTER, "--gpus", "8", "-b", "2147483647", "-M", "2147483647"}, 0, ""},
    {{"plan", CLUSTER, "--gpus", "2147483647", "-b", "2147483647", "-M", "2147483647"}, 0, ""},
    {{"plan", PP_SOURCE_ROOT "/tests/data/sim/1f1b.ini", "--gpus", "8"}, 1, "[hardware]"},
    {{"plan", CLUSTER, "--gpus", "8", "--headroom", "-1"}, 2, "--headroom GIB in [0, 1e9]"},
    {{"plan", CLUSTER, "--gpus", "8", "--headroom", "80"}, 1, "leaves nothing"},
    {{"plan", CLUSTER, "--gpus", "8", "--zero", "1,2"}, 2, "'2' is not a ZeRO stage"},
    {{"plan", CLUSTER, "--gpus", "8", "--zero", "3,3"}, 2, "'3' is repeated"},
};

START_TEST(test_plan_bad) {
    g_autofree char *out = NULL, *err = NULL;
    int              status = test_util_spawn(SIM_BIN, plan_bad[_i].args, &out, &err);
    ck_assert_int_eq(status, plan_bad[_i].status);
    ck_assert_msg(strstr(err, plan_bad[_i].needle) != NULL, "%s", err);
}
END_TEST

/* Off a terminal, a search of 100000 layouts or more says first how many it holds and how many
 * it may simulate (168562 here, none within 80 GB by the floor; nothing simulated). */
START_TEST(test_plan_announces_size) {
    const char *const args[] = {"plan",   PP_SOURCE_ROOT "/scenarios/cluster/llama3-405b-like.ini",
                                "--gpus", "64",
                                "-b",     "720720",
                                "-M",     "720720",
                                "--json", NULL};
    g_autofree char  *out = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &out, &err), 0);
    ck_assert_str_eq(err, "plan: 168562 layouts, 0 of them within device memory by the floor: "
                          "at most 0 to simulate\n");
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *obj = parse_object(out, parser);
    ck_assert_int_eq(json_object_get_int_member(obj, "layouts"), 168562);
}
END_TEST

/* A cluster run's JSON: gpus, MFU, HFU and TFLOP/s per GPU as the engine computes them. */
START_TEST(test_cluster_json) {
    const char *const args[] = {CLUSTER, "--json", "-s", "model.recompute=selective", NULL};
    g_autofree char  *out = NULL, *err = NULL;
    ck_assert_int_eq(test_util_spawn(SIM_BIN, args, &out, &err), 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *obj = parse_object(out, parser);

    const char *const o[] = {"model.recompute=selective", NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(CLUSTER, o, &error);
    ck_assert_ptr_nonnull(sc);
    g_autoptr(PpSchedule) sched = test_util_scenario_schedule_new(sc);
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_ptr_nonnull(cost);
    g_autoptr(SimResult) res = sim_engine_run(sched, cost, &error);
    ck_assert_ptr_nonnull(res);
    ck_assert_int_eq(json_object_get_int_member(obj, "gpus"), 16);
    ck_assert_int_eq(json_object_get_int_member(obj, "data_parallel"), 2);
    ck_assert_int_eq(json_object_get_int_member(obj, "tensor_parallel"), 2);
    ck_assert_double_eq(json_object_get_double_member(obj, "mfu"), res->mfu);
    ck_assert_double_eq(json_object_get_double_member(obj, "hfu"), res->hfu);
    ck_assert_double_eq(json_object_get_double_member(obj, "tflops_per_gpu"), res->tflops_per_gpu);
    ck_assert_double_eq(json_object_get_double_member(obj, "throughput_tokens_per_s"),
                        res->throughput_tokens_per_s);
    ck_assert(res->hfu > res->mfu);
    JsonArray *stages = json_object_get_array_member(obj, "stages");
    for (guint s = 0; s < json_array_get_length(stages); s++)
        ck_assert_int_eq(
            json_object_get_int_member(json_array_get_object_element(stages, s), "dp_wait_ns"),
            res->stages[s].dp_wait_ns);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sim-plan");
    TCase *tc = tcase_create("plan");
    /* the 405B plan searches context and ZeRO stages: ~15 s of one core, more under load */
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_plan_rows);
    tcase_add_test(tc, test_plan_rows_hold_alone);
    tcase_add_test(tc, test_plan_moe_axes);
    tcase_add_test(tc, test_plan_bound);
    tcase_add_test(tc, test_plan_headroom);
    tcase_add_test(tc, test_plan_csv);
    tcase_add_test(tc, test_plan_progress_terminal);
    tcase_add_test(tc, test_plan_layout_precedence);
    int32_t n_kinds = 0;
    while (pp_sched_kinds()[n_kinds] != NULL)
        n_kinds++;
    tcase_add_loop_test(tc, test_plan_every_kind, 0, n_kinds);
    tcase_add_test(tc, test_plan_memory);
    tcase_add_test(tc, test_plan_announces_size);
    tcase_add_loop_test(tc, test_plan_bad, 0, G_N_ELEMENTS(plan_bad));
    tcase_add_test(tc, test_cluster_json);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
