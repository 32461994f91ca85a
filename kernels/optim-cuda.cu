/* SPDX-License-Identifier: MIT
 * optim-cuda.cu: KernCudaOptim (optim-cuda.h). One device arena holds the moments (same
 * per-tensor layout as the CPU optimizer), the error-feedback buffer, the Newton-Schulz
 * scratch, the AdamW block table (one launch updates every AdamW tensor) and the status. A
 * one-thread gate kernel decides each step on the device.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kern-cuda-internal.cuh"
#include "kern-update-gate.h"
#include "optim-cuda.h"

#define NS_A 3.4445f
#define NS_B (-4.7750f)
#define NS_C 2.0315f

#define ADAM_THREADS 256
#define ADAM_ELEMS   2048 /* floats per AdamW block */

/* One AdamW-driven tensor, as the AdamW kernel reads it (device). */
typedef struct {
    uint64_t param_off; /* floats into params / grads / prev_u */
    uint64_t numel;
    uint64_t state_off; /* floats into the state: m, then v (numel each) */
    float    wd;        /* weight decay (0 for gains, biases) */
    int32_t  pad;
} AdamSeg;

struct _KernCudaOptim {
    KernOptimParams  p;
    int              n_tensors;
    KernOptimTensor *tensors; /* host (n_tensors) */
    size_t           n_params;
    int              n_adam_segs, n_adam_blocks;
    size_t           arena_bytes;
    char            *arena;       /* device */
    float           *state;       /* moments, CPU layout */
    float           *prev_u;      /* (n_params), error feedback only, else NULL */
    float           *ortho;       /* (max Muon numel) */
    float           *ns_scratch;  /* Newton-Schulz scratch */
    AdamSeg         *segs;        /* (n_adam_segs) */
    int32_t         *block_seg;   /* (n_adam_blocks) */
    int64_t         *block_first; /* (n_adam_blocks) first float of the block inside its tensor */
    KernCudaOptimStatus *status;
};

/* --- layout --- */

typedef struct {
    size_t state_floats, prev_floats, ortho_floats, ns_floats;
    int    n_adam_segs, n_adam_blocks;
    size_t off_state, off_prev, off_ortho, off_ns, off_segs, off_bseg, off_bfirst, off_status;
    size_t total;
} OptLayout;

static size_t opt_round(size_t bytes) {
    return (bytes + 255) & ~(size_t)255;
}

static void opt_layout(const KernOptimParams *p, const Gpt2Table *table, OptLayout *l) {
    memset(l, 0, sizeof *l);
    size_t max_hidden = 0, max_ns = 0, n_params = gpt2_table_n_params(table);
    for (int i = 0; i < gpt2_table_n_tensors(table); i++) {
        const Gpt2Tensor *t = gpt2_table_tensor(table, i);
        KernOptimTensor   ot;
        kern_optim_tensor_init(&ot, p, t, 0, n_params, &l->state_floats, &max_hidden, &max_ns);
        if (!ot.use_muon) {
            l->n_adam_segs++;
            l->n_adam_blocks += (int)((t->numel + ADAM_ELEMS - 1) / ADAM_ELEMS);
        }
    }
    l->prev_floats = p->error_feedback ? n_params : 0;
    l->ortho_floats = max_hidden;
    l->ns_floats = max_ns;
    size_t cur = 0;
    l->off_state = cur;
    cur += opt_round(l->state_floats * sizeof(float));
    l->off_prev = cur;
    cur += opt_round(l->prev_floats * sizeof(float));
    l->off_ortho = cur;
    cur += opt_round(l->ortho_floats * sizeof(float));
    l->off_ns = cur;
    cur += opt_round(l->ns_floats * sizeof(float));
    l->off_segs = cur;
    cur += opt_round((size_t)l->n_adam_segs * sizeof(AdamSeg));
    l->off_bseg = cur;
    cur += opt_round((size_t)l->n_adam_blocks * sizeof(int32_t));
    l->off_bfirst = cur;
    cur += opt_round((size_t)l->n_adam_blocks * sizeof(int64_t));
    l->off_status = cur;
    cur += opt_round(sizeof(KernCudaOptimStatus));
    l->total = cur;
}

size_t kern_cuda_optim_device_bytes(const KernOptimParams *params, const Gpt2Table *table) {
    OptLayout l;
    opt_layout(params, table, &l);
    return l.total;
}

