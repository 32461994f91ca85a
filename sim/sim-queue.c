/* SPDX-License-Identifier: MIT
 * sim-queue.c: binary min-heap of SimEvent keyed by (time_ns, stage, seq). The engine keeps at
 * most one compute event per stage in flight, so the heap stays small and push/pop are a few
 * comparisons; the array grows by doubling and is never shrunk.
 */
#include "sim-queue.h"

#include "pp-error.h"

struct _SimQueue {
    SimEvent *heap; /* (capacity) heap[0] is the least event */
    size_t    length;
    size_t    capacity;
    uint64_t  next_seq;
};

/* Strict order on (time_ns, stage, seq); seq is unique, so no two events compare equal. */
static inline gboolean sim_queue_less(const SimEvent *a, const SimEvent *b) {
    if (a->time_ns != b->time_ns)
        return a->time_ns < b->time_ns;
    if (a->stage != b->stage)
        return a->stage < b->stage;
    return a->seq < b->seq;
}

SimQueue *sim_queue_new(size_t capacity_hint) {
    SimQueue *queue = g_new0(SimQueue, 1);
    queue->capacity = MAX(capacity_hint, 16);
    queue->heap = g_new(SimEvent, queue->capacity);
    return queue;
}

void sim_queue_free(SimQueue *queue) {
    if (queue == NULL)
        return;
    g_free(queue->heap);
    g_free(queue);
}

void sim_queue_push(SimQueue *queue, int64_t time_ns, int32_t stage, int32_t payload) {
    if (queue->length == queue->capacity) {
        queue->capacity *= 2;
        queue->heap = g_renew(SimEvent, queue->heap, queue->capacity);
    }
    SimEvent ev = {
        .time_ns = time_ns, .seq = queue->next_seq++, .stage = stage, .payload = payload};
    /* Sift up: move parents down until @ev fits. */
    size_t i = queue->length++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!sim_queue_less(&ev, &queue->heap[parent]))
            break;
        queue->heap[i] = queue->heap[parent];
        i = parent;
    }
    queue->heap[i] = ev;
}

gboolean sim_queue_pop(SimQueue *queue, SimEvent *out) {
    if (queue->length == 0)
        return FALSE;
    *out = queue->heap[0];
    SimEvent last = queue->heap[--queue->length];
    size_t   n = queue->length;
    /* Sift down the former last element from the root. */
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && sim_queue_less(&queue->heap[child + 1], &queue->heap[child]))
            child++;
        if (!sim_queue_less(&queue->heap[child], &last))
            break;
        queue->heap[i] = queue->heap[child];
        i = child;
    }
    if (n > 0)
        queue->heap[i] = last;
    PP_ASSERT(n == 0 || !sim_queue_less(&queue->heap[0], out)); /* heap property at the root */
    return TRUE;
}

const SimEvent *sim_queue_peek(const SimQueue *queue) {
    return queue->length > 0 ? &queue->heap[0] : NULL;
}

size_t sim_queue_length(const SimQueue *queue) {
    return queue->length;
}

uint64_t sim_queue_n_pushed(const SimQueue *queue) {
    return queue->next_seq;
}
