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
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-checkpoint-unit.h"
#include "exec-crc32c.h"
#include "exec-train.h"
#include "pp-scenario.h"
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

/* Runs pacer-train on the scenario into @out with the arguments @extra (nullable,
 * NULL-terminated), resuming @resume (nullable), with the environment variable @env
 * ("NAME=VALUE", nullable: a test hook). Returns the wait status; @out_text, @err_text
 * (nullable) receive stdout and stderr. */
static int tt_train_env(const char *out, const char *const *extra, const char *resume,
                        const char *env, char **out_text, char **err_text) {
    /* --quiet, as CI=true would: the unit resumed is then said on stderr */
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    const char *const base[] = {tt.scenario, "--quiet", "--out", out};
    for (size_t i = 0; i < G_N_ELEMENTS(base); i++)
        g_ptr_array_add(args, (gpointer)base[i]);
    for (const char *const *a = extra; a && *a; a++)
        g_ptr_array_add(args, (gpointer)*a);
    if (resume) {
        g_ptr_array_add(args, "--resume");
        g_ptr_array_add(args, (gpointer)resume);
    }
    g_ptr_array_add(args, NULL);
    const char *env_set[] = {env, NULL};
    return test_util_spawn_status(TT_TRAIN, (const char *const *)args->pdata, env_set, out_text,
                                  err_text);
}

/* tt_train_env() with PACER_TEST_KILL_AT = @kill_at (nullable). */
static int tt_train_with(const char *out, const char *const *extra, const char *resume,
                         const char *kill_at, char **out_text, char **err_text) {
    g_autofree char *env =
        kill_at ? g_strconcat(EXEC_CHECKPOINT_KILL_ENV "=", kill_at, NULL) : NULL;
    return tt_train_env(out, extra, resume, env, out_text, err_text);
}

