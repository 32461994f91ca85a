/* SPDX-License-Identifier: MIT
 * exec-cpu-private.h: the CPU backend's context, shared by its replay side (exec-cpu.c:
 * workers, messages, ops, reports) and its state side (exec-cpu-state.c: by-name tensor
 * copies, optimizer step counts, evaluation). One process holds every stage, or (with a
 * process group, exec-comm.h) the one stage of its rank. Internal to libppexec.
 */
#pragma once

#include "exec-backend.h"
#include "exec-comm.h"
#include "exec-slots.h"
#include "exec-transport.h"

G_BEGIN_DECLS

/* A stashed weight copy (PipeDream, 2BW) and the micro-batches still needing it. */
typedef struct {
    int32_t version;
    int32_t refs;
    float  *params; /* (n_params) */
} ExecStash;

typedef struct {
    Gpt2Slice      *slice;  /* NULL when another process holds the virtual stage */
    KernOptim      *optim;  /* NULL likewise */
    ExecRemoteTable remote; /* the table when slice is NULL */
    int32_t         stage;
    ExecSlots       slots;   /* which micro-batch holds each activation slot */
    GPtrArray      *stashes; /* ExecStash*, at most the stage's weight versions */
} ExecCpuVstage;

/* The speed reference: C = A @ B of these sizes, 134 MFLOP (about 1.5 ms on one core of the
 * development machine). A few MB, so that it sees the core and its caches rather than
 * memory bandwidth shared with the other stages. */
enum { EXEC_CPU_REF_M = 256, EXEC_CPU_REF_N = 512, EXEC_CPU_REF_K = 512 };

typedef struct {
    ExecTransportMsg *input;      /* taken by wait_for(), released by run_op() */
    const float      *input_data; /* (B, T, C) the input's buffer */
    ExecTransportMsg *output;     /* taken by run_op(), sent by record_done() */
    int32_t          *tokens;     /* (B, T) */
    int32_t          *targets;    /* (B, T) */
    GArray           *reports;    /* ExecOpReport of the ops run since the last flush */
    GArray           *flushed;    /* ExecOpReport handed out by the last flush */
    float            *reference;  /* the speed reference's operands, allocated on first use:
                                     A (EXEC_CPU_REF_M, EXEC_CPU_REF_K), B (EXEC_CPU_REF_K,
                                     EXEC_CPU_REF_N), C (EXEC_CPU_REF_M, EXEC_CPU_REF_N) */
    float *tap;                   /* (tap_floats) gradient tap copies; NULL without a tap */
    size_t tap_floats;            /* largest tensor numel of the stage's virtual stages */
} ExecCpuStage;

typedef struct {
    ExecBackend    base;
    Gpt2Config     model;
    int32_t        B;
    int32_t        n_stages, n_chunks, n_vstages;
    int32_t       *vstage_stage;    /* (n_vstages) */
    int32_t       *weight_versions; /* (n_stages) */
    int32_t       *act_slots;       /* (n_vstages) */
    ExecDataFn     data;
    gpointer       data_user;
    ExecGradFn     on_grads;
    gpointer       on_grads_user;
    ExecCpuVstage *vstages;   /* (n_vstages) */
    ExecCpuStage  *stages;    /* (n_stages) */
    int64_t        t0_ns;     /* CLOCK_MONOTONIC at creation: the origin of the reports' times
                                 (taken by every rank together, after an agreement) */
    ExecComm      *comm;      /* (nullable) the process group; rank r holds stage r */
    gboolean      *local;     /* (n_stages) the stages this process runs */
    ExecTransport *transport; /* activations and gradients between stages (host queue) */
    gint           aborted;   /* atomic: abort() since the last prepare() */
} ExecCpuBackend;

static inline ExecCpuBackend *exec_cpu(ExecBackend *backend) {
    return (ExecCpuBackend *)backend;
}

/* Whether this process holds @stage. */
static inline gboolean exec_cpu_stage_local(const ExecCpuBackend *cpu, int32_t stage) {
    return cpu->local[stage];
}

/* Floats of one activation or gradient message: (B, T, C). */
static inline size_t exec_cpu_act_floats(const ExecCpuBackend *cpu) {
    return (size_t)cpu->B * cpu->model.T * cpu->model.C;
}

/* --- state members of the vtable (exec-cpu-state.c; exec-backend.h documents them) --- */

int               exec_cpu_n_tensors(ExecBackend *backend, int32_t vstage);
const Gpt2Tensor *exec_cpu_tensor(ExecBackend *backend, int32_t vstage, int i, guint *roles);
gboolean          exec_cpu_tensor_get(ExecBackend *backend, int32_t vstage, const char *name,
                                      ExecTensorRole role, float *dst, size_t n, GError **error);
gboolean          exec_cpu_tensor_set(ExecBackend *backend, int32_t vstage, const char *name,
                                      ExecTensorRole role, const float *src, size_t n, GError **error);
gboolean          exec_cpu_get_optim_steps(ExecBackend *backend, int32_t vstage, int64_t *n_steps,
                                           GError **error);
gboolean          exec_cpu_set_optim_steps(ExecBackend *backend, int32_t vstage, int64_t n_steps,
                                           GError **error);
gboolean exec_cpu_evaluate(ExecBackend *backend, const int32_t *tokens, const int32_t *targets,
                           float *loss, GError **error);

G_END_DECLS
