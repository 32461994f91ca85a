/* SPDX-License-Identifier: MIT
 * sim-cost.h: the simulator's cost model. Every duration is integer nanoseconds, fixed
 * before the run: op durations per (stage, chunk), the cost of a hop between devices, and
 * the memory model's byte counts. Built from a scenario (explicit [costs] or the analytic
 * FLOP model) or directly (tests).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-scenario.h"
#include "pp-schedule.h"

G_BEGIN_DECLS

typedef struct {
    int32_t  n_stages;
    int32_t  n_chunks;
    int64_t *f_ns;          /* (n_stages * n_chunks) forward of one micro-batch, one chunk */
    int64_t *b_ns;          /* (n_stages * n_chunks) input-gradient backward B */
    int64_t *w_ns;          /* (n_stages * n_chunks) weight-gradient backward W; BW = B + W */
    int64_t *u_ns;          /* (n_stages) optimizer update */
    int64_t  comm_latency_ns;     /* per cross-device hop */
    double   comm_bytes_per_ns;   /* link bandwidth; 0 = latency only */
    int64_t  act_msg_bytes;       /* bytes of one activation / gradient message */
    /* memory model, bytes per stage (index: stage) */
    int64_t *static_bytes;  /* (n_stages) params + grads + optimizer state, one weight copy */
    int64_t *weight_copy_bytes; /* (n_stages) bytes of one extra stashed weight version */
    int64_t *act_bytes;     /* (n_stages * n_chunks) activations held per live (mb, chunk):
                               +act at F; non-split: -act at BW; split: -act_b at B, -act_w at W */
    int64_t *act_b_bytes;   /* (n_stages * n_chunks) freed at B (split backward) */
    int64_t  tokens_per_mb; /* tokens in one micro-batch (throughput reports) */
    int64_t  samples_per_mb;
    double   flops_per_mb;  /* model FLOPs of one micro-batch fwd+bwd, all stages (MFU) */
    double   peak_flops;    /* one device; 0 = unknown (no MFU) */
} SimCostModel;

/* Uniform costs for tests: every (stage, chunk) has the same f/b/w, comm is latency only,
 * memory: act_bytes 1 per live (mb, chunk) unit, static 0. Returns: (transfer full). */
SimCostModel *sim_cost_new_uniform(int32_t n_stages, int32_t n_chunks, int64_t f_ns,
                                   int64_t b_ns, int64_t w_ns, int64_t comm_ns);
/* From a scenario: [costs] when set (full-stage times split evenly over chunks), else the
 * analytic model. Returns: (transfer full), or NULL with @error set. */
SimCostModel *sim_cost_new_from_scenario(const PpScenario *scenario, GError **error);
void          sim_cost_free(SimCostModel *cost);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimCostModel, sim_cost_free)

G_END_DECLS
