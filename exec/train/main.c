/* SPDX-License-Identifier: MIT
 * main.c: pacer-train, GPT-2 pretraining that replays a pipeline schedule on CPU threads or
 * CUDA devices (run.backend), or with one process per stage when an MPI launcher starts
 * several (mpirun -np N).
 *   pacer-train SCENARIO [--set section.key=value]... [--out DIR] [--resume DIR]
 *               [--overwrite] [--stop-at STEP] [--dynamic] [--quiet]
 *   pacer-train evaluate --checkpoint PATH [--text FILE] [--heads H] [--seq-len T] [--json]
 * (without --text: the run's validation split, the windows training validates on). Builds the token
 * shards on first use, trains, and writes DIR/log.csv, ops.csv, scenario.ini and
 * DIR/checkpoints/step-NNNNNNNN. Ctrl-C (SIGINT) or SIGTERM in a single-process run stops it
 * cleanly (exec-interrupt.h), prints the command that resumes it and exits 128 + signal.
 */
#include <math.h>
#include <signal.h>
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

/* @arg as a shell word: as it is when it holds only characters no shell treats specially,
 * else single-quoted. Returns: (transfer full). */
static char *train_shell_word(const char *arg) {
    gboolean plain = arg[0] != '\0';
    for (const char *c = arg; *c && plain; c++)
        plain = g_ascii_isalnum(*c) || strchr("_./=,:+@%-", *c) != NULL;
    return plain ? g_strdup(arg) : g_shell_quote(arg);
}

/* The command of @argv (as it was given) without --overwrite and, when @resume is set,
 * without its --resume and with --resume @resume at the end. Returns: (transfer full). */
static char *train_command_with(const char *const *argv, const char *resume) {
    GString *cmd = g_string_new(NULL);
    for (int i = 0; argv[i]; i++) {
        if (strcmp(argv[i], "--overwrite") == 0 ||
            (resume && g_str_has_prefix(argv[i], "--resume="))) /* the value goes with it */
            continue;
        if (resume && strcmp(argv[i], "--resume") == 0) {
            i += argv[i + 1] != NULL; /* and its value */
            continue;
        }
        g_autofree char *word = train_shell_word(argv[i]);
        g_string_append_printf(cmd, "%s%s", cmd->len ? " " : "", word);
    }
    if (resume) {
        g_autofree char *word = train_shell_word(resume);
        g_string_append_printf(cmd, " --resume %s", word);
    }
    return g_string_free(cmd, FALSE);
}

/* The one line after an interrupted run (@signum): the steps done, and the command that
 * continues it: --resume of the --out folder when this run wrote a checkpoint there, the same
 * command when it resumed one and wrote none, else the command that starts over. */
static void train_print_interrupted(const char *const *argv, int signum, const char *out,
                                    const char *resume, const ExecTrainSummary *sum,
                                    int32_t total) {
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    if (out && sum->saved_step > 0) {
        g_autofree char *cmd = train_command_with(argv, out);
        fprintf(stderr,
                "pacer-train: interrupted by %s: log.csv holds %d of %d steps, ops.csv every op "
                "that ran; resume from the checkpoint of step %d with: %s\n",
                name, sum->steps, total, sum->saved_step, cmd);
    } else if (resume) {
        g_autofree char *cmd = train_command_with(argv, NULL);
        fprintf(stderr,
                "pacer-train: interrupted by %s: log.csv holds %d of %d steps, no new "
                "checkpoint written; resume as before with: %s\n",
                name, sum->steps, total, cmd);
    } else {
        g_autofree char *cmd = train_command_with(argv, NULL);
        fprintf(stderr,
                "pacer-train: interrupted by %s: log.csv holds %d of %d steps, no checkpoint "
                "written (run.checkpoint_every = N writes one every N steps); start over with: "
                "%s%s\n",
                name, sum->steps, total, cmd, out ? " --overwrite" : "");
    }
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
static int train_run(ExecComm **comm, ExecInterrupt *interrupt, int argc, char **argv,
                     GError **error) {
    /* the command as given, for the line after an interrupt (parsing removes the options) */
    g_auto(GStrv) command = g_strdupv(argv);
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
        "       pacer-train evaluate --checkpoint PATH [--text FILE] [--heads H] [--seq-len T] "
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
        .interrupt = interrupt, /* NULL under an MPI launcher */
    };
    ExecTrainSummary sum = {0};
    if (!exec_train_run(&params, &sum, error)) {
        int signum = exec_interrupt_signal(interrupt);
        if (signum == 0 || !g_error_matches(*error, EXEC_ERROR, EXEC_ERROR_INTERRUPTED))
            return 1;
        train_print_interrupted((const char *const *)command, signum, out, resume, &sum,
                                scenario->training.steps);
        g_clear_error(error); /* said above, in its place */
        return 128 + signum;
    }
    if (!root)
        return 0;
    /* No validation is due before the run's end or run.eval_every (--stop-at, eval_batches 0). */
    g_autofree char *val = isnan(sum.val_loss) ? g_strdup("no validation run in this invocation")
                                               : g_strdup_printf("val loss %.4f (perplexity %.2f)",
                                                                 sum.val_loss, exp(sum.val_loss));
    printf("pacer-train: %s, %d steps, %" G_GINT64_FORMAT " tokens, train loss %.4f, %s, "
           "%.0f tokens/s, %.1f s, %d skipped updates\n",
           scenario->pipeline.schedule, sum.steps, sum.tokens, sum.train_loss, val,
           sum.tokens_per_s, sum.wall_s, sum.n_skipped);
    if (sum.actual_bytes >= 0) {
        g_autofree char *replicas = scenario->parallel.data > 1
                                        ? g_strdup_printf(" x %d replicas", scenario->parallel.data)
                                        : g_strdup("");
        printf("pacer-train: memory %.3f GiB allocated over %d stages%s, %.3f GiB predicted by "
               "the memory model (memory.csv with --out)\n",
               (double)sum.actual_bytes / (1 << 30), scenario->pipeline.stages, replicas,
               (double)sum.predicted_bytes / (1 << 30));
    }
    return 0;
}

