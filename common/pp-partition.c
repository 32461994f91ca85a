/* SPDX-License-Identifier: MIT
 * pp-partition.c: layer-to-virtual-stage partition. A suffix dynamic program over (virtual
 * stages k.., blocks j..) finds the smallest achievable maximum stage cost among partitions
 * whose stages fit the memory limit; a front-to-back pass then gives each stage the share of
 * the remaining blocks nearest to even within what that bound allows, which makes the choice
 * among optimal partitions deterministic. The same program over memory instead of cost gives
 * the smallest peak stage memory when nothing fits.
 */
#include "pp-partition.h"

#include <stdlib.h>
#include <string.h>

#include "pp-checked.h"
#include "pp-error.h"

int64_t pp_partition_layer_flops(int32_t hidden, int32_t seq_len) {
    int64_t tc, tcc, ttc, mm, att, sum;
    if (!pp_checked_mul(seq_len, hidden, &tc) || !pp_checked_mul(tc, hidden, &tcc) ||
        !pp_checked_mul(tc, seq_len, &ttc) || !pp_checked_mul(24, tcc, &mm) ||
        !pp_checked_mul(4, ttc, &att) || !pp_checked_add(mm, att, &sum))
        return INT64_MAX;
    return sum;
}

int64_t pp_partition_head_flops(int32_t hidden, int32_t seq_len, int32_t vocab) {
    int64_t tc, tcv, flops;
    if (!pp_checked_mul(seq_len, hidden, &tc) || !pp_checked_mul(tc, vocab, &tcv) ||
        !pp_checked_mul(2, tcv, &flops))
        return INT64_MAX;
    return flops;
}

/* Prefix sums of the per-block arrays: entry j sums blocks [0, j). */
typedef struct {
    const PpPartitionParams *p;
    gboolean                 mem_on;
    int64_t                 *cost;       /* (n_layers + 1) */
    int64_t                 *static_sum; /* (n_layers + 1), mem_on only */
    int64_t                 *act_sum;    /* (n_layers + 1), mem_on only */
    const int64_t           *cap;        /* (n_vstages) bytes each virtual stage may hold */
} PpPartitionSums;

typedef enum { PP_PARTITION_METRIC_COST, PP_PARTITION_METRIC_MEM } PpPartitionMetric;

static int64_t pp_partition_stage_cost(const PpPartitionSums *s, int32_t vs, int32_t a, int32_t b) {
    int64_t cost = s->cost[b] - s->cost[a];
    if (vs == 0)
        cost += s->p->first_cost;
    if (vs == s->p->n_vstages - 1)
        cost += s->p->last_cost;
    return cost;
}

static int64_t pp_partition_stage_mem(const PpPartitionSums *s, int32_t vs, int32_t a, int32_t b) {
    const PpPartitionParams *p = s->p;
    int64_t                  stat = s->static_sum[b] - s->static_sum[a];
    int64_t                  act = s->act_sum[b] - s->act_sum[a];
    if (vs == 0) {
        stat += p->first_static_bytes;
        act += p->first_act_bytes;
    }
    if (vs == p->n_vstages - 1) {
        stat += p->last_static_bytes;
        act += p->last_act_bytes;
    }
    return stat + (int64_t)p->live_units[vs] * act;
}

/* Stage @vs holding blocks [a, b) is allowed: always, or within its memory cap. */
static gboolean pp_partition_fits(const PpPartitionSums *s, gboolean limited, int32_t vs, int32_t a,
                                  int32_t b) {
    return !limited || pp_partition_stage_mem(s, vs, a, b) <= s->cap[vs];
}

static int64_t pp_partition_metric(const PpPartitionSums *s, PpPartitionMetric metric, int32_t vs,
                                   int32_t a, int32_t b) {
    return metric == PP_PARTITION_METRIC_COST ? pp_partition_stage_cost(s, vs, a, b)
                                              : pp_partition_stage_mem(s, vs, a, b);
}

/* Fills @rest ((n_vstages + 1) * (n_layers + 1)): rest[k * (L + 1) + j] is the smallest max
 * @metric of virtual stages k..V-1 covering blocks j..L-1, each holding >= 1 block and, when
 * @limited, fitting the memory limit; INT64_MAX when impossible. Entries with j < k, which no
 * split reaches (stages 0..k-1 hold >= k blocks), are left INT64_MAX unsolved.
 * A stage's metric and memory only grow with its end (block costs and bytes are >= 0), so the
 * scan over its end stops once the stage alone reaches the best found or leaves its cap, and
 * ends that leave fewer blocks than the later stages need are not scanned: the same minimum. */
