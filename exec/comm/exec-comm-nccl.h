/* SPDX-License-Identifier: MIT
 * exec-comm-nccl.h: NCCL's bootstrap over the process group (exec-comm.h): rank 0 creates the
 * unique id of an NCCL communicator and every rank receives it, so that a GPU backend can call
 * ncclCommInitRank() with the group's rank and size. Built when meson finds NCCL
 * (PP_HAVE_NCCL); its caller is a GPU backend's constructor.
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

G_END_DECLS
