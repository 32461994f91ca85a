/* SPDX-License-Identifier: MIT
 * test-exec-train.c: the training loop (exec-train.h) on the CPU backend and synthetic shards:
 * its outputs (log.csv, ops.csv, checkpoint units), resuming into the same folder, dynamic mode,
 * what it refuses (another layout, another optimizer or vocabulary, a tensor of another shape,
 * a layout pacer-train cannot run, a backend the build or the machine lacks). That an
 * interrupted run resumes bitwise is a check of every backend (test-exec-conformance.c).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <glib/gstdio.h>

#include "data-shard.h"
#include "exec-checkpoint-unit.h"
#include "exec-checkpoint.h"
#include "exec-train.h"
#include "exec.h"
#include "kern-pool.h"
#include "pp-error.h"
#include "pp-trace.h"
#include "test-exec-util.h"
#include "test-util.h"

/* --- the training loop (exec-train.h) on a synthetic shard --- */

START_TEST(test_train_outputs) {
    TestExecTrain f;
    test_exec_train_init(&f);
    ExecTrainSummary sum;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(test_exec_train(&f, NULL, NULL, 0, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(sum.steps, 4);
    ck_assert_int_eq(sum.tokens, 4 * 4 * 16); /* steps * global batch 4 * T */
    ck_assert_int_eq(sum.n_skipped, 0);
    ck_assert(isfinite(sum.val_loss) && isfinite(sum.train_loss));
    g_auto(GStrv) log = test_exec_read_lines(f.dir, "log.csv");
    ck_assert_int_eq(g_strv_length(log), 5);
    ck_assert_str_eq(log[0], "step,tokens,train_loss,val_loss,lr,grad_norm,tokens_per_s,"
                             "delta_max");
    /* Validation every 2 steps: a val_loss on steps 1 and 3 only. */
    for (int i = 1; i <= 4; i++) {
        g_auto(GStrv) cols = g_strsplit(log[i], ",", -1);
        ck_assert_int_eq(g_strv_length(cols), 8);
        ck_assert_int_eq(g_ascii_strtoll(cols[0], NULL, 10), i - 1);
        ck_assert_int_eq(cols[3][0] != '\0', i % 2 == 0);
        ck_assert_str_eq(cols[7], "0"); /* flush: no drift */
        /* lr: what stage 0 applied at update i - 1 (warmup 1 of 4 steps, 1e-3 to 1e-4) */
        g_autofree char *lr = g_strdup_printf("%.6e", kern_lr_schedule(i - 1, 1, 4, 1e-3f, 1e-4f));
        ck_assert_str_eq(cols[4], lr);
    }
    g_autofree char *ops = g_build_filename(f.dir, "ops.csv", NULL);
    g_autoptr(PpTrace) trace = pp_trace_read_csv(ops, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "");
    /* 4 steps x (2 stages x (2 F + 2 BW + 1 U)). */
    ck_assert_int_eq(trace->n_rows, 4 * 2 * 5);
    /* A unit at every checkpoint_every = 2 steps, nothing else in checkpoints/. */
    g_autofree char *units = g_build_filename(f.dir, "checkpoints", NULL);
    g_autofree char *listing = test_util_list_dir(units);
    ck_assert_str_eq(listing, "step-00000002 step-00000004");
    test_exec_train_clear(&f);
}
END_TEST

START_TEST(test_train_resume) {
    TestExecTrain f;
    test_exec_train_init(&f);
    ExecTrainSummary sum;
    g_autoptr(GError) error = NULL;
    ck_assert(test_exec_train(&f, NULL, NULL, 0, FALSE, &sum, &error));
    g_auto(GStrv) full = test_exec_read_lines(f.dir, "log.csv");
    /* Stop at step 2 (a checkpoint), then resume into the same folder. */
    ck_assert(test_exec_train(&f, NULL, NULL, 2, FALSE, &sum, &error));
    ck_assert_int_eq(sum.steps, 2);
    /* The run folder: its newest unit is step 2 (the first run's step 4 went with the restart). */
    const char *ckpt = f.dir;
    ck_assert_msg(test_exec_train(&f, NULL, ckpt, 0, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(sum.steps, 4);
    g_auto(GStrv) resumed = test_exec_read_lines(f.dir, "log.csv");
    ck_assert_int_eq(g_strv_length(resumed), 5);
    /* Steps before the checkpoint are the same run; the first step after it starts from the
     * same weights and data, so its loss (computed before any update) matches exactly. */
    ck_assert_str_eq(resumed[0], full[0]);
    for (int i = 1; i <= 3; i++) {
        g_auto(GStrv) a = g_strsplit(full[i], ",", -1), b = g_strsplit(resumed[i], ",", -1);
        /* step, tokens, train_loss; tokens_per_s (column 6) is a measurement. */
        for (int col = 0; col < 3; col++)
            ck_assert_str_eq(a[col], b[col]);
        if (i <= 2) {
            for (int col = 3; col < 6; col++)
                ck_assert_str_eq(a[col], b[col]);
        }
    }
    /* run.backend = cuda: refused in a build without it (naming the key), and with it on a
     * machine without a device (a clear error, not an abort); trains where there is one. */
    const char *cuda[] = {"run.backend=cuda", "run.precision=fp32", NULL};
    GError     *no_cuda = NULL;
    if (!test_exec_train(&f, cuda, NULL, 0, FALSE, &sum, &no_cuda)) {
        gboolean absent =
            g_error_matches(no_cuda, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE) &&
            strstr(no_cuda->message, "[run] backend = cuda: this build has no CUDA backend");
        gboolean no_device = g_error_matches(no_cuda, EXEC_ERROR, EXEC_ERROR_BACKEND) &&
                             strstr(no_cuda->message, "no CUDA device is visible");
        ck_assert_msg(absent || no_device, "%s", no_cuda->message);
        g_error_free(no_cuda);
    }
    /* A checkpoint of another layout is refused. */
    const char *other[] = {"pipeline.schedule=gpipe", NULL};
    GError     *mismatch = NULL;
    ck_assert(!test_exec_train(&f, other, ckpt, 0, FALSE, &sum, &mismatch));
    ck_assert(g_error_matches(mismatch, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    g_error_free(mismatch);
    test_exec_train_clear(&f);
}
END_TEST

/* pacer-train runs one pipeline of one device per stage with GPT-2's layer: data, tensor or
 * context parallelism, fsdp, grouped-query or latent attention, another head width, SwiGLU,
 * another FFN width or experts (the simulator's keys) is an error naming them, before any
 * step. */
START_TEST(test_train_refuses_layout) {
    TestExecTrain f;
    test_exec_train_init(&f);
    static const struct {
        const char *set[5];
        const char *needle;
    } cases[] = {
        {{"parallel.data=2", NULL}, "runs one process per stage of every replica (mpirun"},
        {{"parallel.tensor=2", NULL}, "pacer-train runs one pipeline"},
        {{"parallel.context=2", NULL}, "pacer-train runs one pipeline"},
        {{"parallel.fsdp=true", NULL}, "pacer-train runs one pipeline"},
        {{"model.experts=2", "model.experts_per_token=1", NULL}, "mixtures of experts"},
        {{"model.attention=mla", "model.kv_lora_rank=8", "model.qk_nope_head_dim=8",
          "model.v_head_dim=8", NULL},
         "latent attention"},
        {{"model.kv_heads=1", NULL}, "pacer-train trains GPT-2's layer"},
        {{"model.head_dim=8", NULL}, "pacer-train trains GPT-2's layer"},
        {{"model.ffn=swiglu", NULL}, "pacer-train trains GPT-2's layer"},
        {{"model.ffn_hidden=64", NULL}, "pacer-train trains GPT-2's layer"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        ExecTrainSummary sum;
        g_autoptr(GError) error = NULL;
        ck_assert(!test_exec_train(&f, cases[i].set, NULL, 0, FALSE, &sum, &error));
        ck_assert(g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
        ck_assert_msg(strstr(error->message, cases[i].needle) != NULL, "%s", error->message);
    }
    test_exec_train_clear(&f);
}
END_TEST

/* Resume and shard checks: another optimizer, another vocabulary, an optimizer tensor of
 * another shape in the sidecar; train and val shards of different vocabularies. */
START_TEST(test_train_resume_refused) {
    TestExecTrain f;
    test_exec_train_init(&f);
    ExecTrainSummary sum;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(test_exec_train(&f, NULL, NULL, 2, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    const char *ckpt = f.dir;

    const char *muon[] = {"optimizer.name=muon", NULL};
    GError     *err = NULL;
    ck_assert(!test_exec_train(&f, muon, ckpt, 0, FALSE, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, "optimizer.name") != NULL, "%s", err->message);
    g_clear_error(&err);

    /* The fixture's shards carry an all-zero fingerprint. */
    uint8_t other[DATA_BPE_FINGERPRINT_BYTES] = {7};
    ck_assert(!test_exec_train_vocab(&f, NULL, NULL, 0, FALSE, other, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, f.train) != NULL, "%s", err->message);
    g_clear_error(&err);

    /* Shards of another vocabulary: refused next to the zero-fingerprint val shard, and on
     * resuming a checkpoint trained on the zero-fingerprint shards. */
    uint16_t         tokens[64];
    g_autofree char *alt = g_build_filename(f.dir, "other.bin", NULL);
    for (int i = 0; i < 64; i++)
        tokens[i] = (uint16_t)(i % test_exec_train_cfg.V);
    ck_assert(data_shard_write(alt, tokens, 64, test_exec_train_cfg.V, other, NULL));
    TestExecTrain mixed = {.dir = f.dir, .train = f.train, .val = alt};
    ck_assert(!test_exec_train(&mixed, NULL, NULL, 0, FALSE, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, "different vocabularies") != NULL, "%s", err->message);
    g_clear_error(&err);
    TestExecTrain moved = {.dir = f.dir, .train = alt, .val = alt};
    ck_assert(!test_exec_train(&moved, NULL, ckpt, 0, FALSE, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, "vocabulary") != NULL, "%s", err->message);
    g_clear_error(&err);
    g_remove(alt);

    /* A unit whose AdamW m of h.1.mlp.c_fc.weight (pacer (128, 32)) is stored (32, 128). */
    g_autofree char *units = g_build_filename(f.dir, "checkpoints", NULL);
    g_autofree char *step2 = g_build_filename(units, "step-00000002", NULL);
    g_autoptr(ExecCheckpointUnit) unit = exec_checkpoint_unit_open(step2, &err);
    ck_assert_msg(unit != NULL, "%s", err ? err->message : "");
    g_autoptr(GHashTable) meta = NULL;
    g_autoptr(ExecTensorList) none = exec_tensor_list_new();
    ck_assert(exec_checkpoint_unit_read_state(unit, none, &meta, NULL));
    g_autofree char *log = exec_checkpoint_unit_read_log(unit, NULL);
    Gpt2Slice       *slice = test_exec_train_full_slice();
    g_autoptr(ExecTensorList) model = exec_tensor_list_new();
    g_autoptr(ExecTensorList) state = exec_tensor_list_new();
    exec_tensor_list_add_slice(model, slice, gpt2_slice_params(slice), "");
    for (int i = 0; i < gpt2_slice_n_tensors(slice); i++) {
        const Gpt2Tensor *t = gpt2_slice_tensor(slice, i);
        float            *data = gpt2_slice_params(slice) + t->offset;
        int               r = t->shape[0], c = t->ndim == 1 ? 1 : t->shape[1];
        gboolean          swap = strcmp(t->name, "h.1.mlp.c_fc.weight") == 0;
        g_autofree char  *m = g_strconcat("optim.m.", t->name, NULL);
        g_autofree char  *v = g_strconcat("optim.v.", t->name, NULL);
        exec_tensor_list_add(state, m, data, t->ndim, swap ? c : r, swap ? r : c);
        exec_tensor_list_add(state, v, data, t->ndim, r, c);
    }
    ExecCheckpointUnitData data = {.step = 2,
                                   .run = exec_checkpoint_unit_run(unit),
                                   .model_cfg = &test_exec_train_cfg,
                                   .model = model,
                                   .state = state,
                                   .state_metadata = meta,
                                   .log = log};
    g_autofree char       *written = exec_checkpoint_unit_write(units, &data, &err);
    ck_assert_msg(written != NULL, "%s", err ? err->message : "");
    gpt2_slice_free(slice);
    ck_assert(!test_exec_train(&f, NULL, ckpt, 0, FALSE, &sum, &err));
    ck_assert(g_error_matches(err, PP_IO_ERROR, PP_IO_ERROR_MISMATCH));
    ck_assert_msg(strstr(err->message, "\"optim.m.h.1.mlp.c_fc.weight\" has shape (32, 128) in "
                                       "the file, the model expects (128, 32)") != NULL,
                  "%s", err->message);
    g_clear_error(&err);
    test_exec_train_clear(&f);
}
END_TEST

START_TEST(test_train_dynamic) {
    TestExecTrain f;
    test_exec_train_init(&f);
    ExecTrainSummary sum;
    g_autoptr(GError) error = NULL;
    const char *paci[] = {"pipeline.schedule=paci", "pipeline.accumulation=2",
                          "pipeline.microbatches=1", "pipeline.mode=dynamic", NULL};
    ck_assert_msg(test_exec_train(&f, paci, NULL, 0, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(sum.steps, 4);
    /* async-1f1b is PACI with a = 1: its policy runs live too, with PACI's drift N - 1. */
    const char *async[] = {"pipeline.schedule=async-1f1b", "pipeline.microbatches=1",
                           "pipeline.mode=dynamic", NULL};
    ck_assert_msg(test_exec_train(&f, async, NULL, 0, FALSE, &sum, &error), "%s",
                  error ? error->message : "");
    ck_assert_int_eq(sum.steps, 4);
    /* The policy needs PACI's rule: a flush schedule is refused. */
    GError *refused = NULL;
    ck_assert(!test_exec_train(&f, NULL, NULL, 0, TRUE, &sum, &refused));
    ck_assert(g_error_matches(refused, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT));
    g_error_free(refused);
    test_exec_train_clear(&f);
}
END_TEST

int main(void) {
    /* One kernel thread per worker: fair on a shared machine. */
    kern_set_threads(1);
    Suite *s = suite_create("exec-train");
    TCase *tt = tcase_create("train");
    tcase_set_timeout(tt, 30);
    tcase_add_test(tt, test_train_outputs);
    tcase_add_test(tt, test_train_resume);
    tcase_add_test(tt, test_train_dynamic);
    tcase_add_test(tt, test_train_resume_refused);
    tcase_add_test(tt, test_train_refuses_layout);
    suite_add_tcase(s, tt);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
