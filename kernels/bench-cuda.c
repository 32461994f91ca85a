/* SPDX-License-Identifier: MIT
 * bench-cuda.c: pacer-bench-cuda, the CUDA kernels' speed check (a benchmark, not a test).
 * On device 0, in bf16, timed with CUDA events (median of the repetitions after warm-up):
 *   1. an 8192^3 product through kern_cuda_gemm(): the reference rate of this run;
 *   2. the project's matmuls at GPT-2 Medium training shapes (C 1024, B 16 x T 1024 tokens):
 *      forward (bias; GELU epilogue for c_fc), input gradient and weight gradient of the four
 *      block matmuls and the LM head, each as a share of the reference rate (target >= 70%
 *      over all of them);
 *   3. one GPT-2 124M training step on one slice (tied head, B 16 x T 1024): zero grads, F,
 *      fused BW, gradient norm, AdamW with clipping, bf16 weight refresh; model-FLOPs
 *      utilisation = (6 N tokens + 12 L T C tokens) / step time / reference rate (N: all
 *      parameters; target >= 40%), with the unfused and with the fused attention, and the
 *      attention kernels timed alone at the step's shapes (12 layers, forward and backward)
 *      as a share of the step: where the step's time goes.
 * Prints a short table; exits 77 (skipped) without a CUDA device.
 * Usage: pacer-bench-cuda [repetitions (10)] [training steps (5)].
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2-cuda.h"
#include "gpt2-slice-cuda.h"
#include "kern-check.h"
#include "kern-cuda.h"
#include "kern-util.h"
#include "optim-cuda.h"

#define BF16 KERN_DTYPE_BF16

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Device buffer of @n bf16 (or fp32) elements filled uniformly in [-1, 1). */
static void *bench_buffer(size_t n, KernDtype dt, uint64_t seed, cudaStream_t st) {
    void *p = NULL;
    KERN_CUDA_CHECK(cudaMalloc(&p, n * kern_dtype_size(dt)));
    kern_cuda_fill_uniform(p, dt, -1.0f, 1.0f, n, seed, st);
    return p;
}

/* What one timed repetition runs. */
typedef void (*BenchFn)(void *user, KernCudaCtx *ctx);

/* Median milliseconds of @reps runs of @fn after @warmup untimed ones, timed with events. */
static float bench_ms(BenchFn fn, void *user, KernCudaCtx *ctx, int warmup, int reps) {
    cudaStream_t st = kern_cuda_ctx_stream(ctx);
    cudaEvent_t  e0, e1;
    KERN_CUDA_CHECK(cudaEventCreate(&e0));
    KERN_CUDA_CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < warmup; i++)
        fn(user, ctx);
    float *ms = kern_xmalloc((size_t)reps * sizeof(float));
    for (int i = 0; i < reps; i++) {
        KERN_CUDA_CHECK(cudaEventRecord(e0, st));
        fn(user, ctx);
        KERN_CUDA_CHECK(cudaEventRecord(e1, st));
        KERN_CUDA_CHECK(cudaEventSynchronize(e1));
        KERN_CUDA_CHECK(cudaEventElapsedTime(&ms[i], e0, e1));
    }
    qsort(ms, (size_t)reps, sizeof(float), cmp_float);
    float med = ms[reps / 2];
    free(ms);
    KERN_CUDA_CHECK(cudaEventDestroy(e0));
    KERN_CUDA_CHECK(cudaEventDestroy(e1));
    return med;
}

/* --- the reference product --- */

static void run_square(void *user, KernCudaCtx *ctx) {
    kern_cuda_gemm((const KernCudaGemm *)user, ctx);
}

/* --- matmuls at GPT-2 Medium shapes --- */

typedef enum { MM_FWD, MM_FWD_GELU, MM_BWD_INPUT, MM_BWD_WEIGHT } MmKind;

typedef struct {
    MmKind kind;
    int    N, IC, OC;
    void  *inp, *weight, *bias, *out, *pre, *dout, *dinp;
    float *dweight, *dbias;
} MmCase;

