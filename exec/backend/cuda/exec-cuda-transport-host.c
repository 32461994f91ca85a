/* SPDX-License-Identifier: MIT
 * exec-cuda-transport-host.c: the CUDA backend's transport between processes
 * (exec-cuda-transport.h), staged through host memory and the process group (exec-comm.h).
 * It works for any placement, also for several ranks on one GPU, where NCCL refuses to run.
 *
 * Every copy and hand-off of a stage runs in order on the stage's compute stream, so the
 * stream orders the reuse of its four buffers (device and pinned host, one each way) and a
 * message needs no slot of its own:
 *   send: a device-to-host copy of the producer's buffer into the pinned out buffer, then a
 *     host function that copies it into a new host buffer and posts that to the consumer's
 *     rank (exec_comm_post(), tag exec_msg_tag());
 *   arrival (host thread, inside exec_comm_serve()): the message is queued in the consuming
 *     stage's inbox;
 *   recv: a host function copies the message into the pinned in buffer (and frees it), then a
 *     host-to-device copy fills the device buffer the op reads.
 * The host functions hold the stream while they copy (about a millisecond per 10 MB): this is
 * the fallback path, not the fast one. A stage's final flush synchronises its stream, so its
 * last messages are posted before its worker ends and exec_comm_serve() returns. Waits for a
 * message have the group's deadline (run.comm_timeout_s): past it the wait records which input
 * from which rank is missing (exec_comm_fail()) and the replay stops.
 */
#include <string.h>

#include "exec-cuda-transport.h"
#include "exec-inbox.h"
#include "kern-check.h"
#include "pp-error.h"

/* An arrived message, from its arrival until release(); or a stage's outgoing message,
 * between take() and send(). */
struct _ExecTransportMsg {
    ExecInboxMsg head; /* (kind, mb, vstage) */
    ExecMsgKind  kind;
    int32_t      mb, vstage;
    void        *data; /* (msg_bytes) g_malloc'd, from the group; NULL once recv() took it
                          and for an outgoing message */
};

/* What a host function on the stream needs: it runs after the caller has moved on. */
typedef struct {
    struct ExecCudaHost *t;
    void                *pinned; /* the stage's pinned buffer */
    void                *data;   /* send: NULL; recv: the message (transfer full) */
    int32_t              peer;   /* send: the consumer's rank */
    int32_t              tag;    /* send: the message's tag */
} ExecCudaHostCopy;

typedef struct {
    int32_t           stage;
    int32_t           device;
    ExecInbox         inbox;                  /* arrived messages; open for a local stage only */
    void             *dev_out, *dev_in;       /* device (msg_bytes): the message out, the one in */
    void             *pinned_out, *pinned_in; /* pinned host (msg_bytes) */
    ExecTransportMsg  out;                    /* the message between take() and send() */
    ExecTransportMsg *in; /* the message between recv() and release(), or NULL */
} ExecCudaHostStage;

typedef struct ExecCudaHost {
    ExecTransport      base;
    ExecComm          *comm;
    int32_t            n_stages, n_vstages;
    int32_t           *vstage_stage; /* (n_vstages) */
    size_t             msg_bytes;
    ExecCudaHostStage *stages; /* (n_stages) */
} ExecCudaHost;

static ExecCudaHost *exec_cuda_host(ExecTransport *t) {
    return (ExecCudaHost *)t;
}

static ExecCudaHostStage *exec_cuda_host_stage(ExecCudaHost *h, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < h->n_vstages);
    ExecCudaHostStage *st = &h->stages[h->vstage_stage[vstage]];
    PP_ASSERT(exec_inbox_is_open(&st->inbox)); /* only a local stage's worker calls in */
    return st;
}

static void exec_cuda_host_msg_free(gpointer p) {
    ExecTransportMsg *m = p;
    g_free(m->data);
    g_free(m);
}

/* --- producer --- */

