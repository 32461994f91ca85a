/* SPDX-License-Identifier: MIT
 * test-train-checkpoint.c: pacer-train's checkpoints end to end, the binary run as a child on
 * a tiny GPT-2 (vocabulary 50257) and a generated corpus. Kills (SIGKILL through the test hook
 * PACER_TEST_KILL_AT) at each point of a checkpoint write, then a resume: the final weights,
 * optimizer state and log rows equal an uninterrupted run's bit for bit and no temporary is
 * left. Damaged units (a flipped bit, a zeroed 64 KiB block, shifted data_offsets, a NaN
 * weight, files of another step, no manifest): resuming the run folder falls back to the
 * previous unit (and ends equal to the uninterrupted run) or, for a NaN, fails naming the
 * tensor; resuming or evaluating the damaged unit itself fails naming the file or tensor.
 */
#include <check.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-crc32c.h"
#include "test-safetensors.h"
#include "test-util.h"

#define TT_TRAIN PP_BUILD_ROOT "/exec/pacer-train"

/* Everything the runs share, made once per test case (unchecked fixture). */
static struct {
    char *root;     /* scratch folder holding all of the below */
    char *scenario; /* root/train.ini */
    char *val_text; /* root/b.txt: the validation document, also evaluated */
    char *ref;      /* root/ref: the uninterrupted run */
} tt;

/* Three steps, a unit after each, two kept; PACI with a = 2 on two stages, so versions, skip
 * counts and optimizer step counts all travel through the units. */
static const char tt_ini[] = "[model]\nlayers = 2\nhidden = 8\nheads = 2\nseq_len = 8\n"
                             "vocab = 50257\n"
                             "[pipeline]\nschedule = paci\nstages = 2\naccumulation = 2\n"
                             "microbatch_size = 1\n"
                             "[training]\nsteps = 3\n"
                             "[optimizer]\nname = adamw\nlr = 1e-3\nwarmup_steps = 1\n"
                             "[run]\neval_batches = 1\nthreads = 1\ncheckpoint_every = 1\n"
                             "keep_checkpoints = 2\n"
                             "[data]\nval_fraction = 0.5\n";

/* @n_words words of a fixed list drawn by xorshift from @seed. */
static void tt_write_text(const char *path, int n_words, uint64_t seed) {
    static const char *const words[] = {"pipeline", "stage",  "weight",  "version",
                                        "schedule", "update", "the",     "of",
                                        "a",        "bubble", "forward", "backward"};
    GString                 *text = g_string_new(NULL);
    for (int i = 0; i < n_words; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        g_string_append_printf(text, "%s%s", i ? " " : "", words[seed % G_N_ELEMENTS(words)]);
    }
    g_string_append_c(text, '\n');
    ck_assert(g_file_set_contents(path, text->str, (gssize)text->len, NULL));
    g_string_free(text, TRUE);
}

/* Runs pacer-train on the scenario into @out, resuming @resume (nullable), with
 * PACER_TEST_KILL_AT = @kill_at (nullable). Returns the wait status; @out_text, @err_text
 * (nullable) receive stdout and stderr. */
static int tt_train(const char *out, const char *resume, const char *kill_at, char **out_text,
                    char **err_text) {
    /* --quiet, as CI=true would: the unit resumed is then said on stderr */
    const char      *args[] = {tt.scenario, "--quiet", "--out", out, resume ? "--resume" : NULL,
                               resume,      NULL};
    g_autofree char *env = kill_at ? g_strconcat("PACER_TEST_KILL_AT=", kill_at, NULL) : NULL;
    const char      *env_set[] = {env, NULL};
    return test_util_spawn_status(TT_TRAIN, args, env_set, out_text, err_text);
}

/* pacer-train evaluate of @checkpoint on the validation text; the exit status. Its --json
 * output, when it succeeds, must be strict JSON. */
static int tt_evaluate(const char *checkpoint, char **out_text, char **err_text) {
    const char *args[] = {"evaluate",  "--checkpoint", checkpoint, "--text",
                          tt.val_text, "--json",       NULL};
    int         code = test_util_spawn(TT_TRAIN, args, out_text, err_text);
    if (code == 0)
        test_util_assert_json(*out_text);
    return code;
}

