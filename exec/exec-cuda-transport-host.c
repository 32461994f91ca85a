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
 *     rank (exec_comm_post(), tag exec_backend_msg_tag());
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
#include "kern-check.h"
#include "pp-error.h"

/* An arrived message, from its arrival until release(); or a stage's outgoing message,
 * between take() and send(). */
struct _ExecCudaMsg {
    gint64          key; /* (kind, mb, vstage) */
    ExecCudaMsgKind kind;
    int32_t         mb, vstage;
    void           *data; /* (msg_bytes) g_malloc'd, from the group; NULL once recv() took it
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
    int32_t      stage;
    int32_t      device;
    GAsyncQueue *queue;   /* ExecCudaMsg* arrived, or &exec_cuda_host_abort_marker */
    GHashTable  *pending; /* &msg->key -> msg: arrived, not yet received */
    gboolean     aborted;
    void        *dev_out, *dev_in;       /* device (msg_bytes): the message out, the one in */
    void        *pinned_out, *pinned_in; /* pinned host (msg_bytes) */
    ExecCudaMsg  out;                    /* the message between take() and send() */
    ExecCudaMsg *in;                     /* the message between recv() and release(), or NULL */
} ExecCudaHostStage;

typedef struct ExecCudaHost {
    ExecCudaTransport  base;
    ExecComm          *comm;
    int32_t            n_stages, n_vstages;
    int32_t           *vstage_stage; /* (n_vstages) */
    size_t             msg_bytes;
    ExecCudaHostStage *stages; /* (n_stages); queue NULL for another rank's stage */
} ExecCudaHost;

/* What abort() pushes into every inbox; never read or written. */
static const ExecCudaMsg exec_cuda_host_abort_marker;

static ExecCudaHost *exec_cuda_host(ExecCudaTransport *t) {
    return (ExecCudaHost *)t;
}

static ExecCudaHostStage *exec_cuda_host_stage(ExecCudaHost *h, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < h->n_vstages);
    ExecCudaHostStage *st = &h->stages[h->vstage_stage[vstage]];
    PP_ASSERT(st->queue != NULL); /* only a local stage's worker calls in */
    return st;
}

static void exec_cuda_host_msg_free(gpointer p) {
    ExecCudaMsg *m = p;
    g_free(m->data);
    g_free(m);
}

/* --- producer --- */

