/* SPDX-License-Identifier: MIT
 * pp-schedule.c: PpSchedule construction (alloc/append/finish/free), the dependency graph
 * (CSR deps and successors over flat op ids), per-op weight versions, validation and
 * queries. Generators live in pp-sched-*.c, the name -> generator table in
 * pp-sched-registry.c.
 */
#include "pp-schedule.h"

#include <stdio.h>
#include <string.h>

#include "pp-error.h"
#include "pp-sched-gen.h"

/* Programs grow by doubling from this many ops: a program's capacity is its length rounded
 * up to a power of two (at least this), so append needs no capacity field. */
#define PP_PROGRAM_MIN_CAPACITY 16

/* Longest op label: "BW(mb=-2147483648, chunk=-2147483648)" plus room. */
#define PP_OP_LABEL_SIZE 64

/* --- construction --- */

PpSchedule *pp_schedule_alloc(const char *kind, int32_t n_stages, int32_t n_chunks) {
    PP_ASSERT(kind != NULL);
    PP_ASSERT(n_stages >= 1 && n_chunks >= 1);
    PP_ASSERT((int64_t)n_stages * n_chunks <= PP_SCHED_MAX_UNITS);
    PpSchedule *sched = g_new0(PpSchedule, 1);
    sched->kind = g_strdup(kind);
    sched->n_stages = n_stages;
    sched->n_chunks = n_chunks;
    sched->n_vstages = n_stages * n_chunks;
    sched->weight_mode = PP_WEIGHTS_CURRENT;
    sched->vstage_stage = g_new(int32_t, sched->n_vstages);
    sched->vstage_chunk = g_new(int32_t, sched->n_vstages);
    PpPlacement placement = pp_sched_kind_placement(kind);
    for (int32_t vs = 0; vs < sched->n_vstages; vs++)
        pp_placement_vstage(placement, n_stages, vs, &sched->vstage_stage[vs],
                            &sched->vstage_chunk[vs]);
    sched->n_buffers = g_new0(int32_t, n_stages);
    sched->n_weight_versions = g_new(int32_t, n_stages);
    for (int32_t s = 0; s < n_stages; s++)
        sched->n_weight_versions[s] = 1;
    sched->n_ops = g_new0(int32_t, n_stages);
    sched->programs = g_new0(PpOp *, n_stages);
    return sched;
}

void pp_schedule_append(PpSchedule *sched, const PpOp *op) {
    PP_ASSERT(sched->op_offset == NULL); // programs are immutable once finished
    PP_ASSERT(op->stage >= 0 && op->stage < sched->n_stages);
    PP_ASSERT(op->kind >= 0 && op->kind < PP_OP_N_KINDS);
    int32_t n = sched->n_ops[op->stage];
    PP_ASSERT(n < G_MAXINT32 / 4);
    if (n == 0)
        sched->programs[op->stage] = g_new(PpOp, PP_PROGRAM_MIN_CAPACITY);
    else if (n >= PP_PROGRAM_MIN_CAPACITY && (n & (n - 1)) == 0)
        sched->programs[op->stage] = g_renew(PpOp, sched->programs[op->stage], 2 * (gsize)n);
    sched->programs[op->stage][n] = *op;
    sched->n_ops[op->stage] = n + 1;
}

void pp_sched_emit(PpSchedule *sched, PpOpKind kind, int32_t stage, int32_t mb, int32_t chunk,
                   int32_t step) {
    PpOp op = {.kind = kind, .stage = stage, .mb = mb, .chunk = chunk, .step = step};
    pp_schedule_append(sched, &op);
}

void pp_schedule_free(PpSchedule *sched) {
    if (sched == NULL)
        return;
    if (sched->programs != NULL) {
        for (int32_t s = 0; s < sched->n_stages; s++)
            g_free(sched->programs[s]);
    }
    g_free(sched->programs);
    g_free(sched->n_ops);
    g_free(sched->n_weight_versions);
    g_free(sched->n_buffers);
    g_free(sched->vstage_chunk);
    g_free(sched->vstage_stage);
    g_free(sched->op_offset);
    g_free(sched->dep_offset);
    g_free(sched->deps);
    g_free(sched->succ_offset);
    g_free(sched->succ);
    g_free(sched->version);
    g_free(sched->mb_ops);
    g_free(sched->kind);
    g_free(sched);
}

/* --- labels --- */

/* "B(mb=5, chunk=0)" or "U(step=2)". */
static const char *pp_op_label(const PpOp *op, char *buf, size_t size) {
    if (op->kind == PP_OP_UPDATE)
        snprintf(buf, size, "U(step=%d)", op->step);
    else
        snprintf(buf, size, "%s(mb=%d, chunk=%d)", pp_op_kind_name(op->kind), op->mb, op->chunk);
    return buf;
}