static void tt_setup(void) {
    tt.root = test_util_tmp_dir_new("test-train-checkpoint-XXXXXX");
    /* The GPT-2 vocabulary from the tests' cache; shards go into the scratch cache. */
    g_autofree char *cache = g_build_filename(tt.root, "cache", NULL);
    g_autofree char *data_cache = test_util_cache_dir();
    g_autofree char *vocab = g_build_filename(data_cache, "gpt2", NULL);
    g_autofree char *link = g_build_filename(cache, "gpt2", NULL);
    ck_assert_msg(g_file_test(vocab, G_FILE_TEST_IS_DIR), "no %s: run scripts/fetch-data", vocab);
    ck_assert_int_eq(g_mkdir(cache, 0755), 0);
    ck_assert_int_eq(symlink(vocab, link), 0);
    g_autofree char *train_text = g_build_filename(tt.root, "a.txt", NULL);
    tt.val_text = g_build_filename(tt.root, "b.txt", NULL);
    tt_write_text(train_text, 3000, 11);
    tt_write_text(tt.val_text, 800, 23);
    g_autofree char *ini = g_strdup_printf("%scache_dir = %s\npaths = %s,%s\n", tt_ini, cache,
                                           train_text, tt.val_text);
    tt.scenario = g_build_filename(tt.root, "train.ini", NULL);
    ck_assert(g_file_set_contents(tt.scenario, ini, -1, NULL));
    tt.ref = g_build_filename(tt.root, "ref", NULL);
    g_autofree char *err = NULL;
    int              status = tt_train(tt.ref, NULL, NULL, NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reference run: %s", err);
}

static void tt_teardown(void) {
    test_util_tmp_dir_remove(tt.root);
    g_clear_pointer(&tt.root, g_free);
    g_clear_pointer(&tt.scenario, g_free);
    g_clear_pointer(&tt.val_text, g_free);
    g_clear_pointer(&tt.ref, g_free);
}

/* @out's final state equals the reference run's: the same units, the last one's weights and
 * optimizer state byte for byte, every log row (OUT/log.csv and the unit's) but the measured
 * tokens_per_s, and nothing else in checkpoints/ (no temporary). */
static void tt_assert_equals_ref(const char *out) {
    g_autofree char *units = g_build_filename(out, "checkpoints", NULL);
    g_autofree char *ref_units = g_build_filename(tt.ref, "checkpoints", NULL);
    g_autofree char *got = test_util_list_dir(units);
    g_autofree char *want = test_util_list_dir(ref_units);
    ck_assert_str_eq(got, want);
    ck_assert_str_eq(want, "step-00000002 step-00000003");
    const char *files[] = {"model.safetensors", "state.safetensors"};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *a = g_build_filename(units, "step-00000003", files[i], NULL);
        g_autofree char *b = g_build_filename(ref_units, "step-00000003", files[i], NULL);
        gsize            len_a = 0, len_b = 0;
        g_autofree char *bytes_a = test_util_read_file(a, &len_a);
        g_autofree char *bytes_b = test_util_read_file(b, &len_b);
        ck_assert_msg(len_a == len_b && memcmp(bytes_a, bytes_b, len_a) == 0,
                      "%s differs from the uninterrupted run's", a);
    }
    for (int unit_log = 0; unit_log < 2; unit_log++) {
        g_autofree char *a = unit_log ? g_build_filename(units, "step-00000003", "log.csv", NULL)
                                      : g_build_filename(out, "log.csv", NULL);
        g_autofree char *b = g_build_filename(tt.ref, "log.csv", NULL);
        g_autofree char *text_a = test_util_read_file(a, NULL);
        g_autofree char *text_b = test_util_read_file(b, NULL);
        g_auto(GStrv) rows_a = g_strsplit(g_strchomp(text_a), "\n", -1);
        g_auto(GStrv) rows_b = g_strsplit(g_strchomp(text_b), "\n", -1);
        /* OUT/log.csv has all 3 rows; the step-3 unit's, the rows of steps 0..2 as well */
        ck_assert_uint_eq(g_strv_length(rows_a), 4);
        ck_assert_uint_eq(g_strv_length(rows_b), 4);
        for (int r = 0; r < 4; r++) {
            g_auto(GStrv) ca = g_strsplit(rows_a[r], ",", -1), cb = g_strsplit(rows_b[r], ",", -1);
            ck_assert_uint_eq(g_strv_length(ca), 8);
            for (int c = 0; c < 8; c++) {
                if (r == 0 || c != 6) /* tokens_per_s is a measurement */
                    ck_assert_msg(strcmp(ca[c], cb[c]) == 0, "%s row %d column %d: %s vs %s", a, r,
                                  c, ca[c], cb[c]);
            }
        }
    }
}

