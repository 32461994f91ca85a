/* SPDX-License-Identifier: MIT
 * exec-reduce.h: the gradient reduction of data parallelism. D replicas of the pipeline run
 * the same program; before every U, a stage's D replicas (and only they: no barrier across
 * stages) replace their accumulated gradients by the mean over the replicas, each element
 * summed in replica order, 0 to D - 1, then divided by D:
 *     g = ((g_0 + g_1) + ... + g_{D-1}) / D,
 * so the result is bitwise the same on every replica, on any placement, in every run.
 * It moves as a reduce-scatter then an all-gather on the group's EXEC_COMM_REDUCE channel:
 * replica c sums chunk c of the flat gradient array (chunk c: floats [n c / D, n (c + 1) / D))
 * and sends it back to the others; 2 (D - 1) / D of the array's bytes leave each rank per
 * update. Internal to libppexec: the pipeline's workers call it (exec-replay.c).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-comm.h"

G_BEGIN_DECLS

typedef struct _ExecReduce ExecReduce;

/* The reduction of this rank's stage among its exec_comm_replicas(@comm) replicas, for a
 * pipeline of @n_vstages virtual stages; installs the receiver of EXEC_COMM_REDUCE (host
 * thread, no replay running). Returns: (transfer full). */
ExecReduce *exec_reduce_new(ExecComm *comm, int32_t n_vstages);
void        exec_reduce_free(ExecReduce *reduce);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecReduce, exec_reduce_free)

/* Host thread, before a replay: drops what a stopped replay left behind. */
void exec_reduce_reset(ExecReduce *reduce);

/* Worker of this rank's stage, before the stage's U number @update (0-based, counted in this
 * replay): reduces @grads (@n floats, the virtual stage @vstage's flat gradient array) in
 * place. Every replica of the stage calls it with the same @update, @vstage and @n. Returns
 * FALSE when the replay stopped, or when a peer's part did not arrive within the group's
 * deadline: then the failure is recorded with exec_comm_fail() (EXEC_ERROR_COMM naming the
 * peer's rank), which stops the replay on every rank. */
gboolean exec_reduce_run(ExecReduce *reduce, int32_t update, int32_t vstage, float *grads,
                         size_t n);

G_END_DECLS