static void pp_partition_suffix(const PpPartitionSums *s, PpPartitionMetric metric,
                                gboolean limited, int64_t *rest) {
    int32_t V = s->p->n_vstages, L = s->p->n_layers;
    for (int32_t j = 0; j <= L; j++)
        rest[(size_t)V * (L + 1) + j] = j == L ? 0 : INT64_MAX;
    for (int32_t k = V - 1; k >= 0; k--) {
        const int32_t last_end = L - (V - 1 - k); /* the later stages need >= 1 block each */
        for (int32_t j = 0; j <= L; j++) {
            int64_t best = INT64_MAX;
            for (int32_t end = j + 1; j >= k && end <= last_end; end++) {
                if (!pp_partition_fits(s, limited, k, j, end))
                    break;
                int64_t here = pp_partition_metric(s, metric, k, j, end);
                if (here >= best)
                    break;
                int64_t tail = rest[(size_t)(k + 1) * (L + 1) + end];
                int64_t worst = here > tail ? here : tail;
                if (worst < best)
                    best = worst;
            }
            rest[(size_t)k * (L + 1) + j] = best;
        }
    }
}

/* Fills block counts @n (n_vstages) that minimise the largest stage @metric, each virtual
 * stage within its cap when @limited. Returns that largest value, or INT64_MAX (@n untouched)
 * when no partition fits the caps. */
static int64_t pp_partition_balance_caps(const PpPartitionSums *s, PpPartitionMetric metric,
                                         gboolean limited, int32_t *n) {
    const PpPartitionParams *p = s->p;
    int32_t                  V = p->n_vstages, L = p->n_layers;
    g_autofree int64_t      *rest = g_new(int64_t, (size_t)(V + 1) * (L + 1));
    pp_partition_suffix(s, metric, limited, rest);
    int64_t bound = rest[0];
    if (bound == INT64_MAX)
        return INT64_MAX;
    int32_t used = 0;
    for (int32_t k = 0; k < V; k++) {
        /* Among the counts that keep this stage within the bound (and its cap) and leave a
         * suffix that reaches it, take the one nearest the even share. */
        int32_t share = (L - used + (V - k) - 1) / (V - k);
        int32_t pick = 0;
        for (int32_t take = 1; used + take <= L; take++) {
            if (pp_partition_metric(s, metric, k, used, used + take) > bound ||
                !pp_partition_fits(s, limited, k, used, used + take) ||
                rest[(size_t)(k + 1) * (L + 1) + used + take] > bound)
                continue;
            if (pick == 0 || abs(take - share) <= abs(pick - share))
                pick = take;
        }
        PP_ASSERT(pick >= 1);
        n[k] = pick;
        used += pick;
    }
    PP_ASSERT(used == L);
    return bound;
}

/* The device of virtual stage @vs, and the number of devices (pp-partition.h). */
static int32_t pp_partition_device(const PpPartitionParams *p, int32_t vs) {
    return p->vstage_device != NULL ? p->vstage_device[vs] : vs;
}

static int32_t pp_partition_n_devices(const PpPartitionParams *p) {
    return p->vstage_device != NULL ? p->n_devices : p->n_vstages;
}

/* The memory split @n puts on its fullest device, into *@device (nullable). */
static int64_t pp_partition_fullest(const PpPartitionSums *s, const int32_t *n, int32_t *device) {
    const PpPartitionParams *p = s->p;
    const int32_t            n_devices = pp_partition_n_devices(p);
    g_autofree int64_t      *mem = g_new0(int64_t, n_devices);
    for (int32_t vs = 0, begin = 0; vs < p->n_vstages; begin += n[vs], vs++)
        mem[pp_partition_device(p, vs)] += pp_partition_stage_mem(s, vs, begin, begin + n[vs]);
    int32_t fullest = 0;
    for (int32_t d = 1; d < n_devices; d++)
        fullest = mem[d] > mem[fullest] ? d : fullest;
    if (device != NULL)
        *device = fullest;
    return mem[fullest];
}

/* Try @which's memory caps (pp_partition_new()) into @cap (n_vstages), for the device limit
 * M: 0 the relaxation, M each (its devices are checked after); 1 equal shares, M over the
 * virtual stages on the device (@per_device); 2 shares of M in proportion to the stage
 * memories of split @basis on each device, never below the stage's own memory when the
 * device fits (then @basis itself fits the caps). */
