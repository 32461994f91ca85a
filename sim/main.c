/* SPDX-License-Identifier: MIT
 * main.c: the pacer-sim command line. `pacer-sim SCENARIO` simulates one scenario and prints
 * a summary (or JSON, or an --out directory of CSV/trace files); `compare`, `sweep`, `replay`,
 * `plan`, `calibrate`, `tta` and `schedules` are subcommands. Exit status: 0 success, 1 bad
 * input (one line on stderr "pacer-sim: FILE: message"), 2 usage errors.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-calibrate.h"
#include "sim-import.h"
#include "sim-json.h"
#include "sim-main.h"
#include "sim-plan.h"
#include "sim-replay.h"
#include "sim-report.h"
#include "sim-sweep.h"
#include "sim-tta.h"

#define SIM_MAIN_DEFAULT_SCHEDULES "1f1b,interleaved,zb-2p,paci"
#define SIM_MAIN_PLAN_SCHEDULES    "1f1b,interleaved,zb-v,dualpipe-v,paci"
#define SIM_MAIN_PLAN_ZERO         "1,3"

/* --steps was not given (GOption leaves the initial value alone). */
#define SIM_MAIN_STEPS_UNSET G_MININT

/* The --steps option of the commands that simulate a scenario, filling the gint @steps. */
#define SIM_MAIN_OPTION_STEPS(steps)                                                               \
    { "steps", 'n', 0, G_OPTION_ARG_INT, (steps), "Simulate N optimizer steps", "N" }

/* The --schedules option of compare and plan, filling the string @schedules; @fallback is the
 * default list (a string literal). */
#define SIM_MAIN_OPTION_SCHEDULES(schedules, fallback)                                             \
    {                                                                                              \
        "schedules", 'S', 0, G_OPTION_ARG_STRING, (schedules),                                     \
            "Comma-separated schedules (default " fallback ")", "A,B,..."                          \
    }

/* Options of every command; each command registers the ones it takes. */
typedef struct {
    char   **sets;           /* --set section.key=value (NULL-terminated, nullable) */
    char    *hf_config;      /* --hf-config PATH (nullable) */
    gint     steps;          /* --steps N; SIM_MAIN_STEPS_UNSET: the scenario's training.steps */
    gboolean json;           /* --json */
    char    *out;            /* --out DIR (run) or FILE.csv (sweep) */
    char    *schedules;      /* compare --schedules a,b,c */
    char   **sweeps;         /* sweep --sweep section.key=v1,v2 (NULL-terminated, nullable) */
    char    *trace;          /* replay --trace MEASURED.csv */
    gint     gpus;           /* plan --gpus G */
    gint     global_batch;   /* plan --global-batch B (0: the scenario's) */
    gint     top;            /* plan --top K */
    gint     max_microbatch; /* plan --max-microbatch b */
    gdouble  headroom_gib;   /* plan --headroom GIB */
    char    *zero;           /* plan --zero 0,1,3 */
} SimMainOptions;

static void sim_main_options_clear(SimMainOptions *o) {
    g_strfreev(o->sets);
    g_free(o->hf_config);
    g_free(o->out);
    g_free(o->schedules);
    g_strfreev(o->sweeps);
    g_free(o->trace);
    g_free(o->zero);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SimMainOptions, sim_main_options_clear)

/* Prints @message on one line (newlines folded into spaces) after "pacer-sim: ". */
static void sim_main_print_line(const char *prefix, const char *message) {
    g_autofree char *line = g_strdup(message);
    g_strdelimit(line, "\r\n", ' ');
    fprintf(stderr, "pacer-sim: %s%s\n", prefix, line);
}

/* @message without a leading "@file: " (nullable @file): most scenario errors name their
 * file already, and the line should not show it twice. */
static const char *sim_main_strip_file(const char *message, const char *file) {
    size_t len = file != NULL ? strlen(file) : 0;
    if (len > 0 && strncmp(message, file, len) == 0 && strncmp(message + len, ": ", 2) == 0)
        return message + len + 2;
    return message;
}

