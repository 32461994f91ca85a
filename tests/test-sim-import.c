/* SPDX-License-Identifier: MIT
 * test-sim-import.c: `pacer-sim import` (sim/sim-import.c). Commands as Megatron-LM's public
 * example scripts run them and a DeepSpeed config are imported, simulated, and compared to
 * the byte (pacer-sim --json, the scenario's path aside) with the hand-written scenario of
 * the same run (tests/data/import/); the flags without a key are listed in the file and on
 * stderr; an existing file is never replaced without --force; bad values name the flag.
 */
#include <check.h>
#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

#include "test-util.h"

#define SIM_BIN    PP_BUILD_ROOT "/sim/pacer-sim"
#define IMPORT_DIR PP_SOURCE_ROOT "/tests/data/import"
#define HF_DIR     PP_SOURCE_ROOT "/tests/data/hf"

/* Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh as it runs with its defaults
 * (8 GPUs, TP 1, CP 1, DTYPE fp8, mock data), its arrays expanded. */
static const char *const llama3_8b_fp8[] = {"torchrun",
                                            "--nproc_per_node",
                                            "8",
                                            "--nnodes",
                                            "1",
                                            "--node_rank",
                                            "0",
                                            "--master_addr",
                                            "localhost",
                                            "--master_port",
                                            "6000",
                                            "examples/classes/pretrain_gpt.py",
                                            "--use-mcore-models",
                                            "--num-layers",
                                            "32",
                                            "--hidden-size",
                                            "4096",
                                            "--ffn-hidden-size",
                                            "14336",
                                            "--num-attention-heads",
                                            "32",
                                            "--group-query-attention",
                                            "--num-query-groups",
                                            "8",
                                            "--kv-channels",
                                            "128",
                                            "--seq-length",
                                            "8192",
                                            "--max-position-embeddings",
                                            "8192",
                                            "--position-embedding-type",
                                            "rope",
                                            "--rotary-base",
                                            "1000000",
                                            "--rotary-percent",
                                            "1.0",
                                            "--attention-dropout",
                                            "0.0",
                                            "--hidden-dropout",
                                            "0.0",
                                            "--swiglu",
                                            "--init-method-std",
                                            "0.0134",
                                            "--attention-backend",
                                            "fused",
                                            "--apply-layernorm-1p",
                                            "--untie-embeddings-and-output-weights",
                                            "--disable-bias-linear",
                                            "--micro-batch-size",
                                            "1",
                                            "--global-batch-size",
                                            "128",
                                            "--train-samples",
                                            "1953125000",
                                            "--lr-decay-samples",
                                            "1949218748",
                                            "--lr-warmup-samples",
                                            "3906252",
                                            "--lr",
                                            "0.00015",
                                            "--min-lr",
                                            "0.00001",
                                            "--decoupled-lr",
                                            "5.0e-4",
                                            "--decoupled-min-lr",
                                            "4.5e-5",
                                            "--lr-decay-style",
                                            "cosine",
                                            "--clip-grad",
                                            "1.0",
                                            "--weight-decay",
                                            "0.1",
                                            "--adam-beta1",
                                            "0.9",
                                            "--adam-beta2",
                                            "0.95",
                                            "--bf16",
                                            "--grad-reduce-in-bf16",
                                            "--cross-entropy-loss-fusion",
                                            "--calculate-per-token-loss",
                                            "--manual-gc",
                                            "--empty-unused-memory-level",
                                            "1",
                                            "--exit-duration-in-mins",
                                            "235",
                                            "--use-distributed-optimizer",
                                            "--overlap-grad-reduce",
                                            "--overlap-param-gather",
                                            "--fp8-format",
                                            "hybrid",
                                            "--fp8-amax-history-len",
                                            "1024",
                                            "--fp8-amax-compute-algo",
                                            "max",
                                            "--fp8-param-gather",
                                            "--tensor-model-parallel-size",
                                            "1",
                                            "--context-parallel-size",
                                            "1",
                                            "--sequence-parallel",
                                            "--mock-data",
                                            "--tokenizer-type",
                                            "NullTokenizer",
                                            "--vocab-size",
                                            "128256",
                                            "--data-cache-path",
                                            "/work/benchmark_cache_llama3_8b_fp8",
                                            "--tiktoken-pattern",
                                            "v2",
                                            "--split",
                                            "'99,1,0'",
                                            "--no-create-attention-mask-in-dataloader",
                                            "--no-mmap-bin-files",
                                            "--num-workers",
                                            "1",
                                            "--log-interval",
                                            "1",
                                            "--eval-iters",
                                            "32",
                                            "--eval-interval",
                                            "100",
                                            "--save-interval",
                                            "1000",
                                            "--log-throughput",
                                            "--profile",
                                            "--profile-step-start",
                                            "4",
                                            "--profile-step-end",
                                            "6",
                                            "--ckpt-format",
                                            "torch_dist",
                                            "--distributed-timeout-minutes",
                                            "60",
                                            "--save",
                                            "checkpoints/llama3_8b_fp8",
                                            "--load",
                                            "checkpoints/llama3_8b_fp8",
                                            "--tensorboard-dir",
                                            "tensorboard_logs/llama3_8b_fp8",
                                            NULL};

