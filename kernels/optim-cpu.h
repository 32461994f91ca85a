/* SPDX-License-Identifier: MIT
 * optim-cpu.h: optimizers over a Gpt2Slice's flat params/grads and tensor table: AdamW, Muon
 * (Newton-Schulz orthogonalised momentum for the blocks' matmul weights, AdamW for the rest),
 * update-level error feedback, the warmup + cosine learning-rate schedule and the gradient
 * norm/clipping helpers. Plain C, no GLib; the optimizer owns one state arena.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "gpt2-slice.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- optimizer --- */

typedef enum {
    KERN_OPTIM_ADAMW, /* AdamW on every tensor */
    KERN_OPTIM_MUON,  /* Muon on GPT2_TENSOR_HIDDEN tensors, AdamW on the others */
    KERN_OPTIM_N_KINDS
} KernOptimKind;

/* Parameters of kern_optim_new() (plain data). Decoupled weight decay applies to matrices only
 * (Gpt2Tensor is_matrix: embeddings, block matmul weights, LM head; never gains or biases), in
 * both AdamW and Muon: p -= lr * weight_decay * p. The Muon learning rate is the lr passed to
 * kern_optim_step() times muon_lr_ratio (e.g. 0.02 / 6e-4), so one schedule drives both. */
typedef struct {
    KernOptimKind kind;
    float         beta1;          /* AdamW first-moment decay, e.g. 0.9 */
    float         beta2;          /* AdamW second-moment decay, e.g. 0.95 */
    float         eps;            /* AdamW denominator epsilon, e.g. 1e-8 */
    float         weight_decay;   /* decoupled, matrices only (above) */
    float         muon_momentum;  /* Muon momentum mu, e.g. 0.95 */
    float         muon_lr_ratio;  /* Muon lr / AdamW lr */
    int           muon_ns_steps;  /* Newton-Schulz iterations, e.g. 5 */
    int           error_feedback; /* 1: update-level error feedback (kern_optim_step()) */
    int           shards;         /* ZeRO-1: the optimizer holds the state of, and steps, only
                                     shard @shard of @shards of the slice's flat parameters
                                     (kern_optim_shard_range()); 0 or 1: all of them. AdamW
                                     only: Muon orthogonalises whole matrices */
    int shard;                    /* 0 <= shard < shards */
} KernOptimParams;

/* Whether tensor @t is Muon-driven under @params (Muon on GPT2_TENSOR_HIDDEN tensors when the
 * kind is KERN_OPTIM_MUON, AdamW on everything else): the one rule every optimizer and the
 * executor's tensor tables share. */
static inline int kern_optim_uses_muon(const KernOptimParams *params, const Gpt2Tensor *t) {
    return params->kind == KERN_OPTIM_MUON && t->kind == GPT2_TENSOR_HIDDEN;
}

typedef struct _KernOptim KernOptim;

/* One tensor of a slice's table as an optimizer sees it (the CPU and CUDA optimizers alike). */
typedef struct {
    size_t offset; /* floats into params/grads */
    size_t numel;
    size_t lo, hi; /* the elements of the tensor inside the optimizer's range */
    int    rows, cols;
    int    is_matrix;
    int    use_muon; /* kern_optim_uses_muon() */
    size_t state;    /* floats into the state arena: Muon momentum, or AdamW m then v, each
                        hi - lo floats */
} KernOptimTensor;

/* Fills @ot from table tensor @t under @params for the optimizer's range [@lo, @hi) of the flat
 * parameters: its moments start at *@state_floats, which moves past them, and *@max_hidden and
 * *@max_ns grow to the Muon scratch it needs (its numel, and 2 numel + 3 min(rows, cols)^2
 * floats of Newton-Schulz scratch). */
void kern_optim_tensor_init(KernOptimTensor *ot, const KernOptimParams *params, const Gpt2Tensor *t,
                            size_t lo, size_t hi, size_t *state_floats, size_t *max_hidden,
                            size_t *max_ns);