static void *exec_cuda_host_take(ExecTransport *t, ExecMsgKind kind, int32_t mb, int32_t vstage,
                                 ExecQueue queue, ExecTransportMsg **msg) {
    (void)queue; /* dev_out's previous reader, the copy in send(), ran on the same stream */
    ExecCudaHost      *h = exec_cuda_host(t);
    int32_t            producer = kind == EXEC_MSG_ACT ? vstage - 1 : vstage + 1;
    ExecCudaHostStage *st = exec_cuda_host_stage(h, producer);
    PP_ASSERT(h->vstage_stage[vstage] != st->stage); /* one stage per rank */
    st->out = (ExecTransportMsg){
        .head.key = exec_msg_key(kind, mb, vstage), .kind = kind, .mb = mb, .vstage = vstage};
    *msg = &st->out;
    return st->dev_out;
}

/* Host function on the producer's stream: the pinned copy of the message goes to its rank. */
static void CUDART_CB exec_cuda_host_post(void *p) {
    ExecCudaHostCopy *c = p;
    exec_comm_post(c->t->comm, EXEC_COMM_DATA, c->peer, c->tag,
                   g_memdup2(c->pinned, c->t->msg_bytes), c->t->msg_bytes);
    g_free(c);
}

static void exec_cuda_host_send(ExecTransport *t, ExecTransportMsg *m, ExecQueue queue) {
    cudaStream_t       stream = queue;
    ExecCudaHost      *h = exec_cuda_host(t);
    ExecCudaHostStage *st =
        exec_cuda_host_stage(h, m->kind == EXEC_MSG_ACT ? m->vstage - 1 : m->vstage + 1);
    PP_ASSERT(m == &st->out);
    int64_t tag = exec_msg_tag(h->n_vstages, m->kind == EXEC_MSG_GRAD, m->mb, m->vstage);
    if (tag > exec_comm_tag_max(h->comm)) {
        /* Dynamic mode learns a replay's length only as it runs (prepare() checks programs). */
        exec_comm_fail(h->comm, exec_msg_tag_error(h->comm, h->n_vstages, m->mb));
        return;
    }
    ExecCudaHostCopy *c = g_new(ExecCudaHostCopy, 1);
    *c = (ExecCudaHostCopy){
        .t = h, .pinned = st->pinned_out, .peer = h->vstage_stage[m->vstage], .tag = (int32_t)tag};
    KERN_CUDA_CHECK(
        cudaMemcpyAsync(st->pinned_out, st->dev_out, h->msg_bytes, cudaMemcpyDeviceToHost, stream));
    KERN_CUDA_CHECK(cudaLaunchHostFunc(stream, exec_cuda_host_post, c));
}

/* --- consumer --- */

/* The group's receiver of activations and gradients (host thread): into the inbox of the
 * local stage that holds the message's virtual stage. */
static void exec_cuda_host_receive(gpointer user_data, int32_t src, int32_t tag, void *data,
                                   size_t bytes) {
    ExecCudaHost *h = user_data;
    (void)src;
    gboolean grad;
    int32_t  mb, vstage;
    exec_msg_untag(h->n_vstages, tag, &grad, &mb, &vstage);
    /* Sent by exec_cuda_host_send() of the same program to this rank. */
    PP_ASSERT(bytes == h->msg_bytes);
    ExecMsgKind       kind = grad ? EXEC_MSG_GRAD : EXEC_MSG_ACT;
    ExecTransportMsg *m = g_new(ExecTransportMsg, 1);
    *m = (ExecTransportMsg){.head.key = exec_msg_key(kind, mb, vstage),
                            .kind = kind,
                            .mb = mb,
                            .vstage = vstage,
                            .data = data};
    exec_inbox_push(&exec_cuda_host_stage(h, vstage)->inbox, &m->head);
}

/* The group's deadline of a wait (µs). */
static gint64 exec_cuda_host_timeout_us(const ExecCudaHost *h) {
    return (gint64)(exec_comm_timeout(h->comm) * G_USEC_PER_SEC);
}