/* Reports @error about @file (nullable) and returns the exit status: 2 for usage errors
 * (G_OPTION_ERROR), 1 for everything else. */
int sim_main_fail(const char *file, const GError *error) {
    if (error->domain == G_OPTION_ERROR) {
        sim_main_print_line("", error->message);
        /* The option parser named the program after the command's argv[0]. */
        const char *prog = g_get_prgname();
        fprintf(stderr, "Try '%s --help'.\n", prog != NULL ? prog : "pacer-sim");
        return 2;
    }
    g_autofree char *prefix = file != NULL ? g_strdup_printf("%s: ", file) : g_strdup("");
    sim_main_print_line(prefix, sim_main_strip_file(error->message, file));
    return 1;
}

/* Checks that every --set is "section.key=value", puts --hf-config before them as
 * model.hf_config (absolute, so that it does not start at the scenario's folder) and appends
 * --steps as training.steps.
 * Returns: (transfer full): the NULL-terminated override list, or NULL with a usage @error. */
static GStrv sim_main_overrides(const SimMainOptions *o, GError **error) {
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    if (o->hf_config != NULL) {
        g_autofree char *abs = g_canonicalize_filename(o->hf_config, NULL);
        g_autofree char *set = g_strdup_printf("model.hf_config=%s", abs);
        g_strv_builder_add(b, set);
    }
    for (size_t i = 0; o->sets != NULL && o->sets[i] != NULL; i++) {
        const char *s = o->sets[i];
        const char *eq = strchr(s, '=');
        const char *dot = strchr(s, '.');
        if (eq == NULL || dot == NULL || dot > eq || dot == s || dot + 1 == eq) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--set '%s': expected section.key=value", s);
            return NULL;
        }
        g_strv_builder_add(b, s);
    }
    if (o->steps != SIM_MAIN_STEPS_UNSET && o->steps < 1) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--steps %d: expected a positive number of optimizer steps", o->steps);
        return NULL;
    }
    if (o->steps != SIM_MAIN_STEPS_UNSET) {
        g_autofree char *steps = g_strdup_printf("training.steps=%d", o->steps);
        g_strv_builder_add(b, steps);
    }
    return g_strv_builder_end(b);
}

/* Parses @argv (argv[0] is the command name) with @entries; leaves the positional arguments
 * in @argv. Returns FALSE with a usage @error. */
gboolean sim_main_parse(int *argc, char ***argv, const char *params, const char *summary,
                        const char *description, const GOptionEntry *entries, GError **error) {
    g_autoptr(GOptionContext) ctx = g_option_context_new(params);
    g_option_context_set_summary(ctx, summary);
    g_option_context_set_description(ctx, description);
    g_option_context_add_main_entries(ctx, entries, NULL);
    return g_option_context_parse(ctx, argc, argv, error);
}

/* Prints the scenario's warnings (what its model.hf_config describes and pacer does not
 * model) once, before the command runs. A scenario that does not load prints none here: the
 * command reports its error. */
static void sim_main_print_warnings(const char *path, const char *const *overrides) {
    g_autoptr(PpScenario) sc = pp_scenario_load(path, overrides, NULL);
    for (size_t i = 0; sc != NULL && sc->warnings != NULL && sc->warnings[i] != NULL; i++)
        sim_main_print_line("warning: ", sc->warnings[i]);
}

/* Parses @argv (argv[0] is the command name) with @entries into @o, then requires exactly one
 * positional argument, the scenario, stored in @path, and prints its warnings. Returns:
 * (transfer full): the sim_main_overrides() of @o, or NULL with a usage @error. */