static void run_mm(void *user, KernCudaCtx *ctx) {
    MmCase *m = user;
    switch (m->kind) {
    case MM_FWD:
        gpt2_cuda_matmul_forward(m->out, m->inp, m->weight, m->bias, m->N, m->IC, m->OC, BF16, ctx);
        break;
    case MM_FWD_GELU:
        gpt2_cuda_matmul_forward_gelu(m->out, m->pre, m->inp, m->weight, m->bias, m->N, m->IC,
                                      m->OC, BF16, ctx);
        break;
    case MM_BWD_INPUT:
        gpt2_cuda_matmul_backward_input(m->dinp, m->dout, m->weight, m->N, m->IC, m->OC, BF16, ctx);
        break;
    case MM_BWD_WEIGHT:
        gpt2_cuda_matmul_backward_weight(m->dweight, m->dbias, m->dout, m->inp, m->N, m->IC, m->OC,
                                         BF16, ctx);
        break;
    }
}

/* Times the three passes of one (N, IC, OC) matmul; adds flops and ms to the totals. */
static void bench_matmul(const char *name, int N, int IC, int OC, int bias, int gelu,
                         double peak_tflops, KernCudaCtx *ctx, int reps, double *tot_flop,
                         double *tot_ms) {
    cudaStream_t st = kern_cuda_ctx_stream(ctx);
    size_t       ni = (size_t)N * IC, no = (size_t)N * OC, nw = (size_t)OC * IC;
    MmCase       m;
    memset(&m, 0, sizeof m);
    m.N = N;
    m.IC = IC;
    m.OC = OC;
    m.inp = bench_buffer(ni, BF16, 1, st);
    m.weight = bench_buffer(nw, BF16, 2, st);
    m.bias = bias ? bench_buffer(OC, BF16, 3, st) : NULL;
    m.out = bench_buffer(no, BF16, 4, st);
    m.pre = bench_buffer(no, BF16, 5, st);
    m.dout = bench_buffer(no, BF16, 6, st);
    m.dinp = bench_buffer(ni, BF16, 7, st);
    m.dweight = bench_buffer(nw, KERN_DTYPE_F32, 8, st);
    m.dbias = bias ? bench_buffer(OC, KERN_DTYPE_F32, 9, st) : NULL;
    const char *pass[3] = {gelu ? "fwd+gelu" : "fwd", "bwd input", "bwd weight"};
    MmKind      kinds[3] = {gelu ? MM_FWD_GELU : MM_FWD, MM_BWD_INPUT, MM_BWD_WEIGHT};
    double      flop = 2.0 * (double)N * IC * OC;
    for (int k = 0; k < 3; k++) {
        m.kind = kinds[k];
        float  ms = bench_ms(run_mm, &m, ctx, 3, reps);
        double tflops = flop / (ms * 1e-3) / 1e12;
        printf("  %-14s %-10s %6d x %5d x %5d  %8.3f ms  %7.1f TFLOP/s  %5.1f%%\n", name, pass[k],
               N, IC, OC, ms, tflops, 100.0 * tflops / peak_tflops);
        *tot_flop += flop;
        *tot_ms += ms;
    }
    void *bufs[9] = {m.inp, m.weight, m.bias, m.out, m.pre, m.dout, m.dinp, m.dweight, m.dbias};
    for (int i = 0; i < 9; i++)
        KERN_CUDA_CHECK(cudaFree(bufs[i]));
}

/* --- GPT-2 124M step --- */

typedef struct {
    Gpt2CudaSlice *slice;
    KernCudaOptim *opt;
    const int32_t *tokens, *targets;
    float         *loss;    /* device (1) */
    double        *sq_norm; /* device (1) */
} StepCase;

