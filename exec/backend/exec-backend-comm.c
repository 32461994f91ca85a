/* SPDX-License-Identifier: MIT
 * exec-backend-comm.c: what every backend that runs one process per stage shares
 * (exec-backend-impl.h, "backends across processes"): the check of a program's last wire tag
 * (the tags themselves are the transport's, exec-transport-wire.c), the error of another
 * process's virtual stage, and the tensor table of a virtual stage another process holds.
 */
#include <string.h>

#include "exec-backend-impl.h"
#include "pp-error.h"

gboolean exec_backend_check_tags(const ExecComm *comm, int32_t n_vstages, const PpSchedule *sched,
                                 GError **error) {
    if (comm && sched->n_mb > 0 &&
        exec_msg_tag(n_vstages, TRUE, sched->n_mb - 1, n_vstages - 1) > exec_comm_tag_max(comm)) {
        g_propagate_error(error, exec_msg_tag_error(comm, n_vstages, sched->n_mb - 1));
        return FALSE;
    }
    return TRUE;
}

void exec_backend_set_not_local(GError **error, const ExecComm *comm, int32_t vstage,
                                int32_t stage) {
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_NOT_LOCAL,
                "virtual stage %d lives on rank %d; this is rank %d", vstage,
                exec_comm_stage_rank(comm, stage), exec_comm_rank(comm));
}

void exec_remote_table_build(ExecRemoteTable *table, const Gpt2SliceParams *sp,
                             const KernOptimParams *optim) {
    /* A transient CPU slice and optimizer: their arenas are calloc'd and never touched, so
     * they cost address space, not memory. Every backend lays out the same tensors with the
     * same optimizer roles (checkpoints move between backends). */
    Gpt2SliceParams one = *sp;
    one.B = 1;
    one.n_act_slots = 1;
    Gpt2Slice *slice = gpt2_slice_new(&one);
    KernOptim *opt = kern_optim_new(optim, slice);
    table->n = gpt2_slice_n_tensors(slice);
    table->tensors = g_new(Gpt2Tensor, MAX(table->n, 1));
    table->roles = g_new(guint, MAX(table->n, 1));
    GString           *names = g_string_new(NULL);
    g_autofree size_t *at = g_new(size_t, MAX(table->n, 1));
    for (int i = 0; i < table->n; i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(slice, i);
        float            *first = NULL, *second = NULL;
        int               muon = kern_optim_tensor_state(opt, i, &first, &second);
        ExecTensorArrays  arrays = {.params = gpt2_slice_params(slice) + t->offset,
                                    .grads = gpt2_slice_grads(slice) + t->offset,
                                    .first = first,
                                    .second = second,
                                    .muon = muon,
                                    .prev_update = kern_optim_tensor_prev_update(opt, i)};
        table->tensors[i] = *t;
        table->roles[i] = exec_tensor_arrays_roles(&arrays, EXEC_TENSOR_PARAMS, NULL);
        at[i] = names->len;
        g_string_append_len(names, t->name, (gssize)strlen(t->name) + 1);
    }
    table->names = g_string_free(names, FALSE);
    for (int i = 0; i < table->n; i++)
        table->tensors[i].name = table->names + at[i];
    kern_optim_free(opt);
    gpt2_slice_free(slice);
}

void exec_remote_table_clear(ExecRemoteTable *table) {
    g_free(table->tensors);
    g_free(table->roles);
    g_free(table->names);
    *table = (ExecRemoteTable){0};
}
