/* SPDX-License-Identifier: MIT
 * pp-sched-custom.c: the "custom" kind, per-stage op orders read from a CSV file with the
 * header stage,index,op,mb,chunk (op F/B/W/BW/U; U rows take mb and chunk -1 or empty), the
 * format pp_schedule_write_order() writes. Stages, chunks, micro-batches and split backward
 * are inferred; n_buffers is the measured peak; validation (cycles included) runs after.
 */
#include <string.h>

#include "pp-error.h"
#include "pp-sched-gen.h"
#include "pp-trace.h"

#define PP_CUSTOM_MAX_STAGES 4096
#define PP_CUSTOM_MAX_CHUNKS 64
#define PP_CUSTOM_N_COLUMNS  5

static const char *const pp_custom_columns[PP_CUSTOM_N_COLUMNS] = {
    "stage", "index", "op", "mb", "chunk",
};

typedef struct {
    PpOp    op;
    int32_t index;
    int64_t line;
} PpCustomRow;

typedef struct {
    const char *path;
    GArray     *rows; /* (n) PpCustomRow */
    gboolean    header_seen;
} PpCustomReader;

static gboolean pp_custom_field_error(const PpCustomReader *rd, int64_t line, int col,
                                      const char *value, const char *valid, GError **error) {
    g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_PARSE,
                "%s:%" G_GINT64_FORMAT ": field '%s' = '%s' is invalid; valid: %s", rd->path, line,
                pp_custom_columns[col], value, valid);
    return FALSE;
}

static gboolean pp_custom_parse_int(const PpCustomReader *rd, char **fields, int col, int64_t line,
                                    int64_t max, int32_t *out, GError **error) {
    gint64 v = 0;
    if (!g_ascii_string_to_signed(fields[col], 10, 0, max, &v, NULL)) {
        g_autofree char *valid = g_strdup_printf("an integer in 0..%" G_GINT64_FORMAT, max);
        return pp_custom_field_error(rd, line, col, fields[col], valid, error);
    }
    *out = (int32_t)v;
    return TRUE;
}

static gboolean pp_custom_on_row(char **fields, int32_t n_fields, int64_t line, void *user_data,
                                 GError **error) {
    PpCustomReader *rd = user_data;
    if (n_fields != PP_CUSTOM_N_COLUMNS) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_PARSE,
                    "%s:%" G_GINT64_FORMAT ": %d fields; every line has 5 "
                    "(stage,index,op,mb,chunk)",
                    rd->path, line, n_fields);
        return FALSE;
    }
    if (!rd->header_seen) {
        for (int c = 0; c < PP_CUSTOM_N_COLUMNS; c++) {
            if (strcmp(fields[c], pp_custom_columns[c]) != 0)
                return pp_custom_field_error(rd, line, c, fields[c],
                                             "the header stage,index,op,mb,chunk", error);
        }
        rd->header_seen = TRUE;
        return TRUE;
    }
    PpCustomRow row = {.line = line};
    row.op.kind = pp_op_kind_from_name(fields[2]);
    if (row.op.kind == PP_OP_N_KINDS)
        return pp_custom_field_error(rd, line, 2, fields[2], "F, B, W, BW or U", error);
    if (!pp_custom_parse_int(rd, fields, 0, line, PP_CUSTOM_MAX_STAGES - 1, &row.op.stage, error) ||
        !pp_custom_parse_int(rd, fields, 1, line, G_MAXINT32 / 4, &row.index, error))
        return FALSE;
    if (row.op.kind == PP_OP_UPDATE) {
        for (int c = 3; c < PP_CUSTOM_N_COLUMNS; c++) {
            if (fields[c][0] != '\0' && strcmp(fields[c], "-1") != 0)
                return pp_custom_field_error(rd, line, c, fields[c], "-1 or empty on a U row",
                                             error);
        }
        row.op.mb = row.op.chunk = -1;
    } else if (!pp_custom_parse_int(rd, fields, 3, line, PP_SCHED_MAX_UNITS - 1, &row.op.mb,
                                    error) ||
               !pp_custom_parse_int(rd, fields, 4, line, PP_CUSTOM_MAX_CHUNKS - 1, &row.op.chunk,
                                    error)) {
        return FALSE;
    }
    g_array_append_val(rd->rows, row);
    return TRUE;
}

