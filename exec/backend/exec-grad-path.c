/* SPDX-License-Identifier: MIT
 * exec-grad-path.c: the choice between the NCCL and the host-staged gradient reduction
 * (exec-grad-path.h).
 */
#include "exec-grad-path.h"

#include <string.h>

#include "pp-error.h"

void exec_grad_place_init(ExecGradPlace *place, const char *host, const uint8_t *device_uuid) {
    memset(place, 0, sizeof *place);
    g_strlcpy(place->host, host, sizeof place->host);
    memcpy(place->device_uuid, device_uuid, sizeof place->device_uuid);
}

/* Whether @a and @b are one device: the same uuid on the same host. */
static gboolean exec_grad_place_same(const ExecGradPlace *a, const ExecGradPlace *b) {
    return strncmp(a->host, b->host, sizeof a->host) == 0 &&
           memcmp(a->device_uuid, b->device_uuid, sizeof a->device_uuid) == 0;
}

ExecGradPath exec_grad_path_choose(gboolean have_nccl, const ExecGradPlace *places,
                                   int32_t replicas) {
    PP_ASSERT(replicas >= 1);
    if (replicas == 1)
        return EXEC_GRAD_PATH_NONE;
    if (!have_nccl)
        return EXEC_GRAD_PATH_HOST;
    for (int32_t a = 0; a < replicas; a++)
        for (int32_t b = a + 1; b < replicas; b++)
            if (exec_grad_place_same(&places[a], &places[b]))
                return EXEC_GRAD_PATH_HOST;
    return EXEC_GRAD_PATH_NCCL;
}

const char *exec_grad_path_name(ExecGradPath path) {
    static const char *const names[EXEC_GRAD_PATH_N] = {"none", "host", "nccl"};
    PP_ASSERT(path >= 0 && path < EXEC_GRAD_PATH_N);
    return names[path];
}
