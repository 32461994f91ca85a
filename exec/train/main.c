/* SPDX-License-Identifier: MIT
 * main.c: pacer-train, GPT-2 pretraining that replays a pipeline schedule on CPU threads or
 * CUDA devices (run.backend), or with one process per stage when an MPI launcher starts
 * several (mpirun -np N).
 *   pacer-train SCENARIO [--set section.key=value]... [--out DIR] [--resume DIR]
 *               [--overwrite] [--stop-at STEP] [--dynamic] [--quiet]
 *   pacer-train evaluate --checkpoint PATH --text FILE [--heads H] [--seq-len T] [--json]
 * Builds the token shards on first use, trains, and writes DIR/log.csv, ops.csv, scenario.ini
 * and DIR/checkpoints/step-NNNNNNNN.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "data-bpe.h"
#include "data-corpus.h"
#include "exec-evaluate.h"
#include "exec-train.h"
#include "pp-json.h"
#include "pp-config.h"
#if PP_HAVE_MPI
#include "exec-comm-mpi.h"
#endif

/* The least deadline of start-up, in seconds: the launcher starts the ranks one after
 * another, and MPI's start-up and reading the vocabulary and the shards take seconds each on
 * a busy machine. */
#define TRAIN_STARTUP_TIMEOUT_MIN_S 10.0

static int train_usage_error(GOptionContext *ctx, const char *message) {
    g_autofree char *help = g_option_context_get_help(ctx, TRUE, NULL);
    fprintf(stderr, "pacer-train: %s\n\n%s", message, help);
    return 2;
}

/* Prints @error ("rank R: " first in a multi-process run). */
static void train_print_error(const ExecComm *comm, const GError *error) {
    if (comm)
        fprintf(stderr, "pacer-train: rank %d: %s\n", exec_comm_rank(comm), error->message);
    else
        fprintf(stderr, "pacer-train: %s\n", error->message);
}

/* Under an MPI launcher with several processes, starts the process group (one process per
 * pipeline stage) into *@comm; leaves it NULL for one process. @timeout_s is the deadline of
 * MPI's start-up and of every wait until training sets the agreed scenario's. */
static gboolean train_comm_start(int *argc, char ***argv, double timeout_s, ExecComm **comm,
                                 GError **error) {
#if PP_HAVE_MPI
    return exec_comm_mpi_new(argc, argv, timeout_s, comm, error);
#else
    (void)argc, (void)argv, (void)timeout_s, (void)comm;
    /* Without MPI every process would train alone and write the same files. */
    if (exec_comm_launched_size() < 2)
        return TRUE;
    g_set_error(error, EXEC_ERROR, EXEC_ERROR_COMM,
                "an MPI launcher started %" G_GINT64_FORMAT " processes, but this build has no "
                "MPI: install libopenmpi-dev (scripts/setup) and rebuild (meson -Dmpi=enabled), "
                "or run one process",
                exec_comm_launched_size());
    return FALSE;
#endif
}

/* Everything from the options to the summary; starts the process group into *@comm. Returns
 * 0, or 1 with @error set (2: a usage error, @error set as well). In a multi-process run
 * every rank runs it, and every failure before training is agreed on (exec_comm_agree()), so
 * that all ranks stop together. */