static GStrv sim_main_parse_scenario(int *argc, char ***argv, const char *params,
                                     const char *summary, const char *description,
                                     const GOptionEntry *entries, const SimMainOptions *o,
                                     const char **path, GError **error) {
    *path = NULL;
    if (!sim_main_parse(argc, argv, params, summary, description, entries, error))
        return NULL;
    if (*argc < 2)
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "missing SCENARIO argument");
    else if (*argc > 2)
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "expected one SCENARIO, got %d arguments (%s, %s, ...)", *argc - 1, (*argv)[1],
                    (*argv)[2]);
    else
        *path = (*argv)[1];
    if (*path == NULL)
        return NULL;
    GStrv overrides = sim_main_overrides(o, error);
    if (overrides != NULL)
        sim_main_print_warnings(*path, (const char *const *)overrides);
    return overrides;
}

/* Prints @root (transfer full) as indented JSON on stdout. */
void sim_main_print_json(JsonNode *root) {
    g_autoptr(JsonNode) owned = root;
    g_autofree char *text = sim_json_to_string(owned);
    printf("%s\n", text);
}

/* --- pacer-sim SCENARIO --- */

static const char sim_main_run_description[] =
    "Commands:\n"
    "  pacer-sim SCENARIO [--set section.key=value]... [--json] [--out DIR] [--steps N]\n"
    "  pacer-sim compare SCENARIO [--schedules a,b,...] [--set ...] [--json]\n"
    "  pacer-sim sweep SCENARIO --sweep section.key=v1,v2,... [--sweep ...] [--out FILE.csv]\n"
    "  pacer-sim replay SCENARIO --trace MEASURED.csv [--link] [--set ...] [--json] [--out DIR]\n"
    "  pacer-sim plan SCENARIO --gpus G [--global-batch B] [--schedules a,b,...] [--json]\n"
    "      [--out DIR]\n"
    "  pacer-sim calibrate TRACE... [--check TRACE]... [--out SCENARIO] [--json]\n"
    "  pacer-sim tta RUN... --threshold LOSS,... [--target SCENARIO] [--step-ms NAME=MS]\n"
    "  pacer-sim import megatron|deepspeed [CONFIG.json] --gpus N [--out FILE] [-- ARGS...]\n"
    "  pacer-sim schedules\n"
    "Every command that reads a SCENARIO takes --hf-config PATH: the model's shape from a\n"
    "Hugging Face config.json, under the scenario's own [model] keys and --set.\n"
    "Run 'pacer-sim COMMAND --help' for a command's options. --out DIR writes ops.csv,\n"
    "stages.csv, summary.csv, memory.csv, trace.json (ui.perfetto.dev) and scenario.ini.\n"
    "Exit status: 0 success, 1 bad input, 2 usage error. See docs/simulator.md.";

static int sim_main_run(int argc, char **argv) {
    g_auto(SimMainOptions) o = {.steps = SIM_MAIN_STEPS_UNSET};
    const GOptionEntry entries[] = {
        SIM_MAIN_OPTION_SET(&o.sets),
        SIM_MAIN_OPTION_HF_CONFIG(&o.hf_config),
        SIM_MAIN_OPTION_JSON(&o.json, "Print the result as one JSON object"),
        SIM_MAIN_OPTION_OUT(&o.out, "Write the output files into DIR", "DIR"),
        SIM_MAIN_OPTION_STEPS(&o.steps),
        SIM_MAIN_OPTION_END,
    };
    g_autoptr(GError) error = NULL;
    const char *path = NULL;
    g_auto(GStrv) overrides = sim_main_parse_scenario(
        &argc, &argv, "SCENARIO - simulate a pipeline-parallel schedule",
        "Simulate one scenario file and report step time, throughput, bubble, "
        "weight-version drift and memory.",
        sim_main_run_description, entries, &o, &path, &error);
    if (overrides == NULL)
        return sim_main_fail(NULL, error);

    /* The per-op trace and the memory timeline cost about as much as the run itself: keep
     * them only for --out. */
    g_autoptr(SimJob) job =
        sim_job_new(path, (const char *const *)overrides, o.out != NULL, &error);
    if (job == NULL)
        return sim_main_fail(path, error);
    if (o.out != NULL && !sim_report_write_dir(job, o.out, &error))
        return sim_main_fail(o.out, error);
    if (o.json) {
        sim_main_print_json(sim_report_build_json(job));
    } else {
        g_autofree char *summary = sim_report_format_summary(job);
        fputs(summary, stdout);
    }
    return 0;
}

