/* SPDX-License-Identifier: MIT
 * exec-comm.c: the process group's logic above an implementation's primitives
 * (exec-comm-private.h): the outbox that workers post into and the host drains in
 * exec_comm_serve(), the stop signal, deadlines on every wait, the agreement on how a phase
 * ended, and the collectives (broadcast, gather, allgather) built from point-to-point
 * messages on the control channel. A NULL group is one process alone.
 */
#include "exec-comm-private.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pp-error.h"

/* Tags of the control channel. */
enum {
    EXEC_COMM_TAG_STOP = 1, /* empty: the replay stops */
    EXEC_COMM_TAG_VERDICT,  /* rank 0's verdict of an agreement, to every rank */
    EXEC_COMM_TAG_BCAST,    /* exec_comm_bcast() */
    EXEC_COMM_TAG_GATHER,   /* gathers, and the ranks' outcomes of an agreement to rank 0 */
    EXEC_COMM_TAG_CLOCK,    /* clock offsets: a ping, and rank 0's time back */
    EXEC_COMM_TAG_PROBE,    /* empty: a rank past its deadline asks whether the peer is there */
    EXEC_COMM_TAG_ALIVE,    /* empty: the answer of a rank that is waiting in the group */
};

/* Polling. MPI over shared memory has no wait that sleeps, so the host polls the transport
 * and sleeps in between: the sleep doubles from IDLE_MIN up to IDLE_MAX microseconds while
 * nothing happens (a message that arrives while the host sleeps waits at most IDLE_MAX; an
 * idle rank wakes up about 1e6 / IDLE_MAX times a second). While a transfer is in flight the
 * host polls without sleeping (yielding the processor between polls), for at most BUSY_US
 * after the oldest one started: MPI moves a large message in fragments only as both sides
 * call into it, and a peer takes a message within IDLE_MAX of its arrival. */
#define EXEC_COMM_IDLE_MIN_US 5
#define EXEC_COMM_IDLE_MAX_US 1000
#define EXEC_COMM_BUSY_US     100000
/* Messages come in bursts (a reply, the next micro-batch): after any activity, and at the
 * start of a wait between replays, the host polls without sleeping this long first. */
#define EXEC_COMM_EAGER_US 200
/* How long a rank past its deadline waits for the peer's answer to a probe (at most the
 * deadline itself): a waiting rank answers within a poll, IDLE_MAX. */
#define EXEC_COMM_PROBE_US 1000000
/* How long a rank ending after an agreed failure takes and drops what peers sent it. */
#define EXEC_COMM_DRAIN_US 300000

/* Outbox markers that are not messages. */
static int exec_comm_wake_marker, exec_comm_stop_marker;

/* --- the group --- */

void exec_comm_init(ExecComm *comm, const ExecCommOps *ops, int32_t rank, int32_t size,
                    int32_t tag_max) {
    comm->ops = ops;
    comm->rank = rank;
    comm->size = size;
    comm->tag_max = tag_max;
    comm->replicas = 1;
    comm->timeout_us = (int64_t)(EXEC_COMM_TIMEOUT_DEFAULT_S * G_USEC_PER_SEC);
    comm->outbox = g_async_queue_new();
    comm->pending = g_ptr_array_new();
    comm->watches = g_ptr_array_new();
    g_mutex_init(&comm->lock);
    const char *fault = g_getenv("PACER_TEST_FAULT");
    if (fault != NULL) {
        g_auto(GStrv) parts = g_strsplit(fault, ":", -1);
        gint64 fault_rank = -1, after = -1;
        if (g_strv_length(parts) != 3 ||
            (strcmp(parts[0], "kill") != 0 && strcmp(parts[0], "stop") != 0 &&
             strcmp(parts[0], "stop-reduce") != 0) ||
            !g_ascii_string_to_signed(parts[1], 10, 0, G_MAXINT32, &fault_rank, NULL) ||
            !g_ascii_string_to_signed(parts[2], 10, 0, G_MAXINT64, &after, NULL)) {
            g_warning("PACER_TEST_FAULT=%s: expected kill|stop|stop-reduce:RANK:MESSAGES; ignored",
                      fault);
        } else if (fault_rank == rank) {
            comm->fault_signal = strcmp(parts[0], "kill") == 0 ? SIGKILL : SIGSTOP;
            comm->fault_channel =
                strcmp(parts[0], "stop-reduce") == 0 ? EXEC_COMM_REDUCE : EXEC_COMM_DATA;
            comm->fault_after = after;
        }
    }
}

void exec_comm_clear(ExecComm *comm) {
    /* Sends still pending here were abandoned by a stopped replay: their buffers may still be
     * read by the transport, so they are not freed (the process is ending). */
    g_ptr_array_unref(comm->pending);
    g_ptr_array_unref(comm->watches);
    g_async_queue_unref(comm->outbox);
    g_clear_error(&comm->error);
    g_mutex_clear(&comm->lock);
}

/* The first of @vars (NULL-ended) that holds an integer in [@lo, G_MAXINT32], or -1. */
static int64_t exec_comm_env_int(const char *const *vars, int64_t lo) {
    for (size_t i = 0; vars[i]; i++) {
        const char *value = g_getenv(vars[i]);
        gint64      n = 0;
        if (value && g_ascii_string_to_signed(value, 10, lo, G_MAXINT32, &n, NULL))
            return n;
    }
    return -1;
}

int64_t exec_comm_launched_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS",
                                       NULL};
    return MAX(exec_comm_env_int(vars, 1), 0);
}

