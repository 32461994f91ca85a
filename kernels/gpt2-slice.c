/* SPDX-License-Identifier: MIT
 * gpt2-slice.c: Gpt2Slice, a pipeline stage's part of GPT-2 on the CPU (gpt2-slice.h). Lays out
 * and initialises its tensors by the shared table (gpt2-table.h) and owns one arena each for
 * params, grads, activation slots and scratch; every micro-batch's forward and
 * backward runs the gpt2_cpu_* kernels in a fixed order, so any split of the model into slices
 * computes the same numbers as the whole model in one slice.
 */
#include "gpt2-slice.h"

#include <string.h>

#include "gpt2-cpu.h"
#include "gpt2-table.h"
#include "kern-check.h"
#include "kern-pool.h"
#include "kern-util.h"

/* One block's activations inside a slot. The first group is written by F, the second by B
 * and read by W. */
typedef struct {
    float *ln1;      // (N, C)
    float *ln1_mean; // (N)
    float *ln1_rstd; // (N)
    float *qkv;      // (N, 3C)
    float *atty;     // (N, C)  attention output before the projection
    float *att;      // (B, NH, T, T) softmax probabilities
    float *res2;     // (N, C)  input + attention branch
    float *ln2;      // (N, C)
    float *ln2_mean; // (N)
    float *ln2_rstd; // (N)
    float *fch;      // (N, 4C) c_fc output, before GELU
    float *fch_gelu; // (N, 4C)
    float *dqkv;     // (N, 3C)
    float *dres2;    // (N, C)  gradient of res2 (= attn.c_proj output gradient)
    float *dln1;     // (N, C)
    float *dfch;     // (N, 4C) gradient of fch
    float *dln2;     // (N, C)
} SliceLayerActs;

/* Everything else in a slot. xs[i] is the residual stream entering block i of the slice
 * (xs[0] the slice input, xs[n_layers] its output); dxs[i] its gradient. */
typedef struct {
    float   *xs;       // (n_layers + 1, N, C)
    float   *dxs;      // (n_layers + 1, N, C)
    float   *lnf;      // (N, C)    last slice only
    float   *lnf_mean; // (N)
    float   *lnf_rstd; // (N)
    float   *probs;    // (N, Vp)   probabilities after F
    float   *dloss;    // (1)       B: gradient of each row's loss, for W
    float   *dlnf;     // (N, C)
    int32_t *tokens;   // (N)       first slice only
    int32_t *targets;  // (N)       last slice only
} SliceActs;

struct _Gpt2Slice {
    Gpt2SliceParams p;
    int             n_layers;
    int             N; /* B * T */

    Gpt2Table *table;                 /* names, offsets, shapes and init of the tensors */
    int wte, wpe, lnf_w, lnf_b, head; /* table indices, -1 when absent (head = wte if tied) */

    size_t n_params;
    float *params; /* (n_params) */
    float *grads;  /* (n_params) */

    size_t layer_floats;     /* per block, inside a slot */
    size_t slot_head_floats; /* the non-block part at the start of each slot */
    size_t slot_floats;      /* per slot, ints included (4-byte units) */
    float *acts;             /* (n_act_slots, slot_floats) */

    float *scratch_nc; /* (N, C) projection output (F) / its input gradient (B) */
};

/* --- layout --- */

#define CARVE(ptr, n)                                                                              \
    do {                                                                                           \
        (ptr) = base ? base + cur : NULL;                                                          \
        cur += (size_t)(n);                                                                        \
    } while (0)

static size_t slice_carve_layer(const Gpt2Slice *s, float *base, SliceLayerActs *a) {
    size_t N = (size_t)s->N, C = (size_t)s->p.model.C;
    size_t att = (size_t)s->p.B * s->p.model.NH * s->p.model.T * s->p.model.T;
    size_t cur = 0;
    CARVE(a->ln1, N * C);
    CARVE(a->ln1_mean, N);
    CARVE(a->ln1_rstd, N);
    CARVE(a->qkv, N * 3 * C);
    CARVE(a->atty, N * C);
    CARVE(a->att, att);
    CARVE(a->res2, N * C);
    CARVE(a->ln2, N * C);
    CARVE(a->ln2_mean, N);
    CARVE(a->ln2_rstd, N);
    CARVE(a->fch, N * 4 * C);
    CARVE(a->fch_gelu, N * 4 * C);
    CARVE(a->dqkv, N * 3 * C);
    CARVE(a->dres2, N * C);
    CARVE(a->dln1, N * C);
    CARVE(a->dfch, N * 4 * C);
    CARVE(a->dln2, N * C);
    return cur;
}

