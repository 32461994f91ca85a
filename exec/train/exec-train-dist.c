/* SPDX-License-Identifier: MIT
 * exec-train-dist.c: pacer-train's model state across processes (one stage per rank).
 * Checkpoints are written by rank 0 with the one writer of a single-process run: the host
 * tensor lists are filled by each rank for its own virtual stages, then replica 0's other
 * ranks' entries travel to rank 0 (data-parallel replicas hold the same state; a sharded
 * optimizer's state comes in parts, one from each replica's rank); on resume rank 0 reads the
 * file and each entry travels whole to every rank, of every replica, that copies it in (its
 * part of it, with a sharded optimizer). Counters per virtual stage travel the same way.
 */
#include "exec-train-private.h"

#include "pp-error.h"

/* Bytes of entry @e's data. */
static size_t exec_train_dist_bytes(const ExecTensorEntry *e) {
    return (size_t)e->shape[0] * (size_t)e->shape[1] * sizeof(float);
}

/* Moves entry data between rank 0 and the holders: @to_root gathers from replica 0's holders
 * (the replicas hold the same state) or, for entries with a @state_tables tensor, from every
 * replica's holder its part; else scatters whole entries to the holders of every replica.
 * Both sides walk the list in order, so every pair's messages match in order; the tag is the
 * entry's index (modulo the largest tag), checked with the size on arrival. */
static gboolean exec_train_dist_move(ExecPipeline *pipeline, ExecTensorList *list,
                                     const int32_t *vstages, const ExecTensor *const *state_tables,
                                     gboolean to_root, GError **error) {
    ExecComm *comm = exec_pipeline_comm(pipeline);
    int32_t   rank = exec_comm_rank(comm);
    if (comm == NULL)
        return TRUE;
    for (int i = 0; i < exec_tensor_list_n(list); i++) {
        const ExecTensorEntry *e = exec_tensor_list_get(list, i);
        int32_t stage = exec_comm_rank_stage(comm, exec_pipeline_vstage_rank(pipeline, vstages[i]));
        int32_t tag = (int32_t)(i % ((int64_t)exec_comm_tag_max(comm) + 1));
        int32_t replicas =
            to_root && state_tables == NULL ? 1 : exec_pipeline_parallel(pipeline)->replicas;
        for (int32_t d = 0; d < replicas; d++) {
            int32_t holder = exec_comm_layout_rank(comm, d, stage);
            size_t  lo = 0, hi = exec_train_dist_bytes(e) / sizeof(float);
            if (to_root && state_tables)
                exec_pipeline_state_part(pipeline, vstages[i], state_tables[i], d, &lo, &hi);
            if (holder == 0 || (rank != 0 && rank != holder) || hi == lo)
                continue;
            g_autofree char *what = g_strdup_printf("checkpoint tensor %s", e->name);
            gboolean         sends = (rank == holder) == to_root;
            int32_t          peer = rank == 0 ? holder : 0;
            float           *part = e->data + lo;
            size_t           bytes = (hi - lo) * sizeof(float);
            gboolean         ok = sends ? exec_comm_send(comm, peer, tag, part, bytes, what, error)
                                        : exec_comm_recv(comm, peer, tag, part, bytes, what, error);
            if (!ok)
                return FALSE;
        }
    }
    return TRUE;
}

gboolean exec_train_dist_gather(ExecPipeline *pipeline, ExecTensorList *list,
                                const int32_t *vstages, const ExecTensor *const *state_tables,
                                GError **error) {
    return exec_train_dist_move(pipeline, list, vstages, state_tables, TRUE, error);
}

gboolean exec_train_dist_scatter(ExecPipeline *pipeline, ExecTensorList *list,
                                 const int32_t *vstages, GError **error) {
    return exec_train_dist_move(pipeline, list, vstages, NULL, FALSE, error);
}

gboolean exec_train_dist_gather_vstage_ints(ExecPipeline *pipeline, int32_t *values,
                                            const char *what, GError **error) {
    ExecComm *comm = exec_pipeline_comm(pipeline);
    int32_t   n_vs = exec_pipeline_n_vstages(pipeline);
    if (comm == NULL)
        return TRUE;
    g_autoptr(GBytes) mine = g_bytes_new(values, n_vs * sizeof(int32_t));
    g_autoptr(GPtrArray) all = exec_comm_gather(comm, 0, mine, what, error);
    if (all == NULL)
        return FALSE;
    if (exec_comm_rank(comm) != 0)
        return TRUE;
    for (int32_t vs = 0; vs < n_vs; vs++) {
        gsize          size = 0;
        const int32_t *theirs = g_bytes_get_data(
            g_ptr_array_index(all, exec_pipeline_vstage_rank(pipeline, vs)), &size);
        PP_ASSERT(size == n_vs * sizeof(int32_t));
        values[vs] = theirs[vs];
    }
    return TRUE;
}
