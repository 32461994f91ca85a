/* SPDX-License-Identifier: MIT
 * pp-trace.c: the trace table (append, total-order sort), its CSV writer (integers only,
 * fprintf into PATH.tmp then rename, so readers never see half a file) and reader, and the
 * line-by-line libcsv reader shared with the custom order files.
 */
#include "pp-trace.h"

#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"

#define PP_TRACE_MIN_CAPACITY 64
#define PP_TRACE_N_COLUMNS    10 /* without the optional replica column */

static const char *const pp_trace_columns[PP_TRACE_N_COLUMNS + 1] = {
    "stage",  "op",        "mb",        "chunk",    "step",    "start_ns",
    "end_ns", "version_f", "version_b", "resource", "replica",
};

static const char *const pp_resource_names[PP_RESOURCE_N_KINDS] = {
    [PP_RESOURCE_COMPUTE] = "compute", [PP_RESOURCE_SEND] = "send",
    [PP_RESOURCE_RECV] = "recv",       [PP_RESOURCE_REFERENCE] = "reference",
    [PP_RESOURCE_REDUCE] = "reduce",
};

const char *pp_resource_name(PpResource resource) {
    PP_ASSERT(resource >= 0 && resource < PP_RESOURCE_N_KINDS);
    return pp_resource_names[resource];
}

PpResource pp_resource_from_name(const char *name) {
    for (int r = 0; r < PP_RESOURCE_N_KINDS; r++) {
        if (strcmp(name, pp_resource_names[r]) == 0)
            return (PpResource)r;
    }
    return PP_RESOURCE_N_KINDS;
}

/* --- the table --- */

PpTrace *pp_trace_new(void) {
    return g_new0(PpTrace, 1);
}

void pp_trace_free(PpTrace *trace) {
    if (trace == NULL)
        return;
    g_free(trace->rows);
    g_free(trace);
}

void pp_trace_append(PpTrace *trace, const PpTraceRow *row) {
    if (trace->n_rows == trace->capacity) {
        trace->capacity = MAX(PP_TRACE_MIN_CAPACITY, 2 * trace->capacity);
        trace->rows = g_renew(PpTraceRow, trace->rows, (gsize)trace->capacity);
    }
    trace->rows[trace->n_rows++] = *row;
}

#define PP_CMP(a, b)                                                                               \
    do {                                                                                           \
        if ((a) != (b))                                                                            \
            return (a) < (b) ? -1 : 1;                                                             \
    } while (0)

static int pp_trace_row_cmp(const void *pa, const void *pb) {
    const PpTraceRow *a = pa, *b = pb;
    PP_CMP(a->start_ns, b->start_ns);
    PP_CMP(a->stage, b->stage);
    PP_CMP(a->replica, b->replica);
    PP_CMP(a->resource, b->resource);
    PP_CMP(a->end_ns, b->end_ns);
    PP_CMP(a->kind, b->kind);
    PP_CMP(a->mb, b->mb);
    PP_CMP(a->chunk, b->chunk);
    PP_CMP(a->step, b->step); // U rows differ only by step
    PP_CMP(a->version_f, b->version_f);
    PP_CMP(a->version_b, b->version_b);
    return 0;
}

void pp_trace_sort(PpTrace *trace) {
    if (trace->n_rows > 1)
        qsort(trace->rows, (size_t)trace->n_rows, sizeof(PpTraceRow), pp_trace_row_cmp);
}

/* --- writing --- */

