/* SPDX-License-Identifier: MIT
 * pp-sched-cache.c: finished schedules kept across calls (pp-sched-cache.h). A hash table
 * maps each key to its entry; the entries holding a schedule form a queue, most recently used
 * first, from whose tail schedules are dropped when the held ops exceed the budget.
 */
#include "pp-sched-cache.h"

#include <string.h>

#include "pp-error.h"

/* What a generator reads from PpScheduleParams (pp-sched-cache.h): fields a kind's generator
 * ignores are zero (costs) or NULL (order_file). */
typedef struct {
    const PpSchedKindInfo *kind; /* as given; NULL fails in pp_schedule_new() and is cached so */
    int32_t                n_stages, n_chunks, n_microbatches, accumulation, n_steps;
    int64_t                f_ns, b_ns, w_ns, comm_ns;
    double                 mem_w_fraction;
    char                  *order_file;
} PpSchedCacheKey;

typedef struct {
    PpSchedCacheKey key;
    int32_t        *peak_inflight; /* (key.n_stages) per stage; NULL when the build failed */
    GError         *error;         /* the build's error; NULL when it succeeded */
    PpSchedule     *sched;         /* finished; NULL when failed or dropped */
    GList           link;          /* in PpSchedCache.held while sched != NULL; data: entry */
} PpSchedCacheEntry;

struct _PpSchedCache {
    GHashTable *entries; /* PpSchedCacheKey * (inside its entry) -> PpSchedCacheEntry * */
    GQueue      held;    /* entries holding a schedule, most recently used at the head */
    int64_t     max_ops, held_ops;
    int64_t     built, reused;
};

static void pp_sched_cache_key_init(PpSchedCacheKey *key, const PpScheduleParams *p) {
    const PpSchedKindInfo *info = p->kind;
    *key = (PpSchedCacheKey){
        .kind = info,
        .n_stages = p->n_stages,
        .n_chunks = p->n_chunks,
        .n_microbatches = p->n_microbatches,
        .accumulation = p->accumulation,
        .n_steps = p->n_steps,
    };
    if (info != NULL && info->reads_costs) {
        key->f_ns = p->f_ns;
        key->b_ns = p->b_ns;
        key->w_ns = p->w_ns;
        key->comm_ns = p->comm_ns;
        key->mem_w_fraction = p->mem_w_fraction;
    }
    if (info != NULL && info->needs_order_file)
        key->order_file = g_strdup(p->order_file);
}

static guint pp_sched_cache_key_hash(gconstpointer data) {
    const PpSchedCacheKey *k = data;
    guint                  h = k->kind != NULL ? g_str_hash(k->kind->name) : 0;
    const int64_t          numbers[] = {k->n_stages,     k->n_chunks, k->n_microbatches,
                                        k->accumulation, k->n_steps,  k->f_ns,
                                        k->b_ns,         k->w_ns,     k->comm_ns};
    for (size_t i = 0; i < G_N_ELEMENTS(numbers); i++)
        h = h * 1000003u ^ (guint)(numbers[i] ^ (numbers[i] >> 32));
    return h;
}

static gboolean pp_sched_cache_key_equal(gconstpointer pa, gconstpointer pb) {
    const PpSchedCacheKey *a = pa, *b = pb;
    return a->kind == b->kind && a->n_stages == b->n_stages && a->n_chunks == b->n_chunks &&
           a->n_microbatches == b->n_microbatches && a->accumulation == b->accumulation &&
           a->n_steps == b->n_steps && a->f_ns == b->f_ns && a->b_ns == b->b_ns &&
           a->w_ns == b->w_ns && a->comm_ns == b->comm_ns &&
           memcmp(&a->mem_w_fraction, &b->mem_w_fraction, sizeof(double)) == 0 &&
           g_strcmp0(a->order_file, b->order_file) == 0;
}

static void pp_sched_cache_entry_free(gpointer data) {
    PpSchedCacheEntry *e = data;
    g_free(e->key.order_file);
    g_free(e->peak_inflight);
    g_clear_error(&e->error);
    pp_schedule_free(e->sched);
    g_free(e);
}

