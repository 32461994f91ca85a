/* SPDX-License-Identifier: MIT
 * exec-cuda-transport.c: the one-process transport of the CUDA backend
 * (exec-cuda-transport.h). Each (consumer vstage, kind) has a pool of message slots on the
 * consumer's device with three events: ready (the message is in the slot), released (the
 * consumer read it) and, between devices, written (the producer filled its staging slot).
 * On one device the producer writes the slot itself after waiting for released; between
 * devices it writes a staging slot after waiting for ready (the previous copy out of it), and
 * its copy stream copies staging to slot after written and released. Hosts hand slots over
 * through the stages' inboxes (exec-inbox.h), as every transport does.
 */
#include "exec-cuda-transport.h"

#include "exec-inbox.h"

#include "kern-check.h"
#include "kern-cuda.h"
#include "pp-error.h"

struct _ExecTransportMsg {
    ExecInboxMsg         head;     /* (kind, mb, vstage) while handed over */
    struct ExecCudaPool *pool;     /* the pool the slot belongs to */
    void                *buf;      /* (msg_bytes) on the consumer's device */
    void                *staging;  /* (msg_bytes) on the producer's device; NULL on one device */
    cudaEvent_t          ready;    /* producer's device: buf holds the message */
    cudaEvent_t          written;  /* producer's device: staging holds it (between devices) */
    cudaEvent_t          released; /* consumer's device: the consumer's last read of buf */
};

typedef struct ExecCudaPool {
    int32_t            src_stage, dst_stage, src_device, dst_device;
    int32_t            n_slots;
    ExecTransportMsg  *slots;  /* (n_slots) */
    ExecTransportMsg **free;   /* (n_slots) stack of free slots; n_free of them valid */
    int32_t            n_free; /* under lock: producer takes, consumer releases */
    GMutex             lock;
    char              *arena;   /* (n_slots, msg_bytes) on the consumer's device */
    char              *staging; /* (n_slots, msg_bytes) on the producer's device, or NULL */
} ExecCudaPool;

typedef struct {
    ExecTransport base;
    int32_t       n_stages, n_vstages;
    int32_t      *vstage_stage; /* (n_vstages) */
    int32_t      *device;       /* (n_stages) */
    size_t        msg_bytes;
    ExecCudaPool *pools;   /* (n_vstages, EXEC_MSG_N_KINDS) */
    ExecInbox    *inboxes; /* (n_stages) */
    cudaStream_t *copy;    /* (n_stages) the producer's copy stream, NULL when the stage
                              sends nothing to another device */
} ExecCudaLocal;

static ExecCudaLocal *exec_cuda_local(ExecTransport *t) {
    return (ExecCudaLocal *)t;
}

static ExecCudaPool *exec_cuda_pool(ExecCudaLocal *l, ExecMsgKind kind, int32_t vstage) {
    PP_ASSERT(vstage >= 0 && vstage < l->n_vstages && kind < EXEC_MSG_N_KINDS);
    return &l->pools[(size_t)vstage * EXEC_MSG_N_KINDS + kind];
}

/* --- messages --- */

static void *exec_cuda_local_take(ExecTransport *t, ExecMsgKind kind, int32_t mb, int32_t vstage,
                                  ExecQueue queue, ExecTransportMsg **msg) {
    cudaStream_t  stream = queue;
    ExecCudaPool *pool = exec_cuda_pool(exec_cuda_local(t), kind, vstage);
    g_mutex_lock(&pool->lock);
    /* Messages in flight into a vstage are bounded by activation slots that prepare() checked
     * against the schedule's peaks (exec-cuda-plan.c): a pool never runs dry. */
    PP_ASSERT(pool->n_free > 0);
    ExecTransportMsg *m = pool->free[--pool->n_free];
    g_mutex_unlock(&pool->lock);
    m->head.key = exec_msg_key(kind, mb, vstage);
    *msg = m;
    if (m->staging) {
        /* The previous copy out of the staging slot must have read it. */
        KERN_CUDA_CHECK(cudaStreamWaitEvent(stream, m->ready, 0));
        return m->staging;
    }
    KERN_CUDA_CHECK(cudaStreamWaitEvent(stream, m->released, 0));
    return m->buf;
}

static void exec_cuda_local_send(ExecTransport *t, ExecTransportMsg *m, ExecQueue queue) {
    cudaStream_t   stream = queue;
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
    exec_inbox_push(&l->inboxes[pool->dst_stage], &m->head);
}

static gboolean exec_cuda_local_recv(ExecTransport *t, ExecMsgKind kind, const char *op, int32_t mb,
                                     int32_t vstage, ExecQueue queue, ExecTransportMsg **msg,
                                     const void **data) {
    cudaStream_t stream = queue;
    (void)op; /* one process: no deadline, so no error to name it in */
    ExecCudaLocal    *l = exec_cuda_local(t);
    ExecTransportMsg *m = (ExecTransportMsg *)exec_inbox_take(
        &l->inboxes[l->vstage_stage[vstage]], exec_msg_key(kind, mb, vstage), -1, NULL);
    if (m == NULL)
        return FALSE;
    KERN_CUDA_CHECK(cudaStreamWaitEvent(stream, m->ready, 0));
    *msg = m;
    *data = m->buf;
    return TRUE;
}