/* Megatron-LM's examples/mixtral/train_mixtral_8x7b_distributed.sh (2 GPUs, mock data),
 * expanded. */
static const char *const mixtral_2gpu[] = {"torchrun",
                                           "--nproc_per_node",
                                           "2",
                                           "--nnodes",
                                           "1",
                                           "--node_rank",
                                           "0",
                                           "--master_addr",
                                           "localhost",
                                           "--master_port",
                                           "6000",
                                           "pretrain_gpt.py",
                                           "--use-mcore-models",
                                           "--disable-bias-linear",
                                           "--seq-length",
                                           "256",
                                           "--max-position-embeddings",
                                           "2048",
                                           "--num-layers",
                                           "2",
                                           "--hidden-size",
                                           "256",
                                           "--ffn-hidden-size",
                                           "896",
                                           "--num-attention-heads",
                                           "2",
                                           "--init-method-std",
                                           "0.01",
                                           "--attention-dropout",
                                           "0.0",
                                           "--hidden-dropout",
                                           "0.0",
                                           "--normalization",
                                           "RMSNorm",
                                           "--position-embedding-type",
                                           "rope",
                                           "--swiglu",
                                           "--untie-embeddings-and-output-weights",
                                           "--group-query-attention",
                                           "--num-query-groups",
                                           "2",
                                           "--no-masked-softmax-fusion",
                                           "--no-position-embedding",
                                           "--rotary-base",
                                           "1000000",
                                           "--num-experts",
                                           "2",
                                           "--moe-router-topk",
                                           "2",
                                           "--moe-router-load-balancing-type",
                                           "aux_loss",
                                           "--moe-aux-loss-coeff",
                                           "1e-2",
                                           "--moe-token-dispatcher-type",
                                           "alltoall",
                                           "--overlap-param-gather",
                                           "--overlap-grad-reduce",
                                           "--tokenizer-type",
                                           "Llama2Tokenizer",
                                           "--tokenizer-model",
                                           "/workspace/Megatron-LM/tokenizer.model",
                                           "--mock-data",
                                           "--split",
                                           "99990,8,2",
                                           "--micro-batch-size",
                                           "1",
                                           "--global-batch-size",
                                           "4",
                                           "--lr",
                                           "1e-4",
                                           "--train-iters",
                                           "7",
                                           "--min-lr",
                                           "1.0e-5",
                                           "--weight-decay",
                                           "0.1",
                                           "--clip-grad",
                                           "1.0",
                                           "--tensor-model-parallel-size",
                                           "1",
                                           "--pipeline-model-parallel-size",
                                           "1",
                                           "--expert-model-parallel-size",
                                           "2",
                                           "--use-distributed-optimizer",
                                           "--sequence-parallel",
                                           "--eval-iters",
                                           "10",
                                           "--no-load-optim",
                                           "--no-load-rng",
                                           NULL};

/* pacer-sim with @head, then @command after "--" when non-NULL. Returns the exit status. */
static int run_import(const char *const *head, const char *const *command, char **err) {
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_strv_builder_add(b, "import");
    g_strv_builder_addv(b, (const char **)head);
    if (command != NULL) {
        g_strv_builder_add(b, "--");
        g_strv_builder_addv(b, (const char **)command);
    }
    g_auto(GStrv) args = g_strv_builder_end(b);
    g_autofree char *out = NULL;
    return test_util_spawn(SIM_BIN, (const char *const *)args, &out, err);
}

