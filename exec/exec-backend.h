/* SPDX-License-Identifier: MIT
 * exec-backend.h: the vtable the replay loop (exec.c) drives (docs/style.md §5.4). A backend
 * owns the model state of every virtual stage (weights, stashed versions, gradients,
 * optimizer, activation slots), the workers (one per pipeline stage) and the transport that
 * carries activations and gradients between them. exec.c decides what each op does
 * (weight version, loss scale, learning rate); the backend does the math and the messaging.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "gpt2-slice.h"
#include "optim-cpu.h"
#include "pp-partition.h"
#include "pp-schedule.h"

G_BEGIN_DECLS

/* Fills the tokens and targets of global micro-batch @mb: a pure function of (@mb, the
 * source's seed), so runs are deterministic and resumable. Called from worker threads
 * concurrently; must be thread-safe.
 *   @tokens  (B, T) ids in [0, V)
 *   @targets (B, T) ids in [0, V): the next token of each position */
typedef void (*ExecDataFn)(gpointer user_data, int64_t mb, int32_t *tokens, int32_t *targets);

/* Observer of a stage's accumulated gradients at a U, before clipping (tests gather them by
 * tensor name; logging may compute statistics). Called from the stage's worker thread.
 *   @grads (gpt2_slice_n_params(slice)) */
typedef void (*ExecGradFn)(gpointer user_data, int32_t vstage, const Gpt2Slice *slice,
                           const float *grads);

/* Everything a backend needs to build the model state; copied by the constructor except the
 * borrowed pointers. */
typedef struct {
    Gpt2Config         model;
    int32_t            microbatch_size; /* B */
    int32_t            n_stages;
    int32_t            n_chunks;
    const int32_t     *vstage_stage;    /* (n_vstages) borrowed for the call */
    const int32_t     *act_slots;       /* (n_vstages) activation slots per virtual stage */
    const int32_t     *weight_versions; /* (n_stages) stashed copies kept at most (0: none) */
    const PpPartition *partition;       /* borrowed for the call */
    uint64_t           seed;            /* parameter init */
    KernOptimParams    optim;
    ExecDataFn         data;
    gpointer           data_user;
    ExecGradFn         on_grads; /* (nullable) */
    gpointer           on_grads_user;
} ExecBackendSetup;

/* What the replay loop asks of one op. */
typedef struct {
    const PpOp *op;
    int32_t     vstage;    /* F/B/W/BW: virtual stage; -1 for U */
    int64_t     global_mb; /* F/B/W/BW: micro-batch index over the whole run (data position) */
    int32_t     version;   /* F/B/W/BW: absolute weight version the op computes with */
    gboolean    stash;     /* F: keep a copy of the current weights (version @version) for
                              the micro-batch's backward; B/BW: compute with that copy and
                              release it (PipeDream, 2BW weight stashing) */
    float    loss_scale;   /* B/BW on the last virtual stage: the micro-batch's share */
    float    lr;           /* U: learning rate */
    float    grad_clip;    /* U: per-stage L2 clipping threshold, 0 = off */
    gboolean poison;       /* U: test hook, treat the gradients as non-finite */
} ExecOpArgs;

/* What one op reports back. */
typedef struct {
    float    loss;      /* F on the last virtual stage: mean cross-entropy (nats) */
    double   grad_norm; /* U: L2 norm of the stage's gradients before clipping */
    gboolean applied;   /* U: FALSE when the gradients were not finite and the update was
                           skipped (gradients discarded) */
} ExecOpResult;

typedef struct _ExecBackend    ExecBackend;
typedef struct _ExecBackendOps ExecBackendOps;

/* Runs the replay of one pipeline stage; the backend calls it on that stage's worker. */
typedef void (*ExecWorkerFn)(gpointer user_data, int32_t stage);

struct _ExecBackendOps {
    const char *name;
    /* Checks that @sched fits the model state (stage/chunk counts, activation slots) and
     * resets the transport for a new replay; @sched is NULL in dynamic mode (nothing to
     * check). Returns FALSE and sets @error (EXEC_ERROR_SHAPE, exec.h) otherwise. */
    gboolean (*prepare)(ExecBackend *backend, const PpSchedule *sched, GError **error);
    /* Runs @worker(@user_data, stage) once for every stage, concurrently, and returns when all
     * have returned. */
    void (*launch)(ExecBackend *backend, ExecWorkerFn worker, gpointer user_data);
    /* Blocks the calling worker until the input message of @args->op is there (activation for
     * F on a vstage > 0, gradient for B/BW below the last vstage; other ops return at once).
     * Returns FALSE when the run was aborted. */
    gboolean (*wait_for)(ExecBackend *backend, const ExecOpArgs *args);
    /* Dynamic mode: moves the messages that reached @stage into its pending set; with @block,
     * first waits until at least one arrives. Returns FALSE when the run was aborted. */
    gboolean (*poll)(ExecBackend *backend, int32_t stage, gboolean block);
    /* Dynamic mode: whether the input message of @args->op is pending (after poll()); TRUE
     * for ops that need none. */
    gboolean (*has_input)(ExecBackend *backend, const ExecOpArgs *args);
    /* Runs the op on the calling worker. */
    void (*run_op)(ExecBackend *backend, const ExecOpArgs *args, ExecOpResult *result);
    /* Sends the op's output (activation of F, input gradient of B/BW) to the worker of the
     * consuming virtual stage. */
    void (*record_done)(ExecBackend *backend, const ExecOpArgs *args);
    /* Wakes every waiting worker: their wait_for() returns FALSE from now on until the next
     * prepare(). */
    void (*abort)(ExecBackend *backend);
    /* Returns: (transfer none): the model slice of @vstage (CPU state; checkpoints, tests). */
    Gpt2Slice *(*slice)(ExecBackend *backend, int32_t vstage);
    /* Returns: (transfer none): the optimizer of @vstage. */
    KernOptim *(*optim)(ExecBackend *backend, int32_t vstage);
    void (*free)(ExecBackend *backend);
};

/* Base of every backend; a backend's context struct starts with it. */
struct _ExecBackend {
    const ExecBackendOps *ops;
};

/* --- backends --- */

/* The CPU backend: one GThread per stage, GAsyncQueue inboxes, Gpt2Slice + KernOptim per
 * virtual stage (exec-cpu.c). Returns: (transfer full). */
ExecBackend *exec_backend_cpu_new(const ExecBackendSetup *setup);

void exec_backend_free(ExecBackend *backend);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecBackend, exec_backend_free)

G_END_DECLS