static void pp_partition_caps(const PpPartitionSums *s, int32_t which, const int32_t *basis,
                              const int32_t *per_device, int64_t *cap) {
    const PpPartitionParams *p = s->p;
    const int64_t            M = p->mem_limit_bytes;
    const int32_t            n_devices = pp_partition_n_devices(p);
    g_autofree int64_t      *device_mem = g_new0(int64_t, n_devices);
    for (int32_t vs = 0, begin = 0; which == 2 && vs < p->n_vstages; begin += basis[vs], vs++)
        device_mem[pp_partition_device(p, vs)] +=
            pp_partition_stage_mem(s, vs, begin, begin + basis[vs]);
    for (int32_t vs = 0, begin = 0; vs < p->n_vstages; vs++) {
        int32_t d = pp_partition_device(p, vs);
        if (which == 0) {
            cap[vs] = M;
        } else if (which == 1 || device_mem[d] <= 0) {
            cap[vs] = M / per_device[d];
        } else {
            int64_t mem = pp_partition_stage_mem(s, vs, begin, begin + basis[vs]);
            cap[vs] = (int64_t)((double)M * ((double)mem / (double)device_mem[d]));
            if (device_mem[d] <= M)
                cap[vs] = MAX(cap[vs], mem); /* rounding must not exclude the basis */
            begin += basis[vs];
        }
    }
}

/* Fills block counts @n (n_vstages) balanced by cost with every device within the memory limit
 * (pp_partition_new()). Returns FALSE with @error set when no split is found. */
static gboolean pp_partition_balance(PpPartitionSums *s, int32_t *n, GError **error) {
    const PpPartitionParams *p = s->p;
    const int32_t            V = p->n_vstages, n_devices = pp_partition_n_devices(p);
    if (!s->mem_on) {
        int64_t bound = pp_partition_balance_caps(s, PP_PARTITION_METRIC_COST, FALSE, n);
        PP_ASSERT(bound != INT64_MAX); /* every virtual stage can take one block */
        return TRUE;
    }
    g_autofree int32_t *per_device = g_new0(int32_t, n_devices);
    g_autofree int64_t *cap = g_new(int64_t, V);
    g_autofree int32_t *n0 = g_new(int32_t, V);
    g_autofree int32_t *tried = g_new(int32_t, V);
    g_autofree int32_t *n_frugal = g_new(int32_t, V);
    gboolean            shared = FALSE;
    for (int32_t vs = 0; vs < V; vs++) {
        int32_t d = pp_partition_device(p, vs);
        PP_ASSERT(d >= 0 && d < n_devices);
        per_device[d]++;
        shared = shared || per_device[d] > 1;
    }
    s->cap = cap;
    /* The relaxation first: its split is a basis of proportional caps. With one virtual stage
     * per device its caps are the limit and it is exact. */
    pp_partition_caps(s, 0, NULL, per_device, cap);
    int64_t  relaxed = pp_partition_balance_caps(s, PP_PARTITION_METRIC_COST, TRUE, n0);
    gboolean relaxed_fits =
        relaxed != INT64_MAX && pp_partition_fullest(s, n0, NULL) <= p->mem_limit_bytes;
    int64_t best = INT64_MAX;
    if (!shared && relaxed_fits) {
        best = relaxed;
        memcpy(n, n0, sizeof(int32_t) * (size_t)V);
    }
    /* The split whose fullest virtual stage is smallest: the other basis, and the error's. */
    int64_t frugal = pp_partition_balance_caps(s, PP_PARTITION_METRIC_MEM, FALSE, n_frugal);
    PP_ASSERT(frugal != INT64_MAX); /* every virtual stage can take one block */
    /* Then equal shares, shares of the relaxed and of the frugal split, and the relaxed split
     * itself when its devices fit; a later try must be strictly better (ties keep the
     * earlier). */
    for (int32_t k = 0; shared && k < 4; k++) {
        int64_t bound = INT64_MAX;
        if (k == 3 && relaxed_fits) {
            bound = relaxed;
            memcpy(tried, n0, sizeof(int32_t) * (size_t)V);
        } else if (k == 0 || (k == 1 && relaxed != INT64_MAX) || k == 2) {
            pp_partition_caps(s, k == 0 ? 1 : 2, k == 1 ? n0 : n_frugal, per_device, cap);
            bound = pp_partition_balance_caps(s, PP_PARTITION_METRIC_COST, TRUE, tried);
        }
        if (bound >= best)
            continue;
        best = bound;
        memcpy(n, tried, sizeof(int32_t) * (size_t)V);
    }
    if (best != INT64_MAX)
        return TRUE;
    /* Nothing found: the frugal split's devices do not fit either (try 2 would hold it). */
    int32_t device;
    int64_t need = pp_partition_fullest(s, n_frugal, &device);
    g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                "partition: no split of %d blocks over %d virtual stages on %d devices fits the "
                "device memory limit: the split with the smallest fullest virtual stage needs "
                "%.3f GiB (%" G_GINT64_FORMAT " bytes) on its fullest device (%d), %.3f GiB over "
                "the limit of %.3f GiB (%" G_GINT64_FORMAT
                " bytes) per device (hardware.memory_gib, "
                "less FSDP's gather buffers and the communication buffers)%s%s",
                p->n_layers, V, n_devices, (double)need / (1 << 30), need, device,
                (double)(need - p->mem_limit_bytes) / (1 << 30),
                (double)p->mem_limit_bytes / (1 << 30), p->mem_limit_bytes,
                p->mem_advice != NULL ? "; " : "", p->mem_advice != NULL ? p->mem_advice : "");
    return FALSE;
}