/* pacer-sim SCENARIO --json --steps 2 without its "scenario" member (the file's path).
 * Returns: (transfer full). */
static char *simulate(const char *scenario) {
    const char *const args[] = {scenario, "--json", "--steps", "2", NULL};
    g_autofree char  *out = NULL, *err = NULL;
    ck_assert_msg(test_util_spawn(SIM_BIN, args, &out, &err) == 0, "%s: %s", scenario, err);
    g_autoptr(JsonParser) parser = json_parser_new();
    ck_assert(json_parser_load_from_data(parser, out, -1, NULL));
    JsonObject *root = json_node_get_object(json_parser_get_root(parser));
    json_object_remove_member(root, "scenario");
    ck_assert_int_ge((int)json_object_get_size(root), 10);
    return json_to_string(json_parser_get_root(parser), TRUE);
}

/* The imported scenario at @path simulates as the hand-written @hand does, to the byte. */
static void check_same_run(const char *path, const char *hand) {
    g_autofree char *hand_path = g_build_filename(IMPORT_DIR, hand, NULL);
    g_autofree char *a = simulate(path);
    g_autofree char *b = simulate(hand_path);
    ck_assert_str_eq(a, b);
}

/* GPT-3 175B from its script's command in a file: the flags without a key are in the file's
 * header and on stderr, with their reasons. */
START_TEST(test_megatron_gpt3_from_file) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "gpt3.ini", NULL);
    const char *const head[] = {"megatron",
                                "--gpus",
                                "1024",
                                "--set",
                                "hardware.preset=a100-sxm",
                                "--from",
                                IMPORT_DIR "/gpt3-175b-megatron.sh",
                                "--out",
                                out,
                                NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(head, NULL, &err), 0);
    check_same_run(out, "gpt3-175b.ini");
    g_autofree char  *text = test_util_read_file(out, NULL);
    const char *const listed[] = {"--rampup-batch-size 16 16 5859375: pacer simulates the full",
                                  "--train-iters 500000: pacer simulates training.steps",
                                  "--lr 6.0e-5: no pacer key",
                                  "--data-path /data/my-gpt3_00_text_document: no pacer key"};
    for (size_t i = 0; i < G_N_ELEMENTS(listed); i++) {
        ck_assert_msg(strstr(text, listed[i]) != NULL, "'%s' not in the file:\n%s", listed[i],
                      text);
        ck_assert_msg(strstr(err, listed[i]) != NULL, "'%s' not on stderr:\n%s", listed[i], err);
    }
    /* the launcher's own options are not the training script's */
    ck_assert_ptr_null(strstr(text, "--nproc_per_node"));
    ck_assert_ptr_null(strstr(text, "--num-layers"));
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

START_TEST(test_megatron_llama3_fp8) {
    g_autofree char *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char *out = g_build_filename(dir, "llama.ini", NULL);
    /* on H200s: on H100s pacer's memory model puts the run 1.2 GiB over the 80 GiB */
    const char *const head[] = {"megatron", "--gpus", "8", "--set", "hardware.preset=h200-sxm",
                                "--out",    out,      NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(head, llama3_8b_fp8, &err), 0);
    check_same_run(out, "llama3-8b-fp8.ini");
    ck_assert_ptr_nonnull(strstr(err, "--overlap-param-gather: no pacer key"));
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Imports the Mixtral command with @extra flags (NULL-terminated) on 2 GPUs into @out; *@err
 * the import's stderr. */
static void import_mixtral(const char *out, const char *const *extra, char **err) {
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_strv_builder_addv(b, (const char **)mixtral_2gpu);
    g_strv_builder_addv(b, (const char **)extra);
    g_auto(GStrv) command = g_strv_builder_end(b);
    const char *const head[] = {"megatron",
                                "--gpus",
                                "2",
                                "--set",
                                "model.vocab=32000",
                                "--set",
                                "hardware.preset=h100-sxm",
                                "--out",
                                out,
                                NULL};
    ck_assert_int_eq(run_import(head, (const char *const *)command, err), 0);
}

START_TEST(test_megatron_mixtral_moe) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "mixtral.ini", NULL);
    const char *const none[] = {NULL};
    g_autofree char  *err = NULL;
    import_mixtral(out, none, &err);
    check_same_run(out, "mixtral-2gpu.ini");
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Megatron's drop-and-pad dispatch maps to parallel.moe_capacity_factor; a capacity without
 * the padding keeps the host sync and is simulated dropless, said. */
