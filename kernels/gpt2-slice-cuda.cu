/* SPDX-License-Identifier: MIT
 * gpt2-slice-cuda.cu: Gpt2CudaSlice (gpt2-slice-cuda.h). The arenas are carved into 256-byte
 * aligned buffers in the same order for sizing and for use; F, B and W call the gpt2_cuda_*
 * kernels in the CPU slice's order, so any split of the model runs the same kernels on the
 * same shapes as the whole model in one slice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-cuda.h"
#include "gpt2-slice-cuda.h"
#include "kern-cuda-internal.cuh"
#include "kern-util.h"

/* One block's activations inside a slot (dt unless marked f32). The first group is written
 * by F, the second by B and read by W. */
typedef struct {
    char  *ln1;      // (N, C)
    float *ln1_mean; // (N) f32
    float *ln1_rstd; // (N) f32
    char  *qkv;      // (N, 3C)
    char  *atty;     // (N, C)  attention output before the projection
    char  *att;      // (B, NH, T, T) softmax probabilities; flash: (B, NH, T) f32 lse
    char  *res2;     // (N, C)  input + attention branch
    char  *ln2;      // (N, C)
    float *ln2_mean; // (N) f32
    float *ln2_rstd; // (N) f32
    char  *fch;      // (N, 4C) c_fc output, before GELU
    char  *fch_gelu; // (N, 4C)
    char  *dqkv;     // (N, 3C)
    char  *dres2;    // (N, C)  gradient of res2
    char  *dln1;     // (N, C)
    char  *dfch;     // (N, 4C) gradient of fch
    char  *dln2;     // (N, C)
} CudaLayerActs;

/* Everything else in a slot. xs + i * NC is the residual stream entering block i (i = 0: the
 * slice input, i = n_layers: its output); dxs likewise for its gradient. */
typedef struct {
    char    *xs;       // (n_layers + 1, N, C)
    char    *dxs;      // (n_layers + 1, N, C)
    char    *lnf;      // (N, C)   last slice only
    float   *lnf_mean; // (N) f32
    float   *lnf_rstd; // (N) f32
    char    *probs;    // (N, Vp)  probabilities after F, dlogits after B
    char    *dlnf;     // (N, C)
    int32_t *tokens;   // (N)      first slice only
    int32_t *order;    // (N)      embedding-backward buckets (gpt2_cuda_encoder_buckets)
    int32_t *starts;   // (N + 1)
    int32_t *targets;  // (N)      last slice only
    float   *row_loss; // (N) f32  -log p[target] of this slot's F, read again by its B
} CudaSlotActs;

/* Pinned host staging of one slot's ids, and the event after its last upload. */
typedef struct {
    int32_t    *tokens;  // (N)
    int32_t    *order;   // (N)
    int32_t    *starts;  // (N + 1)
    int32_t    *targets; // (N)
    cudaEvent_t uploaded;
    int         n_buckets;
} CudaSlotHost;

struct _Gpt2CudaSlice {
    Gpt2CudaSliceParams p;
    Gpt2Table          *table;
    Gpt2CudaSliceSizes  sizes;
    int                 n_layers, N;
    size_t              esz;         /* bytes per dt element */
    size_t              layer_bytes; /* per block, inside a slot */
    size_t              head_bytes;  /* the non-block part at the start of each slot */

    float *params;         /* (n_params) f32 */
    void  *compute_params; /* (n_params) dt: params itself in fp32 */
    float *grads;          /* (n_params) f32 */
    char  *acts;           /* (n_act_slots, act_slot_bytes) */
    char  *scratch;        /* scratch_nc, attention scratch */
    char  *scratch_nc;     /* (N, C) dt */
    char  *scratch_att;    /* gpt2_cuda_attention_scratch_bytes() */

    CudaSlotHost *host;      /* (n_act_slots) */
    int32_t      *pinned;    /* pinned ids of all slots */
    int64_t      *sort_keys; /* (N) host scratch for the buckets */
};

/* --- layout --- */

static size_t carve_round(size_t bytes) {
    return (bytes + 255) & ~(size_t)255;
}

#define CARVE(ptr, type, bytes)                                                                    \
    do {                                                                                           \
        (ptr) = base ? (type)(base + cur) : (type)NULL;                                            \
        cur += carve_round(bytes);                                                                 \
    } while (0)