/* Checks the sizes, the cost and memory inputs. */
static gboolean pp_partition_check(const PpPartitionParams *params, GError **error) {
    if (params->n_layers < 1 || params->n_vstages < 1) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "partition: model.layers=%d and %d virtual stages must both be >= 1",
                    params->n_layers, params->n_vstages);
        return FALSE;
    }
    if (params->n_vstages > params->n_layers) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "partition: %d virtual stages (pipeline.stages * pipeline.chunks) but "
                    "model.layers=%d; every virtual stage needs at least one block",
                    params->n_vstages, params->n_layers);
        return FALSE;
    }
    if (params->n_layers > PP_PARTITION_MAX_LAYERS) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "partition: model.layers=%d is out of range; valid: 1..%d (the balanced "
                    "split's dynamic program takes O(stages x layers^2) time)",
                    params->n_layers, PP_PARTITION_MAX_LAYERS);
        return FALSE;
    }
    PP_ASSERT(params->layer_cost != NULL);
    PP_ASSERT(params->first_cost >= 0 && params->last_cost >= 0);
    /* Every range sum the program forms is at most the whole model's: check that one. */
    int64_t  cost = 0, stat = 0, act = 0;
    gboolean fits = pp_checked_add(params->first_cost, params->last_cost, &cost);
    for (int32_t i = 0; i < params->n_layers; i++) {
        PP_ASSERT(params->layer_cost[i] >= 0);
        fits = fits && pp_checked_add(cost, params->layer_cost[i], &cost);
    }
    if (!fits) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "partition: the %d blocks' costs add up to more than %" G_GINT64_FORMAT
                    "; lower model.hidden, model.seq_len, model.vocab or model.layers",
                    params->n_layers, PP_CHECKED_MAX);
        return FALSE;
    }
    if (params->mem_limit_bytes > 0) {
        PP_ASSERT(params->layer_static_bytes != NULL && params->layer_act_bytes != NULL &&
                  params->live_units != NULL);
        fits = pp_checked_add(params->first_static_bytes, params->last_static_bytes, &stat) &&
               pp_checked_add(params->first_act_bytes, params->last_act_bytes, &act);
        for (int32_t i = 0; i < params->n_layers; i++) {
            PP_ASSERT(params->layer_static_bytes[i] >= 0 && params->layer_act_bytes[i] >= 0);
            fits = fits && pp_checked_add(stat, params->layer_static_bytes[i], &stat) &&
                   pp_checked_add(act, params->layer_act_bytes[i], &act);
        }
        for (int32_t vs = 0; vs < params->n_vstages; vs++) {
            int64_t mem;
            PP_ASSERT(params->live_units[vs] >= 0);
            fits = fits && pp_checked_add_mul(stat, params->live_units[vs], act, &mem);
        }
        if (!fits) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                        "partition: the %d blocks' memory with their live micro-batches adds "
                        "up to more than %" G_GINT64_FORMAT " bytes; lower the model's size, "
                        "pipeline.microbatch_size or the micro-batches in flight",
                        params->n_layers, PP_CHECKED_MAX);
            return FALSE;
        }
    }
    return TRUE;
}

