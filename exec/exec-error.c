/* SPDX-License-Identifier: MIT
 * exec-error.c: the executor's GError domain (exec-error.h).
 */
#include "exec-error.h"

/* The quark's name is stringified as written: keep clang-format from spacing the dashes. */
// clang-format off
G_DEFINE_QUARK(exec-error-quark, exec_error)
// clang-format on