char *pp_op_describe(const PpOp *op, char *buf, size_t size) {
    char label[PP_OP_LABEL_SIZE];
    snprintf(buf, size, "%s on stage %d", pp_op_label(op, label, sizeof label), op->stage);
    return buf;
}

/* "stage 2 op 17 B(mb=5, chunk=0)": how validation names an op. */
static const char *pp_op_ref_label(const PpSchedule *sched, PpOpRef ref, char *buf, size_t size) {
    char label[PP_OP_LABEL_SIZE];
    snprintf(buf, size, "stage %d op %d %s", ref.stage, ref.index,
             pp_op_label(pp_schedule_op(sched, ref), label, sizeof label));
    return buf;
}

/* --- queries --- */

void pp_placement_vstage(PpPlacement placement, int32_t n_stages, int32_t vs, int32_t *stage,
                         int32_t *chunk) {
    PP_ASSERT(n_stages >= 1 && vs >= 0);
    int32_t c = vs / n_stages, i = vs % n_stages;
    *chunk = c;
    *stage = placement == PP_PLACEMENT_V && c % 2 == 1 ? n_stages - 1 - i : i;
}

int32_t pp_schedule_vstage(const PpSchedule *sched, int32_t stage, int32_t chunk) {
    PP_ASSERT(stage >= 0 && stage < sched->n_stages);
    PP_ASSERT(chunk >= 0 && chunk < sched->n_chunks);
    int32_t vs = chunk * sched->n_stages + stage; // the loop layout, then the V layout
    if (sched->vstage_stage[vs] == stage && sched->vstage_chunk[vs] == chunk)
        return vs;
    vs = chunk * sched->n_stages + sched->n_stages - 1 - stage;
    if (sched->vstage_stage[vs] == stage && sched->vstage_chunk[vs] == chunk)
        return vs;
    for (vs = 0; vs < sched->n_vstages; vs++) {
        if (sched->vstage_stage[vs] == stage && sched->vstage_chunk[vs] == chunk)
            return vs;
    }
    PP_ABORT("no virtual stage runs chunk %d of stage %d", chunk, stage);
}

PpOpRef pp_schedule_op_ref(const PpSchedule *sched, int32_t id) {
    PP_ASSERT(id >= 0 && id < pp_schedule_n_ops_total(sched));
    int32_t lo = 0, hi = sched->n_stages - 1; // largest stage with op_offset[stage] <= id
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (sched->op_offset[mid] <= id)
            lo = mid;
        else
            hi = mid - 1;
    }
    return (PpOpRef){.stage = lo, .index = id - sched->op_offset[lo]};
}

static int64_t pp_schedule_unit_key(const PpSchedule *sched, int32_t mb, int32_t vstage) {
    return ((int64_t)mb * sched->n_vstages + vstage) * PP_OP_N_KINDS;
}

int32_t pp_schedule_find_op(const PpSchedule *sched, PpOpKind kind, int32_t mb, int32_t vstage) {
    PP_ASSERT(sched->mb_ops != NULL);
    PP_ASSERT(kind >= 0 && kind < PP_OP_UPDATE);
    PP_ASSERT(mb >= 0 && mb < sched->n_mb);
    PP_ASSERT(vstage >= 0 && vstage < sched->n_vstages);
    return sched->mb_ops[pp_schedule_unit_key(sched, mb, vstage) + kind];
}

const PpOpRef *pp_schedule_deps(const PpSchedule *sched, PpOpRef ref, int32_t *n) {
    int32_t id = pp_schedule_op_id(sched, ref);
    *n = sched->dep_offset[id + 1] - sched->dep_offset[id];
    return sched->deps + sched->dep_offset[id];
}

const PpOpRef *pp_schedule_succs(const PpSchedule *sched, PpOpRef ref, int32_t *n) {
    int32_t id = pp_schedule_op_id(sched, ref);
    *n = sched->succ_offset[id + 1] - sched->succ_offset[id];
    return sched->succ + sched->succ_offset[id];
}

int32_t pp_schedule_version_used(const PpSchedule *sched, PpOpRef ref) {
    PP_ASSERT(sched->version != NULL);
    int32_t     id = pp_schedule_op_id(sched, ref);
    const PpOp *op = pp_schedule_op(sched, ref);
    if (op->kind == PP_OP_FORWARD || op->kind == PP_OP_UPDATE ||
        sched->weight_mode == PP_WEIGHTS_CURRENT)
        return sched->version[id];
    int32_t f = pp_schedule_find_op(sched, PP_OP_FORWARD, op->mb,
                                    pp_schedule_vstage(sched, op->stage, op->chunk));
    PP_ASSERT(f >= 0); // validation guarantees every backward has its forward
    return pp_schedule_backward_version(sched, f, id);
}