/* --- pacer-sim compare --- */

/* Splits --schedules into names; a usage @error for an empty name. */
static GStrv sim_main_schedule_list(const char *text, GError **error) {
    g_auto(GStrv) kinds = g_strsplit(text, ",", -1);
    for (size_t k = 0; kinds[k] != NULL; k++) {
        if (kinds[k][0] == '\0') {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--schedules '%s': empty schedule name", text);
            return NULL;
        }
    }
    return g_steal_pointer(&kinds);
}

static int sim_main_compare(int argc, char **argv) {
    g_auto(SimMainOptions) o = {.steps = SIM_MAIN_STEPS_UNSET};
    const GOptionEntry entries[] = {
        SIM_MAIN_OPTION_SCHEDULES(&o.schedules, SIM_MAIN_DEFAULT_SCHEDULES),
        SIM_MAIN_OPTION_SET(&o.sets),
        SIM_MAIN_OPTION_HF_CONFIG(&o.hf_config),
        SIM_MAIN_OPTION_STEPS(&o.steps),
        SIM_MAIN_OPTION_JSON(&o.json, "Print the table as JSON"),
        SIM_MAIN_OPTION_END,
    };
    g_autoptr(GError) error = NULL;
    const char *path = NULL;
    g_auto(GStrv) overrides = sim_main_parse_scenario(
        &argc, &argv, "SCENARIO - run several schedules on one scenario",
        "Simulate each schedule on the same scenario and print them side by "
        "side, with the speedup of each over the first (the ratio of their "
        "tokens/s; with equal global batches, the first's step time over "
        "theirs).",
        "Each run sets pipeline.schedule; the rest follows one rule:\n"
        "  chunks: interleaved uses the scenario's pipeline.chunks when > 1,\n"
        "    else 2; zb-v and dualpipe-v use 2; every other schedule uses 1;\n"
        "  accumulation: paci uses a = m (pipeline.microbatches), the same\n"
        "    micro-batches per update as a flush step (a scenario that is\n"
        "    already paci keeps its a); async-1f1b uses a = 1;\n"
        "  batch: with k the micro-batches per update (m for flush schedules\n"
        "    and 2bw, a for paci and async-1f1b, 1 for pipedream), analytic\n"
        "    costs keep the global batch (micro-batch size = global batch / k);\n"
        "    explicit [costs], the times of one micro-batch, keep the\n"
        "    micro-batch size (global batch = size x k).\n"
        "A schedule that fails is shown with its error; the exit status is then 1.",
        entries, &o, &path, &error);
    if (overrides == NULL)
        return sim_main_fail(NULL, error);
    g_auto(GStrv) kinds = sim_main_schedule_list(
        o.schedules != NULL ? o.schedules : SIM_MAIN_DEFAULT_SCHEDULES, &error);
    if (kinds == NULL)
        return sim_main_fail(NULL, error);

    g_autoptr(GPtrArray) rows =
        sim_sweep_compare(path, (const char *const *)overrides, (const char *const *)kinds, &error);
    if (rows == NULL)
        return sim_main_fail(path, error);
    if (o.json) {
        sim_main_print_json(sim_sweep_compare_build_json(path, rows));
    } else {
        g_autofree char *table = sim_sweep_compare_format(rows);
        fputs(table, stdout);
    }
    int status = 0;
    for (guint i = 0; i < rows->len; i++) {
        const SimCompareRow *row = g_ptr_array_index(rows, i);
        if (row->job != NULL)
            continue;
        g_autofree char *prefix = g_strdup_printf("%s: %s: ", path, row->schedule);
        sim_main_print_line(prefix, sim_main_strip_file(row->error, path));
        status = 1;
    }
    return status;
}

/* --- pacer-sim sweep --- */

