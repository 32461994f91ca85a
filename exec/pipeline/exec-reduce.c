/* SPDX-License-Identifier: MIT
 * exec-reduce.c: the gradient reduction between the replicas of a stage (exec-reduce.h). The
 * host thread, serving the group while the workers run, files each arriving part in a table
 * keyed by its tag and sender; the worker posts its parts and waits for the others' under the
 * group's watch of the sender (exec_comm_watch_begin()), looking every EXEC_REDUCE_POLL_US at
 * whether the replay stopped.
 */
#include "exec-reduce.h"

#include <string.h>

#include "optim-cpu.h"
#include "pp-error.h"

/* How often a waiting worker looks at the group's stop signal. */
#define EXEC_REDUCE_POLL_US 10000

/* The rounds of one update's reduction: the reduce-scatter, the all-gather (of the reduced
 * gradients, or of the updated parameters with a sharded optimizer) and the all-gather of the
 * gradient norm's partial sums (sharded optimizer). */
enum { EXEC_REDUCE_SCATTER, EXEC_REDUCE_GATHER, EXEC_REDUCE_NORM, EXEC_REDUCE_N_ROUNDS };

/* A part that arrived: @bytes of @data (g_malloc'd). */
typedef struct {
    void  *data;
    size_t bytes;
} ExecReducePart;

struct _ExecReduce {
    ExecComm   *comm;
    int32_t     n_vstages, n_buckets;
    int32_t     replicas, replica, stage; /* D, and this rank's place */
    GMutex      lock;                     /* guards arrived */
    GCond       cond;                     /* signalled when a part arrives */
    GHashTable *arrived;                  /* exec_reduce_key() -> ExecReducePart*, not yet taken */
};

static void exec_reduce_part_free(gpointer p) {
    ExecReducePart *part = p;
    g_free(part->data);
    g_free(part);
}

/* The wire tag of @round of bucket @bucket of @vstage's reduction before update @update. */
static int64_t exec_reduce_tag(const ExecReduce *r, int32_t update, int32_t vstage, int32_t bucket,
                               int round) {
    /* exec_reduce_new() was told the most buckets of a virtual stage. */
    PP_ASSERT(bucket >= 0 && bucket < r->n_buckets);
    return (((int64_t)update * r->n_vstages + vstage) * r->n_buckets + bucket) *
               EXEC_REDUCE_N_ROUNDS +
           round;
}

/* The table key of the part with @tag from replica @from. */
static gint64 exec_reduce_key(const ExecReduce *r, int64_t tag, int32_t from) {
    return (gint64)tag * r->replicas + from;
}

/* Floats [*lo, *hi) of an array of @n: chunk @c of @d, the shard of replica c's sharded
 * optimizer (kern_optim_shard_range(): whole chunks of the gradient norm's partial sums). */
static void exec_reduce_chunk(size_t n, int32_t d, int32_t c, size_t *lo, size_t *hi) {
    kern_optim_shard_range(n, d, c, lo, hi);
}

/* Floats [*lo, *hi) of @piece that replica @c sums: the piece's part of chunk @c of the whole
 * array (*lo == *hi when they do not meet). */
static void exec_reduce_piece_chunk(const ExecReducePiece *piece, int32_t d, int32_t c, size_t *lo,
                                    size_t *hi) {
    /* The callers' pieces lie in their arrays (gpt2_table_bucket() tiles the array). */
    PP_ASSERT(piece->begin <= piece->end && piece->end <= piece->n);
    exec_reduce_chunk(piece->n, d, c, lo, hi);
    *lo = MAX(*lo, piece->begin);
    *hi = MAX(*lo, MIN(*hi, piece->end));
}

