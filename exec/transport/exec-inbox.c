/* SPDX-License-Identifier: MIT
 * exec-inbox.c: the host mailbox of one pipeline stage (exec-inbox.h).
 */
#include "exec-inbox.h"

#include "pp-error.h"

/* What abort() pushes; never read or written. */
static const ExecInboxMsg exec_inbox_abort_marker;

void exec_inbox_init(ExecInbox *box, GDestroyNotify drop) {
    box->queue = g_async_queue_new();
    box->pending = g_hash_table_new(g_int64_hash, g_int64_equal);
    box->drop = drop;
    box->aborted = FALSE;
}

void exec_inbox_clear(ExecInbox *box) {
    if (!exec_inbox_is_open(box))
        return;
    exec_inbox_reset(box);
    g_clear_pointer(&box->pending, g_hash_table_unref);
    g_clear_pointer(&box->queue, g_async_queue_unref);
}

gboolean exec_inbox_is_open(const ExecInbox *box) {
    return box->queue != NULL;
}

void exec_inbox_push(ExecInbox *box, ExecInboxMsg *msg) {
    g_async_queue_push(box->queue, msg);
}

void exec_inbox_abort(ExecInbox *box) {
    g_async_queue_push(box->queue, (gpointer)&exec_inbox_abort_marker);
}

/* Files @msg in the pending table, or marks the inbox aborted. */
static void exec_inbox_file(ExecInbox *box, ExecInboxMsg *msg) {
    if (msg == &exec_inbox_abort_marker) {
        box->aborted = TRUE;
        return;
    }
    /* A message arrives once per (kind, mb, vstage): validation guarantees one producer. */
    PP_ASSERT(!g_hash_table_contains(box->pending, &msg->key));
    g_hash_table_insert(box->pending, &msg->key, msg);
}

/* Files the next arrival, waiting for it (under @timeout_us when >= 0: past it the inbox is
 * marked aborted and *@late set). */
static void exec_inbox_wait(ExecInbox *box, gint64 timeout_us, gboolean *late) {
    if (timeout_us < 0) {
        exec_inbox_file(box, g_async_queue_pop(box->queue));
        return;
    }
    ExecInboxMsg *msg = g_async_queue_timeout_pop(box->queue, (guint64)timeout_us);
    if (msg == NULL) {
        box->aborted = TRUE;
        if (late)
            *late = TRUE;
        return;
    }
    exec_inbox_file(box, msg);
}

ExecInboxMsg *exec_inbox_take(ExecInbox *box, gint64 key, gint64 timeout_us, gboolean *late) {
    while (!box->aborted) {
        ExecInboxMsg *msg = g_hash_table_lookup(box->pending, &key);
        if (msg) {
            g_hash_table_steal(box->pending, &key);
            return msg;
        }
        exec_inbox_wait(box, timeout_us, late);
    }
    return NULL;
}

gboolean exec_inbox_poll(ExecInbox *box, gboolean block, gint64 timeout_us, gboolean *late) {
    if (block && !box->aborted)
        exec_inbox_wait(box, timeout_us, late);
    for (ExecInboxMsg *msg; !box->aborted && (msg = g_async_queue_try_pop(box->queue)) != NULL;)
        exec_inbox_file(box, msg);
    return !box->aborted;
}

gboolean exec_inbox_has(const ExecInbox *box, gint64 key) {
    return g_hash_table_contains(box->pending, &key);
}

void exec_inbox_reset(ExecInbox *box) {
    GHashTableIter iter;
    gpointer       msg;
    g_hash_table_iter_init(&iter, box->pending);
    while (g_hash_table_iter_next(&iter, NULL, &msg)) {
        g_hash_table_iter_steal(&iter);
        if (box->drop)
            box->drop(msg);
    }
    while ((msg = g_async_queue_try_pop(box->queue)) != NULL) {
        if (msg != &exec_inbox_abort_marker && box->drop)
            box->drop(msg);
    }
    box->aborted = FALSE;
}
