/* SPDX-License-Identifier: MIT
 * test-checkpoint-unit.c: checkpoint units (exec-checkpoint-unit.h) on a tiny GPT-2: the folder
 * and manifest a write leaves (sizes and SHA-256s of the files), a bitwise read back, rewriting
 * a step, each damaged manifest or file and its error, choosing the newest complete unit of a
 * run (skipping damaged ones, stopping on other errors), stale temporaries and pruning.
 */
#include <check.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec-checkpoint-unit.h"
#include "gpt2-slice.h"
#include "kern-util.h"
#include "pp-error.h"
#include "test-safetensors.h"
#include "test-util.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Gpt2Slice, gpt2_slice_free)

/* L 2, C 16, NH 2, T 8, V 61 padded to 64. */
static const Gpt2Config  tu_cfg = {2, 16, 2, 8, 61, 64};
static const char        tu_run[] = "1f1b stages=2 test";
static const char *const tu_identity[] = {"model.heads", "2", "run.seed", "1337", NULL};

/* A whole model with GPT-2 init from @seed, and an optimizer moment per tensor. */
typedef struct {
    Gpt2Slice      *slice;
    float          *moment; /* (n_params) */
    ExecTensorList *model, *state;
    GHashTable     *meta;
    char           *log;
} TuData;

static void tu_data_init(TuData *d, uint64_t seed) {
    Gpt2SliceParams p = {.model = tu_cfg,
                         .layer_end = tu_cfg.L,
                         .has_embedding = 1,
                         .has_head = 1,
                         .B = 1,
                         .n_act_slots = 1};
    d->slice = gpt2_slice_new(&p);
    gpt2_slice_init_params(d->slice, seed);
    size_t n = gpt2_slice_n_params(d->slice);
    d->moment = g_new(float, n);
    uint64_t rng = kern_rng_seed(seed + 1);
    for (size_t k = 0; k < n; k++)
        d->moment[k] = kern_rng_normal(&rng);
    d->model = exec_tensor_list_new();
    exec_tensor_list_add_slice(d->model, d->slice, gpt2_slice_params(d->slice), "");
    d->state = exec_tensor_list_new();
    exec_tensor_list_add_slice(d->state, d->slice, d->moment, "optim.m.");
    d->meta = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
    g_hash_table_insert(d->meta, "pacer_step", g_strdup_printf("%" G_GUINT64_FORMAT, seed));
    d->log = g_strdup_printf("step,x\n0,%" G_GUINT64_FORMAT "\n", seed);
}

static void tu_data_clear(TuData *d) {
    gpt2_slice_free(d->slice);
    g_free(d->moment);
    exec_tensor_list_free(d->model);
    exec_tensor_list_free(d->state);
    g_hash_table_unref(d->meta);
    g_free(d->log);
}

/* Writes the unit of @step into @units from data of seed @step. Returns: (transfer full), or
 * NULL with @error set. */
static char *tu_try_write(const char *units, int32_t step, GError **error) {
    TuData d;
    tu_data_init(&d, (uint64_t)step);
    ExecCheckpointUnitData data = {.step = step,
                                   .run = tu_run,
                                   .identity = tu_identity,
                                   .model_cfg = &tu_cfg,
                                   .model = d.model,
                                   .state = d.state,
                                   .state_metadata = d.meta,
                                   .log = d.log};
    char                  *dir = exec_checkpoint_unit_write(units, &data, error);
    tu_data_clear(&d);
    return dir;
}

/* tu_try_write(), which must succeed. Returns: (transfer full). */
static char *tu_write(const char *units, int32_t step) {
    g_autoptr(GError) error = NULL;
    char *dir = tu_try_write(units, step, &error);
    ck_assert_msg(dir != NULL, "%s", error ? error->message : "");
    return dir;
}

/* A scratch run folder: @run/checkpoints in @units. */
typedef struct {
    char *run, *units;
} TuRun;

static void tu_run_init(TuRun *r) {
    r->run = test_util_tmp_dir_new("test-checkpoint-unit-XXXXXX");
    r->units = g_build_filename(r->run, EXEC_CHECKPOINT_UNITS_DIR, NULL);
}

static void tu_run_clear(TuRun *r) {
    ck_assert(test_util_tmp_dir_remove(r->run));
    g_free(r->run);
    g_free(r->units);
}

/* The unit holds exactly its four files; the manifest records step, run, identity, and each
 * file's size and SHA-256 as found on disk; every tensor and the log read back bitwise. */