START_TEST(test_megatron_moe_capacity) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "m.ini", NULL);
    const char *const padded[] = {"--moe-expert-capacity-factor", "0.75",
                                  "--moe-pad-expert-input-to-capacity", NULL};
    g_autofree char  *err = NULL;
    import_mixtral(out, padded, &err);
    g_autofree char *text = test_util_read_file(out, NULL);
    ck_assert_msg(strstr(text, "\nmoe_capacity_factor=0.75\n") != NULL, "%s", text);
    ck_assert_ptr_null(strstr(err, "capacity"));
    g_autofree char  *out2 = g_build_filename(dir, "m2.ini", NULL);
    const char *const unpadded[] = {"--moe-expert-capacity-factor", "0.75", NULL};
    g_autofree char  *err2 = NULL;
    import_mixtral(out2, unpadded, &err2);
    g_autofree char *text2 = test_util_read_file(out2, NULL);
    ck_assert_ptr_null(strstr(text2, "moe_capacity_factor"));
    ck_assert_msg(strstr(err2, "--moe-expert-capacity-factor 0.75: without "
                               "--moe-pad-expert-input-to-capacity") != NULL,
                  "%s", err2);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* The gradient buffer follows Megatron's arguments.py: fp32 for bf16 parameters (grad_bytes'
 * default, not written), bf16 with --grad-reduce-in-bf16, fp16 for fp16 parameters (the
 * default again) also under fp8, fp32 with --accumulate-allreduce-grads-in-fp32. */
START_TEST(test_megatron_grad_dtype) {
    g_autofree char *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    const struct {
        const char *flags[4];
        const char *precision, *grad_bytes; /* grad_bytes NULL: not written */
    } cases[] = {
        {{"--bf16", NULL}, "\nprecision=bf16\n", NULL},
        {{"--bf16", "--grad-reduce-in-bf16", NULL}, "\nprecision=bf16\n", "\ngrad_bytes=2\n"},
        {{"--fp16", NULL}, "\nprecision=fp16\n", NULL},
        {{"--fp16", "--fp8-format", "hybrid", NULL}, "\nprecision=fp8\n", "\ngrad_bytes=2\n"},
        {{"--fp16", "--accumulate-allreduce-grads-in-fp32", NULL},
         "\nprecision=fp16\n",
         "\ngrad_bytes=4\n"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *out = g_strdup_printf("%s/g%zu.ini", dir, i);
        g_autofree char *err = NULL;
        import_mixtral(out, cases[i].flags, &err);
        g_autofree char *text = test_util_read_file(out, NULL);
        ck_assert_msg(strstr(text, cases[i].precision) != NULL, "%zu:\n%s", i, text);
        if (cases[i].grad_bytes != NULL)
            ck_assert_msg(strstr(text, cases[i].grad_bytes) != NULL, "%zu:\n%s", i, text);
        else
            ck_assert_msg(strstr(text, "grad_bytes=") == NULL, "%zu:\n%s", i, text);
        /* each read, none listed */
        ck_assert_ptr_null(strstr(err, "--grad-reduce-in-bf16"));
        ck_assert_ptr_null(strstr(err, "--accumulate-allreduce-grads-in-fp32"));
        ck_assert_ptr_null(strstr(err, "--fp16"));
    }
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Megatron's memory flags: --no-bias-swiglu-fusion with --swiglu is model.swiglu_fusion =
 * false (without --swiglu it is named as ignored); the LM head is tied unless
 * --untie-embeddings-and-output-weights is given. */
START_TEST(test_megatron_memory_flags) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "mixtral.ini", NULL);
    const char *const extra[] = {"--no-bias-swiglu-fusion", NULL};
    g_autofree char  *err = NULL;
    import_mixtral(out, extra, &err); /* untied, with --swiglu */
    g_autofree char *text = test_util_read_file(out, NULL);
    ck_assert_msg(strstr(text, "\nswiglu_fusion=false\n") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "tie_embeddings") == NULL, "%s", text);
    ck_assert_msg(strstr(err, "--untie-embeddings") == NULL, "%s", err);

    g_autofree char  *gelu = g_build_filename(dir, "gelu.ini", NULL);
    const char *const head[] = {"megatron", "--gpus", "8", "--out", gelu, NULL};
    const char *const command[] = {"--num-layers",
                                   "2",
                                   "--hidden-size",
                                   "64",
                                   "--num-attention-heads",
                                   "4",
                                   "--seq-length",
                                   "32",
                                   "--vocab-size",
                                   "100",
                                   "--micro-batch-size",
                                   "1",
                                   "--global-batch-size",
                                   "8",
                                   "--no-bias-swiglu-fusion",
                                   NULL};
    g_autofree char  *err2 = NULL;
    ck_assert_int_eq(run_import(head, command, &err2), 0);
    g_autofree char *text2 = test_util_read_file(gelu, NULL);
    ck_assert_msg(strstr(text2, "\ntie_embeddings=true\n") != NULL, "%s", text2);
    ck_assert_msg(strstr(text2, "swiglu_fusion") == NULL, "%s", text2);
    ck_assert_msg(strstr(err2, "--no-bias-swiglu-fusion: read only with --swiglu") != NULL, "%s",
                  err2);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --tp-comm-overlap maps to parallel.tp_comm_overlap. */