int64_t exec_comm_launched_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    return exec_comm_env_int(vars, 0);
}

void exec_comm_test_stall(const char *point) {
    const char *stall = g_getenv("PACER_TEST_STALL_AT");
    const char *colon = stall ? strchr(stall, ':') : NULL;
    if (colon == NULL || strcmp(colon + 1, point) != 0)
        return;
    g_autofree char *rank = g_strndup(stall, (gsize)(colon - stall));
    gint64           stalled = -1;
    if (g_ascii_string_to_signed(rank, 10, 0, G_MAXINT32, &stalled, NULL) &&
        stalled == exec_comm_launched_rank())
        raise(SIGSTOP);
}

int64_t exec_comm_launched_local_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "SLURM_LOCALID", NULL};
    return exec_comm_env_int(vars, 0);
}

int32_t exec_comm_rank(const ExecComm *comm) {
    return comm ? comm->rank : 0;
}

int32_t exec_comm_size(const ExecComm *comm) {
    return comm ? comm->size : 1;
}

int32_t exec_comm_tag_max(const ExecComm *comm) {
    return comm ? comm->tag_max : G_MAXINT32;
}

void exec_comm_set_timeout(ExecComm *comm, double seconds) {
    PP_ASSERT(seconds > 0.0);
    if (comm)
        comm->timeout_us = (int64_t)(seconds * G_USEC_PER_SEC);
}

double exec_comm_timeout(const ExecComm *comm) {
    return comm ? (double)comm->timeout_us / G_USEC_PER_SEC : 0.0;
}

/* --- waiting --- */

/* The next sleep after @idle_us: none while @in_flight, else twice as long. */
static int64_t exec_comm_next_idle(int64_t idle_us, gboolean in_flight) {
    if (in_flight)
        return 0;
    return idle_us == 0 ? EXEC_COMM_IDLE_MIN_US : MIN(idle_us * 2, EXEC_COMM_IDLE_MAX_US);
}

/* Sleeps @idle_us, or yields the processor for 0. */
static void exec_comm_sleep(int64_t idle_us) {
    if (idle_us == 0)
        g_thread_yield();
    else
        g_usleep((gulong)idle_us);
}

/* EXEC_ERROR_COMM: rank @peer did not answer within the deadline (its answer to a probe, if
 * any, said it waits for rank @peer_waits_for, else -1); @what happened. */
static GError *exec_comm_timeout_error(const ExecComm *comm, int32_t peer, int32_t peer_waits_for,
                                       const char *what) {
    GString *msg = g_string_new(NULL);
    g_string_printf(msg, "%s within %g s (run.comm_timeout_s); ", what, exec_comm_timeout(comm));
    exec_comm_blame(msg, peer, peer_waits_for);
    g_autofree char *text = g_string_free(msg, FALSE);
    return g_error_new_literal(EXEC_ERROR, EXEC_ERROR_COMM, text);
}

/* Starts sending @send and keeps it in flight. */
static void exec_comm_start(ExecComm *comm, ExecCommTransfer *send) {
    send->request =
        comm->ops->isend(comm, send->channel, send->peer, send->tag, send->data, send->bytes);
    send->started_us = g_get_monotonic_time();
    g_ptr_array_add(comm->pending, send);
}

/* Sends an empty control message with @tag to @peer (completed in exec_comm_reap()). */
static void exec_comm_signal(ExecComm *comm, int32_t peer, int32_t tag) {
    ExecCommTransfer *t = g_new0(ExecCommTransfer, 1);
    *t = (ExecCommTransfer){.channel = EXEC_COMM_CONTROL, .peer = peer, .tag = tag};
    exec_comm_start(comm, t);
}

/* Takes a control message with @tag from @src (-1: any) if one has arrived: empty, or one
 * int32 that goes to *@word (nullable; -1 for an empty one); *@from (nullable) is its sender. */
static gboolean exec_comm_take_signal(ExecComm *comm, int32_t src, int32_t tag, int32_t *from,
                                      int32_t *word) {
    int32_t  peer, got_tag;
    void    *data = NULL;
    size_t   bytes = 0;
    gpointer request =
        comm->ops->irecv(comm, EXEC_COMM_CONTROL, src, tag, &peer, &got_tag, &data, &bytes);
    if (request == NULL)
        return FALSE;
    /* It has arrived, and it is small: the receive completes at once. */
    while (!comm->ops->test(comm, request))
        g_thread_yield();
    if (word)
        *word = -1;
    if (word && bytes == sizeof *word)
        memcpy(word, data, sizeof *word);
    g_free(data);
    if (from)
        *from = peer;
    return TRUE;
}

/* Answers every probe that has arrived: this rank is there, and waits for rank @waits_for
 * (-1: for none; the host between replays, or the oldest wait of a worker in a replay). */
static void exec_comm_answer_probes(ExecComm *comm, int32_t waits_for) {
    for (int32_t from; exec_comm_take_signal(comm, -1, EXEC_COMM_TAG_PROBE, &from, NULL);) {
        ExecCommTransfer *t = g_new0(ExecCommTransfer, 1);
        int32_t          *word = g_new(int32_t, 1);
        *word = waits_for;
        *t = (ExecCommTransfer){.channel = EXEC_COMM_CONTROL,
                                .peer = from,
                                .tag = EXEC_COMM_TAG_ALIVE,
                                .data = word,
                                .bytes = sizeof *word};
        exec_comm_start(comm, t);
    }
}

