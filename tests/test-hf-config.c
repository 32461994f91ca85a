/* SPDX-License-Identifier: MIT
 * test-hf-config.c: models from Hugging Face config.json files (common/pp-hf-config.c,
 * [model] hf_config). The files under tests/data/hf/ carry the released models' published
 * values; each shipped model preset must resolve to the same [model] keys as its config, the
 * architectures without a preset give their published shapes, scenario keys and --set
 * override the file's, and bad files give errors naming the field.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-hf-config.h"
#include "pp-scenario.h"
#include "test-util.h"

#define HF_DIR PP_SOURCE_ROOT "/tests/data/hf"

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(TestUtilTmp, test_util_tmp_clear)

/* A one-stage pipeline around the [model] section @model. Returns: (transfer full). */
static PpScenario *load_model(const char *model, const char *const *overrides, GError **error) {
    g_autofree char *text = g_strdup_printf("[model]\n%s"
                                            "[pipeline]\n"
                                            "schedule = 1f1b\n"
                                            "stages = 1\n"
                                            "microbatches = 1\n"
                                            "microbatch_size = 1\n",
                                            model);
    return pp_scenario_load_data(text, "hf.ini", overrides, error);
}

static PpScenario *load_hf(const char *file, const char *extra) {
    g_autofree char *model =
        g_strdup_printf("hf_config = %s/%s.json\n%s", HF_DIR, file, extra ? extra : "");
    g_autoptr(GError) err = NULL;
    PpScenario *sc = load_model(model, NULL, &err);
    ck_assert_msg(sc != NULL, "%s: %s", file, err ? err->message : "");
    return sc;
}

/* Every shipped model preset that comes from a released config, and that config. seq_len:
 * the preset's sequence when it is the paper's pre-training length and the config's differs
 * (the test then checks the config's), else 0. */
static const struct {
    const char *preset, *file;
    int32_t     config_seq_len;
} preset_files[] = {
    {"gpt2", "gpt2", 0},
    {"gpt2-medium", "gpt2-medium", 0},
    {"gpt2-large", "gpt2-large", 0},
    {"gpt2-xl", "gpt2-xl", 0},
    {"llama3-8b", "llama-3-8b", 0},
    {"llama3-70b", "llama-3-70b", 0},
    /* the 3.1 config extends the context to 131072 by rope_scaling; its original is 8192 */
    {"llama3-405b", "llama-3.1-405b", 0},
    {"mixtral-8x7b", "mixtral-8x7b", 0},
    {"mixtral-8x22b", "mixtral-8x22b", 0},
    /* Qwen3 pre-trained at 4096 (report §3.1); the configs give the extended 40960 */
    {"qwen3-30b-a3b", "qwen3-30b-a3b", 40960},
    {"qwen3-235b-a22b", "qwen3-235b-a22b", 40960},
    {"deepseek-v3", "deepseek-v3", 0},
    {"gpt-oss-120b", "gpt-oss-120b", 0},
};

/* The resolved [model] keys of @a and @b agree (preset and hf_config aside). */
static void check_same_model(const PpScenario *a, const PpScenario *b, const char *what) {
    int compared = 0;
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        PpScenarioKeyInfo info;
        pp_scenario_key_info(i, &info);
        if (strcmp(info.section, "model") != 0 || strcmp(info.key, "preset") == 0 ||
            strcmp(info.key, "hf_config") == 0)
            continue;
        g_autofree char *va = pp_scenario_value(a, "model", info.key);
        g_autofree char *vb = pp_scenario_value(b, "model", info.key);
        ck_assert_msg(g_strcmp0(va, vb) == 0, "%s: [model] %s: preset %s, config %s", what,
                      info.key, va, vb);
        compared++;
    }
    ck_assert_int_ge(compared, 20);
}

