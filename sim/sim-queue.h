/* SPDX-License-Identifier: MIT
 * sim-queue.h: the simulator's event queue, a binary min-heap on (time_ns, stage, seq).
 * seq is a monotone insertion counter (ns-3's EventKey), so events with equal time and stage
 * come out first-in first-out and the pop order never depends on addresses or hashing.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* One event: what happens (@payload, an engine-defined code such as a flat op id) on which
 * @stage at which simulated time. */
typedef struct {
    int64_t  time_ns;
    uint64_t seq; /* insertion counter, set by sim_queue_push() */
    int32_t  stage;
    int32_t  payload;
} SimEvent;

typedef struct _SimQueue SimQueue;

/* Returns: (transfer full): an empty queue with room for @capacity_hint events (it grows). */
SimQueue *sim_queue_new(size_t capacity_hint);
void      sim_queue_free(SimQueue *queue);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimQueue, sim_queue_free)

/* Inserts an event; its seq is the number of events pushed before it. */
void sim_queue_push(SimQueue *queue, int64_t time_ns, int32_t stage, int32_t payload);
/* Removes the least event by (time_ns, stage, seq) into @out. Returns FALSE when empty. */
gboolean sim_queue_pop(SimQueue *queue, SimEvent *out);
/* Returns: (transfer none) (nullable): the least event without removing it; valid until the
 * next push or pop. */
const SimEvent *sim_queue_peek(const SimQueue *queue);
/* Events currently queued. */
size_t sim_queue_length(const SimQueue *queue);
/* Events pushed since creation (the next seq). */
uint64_t sim_queue_n_pushed(const SimQueue *queue);

G_END_DECLS