/* --- construction --- */

KernCudaOptim *kern_cuda_optim_new(const KernOptimParams *params, const Gpt2Table *table) {
    KERN_ASSERT(params->kind >= 0 && params->kind < KERN_OPTIM_N_KINDS);
    KERN_ASSERT(params->beta1 >= 0.0f && params->beta1 < 1.0f);
    KERN_ASSERT(params->beta2 >= 0.0f && params->beta2 < 1.0f);
    KERN_ASSERT(params->kind != KERN_OPTIM_MUON || params->muon_ns_steps >= 1);

    OptLayout l;
    opt_layout(params, table, &l);
    void *device = NULL;
    if (!kern_cuda_try_malloc(&device, l.total))
        return NULL;
    char *arena = (char *)device;

    KernCudaOptim *o = (KernCudaOptim *)calloc(1, sizeof *o);
    KERN_ASSERT(o);
    o->p = *params;
    o->n_tensors = gpt2_table_n_tensors(table);
    o->n_params = gpt2_table_n_params(table);
    o->tensors = (KernOptimTensor *)calloc((size_t)o->n_tensors + 1, sizeof *o->tensors);
    KERN_ASSERT(o->tensors);
    o->n_adam_segs = l.n_adam_segs;
    o->n_adam_blocks = l.n_adam_blocks;
    o->arena_bytes = l.total;
    o->arena = arena;
    o->state = (float *)(arena + l.off_state);
    o->prev_u = params->error_feedback ? (float *)(arena + l.off_prev) : NULL;
    o->ortho = (float *)(arena + l.off_ortho);
    o->ns_scratch = (float *)(arena + l.off_ns);
    o->segs = (AdamSeg *)(arena + l.off_segs);
    o->block_seg = (int32_t *)(arena + l.off_bseg);
    o->block_first = (int64_t *)(arena + l.off_bfirst);
    o->status = (KernCudaOptimStatus *)(arena + l.off_status);

    /* host copies of the tables, uploaded once */
    AdamSeg *segs = (AdamSeg *)calloc((size_t)l.n_adam_segs + 1, sizeof *segs);
    int32_t *bseg = (int32_t *)calloc((size_t)l.n_adam_blocks + 1, sizeof *bseg);
    int64_t *bfirst = (int64_t *)calloc((size_t)l.n_adam_blocks + 1, sizeof *bfirst);
    KERN_ASSERT(segs && bseg && bfirst);
    size_t cur = 0, max_hidden = 0, max_ns = 0;
    int    s = 0, b = 0;
    for (int i = 0; i < o->n_tensors; i++) {
        const Gpt2Tensor *t = gpt2_table_tensor(table, i);
        KernOptimTensor  *ot = &o->tensors[i];
        kern_optim_tensor_init(ot, params, t, 0, o->n_params, &cur, &max_hidden, &max_ns);
        if (ot->use_muon)
            continue;
        segs[s].param_off = t->offset;
        segs[s].numel = t->numel;
        segs[s].state_off = ot->state;
        segs[s].wd = t->is_matrix ? params->weight_decay : 0.0f;
        for (size_t first = 0; first < t->numel; first += ADAM_ELEMS) {
            bseg[b] = s;
            bfirst[b] = (int64_t)first;
            b++;
        }
        s++;
    }
    KERN_ASSERT(s == l.n_adam_segs && b == l.n_adam_blocks && cur == l.state_floats);
    KERN_CUDA_CHECK(cudaMemset(arena, 0, l.total));
    KERN_CUDA_CHECK(cudaMemcpy(o->segs, segs, (size_t)s * sizeof *segs, cudaMemcpyHostToDevice));
    KERN_CUDA_CHECK(
        cudaMemcpy(o->block_seg, bseg, (size_t)b * sizeof *bseg, cudaMemcpyHostToDevice));
    KERN_CUDA_CHECK(
        cudaMemcpy(o->block_first, bfirst, (size_t)b * sizeof *bfirst, cudaMemcpyHostToDevice));
    KERN_CUDA_CHECK(cudaDeviceSynchronize());
    free(segs);
    free(bseg);
    free(bfirst);
    return o;
}

