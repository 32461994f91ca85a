/* SPDX-License-Identifier: MIT
 * exec-comm-nccl.c: NCCL unique ids, made on one rank and shared over the process group: the
 * group's (rank 0's, broadcast) and each stage group's (its replica 0's, all-gathered).
 */
#include "exec-comm-nccl.h"

#include <string.h>

#include "pp-error.h"

/* A new id into *@id when @make; FALSE with EXEC_ERROR_BACKEND naming NCCL's reason. */
static gboolean exec_comm_nccl_make(gboolean make, ncclUniqueId *id, GError **error) {
    if (!make)
        return TRUE;
    ncclResult_t result = ncclGetUniqueId(id);
    if (result == ncclSuccess)
        return TRUE;
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND, "ncclGetUniqueId: %s",
                ncclGetErrorString(result));
    return FALSE;
}

gboolean exec_comm_nccl_unique_id(ExecComm *comm, ncclUniqueId *id, GError **error) {
    GError *local = NULL;
    exec_comm_nccl_make(exec_comm_rank(comm) == 0, id, &local);
    /* Every rank learns whether rank 0 has an id before anyone waits for it. */
    if (!exec_comm_agree(comm, "making the NCCL unique id", &local)) {
        g_propagate_error(error, local);
        return FALSE;
    }
    return exec_comm_bcast(comm, 0, id, sizeof *id, "the NCCL unique id", error);
}

gboolean exec_comm_nccl_stage_unique_id(ExecComm *comm, gboolean wanted, ncclUniqueId *id,
                                        GError **error) {
    GError      *local = NULL;
    ncclUniqueId mine;
    memset(&mine, 0, sizeof mine);
    exec_comm_nccl_make(wanted && exec_comm_replica(comm) == 0, &mine, &local);
    /* Every rank learns whether each replica 0 has its id before anyone waits for it. */
    if (!exec_comm_agree(comm, "making the NCCL unique ids of the stage groups", &local)) {
        g_propagate_error(error, local);
        return FALSE;
    }
    g_autoptr(GBytes) bytes = g_bytes_new(&mine, sizeof mine);
    g_autoptr(GPtrArray) all =
        exec_comm_allgather(comm, bytes, "the NCCL unique ids of the stage groups", error);
    if (!all)
        return FALSE;
    GBytes *first = g_ptr_array_index(all, exec_comm_layout_rank(comm, 0, exec_comm_stage(comm)));
    PP_ASSERT(g_bytes_get_size(first) == sizeof *id);
    memcpy(id, g_bytes_get_data(first, NULL), sizeof *id);
    return TRUE;
}
