/* SPDX-License-Identifier: MIT
 * exec-backend-comm.c: what every backend that runs one process per stage shares
 * (exec-backend.h, "Backends across processes"): the wire tags of activations and gradients,
 * the errors of a tag past the group's largest and of an input that missed the group's
 * deadline, and the tensor table of a virtual stage another process holds.
 */
#include <string.h>

#include "exec-backend-impl.h"
#include "pp-error.h"

int64_t exec_backend_msg_tag(int32_t n_vstages, gboolean grad, int32_t mb, int32_t vstage) {
    PP_ASSERT(mb >= 0 && vstage >= 0 && vstage < n_vstages);
    return ((int64_t)mb * n_vstages + vstage) * 2 + (grad ? 1 : 0);
}

void exec_backend_msg_untag(int32_t n_vstages, int32_t tag, gboolean *grad, int32_t *mb,
                            int32_t *vstage) {
    PP_ASSERT(tag >= 0);
    *grad = tag % 2 == 1;
    *vstage = tag / 2 % n_vstages;
    *mb = tag / 2 / n_vstages;
}

GError *exec_backend_tag_error(const ExecComm *comm, int32_t n_vstages, int32_t mb) {
    int64_t most = ((int64_t)exec_comm_tag_max(comm) + 1) / ((int64_t)n_vstages * 2);
    return g_error_new(EXEC_ERROR, EXEC_ERROR_SHAPE,
                       "micro-batch %d of a replay needs MPI tag %" G_GINT64_FORMAT
                       " and this MPI allows at most %d (MPI_TAG_UB): a segment may hold at "
                       "most %" G_GINT64_FORMAT " micro-batches on %d virtual stages; set "
                       "run.eval_every or run.checkpoint_every to cut the run into shorter "
                       "segments",
                       mb, exec_backend_msg_tag(n_vstages, TRUE, mb, n_vstages - 1),
                       exec_comm_tag_max(comm), most, n_vstages);
}

gboolean exec_backend_check_tags(const ExecComm *comm, int32_t n_vstages, const PpSchedule *sched,
                                 GError **error) {
    if (comm && sched->n_mb > 0 &&
        exec_backend_msg_tag(n_vstages, TRUE, sched->n_mb - 1, n_vstages - 1) >
            exec_comm_tag_max(comm)) {
        g_propagate_error(error, exec_backend_tag_error(comm, n_vstages, sched->n_mb - 1));
        return FALSE;
    }
    return TRUE;
}

GError *exec_backend_late_input(const ExecComm *comm, gboolean grad, const char *op, int32_t mb,
                                int32_t vstage, int32_t producer) {
    g_autofree char *for_what =
        op ? g_strdup_printf("%s(mb=%d)", op, mb) : g_strdup_printf("micro-batch %d", mb);
    return g_error_new(EXEC_ERROR, EXEC_ERROR_COMM,
                       "the %s for %s of virtual stage %d from rank %d did not arrive within %g s "
                       "(run.comm_timeout_s); rank %d may have died or hung",
                       grad ? "gradient" : "activation", for_what, vstage, producer,
                       exec_comm_timeout(comm), producer);
}

GError *exec_backend_late_poll(const ExecComm *comm, int32_t stage, int32_t n_stages) {
    /* Dynamic mode has one chunk per stage: inputs come from stage - 1 and + 1. */
    g_autofree char *peers = stage == 0 ? g_strdup_printf("rank %d", stage + 1)
                             : stage == n_stages - 1
                                 ? g_strdup_printf("rank %d", stage - 1)
                                 : g_strdup_printf("rank %d or %d", stage - 1, stage + 1);
    return g_error_new(EXEC_ERROR, EXEC_ERROR_COMM,
                       "no activation or gradient reached stage %d within %g s "
                       "(run.comm_timeout_s) while PACI's policy waited for its next input; %s "
                       "may have died or hung",
                       stage, exec_comm_timeout(comm), peers);
}

void exec_backend_set_not_local(GError **error, const ExecComm *comm, int32_t vstage,
                                int32_t stage) {
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_NOT_LOCAL,
                "virtual stage %d lives on rank %d; this is rank %d", vstage, stage,
                exec_comm_rank(comm));
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
        float            *prev = kern_optim_prev_update(opt);
        ExecTensorArrays  arrays = {.params = gpt2_slice_params(slice) + t->offset,
                                    .grads = gpt2_slice_grads(slice) + t->offset,
                                    .first = first,
                                    .second = second,
                                    .muon = muon,
                                    .prev_update = prev ? prev + t->offset : NULL};
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