/* The group's receiver (host thread): files the part. */
static void exec_reduce_receive(gpointer user_data, int32_t src, int32_t tag, void *data,
                                size_t bytes) {
    ExecReduce     *r = user_data;
    ExecReducePart *part = g_new(ExecReducePart, 1);
    *part = (ExecReducePart){.data = data, .bytes = bytes};
    gint64 *key = g_new(gint64, 1);
    *key = exec_reduce_key(r, tag, exec_comm_rank_replica(r->comm, src));
    g_mutex_lock(&r->lock);
    /* Each (update, vstage, bucket, round, sender) is sent once per replay. */
    PP_ASSERT(!g_hash_table_contains(r->arrived, key));
    g_hash_table_insert(r->arrived, key, part);
    g_cond_broadcast(&r->cond);
    g_mutex_unlock(&r->lock);
}

ExecReduce *exec_reduce_new(ExecComm *comm, const ExecParallel *parallel, int32_t n_vstages,
                            int32_t n_buckets) {
    ExecReduce *r = g_new0(ExecReduce, 1);
    r->comm = comm;
    r->n_vstages = n_vstages;
    r->n_buckets = n_buckets;
    r->replicas = parallel->replicas;
    r->replica = parallel->replica;
    r->stage = exec_comm_stage(comm);
    g_mutex_init(&r->lock);
    g_cond_init(&r->cond);
    r->arrived = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, exec_reduce_part_free);
    exec_comm_set_receiver(comm, EXEC_COMM_REDUCE, exec_reduce_receive, r);
    return r;
}

void exec_reduce_free(ExecReduce *reduce) {
    if (!reduce)
        return;
    exec_comm_set_receiver(reduce->comm, EXEC_COMM_REDUCE, NULL, NULL);
    g_hash_table_unref(reduce->arrived);
    g_cond_clear(&reduce->cond);
    g_mutex_clear(&reduce->lock);
    g_free(reduce);
}

void exec_reduce_reset(ExecReduce *reduce) {
    g_mutex_lock(&reduce->lock);
    g_hash_table_remove_all(reduce->arrived);
    g_mutex_unlock(&reduce->lock);
}

/* Posts @bytes of @data (may be 0) to replica @to with @tag. */
static void exec_reduce_post(ExecReduce *r, int32_t to, int64_t tag, const void *data,
                             size_t bytes) {
    void *copy = g_malloc(MAX(bytes, 1));
    memcpy(copy, data, bytes);
    exec_comm_post(r->comm, EXEC_COMM_REDUCE, exec_comm_layout_rank(r->comm, to, r->stage),
                   (int32_t)tag, copy, bytes);
}

/* One waiter: woken (under the reduction's lock) once the host found its peer silent. */
typedef struct {
    ExecReduce *r;
    gboolean    woken;
} ExecReduceWaiter;

/* The watch's wake-up (exec_comm_watch_begin()), on the host thread. */
static void exec_reduce_wake(gpointer user_data) {
    ExecReduceWaiter *w = user_data;
    g_mutex_lock(&w->r->lock);
    w->woken = TRUE;
    g_cond_broadcast(&w->r->cond);
    g_mutex_unlock(&w->r->lock);
}

/* Waits for the part with @tag from replica @from, of @bytes bytes, under the group's watch
 * of that rank (exec_comm_watch_begin(): a replica that is itself waiting answers the probe
 * and is not blamed). Returns: (transfer full), or NULL when the replay stopped or the peer
 * was found silent (then recorded as this rank's failure, naming @what). */