static void run_step(void *user, KernCudaCtx *ctx) {
    StepCase    *s = user;
    cudaStream_t st = kern_cuda_ctx_stream(ctx);
    void        *w = gpt2_cuda_slice_compute_params(s->slice);
    float       *grads = gpt2_cuda_slice_grads(s->slice);
    gpt2_cuda_slice_zero_grads(s->slice, ctx);
    gpt2_cuda_slice_forward(s->slice, w, 0, s->tokens, NULL, s->targets, NULL, s->loss, ctx);
    gpt2_cuda_slice_backward(s->slice, w, 0, NULL, 1.0f, NULL, grads, ctx);
    KERN_CUDA_CHECK(cudaMemsetAsync(s->sq_norm, 0, sizeof(double), st));
    kern_cuda_sq_norm_acc(s->sq_norm, grads, gpt2_cuda_slice_n_params(s->slice), ctx);
    KernCudaStepGate gate = {.sq_norm = s->sq_norm, .grad_clip = 1.0f, .poison = 0};
    kern_cuda_optim_step(s->opt, gpt2_cuda_slice_params(s->slice), grads, 6e-4f, &gate, ctx);
    gpt2_cuda_slice_refresh_compute_params(s->slice, ctx);
}

typedef struct {
    float  ms, loss;
    double mfu;
    size_t bytes;
    float  attn_ms; /* the attention kernels alone, all layers, forward and backward */
} StepResult;

/* One layer's attention at the step's shapes (B 16, T 1024, C 768, NH 12, bf16), forward and
 * backward, unfused or fused, on random q, k, v and output gradient. */
typedef struct {
    int    flash;
    void  *qkv, *dqkv, *out, *dout, *att, *scratch;
    float *lse, *fscratch;
} AttnCase;

enum { ATT_B = 16, ATT_T = 1024, ATT_C = 768, ATT_NH = 12, ATT_L = 12 };

static void run_attention(void *user, KernCudaCtx *ctx) {
    AttnCase *a = user;
    if (a->flash) {
        gpt2_cuda_flash_attention_forward(a->out, a->lse, a->qkv, ATT_B, ATT_T, ATT_C, ATT_NH, BF16,
                                          ctx);
        gpt2_cuda_flash_attention_backward(a->dqkv, a->fscratch, a->dout, a->qkv, a->out, a->lse,
                                           ATT_B, ATT_T, ATT_C, ATT_NH, BF16, ctx);
    } else {
        gpt2_cuda_attention_forward(a->out, a->att, a->qkv, a->scratch, ATT_B, ATT_T, ATT_C, ATT_NH,
                                    BF16, ctx);
        gpt2_cuda_attention_backward(a->dqkv, a->scratch, a->dout, a->qkv, a->att, ATT_B, ATT_T,
                                     ATT_C, ATT_NH, BF16, ctx);
    }
}

