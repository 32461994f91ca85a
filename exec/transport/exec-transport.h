/* SPDX-License-Identifier: MIT
 * exec-transport.h: the one seam through which a backend's stages pass activations and
 * gradients, whatever the device. A producer takes a buffer for a message to virtual stage X,
 * writes it with work on its queue and sends it; the consumer waits for it (host: until it is
 * handed over; device: its queue waits behind the producer's) and releases the buffer after
 * reading. No call waits for a device. Every implementation hands messages between host
 * threads through the stages' inboxes (exec-inbox.h). Implementations:
 *   host queue (exec-transport-queue.c): host buffers; a message for a stage of this process
 *     goes into its inbox, one for another rank is posted to the process group (the CPU
 *     backend's);
 *   device peer copy (exec-cuda-transport.c): device buffers of one process, handed over on
 *     one device, copied on the producer's copy stream between two;
 *   host-staged (exec-cuda-transport-host.c): device buffers staged through pinned host memory
 *     and the process group, one stage per rank.
 * Internal to libppexec.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-comm.h"
#include "exec-inbox.h"

G_BEGIN_DECLS

typedef enum {
    EXEC_MSG_ACT,  /* activation (B, T, C) for F(mb, vstage) */
    EXEC_MSG_GRAD, /* gradient (B, T, C) of vstage's output, for B/BW(mb, vstage) */
    EXEC_MSG_N_KINDS
} ExecMsgKind;

/* A stage's device work queue, in the order the device runs it (CUDA: its cudaStream_t);
 * NULL on the host, where an op's work is done when the call returns. */
typedef gpointer ExecQueue;

/* One message between taking its buffer and releasing it (the implementation's own record). */
typedef struct _ExecTransportMsg ExecTransportMsg;

typedef struct _ExecTransport    ExecTransport;
typedef struct _ExecTransportOps ExecTransportOps;

struct _ExecTransportOps {
    /* Producer's worker: a buffer of the transport's message size (bytes) on which work
     * enqueued on @queue after this call may write the message (kind, mb) for @vstage; @queue
     * is ordered after the buffer's previous reader. *@msg: the handle for send(). */
    void *(*take)(ExecTransport *t, ExecMsgKind kind, int32_t mb, int32_t vstage, ExecQueue queue,
                  ExecTransportMsg **msg);
    /* Producer's worker: the work enqueued on @queue so far completes the message; hands it
     * to the consumer's worker (after a copy to the consumer's device or rank when needed). */
    void (*send)(ExecTransport *t, ExecTransportMsg *msg, ExecQueue queue);
    /* Consumer's worker, for op @op ("F", "B", "BW": errors name it): blocks the host until
     * (kind, mb) for @vstage is handed over, then orders @queue after it; *@data: the buffer
     * holding it, valid until release(). Returns FALSE (and nothing) once the transport is
     * aborted, or when the message missed the process group's deadline (recorded with
     * exec_comm_fail(): which op waited for what from which rank). */
    gboolean (*recv)(ExecTransport *t, ExecMsgKind kind, const char *op, int32_t mb, int32_t vstage,
                     ExecQueue queue, ExecTransportMsg **msg, const void **data);
    /* Consumer's worker: the work enqueued on @queue so far is the last to read @msg. */
    void (*release)(ExecTransport *t, ExecTransportMsg *msg, ExecQueue queue);
    /* Consumer's worker, dynamic mode: files the messages that reached @stage (with @block,
     * after waiting for at least one, under the group's deadline). Returns FALSE once
     * aborted. */
    gboolean (*poll)(ExecTransport *t, int32_t stage, gboolean block);
    /* Consumer's worker, dynamic mode: whether (kind, mb) for @vstage has been filed. */
    gboolean (*has)(ExecTransport *t, ExecMsgKind kind, int32_t mb, int32_t vstage);
    /* Any thread: wakes every waiting consumer of this process; recv() and poll() return FALSE
     * until reset(). */
    void (*abort)(ExecTransport *t);
    /* Host thread, no worker running: waits for the transport's own device work, drops the
     * messages an aborted replay left and frees every buffer. */
    void (*reset)(ExecTransport *t);
    void (*free)(ExecTransport *t);
};

