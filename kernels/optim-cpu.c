/* SPDX-License-Identifier: MIT
 * optim-cpu.c: AdamW, Muon (Newton-Schulz via kern_gemm), update-level error feedback, the
 * warmup + cosine schedule and the clipping helpers of optim-cpu.h. Element-wise updates run
 * in chunks on the kern-pool team; the gradient norm adds fixed-size chunks' partial sums in
 * chunk order. Neither depends on the thread count, so steps are bitwise reproducible.
 */
#include "optim-cpu.h"

#include <math.h>
#include <string.h>

#include "kern-check.h"
#include "kern-gemm.h"
#include "kern-pool.h"
#include "kern-simd.h"
#include "kern-update-gate.h"
#include "kern-util.h"

/* Smallest chunk of an element-wise update handed to a thread. */
#define OPTIM_GRAIN 8192
/* Lanes inside one partial sum of the gradient norm (KERN_GRAD_NORM_CHUNK floats). */
#define OPTIM_NORM_LANES 8

#define NS_A 3.4445f
#define NS_B (-4.7750f)
#define NS_C 2.0315f

struct _KernOptim {
    KernOptimParams  p;
    int64_t          t; /* steps taken */
    int              n_tensors;
    KernOptimTensor *tensors;
    size_t           n_params;
    size_t           lo, hi; /* the range of the flat parameters stepped (the shard) */
    size_t           state_floats;
    float           *state;   /* (state_floats): moments, then prev updates, then scratch */
    float           *prev_u;  /* (hi - lo) previous update of the range, error feedback only */
    float           *ortho;   /* (max hidden numel) Muon: G' then O */
    float           *scratch; /* Newton-Schulz scratch */
};

size_t kern_grad_norm_n_chunks(size_t n) {
    return (n + KERN_GRAD_NORM_CHUNK - 1) / KERN_GRAD_NORM_CHUNK;
}

void kern_optim_shard_range(size_t n, int shards, int shard, size_t *lo, size_t *hi) {
    KERN_ASSERT(shards >= 1 && shard >= 0 && shard < shards);
    size_t k = kern_grad_norm_n_chunks(n);
    size_t first = k * (size_t)shard / (size_t)shards,
           end = k * (size_t)(shard + 1) / (size_t)shards;
    *lo = first * KERN_GRAD_NORM_CHUNK < n ? first * KERN_GRAD_NORM_CHUNK : n;
    *hi = end * KERN_GRAD_NORM_CHUNK < n ? end * KERN_GRAD_NORM_CHUNK : n;
}

/* [a, b) clipped to [lo, hi), moved to start at 0 from a: the part of a tensor at flat offset a
 * of b - a floats inside the range, in the tensor's own indices. */
static void optim_clip_span(size_t a, size_t b, size_t lo, size_t hi, size_t *from, size_t *to) {
    size_t s = a > lo ? a : lo, e = b < hi ? b : hi;
    *from = s < e ? s - a : 0;
    *to = s < e ? e - a : 0;
}

void kern_optim_tensor_init(KernOptimTensor *ot, const KernOptimParams *params, const Gpt2Tensor *t,
                            size_t lo, size_t hi, size_t *state_floats, size_t *max_hidden,
                            size_t *max_ns) {
    ot->offset = t->offset;
    ot->numel = t->numel;
    ot->rows = t->shape[0];
    ot->cols = t->shape[1];
    ot->is_matrix = t->is_matrix;
    ot->use_muon = kern_optim_uses_muon(params, t);
    optim_clip_span(t->offset, t->offset + t->numel, lo, hi, &ot->lo, &ot->hi);
    ot->state = *state_floats;
    *state_floats += (ot->use_muon ? 1 : 2) * (ot->hi - ot->lo);
    if (ot->use_muon) {
        size_t m = (size_t)(ot->rows < ot->cols ? ot->rows : ot->cols);
        size_t ns = 2 * t->numel + 3 * m * m;
        *max_hidden = t->numel > *max_hidden ? t->numel : *max_hidden;
        *max_ns = ns > *max_ns ? ns : *max_ns;
    }
}