PpSchedCache *pp_sched_cache_new(int64_t max_ops) {
    PpSchedCache *cache = g_new0(PpSchedCache, 1);
    cache->entries = g_hash_table_new_full(pp_sched_cache_key_hash, pp_sched_cache_key_equal, NULL,
                                           pp_sched_cache_entry_free);
    g_queue_init(&cache->held);
    cache->max_ops = max_ops;
    return cache;
}

void pp_sched_cache_free(PpSchedCache *cache) {
    if (cache == NULL)
        return;
    g_hash_table_destroy(cache->entries);
    g_free(cache);
}

/* Drops the least recently used schedules, never @keep's, while the held ops exceed the
 * budget. */
static void pp_sched_cache_trim(PpSchedCache *cache, const PpSchedCacheEntry *keep) {
    while (cache->held_ops > cache->max_ops && cache->held.tail != &keep->link) {
        PpSchedCacheEntry *e = cache->held.tail->data;
        g_queue_unlink(&cache->held, &e->link);
        cache->held_ops -= pp_schedule_n_ops_total(e->sched);
        g_clear_pointer(&e->sched, pp_schedule_free);
    }
}

/* Builds the schedule of @e's key into @e (its error when that fails), at the head of the
 * held queue. */
static void pp_sched_cache_build(PpSchedCache *cache, PpSchedCacheEntry *e,
                                 const PpScheduleParams *params) {
    cache->built++;
    e->sched = pp_schedule_new(params, &e->error);
    if (e->sched == NULL)
        return;
    if (e->peak_inflight == NULL) {
        e->peak_inflight = g_new(int32_t, e->sched->n_stages);
        for (int32_t s = 0; s < e->sched->n_stages; s++)
            e->peak_inflight[s] = pp_schedule_peak_inflight(e->sched, s);
    }
    e->link = (GList){.data = e};
    g_queue_push_head_link(&cache->held, &e->link);
    cache->held_ops += pp_schedule_n_ops_total(e->sched);
    pp_sched_cache_trim(cache, e);
}

/* The entry of @params' key, built when new. */
static PpSchedCacheEntry *pp_sched_cache_entry(PpSchedCache           *cache,
                                               const PpScheduleParams *params) {
    PpSchedCacheKey key;
    pp_sched_cache_key_init(&key, params);
    PpSchedCacheEntry *e = g_hash_table_lookup(cache->entries, &key);
    if (e != NULL) {
        g_free(key.order_file);
        return e;
    }
    e = g_new0(PpSchedCacheEntry, 1);
    e->key = key;
    g_hash_table_insert(cache->entries, &e->key, e);
    pp_sched_cache_build(cache, e, params);
    return e;
}

const PpSchedule *pp_sched_cache_schedule(PpSchedCache *cache, const PpScheduleParams *params,
                                          GError **error) {
    const int64_t      built = cache->built;
    PpSchedCacheEntry *e = pp_sched_cache_entry(cache, params);
    if (e->error == NULL && e->sched == NULL) {
        /* dropped: the same key builds the same program again */
        pp_sched_cache_build(cache, e, params);
        PP_ASSERT(e->sched != NULL);
    } else if (e->sched != NULL && cache->held.head != &e->link) {
        g_queue_unlink(&cache->held, &e->link);
        g_queue_push_head_link(&cache->held, &e->link);
    }
    if (cache->built == built)
        cache->reused++;
    if (e->error != NULL) {
        g_propagate_error(error, g_error_copy(e->error));
        return NULL;
    }
    return e->sched;
}

const int32_t *pp_sched_cache_peak_inflight(PpSchedCache *cache, const PpScheduleParams *params,
                                            GError **error) {
    const int64_t      built = cache->built;
    PpSchedCacheEntry *e = pp_sched_cache_entry(cache, params);
    if (cache->built == built)
        cache->reused++;
    if (e->error != NULL) {
        g_propagate_error(error, g_error_copy(e->error));
        return NULL;
    }
    return e->peak_inflight;
}

void pp_sched_cache_counts(const PpSchedCache *cache, int64_t *built, int64_t *reused) {
    *built = cache->built;
    *reused = cache->reused;
}
