/* SPDX-License-Identifier: MIT
 * exec-comm-launcher.c: no rank outlives its launcher. A rank of a job is the child of the
 * launcher's process on its node (mpirun, Open MPI's orted, Slurm's slurmstepd, Hydra's
 * proxy); when that process is gone (killed, or ended by a wrapper such as timeout while the
 * ranks go on), nothing would end the ranks, and they would keep writing into --out. So a rank
 * asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG), and its progress loop
 * checks its parent too, since the kernel's signal follows the parent thread that forked it.
 * Either way the rank ends as the launcher's SIGTERM would end it.
 */
#include "exec-comm-private.h"

#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

/* How often the progress loop looks at its parent. */
#define EXEC_COMM_LAUNCHER_CHECK_US 100000

/* Ends this process as SIGTERM does (a launcher ends the job that way), saying why first. */
static G_NORETURN void exec_comm_launcher_lost(int64_t rank, int64_t launcher) {
    fprintf(stderr,
            "pacer-train: rank %" G_GINT64_FORMAT ": its launcher (process %" G_GINT64_FORMAT
            ") is gone: stopping as on SIGTERM\n",
            rank, launcher);
    fflush(stderr);
    signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
    _exit(128 + SIGTERM); /* SIGTERM blocked: end anyway */
}

int64_t exec_comm_launcher_tie(void) {
    int64_t launcher = (int64_t)getppid();
#if defined(__linux__)
    prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
    /* The launcher may have died before the request: then no signal comes. */
    if ((int64_t)getppid() != launcher)
        exec_comm_launcher_lost(exec_comm_launched_rank(), launcher);
    return launcher;
}

void exec_comm_launcher_check(ExecComm *comm) {
    if (comm->launcher_pid <= 0)
        return;
    int64_t now = g_get_monotonic_time();
    if (now - comm->launcher_checked_us < EXEC_COMM_LAUNCHER_CHECK_US)
        return;
    comm->launcher_checked_us = now;
    if ((int64_t)getppid() != comm->launcher_pid)
        exec_comm_launcher_lost(comm->rank, comm->launcher_pid);
}
