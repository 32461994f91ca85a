/* SPDX-License-Identifier: MIT
 * exec-backend.c: the backend registry (run.backend names -> constructors) and the contract's
 * shared helpers (exec-backend.h). A backend is registered here when the build has it: CUDA
 * and MPI backends get their row, guarded by PP_HAVE_CUDA / their own flag, in this table.
 */
#include "exec-backend.h"

#include <string.h>

#include "pp-error.h"

static const ExecBackendInfo exec_backend_table[] = {
    {"cpu", exec_backend_cpu_new, "CPU threads, one per stage (reference and test double)"},
    {NULL, NULL, NULL},
};

/* Backends pacer knows of that this build lacks, and what a scenario naming one is told. */
static const struct {
    const char *name;
    const char *why;
} exec_backend_absent[] = {
    {"cuda", "this build has no CUDA backend"},
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
        if (strcmp(info->name, name) == 0)
            return info;
    }
    const char *why = "unknown backend";
    for (size_t i = 0; i < G_N_ELEMENTS(exec_backend_absent); i++) {
        if (strcmp(exec_backend_absent[i].name, name) == 0)
            why = exec_backend_absent[i].why;
    }
    g_autofree char *valid = exec_backend_names();
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_BACKEND, "backend = %s: %s; valid: %s", name, why,
                valid);
    return NULL;
}

void exec_backend_free(ExecBackend *backend) {
    if (backend)
        backend->ops->free(backend);
}

const char *exec_tensor_role_name(ExecTensorRole role) {
    static const char *const names[EXEC_TENSOR_N_ROLES] = {
        "params", "grads", "adam_m", "adam_v", "muon_momentum", "prev_update",
    };
    PP_ASSERT(role >= 0 && role < EXEC_TENSOR_N_ROLES);
    return names[role];
}
