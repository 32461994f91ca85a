/* SPDX-License-Identifier: MIT
 * exec-transport-wire.c: how every transport names a message (exec-transport.h): its key in a
 * stage's pending table, its wire tag between ranks, and the errors of a tag past the group's
 * largest and of an input that missed the group's deadline.
 */
#include "exec-transport.h"

#include "pp-error.h"

gint64 exec_msg_key(int kind, int32_t mb, int32_t vstage) {
    PP_ASSERT(kind >= 0 && kind < 128 && mb >= 0 && vstage >= 0 && vstage < (1 << 20));
    return ((gint64)kind << 56) | ((gint64)mb << 20) | (gint64)vstage;
}

int64_t exec_msg_tag(int32_t n_vstages, gboolean grad, int32_t mb, int32_t vstage) {
    PP_ASSERT(mb >= 0 && vstage >= 0 && vstage < n_vstages);
    return ((int64_t)mb * n_vstages + vstage) * 2 + (grad ? 1 : 0);
}

void exec_msg_untag(int32_t n_vstages, int32_t tag, gboolean *grad, int32_t *mb, int32_t *vstage) {
    PP_ASSERT(tag >= 0);
    *grad = tag % 2 == 1;
    *vstage = tag / 2 % n_vstages;
    *mb = tag / 2 / n_vstages;
}

GError *exec_msg_tag_error(const ExecComm *comm, int32_t n_vstages, int32_t mb) {
    int64_t most = ((int64_t)exec_comm_tag_max(comm) + 1) / ((int64_t)n_vstages * 2);
    return g_error_new(EXEC_ERROR, EXEC_ERROR_SHAPE,
                       "micro-batch %d of a replay needs MPI tag %" G_GINT64_FORMAT
                       " and this MPI allows at most %d (MPI_TAG_UB): a segment may hold at "
                       "most %" G_GINT64_FORMAT " micro-batches on %d virtual stages; set "
                       "run.eval_every or run.checkpoint_every to cut the run into shorter "
                       "segments",
                       mb, exec_msg_tag(n_vstages, TRUE, mb, n_vstages - 1),
                       exec_comm_tag_max(comm), most, n_vstages);
}

GError *exec_msg_late_input(const ExecComm *comm, gboolean grad, const char *op, int32_t mb,
                            int32_t vstage, int32_t producer, int32_t peer_waits_for) {
    g_autofree char *for_what =
        op ? g_strdup_printf("%s(mb=%d)", op, mb) : g_strdup_printf("micro-batch %d", mb);
    int32_t  rank = exec_comm_stage_rank(comm, producer);
    GString *msg = g_string_new(NULL);
    g_string_printf(msg,
                    "the %s for %s of virtual stage %d from rank %d did not arrive within %g s "
                    "(run.comm_timeout_s); ",
                    grad ? "gradient" : "activation", for_what, vstage, rank,
                    exec_comm_timeout(comm));
    exec_comm_blame(msg, rank, peer_waits_for);
    g_autofree char *text = g_string_free(msg, FALSE);
    return g_error_new_literal(EXEC_ERROR, EXEC_ERROR_COMM, text);
}

/* The watch's wake-up, on the host thread: the worker's take returns. */
static void exec_msg_wake(gpointer user_data) {
    exec_inbox_abort(user_data);
}

ExecInboxMsg *exec_msg_take(ExecComm *comm, ExecInbox *box, ExecMsgKind kind, const char *op,
                            int32_t mb, int32_t vstage, int32_t producer) {
    gint64 key = exec_msg_key(kind, mb, vstage);
    if (comm == NULL)
        return exec_inbox_take(box, key, -1, NULL);
    ExecCommWatch *watch =
        exec_comm_watch_begin(comm, exec_comm_stage_rank(comm, producer), exec_msg_wake, box);
    ExecInboxMsg *msg = exec_inbox_take(box, key, -1, NULL);
    int32_t       peer_waits_for = -1;
    if (exec_comm_watch_end(comm, watch, &peer_waits_for))
        exec_comm_fail(comm, exec_msg_late_input(comm, kind == EXEC_MSG_GRAD, op, mb, vstage,
                                                 producer, peer_waits_for));
    return msg;
}

GError *exec_msg_late_poll(const ExecComm *comm, int32_t stage, int32_t n_stages) {
    /* Dynamic mode has one chunk per stage: inputs come from stage - 1 and + 1. */
    int32_t          before = stage > 0 ? exec_comm_stage_rank(comm, stage - 1) : -1;
    int32_t          after = stage < n_stages - 1 ? exec_comm_stage_rank(comm, stage + 1) : -1;
    g_autofree char *peers = before < 0  ? g_strdup_printf("rank %d", after)
                             : after < 0 ? g_strdup_printf("rank %d", before)
                                         : g_strdup_printf("rank %d or %d", before, after);
    return g_error_new(EXEC_ERROR, EXEC_ERROR_COMM,
                       "no activation or gradient reached stage %d within %g s "
                       "(run.comm_timeout_s) while PACI's policy waited for its next input; %s "
                       "may have died or hung",
                       stage, exec_comm_timeout(comm), peers);
}