gboolean pp_trace_write_csv(const PpTrace *trace, const char *path, GError **error) {
    g_autofree char *tmp = g_strconcat(path, ".tmp", NULL);
    FILE            *f = fopen(tmp, "w");
    if (f == NULL) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot create trace file '%s': %s", tmp,
                    g_strerror(errno));
        return FALSE;
    }
    gboolean replicas = FALSE;
    for (int64_t i = 0; i < trace->n_rows && !replicas; i++)
        replicas = trace->rows[i].replica != 0;
    int n_columns = PP_TRACE_N_COLUMNS + (replicas ? 1 : 0);
    for (int c = 0; c < n_columns; c++)
        fprintf(f, "%s%c", pp_trace_columns[c], c + 1 < n_columns ? ',' : '\n');
    for (int64_t i = 0; i < trace->n_rows; i++) {
        const PpTraceRow *r = &trace->rows[i];
        fprintf(f, "%d,%s,%d,%d,%d,%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%d,%d,%s", r->stage,
                pp_op_kind_name(r->kind), r->mb, r->chunk, r->step, r->start_ns, r->end_ns,
                r->version_f, r->version_b, pp_resource_name(r->resource));
        if (replicas)
            fprintf(f, ",%d", r->replica);
        fputc('\n', f);
    }
    gboolean failed = ferror(f) != 0;
    failed = (fclose(f) != 0) || failed;
    if (failed || rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot write trace file '%s': %s", path,
                    g_strerror(err));
        return FALSE;
    }
    return TRUE;
}

/* --- CSV reading --- */

typedef struct {
    GPtrArray *fields; /* (n_fields) char *, owned */
    int32_t    n_rows; /* rows libcsv ended on this line */
} PpCsvLine;

static void pp_csv_on_field(void *s, size_t len, void *data) {
    PpCsvLine *line = data;
    g_ptr_array_add(line->fields, g_strndup(s ? s : "", len));
}

static void pp_csv_on_row(int c, void *data) {
    (void)c;
    PpCsvLine *line = data;
    line->n_rows++;
}

gboolean pp_csv_read(const char *path, PpCsvRowFn row_fn, void *user_data, GError **error) {
    g_autofree char *text = NULL;
    g_autoptr(GError) local = NULL;
    if (!g_file_get_contents(path, &text, NULL, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot read '%s': %s", path,
                    local->message);
        return FALSE;
    }
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (int64_t l = 0; lines[l] != NULL; l++) {
        char  *s = lines[l];
        size_t len = strlen(s);
        if (len > 0 && s[len - 1] == '\r')
            s[--len] = '\0';
        if (len == 0)
            continue;
        struct csv_parser parser;
        PP_ASSERT(csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) == 0);
        PpCsvLine line = {.fields = g_ptr_array_new_with_free_func(g_free), .n_rows = 0};
        gboolean  ok = csv_parse(&parser, s, len, pp_csv_on_field, pp_csv_on_row, &line) == len;
        ok = ok && csv_fini(&parser, pp_csv_on_field, pp_csv_on_row, &line) == 0;
        if (!ok || line.n_rows != 1) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s:%" G_GINT64_FORMAT ": not a valid CSV line (%s)", path, l + 1,
                        ok ? "quoted field spans lines" : csv_strerror(csv_error(&parser)));
            csv_free(&parser);
            g_ptr_array_free(line.fields, TRUE);
            return FALSE;
        }
        csv_free(&parser);
        ok =
            row_fn((char **)line.fields->pdata, (int32_t)line.fields->len, l + 1, user_data, error);
        g_ptr_array_free(line.fields, TRUE);
        if (!ok)
            return FALSE;
    }
    return TRUE;
}

/* --- reading traces --- */

typedef struct {
    const char *path;
    PpTrace    *trace;
    gboolean    header_seen;
    int32_t     n_columns; /* the header's: PP_TRACE_N_COLUMNS, or one more with replica */
} PpTraceReader;

static gboolean pp_trace_parse_int(const PpTraceReader *rd, char **fields, int col, int64_t line,
                                   int64_t min, int64_t max, int64_t *out, GError **error) {
    gint64 v = 0;
    if (!g_ascii_string_to_signed(fields[col], 10, min, max, &v, NULL)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s:%" G_GINT64_FORMAT ": column %d (%s): '%s' is not an integer in "
                    "%" G_GINT64_FORMAT "..%" G_GINT64_FORMAT,
                    rd->path, line, col + 1, pp_trace_columns[col], fields[col], min, max);
        return FALSE;
    }
    *out = v;
    return TRUE;
}