/* Host function on the consumer's stream: the message into the pinned buffer, then freed. */
static void CUDART_CB exec_cuda_host_stage_in(void *p) {
    ExecCudaHostCopy *c = p;
    memcpy(c->pinned, c->data, c->t->msg_bytes);
    g_free(c->data);
    g_free(c);
}

static gboolean exec_cuda_host_recv(ExecTransport *t, ExecMsgKind kind, const char *op, int32_t mb,
                                    int32_t vstage, ExecQueue queue, ExecTransportMsg **msg,
                                    const void **data) {
    cudaStream_t       stream = queue;
    ExecCudaHost      *h = exec_cuda_host(t);
    ExecCudaHostStage *st = exec_cuda_host_stage(h, vstage);
    int32_t            producer = h->vstage_stage[exec_msg_producer(kind, vstage)];
    ExecTransportMsg  *m =
        (ExecTransportMsg *)exec_msg_take(h->comm, &st->inbox, kind, op, mb, vstage, producer);
    if (m == NULL)
        return FALSE;
    ExecCudaHostCopy *c = g_new(ExecCudaHostCopy, 1);
    *c = (ExecCudaHostCopy){.t = h, .pinned = st->pinned_in, .data = m->data};
    m->data = NULL;
    KERN_CUDA_CHECK(cudaLaunchHostFunc(stream, exec_cuda_host_stage_in, c));
    KERN_CUDA_CHECK(
        cudaMemcpyAsync(st->dev_in, st->pinned_in, h->msg_bytes, cudaMemcpyHostToDevice, stream));
    PP_ASSERT(st->in == NULL); /* one input per op, released after it */
    st->in = m;
    *msg = m;
    *data = st->dev_in;
    return TRUE;
}

static void exec_cuda_host_release(ExecTransport *t, ExecTransportMsg *m, ExecQueue queue) {
    (void)queue; /* the next copy into dev_in is ordered after this reader on the stream */
    ExecCudaHostStage *st = exec_cuda_host_stage(exec_cuda_host(t), m->vstage);
    PP_ASSERT(st->in == m);
    st->in = NULL;
    exec_cuda_host_msg_free(m);
}

static gboolean exec_cuda_host_poll(ExecTransport *t, int32_t stage, gboolean block) {
    ExecCudaHost      *h = exec_cuda_host(t);
    ExecCudaHostStage *st = &h->stages[stage];
    gboolean           late = FALSE;
    PP_ASSERT(exec_inbox_is_open(&st->inbox));
    gboolean ok = exec_inbox_poll(&st->inbox, block, exec_cuda_host_timeout_us(h), &late);
    if (late)
        exec_comm_fail(h->comm, exec_msg_late_poll(h->comm, stage, h->n_stages));
    return ok;
}

static gboolean exec_cuda_host_has(ExecTransport *t, ExecMsgKind kind, int32_t mb, int32_t vstage) {
    ExecCudaHost *h = exec_cuda_host(t);
    return exec_inbox_has(&exec_cuda_host_stage(h, vstage)->inbox, exec_msg_key(kind, mb, vstage));
}

static void exec_cuda_host_abort(ExecTransport *t) {
    ExecCudaHost *h = exec_cuda_host(t);
    for (int32_t s = 0; s < h->n_stages; s++)
        if (exec_inbox_is_open(&h->stages[s].inbox))
            exec_inbox_abort(&h->stages[s].inbox);
}

/* --- reset and teardown --- */

static void exec_cuda_host_reset(ExecTransport *t) {
    ExecCudaHost *h = exec_cuda_host(t);
    for (int32_t s = 0; s < h->n_stages; s++) {
        ExecCudaHostStage *st = &h->stages[s];
        if (!exec_inbox_is_open(&st->inbox))
            continue;
        /* An aborted replay may leave arrived messages behind, and one its worker took. */
        g_clear_pointer(&st->in, exec_cuda_host_msg_free);
        exec_inbox_reset(&st->inbox);
    }
}