/* Carves the non-block part of a slot at @base (NULL: only counts); blocks follow it. */
static size_t slice_carve_slot(const Gpt2Slice *s, float *base, SliceActs *a) {
    size_t N = (size_t)s->N, C = (size_t)s->p.model.C, Vp = (size_t)s->p.model.Vp;
    size_t nb = (size_t)s->n_layers + 1;
    size_t cur = 0;
    float *ints;
    CARVE(a->xs, nb * N * C);
    CARVE(a->dxs, nb * N * C);
    size_t head = s->p.has_head ? 1 : 0;
    CARVE(a->lnf, head * N * C);
    CARVE(a->lnf_mean, head * N);
    CARVE(a->lnf_rstd, head * N);
    CARVE(a->probs, head * N * Vp);
    CARVE(a->dloss, head);
    CARVE(a->dlnf, head * N * C);
    /* int32 ids share the arena: same size as float, and never read back as floats */
    CARVE(ints, (s->p.has_embedding ? N : 0));
    a->tokens = (int32_t *)ints;
    CARVE(ints, head * N);
    a->targets = (int32_t *)ints;
    /* round slots (and blocks) to 16 floats: each starts 64-byte aligned relative to the arena */
    return (cur + 15) & ~(size_t)15;
}

static SliceActs slice_acts(const Gpt2Slice *s, int slot) {
    KERN_ASSERT(slot >= 0 && slot < s->p.n_act_slots);
    SliceActs a;
    slice_carve_slot(s, s->acts + (size_t)slot * s->slot_floats, &a);
    return a;
}

static SliceLayerActs slice_layer_acts(const Gpt2Slice *s, int slot, int l) {
    SliceLayerActs a;
    float         *base =
        s->acts + (size_t)slot * s->slot_floats + s->slot_head_floats + (size_t)l * s->layer_floats;
    slice_carve_layer(s, base, &a);
    return a;
}

/* Block @l's tensor @which, inside the flat array @base (params or grads). */
static inline float *slice_lt(const Gpt2Slice *s, const float *base, int l, int which) {
    return (float *)base +
           gpt2_table_tensor(s->table, gpt2_table_layer_tensor(s->table, l, which))->offset;
}

static inline float *slice_t(const Gpt2Slice *s, const float *base, int idx) {
    return (float *)base + gpt2_table_tensor(s->table, idx)->offset;
}

/* --- construction --- */

Gpt2Slice *gpt2_slice_new(const Gpt2SliceParams *params) {
    const Gpt2Config *m = &params->model;
    KERN_ASSERT(params->B >= 1 && params->n_act_slots >= 1);

    Gpt2Slice *s = kern_xcalloc(1, sizeof *s);
    s->p = *params;
    s->table = gpt2_table_new(params); /* checks the model and layer range */
    s->n_layers = params->layer_end - params->layer_begin;
    s->N = params->B * m->T;
    s->n_params = gpt2_table_n_params(s->table);
    s->wte = gpt2_table_wte(s->table);
    s->wpe = gpt2_table_wpe(s->table);
    s->lnf_w = gpt2_table_lnf_w(s->table);
    s->lnf_b = gpt2_table_lnf_b(s->table);
    s->head = gpt2_table_head(s->table);

    s->params = kern_xcalloc(s->n_params, sizeof(float));
    s->grads = kern_xcalloc(s->n_params, sizeof(float));

    SliceLayerActs la;
    SliceActs      sa;
    s->layer_floats = (slice_carve_layer(s, NULL, &la) + 15) & ~(size_t)15;
    s->slot_head_floats = slice_carve_slot(s, NULL, &sa);
    s->slot_floats = s->slot_head_floats + (size_t)s->n_layers * s->layer_floats;
    s->acts = kern_xcalloc((size_t)params->n_act_slots * s->slot_floats, sizeof(float));

    s->scratch_nc = kern_xcalloc((size_t)s->N * m->C, sizeof(float));
    return s;
}