START_TEST(test_unit_round_trip) {
    TuRun r;
    tu_run_init(&r);
    g_autofree char *dir = tu_write(r.units, 7);
    g_autofree char *listing = test_util_list_dir(r.units);
    ck_assert_str_eq(listing, "step-00000007");
    g_autofree char *files = test_util_list_dir(dir);
    ck_assert_str_eq(files, "log.csv manifest.json model.safetensors state.safetensors");

    g_autofree char *manifest = g_build_filename(dir, "manifest.json", NULL);
    g_autofree char *manifest_text = test_util_read_file(manifest, NULL);
    test_util_assert_json(manifest_text);
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert(json_parser_load_from_file(parser, manifest, NULL));
    JsonObject *m = json_node_get_object(json_parser_get_root(parser));
    ck_assert_str_eq(json_object_get_string_member(m, "format"), "pacer-checkpoint");
    ck_assert_int_eq(json_object_get_int_member(m, "version"), 1);
    ck_assert_int_eq(json_object_get_int_member(m, "step"), 7);
    ck_assert_str_eq(json_object_get_string_member(m, "run"), tu_run);
    JsonObject *fm = json_object_get_object_member(m, "files");
    ck_assert_uint_eq(json_object_get_size(fm), 3);
    const char *names[] = {"model.safetensors", "state.safetensors", "log.csv"};
    for (int i = 0; i < 3; i++) {
        g_autofree char *path = g_build_filename(dir, names[i], NULL);
        gsize            len = 0;
        g_autofree char *bytes = test_util_read_file(path, &len);
        g_autofree char *sha = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (guchar *)bytes, len);
        JsonObject      *e = json_object_get_object_member(fm, names[i]);
        ck_assert_int_eq(json_object_get_int_member(e, "bytes"), (gint64)len);
        ck_assert_str_eq(json_object_get_string_member(e, "sha256"), sha);
    }

    g_autoptr(GError) error = NULL;
    g_autoptr(ExecCheckpointUnit) unit = exec_checkpoint_unit_open(dir, &error);
    ck_assert_msg(unit != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(exec_checkpoint_unit_step(unit), 7);
    ck_assert_str_eq(exec_checkpoint_unit_run(unit), tu_run);
    ck_assert_str_eq(exec_checkpoint_unit_dir(unit), dir);
    GHashTable *identity = exec_checkpoint_unit_identity(unit);
    ck_assert_ptr_nonnull(identity);
    ck_assert_uint_eq(g_hash_table_size(identity), 2);
    ck_assert_str_eq(g_hash_table_lookup(identity, "model.heads"), "2");
    ck_assert_str_eq(g_hash_table_lookup(identity, "run.seed"), "1337");
    TuData want, got;
    tu_data_init(&want, 7);
    tu_data_init(&got, 99);
    g_autoptr(GHashTable) meta = NULL;
    ck_assert(exec_checkpoint_unit_read_model(unit, &tu_cfg, got.model, &error));
    ck_assert(exec_checkpoint_unit_read_state(unit, got.state, &meta, &error));
    g_autofree char *log = exec_checkpoint_unit_read_log(unit, &error);
    size_t           n = gpt2_slice_n_params(want.slice);
    ck_assert_int_eq(
        memcmp(gpt2_slice_params(want.slice), gpt2_slice_params(got.slice), n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(want.moment, got.moment, n * sizeof(float)), 0);
    ck_assert_str_eq(g_hash_table_lookup(meta, "pacer_step"), "7");
    ck_assert_str_eq(log, want.log);
    tu_data_clear(&want);
    tu_data_clear(&got);
    tu_run_clear(&r);
}
END_TEST

/* Writing a step that exists replaces it whole (the files of the new data), leaving nothing
 * else. */
START_TEST(test_unit_rewrite) {
    TuRun r;
    tu_run_init(&r);
    g_autofree char *first = tu_write(r.units, 3);
    g_autofree char *log_path = g_build_filename(first, "log.csv", NULL);
    g_autofree char *before = test_util_read_file(log_path, NULL);
    TuData           d;
    tu_data_init(&d, 4);
    ExecCheckpointUnitData data = {.step = 3,
                                   .run = tu_run,
                                   .model_cfg = &tu_cfg,
                                   .model = d.model,
                                   .state = d.state,
                                   .state_metadata = d.meta,
                                   .log = d.log};
    g_autoptr(GError) error = NULL;
    g_autofree char *again = exec_checkpoint_unit_write(r.units, &data, &error);
    ck_assert_msg(again != NULL, "%s", error ? error->message : "");
    g_autofree char *after = test_util_read_file(log_path, NULL);
    ck_assert_str_eq(after, d.log);
    ck_assert_str_ne(after, before);
    g_autofree char *listing = test_util_list_dir(r.units);
    ck_assert_str_eq(listing, "step-00000003");
    g_autoptr(ExecCheckpointUnit) unit = exec_checkpoint_unit_open(again, &error);
    ck_assert_ptr_nonnull(unit);
    g_autofree char *log = exec_checkpoint_unit_read_log(unit, &error);
    ck_assert_msg(log != NULL, "%s", error ? error->message : "");
    tu_data_clear(&d);
    tu_run_clear(&r);
}
END_TEST

/* The writer fails cleanly: a NaN weight leaves no unit and no temporary folder. */
START_TEST(test_unit_write_nonfinite) {
    TuRun r;
    tu_run_init(&r);
    TuData d;
    tu_data_init(&d, 5);
    gpt2_slice_params(d.slice)[7] = NAN;
    ExecCheckpointUnitData data = {.step = 5,
                                   .run = tu_run,
                                   .model_cfg = &tu_cfg,
                                   .model = d.model,
                                   .state = d.state,
                                   .state_metadata = d.meta,
                                   .log = d.log};
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(exec_checkpoint_unit_write(r.units, &data, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_NONFINITE));
    g_autofree char *listing = test_util_list_dir(r.units);
    ck_assert_str_eq(listing, "");
    tu_data_clear(&d);
    tu_run_clear(&r);
}
END_TEST

/* Damage to a unit, the error of opening or reading it and a part of the message. */
typedef enum {
    TU_NO_MANIFEST,
    TU_BAD_JSON,
    TU_DEEP_JSON,
    TU_HUGE_MANIFEST,
    TU_WRONG_FORMAT,
    TU_WRONG_VERSION,
    TU_MISSING_FILE_ENTRY,
    TU_BAD_SHA,
    TU_WRONG_STEP,
    TU_BAD_IDENTITY,
    TU_FILE_MISSING,
    TU_FILE_SIZE,
    TU_LOG_CHANGED,
    TU_STATE_BIT,
    TU_MODEL_HEADER,
} TuBad;

static const struct {
    TuBad       kind;
    int         code;
    gboolean    at_open; /* exec_checkpoint_unit_open() fails; else reading all files does */
    const char *needle;
} tu_bads[] = {
    {TU_NO_MANIFEST, PP_IO_ERROR_OPEN, TRUE, "is incomplete: cannot read its manifest.json"},
    {TU_BAD_JSON, PP_IO_ERROR_CORRUPT, TRUE, "not valid JSON"},
    {TU_DEEP_JSON, PP_IO_ERROR_CORRUPT, TRUE, "a manifest is an object with format"},
    {TU_HUGE_MANIFEST, PP_IO_ERROR_CORRUPT, TRUE, "a manifest has at most 16384"},
    {TU_WRONG_FORMAT, PP_IO_ERROR_CORRUPT, TRUE, "a manifest is an object with format"},
    {TU_WRONG_VERSION, PP_IO_ERROR_CORRUPT, TRUE, "version 1"},
    {TU_MISSING_FILE_ENTRY, PP_IO_ERROR_CORRUPT, TRUE, "files must name exactly"},
    {TU_BAD_SHA, PP_IO_ERROR_CORRUPT, TRUE, "files.\"state.safetensors\" needs bytes"},
    {TU_WRONG_STEP, PP_IO_ERROR_CORRUPT, TRUE, "records step 8 but the folder is step-00000002"},
    {TU_BAD_IDENTITY, PP_IO_ERROR_CORRUPT, TRUE,
     "identity must be an object whose members are strings"},
    {TU_FILE_MISSING, PP_IO_ERROR_CORRUPT, TRUE, "log.csv: missing, though the manifest names it"},
    {TU_FILE_SIZE, PP_IO_ERROR_CORRUPT, TRUE, "state.safetensors: "},
    {TU_LOG_CHANGED, PP_IO_ERROR_CORRUPT, FALSE, "log.csv: "},
    {TU_STATE_BIT, PP_IO_ERROR_CORRUPT, FALSE, "\"optim.m.h.0.ln_1.weight\" fails its checksum"},
    {TU_MODEL_HEADER, PP_IO_ERROR_CORRUPT, FALSE, "(the file is damaged)"},
};

/* Edits the manifest of @dir: @edit applied to its parsed object, then written back. */
static void tu_edit_manifest(const char *dir, void (*edit)(JsonObject *m)) {
    g_autofree char *path = g_build_filename(dir, "manifest.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert(json_parser_load_from_file(parser, path, NULL));
    edit(json_node_get_object(json_parser_get_root(parser)));
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, json_parser_get_root(parser));
    ck_assert(json_generator_to_file(gen, path, NULL));
}

static void tu_wrong_format(JsonObject *m) {
    json_object_set_string_member(m, "format", "other");
}
static void tu_wrong_version(JsonObject *m) {
    json_object_set_int_member(m, "version", 2);
}
static void tu_drop_log(JsonObject *m) {
    json_object_remove_member(json_object_get_object_member(m, "files"), "log.csv");
}
static void tu_bad_sha(JsonObject *m) {
    json_object_set_string_member(
        json_object_get_object_member(json_object_get_object_member(m, "files"),
                                      "state.safetensors"),
        "sha256", "../../etc/passwd");
}
static void tu_wrong_step(JsonObject *m) {
    json_object_set_int_member(m, "step", 8);
}
static void tu_bad_identity(JsonObject *m) {
    json_object_set_int_member(json_object_get_object_member(m, "identity"), "model.heads", 2);
}

/* Flips one bit at byte @at of @path (negative: from the end). */
static void tu_flip(const char *path, gssize at) {
    gsize            len = 0;
    g_autofree char *bytes = test_util_read_file(path, &len);
    gsize            i = at >= 0 ? (gsize)at : len - (gsize)(-at);
    bytes[i] ^= 0x10;
    ck_assert(g_file_set_contents(path, bytes, (gssize)len, NULL));
}

START_TEST(test_unit_damaged) {
    TuRun r;
    tu_run_init(&r);
    g_autofree char *dir = tu_write(r.units, 2);
    g_autofree char *manifest = g_build_filename(dir, "manifest.json", NULL);
    g_autofree char *log = g_build_filename(dir, "log.csv", NULL);
    g_autofree char *state = g_build_filename(dir, "state.safetensors", NULL);
    g_autofree char *model = g_build_filename(dir, "model.safetensors", NULL);
    switch (tu_bads[_i].kind) {
    case TU_NO_MANIFEST:
        ck_assert_int_eq(g_unlink(manifest), 0);
        break;
    case TU_BAD_JSON:
        ck_assert(g_file_set_contents(manifest, "{\"format\": ", -1, NULL));
        break;
    case TU_DEEP_JSON: {
        /* The size bound bounds the nesting: 8192 levels in 16384 bytes parse, safely. */
        char deep[16384];
        memset(deep, '[', 8192);
        memset(deep + 8192, ']', 8192);
        ck_assert(g_file_set_contents(manifest, deep, sizeof deep, NULL));
        break;
    }
    case TU_HUGE_MANIFEST: {
        char huge[16385];
        memset(huge, ' ', sizeof huge);
        ck_assert(g_file_set_contents(manifest, huge, sizeof huge, NULL));
        break;
    }
    case TU_WRONG_FORMAT:
        tu_edit_manifest(dir, tu_wrong_format);
        break;
    case TU_WRONG_VERSION:
        tu_edit_manifest(dir, tu_wrong_version);
        break;
    case TU_MISSING_FILE_ENTRY:
        tu_edit_manifest(dir, tu_drop_log);
        break;
    case TU_BAD_SHA:
        tu_edit_manifest(dir, tu_bad_sha);
        break;
    case TU_WRONG_STEP:
        tu_edit_manifest(dir, tu_wrong_step);
        break;
    case TU_BAD_IDENTITY:
        tu_edit_manifest(dir, tu_bad_identity);
        break;
    case TU_FILE_MISSING:
        ck_assert_int_eq(g_unlink(log), 0);
        break;
    case TU_FILE_SIZE: {
        gsize            len = 0;
        g_autofree char *bytes = test_util_read_file(state, &len);
        ck_assert(g_file_set_contents(state, bytes, (gssize)len - 4, NULL));
        break;
    }
    case TU_LOG_CHANGED:
        tu_flip(log, 0);
        break;
    case TU_STATE_BIT: {
        TestSafetensors st;
        test_safetensors_read(&st, state);
        gsize   len = 0;
        guint8 *bytes = test_safetensors_tensor(&st, "optim.m.h.0.ln_1.weight", &len);
        bytes[len / 2] ^= 0x01;
        test_safetensors_write(&st, state);
        test_safetensors_clear(&st);
        break;
    }
    case TU_MODEL_HEADER: {
        /* a byte of the metadata ("format": "pt" -> "pd"): every tensor still checks out */
        gsize            len = 0;
        g_autofree char *bytes = test_util_read_file(model, &len);
        char            *pt = strstr(bytes + 8, "\"pt\"");
        ck_assert_ptr_nonnull(pt);
        pt[2] = 'd';
        ck_assert(g_file_set_contents(model, bytes, (gssize)len, NULL));
        break;
    }
    }
    g_autoptr(GError) error = NULL;
    g_autoptr(ExecCheckpointUnit) unit = exec_checkpoint_unit_open(dir, &error);
    if (unit) {
        ck_assert_msg(!tu_bads[_i].at_open, "the unit opened");
        TuData d;
        tu_data_init(&d, 99);
        g_autofree char *text = NULL;
        gboolean         ok = exec_checkpoint_unit_read_model(unit, &tu_cfg, d.model, &error) &&
                      exec_checkpoint_unit_read_state(unit, d.state, NULL, &error) &&
                      (text = exec_checkpoint_unit_read_log(unit, &error)) != NULL;
        ck_assert_msg(!ok, "every file read");
        tu_data_clear(&d);
    } else {
        ck_assert_msg(tu_bads[_i].at_open, "open failed: %s", error->message);
    }
    ck_assert_msg(g_error_matches(error, PP_IO_ERROR, tu_bads[_i].code), "wrong error: %s",
                  error->message);
    ck_assert_msg(strstr(error->message, tu_bads[_i].needle) != NULL, "message \"%s\" lacks \"%s\"",
                  error->message, tu_bads[_i].needle);
    ck_assert_msg(strstr(error->message, dir) != NULL, "message lacks the unit: %s",
                  error->message);
    tu_run_clear(&r);
}
END_TEST

/* What the read function of the choosing tests does: reads the whole unit, and refuses one
 * step with a mismatch (a unit of another run). */
typedef struct {
    int32_t refuse_step; /* -1: none */
    int32_t n_calls;
} TuReader;

static gboolean tu_read(ExecCheckpointUnit *unit, gpointer user_data, GError **error) {
    TuReader *reader = user_data;
    reader->n_calls++;
    if (exec_checkpoint_unit_step(unit) == reader->refuse_step) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH, "another run");
        return FALSE;
    }
    TuData d;
    tu_data_init(&d, 99);
    gboolean ok = exec_checkpoint_unit_read_model(unit, &tu_cfg, d.model, error) &&
                  exec_checkpoint_unit_read_state(unit, d.state, NULL, error);
    tu_data_clear(&d);
    return ok;
}