/* --- kills --- */

static const struct {
    const char *point;    /* where the write of step 2's unit is killed */
    int32_t     resumed;  /* the unit the resume continues from */
    gboolean    tmp_left; /* the kill leaves .step-00000002.tmp-PID */
} tt_kills[] = {
    {"after-model", 1, TRUE},   {"after-state", 1, TRUE},   {"before-manifest", 1, TRUE},
    {"before-rename", 1, TRUE}, {"after-rename", 2, FALSE},
};

START_TEST(test_train_killed_resumes_exactly) {
    g_autofree char *out = g_build_filename(tt.root, tt_kills[_i].point, NULL);
    g_autofree char *kill_at = g_strconcat(tt_kills[_i].point, "@2", NULL);
    g_autofree char *err = NULL;
    int              status = tt_train(out, NULL, kill_at, NULL, &err);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "not killed at %s: %s",
                  kill_at, err);

    /* What the kill left: the step-1 unit, step 2's temporary or unit, and OUT/log.csv with
     * step 0's row only (it is rewritten after a unit is in place). */
    g_autofree char *units = g_build_filename(out, "checkpoints", NULL);
    g_autofree char *left = test_util_list_dir(units);
    ck_assert_msg(g_str_has_prefix(left, tt_kills[_i].tmp_left ? ".step-00000002.tmp-"
                                                               : "step-00000001 step-00000002"),
                  "%s", left);
    g_autofree char *log_path = g_build_filename(out, "log.csv", NULL);
    g_autofree char *log = test_util_read_file(log_path, NULL);
    g_auto(GStrv) rows = g_strsplit(g_strchomp(log), "\n", -1);
    ck_assert_uint_eq(g_strv_length(rows), 2);

    g_autofree char *stdout_text = NULL, *stderr_text = NULL;
    status = tt_train(out, out, NULL, &stdout_text, &stderr_text);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "resume: %s", stderr_text);
    g_autofree char *resumed = g_strdup_printf("resuming from %s/step-%08d (step %d)", units,
                                               tt_kills[_i].resumed, tt_kills[_i].resumed);
    ck_assert_msg(strstr(stderr_text, resumed) != NULL, "no \"%s\" in: %s", resumed, stderr_text);
    g_autofree char *removed = g_strdup_printf("removed %s/.step-00000002.tmp-", units);
    ck_assert_msg((strstr(stderr_text, removed) != NULL) == tt_kills[_i].tmp_left, "%s",
                  stderr_text);
    tt_assert_equals_ref(out);
}
END_TEST

/* --- damaged units --- */

typedef enum {
    TT_FLIPPED_BIT,
    TT_ZEROED_BLOCK,
    TT_SHIFTED_OFFSETS,
    TT_NAN_WEIGHT,
    TT_STATE_OF_STEP_2,
    TT_STATE_OF_STEP_2_REMANIFESTED,
    TT_MODEL_OF_STEP_2,
    TT_NO_MANIFEST,
} TtDamage;

static const struct {
    TtDamage    kind;
    const char *needle;     /* in the error of resuming or evaluating the unit itself */
    gboolean    model_only; /* only the model file is damaged: evaluating the unit fails */
} tt_damages[] = {
    {TT_FLIPPED_BIT, "\"h.0.attn.c_attn.weight\" fails its checksum", TRUE},
    {TT_ZEROED_BLOCK, "\"lm_head.weight\" fails its checksum", TRUE},
    {TT_SHIFTED_OFFSETS, "tensor \"h.1.ln_1.bias\" starts at data byte", TRUE},
    {TT_NAN_WEIGHT,
     "\"h.0.mlp.c_fc.weight\" holds NaN at element 33 (index [1, 1] of shape (8, 32))", TRUE},
    {TT_STATE_OF_STEP_2, "state.safetensors: ", FALSE},
    {TT_STATE_OF_STEP_2_REMANIFESTED, "pacer_step=2", FALSE},
    {TT_MODEL_OF_STEP_2, "model.safetensors: ", TRUE},
    {TT_NO_MANIFEST, "is incomplete: cannot read its manifest.json", TRUE},
};

