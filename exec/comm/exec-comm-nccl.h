/* SPDX-License-Identifier: MIT
 * exec-comm-nccl.h: NCCL's bootstrap over the process group (exec-comm.h): one rank creates the
 * unique id of an NCCL communicator and the others receive it, so that a GPU backend can call
 * ncclCommInitRank(): over the whole group (rank 0's id), or over the D replicas of each
 * stage (each stage group's replica 0 makes one, exec-comm-layout.c says which ranks those are).
 * Built when meson finds NCCL (PP_HAVE_NCCL); its caller is a GPU backend's constructor.
 */
#pragma once

#include <nccl.h>

#include "exec-comm.h"

G_BEGIN_DECLS

/* Collective (every rank, host thread, between replays): *@id = the ncclUniqueId rank 0 made
 * with ncclGetUniqueId(). Returns FALSE on every rank with the same error when rank 0 could
 * not make it (EXEC_ERROR_BACKEND naming NCCL's reason), or EXEC_ERROR_COMM. NULL @comm (one
 * process): rank 0's own id. */
gboolean exec_comm_nccl_unique_id(ExecComm *comm, ncclUniqueId *id, GError **error);

/* Collective (every rank, host thread, between replays): *@id = the ncclUniqueId that replica 0
 * of this rank's stage made with ncclGetUniqueId() when @wanted (the same on every rank of a
 * stage group; a group that does not want one gets zeros), for a communicator of the stage's
 * exec_comm_replicas() ranks in replica order. Errors as exec_comm_nccl_unique_id(), naming the
 * first rank that could not make its id. NULL @comm: an id of this process's own. */
gboolean exec_comm_nccl_stage_unique_id(ExecComm *comm, gboolean wanted, ncclUniqueId *id,
                                        GError **error);

G_END_DECLS