/* A run folder: the newest complete unit, skipping damaged and incomplete ones with a note
 * each; a unit given directly is not replaced by another; other errors stop the search; no
 * unit, or none complete, is an error saying so. */
START_TEST(test_unit_find) {
    TuRun r;
    tu_run_init(&r);
    g_autofree char *u1 = tu_write(r.units, 1);
    g_autofree char *u2 = tu_write(r.units, 2);
    g_autofree char *u3 = tu_write(r.units, 3);
    g_autofree char *u10 = tu_write(r.units, 10);
    /* 10: incomplete (no manifest); 3: a damaged model tensor */
    g_autofree char *m10 = g_build_filename(u10, "manifest.json", NULL);
    ck_assert_int_eq(g_unlink(m10), 0);
    g_autofree char *model3 = g_build_filename(u3, "model.safetensors", NULL);
    tu_flip(model3, -3);
    /* decoys: a temporary and a non-unit folder are never candidates */
    g_autofree char *tmp = g_build_filename(r.units, ".step-00000099.tmp-1", NULL);
    g_autofree char *other = g_build_filename(r.units, "step-99", NULL);
    ck_assert_int_eq(g_mkdir(tmp, 0755), 0);
    ck_assert_int_eq(g_mkdir(other, 0755), 0);

    TuReader reader = {.refuse_step = -1};
    g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    g_autoptr(ExecCheckpointUnit) unit =
        exec_checkpoint_unit_find(r.run, tu_read, &reader, notes, &error);
    ck_assert_msg(unit != NULL, "%s", error ? error->message : "");
    ck_assert_int_eq(exec_checkpoint_unit_step(unit), 2);
    ck_assert_int_eq(reader.n_calls, 2); /* 3 and 2; 10 failed to open */
    ck_assert_uint_eq(notes->len, 2);
    g_autofree char *want10 = g_strdup_printf("skipped %s: checkpoint %s is incomplete", u10, u10);
    ck_assert_msg(g_str_has_prefix(g_ptr_array_index(notes, 0), want10), "%s",
                  (char *)g_ptr_array_index(notes, 0));
    ck_assert_msg(strstr(g_ptr_array_index(notes, 1), "fails its checksum") != NULL, "%s",
                  (char *)g_ptr_array_index(notes, 1));

    /* A unit given directly: its own error, no fallback. */
    g_clear_error(&error);
    ck_assert_ptr_null(exec_checkpoint_unit_find(u3, tu_read, &reader, NULL, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT));
    g_clear_error(&error);
    g_autoptr(ExecCheckpointUnit) direct =
        exec_checkpoint_unit_find(u1, tu_read, &reader, NULL, &error);
    ck_assert_ptr_nonnull(direct);
    ck_assert_int_eq(exec_checkpoint_unit_step(direct), 1);

    /* Another kind of error stops at the unit that raised it. */
    TuReader refuse = {.refuse_step = 2};
    ck_assert_ptr_null(exec_checkpoint_unit_find(r.run, tu_read, &refuse, NULL, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    g_clear_error(&error);

    /* None complete: every reason listed. */
    g_autofree char *model2 = g_build_filename(u2, "model.safetensors", NULL);
    g_autofree char *model1 = g_build_filename(u1, "model.safetensors", NULL);
    tu_flip(model2, -3);
    ck_assert_int_eq(g_unlink(model1), 0);
    ck_assert_ptr_null(exec_checkpoint_unit_find(r.run, tu_read, &reader, NULL, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT));
    ck_assert_msg(strstr(error->message, "holds no complete checkpoint; step-00000010: ") &&
                      strstr(error->message, "; step-00000001: "),
                  "%s", error->message);
    g_clear_error(&error);

    /* Not a unit nor a run; a file; nothing there; a run without units. */
    ck_assert_ptr_null(exec_checkpoint_unit_find(r.units, tu_read, &reader, NULL, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_OPEN));
    ck_assert_msg(strstr(error->message, "is neither a checkpoint unit"), "%s", error->message);
    g_clear_error(&error);
    ck_assert_ptr_null(exec_checkpoint_unit_find(model2, tu_read, &reader, NULL, &error));
    ck_assert_msg(strstr(error->message, "not a folder"), "%s", error->message);
    g_clear_error(&error);
    ck_assert_ptr_null(exec_checkpoint_unit_find("/nonexistent", tu_read, &reader, NULL, &error));
    ck_assert_msg(strstr(error->message, "no such file or folder"), "%s", error->message);
    g_clear_error(&error);
    TuRun empty;
    tu_run_init(&empty);
    ck_assert_int_eq(g_mkdir(empty.units, 0755), 0);
    ck_assert_ptr_null(exec_checkpoint_unit_find(empty.run, tu_read, &reader, NULL, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_OPEN));
    ck_assert_msg(strstr(error->message, "holds no checkpoint"), "%s", error->message);
    tu_run_clear(&empty);
    tu_run_clear(&r);
}
END_TEST

/* Only .step-DIGITS.tmp-DIGITS folders of other processes go. */
START_TEST(test_unit_remove_stale) {
    TuRun r;
    tu_run_init(&r);
    g_autofree char *u1 = tu_write(r.units, 1);
    g_autofree char *own = g_strdup_printf(".step-00000002.tmp-%d", (int)getpid());
    const char *dirs[] = {".step-00000002.tmp-1", own, ".step-x.tmp-1", ".step-00000003.tmp-1a",
                          "step-00000004.tmp-1"};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_autofree char *path = g_build_filename(r.units, dirs[i], NULL);
        g_autofree char *file = g_build_filename(path, "model.safetensors", NULL);
        ck_assert_int_eq(g_mkdir(path, 0755), 0);
        ck_assert(g_file_set_contents(file, "partial", -1, NULL));
    }
    g_autoptr(GPtrArray) removed = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    ck_assert(exec_checkpoint_units_remove_stale(r.units, removed, NULL, &error));
    ck_assert_uint_eq(removed->len, 1);
    g_autofree char *want = g_build_filename(r.units, ".step-00000002.tmp-1", NULL);
    ck_assert_str_eq(g_ptr_array_index(removed, 0), want);
    g_autofree char *listing = test_util_list_dir(r.units);
    g_autofree char *expect = g_strdup_printf(
        "%s .step-00000003.tmp-1a .step-x.tmp-1 step-00000001 step-00000004.tmp-1", own);
    ck_assert_str_eq(listing, expect);
    /* A missing folder is no error. */
    ck_assert(exec_checkpoint_units_remove_stale("/nonexistent/checkpoints", NULL, NULL, &error));
    tu_run_clear(&r);
}
END_TEST

/* After the unit of step 4: newer units go (another line of the run), then all but the
 * newest @keep complete ones; damaged units newer than the last kept stay. */
START_TEST(test_unit_prune) {
    static const struct {
        int32_t     keep;
        gboolean    damage3;
        const char *left;
        guint       n_removed;
    } cases[] = {
        {2, FALSE, "step-00000003 step-00000004", 4},
        {0, FALSE, "step-00000001 step-00000002 step-00000003 step-00000004", 2},
        {1, FALSE, "step-00000004", 5},
        {2, TRUE, "step-00000002 step-00000003 step-00000004", 3},
    };
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        TuRun r;
        tu_run_init(&r);
        for (int32_t s = 1; s <= 6; s++)
            g_free(tu_write(r.units, s));
        if (cases[c].damage3) {
            g_autofree char *m = g_build_filename(r.units, "step-00000003", "manifest.json", NULL);
            ck_assert_int_eq(g_unlink(m), 0);
        }
        g_autoptr(GPtrArray) removed = g_ptr_array_new_with_free_func(g_free);
        g_autoptr(GError) error = NULL;
        ck_assert(exec_checkpoint_units_prune(r.units, 4, cases[c].keep, removed, NULL, &error));
        g_autofree char *listing = test_util_list_dir(r.units);
        ck_assert_str_eq(listing, cases[c].left);
        ck_assert_uint_eq(removed->len, cases[c].n_removed);
        tu_run_clear(&r);
    }
}
END_TEST

