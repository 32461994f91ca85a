/* SPDX-License-Identifier: MIT
 * exec-cpu-private.h: the CPU backend's context, shared by its replay side (exec-cpu.c: ops,
 * stashes, the speed reference) and its state side (exec-cpu-state.c: by-name tensor copies,
 * optimizer step counts, evaluation). Workers, messages, reports and activation slots are the
 * skeleton's (exec-skeleton.h). One process holds every stage, or (with a process group,
 * exec-comm.h) the one stage of its rank. Internal to libppexec.
 */
#pragma once

#include "exec-skeleton.h"

G_BEGIN_DECLS

typedef struct {
    Gpt2Slice *slice;    /* NULL when another process holds the virtual stage */
    KernOptim *optim;    /* NULL likewise */
    float    **stash;    /* (stashes.n) stashed weight copies of a local virtual stage, allocated
                            with it (stash_floats each); the skeleton's ExecStashes says which
                            version each holds */
    size_t stash_floats; /* the slice's n_params; 0 for another process's virtual stage */
} ExecCpuVstage;

/* The speed reference: C = A @ B of these sizes, 134 MFLOP (about 1.5 ms on one core of the
 * development machine). A few MB, so that it sees the core and its caches rather than
 * memory bandwidth shared with the other stages. */
enum { EXEC_CPU_REF_M = 256, EXEC_CPU_REF_N = 512, EXEC_CPU_REF_K = 512 };

typedef struct {
    float *reference; /* the speed reference's operands, allocated on first use:
                         A (EXEC_CPU_REF_M, EXEC_CPU_REF_K), B (EXEC_CPU_REF_K,
                         EXEC_CPU_REF_N), C (EXEC_CPU_REF_M, EXEC_CPU_REF_N) */
} ExecCpuStage;

typedef struct {
    ExecSkeleton   skel;    /* first: workers, messages, reports, slots */
    ExecCpuVstage *vstages; /* (n_vstages) */
    ExecCpuStage  *stages;  /* (n_stages) */
    float         *eval[2]; /* (B, T, C) each: evaluate()'s activations between local virtual
                               stages, allocated at its first call */
} ExecCpuBackend;

static inline ExecCpuBackend *exec_cpu(ExecBackend *backend) {
    return (ExecCpuBackend *)backend;
}

/* --- exec-cpu-state.c --- */

/* The state primitives the skeleton's state members use. */
extern const ExecSkeletonStateOps exec_cpu_state_ops;
/* evaluate() (exec-backend-impl.h documents it). */
gboolean exec_cpu_evaluate(ExecBackend *backend, const int32_t *tokens, const int32_t *targets,
                           float *loss, GError **error);

/* --- data parallelism (exec-cpu-grads.c) --- */

float *exec_cpu_grads(ExecBackend *backend, int32_t vstage, size_t *n);
float *exec_cpu_params(ExecBackend *backend, int32_t vstage, size_t *n);

/* --- memory (exec-cpu-memory.c) --- */

/* memory() (exec-backend-impl.h): local @stage's bytes by category. */
void exec_cpu_memory(ExecBackend *backend, int32_t stage, ExecMemoryBytes *bytes);

G_END_DECLS
