/* SPDX-License-Identifier: MIT
 * exec-cuda-transport.c: the one-process transport of the CUDA backend
 * (exec-cuda-transport.h). Each (consumer vstage, kind) has a pool of message slots on the
 * consumer's device with three events: ready (the message is in the slot), released (the
 * consumer read it) and, between devices, written (the producer filled its staging slot).
 * On one device the producer writes the slot itself after waiting for released; between
 * devices it writes a staging slot after waiting for ready (the previous copy out of it), and
 * its copy stream copies staging to slot after written and released. Hosts hand slots over
 * through per-stage GAsyncQueue inboxes and pending tables, as the CPU backend does.
 */
#include "exec-cuda-transport.h"

#include "kern-check.h"
#include "pp-error.h"

struct _ExecCudaMsg {
    gint64               key;      /* (kind, mb, vstage) while handed over */
    struct ExecCudaPool *pool;     /* the pool the slot belongs to */
    void                *buf;      /* (msg_bytes) on the consumer's device */
    void                *staging;  /* (msg_bytes) on the producer's device; NULL on one device */
    cudaEvent_t          ready;    /* producer's device: buf holds the message */
    cudaEvent_t          written;  /* producer's device: staging holds it (between devices) */
    cudaEvent_t          released; /* consumer's device: the consumer's last read of buf */
};

typedef struct ExecCudaPool {
    int32_t       src_stage, dst_stage, src_device, dst_device;
    int32_t       n_slots;
    ExecCudaMsg  *slots;  /* (n_slots) */
    ExecCudaMsg **free;   /* (n_slots) stack of free slots; n_free of them valid */
    int32_t       n_free; /* under lock: producer takes, consumer releases */
    GMutex        lock;
    char         *arena;   /* (n_slots, msg_bytes) on the consumer's device */
    char         *staging; /* (n_slots, msg_bytes) on the producer's device, or NULL */
} ExecCudaPool;

typedef struct {
    GAsyncQueue *queue;   /* ExecCudaMsg*, or &exec_cuda_abort_marker */
    GHashTable  *pending; /* &msg->key -> msg: handed over, not yet received */
    gboolean     aborted;
} ExecCudaInbox;

typedef struct {
    ExecCudaTransport base;
    int32_t           n_stages, n_vstages;
    int32_t          *vstage_stage; /* (n_vstages) */
    int32_t          *device;       /* (n_stages) */
    size_t            msg_bytes;
    ExecCudaPool     *pools;   /* (n_vstages, EXEC_CUDA_MSG_N_KINDS) */
    ExecCudaInbox    *inboxes; /* (n_stages) */
    cudaStream_t     *copy;    /* (n_stages) the producer's copy stream, NULL when the stage
                                  sends nothing to another device */
} ExecCudaLocal;

/* What abort() pushes into every inbox; never read or written. */
static const ExecCudaMsg exec_cuda_abort_marker;

static ExecCudaLocal *exec_cuda_local(ExecCudaTransport *t) {
    return (ExecCudaLocal *)t;
}

static ExecCudaPool *exec_cuda_pool(ExecCudaLocal *l, ExecCudaMsgKind kind, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < l->n_vstages && kind < EXEC_CUDA_MSG_N_KINDS);
    return &l->pools[(size_t)vstage * EXEC_CUDA_MSG_N_KINDS + kind];
}

/* --- messages --- */

static void *exec_cuda_local_take(ExecCudaTransport *t, ExecCudaMsgKind kind, int32_t mb,
                                  int32_t vstage, cudaStream_t stream, ExecCudaMsg **msg) {
    ExecCudaPool *pool = exec_cuda_pool(exec_cuda_local(t), kind, vstage);
    g_mutex_lock(&pool->lock);
    /* Messages in flight into a vstage are bounded by activation slots that prepare() checked
     * against the schedule's peaks (exec-cuda-plan.c): a pool never runs dry. */
    PP_ASSERT(pool->n_free > 0);
    ExecCudaMsg *m = pool->free[--pool->n_free];
    g_mutex_unlock(&pool->lock);
    m->key = exec_backend_msg_key(kind, mb, vstage);
    *msg = m;
    if (m->staging) {
        /* The previous copy out of the staging slot must have read it. */
        KERN_CUDA_CHECK(cudaStreamWaitEvent(stream, m->ready, 0));
        return m->staging;
    }
    KERN_CUDA_CHECK(cudaStreamWaitEvent(stream, m->released, 0));
    return m->buf;
}