/* --- removals never follow a link --- */

/* A folder of the user's outside the run, with files named like a unit's and not. */
static char *tu_victim_new(const char *root) {
    char *victim = g_build_filename(root, "victim", NULL);
    ck_assert_int_eq(g_mkdir(victim, 0755), 0);
    const char *files[] = {"model.safetensors", "manifest.json", "photo.jpg"};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = g_build_filename(victim, files[i], NULL);
        ck_assert(g_file_set_contents(path, files[i], -1, NULL));
    }
    return victim;
}

/* The removal paths of a units folder; each is given the run's units folder. */
static gboolean tu_remove_stale(const char *units, GPtrArray *removed, GPtrArray *kept,
                                GError **error) {
    return exec_checkpoint_units_remove_stale(units, removed, kept, error);
}
static gboolean tu_remove_all(const char *units, GPtrArray *removed, GPtrArray *kept,
                              GError **error) {
    return exec_checkpoint_units_remove_all(units, removed, kept, error);
}
/* A resume of step 4 writing its unit: the newer units go. */
static gboolean tu_prune_newer(const char *units, GPtrArray *removed, GPtrArray *kept,
                               GError **error) {
    return exec_checkpoint_units_prune(units, 4, 0, removed, kept, error);
}
/* keep_checkpoints = 1 after the unit of step 10: all but the newest complete unit go. */
static gboolean tu_prune_rotate(const char *units, GPtrArray *removed, GPtrArray *kept,
                                GError **error) {
    return exec_checkpoint_units_prune(units, 10, 1, removed, kept, error);
}

