/* SPDX-License-Identifier: MIT
 * test-scenario.c: scenario parsing (common/pp-scenario*.c) and presets (common/pp-presets.c).
 * Every file under scenarios/ parses and round-trips through pp_scenario_to_data; spot
 * checks compare parsed values with what the files say; each bad input gives its exact
 * PP_SCENARIO_ERROR code and a message naming the offending key or value.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-presets.h"
#include "pp-scenario.h"
#include "pp-sched-gen.h"
#include "test-util.h"

#define GIB        ((int64_t)1 << 30)
#define ORDERS_DIR PP_SOURCE_ROOT "/scenarios/orders"

/* A small valid scenario that the inline cases modify through overrides. */
static const char base_text[] = "[model]\n"
                                "layers = 8\n"
                                "hidden = 64\n"
                                "heads = 4\n"
                                "seq_len = 32\n"
                                "vocab = 100\n"
                                "[pipeline]\n"
                                "schedule = 1f1b\n"
                                "stages = 4\n"
                                "microbatches = 8\n"
                                "microbatch_size = 2\n";

static PpScenario *load_base(const char *const *overrides) {
    g_autoptr(GError) err = NULL;
    PpScenario *sc = pp_scenario_load_data(base_text, "base.ini", overrides, &err);
    ck_assert_msg(sc != NULL, "base scenario: %s", err ? err->message : "");
    return sc;
}

static PpScenario *load_source_file(const char *relative) {
    g_autofree char *path = g_build_filename(PP_SOURCE_ROOT, relative, NULL);
    g_autoptr(GError) err = NULL;
    PpScenario *sc = pp_scenario_load(path, NULL, &err);
    ck_assert_msg(sc != NULL, "%s: %s", relative, err ? err->message : "");
    return sc;
}

/* TRUE when @text is a whole decimal number; stores it in @v. */
static gboolean parse_number(const char *text, double *v) {
    char *end = NULL;
    *v = g_ascii_strtod(text, &end);
    return text[0] != '\0' && *end == '\0';
}

/* Every key the file at @path gives has the same value in @effective (to_data's text):
 * numbers compare as numbers (18522 and 18522.0), texts as texts. order_file is resolved
 * and paths are compared by test_custom_order_relative instead. */
static void check_values_as_written(const char *path, const char *effective) {
    g_autoptr(GKeyFile) raw = g_key_file_new();
    g_autoptr(GKeyFile) eff = g_key_file_new();
    ck_assert(g_key_file_load_from_file(raw, path, G_KEY_FILE_NONE, NULL));
    ck_assert(g_key_file_load_from_data(eff, effective, (gsize)-1, G_KEY_FILE_NONE, NULL));
    g_auto(GStrv) groups = g_key_file_get_groups(raw, NULL);
    for (char **g = groups; *g; g++) {
        g_auto(GStrv) keys = g_key_file_get_keys(raw, *g, NULL, NULL);
        for (char **k = keys; *k; k++) {
            if (strcmp(*k, "order_file") == 0)
                continue;
            g_autofree char *want = g_key_file_get_string(raw, *g, *k, NULL);
            g_autofree char *got = g_key_file_get_string(eff, *g, *k, NULL);
            ck_assert_msg(got != NULL, "%s: [%s] %s missing from to_data", path, *g, *k);
            double a, b;
            if (parse_number(want, &a) && parse_number(got, &b))
                ck_assert_msg(a == b, "%s: [%s] %s: %s != %s", path, *g, *k, want, got);
            else
                ck_assert_msg(strcmp(want, got) == 0, "%s: [%s] %s: '%s' != '%s'", path, *g, *k,
                              want, got);
        }
    }
}

