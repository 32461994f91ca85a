/* SPDX-License-Identifier: MIT
 * exec-comm-cma.c: whether Open MPI's shared-memory transport may copy a large message once,
 * straight from the sender's memory (cross-memory attach, process_vm_readv), and the choice of
 * its single-copy mechanism from that (docs/design.md §5.10).
 *
 * Without the single copy, every message over the eager limit crosses in 32 KiB fragments that
 * need both ranks' progress threads on a core at once; on a 2-core VM the gradient reduction of
 * train-tiny's 2 replicas took 1.3-1.6 s instead of 0.08 s. With it, a container that forbids
 * ptrace-style access (a seccomp filter, Yama's ptrace_scope 2 or 3, a missing capability)
 * fails the job at its first large message. So the mechanism is decided here, on this machine,
 * before MPI_Init: two sibling processes (as two ranks are: children of one launcher) try the
 * very call, and CMA is chosen only when the one reads what the other wrote.
 */
#include "exec-comm-private.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/uio.h>
#include <sys/wait.h>
#endif

#define EXEC_COMM_CMA_MCA         "OMPI_MCA_btl_vader_single_copy_mechanism"
#define EXEC_COMM_CMA_PROBE_BYTES 64
#define EXEC_COMM_CMA_PROBE_BYTE  0x5a

#if defined(__linux__)
/* The owner's copy is filled after the fork, so that only a read of the owner's memory, not
 * the reader's own copy, finds the pattern. */
static unsigned char exec_comm_cma_probe_page[EXEC_COMM_CMA_PROBE_BYTES];

/* waitpid() past EINTR. Returns: whether @pid exited with status 0. */
static gboolean exec_comm_cma_reap(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return FALSE;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The reader's side, in its own process: only async-signal-safe calls (the parent may have
 * threads, OpenBLAS's among them). */
static G_NORETURN void exec_comm_cma_read(pid_t owner) {
    unsigned char buf[EXEC_COMM_CMA_PROBE_BYTES] = {0};
    struct iovec  local = {buf, sizeof buf};
    struct iovec  remote = {exec_comm_cma_probe_page, sizeof exec_comm_cma_probe_page};
    if (process_vm_readv(owner, &local, 1, &remote, 1, 0) != (ssize_t)sizeof buf)
        _exit(1);
    for (size_t i = 0; i < sizeof buf; i++)
        if (buf[i] != EXEC_COMM_CMA_PROBE_BYTE)
            _exit(1);
    _exit(0);
}

gboolean exec_comm_cma_permitted(void) {
    int ready[2];
    if (pipe(ready) != 0)
        return FALSE;
    pid_t owner = fork();
    if (owner == 0) {
        close(ready[0]);
        for (size_t i = 0; i < sizeof exec_comm_cma_probe_page; i++)
            exec_comm_cma_probe_page[i] = EXEC_COMM_CMA_PROBE_BYTE;
        char one = 1;
        if (write(ready[1], &one, 1) != 1)
            _exit(1);
        for (;;)
            pause(); /* until the parent's SIGKILL */
    }
    close(ready[1]);
    gboolean permitted = FALSE;
    char     one = 0;
    ssize_t  got;
    do
        got = read(ready[0], &one, 1);
    while (got < 0 && errno == EINTR);
    close(ready[0]);
    if (owner > 0 && got == 1) {
        pid_t reader = fork();
        if (reader == 0)
            exec_comm_cma_read(owner);
        permitted = reader > 0 && exec_comm_cma_reap(reader);
    }
    if (owner > 0) {
        kill(owner, SIGKILL);
        exec_comm_cma_reap(owner);
    }
    return permitted;
}
#else
gboolean exec_comm_cma_permitted(void) {
    return FALSE;
}
#endif

/* Test hook: PACER_TEST_CMA_REFUSE=RANK makes the probe of launcher rank RANK fail, as a probe
 * child killed or a policy of that process alone would. */
static gboolean exec_comm_cma_refused_for_test(void) {
    const char *refuse = g_getenv("PACER_TEST_CMA_REFUSE");
    gint64      rank = -1;
    return refuse && g_ascii_string_to_signed(refuse, 10, 0, G_MAXINT32, &rank, NULL) &&
           rank == exec_comm_launched_rank();
}

const char *exec_comm_cma_choose(gboolean *set_by_caller) {
    const char *set = g_getenv(EXEC_COMM_CMA_MCA);
    *set_by_caller = set != NULL;
    if (set != NULL)
        return set;
    gboolean    permitted = !exec_comm_cma_refused_for_test() && exec_comm_cma_permitted();
    const char *mechanism = permitted ? "cma" : "none";
    g_setenv(EXEC_COMM_CMA_MCA, mechanism, TRUE);
    return mechanism;
}