static void exec_cuda_local_send(ExecCudaTransport *t, ExecCudaMsg *m, cudaStream_t stream) {
    ExecCudaLocal *l = exec_cuda_local(t);
    ExecCudaPool  *pool = m->pool;
    if (m->staging) {
        cudaStream_t copy = l->copy[pool->src_stage];
        KERN_CUDA_CHECK(cudaEventRecord(m->written, stream));
        KERN_CUDA_CHECK(cudaStreamWaitEvent(copy, m->written, 0));
        /* released lives on the consumer's device: a stream may wait on another device's
         * event. */
        KERN_CUDA_CHECK(cudaStreamWaitEvent(copy, m->released, 0));
        KERN_CUDA_CHECK(cudaMemcpyPeerAsync(m->buf, pool->dst_device, m->staging, pool->src_device,
                                            l->msg_bytes, copy));
        KERN_CUDA_CHECK(cudaEventRecord(m->ready, copy));
    } else {
        KERN_CUDA_CHECK(cudaEventRecord(m->ready, stream));
    }
    g_async_queue_push(l->inboxes[pool->dst_stage].queue, m);
}

/* Files @m in @box's pending table, or marks the inbox aborted. */
static void exec_cuda_local_file(ExecCudaInbox *box, ExecCudaMsg *m) {
    if (m == &exec_cuda_abort_marker) {
        box->aborted = TRUE;
        return;
    }
    /* A message arrives once per (kind, mb, vstage): validation guarantees one producer. */
    PP_ASSERT(!g_hash_table_contains(box->pending, &m->key));
    g_hash_table_insert(box->pending, &m->key, m);
}

static gboolean exec_cuda_local_recv(ExecCudaTransport *t, ExecCudaMsgKind kind, const char *op,
                                     int32_t mb, int32_t vstage, cudaStream_t stream,
                                     ExecCudaMsg **msg, const void **data) {
    (void)op; /* one process: no deadline, so no error to name it in */
    ExecCudaLocal *l = exec_cuda_local(t);
    ExecCudaInbox *box = &l->inboxes[l->vstage_stage[vstage]];
    gint64         key = exec_backend_msg_key(kind, mb, vstage);
    while (!box->aborted) {
        ExecCudaMsg *m = g_hash_table_lookup(box->pending, &key);
        if (m) {
            g_hash_table_steal(box->pending, &key);
            KERN_CUDA_CHECK(cudaStreamWaitEvent(stream, m->ready, 0));
            *msg = m;
            *data = m->buf;
            return TRUE;
        }
        exec_cuda_local_file(box, g_async_queue_pop(box->queue));
    }
    return FALSE;
}

static void exec_cuda_local_release(ExecCudaTransport *t, ExecCudaMsg *m, cudaStream_t stream) {
    (void)t;
    ExecCudaPool *pool = m->pool;
    KERN_CUDA_CHECK(cudaEventRecord(m->released, stream));
    g_mutex_lock(&pool->lock);
    PP_ASSERT(pool->n_free < pool->n_slots);
    pool->free[pool->n_free++] = m;
    g_mutex_unlock(&pool->lock);
}

static gboolean exec_cuda_local_poll(ExecCudaTransport *t, int32_t stage, gboolean block) {
    ExecCudaInbox *box = &exec_cuda_local(t)->inboxes[stage];
    if (block && !box->aborted)
        exec_cuda_local_file(box, g_async_queue_pop(box->queue));
    for (ExecCudaMsg *m; !box->aborted && (m = g_async_queue_try_pop(box->queue)) != NULL;)
        exec_cuda_local_file(box, m);
    return !box->aborted;
}

static gboolean exec_cuda_local_has(ExecCudaTransport *t, ExecCudaMsgKind kind, int32_t mb,
                                    int32_t vstage) {
    ExecCudaLocal *l = exec_cuda_local(t);
    gint64         key = exec_backend_msg_key(kind, mb, vstage);
    return g_hash_table_contains(l->inboxes[l->vstage_stage[vstage]].pending, &key);
}

static void exec_cuda_local_abort(ExecCudaTransport *t) {
    ExecCudaLocal *l = exec_cuda_local(t);
    for (int32_t s = 0; s < l->n_stages; s++)
        g_async_queue_push(l->inboxes[s].queue, (gpointer)&exec_cuda_abort_marker);
}

/* --- reset and teardown --- */