/* The deadline of one wait for rank @peer. Past run.comm_timeout_s the waiting rank probes
 * the peer: one that is itself waiting in the group (any wait here, or a replay's host loop)
 * answers, and the wait gets the deadline and the probe's time once more; one that does not
 * answer within EXEC_COMM_PROBE_US ends the wait. So in a chain of waits (rank 1 waits for
 * rank 0, which waits for the missing rank 2) the rank that waits for the missing one reports
 * it first, as long as it started waiting less than the deadline after the others. */
typedef enum { EXEC_COMM_WAITING, EXEC_COMM_PROBING, EXEC_COMM_EXTENDED } ExecCommWaitState;

typedef struct {
    int32_t           peer;
    int64_t           deadline_us; /* g_get_monotonic_time() */
    ExecCommWaitState state;
    int32_t           peer_waits_for; /* what the peer's answer said it waits for, or -1 */
} ExecCommDeadline;

/* How long a probe's answer may take. */
static int64_t exec_comm_probe_us(const ExecComm *comm) {
    return MIN(comm->timeout_us, EXEC_COMM_PROBE_US);
}

static ExecCommDeadline exec_comm_deadline(const ExecComm *comm, int32_t peer) {
    return (ExecCommDeadline){.peer = peer,
                              .deadline_us = g_get_monotonic_time() + comm->timeout_us,
                              .state = EXEC_COMM_WAITING,
                              .peer_waits_for = -1};
}

/* One look at @d: TRUE once it has passed (the probe unanswered, or the extension over). */
static gboolean exec_comm_deadline_advance(ExecComm *comm, ExecCommDeadline *d) {
    int64_t now = g_get_monotonic_time();
    if (d->state == EXEC_COMM_PROBING &&
        exec_comm_take_signal(comm, d->peer, EXEC_COMM_TAG_ALIVE, NULL, &d->peer_waits_for)) {
        /* A peer waiting for this rank points nowhere further: it is the one to name. */
        if (d->peer_waits_for == comm->rank)
            d->peer_waits_for = -1;
        d->state = EXEC_COMM_EXTENDED;
        d->deadline_us = now + comm->timeout_us + exec_comm_probe_us(comm);
    }
    if (now <= d->deadline_us)
        return FALSE;
    if (d->state != EXEC_COMM_WAITING)
        return TRUE;
    d->state = EXEC_COMM_PROBING;
    d->deadline_us = now + exec_comm_probe_us(comm);
    exec_comm_signal(comm, d->peer, EXEC_COMM_TAG_PROBE);
    return FALSE;
}

/* One look at @d while the host waits (answering the peers' probes too): TRUE once passed. */
static gboolean exec_comm_deadline_passed(ExecComm *comm, ExecCommDeadline *d) {
    exec_comm_launcher_check(comm);
    exec_comm_answer_probes(comm, d->peer);
    return exec_comm_deadline_advance(comm, d);
}

/* --- waits of the workers while a replay runs --- */

struct _ExecCommWatch {
    ExecCommDeadline d;
    ExecCommWakeFn   wake;
    gpointer         wake_data;
    gboolean         expired; /* under comm->lock */
};

ExecCommWatch *exec_comm_watch_begin(ExecComm *comm, int32_t peer, ExecCommWakeFn wake,
                                     gpointer user_data) {
    ExecCommWatch *w = g_new0(ExecCommWatch, 1);
    *w = (ExecCommWatch){.d = exec_comm_deadline(comm, peer), .wake = wake, .wake_data = user_data};
    g_mutex_lock(&comm->lock);
    g_ptr_array_add(comm->watches, w);
    g_mutex_unlock(&comm->lock);
    return w;
}

gboolean exec_comm_watch_end(ExecComm *comm, ExecCommWatch *watch, int32_t *peer_waits_for) {
    g_mutex_lock(&comm->lock);
    g_ptr_array_remove(comm->watches, watch);
    gboolean expired = watch->expired;
    g_mutex_unlock(&comm->lock);
    if (peer_waits_for)
        *peer_waits_for = watch->d.peer_waits_for;
    g_free(watch);
    return expired;
}

/* Host, in a replay: answers the probes with the oldest worker wait's peer, and advances every
 * worker wait's deadline as the host's own waits do; one that passed is marked and woken. */
static void exec_comm_watch_all(ExecComm *comm) {
    g_mutex_lock(&comm->lock);
    int32_t waits_for = -1;
    for (guint i = 0; i < comm->watches->len && waits_for < 0; i++) {
        const ExecCommWatch *w = g_ptr_array_index(comm->watches, i);
        if (!w->expired)
            waits_for = w->d.peer;
    }
    exec_comm_answer_probes(comm, waits_for);
    for (guint i = 0; i < comm->watches->len; i++) {
        ExecCommWatch *w = g_ptr_array_index(comm->watches, i);
        if (!w->expired && exec_comm_deadline_advance(comm, &w->d)) {
            w->expired = TRUE;
            w->wake(w->wake_data);
        }
    }
    g_mutex_unlock(&comm->lock);
}

void exec_comm_blame(GString *out, int32_t peer, int32_t peer_waits_for) {
    if (peer_waits_for >= 0 && peer_waits_for != peer)
        g_string_append_printf(out, "rank %d answered that it waits for rank %d: ", peer,
                               peer_waits_for);
    int32_t blamed = peer_waits_for >= 0 ? peer_waits_for : peer;
    g_string_append_printf(out, "rank %d may have died or hung", blamed);
}

