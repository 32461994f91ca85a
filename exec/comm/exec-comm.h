/* SPDX-License-Identifier: MIT
 * exec-comm.h: the process group of a multi-process run, one process ("rank") per pipeline
 * stage. Everything that crosses processes goes through it: while a replay runs, the backend's
 * activations and gradients, the pipeline's loss reports to rank 0 and the stop signal (posted
 * from any thread, moved by the host thread in exec_comm_serve()); between replays, the host's
 * agreements on errors, broadcasts, gathers and point-to-point copies (validation activations,
 * checkpoint tensors). Every wait has a deadline (run.comm_timeout_s): a peer that does not
 * answer in time is an EXEC_ERROR_COMM naming the peer and what was awaited. A wait between
 * replays first probes a late peer; one that is itself waiting in the group answers and is
 * waited for once more, so that the rank waiting for the missing one names it (exec-comm.c).
 * A NULL ExecComm is one process alone (rank 0 of 1). Implementations: exec-comm-mpi.c.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-error.h"

G_BEGIN_DECLS

/* Threads. The thread that created the group ("host": pacer-train's main thread) makes every
 * call into the transport library (MPI_THREAD_FUNNELED): exec_comm_serve() and the
 * collectives below. Workers only queue (exec_comm_post, exec_comm_stop, exec_comm_fail,
 * exec_comm_wake), which any thread may call at any time. */

typedef struct _ExecComm ExecComm;

/* Independent message streams (an MPI communicator each), so that tags never collide. */
typedef enum {
    EXEC_COMM_DATA,    /* a backend's activations and gradients; tags are the backend's */
    EXEC_COMM_REPORT,  /* the pipeline's reports to rank 0 while a replay runs */
    EXEC_COMM_CONTROL, /* stop signals, agreements and collectives (exec-comm.c's tags) */
    EXEC_COMM_HOST,    /* point-to-point copies between replays; tags are the caller's */
    EXEC_COMM_REDUCE,  /* the gradient reduction between replicas while a replay runs */
    EXEC_COMM_N_CHANNELS
} ExecCommChannel;

/* --- the group --- */

/* The number of processes an MPI launcher says it started with this one (Open MPI's
 * OMPI_COMM_WORLD_SIZE, PMI_SIZE of MPICH/Hydra and Slurm's PMI, SLURM_STEP_NUM_TASKS of
 * srun), or 0 when none did. Reads the environment only: also in a build without MPI. */
int64_t exec_comm_launched_size(void);
/* This process's rank in the job as the launcher says (OMPI_COMM_WORLD_RANK, PMI_RANK,
 * SLURM_PROCID), or -1 when none says. Environment only: known before the transport starts. */
int64_t exec_comm_launched_rank(void);
/* This process's rank among those of the launcher on its node (OMPI_COMM_WORLD_LOCAL_RANK,
 * MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID), or -1 when none says. Environment only. */
int64_t exec_comm_launched_local_rank(void);

/* This process's rank and the number of processes: 0 and 1 for NULL. */
int32_t exec_comm_rank(const ExecComm *comm);
int32_t exec_comm_size(const ExecComm *comm);
/* The largest tag a channel carries (MPI_TAG_UB; at least 32767 by the MPI standard). */
int32_t exec_comm_tag_max(const ExecComm *comm);
/* The deadline of every wait, in seconds (> 0; default EXEC_COMM_TIMEOUT_DEFAULT_S);
 * run.comm_timeout_s. */
#define EXEC_COMM_TIMEOUT_DEFAULT_S 300.0
void   exec_comm_set_timeout(ExecComm *comm, double seconds);
double exec_comm_timeout(const ExecComm *comm);

/* Ends the group (host thread) after the run. With @error NULL or an error that every rank
 * received from exec_comm_agree(), every process shuts the transport down and returns its
 * exit status (0 without an error, 1 with one; with an error it first takes and drops, for a
 * moment, what a stopped replay's peers had sent it). Any other error (a peer that did not answer,
 * a failure only this rank saw) aborts the whole job: this process and every peer exit
 * non-zero, and this call does not return. Frees @comm; NULL: returns the status at once. */
int exec_comm_finish(ExecComm *comm, const GError *error);