static void exec_cuda_local_sync_copies(ExecCudaLocal *l) {
    for (int32_t s = 0; s < l->n_stages; s++) {
        if (l->copy[s]) {
            KERN_CUDA_CHECK(cudaSetDevice(l->device[s]));
            KERN_CUDA_CHECK(cudaStreamSynchronize(l->copy[s]));
        }
    }
}

static void exec_cuda_local_reset(ExecCudaTransport *t) {
    ExecCudaLocal *l = exec_cuda_local(t);
    exec_cuda_local_sync_copies(l);
    for (int32_t s = 0; s < l->n_stages; s++) {
        ExecCudaInbox *box = &l->inboxes[s];
        /* An aborted replay may leave messages behind; their slots become free below. */
        g_hash_table_remove_all(box->pending);
        while (g_async_queue_try_pop(box->queue) != NULL)
            ;
        box->aborted = FALSE;
    }
    for (int32_t i = 0; i < l->n_vstages * EXEC_CUDA_MSG_N_KINDS; i++) {
        ExecCudaPool *pool = &l->pools[i];
        for (int32_t k = 0; k < pool->n_slots; k++)
            pool->free[k] = &pool->slots[pool->n_slots - 1 - k];
        pool->n_free = pool->n_slots;
    }
}

static void exec_cuda_local_free(ExecCudaTransport *t) {
    ExecCudaLocal *l = exec_cuda_local(t);
    exec_cuda_local_sync_copies(l);
    for (int32_t i = 0; i < l->n_vstages * EXEC_CUDA_MSG_N_KINDS; i++) {
        ExecCudaPool *pool = &l->pools[i];
        /* A pool after the one whose allocation failed was never initialised. */
        for (int32_t k = 0; pool->slots && k < pool->n_slots; k++) {
            ExecCudaMsg *m = &pool->slots[k];
            if (m->released) {
                KERN_CUDA_CHECK(cudaSetDevice(pool->dst_device));
                KERN_CUDA_CHECK(cudaEventDestroy(m->released));
            }
            KERN_CUDA_CHECK(cudaSetDevice(pool->src_device));
            if (m->ready)
                KERN_CUDA_CHECK(cudaEventDestroy(m->ready));
            if (m->written)
                KERN_CUDA_CHECK(cudaEventDestroy(m->written));
        }
        if (pool->arena) {
            KERN_CUDA_CHECK(cudaSetDevice(pool->dst_device));
            KERN_CUDA_CHECK(cudaFree(pool->arena));
        }
        if (pool->staging) {
            KERN_CUDA_CHECK(cudaSetDevice(pool->src_device));
            KERN_CUDA_CHECK(cudaFree(pool->staging));
        }
        g_free(pool->slots);
        g_free(pool->free);
        g_mutex_clear(&pool->lock);
    }
    for (int32_t s = 0; s < l->n_stages; s++) {
        g_hash_table_unref(l->inboxes[s].pending);
        g_async_queue_unref(l->inboxes[s].queue);
        if (l->copy[s]) {
            KERN_CUDA_CHECK(cudaSetDevice(l->device[s]));
            KERN_CUDA_CHECK(cudaStreamDestroy(l->copy[s]));
        }
    }
    g_free(l->pools);
    g_free(l->inboxes);
    g_free(l->copy);
    g_free(l->vstage_stage);
    g_free(l->device);
    g_free(l);
}

static const ExecCudaTransportOps exec_cuda_local_ops = {
    .take = exec_cuda_local_take,
    .send = exec_cuda_local_send,
    .recv = exec_cuda_local_recv,
    .release = exec_cuda_local_release,
    .poll = exec_cuda_local_poll,
    .has = exec_cuda_local_has,
    .abort = exec_cuda_local_abort,
    .reset = exec_cuda_local_reset,
    .free = exec_cuda_local_free,
};

/* --- construction --- */

/* cudaMalloc on the current device that returns FALSE on out-of-memory (error cleared). */
static gboolean exec_cuda_local_malloc(char **ptr, size_t bytes) {
    cudaError_t err = cudaMalloc((void **)ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *ptr = NULL;
        return FALSE;
    }
    KERN_CUDA_CHECK(err);
    return TRUE;
}

/* Lets @src's copies reach @dst directly where the hardware allows it. */
static void exec_cuda_local_peer(int32_t src, int32_t dst) {
    int can = 0;
    KERN_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, src, dst));
    if (!can)
        return;
    KERN_CUDA_CHECK(cudaSetDevice(src));
    cudaError_t err = cudaDeviceEnablePeerAccess(dst, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError(); /* another pool of the same two devices enabled it */
    else
        KERN_CUDA_CHECK(err);
}