START_TEST(test_megatron_tp_comm_overlap) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "tp.ini", NULL);
    const char *const extra[] = {"--tp-comm-overlap", NULL};
    g_autofree char  *err = NULL;
    import_mixtral(out, extra, &err);
    g_autofree char *text = test_util_read_file(out, NULL);
    ck_assert_msg(strstr(text, "\ntp_comm_overlap=true\n") != NULL, "%s", text);
    ck_assert_ptr_null(strstr(err, "--tp-comm-overlap"));
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --cp-comm-type a2a maps to parallel.context_comm = a2a, p2p to ring; allgather is listed
 * and simulated as the ring. */
START_TEST(test_megatron_cp_comm) {
    g_autofree char *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    const struct {
        const char *type, *key, *listed;
    } cases[] = {{"a2a", "\ncontext_comm=a2a\n", NULL},
                 {"p2p", "\ncontext_comm=ring\n", NULL},
                 {"allgather", NULL, "--cp-comm-type allgather: simulated as ring attention"}};
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char  *out = g_strdup_printf("%s/cp%zu.ini", dir, i);
        const char *const extra[] = {"--cp-comm-type", cases[i].type, NULL};
        g_autofree char  *err = NULL;
        import_mixtral(out, extra, &err);
        g_autofree char *text = test_util_read_file(out, NULL);
        if (cases[i].key != NULL)
            ck_assert_msg(strstr(text, cases[i].key) != NULL, "%s", text);
        else
            ck_assert_ptr_null(strstr(text, "context_comm="));
        if (cases[i].listed != NULL)
            ck_assert_msg(strstr(err, cases[i].listed) != NULL, "%s", err);
    }
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* NeMo's model.NAME=VALUE overrides map as the Megatron flags of the same names. */
START_TEST(test_nemo_overrides) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "nemo.ini", NULL);
    const char *const head[] = {"megatron", "--gpus", "1024", "--set", "hardware.preset=a100-sxm",
                                "--out",    out,      NULL};
    const char *const nemo[] = {"python",
                                "megatron_gpt_pretraining.py",
                                "trainer.num_nodes=128",
                                "trainer.precision=16-mixed", /* the script's --fp16 */
                                "model.num_layers=96",
                                "model.hidden_size=12288",
                                "model.num_attention_heads=96",
                                "model.encoder_seq_length=2048",
                                "model.micro_batch_size=1",
                                "model.global_batch_size=1536",
                                "model.tensor_model_parallel_size=8",
                                "model.pipeline_model_parallel_size=16",
                                "model.sequence_parallel=False",
                                "model.use_flash_attention=True",
                                "model.tokenizer.type=GPT2BPETokenizer",
                                NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(head, nemo, &err), 0);
    check_same_run(out, "gpt3-175b.ini");
    ck_assert_ptr_nonnull(strstr(err, "--num-nodes 128: no pacer key"));
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