int32_t pp_schedule_delta(const PpSchedule *sched, int32_t mb, int32_t vstage) {
    int32_t f = pp_schedule_find_op(sched, PP_OP_FORWARD, mb, vstage);
    int32_t b = pp_schedule_find_op(
        sched, sched->split_backward ? PP_OP_BACKWARD : PP_OP_BACKWARD_FULL, mb, vstage);
    PP_ASSERT(f >= 0 && b >= 0); // validation guarantees both
    return pp_schedule_delta_ids(sched, f, b);
}

int32_t pp_schedule_peak_inflight(const PpSchedule *sched, int32_t stage) {
    PP_ASSERT(stage >= 0 && stage < sched->n_stages);
    int32_t live = 0, peak = 0;
    for (int32_t i = 0; i < sched->n_ops[stage]; i++) {
        live += pp_op_inflight_change(sched->programs[stage][i].kind);
        peak = MAX(peak, live);
    }
    return peak;
}

int32_t *pp_schedule_vstage_peak_inflight(const PpSchedule *sched) {
    int32_t            *peak = g_new0(int32_t, sched->n_vstages);
    g_autofree int32_t *live = g_new0(int32_t, sched->n_vstages);
    for (int32_t s = 0; s < sched->n_stages; s++) {
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            int32_t     change = pp_op_inflight_change(op->kind);
            if (change == 0)
                continue;
            int32_t vs = pp_schedule_vstage(sched, s, op->chunk);
            live[vs] += change;
            PP_ASSERT(live[vs] >= 0); // validation: every unit's F precedes its backward
            peak[vs] = MAX(peak[vs], live[vs]);
        }
    }
    return peak;
}

/* --- dependency derivation --- */

/* Scratch index of pp_schedule_finish(). mb_ops is laid out by micro-batch, so walking a
 * stage's program (micro-batches in rising order) through it misses the cache on nearly
 * every op; this index holds the same ids by column (virtual stage, kind), which such a walk
 * reads and writes sequentially. */
typedef struct {
    int32_t n_mb;
    int32_t n_chunks;
    /* (n_stages, n_chunks) virtual stage of (stage, chunk), looked up when an op first uses
     * the pair; -1 before */
    int32_t *unit_vs;
    /* (n_vstages, PP_OP_UPDATE, n_mb) 1 + flat id of kind K of (mb, vs) at
     * [(vs * PP_OP_UPDATE + K) * n_mb + mb], 0 when absent (allocated zeroed) */
    int32_t *ids;
    /* the schedule has an op of kind K; the columns of kinds it lacks are never read, so
     * their pages are never touched */
    gboolean has_kind[PP_OP_UPDATE];
} PpScheduleIndex;

static void pp_schedule_index_clear(PpScheduleIndex *ix) {
    g_clear_pointer(&ix->unit_vs, g_free);
    g_clear_pointer(&ix->ids, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(PpScheduleIndex, pp_schedule_index_clear)

/* Sets up an empty index for @sched. */
static void pp_schedule_index_init(PpScheduleIndex *ix, const PpSchedule *sched) {
    ix->n_mb = sched->n_mb;
    ix->n_chunks = sched->n_chunks;
    ix->unit_vs = g_new(int32_t, sched->n_vstages);
    for (int32_t u = 0; u < sched->n_vstages; u++)
        ix->unit_vs[u] = -1;
    ix->ids = g_new0(int32_t, (gsize)sched->n_vstages * PP_OP_UPDATE * (gsize)sched->n_mb);
}

/* Slot of kind @kind (F, B, W or BW) of (@mb, @vstage) in ix->ids. */
static inline int32_t *pp_schedule_index_slot(const PpScheduleIndex *ix, PpOpKind kind, int32_t mb,
                                              int32_t vstage) {
    return &ix->ids[((int64_t)vstage * PP_OP_UPDATE + kind) * ix->n_mb + mb];
}

/* Flat id of kind @kind of (@mb, @vstage), or -1 when the schedule has none. */
static inline int32_t pp_schedule_index_find(const PpScheduleIndex *ix, PpOpKind kind, int32_t mb,
                                             int32_t vstage) {
    if (!ix->has_kind[kind])
        return -1;
    return *pp_schedule_index_slot(ix, kind, mb, vstage) - 1;
}

/* Checks op fields and files every F/B/W/BW in @ix, stage by stage in program order (the
 * order errors are reported in); reports out-of-range fields and duplicates. */
static gboolean pp_schedule_index_ops(const PpSchedule *sched, PpScheduleIndex *ix,
                                      GError **error) {
    char a[2 * PP_OP_LABEL_SIZE], b[2 * PP_OP_LABEL_SIZE];
    for (int32_t s = 0; s < sched->n_stages; s++) {
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            PpOpRef     ref = {.stage = s, .index = i};
            PP_ASSERT(op->stage == s); // pp_schedule_append files ops by their stage
            if (op->kind == PP_OP_UPDATE) {
                if (op->mb != -1 || op->chunk != -1) {
                    g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                                "schedule '%s': %s has mb %d and chunk %d; an update takes "
                                "mb -1 and chunk -1",
                                sched->kind, pp_op_ref_label(sched, ref, a, sizeof a), op->mb,
                                op->chunk);
                    return FALSE;
                }
                continue;
            }
            if (op->mb < 0 || op->mb >= sched->n_mb || op->chunk < 0 ||
                op->chunk >= sched->n_chunks) {
                g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                            "schedule '%s': %s is out of range; valid: mb 0..%d, chunk 0..%d",
                            sched->kind, pp_op_ref_label(sched, ref, a, sizeof a), sched->n_mb - 1,
                            sched->n_chunks - 1);
                return FALSE;
            }
            int32_t *vs = &ix->unit_vs[s * ix->n_chunks + op->chunk];
            if (*vs < 0)
                *vs = pp_schedule_vstage(sched, s, op->chunk);
            int32_t *slot = pp_schedule_index_slot(ix, op->kind, op->mb, *vs);
            if (*slot > 0) {
                g_set_error(
                    error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_DUPLICATE_OP,
                    "schedule '%s': %s duplicates %s", sched->kind,
                    pp_op_ref_label(sched, ref, a, sizeof a),
                    pp_op_ref_label(sched, pp_schedule_op_ref(sched, *slot - 1), b, sizeof b));
                return FALSE;
            }
            *slot = sched->op_offset[s] + i + 1;
            ix->has_kind[op->kind] = TRUE;
        }
    }
    return TRUE;
}