void gpt2_slice_free(Gpt2Slice *slice) {
    if (!slice)
        return;
    free(slice->scratch_nc);
    free(slice->acts);
    free(slice->grads);
    free(slice->params);
    gpt2_table_free(slice->table);
    free(slice);
}

/* --- shape and tensor table --- */

void gpt2_slice_sizes(const Gpt2Slice *slice, Gpt2SliceSizes *sizes) {
    /* the element counts gpt2_slice_new() passed to kern_xcalloc() */
    sizes->params_bytes = slice->n_params * sizeof(float);
    sizes->grads_bytes = slice->n_params * sizeof(float);
    sizes->acts_bytes = (size_t)slice->p.n_act_slots * slice->slot_floats * sizeof(float);
    sizes->scratch_bytes = (size_t)slice->N * (size_t)slice->p.model.C * sizeof(float);
    sizes->total_bytes =
        sizes->params_bytes + sizes->grads_bytes + sizes->acts_bytes + sizes->scratch_bytes;
}

const Gpt2SliceParams *gpt2_slice_params_info(const Gpt2Slice *slice) {
    return &slice->p;
}

size_t gpt2_slice_n_params(const Gpt2Slice *slice) {
    return slice->n_params;
}

int gpt2_slice_n_tensors(const Gpt2Slice *slice) {
    return gpt2_table_n_tensors(slice->table);
}

const Gpt2Tensor *gpt2_slice_tensor(const Gpt2Slice *slice, int i) {
    return gpt2_table_tensor(slice->table, i);
}

const Gpt2Tensor *gpt2_slice_tensor_by_name(const Gpt2Slice *slice, const char *name) {
    return gpt2_table_tensor_by_name(slice->table, name);
}

float *gpt2_slice_params(Gpt2Slice *slice) {
    return slice->params;
}

float *gpt2_slice_grads(Gpt2Slice *slice) {
    return slice->grads;
}

void gpt2_slice_init_params(Gpt2Slice *slice, uint64_t seed) {
    for (int i = 0; i < gpt2_table_n_tensors(slice->table); i++)
        gpt2_table_init_tensor(slice->table, i, seed,
                               slice->params + gpt2_table_tensor(slice->table, i)->offset);
}

static void slice_zero_range(void *arg, size_t begin, size_t end) {
    memset((float *)arg + begin, 0, (end - begin) * sizeof(float));
}

void gpt2_slice_zero_grads(Gpt2Slice *slice) {
    /* memory-bound: two threads' share of the bandwidth beats one */
    kern_parallel_range(slice->n_params, 1 << 16, slice_zero_range, slice->grads);
}

/* --- compute --- */