static void sim_main_axis_clear(gpointer axis) {
    sim_sweep_axis_clear(axis);
}

static int sim_main_sweep(int argc, char **argv) {
    g_auto(SimMainOptions) o = {.steps = SIM_MAIN_STEPS_UNSET};
    const GOptionEntry entries[] = {
        {"sweep", 'w', 0, G_OPTION_ARG_STRING_ARRAY, &o.sweeps,
         "A key and its values (repeatable; the last one varies fastest)", "SECTION.KEY=V1,V2,..."},
        SIM_MAIN_OPTION_SET(&o.sets),
        SIM_MAIN_OPTION_HF_CONFIG(&o.hf_config),
        SIM_MAIN_OPTION_STEPS(&o.steps),
        SIM_MAIN_OPTION_OUT(&o.out, "Write the CSV to FILE (default stdout)", "FILE.csv"),
        SIM_MAIN_OPTION_END,
    };
    g_autoptr(GError) error = NULL;
    const char *path = NULL;
    g_auto(GStrv) overrides = sim_main_parse_scenario(
        &argc, &argv, "SCENARIO - simulate every combination of key values",
        "Run the cartesian product of the --sweep values and write one CSV row "
        "per point.",
        "Columns: the swept keys, step_time_ns, throughput_tokens_per_s,\n"
        "throughput_samples_per_s, bubble_fraction, efficiency, delta_max,\n"
        "peak_memory_bytes, error. A point whose scenario is invalid has its\n"
        "message in the error column and empty figures; the sweep goes on.",
        entries, &o, &path, &error);
    if (overrides == NULL)
        return sim_main_fail(NULL, error);
    int32_t n_axes = o.sweeps != NULL ? (int32_t)g_strv_length(o.sweeps) : 0;
    if (n_axes == 0) {
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "sweep needs at least one --sweep section.key=v1,v2,...");
        return sim_main_fail(NULL, error);
    }
    g_autoptr(GArray) axes = g_array_sized_new(FALSE, TRUE, sizeof(SimSweepAxis), n_axes);
    g_array_set_clear_func(axes, sim_main_axis_clear);
    for (int32_t k = 0; k < n_axes; k++) {
        SimSweepAxis axis = {0};
        if (!sim_sweep_axis_parse(o.sweeps[k], &axis, &error))
            return sim_main_fail(NULL, error);
        g_array_append_val(axes, axis);
    }

    /* A file that cannot be read or names unknown keys fails every point: stop early. Bad
     * or inconsistent values may be what the sweep replaces: those go on. */
    g_autoptr(PpScenario) base = pp_scenario_load(path, (const char *const *)overrides, &error);
    if (base == NULL &&
        !g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE) &&
        !g_error_matches(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT))
        return sim_main_fail(path, error);
    g_clear_error(&error);

    /* stdout gets each row as soon as it is computed; --out FILE gets the whole CSV at the
     * end through a temporary file and a rename, so it is never half-written. */
    char  *buf = NULL;
    size_t len = 0;
    FILE  *out = o.out != NULL ? open_memstream(&buf, &len) : stdout;
    PP_ASSERT(out != NULL);
    int32_t  n_failed = 0, n_mapped = 0;
    gboolean ok =
        sim_sweep_run(path, (const char *const *)overrides, base, (const SimSweepAxis *)axes->data,
                      n_axes, out, &n_failed, &n_mapped, &error);
    if (o.out != NULL) {
        int rc = fclose(out);
        PP_ASSERT(rc == 0); /* a memory stream fails only when allocation fails */
        ok = ok && pp_file_write(o.out, buf, len, &error);
        free(buf);
    }
    if (!ok)
        return sim_main_fail(o.out != NULL ? o.out : "stdout", error);
    if (n_mapped > 0)
        fprintf(stderr,
                "pacer-sim: %s: %d sweep points of an accumulating schedule (paci) ran "
                "pipeline.accumulation = pipeline.microbatches: its updates count a, not m\n",
                path, n_mapped);
    if (n_failed > 0)
        fprintf(stderr, "pacer-sim: %s: %d of %lld sweep points failed (see the error column)\n",
                path, n_failed,
                (long long)sim_sweep_n_points((const SimSweepAxis *)axes->data, n_axes));
    return 0;
}