/* Waits until @request (a transfer with @d's peer, started now) completes. */
static gboolean exec_comm_wait_request(ExecComm *comm, gpointer request, ExecCommDeadline *d,
                                       const char *what, GError **error) {
    int64_t start = g_get_monotonic_time(), idle = 0;
    while (!comm->ops->test(comm, request)) {
        if (exec_comm_deadline_passed(comm, d)) {
            g_propagate_error(error,
                              exec_comm_timeout_error(comm, d->peer, d->peer_waits_for, what));
            return FALSE;
        }
        idle = exec_comm_next_idle(idle, g_get_monotonic_time() - start < EXEC_COMM_BUSY_US);
        exec_comm_sleep(idle);
    }
    return TRUE;
}

/* Waits until @request (a send to @peer) completes. */
static gboolean exec_comm_wait_send(ExecComm *comm, gpointer request, int32_t peer,
                                    const char *what, GError **error) {
    g_autofree char *msg = g_strdup_printf("rank %d did not take %s", peer, what);
    ExecCommDeadline d = exec_comm_deadline(comm, peer);
    return exec_comm_wait_request(comm, request, &d, msg, error);
}

/* Waits for the message from @src with @tag on @channel: (transfer full) in *@data. */
static gboolean exec_comm_wait_take(ExecComm *comm, ExecCommChannel channel, int32_t src,
                                    int32_t tag, const char *what, void **data, size_t *bytes,
                                    GError **error) {
    g_autofree char *msg = g_strdup_printf("%s from rank %d did not arrive", what, src);
    ExecCommDeadline d = exec_comm_deadline(comm, src);
    int64_t          start = g_get_monotonic_time(), idle = 0;
    int32_t          from, got_tag;
    gpointer         request;
    while (!(request = comm->ops->irecv(comm, channel, src, tag, &from, &got_tag, data, bytes))) {
        if (exec_comm_deadline_passed(comm, &d)) {
            g_propagate_error(error, exec_comm_timeout_error(comm, src, d.peer_waits_for, msg));
            return FALSE;
        }
        idle = exec_comm_next_idle(idle, g_get_monotonic_time() - start < EXEC_COMM_EAGER_US);
        exec_comm_sleep(idle);
    }
    if (exec_comm_wait_request(comm, request, &d, msg, error))
        return TRUE;
    /* The transport may still write into the buffer: it stays allocated (the job ends). */
    *data = NULL;
    return FALSE;
}

/* --- while a replay runs --- */

void exec_comm_set_receiver(ExecComm *comm, ExecCommChannel channel, ExecCommRecvFn fn,
                            gpointer user_data) {
    PP_ASSERT(channel == EXEC_COMM_DATA || channel == EXEC_COMM_REPORT ||
              channel == EXEC_COMM_REDUCE);
    comm->receivers[channel] = fn;
    comm->receiver_data[channel] = user_data;
}

void exec_comm_set_stop_handler(ExecComm *comm, ExecCommStopFn fn, gpointer user_data) {
    comm->on_stop = fn;
    comm->on_stop_data = user_data;
}

void exec_comm_begin(ExecComm *comm, int32_t report_src, int32_t n_reports) {
    /* The previous replay's last workers may have left wake-ups (and a stop outside a replay
     * has no replay to stop); never a message. */
    for (gpointer item; (item = g_async_queue_try_pop(comm->outbox)) != NULL;)
        PP_ASSERT(item == &exec_comm_wake_marker || item == &exec_comm_stop_marker);
    g_atomic_int_set(&comm->stopped, 0);
    comm->report_src = report_src;
    comm->reports_expected = n_reports;
    comm->reports_seen = 0;
}

void exec_comm_post(ExecComm *comm, ExecCommChannel channel, int32_t dest, int32_t tag, void *data,
                    size_t bytes) {
    PP_ASSERT(dest >= 0 && dest < comm->size && dest != comm->rank);
    PP_ASSERT(tag >= 0 && tag <= comm->tag_max);
    ExecCommTransfer *send = g_new0(ExecCommTransfer, 1);
    *send = (ExecCommTransfer){
        .channel = channel, .peer = dest, .tag = tag, .data = data, .bytes = bytes};
    g_async_queue_push(comm->outbox, send);
}

/* Marks the replay stopped; TRUE the first time. */
static gboolean exec_comm_mark_stopped(ExecComm *comm) {
    if (!g_atomic_int_compare_and_exchange(&comm->stopped, 0, 1))
        return FALSE;
    if (comm->on_stop)
        comm->on_stop(comm->on_stop_data);
    return TRUE;
}

void exec_comm_stop(ExecComm *comm) {
    /* The host tells the peers (exec_comm_serve() handles the marker). */
    if (exec_comm_mark_stopped(comm))
        g_async_queue_push(comm->outbox, &exec_comm_stop_marker);
}

void exec_comm_fail(ExecComm *comm, GError *error) {
    g_mutex_lock(&comm->lock);
    if (comm->error == NULL)
        comm->error = error;
    else
        g_error_free(error);
    g_mutex_unlock(&comm->lock);
    exec_comm_stop(comm);
}

gboolean exec_comm_stopped(ExecComm *comm) {
    return g_atomic_int_get(&comm->stopped) != 0;
}

void exec_comm_wake(ExecComm *comm) {
    g_async_queue_push(comm->outbox, &exec_comm_wake_marker);
}

