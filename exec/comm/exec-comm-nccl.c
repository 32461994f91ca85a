/* SPDX-License-Identifier: MIT
 * exec-comm-nccl.c: the NCCL unique id, made on rank 0 and broadcast over the process group.
 */
#include "exec-comm-nccl.h"

gboolean exec_comm_nccl_unique_id(ExecComm *comm, ncclUniqueId *id, GError **error) {
    GError *local = NULL;
    if (exec_comm_rank(comm) == 0) {
        ncclResult_t result = ncclGetUniqueId(id);
        if (result != ncclSuccess)
            local = g_error_new(EXEC_ERROR, EXEC_ERROR_BACKEND, "ncclGetUniqueId: %s",
                                ncclGetErrorString(result));
    }
    /* Every rank learns whether rank 0 has an id before anyone waits for it. */
    if (!exec_comm_agree(comm, "making the NCCL unique id", &local)) {
        g_propagate_error(error, local);
        return FALSE;
    }
    return exec_comm_bcast(comm, 0, id, sizeof *id, "the NCCL unique id", error);
}