/* Floats [*@lo, *@hi) of a flat array of @n: shard d = @shard of D = @shards (0 <= d < D),
 * cut at whole chunks of the gradient norm: of the K = kern_grad_norm_n_chunks(n) chunks,
 * shard d holds chunks [K d / D, K (d + 1) / D). So a shard's partial sums
 * (kern_grad_sq_norm_partials()) are the whole array's for its chunks; a shard is empty when
 * K < D leaves it no chunk. */
void kern_optim_shard_range(size_t n, int shards, int shard, size_t *lo, size_t *hi);

/* Creates the optimizer state for @slice's tensor table (the table is read now and copied; the
 * slice may be freed first). State arena: AdamW m and v for every AdamW-driven float, the Muon
 * momentum for every Muon-driven float, the previous update for every float when
 * error_feedback, and Newton-Schulz scratch; all zero, step count 0. With params->shards > 1,
 * "every float" is every float of the shard (kern_optim_range()). Aborts on OOM or on bad
 * @params (kind out of range, beta outside [0, 1), muon_ns_steps < 1, a shard out of range,
 * Muon with shards > 1).
 * Returns: (transfer full): free with kern_optim_free(). */
KernOptim *kern_optim_new(const KernOptimParams *params, const Gpt2Slice *slice);
/* Frees; accepts NULL. */
void kern_optim_free(KernOptim *opt);
/* Floats in the state arena (for memory accounting). */
size_t kern_optim_state_floats(const KernOptim *opt);
/* Number of steps taken so far (t). */
int64_t kern_optim_n_steps(const KernOptim *opt);
/* The floats [*@lo, *@hi) of the flat parameters this optimizer holds state for and steps:
 * [0, n_params) without shards. */
void kern_optim_range(const KernOptim *opt, size_t *lo, size_t *hi);

/* --- state access (checkpoints) ---
 * The persistent state is the per-tensor moments, the error-feedback previous update and t;
 * the Newton-Schulz scratch in the arena holds nothing between steps. Saving these buffers and
 * t, then writing them back into an optimizer made with the same kind, error_feedback and
 * tensor table, continues the run bit for bit. */

/* The elements [*@lo, *@hi) of tensor @i (in its own row-major layout) whose state the
 * optimizer holds: [0, numel) without shards, the part of the tensor inside the shard with
 * (possibly empty: lo = hi). */
void kern_optim_tensor_span(const KernOptim *opt, int i, size_t *lo, size_t *hi);
/* The moment buffers of tensor @i of the table (0 <= i < gpt2_slice_n_tensors() of the slice
 * the optimizer was made for), each hi - lo floats of its span (kern_optim_tensor_span()),
 * element lo first, in the tensor's own layout (shape[0], shape[1]), borrowed from the state
 * arena and writable:
 *   AdamW-driven: *@first = m (first moment), *@second = v (second moment)
 *   Muon-driven:  *@first = the momentum M, *@second = NULL
 * Returns: 1 when the tensor is Muon-driven, else 0. */
int kern_optim_tensor_state(KernOptim *opt, int i, float **first, float **second);
/* Error feedback's previous update u_{t-1} of the optimizer's range (kern_optim_range():
 * hi - lo floats, flat element lo first, the slice's params layout), borrowed and writable;
 * NULL when error_feedback is off. */
float *kern_optim_prev_update(KernOptim *opt);
/* The same array from tensor @i's element lo of its span on (hi - lo floats), or NULL. */
float *kern_optim_tensor_prev_update(KernOptim *opt, int i);
/* Sets t, the number of steps taken (@n_steps >= 0): the next step is t + 1 and uses it in
 * AdamW's bias corrections. */
void kern_optim_set_n_steps(KernOptim *opt, int64_t n_steps);

