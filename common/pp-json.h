/* SPDX-License-Identifier: MIT
 * pp-json.h: the JSON number and string writer every JSON output of pacer goes through
 * (pacer-sim's --json objects, pacer-train evaluate --json), so that any value gives valid
 * JSON (RFC 8259): a double round-trips and is never written as "inf", "nan" or "1e+20.0".
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Appends @value to @out as a JSON number: "%.17g" (locale-independent, so it reads back as
 * the same double), with ".0" added when that leaves a plain integer ("2.0", as json-glib
 * writes doubles, so that readers keep it a double); "1e+20" stays as is. A value that is not
 * finite (NaN, infinity) has no JSON number and is written as null. */
void pp_json_append_double(GString *out, double value);

/* Appends @text to @out as a JSON string with its quotes: '"', '\\' and control characters
 * escaped (\b \f \n \r \t, else \u00XX); other bytes as they are (UTF-8). */
void pp_json_append_string(GString *out, const char *text);

G_END_DECLS
