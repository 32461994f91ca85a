/* SPDX-License-Identifier: MIT
 * exec-backend.h: the public contract of a backend, what the pipeline's users (pacer-train,
 * the training loop, the tests) see: the model layout a backend allocates from (per virtual
 * stage the tensor table of its flat buffers, ExecTensor records, and the message and batch
 * sizes), the setup a backend is built from (layout, pipeline shape, slots, data source,
 * process group, devices, precision), the roles of the tensors its state holds, its memory by
 * category, and the registry that builds one by name. It knows no model config and no
 * optimizer rule: the model kernels' arguments and the optimizer's hyperparameters the layout
 * carries, and its constructor, are the backend author's (exec-layout-impl.h). A backend itself
 * is opaque here: the pipeline (exec.c) drives it through the backend author's interface,
 * exec-backend-impl.h. docs/backends.md describes both.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-comm.h"
#include "exec-error.h"

G_BEGIN_DECLS

/* Fills the tokens and targets of global micro-batch @mb: a pure function of (@mb, the
 * source's seed), so runs are deterministic and resumable. Called from worker threads
 * concurrently; must be thread-safe.
 *   @tokens  (B, T) ids in [0, V)
 *   @targets (B, T) ids in [0, V): the next token of each position */
typedef void (*ExecDataFn)(gpointer user_data, int64_t mb, int32_t *tokens, int32_t *targets);

/* Role of a tensor's data in tensor_get() / tensor_set(). Each role's data has the tensor's
 * own shape (ExecTensor, pacer layout: matmul weights (OC, IC)). */
typedef enum {
    EXEC_TENSOR_PARAMS,        /* the weights */
    EXEC_TENSOR_GRADS,         /* gradients accumulated since the stage's last U */
    EXEC_TENSOR_ADAM_M,        /* AdamW first moment (AdamW-driven tensors) */
    EXEC_TENSOR_ADAM_V,        /* AdamW second moment (AdamW-driven tensors) */
    EXEC_TENSOR_MUON_MOMENTUM, /* Muon momentum (Muon-driven tensors) */
    EXEC_TENSOR_PREV_UPDATE,   /* error feedback's previous update u_{t-1} (every tensor when
                                  error feedback is on) */
    EXEC_TENSOR_N_ROLES
} ExecTensorRole;

/* Bit of @role in a roles mask. */
#define EXEC_TENSOR_ROLE_BIT(role) (1u << (role))

/* "params", "grads", "adam_m", "adam_v", "muon_momentum", "prev_update". */
const char *exec_tensor_role_name(ExecTensorRole role);

/* --- the model layout (exec-layout.c) ---
 * What a backend's users see of the model, built once by the pipeline from the model config,
 * the partition and the optimizer (exec_model_layout_new(), exec-layout-impl.h), and the same
 * for every backend (checkpoints move between backends): per virtual stage, one flat fp32
 * buffer each of parameters, gradients and (with error feedback) previous updates, n_params
 * floats laid out by the tensor table, and per tensor the optimizer state it has (its roles);
 * the sizes of a message and of a batch. The model kernels' arguments and the optimizer's
 * hyperparameters are the backend author's (exec_layout_slice_params(), exec_layout_optim()).
 * A backend allocates from it and hands the kernel arguments on; it never derives a table, a
 * size or a tensor's optimizer itself. */

/* One parameter tensor of a virtual stage's flat buffers (plain host data, owned by the
 * layout). */
typedef struct {
    const char *name;   /* Hugging Face name, global block numbers (transfer none): valid
                           for the layout's life */
    size_t   offset;    /* floats from the start of the flat params / grads / prev_update */
    size_t   numel;     /* shape[0] * shape[1] (ndim 2) or shape[0] (ndim 1) */
    int      ndim;      /* 1 or 2 */
    int      shape[2];  /* pacer layout: (OC, IC) for matmuls; shape[1] = 1 when 1-D */
    gboolean is_matrix; /* gets decoupled weight decay in the optimizers */
    guint    roles;     /* EXEC_TENSOR_ROLE_BIT()s: params and grads always, adam_m + adam_v
                           (AdamW) or muon_momentum (Muon), prev_update with error
                           feedback */
} ExecTensor;

/* Gradient tap (tests): at each U, before clipping, the backend copies the accumulated
 * gradients of every tensor of each of the stage's virtual stages to host memory and calls
 * this once per tensor from the stage's worker. @grads: (tensor->numel) floats in @tensor's
 * shape, valid during the call. A tap costs a device-to-host copy per U: tests only. */