static gint pp_custom_row_cmp(gconstpointer pa, gconstpointer pb) {
    const PpCustomRow *a = pa, *b = pb;
    if (a->op.stage != b->op.stage)
        return a->op.stage < b->op.stage ? -1 : 1;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return a->line < b->line ? -1 : (a->line > b->line);
}

/* Sorted rows must number each stage's ops 0, 1, 2, ... */
static gboolean pp_custom_check_indices(const PpCustomReader *rd, GError **error) {
    const PpCustomRow *rows = (const PpCustomRow *)(void *)rd->rows->data;
    int32_t            expect = 0;
    for (guint i = 0; i < rd->rows->len; i++) {
        if (i > 0 && rows[i].op.stage != rows[i - 1].op.stage)
            expect = 0;
        if (rows[i].index == expect) {
            expect++;
            continue;
        }
        if (rows[i].index < expect) // sorted: only a repeat can come back below
            g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_PARSE,
                        "%s:%" G_GINT64_FORMAT ": field 'index' = %d repeats line %" G_GINT64_FORMAT
                        " on stage %d; valid: each index once per stage",
                        rd->path, rows[i].line, rows[i].index, rows[i - 1].line, rows[i].op.stage);
        else
            g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_PARSE,
                        "%s:%" G_GINT64_FORMAT ": field 'index' = %d leaves a gap on stage %d; "
                        "valid: %d (indices run 0, 1, 2, ... per stage)",
                        rd->path, rows[i].line, rows[i].index, rows[i].op.stage, expect);
        return FALSE;
    }
    return TRUE;
}

/* Every U must apply a gradient (a BW or W of its stage since that stage's previous U) and every
 * stage must update as often as stage 0: the updates are the run's optimizer steps. @rows: sorted
 * by (stage, index). */
static gboolean pp_custom_check_updates(const PpCustomReader *rd, GError **error) {
    const PpCustomRow *rows = (const PpCustomRow *)(void *)rd->rows->data;
    int32_t            grads = 0, updates = 0, updates_0 = 0;
    for (guint i = 0; i < rd->rows->len; i++) {
        const PpOp *op = &rows[i].op;
        if (op->kind == PP_OP_WEIGHT || op->kind == PP_OP_BACKWARD_FULL)
            grads++;
        if (op->kind == PP_OP_UPDATE) {
            if (grads == 0) {
                g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_PARSE,
                            "%s:%" G_GINT64_FORMAT ": U on stage %d applies no gradient (no BW "
                            "or W of that stage since its previous U); valid: a U after each "
                            "group of backwards",
                            rd->path, rows[i].line, op->stage);
                return FALSE;
            }
            grads = 0;
            updates++;
        }
        if (i + 1 < rd->rows->len && rows[i + 1].op.stage == op->stage)
            continue;
        /* the stage's last op */
        if (op->stage == 0)
            updates_0 = updates;
        if (updates != updates_0) {
            g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_PARSE,
                        "%s: stage 0 has %d U ops but stage %d has %d; valid: the same number "
                        "of updates (optimizer steps) on every stage",
                        rd->path, updates_0, op->stage, updates);
            return FALSE;
        }
        grads = updates = 0;
    }
    return TRUE;
}