/* --- pacer-sim replay --- */

static int sim_main_replay(int argc, char **argv) {
    g_auto(SimMainOptions) o = {.steps = SIM_MAIN_STEPS_UNSET};
    gboolean           link = FALSE;
    const GOptionEntry entries[] = {
        {"trace", 't', 0, G_OPTION_ARG_FILENAME, &o.trace,
         "The measured trace (pacer-train --out DIR writes DIR/ops.csv)", "MEASURED.csv"},
        SIM_MAIN_OPTION_SET(&o.sets),
        SIM_MAIN_OPTION_HF_CONFIG(&o.hf_config),
        SIM_MAIN_OPTION_JSON(&o.json, "Print the comparison as one JSON object"),
        SIM_MAIN_OPTION_OUT(
            &o.out, "Write the predicted traces (ops.csv: replay, calibrated.csv) into DIR", "DIR"),
        {"link", 0, 0, G_OPTION_ARG_NONE, &link,
         "Charge each message between stages [hardware] link_latency_us + its fp32 bytes / "
         "link_gbps",
         NULL},
        SIM_MAIN_OPTION_END,
    };
    g_autoptr(GError) error = NULL;
    const char *path = NULL;
    g_auto(GStrv) overrides = sim_main_parse_scenario(
        &argc, &argv, "SCENARIO - compare a measured run with the simulator",
        "Match every op of the scenario's schedule to its row in a measured "
        "trace and simulate it twice, without communication (or with --link): "
        "with each op's measured duration (replay) and with the median measured "
        "duration per (stage, chunk, kind) (calibrated).",
        "SCENARIO is the run's scenario.ini. The trace must hold one run of the\n"
        "schedule: train with run.eval_every=0 and run.checkpoint_every=0.\n"
        "Replay makespan <= measured makespan; the difference is what\n"
        "communication, channel waits and thread scheduling cost.\n"
        "See docs/measured-vs-predicted.md.",
        entries, &o, &path, &error);
    if (overrides == NULL)
        return sim_main_fail(NULL, error);
    if (o.trace == NULL) {
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "replay needs --trace MEASURED.csv");
        return sim_main_fail(NULL, error);
    }
    g_autoptr(SimReplay) replay =
        sim_replay_new(path, (const char *const *)overrides, o.trace, link, &error);
    if (replay == NULL)
        return sim_main_fail(error->domain == PP_IO_ERROR ? o.trace : path, error);
    g_autofree char *cores =
        sim_calibrate_cores_warning(replay->scenario, o.trace, (int32_t)g_get_num_processors());
    if (cores != NULL)
        fprintf(stderr, "pacer-sim: %s\n", cores);
    if (o.out != NULL && !sim_replay_write_dir(replay, o.out, &error))
        return sim_main_fail(o.out, error);
    if (o.json) {
        sim_main_print_json(sim_replay_build_json(replay));
    } else {
        g_autofree char *table = sim_replay_format(replay);
        fputs(table, stdout);
    }
    return 0;
}

/* --- pacer-sim plan --- */

/* Parses plan's --zero @text, distinct ZeRO stages among 0, 1 and 3, into @o. */
static gboolean sim_main_zero_list(const char *text, SimPlanOptions *o, GError **error) {
    g_auto(GStrv) items = g_strsplit(text, ",", -1);
    o->n_zero = 0;
    for (size_t i = 0; items[i] != NULL; i++) {
        const char *item = g_strstrip(items[i]);
        int32_t     z = g_strcmp0(item, "0") == 0   ? 0
                        : g_strcmp0(item, "1") == 0 ? 1
                        : g_strcmp0(item, "3") == 0 ? 3
                                                    : -1;
        gboolean    repeated = FALSE;
        for (size_t k = 0; k < o->n_zero; k++)
            repeated = repeated || o->zero[k] == z;
        if (z < 0 || repeated) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--zero '%s': '%s' is %s; give distinct ZeRO stages among 0 (replicated "
                        "state), 1 (parallel.distributed_optimizer) and 3 (parallel.fsdp)",
                        text, item, z < 0 ? "not a ZeRO stage" : "repeated");
            return FALSE;
        }
        PP_ASSERT(o->n_zero < SIM_PLAN_MAX_ZERO); /* three distinct stages at most */
        o->zero[o->n_zero++] = z;
    }
    return TRUE;
}