void gpt2_slice_forward(Gpt2Slice *slice, const float *params, int slot, const int32_t *tokens,
                        const float *x_in, const int32_t *targets, float *x_out, float *loss) {
    const Gpt2Slice  *s = slice;
    const Gpt2Config *m = &s->p.model;
    int               B = s->p.B, T = m->T, C = m->C, NH = m->NH, N = s->N;
    size_t            NC = (size_t)N * C;
    SliceActs         a = slice_acts(s, slot);

    if (s->p.has_embedding) {
        KERN_ASSERT(tokens && !x_in);
        for (int i = 0; i < N; i++)
            KERN_ASSERT(tokens[i] >= 0 && tokens[i] < m->V);
        memcpy(a.tokens, tokens, (size_t)N * sizeof(int32_t));
        gpt2_cpu_encoder_forward(a.xs, tokens, slice_t(s, params, s->wte),
                                 slice_t(s, params, s->wpe), B, T, C);
    } else {
        KERN_ASSERT(x_in && !tokens);
        memcpy(a.xs, x_in, NC * sizeof(float));
    }

    for (int l = 0; l < s->n_layers; l++) {
        SliceLayerActs la = slice_layer_acts(s, slot, l);
        const float   *x = a.xs + (size_t)l * NC;
        float         *y = a.xs + (size_t)(l + 1) * NC;
        gpt2_cpu_layernorm_forward(la.ln1, la.ln1_mean, la.ln1_rstd, x,
                                   slice_lt(s, params, l, GPT2_LT_LN1_W),
                                   slice_lt(s, params, l, GPT2_LT_LN1_B), N, C);
        gpt2_cpu_matmul_forward(la.qkv, la.ln1, slice_lt(s, params, l, GPT2_LT_QKV_W),
                                slice_lt(s, params, l, GPT2_LT_QKV_B), N, C, 3 * C);
        gpt2_cpu_attention_forward(la.atty, la.att, la.qkv, B, T, C, NH);
        gpt2_cpu_matmul_forward(s->scratch_nc, la.atty, slice_lt(s, params, l, GPT2_LT_ATTPROJ_W),
                                slice_lt(s, params, l, GPT2_LT_ATTPROJ_B), N, C, C);
        gpt2_cpu_residual_forward(la.res2, x, s->scratch_nc, NC);
        gpt2_cpu_layernorm_forward(la.ln2, la.ln2_mean, la.ln2_rstd, la.res2,
                                   slice_lt(s, params, l, GPT2_LT_LN2_W),
                                   slice_lt(s, params, l, GPT2_LT_LN2_B), N, C);
        gpt2_cpu_matmul_forward(la.fch, la.ln2, slice_lt(s, params, l, GPT2_LT_FC_W),
                                slice_lt(s, params, l, GPT2_LT_FC_B), N, C, 4 * C);
        gpt2_cpu_gelu_forward(la.fch_gelu, la.fch, NC * 4);
        gpt2_cpu_matmul_forward(s->scratch_nc, la.fch_gelu,
                                slice_lt(s, params, l, GPT2_LT_FCPROJ_W),
                                slice_lt(s, params, l, GPT2_LT_FCPROJ_B), N, 4 * C, C);
        gpt2_cpu_residual_forward(y, la.res2, s->scratch_nc, NC);
    }

    const float *out = a.xs + (size_t)s->n_layers * NC;
    if (s->p.has_head) {
        KERN_ASSERT(targets && loss && !x_out);
        memcpy(a.targets, targets, (size_t)N * sizeof(int32_t));
        gpt2_cpu_layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, out, slice_t(s, params, s->lnf_w),
                                   slice_t(s, params, s->lnf_b), N, C);
        gpt2_cpu_matmul_forward(a.probs, a.lnf, slice_t(s, params, s->head), NULL, N, C, m->Vp);
        *loss = gpt2_cpu_crossentropy_forward(a.probs, NULL, targets, N, m->V, m->Vp);
    } else {
        KERN_ASSERT(x_out && !targets && !loss);
        memcpy(x_out, out, NC * sizeof(float));
    }
}

/* The backward in parts, each the input-gradient (B) or weight-gradient (W) half of the head,
 * of one block or of the embeddings; B, W and BW run them in their orders. */

/* B of the head (last slice): the loss gradient back to the top of the blocks. The other
 * slices copy @dx_out there. */
static void slice_head_backward_input(const Gpt2Slice *s, const float *params, const SliceActs *a,
                                      const float *dx_out, float loss_scale) {
    const Gpt2Config *m = &s->p.model;
    int               C = m->C, N = s->N;
    size_t            NC = (size_t)N * C;
    float            *dtop = a->dxs + (size_t)s->n_layers * NC;
    if (s->p.has_head) {
        KERN_ASSERT(!dx_out);
        const float *top = a->xs + (size_t)s->n_layers * NC;
        /* W reads the probabilities again, with this loss gradient */
        *a->dloss = loss_scale / (float)N;
        gpt2_cpu_head_backward_input(a->dlnf, a->probs, a->targets, *a->dloss,
                                     slice_t(s, params, s->head), N, C, m->V, m->Vp);
        memset(dtop, 0, NC * sizeof(float));
        gpt2_cpu_layernorm_backward_input(dtop, a->dlnf, top, slice_t(s, params, s->lnf_w),
                                          a->lnf_mean, a->lnf_rstd, N, C);
    } else {
        KERN_ASSERT(dx_out);
        memcpy(dtop, dx_out, NC * sizeof(float));
    }
}