static size_t carve_layer(const Gpt2CudaSliceParams *p, char *base, CudaLayerActs *a) {
    const Gpt2Config *m = &p->slice.model;
    size_t            esz = kern_dtype_size(p->dtype);
    size_t            N = (size_t)p->slice.B * m->T, C = (size_t)m->C;
    size_t            bht = (size_t)p->slice.B * m->NH * m->T;
    size_t            att_bytes = p->flash_attention ? bht * sizeof(float) : bht * m->T * esz;
    size_t            nc = N * C * esz, nf = N * sizeof(float);
    size_t            cur = 0;
    CARVE(a->ln1, char *, nc);
    CARVE(a->ln1_mean, float *, nf);
    CARVE(a->ln1_rstd, float *, nf);
    CARVE(a->qkv, char *, 3 * nc);
    CARVE(a->atty, char *, nc);
    CARVE(a->att, char *, att_bytes);
    CARVE(a->res2, char *, nc);
    CARVE(a->ln2, char *, nc);
    CARVE(a->ln2_mean, float *, nf);
    CARVE(a->ln2_rstd, float *, nf);
    CARVE(a->fch, char *, 4 * nc);
    CARVE(a->fch_gelu, char *, 4 * nc);
    CARVE(a->dqkv, char *, 3 * nc);
    CARVE(a->dres2, char *, nc);
    CARVE(a->dln1, char *, nc);
    CARVE(a->dfch, char *, 4 * nc);
    CARVE(a->dln2, char *, nc);
    return cur;
}

static size_t carve_slot_head(const Gpt2CudaSliceParams *p, char *base, CudaSlotActs *a) {
    const Gpt2Config *m = &p->slice.model;
    size_t            esz = kern_dtype_size(p->dtype);
    size_t            N = (size_t)p->slice.B * m->T, C = (size_t)m->C;
    size_t            nb = (size_t)(p->slice.layer_end - p->slice.layer_begin) + 1;
    size_t            head = p->slice.has_head ? 1 : 0, emb = p->slice.has_embedding ? 1 : 0;
    size_t            cur = 0;
    CARVE(a->xs, char *, nb *N *C *esz);
    CARVE(a->dxs, char *, nb *N *C *esz);
    CARVE(a->lnf, char *, head *N *C *esz);
    CARVE(a->lnf_mean, float *, head *N * sizeof(float));
    CARVE(a->lnf_rstd, float *, head *N * sizeof(float));
    CARVE(a->probs, char *, head *N *(size_t)m->Vp *esz);
    CARVE(a->dlnf, char *, head *N *C *esz);
    CARVE(a->tokens, int32_t *, emb * N * sizeof(int32_t));
    CARVE(a->order, int32_t *, emb * N * sizeof(int32_t));
    CARVE(a->starts, int32_t *, emb * (N + 1) * sizeof(int32_t));
    CARVE(a->targets, int32_t *, head * N * sizeof(int32_t));
    CARVE(a->row_loss, float *, head *N * sizeof(float));
    return cur;
}

/* Scratch: the projection output / its gradient, the attention scratch. */
static size_t carve_scratch(const Gpt2CudaSliceParams *p, char *base, char **nc, char **att) {
    const Gpt2Config *m = &p->slice.model;
    size_t            N = (size_t)p->slice.B * m->T;
    size_t            cur = 0;
    CARVE(*nc, char *, N * m->C * kern_dtype_size(p->dtype));
    CARVE(*att, char *,
          p->flash_attention
              ? gpt2_cuda_flash_attention_scratch_bytes(p->slice.B, m->T, m->NH)
              : gpt2_cuda_attention_scratch_bytes(p->slice.B, m->T, m->C, m->NH, p->dtype));
    return cur;
}

const char *gpt2_cuda_slice_params_check(const Gpt2CudaSliceParams *params) {
    const Gpt2SliceParams *s = &params->slice;
    const Gpt2Config      *m = &s->model;
    if (m->L < 1 || m->C < 1 || m->NH < 1 || m->T < 1 || m->V < 1)
        return "model L, C, NH, T and V must all be >= 1";
    if (m->C % m->NH != 0)
        return "model C must be a multiple of NH";
    if (m->V > m->Vp)
        return "model V must be <= Vp (the padded vocabulary)";
    if (s->layer_begin < 0 || s->layer_begin > s->layer_end || s->layer_end > m->L)
        return "layers must satisfy 0 <= layer_begin <= layer_end <= L";
    if (s->has_embedding && s->layer_begin != 0)
        return "the embedding belongs to the slice starting at block 0";
    if (s->has_head && s->layer_end != m->L)
        return "the head belongs to the slice ending at block L";
    if (s->tie_head && !(s->has_embedding && s->has_head))
        return "tie_head needs a slice with both the embedding and the head";
    if (s->B < 1 || s->n_act_slots < 1)
        return "B and n_act_slots must be >= 1";
    if (params->dtype != KERN_DTYPE_F32 && params->dtype != KERN_DTYPE_BF16)
        return "dtype must be fp32 or bf16";
    /* bf16 rows of C, C / NH (a head) and Vp elements stay 16-byte aligned for cuBLASLt */
    if (params->dtype == KERN_DTYPE_BF16 &&
        (m->C % 8 != 0 || (m->C / m->NH) % 8 != 0 || m->Vp % 8 != 0))
        return "bf16 needs C, the head size C / NH and Vp to be multiples of 8";
    if (params->flash_attention && !gpt2_cuda_flash_attention_supported(m->C, m->NH, params->dtype))
        return "flash attention needs bf16 and a head size C / NH of 32, 64 or 128";
    return NULL;
}

