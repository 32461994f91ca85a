/* SPDX-License-Identifier: MIT
 * exec-comm-mpi.c: the process group's primitives over MPI: one duplicate of MPI_COMM_WORLD
 * per channel, MPI_Isend for sends, MPI_Improbe + MPI_Imrecv for messages of any size from
 * any source, MPI_Test for both, MPI_Abort for the job. Messages over INT_MAX bytes travel as one
 * derived datatype (whole MiB blocks and the rest).
 */
#include "exec-comm-mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "exec-comm-private.h"
#include "pp-error.h"

typedef struct {
    ExecComm base;
    MPI_Comm channels[EXEC_COMM_N_CHANNELS];
} ExecCommMpi;

static ExecCommMpi *exec_comm_mpi(ExecComm *comm) {
    return (ExecCommMpi *)comm;
}

/* The (count, datatype) of @bytes: MPI_BYTE when the count fits an int, else one struct
 * type of whole MiB blocks plus the rest (*@derived: free it after the call). */
static void exec_comm_mpi_type(size_t bytes, int *count, MPI_Datatype *type, gboolean *derived) {
    *derived = bytes > INT_MAX;
    if (!*derived) {
        *count = (int)bytes;
        *type = MPI_BYTE;
        return;
    }
    const size_t block = 1 << 20;
    MPI_Datatype blocks;
    MPI_Type_contiguous((int)block, MPI_BYTE, &blocks);
    int          lengths[2] = {(int)(bytes / block), (int)(bytes % block)};
    MPI_Aint     offsets[2] = {0, (MPI_Aint)(bytes / block * block)};
    MPI_Datatype types[2] = {blocks, MPI_BYTE};
    MPI_Type_create_struct(2, lengths, offsets, types, type);
    MPI_Type_commit(type);
    MPI_Type_free(&blocks);
    *count = 1;
}

static gpointer exec_comm_mpi_isend(ExecComm *comm, ExecCommChannel channel, int32_t dest,
                                    int32_t tag, const void *data, size_t bytes) {
    MPI_Request *request = g_new(MPI_Request, 1);
    int          count;
    MPI_Datatype type;
    gboolean     derived;
    exec_comm_mpi_type(bytes, &count, &type, &derived);
    /* MPI_Isend's buffer is const since MPI-3. */
    MPI_Isend(data, count, type, dest, tag, exec_comm_mpi(comm)->channels[channel], request);
    if (derived)
        MPI_Type_free(&type);
    return request;
}

static gpointer exec_comm_mpi_irecv(ExecComm *comm, ExecCommChannel channel, int32_t src,
                                    int32_t tag, int32_t *from, int32_t *tag_out, void **data,
                                    size_t *bytes) {
    int         found = 0;
    MPI_Message message;
    MPI_Status  status;
    MPI_Improbe(src < 0 ? MPI_ANY_SOURCE : src, tag < 0 ? MPI_ANY_TAG : tag,
                exec_comm_mpi(comm)->channels[channel], &found, &message, &status);
    if (!found)
        return NULL;
    MPI_Count n = 0;
    MPI_Get_elements_x(&status, MPI_BYTE, &n);
    *bytes = (size_t)n;
    *data = g_malloc(MAX(*bytes, 1));
    *from = status.MPI_SOURCE;
    *tag_out = status.MPI_TAG;
    int          count;
    MPI_Datatype type;
    gboolean     derived;
    exec_comm_mpi_type(*bytes, &count, &type, &derived);
    MPI_Request *request = g_new(MPI_Request, 1);
    MPI_Imrecv(*data, count, type, &message, request);
    if (derived)
        MPI_Type_free(&type);
    return request;
}

static gboolean exec_comm_mpi_test(ExecComm *comm, gpointer request) {
    (void)comm;
    int done = 0;
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done)
        g_free(request);
    return done != 0;
}

static void exec_comm_mpi_abort(ExecComm *comm, int code) {
    (void)comm;
    /* Open MPI reports MPI_Abort on another path than this rank's stderr. */
    g_usleep(EXEC_COMM_LAST_WORDS_US);
    MPI_Abort(MPI_COMM_WORLD, code);
    abort(); /* MPI_Abort does not return */
}

static void exec_comm_mpi_free(ExecComm *comm) {
    ExecCommMpi *mpi = exec_comm_mpi(comm);
    /* MPI_Finalize waits for every rank. */
    ExecCommGuard *guard = exec_comm_guard_new(comm->rank, comm->size, exec_comm_timeout(comm),
                                               "MPI's shut-down (MPI_Finalize)");
    exec_comm_clear(comm);
    for (int ch = 0; ch < EXEC_COMM_N_CHANNELS; ch++)
        MPI_Comm_free(&mpi->channels[ch]);
    g_free(mpi);
    MPI_Finalize();
    exec_comm_guard_free(guard);
}

static const ExecCommOps exec_comm_mpi_ops = {
    .name = "mpi",
    .isend = exec_comm_mpi_isend,
    .irecv = exec_comm_mpi_irecv,
    .test = exec_comm_mpi_test,
    .abort = exec_comm_mpi_abort,
    .free = exec_comm_mpi_free,
};