static const struct {
    const char *what;
    gboolean (*remove)(const char *units, GPtrArray *removed, GPtrArray *kept, GError **error);
    const char *left;       /* the real folders of pacer's that stay, by name */
    const char *kept_names; /* which of the other entries it left in place, said in kept */
} tu_removals[] = {
    {"stale temporaries", tu_remove_stale, "step-00000002 step-00000004", ".step-00000009.tmp-999"},
    {"--overwrite", tu_remove_all, "",
     ".step-00000009.tmp-999 step-00000001 step-00000010 step-00000011"},
    {"a resume of an older unit", tu_prune_newer, "step-00000002 step-00000004",
     "step-00000011 step-00000010"},
    {"keep_checkpoints rotation", tu_prune_rotate, "step-00000004", "step-00000011 step-00000001"},
};

/* Links named like a unit (newer and older than the run's) and like an interrupted temporary,
 * each pointing at a folder of the user's, and a real folder named like a unit holding a file
 * pacer never writes: every removal path leaves all four and what they hold in place, and
 * still removes the units it should. */
START_TEST(test_unit_remove_never_follows) {
    TuRun r;
    tu_run_init(&r);
    g_autofree char *victim = tu_victim_new(r.run);
    g_autofree char *before = test_util_snapshot(victim);
    g_free(tu_write(r.units, 2));
    g_free(tu_write(r.units, 4));
    const char *links[] = {"step-00000010", "step-00000001", ".step-00000009.tmp-999"};
    for (size_t i = 0; i < G_N_ELEMENTS(links); i++) {
        g_autofree char *link = g_build_filename(r.units, links[i], NULL);
        ck_assert_int_eq(symlink(victim, link), 0);
    }
    g_autofree char *foreign = g_build_filename(r.units, "step-00000011", NULL);
    g_autofree char *notes = g_build_filename(foreign, "notes.txt", NULL);
    ck_assert_int_eq(g_mkdir(foreign, 0755), 0);
    ck_assert(g_file_set_contents(notes, "mine\n", -1, NULL));

    g_autoptr(GPtrArray) removed = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    gboolean ok = tu_removals[_i].remove(r.units, removed, kept, &error);
    ck_assert_msg(ok, "%s: %s", tu_removals[_i].what, error ? error->message : "");
    g_autofree char *after = test_util_snapshot(victim);
    ck_assert_msg(strcmp(after, before) == 0, "%s changed the linked folder:\n%s",
                  tu_removals[_i].what, after);
    for (size_t i = 0; i < G_N_ELEMENTS(links); i++) {
        g_autofree char *link = g_build_filename(r.units, links[i], NULL);
        ck_assert_msg(g_file_test(link, G_FILE_TEST_IS_SYMLINK), "%s removed the link %s",
                      tu_removals[_i].what, links[i]);
    }
    g_autofree char *mine = test_util_read_file(notes, NULL);
    ck_assert_str_eq(mine, "mine\n");
    /* what each path removes of pacer's own, and what it says it left */
    g_autoptr(GString) units = g_string_new(NULL);
    g_autofree char *listing = test_util_list_dir(r.units);
    g_auto(GStrv) names = g_strsplit(listing, " ", -1);
    for (char **n = names; *n; n++) {
        GStatBuf         st;
        g_autofree char *path = g_build_filename(r.units, *n, NULL);
        if (g_lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && strcmp(*n, "step-00000011") != 0)
            g_string_append_printf(units, "%s%s", units->len ? " " : "", *n);
    }
    g_autoptr(GString) said = g_string_new(NULL);
    for (guint i = 0; i < kept->len; i++) {
        const char      *note = g_ptr_array_index(kept, i);
        g_autofree char *prefix = g_strconcat(r.units, "/", NULL);
        ck_assert_msg(g_str_has_prefix(note, prefix), "%s", note);
        g_string_append_printf(said, "%s%.*s", i ? " " : "",
                               (int)(strchr(note + strlen(prefix), ':') - note - strlen(prefix)),
                               note + strlen(prefix));
    }
    ck_assert_msg(strcmp(said->str, tu_removals[_i].kept_names) == 0, "%s kept %s",
                  tu_removals[_i].what, said->str);
    ck_assert_msg(strcmp(units->str, tu_removals[_i].left) == 0, "%s left %s", tu_removals[_i].what,
                  units->str);
    tu_run_clear(&r);
}
END_TEST