static int sim_main_plan(int argc, char **argv) {
    g_auto(SimMainOptions) o = {.steps = SIM_MAIN_STEPS_UNSET, .top = 10, .max_microbatch = 8};
    const GOptionEntry entries[] = {
        {"gpus", 'g', 0, G_OPTION_ARG_INT, &o.gpus,
         "GPUs of the job (data x tensor x context x stages)", "G"},
        {"global-batch", 'b', 0, G_OPTION_ARG_INT, &o.global_batch,
         "Sequences per optimizer step (default: the scenario's training.global_batch)", "B"},
        SIM_MAIN_OPTION_SCHEDULES(&o.schedules, SIM_MAIN_PLAN_SCHEDULES),
        {"top", 't', 0, G_OPTION_ARG_INT, &o.top, "Rows to print (default 10)", "K"},
        {"max-microbatch", 'M', 0, G_OPTION_ARG_INT, &o.max_microbatch,
         "Largest micro-batch size tried, in sequences (default 8)", "b"},
        {"headroom", 'H', 0, G_OPTION_ARG_DOUBLE, &o.headroom_gib,
         "Device memory in GiB every row leaves free (default 0)", "GIB"},
        {"zero", 'Z', 0, G_OPTION_ARG_STRING, &o.zero,
         "ZeRO stages tried: 0 replicated, 1 distributed optimizer, 3 FSDP "
         "(default " SIM_MAIN_PLAN_ZERO ")",
         "Z,..."},
        SIM_MAIN_OPTION_SET(&o.sets),
        SIM_MAIN_OPTION_HF_CONFIG(&o.hf_config),
        SIM_MAIN_OPTION_JSON(&o.json, "Print the plan as JSON"),
        SIM_MAIN_OPTION_OUT(
            &o.out, "Write every simulated layout to DIR/plan.csv (plots/plan.gp draws it)", "DIR"),
        SIM_MAIN_OPTION_END,
    };
    g_autoptr(GError) error = NULL;
    const char *path = NULL;
    g_auto(GStrv) overrides = sim_main_parse_scenario(
        &argc, &argv, "SCENARIO - search the parallel layouts of G GPUs",
        "Enumerate data x tensor x context x pipeline layouts, expert layouts "
        "(MoE models), ZeRO stages, schedules, chunks, micro-batch sizes and "
        "recomputation for G GPUs, drop those that "
        "cannot fit in device memory, simulate the rest and rank them by the "
        "job's tokens/s.",
        "The scenario gives the model and the hardware ([hardware] required,\n"
        "no [costs]); see docs/cluster.md for the enumeration rules. Progress is\n"
        "redrawn on stderr on a terminal (CI unset); elsewhere a line at most\n"
        "every 5 seconds.",
        entries, &o, &path, &error);
    if (overrides == NULL)
        return sim_main_fail(NULL, error);
    if (o.gpus < 1 || o.global_batch < 0 || o.top < 1 || o.max_microbatch < 1 ||
        !(o.headroom_gib >= 0.0 && o.headroom_gib <= 1e9)) {
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "plan needs --gpus G >= 1 (got %d), --global-batch B >= 1 when given (got "
                    "%d), --top K >= 1 (got %d), --max-microbatch b >= 1 (got %d) and "
                    "--headroom GIB in [0, 1e9] (got %g)",
                    o.gpus, o.global_batch, o.top, o.max_microbatch, o.headroom_gib);
        return sim_main_fail(NULL, error);
    }
    g_auto(GStrv) kinds =
        sim_main_schedule_list(o.schedules != NULL ? o.schedules : SIM_MAIN_PLAN_SCHEDULES, &error);
    if (kinds == NULL)
        return sim_main_fail(NULL, error);
    for (size_t k = 0; kinds[k] != NULL; k++) {
        const PpSchedKindInfo *info = pp_sched_kind_lookup(kinds[k]);
        if (info == NULL || info->needs_order_file) {
            g_autofree char *names = pp_sched_kind_names();
            g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--schedules: '%s' is not a schedule plan can generate; valid: %s "
                        "(not custom)",
                        kinds[k], names);
            return sim_main_fail(NULL, error);
        }
    }
    SimPlanOptions po = {.gpus = o.gpus,
                         .global_batch = o.global_batch,
                         .schedules = (const char *const *)kinds,
                         .max_microbatch = o.max_microbatch,
                         .top = o.top,
                         .headroom_bytes = llround(o.headroom_gib * 1073741824.0),
                         /* quiet off a terminal and in CI (CI set, as CI services do) */
                         .progress = isatty(STDERR_FILENO) && g_getenv("CI") == NULL};
    if (!sim_main_zero_list(o.zero != NULL ? o.zero : SIM_MAIN_PLAN_ZERO, &po, &error))
        return sim_main_fail(NULL, error);
    g_autoptr(SimPlan) plan = sim_plan_run(path, (const char *const *)overrides, &po, &error);
    if (plan == NULL)
        return sim_main_fail(path, error);
    if (o.out != NULL) {
        g_autofree char *csv = g_build_filename(o.out, "plan.csv", NULL);
        if (g_mkdir_with_parents(o.out, 0755) != 0) {
            g_set_error(&error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot create directory %s: %s",
                        o.out, g_strerror(errno));
            return sim_main_fail(NULL, error);
        }
        if (!sim_plan_write_csv(plan, csv, &error))
            return sim_main_fail(NULL, error);
    }
    if (o.json) {
        sim_main_print_json(sim_plan_build_json(plan, o.top));
    } else {
        g_autofree char *table = sim_plan_format(plan, o.top);
        fputs(table, stdout);
    }
    return 0;
}