void gpt2_cuda_slice_sizes(const Gpt2CudaSliceParams *params, Gpt2CudaSliceSizes *sizes) {
    const char *bad = gpt2_cuda_slice_params_check(params);
    if (bad) {
        fprintf(stderr, "gpt2_cuda_slice_sizes: invalid parameters: %s\n", bad);
        abort();
    }
    Gpt2Table *table = gpt2_table_new(&params->slice);
    size_t     n_params = gpt2_table_n_params(table);
    gpt2_table_free(table);
    CudaLayerActs la;
    CudaSlotActs  sa;
    char         *nc, *att;
    int           n_layers = params->slice.layer_end - params->slice.layer_begin;
    memset(sizes, 0, sizeof *sizes);
    sizes->params_bytes = carve_round(n_params * sizeof(float));
    sizes->compute_params_bytes = params->dtype == KERN_DTYPE_F32
                                      ? 0
                                      : carve_round(n_params * kern_dtype_size(params->dtype));
    sizes->grads_bytes = carve_round(n_params * sizeof(float));
    sizes->act_slot_bytes =
        carve_slot_head(params, NULL, &sa) + (size_t)n_layers * carve_layer(params, NULL, &la);
    sizes->acts_bytes = (size_t)params->slice.n_act_slots * sizes->act_slot_bytes;
    sizes->scratch_bytes = carve_scratch(params, NULL, &nc, &att);
    sizes->total_bytes = sizes->params_bytes + sizes->compute_params_bytes + sizes->grads_bytes +
                         sizes->acts_bytes + sizes->scratch_bytes;
}

/* --- construction --- */

static void slice_release(Gpt2CudaSlice *s) {
    if (s->host) {
        for (int i = 0; i < s->p.slice.n_act_slots; i++) {
            if (s->host[i].uploaded)
                KERN_CUDA_CHECK(cudaEventDestroy(s->host[i].uploaded));
        }
    }
    if (s->pinned)
        KERN_CUDA_CHECK(cudaFreeHost(s->pinned));
    if (s->compute_params != (void *)s->params)
        KERN_CUDA_CHECK(cudaFree(s->compute_params));
    KERN_CUDA_CHECK(cudaFree(s->params));
    KERN_CUDA_CHECK(cudaFree(s->grads));
    KERN_CUDA_CHECK(cudaFree(s->acts));
    KERN_CUDA_CHECK(cudaFree(s->scratch));
    free(s->sort_keys);
    free(s->host);
    gpt2_table_free(s->table);
    free(s);
}

Gpt2CudaSlice *gpt2_cuda_slice_new(const Gpt2CudaSliceParams *params) {
    const char *bad = gpt2_cuda_slice_params_check(params);
    if (bad) {
        fprintf(stderr, "gpt2_cuda_slice_new: invalid parameters: %s\n", bad);
        abort();
    }
    Gpt2CudaSlice *s = (Gpt2CudaSlice *)kern_xcalloc(1, sizeof *s);
    s->p = *params;
    s->table = gpt2_table_new(&params->slice);
    gpt2_cuda_slice_sizes(params, &s->sizes);
    s->n_layers = params->slice.layer_end - params->slice.layer_begin;
    s->N = params->slice.B * params->slice.model.T;
    s->esz = kern_dtype_size(params->dtype);
    CudaLayerActs la;
    CudaSlotActs  sa;
    s->layer_bytes = carve_layer(params, NULL, &la);
    s->head_bytes = carve_slot_head(params, NULL, &sa);
    int n_slots = params->slice.n_act_slots;
    s->host = (CudaSlotHost *)kern_xcalloc((size_t)n_slots, sizeof *s->host);
    s->sort_keys = (int64_t *)kern_xcalloc((size_t)s->N, sizeof *s->sort_keys);

    void  *p = NULL, *cp = NULL, *g = NULL, *a = NULL, *sc = NULL;
    size_t ids_per_slot = 4 * (size_t)s->N + 1;
    int    ok = kern_cuda_try_malloc(&p, s->sizes.params_bytes);
    s->params = (float *)p;
    if (ok && s->sizes.compute_params_bytes) {
        ok = kern_cuda_try_malloc(&cp, s->sizes.compute_params_bytes);
        s->compute_params = cp;
    } else {
        s->compute_params = p;
    }
    ok = ok && kern_cuda_try_malloc(&g, s->sizes.grads_bytes);
    s->grads = (float *)g;
    ok = ok && kern_cuda_try_malloc(&a, s->sizes.acts_bytes);
    s->acts = (char *)a;
    ok = ok && kern_cuda_try_malloc(&sc, s->sizes.scratch_bytes);
    s->scratch = (char *)sc;
    if (ok) {
        cudaError_t err =
            cudaMallocHost((void **)&s->pinned, (size_t)n_slots * ids_per_slot * sizeof(int32_t));
        if (err == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            s->pinned = NULL;
            ok = 0;
        } else {
            KERN_CUDA_CHECK(err);
        }
    }
    if (!ok) {
        slice_release(s);
        return NULL;
    }
    for (int i = 0; i < n_slots; i++) {
        int32_t *ids = s->pinned + (size_t)i * ids_per_slot;
        s->host[i].tokens = ids;
        s->host[i].targets = ids + s->N;
        s->host[i].order = ids + 2 * (size_t)s->N;
        s->host[i].starts = ids + 3 * (size_t)s->N;
        KERN_CUDA_CHECK(cudaEventCreateWithFlags(&s->host[i].uploaded, cudaEventDisableTiming));
    }
    carve_scratch(params, s->scratch, &s->scratch_nc, &s->scratch_att);
    KERN_CUDA_CHECK(cudaMemset(s->params, 0, s->sizes.params_bytes));
    KERN_CUDA_CHECK(cudaMemset(s->grads, 0, s->sizes.grads_bytes));
    if (s->compute_params != (void *)s->params)
        KERN_CUDA_CHECK(cudaMemset(s->compute_params, 0, s->sizes.compute_params_bytes));
    KERN_CUDA_CHECK(cudaDeviceSynchronize());
    return s;
}

