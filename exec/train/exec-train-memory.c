/* SPDX-License-Identifier: MIT
 * exec-train-memory.c: pacer-train's memory report: every process's stages, predicted by the
 * simulator's memory model and as its backend allocated them, gathered on rank 0 into
 * progress notes, the run's summary and memory.csv (one row per stage and replica).
 */
#include "exec-train-private.h"

#include <stdlib.h>

#include "pp-error.h"

/* One row of memory.csv: a stage of a replica, as the process running it accounts it. */
typedef struct {
    int32_t         stage, replica;
    PpMemoryBytes   predicted;
    ExecMemoryBytes actual;
} ExecTrainMemoryRow;

static const char exec_train_memory_header[] =
    "stage,replica,device,predicted_params_bytes,predicted_grads_bytes,predicted_optim_bytes,"
    "predicted_stash_bytes,predicted_act_bytes,predicted_bytes,params_bytes,grads_bytes,"
    "optim_bytes,stash_bytes,act_bytes,message_bytes,workspace_bytes,actual_bytes\n";

/* By stage, then replica. */
static int exec_train_memory_row_cmp(const void *a, const void *b) {
    const ExecTrainMemoryRow *x = a, *y = b;
    if (x->stage != y->stage)
        return x->stage < y->stage ? -1 : 1;
    return (x->replica > y->replica) - (x->replica < y->replica);
}

/* The rows of this process's local stages (none when the backend does not account memory). */
static GBytes *exec_train_memory_local(const ExecPipeline *pipeline) {
    g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(ExecTrainMemoryRow));
    for (int32_t s = 0; s < exec_pipeline_n_stages(pipeline); s++) {
        ExecTrainMemoryRow row = {.stage = s, .replica = exec_pipeline_parallel(pipeline)->replica};
        if (exec_pipeline_memory(pipeline, s, &row.predicted, &row.actual))
            g_array_append_val(rows, row);
    }
    return g_bytes_new(rows->data, rows->len * sizeof(ExecTrainMemoryRow));
}

static void exec_train_memory_note(ExecProgress *progress, const ExecTrainMemoryRow *r,
                                   int32_t replicas) {
    const PpMemoryBytes   *p = &r->predicted;
    const ExecMemoryBytes *a = &r->actual;
    g_autofree char       *who = replicas > 1
                                     ? g_strdup_printf("stage %d replica %d", r->stage, r->replica)
                                     : g_strdup_printf("stage %d", r->stage);
    g_autofree char       *where =
        a->device >= 0 ? g_strdup_printf("device %d", a->device) : g_strdup("the host");
    const double gib = (double)(1 << 30);
    exec_progress_note(progress, FALSE,
                       "%s on %s: %.3f GiB predicted (params %.3f, grads %.3f, optimizer %.3f, "
                       "stash %.3f, activations %.3f), %.3f GiB allocated (params %.3f, grads "
                       "%.3f, optimizer %.3f, stash %.3f, activations %.3f, messages %.3f, "
                       "workspace %.3f; ratio %.3f)",
                       who, where, (double)p->total_bytes / gib, (double)p->params_bytes / gib,
                       (double)p->grads_bytes / gib, (double)p->optim_bytes / gib,
                       (double)p->stash_bytes / gib, (double)p->act_bytes / gib,
                       (double)a->total_bytes / gib, (double)a->params_bytes / gib,
                       (double)a->grads_bytes / gib, (double)a->optim_bytes / gib,
                       (double)a->stash_bytes / gib, (double)a->act_bytes / gib,
                       (double)a->message_bytes / gib, (double)a->workspace_bytes / gib,
                       p->total_bytes > 0 ? (double)a->total_bytes / (double)p->total_bytes : 0.0);
}

static void exec_train_memory_csv_row(GString *csv, const ExecTrainMemoryRow *r) {
    const PpMemoryBytes   *p = &r->predicted;
    const ExecMemoryBytes *a = &r->actual;
    const int64_t cells[] = {p->params_bytes,    p->grads_bytes, p->optim_bytes,  p->stash_bytes,
                             p->act_bytes,       p->total_bytes, a->params_bytes, a->grads_bytes,
                             a->optim_bytes,     a->stash_bytes, a->act_bytes,    a->message_bytes,
                             a->workspace_bytes, a->total_bytes};
    g_string_append_printf(csv, "%d,%d,%d", r->stage, r->replica, a->device);
    for (size_t i = 0; i < G_N_ELEMENTS(cells); i++)
        g_string_append_printf(csv, ",%" G_GINT64_FORMAT, cells[i]);
    g_string_append_c(csv, '\n');
}

gboolean exec_train_memory_report(const ExecPipeline *pipeline, ExecComm *comm,
                                  ExecProgress *progress, const char *dir,
                                  ExecTrainSummary *summary, GError **error) {
    summary->predicted_bytes = 0;
    summary->actual_bytes = -1;
    g_autoptr(GBytes) mine = exec_train_memory_local(pipeline);
    g_autoptr(GPtrArray) all = exec_comm_gather(comm, 0, mine, "the memory report", error);
    if (all == NULL)
        return FALSE;
    if (exec_comm_rank(comm) != 0)
        return TRUE;
    g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(ExecTrainMemoryRow));
    for (guint i = 0; i < all->len; i++) {
        gsize       size = 0;
        const void *data = g_bytes_get_data(g_ptr_array_index(all, i), &size);
        PP_ASSERT(size % sizeof(ExecTrainMemoryRow) == 0); /* exec_train_memory_local()'s */
        g_array_append_vals(rows, data, (guint)(size / sizeof(ExecTrainMemoryRow)));
    }
    if (rows->len == 0)
        return TRUE; /* the backend does not account its memory */
    qsort(rows->data, rows->len, sizeof(ExecTrainMemoryRow), exec_train_memory_row_cmp);
    g_autoptr(GString) csv = g_string_new(exec_train_memory_header);
    summary->actual_bytes = 0;
    for (guint i = 0; i < rows->len; i++) {
        const ExecTrainMemoryRow *r = &g_array_index(rows, ExecTrainMemoryRow, i);
        summary->predicted_bytes += r->predicted.total_bytes;
        summary->actual_bytes += r->actual.total_bytes;
        exec_train_memory_note(progress, r, exec_pipeline_parallel(pipeline)->replicas);
        exec_train_memory_csv_row(csv, r);
    }
    if (dir == NULL)
        return TRUE;
    g_autofree char *path = g_build_filename(dir, "memory.csv", NULL);
    return exec_train_write_file(path, csv->str, error);
}