static int tt_train(const char *out, const char *resume, const char *kill_at, char **out_text,
                    char **err_text) {
    return tt_train_with(out, NULL, resume, kill_at, out_text, err_text);
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

/* --- interrupts --- */

/* The data rows of the CSV file @path. */
static guint tt_csv_rows(const char *path) {
    g_autofree char *text = test_util_read_file(path, NULL);
    g_auto(GStrv) rows = g_strsplit(g_strchomp(text), "\n", -1);
    return g_strv_length(rows) - 1;
}

/* The steps (column "step") of the data rows of the CSV file @path, in a set. */
static GHashTable *tt_csv_steps(const char *path) {
    g_autofree char *text = test_util_read_file(path, NULL);
    g_auto(GStrv) rows = g_strsplit(g_strchomp(text), "\n", -1);
    g_auto(GStrv) header = g_strsplit(rows[0], ",", -1);
    int col = -1;
    for (int c = 0; header[c]; c++)
        if (strcmp(header[c], "step") == 0)
            col = c;
    ck_assert_msg(col >= 0, "%s has no step column", path);
    GHashTable *steps = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (int r = 1; rows[r]; r++) {
        g_auto(GStrv) cells = g_strsplit(rows[r], ",", -1);
        ck_assert(g_strv_length(cells) > (guint)col);
        g_hash_table_add(steps, GINT_TO_POINTER(atoi(cells[col])));
    }
    return steps;
}

/* Ctrl-C in the second step (the hook raises SIGINT in the process when step 1 has all its
 * losses: stage 0 may still run step 1's segment, or the signal lands at the boundary and
 * stops step 2's segment before its first op): the run stops with status 130 and one line
 * giving the exact command that resumes it; log.csv holds the rows of the steps done, ops.csv
 * every op of those steps' segments (one step each here: ops.csv's mb and step columns count
 * within a segment) and, when step 1's segment was stopped, its ops that ran; nothing
 * is half-written; and that command finishes the run bit for bit as the uninterrupted one. */
START_TEST(test_train_interrupted_resumes_exactly) {
    g_autofree char *out = g_build_filename(tt.root, "interrupted", NULL);
    g_autofree char *err = NULL;
    int              status = tt_train_env(out, NULL, NULL, EXEC_TRAIN_SIGINT_ENV "=1", NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT, "status %d: %s", status,
                  err);
    g_autofree char *units = g_build_filename(out, "checkpoints", NULL);
    g_autofree char *listing = test_util_list_dir(units);
    /* the newest unit: the step the resume continues from */
    const char *newest = strrchr(listing, ' ') ? strrchr(listing, ' ') + 1 : listing;
    ck_assert_msg(g_str_has_prefix(newest, "step-0000000"), "units: %s", listing);
    int saved = atoi(newest + strlen("step-"));
    ck_assert_msg(saved == 1 || saved == 2, "units: %s", listing);
    g_autofree char *hint = g_strdup_printf(
        "pacer-train: interrupted by SIGINT: log.csv holds %d of 3 steps, ops.csv every op that "
        "ran; resume from the checkpoint of step %d with: %s %s --quiet --out %s --resume %s\n",
        saved, saved, TT_TRAIN, tt.scenario, out, out);
    ck_assert_msg(strstr(err, hint) != NULL, "no \"%s\" in: %s", hint, err);
    /* one line: the stop is said once, not also as an error */
    const char *said = strstr(err, hint);
    ck_assert_msg(strstr(err, "interrupted") == said + strlen("pacer-train: ") &&
                      strstr(said + strlen(hint), "interrupted") == NULL,
                  "%s", err);

    g_autofree char *log_path = g_build_filename(out, "log.csv", NULL);
    g_autofree char *ops_path = g_build_filename(out, "ops.csv", NULL);
    g_autoptr(GHashTable) logged = tt_csv_steps(log_path);
    ck_assert_uint_eq(g_hash_table_size(logged), (guint)saved);
    for (int k = 0; k < saved; k++)
        ck_assert(g_hash_table_contains(logged, GINT_TO_POINTER(k)));
    g_autofree char *ref_ops = g_build_filename(tt.ref, "ops.csv", NULL);
    guint            per_segment = tt_csv_rows(ref_ops) / 3, kept = tt_csv_rows(ops_path);
    ck_assert_uint_gt(per_segment, 0);
    if (saved == 2)
        ck_assert_uint_eq(kept, 2 * per_segment);
    else /* the first segment whole, and step 1's stopped segment's ops that ran (all of
          * them when the signal came after its last op, before its end was booked) */
        ck_assert_msg(kept > per_segment && kept <= 2 * per_segment, "%u ops, %u a segment", kept,
                      per_segment);
    /* nothing half-written: no temporary file or unit left */
    g_autofree char *top = test_util_list_dir(out);
    ck_assert_str_eq(top, "checkpoints log.csv memory.csv ops.csv pacer.lock scenario.ini");
    ck_assert_msg(strstr(listing, ".tmp") == NULL, "%s", listing);

    /* The command the line gives (the same arguments tt_train passes) finishes the run. */
    g_clear_pointer(&err, g_free);
    status = tt_train(out, out, NULL, NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "resume: %s", err);
    tt_assert_equals_ref(out);
}
END_TEST

/* --- evaluate --- */

/* evaluate without --text takes the run's validation split, the windows training validates
 * on: its loss equals the log's last val_loss (another code path: the whole-model CPU slice,
 * so within float rounding), from the run folder, a unit, or the unit's model file. Outside a
 * run folder it asks for --text naming where it looked. */
START_TEST(test_train_evaluate_val_split) {
    g_autofree char *log_path = g_build_filename(tt.ref, "log.csv", NULL);
    g_autofree char *log = test_util_read_file(log_path, NULL);
    g_auto(GStrv) rows = g_strsplit(g_strchomp(log), "\n", -1);
    g_auto(GStrv) last = g_strsplit(rows[g_strv_length(rows) - 1], ",", -1);
    double val_loss = g_ascii_strtod(last[3], NULL); /* step,tokens,train_loss,val_loss */
    ck_assert_msg(val_loss > 0, "no val_loss in %s", rows[g_strv_length(rows) - 1]);
    g_autofree char *unit = g_build_filename(tt.ref, "checkpoints", "step-00000003", NULL);
    g_autofree char *model = g_build_filename(unit, "model.safetensors", NULL);
    const char      *checkpoints[] = {tt.ref, unit, model};
    for (size_t i = 0; i < G_N_ELEMENTS(checkpoints); i++) {
        const char      *args[] = {"evaluate", "--checkpoint", checkpoints[i], "--json", NULL};
        g_autofree char *out = NULL, *err = NULL;
        int              code = test_util_spawn(TT_TRAIN, args, &out, &err);
        ck_assert_msg(code == 0, "evaluate %s: %s", checkpoints[i], err);
        test_util_assert_json(out);
        ck_assert_msg(strstr(err, "the validation split of ") != NULL &&
                          strstr(err, "the first 1 windows of 8 tokens") != NULL,
                      "%s", err);
        g_autoptr(JsonParser) parser = json_parser_new();
        ck_assert(json_parser_load_from_data(parser, out, -1, NULL));
        JsonObject *obj = json_node_get_object(json_parser_get_root(parser));
        ck_assert_int_eq(json_object_get_int_member(obj, "tokens"), 8);
        double loss = json_object_get_double_member(obj, "loss");
        ck_assert_msg(fabs(loss - val_loss) < 2e-5, "%s: evaluate %.9f, training's %.6f",
                      checkpoints[i], loss, val_loss);
    }
    /* a model file outside a run folder */
    g_autofree char *alone = g_build_filename(tt.root, "alone.safetensors", NULL);
    const char      *cp[] = {model, alone, NULL};
    ck_assert_int_eq(test_util_spawn("/bin/cp", cp, NULL, NULL), 0);
    const char      *args[] = {"evaluate", "--checkpoint", alone, NULL};
    g_autofree char *err = NULL;
    ck_assert_int_eq(test_util_spawn(TT_TRAIN, args, NULL, &err), 1);
    g_autofree char *said = g_strdup_printf(
        "--checkpoint %s: no scenario.ini of a pacer-train run at %s/scenario.ini or ", alone,
        alone);
    ck_assert_msg(strstr(err, said) != NULL && strstr(err, "give --text FILE") != NULL,
                  "no \"%s\" in: %s", said, err);
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

/* --- the run's identity --- */

/* A copy of the reference run in @name under the scratch folder. Returns: (transfer full). */
static char *tt_copy_ref(const char *name) {
    g_autofree char *out = g_build_filename(tt.root, name, NULL);
    const char      *cp[] = {"-a", tt.ref, out, NULL};
    ck_assert_int_eq(test_util_spawn("/bin/cp", cp, NULL, NULL), 0);
    return g_steal_pointer(&out);
}

/* Sets @key to @value in the identity the manifest of @unit records, or removes the whole
 * identity (@key NULL), as a unit of another run or of an earlier pacer-train would have it.
 * The manifest's own bytes are not checked against anything. */
static void tt_set_identity(const char *unit, const char *key, const char *value) {
    g_autofree char *path = g_build_filename(unit, "manifest.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert(json_parser_load_from_file(parser, path, NULL));
    JsonObject *root = json_node_get_object(json_parser_get_root(parser));
    ck_assert(json_object_has_member(root, "identity"));
    if (key == NULL)
        json_object_remove_member(root, "identity");
    else
        json_object_set_string_member(json_object_get_object_member(root, "identity"), key, value);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, json_parser_get_root(parser));
    ck_assert(json_generator_to_file(gen, path, NULL));
}

/* Resumes of the reference run's step-3 unit (or of a unit @written by other keys) with
 * other keys, training.steps = 4 so that a step is left: a key of the identity that differs
 * is refused naming it and both values, and nothing in the folder changes; the keys that may
 * change are accepted. */
static const struct {
    const char *written[3]; /* the sets of the run that writes the unit; {NULL}: the reference */
    const char *forged[2];  /* key and value written into the unit's identity, or {NULL} */
    const char *resumed[4]; /* the sets of the resume, besides training.steps=4 */
    const char *needle;     /* in the refusal; NULL: accepted */
} tt_identities[] = {
    {{NULL}, {NULL}, {"model.heads=4", NULL}, "model.heads = 2 in the checkpoint, 4 in this run"},
    {{NULL},
     {NULL},
     {"optimizer.beta2=0.99", NULL},
     "optimizer.beta2 = 0.95 in the checkpoint, 0.99 in this run"},
    {{NULL},
     {NULL},
     {"optimizer.name=muon", NULL},
     "optimizer.name = adamw in the checkpoint, muon in this run"},
    {{NULL}, {NULL}, {"run.seed=7", NULL}, "run.seed = 1337 in the checkpoint, 7 in this run"},
    {{"model.layers=3", "run.layers_per_stage=2,1", NULL},
     {NULL},
     {"model.layers=3", "run.layers_per_stage=1,2", NULL},
     "run.layers_per_stage = 2,1 in the checkpoint, 1,2 in this run"},
    /* a GPU unit in bf16 (the CPU computes in fp32 only): the same files, another identity */
    {{NULL},
     {"run.precision", "bf16"},
     {NULL},
     "run.precision = bf16 in the checkpoint, fp32 in this run"},
    {{NULL},
     {NULL},
     {"optimizer.lr=2e-3", "optimizer.eps=1e-6", "run.keep_checkpoints=0", NULL},
     NULL},
};

START_TEST(test_train_resume_identity) {
    g_autofree char *name = g_strdup_printf("identity-%d", _i);
    g_autofree char *out = NULL;
    if (tt_identities[_i].written[0] == NULL) {
        out = tt_copy_ref(name);
    } else {
        out = g_build_filename(tt.root, name, NULL);
        g_autoptr(GPtrArray) args = g_ptr_array_new();
        for (const char *const *w = tt_identities[_i].written; *w; w++) {
            g_ptr_array_add(args, "--set");
            g_ptr_array_add(args, (gpointer)*w);
        }
        g_ptr_array_add(args, NULL);
        g_autofree char *err = NULL;
        int status = tt_train_with(out, (const char *const *)args->pdata, NULL, NULL, NULL, &err);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
    }
    g_autofree char *unit3 = g_build_filename(out, "checkpoints", "step-00000003", NULL);
    if (tt_identities[_i].forged[0])
        tt_set_identity(unit3, tt_identities[_i].forged[0], tt_identities[_i].forged[1]);
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    g_ptr_array_add(args, "--set");
    g_ptr_array_add(args, "training.steps=4");
    for (const char *const *r = tt_identities[_i].resumed; *r; r++) {
        g_ptr_array_add(args, "--set");
        g_ptr_array_add(args, (gpointer)*r);
    }
    g_ptr_array_add(args, NULL);
    g_autofree char *before = test_util_snapshot(out);
    g_autofree char *err = NULL;
    int status = tt_train_with(out, (const char *const *)args->pdata, out, NULL, NULL, &err);
    ck_assert(WIFEXITED(status));
    if (tt_identities[_i].needle == NULL) {
        ck_assert_msg(WEXITSTATUS(status) == 0, "%s", err);
        g_autofree char *resumed = g_strdup_printf("resuming from %s (step 3)", unit3);
        ck_assert_msg(strstr(err, resumed) != NULL, "no \"%s\" in: %s", resumed, err);
        g_autofree char *log_path = g_build_filename(out, "log.csv", NULL);
        g_autofree char *log = test_util_read_file(log_path, NULL);
        g_auto(GStrv) rows = g_strsplit(g_strchomp(log), "\n", -1);
        ck_assert_uint_eq(g_strv_length(rows), 5);
        return;
    }
    ck_assert_int_eq(WEXITSTATUS(status), 1);
    g_autofree char *named = g_strdup_printf("%s: %s", unit3, tt_identities[_i].needle);
    ck_assert_msg(strstr(err, named) != NULL, "no \"%s\" in: %s", named, err);
    g_autofree char *after = test_util_snapshot(out);
    ck_assert_str_eq(after, before);
}
END_TEST

/* The keys that may change on resume, as docs/checkpoints.md lists them ("section.*": the whole
 * section). */
static const char *const tt_may_change[] = {
    "model.preset",
    "model.hf_config",
    "model.recompute",
    "model.recompute_method",
    "model.recompute_num_layers",
    "model.recompute_modules",
    "model.swiglu_fusion",
    "model.tie_embeddings",
    "model.precision",
    "model.attention_flops",
    "model.attention",
    "model.q_lora_rank",
    "model.kv_lora_rank",
    "model.qk_nope_head_dim",
    "model.qk_rope_head_dim",
    "model.v_head_dim",
    "model.experts",
    "model.experts_per_token",
    "model.shared_experts",
    "model.expert_ffn_hidden",
    "model.dense_layers",
    "hardware.*",
    "parallel.*",
    "costs.*",
    "data.*",
    "pipeline.mode",
    "pipeline.partition",
    "training.steps",
    "optimizer.lr",
    "optimizer.min_lr",
    "optimizer.warmup_steps",
    "optimizer.weight_decay",
    "optimizer.eps",
    "optimizer.muon_lr",
    "optimizer.ns_steps",
    "optimizer.grad_clip",
    "run.eval_every",
    "run.eval_batches",
    "run.checkpoint_every",
    "run.keep_checkpoints",
    "run.threads",
    "run.speed_reference",
    "run.backend",
    "run.log_every",
    "run.comm_timeout_s",
    "run.devices",
};

/* Whether @list (NULL-terminated or of @n entries) names @section.@key. */
static gboolean tt_names_key(const char *const *list, size_t n, const char *section,
                             const char *key) {
    g_autofree char *name = g_strdup_printf("%s.%s", section, key);
    g_autofree char *all = g_strdup_printf("%s.*", section);
    for (size_t i = 0; i < n && list[i]; i++) {
        if (strcmp(list[i], name) == 0 || strcmp(list[i], all) == 0)
            return TRUE;
    }
    return FALSE;
}

/* Every scenario key is either in the identity or may change on resume, never both: a new key
 * fails here until someone decides which (and says so in docs/checkpoints.md). */
START_TEST(test_train_identity_covers_every_key) {
    const char *const *identity = exec_train_identity_keys();
    size_t             n_identity = 0;
    while (identity[n_identity])
        n_identity++;
    ck_assert_uint_eq(n_identity, 26);
    for (size_t i = 0; i < pp_scenario_n_keys(); i++) {
        PpScenarioKeyInfo info;
        pp_scenario_key_info(i, &info);
        gboolean in = tt_names_key(identity, n_identity, info.section, info.key);
        gboolean out =
            tt_names_key(tt_may_change, G_N_ELEMENTS(tt_may_change), info.section, info.key);
        ck_assert_msg(in != out, "%s.%s: %s", info.section, info.key,
                      in ? "both in the identity and free to change" : "classified nowhere");
    }
}
END_TEST

/* A resume with another parallel.data changes the batch keys it derives (microbatches or
 * accumulation, or the global batch): the refusal names parallel.data, the key the user
 * changed, with both replica counts, by each schedule's batch rule; with the same replicas it
 * names the batch key that differs. */
START_TEST(test_train_identity_names_data) {
    static const struct {
        const char *saved[10], *now[10];
        int32_t     data;
        const char *needle;
    } cases[] = {
        {{"pipeline.schedule", "paci", "pipeline.accumulation", "2", "pipeline.microbatch_size",
          "1", "training.global_batch", "2", NULL},
         {"pipeline.schedule", "paci", "pipeline.accumulation", "1", "pipeline.microbatch_size",
          "1", "training.global_batch", "2", NULL},
         2,
         "u: parallel.data = 1 in the checkpoint (its training.global_batch over microbatch_size "
         "and the step's micro-batches), 2 in this run"},
        {{"pipeline.schedule", "1f1b", "pipeline.microbatches", "4", "pipeline.microbatch_size",
          "2", "training.global_batch", "16", NULL},
         {"pipeline.schedule", "1f1b", "pipeline.microbatches", "4", "pipeline.microbatch_size",
          "2", "training.global_batch", "8", NULL},
         1,
         "u: parallel.data = 2 in the checkpoint"},
        {{"pipeline.schedule", "1f1b", "pipeline.microbatches", "4", "pipeline.microbatch_size",
          "2", "training.global_batch", "8", NULL},
         {"pipeline.schedule", "1f1b", "pipeline.microbatches", "8", "pipeline.microbatch_size",
          "2", "training.global_batch", "16", NULL},
         1,
         "u: pipeline.microbatches = 4 in the checkpoint, 8 in this run"},
    };
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        g_autoptr(GHashTable) saved = g_hash_table_new(g_str_hash, g_str_equal);
        for (const char *const *p = cases[c].saved; *p; p += 2)
            g_hash_table_insert(saved, (gpointer)p[0], (gpointer)p[1]);
        g_autoptr(GError) error = NULL;
        ck_assert(!exec_train_identity_check(cases[c].now, cases[c].data, saved, "u", &error));
        ck_assert_msg(g_str_has_prefix(error->message, cases[c].needle), "%s", error->message);
    }
}
END_TEST

/* Data parallelism: over D replicas of m micro-batches per step, each replica's run of
 * micro-batches maps one to one onto step k's global batch, k D m .. (k + 1) D m - 1, replica
 * d reading the d-th run of m; with one replica the positions are the run's own. */
START_TEST(test_train_replica_batches) {
    const int32_t shapes[][2] = {{1, 3}, {2, 1}, {2, 4}, {3, 2}}; /* D, m */
    const int32_t steps = 5;
    for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
        int32_t              D = shapes[i][0], m = shapes[i][1];
        g_autofree gboolean *seen = g_new0(gboolean, (size_t)steps * D * m);
        for (int32_t d = 0; d < D; d++) {
            for (int64_t mb = 0; mb < (int64_t)steps * m; mb++) {
                int64_t g = exec_train_global_mb(mb, D, d, m);
                ck_assert_int_eq(g / ((int64_t)D * m), mb / m); /* the same step */
                ck_assert_int_eq(g % ((int64_t)D * m) / m, d);  /* the replica's run */
                ck_assert(!seen[g]);
                seen[g] = TRUE;
                if (D == 1)
                    ck_assert_int_eq(g, mb);
            }
        }
        for (int64_t g = 0; g < (int64_t)steps * D * m; g++)
            ck_assert(seen[g]);
    }
}
END_TEST