static int train_run(ExecComm **comm, int argc, char **argv, GError **error) {
    g_auto(GStrv) sets = NULL;
    g_autofree char *out = NULL, *resume = NULL;
    gboolean         dynamic = FALSE, quiet = FALSE, overwrite = FALSE;
    int              stop_at = 0;
    GOptionEntry     entries[] = {
            {"set", 0, 0, G_OPTION_ARG_STRING_ARRAY, &sets, "Override a scenario key (repeatable)",
             "SECTION.KEY=VALUE"},
            {"out", 'o', 0, G_OPTION_ARG_FILENAME, &out,
             "Write log.csv, ops.csv, scenario.ini and checkpoints/ to DIR", "DIR"},
            {"resume", 0, 0, G_OPTION_ARG_FILENAME, &resume,
             "Continue from the newest complete checkpoint of the run folder DIR, or from the "
                 "checkpoint DIR/checkpoints/step-NNNNNNNN",
             "DIR"},
            {"overwrite", 0, 0, G_OPTION_ARG_NONE, &overwrite,
             "Start over in an --out DIR that holds another run: first remove its log.csv, "
                 "ops.csv, scenario.ini, memory.csv and checkpoint units (nothing else)",
             NULL},
            {"stop-at", 0, 0, G_OPTION_ARG_INT, &stop_at,
             "Stop after STEP steps, checkpointing there as at the end (resume later)", "STEP"},
            {"dynamic", 0, 0, G_OPTION_ARG_NONE, &dynamic,
             "Run PACI's backpressure policy live instead of replaying the program", NULL},
            {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet,
             "Print only the final summary (also when CI=true)", NULL},
            {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "SCENARIO - train GPT-2 with a pipeline schedule (run.backend: CPU threads or CUDA), or "
        "one process per stage under mpirun\n"
        "       pacer-train evaluate --checkpoint PATH --text FILE [--heads H] [--seq-len T] "
        "[--json]");
    g_option_context_add_main_entries(ctx, entries, NULL);
    int status = 2;
    if (g_option_context_parse(ctx, &argc, &argv, error) && argc != 2)
        g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                            "expected exactly one SCENARIO file");
    else if (*error == NULL && stop_at < 0)
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--stop-at %d: give a step >= 1 (0: train every step)", stop_at);
    else if (*error == NULL && overwrite && out == NULL)
        g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                            "--overwrite needs --out DIR: the folder to start over in");
    g_autoptr(PpScenario) scenario = NULL;
    if (*error == NULL) {
        status = 1;
        scenario = pp_scenario_load(argv[1], (const char *const *)sets, error);
    }
    /* The group starts once this rank has read the scenario, so that MPI's start-up and the
     * agreements on the scenario and the data already wait run.comm_timeout_s as this rank
     * read it (every rank reads the same file; the default when it could not be read), but
     * at least TRAIN_STARTUP_TIMEOUT_MIN_S, until the training loop sets the agreed value. */
    double  timeout_s = scenario ? scenario->run.comm_timeout_s : EXEC_COMM_TIMEOUT_DEFAULT_S;
    GError *start = NULL;
    if (!train_comm_start(&argc, &argv, MAX(timeout_s, TRAIN_STARTUP_TIMEOUT_MIN_S), comm,
                          &start)) {
        g_clear_error(error);
        g_propagate_error(error, start);
        return 1;
    }
    gboolean root = exec_comm_rank(*comm) == 0;
    if (status == 2 && root)
        train_usage_error(ctx, (*error)->message);
    DataCorpusParams data;
    data_params_init(&data);
    g_autofree char *train_path = NULL, *val_path = NULL;
    g_autoptr(DataBpe) bpe = NULL;
    if (scenario) {
        data.cache_dir = scenario->data.cache_dir;
        data.paths = (const char *const *)scenario->data.paths;
        data.val_fraction = scenario->data.val_fraction;
    }
    /* Rank 0 builds the token shards when the cache lacks them; the others then find them. */
    for (int pass = 0; pass < 2; pass++) {
        if (scenario && *error == NULL && root == (pass == 0) &&
            data_prepare_default(&data, &train_path, &val_path, error))
            bpe = data_bpe_new_from_cache(data.cache_dir, error);
        if (!exec_comm_agree(*comm, pass == 0 ? "loading the scenario" : "opening the data", error))
            return status;
    }
    ExecTrainParams params = {
        .scenario = scenario,
        .train_path = train_path,
        .val_path = val_path,
        .vocab_fingerprint = data_bpe_fingerprint(bpe),
        .out_dir = out,
        .resume = resume,
        .overwrite = overwrite,
        .stop_at = stop_at,
        .dynamic = dynamic || g_strcmp0(scenario->pipeline.mode, "dynamic") == 0,
        .progress = exec_progress_mode_detect(stdout, quiet),
        .comm = *comm,
    };
    ExecTrainSummary sum;
    if (!exec_train_run(&params, &sum, error))
        return 1;
    if (!root)
        return 0;
    printf("pacer-train: %s, %d steps, %" G_GINT64_FORMAT " tokens, train loss %.4f, "
           "val loss %.4f (perplexity %.2f), %.0f tokens/s, %.1f s, %d skipped updates\n",
           scenario->pipeline.schedule, sum.steps, sum.tokens, sum.train_loss, sum.val_loss,
           exp(sum.val_loss), sum.tokens_per_s, sum.wall_s, sum.n_skipped);
    if (sum.actual_bytes >= 0)
        printf("pacer-train: device memory %.3f GiB allocated over %d stages, %.3f GiB "
               "predicted by the memory model (memory.csv with --out)\n",
               (double)sum.actual_bytes / (1 << 30), scenario->pipeline.stages,
               (double)sum.predicted_bytes / (1 << 30));
    return 0;
}

