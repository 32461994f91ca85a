/* SPDX-License-Identifier: MIT
 * exec-backend-comm.c: what every backend that runs one process per stage shares
 * (exec-backend-impl.h, "backends across processes"): the check of a program's last wire tag
 * (the tags themselves are the transport's, exec-transport-wire.c) and the error of another
 * process's virtual stage (whose tensor table every rank has from the model layout).
 */
#include "exec-backend-impl.h"
#include "pp-error.h"

gboolean exec_backend_check_tags(const ExecComm *comm, int32_t n_vstages, const PpSchedule *sched,
                                 GError **error) {
    if (comm && sched->n_mb > 0 &&
        exec_msg_tag(n_vstages, TRUE, sched->n_mb - 1, n_vstages - 1) > exec_comm_tag_max(comm)) {
        g_propagate_error(error, exec_msg_tag_error(comm, n_vstages, sched->n_mb - 1));
        return FALSE;
    }
    return TRUE;
}

void exec_backend_set_not_local(GError **error, const ExecComm *comm, int32_t vstage,
                                int32_t stage) {
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_NOT_LOCAL,
                "virtual stage %d lives on rank %d; this is rank %d", vstage,
                exec_comm_stage_rank(comm, stage), exec_comm_rank(comm));
}