KernOptim *kern_optim_new(const KernOptimParams *params, const Gpt2Slice *slice) {
    KERN_ASSERT(params->kind >= 0 && params->kind < KERN_OPTIM_N_KINDS);
    KERN_ASSERT(params->beta1 >= 0.0f && params->beta1 < 1.0f);
    KERN_ASSERT(params->beta2 >= 0.0f && params->beta2 < 1.0f);
    KERN_ASSERT(params->kind != KERN_OPTIM_MUON || params->muon_ns_steps >= 1);
    int shards = params->shards > 1 ? params->shards : 1;
    KERN_ASSERT(params->shard >= 0 && params->shard < shards);
    KERN_ASSERT(shards == 1 || params->kind != KERN_OPTIM_MUON);

    KernOptim *o = kern_xcalloc(1, sizeof *o);
    o->p = *params;
    o->n_tensors = gpt2_slice_n_tensors(slice);
    o->n_params = gpt2_slice_n_params(slice);
    o->tensors = kern_xcalloc((size_t)o->n_tensors, sizeof *o->tensors);
    kern_optim_shard_range(o->n_params, shards, params->shard, &o->lo, &o->hi);

    size_t cur = 0, max_hidden = 0, max_ns = 0;
    for (int i = 0; i < o->n_tensors; i++)
        kern_optim_tensor_init(&o->tensors[i], params, gpt2_slice_tensor(slice, i), o->lo, o->hi,
                               &cur, &max_hidden, &max_ns);
    size_t prev_at = cur;
    if (params->error_feedback)
        cur += o->hi - o->lo;
    size_t ortho_at = cur;
    cur += max_hidden + max_ns;
    o->state_floats = cur;
    /* (an empty shard of a plain AdamW holds nothing, but calloc(0) may return NULL) */
    o->state = kern_xcalloc(cur > 0 ? cur : 1, sizeof(float));
    o->prev_u = params->error_feedback ? o->state + prev_at : NULL;
    o->ortho = o->state + ortho_at;
    o->scratch = o->ortho + max_hidden;
    return o;
}

void kern_optim_free(KernOptim *opt) {
    if (!opt)
        return;
    free(opt->state);
    free(opt->tensors);
    free(opt);
}

size_t kern_optim_state_floats(const KernOptim *opt) {
    return opt->state_floats;
}

int64_t kern_optim_n_steps(const KernOptim *opt) {
    return opt->t;
}

void kern_optim_range(const KernOptim *opt, size_t *lo, size_t *hi) {
    *lo = opt->lo;
    *hi = opt->hi;
}

void kern_optim_tensor_span(const KernOptim *opt, int i, size_t *lo, size_t *hi) {
    KERN_ASSERT(i >= 0 && i < opt->n_tensors);
    *lo = opt->tensors[i].lo;
    *hi = opt->tensors[i].hi;
}

int kern_optim_tensor_state(KernOptim *opt, int i, float **first, float **second) {
    KERN_ASSERT(i >= 0 && i < opt->n_tensors);
    const KernOptimTensor *ot = &opt->tensors[i];
    *first = opt->state + ot->state;
    *second = ot->use_muon ? NULL : *first + (ot->hi - ot->lo);
    return ot->use_muon;
}

float *kern_optim_prev_update(KernOptim *opt) {
    return opt->prev_u;
}

float *kern_optim_tensor_prev_update(KernOptim *opt, int i) {
    KERN_ASSERT(i >= 0 && i < opt->n_tensors);
    const KernOptimTensor *ot = &opt->tensors[i];
    if (opt->prev_u == NULL)
        return NULL;
    /* An empty span sits at the range's start or end: still inside the array. */
    size_t flat =
        ot->hi > ot->lo ? ot->offset + ot->lo : (ot->offset < opt->lo ? opt->lo : opt->hi);
    return opt->prev_u + (flat - opt->lo);
}

void kern_optim_set_n_steps(KernOptim *opt, int64_t n_steps) {
    KERN_ASSERT(n_steps >= 0);
    opt->t = n_steps;
}