static PpSchedule *pp_sched_build_custom(const PpScheduleParams *params, GError **error) {
    const char *kind = pp_sched_kind_custom.name;
    if (params->order_file == NULL) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule 'custom': order_file is not set; valid: a CSV file with the "
                    "header stage,index,op,mb,chunk");
        return NULL;
    }
    g_autoptr(GArray) rows_arr = g_array_new(FALSE, FALSE, sizeof(PpCustomRow));
    PpCustomReader rd = {.path = params->order_file, .rows = rows_arr, .header_seen = FALSE};
    if (!pp_csv_read(params->order_file, pp_custom_on_row, &rd, error))
        return NULL;
    if (rows_arr->len == 0) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_PARSE,
                    "%s: no ops; valid: the header stage,index,op,mb,chunk and one line per op",
                    params->order_file);
        return NULL;
    }
    g_array_sort(rows_arr, pp_custom_row_cmp);
    if (!pp_custom_check_indices(&rd, error))
        return NULL;

    const PpCustomRow *rows = (const PpCustomRow *)(void *)rows_arr->data;
    int32_t            n = (int32_t)rows_arr->len;
    int32_t            n_stages = rows[n - 1].op.stage + 1, n_chunks = 1, n_mb = 0;
    gboolean           split = FALSE;
    for (int32_t i = 0; i < n; i++) {
        n_chunks = MAX(n_chunks, rows[i].op.chunk + 1);
        n_mb = MAX(n_mb, rows[i].op.mb + 1);
        split = split || rows[i].op.kind == PP_OP_BACKWARD || rows[i].op.kind == PP_OP_WEIGHT;
    }
    if (n_mb == 0) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_PARSE,
                    "%s: U rows only, no micro-batch; valid: F and B (or BW) rows for "
                    "micro-batches 0, 1, ... besides the U rows",
                    params->order_file);
        return NULL;
    }
    if (!pp_sched_check_size(kind, n_mb, (int64_t)n_stages * n_chunks, error))
        return NULL;
    /* Every (mb, virtual stage) needs an F: count them before allocating per-unit tables, so
     * that a few rows naming micro-batch 16777215 cost no more than the rows themselves. */
    int64_t n_f = 0;
    for (int32_t i = 0; i < n; i++)
        n_f += rows[i].op.kind == PP_OP_FORWARD;
    if (n_f < (int64_t)n_mb * n_stages * n_chunks) {
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_MISSING_OP,
                    "%s: %" G_GINT64_FORMAT " F ops for micro-batches 0..%d on %d stages x %d "
                    "chunks; valid: one F per micro-batch on every (stage, chunk)",
                    params->order_file, n_f, n_mb - 1, n_stages, n_chunks);
        return NULL;
    }
    if (!pp_custom_check_updates(&rd, error))
        return NULL;

    /* A micro-batch belongs to the update that follows its last backward of chunk 0 on
     * stage 0 (op.step); the schedule is synchronous when every stage has the same number
     * of updates and every op of a micro-batch runs at the weight version equal to its step. */
    g_autofree int32_t *mb_step = g_new0(int32_t, (gsize)n_mb + 1);
    g_autofree int32_t *n_updates = g_new0(int32_t, (gsize)n_stages);
    PpOpKind            last_backward = split ? PP_OP_WEIGHT : PP_OP_BACKWARD_FULL;
    for (int32_t i = 0; i < n && rows[i].op.stage == 0; i++) {
        if (rows[i].op.kind == PP_OP_UPDATE)
            n_updates[0]++;
        else if (rows[i].op.kind == last_backward && rows[i].op.chunk == 0)
            mb_step[rows[i].op.mb] = n_updates[0];
    }
    g_autoptr(PpSchedule) sched = pp_schedule_alloc(kind, n_stages, n_chunks);
    sched->n_mb = n_mb;
    sched->split_backward = split;
    sched->weight_mode = pp_sched_kind_custom.weights;
    sched->n_steps = n_updates[0];
    sched->mb_per_step = sched->n_steps > 0 ? (n_mb + sched->n_steps - 1) / sched->n_steps : n_mb;
    gboolean synchronous = TRUE;
    memset(n_updates, 0, sizeof(int32_t) * (gsize)n_stages);
    for (int32_t i = 0; i < n; i++) {
        PpOp    op = rows[i].op;
        int32_t s = op.stage;
        if (op.kind == PP_OP_UPDATE) {
            op.step = n_updates[s]++;
        } else {
            op.step = mb_step[op.mb];
            synchronous = synchronous && n_updates[s] == op.step;
        }
        pp_schedule_append(sched, &op);
    }
    for (int32_t s = 0; s < n_stages; s++) {
        synchronous = synchronous && n_updates[s] == n_updates[0];
        sched->n_buffers[s] = pp_schedule_peak_inflight(sched, s);
    }
    sched->synchronous = synchronous;
    return g_steal_pointer(&sched);
}

/* The order file decides the chunks per device; pipeline.chunks stays 1. */
const PpSchedKindInfo pp_sched_kind_custom = {
    .name = "custom",
    .build = pp_sched_build_custom,
    .summary = "per-stage op orders read from a CSV order file",
    .batch = PP_BATCH_MICROBATCHES,
    .min_chunks = 1,
    .max_chunks = 1,
    .weights = PP_WEIGHTS_CURRENT,
    .sync = PP_SCHED_SYNC_FROM_ORDER,
    .needs_order_file = TRUE,
};
