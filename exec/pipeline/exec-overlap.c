/* SPDX-License-Identifier: MIT
 * exec-overlap.c: the overlapped gradient reduction (parallel.overlap_grad_reduce,
 * exec-pipeline-private.h). Each local stage's worker has a reduction thread for the replay;
 * the last backward of the update window that adds to a virtual stage's gradients hands the
 * thread each bucket (one block's gradients, or the head's, or the embeddings') as soon as it
 * has finished it (a backend that does not report buckets: the whole virtual stage after the
 * op), and the worker goes on with the op and the window's other ops; the thread reduces the
 * bucket between the replicas (exec-reduce.h, the same sums as the reduction at U) and books
 * its host times. Before the U the worker waits for every bucket.
 */
#include "exec-pipeline-private.h"

#include "pp-error.h"

struct _ExecOverlap {
    ExecPipeline *pipeline;
    GThread      *thread;
    GAsyncQueue  *jobs;    /* ExecBucket* to reduce, in posting order; &exec_overlap_end ends */
    GMutex        lock;    /* guards pending, failed and done */
    GCond         cond;    /* signalled when a bucket is done */
    int32_t       pending; /* buckets posted and not done */
    gboolean      failed;  /* a bucket's reduction stopped or missed the deadline */
    GArray       *done;    /* ExecBucket: reduced since the last exec_overlap_wait() */
};

/* The end marker of the job queue. */
static ExecBucket exec_overlap_end;

/* The reduction thread: reduces each bucket it is handed, in order. */
static gpointer exec_overlap_thread(gpointer user_data) {
    ExecOverlap  *o = user_data;
    ExecPipeline *pipeline = o->pipeline;
    for (;;) {
        ExecBucket *b = g_async_queue_pop(o->jobs);
        if (b == &exec_overlap_end)
            return NULL;
        ExecReducePiece *piece = &b->piece;
        float *grads = pipeline->backend->ops->grads(pipeline->backend, piece->vstage, &piece->n);
        if (piece->bucket < 0)
            *piece = (ExecReducePiece){piece->update, piece->vstage, 0, piece->n, 0, piece->n};
        b->start_us = g_get_monotonic_time();
        /* A sharded optimizer keeps its chunk: the norm and the parameters follow at U. */
        gboolean ok = exec_reduce_scatter(pipeline->reduce, piece, grads) &&
                      (pipeline->sharded ||
                       exec_reduce_gather(pipeline->reduce, piece, grads, "the reduced gradients"));
        b->end_us = g_get_monotonic_time();
        g_mutex_lock(&o->lock);
        g_array_append_val(o->done, *b);
        o->failed |= !ok;
        o->pending--;
        g_cond_broadcast(&o->cond);
        g_mutex_unlock(&o->lock);
        g_free(b);
    }
}

ExecOverlap *exec_overlap_start(ExecPipeline *pipeline, int32_t stage) {
    ExecOverlap *o = g_new0(ExecOverlap, 1);
    o->pipeline = pipeline;
    o->jobs = g_async_queue_new();
    g_mutex_init(&o->lock);
    g_cond_init(&o->cond);
    o->done = g_array_new(FALSE, FALSE, sizeof(ExecBucket));
    g_autofree char *name = g_strdup_printf("pacer-reduce-%d", stage);
    o->thread = g_thread_new(name, exec_overlap_thread, o);
    return o;
}

void exec_overlap_post(ExecOverlap *overlap, int32_t update, int32_t vstage, int32_t bucket,
                       size_t begin, size_t end) {
    ExecBucket *b = g_new0(ExecBucket, 1);
    b->piece = (ExecReducePiece){
        .update = update, .vstage = vstage, .bucket = bucket, .begin = begin, .end = end};
    g_mutex_lock(&overlap->lock);
    overlap->pending++;
    g_mutex_unlock(&overlap->lock);
    g_async_queue_push(overlap->jobs, b);
}

/* Gpt2GradsHook.ready: the bucket to the thread. */
static void exec_overlap_hook_ready(void *user_data, int bucket, size_t begin, size_t end) {
    ExecOverlapHook *h = user_data;
    exec_overlap_post(h->overlap, h->update, h->vstage, bucket, begin, end);
    h->n_posted++;
}

void exec_overlap_hook_init(ExecOverlapHook *hook, ExecOverlap *overlap, int32_t update,
                            int32_t vstage) {
    *hook = (ExecOverlapHook){.hook = {.ready = exec_overlap_hook_ready, .user_data = hook},
                              .overlap = overlap,
                              .update = update,
                              .vstage = vstage};
}

gboolean exec_overlap_wait(ExecOverlap *overlap, GArray *buckets) {
    g_mutex_lock(&overlap->lock);
    /* Each pending reduction ends: done, stopped, or past the group's deadline. */
    while (overlap->pending > 0)
        g_cond_wait(&overlap->cond, &overlap->lock);
    g_array_append_vals(buckets, overlap->done->data, overlap->done->len);
    g_array_set_size(overlap->done, 0);
    gboolean ok = !overlap->failed;
    g_mutex_unlock(&overlap->lock);
    return ok;
}

void exec_overlap_stop(ExecOverlap *overlap) {
    if (!overlap)
        return;
    g_async_queue_push(overlap->jobs, &exec_overlap_end);
    g_thread_join(overlap->thread);
    g_async_queue_unref(overlap->jobs);
    g_array_unref(overlap->done);
    g_cond_clear(&overlap->cond);
    g_mutex_clear(&overlap->lock);
    g_free(overlap);
}