void kern_newton_schulz5(float *out, const float *g, int rows, int cols, int steps,
                         float *scratch) {
    /* work on the wide orientation X (m, n), m <= n, so that A = X X^T is the small side */
    int    tr = rows > cols;
    int    m = tr ? cols : rows, n = tr ? rows : cols;
    size_t mn = (size_t)m * n, mm = (size_t)m * m;
    float *x = scratch, *xn = scratch + mn, *a = xn + mn, *bm = a + mm;

    double sq = 0.0;
    for (size_t i = 0; i < mn; i++)
        sq += (double)g[i] * g[i];
    float inv = (float)(1.0 / (sqrt(sq) + 1e-7));
    if (tr) {
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                x[(size_t)c * n + r] = g[(size_t)r * cols + c] * inv;
    } else {
        for (size_t i = 0; i < mn; i++)
            x[i] = g[i] * inv;
    }
    for (int k = 0; k < steps; k++) {
        /* A = X X^T; Bm = b A + c A A; X <- a X + Bm X */
        kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_TRANS, m, m, n, 1.0f, x, n, x, n, 0.0f, a, m);
        memcpy(bm, a, mm * sizeof(float));
        kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, m, m, m, NS_C, a, m, a, m, NS_B, bm, m);
        memcpy(xn, x, mn * sizeof(float));
        kern_gemm(KERN_GEMM_NO_TRANS, KERN_GEMM_NO_TRANS, m, n, m, 1.0f, bm, m, x, n, NS_A, xn, n);
        float *sw = x;
        x = xn;
        xn = sw;
    }
    if (tr) {
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                out[(size_t)r * cols + c] = x[(size_t)c * n + r];
    } else {
        memcpy(out, x, mn * sizeof(float));
    }
}

/* Applies update @u of flat float @idx: plain p -= u, or error feedback p -= 2u - u_prev
 * (@prev_u: the previous updates of the range starting at flat float @lo). */
static inline void optim_apply(float *params, float *prev_u, size_t lo, size_t idx, float u) {
    if (prev_u) {
        params[idx] -= 2.0f * u - prev_u[idx - lo];
        prev_u[idx - lo] = u;
    } else {
        params[idx] -= u;
    }
}

typedef struct {
    const KernOptim       *o;
    const KernOptimTensor *ot;
    float                 *params;
    const float           *grads;
    float                  lr, bc1, bc2;
} OptimArgs;

KERN_CLONES static void optim_adamw_elems(void *arg, size_t begin, size_t end) {
    const OptimArgs       *a = arg;
    const KernOptimTensor *ot = a->ot;
    float                  b1 = a->o->p.beta1, b2 = a->o->p.beta2, eps = a->o->p.eps;
    float                  wd = ot->is_matrix ? a->o->p.weight_decay : 0.0f;
    float                 *mom = a->o->state + ot->state; /* element j of the span at j */
    float                 *var = mom + (ot->hi - ot->lo);
    float                 *params = a->params, *prev_u = a->o->prev_u;
    for (size_t j = begin; j < end; j++) {
        size_t idx = ot->offset + ot->lo + j;
        float  g = a->grads[idx];
        mom[j] = b1 * mom[j] + (1.0f - b1) * g;
        var[j] = b2 * var[j] + (1.0f - b2) * g * g;
        float mhat = mom[j] / a->bc1;
        float vhat = var[j] / a->bc2;
        float u = a->lr * (mhat / (sqrtf(vhat) + eps) + wd * params[idx]);
        optim_apply(params, prev_u, a->o->lo, idx, u);
    }
}

static void optim_step_adamw(KernOptim *o, const KernOptimTensor *ot, float *params,
                             const float *grads, float lr, float bc1, float bc2) {
    OptimArgs a = {
        .o = o, .ot = ot, .params = params, .grads = grads, .lr = lr, .bc1 = bc1, .bc2 = bc2};
    kern_parallel_range(ot->hi - ot->lo, OPTIM_GRAIN, optim_adamw_elems, &a);
}

static void optim_step_muon(KernOptim *o, const KernOptimTensor *ot, float *params,
                            const float *grads, float lr) {
    float        mu = o->p.muon_momentum;
    float        wd = ot->is_matrix ? o->p.weight_decay : 0.0f;
    float       *mom = o->state + ot->state;
    const float *g = grads + ot->offset;
    /* Nesterov: M = mu M + G, then orthogonalise G + mu M */
    for (size_t j = 0; j < ot->numel; j++) {
        mom[j] = mu * mom[j] + g[j];
        o->ortho[j] = g[j] + mu * mom[j];
    }
    kern_newton_schulz5(o->ortho, o->ortho, ot->rows, ot->cols, o->p.muon_ns_steps, o->scratch);
    float ratio = (float)ot->rows / (float)ot->cols;
    float scale = sqrtf(ratio > 1.0f ? ratio : 1.0f);
    for (size_t j = 0; j < ot->numel; j++) {
        size_t idx = ot->offset + j;
        float  u = lr * (scale * o->ortho[j] + wd * params[idx]);
        optim_apply(params, o->prev_u, o->lo, idx, u);
    }
}

