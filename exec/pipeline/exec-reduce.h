/* SPDX-License-Identifier: MIT
 * exec-reduce.h: the gradient reduction of data parallelism. D replicas of the pipeline run
 * the same program; before every U, a stage's D replicas (and only they: no barrier across
 * stages) replace their accumulated gradients by the mean over the replicas, each element
 * summed in replica order, 0 to D - 1, then divided by D:
 *     g = ((g_0 + g_1) + ... + g_{D-1}) / D,
 * so the result is bitwise the same on every replica, on any placement, in every run.
 * It moves as a reduce-scatter then an all-gather on the group's EXEC_COMM_REDUCE channel:
 * replica c sums chunk c of the flat gradient array (chunk c: kern_optim_shard_range()'s
 * shard c, whole chunks of the gradient norm's partial sums) and sends it back to the others;
 * 2 (D - 1) / D of the array's bytes leave each rank per update. With a sharded optimizer
 * (ZeRO-1) the reduced chunk c stays on replica c, which steps its shard of the parameters
 * alone (exec_reduce_norm() gives every replica the stage's gradient norm) and then sends the
 * updated shard to the others: the all-gather moves parameters instead of gradients, the same
 * bytes. A reduction may go by pieces of the array (the overlapped reduction's buckets,
 * exec-overlap.c): a piece's element i is summed by the replica whose chunk of the whole
 * array holds it, as in the whole array's reduction, so the bits and the chunk a sharded
 * optimizer steps are the same however the array is cut. Internal to libppexec: the
 * pipeline's workers call it (exec-replay.c).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-backend.h"
#include "exec-comm.h"

G_BEGIN_DECLS

typedef struct _ExecReduce ExecReduce;

/* What one call reduces: floats [@begin, @end) of virtual stage @vstage's flat array of @n
 * floats before the stage's U number @update (0-based, counted in this replay), numbered
 * @bucket among the pieces of that array (0 <= bucket < the n_buckets of exec_reduce_new()).
 * The whole array is bucket 0, [0, n). */
typedef struct {
    int32_t update, vstage, bucket;
    size_t  n, begin, end;
} ExecReducePiece;

/* The reduction of this rank's stage among the @parallel->replicas replicas of @comm (this
 * rank is replica @parallel->replica), for a pipeline of @n_vstages virtual stages whose
 * arrays go by at most @n_buckets pieces each; installs the receiver of EXEC_COMM_REDUCE
 * (host thread, no replay running).
 * Returns: (transfer full). */
ExecReduce *exec_reduce_new(ExecComm *comm, const ExecParallel *parallel, int32_t n_vstages,
                            int32_t n_buckets);
void        exec_reduce_free(ExecReduce *reduce);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecReduce, exec_reduce_free)

/* Host thread, before a replay: drops what a stopped replay left behind. */
void exec_reduce_reset(ExecReduce *reduce);

/* Worker of this rank's stage (or its reduction thread), before the stage's U: sums this
 * replica's chunk of @piece of @grads (the virtual stage's flat gradient array) over the
 * replicas in place (the other floats stay as they were). Every replica of the stage calls it
 * with the same @piece. Returns FALSE when the replay stopped, or when a peer's part did not
 * arrive within the group's deadline: then the failure is recorded with exec_comm_fail()
 * (EXEC_ERROR_COMM naming the peer's rank), which stops the replay on every rank. */
gboolean exec_reduce_scatter(ExecReduce *reduce, const ExecReducePiece *piece, float *grads);
/* After exec_reduce_scatter() of the same @piece: sends this replica's chunk of @piece of
 * @data (the reduced gradients, or the parameters a sharded optimizer updated: the whole
 * array) to the other replicas and copies theirs in, so that every replica holds the whole
 * piece. @what names the array in errors ("the reduced gradients"). Returns FALSE as
 * exec_reduce_scatter(). */
gboolean exec_reduce_gather(ExecReduce *reduce, const ExecReducePiece *piece, float *data,
                            const char *what);
/* Sharded optimizer, after exec_reduce_scatter(): *@sq_norm = the sum of squares of the
 * reduced gradients of @vstage (@grads, @n floats; this replica's chunk reduced), bitwise what
 * kern_grad_sq_norm() gives for the whole reduced array: each replica computes its chunk's
 * partial sums, they are exchanged, and every replica adds all of them in chunk order. Returns
 * FALSE as exec_reduce_scatter(). */
gboolean exec_reduce_norm(ExecReduce *reduce, int32_t update, int32_t vstage, const float *grads,
                          size_t n, double *sq_norm);

G_END_DECLS
