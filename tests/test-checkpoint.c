/* SPDX-License-Identifier: MIT
 * test-checkpoint.c: safetensors checkpoints on tiny GPT-2 models: bitwise f32 round trip,
 * Hugging Face layout in the file (Conv1D transposes, unpadded vocabulary), a file written the
 * way Hugging Face does (prefix, tied head, no lm_head) giving the original's loss, bf16 within
 * rounding, raw optimizer-state files, CRC-32C (reference values) recorded per tensor, each
 * error (damaged data, shifted offsets, non-finite values on write and load), and
 * exec_evaluate against a direct loop.
 */
#include <check.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data-corpus.h"
#include "exec-checkpoint.h"
#include "exec-crc32c.h"
#include "exec-evaluate.h"
#include "gpt2-slice.h"
#include "kern-util.h"
#include "pp-error.h"
#include "test-safetensors.h"
#include "test-util.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Gpt2Slice, gpt2_slice_free)

/* L 2, C 16, NH 2, T 8, V 61 padded to 64. */
static const Gpt2Config tc_cfg = {2, 16, 2, 8, 61, 64};

static Gpt2Slice *tc_slice(const Gpt2Config *cfg, int tie_head, int B) {
    Gpt2SliceParams p = {
        .model = *cfg,
        .layer_begin = 0,
        .layer_end = cfg->L,
        .has_embedding = 1,
        .has_head = 1,
        .tie_head = tie_head,
        .B = B,
        .n_act_slots = 1,
    };
    return gpt2_slice_new(&p);
}

/* A model with GPT-2 init and every bias/gain perturbed, so that no tensor is trivial. */
static Gpt2Slice *tc_model(const Gpt2Config *cfg, int tie_head, int B, uint64_t seed) {
    Gpt2Slice *s = tc_slice(cfg, tie_head, B);
    gpt2_slice_init_params(s, seed);
    uint64_t rng = kern_rng_seed(seed + 99);
    float   *p = gpt2_slice_params(s);
    for (int i = 0; i < gpt2_slice_n_tensors(s); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(s, i);
        if (t->ndim == 1)
            for (size_t k = 0; k < t->numel; k++)
                p[t->offset + k] += 0.1f * kern_rng_normal(&rng);
    }
    return s;
}

/* Mean loss of @s on B sequences of random tokens drawn from @seed. */
static float tc_loss(Gpt2Slice *s, uint64_t seed) {
    const Gpt2SliceParams *sp = gpt2_slice_params_info(s);
    int                    n = sp->B * sp->model.T;
    g_autofree int32_t    *tok = g_new(int32_t, n + 1);
    uint64_t               rng = kern_rng_seed(seed);
    for (int i = 0; i < n + 1; i++)
        tok[i] = (int32_t)(kern_rng_u32(&rng) % (uint32_t)sp->model.V);
    float loss = 0.0f;
    gpt2_slice_forward(s, gpt2_slice_params(s), 0, tok, NULL, tok + 1, NULL, &loss);
    return loss;
}

static ExecTensorList *tc_list(Gpt2Slice *s) {
    ExecTensorList *l = exec_tensor_list_new();
    exec_tensor_list_add_slice(l, s, gpt2_slice_params(s), "");
    return l;
}

/* A scratch folder with a checkpoint path in it; test_util_tmp_clear() removes it. */
static void tc_tmp_init(TestUtilTmp *t) {
    test_util_tmp_init(t, "test-checkpoint-XXXXXX", "model.safetensors");
}

static void tc_save(const char *path, const Gpt2Config *cfg, Gpt2Slice *s) {
    g_autoptr(ExecTensorList) l = tc_list(s);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(exec_checkpoint_save(path, cfg, l, NULL, &error), "%s",
                  error ? error->message : "");
}