/* An outbox item on the host: a message to send, the stop signal for the peers, a wake-up. */
static void exec_comm_handle(ExecComm *comm, gpointer item) {
    if (item == &exec_comm_wake_marker)
        return;
    if (item == &exec_comm_stop_marker) {
        for (int32_t r = 0; r < comm->size; r++) {
            if (r != comm->rank)
                exec_comm_signal(comm, r, EXEC_COMM_TAG_STOP);
        }
        return;
    }
    ExecCommTransfer *send = item;
    if (comm->fault_signal != 0 && send->channel == comm->fault_channel &&
        comm->data_sent++ == comm->fault_after) {
        fprintf(stderr,
                "pacer-train: rank %d: PACER_TEST_FAULT: raising %s after %" G_GINT64_FORMAT
                " %s messages\n",
                comm->rank, comm->fault_signal == SIGKILL ? "SIGKILL" : "SIGSTOP",
                comm->fault_after, comm->fault_channel == EXEC_COMM_REDUCE ? "reduction" : "data");
        fflush(stderr);
        raise(comm->fault_signal);
    }
    exec_comm_start(comm, send);
}

/* Starts receiving every message that has arrived on @channel with @tag (-1: any). */
static gboolean exec_comm_receive(ExecComm *comm, ExecCommChannel channel, int32_t tag) {
    gboolean          busy = FALSE;
    ExecCommTransfer *in = g_new0(ExecCommTransfer, 1);
    while ((in->request = comm->ops->irecv(comm, channel, -1, tag, &in->peer, &in->tag, &in->data,
                                           &in->bytes)) != NULL) {
        in->channel = channel;
        in->incoming = TRUE;
        in->started_us = g_get_monotonic_time();
        g_ptr_array_add(comm->pending, in);
        in = g_new0(ExecCommTransfer, 1);
        busy = TRUE;
    }
    g_free(in);
    return busy;
}

/* A transfer has completed: a received message goes to its channel's receiver (a stop signal
 * stops the replay); the buffer of a sent one is freed. */
static void exec_comm_complete(ExecComm *comm, ExecCommTransfer *t) {
    if (t->incoming && t->channel == EXEC_COMM_CONTROL) {
        exec_comm_mark_stopped(comm);
    } else if (t->incoming) {
        /* A message arrives only for a channel someone listens to. */
        PP_ASSERT(comm->receivers[t->channel] != NULL);
        comm->receivers[t->channel](comm->receiver_data[t->channel], t->peer, t->tag,
                                    g_steal_pointer(&t->data), t->bytes);
        comm->reports_seen += t->channel == EXEC_COMM_REPORT;
    }
    g_free(t->data);
    g_free(t);
}

/* Tests every transfer in flight, oldest first: a completed one is handed on
 * (exec_comm_complete()), or with @drop freed unseen. Returns whether any completed. */
static gboolean exec_comm_reap(ExecComm *comm, gboolean drop) {
    gboolean done = FALSE;
    for (guint i = 0; i < comm->pending->len;) {
        ExecCommTransfer *t = g_ptr_array_index(comm->pending, i);
        if (!comm->ops->test(comm, t->request)) {
            i++;
            continue;
        }
        g_ptr_array_remove_index(comm->pending, i);
        if (drop) {
            g_free(t->data);
            g_free(t);
        } else {
            exec_comm_complete(comm, t);
        }
        done = TRUE;
    }
    return done;
}

/* One round on the host: queued messages out, arrived messages in, completed transfers
 * handed on in the order they started. Returns whether anything happened. */
static gboolean exec_comm_pump(ExecComm *comm) {
    gboolean busy = FALSE;
    exec_comm_launcher_check(comm);
    for (gpointer item; (item = g_async_queue_try_pop(comm->outbox)) != NULL; busy = TRUE)
        exec_comm_handle(comm, item);
    /* Only stop signals and probes: the control channel's other tags belong to the
     * collectives. */
    busy |= exec_comm_receive(comm, EXEC_COMM_CONTROL, EXEC_COMM_TAG_STOP);
    exec_comm_watch_all(comm);
    busy |= exec_comm_receive(comm, EXEC_COMM_DATA, -1);
    busy |= exec_comm_receive(comm, EXEC_COMM_REPORT, -1);
    busy |= exec_comm_receive(comm, EXEC_COMM_REDUCE, -1);
    busy |= exec_comm_reap(comm, FALSE);
    return busy;
}

/* The failure of a serve loop that waited too long once the workers were done. */
static GError *exec_comm_serve_timeout(const ExecComm *comm) {
    if (comm->pending->len > 0) {
        const ExecCommTransfer *t = g_ptr_array_index(comm->pending, 0);
        g_autofree char        *msg =
            t->incoming ? g_strdup_printf("%zu bytes from rank %d on channel %d with tag %d did "
                                                        "not arrive",
                                                 t->bytes, t->peer, (int)t->channel, t->tag)
                               : g_strdup_printf("rank %d did not take %zu bytes sent on channel %d "
                                                        "with tag %d",
                                                 t->peer, t->bytes, (int)t->channel, t->tag);
        return exec_comm_timeout_error(comm, t->peer, -1, msg);
    }
    g_autofree char *msg = g_strdup_printf("%d of %d loss reports from rank %d did not arrive",
                                           comm->reports_expected - comm->reports_seen,
                                           comm->reports_expected, comm->report_src);
    return exec_comm_timeout_error(comm, comm->report_src, -1, msg);
}

