/* SPDX-License-Identifier: MIT
 * exec-reduce.c: the gradient reduction between the replicas of a stage (exec-reduce.h). The
 * host thread, serving the group while the workers run, files each arriving part in a table
 * keyed by its tag and sender; the worker posts its parts and waits for the others' under the
 * group's deadline, looking every EXEC_REDUCE_POLL_US at whether the replay stopped.
 */
#include "exec-reduce.h"

#include <string.h>

#include "pp-error.h"

/* How often a waiting worker looks at the group's stop signal. */
#define EXEC_REDUCE_POLL_US 10000

/* The two rounds of one reduction. */
enum { EXEC_REDUCE_SCATTER, EXEC_REDUCE_GATHER };

/* A part that arrived: @bytes of @data (g_malloc'd). */
typedef struct {
    void  *data;
    size_t bytes;
} ExecReducePart;

struct _ExecReduce {
    ExecComm   *comm;
    int32_t     n_vstages;
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

/* The wire tag of @round of @vstage's reduction before update @update. */
static int64_t exec_reduce_tag(const ExecReduce *r, int32_t update, int32_t vstage, int round) {
    return ((int64_t)update * r->n_vstages + vstage) * 2 + round;
}

/* The table key of the part with @tag from replica @from. */
static gint64 exec_reduce_key(const ExecReduce *r, int64_t tag, int32_t from) {
    return (gint64)tag * r->replicas + from;
}

/* Floats [*lo, *hi) of an array of @n: chunk @c of @d. */
static void exec_reduce_chunk(size_t n, int32_t d, int32_t c, size_t *lo, size_t *hi) {
    *lo = n * (size_t)c / (size_t)d;
    *hi = n * (size_t)(c + 1) / (size_t)d;
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
    /* Each (update, vstage, round, sender) is sent once per replay. */
    PP_ASSERT(!g_hash_table_contains(r->arrived, key));
    g_hash_table_insert(r->arrived, key, part);
    g_cond_broadcast(&r->cond);
    g_mutex_unlock(&r->lock);
}

ExecReduce *exec_reduce_new(ExecComm *comm, int32_t n_vstages) {
    ExecReduce *r = g_new0(ExecReduce, 1);
    r->comm = comm;
    r->n_vstages = n_vstages;
    r->replicas = exec_comm_replicas(comm);
    r->replica = exec_comm_replica(comm);
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

/* Posts floats [lo, hi) of @grads to replica @to with @tag. */
static void exec_reduce_post(ExecReduce *r, int32_t to, int64_t tag, const float *grads, size_t lo,
                             size_t hi) {
    size_t bytes = (hi - lo) * sizeof(float);
    exec_comm_post(r->comm, EXEC_COMM_REDUCE, exec_comm_layout_rank(r->comm, to, r->stage),
                   (int32_t)tag, g_memdup2(grads + lo, bytes), bytes);
}

/* Waits for the part with @tag from replica @from, of @floats floats. Returns: (transfer full),
 * or NULL when the replay stopped or the deadline passed (then recorded as this rank's
 * failure, naming @what). */
static ExecReducePart *exec_reduce_take(ExecReduce *r, int64_t tag, int32_t from, size_t floats,
                                        const char *what) {
    gint64 key = exec_reduce_key(r, tag, from);
    gint64 deadline =
        g_get_monotonic_time() + (gint64)(exec_comm_timeout(r->comm) * G_USEC_PER_SEC);
    ExecReducePart *part = NULL;
    gpointer        stored_key = NULL;
    g_mutex_lock(&r->lock);
    while (!g_hash_table_steal_extended(r->arrived, &key, &stored_key, (gpointer *)&part)) {
        gint64 now = g_get_monotonic_time();
        if (exec_comm_stopped(r->comm) || now >= deadline)
            break;
        g_cond_wait_until(&r->cond, &r->lock, MIN(deadline, now + EXEC_REDUCE_POLL_US));
    }
    g_mutex_unlock(&r->lock);
    g_free(stored_key);
    if (part != NULL) {
        /* Sent by exec_reduce_post() of the same program for the same array. */
        PP_ASSERT(part->bytes == floats * sizeof(float));
        return part;
    }
    if (exec_comm_stopped(r->comm))
        return NULL;
    int32_t rank = exec_comm_layout_rank(r->comm, from, r->stage);
    exec_comm_fail(r->comm, g_error_new(EXEC_ERROR, EXEC_ERROR_COMM,
                                        "%s from rank %d (replica %d) did not arrive within %g s "
                                        "(run.comm_timeout_s); rank %d may have died or hung",
                                        what, rank, from, exec_comm_timeout(r->comm), rank));
    return NULL;
}

gboolean exec_reduce_run(ExecReduce *reduce, int32_t update, int32_t vstage, float *grads,
                         size_t n) {
    ExecReduce *r = reduce;
    int32_t     d = r->replicas, me = r->replica;
    int64_t     scatter = exec_reduce_tag(r, update, vstage, EXEC_REDUCE_SCATTER);
    int64_t     gather = exec_reduce_tag(r, update, vstage, EXEC_REDUCE_GATHER);
    if (gather > exec_comm_tag_max(r->comm)) {
        exec_comm_fail(r->comm, g_error_new(EXEC_ERROR, EXEC_ERROR_SHAPE,
                                            "update %d of a replay needs MPI tag %" G_GINT64_FORMAT
                                            " for its gradient reduction and this MPI allows at "
                                            "most %d (MPI_TAG_UB); set run.eval_every or "
                                            "run.checkpoint_every to cut the run into shorter "
                                            "segments",
                                            update, gather, exec_comm_tag_max(r->comm)));
        return FALSE;
    }
    size_t lo, hi;
    /* Round 1: chunk c goes to replica c, which sums it. */
    for (int32_t c = 0; c < d; c++) {
        if (c == me)
            continue;
        exec_reduce_chunk(n, d, c, &lo, &hi);
        exec_reduce_post(r, c, scatter, grads, lo, hi);
    }
    exec_reduce_chunk(n, d, me, &lo, &hi);
    g_autofree ExecReducePart **parts = g_new0(ExecReducePart *, d);
    g_autofree const float    **src = g_new(const float *, d); /* (d) chunk me of each replica */
    gboolean                    ok = TRUE;
    for (int32_t e = 0; e < d && ok; e++) {
        if (e == me) {
            src[e] = grads + lo;
            continue;
        }
        g_autofree char *what = g_strdup_printf(
            "the part of virtual stage %d's gradients to reduce before update %d", vstage, update);
        ok = (parts[e] = exec_reduce_take(r, scatter, e, hi - lo, what)) != NULL;
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
    if (!ok)
        return FALSE;
    /* Round 2: every replica's reduced chunk to every other. */
    for (int32_t c = 0; c < d; c++)
        if (c != me)
            exec_reduce_post(r, c, gather, grads, lo, hi);
    for (int32_t c = 0; c < d; c++) {
        if (c == me)
            continue;
        exec_reduce_chunk(n, d, c, &lo, &hi);
        g_autofree char *what = g_strdup_printf(
            "the reduced part of virtual stage %d's gradients before update %d", vstage, update);
        ExecReducePart *part = exec_reduce_take(r, gather, c, hi - lo, what);
        if (part == NULL)
            return FALSE;
        memcpy(grads + lo, part->data, part->bytes);
        exec_reduce_part_free(part);
    }
    return TRUE;
}