START_TEST(test_checkpoint_round_trip) {
    g_autoptr(Gpt2Slice) a = tc_model(&tc_cfg, 0, 2, 1);
    g_autoptr(Gpt2Slice) b = tc_slice(&tc_cfg, 0, 2);
    TestUtilTmp t;
    tc_tmp_init(&t);
    g_autoptr(GHashTable) meta = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(meta, "step", "42");
    g_hash_table_insert(meta, "n_layer", "99"); /* cannot replace a shape key */
    /* Brackets, quotes and slashes inside strings do not count as header nesting. */
    static const char note[] = "[[[[[[[[[[{{{{{{{{{{ \" ' /* // \\";
    g_hash_table_insert(meta, "note", (char *)note);
    g_autoptr(ExecTensorList) la = tc_list(a);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(exec_checkpoint_save(t.path, &tc_cfg, la, meta, &error), "%s",
                  error ? error->message : "");
    g_autoptr(ExecTensorList) lb = tc_list(b);
    g_autoptr(GHashTable) got = NULL;
    ck_assert_msg(exec_checkpoint_load(t.path, &tc_cfg, lb, &got, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(
        memcmp(gpt2_slice_params(a), gpt2_slice_params(b), gpt2_slice_n_params(a) * sizeof(float)),
        0);
    ck_assert_float_eq(tc_loss(a, 7), tc_loss(b, 7));
    ck_assert_str_eq(g_hash_table_lookup(got, "step"), "42");
    ck_assert_str_eq(g_hash_table_lookup(got, "note"), note);
    ck_assert_str_eq(g_hash_table_lookup(got, "n_layer"), "2");
    ck_assert_str_eq(g_hash_table_lookup(got, "n_head"), "2");
    ck_assert_str_eq(g_hash_table_lookup(got, "n_embd"), "16");
    ck_assert_str_eq(g_hash_table_lookup(got, "n_ctx"), "8");
    ck_assert_str_eq(g_hash_table_lookup(got, "vocab_size"), "61");
    ck_assert_str_eq(g_hash_table_lookup(got, "format"), "pt");

    ExecCheckpointInfo info;
    ck_assert(exec_checkpoint_info(t.path, &info, NULL, NULL));
    ck_assert_int_eq(info.cfg.L, 2);
    ck_assert_int_eq(info.cfg.C, 16);
    ck_assert_int_eq(info.cfg.NH, 2);
    ck_assert_int_eq(info.cfg.T, 8);
    ck_assert_int_eq(info.cfg.V, 61);
    ck_assert_int_eq(info.cfg.Vp, 128);
    ck_assert(info.has_head);
    test_util_tmp_clear(&t);
}
END_TEST

/* Element @k (file order) of the f32 tensor @name of @st. */
static float tc_file_f32(const TestSafetensors *st, const char *name, size_t k) {
    gsize         len = 0;
    const guint8 *bytes = test_safetensors_tensor(st, name, &len);
    float         v;
    ck_assert_uint_ge(len, 4 * (k + 1));
    memcpy(&v, bytes + 4 * k, 4);
    return v;
}

static void tc_assert_shape(JsonObject *hdr, const char *name, gint64 d0, gint64 d1) {
    JsonObject *t = json_object_get_object_member(hdr, name);
    ck_assert_msg(t != NULL, "no %s in the file", name);
    JsonArray *s = json_object_get_array_member(t, "shape");
    ck_assert_uint_eq(json_array_get_length(s), d1 < 0 ? 1 : 2);
    ck_assert_int_eq(json_array_get_int_element(s, 0), d0);
    if (d1 >= 0)
        ck_assert_int_eq(json_array_get_int_element(s, 1), d1);
}

/* The file holds Hugging Face shapes and element order. */
START_TEST(test_checkpoint_hf_layout) {
    g_autoptr(Gpt2Slice) a = tc_model(&tc_cfg, 0, 1, 2);
    TestUtilTmp t;
    tc_tmp_init(&t);
    tc_save(t.path, &tc_cfg, a);
    TestSafetensors st;
    test_safetensors_read(&st, t.path);
    JsonObject *hdr = st.header;
    const int   C = tc_cfg.C;
    tc_assert_shape(hdr, "wte.weight", 61, C);
    tc_assert_shape(hdr, "lm_head.weight", 61, C);
    tc_assert_shape(hdr, "wpe.weight", 8, C);
    tc_assert_shape(hdr, "h.1.attn.c_attn.weight", C, 3 * C);
    tc_assert_shape(hdr, "h.1.attn.c_attn.bias", 3 * C, -1);
    tc_assert_shape(hdr, "h.1.attn.c_proj.weight", C, C);
    tc_assert_shape(hdr, "h.1.mlp.c_fc.weight", C, 4 * C);
    tc_assert_shape(hdr, "h.1.mlp.c_proj.weight", 4 * C, C);
    tc_assert_shape(hdr, "ln_f.bias", C, -1);
    ck_assert_str_eq(json_object_get_string_member(
                         json_object_get_object_member(hdr, "h.0.ln_1.weight"), "dtype"),
                     "F32");
    /* c_fc: file (IC, OC)[i][o] == pacer (OC, IC)[o][i] */
    const Gpt2Tensor *fc = gpt2_slice_tensor_by_name(a, "h.1.mlp.c_fc.weight");
    const float      *p = gpt2_slice_params(a) + fc->offset;
    for (int i = 0; i < C; i += 5)
        for (int o = 0; o < 4 * C; o += 7)
            ck_assert_float_eq(tc_file_f32(&st, "h.1.mlp.c_fc.weight", (size_t)i * 4 * C + o),
                               p[(size_t)o * C + i]);
    /* wte: row-major (V, C), same as pacer's first V rows */
    const Gpt2Tensor *wte = gpt2_slice_tensor_by_name(a, "wte.weight");
    ck_assert_float_eq(tc_file_f32(&st, "wte.weight", 60 * C + 3),
                       gpt2_slice_params(a)[wte->offset + 60 * C + 3]);
    test_safetensors_clear(&st);
    test_util_tmp_clear(&t);
}
END_TEST

/* Test-side safetensors writer in Hugging Face's conventions: "transformer." names, Conv1D
 * weights (IC, OC), no lm_head (tied), optional dtype override for one tensor. */
static void tc_write_hf(const char *path, Gpt2Slice *s, const char *skip, const char *f16_name) {
    const Gpt2SliceParams *sp = gpt2_slice_params_info(s);
    const float           *params = gpt2_slice_params(s);
    GString               *hdr = g_string_new("{\"__metadata__\": {\"format\": \"pt\"}");
    GByteArray            *data = g_byte_array_new();
    for (int i = 0; i < gpt2_slice_n_tensors(s); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(s, i);
        if (strcmp(t->name, "lm_head.weight") == 0 || (skip && strcmp(t->name, skip) == 0))
            continue;
        gboolean conv = t->ndim == 2 && g_str_has_prefix(t->name, "h.");
        gboolean vocab = strcmp(t->name, "wte.weight") == 0;
        int      r = t->shape[0], c = t->ndim == 2 ? t->shape[1] : 1;
        int      fr = conv ? c : (vocab ? sp->model.V : r), fc = conv ? r : c;
        gboolean f16 = f16_name && strcmp(t->name, f16_name) == 0;
        guint    begin = data->len;
        for (int y = 0; y < fr; y++)
            for (int x = 0; x < fc; x++) {
                float v = conv ? params[t->offset + (size_t)x * c + y]
                               : params[t->offset + (size_t)y * fc + x];
                g_byte_array_append(data, (const guint8 *)&v, f16 ? 2 : 4);
            }
        if (t->ndim == 2)
            g_string_append_printf(hdr,
                                   ", \"transformer.%s\": {\"dtype\": \"%s\", \"shape\": "
                                   "[%d, %d], \"data_offsets\": [%u, %u]}",
                                   t->name, f16 ? "F16" : "F32", fr, fc, begin, data->len);
        else
            g_string_append_printf(hdr,
                                   ", \"transformer.%s\": {\"dtype\": \"%s\", \"shape\": "
                                   "[%d], \"data_offsets\": [%u, %u]}",
                                   t->name, f16 ? "F16" : "F32", fr, begin, data->len);
    }
    g_string_append(hdr, "}");
    while (hdr->len % 8)
        g_string_append_c(hdr, ' ');
    GByteArray *file = g_byte_array_new();
    guint64     hlen = hdr->len;
    g_byte_array_append(file, (const guint8 *)&hlen, 8);
    g_byte_array_append(file, (const guint8 *)hdr->str, hdr->len);
    g_byte_array_append(file, data->data, data->len);
    ck_assert(g_file_set_contents(path, (const char *)file->data, file->len, NULL));
    g_byte_array_unref(file);
    g_byte_array_unref(data);
    g_string_free(hdr, TRUE);
}

/* A Hugging Face file of a tied model loads into a tied and an untied pacer model (head := wte)
 * and gives the original loss. */
START_TEST(test_checkpoint_hf_file) {
    g_autoptr(Gpt2Slice) orig = tc_model(&tc_cfg, 1, 2, 3);
    float       want = tc_loss(orig, 11);
    TestUtilTmp t;
    tc_tmp_init(&t);
    tc_write_hf(t.path, orig, NULL, NULL);
    for (int tie = 0; tie <= 1; tie++) {
        g_autoptr(Gpt2Slice) b = tc_slice(&tc_cfg, tie, 2);
        g_autoptr(ExecTensorList) lb = tc_list(b);
        g_autoptr(GError) error = NULL;
        ck_assert_msg(exec_checkpoint_load(t.path, &tc_cfg, lb, NULL, &error), "%s",
                      error ? error->message : "");
        ck_assert_float_eq_tol(tc_loss(b, 11), want, 1e-6f);
        if (!tie) {
            const Gpt2Tensor *h = gpt2_slice_tensor_by_name(b, "lm_head.weight");
            const Gpt2Tensor *w = gpt2_slice_tensor_by_name(b, "wte.weight");
            ck_assert_int_eq(memcmp(gpt2_slice_params(b) + h->offset,
                                    gpt2_slice_params(b) + w->offset, h->numel * sizeof(float)),
                             0);
        }
    }
    ExecCheckpointInfo info;
    ck_assert(exec_checkpoint_info(t.path, &info, NULL, NULL));
    ck_assert(!info.has_head);
    ck_assert_int_eq(info.cfg.NH, 0); /* no n_head metadata */
    ck_assert_int_eq(info.cfg.L, 2);
    test_util_tmp_clear(&t);
}
END_TEST

START_TEST(test_checkpoint_bf16) {
    g_autoptr(Gpt2Slice) a = tc_model(&tc_cfg, 0, 1, 4);
    g_autoptr(Gpt2Slice) b = tc_slice(&tc_cfg, 0, 1);
    float *pa = gpt2_slice_params(a);
    pa[0] = 1.0f;                 /* exact in bf16 */
    pa[1] = 1.0f + 1.0f / 256.0f; /* tie between 1 and 1 + 2^-7: rounds to even, 1 */
    pa[2] = 1.0f + 3.0f / 256.0f; /* tie between 1 + 2^-7 and 1 + 2^-6: rounds to 1 + 2^-6 */
    TestUtilTmp t;
    tc_tmp_init(&t);
    g_autoptr(ExecTensorList) la = tc_list(a);
    ck_assert(exec_checkpoint_write(t.path, &tc_cfg, la, NULL, EXEC_DTYPE_BF16, NULL, NULL));
    TestSafetensors st;
    test_safetensors_read(&st, t.path);
    ck_assert_str_eq(json_object_get_string_member(
                         json_object_get_object_member(st.header, "wpe.weight"), "dtype"),
                     "BF16");
    test_safetensors_clear(&st);
    g_autoptr(ExecTensorList) lb = tc_list(b);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(exec_checkpoint_load(t.path, &tc_cfg, lb, NULL, &error), "%s",
                  error ? error->message : "");
    const float *pb = gpt2_slice_params(b);
    ck_assert_float_eq(pb[0], 1.0f);
    ck_assert_float_eq(pb[1], 1.0f);
    ck_assert_float_eq(pb[2], 1.0f + 1.0f / 64.0f);
    size_t n = gpt2_slice_n_params(a);
    for (size_t k = 0; k < n; k++) {
        /* bf16 keeps 8 significant bits: rounding error at most half an ulp, 2^-8 relative */
        ck_assert_msg(fabsf(pb[k] - pa[k]) <= fabsf(pa[k]) * (1.0f / 256.0f), "param %zu: %g -> %g",
                      k, pa[k], pb[k]);
        uint32_t bits;
        memcpy(&bits, &pb[k], 4);
        ck_assert_uint_eq(bits & 0xffffu, 0); /* representable in bf16 */
    }
    test_util_tmp_clear(&t);
}
END_TEST

START_TEST(test_checkpoint_state) {
    g_autoptr(Gpt2Slice) a = tc_model(&tc_cfg, 0, 1, 5);
    size_t            n = gpt2_slice_n_params(a);
    g_autofree float *m = g_new(float, n), *v = g_new(float, n);
    g_autofree float *m2 = g_new0(float, n), *v2 = g_new0(float, n);
    uint64_t          rng = kern_rng_seed(17);
    for (size_t k = 0; k < n; k++) {
        m[k] = kern_rng_normal(&rng);
        v[k] = kern_rng_uniform(&rng);
    }
    g_autoptr(ExecTensorList) st = exec_tensor_list_new();
    exec_tensor_list_add_slice(st, a, m, "adam_m.");
    exec_tensor_list_add_slice(st, a, v, "adam_v.");
    g_autoptr(GHashTable) sm = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(sm, "step", "7");
    g_hash_table_insert(sm, "rng_state", "12345678901234567890");
    g_hash_table_insert(sm, "data_position", "4096");
    TestUtilTmp t;
    test_util_tmp_init(&t, "test-checkpoint-XXXXXX", "state.safetensors");
    g_autoptr(GError) error = NULL;
    ExecCheckpointDigest digest;
    ck_assert_msg(exec_checkpoint_write(t.path, NULL, st, sm, EXEC_DTYPE_F32, &digest, &error),
                  "%s", error ? error->message : "");
    /* Exactly the file: no temporary left behind. Its digest is the file's size and SHA-256. */
    GDir *d = g_dir_open(t.dir, 0, NULL);
    int   n_files = 0;
    while (g_dir_read_name(d))
        n_files++;
    g_dir_close(d);
    ck_assert_int_eq(n_files, 1);
    gsize            len = 0;
    g_autofree char *bytes = test_util_read_file(t.path, &len);
    g_autofree char *sha = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (guchar *)bytes, len);
    ck_assert_uint_eq(digest.size_bytes, len);
    ck_assert_str_eq(digest.sha256, sha);

    g_autoptr(ExecTensorList) st2 = exec_tensor_list_new();
    exec_tensor_list_add_slice(st2, a, m2, "adam_m.");
    exec_tensor_list_add_slice(st2, a, v2, "adam_v.");
    g_autoptr(GHashTable) got = NULL;
    ck_assert_msg(exec_checkpoint_load_state(t.path, st2, &got, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(memcmp(m, m2, n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(v, v2, n * sizeof(float)), 0);
    ck_assert_str_eq(g_hash_table_lookup(got, "step"), "7");
    ck_assert_str_eq(g_hash_table_lookup(got, "rng_state"), "12345678901234567890");
    ck_assert_str_eq(g_hash_table_lookup(got, "data_position"), "4096");
    /* A raw file: no model shape keys; names and shapes as given ((OC, IC), not transposed). */
    ck_assert_ptr_null(g_hash_table_lookup(got, "n_layer"));
    TestSafetensors file;
    test_safetensors_read(&file, t.path);
    JsonArray *shape = json_object_get_array_member(
        json_object_get_object_member(file.header, "adam_v.h.1.mlp.c_fc.weight"), "shape");
    ck_assert_int_eq(json_array_get_int_element(shape, 0), 4 * tc_cfg.C);
    ck_assert_int_eq(json_array_get_int_element(shape, 1), tc_cfg.C);
    test_safetensors_clear(&file);
    test_util_tmp_clear(&t);
}
END_TEST

/* CRC-32C reference values: the check value of "123456789" and the iSCSI test vectors (32
 * bytes of 0x00, of 0xff, and 0..31), whole and continued from any split point (the 8-byte
 * blocks and the byte tail both run). */
START_TEST(test_checkpoint_crc32c) {
    uint8_t zeros[32] = {0}, ones[32], ramp[32];
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++)
        ramp[i] = (uint8_t)i;
    ck_assert_uint_eq(exec_crc32c(0, "123456789", 9), 0xe3069283u);
    ck_assert_uint_eq(exec_crc32c(0, zeros, 32), 0x8a9136aau);
    ck_assert_uint_eq(exec_crc32c(0, ones, 32), 0x62a8ab43u);
    ck_assert_uint_eq(exec_crc32c(0, ramp, 32), 0x46dd794eu);
    ck_assert_uint_eq(exec_crc32c(0, NULL, 0), 0u);
    for (size_t cut = 0; cut <= 32; cut++)
        ck_assert_uint_eq(exec_crc32c(exec_crc32c(0, ramp, cut), ramp + cut, 32 - cut),
                          0x46dd794eu);
}
END_TEST

/* Every tensor of a file pacer writes carries pacer_crc32c.NAME: the CRC-32C of its bytes. */
START_TEST(test_checkpoint_checksums_recorded) {
    g_autoptr(Gpt2Slice) a = tc_model(&tc_cfg, 0, 1, 9);
    TestUtilTmp t;
    tc_tmp_init(&t);
    tc_save(t.path, &tc_cfg, a);
    TestSafetensors st;
    test_safetensors_read(&st, t.path);
    JsonObject *meta = json_object_get_object_member(st.header, "__metadata__");
    int         n_tensors = 0;
    g_autoptr(GList) names = json_object_get_members(st.header);
    for (GList *l = names; l; l = l->next) {
        if (strcmp(l->data, "__metadata__") == 0)
            continue;
        gsize            len = 0;
        const guint8    *bytes = test_safetensors_tensor(&st, l->data, &len);
        g_autofree char *key = g_strconcat("pacer_crc32c.", (char *)l->data, NULL);
        g_autofree char *want = g_strdup_printf("%08x", exec_crc32c(0, bytes, len));
        ck_assert_msg(json_object_has_member(meta, key), "no %s", key);
        ck_assert_str_eq(json_object_get_string_member(meta, key), want);
        n_tensors++;
    }
    ck_assert_int_eq(n_tensors, gpt2_slice_n_tensors(a));
    test_safetensors_clear(&st);
    ck_assert(exec_checkpoint_verify(t.path, NULL));
    test_util_tmp_clear(&t);
}
END_TEST

/* The writer refuses NaN and infinity (also a finite f32 that overflows bf16), naming the
 * tensor and the element in the file's layout, and leaves no file behind. */
START_TEST(test_checkpoint_write_nonfinite) {
    static const struct {
        float       value;
        ExecDtype   dtype;
        const char *needle;
    } cases[] = {
        {NAN, EXEC_DTYPE_F32, "holds NaN at element 197 (index [3, 5] of shape (16, 64))"},
        {-INFINITY, EXEC_DTYPE_F32, "holds -inf at element 197"},
        {3.4e38f, EXEC_DTYPE_BF16, "holds +inf at element 197"},
    };
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        g_autoptr(Gpt2Slice) a = tc_model(&tc_cfg, 0, 1, 10);
        /* pacer (OC, IC)[5][3] of c_fc is element [3][5] of the file's (IC, OC) = (16, 64) */
        const Gpt2Tensor *fc = gpt2_slice_tensor_by_name(a, "h.1.mlp.c_fc.weight");
        gpt2_slice_params(a)[fc->offset + 5 * tc_cfg.C + 3] = cases[c].value;
        TestUtilTmp t;
        tc_tmp_init(&t);
        g_autoptr(ExecTensorList) l = tc_list(a);
        g_autoptr(GError) error = NULL;
        ck_assert(!exec_checkpoint_write(t.path, &tc_cfg, l, NULL, cases[c].dtype, NULL, &error));
        ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_NONFINITE));
        ck_assert_msg(strstr(error->message, "\"h.1.mlp.c_fc.weight\"") &&
                          strstr(error->message, cases[c].needle),
                      "%s", error->message);
        GDir *d = g_dir_open(t.dir, 0, NULL);
        ck_assert_ptr_null(g_dir_read_name(d));
        g_dir_close(d);
        test_util_tmp_clear(&t);
    }
}
END_TEST

