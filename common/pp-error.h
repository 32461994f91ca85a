/* SPDX-License-Identifier: MIT
 * pp-error.h: the three error mechanisms of the project (docs/style.md §3).
 * Bugs and broken invariants abort through PP_ASSERT/PP_ABORT (never compiled out);
 * bad input is a GError in one of the domains below.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* --- aborts for bugs --- */
G_NORETURN void pp_abort(const char *file, int line, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

#define PP_ABORT(...) pp_abort(__FILE__, __LINE__, __VA_ARGS__)
#define PP_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (G_UNLIKELY(!(cond)))                                                                   \
            pp_abort(__FILE__, __LINE__, "assertion failed: %s", #cond);                           \
    } while (0)
#define PP_UNREACHABLE() pp_abort(__FILE__, __LINE__, "unreachable code reached")

/* --- error domains --- */
#define PP_SCHEDULE_ERROR (pp_schedule_error_quark())
#define PP_SCENARIO_ERROR (pp_scenario_error_quark())
#define PP_IO_ERROR       (pp_io_error_quark())

GQuark pp_schedule_error_quark(void);
GQuark pp_scenario_error_quark(void);
GQuark pp_io_error_quark(void);

typedef enum {
    PP_SCHEDULE_ERROR_INVALID_PARAMS, /* a generator cannot build the asked-for schedule */
    PP_SCHEDULE_ERROR_MISSING_OP,     /* a (mb, chunk) lacks its F, B, W or BW */
    PP_SCHEDULE_ERROR_DUPLICATE_OP,   /* an op appears twice */
    PP_SCHEDULE_ERROR_ORDER,          /* an op precedes one it depends on, on the same stage */
    PP_SCHEDULE_ERROR_DEADLOCK,       /* the dependency graph has a cycle */
    PP_SCHEDULE_ERROR_BUFFERS,        /* peak in-flight exceeds the declared buffer count */
    PP_SCHEDULE_ERROR_UNKNOWN_KIND,   /* no generator of that name */
    PP_SCHEDULE_ERROR_PARSE,          /* a custom order file is malformed */
} PpScheduleError;

typedef enum {
    PP_SCENARIO_ERROR_NOT_FOUND, /* the file cannot be read */
    PP_SCENARIO_ERROR_PARSE,     /* GKeyFile syntax error */
    PP_SCENARIO_ERROR_UNKNOWN_SECTION,
    PP_SCENARIO_ERROR_UNKNOWN_KEY,
    PP_SCENARIO_ERROR_INVALID_VALUE, /* malformed, negative or out-of-range value */
    PP_SCENARIO_ERROR_UNKNOWN_PRESET,
    PP_SCENARIO_ERROR_INCONSISTENT, /* keys that disagree with each other */
    PP_SCENARIO_ERROR_MISSING_KEY,  /* a required key (or section) is absent */
} PpScenarioError;

typedef enum {
    PP_IO_ERROR_OPEN,      /* cannot open or create a file */
    PP_IO_ERROR_WRITE,     /* short write, rename failed */
    PP_IO_ERROR_CORRUPT,   /* a file's content is not what its format says */
    PP_IO_ERROR_MISMATCH,  /* a valid file that does not fit this run (shapes, vocabulary) */
    PP_IO_ERROR_NONFINITE, /* a tensor to save or load holds NaN or infinity */
    PP_IO_ERROR_EXISTS,    /* an output would replace data that another run wrote */
} PpIoError;

/* --- whole files --- */
/* g_file_get_contents() of @path into @text (transfer full; length in @len, nullable). On
 * failure sets PP_IO_ERROR_OPEN "cannot read WHAT PATH: REASON" (@what nullable: "cannot read
 * PATH: REASON"). */
gboolean pp_file_read(const char *path, const char *what, char **text, gsize *len, GError **error);
/* Writes @len bytes of @data to @path through a temporary file and a rename
 * (g_file_set_contents()), so @path is never half-written. Returns FALSE and sets @error
 * (PP_IO_ERROR_WRITE "cannot write PATH: REASON") on failure. */
gboolean pp_file_write(const char *path, const char *data, gsize len, GError **error);

G_END_DECLS
