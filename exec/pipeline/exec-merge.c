/* SPDX-License-Identifier: MIT
 * exec-merge.c: a replay across processes (one stage per rank) made whole. While it runs, the
 * losses of the last stage go to rank 0 as they are reported (progress, tokens/s); after it,
 * the ranks agree on how it ended, every rank's part of the ExecRunResult (its stages'
 * executed order, updates, grad norms and learning rates, versions and skip counts; its
 * virtual stages' weight versions; the losses) reaches every rank of its replica, every
 * replica's losses reach every rank, and the trace rows of every rank reach rank 0, so that
 * everything after a replay reads as in one process. Also which rank holds a virtual stage
 * (exec_pipeline_vstage_rank()).
 */
#include "exec-pipeline-private.h"

#include <string.h>

#include "pp-error.h"

int32_t exec_pipeline_vstage_rank(const ExecPipeline *pipeline, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < pipeline->n_vstages);
    /* One stage per process (the backends' rule): this replica's rank of the stage. */
    ExecComm *comm = pipeline->params.comm;
    return comm ? exec_comm_stage_rank(comm, pipeline->vstage_stage[vstage]) : 0;
}

/* A loss report on the wire (EXEC_COMM_REPORT, tag 0). */
typedef struct {
    int32_t mb, step;
    float   loss;
} ExecLossReport;

static void exec_pipeline_receive_report(gpointer user_data, int32_t src, int32_t tag, void *data,
                                         size_t bytes) {
    ExecPipeline  *pipeline = user_data;
    ExecLossReport report;
    (void)src;
    /* Sent by exec_pipeline_report_loss() of the same program. */
    PP_ASSERT(tag == 0 && bytes == sizeof report);
    memcpy(&report, data, sizeof report);
    g_free(data);
    pipeline->params.on_loss(pipeline->params.on_loss_user, report.mb, report.step, report.loss);
}

void exec_pipeline_merge_begin(ExecPipeline *pipeline, const ExecRunResult *res) {
    ExecComm *comm = pipeline->params.comm;
    int32_t   last_stage = pipeline->vstage_stage[pipeline->n_vstages - 1], last = 0;
    int32_t   n_reports = 0;
    /* Rank 0 hears from the last stage of every replica (the progress is the global batch's). */
    for (int32_t d = 0; d < pipeline->params.parallel.replicas; d++) {
        int32_t rank = exec_comm_layout_rank(comm, d, last_stage);
        if (rank != 0) {
            last = rank;
            n_reports += res->n_mb;
        }
    }
    gboolean expect = exec_comm_rank(comm) == 0 && n_reports > 0 && pipeline->params.on_loss;
    exec_comm_set_receiver(comm, EXEC_COMM_REPORT, expect ? exec_pipeline_receive_report : NULL,
                           pipeline);
    exec_comm_begin(comm, last, expect ? n_reports : 0);
}

void exec_pipeline_report_loss(ExecPipeline *pipeline, int32_t mb, int32_t step, float loss) {
    const ExecPipelineParams *p = &pipeline->params;
    if (p->on_loss == NULL)
        return;
    if (exec_comm_rank(p->comm) == 0) {
        p->on_loss(p->on_loss_user, mb, step, loss);
        return;
    }
    ExecLossReport *report = g_new(ExecLossReport, 1);
    *report = (ExecLossReport){.mb = mb, .step = step, .loss = loss};
    exec_comm_post(p->comm, EXEC_COMM_REPORT, 0, 0, report, sizeof *report);
}

/* --- packing: a rank's part of the result, in an order both sides derive from the layout --- */

static void exec_merge_put(GByteArray *out, const void *data, size_t bytes) {
    g_byte_array_append(out, data, (guint)bytes);
}

/* Reads @bytes from *@at of @blob (@size) into @dst. */
static void exec_merge_get(const guint8 *blob, gsize size, gsize *at, void *dst, size_t bytes) {
    /* Packed by exec_merge_pack() of the same program for the same layout. */
    PP_ASSERT(*at + bytes <= size);
    memcpy(dst, blob + *at, bytes);
    *at += bytes;
}