static ExecReducePart *exec_reduce_take(ExecReduce *r, int64_t tag, int32_t from, size_t bytes,
                                        const char *what) {
    gint64           key = exec_reduce_key(r, tag, from);
    int32_t          rank = exec_comm_layout_rank(r->comm, from, r->stage);
    ExecReduceWaiter waiter = {.r = r};
    ExecCommWatch   *watch = exec_comm_watch_begin(r->comm, rank, exec_reduce_wake, &waiter);
    ExecReducePart  *part = NULL;
    gpointer         stored_key = NULL;
    g_mutex_lock(&r->lock);
    while (!g_hash_table_steal_extended(r->arrived, &key, &stored_key, (gpointer *)&part)) {
        if (exec_comm_stopped(r->comm) || waiter.woken)
            break;
        g_cond_wait_until(&r->cond, &r->lock, g_get_monotonic_time() + EXEC_REDUCE_POLL_US);
    }
    g_mutex_unlock(&r->lock);
    g_free(stored_key);
    int32_t  peer_waits_for = -1;
    gboolean expired = exec_comm_watch_end(r->comm, watch, &peer_waits_for);
    if (part != NULL && !expired) {
        /* Sent by exec_reduce_post() of the same program for the same array. */
        PP_ASSERT(part->bytes == bytes);
        return part;
    }
    if (part != NULL)
        exec_reduce_part_free(part);
    if (!expired)
        return NULL; /* the replay stopped */
    GString *msg = g_string_new(NULL);
    g_string_printf(msg,
                    "%s from rank %d (replica %d) did not arrive within %g s "
                    "(run.comm_timeout_s); ",
                    what, rank, from, exec_comm_timeout(r->comm));
    exec_comm_blame(msg, rank, peer_waits_for);
    g_autofree char *text = g_string_free(msg, FALSE);
    exec_comm_fail(r->comm, g_error_new_literal(EXEC_ERROR, EXEC_ERROR_COMM, text));
    return NULL;
}

/* FALSE (recorded as this rank's failure) when update @update's tags pass the largest. */
static gboolean exec_reduce_check_tag(ExecReduce *r, int32_t update, int32_t vstage,
                                      int32_t bucket) {
    int64_t last = exec_reduce_tag(r, update, vstage, bucket, EXEC_REDUCE_N_ROUNDS - 1);
    if (last <= exec_comm_tag_max(r->comm))
        return TRUE;
    exec_comm_fail(r->comm, g_error_new(EXEC_ERROR, EXEC_ERROR_SHAPE,
                                        "update %d of a replay needs MPI tag %" G_GINT64_FORMAT
                                        " for its gradient reduction and this MPI allows at "
                                        "most %d (MPI_TAG_UB); set run.eval_every or "
                                        "run.checkpoint_every to cut the run into shorter "
                                        "segments",
                                        update, last, exec_comm_tag_max(r->comm)));
    return FALSE;
}

gboolean exec_reduce_scatter(ExecReduce *reduce, const ExecReducePiece *piece, float *grads) {
    ExecReduce *r = reduce;
    int32_t     d = r->replicas, me = r->replica;
    PP_ASSERT(d >= 1);
    int64_t scatter =
        exec_reduce_tag(r, piece->update, piece->vstage, piece->bucket, EXEC_REDUCE_SCATTER);
    if (!exec_reduce_check_tag(r, piece->update, piece->vstage, piece->bucket))
        return FALSE;
    size_t lo, hi;
    /* Chunk c goes to replica c, which sums it; a piece sends and waits for no empty part. */
    for (int32_t c = 0; c < d; c++) {
        exec_reduce_piece_chunk(piece, d, c, &lo, &hi);
        if (c != me && hi > lo)
            exec_reduce_post(r, c, scatter, grads + lo, (hi - lo) * sizeof(float));
    }
    exec_reduce_piece_chunk(piece, d, me, &lo, &hi);
    if (hi == lo)
        return TRUE;
    g_autofree ExecReducePart **parts = g_new0(ExecReducePart *, d);
    g_autofree const float    **src = g_new(const float *, d); /* (d) chunk me of each replica */
    gboolean                    ok = TRUE;
    for (int32_t e = 0; e < d && ok; e++) {
        if (e == me) {
            src[e] = grads + lo;
            continue;
        }
        g_autofree char *what = g_strdup_printf(
            "the part of virtual stage %d's gradients (bucket %d) to reduce before update %d",
            piece->vstage, piece->bucket, piece->update);
        ok = (parts[e] = exec_reduce_take(r, scatter, e, (hi - lo) * sizeof(float), what)) != NULL;
        src[e] = ok ? parts[e]->data : NULL;
    }
    if (ok) {
        /* In replica order, whatever order the parts arrived in. */
        for (size_t i = 0; i < hi - lo; i++) {
            float sum = src[0][i];
            for (int32_t e = 1; e < d; e++)
                sum += src[e][i];
            grads[lo + i] = sum / (float)d;
        }
    }
    for (int32_t e = 0; e < d; e++)
        if (parts[e])
            exec_reduce_part_free(parts[e]);
    return ok;
}