void kern_cuda_optim_free(KernCudaOptim *opt) {
    if (!opt)
        return;
    KERN_CUDA_CHECK(cudaDeviceSynchronize());
    KERN_CUDA_CHECK(cudaFree(opt->arena));
    free(opt->tensors);
    free(opt);
}

const KernCudaOptimStatus *kern_cuda_optim_status(const KernCudaOptim *opt) {
    return opt->status;
}

/* --- step kernels --- */

__global__ void optim_gate_kernel(KernCudaOptimStatus *st, const double *sq_norm, float grad_clip,
                                  int poison) {
    /* Without a norm only the poison flag decides (the norm reads -1). */
    KernUpdateGate gate = {-1.0, 1.0f, !poison};
    if (sq_norm)
        gate = kern_update_gate(*sq_norm, grad_clip, poison);
    st->grad_norm = gate.grad_norm;
    st->factor = gate.factor;
    st->applied = gate.applied;
    if (gate.applied)
        st->t += 1;
}

/* p -= u, or with error feedback p -= 2u - u_prev and u_prev := u. */
static __device__ __forceinline__ void optim_apply(float *params, float *prev_u, size_t idx,
                                                   float u) {
    if (prev_u) {
        params[idx] -= 2.0f * u - prev_u[idx];
        prev_u[idx] = u;
    } else {
        params[idx] -= u;
    }
}

__global__ void adamw_kernel(float *params, const float *grads, float *state, float *prev_u,
                             const AdamSeg *segs, const int32_t *block_seg,
                             const int64_t *block_first, const KernCudaOptimStatus *st, float lr,
                             float b1, float b2, float eps) {
    if (!st->applied)
        return;
    AdamSeg seg = segs[block_seg[blockIdx.x]];
    size_t  first = (size_t)block_first[blockIdx.x];
    float   factor = st->factor;
    /* bias corrections exactly as kern_optim_step(): in float from t */
    float  bc1 = 1.0f - powf(b1, (float)st->t);
    float  bc2 = 1.0f - powf(b2, (float)st->t);
    float *mom = state + seg.state_off;
    float *var = mom + seg.numel;
    for (size_t k = threadIdx.x; k < ADAM_ELEMS; k += ADAM_THREADS) {
        size_t j = first + k;
        if (j >= seg.numel)
            break;
        size_t idx = seg.param_off + j;
        float  g = grads[idx] * factor;
        float  m = b1 * mom[j] + (1.0f - b1) * g;
        float  v = b2 * var[j] + (1.0f - b2) * g * g;
        mom[j] = m;
        var[j] = v;
        float mhat = m / bc1;
        float vhat = v / bc2;
        float u = lr * (mhat / (sqrtf(vhat) + eps) + seg.wd * params[idx]);
        optim_apply(params, prev_u, idx, u);
    }
}

/* Muon: M = mu M + g; ortho = g + mu M (Nesterov), g = grads * factor. */
__global__ void muon_nesterov_kernel(float *mom, float *ortho, const float *grads, size_t n,
                                     float mu, const KernCudaOptimStatus *st) {
    if (!st->applied)
        return;
    float factor = st->factor;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x) {
        float g = grads[j] * factor;
        float m = mu * mom[j] + g;
        mom[j] = m;
        ortho[j] = g + mu * m;
    }
}

__global__ void muon_apply_kernel(float *params, float *prev_u, const float *ortho, size_t n,
                                  float lr, float scale, float wd, const KernCudaOptimStatus *st) {
    if (!st->applied)
        return;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x) {
        float u = lr * (scale * ortho[j] + wd * params[j]);
        optim_apply(params, prev_u, j, u);
    }
}

