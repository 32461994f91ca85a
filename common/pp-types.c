/* SPDX-License-Identifier: MIT
 * pp-types.c: short names of op kinds ("F", "B", "W", "BW", "U"), the spelling used by
 * custom order CSVs, traces and error messages.
 */
#include "pp-types.h"

#include <string.h>

#include "pp-error.h"

static const char *const pp_op_kind_names[PP_OP_N_KINDS] = {
    [PP_OP_FORWARD] = "F",        [PP_OP_BACKWARD] = "B", [PP_OP_WEIGHT] = "W",
    [PP_OP_BACKWARD_FULL] = "BW", [PP_OP_UPDATE] = "U",
};

const char *pp_op_kind_name(PpOpKind kind) {
    PP_ASSERT(kind >= 0 && kind < PP_OP_N_KINDS);
    return pp_op_kind_names[kind];
}

PpOpKind pp_op_kind_from_name(const char *name) {
    for (int k = 0; k < PP_OP_N_KINDS; k++) {
        if (strcmp(name, pp_op_kind_names[k]) == 0)
            return (PpOpKind)k;
    }
    return PP_OP_N_KINDS;
}