/* --- replicas (data parallelism; exec-comm-layout.c) ---
 * A job of D x N processes runs D replicas of an N-stage pipeline. Rank r runs stage r / D
 * of replica r mod D: stage-major, so the D replicas of a stage, which reduce their gradients
 * together at every update, are consecutive ranks, and a launcher that fills each node with
 * consecutive ranks keeps those reductions inside a node (the simulator's [parallel] ranking,
 * docs/cluster.md, is the same: data inside pipeline stage). Until exec_comm_set_replicas(),
 * D = 1 and rank r runs stage r. A NULL group is replica 0, stage 0 of one. */

/* Host thread, before the pipeline is built: @replicas (>= 1, a divisor of the size). */
void exec_comm_set_replicas(ExecComm *comm, int32_t replicas);
/* D, and this rank's replica and stage. */
int32_t exec_comm_replicas(const ExecComm *comm);
int32_t exec_comm_replica(const ExecComm *comm);
int32_t exec_comm_stage(const ExecComm *comm);
/* The replica and the stage rank @rank runs. */
int32_t exec_comm_rank_replica(const ExecComm *comm, int32_t rank);
int32_t exec_comm_rank_stage(const ExecComm *comm, int32_t rank);
/* The rank that runs @stage of @replica, and @stage of this rank's replica. */
int32_t exec_comm_layout_rank(const ExecComm *comm, int32_t replica, int32_t stage);
int32_t exec_comm_stage_rank(const ExecComm *comm, int32_t stage);

/* --- while a replay runs --- */

/* Receives one message of a channel from rank @src with @tag. @data (@bytes): (transfer
 * full) g_free() it. Called on the host thread inside exec_comm_serve(). */
typedef void (*ExecCommRecvFn)(gpointer user_data, int32_t src, int32_t tag, void *data,
                               size_t bytes);
/* Called once when a replay stops (this process or a peer called exec_comm_stop()): wakes
 * every waiting worker. May run on any thread. */
typedef void (*ExecCommStopFn)(gpointer user_data);

/* Installs the receiver of @channel (EXEC_COMM_DATA, REPORT or REDUCE), and the stop
 * handler. Host thread, no replay running; @fn NULL removes it. */
void exec_comm_set_receiver(ExecComm *comm, ExecCommChannel channel, ExecCommRecvFn fn,
                            gpointer user_data);
void exec_comm_set_stop_handler(ExecComm *comm, ExecCommStopFn fn, gpointer user_data);

/* Host thread, before a replay: clears the stop signal; this rank will receive @n_reports
 * EXEC_COMM_REPORT messages during the replay, from rank @report_src (the rank a missed
 * deadline names; data-parallel replicas report from one rank each) (exec_comm_serve() waits
 * for them unless the replay stops; 0: none). */
void exec_comm_begin(ExecComm *comm, int32_t report_src, int32_t n_reports);

/* Any thread: queues @bytes of @data ((transfer full), g_malloc'd) for rank @dest on
 * @channel with @tag (0 <= tag <= exec_comm_tag_max()); exec_comm_serve() sends it. */
void exec_comm_post(ExecComm *comm, ExecCommChannel channel, int32_t dest, int32_t tag, void *data,
                    size_t bytes);
/* Any thread: stops the replay on every rank: peers are told, and the stop handler runs
 * here once. Idempotent until the next exec_comm_begin(). */
void exec_comm_stop(ExecComm *comm);
/* Any thread: records @error ((transfer full); only the first is kept) as this rank's
 * failure and stops the replay. exec_comm_agree() reports it. */
void exec_comm_fail(ExecComm *comm, GError *error);
/* Whether the replay was stopped (here or by a peer). */
gboolean exec_comm_stopped(ExecComm *comm);
/* Any thread: wakes exec_comm_serve() to look at @running again (a worker finished). */
void exec_comm_wake(ExecComm *comm);

