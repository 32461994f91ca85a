/* SPDX-License-Identifier: MIT
 * exec-comm-private.h: what an implementation of the process group (exec-comm.h) provides:
 * four non-blocking transport primitives on the host thread (start a send, test it, take an
 * arrived message, abort the job) in ExecCommOps, and the state exec-comm.c keeps on top of
 * them (the outbox of posted messages, pending sends, the stop signal, the first failure,
 * deadlines). Internal to libppexec.
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
    /* Whether @request completed; TRUE releases it. */
    gboolean (*test)(ExecComm *comm, gpointer request);
    /* Receives a message that arrived on @channel from @src (-1: any) with @tag (-1: any), if
     * one is there: *@data (transfer full, g_free; @bytes of it), its *@from and *@tag_out.
     * FALSE when none has arrived. */
    gboolean (*take)(ExecComm *comm, ExecCommChannel channel, int32_t src, int32_t tag,
                     int32_t *from, int32_t *tag_out, void **data, size_t *bytes);
    /* Ends every process of the job with status @code; does not return. */
    void (*abort)(ExecComm *comm, int code);
    /* Shuts the transport down (all sends complete) and frees @comm. */
    void (*free)(ExecComm *comm);
} ExecCommOps;

/* A message on its way out: queued by exec_comm_post(), then sending. */
typedef struct {
    ExecCommChannel channel;
    int32_t         dest, tag;
    void           *data; /* (bytes) owned; NULL for a stop signal */
    size_t          bytes;
    gpointer        request; /* ops->isend()'s, NULL until sent */
} ExecCommSend;

struct _ExecComm {
    const ExecCommOps *ops;
    int32_t            rank, size, tag_max;
    int64_t            timeout_us;
    GAsyncQueue       *outbox;         /* ExecCommSend*, or a wake-up marker (exec-comm.c) */
    GPtrArray         *pending;        /* ExecCommSend* started, not yet complete (host) */
    gint               stopped;        /* atomic */
    GMutex             lock;           /* guards error */
    GError            *error;          /* first failure recorded by exec_comm_fail() */
    gboolean           agreed_failure; /* the last agreement ended with a failure */
    ExecCommRecvFn     receivers[EXEC_COMM_N_CHANNELS];
    gpointer           receiver_data[EXEC_COMM_N_CHANNELS];
    ExecCommStopFn     on_stop;
    gpointer           on_stop_data;
    int32_t            report_src, reports_expected, reports_seen;
    /* Test hook (PACER_TEST_FAULT=kill|stop:RANK:COUNT): this rank raises SIGKILL or
     * SIGSTOP on itself after posting COUNT data messages; fault_signal 0 = off. */
    int     fault_signal;
    int64_t fault_after, data_sent;
};

/* Sets up the shared state of a new group of @size processes; implementations call it first. */
void exec_comm_init(ExecComm *comm, const ExecCommOps *ops, int32_t rank, int32_t size,
                    int32_t tag_max);
/* Frees the shared state (the implementation then frees the rest). */
void exec_comm_clear(ExecComm *comm);

G_END_DECLS