static int compare_paths(gconstpointer a, gconstpointer b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* --- the scenario collection --- */

START_TEST(test_collection_parses_and_round_trips) {
    g_autofree char *root = g_build_filename(PP_SOURCE_ROOT, "scenarios", NULL);
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    test_util_collect_files(root, ".ini", files);
    g_ptr_array_sort(files, compare_paths);
    /* default, train-tiny, custom-1f1b-n2, 16 PACI-paper files, 4 zero-bubble files */
    ck_assert_uint_ge(files->len, 23);
    for (guint i = 0; i < files->len; i++) {
        const char *path = g_ptr_array_index(files, i);
        g_autoptr(GError) err = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load(path, NULL, &err);
        ck_assert_msg(sc != NULL, "%s: %s", path, err ? err->message : "");
        g_autofree char *text = pp_scenario_to_data(sc);
        check_values_as_written(path, text);
        g_autoptr(PpScenario) again = pp_scenario_load_data(text, path, NULL, &err);
        ck_assert_msg(again != NULL, "%s (reloaded): %s", path, err ? err->message : "");
        g_autofree char *text_again = pp_scenario_to_data(again);
        ck_assert_str_eq(text, text_again);
        ck_assert_int_eq(sc->training.global_batch, sc->pipeline.microbatch_size *
                                                        sc->pipeline.mb_per_step *
                                                        sc->parallel.data);
    }
}
END_TEST

START_TEST(test_default_ini) {
    g_autoptr(PpScenario) sc = load_source_file("scenarios/default.ini");
    ck_assert_str_eq(sc->model.preset, "gpt2-medium");
    ck_assert_int_eq(sc->model.layers, 24);
    ck_assert_int_eq(sc->model.hidden, 1024);
    ck_assert_int_eq(sc->model.heads, 16);
    ck_assert_int_eq(sc->model.seq_len, 1024);
    ck_assert_int_eq(sc->model.vocab, 50257);
    ck_assert(sc->hardware.set);
    ck_assert_str_eq(sc->hardware.preset, "rtx-pro-6000");
    ck_assert_double_eq(sc->hardware.peak_flops, 503.8e12);
    ck_assert_int_eq(sc->hardware.memory_bytes, 96 * GIB);
    ck_assert_double_eq(sc->hardware.mem_bw_bytes_per_s, 1792e9);
    ck_assert_double_eq(sc->hardware.link_bw_bytes_per_s, 50e9);
    ck_assert_int_eq(sc->hardware.link_latency_ns, 10000);
    ck_assert(!sc->hardware.nvlink);
    ck_assert_int_eq(sc->hardware.devices, 8); /* derived: pipeline.stages */
    ck_assert_str_eq(sc->pipeline.schedule, "paci");
    ck_assert_int_eq(sc->pipeline.stages, 8);
    ck_assert_int_eq(sc->pipeline.chunks, 1);
    ck_assert_int_eq(sc->pipeline.accumulation, 8);
    ck_assert_int_eq(sc->pipeline.microbatch_size, 16); /* derived: 128 / a */
    ck_assert_int_eq(sc->pipeline.mb_per_step, 8);
    ck_assert_int_eq(sc->training.global_batch, 128);
    ck_assert_int_eq(sc->training.steps, 20);
    ck_assert(!sc->costs.set);
    ck_assert_str_eq(sc->pipeline.mode, "static");
    ck_assert_str_eq(sc->pipeline.partition, "balanced"); /* default */
    ck_assert_int_eq(pp_scenario_partition_mode(sc), PP_PARTITION_BALANCED);

    /* The README's comparison: the same file as 1f1b keeps the global batch. */
    const char *const flush[] = {"pipeline.schedule=1f1b", NULL};
    g_autoptr(GError) err = NULL;
    g_autofree char *path = g_build_filename(PP_SOURCE_ROOT, "scenarios/default.ini", NULL);
    g_autoptr(PpScenario) sc1 = pp_scenario_load(path, flush, &err);
    ck_assert_msg(sc1 != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(sc1->pipeline.microbatch_size, 16);
    ck_assert_int_eq(sc1->pipeline.mb_per_step, 8);

    const char *const even[] = {"pipeline.partition=even", NULL};
    g_autoptr(PpScenario) sc2 = pp_scenario_load(path, even, &err);
    ck_assert_msg(sc2 != NULL, "%s", err ? err->message : "");
    ck_assert_str_eq(sc2->pipeline.partition, "even");
    ck_assert_int_eq(pp_scenario_partition_mode(sc2), PP_PARTITION_EVEN);
}
END_TEST

START_TEST(test_zb_28b_costs) {
    g_autoptr(PpScenario) sc = load_source_file("scenarios/zb/zb-28.3b-p32-m96.ini");
    ck_assert_int_eq(sc->model.layers, 64);
    ck_assert_int_eq(sc->model.hidden, 6144);
    ck_assert_int_eq(sc->model.heads, 48);
    ck_assert_double_eq(sc->hardware.peak_flops, 312e12);
    ck_assert_int_eq(sc->hardware.memory_bytes, 80 * GIB);
    ck_assert(sc->hardware.nvlink);
    ck_assert_str_eq(sc->pipeline.schedule, "zb-2p");
    ck_assert_int_eq(sc->pipeline.stages, 32);
    ck_assert_int_eq(sc->pipeline.microbatches, 96);
    ck_assert_int_eq(sc->training.global_batch, 96);
    ck_assert(sc->costs.set);
    ck_assert_int_eq(sc->costs.forward_ns, 10419000);
    ck_assert_int_eq(sc->costs.backward_ns, 10207000);
    ck_assert_int_eq(sc->costs.weight_ns, 7715000);
    ck_assert_int_eq(sc->costs.comm_ns, 408000);
    ck_assert_int_eq(sc->costs.update_ns, 0);

    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    ck_assert_str_eq(params.kind->name, "zb-2p");
    ck_assert_int_eq(params.n_stages, 32);
    ck_assert_int_eq(params.n_chunks, 1);
    ck_assert_int_eq(params.n_microbatches, 96);
    ck_assert_int_eq(params.n_steps, 4);
    ck_assert_int_eq(params.f_ns, 10419000);
    ck_assert_int_eq(params.b_ns, 10207000);
    ck_assert_int_eq(params.w_ns, 7715000);
    ck_assert_int_eq(params.comm_ns, 408000);
    ck_assert_ptr_null(params.order_file);
}
END_TEST

START_TEST(test_zb_smaller_settings) {
    g_autoptr(PpScenario) a = load_source_file("scenarios/zb/zb-1.5b-p8-m24.ini");
    ck_assert_int_eq(a->model.hidden, 2304);
    ck_assert_int_eq(a->pipeline.stages, 8);
    ck_assert_int_eq(a->pipeline.microbatches, 24);
    ck_assert_int_eq(a->costs.forward_ns, 18522000);
    ck_assert_int_eq(a->costs.comm_ns, 601000);
    g_autoptr(PpScenario) b = load_source_file("scenarios/zb/zb-14.6b-p16-m48.ini");
    ck_assert_int_eq(b->model.layers, 48);
    ck_assert_int_eq(b->model.heads, 40);
    ck_assert_int_eq(b->pipeline.stages, 16);
    ck_assert_int_eq(b->costs.weight_ns, 8132000);
}
END_TEST

START_TEST(test_paci_paper_files) {
    g_autoptr(PpScenario) flush = load_source_file("scenarios/paci/gpt2m-b128-1f1b-m32.ini");
    ck_assert_str_eq(flush->pipeline.schedule, "1f1b");
    ck_assert_int_eq(flush->pipeline.microbatches, 32);
    ck_assert_int_eq(flush->pipeline.microbatch_size, 4);
    ck_assert_int_eq(flush->training.global_batch, 128);
    g_autoptr(PpScenario) paci = load_source_file("scenarios/paci/gpt2m-b256-paci-a8.ini");
    ck_assert_str_eq(paci->pipeline.schedule, "paci");
    ck_assert_int_eq(paci->pipeline.accumulation, 8);
    ck_assert_int_eq(paci->pipeline.microbatch_size, 32);
    ck_assert_int_eq(paci->training.global_batch, 256);
    ck_assert_int_eq(paci->pipeline.mb_per_step, 8);
}
END_TEST

START_TEST(test_train_tiny) {
    g_autoptr(PpScenario) sc = load_source_file("scenarios/train-tiny.ini");
    ck_assert_ptr_null(sc->model.preset);
    ck_assert_int_eq(sc->model.layers, 4);
    ck_assert_int_eq(sc->model.hidden, 256);
    ck_assert_int_eq(sc->model.seq_len, 64);
    ck_assert_int_eq(sc->model.vocab, 50257);
    /* A CPU worker per stage, for pacer-sim (pacer-train ignores [hardware]). */
    ck_assert(sc->hardware.set);
    ck_assert_ptr_null(sc->hardware.preset);
    ck_assert_double_eq_tol(sc->hardware.peak_flops, 3e10, 1.0);
    ck_assert_int_eq(sc->hardware.devices, 4);
    ck_assert_str_eq(sc->pipeline.schedule, "paci");
    ck_assert_int_eq(sc->pipeline.accumulation, 4);
    ck_assert_int_eq(sc->pipeline.microbatch_size, 1);
    ck_assert_int_eq(sc->training.global_batch, 4); /* derived: microbatch_size * a */
    ck_assert_int_eq(sc->training.steps, 40);
    ck_assert_str_eq(sc->optimizer.name, "adamw");
    ck_assert_double_eq(sc->optimizer.lr, 1e-3);
    ck_assert_int_eq(sc->optimizer.warmup_steps, 5);
    ck_assert_int_eq(sc->run.threads, 1);
}
END_TEST

START_TEST(test_custom_order_relative) {
    g_autoptr(PpScenario) sc = load_source_file("tests/data/scenarios/good-custom.ini");
    g_autofree char *want =
        g_canonicalize_filename(PP_SOURCE_ROOT "/scenarios/orders/1f1b-n2-m3.csv", NULL);
    ck_assert_str_eq(sc->pipeline.order_file, want);
    ck_assert(g_path_is_absolute(sc->pipeline.order_file));
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    ck_assert_str_eq(params.order_file, want);
    ck_assert_int_eq(params.f_ns, 0); /* no [costs]: the simulator fills costs */
}
END_TEST

/* --- defaults, minimal files, derived values --- */

START_TEST(test_defaults) {
    g_autoptr(PpScenario) sc = load_base(NULL);
    ck_assert_str_eq(sc->path, "base.ini");
    ck_assert(!sc->hardware.set);
    ck_assert(!sc->costs.set);
    ck_assert_int_eq(sc->hardware.devices, 4);
    ck_assert_int_eq(sc->training.global_batch, 16);
    ck_assert_int_eq(sc->training.steps, 10);
    ck_assert_ptr_null(sc->data.paths);
    ck_assert_str_eq(sc->data.cache_dir, ".cache");
    ck_assert_double_eq(sc->data.val_fraction, 0.05);
    ck_assert_str_eq(sc->optimizer.name, "adamw");
    ck_assert_double_eq(sc->optimizer.lr, 6e-4);
    ck_assert_double_eq(sc->optimizer.min_lr, 6e-5);
    ck_assert_int_eq(sc->optimizer.warmup_steps, 1); /* 10% of 10 steps */
    ck_assert_double_eq(sc->optimizer.weight_decay, 0.1);
    ck_assert_double_eq(sc->optimizer.beta1, 0.9);
    ck_assert_double_eq(sc->optimizer.beta2, 0.95);
    ck_assert_double_eq(sc->optimizer.eps, 1e-8);
    ck_assert_double_eq(sc->optimizer.momentum, 0.95);
    ck_assert_int_eq(sc->optimizer.ns_steps, 5);
    ck_assert_double_eq(sc->optimizer.grad_clip, 1.0);
    ck_assert(!sc->optimizer.error_feedback);
    ck_assert_uint_eq(sc->run.seed, 1337);
    ck_assert_str_eq(sc->run.backend, "cpu");
    ck_assert_ptr_null(sc->run.layers_per_stage);
    ck_assert_int_eq(sc->run.n_layers_per_stage, 0);
    ck_assert_int_eq(sc->run.log_every, 1);
    ck_assert_double_eq(sc->run.comm_timeout_s, 300.0);
    ck_assert_ptr_null(sc->run.devices);
    ck_assert_int_eq(sc->run.n_devices, 0);
    ck_assert_ptr_null(sc->run.precision); /* the backend's default */
    ck_assert_ptr_null(sc->pipeline.order_file);

    /* to_data leaves out the absent [hardware] and [costs] and unset optional keys. */
    g_autofree char *text = pp_scenario_to_data(sc);
    ck_assert_ptr_null(strstr(text, "[hardware]"));
    ck_assert_ptr_null(strstr(text, "[costs]"));
    ck_assert_ptr_null(strstr(text, "order_file"));
    ck_assert_ptr_nonnull(strstr(text, "warmup_steps=1\n"));
    ck_assert_ptr_nonnull(strstr(text, "# transformer blocks L\nlayers=8\n"));
}
END_TEST

START_TEST(test_minimal_file) {
    g_autoptr(PpScenario) sc = load_source_file("tests/data/scenarios/good-minimal.ini");
    ck_assert_ptr_null(sc->model.preset);
    ck_assert_ptr_null(sc->hardware.preset);
    ck_assert(sc->hardware.set);
    ck_assert_double_eq(sc->hardware.peak_flops, 12.5e12);
    ck_assert_int_eq(sc->hardware.memory_bytes, 3 * GIB / 2);
    ck_assert_double_eq(sc->hardware.mem_bw_bytes_per_s, 200e9);
    ck_assert_double_eq(sc->hardware.link_bw_bytes_per_s, 8e9);
    ck_assert_int_eq(sc->hardware.link_latency_ns, 2500);
    ck_assert_int_eq(sc->training.global_batch, 12);
    ck_assert_int_eq(sc->optimizer.warmup_steps, 3);
    /* microseconds with decimals, rounded to the nearest ns */
    ck_assert_int_eq(sc->costs.forward_ns, 500);
    ck_assert_int_eq(sc->costs.backward_ns, 2001);
    ck_assert_int_eq(sc->costs.weight_ns, 18522000);
    ck_assert_int_eq(sc->costs.comm_ns, 0);
    ck_assert_ptr_nonnull(sc->data.paths);
    ck_assert_uint_eq(g_strv_length(sc->data.paths), 2);
    ck_assert_str_eq(sc->data.paths[0], "a.txt");
    ck_assert_str_eq(sc->data.paths[1], "more/b.txt");
    ck_assert_str_eq(sc->data.cache_dir, "/tmp/pacer-cache");
    ck_assert_double_eq(sc->data.val_fraction, 0.1);
    ck_assert_str_eq(sc->optimizer.name, "muon");
    ck_assert(sc->optimizer.error_feedback);
    ck_assert_uint_eq(sc->run.seed, G_MAXUINT64);
    ck_assert_int_eq(sc->run.n_layers_per_stage, 3);
    ck_assert_int_eq(sc->run.layers_per_stage[0], 1);
    ck_assert_int_eq(sc->run.layers_per_stage[1], 2);
    ck_assert_int_eq(sc->run.layers_per_stage[2], 3);

    g_autofree char *text = pp_scenario_to_data(sc);
    ck_assert_ptr_nonnull(strstr(text, "forward_us=0.5\n"));
    ck_assert_ptr_nonnull(strstr(text, "backward_us=2.001\n"));
    ck_assert_ptr_nonnull(strstr(text, "memory_gib=1.5\n"));
    ck_assert_ptr_nonnull(strstr(text, "paths=a.txt,more/b.txt\n"));
    ck_assert_ptr_nonnull(strstr(text, "layers_per_stage=1,2,3\n"));
    ck_assert_ptr_nonnull(strstr(text, "seed=18446744073709551615\n"));
}
END_TEST

/* [costs] lists: one value per stage or one for all; the scalars are the largest entry;
 * pp_scenario_stage_cost_ns() reads each stage; to_data writes the lists back. */
START_TEST(test_per_stage_costs) {
    const char *const over[] = {"costs.forward_us=1.5,2,2.25,1",
                                "costs.backward_us=3",
                                "costs.weight_us=0.5,0.5,0.5,4",
                                "costs.update_us=7,8,9,10",
                                "costs.fused_backward_us=3.25",
                                "costs.comm_us=0.125",
                                NULL};
    g_autoptr(PpScenario) sc = load_base(over);
    const PpCostParams *c = &sc->costs;
    ck_assert(c->set);
    ck_assert_int_eq(c->n_forward_stage, 4);
    ck_assert_int_eq(c->forward_ns, 2250);
    ck_assert_int_eq(c->backward_ns, 3000);
    ck_assert_int_eq(c->weight_ns, 4000);
    ck_assert_int_eq(c->update_ns, 10000);
    ck_assert_int_eq(c->comm_ns, 125);
    static const int64_t f[] = {1500, 2000, 2250, 1000}, w[] = {500, 500, 500, 4000};
    for (int32_t st = 0; st < 4; st++) {
        ck_assert_int_eq(pp_scenario_stage_cost_ns(c, PP_OP_FORWARD, st), f[st]);
        ck_assert_int_eq(pp_scenario_stage_cost_ns(c, PP_OP_BACKWARD, st), 3000);
        ck_assert_int_eq(pp_scenario_stage_cost_ns(c, PP_OP_WEIGHT, st), w[st]);
        ck_assert_int_eq(pp_scenario_stage_cost_ns(c, PP_OP_UPDATE, st), 7000 + 1000 * st);
        ck_assert_int_eq(pp_scenario_stage_cost_ns(c, PP_OP_BACKWARD_FULL, st), 3250);
    }
    PpScheduleParams params;
    pp_scenario_schedule_params(sc, &params);
    ck_assert_int_eq(params.f_ns, 2250); /* searching generators plan with the bottleneck */

    g_autofree char *text = pp_scenario_to_data(sc);
    ck_assert_ptr_nonnull(strstr(text, "forward_us=1.5,2,2.25,1\n"));
    ck_assert_ptr_nonnull(strstr(text, "fused_backward_us=3.25\n"));
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) again = pp_scenario_load_data(text, "again.ini", NULL, &err);
    ck_assert_msg(again != NULL, "%s", err ? err->message : "");
    for (int32_t st = 0; st < 4; st++)
        ck_assert_int_eq(pp_scenario_stage_cost_ns(&again->costs, PP_OP_FORWARD, st), f[st]);

    /* Without fused_backward_us a BW costs B + W: -1 says so. */
    g_autoptr(PpScenario) plain =
        load_base((const char *const[]){"costs.forward_us=1", "costs.backward_us=2", NULL});
    ck_assert_int_eq(pp_scenario_stage_cost_ns(&plain->costs, PP_OP_BACKWARD_FULL, 3), -1);
    ck_assert_int_eq(pp_scenario_stage_cost_ns(&plain->costs, PP_OP_FORWARD, 3), 1000);
}
END_TEST

START_TEST(test_derived_batch) {
    /* flush: microbatch_size from global_batch / microbatches */
    const char *const flush[] = {"training.global_batch=64", "pipeline.microbatch_size=", NULL};
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) none = pp_scenario_load_data(base_text, "base.ini", flush, &err);
    ck_assert_ptr_null(none); /* an empty microbatch_size is not a number */
    ck_assert(g_error_matches(err, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));

    static const char no_size[] = "[model]\npreset = gpt2\n"
                                  "[pipeline]\nschedule = 1f1b\nstages = 4\nmicrobatches = 8\n"
                                  "[training]\nglobal_batch = 64\n";
    g_clear_error(&err);
    g_autoptr(PpScenario) a = pp_scenario_load_data(no_size, "a.ini", NULL, &err);
    ck_assert_msg(a != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(a->pipeline.microbatch_size, 8);

    /* paci: global_batch / accumulation */
    const char *const paci[] = {"pipeline.schedule=paci", "pipeline.accumulation=2", NULL};
    g_autoptr(PpScenario) b = pp_scenario_load_data(no_size, "b.ini", paci, &err);
    ck_assert_msg(b != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(b->pipeline.microbatch_size, 32);
    ck_assert_int_eq(b->pipeline.mb_per_step, 2);

    /* pipedream: one micro-batch per step */
    const char *const pd[] = {"pipeline.schedule=pipedream", NULL};
    g_autoptr(PpScenario) c = pp_scenario_load_data(no_size, "c.ini", pd, &err);
    ck_assert_msg(c != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(c->pipeline.microbatch_size, 64);
    ck_assert_int_eq(c->pipeline.mb_per_step, 1);

    /* global_batch from microbatch_size; 2bw and gpipe count micro-batches */
    const char *const bw[] = {"pipeline.schedule=2bw", NULL};
    g_autoptr(PpScenario) d = load_base(bw);
    ck_assert_int_eq(d->training.global_batch, 16);
    ck_assert_int_eq(d->pipeline.mb_per_step, 8);

    /* warmup_steps: 10% of steps, rounded down */
    const char *const steps[] = {"training.steps=95", NULL};
    g_autoptr(PpScenario) e = load_base(steps);
    ck_assert_int_eq(e->optimizer.warmup_steps, 9);

    /* interleaved: chunks split the [costs] stage times */
    const char *const inter[] = {"pipeline.schedule=interleaved", "pipeline.chunks=2",
                                 "costs.forward_us=10", "costs.backward_us=20.001", NULL};
    g_autoptr(PpScenario) f = load_base(inter);
    PpScheduleParams params;
    pp_scenario_schedule_params(f, &params);
    ck_assert_int_eq(params.n_chunks, 2);
    ck_assert_int_eq(params.f_ns, 5000);
    ck_assert_int_eq(params.b_ns, 10000);
    ck_assert_int_eq(params.w_ns, 0);

    /* Dynamic mode runs every kind with a run-time policy: paci and async-1f1b (a = 1). */
    const char *const dyn[] = {"pipeline.schedule=async-1f1b", "pipeline.mode=dynamic", NULL};
    g_autoptr(PpScenario) g = load_base(dyn);
    ck_assert_str_eq(g->pipeline.mode, "dynamic");
    ck_assert_int_eq(g->pipeline.mb_per_step, 1);
}
END_TEST

/* --- presets and overrides --- */

START_TEST(test_presets) {
    static const struct {
        const char *name;
        int32_t     layers, hidden, heads;
    } models[] = {
        {"gpt2", 12, 768, 12},      {"gpt2-medium", 24, 1024, 16}, {"gpt2-large", 36, 1280, 20},
        {"gpt2-xl", 48, 1600, 25},  {"zb-1.5b", 24, 2304, 24},     {"zb-6.2b", 32, 4096, 32},
        {"zb-14.6b", 48, 5120, 40}, {"zb-28.3b", 64, 6144, 48},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(models); i++) {
        const PpModelPreset *p = pp_preset_model_lookup(models[i].name);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(p->layers, models[i].layers);
        ck_assert_int_eq(p->hidden, models[i].hidden);
        ck_assert_int_eq(p->heads, models[i].heads);
        ck_assert_int_eq(p->seq_len, 1024);
        ck_assert_int_eq(p->vocab, 50257);

        static const char text[] = "[pipeline]\nschedule = 1f1b\nstages = 2\n"
                                   "microbatch_size = 1\n";
        g_autofree char  *preset = g_strdup_printf("model.preset=%s", models[i].name);
        const char *const o[] = {preset, NULL};
        g_autoptr(GError) err = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load_data(text, "p.ini", o, &err);
        ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
        ck_assert_int_eq(sc->model.layers, models[i].layers);
        ck_assert_int_eq(sc->model.hidden, models[i].hidden);
        ck_assert_int_eq(sc->model.heads, models[i].heads);
    }

    static const struct {
        const char *name;
        double      peak_flops;
        int64_t     memory_bytes;
        double      link_bw;
        int64_t     latency_ns;
        gboolean    nvlink;
        double      fp8_flops;
        int32_t     gpus_per_node;
    } devices[] = {
        {"a100-sxm", 312e12, 80 * GIB, 210e9, 5000, TRUE, 0.0, 8},
        {"h100-sxm", 989e12, 80 * GIB, 450e9, 5000, TRUE, 1979e12, 8},
        {"h200-sxm", 989e12, INT64_C(141000000000), 450e9, 5000, TRUE, 1979e12, 8},
        {"h800", 989e12, 80 * GIB, 200e9, 5000, TRUE, 1979e12, 8},
        {"b200", 2250e12, INT64_C(180000000000), 900e9, 5000, TRUE, 4500e12, 8},
        {"gb200", 2500e12, INT64_C(186000000000), 900e9, 5000, TRUE, 5000e12, 72},
        {"rtx-pro-6000", 503.8e12, 96 * GIB, 50e9, 10000, FALSE, 0.0, 8},
        {"l40s", 362e12, 48 * GIB, 25e9, 10000, FALSE, 0.0, 8},
        {"a100-40gb", 312e12, 40 * GIB, 210e9, 5000, TRUE, 0.0, 8},
        {"a100-80gb-pcie", 312e12, 80 * GIB, 25e9, 10000, FALSE, 0.0, 8},
        {"h100-pcie", 756e12, 80 * GIB, 50e9, 10000, FALSE, 1513e12, 8},
        {"h100-nvl", 835e12, INT64_C(94000000000), 50e9, 10000, FALSE, 1670e12, 8},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(devices); i++) {
        g_autofree char  *preset = g_strdup_printf("hardware.preset=%s", devices[i].name);
        const char *const o[] = {preset, NULL};
        g_autoptr(PpScenario) sc = load_base(o);
        ck_assert(sc->hardware.set);
        ck_assert_str_eq(sc->hardware.preset, devices[i].name);
        ck_assert_double_eq(sc->hardware.peak_flops, devices[i].peak_flops);
        ck_assert_int_eq(sc->hardware.memory_bytes, devices[i].memory_bytes);
        ck_assert_double_eq(sc->hardware.link_bw_bytes_per_s, devices[i].link_bw);
        ck_assert_int_eq(sc->hardware.link_latency_ns, devices[i].latency_ns);
        ck_assert_int_eq(sc->hardware.nvlink, devices[i].nvlink);
        ck_assert_double_eq(sc->hardware.peak_fp8_flops, devices[i].fp8_flops);
        ck_assert_int_eq(sc->hardware.gpus_per_node, devices[i].gpus_per_node);
        /* the effective text reloads to the same device */
        g_autofree char *text = pp_scenario_to_data(sc);
        g_autoptr(GError) err = NULL;
        g_autoptr(PpScenario) again = pp_scenario_load_data(text, "again.ini", NULL, &err);
        ck_assert_msg(again != NULL, "%s", err ? err->message : "");
        ck_assert_int_eq(again->hardware.memory_bytes, devices[i].memory_bytes);
        ck_assert_double_eq(again->hardware.peak_flops, devices[i].peak_flops);
        ck_assert_double_eq(again->hardware.peak_fp8_flops, devices[i].fp8_flops);
    }
    ck_assert_ptr_null(pp_preset_model_lookup("gpt3"));
    ck_assert_ptr_null(pp_preset_hardware_lookup("v100"));
    g_autofree char *models_list = pp_preset_model_names();
    ck_assert_str_eq(models_list, "gpt2, gpt2-medium, gpt2-large, gpt2-xl, zb-1.5b, zb-6.2b, "
                                  "zb-14.6b, zb-28.3b, llama3-8b, llama3-70b, llama3-405b, "
                                  "mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b, qwen3-235b-a22b, "
                                  "deepseek-v3, gpt-oss-120b");
    g_autofree char *hw_list = pp_preset_hardware_names();
    ck_assert_str_eq(hw_list, "a100-sxm, h100-sxm, h200-sxm, h800, b200, gb200, rtx-pro-6000, "
                              "l40s, a100-40gb, a100-80gb-pcie, h100-pcie, h100-nvl");
}
END_TEST

/* The A100 and H100 variants carry their family's calibration, read from the SXM part's
 * preset (so a refit of that part moves them too), with their own datasheet SMs and memory
 * bandwidth. */
START_TEST(test_preset_families) {
    static const struct {
        const char *name, *family;
        int32_t     sms;
        double      mem_bw;
    } variants[] = {{"a100-40gb", "a100-sxm", 108, 1555e9},
                    {"a100-80gb-pcie", "a100-sxm", 108, 1935e9},
                    {"h100-pcie", "h100-sxm", 114, 2000e9},
                    {"h100-nvl", "h100-sxm", 132, 3900e9}};
    for (size_t i = 0; i < G_N_ELEMENTS(variants); i++) {
        g_autofree char  *preset = g_strdup_printf("hardware.preset=%s", variants[i].name);
        g_autofree char  *family = g_strdup_printf("hardware.preset=%s", variants[i].family);
        const char *const o[] = {preset, NULL}, *const f[] = {family, NULL};
        g_autoptr(PpScenario) sc = load_base(o);
        g_autoptr(PpScenario) fam = load_base(f);
        const PpHardwareParams *a = &sc->hardware, *b = &fam->hardware;
        ck_assert_double_eq(a->kernel_eff_max, b->kernel_eff_max);
        ck_assert_double_eq(a->kernel_eff_half_tokens, b->kernel_eff_half_tokens);
        ck_assert_double_eq(a->kernel_eff_half_hidden, b->kernel_eff_half_hidden);
        ck_assert_double_eq(a->kernel_eff_fp8, b->kernel_eff_fp8);
        ck_assert_double_eq(a->alltoall_eff, b->alltoall_eff);
        ck_assert_int_eq(a->launch_ns, b->launch_ns);
        ck_assert_str_eq(a->cost_model, b->cost_model);
        ck_assert_int_eq(a->sms, variants[i].sms);
        ck_assert_double_eq(a->mem_bw_bytes_per_s, variants[i].mem_bw);
    }
}
END_TEST

/* The layer keys beyond GPT-2's: defaults derived from the shape, the Llama 3 presets' values
 * (Llama 3 paper, Table 3), explicit keys and --set over a preset, and the text round trip. */
START_TEST(test_layer_keys) {
    g_autoptr(PpScenario) base = load_base(NULL);
    ck_assert_int_eq(base->model.kv_heads, 4);
    ck_assert_int_eq(base->model.head_dim, 16);
    ck_assert_str_eq(base->model.ffn, "gelu");
    ck_assert_int_eq(base->model.ffn_hidden, 256);
    ck_assert_str_eq(base->model.precision, "bf16");
    ck_assert_str_eq(base->model.attention_flops, "full");
    ck_assert(!pp_scenario_ffn_gated(base));
    ck_assert(!pp_scenario_precision_fp8(base));
    ck_assert(!pp_scenario_attention_causal(base));
    /* a GPT-2 preset derives them from its own shape */
    static const char medium_text[] = "[model]\npreset = gpt2-medium\n[pipeline]\n"
                                      "schedule = 1f1b\nstages = 2\nmicrobatch_size = 1\n";
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) medium = pp_scenario_load_data(medium_text, "m.ini", NULL, &err);
    ck_assert_msg(medium != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(medium->model.kv_heads, 16);
    ck_assert_int_eq(medium->model.head_dim, 64);
    ck_assert_int_eq(medium->model.ffn_hidden, 4096);

    static const struct {
        const char *name;
        int32_t     layers, hidden, heads, kv_heads, ffn_hidden;
    } llama[] = {
        {"llama3-8b", 32, 4096, 32, 8, 14336},
        {"llama3-70b", 80, 8192, 64, 8, 28672},
        {"llama3-405b", 126, 16384, 128, 8, 53248},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(llama); i++) {
        g_autofree char  *preset = g_strdup_printf("model.preset=%s", llama[i].name);
        const char *const o[] = {preset, NULL};
        g_autoptr(PpScenario) sc = pp_scenario_load_data(medium_text, "l.ini", o, &err);
        ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
        ck_assert_int_eq(sc->model.layers, llama[i].layers);
        ck_assert_int_eq(sc->model.hidden, llama[i].hidden);
        ck_assert_int_eq(sc->model.heads, llama[i].heads);
        ck_assert_int_eq(sc->model.kv_heads, llama[i].kv_heads);
        ck_assert_int_eq(sc->model.head_dim, 128);
        ck_assert_int_eq(sc->model.ffn_hidden, llama[i].ffn_hidden);
        ck_assert_str_eq(sc->model.ffn, "swiglu");
        ck_assert(pp_scenario_ffn_gated(sc));
        ck_assert_int_eq(sc->model.seq_len, 8192);
        ck_assert_int_eq(sc->model.vocab, 128256);
    }

    /* explicit keys override the preset, --set overrides them; to_data reloads the same */
    static const char text[] = "[model]\npreset = llama3-8b\nkv_heads = 4\nffn = gelu\n"
                               "head_dim = 96\nprecision = fp8\nattention_flops = causal\n"
                               "[hardware]\npreset = h100-sxm\n"
                               "[pipeline]\nschedule = 1f1b\nstages = 4\nmicrobatch_size = 1\n";
    const char *const o[] = {"model.ffn_hidden=1000", NULL};
    g_autoptr(PpScenario) sc = pp_scenario_load_data(text, "layer.ini", o, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(sc->model.kv_heads, 4);
    ck_assert_int_eq(sc->model.head_dim, 96);
    ck_assert_int_eq(sc->model.ffn_hidden, 1000);
    ck_assert_str_eq(sc->model.ffn, "gelu");
    ck_assert(pp_scenario_precision_fp8(sc));
    ck_assert(pp_scenario_attention_causal(sc));
    PpMemoryShape shape;
    pp_scenario_memory_shape(sc, &shape);
    ck_assert_double_eq(shape.kv_heads, 4.0);
    ck_assert_double_eq(shape.head_dim, 96.0);
    ck_assert_double_eq(shape.ffn_hidden, 1000.0);
    ck_assert(!shape.ffn_gated);
    g_autofree char *out = pp_scenario_to_data(sc);
    ck_assert_ptr_nonnull(strstr(out, "\nkv_heads=4\n"));
    ck_assert_ptr_nonnull(strstr(out, "\npeak_fp8_tflops=1979\n"));
    g_autoptr(PpScenario) again = pp_scenario_load_data(out, "again.ini", NULL, &err);
    ck_assert_msg(again != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(again->model.kv_heads, 4);
    ck_assert_int_eq(again->model.head_dim, 96);
    ck_assert_int_eq(again->model.ffn_hidden, 1000);
    ck_assert_str_eq(again->model.precision, "fp8");
    ck_assert_str_eq(again->model.attention_flops, "causal");
    ck_assert_double_eq(again->hardware.peak_fp8_flops, 1979e12);
}
END_TEST

START_TEST(test_overrides) {
    /* explicit keys in the file override the preset of their section */
    static const char text[] = "[model]\npreset = gpt2-medium\nlayers = 12\n"
                               "[hardware]\npreset = l40s\nlink_gbps = 12.5\n"
                               "[pipeline]\nschedule = 1f1b\nstages = 4\nmicrobatches = 4\n"
                               "microbatch_size = 8\n";
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) a = pp_scenario_load_data(text, "o.ini", NULL, &err);
    ck_assert_msg(a != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(a->model.layers, 12);
    ck_assert_int_eq(a->model.hidden, 1024);
    ck_assert_double_eq(a->hardware.link_bw_bytes_per_s, 12.5e9);
    ck_assert_double_eq(a->hardware.peak_flops, 362e12);

    /* --set overrides both the file's keys and presets; a new preset keeps explicit keys */
    const char *const o[] = {"model.layers = 8",
                             "hardware.preset=h100-sxm",
                             "hardware.peak_tflops=100",
                             "pipeline.stages=2",
                             "training.global_batch=32",
                             "run.seed=7",
                             NULL};
    g_autoptr(PpScenario) b = pp_scenario_load_data(text, "o.ini", o, &err);
    ck_assert_msg(b != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(b->model.layers, 8);
    ck_assert_int_eq(b->model.hidden, 1024);
    ck_assert_str_eq(b->hardware.preset, "h100-sxm");
    ck_assert_double_eq(b->hardware.peak_flops, 100e12);
    ck_assert_double_eq(b->hardware.link_bw_bytes_per_s, 12.5e9); /* explicit file key */
    ck_assert_double_eq(b->hardware.mem_bw_bytes_per_s, 3350e9);  /* from the new preset */
    ck_assert_int_eq(b->pipeline.stages, 2);
    ck_assert_int_eq(b->training.global_batch, 32);
    ck_assert_uint_eq(b->run.seed, 7);

    /* an override can add a section the file lacks */
    const char *const costs[] = {"costs.forward_us=3", "costs.backward_us=6", NULL};
    g_autoptr(PpScenario) c = load_base(costs);
    ck_assert(c->costs.set);
    ck_assert_int_eq(c->costs.forward_ns, 3000);
    ck_assert_int_eq(c->costs.backward_ns, 6000);
}
END_TEST

/* pp_scenario_with(): a typed change equals loading the file with the same values as
 * overrides, on every shipped scenario: the same effective text (to_data), the same resolved
 * kind and micro-batches per step, or the same error. The changes reach what the scenario
 * derives (warmup from steps, devices from the layout, the micro-batch size or the global
 * batch from the micro-batches). */
typedef struct {
    PpScenarioDelta   delta;
    const char *const overrides[8];
} WithCase;

START_TEST(test_with_equals_overrides) {
    const WithCase cases[] = {
        {{.kind = &pp_sched_kind_paci, .accumulation = 4},
         {"pipeline.schedule=paci", "pipeline.accumulation=4"}},
        {{.stages = 2, .steps = 3}, {"pipeline.stages=2", "training.steps=3"}},
        {{.microbatches = 4}, {"pipeline.microbatches=4"}},
        {{.data = 2,
          .tensor = 2,
          .set_recompute = TRUE,
          .recompute = PP_RECOMPUTE_FULL,
          .set_sequence_parallel = TRUE,
          .sequence_parallel = TRUE,
          .static_mode = TRUE},
         {"parallel.data=2", "parallel.tensor=2", "model.recompute=full",
          "parallel.sequence_parallel=true", "pipeline.mode=static"}},
        {{.kind = &pp_sched_kind_interleaved, .chunks = 2, .microbatches = 8, .global_batch = 64},
         {"pipeline.schedule=interleaved", "pipeline.chunks=2", "pipeline.microbatches=8",
          "training.global_batch=64"}},
        {{.stages = 4096}, {"pipeline.stages=4096"}}, /* more stages than layers: an error */
    };
    g_autofree char *root = g_build_filename(PP_SOURCE_ROOT, "scenarios", NULL);
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    test_util_collect_files(root, ".ini", files);
    g_ptr_array_sort(files, compare_paths);
    ck_assert_uint_ge(files->len, 23);
    int n_equal[G_N_ELEMENTS(cases)] = {0};
    for (guint i = 0; i < files->len; i++) {
        const char *path = g_ptr_array_index(files, i);
        g_autoptr(PpScenario) base = pp_scenario_load(path, NULL, NULL);
        ck_assert_msg(base != NULL, "%s", path);
        for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
            g_autoptr(GError) e1 = NULL;
            g_autoptr(GError) e2 = NULL;
            g_autoptr(PpScenario) typed = pp_scenario_with(base, &cases[c].delta, &e1);
            g_autoptr(PpScenario) text = pp_scenario_load(path, cases[c].overrides, &e2);
            if (text == NULL) {
                ck_assert_msg(typed == NULL, "%s case %zu: typed loaded, text: %s", path, c,
                              e2->message);
                ck_assert_int_eq(e1->code, e2->code);
                ck_assert_str_eq(e1->message, e2->message);
                continue;
            }
            ck_assert_msg(typed != NULL, "%s case %zu: %s", path, c, e1->message);
            g_autofree char *want = pp_scenario_to_data(text);
            g_autofree char *got = pp_scenario_to_data(typed);
            ck_assert_str_eq(got, want);
            ck_assert_ptr_eq(typed->pipeline.kind, text->pipeline.kind);
            ck_assert_ptr_eq(typed->pipeline.kind, pp_sched_kind_lookup(typed->pipeline.schedule));
            ck_assert_int_eq(typed->pipeline.mb_per_step, text->pipeline.mb_per_step);
            ck_assert_msg(typed->derived_keys == text->derived_keys,
                          "%s case %zu: derived keys %u, %u", path, c, typed->derived_keys,
                          text->derived_keys);
            n_equal[c]++;
        }
        /* the base is unchanged by the variants */
        g_autoptr(PpScenario) again = pp_scenario_load(path, NULL, NULL);
        g_autofree char *base_text_now = pp_scenario_to_data(base);
        g_autofree char *again_text = pp_scenario_to_data(again);
        ck_assert_str_eq(base_text_now, again_text);
    }
    /* both outcomes are exercised: every change but the last loads on some scenarios */
    for (size_t c = 0; c + 1 < G_N_ELEMENTS(cases); c++)
        ck_assert_msg(n_equal[c] >= 3, "case %zu loaded %d times", c, n_equal[c]);
    ck_assert_int_eq(n_equal[G_N_ELEMENTS(cases) - 1], 0);

    /* a count outside its key's range is refused like the override would be */
    g_autoptr(PpScenario) base = load_base(NULL);
    const PpScenarioDelta too_many = {.microbatches = 16777217};
    g_autoptr(GError) err = NULL;
    ck_assert_ptr_null(pp_scenario_with(base, &too_many, &err));
    ck_assert(g_error_matches(err, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE));
    ck_assert_ptr_nonnull(strstr(err->message, "[pipeline] microbatches = 16777217"));
    ck_assert_ptr_nonnull(strstr(err->message, "out of range"));
}
END_TEST

/* pp_scenario_load_deriving() derives the named keys as if absent; pp_scenario_key_given()
 * says which derived keys the file gave. The base file gives microbatch_size = 2 and m = 8:
 * global_batch is derived (16); giving global_batch = 64 and deriving microbatch_size gives
 * 64 / 8 = 8 (and with data = 2 replicas 64 / (8 x 2) = 4). */
START_TEST(test_load_deriving) {
    g_autofree char *dir = test_util_tmp_dir_new("pp-scenario-XXXXXX");
    g_autofree char *path = g_build_filename(dir, "base.ini", NULL);
    ck_assert(g_file_set_contents(path, base_text, -1, NULL));
    g_autoptr(PpScenario) plain = pp_scenario_load(path, NULL, NULL);
    ck_assert_int_eq(plain->training.global_batch, 16);
    ck_assert(pp_scenario_key_given(plain, "pipeline", "microbatch_size"));
    ck_assert(!pp_scenario_key_given(plain, "training", "global_batch"));
    ck_assert(!pp_scenario_key_given(plain, "hardware", "devices"));

    const char *const gb[] = {"training.global_batch=64", NULL};
    const char *const derive[] = {"pipeline.microbatch_size", NULL};
    g_autoptr(GError) err = NULL;
    ck_assert_ptr_null(pp_scenario_load(path, gb, &err)); /* 2 x 8 != 64 */
    ck_assert(g_error_matches(err, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    g_autoptr(PpScenario) d = pp_scenario_load_deriving(path, gb, derive, NULL);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->pipeline.microbatch_size, 8);
    ck_assert(!pp_scenario_key_given(d, "pipeline", "microbatch_size"));
    ck_assert(pp_scenario_key_given(d, "training", "global_batch"));
    const char *const gb2[] = {"training.global_batch=64", "parallel.data=2", NULL};
    g_autoptr(PpScenario) d2 = pp_scenario_load_deriving(path, gb2, derive, NULL);
    ck_assert_int_eq(d2->pipeline.microbatch_size, 4);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* [model] flash_attention and the [hardware] kernel-efficiency keys: table defaults (also
 * without a [hardware] section), file keys, --set overrides, and to_data round trips. */
START_TEST(test_flash_and_kernel_eff) {
    g_autoptr(PpScenario) base = load_base(NULL);
    ck_assert(!base->model.flash_attention);
    ck_assert_double_eq(base->hardware.kernel_eff_max, 0.6);
    ck_assert_double_eq(base->hardware.kernel_eff_half_tokens, 2048.0);
    g_autofree char *base_text_out = pp_scenario_to_data(base);
    ck_assert_ptr_nonnull(strstr(base_text_out, "\nflash_attention=false\n"));

    /* an uncalibrated hardware preset leaves the curve at its defaults, which to_data
     * writes; the calibrated ones bring their fit (docs/published-runs.md) */
    const char *const a100[] = {"hardware.preset=a100-sxm", NULL};
    g_autoptr(PpScenario) fitted = load_base(a100);
    ck_assert_double_eq(fitted->hardware.kernel_eff_max, 0.69);
    ck_assert_double_eq(fitted->hardware.kernel_eff_half_tokens, 0.0);
    ck_assert_double_eq(fitted->hardware.kernel_eff_half_hidden, 54.0);
    ck_assert(pp_scenario_cost_operators(fitted));
    ck_assert_int_eq(fitted->hardware.launch_ns, 75000);
    ck_assert_int_eq(fitted->hardware.sms, 108);
    ck_assert(!pp_scenario_cost_operators(base));
    g_autofree char *fitted_text = pp_scenario_to_data(fitted);
    ck_assert_ptr_nonnull(strstr(fitted_text, "\ncost_model=operators\n"));
    ck_assert_ptr_nonnull(strstr(fitted_text, "\nlaunch_us=75\n"));
    ck_assert_ptr_nonnull(strstr(fitted_text, "\nsms=108\n"));
    const char *const preset[] = {"hardware.preset=rtx-pro-6000", NULL};
    g_autoptr(PpScenario) hw = load_base(preset);
    ck_assert_double_eq(hw->hardware.kernel_eff_max, 0.6);
    ck_assert_double_eq(hw->hardware.kernel_eff_half_tokens, 2048.0);
    g_autofree char *hw_text = pp_scenario_to_data(hw);
    ck_assert_ptr_nonnull(strstr(hw_text, "\nkernel_eff_max=0.6\n"));
    ck_assert_ptr_nonnull(strstr(hw_text, "\nkernel_eff_half_tokens=2048\n"));

    /* file keys, then --set over them */
    static const char text[] = "[model]\npreset = gpt2\nflash_attention = true\n"
                               "[hardware]\npreset = a100-sxm\nkernel_eff_max = 0.45\n"
                               "kernel_eff_half_tokens = 1500.5\n"
                               "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatch_size = 1\n";
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) file = pp_scenario_load_data(text, "k.ini", NULL, &err);
    ck_assert_msg(file != NULL, "%s", err ? err->message : "");
    ck_assert(file->model.flash_attention);
    ck_assert_double_eq(file->hardware.kernel_eff_max, 0.45);
    ck_assert_double_eq(file->hardware.kernel_eff_half_tokens, 1500.5);
    g_autofree char *file_text = pp_scenario_to_data(file);
    ck_assert_ptr_nonnull(strstr(file_text, "\nflash_attention=true\n"));
    ck_assert_ptr_nonnull(strstr(file_text, "\nkernel_eff_max=0.45\n"));
    ck_assert_ptr_nonnull(strstr(file_text, "\nkernel_eff_half_tokens=1500.5\n"));
    g_autoptr(PpScenario) again = pp_scenario_load_data(file_text, "again.ini", NULL, &err);
    ck_assert_msg(again != NULL, "%s", err ? err->message : "");
    ck_assert(again->model.flash_attention);
    ck_assert_double_eq(again->hardware.kernel_eff_max, 0.45);
    ck_assert_double_eq(again->hardware.kernel_eff_half_tokens, 1500.5);

    const char *const o[] = {"model.flash_attention=false", "hardware.kernel_eff_max=1",
                             "hardware.kernel_eff_half_tokens=0", NULL};
    g_autoptr(PpScenario) over = pp_scenario_load_data(text, "k.ini", o, &err);
    ck_assert_msg(over != NULL, "%s", err ? err->message : "");
    ck_assert(!over->model.flash_attention);
    ck_assert_double_eq(over->hardware.kernel_eff_max, 1.0);
    ck_assert_double_eq(over->hardware.kernel_eff_half_tokens, 0.0);
    ck_assert_double_eq(over->hardware.peak_flops, 312e12); /* the preset still applies */
}
END_TEST

/* --- bad inputs --- */

typedef struct {
    const char *label;
    const char *text;         /* NULL: base_text */
    const char *overrides[4]; /* NULL-terminated */
    int         code;
    const char *needles[3]; /* substrings the message must contain */
} BadCase;

static const char no_model[] = "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatch_size = 1\n";
static const char bad_hw[] = "[model]\npreset = gpt2\n[hardware]\npeak_tflops = 10\n"
                             "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatch_size = 1\n";
static const char no_batch[] = "[model]\npreset = gpt2\n[pipeline]\nschedule = 1f1b\n"
                               "stages = 2\n";

static const BadCase bad_cases[] = {
    {"syntax", "[model\nlayers = 1\n", {NULL}, PP_SCENARIO_ERROR_PARSE, {"syntax.ini"}},
    {"key outside group", "layers = 1\n", {NULL}, PP_SCENARIO_ERROR_PARSE, {"key outside"}},
    {"unknown section",
     "[modle]\nlayers = 1\n",
     {NULL},
     PP_SCENARIO_ERROR_UNKNOWN_SECTION,
     {"[modle]", "[model], [hardware], [pipeline]"}},
    {"unknown key",
     "[model]\nlayer = 4\n",
     {NULL},
     PP_SCENARIO_ERROR_UNKNOWN_KEY,
     {"'layer'", "valid keys: preset, hf_config, layers, hidden, heads, seq_len, vocab"}},
    {"retired key",
     "[hardware]\nmoe_host_us_per_expert = 300\n",
     {NULL},
     PP_SCENARIO_ERROR_UNKNOWN_KEY,
     {"'moe_host_us_per_expert'", "retired: the MoE layer's host wait now follows from "
                                  "hardware.launch_us"}},
    {"unknown schedule",
     NULL,
     {"pipeline.schedule=1f2b"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"1f2b", "gpipe", "paci"}},
    {"unknown model preset",
     NULL,
     {"model.preset=gpt3"},
     PP_SCENARIO_ERROR_UNKNOWN_PRESET,
     {"'gpt3'", "gpt2-medium", "zb-28.3b"}},
    {"unknown hardware preset",
     NULL,
     {"hardware.preset=v100"},
     PP_SCENARIO_ERROR_UNKNOWN_PRESET,
     {"'v100'", "a100-sxm", "rtx-pro-6000"}},
    {"malformed int",
     NULL,
     {"pipeline.stages=12x"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"override 'pipeline.stages=12x'", "'12x'", "not a whole number"}},
    {"malformed int in file",
     "[model]\nlayers = 12x\n",
     {NULL},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"malformed int in file.ini", "layers", "'12x'"}},
    {"negative int",
     NULL,
     {"pipeline.microbatches=-3"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"microbatches", "'-3'", "from 1 to"}},
    {"int overflow",
     NULL,
     {"model.layers=99999999999"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"'99999999999'", "out of range", "from 1 to 1024"}},
    {"huge int",
     NULL,
     {"run.seed=99999999999999999999999"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"seed", "out of range"}},
    {"negative seed", NULL, {"run.seed=-1"}, PP_SCENARIO_ERROR_INVALID_VALUE, {"seed", "'-1'"}},
    {"malformed double",
     NULL,
     {"optimizer.lr=fast"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"lr", "'fast'", "not a number"}},
    {"double out of range",
     NULL,
     {"optimizer.beta2=1"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"beta2", "'1'", "[0, 1)"}},
    {"zero peak",
     NULL,
     {"hardware.preset=l40s", "hardware.peak_tflops=0"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"peak_tflops", "(0, 1000000000]"}},
    {"negative duration",
     NULL,
     {"costs.forward_us=-1", "costs.backward_us=1"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"forward_us", "'-1'"}},
    {"nan", NULL, {"data.val_fraction=nan"}, PP_SCENARIO_ERROR_INVALID_VALUE, {"val_fraction"}},
    {"zero timeout",
     NULL,
     {"run.comm_timeout_s=0"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"comm_timeout_s", "'0'", "(0, 604800]"}},
    {"timeout over a week",
     NULL,
     {"run.comm_timeout_s=1e6"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"comm_timeout_s", "'1e6'"}},
    {"bool",
     NULL,
     {"optimizer.error_feedback=yes"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"error_feedback", "'yes'", "true or false"}},
    {"enum",
     NULL,
     {"pipeline.mode=auto"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"mode", "'auto'", "static, dynamic"}},
    {"partition enum",
     NULL,
     {"pipeline.partition=auto"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"partition", "'auto'", "balanced, even"}},
    {"optimizer enum",
     NULL,
     {"optimizer.name=sgd"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"'sgd'", "adamw, muon"}},
    {"empty list element",
     NULL,
     {"run.layers_per_stage=2,,2"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"layers_per_stage", "'2,,2'", "empty"}},
    {"precision enum",
     NULL,
     {"run.precision=fp16"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[run] precision = 'fp16'", "fp32, bf16"}},
    {"negative device id",
     NULL,
     {"run.devices=0,-1"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[run] devices = '0,-1'", "from 0 to 1023"}},
    {"device id out of range",
     NULL,
     {"run.devices=0,1024"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[run] devices = '0,1024'", "from 0 to 1023"}},
    {"devices per stage",
     NULL,
     {"run.devices=0,0,0"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"[run] devices has 3 entries", "[pipeline] stages = 4", "one device id per stage"}},
    {"bad list element",
     NULL,
     {"run.layers_per_stage=2,x,2,2"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"layers_per_stage", "'2,x,2,2'"}},
    {"override without =",
     NULL,
     {"pipeline.stages"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"override 'pipeline.stages'", "section.key=value"}},
    {"override without section",
     NULL,
     {"stages=4"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"override 'stages=4'"}},
    {"override empty key",
     NULL,
     {"pipeline.=4"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"override 'pipeline.=4'"}},
    {"override unknown section",
     NULL,
     {"pipe.stages=4"},
     PP_SCENARIO_ERROR_UNKNOWN_SECTION,
     {"override 'pipe.stages=4'", "[pipe]"}},
    {"override retired key",
     NULL,
     {"hardware.moe_host_us_per_expert=300"},
     PP_SCENARIO_ERROR_UNKNOWN_KEY,
     {"override 'hardware.moe_host_us_per_expert=300'", "retired:", "remove the key"}},
    {"override unknown key",
     NULL,
     {"pipeline.stage=4"},
     PP_SCENARIO_ERROR_UNKNOWN_KEY,
     {"override 'pipeline.stage=4'", "valid keys: schedule, stages, chunks"}},
    {"missing model",
     no_model,
     {NULL},
     PP_SCENARIO_ERROR_MISSING_KEY,
     {"missing key [model] layers", "preset", "gpt2-medium"}},
    {"missing hardware key",
     bad_hw,
     {NULL},
     PP_SCENARIO_ERROR_MISSING_KEY,
     {"missing key [hardware] memory_gib", "a100-sxm"}},
    {"missing cost",
     NULL,
     {"costs.forward_us=1"},
     PP_SCENARIO_ERROR_MISSING_KEY,
     {"missing key [costs] backward_us"}},
    {"missing schedule",
     "[model]\npreset = gpt2\n[pipeline]\nstages = 2\n",
     {NULL},
     PP_SCENARIO_ERROR_MISSING_KEY,
     {"[pipeline] schedule"}},
    {"missing batch",
     no_batch,
     {NULL},
     PP_SCENARIO_ERROR_MISSING_KEY,
     {"global_batch", "microbatch_size"}},
    {"flush batch",
     NULL,
     {"training.global_batch=20"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"global_batch = 20", "microbatch_size = 2", "microbatches = 8"}},
    {"paci batch",
     NULL,
     {"pipeline.schedule=paci", "pipeline.accumulation=4", "training.global_batch=16"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"global_batch = 16", "accumulation = 4", "set global_batch = 8"}},
    {"pipedream batch",
     NULL,
     {"pipeline.schedule=pipedream", "training.global_batch=16"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"global_batch = 16", "microbatch_size = 2", "pipedream"}},
    {"indivisible batch",
     no_batch,
     {"pipeline.microbatches=3", "training.global_batch=10"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"global_batch = 10", "microbatches = 3"}},
    {"async accumulation",
     NULL,
     {"pipeline.schedule=async-1f1b", "pipeline.accumulation=4"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"accumulation = 4", "async-1f1b"}},
    {"interleaved microbatches",
     NULL,
     {"pipeline.schedule=interleaved", "pipeline.microbatches=6", "pipeline.chunks=2"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"microbatches = 6", "stages = 4"}},
    {"chunks without interleaved",
     NULL,
     {"pipeline.chunks=2"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"chunks = 2", "interleaved", "1..1"}},
    {"chunks exceed layers",
     NULL,
     {"pipeline.schedule=interleaved", "pipeline.chunks=3"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"stages = 4", "chunks = 3", "layers = 8"}},
    {"stages exceed layers",
     NULL,
     {"pipeline.stages=9"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"stages = 9", "layers = 8"}},
    {"heads",
     NULL,
     {"model.heads=5"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"hidden = 64", "heads = 5"}},
    {"kv_heads not dividing heads",
     NULL,
     {"model.kv_heads=3"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"kv_heads = 3", "heads = 4", "1..4"}},
    {"kv_heads above heads",
     NULL,
     {"model.kv_heads=8"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"kv_heads = 8", "heads = 4"}},
    {"kv_heads out of range",
     NULL,
     {"model.kv_heads=0"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] kv_heads = '0'", "from 1 to 16777216"}},
    {"ffn unknown",
     NULL,
     {"model.ffn=relu"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] ffn = 'relu'", "gelu, swiglu"}},
    {"ffn_hidden out of range",
     NULL,
     {"model.ffn_hidden=67108865"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] ffn_hidden = '67108865'", "from 1 to 67108864"}},
    {"head_dim out of range",
     NULL,
     {"model.head_dim=0"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] head_dim = '0'", "from 1 to 16777216"}},
    {"precision unknown",
     NULL,
     {"model.precision=fp64"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] precision = 'fp64'", "bf16, fp8, fp16"}},
    {"grad_bytes zero",
     NULL,
     {"parallel.grad_bytes=0"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[parallel] grad_bytes = '0'", "from 1 to 8"}},
    {"grad_bytes not a whole number",
     NULL,
     {"parallel.grad_bytes=fp32"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[parallel] grad_bytes = 'fp32'"}},
    {"attention_flops unknown",
     NULL,
     {"model.attention_flops=half"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] attention_flops = 'half'", "full, causal"}},
    {"fp8 on a preset without an fp8 rate",
     NULL,
     {"hardware.preset=a100-sxm", "model.precision=fp8"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"precision = fp8", "preset = a100-sxm", "peak_fp8_tflops"}},
    {"fp8 rate negative",
     NULL,
     {"hardware.preset=h100-sxm", "hardware.peak_fp8_tflops=-1"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] peak_fp8_tflops = '-1'", "[0, 1000000000]"}},
    {"tensor not dividing kv_heads",
     NULL,
     {"model.heads=8", "model.kv_heads=2", "parallel.tensor=4"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"tensor = 4", "kv_heads = 2", "ffn_hidden = 256"}},
    {"custom without order",
     NULL,
     {"pipeline.schedule=custom"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"custom", "order_file"}},
    {"custom missing order",
     NULL,
     {"pipeline.schedule=custom", "pipeline.order_file=/nonexistent/order.csv"},
     PP_SCENARIO_ERROR_NOT_FOUND,
     {"order_file", "/nonexistent/order.csv"}},
    {"devices",
     NULL,
     {"hardware.preset=a100-sxm", "hardware.devices=2"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"devices = 2", "stages = 4"}},
    {"layers_per_stage count",
     NULL,
     {"run.layers_per_stage=4,4"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"2 entries", "stages = 4", "needs 4"}},
    {"layers_per_stage sum",
     NULL,
     {"run.layers_per_stage=1,2,2,2"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"sums to 7", "layers = 8"}},
    {"warmup",
     NULL,
     {"optimizer.warmup_steps=10"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"warmup_steps = 10", "steps = 10", "at most 9"}},
    {"min_lr",
     NULL,
     {"optimizer.min_lr=0.01"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"min_lr = 0.01", "lr = 0.0006"}},
    {"dynamic",
     NULL,
     {"pipeline.mode=dynamic"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"mode = dynamic", "schedule = 1f1b", "async-1f1b, paci"}},
    {"flash attention not a boolean",
     NULL,
     {"model.flash_attention=yes"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] flash_attention = 'yes'", "not a boolean", "true or false"}},
    {"kernel_eff_max zero",
     NULL,
     {"hardware.preset=h100-sxm", "hardware.kernel_eff_max=0"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] kernel_eff_max = '0'", "out of range", "(0, 1]"}},
    {"kernel_eff_max above one",
     NULL,
     {"hardware.preset=h100-sxm", "hardware.kernel_eff_max=1.5"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] kernel_eff_max = '1.5'", "out of range", "(0, 1]"}},
    {"kernel_eff_max not a number",
     NULL,
     {"hardware.preset=h100-sxm", "hardware.kernel_eff_max=60%"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] kernel_eff_max = '60%'", "not a number"}},
    {"kernel_eff_half_tokens negative",
     NULL,
     {"hardware.preset=h100-sxm", "hardware.kernel_eff_half_tokens=-1"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] kernel_eff_half_tokens = '-1'", "negative", "[0, 281474976710656]"}},
    {"per-stage costs, wrong count",
     NULL,
     {"costs.forward_us=1,2,3", "costs.backward_us=2"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"[costs] forward_us has 3 values", "[pipeline] stages = 4", "one per stage"}},
    {"per-stage costs, bad element",
     NULL,
     {"costs.forward_us=1,x,3,4", "costs.backward_us=2"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[costs] forward_us = '1,x,3,4'", "not a number", "one per stage"}},
    {"per-stage costs, negative",
     NULL,
     {"costs.forward_us=1", "costs.backward_us=2", "costs.fused_backward_us=1,2,-3,4"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"fused_backward_us = '1,2,-3,4'", "out of range"}},
    {"per-stage costs, empty element",
     NULL,
     {"costs.forward_us=1,,3,4", "costs.backward_us=2"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"empty list element"}},
    /* Ranges from what the arithmetic holds (issue 6): each key alone, one past its end. */
    {"layers past the partition's limit",
     NULL,
     {"model.layers=1025"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] layers = '1025'", "from 1 to 1024"}},
    {"hidden past 2^24",
     NULL,
     {"model.hidden=16777217"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[model] hidden = '16777217'", "from 1 to 16777216"}},
    {"stages past the generators' limit",
     NULL,
     {"pipeline.stages=4097"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[pipeline] stages = '4097'", "from 1 to 4096"}},
    {"steps past the schedule size",
     NULL,
     {"training.steps=16777217"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[training] steps = '16777217'", "from 1 to 16777216"}},
    {"peak rate infinite once scaled",
     NULL,
     {"hardware.preset=l40s", "hardware.peak_tflops=1e300"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[hardware] peak_tflops = '1e300'", "out of range"}},
    {"eps flushes to zero in fp32",
     NULL,
     {"optimizer.eps=1e-40"},
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"[optimizer] eps = '1e-40'", "[1e-37, 1e+38]"}},
    {"duplicate key",
     "[model]\npreset = gpt2\nlayers = 4\n[pipeline]\nschedule = 1f1b\nstages = 2\n"
     "microbatch_size = 1\n[model]\n  layers=6\n",
     {NULL},
     PP_SCENARIO_ERROR_PARSE,
     {"duplicate key.ini: line 9", "[model] layers is given a second time", "first on line 3"}},
    {"custom order steps",
     "[model]\npreset = gpt2\n[pipeline]\nschedule = custom\norder_file = " ORDERS_DIR
     "/1f1b-n2-m3.csv\nstages = 2\nmicrobatches = 3\nmicrobatch_size = 1\n",
     {"training.steps=4"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"[training] steps = 4", "runs 1 optimizer steps", "set steps = 1"}},
    {"custom order microbatches",
     "[model]\npreset = gpt2\n[pipeline]\nschedule = custom\norder_file = " ORDERS_DIR
     "/1f1b-n2-m3.csv\nstages = 2\nmicrobatches = 8\nmicrobatch_size = 1\n",
     {"training.steps=1"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"[pipeline] microbatches = 8", "runs 3 micro-batches in 1 steps"}},
    {"custom order stages",
     "[model]\npreset = gpt2\n[pipeline]\nschedule = custom\norder_file = " ORDERS_DIR
     "/1f1b-n2-m3.csv\nstages = 3\nmicrobatches = 3\nmicrobatch_size = 1\n",
     {"training.steps=1"},
     PP_SCENARIO_ERROR_INCONSISTENT,
     {"[pipeline] stages = 3", "has 2 stages"}},
};

/* run.devices and run.precision: parsed, kept in order (ids may repeat), written back. */
START_TEST(test_run_devices_precision) {
    const char *const sets[] = {"run.devices=0, 0,3,1", "run.precision=bf16", NULL};
    g_autoptr(PpScenario) sc = load_base(sets);
    ck_assert_int_eq(sc->run.n_devices, 4);
    const int32_t want[] = {0, 0, 3, 1};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sc->run.devices[i], want[i]);
    ck_assert_str_eq(sc->run.precision, "bf16");
    g_autofree char *text = pp_scenario_to_data(sc);
    ck_assert_ptr_nonnull(strstr(text, "devices=0,0,3,1\n"));
    ck_assert_ptr_nonnull(strstr(text, "precision=bf16\n"));
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) back = pp_scenario_load_data(text, "back.ini", NULL, &err);
    ck_assert_msg(back != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(back->run.n_devices, 4);
    ck_assert_int_eq(back->run.devices[2], 3);
    ck_assert_str_eq(back->run.precision, "bf16");
}
END_TEST

START_TEST(test_bad_input) {
    const BadCase   *c = &bad_cases[_i];
    g_autofree char *name = g_strdup_printf("%s.ini", c->label);
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc =
        pp_scenario_load_data(c->text ? c->text : base_text, name, c->overrides, &err);
    ck_assert_msg(sc == NULL, "case '%s' loaded", c->label);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(g_error_matches(err, PP_SCENARIO_ERROR, c->code),
                  "case '%s': code %d, want %d: %s", c->label, err->code, c->code, err->message);
    for (int i = 0; i < 3 && c->needles[i]; i++)
        ck_assert_msg(strstr(err->message, c->needles[i]) != NULL, "case '%s': '%s' not in: %s",
                      c->label, c->needles[i], err->message);
}
END_TEST

START_TEST(test_bad_files) {
    static const struct {
        const char *file;
        int         code;
        const char *needle;
    } cases[] = {
        {"tests/data/scenarios/no-such-file.ini", PP_SCENARIO_ERROR_NOT_FOUND, "no-such-file"},
        {"tests/data/scenarios/bad-syntax.ini", PP_SCENARIO_ERROR_PARSE, "bad-syntax.ini"},
        {"tests/data/scenarios/bad-unknown-section.ini", PP_SCENARIO_ERROR_UNKNOWN_SECTION,
         "[pipline]"},
        {"tests/data/scenarios/bad-batch.ini", PP_SCENARIO_ERROR_INCONSISTENT,
         "set global_batch = 128"},
        {"tests/data/scenarios/bad-order-missing.ini", PP_SCENARIO_ERROR_NOT_FOUND,
         "tests/data/scenarios/no-such-order.csv"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *path = g_build_filename(PP_SOURCE_ROOT, cases[i].file, NULL);
        g_autoptr(GError) err = NULL;
        g_autoptr(PpScenario) sc = pp_scenario_load(path, NULL, &err);
        ck_assert_msg(sc == NULL, "%s loaded", cases[i].file);
        ck_assert_msg(g_error_matches(err, PP_SCENARIO_ERROR, cases[i].code), "%s: code %d: %s",
                      cases[i].file, err->code, err->message);
        ck_assert_msg(strstr(err->message, cases[i].needle) != NULL, "%s: '%s' not in: %s",
                      cases[i].file, cases[i].needle, err->message);
        ck_assert_ptr_nonnull(strstr(err->message, path)); /* names the file */
    }
}
END_TEST

static Suite *scenario_suite(void) {
    Suite *s = suite_create("scenario");
    TCase *files = tcase_create("files");
    tcase_add_test(files, test_collection_parses_and_round_trips);
    tcase_add_test(files, test_default_ini);
    tcase_add_test(files, test_zb_28b_costs);
    tcase_add_test(files, test_zb_smaller_settings);
    tcase_add_test(files, test_paci_paper_files);
    tcase_add_test(files, test_train_tiny);
    tcase_add_test(files, test_custom_order_relative);
    tcase_add_test(files, test_minimal_file);
    suite_add_tcase(s, files);

    TCase *values = tcase_create("values");
    tcase_add_test(values, test_defaults);
    tcase_add_test(values, test_per_stage_costs);
    tcase_add_test(values, test_derived_batch);
    tcase_add_test(values, test_presets);
    tcase_add_test(values, test_preset_families);
    tcase_add_test(values, test_layer_keys);
    tcase_add_test(values, test_overrides);
    tcase_add_test(values, test_with_equals_overrides);
    tcase_add_test(values, test_load_deriving);
    tcase_add_test(values, test_flash_and_kernel_eff);
    tcase_add_test(values, test_run_devices_precision);
    suite_add_tcase(s, values);

    TCase *errors = tcase_create("errors");
    tcase_add_loop_test(errors, test_bad_input, 0, (int)G_N_ELEMENTS(bad_cases));
    tcase_add_test(errors, test_bad_files);
    suite_add_tcase(s, errors);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(scenario_suite());
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
