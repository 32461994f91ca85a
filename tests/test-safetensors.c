/* SPDX-License-Identifier: MIT
 * test-safetensors.c: test-side safetensors editing (see test-safetensors.h).
 */
#include "test-safetensors.h"

#include <check.h>
#include <string.h>

#include "exec-crc32c.h"
#include "test-util.h"

void test_safetensors_read(TestSafetensors *st, const char *path) {
    gsize            len = 0;
    g_autofree char *raw = test_util_read_file(path, &len);
    ck_assert_msg(len >= 8, "%s: shorter than its header length", path);
    guint64 hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | (guint8)raw[i];
    ck_assert_msg(hlen % 8 == 0 && hlen <= len - 8, "%s: header length %" G_GUINT64_FORMAT, path,
                  hlen);
    g_autofree char *header = g_strndup(raw + 8, (gsize)hlen);
    test_util_assert_json(header);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    ck_assert_msg(json_parser_load_from_data(parser, raw + 8, (gssize)hlen, &error), "%s: %s", path,
                  error ? error->message : "");
    st->header = json_object_ref(json_node_get_object(json_parser_get_root(parser)));
    st->data = g_byte_array_new();
    g_byte_array_append(st->data, (const guint8 *)raw + 8 + hlen, (guint)(len - 8 - hlen));
}

void test_safetensors_write(const TestSafetensors *st, const char *path) {
    g_autoptr(JsonNode) root = json_node_new(JSON_NODE_OBJECT);
    json_node_set_object(root, st->header);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, root);
    GString *text = g_string_new(NULL);
    json_generator_to_gstring(gen, text);
    while (text->len % 8 != 0)
        g_string_append_c(text, ' ');
    g_autoptr(GByteArray) file = g_byte_array_new();
    guint8 hlen[8];
    for (int i = 0; i < 8; i++)
        hlen[i] = (guint8)((guint64)text->len >> (8 * i));
    g_byte_array_append(file, hlen, 8);
    g_byte_array_append(file, (const guint8 *)text->str, (guint)text->len);
    g_byte_array_append(file, st->data->data, st->data->len);
    g_string_free(text, TRUE);
    ck_assert_msg(g_file_set_contents(path, (const char *)file->data, file->len, NULL),
                  "cannot write %s", path);
}

void test_safetensors_clear(TestSafetensors *st) {
    g_clear_pointer(&st->header, json_object_unref);
    g_clear_pointer(&st->data, g_byte_array_unref);
}

guint8 *test_safetensors_tensor(const TestSafetensors *st, const char *name, gsize *len) {
    ck_assert_msg(json_object_has_member(st->header, name), "no tensor %s", name);
    JsonArray *off = json_object_get_array_member(json_object_get_object_member(st->header, name),
                                                  "data_offsets");
    gint64     begin = json_array_get_int_element(off, 0), end = json_array_get_int_element(off, 1);
    ck_assert_msg(0 <= begin && begin <= end && (guint64)end <= st->data->len,
                  "tensor %s: data_offsets [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", name,
                  begin, end);
    *len = (gsize)(end - begin);
    return st->data->data + begin;
}

void test_safetensors_shift(TestSafetensors *st, const char *name, gint64 by) {
    ck_assert_msg(json_object_has_member(st->header, name), "no tensor %s", name);
    JsonObject *t = json_object_get_object_member(st->header, name);
    JsonArray  *off = json_object_get_array_member(t, "data_offsets");
    JsonArray  *shifted = json_array_new();
    json_array_add_int_element(shifted, json_array_get_int_element(off, 0) + by);
    json_array_add_int_element(shifted, json_array_get_int_element(off, 1) + by);
    json_object_set_array_member(t, "data_offsets", shifted);
}

void test_safetensors_fix_crc(TestSafetensors *st, const char *name) {
    gsize            len = 0;
    const guint8    *bytes = test_safetensors_tensor(st, name, &len);
    g_autofree char *key = g_strconcat("pacer_crc32c.", name, NULL);
    g_autofree char *crc = g_strdup_printf("%08x", exec_crc32c(0, bytes, len));
    json_object_set_string_member(json_object_get_object_member(st->header, "__metadata__"), key,
                                  crc);
}
