/* SPDX-License-Identifier: MIT
 * exec-comm-guard.c: the deadline of the transport's calls that block and have no
 * non-blocking form (MPI's start-up and shutdown). A watchdog thread waits for the call to
 * return; past the deadline it prints its message and ends this process with status 1, and the
 * launcher then ends the job. It cannot call into the transport: the blocked call holds it
 * (exec-comm.h's threads).
 */
#include "exec-comm-private.h"

#include <stdio.h>
#include <unistd.h>

struct _ExecCommGuard {
    GMutex   lock;
    GCond    cond;
    gboolean done;
    int64_t  deadline_us; /* g_get_monotonic_time() */
    char    *message;
    GThread *thread;
};

static gpointer exec_comm_guard_watch(gpointer data) {
    ExecCommGuard *guard = data;
    g_mutex_lock(&guard->lock);
    while (!guard->done) {
        if (!g_cond_wait_until(&guard->cond, &guard->lock, guard->deadline_us) && !guard->done) {
            fprintf(stderr, "%s\n", guard->message);
            fflush(stderr);
            fflush(stdout);
            g_usleep(EXEC_COMM_LAST_WORDS_US);
            _exit(1);
        }
    }
    g_mutex_unlock(&guard->lock);
    return NULL;
}

/* "rank 1", "rank 0 or 2", "rank 0, 2 or 3": every rank of @size but @rank. */
static void exec_comm_guard_others(GString *out, int32_t rank, int32_t size) {
    g_string_append(out, "rank ");
    for (int32_t r = 0, listed = 0, n = size - 1; r < size; r++) {
        if (r == rank)
            continue;
        const char *sep = listed == 0 ? "" : listed == n - 1 ? " or " : ", ";
        g_string_append_printf(out, "%s%d", sep, r);
        listed++;
    }
}

ExecCommGuard *exec_comm_guard_new(int32_t rank, int32_t size, double timeout_s, const char *what) {
    ExecCommGuard *guard = g_new0(ExecCommGuard, 1);
    g_mutex_init(&guard->lock);
    g_cond_init(&guard->cond);
    guard->deadline_us = g_get_monotonic_time() + (int64_t)(timeout_s * G_USEC_PER_SEC);
    GString *message = g_string_new(NULL);
    g_string_printf(message,
                    "pacer-train: rank %d: %s did not complete within %g s (run.comm_timeout_s); ",
                    rank, what, timeout_s);
    exec_comm_guard_others(message, rank, size);
    g_string_append(message, size > 2 ? " may have died or hung (the one that reports nothing)"
                                      : " may have died or hung");
    guard->message = g_string_free(message, FALSE);
    guard->thread = g_thread_new("comm-guard", exec_comm_guard_watch, guard);
    return guard;
}

void exec_comm_guard_free(ExecCommGuard *guard) {
    g_mutex_lock(&guard->lock);
    guard->done = TRUE;
    g_cond_signal(&guard->cond);
    g_mutex_unlock(&guard->lock);
    g_thread_join(guard->thread);
    g_mutex_clear(&guard->lock);
    g_cond_clear(&guard->cond);
    g_free(guard->message);
    g_free(guard);
}
