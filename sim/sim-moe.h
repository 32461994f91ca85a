/* SPDX-License-Identifier: MIT
 * sim-moe.h: what a mixture-of-experts layer costs the analytic model beyond its FLOPs: the
 * width the expert matrix products run at, and the expert all-to-alls' exposed
 * time with or without overlap (docs/cost-model.md, Multi-head latent attention and mixtures of
 * experts). Pure functions of their arguments.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-scenario.h"

G_BEGIN_DECLS

/* The width at which the kernel-efficiency curve's width term charges an expert's matrix
 * products: w = 2 h f_e / (h + f_e), the harmonic mean of its two sides (h when f_e = h). An
 * expert of f_e < h moves as many bytes of memory-bound work per token (permutation,
 * activation, routing weights) over fewer GEMM FLOPs (sim_cost_matrix_time_factor()). */
double sim_moe_expert_width(double hidden, double expert_ffn_hidden);

/* All-to-all time charged to one pass of an MoE layer: @a2a_ns, every dispatch and combine of
 * the pass, on the compute stream. Of it, the share @alltoall_eff is the bytes on the wire
 * at the links' bandwidth; the rest is the work around them on the GPU's own SMs
 * (hardware.alltoall_eff). With @overlap (parallel.moe_a2a_overlap) the transfers run under
 * @hiding_ns of another micro-batch's compute (the paired forward or backward of the same
 * layer) and only their excess is charged; the SM work stays:
 * a2a - min(alltoall_eff x a2a, hiding). Rounded to the nearest ns. */
int64_t sim_moe_a2a_exposed_ns(int64_t a2a_ns, double alltoall_eff, double hiding_ns,
                               gboolean overlap);

/* The bytes one GPU sends in one all-to-all of an expert-parallel group of EP ranks,
 * @in_node of them on its node (sim_layout_expert_ranks_in_node()), @bytes being its K routed
 * copies of its tokens, into *@intra (to its node) and *@inter (to other nodes). The
 * all-to-all dispatcher sends every copy to its expert's rank: (in_node - 1) / EP and
 * (EP - in_node) / EP of @bytes. The fused dispatchers (deepep, hybridep) send a token once
 * to each other node holding any of its K experts and fan it out there over the node's links:
 * *@inter = @bytes / K x (n - 1) (1 - C(E - E/n, K) / C(E, K)) over n = EP / in_node nodes
 * with E/n experts each (the expected other nodes a token's K distinct experts reach, the
 * load balanced), and every copy but the one landing on the receiving GPU itself crosses its
 * node: *@intra = @bytes (in_node - 1) / in_node. Inside one node (in_node = EP) both give
 * the all-to-all dispatcher's bytes. */
void sim_moe_a2a_bytes(const PpScenario *scenario, int64_t in_node, double bytes, double *intra,
                       double *inter);

/* Whether the host waits for the GPU once per MoE layer forward: Megatron's all-to-all
 * dispatcher (parallel.moe_dispatcher = alltoall) dropless copies the per-expert token counts
 * to the host (the all-to-all's split sizes, the experts' row counts) and synchronises on
 * them before the expert all-to-all; the fused dispatchers (deepep, hybridep) and a capacity
 * factor (parallel.moe_capacity_factor > 0: fixed splits) never wait. What the wait costs is
 * the operator model's: the host issues the rest of the layer with no lead on the GPU
 * (sim-cost-ops.h, SimCostOps). */
gboolean sim_moe_dispatcher_syncs(const PpScenario *scenario);

G_END_DECLS