void gpt2_cuda_slice_free(Gpt2CudaSlice *slice) {
    if (!slice)
        return;
    KERN_CUDA_CHECK(cudaDeviceSynchronize());
    slice_release(slice);
}

/* --- shape, table, arenas --- */

const Gpt2CudaSliceParams *gpt2_cuda_slice_params_info(const Gpt2CudaSlice *slice) {
    return &slice->p;
}

const Gpt2Table *gpt2_cuda_slice_table(const Gpt2CudaSlice *slice) {
    return slice->table;
}

size_t gpt2_cuda_slice_n_params(const Gpt2CudaSlice *slice) {
    return gpt2_table_n_params(slice->table);
}

float *gpt2_cuda_slice_params(Gpt2CudaSlice *slice) {
    return slice->params;
}

float *gpt2_cuda_slice_grads(Gpt2CudaSlice *slice) {
    return slice->grads;
}

void *gpt2_cuda_slice_compute_params(Gpt2CudaSlice *slice) {
    return slice->compute_params;
}

void gpt2_cuda_slice_cast_params(Gpt2CudaSlice *slice, void *dst, const float *src,
                                 KernCudaCtx *ctx) {
    kern_cuda_convert(dst, slice->p.dtype, src, KERN_DTYPE_F32, gpt2_cuda_slice_n_params(slice),
                      ctx->stream);
}

void gpt2_cuda_slice_refresh_compute_params(Gpt2CudaSlice *slice, KernCudaCtx *ctx) {
    gpt2_cuda_slice_cast_params(slice, slice->compute_params, slice->params, ctx);
}