/* W of the head (last slice; nothing on the others). */
static void slice_head_backward_weight(const Gpt2Slice *s, const SliceActs *a, float *grads) {
    const Gpt2Config *m = &s->p.model;
    int               C = m->C, N = s->N;
    if (!s->p.has_head)
        return;
    const float *top = a->xs + (size_t)s->n_layers * N * C;
    gpt2_cpu_head_backward_weight(slice_t(s, grads, s->head), a->probs, a->targets, *a->dloss,
                                  a->lnf, N, C, m->V, m->Vp);
    gpt2_cpu_layernorm_backward_weight(slice_t(s, grads, s->lnf_w), slice_t(s, grads, s->lnf_b),
                                       a->dlnf, top, a->lnf_mean, a->lnf_rstd, N, C);
}

/* B of block @l: the gradient of its output (dxs[l + 1]) back to its input (dxs[l]). */
static void slice_layer_backward_input(const Gpt2Slice *s, const float *params, int slot,
                                       const SliceActs *a, int l) {
    const Gpt2Config *m = &s->p.model;
    int               B = s->p.B, T = m->T, C = m->C, NH = m->NH, N = s->N;
    size_t            NC = (size_t)N * C;
    SliceLayerActs    la = slice_layer_acts(s, slot, l);
    const float      *x = a->xs + (size_t)l * NC;
    const float      *dy = a->dxs + (size_t)(l + 1) * NC;
    float            *dx = a->dxs + (size_t)l * NC;
    /* MLP branch: dy -> d fch_gelu -> d fch -> d ln2 -> d res2 */
    gpt2_cpu_matmul_backward_input(la.dfch, dy, slice_lt(s, params, l, GPT2_LT_FCPROJ_W), N, 4 * C,
                                   C);
    gpt2_cpu_gelu_backward(la.dfch, la.fch, la.dfch, NC * 4);
    gpt2_cpu_matmul_backward_input(la.dln2, la.dfch, slice_lt(s, params, l, GPT2_LT_FC_W), N, C,
                                   4 * C);
    memcpy(la.dres2, dy, NC * sizeof(float));
    gpt2_cpu_layernorm_backward_input(la.dres2, la.dln2, la.res2,
                                      slice_lt(s, params, l, GPT2_LT_LN2_W), la.ln2_mean,
                                      la.ln2_rstd, N, C);
    /* attention branch: d res2 -> d atty -> d qkv -> d ln1 -> d x */
    gpt2_cpu_matmul_backward_input(s->scratch_nc, la.dres2,
                                   slice_lt(s, params, l, GPT2_LT_ATTPROJ_W), N, C, C);
    gpt2_cpu_attention_backward(la.dqkv, s->scratch_nc, la.qkv, la.att, B, T, C, NH);
    gpt2_cpu_matmul_backward_input(la.dln1, la.dqkv, slice_lt(s, params, l, GPT2_LT_QKV_W), N, C,
                                   3 * C);
    memcpy(dx, la.dres2, NC * sizeof(float));
    gpt2_cpu_layernorm_backward_input(dx, la.dln1, x, slice_lt(s, params, l, GPT2_LT_LN1_W),
                                      la.ln1_mean, la.ln1_rstd, N, C);
}

/* W of block @l, from what its B kept in the slot. */
static void slice_layer_backward_weight(const Gpt2Slice *s, int slot, const SliceActs *a, int l,
                                        float *grads) {
    int            C = s->p.model.C, N = s->N;
    size_t         NC = (size_t)N * C;
    SliceLayerActs la = slice_layer_acts(s, slot, l);
    const float   *x = a->xs + (size_t)l * NC;
    const float   *dy = a->dxs + (size_t)(l + 1) * NC;
    gpt2_cpu_matmul_backward_weight(slice_lt(s, grads, l, GPT2_LT_FCPROJ_W),
                                    slice_lt(s, grads, l, GPT2_LT_FCPROJ_B), dy, la.fch_gelu, N,
                                    4 * C, C);
    gpt2_cpu_matmul_backward_weight(slice_lt(s, grads, l, GPT2_LT_FC_W),
                                    slice_lt(s, grads, l, GPT2_LT_FC_B), la.dfch, la.ln2, N, C,
                                    4 * C);
    gpt2_cpu_layernorm_backward_weight(slice_lt(s, grads, l, GPT2_LT_LN2_W),
                                       slice_lt(s, grads, l, GPT2_LT_LN2_B), la.dln2, la.res2,
                                       la.ln2_mean, la.ln2_rstd, N, C);
    gpt2_cpu_matmul_backward_weight(slice_lt(s, grads, l, GPT2_LT_ATTPROJ_W),
                                    slice_lt(s, grads, l, GPT2_LT_ATTPROJ_B), la.dres2, la.atty, N,
                                    C, C);
    gpt2_cpu_matmul_backward_weight(slice_lt(s, grads, l, GPT2_LT_QKV_W),
                                    slice_lt(s, grads, l, GPT2_LT_QKV_B), la.dqkv, la.ln1, N, C,
                                    3 * C);
    gpt2_cpu_layernorm_backward_weight(slice_lt(s, grads, l, GPT2_LT_LN1_W),
                                       slice_lt(s, grads, l, GPT2_LT_LN1_B), la.dln1, x,
                                       la.ln1_mean, la.ln1_rstd, N, C);
}

