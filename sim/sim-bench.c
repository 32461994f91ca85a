/* SPDX-License-Identifier: MIT
 * sim-bench.c: pacer-sim-bench, the simulator's speed benchmark (not a test). For a few
 * fixed runs it times the setup (scenario + schedule generation and validation), the engine
 * without a trace, and the engine with the sorted trace, and prints one table row per run:
 * simulated ops per second on one core. End-to-end rows time what one simulation costs a
 * user (setup + engine without the trace) as the median of a few runs. A last table times
 * pacer-sim plan, run as a child process, on the 16,384-GPU dense job (the mixture of
 * experts' plan takes minutes: docs/simulator.md, Speed).
 */
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "pp-error.h"
#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"

/* What a row times. */
typedef enum {
    SIM_BENCH_SPLIT,      /* setup, engine without trace, engine with trace: one run each */
    SIM_BENCH_DYNAMIC,    /* setup, then PACI's policy live (sim_engine_run_policy) */
    SIM_BENCH_END_TO_END, /* setup + engine without trace, median of SIM_BENCH_REPEATS */
} SimBenchMode;

/* Runs per end-to-end row: odd, so the median is one of them. */
#define SIM_BENCH_REPEATS 3

typedef struct {
    const char  *name;
    const char  *scenario;  /* relative to the source root; NULL: uniform costs below */
    const char  *overrides; /* ';'-separated "section.key=value" (steps appended) */
    SimBenchMode mode;
    const char  *kind;
    int32_t      n_stages;
    int32_t      n_microbatches;   /* m (flush) */
    int32_t      accumulation;     /* a (paci) */
    int64_t      f_ns, b_ns, w_ns; /* per stage */
} SimBenchCase;

/* zb-28.3b: the zero-bubble paper's A100 profile (docs/design.md §6.2, scenarios/zb) with PACI
 * accumulating the same 96 micro-batches per update that the flush schedule runs per step. */
#define SIM_BENCH_ZB      "scenarios/zb/zb-28.3b-p32-m96.ini"
#define SIM_BENCH_ZB_PACI "pipeline.schedule=paci;pipeline.accumulation=96;training.global_batch=96"

/* The 16,384-GPU Llama-3-405B-like job: data 128 x tensor 8 x 16 interleaved stages. */
#define SIM_BENCH_LLAMA "scenarios/cluster/llama3-405b-like.ini"
/* The DeepSeek-V3-like mixture of experts, on 16,384 GPUs with data 1024 (the file lays out
 * 2,048: data 128 x 16 stages, 64-way expert parallelism). */
#define SIM_BENCH_DEEPSEEK "scenarios/cluster/deepseek-v3-like.ini"

static const SimBenchCase sim_bench_cases[] = {
    {"paci N=32 a=8 uniform", NULL, NULL, SIM_BENCH_SPLIT, "paci", 32, 1, 8, 1000, 1000, 1000},
    {"1f1b N=8 m=32 uniform", NULL, NULL, SIM_BENCH_SPLIT, "1f1b", 8, 32, 1, 1000, 1000, 1000},
    {"zb-28.3b paci a=96", SIM_BENCH_ZB, SIM_BENCH_ZB_PACI, SIM_BENCH_SPLIT, NULL, 0, 0, 0, 0, 0,
     0},
    {"zb-28.3b paci a=96 dynamic", SIM_BENCH_ZB, SIM_BENCH_ZB_PACI, SIM_BENCH_DYNAMIC, NULL, 0, 0,
     0, 0, 0, 0},
    {"zb-28.3b paci a=96 end-to-end", SIM_BENCH_ZB, SIM_BENCH_ZB_PACI, SIM_BENCH_END_TO_END, NULL,
     0, 0, 0, 0, 0, 0},
    {"llama3-405b-like 16384 GPUs", SIM_BENCH_LLAMA, "pipeline.mode=static", SIM_BENCH_END_TO_END,
     NULL, 0, 0, 0, 0, 0, 0},
    {"deepseek-v3-like 16384 GPUs", SIM_BENCH_DEEPSEEK, "parallel.data=1024;pipeline.mode=static",
     SIM_BENCH_END_TO_END, NULL, 0, 0, 0, 0, 0, 0},
};