/* What rank @rank (of this rank's replica) contributes: n_skipped; per stage it holds, its
 * version, skip count, updates (grad norms, lrs) and executed ops; per virtual stage it holds,
 * the versions each micro-batch's F and backward used; last, the losses when it holds the
 * last virtual stage (exec_merge_losses() reads them from any replica's part). */
static GBytes *exec_merge_pack(const ExecPipeline *pipeline, const ExecRunResult *res,
                               int32_t rank) {
    GByteArray *out = g_byte_array_new();
    int32_t     skipped = g_atomic_int_get(&res->n_skipped);
    int32_t     stage = exec_comm_rank_stage(pipeline->params.comm, rank);
    exec_merge_put(out, &skipped, sizeof skipped);
    for (int32_t s = 0; s < pipeline->n_stages; s++) {
        if (s != stage)
            continue;
        exec_merge_put(out, &pipeline->version[s], sizeof(int32_t));
        exec_merge_put(out, &pipeline->nonfinite[s], sizeof(int32_t));
        exec_merge_put(out, &res->n_updates[s], sizeof(int32_t));
        exec_merge_put(out, res->grad_norm[s], res->n_updates[s] * sizeof(double));
        exec_merge_put(out, res->lr[s], res->n_updates[s] * sizeof(float));
        exec_merge_put(out, &res->n_executed[s], sizeof(int32_t));
        exec_merge_put(out, res->executed[s], res->n_executed[s] * sizeof(PpOp));
    }
    for (int32_t vs = 0; vs < pipeline->n_vstages; vs++) {
        if (exec_pipeline_vstage_rank(pipeline, vs) != rank)
            continue;
        for (int32_t mb = 0; mb < res->n_mb; mb++) {
            size_t cell = (size_t)mb * pipeline->n_vstages + vs;
            exec_merge_put(out, &res->version_f[cell], sizeof(int32_t));
            exec_merge_put(out, &res->version_b[cell], sizeof(int32_t));
        }
    }
    if (exec_pipeline_vstage_rank(pipeline, pipeline->n_vstages - 1) == rank) {
        exec_merge_put(out, res->loss, res->n_mb * sizeof(float));
        exec_merge_put(out, res->mb_step, res->n_mb * sizeof(int32_t));
    }
    return g_byte_array_free_to_bytes(out);
}

/* Fills @res and the pipeline's counters with rank @rank's part, @blob. */
static void exec_merge_unpack(ExecPipeline *pipeline, ExecRunResult *res, int32_t rank,
                              GBytes *blob) {
    gsize         size = 0, at = 0;
    const guint8 *p = g_bytes_get_data(blob, &size);
    int32_t       skipped, stage = exec_comm_rank_stage(pipeline->params.comm, rank);
    exec_merge_get(p, size, &at, &skipped, sizeof skipped);
    res->n_skipped += skipped;
    for (int32_t s = 0; s < pipeline->n_stages; s++) {
        if (s != stage)
            continue;
        exec_merge_get(p, size, &at, &pipeline->version[s], sizeof(int32_t));
        exec_merge_get(p, size, &at, &pipeline->nonfinite[s], sizeof(int32_t));
        exec_merge_get(p, size, &at, &res->n_updates[s], sizeof(int32_t));
        PP_ASSERT(res->n_updates[s] >= 0 && res->n_updates[s] <= res->capacity[s]);
        exec_merge_get(p, size, &at, res->grad_norm[s], res->n_updates[s] * sizeof(double));
        exec_merge_get(p, size, &at, res->lr[s], res->n_updates[s] * sizeof(float));
        exec_merge_get(p, size, &at, &res->n_executed[s], sizeof(int32_t));
        PP_ASSERT(res->n_executed[s] >= 0 && res->n_executed[s] <= res->capacity[s]);
        exec_merge_get(p, size, &at, res->executed[s], res->n_executed[s] * sizeof(PpOp));
    }
    for (int32_t vs = 0; vs < pipeline->n_vstages; vs++) {
        if (exec_pipeline_vstage_rank(pipeline, vs) != rank)
            continue;
        for (int32_t mb = 0; mb < res->n_mb; mb++) {
            size_t cell = (size_t)mb * pipeline->n_vstages + vs;
            exec_merge_get(p, size, &at, &res->version_f[cell], sizeof(int32_t));
            exec_merge_get(p, size, &at, &res->version_b[cell], sizeof(int32_t));
        }
    }
    if (exec_pipeline_vstage_rank(pipeline, pipeline->n_vstages - 1) == rank) {
        exec_merge_get(p, size, &at, res->loss, res->n_mb * sizeof(float));
        exec_merge_get(p, size, &at, res->mb_step, res->n_mb * sizeof(int32_t));
    }
    PP_ASSERT(at == size);
}

