/* SPDX-License-Identifier: MIT
 * pp-types.h: the vocabulary shared by the schedule core, the simulator and the executor.
 * Ops, op references and the time/size conventions (simulated time is int64_t nanoseconds).
 */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One op of a stage's program. F/B/W/BW act on one (micro-batch, chunk); U is the stage's
 * optimizer update (its local weight version goes up by one when U ends). */
typedef enum {
    PP_OP_FORWARD,       /* F: forward of (mb, chunk) */
    PP_OP_BACKWARD,      /* B: input-gradient backward (zero-bubble split) */
    PP_OP_WEIGHT,        /* W: weight-gradient backward (zero-bubble split) */
    PP_OP_BACKWARD_FULL, /* BW: fused backward (B and W together), the default */
    PP_OP_UPDATE,        /* U: optimizer step of the whole stage (mb = -1, chunk = -1) */
    PP_OP_N_KINDS
} PpOpKind;

/* Short names used in CSV files, traces and messages: "F", "B", "W", "BW", "U". */
const char *pp_op_kind_name(PpOpKind kind);
/* Parses a short name; returns PP_OP_N_KINDS when @name is not one. */
PpOpKind pp_op_kind_from_name(const char *name);

/* Plain data: one op in a stage program. */
typedef struct {
    PpOpKind kind;
    int32_t  stage; /* device (pipeline stage) that runs the op, 0..n_stages-1 */
    int32_t  mb;    /* micro-batch index over the whole run, 0..n_mb-1; -1 for U */
    int32_t  chunk; /* model chunk on this stage (virtual stage), 0..n_chunks-1; -1 for U */
    int32_t  step;  /* F/B/W/BW: optimizer step the micro-batch belongs to (flush/2bw: mb / m,
                       async: the update that will consume its gradient on stage 0's count);
                       U: index of this update on its stage, 0.. */
} PpOp;

/* The in-flight rule: a (mb, chunk) unit is in flight on its stage from its F until its last
 * backward (BW, or W when the backward is split: W still reads the stored activations).
 * Returns +1 for the op that opens a unit (F), -1 for one that closes it (BW, W), else 0
 * (B, U). Every in-flight count (validation, the simulator's running count and memory, the
 * executor's activation slots) adds these. */
static inline int32_t pp_op_inflight_change(PpOpKind kind) {
    switch (kind) {
    case PP_OP_FORWARD:
        return 1;
    case PP_OP_WEIGHT:
    case PP_OP_BACKWARD_FULL:
        return -1;
    default:
        return 0;
    }
}

/* Reference to an op: position @index in the program of @stage. */
typedef struct {
    int32_t stage;
    int32_t index;
} PpOpRef;

#ifdef __cplusplus
}
#endif