/* One pacer-sim plan the benchmark times. */
typedef struct {
    const char *name;
    const char *scenario; /* relative to the source root */
    const char *gpus;
} SimBenchPlan;

static const SimBenchPlan sim_bench_plans[] = {
    {"llama3-405b-like 16384 GPUs", SIM_BENCH_LLAMA, "16384"},
};

/* pacer-sim plan @bp as a user runs it: the child's CPU seconds (user + system) and the wall
 * seconds, with the plan's counts, as one table row. */
static gboolean sim_bench_plan(const SimBenchPlan *bp, GError **error) {
    g_autofree char *path = g_build_filename(PP_SOURCE_ROOT, bp->scenario, NULL);
    const char      *args[] = {
             PP_BUILD_ROOT "/sim/pacer-sim", "plan", path, "--gpus", bp->gpus, "--json", NULL};
    struct rusage before, after;
    PP_ASSERT(getrusage(RUSAGE_CHILDREN, &before) == 0);
    gint64           t0 = g_get_monotonic_time();
    g_autofree char *out = NULL, *err = NULL;
    gint             status = 0;
    if (!g_spawn_sync(NULL, (char **)args, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status,
                      error))
        return FALSE;
    double wall_s = (double)(g_get_monotonic_time() - t0) / 1e6;
    PP_ASSERT(getrusage(RUSAGE_CHILDREN, &after) == 0);
    if (!g_spawn_check_wait_status(status, error))
        return FALSE;
    double cpu_s = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
                   (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6 +
                   (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
                   (double)(after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, out, -1, error))
        return FALSE;
    JsonObject *plan = json_node_get_object(json_parser_get_root(parser));
    printf("%-30s %8" G_GINT64_FORMAT " %9" G_GINT64_FORMAT " %8.3f %8.3f\n", bp->name,
           json_object_get_int_member(plan, "layouts"),
           json_object_get_int_member(plan, "simulated"), cpu_s, wall_s);
    return TRUE;
}

/* Figures of one end-to-end run. */
typedef struct {
    double  setup_s; /* scenario + schedule generation and validation */
    double  sim_s;   /* engine without the trace */
    int64_t n_ops_simulated;
    int64_t step_time_ns;
} SimBenchTimes;

/* CPU time of this thread (ns): the engine is single-threaded, and on a shared machine CPU
 * time measures it better than wall time. */
static gint64 sim_bench_cpu_ns(void) {
    struct timespec ts;
    PP_ASSERT(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double sim_bench_seconds_since(gint64 t0_ns) {
    return (double)(sim_bench_cpu_ns() - t0_ns) / 1e9;
}

/* Builds the schedule parameters and cost model of @bc for @n_steps steps. @params borrows
 * strings from *@scenario_out. Returns FALSE with @error set on bad input. */
static gboolean sim_bench_setup(const SimBenchCase *bc, int32_t n_steps, PpScenario **scenario_out,
                                PpScheduleParams *params, SimCostModel **cost_out, GError **error) {
    if (bc->scenario == NULL) {
        *params = (PpScheduleParams){.kind = pp_sched_kind_lookup(bc->kind),
                                     .n_stages = bc->n_stages,
                                     .n_chunks = 1,
                                     .n_microbatches = bc->n_microbatches,
                                     .accumulation = bc->accumulation,
                                     .n_steps = n_steps,
                                     .f_ns = bc->f_ns,
                                     .b_ns = bc->b_ns,
                                     .w_ns = bc->w_ns};
        *cost_out = sim_cost_new_uniform(bc->n_stages, 1, bc->f_ns, bc->b_ns, bc->w_ns, 0);
        return TRUE;
    }
    g_autofree char *path = g_build_filename(PP_SOURCE_ROOT, bc->scenario, NULL);
    g_autofree char *steps = g_strdup_printf("%s;training.steps=%d", bc->overrides, n_steps);
    g_auto(GStrv) overrides = g_strsplit(steps, ";", -1);
    *scenario_out = pp_scenario_load(path, (const char *const *)overrides, error);
    if (*scenario_out == NULL)
        return FALSE;
    pp_scenario_schedule_params(*scenario_out, params);
    *cost_out = sim_cost_new_from_scenario(*scenario_out, error);
    if (*cost_out == NULL)
        return FALSE;
    sim_cost_schedule_params(*cost_out, params);
    return TRUE;
}

/* Prints one table row; @trace_s < 0: the traced engine did not run ("-"). */
static void sim_bench_print_row(const SimBenchCase *bc, int32_t n_steps, int64_t n_ops,
                                double setup_s, double sim_s, double trace_s,
                                int64_t step_time_ns) {
    char trace[32] = "-";
    if (trace_s >= 0)
        snprintf(trace, sizeof trace, "%.3f", trace_s);
    printf("%-30s %6d %9" G_GINT64_FORMAT " %8.3f %8.3f %8.2f %8s %10.3f %12.3f\n", bc->name,
           n_steps, n_ops, setup_s, sim_s, (double)n_ops / sim_s / 1e6, trace, setup_s + sim_s,
           (double)step_time_ns / 1e6);
}

/* Runs one split or dynamic case and prints its row; returns FALSE and sets @error when it
 * cannot be set up. */
static gboolean sim_bench_run(const SimBenchCase *bc, int32_t n_steps, GError **error) {
    g_autoptr(PpScenario) scenario = NULL;
    g_autoptr(SimCostModel) cost = NULL;
    g_autoptr(PpSchedule) sched = NULL;
    g_autoptr(SimResult) bare = NULL;
    g_autoptr(SimResult) traced = NULL;
    PpScheduleParams params;
    double           setup_s, sim_s, trace_s;

    gint64 t0 = sim_bench_cpu_ns();
    if (!sim_bench_setup(bc, n_steps, &scenario, &params, &cost, error))
        return FALSE;
    if (bc->mode == SIM_BENCH_DYNAMIC) {
        /* The policy run records the program, then replays it with the trace. */
        setup_s = sim_bench_seconds_since(t0);
        t0 = sim_bench_cpu_ns();
        traced = sim_engine_run_policy(&params, cost, &sched, error);
        sim_s = trace_s = sim_bench_seconds_since(t0);
        if (traced == NULL)
            return FALSE;
    } else {
        sched = pp_schedule_new(&params, error);
        setup_s = sim_bench_seconds_since(t0);
        if (sched == NULL)
            return FALSE;
        SimRunOptions no_trace = {.keep_trace = FALSE};
        t0 = sim_bench_cpu_ns();
        bare = sim_engine_run_with(sched, cost, &no_trace, error);
        sim_s = sim_bench_seconds_since(t0);
        if (bare == NULL)
            return FALSE;
        t0 = sim_bench_cpu_ns();
        traced = sim_engine_run(sched, cost, error);
        trace_s = sim_bench_seconds_since(t0);
        if (traced == NULL)
            return FALSE;
        PP_ASSERT(traced->makespan_ns == bare->makespan_ns);
    }
    sim_bench_print_row(bc, n_steps, traced->n_ops_simulated, setup_s, sim_s, trace_s,
                        traced->step_time_ns);
    return TRUE;
}

/* One end-to-end run of @bc: scenario, schedule generation and validation, then the engine
 * without the trace, timed back to back. Returns FALSE and sets @error on bad input. */
static gboolean sim_bench_end_to_end_once(const SimBenchCase *bc, int32_t n_steps,
                                          SimBenchTimes *times, GError **error) {
    g_autoptr(PpScenario) scenario = NULL;
    g_autoptr(SimCostModel) cost = NULL;
    g_autoptr(PpSchedule) sched = NULL;
    g_autoptr(SimResult) bare = NULL;
    PpScheduleParams params;
    SimRunOptions    no_trace = {.keep_trace = FALSE};

    gint64 t0 = sim_bench_cpu_ns();
    if (!sim_bench_setup(bc, n_steps, &scenario, &params, &cost, error))
        return FALSE;
    sched = pp_schedule_new(&params, error);
    times->setup_s = sim_bench_seconds_since(t0);
    if (sched == NULL)
        return FALSE;
    t0 = sim_bench_cpu_ns();
    bare = sim_engine_run_with(sched, cost, &no_trace, error);
    times->sim_s = sim_bench_seconds_since(t0);
    if (bare == NULL)
        return FALSE;
    times->n_ops_simulated = bare->n_ops_simulated;
    times->step_time_ns = bare->step_time_ns;
    return TRUE;
}

static int sim_bench_times_cmp(const void *a, const void *b) {
    const SimBenchTimes *x = a, *y = b;
    double               tx = x->setup_s + x->sim_s, ty = y->setup_s + y->sim_s;
    return (tx > ty) - (tx < ty);
}

/* Runs an end-to-end case SIM_BENCH_REPEATS times and prints the run with the median total
 * (setup + engine); returns FALSE and sets @error when it cannot be set up. */
static gboolean sim_bench_run_end_to_end(const SimBenchCase *bc, int32_t n_steps, GError **error) {
    SimBenchTimes runs[SIM_BENCH_REPEATS];
    for (int r = 0; r < SIM_BENCH_REPEATS; r++) {
        if (!sim_bench_end_to_end_once(bc, n_steps, &runs[r], error))
            return FALSE;
    }
    qsort(runs, SIM_BENCH_REPEATS, sizeof runs[0], sim_bench_times_cmp);
    const SimBenchTimes *median = &runs[SIM_BENCH_REPEATS / 2];
    sim_bench_print_row(bc, n_steps, median->n_ops_simulated, median->setup_s, median->sim_s, -1,
                        median->step_time_ns);
    return TRUE;
}

int main(int argc, char **argv) {
    int          steps = 1000;
    GOptionEntry entries[] = {
        {"steps", 's', 0, G_OPTION_ARG_INT, &steps, "optimizer steps per run (1000)", "N"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- time the pacer simulator");
    g_option_context_set_description(
        ctx, "Times are CPU seconds of the one engine thread. Columns: setup_s = scenario + "
             "schedule generation and validation; sim_s = engine without the "
             "trace (dynamic: policy run + replay with trace); Mops/s = ops / sim_s; "
             "trace_s = engine with the sorted trace; setup+sim = what one simulation costs "
             "(end-to-end rows: the median of " G_STRINGIFY(
                 SIM_BENCH_REPEATS) " runs of setup + "
                                    "engine, no traced run); "
                                    "step_ms = simulated step time.");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error) || steps < 1) {
        fprintf(stderr, "pacer-sim-bench: %s\n",
                error != NULL ? error->message : "--steps must be >= 1");
        return 2;
    }

    printf("%-30s %6s %9s %8s %8s %8s %8s %10s %12s\n", "scenario", "steps", "ops", "setup_s",
           "sim_s", "Mops/s", "trace_s", "setup+sim", "step_ms");
    for (size_t i = 0; i < G_N_ELEMENTS(sim_bench_cases); i++) {
        const SimBenchCase *bc = &sim_bench_cases[i];
        gboolean ok = bc->mode == SIM_BENCH_END_TO_END ? sim_bench_run_end_to_end(bc, steps, &error)
                                                       : sim_bench_run(bc, steps, &error);
        if (!ok) {
            fprintf(stderr, "pacer-sim-bench: %s: %s\n", bc->name, error->message);
            return 1;
        }
    }
    printf("\n%-30s %8s %9s %8s %8s\n", "plan", "layouts", "simulated", "cpu_s", "wall_s");
    for (size_t i = 0; i < G_N_ELEMENTS(sim_bench_plans); i++) {
        if (!sim_bench_plan(&sim_bench_plans[i], &error)) {
            fprintf(stderr, "pacer-sim-bench: plan %s: %s\n", sim_bench_plans[i].name,
                    error->message);
            return 1;
        }
    }
    return 0;
}
