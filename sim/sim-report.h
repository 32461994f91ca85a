/* SPDX-License-Identifier: MIT
 * sim-report.h: one pacer-sim run (scenario -> schedule -> cost model -> engine result) and
 * the reports made from it: the readable summary table, the JSON object, and the --out
 * directory (ops.csv, stages.csv, summary.csv, memory.csv, trace.json, scenario.ini). Every
 * file is written atomically and holds no timestamps or locale-dependent numbers.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "pp-scenario.h"
#include "pp-schedule.h"
#include "sim-cost.h"
#include "sim-engine.h"
#include "sim-layout.h"

G_BEGIN_DECLS

/* Everything one simulation owns; the reports borrow it read-only. */
typedef struct {
    PpScenario   *scenario;
    PpSchedule   *schedule;
    SimCostModel *cost;
    SimResult    *result;
    SimLayout     layout; /* the parallel layout around the pipeline (sim_layout_init()) */
} SimJob;

/* --- running --- */

/* Loads @path with @overrides ("section.key=value", NULL-terminated, nullable), builds the
 * cost model and the schedule (searching generators get the cost model's bottleneck op
 * times when the scenario has no [costs]) and runs the engine; pipeline.mode = dynamic runs
 * PACI's policy live (sim_engine_run_policy) and keeps the program it recorded as the
 * schedule. @for_out: keep what sim_report_write_dir() needs besides the reports, the trace
 * and the memory timeline; FALSE leaves result->trace and result->memory_timeline NULL
 * (compare, sweep, a run without --out).
 * Returns: (transfer full), or NULL with @error set (scenario, schedule or cost errors). */
SimJob *sim_job_new(const char *path, const char *const *overrides, gboolean for_out,
                    GError **error);
/* Same from a loaded scenario (@scenario: transfer full, also on failure). */
SimJob *sim_job_new_from_scenario(PpScenario *scenario, gboolean for_out, GError **error);
/* Same from a loaded scenario and its cost model (sim_cost_new_from_scenario()): both
 * transfer full, also on failure. */
SimJob *sim_job_new_from_cost(PpScenario *scenario, SimCostModel *cost, gboolean for_out,
                              GError **error);
void    sim_job_free(SimJob *job);
/* The schedule parameters of @scenario's run with @cost: the scenario's, with @cost's
 * bottleneck op times and M_W / M_F for searching generators (sim_cost_schedule_params()). */
void sim_job_schedule_params(const PpScenario *scenario, const SimCostModel *cost,
                             PpScheduleParams *params);
/* A static-mode run of @scenario with @cost as sim_job_new_from_cost() does it without
 * --out (no trace, no memory timeline), its schedule taken from @cache. Returns: (transfer
 * full), or NULL with @error set (schedule or engine errors). */
SimResult *sim_run_cached(const PpScenario *scenario, const SimCostModel *cost, PpSchedCache *cache,
                          GError **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimJob, sim_job_free)

/* --- reports --- */

/* The readable summary: a header (model, hardware, schedule, N, m/a, batch), the run's
 * figures and a per-stage table. Returns: (transfer full). */
char *sim_report_format_summary(const SimJob *job);

/* The run as one JSON object (integers as JSON integers; see docs/simulator.md for the keys).
 * Returns: (transfer full). */
JsonNode *sim_report_build_json(const SimJob *job);

/* Formats @value as "%.6f" independently of the locale into @buf (G_ASCII_DTOSTR_BUF_SIZE
 * bytes). Returns @buf. */
char *sim_report_format_double(char *buf, double value);

/* Creates @dir (and its parents) and writes ops.csv, stages.csv, summary.csv, memory.csv,
 * trace.json and scenario.ini into it (@job from sim_job_new(..., for_out = TRUE, ...)).
 * Returns FALSE and sets @error (PP_IO_ERROR) on failure. */
gboolean sim_report_write_dir(const SimJob *job, const char *dir, GError **error);
/* Refuses (PP_IO_ERROR_EXISTS) an --out @dir that holds a pacer-train run (its log.csv or
 * checkpoints/): pacer-sim's ops.csv and scenario.ini would replace the run's; then creates
 * @dir and its parents (PP_IO_ERROR_OPEN when it cannot). Writers of a folder
 * (sim_report_write_dir(), sim_replay_write_dir()) call it first. */
gboolean sim_report_make_out_dir(const char *dir, GError **error);

G_END_DECLS