/* Copies explicit counts into @n after checking them. */
static gboolean pp_partition_explicit(const PpPartitionParams *params, int32_t *n, GError **error) {
    int64_t sum = 0;
    for (int32_t vs = 0; vs < params->n_vstages; vs++) {
        if (params->layers_per_vstage[vs] < 1) {
            g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                        "run.layers_per_stage: entry %d is %d; every virtual stage needs "
                        ">= 1 block",
                        vs, params->layers_per_vstage[vs]);
            return FALSE;
        }
        n[vs] = params->layers_per_vstage[vs];
        sum += n[vs];
    }
    if (sum != params->n_layers) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "run.layers_per_stage: entries sum to %" G_GINT64_FORMAT " but model.layers=%d",
                    sum, params->n_layers);
        return FALSE;
    }
    return TRUE;
}

PpPartition *pp_partition_new(const PpPartitionParams *params, GError **error) {
    if (!pp_partition_check(params, error))
        return NULL;
    const int32_t       L = params->n_layers, V = params->n_vstages;
    gboolean            mem_on = params->mem_limit_bytes > 0;
    g_autofree int64_t *cost_sum = g_new0(int64_t, L + 1);
    g_autofree int64_t *static_sum = mem_on ? g_new0(int64_t, L + 1) : NULL;
    g_autofree int64_t *act_sum = mem_on ? g_new0(int64_t, L + 1) : NULL;
    for (int32_t i = 0; i < L; i++) {
        cost_sum[i + 1] = cost_sum[i] + params->layer_cost[i];
        if (mem_on) {
            static_sum[i + 1] = static_sum[i] + params->layer_static_bytes[i];
            act_sum[i + 1] = act_sum[i] + params->layer_act_bytes[i];
        }
    }
    PpPartitionSums sums = {.p = params,
                            .mem_on = mem_on,
                            .cost = cost_sum,
                            .static_sum = static_sum,
                            .act_sum = act_sum};

    g_autofree int32_t *n = g_new0(int32_t, V);
    if (params->layers_per_vstage) {
        if (!pp_partition_explicit(params, n, error))
            return NULL;
    } else if (params->mode == PP_PARTITION_EVEN) {
        for (int32_t vs = 0; vs < V; vs++)
            n[vs] = L / V + (vs < L % V ? 1 : 0);
    } else {
        if (!pp_partition_balance(&sums, n, error))
            return NULL;
    }

    PpPartition *part = g_new0(PpPartition, 1);
    part->n_vstages = V;
    part->layer_begin = g_new(int32_t, V);
    part->layer_end = g_new(int32_t, V);
    part->cost = g_new(int64_t, V);
    part->mem_bytes = mem_on ? g_new(int64_t, V) : NULL;
    int32_t begin = 0;
    for (int32_t vs = 0; vs < V; vs++) {
        part->layer_begin[vs] = begin;
        part->layer_end[vs] = begin + n[vs];
        part->cost[vs] = pp_partition_stage_cost(&sums, vs, begin, begin + n[vs]);
        if (part->cost[vs] > part->max_cost)
            part->max_cost = part->cost[vs];
        if (mem_on)
            part->mem_bytes[vs] = pp_partition_stage_mem(&sums, vs, begin, begin + n[vs]);
        begin += n[vs];
    }
    return part;
}

void pp_partition_free(PpPartition *partition) {
    if (!partition)
        return;
    g_free(partition->layer_begin);
    g_free(partition->layer_end);
    g_free(partition->cost);
    g_free(partition->mem_bytes);
    g_free(partition);
}

PpPartition *pp_partition_new_gpt2_flops(int32_t n_layers, int32_t hidden, int32_t seq_len,
                                         int32_t vocab, int32_t n_vstages, PpPartitionMode mode,
                                         const int32_t *layers_per_vstage, GError **error) {
    g_autofree int64_t *layer_cost = g_new(int64_t, MAX(n_layers, 1));
    for (int32_t i = 0; i < n_layers; i++)
        layer_cost[i] = pp_partition_layer_flops(hidden, seq_len);
    PpPartitionParams pp = {.n_layers = n_layers,
                            .n_vstages = n_vstages,
                            .mode = mode,
                            .layers_per_vstage = layers_per_vstage,
                            .layer_cost = layer_cost,
                            .last_cost = pp_partition_head_flops(hidden, seq_len, vocab)};
    return pp_partition_new(&pp, error);
}