typedef void (*ExecGradFn)(gpointer user_data, int32_t vstage, const ExecTensor *tensor,
                           const float *grads);

/* One virtual stage. */
typedef struct {
    size_t      n_params; /* floats of each flat buffer (params, grads, prev_update) */
    int         n_tensors;
    ExecTensor *tensors; /* (n_tensors) in buffer order, densely from offset 0 */
    char       *names;   /* the tensors' names, NUL-separated */
} ExecVstageLayout;

/* The model kernels' arguments, opaque here (exec-layout-impl.h). */
typedef struct _ExecLayoutKernels ExecLayoutKernels;

/* Every virtual stage; refcounted (a backend keeps a reference for its life). */
typedef struct {
    int32_t            n_vstages;
    ExecVstageLayout  *vstages;      /* (n_vstages) */
    size_t             msg_floats;   /* one activation or gradient message: (B, T, C) elements */
    size_t             batch_tokens; /* one micro-batch's token ids (and targets): (B, T) */
    ExecLayoutKernels *kernels;      /* the model slices' arguments and the optimizer's
                                        hyperparameters: the backend author's */
} ExecModelLayout;

/* Returns: (transfer full): @layout with one more reference. */
ExecModelLayout *exec_model_layout_ref(ExecModelLayout *layout);
/* Drops a reference, freeing the layout with the last; accepts NULL. */
void exec_model_layout_unref(ExecModelLayout *layout);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecModelLayout, exec_model_layout_unref)

/* Element type of activations and compute weights (run.precision); master weights, gradients
 * and optimizer state are fp32 in every mode. */
typedef enum {
    EXEC_PRECISION_DEFAULT, /* the backend's own default (cpu: fp32, cuda: bf16) */
    EXEC_PRECISION_FP32,
    EXEC_PRECISION_BF16,
} ExecPrecision;

/* The data-parallel layout around this process's pipeline, typed once from the scenario
 * (parallel.data, parallel.distributed_optimizer) and carried in ExecPipelineParams and
 * ExecBackendSetup, as llm.c carries its multi-GPU config. With a process group, rank r runs
 * stage r / D of replica r mod D; the group keeps D only for that rank arithmetic
 * (exec_comm_set_replicas()). All zero reads as one pipeline. */
typedef struct {
    int32_t replicas; /* D: copies of the pipeline (0 or 1: one) */
    int32_t replica;  /* this process's copy, 0 <= replica < D */
    int32_t shards;   /* ZeRO-1: each virtual stage's optimizer state in this many shards,
                         replica d holding shard d (D with parallel.distributed_optimizer,
                         else 0 or 1: whole) */
} ExecParallel;

/* @parallel with its zero fields read (replicas and shards 1): the form the executor keeps. */
ExecParallel exec_parallel_resolve(const ExecParallel *parallel);

/* Everything a backend needs to build the model state; copied by the constructor except the
 * borrowed pointers. */
typedef struct {
    ExecModelLayout *layout; /* (n_vstages) virtual stages: the backend takes a
                                reference */
    int32_t        n_stages;
    int32_t        n_chunks;        /* n_stages * n_chunks = layout->n_vstages */
    const int32_t *vstage_stage;    /* (n_vstages) borrowed for the call */
    const int32_t *weight_versions; /* (n_stages) stashed copies kept at most (0: none) */
    uint64_t       seed;            /* parameter init */
    ExecDataFn     data;
    gpointer       data_user;
    ExecGradFn     on_grads; /* (nullable) gradient tap */
    gpointer       on_grads_user;
    ExecComm      *comm;     /* (nullable) the process group of a multi-process run, borrowed
                                for the backend's life: this process runs the stages is_local
                                names (the CPU backend: stage r on rank r) */
    ExecParallel   parallel; /* the replicas around the pipeline (one without a group) */
    const int32_t *devices;  /* (nullable) (n_stages) device id of each stage (run.devices),
                                borrowed for the call; NULL: the backend's placement. A
                                backend without devices refuses it (EXEC_ERROR_BACKEND) */
    ExecPrecision precision; /* a precision the backend lacks is refused (EXEC_ERROR_BACKEND) */
    gboolean      flash_attention; /* model.flash_attention: fused attention kernels where the
                                      backend has them (refused where it cannot run them) */
} ExecBackendSetup;