static int train_main(int argc, char **argv) {
    ExecComm *comm = NULL;
    GError   *error = NULL;
    int       status = train_run(&comm, argc, argv, &error);
    if (error && (status != 2 || comm))
        train_print_error(comm, error);
    /* Ends the process group: a failure the ranks did not agree on aborts the job. */
    exec_comm_finish(comm, error);
    g_clear_error(&error);
    return status;
}

static int evaluate_main(int argc, char **argv) {
    g_autofree char *checkpoint = NULL, *text = NULL;
    int              heads = 0, seq_len = 0;
    gboolean         json = FALSE;
    GOptionEntry     entries[] = {
            {"checkpoint", 'c', 0, G_OPTION_ARG_FILENAME, &checkpoint,
             "Safetensors file (pacer's or Hugging Face GPT-2's), checkpoint folder "
                 "(RUN/checkpoints/step-NNNNNNNN) or run folder (its newest complete checkpoint)",
             "PATH"},
            {"text", 't', 0, G_OPTION_ARG_FILENAME, &text, "Text file to evaluate on", "FILE"},
            {"heads", 0, 0, G_OPTION_ARG_INT, &heads,
             "Attention heads (default: the checkpoint's n_head)", "H"},
            {"seq-len", 0, 0, G_OPTION_ARG_INT, &seq_len,
             "Window length (default: the checkpoint's positions)", "T"},
            {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object: loss, tokens", NULL},
            {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("- mean next-token loss of a checkpoint on a text");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error))
        return train_usage_error(ctx, error->message);
    if (argc != 1 || !checkpoint || !text || heads < 0 || seq_len < 0)
        return train_usage_error(ctx, "evaluate needs --checkpoint PATH and --text FILE");
    /* Which unit and why others were skipped go to stderr: stdout may be --json. */
    g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *model = exec_evaluate_resolve(checkpoint, notes, &error);
    for (guint i = 0; i < notes->len; i++)
        fprintf(stderr, "pacer-train: %s\n", (const char *)g_ptr_array_index(notes, i));
    double  loss;
    int64_t tokens;
    if (!model || !exec_evaluate(model, text, heads, seq_len, &loss, &tokens, &error)) {
        fprintf(stderr, "pacer-train: %s\n", error->message);
        return 1;
    }
    if (json) {
        /* the project's JSON number writer (common/pp-json.h): any double is valid JSON */
        g_autoptr(GString) line = g_string_new("{\"loss\": ");
        pp_json_append_double(line, loss);
        g_string_append_printf(line, ", \"tokens\": %" G_GINT64_FORMAT "}", tokens);
        printf("%s\n", line->str);
    } else
        printf("loss %.6f (perplexity %.3f) over %" G_GINT64_FORMAT " tokens\n", loss, exp(loss),
               tokens);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "evaluate") == 0)
        return evaluate_main(argc - 1, argv + 1);
    return train_main(argc, argv);
}