static void slice_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                       KernCudaCtx *ctx) {
    if (bytes == 0)
        return;
    KERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, ctx->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

void gpt2_cuda_slice_init_params(Gpt2CudaSlice *slice, uint64_t seed, KernCudaCtx *ctx) {
    size_t max_numel = 0;
    for (int i = 0; i < gpt2_table_n_tensors(slice->table); i++) {
        size_t n = gpt2_table_tensor(slice->table, i)->numel;
        max_numel = n > max_numel ? n : max_numel;
    }
    float *host = (float *)kern_xmalloc(max_numel * sizeof(float));
    for (int i = 0; i < gpt2_table_n_tensors(slice->table); i++) {
        const Gpt2Tensor *t = gpt2_table_tensor(slice->table, i);
        gpt2_table_init_tensor(slice->table, i, seed, host);
        slice_copy(slice->params + t->offset, host, t->numel * sizeof(float),
                   cudaMemcpyHostToDevice, ctx);
    }
    free(host);
    gpt2_cuda_slice_refresh_compute_params(slice, ctx);
    kern_cuda_ctx_sync(ctx);
}

void gpt2_cuda_slice_zero_grads(Gpt2CudaSlice *slice, KernCudaCtx *ctx) {
    KERN_CUDA_CHECK(cudaMemsetAsync(slice->grads, 0,
                                    gpt2_cuda_slice_n_params(slice) * sizeof(float), ctx->stream));
}

/* --- host copies --- */

static float *slice_arena(Gpt2CudaSlice *slice, Gpt2CudaArena which) {
    KERN_ASSERT(which == GPT2_CUDA_PARAMS || which == GPT2_CUDA_GRADS);
    return which == GPT2_CUDA_PARAMS ? slice->params : slice->grads;
}

void gpt2_cuda_slice_to_host(Gpt2CudaSlice *slice, Gpt2CudaArena which, float *host,
                             KernCudaCtx *ctx) {
    slice_copy(host, slice_arena(slice, which), gpt2_cuda_slice_n_params(slice) * sizeof(float),
               cudaMemcpyDeviceToHost, ctx);
}

void gpt2_cuda_slice_from_host(Gpt2CudaSlice *slice, Gpt2CudaArena which, const float *host,
                               KernCudaCtx *ctx) {
    slice_copy(slice_arena(slice, which), host, gpt2_cuda_slice_n_params(slice) * sizeof(float),
               cudaMemcpyHostToDevice, ctx);
    if (which == GPT2_CUDA_PARAMS) {
        gpt2_cuda_slice_refresh_compute_params(slice, ctx);
        kern_cuda_ctx_sync(ctx);
    }
}

int gpt2_cuda_slice_tensor_to_host(Gpt2CudaSlice *slice, Gpt2CudaArena which, const char *name,
                                   float *host, KernCudaCtx *ctx) {
    const Gpt2Tensor *t = gpt2_table_tensor_by_name(slice->table, name);
    if (!t)
        return 0;
    slice_copy(host, slice_arena(slice, which) + t->offset, t->numel * sizeof(float),
               cudaMemcpyDeviceToHost, ctx);
    return 1;
}

int gpt2_cuda_slice_tensor_from_host(Gpt2CudaSlice *slice, Gpt2CudaArena which, const char *name,
                                     const float *host, KernCudaCtx *ctx) {
    const Gpt2Tensor *t = gpt2_table_tensor_by_name(slice->table, name);
    if (!t)
        return 0;
    slice_copy(slice_arena(slice, which) + t->offset, host, t->numel * sizeof(float),
               cudaMemcpyHostToDevice, ctx);
    if (which == GPT2_CUDA_PARAMS) {
        gpt2_cuda_slice_refresh_compute_params(slice, ctx);
        kern_cuda_ctx_sync(ctx);
    }
    return 1;
}

/* --- compute helpers --- */

static CudaSlotActs slot_acts(const Gpt2CudaSlice *s, int slot) {
    KERN_ASSERT(slot >= 0 && slot < s->p.slice.n_act_slots);
    CudaSlotActs a;
    carve_slot_head(&s->p, s->acts + (size_t)slot * s->sizes.act_slot_bytes, &a);
    return a;
}

static CudaLayerActs layer_acts(const Gpt2CudaSlice *s, int slot, int l) {
    CudaLayerActs a;
    char         *base = s->acts + (size_t)slot * s->sizes.act_slot_bytes + s->head_bytes +
                 (size_t)l * s->layer_bytes;
    carve_layer(&s->p, base, &a);
    return a;
}

/* Compute weights of block @l's tensor @which (dt), and the fp32 gradient of it. */
static const void *lw(const Gpt2CudaSlice *s, const void *params, int l, Gpt2LayerTensor which) {
    size_t off = gpt2_table_tensor(s->table, gpt2_table_layer_tensor(s->table, l, which))->offset;
    return (const char *)params + off * s->esz;
}

static float *lg(const Gpt2CudaSlice *s, float *grads, int l, Gpt2LayerTensor which) {
    return grads + gpt2_table_tensor(s->table, gpt2_table_layer_tensor(s->table, l, which))->offset;
}

static const void *tw(const Gpt2CudaSlice *s, const void *params, int idx) {
    return (const char *)params + gpt2_table_tensor(s->table, idx)->offset * s->esz;
}

static float *tg(const Gpt2CudaSlice *s, float *grads, int idx) {
    return grads + gpt2_table_tensor(s->table, idx)->offset;
}

/* The @i-th (N, C) residual-stream buffer of @base (xs or dxs). */
static char *stream_at(const Gpt2CudaSlice *s, char *base, int i) {
    return base + (size_t)i * s->N * s->p.slice.model.C * s->esz;
}

/* Checks ids on the host (a caller bug when out of range, as on the CPU). */
static void check_ids(const int32_t *ids, int n, int V) {
    for (int i = 0; i < n; i++)
        KERN_ASSERT(ids[i] >= 0 && ids[i] < V);
}

/* Waits until the slot's previous uploads have left the pinned staging. This blocks only when
 * the device has not yet reached the start of that slot's previous forward. */
static void staging_acquire(CudaSlotHost *h) {
    KERN_CUDA_CHECK(cudaEventSynchronize(h->uploaded));
}

/* --- compute --- */

void gpt2_cuda_slice_forward(Gpt2CudaSlice *slice, const void *params, int slot,
                             const int32_t *tokens, const void *x_in, const int32_t *targets,
                             void *x_out, float *loss, KernCudaCtx *ctx) {
    Gpt2CudaSlice    *s = slice;
    const Gpt2Config *m = &s->p.slice.model;
    KernDtype         dt = s->p.dtype;
    int               B = s->p.slice.B, T = m->T, C = m->C, NH = m->NH, N = s->N;
    size_t            NC = (size_t)N * C;
    cudaStream_t      st = ctx->stream;
    CudaSlotActs      a = slot_acts(s, slot);
    CudaSlotHost     *h = &s->host[slot];

    /* ids first: stage them and upload, then record the event the next F on this slot waits
     * for before it overwrites the staging */
    if (s->p.slice.has_embedding || s->p.slice.has_head)
        staging_acquire(h);
    if (s->p.slice.has_embedding) {
        KERN_ASSERT(tokens && !x_in);
        check_ids(tokens, N, m->V);
        memcpy(h->tokens, tokens, (size_t)N * sizeof(int32_t));
        h->n_buckets = gpt2_cuda_encoder_buckets(h->order, h->starts, s->sort_keys, tokens, N);
        KERN_CUDA_CHECK(cudaMemcpyAsync(a.tokens, h->tokens, (size_t)N * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, st));
        KERN_CUDA_CHECK(cudaMemcpyAsync(a.order, h->order, (size_t)N * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, st));
        KERN_CUDA_CHECK(cudaMemcpyAsync(a.starts, h->starts,
                                        ((size_t)h->n_buckets + 1) * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, st));
    } else {
        KERN_ASSERT(x_in && !tokens);
    }
    if (s->p.slice.has_head) {
        KERN_ASSERT(targets && loss && !x_out);
        check_ids(targets, N, m->V);
        memcpy(h->targets, targets, (size_t)N * sizeof(int32_t));
        KERN_CUDA_CHECK(cudaMemcpyAsync(a.targets, h->targets, (size_t)N * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, st));
    } else {
        KERN_ASSERT(x_out && !targets && !loss);
    }
    if (s->p.slice.has_embedding || s->p.slice.has_head)
        KERN_CUDA_CHECK(cudaEventRecord(h->uploaded, st));

    if (s->p.slice.has_embedding)
        gpt2_cuda_encoder_forward(a.xs, a.tokens, tw(s, params, gpt2_table_wte(s->table)),
                                  tw(s, params, gpt2_table_wpe(s->table)), B, T, C, dt, st);
    else
        KERN_CUDA_CHECK(cudaMemcpyAsync(a.xs, x_in, NC * s->esz, cudaMemcpyDeviceToDevice, st));

    for (int l = 0; l < s->n_layers; l++) {
        CudaLayerActs la = layer_acts(s, slot, l);
        const char   *x = stream_at(s, a.xs, l);
        char         *y = stream_at(s, a.xs, l + 1);
        gpt2_cuda_layernorm_forward(la.ln1, la.ln1_mean, la.ln1_rstd, x,
                                    lw(s, params, l, GPT2_LT_LN1_W),
                                    lw(s, params, l, GPT2_LT_LN1_B), N, C, dt, st);
        gpt2_cuda_matmul_forward(la.qkv, la.ln1, lw(s, params, l, GPT2_LT_QKV_W),
                                 lw(s, params, l, GPT2_LT_QKV_B), N, C, 3 * C, dt, ctx);
        if (s->p.flash_attention)
            gpt2_cuda_flash_attention_forward(la.atty, (float *)la.att, la.qkv, B, T, C, NH, dt,
                                              ctx);
        else
            gpt2_cuda_attention_forward(la.atty, la.att, la.qkv, s->scratch_att, B, T, C, NH, dt,
                                        ctx);
        gpt2_cuda_matmul_forward(s->scratch_nc, la.atty, lw(s, params, l, GPT2_LT_ATTPROJ_W),
                                 lw(s, params, l, GPT2_LT_ATTPROJ_B), N, C, C, dt, ctx);
        gpt2_cuda_residual_forward(la.res2, x, s->scratch_nc, NC, dt, st);
        gpt2_cuda_layernorm_forward(la.ln2, la.ln2_mean, la.ln2_rstd, la.res2,
                                    lw(s, params, l, GPT2_LT_LN2_W),
                                    lw(s, params, l, GPT2_LT_LN2_B), N, C, dt, st);
        gpt2_cuda_matmul_forward_gelu(la.fch_gelu, la.fch, la.ln2, lw(s, params, l, GPT2_LT_FC_W),
                                      lw(s, params, l, GPT2_LT_FC_B), N, C, 4 * C, dt, ctx);
        gpt2_cuda_matmul_forward(s->scratch_nc, la.fch_gelu, lw(s, params, l, GPT2_LT_FCPROJ_W),
                                 lw(s, params, l, GPT2_LT_FCPROJ_B), N, 4 * C, C, dt, ctx);
        gpt2_cuda_residual_forward(y, la.res2, s->scratch_nc, NC, dt, st);
    }

    char *out = stream_at(s, a.xs, s->n_layers);
    if (s->p.slice.has_head) {
        gpt2_cuda_layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, out,
                                    tw(s, params, gpt2_table_lnf_w(s->table)),
                                    tw(s, params, gpt2_table_lnf_b(s->table)), N, C, dt, st);
        gpt2_cuda_matmul_forward(a.probs, a.lnf, tw(s, params, gpt2_table_head(s->table)), NULL, N,
                                 C, m->Vp, dt, ctx);
        gpt2_cuda_crossentropy_forward(a.probs, a.row_loss, loss, a.targets, N, m->V, m->Vp, dt,
                                       st);
    } else {
        KERN_CUDA_CHECK(cudaMemcpyAsync(x_out, out, NC * s->esz, cudaMemcpyDeviceToDevice, st));
    }
}