struct _ExecTransport {
    const ExecTransportOps *ops;
};

/* The producer and consumer of messages: activations go from vstage - 1 to vstage, gradients
 * from vstage + 1 to vstage. Returns the producing virtual stage of (@kind, @vstage). */
static inline int32_t exec_msg_producer(ExecMsgKind kind, int32_t vstage) {
    return kind == EXEC_MSG_ACT ? vstage - 1 : vstage + 1;
}

/* --- message names and wire errors (exec-transport-wire.c) --- */

/* The key of message (@kind, @mb, @vstage) in a stage's pending table (exec-inbox.h): @kind (an
 * ExecMsgKind, 0..127) in the top byte, @mb (0 <= mb < 2^36) and @vstage (< 2^20) below. */
gint64 exec_msg_key(int kind, int32_t mb, int32_t vstage);

/* The wire tag of an activation (@grad FALSE) or gradient (@grad TRUE) for @vstage of
 * micro-batch @mb: (mb * n_vstages + vstage) * 2 + grad (int64: it may exceed the group's
 * largest tag, which exec_backend_check_tags() and senders check), and back. */
int64_t exec_msg_tag(int32_t n_vstages, gboolean grad, int32_t mb, int32_t vstage);
void exec_msg_untag(int32_t n_vstages, int32_t tag, gboolean *grad, int32_t *mb, int32_t *vstage);
/* EXEC_ERROR_SHAPE: micro-batch @mb of a replay needs a tag past @comm's largest (the message
 * says how to cut the run into shorter segments). */
GError *exec_msg_tag_error(const ExecComm *comm, int32_t n_vstages, int32_t mb);
/* EXEC_ERROR_COMM for an input that missed the group's deadline: the activation or gradient
 * for op @op (nullable: the op is not known) of micro-batch @mb on @vstage, from stage
 * @producer (named by its rank in this rank's replica; @peer_waits_for: the rank its answer
 * to the probe said it waits for, or -1, exec_comm_blame()); and for dynamic mode's blocking poll
 * of @stage (its neighbours' ranks named). */
GError *exec_msg_late_input(const ExecComm *comm, gboolean grad, const char *op, int32_t mb,
                            int32_t vstage, int32_t producer, int32_t peer_waits_for);
/* Worker: the message of @kind for @mb on @vstage from stage @producer out of @box (transfer
 * full), as exec_inbox_take() gives it. Without a group (@comm NULL) it waits without limit;
 * with one, under the group's watch of the producer's rank (exec_comm_watch_begin(): a
 * producer that is itself waiting answers the probe and is not blamed); a silent producer
 * aborts the inbox and is recorded as this rank's failure (exec_msg_late_input(), naming what
 * its answer said it waits for). Returns NULL once the inbox is aborted. */
ExecInboxMsg *exec_msg_take(ExecComm *comm, ExecInbox *box, ExecMsgKind kind, const char *op,
                            int32_t mb, int32_t vstage, int32_t producer);
GError       *exec_msg_late_poll(const ExecComm *comm, int32_t stage, int32_t n_stages);

/* The host-queue transport (exec-transport-queue.c): messages of @msg_bytes in host memory.
 * A message for a stage this process runs (@local, (n_stages), borrowed for the call) goes into
 * the stage's inbox; with @comm (nullable; one stage per rank), one for another rank is posted
 * to the group (tag exec_msg_tag(), channel EXEC_COMM_DATA), and the transport installs
 * itself as @comm's EXEC_COMM_DATA receiver (until free()): the host thread files arrivals
 * into the inboxes. Waits then have the group's deadline. @vstage_stage: (n_vstages) borrowed.
 * Returns: (transfer full). */
ExecTransport *exec_transport_queue_new(int32_t n_stages, int32_t n_vstages,
                                        const int32_t *vstage_stage, const gboolean *local,
                                        size_t msg_bytes, ExecComm *comm);

G_END_DECLS
