/* SPDX-License-Identifier: MIT
 * test-exec-util.h: what the executor's test programs share (the backend conformance suite
 * test-exec-conformance.c and its backends' files, test-exec-train.c): the tiny GPT-2 and its
 * synthetic token source, pipeline parameters for it, the gradient tap's store, by-name gathers and
 * their comparison, and the training loop on synthetic shards.
 */
#pragma once

#include <check.h>
#include <glib.h>
#include <stdint.h>

#include "exec-train.h"
#include "exec.h"

/* Tiny model: L=4, C=32, NH=2, T=16, V=61 (padded 128), B=2 sequences per micro-batch. */
extern const Gpt2Config test_exec_tiny;
enum { TEST_EXEC_TINY_B = 2 };
/* The seed of the synthetic data (test_exec_tiny_params() passes its address). */
extern const uint64_t test_exec_data_seed;

/* ExecDataFn: tokens of micro-batch mb from an xorshift64 stream seeded by (seed, mb) (@user_data
 * points to the uint64_t seed); targets are the next tokens of the same stream. */
void test_exec_tiny_data(gpointer user_data, int64_t mb, int32_t *tokens, int32_t *targets);

/* Gradients observed at U through the backend's tap (host copies), by tensor name (the last
 * U of each vstage wins). */
typedef struct {
    GMutex      lock;
    GHashTable *grads; /* name -> GArray of float */
} TestExecGrads;

void test_exec_grads_init(TestExecGrads *store);
void test_exec_grads_clear(TestExecGrads *store);
/* ExecGradFn over a TestExecGrads. */
void test_exec_grads_collect(gpointer user_data, int32_t vstage, const ExecTensor *tensor,
                             const float *grads);

/* Pipeline parameters of the tiny model sized by @shape (cpu backend, AdamW, clipping 1). */
ExecPipelineParams test_exec_tiny_params(const PpSchedule *shape);
/* exec_pipeline_new() / exec_pipeline_run() from micro-batch 0, failing the test on error. */
ExecPipeline  *test_exec_pipeline_new(const ExecPipelineParams *p);
ExecRunResult *test_exec_run(ExecPipeline *pipeline, const PpSchedule *sched);

/* Every tensor's @role data of the model (every parameter), by name, copied out of the
 * backend. Returns: (transfer full): name -> GArray of float. */
GHashTable *test_exec_gather_role(ExecPipeline *pipeline, ExecTensorRole role);
GHashTable *test_exec_gather_params(ExecPipeline *pipeline);
/* Largest |a - b| / max(|b|, 1e-3) over the tensors of @ref (every name must exist in @got
 * with the same size); +inf for NaN. */
double test_exec_max_rel_diff(GHashTable *got, GHashTable *ref);
/* Mean of res->loss. */
double test_exec_mean_loss(const ExecRunResult *res);
/* Weight copies a backend makes on @stage for @sched (ExecRunResult.n_copies): under weight
 * stashing one per weight version the forwards of each of the stage's chunks use (versions
 * only grow along a program), else 0. */
int32_t test_exec_stash_copies(const PpSchedule *sched, int32_t stage);

/* A schedule case: kind, stages, chunks, micro-batches m, accumulation a, steps. */
typedef struct {
    const char *kind;
    int32_t     n_stages, n_chunks, m, a, steps;
} TestExecCase;

/* --- the training loop on synthetic shards --- */

/* A 2-layer 1f1b scenario of 4 steps: eval and checkpoints every 2 steps. */
extern const char test_exec_train_ini[];
/* Its whole model (tensor names and shapes for checkpoints). */
extern const Gpt2Config test_exec_train_cfg;

/* A scratch folder with a train and a val shard of xorshift tokens below the tiny vocabulary. */
typedef struct {
    char *dir, *train, *val;
} TestExecTrain;

void test_exec_train_init(TestExecTrain *f);
void test_exec_train_clear(TestExecTrain *f);
/* Writes a shard of @n xorshift tokens below the tiny vocabulary into @dir/@name. Returns:
 * (transfer full) its path. */
char *test_exec_write_shard(const char *dir, const char *name, uint64_t n, uint64_t seed);
/* The lines of @dir/@name. Returns: (transfer full). */
char **test_exec_read_lines(const char *dir, const char *name);
/* exec_train_run() of test_exec_train_ini with @sets overrides into f->dir (quiet); without
 * @resume the run starts over there (overwrite: the tests rerun into one folder). */
gboolean test_exec_train(const TestExecTrain *f, const char *const *sets, const char *resume,
                         int32_t stop_at, gboolean dynamic, ExecTrainSummary *sum, GError **error);
/* The same with the vocabulary the shards must have (@fingerprint, nullable). */
gboolean test_exec_train_vocab(const TestExecTrain *f, const char *const *sets, const char *resume,
                               int32_t stop_at, gboolean dynamic, const uint8_t *fingerprint,
                               ExecTrainSummary *sum, GError **error);
/* The whole model of test_exec_train_ini as one CPU slice, and loading the weights of
 * the unit @dir/checkpoints/step-NNNNNNNN (the newest) into it. */
Gpt2Slice *test_exec_train_full_slice(void);
void       test_exec_load_weights(Gpt2Slice *slice, const char *dir);
