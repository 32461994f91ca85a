/* SPDX-License-Identifier: MIT
 * kern-pool.h: the CPU kernels' worker threads. Each thread that calls a kernel gets its own
 * team of kern_threads() - 1 helper threads (created on its first parallel call, joined when it
 * exits), so pipeline stages running on separate threads never share or wait for a team. Work
 * is split into independent tasks that write disjoint outputs; which thread runs a task never
 * changes what it computes, so results do not depend on the thread count.
 */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Threads each kernel call may use (the caller included), process-wide; @n >= 1. Teams built
 * earlier are resized on their next parallel call. Default 1. */
void kern_set_threads(int n);
int  kern_get_threads(void);

/* One task, @task in [0, n_tasks). Per-thread memory comes from kern_thread_scratch(). */
typedef void (*KernTaskFn)(void *arg, int task);

/* Runs fn(arg, task) for every task in [0, @n_tasks) on the calling thread and its
 * helpers, each task exactly once, in no fixed order, and returns when all are done. Called
 * from inside a task (a nested call), it runs every task on the current thread. */
void kern_parallel_for(int n_tasks, KernTaskFn fn, void *arg);

/* One chunk [begin, end) of a range. */
typedef void (*KernRangeFn)(void *arg, size_t begin, size_t end);

/* Splits [0, @n) into contiguous chunks of at least @grain items (the last may be shorter), a
 * few per worker, and runs fn(arg, begin, end) on each as kern_parallel_for() does. For loops
 * whose items are independent: the chunking depends on the thread count. */
void kern_parallel_range(size_t n, size_t grain, KernRangeFn fn, void *arg);

/* Number of workers kern_parallel_for() would use now from this thread (1 inside a task). */
int kern_pool_workers(void);

/* A 64-byte aligned buffer of at least @n_floats floats owned by the calling thread, one per
 * @slot; grown on demand (contents then lost), freed when the thread exits. Each slot has one
 * user, so buffers in use never alias.
 * Returns: (transfer none). */
enum {
    KERN_SCRATCH_ATTENTION, /* gpt2-cpu-attn.c: one head's score gradients */
    KERN_SCRATCH_SUMS,      /* the calling thread's partial sums: per-row losses
                               (gpt2-cpu-loss.c), per-chunk squares (optim-cpu.c) */
    KERN_SCRATCH_SLOTS
};
float *kern_thread_scratch(int slot, size_t n_floats);

#ifdef __cplusplus
}
#endif
