/* SPDX-License-Identifier: MIT
 * sim-json.c: json-glib trees as text (see sim-json.h).
 */
#include "sim-json.h"

#include "pp-error.h"
#include "pp-json.h"

#define SIM_JSON_INDENT 2

static void sim_json_append_node(GString *out, JsonNode *node, int level);

static void sim_json_indent(GString *out, int level) {
    for (int i = 0; i < level * SIM_JSON_INDENT; i++)
        g_string_append_c(out, ' ');
}

static void sim_json_append_value(GString *out, JsonNode *node) {
    switch (json_node_get_value_type(node)) {
    case G_TYPE_INT64:
        g_string_append_printf(out, "%" G_GINT64_FORMAT, json_node_get_int(node));
        break;
    case G_TYPE_DOUBLE:
        pp_json_append_double(out, json_node_get_double(node));
        break;
    case G_TYPE_BOOLEAN:
        g_string_append(out, json_node_get_boolean(node) ? "true" : "false");
        break;
    case G_TYPE_STRING:
        pp_json_append_string(out, json_node_get_string(node));
        break;
    default:
        PP_ABORT("JSON value of type %s", g_type_name(json_node_get_value_type(node)));
    }
}

static void sim_json_append_array(GString *out, JsonArray *array, int level) {
    guint n = json_array_get_length(array);
    g_string_append_c(out, '[');
    for (guint i = 0; i < n; i++) {
        g_string_append(out, i == 0 ? "\n" : ",\n");
        sim_json_indent(out, level + 1);
        sim_json_append_node(out, json_array_get_element(array, i), level + 1);
    }
    if (n > 0) {
        g_string_append_c(out, '\n');
        sim_json_indent(out, level);
    }
    g_string_append_c(out, ']');
}

static void sim_json_append_object(GString *out, JsonObject *object, int level) {
    /* members in insertion order, as the builders added them */
    JsonObjectIter iter;
    const char    *name;
    JsonNode      *member;
    gboolean       first = TRUE;
    g_string_append_c(out, '{');
    json_object_iter_init_ordered(&iter, object);
    while (json_object_iter_next_ordered(&iter, &name, &member)) {
        g_string_append(out, first ? "\n" : ",\n");
        first = FALSE;
        sim_json_indent(out, level + 1);
        pp_json_append_string(out, name);
        g_string_append(out, " : ");
        sim_json_append_node(out, member, level + 1);
    }
    /* json-glib indents the closing brace of an empty object too ("{    }" at level 2): kept,
     * so that outputs stay byte-identical to those it wrote */
    if (!first)
        g_string_append_c(out, '\n');
    sim_json_indent(out, level);
    g_string_append_c(out, '}');
}

static void sim_json_append_node(GString *out, JsonNode *node, int level) {
    switch (JSON_NODE_TYPE(node)) {
    case JSON_NODE_NULL:
        g_string_append(out, "null");
        break;
    case JSON_NODE_VALUE:
        sim_json_append_value(out, node);
        break;
    case JSON_NODE_ARRAY:
        sim_json_append_array(out, json_node_get_array(node), level);
        break;
    case JSON_NODE_OBJECT:
        sim_json_append_object(out, json_node_get_object(node), level);
        break;
    }
}

char *sim_json_to_string(JsonNode *root) {
    GString *out = g_string_new(NULL);
    sim_json_append_node(out, root, 0);
    return g_string_free(out, FALSE);
}