/* A unit written before manifests recorded the identity: resumed when its run summary fits
 * (saying what could not be checked), refused by the summary otherwise. */
START_TEST(test_train_resume_legacy_unit) {
    g_autofree char *out = tt_copy_ref("legacy");
    g_autofree char *unit3 = g_build_filename(out, "checkpoints", "step-00000003", NULL);
    tt_set_identity(unit3, NULL, NULL);
    const char *const seed[] = {"--set", "training.steps=4", "--set", "run.seed=7", NULL};
    g_autofree char  *err = NULL;
    int               status = tt_train_with(out, seed, out, NULL, NULL, &err);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    ck_assert_msg(strstr(err, "(resume needs the same schedule, layout, partition and seed)") &&
                      strstr(err, "seed=1337\"; this scenario is \"paci stages=2"),
                  "%s", err);
    g_clear_pointer(&err, g_free);
    const char *const more[] = {"--set", "training.steps=4", NULL};
    status = tt_train_with(out, more, out, NULL, NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
    g_autofree char *note = g_strdup_printf("%s records no identity (an earlier pacer-train wrote "
                                            "it)",
                                            unit3);
    ck_assert_msg(strstr(err, note) != NULL, "no \"%s\" in: %s", note, err);
}
END_TEST

/* --- the output folder --- */

/* A fresh run (no --resume) into a folder that holds a run is refused, naming what is there,
 * --resume and --overwrite, and changes nothing; so is --overwrite with a --resume of that
 * folder (it would remove the unit it continues from). */
START_TEST(test_train_fresh_run_refused) {
    g_autofree char  *out = tt_copy_ref("fresh");
    g_autofree char  *before = test_util_snapshot(out);
    const char *const fewer[] = {"--set", "training.steps=2", NULL};
    g_autofree char  *err = NULL;
    int               status = tt_train_with(out, fewer, NULL, NULL, NULL, &err);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    g_autofree char *refused = g_strdup_printf(
        "--out %s holds log.csv, ops.csv, scenario.ini, memory.csv, checkpoints of another run: "
        "nothing was changed. Continue that run with --resume %s, start over with --overwrite",
        out, out);
    ck_assert_msg(strstr(err, refused) != NULL, "no \"%s\" in: %s", refused, err);
    g_autofree char *after = test_util_snapshot(out);
    ck_assert_str_eq(after, before);
    g_clear_pointer(&err, g_free);
    g_clear_pointer(&after, g_free);

    const char *const both[] = {"--overwrite", "--set", "training.steps=4", NULL};
    status = tt_train_with(out, both, out, NULL, NULL, &err);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    g_autofree char *unit3 = g_build_filename(out, "checkpoints", "step-00000003", NULL);
    g_autofree char *conflict = g_strdup_printf(
        "--overwrite would remove %s, the checkpoint --resume continues from", unit3);
    ck_assert_msg(strstr(err, conflict) != NULL, "no \"%s\" in: %s", conflict, err);
    after = test_util_snapshot(out);
    ck_assert_str_eq(after, before);
}
END_TEST

/* Resuming a run that has trained all its training.steps says what to change: raise
 * training.steps with --set (naming the checkpoint's step and the current value), or start a
 * fresh run; the folder is left as it was. */
START_TEST(test_train_nothing_left) {
    g_autofree char *out = tt_copy_ref("nothing-left");
    g_autofree char *before = test_util_snapshot(out);
    g_autofree char *err = NULL;
    int              status = tt_train(out, out, NULL, NULL, &err);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    g_autofree char *said = g_strdup_printf(
        "%s: the checkpoint is at step 3 and training.steps = 3: nothing left to train. To "
        "train on, raise training.steps above 3 (e.g. add --set training.steps=6 to this "
        "command, --resume kept); for a fresh run use another --out or add --overwrite "
        "(without --resume)",
        out);
    ck_assert_msg(strstr(err, said) != NULL, "no \"%s\" in: %s", said, err);
    g_autofree char *after = test_util_snapshot(out);
    ck_assert_str_eq(after, before);
    /* and doing what it says trains on */
    const char *const more[] = {"--set", "training.steps=4", NULL};
    g_clear_pointer(&err, g_free);
    status = tt_train_with(out, more, out, NULL, NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
    g_autofree char *units = g_build_filename(out, "checkpoints", NULL);
    g_autofree char *listing = test_util_list_dir(units);
    ck_assert_str_eq(listing, "step-00000003 step-00000004");
}
END_TEST

/* --overwrite starts over: the earlier run's files and units go (said on stderr), a file of
 * another tool in the folder and in checkpoints/ stays, and the new run's units and log are
 * all that is left of pacer-train's. */
START_TEST(test_train_overwrite) {
    g_autofree char *out = tt_copy_ref("overwrite");
    g_autofree char *notes = g_build_filename(out, "notes.txt", NULL);
    g_autofree char *keep = g_build_filename(out, "checkpoints", "keep.txt", NULL);
    ck_assert(g_file_set_contents(notes, "mine\n", -1, NULL));
    ck_assert(g_file_set_contents(keep, "mine too\n", -1, NULL));
    const char *const fewer[] = {"--overwrite", "--set", "training.steps=2", NULL};
    g_autofree char  *err = NULL;
    int               status = tt_train_with(out, fewer, NULL, NULL, NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
    const char *gone[] = {"checkpoints/step-00000002",
                          "checkpoints/step-00000003",
                          "log.csv",
                          "ops.csv",
                          "scenario.ini",
                          "memory.csv"};
    for (size_t i = 0; i < G_N_ELEMENTS(gone); i++) {
        g_autofree char *said = g_strdup_printf("--overwrite: removed %s/%s\n", out, gone[i]);
        ck_assert_msg(strstr(err, said) != NULL, "no \"%s\" in: %s", said, err);
    }
    g_autofree char *units = g_build_filename(out, "checkpoints", NULL);
    g_autofree char *listing = test_util_list_dir(units);
    ck_assert_str_eq(listing, "keep.txt step-00000001 step-00000002");
    g_autofree char *top = test_util_list_dir(out);
    ck_assert_str_eq(top,
                     "checkpoints log.csv memory.csv notes.txt ops.csv pacer.lock scenario.ini");
    g_autofree char *log_path = g_build_filename(out, "log.csv", NULL);
    g_autofree char *log = test_util_read_file(log_path, NULL);
    g_auto(GStrv) rows = g_strsplit(g_strchomp(log), "\n", -1);
    ck_assert_uint_eq(g_strv_length(rows), 3);
    g_autofree char *mine = test_util_read_file(notes, NULL);
    g_autofree char *mine_too = test_util_read_file(keep, NULL);
    ck_assert_str_eq(mine, "mine\n");
    ck_assert_str_eq(mine_too, "mine too\n");
}
END_TEST

/* A folder of the user's beside the runs, with a file named like a unit's and one not. */
static char *tt_victim_new(const char *name) {
    char *victim = g_build_filename(tt.root, name, NULL);
    ck_assert_int_eq(g_mkdir(victim, 0755), 0);
    const char *files[] = {"model.safetensors", "photo.jpg"};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = g_build_filename(victim, files[i], NULL);
        ck_assert(g_file_set_contents(path, files[i], -1, NULL));
    }
    return victim;
}

/* Links in checkpoints/ named like a unit and like an interrupted temporary, pointing at a
 * folder of the user's: --overwrite, the stale-temporary cleanup and the rotation of the new
 * run all leave the links and the folder as they were, and say so; a checkpoints/ that is
 * itself a link refuses --overwrite before anything is removed. */
START_TEST(test_train_overwrite_links) {
    g_autofree char *out = tt_copy_ref("overwrite-links");
    g_autofree char *victim = tt_victim_new("victim-overwrite");
    g_autofree char *before = test_util_snapshot(victim);
    const char      *links[] = {"step-00000010", ".step-00000009.tmp-999"};
    for (size_t i = 0; i < G_N_ELEMENTS(links); i++) {
        g_autofree char *link = g_build_filename(out, "checkpoints", links[i], NULL);
        ck_assert_int_eq(symlink(victim, link), 0);
    }
    const char *const fewer[] = {"--overwrite", "--set", "training.steps=2", NULL};
    g_autofree char  *err = NULL;
    int               status = tt_train_with(out, fewer, NULL, NULL, NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
    g_autofree char *after = test_util_snapshot(victim);
    ck_assert_str_eq(after, before);
    for (size_t i = 0; i < G_N_ELEMENTS(links); i++) {
        g_autofree char *link = g_build_filename(out, "checkpoints", links[i], NULL);
        ck_assert(g_file_test(link, G_FILE_TEST_IS_SYMLINK));
        g_autofree char *said = g_strdup_printf(
            "not removed: %s: a symbolic link or not a folder, left in place", link);
        ck_assert_msg(strstr(err, said) != NULL, "no \"%s\" in: %s", said, err);
    }
    g_autofree char *units = g_build_filename(out, "checkpoints", NULL);
    g_autofree char *listing = test_util_list_dir(units);
    ck_assert_str_eq(listing, ".step-00000009.tmp-999 step-00000001 step-00000002 step-00000010");

    /* checkpoints/ itself a link to the user's folder */
    g_autofree char *out2 = tt_copy_ref("overwrite-link-units");
    g_autofree char *units2 = g_build_filename(out2, "checkpoints", NULL);
    ck_assert(test_util_tmp_dir_remove(units2));
    ck_assert_int_eq(symlink(victim, units2), 0);
    g_autofree char *top = test_util_snapshot(out2);
    g_clear_pointer(&err, g_free);
    status = tt_train_with(out2, fewer, NULL, NULL, NULL, &err);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    g_autofree char *refused =
        g_strdup_printf("--overwrite: %s is a symbolic link, not the folder pacer-train writes "
                        "there: nothing was changed",
                        units2);
    ck_assert_msg(strstr(err, refused) != NULL, "no \"%s\" in: %s", refused, err);
    g_autofree char *top_after = test_util_snapshot(out2);
    ck_assert_str_eq(top_after, top);
    g_clear_pointer(&after, g_free);
    after = test_util_snapshot(victim);
    ck_assert_str_eq(after, before);
}
END_TEST

/* --- one run per folder --- */

/* The text of @out/pacer.lock. Returns: (transfer full). */
static char *tt_lock_text(const char *out) {
    g_autofree char *path = g_build_filename(out, "pacer.lock", NULL);
    char            *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return g_strdup("");
    return text;
}

/* GSpawnChildSetupFunc: the child is killed when the test's process ends, even on a failed
 * assertion. */
static void tt_die_with_parent(gpointer user_data) {
    (void)user_data;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Two runs into one --out: while a run trains (started in the background, long enough to be
 * caught), a second one, even with --overwrite, is refused naming the first one's PID and host,
 * and the first one's lock and units stay; once the first is killed its lock file, left
 * naming it, is taken over by the next run, which says so, and a run that ends empties it. */
START_TEST(test_train_one_run_per_folder) {
    g_autofree char  *out = g_build_filename(tt.root, "locked", NULL);
    const char *const argv[] = {
        TT_TRAIN, tt.scenario, "--quiet", "--out", out, "--set", "training.steps=100000", NULL};
    GPid holder;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(g_spawn_async(NULL, (char **)argv, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL |
                                    G_SPAWN_STDERR_TO_DEV_NULL,
                                tt_die_with_parent, NULL, &holder, &error),
                  "%s", error ? error->message : "");
    g_autofree char *line = g_strdup_printf("%d %s\n", (int)holder, g_get_host_name());
    g_autofree char *unit1 = g_build_filename(out, "checkpoints", "step-00000001", NULL);
    for (int i = 0; i < 1200; i++) { /* up to 60 s for its first unit */
        g_autofree char *text = tt_lock_text(out);
        if (strcmp(text, line) == 0 && g_file_test(unit1, G_FILE_TEST_IS_DIR))
            break;
        g_usleep(50000);
    }
    g_autofree char *held = tt_lock_text(out);
    ck_assert_str_eq(held, line);

    const char *const over[] = {"--overwrite", "--set", "training.steps=2", NULL};
    g_autofree char  *err = NULL;
    int               status = tt_train_with(out, over, NULL, NULL, NULL, &err);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    g_autofree char *refused = g_strdup_printf(
        "--out %s is in use by another run, pacer-train PID %d on host %s (it holds "
        "%s/pacer.lock): nothing was changed",
        out, (int)holder, g_get_host_name(), out);
    ck_assert_msg(strstr(err, refused) != NULL, "no \"%s\" in: %s", refused, err);
    ck_assert_msg(strstr(err, "--overwrite: removed") == NULL, "%s", err);
    g_autofree char *still = tt_lock_text(out);
    ck_assert_str_eq(still, line);
    g_autofree char *log = g_build_filename(out, "log.csv", NULL);
    ck_assert(g_file_test(log, G_FILE_TEST_EXISTS));

    /* the holder dies holding it: its line stays, and the lock is taken over */
    ck_assert_int_eq(kill(holder, SIGKILL), 0);
    int wstatus = 0;
    ck_assert_int_eq(waitpid(holder, &wstatus, 0), holder);
    g_spawn_close_pid(holder);
    g_autofree char *stale = tt_lock_text(out);
    ck_assert_str_eq(stale, line);
    g_clear_pointer(&err, g_free);
    status = tt_train_with(out, over, NULL, NULL, NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
    g_autofree char *took = g_strdup_printf(
        "took over %s/pacer.lock from pacer-train PID %d on host %s, which ended without "
        "releasing it",
        out, (int)holder, g_get_host_name());
    ck_assert_msg(strstr(err, took) != NULL, "no \"%s\" in: %s", took, err);
    g_autofree char *released = tt_lock_text(out);
    ck_assert_str_eq(released, "");
}
END_TEST

/* A run killed before its first unit is in place leaves a folder with nothing to resume: a
 * fresh run into it is refused suggesting --overwrite only (no --resume, which would fail), and
 * doing what it says trains. */
START_TEST(test_train_killed_before_first_unit) {
    g_autofree char *out = g_build_filename(tt.root, "killed-early", NULL);
    g_autofree char *err = NULL;
    int              status = tt_train(out, NULL, "after-model@1", NULL, &err);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s", err);
    g_clear_pointer(&err, g_free);
    status = tt_train(out, NULL, NULL, NULL, &err);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    g_autofree char *said =
        g_strdup_printf("--out %s holds scenario.ini, memory.csv, checkpoints of another run, "
                        "which wrote no complete checkpoint unit (nothing to resume): nothing was "
                        "changed. Start over with --overwrite",
                        out);
    ck_assert_msg(strstr(err, said) != NULL, "no \"%s\" in: %s", said, err);
    ck_assert_msg(strstr(err, "--resume") == NULL, "%s", err);
    const char *const over[] = {"--overwrite", NULL};
    g_clear_pointer(&err, g_free);
    status = tt_train_with(out, over, NULL, NULL, NULL, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
}
END_TEST

/* --stop-at before any validation is due: the summary says none ran instead of a NaN loss;
 * the run's end validates and says the loss. */
START_TEST(test_train_stop_before_validation) {
    g_autofree char  *out = g_build_filename(tt.root, "stop-early", NULL);
    const char *const stop[] = {"--stop-at", "1", NULL};
    g_autofree char  *text = NULL, *err = NULL;
    int               status = tt_train_with(out, stop, NULL, NULL, &text, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
    ck_assert_msg(strstr(text, ", no validation run in this invocation, ") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "nan") == NULL, "%s", text);
    g_clear_pointer(&text, g_free);
    g_clear_pointer(&err, g_free);
    status = tt_train_with(out, NULL, out, NULL, &text, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
    ck_assert_msg(strstr(text, ", val loss ") != NULL, "%s", text);
}
END_TEST

/* Threads that cannot be created (each thread's stack, ulimit -s 2 GiB, beyond what ulimit -v
 * leaves): pacer-train says so and why, and exits 1, instead of GLib's error and SIGTRAP. */
START_TEST(test_train_no_threads) {
    g_autofree char *out = g_build_filename(tt.root, "no-threads", NULL);
    g_autofree char *cmd =
        g_strdup_printf("ulimit -s 2097152 && ulimit -v 3500000 && exec %s %s --quiet --out %s",
                        TT_TRAIN, tt.scenario, out);
    const char *const args[] = {"-c", cmd, NULL};
    g_autofree char  *text = NULL, *err = NULL;
    int               status = test_util_spawn_status("/bin/sh", args, NULL, &text, &err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, err);
    ck_assert_msg(strstr(err, "pacer-train: cannot start a thread (creating thread '") != NULL,
                  "%s", err);
    ck_assert_msg(strstr(err, "the limit on processes and threads (ulimit -u), on memory") != NULL,
                  "%s", err);
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
    test_util_data_add(&data, tc, test_train_interrupted_resumes_exactly, 0, 1);
    suite_add_tcase(s, tc);
    /* The same fixture, in cases of their own (CK_RUN_CASE=identity or out-folder). */
    TCase *identity = tcase_create("identity");
    tcase_set_timeout(identity, 120);
    if (data.have_data)
        tcase_add_unchecked_fixture(identity, tt_setup, tt_teardown);
    test_util_data_add(&data, identity, test_train_resume_identity, 0, G_N_ELEMENTS(tt_identities));
    test_util_data_add(&data, identity, test_train_resume_legacy_unit, 0, 1);
    suite_add_tcase(s, identity);
    TCase *keys = tcase_create("identity-keys");
    tcase_add_test(keys, test_train_identity_covers_every_key);
    tcase_add_test(keys, test_train_identity_names_data);
    tcase_add_test(keys, test_train_replica_batches);
    suite_add_tcase(s, keys);
    TCase *out = tcase_create("out-folder");
    tcase_set_timeout(out, 120);
    if (data.have_data)
        tcase_add_unchecked_fixture(out, tt_setup, tt_teardown);
    test_util_data_add(&data, out, test_train_fresh_run_refused, 0, 1);
    test_util_data_add(&data, out, test_train_overwrite, 0, 1);
    test_util_data_add(&data, out, test_train_overwrite_links, 0, 1);
    test_util_data_add(&data, out, test_train_one_run_per_folder, 0, 1);
    test_util_data_add(&data, out, test_train_killed_before_first_unit, 0, 1);
    test_util_data_add(&data, out, test_train_stop_before_validation, 0, 1);
#ifndef __SANITIZE_ADDRESS__
    /* not under AddressSanitizer: its shadow memory reserves terabytes of address space, which
     * the test's ulimit -v refuses before pacer-train starts */
    test_util_data_add(&data, out, test_train_no_threads, 0, 1);
#endif
    test_util_data_add(&data, out, test_train_nothing_left, 0, 1);
    test_util_data_add(&data, out, test_train_evaluate_val_split, 0, 1);
    suite_add_tcase(s, out);
    return test_util_data_run(&data, s);
}
