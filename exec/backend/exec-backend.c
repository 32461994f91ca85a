/* SPDX-License-Identifier: MIT
 * exec-backend.c: the backend registry (run.backend names -> constructors) and the contract's
 * shared helpers (exec-backend-impl.h). A backend is registered here when the build has it: CUDA
 * and MPI backends get their row, guarded by PP_HAVE_CUDA / their own flag, in this table.
 */
#include "exec-backend-impl.h"

#include <string.h>

#include "pp-config.h"
#include "pp-error.h"

static const ExecBackendInfo exec_backend_table[] = {
    {"cpu",
     exec_backend_cpu_new,
     "CPU threads, one per stage (reference and test double)",
     "fp32",
     {EXEC_BACKEND_CAN_REDUCE_GRADS | EXEC_BACKEND_CAN_SHARD_OPTIMIZER |
      EXEC_BACKEND_CAN_SPEED_REFERENCE | EXEC_BACKEND_CAN_FP32 | EXEC_BACKEND_IS_REFERENCE}},
#if PP_HAVE_CUDA
    {"cuda",
     exec_backend_cuda_new,
     "CUDA devices, a stream and a host worker per stage (run.devices, run.precision)",
     "bf16",
     {EXEC_BACKEND_CAN_REDUCE_GRADS | EXEC_BACKEND_CAN_DEVICES | EXEC_BACKEND_CAN_FP32 |
      EXEC_BACKEND_CAN_BF16}},
#endif
    {NULL, NULL, NULL, NULL, {0}},
};

/* What a backend without each capability is said to lack, in ExecBackendCap bit order. */
static const char *const exec_backend_lacks[] = {
    "cannot reduce gradients between replicas",
    "has no sharded optimizer",
    "has no speed reference",
    "has no devices (every stage runs on host threads)",
    "does not compute in fp32",
    "does not compute in bf16",
    "is not the reference backend",
};

/* Backends pacer knows of that this build lacks, and what a scenario naming one is told. */
static const struct {
    const char *name;
    const char *why;
} exec_backend_absent[] = {
#if !PP_HAVE_CUDA
    {"cuda", "this build has no CUDA backend"},
#endif
    {NULL, NULL},
};

const ExecBackendInfo *exec_backends(void) {
    return exec_backend_table;
}

char *exec_backend_names(void) {
    GString *names = g_string_new(NULL);
    for (const ExecBackendInfo *info = exec_backend_table; info->name != NULL; info++)
        g_string_append_printf(names, "%s%s", names->len ? ", " : "", info->name);
    return g_string_free(names, FALSE);
}

const ExecBackendInfo *exec_backend_find(const char *name, GError **error) {
    for (const ExecBackendInfo *info = exec_backend_table; info->name != NULL; info++) {
        if (name == NULL ? (info->caps.can & EXEC_BACKEND_IS_REFERENCE) != 0
                         : strcmp(info->name, name) == 0)
            return info;
    }
    PP_ASSERT(name != NULL); /* the table has its reference backend */
    const char *why = "unknown backend";
    for (size_t i = 0; exec_backend_absent[i].name != NULL; i++) {
        if (strcmp(exec_backend_absent[i].name, name) == 0)
            why = exec_backend_absent[i].why;
    }
    g_autofree char *valid = exec_backend_names();
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND, "backend = %s: %s; valid: %s", name, why,
                valid);
    return NULL;
}

const ExecBackendCaps *exec_backend_caps(const ExecBackendInfo *info) {
    return &info->caps;
}