static int train_main(int argc, char **argv) {
    ExecComm *comm = NULL;
    GError   *error = NULL;
    /* Under an MPI launcher the launcher handles the signals and ends the job, as before. */
    g_autoptr(ExecInterrupt) interrupt =
        exec_comm_launched_size() < 2 ? exec_interrupt_new() : NULL;
    int status = train_run(&comm, interrupt, argc, argv, &error);
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
            {"text", 't', 0, G_OPTION_ARG_FILENAME, &text,
             "Text file to evaluate on (default: the run's validation split, the windows "
                 "training validates on; needs the checkpoint's run folder)",
             "FILE"},
            {"heads", 0, 0, G_OPTION_ARG_INT, &heads,
             "Attention heads (default: the checkpoint's n_head)", "H"},
            {"seq-len", 0, 0, G_OPTION_ARG_INT, &seq_len,
             "Window length (default: the checkpoint's positions)", "T"},
            {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object: loss, tokens", NULL},
            {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("- mean next-token loss of a checkpoint on a text or on its run's "
                             "validation split");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error))
        return train_usage_error(ctx, error->message);
    if (argc != 1 || !checkpoint || heads < 0 || seq_len < 0)
        return train_usage_error(ctx, "evaluate needs --checkpoint PATH (and optionally --text "
                                      "FILE; --heads and --seq-len >= 0)");
    /* Which unit and why others were skipped go to stderr: stdout may be --json. */
    g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *model = exec_evaluate_resolve(checkpoint, notes, &error);
    for (guint i = 0; i < notes->len; i++)
        fprintf(stderr, "pacer-train: %s\n", (const char *)g_ptr_array_index(notes, i));
    double           loss;
    int64_t          tokens;
    g_autofree char *scenario = NULL, *what = NULL;
    gboolean         ok = model != NULL;
    if (ok && text)
        ok = exec_evaluate(model, text, heads, seq_len, &loss, &tokens, &error);
    else if (ok) {
        ok = (scenario = exec_evaluate_run_scenario(checkpoint, &error)) != NULL &&
             exec_evaluate_val(model, scenario, heads, seq_len, &loss, &tokens, &what, &error);
        if (what)
            fprintf(stderr, "pacer-train: on %s\n", what);
    }
    if (!ok) {
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

/* GLogFunc for GLib's fatal errors: a thread that cannot be created (g_thread_new() of
 * pacer's workers and watchers, or GLib's own worker thread) ends the process with a message
 * saying why and exit status 1, not GLib's error and SIGTRAP; any other goes to GLib. */
static void train_on_glib_error(const gchar *domain, GLogLevelFlags level, const gchar *message,
                                gpointer user_data) {
    if (g_str_has_prefix(message, "creating thread")) {
        fprintf(stderr,
                "pacer-train: cannot start a thread (%s): the limit on processes and threads "
                "(ulimit -u), on memory (ulimit -v, each thread's stack is ulimit -s) or the "
                "system's is reached; lower run.threads or the stages per process, or raise the "
                "limit\n",
                message);
        fflush(stdout);
        _exit(1);
    }
    g_log_default_handler(domain, level, message, user_data);
}

int main(int argc, char **argv) {
    g_log_set_handler("GLib", G_LOG_LEVEL_ERROR | G_LOG_FLAG_FATAL, train_on_glib_error, NULL);
    if (argc > 1 && strcmp(argv[1], "evaluate") == 0)
        return evaluate_main(argc - 1, argv + 1);
    return train_main(argc, argv);
}