/* Each broken file: its error code and a part of the message. */
typedef enum {
    TC_BAD_HEADER_LENGTH,
    TC_BAD_JSON,
    TC_DEEP_JSON,
    TC_COMMENT_JSON,
    TC_TRUNCATED,
    TC_MISSING_TENSOR,
    TC_SHAPE,
    TC_DTYPE,
    TC_NO_FILE,
    TC_FLIPPED_BIT,
    TC_ZEROED_BLOCK,
    TC_SHIFTED_OFFSETS,
    TC_SWAPPED_OFFSETS,
    TC_TRAILING_BYTES,
    TC_MISSING_CRC,
    TC_NAN,
} TcBad;

static const struct {
    TcBad       kind;
    int         code;
    const char *needle;
} tc_bads[] = {
    {TC_BAD_HEADER_LENGTH, PP_IO_ERROR_CORRUPT, "header length"},
    {TC_BAD_JSON, PP_IO_ERROR_CORRUPT, "not valid JSON"},
    {TC_DEEP_JSON, PP_IO_ERROR_CORRUPT, "more than 8 deep"},
    {TC_COMMENT_JSON, PP_IO_ERROR_CORRUPT, "without comments"},
    {TC_TRUNCATED, PP_IO_ERROR_CORRUPT, "truncated"},
    {TC_MISSING_TENSOR, PP_IO_ERROR_MISMATCH, "ln_f.bias"},
    {TC_SHAPE, PP_IO_ERROR_MISMATCH,
     "\"wpe.weight\" has shape (16, 16) in the file, the model "
     "expects (8, 16)"},
    {TC_DTYPE, PP_IO_ERROR_MISMATCH, "dtype F16"},
    {TC_NO_FILE, PP_IO_ERROR_OPEN, "cannot read"},
    {TC_FLIPPED_BIT, PP_IO_ERROR_CORRUPT, "\"h.0.attn.c_proj.weight\" fails its checksum"},
    {TC_ZEROED_BLOCK, PP_IO_ERROR_CORRUPT, "fails its checksum"},
    {TC_SHIFTED_OFFSETS, PP_IO_ERROR_CORRUPT, "tensor \"h.0.ln_2.bias\" starts at data byte"},
    {TC_SWAPPED_OFFSETS, PP_IO_ERROR_CORRUPT, "fails its checksum"},
    {TC_TRAILING_BYTES, PP_IO_ERROR_CORRUPT, "the data section holds"},
    {TC_MISSING_CRC, PP_IO_ERROR_CORRUPT,
     "\"ln_f.bias\" has no pacer_crc32c.ln_f.bias though the file records checksums"},
    {TC_NAN, PP_IO_ERROR_NONFINITE,
     "\"h.1.mlp.c_fc.weight\" holds NaN at element 197 (index [3, 5] of shape (16, 64))"},
};