gboolean exec_backend_require(const ExecBackendInfo *info, guint need, const char *setting,
                              const char *instead, GError **error) {
    guint missing = need & ~info->caps.can;
    if (missing == 0)
        return TRUE;
    G_STATIC_ASSERT(EXEC_BACKEND_IS_REFERENCE == 1u << (G_N_ELEMENTS(exec_backend_lacks) - 1));
    PP_ASSERT(missing < (1u << G_N_ELEMENTS(exec_backend_lacks)));
    GString *msg = g_string_new(NULL);
    g_string_append_printf(msg, "%s: the %s backend", setting, info->name);
    for (guint bit = 0, said = 0; bit < G_N_ELEMENTS(exec_backend_lacks); bit++) {
        if (missing & (1u << bit))
            g_string_append_printf(msg, "%s %s", said++ ? " and" : "", exec_backend_lacks[bit]);
    }
    g_string_append_printf(msg, "; %s", instead);
    GString *able = g_string_new(NULL);
    for (const ExecBackendInfo *other = exec_backend_table; other->name != NULL; other++) {
        if ((other->caps.can & need) == need)
            g_string_append_printf(able, "%s%s", able->len ? " or " : "", other->name);
    }
    if (able->len)
        g_string_append_printf(msg, ", or use run.backend = %s", able->str);
    g_string_free(able, TRUE);
    g_set_error_literal(error, EXEC_ERROR, EXEC_ERROR_BACKEND, msg->str);
    g_string_free(msg, TRUE);
    return FALSE;
}

void exec_backend_free(ExecBackend *backend) {
    if (backend)
        backend->ops->free(backend);
}

void exec_memory_bytes_sum(ExecMemoryBytes *bytes) {
    bytes->total_bytes = bytes->params_bytes + bytes->grads_bytes + bytes->optim_bytes +
                         bytes->stash_bytes + bytes->act_bytes + bytes->message_bytes +
                         bytes->workspace_bytes;
}

ExecParallel exec_parallel_resolve(const ExecParallel *parallel) {
    ExecParallel p = {.replicas = MAX(parallel->replicas, 1),
                      .replica = parallel->replica,
                      .shards = MAX(parallel->shards, 1)};
    /* ZeRO-1 shards the state over the replicas of a stage, one shard each. */
    PP_ASSERT(p.replica >= 0 && p.replica < p.replicas);
    PP_ASSERT(p.shards == 1 || p.shards == p.replicas);
    return p;
}

const char *exec_tensor_role_name(ExecTensorRole role) {
    static const char *const names[EXEC_TENSOR_N_ROLES] = {
        "params", "grads", "adam_m", "adam_v", "muon_momentum", "prev_update",
    };
    PP_ASSERT(role >= 0 && role < EXEC_TENSOR_N_ROLES);
    return names[role];
}

float *exec_tensor_checked(int32_t vstage, const char *name, const ExecTensor *t,
                           ExecTensorRole role, float *data, size_t n, GError **error) {
    if (t == NULL) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_TENSOR, "virtual stage %d holds no tensor %s",
                    vstage, name);
        return NULL;
    }
    if (data && n == t->numel)
        return data;
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_TENSOR,
                "virtual stage %d: tensor %s has %zu floats and %s %s; the caller asked for %zu",
                vstage, name, t->numel, data ? "role" : "no role", exec_tensor_role_name(role), n);
    return NULL;
}

gboolean exec_backend_check_schedule(const PpSchedule *sched, int32_t n_stages, int32_t n_chunks,
                                     const int32_t *vstage_stage, const int32_t *act_slots,
                                     GError **error) {
    if (sched->n_stages != n_stages || sched->n_chunks != n_chunks) {
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                    "schedule %s has %d stages x %d chunks; the pipeline was built for %d x %d",
                    sched->kind, sched->n_stages, sched->n_chunks, n_stages, n_chunks);
        return FALSE;
    }
    int32_t n_vstages = n_stages * n_chunks;
    for (int32_t vs = 0; vs < n_vstages; vs++) {
        if (sched->vstage_stage[vs] != vstage_stage[vs]) {
            g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                        "schedule %s places virtual stage %d on stage %d; the pipeline has it "
                        "on stage %d",
                        sched->kind, vs, sched->vstage_stage[vs], vstage_stage[vs]);
            return FALSE;
        }
    }
    g_autofree int32_t *peak = pp_schedule_vstage_peak_inflight(sched);
    for (int32_t vs = 0; vs < n_vstages; vs++) {
        if (peak[vs] > act_slots[vs]) {
            g_set_error(error, EXEC_ERROR, EXEC_ERROR_SHAPE,
                        "schedule %s keeps %d micro-batches in flight on virtual stage %d; the "
                        "pipeline has %d activation slots there",
                        sched->kind, peak[vs], vs, act_slots[vs]);
            return FALSE;
        }
    }
    return TRUE;
}