void kern_cuda_optim_step(KernCudaOptim *opt, float *params, const float *grads, float lr,
                          const KernCudaStepGate *gate, KernCudaCtx *ctx) {
    cudaStream_t st = ctx->stream;
    optim_gate_kernel<<<1, 1, 0, st>>>(opt->status, gate ? gate->sq_norm : NULL,
                                       gate ? gate->grad_clip : 0.0f, gate ? gate->poison : 0);
    KERN_CUDA_LAUNCH_CHECK();
    /* A skip the host knows of: the gate records it; nothing else runs (Muon's Newton-Schulz
     * products, which no device flag can stop, included). */
    if (gate && gate->poison)
        return;
    if (opt->n_adam_blocks > 0) {
        adamw_kernel<<<(unsigned)opt->n_adam_blocks, ADAM_THREADS, 0, st>>>(
            params, grads, opt->state, opt->prev_u, opt->segs, opt->block_seg, opt->block_first,
            opt->status, lr, opt->p.beta1, opt->p.beta2, opt->p.eps);
        KERN_CUDA_LAUNCH_CHECK();
    }
    float lr_muon = lr * opt->p.muon_lr_ratio;
    for (int i = 0; i < opt->n_tensors; i++) {
        const KernOptimTensor *ot = &opt->tensors[i];
        if (!ot->use_muon)
            continue;
        unsigned grid = kern_cuda_grid(ot->numel, 256);
        muon_nesterov_kernel<<<grid, 256, 0, st>>>(opt->state + ot->state, opt->ortho,
                                                   grads + ot->offset, ot->numel,
                                                   opt->p.muon_momentum, opt->status);
        KERN_CUDA_LAUNCH_CHECK();
        kern_cuda_newton_schulz5(opt->ortho, opt->ortho, ot->rows, ot->cols, opt->p.muon_ns_steps,
                                 opt->ns_scratch, ctx);
        float ratio = (float)ot->rows / (float)ot->cols;
        float scale = sqrtf(ratio > 1.0f ? ratio : 1.0f);
        float wd = ot->is_matrix ? opt->p.weight_decay : 0.0f;
        muon_apply_kernel<<<grid, 256, 0, st>>>(
            params + ot->offset, opt->prev_u ? opt->prev_u + ot->offset : NULL, opt->ortho,
            ot->numel, lr_muon, scale, wd, opt->status);
        KERN_CUDA_LAUNCH_CHECK();
    }
}

/* --- Newton-Schulz --- */

/* x (m, n) = g / (||g|| + 1e-7), transposed when rows > cols (then n = rows). */
__global__ void ns_normalise_kernel(float *x, const float *g, const double *sq, int rows, int cols,
                                    int tr) {
    float  inv = (float)(1.0 / (sqrt(*sq) + 1e-7));
    size_t total = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        if (tr) {
            size_t r = i / cols, c = i % cols;
            x[c * rows + r] = g[i] * inv;
        } else {
            x[i] = g[i] * inv;
        }
    }
}

/* out (rows, cols) = x, transposed back when tr. */
__global__ void ns_output_kernel(float *out, const float *x, int rows, int cols, int tr) {
    size_t total = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        if (tr) {
            size_t r = i / cols, c = i % cols;
            out[i] = x[c * rows + r];
        } else {
            out[i] = x[i];
        }
    }
}

/* C (M, N) = alpha A (M, K) @ op(B) + beta C_in, fp32, row-major, no epilogue. */
static void ns_gemm(int M, int N, int K, const float *a, const float *b, int tb, float *c,
                    const float *c_in, float alpha, float beta, KernCudaCtx *ctx) {
    KernCudaGemm g = kern_cuda_gemm_dense(M, N, K, 0, a, tb, b, c, KERN_DTYPE_F32, KERN_DTYPE_F32);
    g.c_in = c_in;
    g.alpha = alpha;
    g.beta = beta;
    kern_cuda_gemm(&g, ctx);
}

void kern_cuda_newton_schulz5(float *out, const float *g, int rows, int cols, int steps,
                              float *scratch, KernCudaCtx *ctx) {
    KERN_ASSERT(rows >= 1 && cols >= 1 && steps >= 0);
    /* work on the wide orientation X (m, n), m <= n, so that A = X X^T is the small side */
    int          tr = rows > cols;
    int          m = tr ? cols : rows, n = tr ? rows : cols;
    size_t       mn = (size_t)m * n, mm = (size_t)m * m;
    float       *x = scratch, *xn = scratch + mn, *a = xn + mn, *bm = a + mm;
    double      *sq = ctx->scalars;
    cudaStream_t st = ctx->stream;
    unsigned     grid = kern_cuda_grid(mn, 256);

    KERN_CUDA_CHECK(cudaMemsetAsync(sq, 0, sizeof *sq, st));
    kern_cuda_sq_norm_acc(sq, g, mn, ctx);
    ns_normalise_kernel<<<grid, 256, 0, st>>>(x, g, sq, rows, cols, tr);
    KERN_CUDA_LAUNCH_CHECK();
    for (int k = 0; k < steps; k++) {
        /* A = X X^T; Bm = c A A + b A; X <- Bm X + a X */
        ns_gemm(m, m, n, x, x, 1, a, NULL, 1.0f, 0.0f, ctx);
        ns_gemm(m, m, m, a, a, 0, bm, a, NS_C, NS_B, ctx);
        ns_gemm(m, n, m, bm, x, 0, xn, x, 1.0f, NS_A, ctx);
        float *sw = x;
        x = xn;
        xn = sw;
    }
    ns_output_kernel<<<grid, 256, 0, st>>>(out, x, rows, cols, tr);
    KERN_CUDA_LAUNCH_CHECK();
}

