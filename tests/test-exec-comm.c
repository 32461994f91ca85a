/* SPDX-License-Identifier: MIT
 * test-exec-comm.c: the process group over MPI (exec/comm/exec-comm.h), run on three ranks by
 * scripts/mpirun-local (an MPI program, so a plain one: Check's forks and report do not mix
 * with MPI; the exit status says it all). Agreement (the lowest failing rank's error reaches
 * every rank, domain, code and message), broadcast, gather and allgather of blobs of every
 * size, point-to-point copies and their size check, a deadline that names the silent peer
 * (also at the end of a chain of waits),
 * the clock offset to rank 0 within its bound, the replay transport (workers post a ring of
 * messages, the host serves, every message and loss report arrives once, a stop reaches every
 * rank), and with NCCL the unique id every rank receives and the stage groups' ids (one per
 * stage: three stages of one replica get three ids, one stage of three replicas one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec-comm-mpi.h"
#include "pp-config.h"
#if PP_HAVE_NCCL
#include "exec-comm-nccl.h"
#endif

static int failures;

#define CHECK(comm, cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "test-exec-comm: rank %d: %s:%d: %s\n", exec_comm_rank(comm),          \
                    __FILE__, __LINE__, #cond);                                                    \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define TEST_DOMAIN g_quark_from_static_string("test-exec-comm")

/* Ranks 1 and 2 fail with their own errors: every rank ends with rank 1's. */
static void test_agree(ExecComm *comm) {
    int32_t rank = exec_comm_rank(comm);
    GError *error = NULL;
    CHECK(comm, exec_comm_agree(comm, "a phase that went well", &error));
    CHECK(comm, error == NULL);
    if (rank > 0)
        error = g_error_new(TEST_DOMAIN, 10 + rank, "boom on rank %d", rank);
    CHECK(comm, !exec_comm_agree(comm, "a phase that failed", &error));
    CHECK(comm, error != NULL && g_error_matches(error, TEST_DOMAIN, 11) &&
                    strcmp(error->message, "boom on rank 1") == 0);
    g_clear_error(&error);
    /* A failure recorded while a replay ran counts too. */
    if (rank == 2)
        exec_comm_fail(comm, g_error_new(EXEC_ERROR, EXEC_ERROR_SHAPE, "recorded on rank 2"));
    CHECK(comm, !exec_comm_agree(comm, "a replay", &error));
    CHECK(comm, error && g_error_matches(error, EXEC_ERROR, EXEC_ERROR_SHAPE));
    g_clear_error(&error);
}

/* Blobs of rank + 1 bytes, each byte the rank: broadcast, gather, allgather. */
static void test_collectives(ExecComm *comm) {
    int32_t rank = exec_comm_rank(comm), size = exec_comm_size(comm);
    GError *error = NULL;
    char    text[64] = {0};
    if (rank == 1)
        g_strlcpy(text, "from rank 1", sizeof text);
    CHECK(comm, exec_comm_bcast(comm, 1, text, sizeof text, "a text", &error));
    CHECK(comm, strcmp(text, "from rank 1") == 0);
    guint8 mine[8];
    memset(mine, rank, sizeof mine);
    GBytes    *blob = g_bytes_new(mine, (gsize)rank + 1);
    GPtrArray *all = exec_comm_allgather(comm, blob, "a blob", &error);
    GPtrArray *at2 = exec_comm_gather(comm, 2, blob, "a blob", &error);
    CHECK(comm, all != NULL && (int32_t)all->len == size);
    CHECK(comm, at2 != NULL && (int32_t)at2->len == (rank == 2 ? size : 0));
    for (int32_t r = 0; all && r < (int32_t)all->len; r++) {
        gsize         n = 0;
        const guint8 *p = g_bytes_get_data(g_ptr_array_index(all, r), &n);
        CHECK(comm, n == (gsize)r + 1 && p[0] == r && p[n - 1] == r);
        if (rank == 2)
            CHECK(comm, g_bytes_equal(g_ptr_array_index(all, r), g_ptr_array_index(at2, r)));
    }
    g_ptr_array_unref(all);
    g_ptr_array_unref(at2);
    g_bytes_unref(blob);
}

