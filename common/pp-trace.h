/* SPDX-License-Identifier: MIT
 * pp-trace.h: the one trace schema, written by the simulator (predicted) and the executor
 * (measured) alike, so the two compare op by op. CSV columns, in this order:
 *   stage,op,mb,chunk,step,start_ns,end_ns,version_f,version_b,resource
 * version_f / version_b: the weight version (number of updates the stage had applied) that
 * the micro-batch's F and its B/BW used on this stage; both -1 on U rows.
 * resource: "compute" for ops, "send"/"recv" for communication rows (optional rows),
 * "reference" for the executor's speed reference (run.speed_reference): a fixed kernel a stage's
 * worker timed right after its U, in that U's op, mb, chunk and step columns, and "reduce" for
 * the executor's gradient reduction between data-parallel replicas, right before a U, in that
 * U's columns.
 * A trace of data-parallel replicas (pacer-train with parallel.data > 1) has an eleventh
 * column, replica: the replica (0..D-1) whose rank ran the row; a trace without it is one
 * pipeline's (replica 0).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-types.h"

G_BEGIN_DECLS

typedef enum {
    PP_RESOURCE_COMPUTE,
    PP_RESOURCE_SEND,
    PP_RESOURCE_RECV,
    PP_RESOURCE_REFERENCE,
    PP_RESOURCE_REDUCE,
    PP_RESOURCE_N_KINDS
} PpResource;

typedef struct {
    int32_t    stage;
    PpOpKind   kind;
    int32_t    mb;
    int32_t    chunk;
    int32_t    step;
    int64_t    start_ns;
    int64_t    end_ns;
    int32_t    version_f;
    int32_t    version_b;
    PpResource resource;
    int32_t    replica; /* data-parallel replica (0 for one pipeline) */
} PpTraceRow;

typedef struct _PpTrace PpTrace;
struct _PpTrace {
    PpTraceRow *rows; /* (n_rows) */
    int64_t     n_rows;
    int64_t     capacity;
};

PpTrace *pp_trace_new(void);
void     pp_trace_free(PpTrace *trace);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PpTrace, pp_trace_free)

/* Appends a copy of @row. */
void pp_trace_append(PpTrace *trace, const PpTraceRow *row);
/* Sorts rows by (start_ns, stage, resource, end_ns, kind, mb, chunk): a total order, so the
 * written file does not depend on the order rows were appended. */
void pp_trace_sort(PpTrace *trace);
/* Writes the CSV with a header line, atomically (temporary file + rename); the replica column
 * only when a row has a replica other than 0.
 * Returns FALSE and sets @error (PP_IO_ERROR) on failure. */
gboolean pp_trace_write_csv(const PpTrace *trace, const char *path, GError **error);
/* Reads a CSV written by pp_trace_write_csv() (with or without the replica column). Returns:
 * (transfer full), or NULL with @error naming the file, line and column. */
PpTrace *pp_trace_read_csv(const char *path, GError **error);

const char *pp_resource_name(PpResource resource);
/* Parses a resource name; returns PP_RESOURCE_N_KINDS when @name is not one. */
PpResource pp_resource_from_name(const char *name);

/* --- CSV reading shared by the core's file formats (traces, custom order files) --- */

/* Called once per non-empty line with its @n_fields fields (NUL-terminated; a field left
 * empty is ""), and the 1-based @line number. Returns FALSE and sets @error to stop. */
typedef gboolean (*PpCsvRowFn)(char **fields, int32_t n_fields, int64_t line, void *user_data,
                               GError **error);

/* Reads @path line by line with libcsv (quoted fields may not span lines) and calls @row_fn.
 * Returns FALSE with @error set when the file cannot be read (PP_IO_ERROR_OPEN), a line is
 * not valid CSV (PP_IO_ERROR_CORRUPT, naming file and line) or @row_fn fails. */
gboolean pp_csv_read(const char *path, PpCsvRowFn row_fn, void *user_data, GError **error);

G_END_DECLS