void gpt2_cuda_slice_backward_input(Gpt2CudaSlice *slice, const void *params, int slot,
                                    const void *dx_out, float loss_scale, void *dx_in,
                                    KernCudaCtx *ctx) {
    Gpt2CudaSlice    *s = slice;
    const Gpt2Config *m = &s->p.slice.model;
    KernDtype         dt = s->p.dtype;
    int               B = s->p.slice.B, T = m->T, C = m->C, NH = m->NH, N = s->N;
    size_t            NC = (size_t)N * C, bytes = NC * s->esz;
    cudaStream_t      st = ctx->stream;
    CudaSlotActs      a = slot_acts(s, slot);
    char             *dtop = stream_at(s, a.dxs, s->n_layers);

    if (s->p.slice.has_head) {
        KERN_ASSERT(!dx_out);
        const char *top = stream_at(s, a.xs, s->n_layers);
        /* probs become dlogits in place: W reads them; the target's p - 1 comes from the fp32
         * row loss, not from the rounded probability */
        gpt2_cuda_crossentropy_backward(a.probs, a.probs, a.row_loss, a.targets,
                                        loss_scale / (float)N, N, m->V, m->Vp, dt, st);
        gpt2_cuda_matmul_backward_input(a.dlnf, a.probs, tw(s, params, gpt2_table_head(s->table)),
                                        N, C, m->Vp, dt, ctx);
        KERN_CUDA_CHECK(cudaMemsetAsync(dtop, 0, bytes, st));
        gpt2_cuda_layernorm_backward_input(dtop, a.dlnf, top,
                                           tw(s, params, gpt2_table_lnf_w(s->table)), a.lnf_mean,
                                           a.lnf_rstd, N, C, dt, st);
    } else {
        KERN_ASSERT(dx_out);
        KERN_CUDA_CHECK(cudaMemcpyAsync(dtop, dx_out, bytes, cudaMemcpyDeviceToDevice, st));
    }

    for (int l = s->n_layers - 1; l >= 0; l--) {
        CudaLayerActs la = layer_acts(s, slot, l);
        const char   *x = stream_at(s, a.xs, l);
        const char   *dy = stream_at(s, a.dxs, l + 1);
        char         *dx = stream_at(s, a.dxs, l);
        /* MLP branch: dy -> d fch_gelu -> d fch -> d ln2 -> d res2 */
        gpt2_cuda_matmul_backward_input(la.dfch, dy, lw(s, params, l, GPT2_LT_FCPROJ_W), N, 4 * C,
                                        C, dt, ctx);
        gpt2_cuda_gelu_backward(la.dfch, la.fch, la.dfch, NC * 4, dt, st);
        gpt2_cuda_matmul_backward_input(la.dln2, la.dfch, lw(s, params, l, GPT2_LT_FC_W), N, C,
                                        4 * C, dt, ctx);
        KERN_CUDA_CHECK(cudaMemcpyAsync(la.dres2, dy, bytes, cudaMemcpyDeviceToDevice, st));
        gpt2_cuda_layernorm_backward_input(la.dres2, la.dln2, la.res2,
                                           lw(s, params, l, GPT2_LT_LN2_W), la.ln2_mean,
                                           la.ln2_rstd, N, C, dt, st);
        /* attention branch: d res2 -> d atty -> d qkv -> d ln1 -> d x */
        gpt2_cuda_matmul_backward_input(s->scratch_nc, la.dres2,
                                        lw(s, params, l, GPT2_LT_ATTPROJ_W), N, C, C, dt, ctx);
        if (s->p.flash_attention)
            gpt2_cuda_flash_attention_backward(la.dqkv, (float *)s->scratch_att, s->scratch_nc,
                                               la.qkv, la.atty, (const float *)la.att, B, T, C, NH,
                                               dt, ctx);
        else
            gpt2_cuda_attention_backward(la.dqkv, s->scratch_att, s->scratch_nc, la.qkv, la.att, B,
                                         T, C, NH, dt, ctx);
        gpt2_cuda_matmul_backward_input(la.dln1, la.dqkv, lw(s, params, l, GPT2_LT_QKV_W), N, C,
                                        3 * C, dt, ctx);
        KERN_CUDA_CHECK(cudaMemcpyAsync(dx, la.dres2, bytes, cudaMemcpyDeviceToDevice, st));
        gpt2_cuda_layernorm_backward_input(dx, la.dln1, x, lw(s, params, l, GPT2_LT_LN1_W),
                                           la.ln1_mean, la.ln1_rstd, N, C, dt, st);
    }

    if (s->p.slice.has_embedding) {
        KERN_ASSERT(!dx_in);
    } else {
        KERN_ASSERT(dx_in);
        KERN_CUDA_CHECK(cudaMemcpyAsync(dx_in, a.dxs, bytes, cudaMemcpyDeviceToDevice, st));
    }
}

