/* SPDX-License-Identifier: MIT
 * exec-comm-private.h: what an implementation of the process group (exec-comm.h) provides:
 * non-blocking transport primitives on the host thread (start a send, start receiving an
 * arrived message, test either, abort the job) in ExecCommOps, and the state exec-comm.c
 * keeps on top of them (the outbox of posted messages, transfers in flight, the stop signal,
 * the first failure, deadlines). Internal to libppexec.
 */
#pragma once

#include "exec-comm.h"

G_BEGIN_DECLS

typedef struct {
    const char *name;
    /* Starts sending @bytes of @data to @dest on @channel with @tag; @data stays valid until
     * test() returns TRUE. Returns: (transfer full) the request. */
    gpointer (*isend)(ExecComm *comm, ExecCommChannel channel, int32_t dest, int32_t tag,
                      const void *data, size_t bytes);
    /* Starts receiving a message that has arrived on @channel from @src (-1: any) with @tag
     * (-1: any), if one has: into *@data, a new buffer of *@bytes (g_free it once test()
     * says the receive is complete), from *@from with *@tag_out. Returns: (transfer full) the
     * request, or NULL when no such message has arrived. */
    gpointer (*irecv)(ExecComm *comm, ExecCommChannel channel, int32_t src, int32_t tag,
                      int32_t *from, int32_t *tag_out, void **data, size_t *bytes);
    /* Whether @request (a send or a receive) completed; TRUE releases it. */
    gboolean (*test)(ExecComm *comm, gpointer request);
    /* Ends every process of the job with status @code; does not return. */
    void (*abort)(ExecComm *comm, int code);
    /* Shuts the transport down (all sends complete) and frees @comm. */
    void (*free)(ExecComm *comm);
} ExecCommOps;

/* A message on its way: out (queued by exec_comm_post(), then sending) or in (receiving). */
typedef struct {
    ExecCommChannel channel;
    gboolean        incoming;
    int32_t         peer, tag; /* the destination, or the source */
    void           *data;      /* (bytes) owned; NULL for an empty message */
    size_t          bytes;
    gpointer        request;    /* the transport's, NULL until started */
    int64_t         started_us; /* g_get_monotonic_time() when started */
} ExecCommTransfer;

struct _ExecComm {
    const ExecCommOps *ops;
    int32_t            rank, size, tag_max;
    int32_t            replicas; /* D (exec_comm_set_replicas()) */
    int64_t            timeout_us;
    GAsyncQueue       *outbox;         /* ExecCommTransfer*, or a marker (exec-comm.c) */
    GPtrArray         *pending;        /* ExecCommTransfer* started, not complete, oldest first */
    gint               stopped;        /* atomic */
    GMutex             lock;           /* guards error and watches */
    GPtrArray         *watches;        /* ExecCommWatch*: the workers' waits, oldest first */
    GError            *error;          /* first failure recorded by exec_comm_fail() */
    gboolean           agreed_failure; /* the last agreement ended with a failure */
    ExecCommRecvFn     receivers[EXEC_COMM_N_CHANNELS];
    gpointer           receiver_data[EXEC_COMM_N_CHANNELS];
    ExecCommStopFn     on_stop;
    gpointer           on_stop_data;
    int32_t            report_src, reports_expected, reports_seen;
    /* Test hook (PACER_TEST_FAULT=kill|stop|stop-reduce:RANK:COUNT): this rank raises SIGKILL
     * or SIGSTOP on itself after posting COUNT data messages (stop-reduce: COUNT messages of
     * the gradient reduction, SIGSTOP); fault_signal 0 = off. */
    int             fault_signal;
    ExecCommChannel fault_channel;
    int64_t         fault_after, data_sent;
    /* The launcher's process on this node (exec_comm_launcher_tie()), 0 when none is watched,
     * and when the progress loop last checked that it is still this process's parent. */
    int64_t launcher_pid, launcher_checked_us;
};

/* The launcher forwards a rank's stderr on a path of its own: a rank that ends the job
 * (exec_comm_finish()'s abort, the guard below) first leaves it this long to pass on the
 * rank's last line, so that the line comes before the launcher's report of the end. */
#define EXEC_COMM_LAST_WORDS_US 1000000

/* A watchdog over a blocking call of the transport that has no deadline of its own
 * (exec-comm-guard.c), made by rank @rank of @size processes: unless exec_comm_guard_free()
 * comes within @timeout_s, it prints one line (rank @rank: @what did not complete within
 * @timeout_s s; the other ranks may have died or hung) and, EXEC_COMM_LAST_WORDS_US later,
 * ends this process with status 1 (_exit), so that the launcher ends the job. */
typedef struct _ExecCommGuard ExecCommGuard;
ExecCommGuard *exec_comm_guard_new(int32_t rank, int32_t size, double timeout_s, const char *what);
void           exec_comm_guard_free(ExecCommGuard *guard);

/* Test hook: with PACER_TEST_STALL_AT=RANK:POINT in the environment, the process of launcher
 * rank RANK (exec_comm_launched_rank()) raises SIGSTOP on itself at @point: "start" (before
 * the transport starts), "finish" (before it shuts down), or the @what of an agreement
 * (exec_comm_agree(): "loading the scenario", "writing log.csv and ops.csv", ...), just
 * before it. Silent, so that the first line of the job's stderr is a peer's report. For tests
 * (tests/test-exec-mpi.c) only. */
void exec_comm_test_stall(const char *point);

/* Open MPI's shared-memory single-copy mechanism (exec-comm-cma.c), decided before MPI_Init.
 * exec_comm_cma_permitted(): whether one process on this machine may read a sibling's memory
 * with process_vm_readv (two forked children try it; FALSE off Linux). exec_comm_cma_choose():
 * the caller's OMPI_MCA_btl_vader_single_copy_mechanism when set, else sets it to "cma" when
 * permitted and "none" otherwise. Returns: the mechanism now in the environment. */
gboolean    exec_comm_cma_permitted(void);
const char *exec_comm_cma_choose(gboolean *set_by_caller);

/* No rank outlives its launcher (exec-comm-launcher.c). exec_comm_launcher_tie(), before the
 * transport starts: this process gets SIGTERM when its parent, the launcher's process on this
 * node, dies (Linux's PR_SET_PDEATHSIG), and ends at once as on SIGTERM when it already has.
 * Returns: the parent's process id, for comm->launcher_pid. exec_comm_launcher_check(), from
 * the progress loops (at most every 0.1 s): ends this process as on SIGTERM, after one line
 * naming the launcher, once its parent is no longer comm->launcher_pid. */
int64_t exec_comm_launcher_tie(void);
void    exec_comm_launcher_check(ExecComm *comm);

/* Sets up the shared state of a new group of @size processes; implementations call it first. */
void exec_comm_init(ExecComm *comm, const ExecCommOps *ops, int32_t rank, int32_t size,
                    int32_t tag_max);
/* Frees the shared state (the implementation then frees the rest). */
void exec_comm_clear(ExecComm *comm);

G_END_DECLS