/* Allocates @pool's buffers and events (devices and slots set). Returns FALSE when device
 * memory runs out. */
static gboolean exec_cuda_local_pool_init(ExecCudaLocal *l, ExecCudaPool *pool) {
    pool->slots = g_new0(ExecCudaMsg, MAX(pool->n_slots, 1));
    pool->free = g_new0(ExecCudaMsg *, MAX(pool->n_slots, 1));
    if (pool->n_slots == 0)
        return TRUE;
    gboolean cross = pool->src_device != pool->dst_device;
    size_t   bytes = (size_t)pool->n_slots * l->msg_bytes;
    KERN_CUDA_CHECK(cudaSetDevice(pool->dst_device));
    if (!exec_cuda_local_malloc(&pool->arena, bytes))
        return FALSE;
    for (int32_t k = 0; k < pool->n_slots; k++) {
        ExecCudaMsg *m = &pool->slots[k];
        m->pool = pool;
        m->buf = pool->arena + (size_t)k * l->msg_bytes;
        KERN_CUDA_CHECK(cudaEventCreateWithFlags(&m->released, cudaEventDisableTiming));
    }
    KERN_CUDA_CHECK(cudaSetDevice(pool->src_device));
    if (cross && !exec_cuda_local_malloc(&pool->staging, bytes))
        return FALSE;
    for (int32_t k = 0; k < pool->n_slots; k++) {
        ExecCudaMsg *m = &pool->slots[k];
        KERN_CUDA_CHECK(cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming));
        if (cross) {
            m->staging = pool->staging + (size_t)k * l->msg_bytes;
            KERN_CUDA_CHECK(cudaEventCreateWithFlags(&m->written, cudaEventDisableTiming));
        }
    }
    if (cross && l->copy[pool->src_stage] == NULL)
        KERN_CUDA_CHECK(
            cudaStreamCreateWithFlags(&l->copy[pool->src_stage], cudaStreamNonBlocking));
    /* A stage may send to two devices (activations up, gradients down): each pair. */
    if (cross)
        exec_cuda_local_peer(pool->src_device, pool->dst_device);
    return TRUE;
}

ExecCudaTransport *exec_cuda_transport_local_new(const ExecCudaPlan *plan,
                                                 const int32_t      *vstage_stage) {
    ExecCudaLocal *l = g_new0(ExecCudaLocal, 1);
    l->base.ops = &exec_cuda_local_ops;
    l->n_stages = plan->n_stages;
    l->n_vstages = plan->n_vstages;
    l->vstage_stage = g_memdup2(vstage_stage, (gsize)plan->n_vstages * sizeof(int32_t));
    l->device = g_memdup2(plan->device, (gsize)plan->n_stages * sizeof(int32_t));
    l->msg_bytes = plan->msg_bytes;
    l->copy = g_new0(cudaStream_t, plan->n_stages);
    l->inboxes = g_new0(ExecCudaInbox, plan->n_stages);
    for (int32_t s = 0; s < plan->n_stages; s++) {
        l->inboxes[s].queue = g_async_queue_new();
        l->inboxes[s].pending = g_hash_table_new(g_int64_hash, g_int64_equal);
    }
    l->pools = g_new0(ExecCudaPool, (size_t)plan->n_vstages * EXEC_CUDA_MSG_N_KINDS);
    gboolean ok = TRUE;
    for (int32_t vs = 0; vs < plan->n_vstages; vs++) {
        for (int kind = 0; kind < EXEC_CUDA_MSG_N_KINDS; kind++) {
            ExecCudaPool *pool = exec_cuda_pool(l, kind, vs);
            /* Activations come from vs - 1, gradients from vs + 1 (none into the ends). */
            int32_t src = kind == EXEC_CUDA_MSG_ACT ? vs - 1 : vs + 1;
            g_mutex_init(&pool->lock);
            pool->n_slots = kind == EXEC_CUDA_MSG_ACT ? plan->act_inbox[vs] : plan->grad_inbox[vs];
            pool->dst_stage = vstage_stage[vs];
            pool->dst_device = plan->device[pool->dst_stage];
            pool->src_stage = pool->n_slots > 0 ? vstage_stage[src] : pool->dst_stage;
            pool->src_device = plan->device[pool->src_stage];
            ok = ok && exec_cuda_local_pool_init(l, pool);
        }
    }
    if (!ok) {
        exec_cuda_local_free(&l->base);
        return NULL;
    }
    exec_cuda_local_reset(&l->base);
    return &l->base;
}
