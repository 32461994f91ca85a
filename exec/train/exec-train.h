/* SPDX-License-Identifier: MIT
 * exec-train.h: pacer-train's training loop over an ExecPipeline: data positions, learning-rate
 * schedule, validation, logging (log.csv, ops.csv, scenario.ini), checkpoints and resume.
 *
 * Segments: the run is cut at every eval/checkpoint boundary (multiples of run.eval_every and
 * run.checkpoint_every, and the last step); each segment is one schedule of that many steps,
 * replayed to the end, so the pipeline is drained at a boundary. For synchronous schedules this
 * changes nothing; for asynchronous ones (pipedream, 2bw, async-1f1b, paci) the boundaries are
 * part of the math, and a resumed run matches an uninterrupted one with the same boundaries.
 * "Step" in logs: for flush schedules the optimizer step; for asynchronous ones the index of
 * the update on stage 0 that consumes the micro-batch's gradient (PpOp.step), so a step's
 * train_loss is the mean loss of the micro-batches stage 0 applies in its step-th update.
 * The lr of the row of step k is the learning rate stage 0 applied at its k-th update
 * (exec_pipeline_update_lr(), the value its U used; the progress line shows the same), and
 * delta_max is the largest Δ (pp_schedule_delta()) of those micro-batches on any stage.
 * After a resume log.csv starts with the rows the resumed checkpoint holds (every row before
 * its step); ops.csv holds only this invocation's ops (times from its own start), the trace
 * `pacer-sim replay` compares.
 * Checkpoints (run.checkpoint_every and the last step, when out_dir is set) are units,
 * out_dir/checkpoints/step-NNNNNNNN (exec-checkpoint-unit.h): the weights (Hugging Face
 * layout), every virtual stage's optimizer state (AdamW moments, Muon momentum, error-feedback
 * previous update, step count) with the step, every stage's version and skip count and the
 * optimizer and vocabulary identities, the log rows, and a manifest (written last) with the
 * run identity and each file's size and SHA-256. Each is written under a temporary name and
 * renamed into place; then out_dir/log.csv is rewritten from the unit's rows and units beyond
 * run.keep_checkpoints are removed. At its start a run removes the temporaries that killed
 * writes left in out_dir/checkpoints. The data position is a pure function of the step and
 * run.seed, and nothing draws random numbers after init, so resuming a replayed program
 * continues bit for bit on CPU: weights, losses and validation equal an uninterrupted run's
 * with the same segment boundaries (for any run.threads: no kernel's sums depend on its
 * thread count). Dynamic mode's live order depends on timing, so two of its runs may differ whether
 * or not one was interrupted.
 * Gradient clipping is per stage: exact global clipping would need an all-reduce of the
 * stages' squared norms at every update, a barrier that asynchronous schedules do not have.
 * The LM head is untied from wte: tying across the first and last stage would need an
 * all-reduce of the tied gradient between those two stages before each update.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-comm.h"
#include "exec-interrupt.h"
#include "exec-progress.h"
#include "pp-scenario.h"

G_BEGIN_DECLS

typedef struct {
    const PpScenario *scenario;   /* borrowed */
    const char       *train_path; /* token shard for training (data-shard.h) */
    const char       *val_path;   /* token shard for validation */
    const char       *out_dir;    /* (nullable) log.csv, ops.csv, scenario.ini, checkpoints */
    const char       *resume;     /* (nullable) a run folder (its newest complete checkpoint:
                                     damaged ones are skipped) or a checkpoint unit folder */
    gboolean overwrite;           /* out_dir may hold another run: remove what pacer-train
                                     wrote there and start over (exec_train_out_prepare()) */
    gboolean dynamic;             /* run PACI's backpressure policy live (paci, async-1f1b):
                                     no program is built for a segment; its executed order is
                                     recorded as a program and checked
                                     (exec_pipeline_run_dynamic()) */
    int32_t stop_at;              /* > 0: stop after this step, checkpointing there as at the
                                     end (a segment boundary); 0: train all training.steps */
    ExecProgressMode progress;
    /* (nullable) DATA_BPE_FINGERPRINT_BYTES bytes: the vocabulary both shards must have been
     * built with (data_bpe_fingerprint()); with or without it, the two must share one. */
    const uint8_t *vocab_fingerprint;
    /* (nullable) the process group when several processes run the pipeline (one per stage,
     * of each of the parallel.data replicas: rank r runs stage r / D of replica r mod D,
     * exec-comm.h): every rank calls exec_train_run() with the same parameters; rank 0 alone
     * writes the outputs (log.csv, ops.csv with every rank's ops, scenario.ini, the checkpoint
     * gathered from replica 0's ranks) and shows progress. */
    ExecComm *comm;
    /* (nullable) the SIGINT/SIGTERM watcher: the pipeline is attached to it while training,
     * so that a signal stops the run with EXEC_ERROR_INTERRUPTED after writing log.csv (the
     * rows of the steps done) and ops.csv (every op that ran, the interrupted segment's
     * included). Test hook: the environment variable PACER_TEST_SIGINT_AT = STEP raises
     * SIGINT when the 0-based step STEP has all its losses (the segment may still run). */
    ExecInterrupt *interrupt;
} ExecTrainParams;