/* Damages the pacer-written file @path the way @kind says. */
static void tc_edit(const char *path, TcBad kind) {
    TestSafetensors st;
    test_safetensors_read(&st, path);
    JsonObject *meta = json_object_get_object_member(st.header, "__metadata__");
    gsize       len = 0;
    guint8     *bytes = NULL;
    switch (kind) {
    case TC_FLIPPED_BIT:
        bytes = test_safetensors_tensor(&st, "h.0.attn.c_proj.weight", &len);
        bytes[len / 2] ^= 0x08;
        break;
    case TC_ZEROED_BLOCK:
        ck_assert_uint_ge(st.data->len, 2048);
        memset(st.data->data + st.data->len / 2, 0, 1024);
        break;
    case TC_SHIFTED_OFFSETS:
        /* 4 bytes later: the same span, overlapping the next tensor */
        test_safetensors_shift(&st, "h.0.ln_2.bias", 4);
        break;
    case TC_SWAPPED_OFFSETS: {
        /* two tensors of the same size trade places: offsets stay contiguous */
        JsonObject *w = json_object_get_object_member(st.header, "h.0.ln_1.weight");
        JsonObject *b = json_object_get_object_member(st.header, "h.0.ln_1.bias");
        JsonNode   *ow = json_node_copy(json_object_get_member(w, "data_offsets"));
        JsonNode   *ob = json_node_copy(json_object_get_member(b, "data_offsets"));
        json_object_set_member(w, "data_offsets", ob);
        json_object_set_member(b, "data_offsets", ow);
        break;
    }
    case TC_TRAILING_BYTES:
        g_byte_array_append(st.data, (const guint8 *)"trailing", 8);
        break;
    case TC_MISSING_CRC:
        json_object_remove_member(meta, "pacer_crc32c.ln_f.bias");
        break;
    default:
        PP_UNREACHABLE();
    }
    test_safetensors_write(&st, path);
    test_safetensors_clear(&st);
}

