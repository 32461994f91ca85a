/* SPDX-License-Identifier: MIT
 * sim-replay-dp.h: the data-parallel part of `pacer-sim replay` (sim-replay.c): what a trace's
 * reduce rows say the gradient reduction between replicas cost, how many bytes pacer-train's
 * CPU executor reduces per stage, and what the link model predicts for them.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-scenario.h"
#include "pp-schedule.h"
#include "pp-trace.h"

G_BEGIN_DECLS

/* Bytes per parameter of the gradients pacer-train reduces between replicas (fp32). */
#define SIM_REPLAY_DP_GRAD_BYTES_PER_PARAM 4

/* A reduce row of one replica, matched to the U it precedes (flat op id). */
typedef struct {
    int32_t u_id;
    int64_t start_ns, end_ns;
} SimReplayDpRow;

/* The exposed reduction before each U of @sched on one replica, by flat op id: @start_ns and
 * @end_ns (n_ops) are that replica's measured op times, @rows (n_rows) its reduce rows (any
 * order, any number per U). For the U of flat id k, its rows are clipped to the interval from
 * the end of the op before it in the stage's program (the stage's first op: no clip) to the
 * U's start, and @sync_ns[k] is the length of their union: the time the reduction kept the U
 * waiting, however many rows it wrote and whether they overlapped compute (pacer-train's
 * overlapped reduction writes one row per gradient bucket, the first ones during the stage's
 * last backward: only their tail after it counts). 0 on every other op and on a U without
 * rows. Sorts @rows. */
void sim_replay_dp_sync(const PpSchedule *sched, const int64_t *start_ns, const int64_t *end_ns,
                        SimReplayDpRow *rows, int64_t n_rows, int64_t *sync_ns);

/* Bytes of the gradients pacer-train's CPU executor reduces for each stage of @scenario:
 * fp32 (SIM_REPLAY_DP_GRAD_BYTES_PER_PARAM) over the parameters of the stage's virtual
 * stages, split as the executor splits them (pp_partition_new() on FLOPs alone: every block
 * 24TC^2 + 4T^2C, the head 2TCV on the last virtual stage; run.layers_per_stage and
 * pipeline.partition as given), counted by the memory model (pp_memory_vstage_params():
 * embeddings on virtual stage 0, final LayerNorm and untied head on the last).
 * Returns: (transfer full) (n_stages), or NULL with @error set by pp_partition_new(). */
int64_t *sim_replay_dp_grad_bytes(const PpScenario *scenario, GError **error);

/* The model's reduction of @bytes among @replicas over @scenario's [hardware] link
 * (link_latency_us, and allreduce_busbw_gbps when set, else link_gbps; the figures
 * pacer-bench-comm fits): a reduce-scatter and an all-gather, sim_layout_allreduce_ns()
 * (2 (D - 1) (latency + bytes / D / bandwidth): for D = 2 exactly the executor's two rounds of
 * one message each way). -1 when the scenario has no bandwidth for it. */
int64_t sim_replay_dp_model_ns(const PpScenario *scenario, int32_t replicas, int64_t bytes);

G_END_DECLS