static void exec_cuda_host_free(ExecTransport *t) {
    ExecCudaHost *h = exec_cuda_host(t);
    exec_comm_set_receiver(h->comm, EXEC_COMM_DATA, NULL, NULL);
    exec_cuda_host_reset(t);
    for (int32_t s = 0; s < h->n_stages; s++) {
        ExecCudaHostStage *st = &h->stages[s];
        if (!exec_inbox_is_open(&st->inbox))
            continue;
        KERN_CUDA_CHECK(cudaSetDevice(st->device));
        /* The stage's stream ran its last host function before the backend freed it. */
        KERN_CUDA_CHECK(cudaFree(st->dev_out));
        KERN_CUDA_CHECK(cudaFree(st->dev_in));
        KERN_CUDA_CHECK(cudaFreeHost(st->pinned_out));
        KERN_CUDA_CHECK(cudaFreeHost(st->pinned_in));
        exec_inbox_clear(&st->inbox);
    }
    g_free(h->stages);
    g_free(h->vstage_stage);
    g_free(h);
}

static const ExecTransportOps exec_cuda_host_ops = {
    .take = exec_cuda_host_take,
    .send = exec_cuda_host_send,
    .recv = exec_cuda_host_recv,
    .release = exec_cuda_host_release,
    .poll = exec_cuda_host_poll,
    .has = exec_cuda_host_has,
    .abort = exec_cuda_host_abort,
    .reset = exec_cuda_host_reset,
    .free = exec_cuda_host_free,
};

/* --- construction --- */

/* The four buffers of local stage @st on its (current) device. FALSE when memory runs out
 * (the error cleared; what was allocated is freed with the transport). */
static gboolean exec_cuda_host_stage_init(ExecCudaHost *h, ExecCudaHostStage *st) {
    cudaError_t err = cudaMalloc(&st->dev_out, h->msg_bytes);
    if (err == cudaSuccess)
        err = cudaMalloc(&st->dev_in, h->msg_bytes);
    if (err == cudaSuccess)
        err = cudaMallocHost(&st->pinned_out, h->msg_bytes);
    if (err == cudaSuccess)
        err = cudaMallocHost(&st->pinned_in, h->msg_bytes);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return FALSE;
    }
    KERN_CUDA_CHECK(err);
    return TRUE;
}

ExecTransport *exec_cuda_transport_host_new(const ExecCudaPlan *plan, const int32_t *vstage_stage,
                                            ExecComm *comm, const gboolean *local) {
    PP_ASSERT(comm != NULL);
    ExecCudaHost *h = g_new0(ExecCudaHost, 1);
    h->base.ops = &exec_cuda_host_ops;
    h->comm = comm;
    h->n_stages = plan->n_stages;
    h->n_vstages = plan->n_vstages;
    h->vstage_stage = g_memdup2(vstage_stage, (gsize)plan->n_vstages * sizeof(int32_t));
    h->msg_bytes = plan->msg_bytes;
    h->stages = g_new0(ExecCudaHostStage, plan->n_stages);
    gboolean ok = TRUE;
    for (int32_t s = 0; s < plan->n_stages; s++) {
        ExecCudaHostStage *st = &h->stages[s];
        st->stage = s;
        st->device = plan->device[s];
        if (!local[s])
            continue;
        exec_inbox_init(&st->inbox, exec_cuda_host_msg_free);
        KERN_CUDA_CHECK(cudaSetDevice(st->device));
        ok = ok && exec_cuda_host_stage_init(h, st);
    }
    exec_comm_set_receiver(comm, EXEC_COMM_DATA, exec_cuda_host_receive, h);
    if (!ok) {
        exec_cuda_host_free(&h->base);
        return NULL;
    }
    return &h->base;
}