START_TEST(test_deepspeed_zero3) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "ds.ini", NULL);
    const char *const head[] = {"deepspeed",   IMPORT_DIR "/deepspeed-zero3.json",
                                "--gpus",      "8",
                                "--hf-config", HF_DIR "/llama-3-8b.json",
                                "--set",       "model.seq_len=4096",
                                "--set",       "model.recompute=full",
                                "--set",       "hardware.preset=h100-sxm",
                                "--out",       out,
                                NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(head, NULL, &err), 0);
    check_same_run(out, "deepspeed-zero3.ini");
    ck_assert_ptr_nonnull(strstr(err, "optimizer: no pacer key"));
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Recomputation's method and layer count and torch FSDP2 map to their keys; the same run
 * written by hand simulates the same. */
START_TEST(test_megatron_recompute_fsdp2) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "r.ini", NULL);
    g_autofree char  *hand = g_build_filename(dir, "hand.ini", NULL);
    const char *const head[] = {"megatron", "--gpus", "16", "--set", "hardware.preset=h100-sxm",
                                "--out",    out,      NULL};
    const char *const command[] = {"pretrain_gpt.py",
                                   "--num-layers",
                                   "16",
                                   "--hidden-size",
                                   "2048",
                                   "--num-attention-heads",
                                   "16",
                                   "--seq-length",
                                   "4096",
                                   "--vocab-size",
                                   "32000",
                                   "--micro-batch-size",
                                   "2",
                                   "--global-batch-size",
                                   "64",
                                   "--pipeline-model-parallel-size",
                                   "2",
                                   "--tensor-model-parallel-size",
                                   "2",
                                   "--recompute-granularity",
                                   "full",
                                   "--recompute-method",
                                   "block",
                                   "--recompute-num-layers",
                                   "3",
                                   "--use-torch-fsdp2",
                                   NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(head, command, &err), 0);
    g_autofree char  *text = test_util_read_file(out, NULL);
    const char *const keys[] = {"recompute=full\n",         "recompute_method=block\n",
                                "recompute_num_layers=3\n", "fsdp=true\n",
                                "fsdp_impl=fsdp2\n",        "data=4\n",
                                "microbatches=8\n"};
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++)
        ck_assert_msg(strstr(text, keys[i]) != NULL, "'%s' not in:\n%s", keys[i], text);
    ck_assert(g_file_set_contents(hand,
                                  "[model]\nlayers = 16\nhidden = 2048\nheads = 16\n"
                                  "seq_len = 4096\nvocab = 32000\nrecompute = full\n"
                                  "recompute_method = block\nrecompute_num_layers = 3\n"
                                  "[hardware]\npreset = h100-sxm\n"
                                  "[pipeline]\nschedule = 1f1b\nstages = 2\nmicrobatches = 8\n"
                                  "microbatch_size = 2\n"
                                  "[parallel]\ndata = 4\ntensor = 2\nfsdp = true\n"
                                  "fsdp_impl = fsdp2\n"
                                  "[training]\nglobal_batch = 64\n",
                                  -1, NULL));
    g_autofree char *a = simulate(out);
    g_autofree char *b = simulate(hand);
    ck_assert_str_eq(a, b);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* --recompute-modules after selective granularity: the names as model.recompute_modules. */
START_TEST(test_megatron_recompute_modules) {
    g_autofree char  *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char  *out = g_build_filename(dir, "r.ini", NULL);
    const char *const head[] = {"megatron", "--gpus", "8", "--set", "hardware.preset=h100-sxm",
                                "--out",    out,      NULL};
    const char *const command[] = {"pretrain_gpt.py",
                                   "--num-layers",
                                   "4",
                                   "--hidden-size",
                                   "1024",
                                   "--num-attention-heads",
                                   "16",
                                   "--seq-length",
                                   "2048",
                                   "--vocab-size",
                                   "32000",
                                   "--micro-batch-size",
                                   "1",
                                   "--global-batch-size",
                                   "8",
                                   "--recompute-granularity",
                                   "selective",
                                   "--recompute-modules",
                                   "core_attn",
                                   "mlp",
                                   NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(head, command, &err), 0);
    g_autofree char *text = test_util_read_file(out, NULL);
    ck_assert_msg(strstr(text, "recompute=selective\n") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "recompute_modules=core_attn,mlp\n") != NULL, "%s", text);
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* An existing file is never replaced without --force; with it, atomically (no temporary left
 * behind either way). */