/* --- gradient scaling --- */

__global__ void grad_scale_kernel(float *grads, size_t n, float factor) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        grads[i] *= factor;
}

void kern_cuda_grad_scale(float *grads, size_t n, float factor, cudaStream_t stream) {
    if (n == 0)
        return;
    grad_scale_kernel<<<kern_cuda_grid(n, 256), 256, 0, stream>>>(grads, n, factor);
    KERN_CUDA_LAUNCH_CHECK();
}

/* --- state access --- */

int kern_cuda_optim_tensor_state(KernCudaOptim *opt, int i, float **first, float **second) {
    KERN_ASSERT(i >= 0 && i < opt->n_tensors);
    const KernOptimTensor *ot = &opt->tensors[i];
    if (first)
        *first = opt->state + ot->state;
    if (second)
        *second = ot->use_muon ? NULL : opt->state + ot->state + ot->numel;
    return ot->use_muon;
}

float *kern_cuda_optim_prev_update(KernCudaOptim *opt) {
    return opt->prev_u;
}

static void opt_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                     KernCudaCtx *ctx) {
    if (bytes == 0)
        return;
    KERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, ctx->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

int64_t kern_cuda_optim_n_steps(KernCudaOptim *opt, KernCudaCtx *ctx) {
    int64_t t = 0;
    opt_copy(&t, &opt->status->t, sizeof t, cudaMemcpyDeviceToHost, ctx);
    return t;
}

void kern_cuda_optim_set_n_steps(KernCudaOptim *opt, int64_t n_steps, KernCudaCtx *ctx) {
    KERN_ASSERT(n_steps >= 0);
    opt_copy(&opt->status->t, &n_steps, sizeof n_steps, cudaMemcpyHostToDevice, ctx);
}

int kern_cuda_optim_tensor_state_to_host(KernCudaOptim *opt, int i, float *first, float *second,
                                         KernCudaCtx *ctx) {
    KERN_ASSERT(i >= 0 && i < opt->n_tensors);
    const KernOptimTensor *ot = &opt->tensors[i];
    size_t                 bytes = ot->numel * sizeof(float);
    opt_copy(first, opt->state + ot->state, bytes, cudaMemcpyDeviceToHost, ctx);
    if (!ot->use_muon)
        opt_copy(second, opt->state + ot->state + ot->numel, bytes, cudaMemcpyDeviceToHost, ctx);
    return ot->use_muon;
}

int kern_cuda_optim_tensor_state_from_host(KernCudaOptim *opt, int i, const float *first,
                                           const float *second, KernCudaCtx *ctx) {
    KERN_ASSERT(i >= 0 && i < opt->n_tensors);
    const KernOptimTensor *ot = &opt->tensors[i];
    size_t                 bytes = ot->numel * sizeof(float);
    opt_copy(opt->state + ot->state, first, bytes, cudaMemcpyHostToDevice, ctx);
    if (!ot->use_muon)
        opt_copy(opt->state + ot->state + ot->numel, second, bytes, cudaMemcpyHostToDevice, ctx);
    return ot->use_muon;
}

int kern_cuda_optim_prev_update_to_host(KernCudaOptim *opt, float *host, KernCudaCtx *ctx) {
    if (!opt->prev_u)
        return 0;
    opt_copy(host, opt->prev_u, opt->n_params * sizeof(float), cudaMemcpyDeviceToHost, ctx);
    return 1;
}

int kern_cuda_optim_prev_update_from_host(KernCudaOptim *opt, const float *host, KernCudaCtx *ctx) {
    if (!opt->prev_u)
        return 0;
    opt_copy(opt->prev_u, host, opt->n_params * sizeof(float), cudaMemcpyHostToDevice, ctx);
    return 1;
}