START_TEST(test_presets_equal_configs) {
    const char      *preset = preset_files[_i].preset;
    const char      *file = preset_files[_i].file;
    g_autofree char *model = g_strdup_printf("preset = %s\n", preset);
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) from_preset = load_model(model, NULL, &err);
    ck_assert_msg(from_preset != NULL, "%s", err ? err->message : "");
    g_autoptr(PpScenario) raw = load_hf(file, NULL);
    if (preset_files[_i].config_seq_len > 0)
        ck_assert_int_eq(raw->model.seq_len, preset_files[_i].config_seq_len);
    else
        ck_assert_int_eq(raw->model.seq_len, from_preset->model.seq_len);
    /* the config's shape at the preset's sequence */
    g_autofree char *seq = g_strdup_printf("seq_len = %d\n", from_preset->model.seq_len);
    g_autoptr(PpScenario) from_config = load_hf(file, seq);
    check_same_model(from_preset, from_config, preset);
}
END_TEST

/* Architectures without a preset: the published shapes, spot-checked. */
START_TEST(test_architectures) {
    g_autoptr(PpScenario) llama2 = load_hf("llama-2-7b", NULL);
    ck_assert_int_eq(llama2->model.layers, 32);
    ck_assert_int_eq(llama2->model.kv_heads, 32);
    ck_assert_int_eq(llama2->model.ffn_hidden, 11008);
    ck_assert_int_eq(llama2->model.seq_len, 4096);
    ck_assert_int_eq(llama2->model.vocab, 32000);
    ck_assert_str_eq(llama2->model.ffn, "swiglu");
    ck_assert_ptr_null(llama2->warnings);

    g_autoptr(PpScenario) qwen2 = load_hf("qwen2-7b", NULL);
    ck_assert_int_eq(qwen2->model.hidden, 3584);
    ck_assert_int_eq(qwen2->model.heads, 28);
    ck_assert_int_eq(qwen2->model.kv_heads, 4);
    ck_assert_int_eq(qwen2->model.head_dim, 128);
    ck_assert_int_eq(qwen2->model.vocab, 152064);
    ck_assert_ptr_null(qwen2->warnings); /* use_sliding_window = false */

    g_autoptr(PpScenario) qwen3 = load_hf("qwen3-8b", NULL);
    ck_assert_int_eq(qwen3->model.layers, 36);
    ck_assert_int_eq(qwen3->model.head_dim, 128);
    ck_assert_int_eq(qwen3->model.ffn_hidden, 12288);

    g_autoptr(PpScenario) v2 = load_hf("deepseek-v2", NULL);
    ck_assert_str_eq(v2->model.attention, "mla");
    ck_assert_int_eq(v2->model.q_lora_rank, 1536);
    ck_assert_int_eq(v2->model.experts, 160);
    ck_assert_int_eq(v2->model.experts_per_token, 6);
    ck_assert_int_eq(v2->model.shared_experts, 2);
    ck_assert_int_eq(v2->model.expert_ffn_hidden, 1536);
    ck_assert_int_eq(v2->model.dense_layers, 1);
    ck_assert_int_eq(v2->model.seq_len, 4096);

    g_autoptr(PpScenario) lite = load_hf("deepseek-v2-lite", NULL);
    ck_assert_int_eq(lite->model.q_lora_rank, 0); /* null: queries straight from hidden */
    ck_assert_int_eq(lite->model.layers, 27);
    ck_assert_int_eq(lite->model.experts, 64);
}
END_TEST

/* The attention variants pacer does not model are named, with their fields. */
START_TEST(test_warnings) {
    g_autoptr(PpScenario) mistral = load_hf("mistral-7b-v0.1", NULL);
    ck_assert_ptr_nonnull(mistral->warnings);
    ck_assert_int_eq(g_strv_length(mistral->warnings), 1);
    ck_assert_ptr_nonnull(strstr(mistral->warnings[0], "sliding_window = 4096"));
    ck_assert_ptr_nonnull(strstr(mistral->warnings[0], "mistral-7b-v0.1.json"));

    g_autoptr(PpScenario) oss = load_hf("gpt-oss-120b", NULL);
    ck_assert_int_eq(g_strv_length(oss->warnings), 1);
    ck_assert_ptr_nonnull(strstr(oss->warnings[0], "sliding_window = 128 on 18 of 36 layers"));

    g_autoptr(PpScenario) v3 = load_hf("deepseek-v3", NULL);
    ck_assert_int_eq(g_strv_length(v3->warnings), 1);
    ck_assert_ptr_nonnull(strstr(v3->warnings[0], "num_nextn_predict_layers = 1"));

    /* a variant keeps its base's warnings */
    PpScenarioDelta delta = {.microbatch_size = 2};
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) wider = pp_scenario_with(v3, &delta, &err);
    ck_assert_msg(wider != NULL, "%s", err ? err->message : "");
    ck_assert_str_eq(wider->warnings[0], v3->warnings[0]);
}
END_TEST