void exec_comm_serve(ExecComm *comm, gint *running) {
    int64_t idle = 0, waiting_since = -1, last_busy = 0;
    for (;;) {
        /* Read before pumping: a worker queues its last messages before it stops running. */
        gboolean workers_done = g_atomic_int_get(running) == 0;
        gboolean busy = exec_comm_pump(comm);
        int64_t  now = g_get_monotonic_time();
        if (busy)
            last_busy = now;
        if (workers_done) {
            if (exec_comm_stopped(comm) ||
                (comm->pending->len == 0 && comm->reports_seen >= comm->reports_expected))
                return;
            if (busy || waiting_since < 0)
                waiting_since = now;
            else if (now - waiting_since > comm->timeout_us) {
                exec_comm_fail(comm, exec_comm_serve_timeout(comm));
                return;
            }
        }
        if (busy) {
            idle = 0;
            continue;
        }
        /* Sleep until a worker posts something, or the next poll of the transport; not at
         * all right after activity or while the oldest transfer in flight is young. */
        gboolean in_flight =
            now - last_busy < EXEC_COMM_EAGER_US ||
            (comm->pending->len > 0 &&
             now - ((const ExecCommTransfer *)g_ptr_array_index(comm->pending, 0))->started_us <
                 EXEC_COMM_BUSY_US);
        idle = exec_comm_next_idle(idle, in_flight);
        if (idle == 0) {
            g_thread_yield();
            continue;
        }
        gpointer item = g_async_queue_timeout_pop(comm->outbox, (guint64)idle);
        if (item != NULL) {
            exec_comm_handle(comm, item);
            idle = 0;
        }
    }
}

/* --- between replays --- */

/* A rank's outcome on the wire: one byte (1: failed), then the error's code (int32), its
 * domain and its message, each NUL-terminated. */
static GBytes *exec_comm_status_encode(const GError *error) {
    GByteArray *out = g_byte_array_new();
    guint8      failed = error != NULL;
    g_byte_array_append(out, &failed, 1);
    if (error) {
        int32_t     code = error->code;
        const char *domain = g_quark_to_string(error->domain);
        g_byte_array_append(out, (const guint8 *)&code, sizeof code);
        g_byte_array_append(out, (const guint8 *)domain, (guint)strlen(domain) + 1);
        g_byte_array_append(out, (const guint8 *)error->message, (guint)strlen(error->message) + 1);
    }
    return g_byte_array_free_to_bytes(out);
}

/* Returns: (transfer full) the error @status holds, or NULL. */
static GError *exec_comm_status_decode(const void *status, size_t bytes) {
    const char *p = status;
    PP_ASSERT(bytes >= 1);
    if (p[0] == 0)
        return NULL;
    /* Written by exec_comm_status_encode() of the same program. */
    PP_ASSERT(bytes > 1 + sizeof(int32_t) && p[bytes - 1] == '\0');
    int32_t code;
    memcpy(&code, p + 1, sizeof code);
    const char *domain = p + 1 + sizeof code;
    const char *message = domain + strlen(domain) + 1;
    PP_ASSERT(message < p + bytes);
    return g_error_new_literal(g_quark_from_string(domain), code, message);
}

/* Takes the failure recorded by exec_comm_fail() into *@error: a peer that did not answer
 * replaces whatever is there; another failure only fills an empty *@error. Returns TRUE when
 * the result is such a timeout (fatal: no agreement possible). */
static gboolean exec_comm_take_failure(ExecComm *comm, GError **error) {
    g_mutex_lock(&comm->lock);
    GError *recorded = g_steal_pointer(&comm->error);
    g_mutex_unlock(&comm->lock);
    if (recorded && g_error_matches(recorded, EXEC_ERROR, EXEC_ERROR_COMM)) {
        g_clear_error(error);
        g_propagate_error(error, recorded);
        return TRUE;
    }
    if (recorded && *error == NULL)
        g_propagate_error(error, recorded);
    else if (recorded)
        g_error_free(recorded);
    return *error && g_error_matches(*error, EXEC_ERROR, EXEC_ERROR_COMM);
}

/* Every rank's outcome @mine to rank 0, which picks the failure of the lowest rank that had
 * one (or success) and sends it back to every rank. Returns: (transfer full) the verdict,
 * or NULL with EXEC_ERROR_COMM (a peer that did not answer). */
static GBytes *exec_comm_verdict(ExecComm *comm, const char *what, GBytes *mine, GError **error) {
    g_autofree char *status_what = g_strdup_printf("the status at %s", what);
    g_autoptr(GPtrArray) statuses = exec_comm_gather(comm, 0, mine, status_what, error);
    if (statuses == NULL)
        return NULL;
    if (comm->rank != 0) {
        g_autofree char *verdict_what = g_strdup_printf("rank 0's verdict at %s", what);
        void            *data = NULL;
        size_t           size = 0;
        if (!exec_comm_wait_take(comm, EXEC_COMM_CONTROL, 0, EXEC_COMM_TAG_VERDICT, verdict_what,
                                 &data, &size, error))
            return NULL;
        return g_bytes_new_take(data, size);
    }
    GBytes *verdict = mine;
    for (guint r = 0; r < statuses->len && verdict == mine; r++) {
        const guint8 *p = g_bytes_get_data(g_ptr_array_index(statuses, r), NULL);
        if (p[0] != 0)
            verdict = g_ptr_array_index(statuses, r);
    }
    gsize            size = 0;
    const void      *data = g_bytes_get_data(verdict, &size);
    g_autofree char *verdict_what = g_strdup_printf("the verdict at %s", what);
    g_autoptr(GPtrArray) requests = g_ptr_array_new();
    for (int32_t r = 1; r < comm->size; r++)
        g_ptr_array_add(requests, comm->ops->isend(comm, EXEC_COMM_CONTROL, r,
                                                   EXEC_COMM_TAG_VERDICT, data, size));
    for (int32_t r = 1; r < comm->size; r++) {
        if (!exec_comm_wait_send(comm, g_ptr_array_index(requests, r - 1), r, verdict_what, error))
            return NULL;
    }
    return g_bytes_ref(verdict);
}

