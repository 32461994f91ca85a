/* SPDX-License-Identifier: MIT
 * exec-partition.c: layer-to-virtual-stage partition. A dynamic program over (first k
 * virtual stages, first j blocks) finds the smallest achievable maximum stage cost; a second,
 * suffix table then lets a front-to-back pass give each stage an even share of the remaining
 * blocks within what the bound allows, which makes the choice among optimal partitions
 * deterministic.
 */
#include "exec-partition.h"

#include "pp-error.h"

int64_t exec_partition_layer_flops(int32_t hidden, int32_t seq_len) {
    int64_t c = hidden, t = seq_len;
    return 24 * t * c * c + 4 * t * t * c;
}

int64_t exec_partition_head_flops(int32_t hidden, int32_t seq_len, int32_t vocab) {
    return 2 * (int64_t)seq_len * hidden * vocab;
}

/* Forward FLOPs of virtual stage @vs holding @n blocks. */
static int64_t exec_partition_stage_cost(const ExecPartitionParams *p, int32_t vs, int32_t n) {
    int64_t cost = n * exec_partition_layer_flops(p->hidden, p->seq_len);
    if (vs == p->n_vstages - 1)
        cost += exec_partition_head_flops(p->hidden, p->seq_len, p->vocab);
    return cost;
}

/* Fills layer counts @n (n_vstages) balanced by cost. */
static void exec_partition_balance(const ExecPartitionParams *p, int32_t *n) {
    int32_t V = p->n_vstages, L = p->n_layers;
    /* rest[k * (L + 1) + j]: smallest max cost of vstages k..V-1 covering blocks j..L-1,
     * each vstage holding >= 1 block; INT64_MAX when impossible. */
    g_autofree int64_t *rest = g_new(int64_t, (size_t)(V + 1) * (L + 1));
    for (int32_t j = 0; j <= L; j++)
        rest[(size_t)V * (L + 1) + j] = j == L ? 0 : INT64_MAX;
    for (int32_t k = V - 1; k >= 0; k--) {
        for (int32_t j = 0; j <= L; j++) {
            int64_t best = INT64_MAX;
            for (int32_t take = 1; j + take <= L; take++) {
                int64_t tail = rest[(size_t)(k + 1) * (L + 1) + j + take];
                if (tail == INT64_MAX)
                    continue;
                int64_t here = exec_partition_stage_cost(p, k, take);
                int64_t worst = here > tail ? here : tail;
                if (worst < best)
                    best = worst;
            }
            rest[(size_t)k * (L + 1) + j] = best;
        }
    }
    int64_t bound = rest[0];
    PP_ASSERT(bound != INT64_MAX);
    int32_t used = 0;
    for (int32_t k = 0; k < V; k++) {
        /* Counts that keep this stage within the bound and leave a feasible suffix form an
         * interval [lo, hi]; take the even share of what remains, clamped into it. */
        int32_t lo = 0, hi = 0;
        for (int32_t take = 1; used + take <= L; take++) {
            if (exec_partition_stage_cost(p, k, take) <= bound &&
                rest[(size_t)(k + 1) * (L + 1) + used + take] <= bound) {
                if (lo == 0)
                    lo = take;
                hi = take;
            }
        }
        PP_ASSERT(lo >= 1 && hi >= lo);
        int32_t share = (L - used + (V - k) - 1) / (V - k);
        n[k] = share < lo ? lo : share > hi ? hi : share;
        used += n[k];
    }
    PP_ASSERT(used == L);
}

ExecPartition *exec_partition_new(const ExecPartitionParams *params, GError **error) {
    if (params->n_layers < 1 || params->hidden < 1 || params->seq_len < 1 || params->vocab < 1 ||
        params->n_vstages < 1) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "partition: model.layers=%d, model.hidden=%d, model.seq_len=%d, "
                    "model.vocab=%d and %d virtual stages must all be >= 1",
                    params->n_layers, params->hidden, params->seq_len, params->vocab,
                    params->n_vstages);
        return NULL;
    }
    if (params->n_vstages > params->n_layers) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "partition: %d virtual stages (pipeline.stages * pipeline.chunks) but "
                    "model.layers=%d; every virtual stage needs at least one block",
                    params->n_vstages, params->n_layers);
        return NULL;
    }
    g_autofree int32_t *n = g_new0(int32_t, params->n_vstages);
    if (params->layers_per_vstage) {
        int32_t sum = 0;
        for (int32_t vs = 0; vs < params->n_vstages; vs++) {
            if (params->layers_per_vstage[vs] < 1) {
                g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                            "run.layers_per_stage: entry %d is %d; every virtual stage needs "
                            ">= 1 block",
                            vs, params->layers_per_vstage[vs]);
                return NULL;
            }
            n[vs] = params->layers_per_vstage[vs];
            sum += n[vs];
        }
        if (sum != params->n_layers) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                        "run.layers_per_stage: entries sum to %d but model.layers=%d", sum,
                        params->n_layers);
            return NULL;
        }
    } else {
        exec_partition_balance(params, n);
    }
    ExecPartition *part = g_new0(ExecPartition, 1);
    part->n_vstages = params->n_vstages;
    part->layer_begin = g_new(int32_t, params->n_vstages);
    part->layer_end = g_new(int32_t, params->n_vstages);
    part->flops_per_seq = g_new(int64_t, params->n_vstages);
    int32_t begin = 0;
    for (int32_t vs = 0; vs < params->n_vstages; vs++) {
        part->layer_begin[vs] = begin;
        part->layer_end[vs] = begin + n[vs];
        part->flops_per_seq[vs] = exec_partition_stage_cost(params, vs, n[vs]);
        if (part->flops_per_seq[vs] > part->max_flops_per_seq)
            part->max_flops_per_seq = part->flops_per_seq[vs];
        begin += n[vs];
    }
    return part;
}

void exec_partition_free(ExecPartition *partition) {
    if (!partition)
        return;
    g_free(partition->layer_begin);
    g_free(partition->layer_end);
    g_free(partition->flops_per_seq);
    g_free(partition);
}