/* One update of @params from @grads (both gpt2_slice_n_params() floats, the slice's layout;
 * only the optimizer's range is read and written), with AdamW learning rate @lr (Muon: lr *
 * muon_lr_ratio). Increments the step count t
 * (first step t = 1). Per float, the update u_t is:
 *   AdamW: m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *          u = lr * ( (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * p )
 *   Muon (hidden matrix W of shape (OC, IC)):  M = mu M + G;  G' = G + mu M (Nesterov);
 *          O = NS5(G' / ||G'||_F), then scaled by sqrt(max(1, OC / IC));
 *          u = lr_muon * (O + wd * p)
 *   (wd is 0 for gains, biases and 1-D tensors.)
 * Without error feedback: p -= u_t.
 * With error feedback (one-step-delay paper, x_{t+1} = x_t - 2 u_t + u_{t-1}): p -= 2 u_t -
 * u_{t-1}, then u_{t-1} := u_t. The first step uses u_0 = 0, i.e. p -= 2 u_1, so that after
 * every step p = p_0 - (u_1 + ... + u_t) - u_t: the plain trajectory plus one extrapolated
 * update, which is what compensates a one-step gradient delay. */
void kern_optim_step(KernOptim *opt, float *params, const float *grads, float lr);

/* Newton-Schulz quintic iteration (coefficients a 3.4445, b -4.7750, c 2.0315), as Muon uses:
 * X = G / (||G||_F + 1e-7), transposed when rows > cols so that X is wide, then @steps times
 * A = X X^T, X = a X + (b A + c A A) X. Writes @out (rows, cols); its singular values end up
 * roughly in [0.7, 1.2] (not exactly 1: the coefficients trade accuracy for speed).
 *   @out     (rows, cols)
 *   @g       (rows, cols); may be the same array as @out
 *   @scratch at least 2 * rows * cols + 3 * m * m floats, m = min(rows, cols) */
void kern_newton_schulz5(float *out, const float *g, int rows, int cols, int steps, float *scratch);

/* --- learning-rate schedule --- */

/* Linear warmup then cosine decay:
 *   step < warmup_steps:          max_lr * (step + 1) / warmup_steps
 *   warmup_steps <= step < total: min_lr + (max_lr - min_lr) * (1 + cos(pi * r)) / 2,
 *                                 r = (step - warmup_steps) / (total_steps - warmup_steps)
 *   step >= total_steps:          min_lr
 * (0-based @step; warmup_steps may be 0; total_steps > warmup_steps.) */
float kern_lr_schedule(int64_t step, int64_t warmup_steps, int64_t total_steps, float max_lr,
                       float min_lr);

/* --- gradient clipping --- */

/* Floats per partial sum of the gradient norm: a fixed split of the array, so the sum's order
 * never depends on the thread count or on how the array is sharded at chunk boundaries. */
#define KERN_GRAD_NORM_CHUNK 65536
/* The number of partial sums of an array of @n floats: ceil(n / KERN_GRAD_NORM_CHUNK). */
size_t kern_grad_norm_n_chunks(size_t n);
/* The partial sums of squares of @n floats of @grads into @partial (kern_grad_norm_n_chunks(n)
 * doubles): chunk c's, in double, in a fixed order within the chunk. */
void kern_grad_sq_norm_partials(const float *grads, size_t n, double *partial);
/* Sum of squares of @n floats of @grads: the partial sums added in chunk order. Add the values
 * of all stages and take sqrt for the exact global L2 norm. */
double kern_grad_sq_norm(const float *grads, size_t n);
/* Multiplier that brings an L2 norm @norm down to @max_norm: max_norm / (norm + 1e-6) when
 * norm > max_norm, else 1 (kern_update_clip_factor(), kern-update-gate.h). */
float kern_clip_factor(double norm, float max_norm);
/* grads[i] *= @factor for i < @n. */
void kern_grad_scale(float *grads, size_t n, float factor);

#ifdef __cplusplus
}
#endif