gboolean exec_reduce_gather(ExecReduce *reduce, const ExecReducePiece *piece, float *data,
                            const char *what) {
    ExecReduce *r = reduce;
    int32_t     d = r->replicas, me = r->replica;
    int64_t     gather =
        exec_reduce_tag(r, piece->update, piece->vstage, piece->bucket, EXEC_REDUCE_GATHER);
    size_t lo, hi;
    /* This replica's chunk to every other. */
    exec_reduce_piece_chunk(piece, d, me, &lo, &hi);
    for (int32_t c = 0; c < d && hi > lo; c++)
        if (c != me)
            exec_reduce_post(r, c, gather, data + lo, (hi - lo) * sizeof(float));
    for (int32_t c = 0; c < d; c++) {
        exec_reduce_piece_chunk(piece, d, c, &lo, &hi);
        if (c == me || hi == lo)
            continue;
        g_autofree char *which = g_strdup_printf("%s of virtual stage %d (bucket %d) at update %d",
                                                 what, piece->vstage, piece->bucket, piece->update);
        ExecReducePart  *part = exec_reduce_take(r, gather, c, (hi - lo) * sizeof(float), which);
        if (part == NULL)
            return FALSE;
        memcpy(data + lo, part->data, part->bytes);
        exec_reduce_part_free(part);
    }
    return TRUE;
}

gboolean exec_reduce_norm(ExecReduce *reduce, int32_t update, int32_t vstage, const float *grads,
                          size_t n, double *sq_norm) {
    ExecReduce *r = reduce;
    int32_t     d = r->replicas, me = r->replica;
    int64_t     tag = exec_reduce_tag(r, update, vstage, 0, EXEC_REDUCE_NORM);
    size_t      lo, hi;
    /* (chunks) every chunk's partial sum; a chunk's index is its first float / the chunk size */
    g_autofree double *partial = g_new(double, MAX(kern_grad_norm_n_chunks(n), 1));
    exec_reduce_chunk(n, d, me, &lo, &hi);
    size_t first = lo / KERN_GRAD_NORM_CHUNK, count = kern_grad_norm_n_chunks(hi - lo);
    kern_grad_sq_norm_partials(grads + lo, hi - lo, partial + first);
    for (int32_t c = 0; c < d; c++)
        if (c != me)
            exec_reduce_post(r, c, tag, partial + first, count * sizeof(double));
    for (int32_t c = 0; c < d; c++) {
        if (c == me)
            continue;
        exec_reduce_chunk(n, d, c, &lo, &hi);
        first = lo / KERN_GRAD_NORM_CHUNK;
        count = kern_grad_norm_n_chunks(hi - lo);
        g_autofree char *what =
            g_strdup_printf("the gradient norm's partial sums of virtual stage %d before update %d",
                            vstage, update);
        ExecReducePart *part = exec_reduce_take(r, tag, c, count * sizeof(double), what);
        if (part == NULL)
            return FALSE;
        memcpy(partial + first, part->data, part->bytes);
        exec_reduce_part_free(part);
    }
    /* In chunk order, as kern_grad_sq_norm() adds them: the same bits as one replica's. */
    double sq = 0.0;
    for (size_t c = 0; c < kern_grad_norm_n_chunks(n); c++)
        sq += partial[c];
    *sq_norm = sq;
    return TRUE;
}
