/* SPDX-License-Identifier: MIT
 * exec-transport-queue.c: the host-queue transport (exec-transport.h). A message is a host
 * buffer of msg_bytes that moves by pointer: into the consuming stage's inbox when this
 * process runs that stage, else posted to the process group (which takes the buffer) with the
 * tag of (mb, vstage, kind); the host thread, serving the group while the workers run, files
 * arriving buffers into the inboxes. Host memory needs no queue ordering: the ExecQueue
 * arguments are NULL.
 */
#include "exec-transport.h"

#include "exec-inbox.h"
#include "pp-error.h"

struct _ExecTransportMsg {
    ExecInboxMsg head; /* (kind, mb, vstage) */
    ExecMsgKind  kind;
    int32_t      mb, vstage;
    void        *data; /* (msg_bytes) g_malloc'd */
};

typedef struct {
    ExecTransport base;
    ExecComm     *comm; /* (nullable) */
    int32_t       n_stages, n_vstages;
    int32_t      *vstage_stage; /* (n_vstages) */
    size_t        msg_bytes;
    ExecInbox    *inboxes; /* (n_stages) open for the local stages */
} ExecTransportQueue;

static ExecTransportQueue *exec_transport_queue(ExecTransport *t) {
    return (ExecTransportQueue *)t;
}

static void exec_transport_queue_msg_free(gpointer p) {
    ExecTransportMsg *m = p;
    g_free(m->data);
    g_free(m);
}

static ExecTransportMsg *exec_transport_queue_msg_new(ExecMsgKind kind, int32_t mb, int32_t vstage,
                                                      void *data) {
    ExecTransportMsg *m = g_new(ExecTransportMsg, 1);
    *m = (ExecTransportMsg){.head.key = exec_msg_key(kind, mb, vstage),
                            .kind = kind,
                            .mb = mb,
                            .vstage = vstage,
                            .data = data};
    return m;
}

/* The inbox of the local stage that holds @vstage. */
static ExecInbox *exec_transport_queue_inbox(ExecTransportQueue *q, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < q->n_vstages);
    ExecInbox *box = &q->inboxes[q->vstage_stage[vstage]];
    PP_ASSERT(exec_inbox_is_open(box)); /* only a local stage's worker calls in */
    return box;
}

/* The group's deadline of a wait (µs), or -1 (no limit) in one process. */
static gint64 exec_transport_queue_timeout_us(const ExecTransportQueue *q) {
    return q->comm ? (gint64)(exec_comm_timeout(q->comm) * G_USEC_PER_SEC) : -1;
}

static void *exec_transport_queue_take(ExecTransport *t, ExecMsgKind kind, int32_t mb,
                                       int32_t vstage, ExecQueue queue, ExecTransportMsg **msg) {
    (void)queue;
    ExecTransportQueue *q = exec_transport_queue(t);
    *msg = exec_transport_queue_msg_new(kind, mb, vstage, g_malloc(q->msg_bytes));
    return (*msg)->data;
}

static void exec_transport_queue_send(ExecTransport *t, ExecTransportMsg *m, ExecQueue queue) {
    (void)queue;
    ExecTransportQueue *q = exec_transport_queue(t);
    int32_t             stage = q->vstage_stage[m->vstage];
    if (q->comm == NULL || stage == exec_comm_stage(q->comm)) {
        exec_inbox_push(&q->inboxes[stage], &m->head);
        return;
    }
    int64_t tag = exec_msg_tag(q->n_vstages, m->kind == EXEC_MSG_GRAD, m->mb, m->vstage);
    if (tag > exec_comm_tag_max(q->comm)) {
        /* Dynamic mode learns a replay's length only as it runs (prepare() checks programs). */
        exec_comm_fail(q->comm, exec_msg_tag_error(q->comm, q->n_vstages, m->mb));
        exec_transport_queue_msg_free(m);
        return;
    }
    exec_comm_post(q->comm, EXEC_COMM_DATA, exec_comm_stage_rank(q->comm, stage), (int32_t)tag,
                   m->data, q->msg_bytes);
    g_free(m);
}

/* The group's receiver of activations and gradients (host thread): into the inbox of the
 * local stage holding the message's virtual stage. */
static void exec_transport_queue_receive(gpointer user_data, int32_t src, int32_t tag, void *data,
                                         size_t bytes) {
    ExecTransportQueue *q = user_data;
    (void)src;
    gboolean grad;
    int32_t  mb, vstage;
    exec_msg_untag(q->n_vstages, tag, &grad, &mb, &vstage);
    /* Sent by exec_transport_queue_send() of the same program to this rank. */
    PP_ASSERT(bytes == q->msg_bytes);
    ExecTransportMsg *m =
        exec_transport_queue_msg_new(grad ? EXEC_MSG_GRAD : EXEC_MSG_ACT, mb, vstage, data);
    exec_inbox_push(exec_transport_queue_inbox(q, vstage), &m->head);
}

