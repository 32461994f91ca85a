/* SPDX-License-Identifier: MIT
 * exec-inbox.h: the host mailbox of one pipeline stage, shared by every transport
 * (exec-transport.h). Producers (other workers, or the host thread serving the process group)
 * push messages into it from any thread; the stage's worker files them in a pending table keyed
 * by (kind, mb, vstage) (exec_msg_key()) and takes the one its op consumes, in
 * whatever order they arrived. A message is the transport's own record: it starts with an
 * ExecInboxMsg. Internal to libppexec.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The first member of every message an inbox carries. */
typedef struct {
    gint64 key; /* exec_msg_key(kind, mb, vstage) */
} ExecInboxMsg;

typedef struct {
    GAsyncQueue   *queue;   /* ExecInboxMsg* pushed, not yet filed, or the abort marker */
    GHashTable    *pending; /* &msg->key -> msg: filed, not yet taken */
    GDestroyNotify drop;    /* (nullable) frees a message reset() drops; NULL when the
                               transport owns its messages (a pool) */
    gboolean aborted;       /* the worker's view: abort() or a missed deadline was filed */
} ExecInbox;

/* An empty inbox; @drop (nullable) frees the messages a reset drops. Free with
 * exec_inbox_clear(). */
void exec_inbox_init(ExecInbox *box, GDestroyNotify drop);
/* Drops what remains (as reset()) and frees the inbox. A cleared inbox may be cleared again. */
void exec_inbox_clear(ExecInbox *box);
/* Whether exec_inbox_init() ran (a transport keeps inboxes for its local stages only). */
gboolean exec_inbox_is_open(const ExecInbox *box);

/* Any thread: hands @msg (transfer full) to the stage. */
void exec_inbox_push(ExecInbox *box, ExecInboxMsg *msg);
/* Any thread: the worker's next wait returns without a message, and every one after it until
 * reset(). */
void exec_inbox_abort(ExecInbox *box);

/* Worker: the message with @key (transfer full), filing arrivals until it is there. Waits
 * without limit when @timeout_us < 0; otherwise a wait for the next arrival that outlives
 * @timeout_us marks the inbox aborted and sets *@late (nullable). Returns NULL once aborted. */
ExecInboxMsg *exec_inbox_take(ExecInbox *box, gint64 key, gint64 timeout_us, gboolean *late);
/* Worker, dynamic mode: files every message pushed so far; with @block, first waits for one
 * (under @timeout_us as take()). Returns FALSE once aborted. */
gboolean exec_inbox_poll(ExecInbox *box, gboolean block, gint64 timeout_us, gboolean *late);
/* Worker: whether the message with @key has been filed (after poll()). */
gboolean exec_inbox_has(const ExecInbox *box, gint64 key);

/* Host thread, no worker running: drops every message pushed or filed (an aborted replay's
 * leftovers) and clears the aborted mark. */
void exec_inbox_reset(ExecInbox *box);

G_END_DECLS