/* Records the current size and SHA-256 of every file of the unit @dir in its manifest, as a
 * writer of a consistent but wrong unit would. */
static void tt_remanifest(const char *dir) {
    g_autofree char *path = g_build_filename(dir, "manifest.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert(json_parser_load_from_file(parser, path, NULL));
    JsonObject *files =
        json_object_get_object_member(json_node_get_object(json_parser_get_root(parser)), "files");
    g_autoptr(GList) names = json_object_get_members(files);
    for (GList *l = names; l; l = l->next) {
        g_autofree char *file = g_build_filename(dir, (char *)l->data, NULL);
        gsize            len = 0;
        g_autofree char *bytes = test_util_read_file(file, &len);
        g_autofree char *sha = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (guchar *)bytes, len);
        JsonObject      *e = json_object_get_object_member(files, l->data);
        json_object_set_int_member(e, "bytes", (gint64)len);
        json_object_set_string_member(e, "sha256", sha);
    }
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, json_parser_get_root(parser));
    ck_assert(json_generator_to_file(gen, path, NULL));
}

/* Damages the unit @unit3 (step 3) as @kind says; @unit2 is step 2's. */
static void tt_damage(TtDamage kind, const char *unit3, const char *unit2) {
    g_autofree char *model = g_build_filename(unit3, "model.safetensors", NULL);
    g_autofree char *state = g_build_filename(unit3, "state.safetensors", NULL);
    TestSafetensors  st;
    gsize            len = 0;
    guint8          *bytes = NULL;
    switch (kind) {
    case TT_FLIPPED_BIT:
    case TT_ZEROED_BLOCK:
    case TT_SHIFTED_OFFSETS:
    case TT_NAN_WEIGHT:
        test_safetensors_read(&st, model);
        if (kind == TT_FLIPPED_BIT) {
            bytes = test_safetensors_tensor(&st, "h.0.attn.c_attn.weight", &len);
            bytes[len / 3] ^= 0x04;
        } else if (kind == TT_ZEROED_BLOCK) {
            bytes = test_safetensors_tensor(&st, "lm_head.weight", &len);
            ck_assert_uint_ge(len, 2 * 65536);
            memset(bytes + len / 2, 0, 65536);
        } else if (kind == TT_SHIFTED_OFFSETS) {
            test_safetensors_shift(&st, "h.1.ln_1.bias", 4);
        } else {
            /* element [1, 1] of the file's (IC, OC) = (8, 32), its checksum and the manifest
             * made to match: a NaN that was saved, not damage */
            bytes = test_safetensors_tensor(&st, "h.0.mlp.c_fc.weight", &len);
            float nan = NAN;
            memcpy(bytes + 4 * (1 * 32 + 1), &nan, 4);
            test_safetensors_fix_crc(&st, "h.0.mlp.c_fc.weight");
        }
        test_safetensors_write(&st, model);
        test_safetensors_clear(&st);
        if (kind == TT_NAN_WEIGHT)
            tt_remanifest(unit3);
        break;
    case TT_STATE_OF_STEP_2:
    case TT_STATE_OF_STEP_2_REMANIFESTED:
    case TT_MODEL_OF_STEP_2: {
        const char *name = kind == TT_MODEL_OF_STEP_2 ? "model.safetensors" : "state.safetensors";
        g_autofree char *from = g_build_filename(unit2, name, NULL);
        g_autofree char *to = g_build_filename(unit3, name, NULL);
        g_autofree char *data = test_util_read_file(from, &len);
        ck_assert(g_file_set_contents(to, data, (gssize)len, NULL));
        if (kind == TT_STATE_OF_STEP_2_REMANIFESTED)
            tt_remanifest(unit3);
        break;
    }
    case TT_NO_MANIFEST: {
        g_autofree char *manifest = g_build_filename(unit3, "manifest.json", NULL);
        ck_assert_int_eq(g_unlink(manifest), 0);
        break;
    }
    }
}