/* The end of B: the gradient of the slice input to @dx_in (non-first slices). */
static void slice_backward_input_out(const Gpt2Slice *s, const SliceActs *a, float *dx_in) {
    if (s->p.has_embedding) {
        KERN_ASSERT(!dx_in);
    } else {
        KERN_ASSERT(dx_in);
        memcpy(dx_in, a->dxs, (size_t)s->N * s->p.model.C * sizeof(float));
    }
}

/* W of the embeddings (first slice; nothing on the others). */
static void slice_embedding_backward_weight(const Gpt2Slice *s, const SliceActs *a, float *grads) {
    if (s->p.has_embedding)
        gpt2_cpu_encoder_backward(slice_t(s, grads, s->wte), slice_t(s, grads, s->wpe), a->dxs,
                                  a->tokens, s->p.B, s->p.model.T, s->p.model.C);
}

/* Tells @hook (nullable) that bucket @k of the slice is final, unless it is empty. */
static void slice_bucket_ready(const Gpt2Slice *s, const Gpt2GradsHook *hook, int k) {
    size_t begin, end;
    if (hook == NULL)
        return;
    gpt2_table_bucket(s->table, k, &begin, &end);
    if (end > begin)
        hook->ready(hook->user_data, k, begin, end);
}

void gpt2_slice_backward_input(Gpt2Slice *slice, const float *params, int slot, const float *dx_out,
                               float loss_scale, float *dx_in) {
    SliceActs a = slice_acts(slice, slot);
    slice_head_backward_input(slice, params, &a, dx_out, loss_scale);
    for (int l = slice->n_layers - 1; l >= 0; l--)
        slice_layer_backward_input(slice, params, slot, &a, l);
    slice_backward_input_out(slice, &a, dx_in);
}

void gpt2_slice_backward_weight(Gpt2Slice *slice, int slot, float *grads,
                                const Gpt2GradsHook *hook) {
    SliceActs a = slice_acts(slice, slot);
    slice_head_backward_weight(slice, &a, grads);
    slice_bucket_ready(slice, hook, 0);
    for (int l = slice->n_layers - 1; l >= 0; l--) {
        slice_layer_backward_weight(slice, slot, &a, l, grads);
        slice_bucket_ready(slice, hook, slice->n_layers - l);
    }
    slice_embedding_backward_weight(slice, &a, grads);
    slice_bucket_ready(slice, hook, slice->n_layers + 1);
}

void gpt2_slice_backward(Gpt2Slice *slice, const float *params, int slot, const float *dx_out,
                         float loss_scale, float *dx_in, float *grads, const Gpt2GradsHook *hook) {
    /* Each part's W right after its B (the same kernels on the same inputs as B then W, so
     * the same bits): a bucket is final as early as the backward allows. */
    SliceActs a = slice_acts(slice, slot);
    slice_head_backward_input(slice, params, &a, dx_out, loss_scale);
    slice_head_backward_weight(slice, &a, grads);
    slice_bucket_ready(slice, hook, 0);
    for (int l = slice->n_layers - 1; l >= 0; l--) {
        slice_layer_backward_input(slice, params, slot, &a, l);
        slice_layer_backward_weight(slice, slot, &a, l, grads);
        slice_bucket_ready(slice, hook, slice->n_layers - l);
    }
    slice_backward_input_out(slice, &a, dx_in);
    slice_embedding_backward_weight(slice, &a, grads);
    slice_bucket_ready(slice, hook, slice->n_layers + 1);
}
