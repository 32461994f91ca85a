/* SPDX-License-Identifier: MIT
 * kern-pool.c: per-calling-thread teams of helper threads and per-thread scratch buffers
 * (kern-pool.h). Helpers spin briefly between jobs (kernels call in bursts of many short jobs),
 * then sleep on a condition variable. Tasks are handed out by an atomic counter.
 */
#include "kern-pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kern-check.h"
#include "kern-util.h"

/* Polls of a spinning thread before it sleeps (about 50 microseconds: a pause takes 10-20 ns). */
#define KERN_POOL_SPINS 3000
/* Chunks kern_parallel_range() makes per worker. */
#define KERN_POOL_CHUNKS_PER_WORKER 4

typedef struct _KernTeam KernTeam;

typedef struct {
    KernTeam *team;
    pthread_t thread;
} KernHelper;

struct _KernTeam {
    int             n_helpers;
    KernHelper     *helpers; /* (n_helpers) */
    pthread_mutex_t mu;
    pthread_cond_t  wake; /* helpers: gen changed or quit */
    pthread_cond_t  done; /* caller: pending reached 0 */
    atomic_uint     gen;  /* job number, bumped under mu */
    atomic_int      quit;
    /* the current job, written before gen is bumped */
    KernTaskFn fn;
    void      *arg;
    int        n_tasks;
    atomic_int next;    /* next task to hand out */
    atomic_int pending; /* helpers not yet done with the job */
};

/* Everything a thread owns; freed by the key's destructor when the thread exits. */
typedef struct {
    KernTeam *team;    /* nullable: built on the first parallel call */
    int       in_task; /* 1 while running tasks (helpers: always) */
    float    *scratch[KERN_SCRATCH_SLOTS];
    size_t    scratch_floats[KERN_SCRATCH_SLOTS];
} KernThreadState;

static atomic_int     kern_threads = 1;
static pthread_key_t  kern_state_key;
static pthread_once_t kern_state_once = PTHREAD_ONCE_INIT;

static inline void kern_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* --- teams --- */

static void kern_team_run_tasks(KernTeam *t) {
    int i;
    while ((i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed)) < t->n_tasks)
        t->fn(t->arg, i);
}

static KernThreadState *kern_state(void);

static void *kern_helper_main(void *p) {
    KernHelper *h = p;
    KernTeam   *t = h->team;
    kern_state()->in_task = 1; /* a kernel called from a task runs on this thread alone */
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int      spins = 0;
        while ((g = atomic_load_explicit(&t->gen, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&t->quit, memory_order_acquire)) {
            if (++spins < KERN_POOL_SPINS) {
                kern_cpu_relax();
                continue;
            }
            pthread_mutex_lock(&t->mu);
            while (atomic_load(&t->gen) == seen && !atomic_load(&t->quit))
                pthread_cond_wait(&t->wake, &t->mu);
            pthread_mutex_unlock(&t->mu);
        }
        if (atomic_load_explicit(&t->quit, memory_order_acquire))
            return NULL;
        seen = g;
        kern_team_run_tasks(t);
        if (atomic_fetch_sub_explicit(&t->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&t->mu);
            pthread_cond_signal(&t->done);
            pthread_mutex_unlock(&t->mu);
        }
    }
}

static KernTeam *kern_team_new(int n_helpers) {
    KernTeam *t = kern_xcalloc(1, sizeof *t);
    t->n_helpers = n_helpers;
    t->helpers = kern_xcalloc((size_t)n_helpers, sizeof *t->helpers);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->wake, NULL);
    pthread_cond_init(&t->done, NULL);
    for (int i = 0; i < n_helpers; i++) {
        t->helpers[i].team = t;
        int rc = pthread_create(&t->helpers[i].thread, NULL, kern_helper_main, &t->helpers[i]);
        if (rc != 0) {
            fprintf(stderr, "kern_pool: cannot start a helper thread: %s\n", strerror(rc));
            abort();
        }
    }
    return t;
}

static void kern_team_free(KernTeam *t) {
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->quit, 1);
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->mu);
    for (int i = 0; i < t->n_helpers; i++)
        pthread_join(t->helpers[i].thread, NULL);
    pthread_cond_destroy(&t->done);
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->mu);
    free(t->helpers);
    free(t);
}

/* --- per-thread state --- */

static void kern_state_free(void *p) {
    KernThreadState *st = p;
    kern_team_free(st->team);
    for (int i = 0; i < KERN_SCRATCH_SLOTS; i++)
        free(st->scratch[i]);
    free(st);
}

