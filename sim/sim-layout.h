/* SPDX-License-Identifier: MIT
 * sim-layout.h: the parallel layout around the simulated pipeline as the analytic cost model
 * sees it: which node each stage's GPUs sit on, what a ring collective costs on the link it
 * uses, and Korthikanti et al.'s per-layer activation bytes and recomputation FLOPs under
 * tensor and sequence parallelism. Pure functions of the scenario; docs/cluster.md states the
 * formulas and where they come from.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-scenario.h"

G_BEGIN_DECLS

/* Ranks are numbered tensor innermost, then context, then data replica, then pipeline stage
 * (Megatron's order): GPU (t, c, d, s) is rank t + T (c + C (d + D s)), and rank r sits on
 * node r / gpus_per_node. */
typedef struct {
    int32_t n_stages;           /* N */
    int32_t data;               /* D */
    int32_t tensor;             /* T */
    int32_t context;            /* C */
    int64_t gpus_per_node;      /* G */
    double  intra_bytes_per_ns; /* link inside a node; 0: latency only */
    int64_t intra_latency_ns;
    double  inter_bytes_per_ns; /* one GPU's link to other nodes; 0: latency only */
    int64_t inter_latency_ns;
    double  dp_bytes_per_ns; /* the data-parallel collectives' bus bandwidth; 0: the links' */
    int32_t nics_per_node;   /* NICs a collective spanning nodes drives at once */
    int64_t collective_ns;   /* fixed cost of one collective (hardware.collective_us) */
} SimLayout;

/* Fills @layout from the scenario's [parallel] and [hardware] (links 0 without [hardware]). */
void sim_layout_init(SimLayout *layout, const PpScenario *scenario);

/* The bandwidth a collective of the data-parallel group moves its bytes at: the measured bus
 * bandwidth when the scenario gives one (hardware.allreduce_busbw_gbps), else the intra-node
 * link when @intra and the inter-node one otherwise. */
double sim_layout_dp_bytes_per_ns(const SimLayout *layout, gboolean intra);

/* Node that holds every GPU of @stage (ranks [T C D s, T C D (s + 1))), or -1 when they span
 * nodes. A hop between stages a and b stays inside a node exactly when both return the same
 * node >= 0. */
int64_t sim_layout_stage_node(const SimLayout *layout, int32_t stage);

/* TRUE when every tensor group sits inside one node (T <= G and T divides G). */
gboolean sim_layout_tensor_intra(const SimLayout *layout);
/* The bandwidth a tensor group's ring moves its bytes at: the intra-node link inside a node;
 * spanning nodes, the node's G ranks of the group cross over min(nics_per_node, G) NICs at
 * internode_gbps each, capped by the intra-node link (NCCL's rings, one per NIC rail). */
double sim_layout_tensor_bytes_per_ns(const SimLayout *layout);
/* TRUE when every context-parallel ring (C ranks T apart) sits inside one node (T C <= G and
 * T C divides G); else its hops cross nodes. */
gboolean sim_layout_context_intra(const SimLayout *layout);
/* The bandwidth one hop of a context-parallel ring that crosses nodes moves its bytes at: the
 * node's min(nics_per_node, G) NICs at internode_gbps each are shared by the G / r rings whose
 * r ranks sit on the node and cross at once (r = min(C, G / T), at least 1), so one ring gets
 * its ranks' own share, r / G of them, at least one NIC, and at most the intra-node link the
 * bytes cross to reach the other NICs (as the tensor group's, sim_layout_tensor_bytes_per_ns(),
 * where r = G). */
double sim_layout_context_bytes_per_ns(const SimLayout *layout);

/* Nodes a group of @ranks ranks @stride apart (consecutive groups tiling the ranks) spans: 1
 * when its span @stride x @ranks fits in one node and divides it (or @ranks = 1); 2 when it
 * fits but does not divide it (some groups straddle a boundary); else @ranks over its ranks
 * per node (G / stride, at least 1), rounded up. */
int64_t sim_layout_group_nodes(const SimLayout *layout, int32_t ranks, int64_t stride);

/* What a ring collective does, as NCCL counts its steps. */
typedef enum {
    SIM_LAYOUT_RING_ALLREDUCE, /* one all-reduce: 2 (r - 1) steps */
    SIM_LAYOUT_RING_PAIR,      /* a reduce-scatter and an all-gather: two collectives of r - 1 */
    SIM_LAYOUT_RING_GATHER,    /* one all-gather or reduce-scatter: r - 1 steps */
} SimLayoutRing;

/* Multi-node ring all-reduces pay their latency this many times over (NCCL's "plateau effect
 * of ring" on compute capability 8.0 and later). */
#define SIM_LAYOUT_RING_PLATEAU 1.4

/* A ring collective of @kind over @ranks ranks on @nodes nodes, as NCCL's ring model prices it
 * (NVIDIA/nccl src/graph/tuning.cc at b6475625, ncclTopoTuneModel and ncclTopoGetAlgoTime):
 * collective_ns per collective, then its steps' latencies, each step moving bytes / ranks at
 * @bytes_per_ns (0: latency only). Of an all-reduce's 2 (r - 1) steps 2 nodes cross nodes at
 * the inter-node latency (all of them at most) and the others stay inside at the intra-node
 * one, and across nodes its latency counts SIM_LAYOUT_RING_PLATEAU times; of a gather's r - 1
 * steps nodes - 1 cross. Rounded to the nearest ns, at most PP_CHECKED_MAX; 0 for one rank. */
int64_t sim_layout_ring_ns(const SimLayout *layout, SimLayoutRing kind, int32_t ranks,
                           int64_t nodes, double bytes, double bytes_per_ns);

/* Ring all-reduce of @bytes over @ranks ranks on a link of @bytes_per_ns and @latency_ns:
 * 2 (ranks - 1) steps of latency + bytes / (ranks bw), rounded to the nearest ns; 0 for one
 * rank. A reduce-scatter plus an all-gather (sequence parallelism, ZeRO-1) moves the same
 * bytes in the same steps and costs the same. */
int64_t sim_layout_allreduce_ns(int32_t ranks, double bytes, double bytes_per_ns,
                                int64_t latency_ns);

/* Ranks of an expert-parallel group of @ep ranks @expert_tensor apart on one node, this GPU
 * included: the group spans expert_tensor x ep consecutive ranks (Megatron's expert layout:
 * expert tensor innermost), inside a node when that fits in one (<= G and dividing it), so
 * ep; else min(ep, G / expert_tensor). */
int64_t sim_layout_expert_ranks_in_node(const SimLayout *layout, int32_t ep, int32_t expert_tensor);

/* One all-to-all of an expert-parallel group whose GPU sends @intra_bytes to ranks on its
 * own node and @inter_bytes to other nodes (sim_moe_a2a_bytes()), both at once: the fixed
 * collective_ns + the latency of the slowest link used (the inter-node one when
 * @inter_bytes > 0) + the larger of the two shares' transfer times, rounded to the nearest
 * ns. Every GPU of the node sends its inter-node share at once, each through its own NIC
 * (internode_gbps), so the node's NICs are all in use without a further factor. */
int64_t sim_layout_alltoall_ns(const SimLayout *layout, double intra_bytes, double inter_bytes);

/* Forward collectives one layer runs per micro-batch with tensor parallelism: 2 (Megatron's
 * two all-reduces, or with sequence parallelism two all-gather + reduce-scatter pairs); the
 * input-gradient backward runs as many, and a fully recomputed forward repeats them. */
#define SIM_LAYOUT_TP_COLLECTIVES_PER_PASS 2

G_END_DECLS