/* Fills mb_ops from @ix: a transpose that writes mb_ops row by row. */
static void pp_schedule_fill_mb_ops(PpSchedule *sched, const PpScheduleIndex *ix) {
    sched->mb_ops = g_new(int32_t, pp_schedule_unit_key(sched, sched->n_mb, 0));
    int32_t *unit = sched->mb_ops; // (PP_OP_N_KINDS) ids of the current (mb, vs)
    for (int32_t mb = 0; mb < sched->n_mb; mb++) {
        for (int32_t vs = 0; vs < sched->n_vstages; vs++) {
            for (PpOpKind kind = PP_OP_FORWARD; kind < PP_OP_UPDATE; kind++)
                unit[kind] = pp_schedule_index_find(ix, kind, mb, vs);
            unit[PP_OP_UPDATE] = -1;
            unit += PP_OP_N_KINDS;
        }
    }
}

/* Appends the edge from kind @kind of (@mb, @vstage) to the op whose deps are being filled,
 * when the schedule has that op, and counts it as a successor edge of its source in
 * succ_offset. */
static inline void pp_schedule_add_dep(PpSchedule *sched, const PpScheduleIndex *ix, PpOpKind kind,
                                       int32_t mb, int32_t vstage, int32_t *n) {
    int32_t from = pp_schedule_index_find(ix, kind, mb, vstage);
    if (from < 0)
        return;
    int32_t stage = sched->vstage_stage[vstage];
    sched->deps[(*n)++] = (PpOpRef){.stage = stage, .index = from - sched->op_offset[stage]};
    sched->succ_offset[from]++;
}

/* Fills dep_offset/deps: F(mb, vs) <- F(mb, vs-1); B/BW(mb, vs) <- B/BW(mb, vs+1) (B when
 * (mb, vs+1) has one, else BW: the op that sends the input gradient), F(mb, vs);
 * W(mb, vs) <- B(mb, vs). Ops absent from the schedule give no edge (validation reports
 * them). Leaves each op's number of successors in succ_offset[id] for
 * pp_schedule_build_succs. Fills version in the same pass over the programs. */