/* --- pacer-sim schedules --- */

static int sim_main_schedules(int argc, char **argv) {
    const GOptionEntry entries[] = {SIM_MAIN_OPTION_END};
    g_autoptr(GError) error = NULL;
    if (!sim_main_parse(&argc, &argv, "- list the registered schedules",
                        "Print each schedule name with its one-line summary.", NULL, entries,
                        &error))
        return sim_main_fail(NULL, error);
    if (argc != 1) {
        g_set_error(&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "schedules takes no argument, got '%s'", argv[1]);
        return sim_main_fail(NULL, error);
    }
    for (const PpSchedKindInfo *const *k = pp_sched_kinds(); *k != NULL; k++)
        printf("%-12s %s\n", (*k)->name, (*k)->summary);
    return 0;
}

int main(int argc, char **argv) {
    const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
    } commands[] = {
        {"compare", sim_main_compare},     {"sweep", sim_main_sweep},
        {"replay", sim_main_replay},       {"plan", sim_main_plan},
        {"calibrate", sim_calibrate_main}, {"tta", sim_tta_main},
        {"import", sim_import_main},       {"schedules", sim_main_schedules},
    };
    /* Characters only (UTF-8 help text); numbers keep the C locale's format. */
    setlocale(LC_CTYPE, "");
    for (size_t i = 0; argc >= 2 && i < G_N_ELEMENTS(commands); i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* The command's argv[0] names it, so its --help reads "pacer-sim sweep ...". */
            g_autofree char *name = g_strdup_printf("pacer-sim %s", commands[i].name);
            argv[1] = name;
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    argv[0] = (char *)"pacer-sim";
    return sim_main_run(argc, argv);
}