/* Rank 0 sends 3 MiB to rank 2 and back; a receive of another size is refused. */
static void test_point_to_point(ExecComm *comm) {
    int32_t rank = exec_comm_rank(comm);
    size_t  n = (size_t)3 << 20;
    GError *error = NULL;
    guint8 *buf = g_malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = (guint8)(rank == 0 ? i * 7 : 0);
    if (rank == 0) {
        CHECK(comm, exec_comm_send(comm, 2, 5, buf, n, "3 MiB", &error));
        CHECK(comm, !exec_comm_recv(comm, 2, 6, buf, n - 1, "3 MiB back", &error));
        CHECK(comm, error && g_error_matches(error, EXEC_ERROR, EXEC_ERROR_COMM) &&
                        strstr(error->message, "has 3145728 bytes; expected 3145727"));
    } else if (rank == 2) {
        CHECK(comm, exec_comm_recv(comm, 0, 5, buf, n, "3 MiB", &error));
        gboolean same = TRUE;
        for (size_t i = 0; i < n; i++)
            same &= buf[i] == (guint8)(i * 7);
        CHECK(comm, same);
        CHECK(comm, exec_comm_send(comm, 0, 6, buf, n, "3 MiB back", &error));
    }
    g_clear_error(&error);
    g_free(buf);
}

/* Rank 0 waits for a message rank 1 never sends: the deadline names rank 1. */
static void test_deadline(ExecComm *comm) {
    GError *error = NULL;
    exec_comm_set_timeout(comm, 0.3);
    if (exec_comm_rank(comm) == 0) {
        int32_t x = 0;
        CHECK(comm, !exec_comm_recv(comm, 1, 9, &x, sizeof x, "the answer", &error));
        CHECK(comm, error && g_error_matches(error, EXEC_ERROR, EXEC_ERROR_COMM) &&
                        strstr(error->message, "the answer from rank 1 did not arrive within "
                                               "0.3 s (run.comm_timeout_s); rank 1 may have "
                                               "died or hung"));
        g_clear_error(&error);
    }
    exec_comm_set_timeout(comm, 30.0);
    CHECK(comm, exec_comm_agree(comm, "the end of the deadline test", &error));
}

/* A chain of waits: rank 1 waits for rank 0, which starts waiting 0.1 s later, for rank 2,
 * busy elsewhere (not waiting in the group) past the deadline. Rank 0 reports rank 2 after
 * the deadline and its probe (0.1 + 2 x 0.3 s) and then answers rank 1, which at its own
 * deadline (0.3 s) probed rank 0, found it waiting and kept waiting: rank 1 does not blame
 * rank 0. */
static void test_deadline_chain(ExecComm *comm) {
    GError *error = NULL;
    int32_t rank = exec_comm_rank(comm), x = 7;
    exec_comm_set_timeout(comm, 0.3);
    if (rank == 0) {
        g_usleep(100000);
        CHECK(comm, !exec_comm_recv(comm, 2, 10, &x, sizeof x, "rank 2's part", &error));
        CHECK(comm, error && strstr(error->message, "rank 2's part from rank 2 did not arrive "
                                                    "within 0.3 s (run.comm_timeout_s); rank 2"));
        g_clear_error(&error);
        CHECK(comm, exec_comm_send(comm, 1, 11, &x, sizeof x, "the relay", &error));
    } else if (rank == 1) {
        int64_t start = g_get_monotonic_time();
        CHECK(comm, exec_comm_recv(comm, 0, 11, &x, sizeof x, "the relay", &error));
        CHECK(comm, error == NULL && x == 7);
        /* It arrived after rank 1's own deadline: rank 1 waited on because rank 0 answered. */
        CHECK(comm, g_get_monotonic_time() - start > 300000);
        g_clear_error(&error);
    } else {
        g_usleep(1500000);
    }
    exec_comm_set_timeout(comm, 30.0);
    CHECK(comm, exec_comm_agree(comm, "the end of the chain test", &error));
}

/* The clock offset to rank 0: on one node every rank reads the same clock, so the true offset
 * (0) lies within the bound of the estimate (causality alone, whatever the timing). */