static void pp_schedule_build_deps(PpSchedule *sched, const PpScheduleIndex *ix) {
    int32_t total = pp_schedule_n_ops_total(sched);
    sched->dep_offset = g_new(int32_t, (gsize)total + 1);
    sched->deps = g_new(PpOpRef, 2 * (gsize)total + 1);
    sched->succ_offset = g_new0(int32_t, (gsize)total + 1);
    sched->version = g_new(int32_t, (gsize)total + 1);
    int32_t n = 0;
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int32_t version = 0; // U ops so far on this stage
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            sched->dep_offset[sched->op_offset[s] + i] = n;
            sched->version[sched->op_offset[s] + i] = version;
            if (op->kind == PP_OP_UPDATE) {
                version++;
                continue;
            }
            int32_t vs = ix->unit_vs[s * ix->n_chunks + op->chunk];
            switch (op->kind) {
            case PP_OP_FORWARD:
                if (vs > 0)
                    pp_schedule_add_dep(sched, ix, PP_OP_FORWARD, op->mb, vs - 1, &n);
                break;
            case PP_OP_BACKWARD:
            case PP_OP_BACKWARD_FULL:
                if (vs < sched->n_vstages - 1) {
                    gboolean split =
                        pp_schedule_index_find(ix, PP_OP_BACKWARD, op->mb, vs + 1) >= 0;
                    pp_schedule_add_dep(sched, ix, split ? PP_OP_BACKWARD : PP_OP_BACKWARD_FULL,
                                        op->mb, vs + 1, &n);
                }
                pp_schedule_add_dep(sched, ix, PP_OP_FORWARD, op->mb, vs, &n);
                break;
            case PP_OP_WEIGHT:
                pp_schedule_add_dep(sched, ix, PP_OP_BACKWARD, op->mb, vs, &n);
                break;
            default:
                PP_UNREACHABLE();
            }
        }
    }
    sched->dep_offset[total] = n;
}

/* Turns the successor counts in succ_offset into the CSR of successors by transposing deps.
 * Edges are placed from the highest flat id down, so successors come out in ascending flat
 * id. */
static void pp_schedule_build_succs(PpSchedule *sched) {
    int32_t  total = pp_schedule_n_ops_total(sched);
    int32_t  n_edges = sched->dep_offset[total];
    int32_t *offset = sched->succ_offset;
    for (int32_t id = 1; id < total; id++)
        offset[id] += offset[id - 1]; // now the end of id's successors
    offset[total] = n_edges;
    sched->succ = g_new(PpOpRef, (gsize)n_edges + 1);
    for (int32_t s = sched->n_stages - 1; s >= 0; s--) {
        for (int32_t i = sched->n_ops[s] - 1; i >= 0; i--) {
            int32_t id = sched->op_offset[s] + i;
            for (int32_t e = sched->dep_offset[id + 1] - 1; e >= sched->dep_offset[id]; e--) {
                int32_t from = pp_schedule_op_id(sched, sched->deps[e]);
                sched->succ[--offset[from]] = (PpOpRef){.stage = s, .index = i};
            }
        }
    }
}

/* Indexes the ops (reporting bad fields and duplicates), then fills mb_ops, deps, the
 * successor counts and versions from the index, which is freed on return. */
static gboolean pp_schedule_index_and_link(PpSchedule *sched, GError **error) {
    g_auto(PpScheduleIndex) ix = {0};
    pp_schedule_index_init(&ix, sched);
    if (!pp_schedule_index_ops(sched, &ix, error))
        return FALSE;
    pp_schedule_fill_mb_ops(sched, &ix);
    pp_schedule_build_deps(sched, &ix);
    return TRUE;
}

gboolean pp_schedule_finish(PpSchedule *sched, GError **error) {
    PP_ASSERT(sched->op_offset == NULL); // finish runs once
    PP_ASSERT(sched->n_mb >= 0);
    PP_ASSERT((int64_t)sched->n_mb * sched->n_vstages <= PP_SCHED_MAX_UNITS);
    sched->op_offset = g_new(int32_t, (gsize)sched->n_stages + 1);
    int64_t total = 0;
    for (int32_t s = 0; s < sched->n_stages; s++) {
        sched->op_offset[s] = (int32_t)total;
        total += sched->n_ops[s];
        PP_ASSERT(total < G_MAXINT32 / 4); // flat ids and 2 deps per op fit int32_t
    }
    sched->op_offset[sched->n_stages] = (int32_t)total;
    if (!pp_schedule_index_and_link(sched, error))
        return FALSE;
    pp_schedule_build_succs(sched);
    return pp_schedule_validate(sched, error);
}

/* --- validation --- */

/* Flat id of the op that sends the input gradient of the (mb, vs) whose mb_ops entries
 * (PP_OP_N_KINDS) are @unit downstream: B, else BW; -1. */
static inline int32_t pp_unit_grad_source(const int32_t *unit) {
    return unit[PP_OP_BACKWARD] >= 0 ? unit[PP_OP_BACKWARD] : unit[PP_OP_BACKWARD_FULL];
}