static void *exec_cuda_host_take(ExecCudaTransport *t, ExecCudaMsgKind kind, int32_t mb,
                                 int32_t vstage, cudaStream_t stream, ExecCudaMsg **msg) {
    (void)stream; /* dev_out's previous reader, the copy in send(), ran on the same stream */
    ExecCudaHost      *h = exec_cuda_host(t);
    int32_t            producer = kind == EXEC_CUDA_MSG_ACT ? vstage - 1 : vstage + 1;
    ExecCudaHostStage *st = exec_cuda_host_stage(h, producer);
    PP_ASSERT(h->vstage_stage[vstage] != st->stage); /* one stage per rank */
    st->out = (ExecCudaMsg){
        .key = exec_backend_msg_key(kind, mb, vstage), .kind = kind, .mb = mb, .vstage = vstage};
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

static void exec_cuda_host_send(ExecCudaTransport *t, ExecCudaMsg *m, cudaStream_t stream) {
    ExecCudaHost      *h = exec_cuda_host(t);
    ExecCudaHostStage *st =
        exec_cuda_host_stage(h, m->kind == EXEC_CUDA_MSG_ACT ? m->vstage - 1 : m->vstage + 1);
    PP_ASSERT(m == &st->out);
    int64_t tag =
        exec_backend_msg_tag(h->n_vstages, m->kind == EXEC_CUDA_MSG_GRAD, m->mb, m->vstage);
    if (tag > exec_comm_tag_max(h->comm)) {
        /* Dynamic mode learns a replay's length only as it runs (prepare() checks programs). */
        exec_comm_fail(h->comm, exec_backend_tag_error(h->comm, h->n_vstages, m->mb));
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
    exec_backend_msg_untag(h->n_vstages, tag, &grad, &mb, &vstage);
    /* Sent by exec_cuda_host_send() of the same program to this rank. */
    PP_ASSERT(bytes == h->msg_bytes);
    ExecCudaMsgKind kind = grad ? EXEC_CUDA_MSG_GRAD : EXEC_CUDA_MSG_ACT;
    ExecCudaMsg    *m = g_new(ExecCudaMsg, 1);
    *m = (ExecCudaMsg){.key = exec_backend_msg_key(kind, mb, vstage),
                       .kind = kind,
                       .mb = mb,
                       .vstage = vstage,
                       .data = data};
    g_async_queue_push(exec_cuda_host_stage(h, vstage)->queue, m);
}

/* Files @m in @st's pending table, or marks the stage aborted. */
static void exec_cuda_host_file(ExecCudaHostStage *st, ExecCudaMsg *m) {
    if (m == &exec_cuda_host_abort_marker) {
        st->aborted = TRUE;
        return;
    }
    /* A message arrives once per (kind, mb, vstage): validation guarantees one producer. */
    PP_ASSERT(!g_hash_table_contains(st->pending, &m->key));
    g_hash_table_insert(st->pending, &m->key, m);
}

/* Files the next arrival at @st within the group's deadline; FALSE (and @st aborted) when
 * none came in time: the caller records what was missing. */
static gboolean exec_cuda_host_pop(ExecCudaHost *h, ExecCudaHostStage *st) {
    ExecCudaMsg *m = g_async_queue_timeout_pop(
        st->queue, (guint64)(exec_comm_timeout(h->comm) * G_USEC_PER_SEC));
    if (m == NULL) {
        st->aborted = TRUE;
        return FALSE;
    }
    exec_cuda_host_file(st, m);
    return TRUE;
}

/* Host function on the consumer's stream: the message into the pinned buffer, then freed. */
static void CUDART_CB exec_cuda_host_stage_in(void *p) {
    ExecCudaHostCopy *c = p;
    memcpy(c->pinned, c->data, c->t->msg_bytes);
    g_free(c->data);
    g_free(c);
}

static gboolean exec_cuda_host_recv(ExecCudaTransport *t, ExecCudaMsgKind kind, const char *op,
                                    int32_t mb, int32_t vstage, cudaStream_t stream,
                                    ExecCudaMsg **msg, const void **data) {
    ExecCudaHost      *h = exec_cuda_host(t);
    ExecCudaHostStage *st = exec_cuda_host_stage(h, vstage);
    gint64             key = exec_backend_msg_key(kind, mb, vstage);
    int32_t producer = h->vstage_stage[kind == EXEC_CUDA_MSG_ACT ? vstage - 1 : vstage + 1];
    while (!st->aborted) {
        ExecCudaMsg *m = g_hash_table_lookup(st->pending, &key);
        if (m) {
            g_hash_table_steal(st->pending, &key);
            ExecCudaHostCopy *c = g_new(ExecCudaHostCopy, 1);
            *c = (ExecCudaHostCopy){.t = h, .pinned = st->pinned_in, .data = m->data};
            m->data = NULL;
            KERN_CUDA_CHECK(cudaLaunchHostFunc(stream, exec_cuda_host_stage_in, c));
            KERN_CUDA_CHECK(cudaMemcpyAsync(st->dev_in, st->pinned_in, h->msg_bytes,
                                            cudaMemcpyHostToDevice, stream));
            PP_ASSERT(st->in == NULL); /* one input per op, released after it */
            st->in = m;
            *msg = m;
            *data = st->dev_in;
            return TRUE;
        }
        if (!exec_cuda_host_pop(h, st))
            exec_comm_fail(h->comm, exec_backend_late_input(h->comm, kind == EXEC_CUDA_MSG_GRAD, op,
                                                            mb, vstage, producer));
    }
    return FALSE;
}

static void exec_cuda_host_release(ExecCudaTransport *t, ExecCudaMsg *m, cudaStream_t stream) {
    (void)stream; /* the next copy into dev_in is ordered after this reader on the stream */
    ExecCudaHostStage *st = exec_cuda_host_stage(exec_cuda_host(t), m->vstage);
    PP_ASSERT(st->in == m);
    st->in = NULL;
    exec_cuda_host_msg_free(m);
}

static gboolean exec_cuda_host_poll(ExecCudaTransport *t, int32_t stage, gboolean block) {
    ExecCudaHost      *h = exec_cuda_host(t);
    ExecCudaHostStage *st = &h->stages[stage];
    PP_ASSERT(st->queue != NULL);
    if (block && !st->aborted && !exec_cuda_host_pop(h, st))
        exec_comm_fail(h->comm, exec_backend_late_poll(h->comm, stage, h->n_stages));
    for (ExecCudaMsg *m; !st->aborted && (m = g_async_queue_try_pop(st->queue)) != NULL;)
        exec_cuda_host_file(st, m);
    return !st->aborted;
}

static gboolean exec_cuda_host_has(ExecCudaTransport *t, ExecCudaMsgKind kind, int32_t mb,
                                   int32_t vstage) {
    ExecCudaHost *h = exec_cuda_host(t);
    gint64        key = exec_backend_msg_key(kind, mb, vstage);
    return g_hash_table_contains(exec_cuda_host_stage(h, vstage)->pending, &key);
}

static void exec_cuda_host_abort(ExecCudaTransport *t) {
    ExecCudaHost *h = exec_cuda_host(t);
    for (int32_t s = 0; s < h->n_stages; s++) {
        if (h->stages[s].queue)
            g_async_queue_push(h->stages[s].queue, (gpointer)&exec_cuda_host_abort_marker);
    }
}

/* --- reset and teardown --- */

static void exec_cuda_host_reset(ExecCudaTransport *t) {
    ExecCudaHost *h = exec_cuda_host(t);
    for (int32_t s = 0; s < h->n_stages; s++) {
        ExecCudaHostStage *st = &h->stages[s];
        if (!st->queue)
            continue;
        /* An aborted replay may leave arrived messages behind, and one its worker took. */
        g_clear_pointer(&st->in, exec_cuda_host_msg_free);
        g_hash_table_remove_all(st->pending);
        for (ExecCudaMsg *m; (m = g_async_queue_try_pop(st->queue)) != NULL;) {
            if (m != &exec_cuda_host_abort_marker)
                exec_cuda_host_msg_free(m);
        }
        st->aborted = FALSE;
    }
}

static void exec_cuda_host_free(ExecCudaTransport *t) {
    ExecCudaHost *h = exec_cuda_host(t);
    exec_comm_set_receiver(h->comm, EXEC_COMM_DATA, NULL, NULL);
    exec_cuda_host_reset(t);
    for (int32_t s = 0; s < h->n_stages; s++) {
        ExecCudaHostStage *st = &h->stages[s];
        if (!st->queue)
            continue;
        KERN_CUDA_CHECK(cudaSetDevice(st->device));
        /* The stage's stream ran its last host function before the backend freed it. */
        KERN_CUDA_CHECK(cudaFree(st->dev_out));
        KERN_CUDA_CHECK(cudaFree(st->dev_in));
        KERN_CUDA_CHECK(cudaFreeHost(st->pinned_out));
        KERN_CUDA_CHECK(cudaFreeHost(st->pinned_in));
        g_hash_table_unref(st->pending);
        g_async_queue_unref(st->queue);
    }
    g_free(h->stages);
    g_free(h->vstage_stage);
    g_free(h);
}

static const ExecCudaTransportOps exec_cuda_host_ops = {
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

ExecCudaTransport *exec_cuda_transport_host_new(const ExecCudaPlan *plan,
                                                const int32_t *vstage_stage, ExecComm *comm,
                                                const gboolean *local) {
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
        st->queue = g_async_queue_new();
        st->pending =
            g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, exec_cuda_host_msg_free);
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
