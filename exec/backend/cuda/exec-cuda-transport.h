/* SPDX-License-Identifier: MIT
 * exec-cuda-transport.h: the CUDA backend's two transports (exec-transport.h: the interface,
 * its ExecQueue arguments are the stages' cudaStream_t): one process (exec-cuda-transport.c:
 * buffer handover on one device, a peer copy on the producer's copy stream between devices),
 * and between processes staged through host memory and the process group
 * (exec-cuda-transport-host.c). Internal to libppexec (CUDA builds only).
 */
#pragma once

#include <cuda_runtime_api.h>
#include <glib.h>
#include <stdint.h>

#include "exec-comm.h"
#include "exec-cuda-plan.h"
#include "exec-transport.h"

G_BEGIN_DECLS

/* The transport of one process: per virtual stage and kind a pool of the plan's inbox slots on
 * the consumer's device (and as many staging slots on the producer's device when the two
 * devices differ), per stage a host inbox, per producing stage a copy stream. @vstage_stage:
 * (plan->n_vstages) borrowed for the call. Enables peer access between the devices of
 * neighbouring stages where the hardware allows it (else the runtime stages peer copies
 * through the host). Returns: (transfer full), or NULL when device memory runs out (nothing
 * left allocated). */
ExecTransport *exec_cuda_transport_local_new(const ExecCudaPlan *plan, const int32_t *vstage_stage);

/* The transport of one process per stage (@comm: the group, size plan->n_stages; @local:
 * (plan->n_stages) the stages this process runs, borrowed for the call), staged through host
 * memory: per local stage a device buffer and a pinned host buffer each way, copies and
 * hand-offs on the stage's compute stream (the @stream the calls receive). Installs itself as
 * @comm's EXEC_COMM_DATA receiver (until free()). Works for any placement, also several
 * ranks on one device. Returns: (transfer full), or NULL when device or pinned host memory
 * runs out (nothing left allocated). */
ExecTransport *exec_cuda_transport_host_new(const ExecCudaPlan *plan, const int32_t *vstage_stage,
                                            ExecComm *comm, const gboolean *local);

G_END_DECLS