/* Exactly the required ops per (mb, vs): F and BW, or F, B and W when split. */
static gboolean pp_schedule_check_complete(const PpSchedule *sched, GError **error) {
    static const PpOpKind fused[] = {PP_OP_FORWARD, PP_OP_BACKWARD_FULL};
    static const PpOpKind split[] = {PP_OP_FORWARD, PP_OP_BACKWARD, PP_OP_WEIGHT};
    static const PpOpKind fused_wrong[] = {PP_OP_BACKWARD, PP_OP_WEIGHT};
    static const PpOpKind split_wrong[] = {PP_OP_BACKWARD_FULL};
    const PpOpKind       *need = sched->split_backward ? split : fused;
    const PpOpKind       *wrong = sched->split_backward ? split_wrong : fused_wrong;
    int                   n_need = sched->split_backward ? 3 : 2;
    int                   n_wrong = sched->split_backward ? 1 : 2;
    char                  a[2 * PP_OP_LABEL_SIZE], b[2 * PP_OP_LABEL_SIZE];
    const int32_t        *unit = sched->mb_ops; // (PP_OP_N_KINDS) ids of the current (mb, vs)
    for (int32_t mb = 0; mb < sched->n_mb; mb++) {
        for (int32_t vs = 0; vs < sched->n_vstages; vs++, unit += PP_OP_N_KINDS) {
            for (int k = 0; k < n_wrong; k++) {
                int32_t id = unit[wrong[k]];
                if (id < 0)
                    continue;
                g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_MISSING_OP,
                            "schedule '%s': %s does not fit a %s schedule; (mb %d, virtual "
                            "stage %d) needs %s",
                            sched->kind,
                            pp_op_ref_label(sched, pp_schedule_op_ref(sched, id), a, sizeof a),
                            sched->split_backward ? "split-backward (B + W)" : "fused (BW)", mb, vs,
                            sched->split_backward ? "B and W" : "BW");
                return FALSE;
            }
            for (int k = 0; k < n_need; k++) {
                if (unit[need[k]] >= 0)
                    continue;
                PpOp missing = {.kind = need[k],
                                .stage = sched->vstage_stage[vs],
                                .mb = mb,
                                .chunk = sched->vstage_chunk[vs]};
                g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_MISSING_OP,
                            "schedule '%s': %s is missing (every micro-batch 0..%d needs it "
                            "on every virtual stage)",
                            sched->kind, pp_op_describe(&missing, b, sizeof b), sched->n_mb - 1);
                return FALSE;
            }
        }
    }
    return TRUE;
}

/* On a stage, F before its B/BW and B before its W. */
static gboolean pp_schedule_check_order(const PpSchedule *sched, GError **error) {
    char           a[2 * PP_OP_LABEL_SIZE], b[2 * PP_OP_LABEL_SIZE];
    const int32_t *unit = sched->mb_ops; // (PP_OP_N_KINDS) ids of the current (mb, vs)
    for (int32_t mb = 0; mb < sched->n_mb; mb++) {
        for (int32_t vs = 0; vs < sched->n_vstages; vs++, unit += PP_OP_N_KINDS) {
            int32_t f = unit[PP_OP_FORWARD];
            int32_t g = pp_unit_grad_source(unit);
            int32_t w = unit[PP_OP_WEIGHT];
            int32_t pairs[2][2] = {{f, g}, {g, w}};
            for (int k = 0; k < 2; k++) {
                int32_t first = pairs[k][0], then = pairs[k][1];
                if (first < 0 || then < 0 || first < then)
                    continue; // same stage: flat ids order like program indices
                g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_ORDER,
                            "schedule '%s': %s runs before %s, which it depends on", sched->kind,
                            pp_op_ref_label(sched, pp_schedule_op_ref(sched, then), a, sizeof a),
                            pp_op_ref_label(sched, pp_schedule_op_ref(sched, first), b, sizeof b));
                return FALSE;
            }
        }
    }
    return TRUE;
}

/* Kahn's walk over a finished schedule. Each program is a chain, so instead of per-op
 * counters each stage keeps a program counter: a stage runs its program until its next op
 * has a cross-op dependency that has not run, then waits on that dependency's stage, which
 * wakes it once it has run past that op. Per-stage arrays only: (n_stages) each. */
typedef struct {
    int32_t *pc;    /* ops of the stage that ran */
    int32_t *queue; /* ring of stages ready to run */
    int32_t  head, n_queued;
    int32_t *first_waiter; /* first stage waiting on this one, -1: none */
    int32_t *next_waiter;  /* next stage waiting on the same stage, -1: none */
    int32_t *wait_index;   /* program index (on the awaited stage) the stage waits for */
} PpScheduleWalk;

/* Program index of the first cross-op dependency of the next op of @s that has not run, and
 * its stage in *@stage; -1 when all have run. */