/* Every replica's losses into res->losses, from the part of each replica's last-stage rank
 * in @parts (indexed by rank): exec_merge_pack() ends with them. */
static void exec_merge_losses(const ExecPipeline *pipeline, ExecRunResult *res, GPtrArray *parts) {
    ExecComm *comm = pipeline->params.comm;
    int32_t   last_stage = pipeline->vstage_stage[pipeline->n_vstages - 1];
    size_t    bytes = (size_t)res->n_mb * sizeof(float);
    size_t    tail = bytes + (size_t)res->n_mb * sizeof(int32_t);
    for (int32_t d = 0; d < res->n_replicas; d++) {
        gsize         size = 0;
        const guint8 *p = g_bytes_get_data(
            g_ptr_array_index(parts, exec_comm_layout_rank(comm, d, last_stage)), &size);
        PP_ASSERT(size >= tail);
        memcpy(res->losses + (size_t)d * res->n_mb, p + size - tail, bytes);
    }
}

gboolean exec_pipeline_merge(ExecPipeline *pipeline, ExecRunResult *res, int64_t first_row,
                             GError **error) {
    ExecComm *comm = pipeline->params.comm;
    int32_t   rank = exec_comm_rank(comm);
    exec_comm_set_receiver(comm, EXEC_COMM_REPORT, NULL, NULL);
    if (!exec_comm_agree(comm, "the end of a replay", error))
        return FALSE;

    g_autoptr(GBytes) mine = exec_merge_pack(pipeline, res, rank);
    g_autoptr(GPtrArray) parts = exec_comm_allgather(comm, mine, "the results of a replay", error);
    if (parts == NULL)
        return FALSE;
    /* The replicas ran the same program with the same weights: this replica's parts make the
     * result, and only the losses differ between replicas. */
    for (int32_t r = 0; r < exec_comm_size(comm); r++) {
        if (r != rank && exec_comm_rank_replica(comm, r) == pipeline->params.parallel.replica)
            exec_merge_unpack(pipeline, res, r, g_ptr_array_index(parts, r));
    }
    exec_merge_losses(pipeline, res, parts);

    /* This replay's trace rows, in each rank's order, to rank 0. */
    const PpTrace *trace = pipeline->trace;
    g_autoptr(GBytes) rows = g_bytes_new(trace->rows + first_row,
                                         (gsize)(trace->n_rows - first_row) * sizeof(PpTraceRow));
    g_autoptr(GPtrArray) all = exec_comm_gather(comm, 0, rows, "the trace rows of a replay", error);
    if (all == NULL)
        return FALSE;
    for (guint r = 0; r < all->len; r++) {
        if ((int32_t)r == rank)
            continue;
        gsize             size = 0;
        const PpTraceRow *theirs = g_bytes_get_data(g_ptr_array_index(all, r), &size);
        PP_ASSERT(size % sizeof(PpTraceRow) == 0);
        for (gsize i = 0; i < size / sizeof(PpTraceRow); i++)
            pp_trace_append(pipeline->trace, &theirs[i]);
    }
    return TRUE;
}