#define EXEC_TRAIN_SIGINT_ENV "PACER_TEST_SIGINT_AT"
/* Test hook: with PACER_TEST_REPLICA_DATA=same every data-parallel replica reads replica 0's
 * micro-batches (each replica then reduces D equal gradients: with D = 2 the run equals one
 * pipeline's bit for bit, tests/test-exec-mpi.c). */
#define EXEC_TRAIN_REPLICA_DATA_ENV "PACER_TEST_REPLICA_DATA"

typedef struct {
    int32_t steps;        /* optimizer steps done (including resumed ones) */
    int64_t tokens;       /* training tokens consumed */
    double  train_loss;   /* mean loss of the last step */
    double  val_loss;     /* last validation loss (NAN when none ran) */
    double  tokens_per_s; /* over this invocation's steps */
    double  wall_s;
    int32_t n_skipped;       /* updates skipped for non-finite gradients */
    int64_t predicted_bytes; /* the memory model's bytes over all stages and replicas
                                (pp-memory.h); on rank 0 */
    int64_t actual_bytes;    /* bytes the backend allocated over all stages and replicas (device
                                memory, host memory on the cpu); -1 when the backend does not
                                account its memory; on rank 0 (-1 elsewhere) */
    int32_t saved_step;      /* the newest checkpoint unit this invocation wrote to out_dir
                                (0: none); also set when exec_train_run() fails */
} ExecTrainSummary;

/* Position of training sequence @seq (global micro-batch * B + row) in a shard of @n_tokens
 * tokens: splitmix64(@seed + @seq) mod (n_tokens - T), so a window of T + 1 tokens fits.
 * Pure: the data of a micro-batch depends only on its index and the seed. */
uint64_t exec_train_window(uint64_t seed, int64_t seq, uint64_t n_tokens, int32_t T);
/* Data parallelism: the global micro-batch that micro-batch @mb (counted over the run) of
 * replica @d of @D, each running @m micro-batches per step, reads. Step k = mb / m's global
 * batch holds the D m micro-batches k D m .. (k + 1) D m - 1, and replica d reads the d-th run
 * of m of them, so that the replicas together read what one pipeline running D m
 * micro-batches per step would, in the same step. */
int64_t exec_train_global_mb(int64_t mb, int32_t D, int32_t d, int32_t m);

/* The scenario keys whose values a checkpoint records as its run's identity and a resume
 * must match ("section.key"; exec-train-identity.c says why each one and how three of them
 * are recorded). Every other key may change on resume. Returns: (transfer none) a
 * NULL-terminated static list. */
const char *const *exec_train_identity_keys(void);

/* Checks @identity (exec_train_identity_new()) of a run of @data replicas (parallel.data)
 * against @saved, the identity the unit @dir records (key -> value). parallel.data is no
 * identity key of its own, but it sets the batch (training.global_batch = microbatch_size x
 * the step's micro-batches x data): when the unit's batch keys imply another replica count, the
 * refusal names parallel.data, the key the user changed, and both counts. Returns FALSE with
 * PP_IO_ERROR_MISMATCH naming @dir, that or the first key that differs (or that the unit does
 * not record) and both values. */
gboolean exec_train_identity_check(const char *const *identity, int32_t data, GHashTable *saved,
                                   const char *dir, GError **error);

/* Trains scenario->training.steps optimizer steps. Returns FALSE with @error set on bad
 * input or a stopped run: PP_IO_ERROR_* for shards (unreadable, too short, built with another
 * vocabulary) and checkpoints (no complete unit, a damaged unit given by name, an identity
 * key of another value: the message names the key and both values, another vocabulary, a
 * tensor whose shape differs: the message names it and both shapes; PP_IO_ERROR_NONFINITE
 * for a NaN or infinite weight or optimizer value: the tensor and its first bad element),
 * PP_IO_ERROR_EXISTS for an out_dir that holds another run (exec_train_out_prepare()),
 * PP_SCENARIO_ERROR_* for scenario values the executor cannot run
 * (also a process group whose size is neither 1 nor parallel.data x pipeline.stages, or
 * parallel.data > 1 without a group or on another backend than cpu), EXEC_ERROR_* from the
 * pipeline. With a process group every rank returns the same error (exec_comm_agree()) except
 * for EXEC_ERROR_COMM, which exec_comm_finish() turns into an abort of the job. */
gboolean exec_train_run(const ExecTrainParams *params, ExecTrainSummary *summary, GError **error);

G_END_DECLS