START_TEST(test_train_damaged_unit) {
    /* A copy of the uninterrupted run whose newest unit (step 3) is damaged. */
    g_autofree char *out = g_strdup_printf("%s/damaged-%d", tt.root, _i);
    const char      *cp[] = {"-a", tt.ref, out, NULL};
    ck_assert_int_eq(test_util_spawn("/bin/cp", cp, NULL, NULL), 0);
    g_autofree char *unit3 = g_build_filename(out, "checkpoints", "step-00000003", NULL);
    g_autofree char *unit2 = g_build_filename(out, "checkpoints", "step-00000002", NULL);
    tt_damage(tt_damages[_i].kind, unit3, unit2);
    gboolean nan = tt_damages[_i].kind == TT_NAN_WEIGHT;

    /* The unit itself, to resume (it is step 3 of 3: a sound one would leave nothing to
     * train) or to evaluate: refused, naming the file or the tensor. */
    g_autofree char *err = NULL, *text = NULL;
    int              status = tt_train(out, unit3, NULL, NULL, &err);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    ck_assert_msg(strstr(err, tt_damages[_i].needle) != NULL, "no \"%s\" in: %s",
                  tt_damages[_i].needle, err);
    g_clear_pointer(&err, g_free);
    int code = tt_evaluate(unit3, &text, &err);
    if (tt_damages[_i].model_only) {
        ck_assert_int_eq(code, 1);
        ck_assert_msg(strstr(err, tt_damages[_i].needle) != NULL, "evaluate: no \"%s\" in: %s",
                      tt_damages[_i].needle, err);
        ck_assert_msg(strstr(text, "loss") == NULL, "evaluate printed %s", text);
    } else {
        ck_assert_msg(code == 0, "evaluate: %s", err); /* its weights are sound */
    }
    g_clear_pointer(&err, g_free);
    g_clear_pointer(&text, g_free);

    /* The run folder: evaluation falls back to step 2 when the model file is damaged. */
    code = tt_evaluate(out, &text, &err);
    if (nan) {
        ck_assert_int_eq(code, 1);
        ck_assert_msg(strstr(err, tt_damages[_i].needle) != NULL, "%s", err);
    } else {
        ck_assert_msg(code == 0, "evaluate: %s", err);
        g_autofree char *chosen =
            g_strdup_printf("evaluating %s (step %d)", tt_damages[_i].model_only ? unit2 : unit3,
                            tt_damages[_i].model_only ? 2 : 3);
        ck_assert_msg(strstr(err, chosen) != NULL, "no \"%s\" in: %s", chosen, err);
    }
    g_clear_pointer(&err, g_free);
    g_clear_pointer(&text, g_free);

    /* Resuming the run folder: the damaged unit is skipped with the reason, step 2 resumed,
     * and the run ends equal to the uninterrupted one; a NaN stops it instead, naming the
     * tensor. */
    status = tt_train(out, out, NULL, &text, &err);
    if (nan) {
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
        ck_assert_msg(strstr(err, tt_damages[_i].needle) != NULL, "%s", err);
        return;
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "resume: %s", err);
    g_autofree char *skipped = g_strdup_printf("skipped %s: ", unit3);
    ck_assert_msg(strstr(err, skipped) && strstr(err, tt_damages[_i].needle), "%s", err);
    g_autofree char *resumed = g_strdup_printf("resuming from %s (step 2)", unit2);
    ck_assert_msg(strstr(err, resumed) != NULL, "no \"%s\" in: %s", resumed, err);
    tt_assert_equals_ref(out);
}
END_TEST

int main(void) {
    Suite       *s = suite_create("train-checkpoint");
    TCase       *tc = tcase_create("train-checkpoint");
    TestUtilData data;
    test_util_data_init(&data);
    tcase_set_timeout(tc, 120);
    /* Every run tokenises with the GPT-2 vocabulary: skipped without scripts/fetch-data (the
     * fixture is then never run). */
    if (data.have_data)
        tcase_add_unchecked_fixture(tc, tt_setup, tt_teardown);
    test_util_data_add(&data, tc, test_train_killed_resumes_exactly, 0, G_N_ELEMENTS(tt_kills));
    test_util_data_add(&data, tc, test_train_damaged_unit, 0, G_N_ELEMENTS(tt_damages));
    suite_add_tcase(s, tc);
    return test_util_data_run(&data, s);
}
