/* SPDX-License-Identifier: MIT
 * exec-comm-layout.c: which replica and stage each rank of the process group runs
 * (exec-comm.h, replicas): rank = stage x D + replica, D = 1 until exec_comm_set_replicas().
 */
#include "exec-comm-private.h"

#include "pp-error.h"

void exec_comm_set_replicas(ExecComm *comm, int32_t replicas) {
    PP_ASSERT(replicas >= 1);
    if (comm == NULL) {
        PP_ASSERT(replicas == 1);
        return;
    }
    PP_ASSERT(comm->size % replicas == 0);
    comm->replicas = replicas;
}

int32_t exec_comm_replicas(const ExecComm *comm) {
    return comm ? comm->replicas : 1;
}

int32_t exec_comm_rank_replica(const ExecComm *comm, int32_t rank) {
    PP_ASSERT(rank >= 0 && rank < exec_comm_size(comm));
    return rank % exec_comm_replicas(comm);
}

int32_t exec_comm_rank_stage(const ExecComm *comm, int32_t rank) {
    PP_ASSERT(rank >= 0 && rank < exec_comm_size(comm));
    return rank / exec_comm_replicas(comm);
}

int32_t exec_comm_replica(const ExecComm *comm) {
    return exec_comm_rank_replica(comm, exec_comm_rank(comm));
}

int32_t exec_comm_stage(const ExecComm *comm) {
    return exec_comm_rank_stage(comm, exec_comm_rank(comm));
}

int32_t exec_comm_layout_rank(const ExecComm *comm, int32_t replica, int32_t stage) {
    int32_t d = exec_comm_replicas(comm);
    PP_ASSERT(replica >= 0 && replica < d && stage >= 0 && stage < exec_comm_size(comm) / d);
    return stage * d + replica;
}

int32_t exec_comm_stage_rank(const ExecComm *comm, int32_t stage) {
    return exec_comm_layout_rank(comm, exec_comm_replica(comm), stage);
}