void kern_optim_step(KernOptim *opt, float *params, const float *grads, float lr) {
    opt->t++;
    float bc1 = 1.0f - powf(opt->p.beta1, (float)opt->t);
    float bc2 = 1.0f - powf(opt->p.beta2, (float)opt->t);
    float lr_muon = lr * opt->p.muon_lr_ratio;
    for (int i = 0; i < opt->n_tensors; i++) {
        const KernOptimTensor *ot = &opt->tensors[i];
        if (ot->hi == ot->lo)
            continue; /* outside the shard */
        if (ot->use_muon)
            optim_step_muon(opt, ot, params, grads, lr_muon);
        else
            optim_step_adamw(opt, ot, params, grads, lr, bc1, bc2);
    }
}

/* --- learning-rate schedule --- */

float kern_lr_schedule(int64_t step, int64_t warmup_steps, int64_t total_steps, float max_lr,
                       float min_lr) {
    KERN_ASSERT(warmup_steps >= 0 && total_steps > warmup_steps);
    if (step < warmup_steps)
        return (float)((double)max_lr * (double)(step + 1) / (double)warmup_steps);
    if (step >= total_steps)
        return min_lr;
    double r = (double)(step - warmup_steps) / (double)(total_steps - warmup_steps);
    double coeff = 0.5 * (1.0 + cos(M_PI * r));
    return (float)(min_lr + coeff * ((double)max_lr - min_lr));
}

/* --- gradient clipping --- */

typedef struct {
    const float *x;
    float       *out;
    size_t       n;
    float        factor;
    double      *partial; /* (chunks) */
} NormArgs;

KERN_CLONES static void optim_sq_norm_chunks(void *arg, size_t begin, size_t end) {
    const NormArgs *a = arg;
    for (size_t c = begin; c < end; c++) {
        size_t i0 = c * KERN_GRAD_NORM_CHUNK;
        size_t i1 = i0 + KERN_GRAD_NORM_CHUNK < a->n ? i0 + KERN_GRAD_NORM_CHUNK : a->n;
        double acc[OPTIM_NORM_LANES] = {0};
        size_t i = i0;
        for (; i + OPTIM_NORM_LANES <= i1; i += OPTIM_NORM_LANES)
            for (int k = 0; k < OPTIM_NORM_LANES; k++)
                acc[k] += (double)a->x[i + k] * a->x[i + k];
        for (; i < i1; i++)
            acc[0] += (double)a->x[i] * a->x[i];
        double s = 0.0;
        for (int k = 0; k < OPTIM_NORM_LANES; k++)
            s += acc[k];
        a->partial[c] = s;
    }
}

void kern_grad_sq_norm_partials(const float *grads, size_t n, double *partial) {
    NormArgs a = {.x = grads, .n = n, .partial = partial};
    kern_parallel_range(kern_grad_norm_n_chunks(n), 1, optim_sq_norm_chunks, &a);
}

double kern_grad_sq_norm(const float *grads, size_t n) {
    size_t  chunks = kern_grad_norm_n_chunks(n);
    double *partial = (double *)kern_thread_scratch(KERN_SCRATCH_SUMS, 2 * chunks);
    kern_grad_sq_norm_partials(grads, n, partial);
    double sq = 0.0;
    for (size_t c = 0; c < chunks; c++)
        sq += partial[c];
    return sq;
}

float kern_clip_factor(double norm, float max_norm) {
    return kern_update_clip_factor(norm, max_norm);
}

KERN_CLONES static void optim_scale_elems(void *arg, size_t begin, size_t end) {
    const NormArgs *a = arg;
    for (size_t i = begin; i < end; i++)
        a->out[i] *= a->factor;
}

void kern_grad_scale(float *grads, size_t n, float factor) {
    NormArgs a = {.out = grads, .n = n, .factor = factor};
    kern_parallel_range(n, OPTIM_GRAIN, optim_scale_elems, &a);
}