gboolean exec_comm_agree(ExecComm *comm, const char *what, GError **error) {
    if (comm == NULL)
        return *error == NULL;
    exec_comm_test_stall(what);
    if (exec_comm_take_failure(comm, error))
        return FALSE;
    g_autoptr(GBytes) mine = exec_comm_status_encode(*error);
    GError *lost = NULL;
    g_autoptr(GBytes) verdict = exec_comm_verdict(comm, what, mine, &lost);
    g_clear_error(error);
    if (verdict == NULL) {
        /* A peer that does not answer replaces this rank's own failure. */
        g_propagate_error(error, lost);
        return FALSE;
    }
    gsize       size = 0;
    const void *data = g_bytes_get_data(verdict, &size);
    *error = exec_comm_status_decode(data, size);
    comm->agreed_failure = *error != NULL;
    return *error == NULL;
}

/* A message of @got bytes where @want were expected. */
static void exec_comm_size_error(const ExecComm *comm, int32_t src, const char *what, size_t got,
                                 size_t want, GError **error) {
    (void)comm;
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_COMM, "%s from rank %d has %zu bytes; expected %zu",
                what, src, got, want);
}

gboolean exec_comm_send(ExecComm *comm, int32_t dest, int32_t tag, const void *data, size_t bytes,
                        const char *what, GError **error) {
    PP_ASSERT(comm != NULL && dest != comm->rank && tag >= 0 && tag <= comm->tag_max);
    gpointer request = comm->ops->isend(comm, EXEC_COMM_HOST, dest, tag, data, bytes);
    return exec_comm_wait_send(comm, request, dest, what, error);
}

gboolean exec_comm_recv(ExecComm *comm, int32_t src, int32_t tag, void *data, size_t bytes,
                        const char *what, GError **error) {
    PP_ASSERT(comm != NULL && src != comm->rank && tag >= 0 && tag <= comm->tag_max);
    g_autofree void *got = NULL;
    size_t           n = 0;
    if (!exec_comm_wait_take(comm, EXEC_COMM_HOST, src, tag, what, &got, &n, error))
        return FALSE;
    if (n != bytes) {
        exec_comm_size_error(comm, src, what, n, bytes, error);
        return FALSE;
    }
    memcpy(data, got, bytes);
    return TRUE;
}

gboolean exec_comm_bcast(ExecComm *comm, int32_t root, void *data, size_t bytes, const char *what,
                         GError **error) {
    if (comm == NULL)
        return TRUE;
    if (comm->rank != root) {
        g_autofree void *got = NULL;
        size_t           n = 0;
        if (!exec_comm_wait_take(comm, EXEC_COMM_CONTROL, root, EXEC_COMM_TAG_BCAST, what, &got, &n,
                                 error))
            return FALSE;
        if (n != bytes) {
            exec_comm_size_error(comm, root, what, n, bytes, error);
            return FALSE;
        }
        memcpy(data, got, bytes);
        return TRUE;
    }
    g_autoptr(GPtrArray) requests = g_ptr_array_new();
    for (int32_t r = 0; r < comm->size; r++) {
        if (r != root)
            g_ptr_array_add(requests, comm->ops->isend(comm, EXEC_COMM_CONTROL, r,
                                                       EXEC_COMM_TAG_BCAST, data, bytes));
    }
    for (int32_t r = 0, i = 0; r < comm->size; r++) {
        if (r != root &&
            !exec_comm_wait_send(comm, g_ptr_array_index(requests, i++), r, what, error))
            return FALSE;
    }
    return TRUE;
}

/* Gathers @mine to @root, or to every rank (@root -1). */
static GPtrArray *exec_comm_collect(ExecComm *comm, int32_t root, GBytes *mine, const char *what,
                                    GError **error) {
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    if (comm == NULL) {
        g_ptr_array_add(out, g_bytes_ref(mine));
        return g_steal_pointer(&out);
    }
    gsize       size = 0;
    const void *data = g_bytes_get_data(mine, &size);
    /* Sends first, all at once, so that two ranks sending to each other never wait on each
     * other; then the receives; then the sends' completion. */
    g_autoptr(GPtrArray) requests = g_ptr_array_new();
    g_autofree int32_t *dests = g_new(int32_t, comm->size);
    int32_t             n_sends = 0;
    for (int32_t r = 0; r < comm->size; r++) {
        if (r != comm->rank && (root < 0 || r == root)) {
            dests[n_sends++] = r;
            g_ptr_array_add(requests, comm->ops->isend(comm, EXEC_COMM_CONTROL, r,
                                                       EXEC_COMM_TAG_GATHER, data, size));
        }
    }
    if (root < 0 || root == comm->rank) {
        for (int32_t r = 0; r < comm->size; r++) {
            if (r == comm->rank) {
                g_ptr_array_add(out, g_bytes_ref(mine));
                continue;
            }
            void  *got = NULL;
            size_t n = 0;
            if (!exec_comm_wait_take(comm, EXEC_COMM_CONTROL, r, EXEC_COMM_TAG_GATHER, what, &got,
                                     &n, error))
                return NULL;
            g_ptr_array_add(out, g_bytes_new_take(got, n));
        }
    }
    for (int32_t i = 0; i < n_sends; i++) {
        if (!exec_comm_wait_send(comm, g_ptr_array_index(requests, i), dests[i], what, error))
            return NULL;
    }
    return g_steal_pointer(&out);
}