static void test_clock(ExecComm *comm) {
    int64_t offset = -1, bound = -1;
    GError *error = NULL;
    CHECK(comm, exec_comm_clock_offset(comm, &offset, &bound, &error));
    if (exec_comm_rank(comm) == 0)
        CHECK(comm, offset == 0 && bound == 0);
    else
        CHECK(comm, bound > 0 && offset <= bound && -offset <= bound);
}

/* --- the replay transport --- */

enum { RING_MESSAGES = 50 };

typedef struct {
    ExecComm    *comm;
    GAsyncQueue *inbox; /* GBytes */
    int32_t      rank, size, stop_after;
    gint         running;
    int32_t      received, reports;
    gboolean     stopped_seen;
} Ring;

static void ring_receive(gpointer user_data, int32_t src, int32_t tag, void *data, size_t bytes) {
    Ring *r = user_data;
    /* From the previous rank, tag = the message's number, which it holds. */
    CHECK(r->comm, src == (r->rank + r->size - 1) % r->size && bytes == sizeof(int32_t) &&
                       *(int32_t *)data == tag);
    g_async_queue_push(r->inbox, g_bytes_new_take(data, bytes));
}

static void ring_report(gpointer user_data, int32_t src, int32_t tag, void *data, size_t bytes) {
    Ring *r = user_data;
    CHECK(r->comm, r->rank == 0 && src == r->size - 1 && tag == 0 && bytes == 1);
    r->reports++;
    g_free(data);
}

static void ring_stop(gpointer user_data) {
    Ring *r = user_data;
    r->stopped_seen = TRUE;
    g_async_queue_push(r->inbox, g_bytes_new(NULL, 0));
}

/* Sends RING_MESSAGES numbered messages to the next rank and takes as many from the previous
 * one; the last rank also reports each to rank 0. With stop_after >= 0, rank 1 stops the
 * replay after that many. */
static gpointer ring_worker(gpointer user_data) {
    Ring *r = user_data;
    for (int32_t i = 0; i < RING_MESSAGES; i++) {
        if (r->rank == 1 && i == r->stop_after)
            exec_comm_stop(r->comm);
        int32_t *msg = g_new(int32_t, 1);
        *msg = i;
        exec_comm_post(r->comm, EXEC_COMM_DATA, (r->rank + 1) % r->size, i, msg, sizeof *msg);
        GBytes *in = g_async_queue_pop(r->inbox);
        gsize   n = g_bytes_get_size(in);
        g_bytes_unref(in);
        if (n == 0)
            break; /* stopped */
        r->received++;
        if (r->rank == r->size - 1)
            exec_comm_post(r->comm, EXEC_COMM_REPORT, 0, 0, g_malloc0(1), 1);
    }
    g_atomic_int_set(&r->running, 0);
    exec_comm_wake(r->comm);
    return NULL;
}

static void ring_run(ExecComm *comm, Ring *r, int32_t stop_after) {
    *r = (Ring){.comm = comm,
                .inbox = g_async_queue_new(),
                .rank = exec_comm_rank(comm),
                .size = exec_comm_size(comm),
                .stop_after = stop_after,
                .running = 1};
    exec_comm_set_receiver(comm, EXEC_COMM_DATA, ring_receive, r);
    exec_comm_set_receiver(comm, EXEC_COMM_REPORT, r->rank == 0 ? ring_report : NULL, r);
    exec_comm_set_stop_handler(comm, ring_stop, r);
    exec_comm_begin(comm, r->size - 1, r->rank == 0 && stop_after < 0 ? RING_MESSAGES : 0);
    GThread *worker = g_thread_new("ring", ring_worker, r);
    exec_comm_serve(comm, &r->running);
    g_thread_join(worker);
    exec_comm_set_receiver(comm, EXEC_COMM_DATA, NULL, NULL);
    exec_comm_set_receiver(comm, EXEC_COMM_REPORT, NULL, NULL);
    exec_comm_set_stop_handler(comm, NULL, NULL);
    g_async_queue_unref(r->inbox);
}