START_TEST(test_checkpoint_errors) {
    g_autoptr(Gpt2Slice) a = tc_model(&tc_cfg, 1, 1, 6);
    TestUtilTmp t;
    tc_tmp_init(&t);
    g_autofree char *raw = NULL;
    gsize            len = 0;
    switch (tc_bads[_i].kind) {
    case TC_BAD_HEADER_LENGTH:
        tc_save(t.path, &tc_cfg, a);
        ck_assert(g_file_get_contents(t.path, &raw, &len, NULL));
        raw[5] = 0x7f;
        ck_assert(g_file_set_contents(t.path, raw, (gssize)len, NULL));
        break;
    case TC_BAD_JSON:
        tc_save(t.path, &tc_cfg, a);
        ck_assert(g_file_get_contents(t.path, &raw, &len, NULL));
        raw[8] = '[';
        ck_assert(g_file_set_contents(t.path, raw, (gssize)len, NULL));
        break;
    case TC_DEEP_JSON: {
        /* 100000 nested arrays: json-glib's recursive parser overflowed the stack on it. */
        enum { DEPTH = 100000 };
        g_autofree char *file = g_malloc(8 + 2 * DEPTH);
        guint64          hlen = GUINT64_TO_LE((guint64)2 * DEPTH);
        memcpy(file, &hlen, 8);
        memset(file + 8, '[', DEPTH);
        memset(file + 8 + DEPTH, ']', DEPTH);
        ck_assert(g_file_set_contents(t.path, file, 8 + 2 * DEPTH, NULL));
        break;
    }
    case TC_COMMENT_JSON: {
        /* json-glib skips comments: a quote in one must not hide the nesting after it. */
        static const char header[] = "/* \" */ [[[[[[[[[[]]]]]]]]]]";
        char              file[8 + sizeof header - 1];
        guint64           hlen = GUINT64_TO_LE((guint64)sizeof header - 1);
        memcpy(file, &hlen, 8);
        memcpy(file + 8, header, sizeof header - 1);
        ck_assert(g_file_set_contents(t.path, file, sizeof file, NULL));
        break;
    }
    case TC_TRUNCATED:
        tc_save(t.path, &tc_cfg, a);
        ck_assert(g_file_get_contents(t.path, &raw, &len, NULL));
        ck_assert(g_file_set_contents(t.path, raw, (gssize)len - 4, NULL));
        break;
    case TC_MISSING_TENSOR:
        tc_write_hf(t.path, a, "ln_f.bias", NULL);
        break;
    case TC_SHAPE: {
        Gpt2Config big = tc_cfg;
        big.T = 16;
        g_autoptr(Gpt2Slice) b = tc_model(&big, 1, 1, 6);
        tc_save(t.path, &big, b);
        break;
    }
    case TC_DTYPE:
        tc_write_hf(t.path, a, NULL, "h.0.ln_2.bias");
        break;
    case TC_NO_FILE:
        break;
    case TC_NAN: {
        /* A file from another tool (no checksums) with a NaN at pacer c_fc (OC, IC)[5][3]: file
         * (IC, OC) = (16, 64) index [3, 5]. */
        const Gpt2Tensor *fc = gpt2_slice_tensor_by_name(a, "h.1.mlp.c_fc.weight");
        gpt2_slice_params(a)[fc->offset + 5 * tc_cfg.C + 3] = NAN;
        tc_write_hf(t.path, a, NULL, NULL);
        break;
    }
    default:
        tc_save(t.path, &tc_cfg, a);
        tc_edit(t.path, tc_bads[_i].kind);
        break;
    }
    g_autoptr(Gpt2Slice) dst = tc_slice(&tc_cfg, 1, 1);
    g_autoptr(ExecTensorList) l = tc_list(dst);
    g_autoptr(GError) error = NULL;
    ck_assert(!exec_checkpoint_load(t.path, &tc_cfg, l, NULL, &error));
    ck_assert_msg(g_error_matches(error, PP_IO_ERROR, tc_bads[_i].code), "wrong error: %s",
                  error ? error->message : "(none)");
    ck_assert_msg(strstr(error->message, tc_bads[_i].needle) != NULL, "message \"%s\" lacks \"%s\"",
                  error->message, tc_bads[_i].needle);
    ck_assert_msg(strstr(error->message, t.path) != NULL, "message lacks the path: %s",
                  error->message);
    test_util_tmp_clear(&t);
}
END_TEST

