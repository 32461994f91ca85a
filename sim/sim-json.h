/* SPDX-License-Identifier: MIT
 * sim-json.h: writes a json-glib tree as text with pacer's number writer (common/pp-json.h),
 * in json-glib 1.6's indented layout, byte for byte. json-glib's own generator writes 1e20 as
 * "1e+20.0" and NaN as "nan", which no JSON parser accepts; every --json output of pacer-sim goes
 * through here.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* @root as JSON text, indented by two spaces per level ("name" : value, one member or element
 * per line), without a final newline. Doubles as pp_json_append_double() writes them (NaN and
 * infinity as null). Returns: (transfer full). */
char *sim_json_to_string(JsonNode *root);

G_END_DECLS
