/* SPDX-License-Identifier: MIT
 * exec-comm-mpi.h: the process group over MPI (exec-comm.h), for a pacer-train started by an
 * MPI launcher (mpirun, srun). Built when meson finds MPI (-Dmpi=auto, PP_HAVE_MPI); the one
 * caller is pacer-train's entry point.
 */
#pragma once

#include "exec-comm.h"

G_BEGIN_DECLS

/* When an MPI launcher started this process as one of several (exec_comm_launched_size()
 * > 1), initialises MPI with MPI_THREAD_FUNNELED (every MPI call on this, the main
 * thread: exec-comm.h) and sets *@comm to the world group; otherwise leaves *@comm NULL
 * without touching MPI (one process). With a group, glibc's malloc serves blocks under 1 GiB
 * from the heap from then on (message buffers are reused, not mapped anew each time), and
 * Open MPI's shared-memory single-copy mechanism is the caller's or the probe's
 * (exec_comm_cma_choose()).
 * @argc, @argv as MPI_Init_thread() takes them. @timeout_s is the group's deadline
 * (exec_comm_set_timeout()) and already that of MPI's start-up, which waits for every rank:
 * past it this process prints which ranks may be missing and exits with status 1
 * (exec-comm-private.h's guard); so does MPI's shut-down in exec_comm_finish().
 * Returns FALSE with EXEC_ERROR_COMM when MPI cannot provide that thread level. */
gboolean exec_comm_mpi_new(int *argc, char ***argv, double timeout_s, ExecComm **comm,
                           GError **error);

G_END_DECLS
