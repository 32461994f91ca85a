/* SPDX-License-Identifier: MIT
 * bench-reduce.c: pacer-bench-reduce, the time of pacer-train's gradient reduction on the CPU
 * (exec-reduce.h: the reduce-scatter, the sum in replica order and the all-gather, with every
 * copy they make) among D processes, each the replica of one stage, for flat fp32 arrays of
 * 1 MiB to 256 MiB. Each size runs its reductions back to back on a worker thread per rank
 * while the host thread serves the group, as a stage's U does; time = the median over the
 * reductions on rank 0. Prints the array's bytes, the time, and nccl-tests' two bandwidths,
 * algbw = bytes / time and busbw = algbw x 2 (D - 1) / D; ends with the least-squares line
 * t(S) = a + S x 2 (D - 1) / (D x busbw) over the sizes, the simulator's
 * hardware.allreduce_busbw_gbps (docs/cluster.md), which charges the reduction's copies and sum
 * that the link alone (pacer-bench-comm) does not.
 *   scripts/mpirun-local -np 2 build/exec/pacer-bench-reduce [max MiB (256)]
 */
#include <stdio.h>
#include <stdlib.h>

#include "exec-comm-mpi.h"
#include "exec-reduce.h"

#define BENCH_REDUCE_MIN_BYTES ((size_t)1 << 20)

/* Reductions per size: about 1 GiB reduced, at least 5, at most 100. */
static int bench_reduce_reps(size_t bytes) {
    size_t reps = ((size_t)1 << 30) / bytes;
    return (int)(reps < 5 ? 5 : reps > 100 ? 100 : reps);
}

static int bench_reduce_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One size: a worker per rank reducing @n floats @reps times after two warm-ups. */
typedef struct {
    ExecComm   *comm;
    ExecReduce *reduce;
    size_t      n;
    int         reps;
    double     *t; /* (reps) seconds per reduction */
    gint        running;
} BenchReduce;

static gpointer bench_reduce_worker(gpointer user_data) {
    BenchReduce *b = user_data;
    float       *grads = g_new(float, b->n); /* (n) the flat array, reduced in place */
    for (size_t i = 0; i < b->n; i++)
        grads[i] = (float)(i % 1024) * 0.001f;
    gboolean ok = TRUE;
    for (int i = -2; i < b->reps && ok; i++) {
        ExecReducePiece piece = {.update = i + 2, .n = b->n, .begin = 0, .end = b->n};
        gint64          t0 = g_get_monotonic_time();
        ok = exec_reduce_scatter(b->reduce, &piece, grads) &&
             exec_reduce_gather(b->reduce, &piece, grads, "the reduced gradients");
        if (i >= 0)
            b->t[i] = 1e-6 * (double)(g_get_monotonic_time() - t0);
    }
    g_free(grads);
    g_atomic_int_set(&b->running, 0);
    exec_comm_wake(b->comm);
    return NULL;
}

/* Runs one size; returns the median seconds, or a negative value with *@error set when a
 * reduction failed on any rank (every rank agrees on it). */
static double bench_reduce_size(ExecComm *comm, ExecReduce *reduce, size_t bytes, GError **error) {
    BenchReduce b = {.comm = comm,
                     .reduce = reduce,
                     .n = bytes / sizeof(float),
                     .reps = bench_reduce_reps(bytes),
                     .running = 1};
    b.t = g_new(double, b.reps);
    exec_reduce_reset(reduce);
    exec_comm_begin(comm, 0, 0);
    GThread *worker = g_thread_new("bench-reduce", bench_reduce_worker, &b);
    exec_comm_serve(comm, &b.running);
    g_thread_join(worker);
    double median = -1.0;
    if (exec_comm_agree(comm, "a gradient reduction", error)) {
        qsort(b.t, (size_t)b.reps, sizeof *b.t, bench_reduce_cmp);
        median = b.reps % 2 ? b.t[b.reps / 2] : 0.5 * (b.t[b.reps / 2 - 1] + b.t[b.reps / 2]);
    }
    g_free(b.t);
    return median;
}

int main(int argc, char **argv) {
    ExecComm *comm = NULL;
    GError   *error = NULL;
    if (!exec_comm_mpi_new(&argc, &argv, EXEC_COMM_TIMEOUT_DEFAULT_S, &comm, &error) ||
        comm == NULL) {
        fprintf(stderr, "pacer-bench-reduce: %s\n",
                error ? error->message
                      : "run on two processes or more: scripts/mpirun-local -np 2 "
                        "pacer-bench-reduce");
        return 1;
    }
    int32_t d = exec_comm_size(comm);
    long    max_mib = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
    if (max_mib < 1 || max_mib > 4096) {
        if (exec_comm_rank(comm) == 0)
            fprintf(stderr, "pacer-bench-reduce: the largest array is 1 to 4096 MiB, not %s\n",
                    argv[1]);
        return exec_comm_finish(comm, NULL) + 1;
    }
    exec_comm_set_replicas(comm, d); /* D replicas of one stage */
    const ExecParallel parallel = {.replicas = d, .replica = exec_comm_replica(comm), .shards = 1};
    ExecReduce        *reduce = exec_reduce_new(comm, &parallel, 1, 1);
    gboolean           rank0 = exec_comm_rank(comm) == 0;
    double             share = 2.0 * (d - 1) / d; /* busbw / algbw */
    if (rank0)
        printf("%d replicas\n%12s %6s %12s %10s %10s\n", d, "bytes", "reps", "time ms",
               "algbw GB/s", "busbw GB/s");
    /* Least squares of t on S over the sizes (the large ones fix the slope). */
    double   s1 = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    gboolean ok = TRUE;
    for (size_t bytes = BENCH_REDUCE_MIN_BYTES; ok && bytes <= (size_t)max_mib << 20; bytes *= 4) {
        double t = bench_reduce_size(comm, reduce, bytes, &error);
        ok = error == NULL;
        if (!ok || !rank0)
            continue;
        double x = (double)bytes, algbw = x / t / 1e9;
        printf("%12zu %6d %12.3f %10.3f %10.3f\n", bytes, bench_reduce_reps(bytes), t * 1e3, algbw,
               algbw * share);
        s1 += 1;
        sx += x;
        sy += t;
        sxx += x * x;
        sxy += x * t;
    }
    if (ok && rank0 && s1 >= 2) {
        double slope = (s1 * sxy - sx * sy) / (s1 * sxx - sx * sx);
        double a = (sy - slope * sx) / s1;
        printf("fit t(S) = a + S x 2(D-1)/(D busbw): a = %.1f us, "
               "hardware.allreduce_busbw_gbps = %.3f\n",
               a * 1e6, share / slope / 1e9);
    } else if (ok && rank0) {
        printf("one size: no fit (the largest array must be 4 MiB or more)\n");
    }
    exec_reduce_free(reduce);
    if (error != NULL && rank0)
        fprintf(stderr, "pacer-bench-reduce: %s\n", error->message);
    int status = exec_comm_finish(comm, error);
    g_clear_error(&error);
    return status;
}