/* In a child of fork() only the forking thread exists: its team's helpers are gone, so the
 * team is dropped (not freed: its mutex may be held by a vanished thread) and rebuilt. */
static void kern_state_after_fork(void) {
    KernThreadState *st = pthread_getspecific(kern_state_key);
    if (st)
        st->team = NULL;
}

static void kern_state_init_once(void) {
    KERN_ASSERT(pthread_key_create(&kern_state_key, kern_state_free) == 0);
    KERN_ASSERT(pthread_atfork(NULL, NULL, kern_state_after_fork) == 0);
}

static KernThreadState *kern_state(void) {
    pthread_once(&kern_state_once, kern_state_init_once);
    KernThreadState *st = pthread_getspecific(kern_state_key);
    if (!st) {
        st = kern_xcalloc(1, sizeof *st);
        KERN_ASSERT(pthread_setspecific(kern_state_key, st) == 0);
    }
    return st;
}

/* --- public API --- */

void kern_set_threads(int n) {
    KERN_ASSERT(n >= 1);
    atomic_store(&kern_threads, n);
}

int kern_get_threads(void) {
    return atomic_load(&kern_threads);
}

int kern_pool_workers(void) {
    return kern_state()->in_task ? 1 : kern_get_threads();
}

void kern_parallel_for(int n_tasks, KernTaskFn fn, void *arg) {
    KernThreadState *st = kern_state();
    int              n_threads = st->in_task ? 1 : kern_get_threads();
    if (n_tasks <= 1 || n_threads <= 1) {
        int outer = st->in_task;
        st->in_task = 1;
        for (int i = 0; i < n_tasks; i++)
            fn(arg, i);
        st->in_task = outer;
        return;
    }
    if (st->team && st->team->n_helpers != n_threads - 1) {
        kern_team_free(st->team);
        st->team = NULL;
    }
    if (!st->team)
        st->team = kern_team_new(n_threads - 1);
    KernTeam *t = st->team;

    t->fn = fn;
    t->arg = arg;
    t->n_tasks = n_tasks;
    atomic_store_explicit(&t->next, 0, memory_order_relaxed);
    atomic_store_explicit(&t->pending, t->n_helpers, memory_order_relaxed);
    pthread_mutex_lock(&t->mu);
    atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->mu);

    st->in_task = 1;
    kern_team_run_tasks(t);
    st->in_task = 0;

    for (int spins = 0; atomic_load_explicit(&t->pending, memory_order_acquire) > 0; spins++) {
        if (spins < KERN_POOL_SPINS) {
            kern_cpu_relax();
            continue;
        }
        pthread_mutex_lock(&t->mu);
        while (atomic_load(&t->pending) > 0)
            pthread_cond_wait(&t->done, &t->mu);
        pthread_mutex_unlock(&t->mu);
    }
}

typedef struct {
    size_t      n, n_chunks;
    KernRangeFn fn;
    void       *arg;
} KernRange;

static void kern_range_task(void *arg, int task) {
    const KernRange *r = arg;
    size_t           begin = r->n * (size_t)task / r->n_chunks;
    size_t           end = r->n * (size_t)(task + 1) / r->n_chunks;
    r->fn(r->arg, begin, end);
}

void kern_parallel_range(size_t n, size_t grain, KernRangeFn fn, void *arg) {
    KERN_ASSERT(grain >= 1);
    if (n == 0)
        return;
    /* a few chunks per worker, so a thread slowed by the machine's other load gets fewer */
    size_t    n_chunks = (size_t)KERN_POOL_CHUNKS_PER_WORKER * (size_t)kern_pool_workers();
    size_t    max_chunks = n / grain > 0 ? n / grain : 1;
    KernRange r = {
        .n = n, .n_chunks = n_chunks < max_chunks ? n_chunks : max_chunks, .fn = fn, .arg = arg};
    kern_parallel_for((int)r.n_chunks, kern_range_task, &r);
}

float *kern_thread_scratch(int slot, size_t n_floats) {
    KERN_ASSERT(slot >= 0 && slot < KERN_SCRATCH_SLOTS);
    KernThreadState *st = kern_state();
    if (st->scratch_floats[slot] < n_floats) {
        free(st->scratch[slot]);
        size_t bytes = (n_floats * sizeof(float) + 63) & ~(size_t)63;
        st->scratch[slot] = aligned_alloc(64, bytes);
        if (!st->scratch[slot]) {
            fprintf(stderr, "kern_thread_scratch: out of memory allocating %zu bytes\n", bytes);
            abort();
        }
        st->scratch_floats[slot] = n_floats;
    }
    return st->scratch[slot];
}