/* The memory a backend holds for one stage's state, by category, in bytes (device memory on a
 * GPU), as allocated at creation: nothing is allocated afterwards. */
typedef struct {
    int32_t device;          /* the stage's device id; -1: host memory (the cpu backend) */
    int64_t params_bytes;    /* fp32 master weights and their compute copy (bf16 mode) */
    int64_t grads_bytes;     /* fp32 gradients */
    int64_t optim_bytes;     /* optimizer state and its scratch */
    int64_t stash_bytes;     /* stashed weight versions (pipedream, 2bw) */
    int64_t act_bytes;       /* activation slots */
    int64_t message_bytes;   /* buffers of the messages between stages */
    int64_t workspace_bytes; /* per-stream contexts (GEMM workspace, reduction scratch), slice
                                scratch, report buffers */
    int64_t total_bytes;     /* the sum */
} ExecMemoryBytes;

/* Sets @bytes->total_bytes to the sum of its categories. */
void exec_memory_bytes_sum(ExecMemoryBytes *bytes);

typedef struct _ExecBackend ExecBackend;

/* --- the backend registry (exec-backend.c) --- */

/* Builds a backend from @setup. Returns: (transfer full), or NULL with @error set
 * (EXEC_ERROR_BACKEND: no device, ...). */
typedef ExecBackend *(*ExecBackendNewFn)(const ExecBackendSetup *setup, GError **error);

/* What a backend can do, one bit each in ExecBackendCaps.can. Every check of a scenario or a
 * pipeline against its backend asks these (exec_backend_require()), never the backend's name. */
typedef enum {
    /* parallel.data > 1: reduces the gradients between replicas (grads(), or reduce_grads()
     * on the device) */
    EXEC_BACKEND_CAN_REDUCE_GRADS = 1u << 0,
    /* parallel.distributed_optimizer: a sharded optimizer, ZeRO-1 (params()) */
    EXEC_BACKEND_CAN_SHARD_OPTIMIZER = 1u << 1,
    /* run.speed_reference (reference()) */
    EXEC_BACKEND_CAN_SPEED_REFERENCE = 1u << 2,
    /* run.devices: places stages on devices */
    EXEC_BACKEND_CAN_DEVICES = 1u << 3,
    /* run.precision = fp32, run.precision = bf16 */
    EXEC_BACKEND_CAN_FP32 = 1u << 4,
    EXEC_BACKEND_CAN_BF16 = 1u << 5,
    /* the reference the other backends are tested against, and the backend when none is
     * named */
    EXEC_BACKEND_IS_REFERENCE = 1u << 6,
} ExecBackendCap;

/* A backend's capabilities, answered by its registry row before one is built (no device is
 * touched): the pipeline asserts that the built backend's ops agree. */
typedef struct {
    guint can; /* ExecBackendCap bits */
} ExecBackendCaps;

typedef struct {
    const char      *name; /* run.backend value */
    ExecBackendNewFn create;
    const char      *summary;           /* one line for --help */
    const char      *default_precision; /* run.precision when the key is absent */
    ExecBackendCaps  caps;
} ExecBackendInfo;

/* Returns: (transfer none): the NULL-terminated table of the backends this build has. */
const ExecBackendInfo *exec_backends(void);
/* Returns: (transfer none): the backend called @name (NULL: the reference backend, the one with
 * EXEC_BACKEND_IS_REFERENCE), or NULL with EXEC_ERROR_BACKEND set: a message that names @name,
 * says plainly when it is a backend this build lacks ("this build has no CUDA backend") and
 * lists the valid names. */
const ExecBackendInfo *exec_backend_find(const char *name, GError **error);
/* Returns: (transfer full): "cpu, ..." (the backends this build has). */
char *exec_backend_names(void);
/* Returns: (transfer none): the capabilities of @info's backend. */
const ExecBackendCaps *exec_backend_caps(const ExecBackendInfo *info);
/* Whether @info's backend has every capability in @need (ExecBackendCap bits); FALSE with
 * EXEC_ERROR_BACKEND otherwise: "@setting: the NAME backend <what it lacks>; @instead, or use
 * run.backend = <this build's backends that have them>" (the last part only where one has). */
gboolean exec_backend_require(const ExecBackendInfo *info, guint need, const char *setting,
                              const char *instead, GError **error);

void exec_backend_free(ExecBackend *backend);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecBackend, exec_backend_free)

G_END_DECLS