/* Direct computation: the mean of the original model's window losses. */
static double tc_direct_loss(Gpt2Slice *s, const int32_t *ids, int64_t n_windows, int T) {
    double sum = 0.0;
    for (int64_t w = 0; w < n_windows; w++) {
        float l = 0.0f;
        gpt2_slice_forward(s, gpt2_slice_params(s), 0, ids + w * T, NULL, ids + w * T + 1, NULL,
                           &l);
        sum += l;
    }
    return sum / (double)n_windows;
}

/* Copies every tensor of @from into @to by name (wpe: its first rows). */
static void tc_copy_model(Gpt2Slice *to, Gpt2Slice *from) {
    for (int i = 0; i < gpt2_slice_n_tensors(to); i++) {
        const Gpt2Tensor *d = gpt2_slice_tensor(to, i);
        const Gpt2Tensor *s = gpt2_slice_tensor_by_name(from, d->name);
        ck_assert(s != NULL && s->numel >= d->numel);
        memcpy(gpt2_slice_params(to) + d->offset, gpt2_slice_params(from) + s->offset,
               d->numel * sizeof(float));
    }
}

START_TEST(test_checkpoint_evaluate) {
    /* The GPT-2 vocabulary with a tiny body: L 2, C 16, NH 4, T 8. */
    const Gpt2Config cfg = {2, 16, 4, 8, 50257, 50304};
    g_autoptr(Gpt2Slice) a = tc_model(&cfg, 0, 1, 8);
    TestUtilTmp t;
    tc_tmp_init(&t);
    tc_save(t.path, &cfg, a);

    const char *text_path = PP_SOURCE_ROOT "/tests/data/text/doc-a.txt";
    g_autoptr(GError) error = NULL;
    g_autoptr(DataBpe) bpe = data_bpe_new_from_cache(NULL, &error);
    ck_assert_msg(bpe != NULL, "run scripts/setup: %s", error ? error->message : "");
    g_autofree char *text = NULL;
    ck_assert(g_file_get_contents(text_path, &text, NULL, NULL));
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    ck_assert(data_bpe_encode(bpe, text, -1, DATA_BPE_ENCODE_PLAIN, ids, NULL));
    const int32_t *x = (const int32_t *)(void *)ids->data;
    int64_t        n = ids->len;

    double  loss = 0.0;
    int64_t tokens = 0;
    ck_assert_msg(exec_evaluate(t.path, text_path, 0, 0, &loss, &tokens, &error), "%s",
                  error ? error->message : "");
    int64_t nw = (n - 1) / 8;
    ck_assert_int_ge(nw, 2);
    ck_assert_int_eq(tokens, nw * 8);
    ck_assert_double_eq_tol(loss, tc_direct_loss(a, x, nw, 8), 1e-6);
    /* A random model is near uniform: loss close to ln V. */
    ck_assert_double_eq_tol(loss, log(50257.0), 0.5);

    /* Shorter windows: wpe cut to its first 4 rows. */
    Gpt2Config c4 = cfg;
    c4.T = 4;
    g_autoptr(Gpt2Slice) a4 = tc_slice(&c4, 0, 1);
    tc_copy_model(a4, a);
    ck_assert(exec_evaluate(t.path, text_path, 4, 4, &loss, &tokens, &error));
    ck_assert_int_eq(tokens, (n - 1) / 4 * 4);
    ck_assert_double_eq_tol(loss, tc_direct_loss(a4, x, (n - 1) / 4, 4), 1e-6);

    /* Errors: windows longer than wpe, heads not dividing C, text shorter than a window. */
    ck_assert(!exec_evaluate(t.path, text_path, 0, 9, &loss, &tokens, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    g_clear_error(&error);
    ck_assert(!exec_evaluate(t.path, text_path, 3, 0, &loss, &tokens, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    g_clear_error(&error);
    ck_assert(!exec_evaluate_ids(t.path, x, 8, 0, 0, &loss, &tokens, &error));
    ck_assert_ptr_nonnull(strstr(error->message, "at least 9"));
    g_clear_error(&error);
    ck_assert(!exec_evaluate(t.path, PP_SOURCE_ROOT "/tests/data/text/none.txt", 0, 0, &loss,
                             &tokens, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_OPEN));
    g_clear_error(&error);

    /* Finite weights whose logits overflow: an error, never {"loss": inf}. */
    const Gpt2Tensor *head = gpt2_slice_tensor_by_name(a, "lm_head.weight");
    for (size_t k = 0; k < head->numel; k++)
        gpt2_slice_params(a)[head->offset + k] = (k % 2 ? -3e38f : 3e38f);
    tc_save(t.path, &cfg, a);
    ck_assert(!exec_evaluate(t.path, text_path, 0, 0, &loss, &tokens, &error));
    ck_assert(g_error_matches(error, PP_IO_ERROR, PP_IO_ERROR_NONFINITE));
    ck_assert_msg(strstr(error->message, "the loss of window 0") != NULL, "%s", error->message);
    test_util_tmp_clear(&t);
}
END_TEST

int main(void) {
    Suite       *s = suite_create("checkpoint");
    TCase       *tc = tcase_create("checkpoint");
    TestUtilData data;
    test_util_data_init(&data);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_checkpoint_round_trip);
    tcase_add_test(tc, test_checkpoint_hf_layout);
    tcase_add_test(tc, test_checkpoint_hf_file);
    tcase_add_test(tc, test_checkpoint_bf16);
    tcase_add_test(tc, test_checkpoint_state);
    tcase_add_test(tc, test_checkpoint_crc32c);
    tcase_add_test(tc, test_checkpoint_checksums_recorded);
    tcase_add_test(tc, test_checkpoint_write_nonfinite);
    tcase_add_loop_test(tc, test_checkpoint_errors, 0, G_N_ELEMENTS(tc_bads));
    /* Tokenises with the GPT-2 vocabulary: skipped without scripts/fetch-data. */
    test_util_data_add(&data, tc, test_checkpoint_evaluate, 0, 1);
    suite_add_tcase(s, tc);
    return test_util_data_run(&data, s);
}