static gboolean pp_trace_on_row(char **fields, int32_t n_fields, int64_t line, void *user_data,
                                GError **error) {
    PpTraceReader *rd = user_data;
    if (!rd->header_seen && n_fields == PP_TRACE_N_COLUMNS + 1)
        rd->n_columns = PP_TRACE_N_COLUMNS + 1;
    if (n_fields != rd->n_columns) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s:%" G_GINT64_FORMAT ": %d columns; a trace line has %d "
                    "(stage,op,mb,chunk,step,start_ns,end_ns,version_f,version_b,resource%s)",
                    rd->path, line, n_fields, rd->n_columns,
                    rd->n_columns > PP_TRACE_N_COLUMNS ? ",replica" : "");
        return FALSE;
    }
    if (!rd->header_seen) {
        for (int c = 0; c < rd->n_columns; c++) {
            if (strcmp(fields[c], pp_trace_columns[c]) == 0)
                continue;
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                        "%s:%" G_GINT64_FORMAT ": column %d of the header is '%s'; expected "
                        "'%s'",
                        rd->path, line, c + 1, fields[c], pp_trace_columns[c]);
            return FALSE;
        }
        rd->header_seen = TRUE;
        return TRUE;
    }
    PpTraceRow       row = {0};
    int64_t          v[PP_TRACE_N_COLUMNS] = {0};
    static const int int_cols[] = {0, 2, 3, 4, 5, 6, 7, 8};
    for (size_t k = 0; k < G_N_ELEMENTS(int_cols); k++) {
        int      c = int_cols[k];
        gboolean wide = c == 5 || c == 6; // start_ns, end_ns
        if (!pp_trace_parse_int(rd, fields, c, line, wide ? G_MININT64 : -1,
                                wide ? G_MAXINT64 : G_MAXINT32, &v[c], error))
            return FALSE;
    }
    row.kind = pp_op_kind_from_name(fields[1]);
    if (row.kind == PP_OP_N_KINDS) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s:%" G_GINT64_FORMAT ": column 2 (op): '%s' is not one of F, B, W, BW, U",
                    rd->path, line, fields[1]);
        return FALSE;
    }
    row.resource = pp_resource_from_name(fields[9]);
    if (row.resource == PP_RESOURCE_N_KINDS) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s:%" G_GINT64_FORMAT ": column 10 (resource): '%s' is not one of "
                    "compute, send, recv, reference, reduce",
                    rd->path, line, fields[9]);
        return FALSE;
    }
    if (rd->n_columns > PP_TRACE_N_COLUMNS) {
        int64_t replica = 0;
        if (!pp_trace_parse_int(rd, fields, PP_TRACE_N_COLUMNS, line, 0, G_MAXINT32, &replica,
                                error))
            return FALSE;
        row.replica = (int32_t)replica;
    }
    row.stage = (int32_t)v[0];
    row.mb = (int32_t)v[2];
    row.chunk = (int32_t)v[3];
    row.step = (int32_t)v[4];
    row.start_ns = v[5];
    row.end_ns = v[6];
    row.version_f = (int32_t)v[7];
    row.version_b = (int32_t)v[8];
    pp_trace_append(rd->trace, &row);
    return TRUE;
}

PpTrace *pp_trace_read_csv(const char *path, GError **error) {
    g_autoptr(PpTrace) trace = pp_trace_new();
    PpTraceReader rd = {
        .path = path, .trace = trace, .header_seen = FALSE, .n_columns = PP_TRACE_N_COLUMNS};
    if (!pp_csv_read(path, pp_trace_on_row, &rd, error))
        return NULL;
    if (!rd.header_seen) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_CORRUPT,
                    "%s: empty file; a trace starts with the header line "
                    "stage,op,mb,chunk,step,start_ns,end_ns,version_f,version_b,resource",
                    path);
        return NULL;
    }
    return g_steal_pointer(&trace);
}
