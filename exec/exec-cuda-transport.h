/* SPDX-License-Identifier: MIT
 * exec-cuda-transport.h: the seam through which the CUDA backend's stages pass activations and
 * gradients: a producer takes a device buffer for a message to virtual stage X, writes it on
 * its stream and sends it; the consumer waits for it (host: until it is handed over; device:
 * its stream waits on the producer's event) and releases the buffer after reading. No call
 * waits for a device. Two implementations: one process (exec-cuda-transport.c: buffer
 * handover on one device, a peer copy on the producer's copy stream between devices), and
 * between processes staged through host memory and the process group
 * (exec-cuda-transport-host.c). Internal to libppexec (CUDA builds only).
 */
#pragma once

#include <cuda_runtime_api.h>
#include <glib.h>
#include <stdint.h>

#include "exec-comm.h"
#include "exec-cuda-plan.h"

G_BEGIN_DECLS

typedef enum {
    EXEC_CUDA_MSG_ACT,  /* activation (B, T, C) for F(mb, vstage) */
    EXEC_CUDA_MSG_GRAD, /* gradient (B, T, C) of vstage's output, for B/BW(mb, vstage) */
    EXEC_CUDA_MSG_N_KINDS
} ExecCudaMsgKind;

/* One message between taking its buffer and releasing it (the transport's own record). */
typedef struct _ExecCudaMsg ExecCudaMsg;

typedef struct _ExecCudaTransport    ExecCudaTransport;
typedef struct _ExecCudaTransportOps ExecCudaTransportOps;

struct _ExecCudaTransportOps {
    /* Producer's worker (its device current): a buffer of plan->msg_bytes on which work
     * enqueued on @stream after this call may write the message (kind, mb) for @vstage;
     * @stream is ordered after the buffer's previous reader. *@msg: the handle for send(). */
    void *(*take)(ExecCudaTransport *t, ExecCudaMsgKind kind, int32_t mb, int32_t vstage,
                  cudaStream_t stream, ExecCudaMsg **msg);
    /* Producer's worker: the work enqueued on @stream so far completes the message; hands it
     * to the consumer's worker (after a copy to the consumer's device when needed). */
    void (*send)(ExecCudaTransport *t, ExecCudaMsg *msg, cudaStream_t stream);
    /* Consumer's worker (its device current), for op @op ("F", "B", "BW": errors name it):
     * blocks the host until (kind, mb) for @vstage is handed over, then orders @stream after
     * it; *@data: the device buffer holding it, valid until release(). Returns FALSE (and
     * nothing) once the transport is aborted. */
    gboolean (*recv)(ExecCudaTransport *t, ExecCudaMsgKind kind, const char *op, int32_t mb,
                     int32_t vstage, cudaStream_t stream, ExecCudaMsg **msg, const void **data);
    /* Consumer's worker: the work enqueued on @stream so far is the last to read @msg. */
    void (*release)(ExecCudaTransport *t, ExecCudaMsg *msg, cudaStream_t stream);
    /* Consumer's worker, dynamic mode: files the messages that reached @stage (with @block,
     * after waiting for at least one). Returns FALSE once aborted. */
    gboolean (*poll)(ExecCudaTransport *t, int32_t stage, gboolean block);
    /* Consumer's worker, dynamic mode: whether (kind, mb) for @vstage has been filed. */
    gboolean (*has)(ExecCudaTransport *t, ExecCudaMsgKind kind, int32_t mb, int32_t vstage);
    /* Any thread: wakes every waiting consumer; recv() and poll() return FALSE until reset(). */
    void (*abort)(ExecCudaTransport *t);
    /* Host thread, no worker running: waits for the transport's own device work, drops the
     * messages an aborted replay left and frees every buffer. */
    void (*reset)(ExecCudaTransport *t);
    void (*free)(ExecCudaTransport *t);
};

struct _ExecCudaTransport {
    const ExecCudaTransportOps *ops;
};

/* The transport of one process: per virtual stage and kind a pool of the plan's inbox slots on
 * the consumer's device (and as many staging slots on the producer's device when the two
 * devices differ), per stage a host inbox, per producing stage a copy stream. @vstage_stage:
 * (plan->n_vstages) borrowed for the call. Enables peer access between the devices of
 * neighbouring stages where the hardware allows it (else the runtime stages peer copies
 * through the host). Returns: (transfer full), or NULL when device memory runs out (nothing
 * left allocated). */
ExecCudaTransport *exec_cuda_transport_local_new(const ExecCudaPlan *plan,
                                                 const int32_t      *vstage_stage);

/* The transport of one process per stage (@comm: the group, size plan->n_stages; @local:
 * (plan->n_stages) the stages this process runs, borrowed for the call), staged through host
 * memory: per local stage a device buffer and a pinned host buffer each way, copies and
 * hand-offs on the stage's compute stream (the @stream the calls receive). Installs itself as
 * @comm's EXEC_COMM_DATA receiver (until free()). Works for any placement, also several
 * ranks on one device. Returns: (transfer full), or NULL when device or pinned host memory
 * runs out (nothing left allocated). */
ExecCudaTransport *exec_cuda_transport_host_new(const ExecCudaPlan *plan,
                                                const int32_t *vstage_stage, ExecComm *comm,
                                                const gboolean *local);

G_END_DECLS