/* A unit written where a link of the same name stands fails naming it, and leaves the link
 * and what it points to as they were. */
START_TEST(test_unit_write_over_link) {
    TuRun r;
    tu_run_init(&r);
    g_autofree char *victim = tu_victim_new(r.run);
    g_autofree char *before = test_util_snapshot(victim);
    g_free(tu_write(r.units, 1));
    g_autofree char *own = g_strdup_printf(".step-00000005.tmp-%d", (int)getpid());
    const char      *names[] = {"step-00000005", own};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *link = g_build_filename(r.units, names[i], NULL);
        ck_assert_int_eq(symlink(victim, link), 0);
        g_autoptr(GError) error = NULL;
        g_autofree char *dir = tu_try_write(r.units, 5, &error);
        ck_assert(dir == NULL);
        ck_assert_msg(strstr(error->message, link) != NULL, "%s", error->message);
        ck_assert(g_file_test(link, G_FILE_TEST_IS_SYMLINK));
        g_autofree char *after = test_util_snapshot(victim);
        ck_assert_str_eq(after, before);
        ck_assert_int_eq(g_unlink(link), 0);
    }
    tu_run_clear(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("checkpoint-unit");
    TCase *tc = tcase_create("checkpoint-unit");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_unit_round_trip);
    tcase_add_test(tc, test_unit_rewrite);
    tcase_add_test(tc, test_unit_write_nonfinite);
    tcase_add_loop_test(tc, test_unit_damaged, 0, G_N_ELEMENTS(tu_bads));
    tcase_add_test(tc, test_unit_find);
    tcase_add_test(tc, test_unit_remove_stale);
    tcase_add_test(tc, test_unit_prune);
    tcase_add_loop_test(tc, test_unit_remove_never_follows, 0, G_N_ELEMENTS(tu_removals));
    tcase_add_test(tc, test_unit_write_over_link);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