static inline int32_t pp_schedule_walk_blocker(const PpSchedule *sched, const PpScheduleWalk *w,
                                               int32_t s, int32_t *stage) {
    int32_t id = sched->op_offset[s] + w->pc[s];
    for (int32_t e = sched->dep_offset[id]; e < sched->dep_offset[id + 1]; e++) {
        PpOpRef dep = sched->deps[e];
        if (dep.index >= w->pc[dep.stage]) {
            *stage = dep.stage;
            return dep.index;
        }
    }
    return -1;
}

/* Runs stage @s as far as it goes, then files it as a waiter if it is blocked. Returns the
 * number of ops it ran. */
static int32_t pp_schedule_walk_stage(const PpSchedule *sched, PpScheduleWalk *w, int32_t s) {
    int32_t n_run = 0, stage = -1, index = -1;
    for (; w->pc[s] < sched->n_ops[s]; w->pc[s]++, n_run++) {
        index = pp_schedule_walk_blocker(sched, w, s, &stage);
        if (index >= 0)
            break;
    }
    if (w->pc[s] < sched->n_ops[s]) {
        w->wait_index[s] = index;
        w->next_waiter[s] = w->first_waiter[stage];
        w->first_waiter[stage] = s;
    }
    return n_run;
}

/* Queues the stages waiting on stage @s whose awaited op has run. */
static void pp_schedule_walk_wake(const PpSchedule *sched, PpScheduleWalk *w, int32_t s) {
    int32_t *link = &w->first_waiter[s];
    while (*link >= 0) {
        int32_t t = *link;
        if (w->wait_index[t] >= w->pc[s]) {
            link = &w->next_waiter[t];
            continue;
        }
        *link = w->next_waiter[t];
        w->queue[(w->head + w->n_queued++) % sched->n_stages] = t;
    }
}

/* Runs the walk; sets @pc (n_stages) to the number of ops each stage ran. Returns the total
 * number of ops that ran. */
static int32_t pp_schedule_run_programs(const PpSchedule *sched, int32_t *pc) {
    int32_t             n_stages = sched->n_stages;
    g_autofree int32_t *queue = g_new(int32_t, n_stages);
    g_autofree int32_t *first_waiter = g_new(int32_t, n_stages);
    g_autofree int32_t *next_waiter = g_new(int32_t, n_stages);
    g_autofree int32_t *wait_index = g_new(int32_t, n_stages);
    PpScheduleWalk      w = {.pc = pc,
                             .queue = queue,
                             .n_queued = n_stages,
                             .first_waiter = first_waiter,
                             .next_waiter = next_waiter,
                             .wait_index = wait_index};
    for (int32_t s = 0; s < n_stages; s++) {
        pc[s] = 0;
        queue[s] = s;
        first_waiter[s] = -1;
    }
    int32_t n_run = 0;
    while (w.n_queued > 0) {
        int32_t s = queue[w.head];
        w.head = (w.head + 1) % n_stages;
        w.n_queued--;
        n_run += pp_schedule_walk_stage(sched, &w, s);
        pp_schedule_walk_wake(sched, &w, s);
    }
    return n_run;
}

/* Checks that every op can run (the graph of program-order and cross-op edges is acyclic).
 * On a cycle, walks back from the first op that cannot run through predecessors that cannot
 * run either (every such op has one) until it is on the cycle. */
static gboolean pp_schedule_check_acyclic(const PpSchedule *sched, GError **error) {
    int32_t             total = pp_schedule_n_ops_total(sched);
    g_autofree int32_t *pc = g_new(int32_t, sched->n_stages); // (n_stages) ops that ran
    int32_t             n_run = pp_schedule_run_programs(sched, pc);
    if (n_run == total)
        return TRUE;
    PpOpRef stuck = {.stage = 0};
    while (pc[stuck.stage] == sched->n_ops[stuck.stage])
        stuck.stage++;
    stuck.index = pc[stuck.stage];
    for (int32_t step = 0; step <= total - n_run; step++) {
        if (stuck.index > pc[stuck.stage]) {
            stuck.index--; // its program predecessor did not run
            continue;
        }
        int32_t        n_deps = 0, k = 0;
        const PpOpRef *deps = pp_schedule_deps(sched, stuck, &n_deps);
        while (k < n_deps && deps[k].index < pc[deps[k].stage])
            k++;
        PP_ASSERT(k < n_deps); // an op that cannot run always waits on another such op
        stuck = deps[k];
    }
    char a[2 * PP_OP_LABEL_SIZE];
    g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_DEADLOCK,
                "schedule '%s' deadlocks: %s lies on a dependency cycle (%d of %d ops can "
                "never run)",
                sched->kind, pp_op_ref_label(sched, stuck, a, sizeof a), total - n_run, total);
    return FALSE;
}