/* Milliseconds of the step's attention (ATT_L layers, forward + backward), median of @reps. */
static float bench_attention(int flash, KernCudaCtx *ctx, int reps) {
    cudaStream_t st = kern_cuda_ctx_stream(ctx);
    size_t       n_tok = (size_t)ATT_B * ATT_T, bht = (size_t)ATT_B * ATT_NH * ATT_T;
    AttnCase     a;
    memset(&a, 0, sizeof a);
    a.flash = flash;
    a.qkv = bench_buffer(n_tok * 3 * ATT_C, BF16, 21, st);
    a.dqkv = bench_buffer(n_tok * 3 * ATT_C, BF16, 22, st);
    a.out = bench_buffer(n_tok * ATT_C, BF16, 23, st);
    a.dout = bench_buffer(n_tok * ATT_C, BF16, 24, st);
    if (flash) {
        a.lse = bench_buffer(bht, KERN_DTYPE_F32, 25, st);
        a.fscratch = bench_buffer(bht, KERN_DTYPE_F32, 26, st);
    } else {
        a.att = bench_buffer(bht * ATT_T, BF16, 27, st);
        KERN_CUDA_CHECK(cudaMalloc(
            &a.scratch, gpt2_cuda_attention_scratch_bytes(ATT_B, ATT_T, ATT_C, ATT_NH, BF16)));
    }
    float ms = bench_ms(run_attention, &a, ctx, 2, reps) * ATT_L;
    void *bufs[] = {a.qkv, a.dqkv, a.out, a.dout, a.att, a.scratch, a.lse, a.fscratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        KERN_CUDA_CHECK(cudaFree(bufs[i]));
    return ms;
}

/* Times GPT-2 124M steps (tied head, B 16 x T 1024, bf16, AdamW) with the unfused (@flash 0)
 * or fused attention; MFU against @peak TFLOP/s. */
static StepResult bench_step(int flash, const int32_t *tokens, const int32_t *targets, double peak,
                             KernCudaCtx *ctx, int steps) {
    Gpt2CudaSliceParams sp;
    memset(&sp, 0, sizeof sp);
    sp.slice.model = (Gpt2Config){.L = 12, .C = 768, .NH = 12, .T = 1024, .V = 50257, .Vp = 50304};
    sp.slice.layer_end = 12;
    sp.slice.has_embedding = 1;
    sp.slice.has_head = 1;
    sp.slice.tie_head = 1;
    sp.slice.B = 16;
    sp.slice.n_act_slots = 1;
    sp.dtype = BF16;
    sp.flash_attention = flash;
    Gpt2CudaSliceSizes sizes;
    gpt2_cuda_slice_sizes(&sp, &sizes);
    StepCase sc;
    memset(&sc, 0, sizeof sc);
    sc.slice = gpt2_cuda_slice_new(&sp);
    if (!sc.slice) {
        fprintf(stderr, "GPT-2 124M slice: out of device memory (needs %.2f GiB)\n",
                (double)sizes.total_bytes / (1 << 30));
        exit(1);
    }
    gpt2_cuda_slice_init_params(sc.slice, 1337, ctx);
    KernOptimParams op = {.kind = KERN_OPTIM_ADAMW,
                          .beta1 = 0.9f,
                          .beta2 = 0.95f,
                          .eps = 1e-8f,
                          .weight_decay = 0.1f};
    sc.opt = kern_cuda_optim_new(&op, gpt2_cuda_slice_table(sc.slice));
    KERN_ASSERT(sc.opt);
    sc.tokens = tokens;
    sc.targets = targets;
    KERN_CUDA_CHECK(cudaMalloc((void **)&sc.loss, sizeof(float)));
    KERN_CUDA_CHECK(cudaMalloc((void **)&sc.sq_norm, sizeof(double)));
    StepResult r;
    r.ms = bench_ms(run_step, &sc, ctx, 2, steps);
    KERN_CUDA_CHECK(cudaMemcpy(&r.loss, sc.loss, sizeof r.loss, cudaMemcpyDeviceToHost));
    double n_tok = (double)sp.slice.B * sp.slice.model.T;
    double flop =
        6.0 * (double)gpt2_cuda_slice_n_params(sc.slice) * n_tok + 12.0 * 12 * 1024 * 768 * n_tok;
    r.mfu = flop / (r.ms * 1e-3) / 1e12 / peak;
    r.bytes = sizes.total_bytes;
    r.attn_ms = 0.0f;
    KERN_CUDA_CHECK(cudaFree(sc.loss));
    KERN_CUDA_CHECK(cudaFree(sc.sq_norm));
    kern_cuda_optim_free(sc.opt);
    gpt2_cuda_slice_free(sc.slice);
    return r;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    int steps = argc > 2 ? atoi(argv[2]) : 5;
    if (argc > 3 || reps < 1 || steps < 1) {
        fprintf(stderr, "usage: %s [repetitions >= 1 (10)] [training steps >= 1 (5)]\n", argv[0]);
        return 2;
    }
    const char *why = NULL;
    if (kern_cuda_device_query(&why) == 0) {
        printf("SKIP: no usable CUDA device: %s\n", why);
        return 77;
    }
    struct cudaDeviceProp prop;
    KERN_CUDA_CHECK(cudaSetDevice(0));
    KERN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t st;
    KERN_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    KernCudaCtx *ctx = kern_cuda_ctx_new(st);
    KERN_ASSERT(ctx);
    printf("device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1 << 30));

    /* 1. reference rate */
    enum { SQ = 8192 };
    size_t       nsq = (size_t)SQ * SQ;
    KernCudaGemm g = kern_cuda_gemm_dense(SQ, SQ, SQ, 0, bench_buffer(nsq, BF16, 11, st), 1,
                                          bench_buffer(nsq, BF16, 12, st),
                                          bench_buffer(nsq, BF16, 13, st), BF16, BF16);
    float        sq_ms = bench_ms(run_square, &g, ctx, 3, reps);
    double       peak = 2.0 * SQ * (double)SQ * SQ / (sq_ms * 1e-3) / 1e12;
    KERN_CUDA_CHECK(cudaFree((void *)g.a));
    KERN_CUDA_CHECK(cudaFree((void *)g.b));
    KERN_CUDA_CHECK(cudaFree(g.c));

    /* 2. GPT-2 Medium matmuls */
    printf("GPT-2 Medium matmuls (bf16, B 16 x T 1024 tokens), share of the 8192^3 rate:\n");
    double mm_flop = 0.0, mm_ms = 0.0;
    int    N = 16 * 1024, C = 1024;
    bench_matmul("attn.c_attn", N, C, 3 * C, 1, 0, peak, ctx, reps, &mm_flop, &mm_ms);
    bench_matmul("attn.c_proj", N, C, C, 1, 0, peak, ctx, reps, &mm_flop, &mm_ms);
    bench_matmul("mlp.c_fc", N, C, 4 * C, 1, 1, peak, ctx, reps, &mm_flop, &mm_ms);
    bench_matmul("mlp.c_proj", N, 4 * C, C, 1, 0, peak, ctx, reps, &mm_flop, &mm_ms);
    bench_matmul("lm_head", N, C, 50304, 0, 0, peak, ctx, reps, &mm_flop, &mm_ms);
    double mm_tflops = mm_flop / (mm_ms * 1e-3) / 1e12;

    /* 3. GPT-2 124M training step, unfused then fused attention */
    int      n_tok = 16 * 1024;
    int32_t *tokens = kern_xmalloc((size_t)n_tok * sizeof(int32_t));
    int32_t *targets = kern_xmalloc((size_t)n_tok * sizeof(int32_t));
    uint64_t rng = kern_rng_seed(7);
    for (int i = 0; i < n_tok; i++) {
        tokens[i] = (int32_t)(kern_rng_u32(&rng) % 50257u);
        targets[i] = (int32_t)(kern_rng_u32(&rng) % 50257u);
    }
    StepResult res[2];
    for (int flash = 0; flash < 2; flash++) {
        res[flash] = bench_step(flash, tokens, targets, peak, ctx, steps);
        res[flash].attn_ms = bench_attention(flash, ctx, reps);
    }

    printf("\n| measure                                   | value        | target |\n");
    printf("|-------------------------------------------|--------------|--------|\n");
    printf("| 8192^3 bf16 product                       | %7.1f TF/s | -      |\n", peak);
    printf("| GPT-2 Medium matmuls, all passes          | %7.1f TF/s | -      |\n", mm_tflops);
    printf("| ... share of the 8192^3 rate              | %10.1f %% | >= 70%% |\n",
           100.0 * mm_tflops / peak);
    for (int flash = 0; flash < 2; flash++) {
        const StepResult *r = &res[flash];
        printf("| GPT-2 124M step, %-8s attention       | %9.1f ms | -      |\n",
               flash ? "fused" : "unfused", r->ms);
        printf("| ... model FLOPs utilisation               | %10.1f %% | >= 40%% |\n",
               100.0 * r->mfu);
        printf("| ... attention, 12 layers F + B            | %9.1f ms | -      |\n", r->attn_ms);
        printf("| ... attention's share of the step         | %10.1f %% | -      |\n",
               100.0 * r->attn_ms / r->ms);
        printf("| ... loss after the timed steps            | %12.4f | -      |\n", r->loss);
        printf("| ... slice arenas (params..scratch)        | %8.2f GiB | -      |\n",
               (double)r->bytes / (1 << 30));
    }
    /* one line for scripts/gpu-check's table */
    printf("attention %.1f%% of the step (unfused), %.1f%% (fused)\n",
           100.0 * res[0].attn_ms / res[0].ms, 100.0 * res[1].attn_ms / res[1].ms);
    free(tokens);
    free(targets);
    kern_cuda_ctx_free(ctx);
    KERN_CUDA_CHECK(cudaStreamDestroy(st));
    return 0;
}