/* A worker's wait for rank @peer while a replay runs (any thread but the host), under the
 * group's deadline as the host's own waits are: past run.comm_timeout_s the host probes the
 * peer; a peer that answers (it is waiting too, for the rank its answer names) buys one more
 * deadline and the probe's second; one that does not answer within the probe's second ends
 * the wait: the watch is marked expired and @wake(@user_data) runs once, on the host thread,
 * to wake the worker (it must not block). While this rank has watches, its own answer to a
 * probe names the peer of the oldest. So in a chain of waits, across replays, reductions and
 * all-gathers alike, the rank that waits for the stopped one reports first.
 * exec_comm_watch_end() removes the watch and returns whether it expired (the worker then
 * records its failure naming the peer, exec_comm_blame()); *@peer_waits_for (nullable): the
 * rank the peer's answer said it waits for, or -1. */
typedef struct _ExecCommWatch ExecCommWatch;
typedef void (*ExecCommWakeFn)(gpointer user_data);
ExecCommWatch *exec_comm_watch_begin(ExecComm *comm, int32_t peer, ExecCommWakeFn wake,
                                     gpointer user_data);
gboolean       exec_comm_watch_end(ExecComm *comm, ExecCommWatch *watch, int32_t *peer_waits_for);
/* Appends the end of a missed deadline's message to @out: "rank P may have died or hung", or,
 * when P answered that it waits for rank Q, "rank P answered that it waits for rank Q: rank Q
 * may have died or hung". */
void exec_comm_blame(GString *out, int32_t peer, int32_t peer_waits_for);

/* Host thread, while the workers of a replay run: sends what they post, hands arriving
 * messages to the receivers, and returns once *@running (the workers still running, atomic)
 * is 0, every posted message has been taken by its peer and the expected reports have
 * arrived, or once the replay was stopped and the workers are done. A peer that takes a
 * message or sends a report too late is recorded as a failure (exec_comm_fail()). */
void exec_comm_serve(ExecComm *comm, gint *running);

/* --- between replays (host thread; every rank makes the same calls in the same order) --- */

/* The ranks agree on how a phase ended (@what: e.g. "the end of a replay", for messages).
 * *@error is this rank's failure or NULL; a failure recorded with exec_comm_fail() counts
 * too. Every rank ends with the same *@error: the failure of the lowest rank that had one,
 * or NULL. Returns TRUE when no rank failed. When this rank's own failure is a peer that
 * did not answer (EXEC_ERROR_COMM), it returns that at once without waiting for the others
 * (exec_comm_finish() then aborts the job). NULL @comm: returns *@error == NULL. */
gboolean exec_comm_agree(ExecComm *comm, const char *what, GError **error);

/* Point-to-point on EXEC_COMM_HOST: sends @bytes of @data to @dest (returns once the peer has
 * taken it), receives exactly @bytes from @src into @data. @what names the message in errors
 * ("the activation of virtual stage 2 for validation"). Errors: EXEC_ERROR_COMM (deadline,
 * or a message of another size). */
gboolean exec_comm_send(ExecComm *comm, int32_t dest, int32_t tag, const void *data, size_t bytes,
                        const char *what, GError **error);
gboolean exec_comm_recv(ExecComm *comm, int32_t src, int32_t tag, void *data, size_t bytes,
                        const char *what, GError **error);
/* @root's @bytes of @data to every rank. Errors: EXEC_ERROR_COMM. NULL @comm: nothing. */
gboolean exec_comm_bcast(ExecComm *comm, int32_t root, void *data, size_t bytes, const char *what,
                         GError **error);
/* Every rank's @mine (any size) on @root: a (size) array of GBytes (transfer full) indexed by
 * rank on @root, an empty array elsewhere; every rank's on every rank for allgather.
 * Returns NULL with EXEC_ERROR_COMM. NULL @comm: an array of @mine alone. */
GPtrArray *exec_comm_gather(ExecComm *comm, int32_t root, GBytes *mine, const char *what,
                            GError **error);
GPtrArray *exec_comm_allgather(ExecComm *comm, GBytes *mine, const char *what, GError **error);

/* Collective: the offset to add to this rank's CLOCK_MONOTONIC (ns) to read rank 0's clock,
 * estimated from the quickest of a few round trips to rank 0 (0 on rank 0); *@bound_ns
 * (nullable) is the estimate's largest error, half that round trip. Times of different
 * ranks corrected by it share one timeline, on one node or several. Errors: EXEC_ERROR_COMM.
 */
gboolean exec_comm_clock_offset(ExecComm *comm, int64_t *offset_ns, int64_t *bound_ns,
                                GError **error);

G_END_DECLS
