/* SPDX-License-Identifier: MIT
 * exec-grad-path.h: which path a GPU backend's gradient reduction between the replicas of a
 * stage takes (docs/design.md §5.11), decided once when the backend is built from facts every
 * rank of the group has (each rank's host and physical device, gathered from all): NCCL when
 * the build has it and every replica of the stage runs on a device of its own, the host-staged
 * path (grads() and exec-reduce.c over the process group) otherwise. Pure: no device, no
 * group; host-only tests check the rule. Internal to libppexec.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef enum {
    EXEC_GRAD_PATH_NONE, /* one replica: nothing to reduce */
    EXEC_GRAD_PATH_HOST, /* device -> pinned host -> exec-reduce.c over MPI -> device at U */
    EXEC_GRAD_PATH_NCCL, /* on the device: NCCL all-gather + a sum in replica order */
    EXEC_GRAD_PATH_N
} ExecGradPath;

/* Bytes of a host name in ExecGradPlace, its NUL included (a longer name is cut). */
#define EXEC_GRAD_HOST_BYTES 64

/* Where one rank computes: plain bytes, the same on every rank once gathered. */
typedef struct {
    char    host[EXEC_GRAD_HOST_BYTES]; /* the node's host name, NUL-terminated */
    uint8_t device_uuid[16];            /* the physical device (cudaDeviceProp.uuid): two
                                           processes see one GPU under different ids when
                                           CUDA_VISIBLE_DEVICES differs, never two GPUs
                                           under one uuid */
} ExecGradPlace;

/* Fills @place from @host (cut to fit) and the 16 bytes of @device_uuid. */
void exec_grad_place_init(ExecGradPlace *place, const char *host, const uint8_t *device_uuid);

/* The path of a stage whose @replicas replicas compute at @places (replicas), in replica
 * order, in a build with NCCL (@have_nccl) or without: NONE for one replica; NCCL when
 * @have_nccl and no two places are the same device on the same host (NCCL cannot put two
 * ranks of one communicator on one device); HOST otherwise. */
ExecGradPath exec_grad_path_choose(gboolean have_nccl, const ExecGradPlace *places,
                                   int32_t replicas);

/* "none", "host" or "nccl". (transfer none: static) */
const char *exec_grad_path_name(ExecGradPath path);

G_END_DECLS