/* Keys in the scenario and --set override the file's; a relative path starts at the
 * scenario's folder; the effective text reloads to the same model. */
START_TEST(test_overrides_and_paths) {
    g_auto(TestUtilTmp) t = {0};
    test_util_tmp_init(&t, "pacer-hf-XXXXXX", "run.ini");
    g_autofree char *json = test_util_read_file(HF_DIR "/llama-3-8b.json", NULL);
    g_autofree char *copy = g_build_filename(t.dir, "config.json", NULL);
    ck_assert(g_file_set_contents(copy, json, -1, NULL));
    ck_assert(g_file_set_contents(t.path,
                                  "[model]\nhf_config = config.json\nseq_len = 2048\n"
                                  "[pipeline]\nschedule = 1f1b\nstages = 4\nmicrobatches = 8\n"
                                  "microbatch_size = 1\n",
                                  -1, NULL));
    const char *const sets[] = {"model.layers=16", NULL};
    g_autoptr(GError) err = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load(t.path, sets, &err);
    ck_assert_msg(sc != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(sc->model.layers, 16);
    ck_assert_int_eq(sc->model.seq_len, 2048);
    ck_assert_int_eq(sc->model.hidden, 4096);
    ck_assert_int_eq(sc->model.kv_heads, 8);
    ck_assert_int_eq(sc->model.ffn_hidden, 14336);
    ck_assert_str_eq(sc->model.hf_config, copy);

    /* --set model.hf_config replaces the file's shape; the file's own keys still win */
    const char *const other[] = {"model.hf_config=" HF_DIR "/qwen3-8b.json", NULL};
    g_autoptr(PpScenario) swapped = pp_scenario_load(t.path, other, &err);
    ck_assert_msg(swapped != NULL, "%s", err ? err->message : "");
    ck_assert_int_eq(swapped->model.layers, 36);
    ck_assert_int_eq(swapped->model.vocab, 151936);
    ck_assert_int_eq(swapped->model.seq_len, 2048);

    g_autofree char *text = pp_scenario_to_data(sc);
    g_autoptr(PpScenario) again = pp_scenario_load_data(text, "again.ini", NULL, &err);
    ck_assert_msg(again != NULL, "%s", err ? err->message : "");
    check_same_model(sc, again, "reloaded");
    ck_assert_str_eq(again->model.hf_config, copy);
}
END_TEST

/* Bad config files: each error names the file, the field and what would be valid. */
static const struct {
    const char *json; /* NULL: no file at all */
    int         code;
    const char *words[3]; /* each must appear in the message */
} bad_configs[] = {
    {NULL, PP_SCENARIO_ERROR_NOT_FOUND, {"no such regular file", NULL}},
    {"{\"architectures\": [\"LlamaForCausalLM\"", PP_SCENARIO_ERROR_PARSE, {"config.json", NULL}},
    {"[1, 2]", PP_SCENARIO_ERROR_PARSE, {"one JSON object", NULL}},
    {"{\"hidden_size\": 4096}", PP_SCENARIO_ERROR_MISSING_KEY, {"no architectures", NULL}},
    {"{\"architectures\": [\"GemmaForCausalLM\"], \"hidden_size\": 2048}",
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"architectures = \"GemmaForCausalLM\"", "LlamaForCausalLM", "lacks num_hidden_layers"}},
    {"{\"architectures\": [\"LlamaForCausalLM\"], \"num_hidden_layers\": 32, "
     "\"num_attention_heads\": 32, \"intermediate_size\": 11008, \"max_position_embeddings\": "
     "4096}",
     PP_SCENARIO_ERROR_MISSING_KEY,
     {"architectures = \"LlamaForCausalLM\"", "lacks hidden_size, vocab_size", NULL}},
    {"{\"architectures\": [\"LlamaForCausalLM\"], \"num_hidden_layers\": 32, \"hidden_size\": "
     "\"4096\"}",
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"hidden_size = \"4096\"", "whole number from 1 to", NULL}},
    {"{\"architectures\": [\"GPT2LMHeadModel\"], \"n_layer\": -12}",
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"n_layer = -12", "from 1 to 1024", NULL}},
    {"{\"architectures\": [\"MixtralForCausalLM\"], \"num_hidden_layers\": 32, \"hidden_size\": "
     "4096.5}",
     PP_SCENARIO_ERROR_INVALID_VALUE,
     {"hidden_size = 4096.5", NULL}},
};