static void exec_cuda_local_release(ExecTransport *t, ExecTransportMsg *m, ExecQueue queue) {
    cudaStream_t stream = queue;
    (void)t;
    ExecCudaPool *pool = m->pool;
    KERN_CUDA_CHECK(cudaEventRecord(m->released, stream));
    g_mutex_lock(&pool->lock);
    PP_ASSERT(pool->n_free < pool->n_slots);
    pool->free[pool->n_free++] = m;
    g_mutex_unlock(&pool->lock);
}

static gboolean exec_cuda_local_poll(ExecTransport *t, int32_t stage, gboolean block) {
    return exec_inbox_poll(&exec_cuda_local(t)->inboxes[stage], block, -1, NULL);
}

static gboolean exec_cuda_local_has(ExecTransport *t, ExecMsgKind kind, int32_t mb,
                                    int32_t vstage) {
    ExecCudaLocal *l = exec_cuda_local(t);
    return exec_inbox_has(&l->inboxes[l->vstage_stage[vstage]], exec_msg_key(kind, mb, vstage));
}

static void exec_cuda_local_abort(ExecTransport *t) {
    ExecCudaLocal *l = exec_cuda_local(t);
    for (int32_t s = 0; s < l->n_stages; s++)
        exec_inbox_abort(&l->inboxes[s]);
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

static void exec_cuda_local_reset(ExecTransport *t) {
    ExecCudaLocal *l = exec_cuda_local(t);
    exec_cuda_local_sync_copies(l);
    /* An aborted replay may leave messages behind; their slots become free below. */
    for (int32_t s = 0; s < l->n_stages; s++)
        exec_inbox_reset(&l->inboxes[s]);
    for (int32_t i = 0; i < l->n_vstages * EXEC_MSG_N_KINDS; i++) {
        ExecCudaPool *pool = &l->pools[i];
        for (int32_t k = 0; k < pool->n_slots; k++)
            pool->free[k] = &pool->slots[pool->n_slots - 1 - k];
        pool->n_free = pool->n_slots;
    }
}

static void exec_cuda_local_free(ExecTransport *t) {
    ExecCudaLocal *l = exec_cuda_local(t);
    exec_cuda_local_sync_copies(l);
    for (int32_t i = 0; i < l->n_vstages * EXEC_MSG_N_KINDS; i++) {
        ExecCudaPool *pool = &l->pools[i];
        /* A pool after the one whose allocation failed was never initialised. */
        for (int32_t k = 0; pool->slots && k < pool->n_slots; k++) {
            ExecTransportMsg *m = &pool->slots[k];
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
        exec_inbox_clear(&l->inboxes[s]);
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

static const ExecTransportOps exec_cuda_local_ops = {
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
    pool->slots = g_new0(ExecTransportMsg, MAX(pool->n_slots, 1));
    pool->free = g_new0(ExecTransportMsg *, MAX(pool->n_slots, 1));
    if (pool->n_slots == 0)
        return TRUE;
    gboolean cross = pool->src_device != pool->dst_device;
    size_t   bytes = (size_t)pool->n_slots * l->msg_bytes;
    KERN_CUDA_CHECK(cudaSetDevice(pool->dst_device));
    if (!kern_cuda_try_malloc((void **)&pool->arena, bytes))
        return FALSE;
    for (int32_t k = 0; k < pool->n_slots; k++) {
        ExecTransportMsg *m = &pool->slots[k];
        m->pool = pool;
        m->buf = pool->arena + (size_t)k * l->msg_bytes;
        KERN_CUDA_CHECK(cudaEventCreateWithFlags(&m->released, cudaEventDisableTiming));
    }
    KERN_CUDA_CHECK(cudaSetDevice(pool->src_device));
    if (cross && !kern_cuda_try_malloc((void **)&pool->staging, bytes))
        return FALSE;
    for (int32_t k = 0; k < pool->n_slots; k++) {
        ExecTransportMsg *m = &pool->slots[k];
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

ExecTransport *exec_cuda_transport_local_new(const ExecCudaPlan *plan,
                                             const int32_t      *vstage_stage) {
    ExecCudaLocal *l = g_new0(ExecCudaLocal, 1);
    l->base.ops = &exec_cuda_local_ops;
    l->n_stages = plan->n_stages;
    l->n_vstages = plan->n_vstages;
    l->vstage_stage = g_memdup2(vstage_stage, (gsize)plan->n_vstages * sizeof(int32_t));
    l->device = g_memdup2(plan->device, (gsize)plan->n_stages * sizeof(int32_t));
    l->msg_bytes = plan->msg_bytes;
    l->copy = g_new0(cudaStream_t, plan->n_stages);
    l->inboxes = g_new0(ExecInbox, plan->n_stages);
    for (int32_t s = 0; s < plan->n_stages; s++)
        exec_inbox_init(&l->inboxes[s], NULL); /* the pools own the messages */
    l->pools = g_new0(ExecCudaPool, (size_t)plan->n_vstages * EXEC_MSG_N_KINDS);
    gboolean ok = TRUE;
    for (int32_t vs = 0; vs < plan->n_vstages; vs++) {
        for (int kind = 0; kind < EXEC_MSG_N_KINDS; kind++) {
            ExecCudaPool *pool = exec_cuda_pool(l, kind, vs);
            /* Activations come from vs - 1, gradients from vs + 1 (none into the ends). */
            int32_t src = kind == EXEC_MSG_ACT ? vs - 1 : vs + 1;
            g_mutex_init(&pool->lock);
            pool->n_slots = kind == EXEC_MSG_ACT ? plan->act_inbox[vs] : plan->grad_inbox[vs];
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
