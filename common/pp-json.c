/* SPDX-License-Identifier: MIT
 * pp-json.c: JSON numbers and strings (see pp-json.h).
 */
#include "pp-json.h"

#include <math.h>
#include <string.h>

void pp_json_append_double(GString *out, double value) {
    if (!isfinite(value)) {
        g_string_append(out, "null");
        return;
    }
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(buf, sizeof buf, "%.17g", value);
    g_string_append(out, buf);
    /* "%.17g" gives digits, a sign, '.', 'e' and a signed exponent only: an integer-looking
     * result gets ".0"; one with an exponent is already a valid JSON number. */
    if (strpbrk(buf, ".e") == NULL)
        g_string_append(out, ".0");
}

void pp_json_append_string(GString *out, const char *text) {
    g_string_append_c(out, '"');
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        switch (*p) {
        case '"':
            g_string_append(out, "\\\"");
            break;
        case '\\':
            g_string_append(out, "\\\\");
            break;
        case '\b':
            g_string_append(out, "\\b");
            break;
        case '\f':
            g_string_append(out, "\\f");
            break;
        case '\n':
            g_string_append(out, "\\n");
            break;
        case '\r':
            g_string_append(out, "\\r");
            break;
        case '\t':
            g_string_append(out, "\\t");
            break;
        default:
            if (*p < 0x20)
                g_string_append_printf(out, "\\u%04x", *p);
            else
                g_string_append_c(out, (char)*p);
        }
    }
    g_string_append_c(out, '"');
}