static void test_transport(ExecComm *comm) {
    Ring    r;
    GError *error = NULL;
    ring_run(comm, &r, -1);
    CHECK(comm, r.received == RING_MESSAGES && !r.stopped_seen && !exec_comm_stopped(comm));
    CHECK(comm, r.reports == (r.rank == 0 ? RING_MESSAGES : 0));
    CHECK(comm, exec_comm_agree(comm, "the ring", &error));
}

/* Rank 1 stops the ring after 10 messages: every rank sees the stop. (The messages left in
 * flight end the group's usefulness, as a failed replay ends a run: the last test.) */
static void test_stop(ExecComm *comm) {
    Ring r;
    ring_run(comm, &r, 10);
    CHECK(comm, r.stopped_seen && exec_comm_stopped(comm) && r.received <= RING_MESSAGES);
}

#if PP_HAVE_NCCL
static void test_nccl_id(ExecComm *comm) {
    ncclUniqueId id;
    GError      *error = NULL;
    memset(&id, exec_comm_rank(comm), sizeof id);
    CHECK(comm, exec_comm_nccl_unique_id(comm, &id, &error));
    GBytes    *mine = g_bytes_new(&id, sizeof id);
    GPtrArray *all = exec_comm_allgather(comm, mine, "the NCCL id", &error);
    for (guint r = 0; all && r < all->len; r++)
        CHECK(comm, g_bytes_equal(g_ptr_array_index(all, r), mine));
    g_ptr_array_unref(all);
    g_bytes_unref(mine);
}

/* How many distinct ids the ranks' stage groups received with @replicas replicas. */
static guint nccl_stage_ids(ExecComm *comm, int32_t replicas) {
    ncclUniqueId id;
    GError      *error = NULL;
    exec_comm_set_replicas(comm, replicas);
    CHECK(comm, exec_comm_nccl_stage_unique_id(comm, TRUE, &id, &error));
    GBytes    *mine = g_bytes_new(&id, sizeof id);
    GPtrArray *all = exec_comm_allgather(comm, mine, "the stage groups' NCCL ids", &error);
    guint      distinct = 0;
    for (guint r = 0; all && r < all->len; r++) {
        gboolean seen = FALSE;
        for (guint q = 0; q < r; q++)
            seen |= g_bytes_equal(g_ptr_array_index(all, q), g_ptr_array_index(all, r));
        distinct += !seen;
    }
    g_ptr_array_unref(all);
    g_bytes_unref(mine);
    exec_comm_set_replicas(comm, 1);
    return distinct;
}

static void test_nccl_stage_ids(ExecComm *comm) {
    CHECK(comm, nccl_stage_ids(comm, 1) == 3);
    CHECK(comm, nccl_stage_ids(comm, 3) == 1);
}
#endif

int main(int argc, char **argv) {
    ExecComm *comm = NULL;
    GError   *error = NULL;
    if (!exec_comm_mpi_new(&argc, &argv, EXEC_COMM_TIMEOUT_DEFAULT_S, &comm, &error) ||
        comm == NULL || exec_comm_size(comm) != 3) {
        fprintf(stderr, "test-exec-comm: run on 3 processes (scripts/mpirun-local -np 3): %s\n",
                error ? error->message : "no MPI launcher");
        return comm ? exec_comm_finish(comm, NULL) + 1 : 1;
    }
    exec_comm_set_timeout(comm, 30.0);
    test_agree(comm);
    test_collectives(comm);
    test_point_to_point(comm);
    test_deadline(comm);
    test_deadline_chain(comm);
    test_clock(comm);
    test_transport(comm);
#if PP_HAVE_NCCL
    test_nccl_id(comm);
    test_nccl_stage_ids(comm);
#endif
    test_stop(comm);
    GError *status = failures ? g_error_new(TEST_DOMAIN, 1, "%d checks failed", failures) : NULL;
    exec_comm_agree(comm, "the end of the tests", &status);
    int32_t rank = exec_comm_rank(comm);
    int     code = exec_comm_finish(comm, status);
    if (rank == 0 && status == NULL)
        printf("test-exec-comm: all checks passed\n");
    g_clear_error(&status);
    return code;
}
