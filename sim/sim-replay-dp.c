/* SPDX-License-Identifier: MIT
 * sim-replay-dp.c: the reduction between data-parallel replicas as a measured trace shows it
 * and as the link model predicts it (sim-replay-dp.h).
 */
#include "sim-replay-dp.h"

#include <math.h>
#include <stdlib.h>

#include "pp-memory.h"
#include "pp-partition.h"
#include "sim-layout.h"

static int sim_replay_dp_cmp_row(const void *a, const void *b) {
    const SimReplayDpRow *x = a, *y = b;
    if (x->u_id != y->u_id)
        return (x->u_id > y->u_id) - (x->u_id < y->u_id);
    return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

/* The flat id of the op before @id in its stage's program, or -1 when @id is the first. */
static int32_t sim_replay_dp_prev(const PpSchedule *sched, int32_t id) {
    for (int32_t s = 0; s < sched->n_stages; s++)
        if (id >= sched->op_offset[s] && id < sched->op_offset[s + 1])
            return id > sched->op_offset[s] ? id - 1 : -1;
    return -1;
}

void sim_replay_dp_sync(const PpSchedule *sched, const int64_t *start_ns, const int64_t *end_ns,
                        SimReplayDpRow *rows, int64_t n_rows, int64_t *sync_ns) {
    for (int32_t id = 0; id < pp_schedule_n_ops_total(sched); id++)
        sync_ns[id] = 0;
    if (n_rows > 0) /* rows may be NULL when there are none, which qsort() may not take */
        qsort(rows, (size_t)n_rows, sizeof *rows, sim_replay_dp_cmp_row);
    /* Rows sorted by (U, start): a sweep keeps the end of the union so far. */
    int64_t covered_ns = G_MININT64;
    for (int64_t i = 0; i < n_rows; i++) {
        const SimReplayDpRow *row = &rows[i];
        int32_t               prev = sim_replay_dp_prev(sched, row->u_id);
        int64_t               lo = MAX(row->start_ns, prev >= 0 ? end_ns[prev] : G_MININT64);
        int64_t               hi = MIN(row->end_ns, start_ns[row->u_id]);
        if (i == 0 || rows[i - 1].u_id != row->u_id)
            covered_ns = G_MININT64;
        lo = MAX(lo, covered_ns);
        if (hi <= lo)
            continue;
        sync_ns[row->u_id] += hi - lo;
        covered_ns = hi;
    }
}

int64_t *sim_replay_dp_grad_bytes(const PpScenario *scenario, GError **error) {
    const PpModelParams *m = &scenario->model;
    const int32_t        n_stages = scenario->pipeline.stages, n_chunks = scenario->pipeline.chunks;
    const int32_t        n_vstages = n_stages * n_chunks;
    /* The executor's split: FLOPs only, no memory limit. */
    g_autoptr(PpPartition) part = pp_partition_new_gpt2_flops(
        m->layers, m->hidden, m->seq_len, m->vocab, n_vstages, pp_scenario_partition_mode(scenario),
        scenario->run.layers_per_stage, error);
    if (part == NULL)
        return NULL;
    PpMemoryShape shape;
    PpMemoryModel mem;
    pp_scenario_memory_shape(scenario, &shape);
    pp_memory_model(&shape, &mem);
    const PpPlacement placement = scenario->pipeline.kind->placement;
    int64_t          *bytes = g_new0(int64_t, n_stages);
    for (int32_t vs = 0; vs < n_vstages; vs++) {
        int32_t stage, chunk;
        pp_placement_vstage(placement, n_stages, vs, &stage, &chunk);
        int32_t begin = part->layer_begin[vs];
        double  params = pp_memory_vstage_params(&mem, begin, part->layer_end[vs] - begin, vs == 0,
                                                 vs == n_vstages - 1);
        bytes[stage] += llround(params * SIM_REPLAY_DP_GRAD_BYTES_PER_PARAM);
    }
    return bytes;
}

int64_t sim_replay_dp_model_ns(const PpScenario *scenario, int32_t replicas, int64_t bytes) {
    SimLayout layout;
    sim_layout_init(&layout, scenario);
    /* the [hardware] link pacer-bench-comm fits, at the bus bandwidth when one is set */
    const double bytes_per_ns = sim_layout_dp_bytes_per_ns(&layout, TRUE);
    if (!(bytes_per_ns > 0.0))
        return -1;
    return sim_layout_allreduce_ns(replicas, (double)bytes, bytes_per_ns, layout.intra_latency_ns);
}