START_TEST(test_bad_configs) {
    g_auto(TestUtilTmp) t = {0};
    test_util_tmp_init(&t, "pacer-hf-XXXXXX", "config.json");
    if (bad_configs[_i].json != NULL)
        ck_assert(g_file_set_contents(t.path, bad_configs[_i].json, -1, NULL));
    PpModelPreset shape;
    g_auto(GStrv) warnings = NULL;
    g_autoptr(GError) err = NULL;
    ck_assert(!pp_hf_config_read(t.path, &shape, &warnings, &err));
    ck_assert_msg(g_error_matches(err, PP_SCENARIO_ERROR, bad_configs[_i].code), "code %d: %s",
                  err->code, err->message);
    ck_assert_msg(g_str_has_prefix(err->message, t.path), "%s", err->message);
    for (int w = 0; w < 3 && bad_configs[_i].words[w] != NULL; w++)
        ck_assert_msg(strstr(err->message, bad_configs[_i].words[w]) != NULL, "'%s' not in: %s",
                      bad_configs[_i].words[w], err->message);

    /* the scenario's message names the key as well */
    g_autofree char *model = g_strdup_printf("hf_config = %s\n", t.path);
    g_autoptr(GError) sc_err = NULL;
    g_autoptr(PpScenario) sc = load_model(model, NULL, &sc_err);
    ck_assert_ptr_null(sc);
    ck_assert_int_eq(sc_err->code, bad_configs[_i].code);
    ck_assert_msg(strstr(sc_err->message, "hf.ini: [model] hf_config: ") != NULL, "%s",
                  sc_err->message);
}
END_TEST

/* tie_word_embeddings = true is named: pacer counts an untied head. */
START_TEST(test_tied_embeddings_warned) {
    g_auto(TestUtilTmp) t = {0};
    test_util_tmp_init(&t, "pacer-hf-XXXXXX", "config.json");
    g_autofree char *json = test_util_read_file(HF_DIR "/qwen3-8b.json", NULL);
    g_auto(GStrv) parts = g_strsplit(json, "\"tie_word_embeddings\": false", 2);
    ck_assert_int_eq(g_strv_length(parts), 2);
    g_autofree char *changed = g_strjoinv("\"tie_word_embeddings\": true", parts);
    ck_assert(g_file_set_contents(t.path, changed, -1, NULL));
    PpModelPreset shape;
    g_auto(GStrv) warnings = NULL;
    g_autoptr(GError) err = NULL;
    ck_assert_msg(pp_hf_config_read(t.path, &shape, &warnings, &err), "%s",
                  err ? err->message : "");
    ck_assert_int_eq(g_strv_length(warnings), 1);
    ck_assert_ptr_nonnull(strstr(warnings[0], "tie_word_embeddings = true"));
    ck_assert_int_eq(shape.hidden, 4096);
}
END_TEST

static Suite *hf_config_suite(void) {
    Suite *s = suite_create("hf-config");
    TCase *tc = tcase_create("configs");
    tcase_add_loop_test(tc, test_presets_equal_configs, 0, (int)G_N_ELEMENTS(preset_files));
    tcase_add_test(tc, test_architectures);
    tcase_add_test(tc, test_warnings);
    tcase_add_test(tc, test_overrides_and_paths);
    tcase_add_loop_test(tc, test_bad_configs, 0, (int)G_N_ELEMENTS(bad_configs));
    tcase_add_test(tc, test_tied_embeddings_warned);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(hf_config_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