static gboolean exec_transport_queue_recv(ExecTransport *t, ExecMsgKind kind, const char *op,
                                          int32_t mb, int32_t vstage, ExecQueue queue,
                                          ExecTransportMsg **msg, const void **data) {
    (void)queue;
    ExecTransportQueue *q = exec_transport_queue(t);
    int32_t             producer = q->vstage_stage[exec_msg_producer(kind, vstage)];
    ExecInboxMsg *head = exec_msg_take(q->comm, exec_transport_queue_inbox(q, vstage), kind, op, mb,
                                       vstage, producer);
    if (head == NULL)
        return FALSE;
    *msg = (ExecTransportMsg *)head;
    *data = (*msg)->data;
    return TRUE;
}

static void exec_transport_queue_release(ExecTransport *t, ExecTransportMsg *m, ExecQueue queue) {
    (void)t, (void)queue;
    exec_transport_queue_msg_free(m);
}

static gboolean exec_transport_queue_poll(ExecTransport *t, int32_t stage, gboolean block) {
    ExecTransportQueue *q = exec_transport_queue(t);
    gboolean            late = FALSE;
    PP_ASSERT(exec_inbox_is_open(&q->inboxes[stage]));
    gboolean ok =
        exec_inbox_poll(&q->inboxes[stage], block, exec_transport_queue_timeout_us(q), &late);
    if (late)
        exec_comm_fail(q->comm, exec_msg_late_poll(q->comm, stage, q->n_stages));
    return ok;
}

static gboolean exec_transport_queue_has(ExecTransport *t, ExecMsgKind kind, int32_t mb,
                                         int32_t vstage) {
    ExecTransportQueue *q = exec_transport_queue(t);
    return exec_inbox_has(exec_transport_queue_inbox(q, vstage), exec_msg_key(kind, mb, vstage));
}

static void exec_transport_queue_abort(ExecTransport *t) {
    ExecTransportQueue *q = exec_transport_queue(t);
    for (int32_t s = 0; s < q->n_stages; s++)
        if (exec_inbox_is_open(&q->inboxes[s]))
            exec_inbox_abort(&q->inboxes[s]);
}

static void exec_transport_queue_reset(ExecTransport *t) {
    ExecTransportQueue *q = exec_transport_queue(t);
    for (int32_t s = 0; s < q->n_stages; s++)
        if (exec_inbox_is_open(&q->inboxes[s]))
            exec_inbox_reset(&q->inboxes[s]);
}

static void exec_transport_queue_free(ExecTransport *t) {
    ExecTransportQueue *q = exec_transport_queue(t);
    if (q->comm)
        exec_comm_set_receiver(q->comm, EXEC_COMM_DATA, NULL, NULL);
    for (int32_t s = 0; s < q->n_stages; s++)
        exec_inbox_clear(&q->inboxes[s]);
    g_free(q->inboxes);
    g_free(q->vstage_stage);
    g_free(q);
}

static const ExecTransportOps exec_transport_queue_ops = {
    .take = exec_transport_queue_take,
    .send = exec_transport_queue_send,
    .recv = exec_transport_queue_recv,
    .release = exec_transport_queue_release,
    .poll = exec_transport_queue_poll,
    .has = exec_transport_queue_has,
    .abort = exec_transport_queue_abort,
    .reset = exec_transport_queue_reset,
    .free = exec_transport_queue_free,
};

ExecTransport *exec_transport_queue_new(int32_t n_stages, int32_t n_vstages,
                                        const int32_t *vstage_stage, const gboolean *local,
                                        size_t msg_bytes, ExecComm *comm) {
    ExecTransportQueue *q = g_new0(ExecTransportQueue, 1);
    q->base.ops = &exec_transport_queue_ops;
    q->comm = comm;
    q->n_stages = n_stages;
    q->n_vstages = n_vstages;
    q->vstage_stage = g_memdup2(vstage_stage, (gsize)n_vstages * sizeof(int32_t));
    q->msg_bytes = msg_bytes;
    q->inboxes = g_new0(ExecInbox, n_stages);
    for (int32_t s = 0; s < n_stages; s++)
        if (local[s])
            exec_inbox_init(&q->inboxes[s], exec_transport_queue_msg_free);
    if (comm)
        exec_comm_set_receiver(comm, EXEC_COMM_DATA, exec_transport_queue_receive, q);
    return &q->base;
}