void gpt2_cuda_slice_backward_weight(Gpt2CudaSlice *slice, int slot, float *grads,
                                     KernCudaCtx *ctx) {
    Gpt2CudaSlice    *s = slice;
    const Gpt2Config *m = &s->p.slice.model;
    KernDtype         dt = s->p.dtype;
    int               B = s->p.slice.B, T = m->T, C = m->C, N = s->N;
    CudaSlotActs      a = slot_acts(s, slot);

    if (s->p.slice.has_head) {
        const char *top = stream_at(s, a.xs, s->n_layers);
        gpt2_cuda_matmul_backward_weight(tg(s, grads, gpt2_table_head(s->table)), NULL, a.probs,
                                         a.lnf, N, C, m->Vp, dt, ctx);
        gpt2_cuda_layernorm_backward_weight(tg(s, grads, gpt2_table_lnf_w(s->table)),
                                            tg(s, grads, gpt2_table_lnf_b(s->table)), a.dlnf, top,
                                            a.lnf_mean, a.lnf_rstd, N, C, dt, ctx);
    }
    for (int l = s->n_layers - 1; l >= 0; l--) {
        CudaLayerActs la = layer_acts(s, slot, l);
        const char   *x = stream_at(s, a.xs, l);
        const char   *dy = stream_at(s, a.dxs, l + 1);
        gpt2_cuda_matmul_backward_weight(lg(s, grads, l, GPT2_LT_FCPROJ_W),
                                         lg(s, grads, l, GPT2_LT_FCPROJ_B), dy, la.fch_gelu, N,
                                         4 * C, C, dt, ctx);
        gpt2_cuda_matmul_backward_weight(lg(s, grads, l, GPT2_LT_FC_W),
                                         lg(s, grads, l, GPT2_LT_FC_B), la.dfch, la.ln2, N, C,
                                         4 * C, dt, ctx);
        gpt2_cuda_layernorm_backward_weight(lg(s, grads, l, GPT2_LT_LN2_W),
                                            lg(s, grads, l, GPT2_LT_LN2_B), la.dln2, la.res2,
                                            la.ln2_mean, la.ln2_rstd, N, C, dt, ctx);
        gpt2_cuda_matmul_backward_weight(lg(s, grads, l, GPT2_LT_ATTPROJ_W),
                                         lg(s, grads, l, GPT2_LT_ATTPROJ_B), la.dres2, la.atty, N,
                                         C, C, dt, ctx);
        gpt2_cuda_matmul_backward_weight(lg(s, grads, l, GPT2_LT_QKV_W),
                                         lg(s, grads, l, GPT2_LT_QKV_B), la.dqkv, la.ln1, N, C,
                                         3 * C, dt, ctx);
        gpt2_cuda_layernorm_backward_weight(lg(s, grads, l, GPT2_LT_LN1_W),
                                            lg(s, grads, l, GPT2_LT_LN1_B), la.dln1, x, la.ln1_mean,
                                            la.ln1_rstd, N, C, dt, ctx);
    }
    if (s->p.slice.has_embedding) {
        gpt2_cuda_encoder_backward(tg(s, grads, gpt2_table_wte(s->table)),
                                   tg(s, grads, gpt2_table_wpe(s->table)), a.dxs, a.tokens, a.order,
                                   a.starts, s->host[slot].n_buckets, B, T, C, dt, ctx->stream);
    }
}

void gpt2_cuda_slice_backward(Gpt2CudaSlice *slice, const void *params, int slot,
                              const void *dx_out, float loss_scale, void *dx_in, float *grads,
                              KernCudaCtx *ctx) {
    gpt2_cuda_slice_backward_input(slice, params, slot, dx_out, loss_scale, dx_in, ctx);
    gpt2_cuda_slice_backward_weight(slice, slot, grads, ctx);
}