/* Every message arrives in a new buffer (exec_comm_mpi_irecv) that its consumer frees. glibc
 * gives a block over its mmap threshold (at most 32 MiB by default) a new mapping each time,
 * and every page of it faults as the message is copied in: on a 2-core VM a 64 MiB message
 * then took 0.65 s one way instead of 16 ms (pacer-bench-comm). Served from the heap, freed
 * blocks are reused without faults; the process keeps at most its peak of messages in flight.
 * Blocks of 1 GiB and more still get their own mapping. The same holds for the blocks worker
 * threads allocate (the copy the gradient reduction posts, exec-reduce.c): a thread's own
 * arena grows in heaps of at most 64 MiB, and a heap its large block needed is unmapped when
 * the block is freed, so every post faulted its pages in again (up to 190 ms for a 57 MB part
 * on a 2-core VM, and the reduction of train-tiny's 2 replicas took 0.4 s instead of 0.1 s).
 * One arena for every thread keeps them on the main heap too; the workers allocate a few
 * blocks per op, so the arena's lock is not contended. */
#define EXEC_COMM_MPI_MMAP_THRESHOLD (1 << 30)

static void exec_comm_mpi_reuse_large_blocks(void) {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, EXEC_COMM_MPI_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, EXEC_COMM_MPI_MMAP_THRESHOLD);
    mallopt(M_ARENA_MAX, 1);
#endif
}

/* What a rank tells the others of its single-copy mechanism. */
typedef struct {
    int32_t node;     /* the lowest world rank on this rank's node */
    int32_t by_probe; /* 1: the probe's answer, 0: the caller's setting */
    char    mechanism[24];
} ExecCommMpiMechanism;

/* Every rank of a node must use one single-copy mechanism: a rank that asked for cma reads the
 * memory of a peer that asked for none, and Open MPI fails the job at its first large message
 * ("invalid bml for rdma get", with nothing of pacer's). Collective over the world, right
 * after MPI_Init (small messages never take the single copy): every rank learns of any node
 * whose ranks differ. Returns FALSE with EXEC_ERROR_COMM naming two such ranks and why. */
static gboolean exec_comm_mpi_same_mechanism(int rank, int size, const char *mechanism,
                                             gboolean by_probe, GError **error) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int32_t first = rank;
    MPI_Bcast(&first, 1, MPI_INT32_T, 0, node);
    MPI_Comm_free(&node);
    ExecCommMpiMechanism mine = {.node = first, .by_probe = by_probe};
    g_strlcpy(mine.mechanism, mechanism, sizeof mine.mechanism);
    g_autofree ExecCommMpiMechanism *all = g_new0(ExecCommMpiMechanism, size);
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                  MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) {
        const ExecCommMpiMechanism *a = &all[all[r].node];
        if (strcmp(a->mechanism, all[r].mechanism) == 0)
            continue;
        g_set_error(
            error, EXEC_ERROR, EXEC_ERROR_COMM,
            "the ranks of one node chose different shared-memory single-copy mechanisms for "
            "Open MPI (OMPI_MCA_btl_vader_single_copy_mechanism): rank %d %s (%s), rank %d %s "
            "(%s), and Open MPI would fail the job at its first large message. Where a rank's "
            "probe of process_vm_readv fails (a probe child killed, fork failing near a process "
            "limit, a per-process security policy), set the variable to none for every rank "
            "(mpirun -x OMPI_MCA_btl_vader_single_copy_mechanism=none)",
            all[r].node, a->mechanism, a->by_probe ? "its probe" : "set by the caller", r,
            all[r].mechanism, all[r].by_probe ? "its probe" : "set by the caller");
        return FALSE;
    }
    return TRUE;
}

gboolean exec_comm_mpi_new(int *argc, char ***argv, double timeout_s, ExecComm **comm,
                           GError **error) {
    *comm = NULL;
    int64_t launched = exec_comm_launched_size();
    if (launched < 2)
        return TRUE;
    exec_comm_test_stall("start");
    int64_t launcher = exec_comm_launcher_tie();
    /* Before MPI's threads and the workers exist, so that every thread takes the main arena. */
    exec_comm_mpi_reuse_large_blocks();
    /* Read by MPI_Init_thread. */
    gboolean         mechanism_set = FALSE;
    g_autofree char *mechanism = g_strdup(exec_comm_cma_choose(&mechanism_set));
    /* MPI_Init_thread and MPI_Comm_dup wait for every rank. */
    ExecCommGuard *guard =
        exec_comm_guard_new((int32_t)exec_comm_launched_rank(), (int32_t)launched, timeout_s,
                            "MPI's start-up (MPI_Init_thread, MPI_Comm_dup)");
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (provided < MPI_THREAD_FUNNELED) {
        exec_comm_guard_free(guard);
        MPI_Finalize();
        g_set_error(error, EXEC_ERROR, EXEC_ERROR_COMM,
                    "MPI provides thread level %d; pacer-train needs MPI_THREAD_FUNNELED (%d): "
                    "worker threads compute while the main thread makes every MPI call",
                    provided, MPI_THREAD_FUNNELED);
        return FALSE;
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        exec_comm_guard_free(guard);
        MPI_Finalize();
        return TRUE;
    }
    if (!exec_comm_mpi_same_mechanism(rank, size, mechanism, !mechanism_set, error)) {
        exec_comm_guard_free(guard);
        MPI_Finalize();
        return FALSE;
    }
    void *tag_ub = NULL;
    int   found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
    ExecCommMpi *mpi = g_new0(ExecCommMpi, 1);
    /* The standard guarantees 32767. */
    exec_comm_init(&mpi->base, &exec_comm_mpi_ops, rank, size, found ? *(int *)tag_ub : 32767);
    exec_comm_set_timeout(&mpi->base, timeout_s);
    mpi->base.launcher_pid = launcher;
    for (int ch = 0; ch < EXEC_COMM_N_CHANNELS; ch++)
        MPI_Comm_dup(MPI_COMM_WORLD, &mpi->channels[ch]);
    exec_comm_guard_free(guard);
    *comm = &mpi->base;
    return TRUE;
}