GPtrArray *exec_comm_gather(ExecComm *comm, int32_t root, GBytes *mine, const char *what,
                            GError **error) {
    PP_ASSERT(root >= 0 && root < exec_comm_size(comm));
    return exec_comm_collect(comm, root, mine, what, error);
}

GPtrArray *exec_comm_allgather(ExecComm *comm, GBytes *mine, const char *what, GError **error) {
    return exec_comm_collect(comm, -1, mine, what, error);
}

/* CLOCK_MONOTONIC in ns. */
static int64_t exec_comm_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sends @bytes of @data to @peer on the control channel with @tag and waits until taken. */
static gboolean exec_comm_control_send(ExecComm *comm, int32_t peer, int32_t tag, const void *data,
                                       size_t bytes, const char *what, GError **error) {
    gpointer request = comm->ops->isend(comm, EXEC_COMM_CONTROL, peer, tag, data, bytes);
    return exec_comm_wait_send(comm, request, peer, what, error);
}

gboolean exec_comm_clock_offset(ExecComm *comm, int64_t *offset_ns, int64_t *bound_ns,
                                GError **error) {
    enum { ROUNDS = 8 };
    *offset_ns = 0;
    if (bound_ns)
        *bound_ns = 0;
    if (comm == NULL)
        return TRUE;
    /* Rank k pings rank 0 at t1, rank 0 answers its time t0, the answer arrives at t2: the
     * offset (rank 0's clock - k's) lies in [t0 - t2, t0 - t1]; the round with the shortest
     * round trip gives the estimate t0 - (t1 + t2) / 2, within half of it. */
    for (int32_t k = 1; k < comm->size; k++) {
        if (comm->rank != 0 && comm->rank != k)
            continue;
        int64_t best = G_MAXINT64;
        for (int i = 0; i < ROUNDS; i++) {
            int64_t          t0 = 0, t1 = exec_comm_now_ns();
            g_autofree void *got = NULL;
            size_t           n = 0;
            if (comm->rank == k) {
                if (!exec_comm_control_send(comm, 0, EXEC_COMM_TAG_CLOCK, &t1, sizeof t1,
                                            "a clock ping", error) ||
                    !exec_comm_wait_take(comm, EXEC_COMM_CONTROL, 0, EXEC_COMM_TAG_CLOCK,
                                         "rank 0's clock", &got, &n, error))
                    return FALSE;
                int64_t t2 = exec_comm_now_ns();
                PP_ASSERT(n == sizeof t0);
                memcpy(&t0, got, sizeof t0);
                if (t2 - t1 < best) {
                    best = t2 - t1;
                    *offset_ns = t0 - t1 - (t2 - t1) / 2;
                }
            } else {
                if (!exec_comm_wait_take(comm, EXEC_COMM_CONTROL, k, EXEC_COMM_TAG_CLOCK,
                                         "a clock ping", &got, &n, error))
                    return FALSE;
                t0 = exec_comm_now_ns();
                if (!exec_comm_control_send(comm, k, EXEC_COMM_TAG_CLOCK, &t0, sizeof t0,
                                            "this rank's clock", error))
                    return FALSE;
            }
        }
        if (comm->rank == k && bound_ns)
            *bound_ns = best / 2 + 1;
    }
    return TRUE;
}

/* --- the end --- */

/* After a failure: lets the transfers a stopped replay left complete (peers take and drop
 * what reaches them) for a moment; with @drain, takes and drops what reaches this rank for
 * EXEC_COMM_DRAIN_US even when it has nothing in flight itself (a peer's large message, such
 * as a part of a gradient reduction, completes only once taken). Returns TRUE when none is
 * left. */
static gboolean exec_comm_settle(ExecComm *comm, gboolean drain) {
    int64_t now = g_get_monotonic_time();
    int64_t deadline = now + MIN(comm->timeout_us, 2 * G_USEC_PER_SEC);
    int64_t drain_until = drain ? now + EXEC_COMM_DRAIN_US : now;
    int64_t idle = 0;
    while ((comm->pending->len > 0 || g_get_monotonic_time() < drain_until) &&
           g_get_monotonic_time() < deadline) {
        for (int ch = 0; ch < EXEC_COMM_N_CHANNELS; ch++)
            exec_comm_receive(comm, ch, -1);
        exec_comm_reap(comm, TRUE);
        idle = exec_comm_next_idle(idle, FALSE);
        exec_comm_sleep(idle);
    }
    return comm->pending->len == 0;
}

int exec_comm_finish(ExecComm *comm, const GError *error) {
    int status = error ? 1 : 0;
    if (comm == NULL)
        return status;
    fflush(stdout);
    fflush(stderr);
    exec_comm_test_stall("finish");
    if ((error && !comm->agreed_failure) || !exec_comm_settle(comm, error != NULL))
        comm->ops->abort(comm, 1);
    comm->ops->free(comm);
    return status;
}