static gboolean pp_schedule_check_buffers(const PpSchedule *sched, GError **error) {
    char a[2 * PP_OP_LABEL_SIZE];
    for (int32_t s = 0; s < sched->n_stages; s++) {
        int32_t live = 0;
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            live += pp_op_inflight_change(sched->programs[s][i].kind);
            if (live <= sched->n_buffers[s])
                continue;
            g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_BUFFERS,
                        "schedule '%s': %s brings stage %d to %d (mb, chunk) units in flight, "
                        "more than its declared n_buffers = %d",
                        sched->kind,
                        pp_op_ref_label(sched, (PpOpRef){.stage = s, .index = i}, a, sizeof a), s,
                        live, sched->n_buffers[s]);
            return FALSE;
        }
    }
    return TRUE;
}

gboolean pp_schedule_validate(const PpSchedule *sched, GError **error) {
    PP_ASSERT(sched->op_offset != NULL && sched->mb_ops != NULL && sched->version != NULL);
    return pp_schedule_check_complete(sched, error) && pp_schedule_check_order(sched, error) &&
           pp_schedule_check_acyclic(sched, error) && pp_schedule_check_buffers(sched, error);
}

/* --- construction by name --- */

PpSchedule *pp_schedule_new(const PpScheduleParams *params, GError **error) {
    PP_ASSERT(params != NULL);
    const PpSchedKindInfo *info = params->kind;
    if (info == NULL) {
        g_autofree char *names = pp_sched_kind_names();
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_UNKNOWN_KIND,
                    "unknown schedule kind (no registry record); valid kinds: %s", names);
        return NULL;
    }
    /* The record's micro-batch rule; counts out of range are left to the generator, which
     * names the parameter. */
    const int32_t k = pp_sched_kind_mb_per_step(info, params->n_microbatches, params->accumulation);
    if (params->n_stages >= 1 && k >= 1 &&
        !pp_sched_kind_check_microbatches(info, params->n_stages, k, error))
        return NULL;
    g_autoptr(PpSchedule) sched = info->build(params, error);
    if (sched == NULL)
        return NULL;
    /* The registry states each kind's rules; its generator must follow them. */
    PP_ASSERT(sched->weight_mode == info->weights);
    PP_ASSERT(info->sync == PP_SCHED_SYNC_FROM_ORDER ||
              sched->synchronous == (info->sync == PP_SCHED_SYNC));
    PP_ASSERT(info->needs_order_file ||
              (sched->n_chunks >= info->min_chunks && sched->n_chunks <= info->max_chunks));
    for (int32_t s = 0; s < sched->n_stages && !info->needs_order_file; s++)
        PP_ASSERT(sched->n_weight_versions[s] ==
                  pp_sched_kind_weight_copies(info, sched->n_stages, s));
    if (!pp_schedule_finish(sched, error))
        return NULL;
    return g_steal_pointer(&sched);
}

/* --- order files --- */

gboolean pp_schedule_write_order(const PpSchedule *sched, const char *path, GError **error) {
    g_autoptr(GString) csv = g_string_new("stage,index,op,mb,chunk\n");
    for (int32_t s = 0; s < sched->n_stages; s++) {
        for (int32_t i = 0; i < sched->n_ops[s]; i++) {
            const PpOp *op = &sched->programs[s][i];
            g_string_append_printf(csv, "%d,%d,%s,%d,%d\n", s, i, pp_op_kind_name(op->kind), op->mb,
                                   op->chunk);
        }
    }
    g_autoptr(GError) local = NULL;
    if (!g_file_set_contents_full(path, csv->str, (gssize)csv->len, G_FILE_SET_CONTENTS_CONSISTENT,
                                  0644, &local)) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot write order file '%s': %s", path,
                    local->message);
        return FALSE;
    }
    return TRUE;
}

/* --- shared parameter checks --- */

gboolean pp_sched_check_param(const char *kind, const char *name, int32_t value, int32_t min,
                              int32_t max, GError **error) {
    if (value >= min && value <= max)
        return TRUE;
    if (max == G_MAXINT32)
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s': %s = %d is out of range; valid: >= %d", kind, name, value, min);
    else
        g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                    "schedule '%s': %s = %d is out of range; valid: %d..%d", kind, name, value, min,
                    max);
    return FALSE;
}

gboolean pp_sched_check_size(const char *kind, int64_t n_mb, int64_t n_vstages, GError **error) {
    if (n_mb * n_vstages <= PP_SCHED_MAX_UNITS)
        return TRUE;
    g_set_error(error, PP_SCHEDULE_ERROR, PP_SCHEDULE_ERROR_INVALID_PARAMS,
                "schedule '%s': %" G_GINT64_FORMAT " micro-batches x %" G_GINT64_FORMAT
                " virtual stages is too large; valid: a product <= %d",
                kind, n_mb, n_vstages, PP_SCHED_MAX_UNITS);
    return FALSE;
}