START_TEST(test_out_never_overwrites) {
    g_autofree char *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char *out = g_build_filename(dir, "mine.ini", NULL);
    ck_assert(g_file_set_contents(out, "# the user's own file\n", -1, NULL));
    const char *const head[] = {"megatron", "--gpus", "8", "--out", out, NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(head, llama3_8b_fp8, &err), 1);
    ck_assert_ptr_nonnull(strstr(err, "exists; give --force to replace it"));
    g_autofree char *kept = test_util_read_file(out, NULL);
    ck_assert_str_eq(kept, "# the user's own file\n");
    g_autofree char *listing = test_util_list_dir(dir);
    ck_assert_str_eq(listing, "mine.ini");

    const char *const forced[] = {"megatron", "--gpus", "8", "--out", out, "--force", NULL};
    g_autofree char  *err2 = NULL;
    ck_assert_int_eq(run_import(forced, llama3_8b_fp8, &err2), 0);
    g_autofree char *text = test_util_read_file(out, NULL);
    ck_assert_ptr_nonnull(strstr(text, "[model]"));
    ck_assert_ptr_nonnull(strstr(text, "No [hardware]"));
    g_autofree char *listing2 = test_util_list_dir(dir);
    ck_assert_str_eq(listing2, "mine.ini");
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

/* Values that make no sense: each error names the flag (or field) and what would be valid. */
static const struct {
    const char *gpus;
    const char *args[8];
    const char *message;
} bad_commands[] = {
    {"100",
     {"--tensor-model-parallel-size", "8", NULL},
     "--gpus 100 is not a multiple of tensor 8"},
    {"8", {"--num-layers", "thirty", NULL}, "--num-layers 'thirty': expected a whole number"},
    {"8", {"--num-layers", "-3", NULL}, "--num-layers '-3': expected a whole number"},
    {"8",
     {"--recompute-granularity", "most", NULL},
     "--recompute-granularity 'most': expected one of full, selective"},
    {"8",
     {"--recompute-granularity", "full", "--recompute-method", "even", NULL},
     "--recompute-method 'even': expected one of uniform, block"},
    {"8", {"--fp8-format", "e5m2", NULL}, "--fp8-format 'e5m2': expected one of e4m3, hybrid"},
    {"8",
     {"--global-batch-size", "12", NULL},
     "global batch 12 is not a multiple of the micro-batch size 1 x 8"},
    {"8", {"--moe-token-dispatcher-type", "flex", NULL}, "expected --moe-enable-deepep"},
    {"8", {"--cp-comm-type", "ring", NULL}, "--cp-comm-type 'ring': expected p2p, a2a"},
    {"8",
     {"--moe-expert-capacity-factor", "-1", NULL},
     "--moe-expert-capacity-factor '-1': expected a number above 0"},
    {"8",
     {"--sequence-parallel", "yes", NULL},
     "--sequence-parallel 'yes': the flag takes no value"},
};

START_TEST(test_bad_commands) {
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    const char *const base[] = {"--num-layers",
                                "2",
                                "--hidden-size",
                                "64",
                                "--num-attention-heads",
                                "4",
                                "--seq-length",
                                "128",
                                "--vocab-size",
                                "1000",
                                "--global-batch-size",
                                "16",
                                NULL};
    g_strv_builder_addv(b, (const char **)base);
    g_strv_builder_addv(b, (const char **)bad_commands[_i].args);
    g_auto(GStrv) command = g_strv_builder_end(b);
    const char *const head[] = {"megatron", "--gpus", bad_commands[_i].gpus, NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(head, (const char *const *)command, &err), 1);
    ck_assert_msg(strstr(err, bad_commands[_i].message) != NULL, "'%s' not in: %s",
                  bad_commands[_i].message, err);
}
END_TEST

/* Bad files: an unexpanded shell variable, a ZeRO stage that does not exist, a batch that
 * does not add up, and usage errors. */
START_TEST(test_bad_files) {
    g_autofree char *dir = test_util_tmp_dir_new("pacer-import-XXXXXX");
    g_autofree char *cmd = g_build_filename(dir, "run.sh", NULL);
    ck_assert(g_file_set_contents(cmd, "torchrun pretrain_gpt.py \\\n  ${GPT_MODEL_ARGS[@]}\n", -1,
                                  NULL));
    const char *const from[] = {"megatron", "--gpus", "8", "--from", cmd, NULL};
    g_autofree char  *err = NULL;
    ck_assert_int_eq(run_import(from, NULL, &err), 1);
    ck_assert_ptr_nonnull(strstr(err, "unexpanded shell variable"));

    g_autofree char *json = g_build_filename(dir, "ds.json", NULL);
    ck_assert(g_file_set_contents(json,
                                  "{\"train_batch_size\": 64, \"zero_optimization\": "
                                  "{\"stage\": 5}}",
                                  -1, NULL));
    const char *const ds[] = {"deepspeed", json, "--gpus", "8", NULL};
    g_autofree char  *err2 = NULL;
    ck_assert_int_eq(run_import(ds, NULL, &err2), 1);
    ck_assert_ptr_nonnull(strstr(err2, "zero_optimization.stage = 5: expected 0, 1, 2 or 3"));

    ck_assert(g_file_set_contents(json,
                                  "{\"train_batch_size\": 64, "
                                  "\"train_micro_batch_size_per_gpu\": 2, "
                                  "\"gradient_accumulation_steps\": 2}",
                                  -1, NULL));
    g_autofree char *err3 = NULL;
    ck_assert_int_eq(run_import(ds, NULL, &err3), 1);
    ck_assert_ptr_nonnull(strstr(err3, "train_batch_size 64 is not micro-batch 2 x "
                                       "gradient_accumulation_steps 2 x 8"));

    /* DeepSpeed's gradient accumulation dtype: fp32 is 4 bytes, a name it does not know fails */
    const char *const ds_out[] = {
        "deepspeed",         json, "--gpus", "8", "--out", cmd, "--force", "--set",
        "model.preset=gpt2", NULL};
    ck_assert(g_file_set_contents(json,
                                  "{\"train_batch_size\": 64, \"bf16\": {\"enabled\": true}, "
                                  "\"data_types\": {\"grad_accum_dtype\": \"fp32\"}}",
                                  -1, NULL));
    g_autofree char *err6 = NULL;
    ck_assert_int_eq(run_import(ds_out, NULL, &err6), 0);
    g_autofree char *text6 = test_util_read_file(cmd, NULL);
    ck_assert_msg(strstr(text6, "\ngrad_bytes=4\n") != NULL, "%s", text6);
    ck_assert(g_file_set_contents(json,
                                  "{\"train_batch_size\": 64, \"data_types\": "
                                  "{\"grad_accum_dtype\": \"fp64\"}}",
                                  -1, NULL));
    g_autofree char *err7 = NULL;
    ck_assert_int_eq(run_import(ds_out, NULL, &err7), 1);
    ck_assert_ptr_nonnull(
        strstr(err7, "data_types.grad_accum_dtype = 'fp64': expected fp32, fp16 or bf16"));

    const char *const none[] = {"megatron", "--gpus", "8", NULL};
    g_autofree char  *err4 = NULL;
    ck_assert_int_eq(run_import(none, NULL, &err4), 2);
    ck_assert_ptr_nonnull(strstr(err4, "give the command after -- or in --from FILE"));
    const char *const no_gpus[] = {"megatron", NULL};
    g_autofree char  *err5 = NULL;
    ck_assert_int_eq(run_import(no_gpus, llama3_8b_fp8, &err5), 2);
    ck_assert_ptr_nonnull(strstr(err5, "--gpus N"));
    ck_assert(test_util_tmp_dir_remove(dir));
}
END_TEST

static Suite *import_suite(void) {
    Suite *s = suite_create("sim-import");
    TCase *tc = tcase_create("import");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_megatron_gpt3_from_file);
    tcase_add_test(tc, test_megatron_llama3_fp8);
    tcase_add_test(tc, test_megatron_mixtral_moe);
    tcase_add_test(tc, test_megatron_moe_capacity);
    tcase_add_test(tc, test_megatron_cp_comm);
    tcase_add_test(tc, test_megatron_tp_comm_overlap);
    tcase_add_test(tc, test_megatron_grad_dtype);
    tcase_add_test(tc, test_megatron_memory_flags);
    tcase_add_test(tc, test_nemo_overrides);
    tcase_add_test(tc, test_deepspeed_zero3);
    tcase_add_test(tc, test_megatron_recompute_fsdp2);
    tcase_add_test(tc, test_megatron_recompute_modules);
    tcase_add_test(tc, test_out_never_overwrites);
    tcase_add_loop_test(tc, test_bad_commands, 0, (int)G_N_ELEMENTS(bad_commands));
    tcase_add_test(tc, test_bad_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(import_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
