/* SPDX-License-Identifier: MIT
 * bench-comm.c: pacer-bench-comm, the cost of one message between two processes for
 * messages of 1 KiB to 64 MiB (one activation, B x T x C floats, is one of them: train-tiny's
 * is 64 KiB): MPI's blocking send and receive alone, and pacer's replay transport
 * (exec-comm.h: a worker posts, the host thread serves, the peer's host files the message
 * into a queue its worker waits on). Ping-pong on two ranks; one-way time = median round
 * trip / 2, bandwidth = bytes / one-way time. Ends with the least-squares line
 * t(n) = latency + n / bandwidth of the transport, the simulator's [hardware]
 * link_latency_us and link_gbps for pacer-sim replay --link.
 *   scripts/mpirun-local -np 2 build/exec/pacer-bench-comm [max MiB (64)]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec-comm-mpi.h"

/* Round trips per size: about 64 MiB moved each way, at least 5, at most 400. */
static int bench_reps(size_t bytes) {
    size_t reps = ((size_t)64 << 20) / bytes;
    return (int)(reps < 5 ? 5 : reps > 400 ? 400 : reps);
}

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of @n one-way times (seconds): sorts @t. */
static double bench_median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* MPI_Send / MPI_Recv ping-pong of @bytes: the median one-way time in seconds (rank 0). */
static double bench_mpi(int rank, size_t bytes, int reps) {
    void    *buf = g_malloc0(bytes);
    double  *t = g_new(double, reps);
    MPI_Comm world = MPI_COMM_WORLD;
    for (int i = -2; i < reps; i++) { /* two warm-up round trips */
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 0, world);
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 0, world, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 0, world, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 0, world);
        }
        if (i >= 0)
            t[i] = 0.5 * (MPI_Wtime() - t0);
    }
    double median = bench_median(t, reps);
    g_free(t);
    g_free(buf);
    return median;
}

/* The transport's ping-pong: a worker thread on each rank, the host serving the group. */
typedef struct {
    ExecComm    *comm;
    GAsyncQueue *inbox; /* GBytes of arrived messages */
    int          rank, reps;
    size_t       bytes;
    double      *t; /* (reps) one-way seconds, rank 0 */
    gint         running;
} BenchPingPong;

static void bench_receive(gpointer user_data, int32_t src, int32_t tag, void *data, size_t bytes) {
    BenchPingPong *p = user_data;
    (void)src;
    (void)tag;
    g_async_queue_push(p->inbox, g_bytes_new_take(data, bytes));
}

static gpointer bench_worker(gpointer user_data) {
    BenchPingPong *p = user_data;
    void          *msg = g_malloc0(p->bytes);
    for (int i = -2; i < p->reps; i++) {
        gint64 t0 = g_get_monotonic_time();
        if (p->rank == 0)
            exec_comm_post(p->comm, EXEC_COMM_DATA, 1, 0, msg, p->bytes);
        gsize size = 0;
        msg = g_bytes_unref_to_data(g_async_queue_pop(p->inbox), &size);
        if (p->rank == 1)
            exec_comm_post(p->comm, EXEC_COMM_DATA, 0, 0, msg, p->bytes);
        else if (i >= 0)
            p->t[i] = 0.5e-6 * (double)(g_get_monotonic_time() - t0);
    }
    if (p->rank == 0)
        g_free(msg);
    g_atomic_int_set(&p->running, 0);
    exec_comm_wake(p->comm);
    return NULL;
}

static double bench_transport(ExecComm *comm, int rank, size_t bytes, int reps) {
    BenchPingPong p = {.comm = comm,
                       .inbox = g_async_queue_new(),
                       .rank = rank,
                       .reps = reps,
                       .bytes = bytes,
                       .t = g_new(double, reps),
                       .running = 1};
    exec_comm_set_receiver(comm, EXEC_COMM_DATA, bench_receive, &p);
    exec_comm_begin(comm, 0, 0);
    GThread *worker = g_thread_new("bench-worker", bench_worker, &p);
    exec_comm_serve(comm, &p.running);
    g_thread_join(worker);
    exec_comm_set_receiver(comm, EXEC_COMM_DATA, NULL, NULL);
    double median = rank == 0 ? bench_median(p.t, reps) : 0.0;
    g_free(p.t);
    g_async_queue_unref(p.inbox);
    return median;
}

int main(int argc, char **argv) {
    ExecComm *comm = NULL;
    GError   *error = NULL;
    if (!exec_comm_mpi_new(&argc, &argv, EXEC_COMM_TIMEOUT_DEFAULT_S, &comm, &error) ||
        comm == NULL || exec_comm_size(comm) != 2) {
        fprintf(stderr, "pacer-bench-comm: %s\n",
                error ? error->message
                      : "run on two processes: scripts/mpirun-local -np 2 pacer-bench-comm");
        return comm ? exec_comm_finish(comm, NULL) + 1 : 1;
    }
    int rank = exec_comm_rank(comm);
    int max_mib = argc > 1 ? atoi(argv[1]) : 64;
    if (max_mib < 1)
        max_mib = 64;
    if (rank == 0)
        printf("%10s %6s %14s %10s %14s %10s\n", "bytes", "reps", "mpi one-way us", "mpi GB/s",
               "pacer one-way us", "pacer GB/s");
    /* Weighted least squares with weights 1 / t^2: relative errors, so that the small
     * messages fix the latency and the large ones the bandwidth. */
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t bytes = 1024; bytes <= (size_t)max_mib << 20; bytes *= 4) {
        int    reps = bench_reps(bytes);
        double mpi = bench_mpi(rank, bytes, reps);
        double pacer = bench_transport(comm, rank, bytes, reps);
        if (rank != 0)
            continue;
        printf("%10zu %6d %14.1f %10.3f %16.1f %10.3f\n", bytes, reps, mpi * 1e6,
               (double)bytes / mpi / 1e9, pacer * 1e6, (double)bytes / pacer / 1e9);
        double w = 1.0 / (pacer * pacer), x = (double)bytes;
        sw += w;
        sx += w * x;
        sy += w * pacer;
        sxx += w * x * x;
        sxy += w * x * pacer;
    }
    if (rank == 0) {
        double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
        double latency = (sy - slope * sx) / sw;
        printf("fit of the pacer transport, t(n) = latency + n / bandwidth: "
               "hardware.link_latency_us = %.1f, hardware.link_gbps = %.3f\n",
               latency * 1e6, 1.0 / slope / 1e9);
    }
    return exec_comm_finish(comm, NULL);
}
