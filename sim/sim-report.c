/* SPDX-License-Identifier: MIT
 * sim-report.c: runs one scenario through the schedule core, the cost model and the engine,
 * and turns the result into pacer-sim's outputs: the summary table (stdout), the JSON object
 * (--json) and the --out directory. Files are built in memory and written with a temporary
 * name + rename; numbers are integers or "%.6f" in the C locale, so reruns are byte-identical.
 */
#include "sim-report.h"

#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-error.h"
#include "pp-memory-advice.h"
#include "pp-memory.h"
#include "pp-trace.h"
#include "sim-perfetto.h"

#define SIM_REPORT_GIB (1024.0 * 1024.0 * 1024.0)

/* --- running --- */

SimJob *sim_job_new(const char *path, const char *const *overrides, gboolean for_out,
                    GError **error) {
    PpScenario *scenario = pp_scenario_load(path, overrides, error);
    if (scenario == NULL)
        return NULL;
    return sim_job_new_from_scenario(scenario, for_out, error);
}

SimJob *sim_job_new_from_scenario(PpScenario *scenario, gboolean for_out, GError **error) {
    SimCostModel *cost = sim_cost_new_from_scenario(scenario, error);
    if (cost == NULL) {
        pp_scenario_free(scenario);
        return NULL;
    }
    return sim_job_new_from_cost(scenario, cost, for_out, error);
}

SimJob *sim_job_new_from_cost(PpScenario *scenario, SimCostModel *cost, gboolean for_out,
                              GError **error) {
    g_autoptr(SimJob) job = g_new0(SimJob, 1);
    job->scenario = scenario;
    job->cost = cost;
    sim_layout_init(&job->layout, scenario);
    PpScheduleParams params;
    sim_job_schedule_params(job->scenario, job->cost, &params);
    SimRunOptions options = {.keep_trace = for_out, .keep_memory_timeline = for_out};
    if (strcmp(job->scenario->pipeline.mode, "dynamic") == 0) {
        /* PACI's policy run live; the program it recorded is the run's schedule. */
        job->result =
            sim_engine_run_policy_with(&params, job->cost, &options, &job->schedule, error);
        if (job->result == NULL)
            return NULL;
    } else {
        job->schedule = pp_schedule_new(&params, error);
        if (job->schedule == NULL)
            return NULL;
        job->result = sim_engine_run_with(job->schedule, job->cost, &options, error);
        if (job->result == NULL)
            return NULL;
    }
    /* A total order on the rows: the written trace never depends on event order. */
    if (job->result->trace != NULL)
        pp_trace_sort(job->result->trace);
    return g_steal_pointer(&job);
}

void sim_job_schedule_params(const PpScenario *scenario, const SimCostModel *cost,
                             PpScheduleParams *params) {
    pp_scenario_schedule_params(scenario, params);
    /* Searching generators (zb-1p, zb-2p) get the cost model's bottleneck op times (with
     * [costs], the model's times are [costs]' own) and its M_W / M_F. */
    sim_cost_schedule_params(cost, params);
}

SimResult *sim_run_cached(const PpScenario *scenario, const SimCostModel *cost, PpSchedCache *cache,
                          GError **error) {
    PpScheduleParams params;
    sim_job_schedule_params(scenario, cost, &params);
    const PpSchedule *sched = pp_sched_cache_schedule(cache, &params, error);
    if (sched == NULL)
        return NULL;
    const SimRunOptions options = {.keep_trace = FALSE, .keep_memory_timeline = FALSE};
    return sim_engine_run_with(sched, cost, &options, error);
}

void sim_job_free(SimJob *job) {
    if (job == NULL)
        return;
    sim_result_free(job->result);
    sim_cost_free(job->cost);
    pp_schedule_free(job->schedule);
    pp_scenario_free(job->scenario);
    g_free(job);
}

/* --- formatting helpers --- */

char *sim_report_format_double(char *buf, double value) {
    return g_ascii_formatd(buf, G_ASCII_DTOSTR_BUF_SIZE, "%.6f", value);
}

/* @ns as milliseconds with three decimals, by integer arithmetic. Returns @buf. */
static char *sim_report_format_ms(char *buf, size_t size, int64_t ns) {
    int64_t us = ns / 1000;
    g_snprintf(buf, size, "%lld.%03lld", (long long)(us / 1000), (long long)(us % 1000));
    return buf;
}

/* The preset's name, else the Hugging Face config's file name, else "custom". */
static const char *sim_report_model_name(const PpScenario *scenario) {
    const char *hf = scenario->model.hf_config;
    if (scenario->model.preset != NULL)
        return scenario->model.preset;
    return hf != NULL ? (strrchr(hf, '/') != NULL ? strrchr(hf, '/') + 1 : hf) : "custom";
}

static const char *sim_report_hardware_name(const PpScenario *scenario) {
    if (!scenario->hardware.set)
        return "none";
    return scenario->hardware.preset != NULL ? scenario->hardware.preset : "custom";
}

/* --- summary table --- */

char *sim_report_format_summary(const SimJob *job) {
    const PpScenario *sc = job->scenario;
    const SimResult  *res = job->result;
    GString          *out = g_string_new(NULL);
    char              ms[64], ms2[64];

    g_string_append_printf(out, "scenario    %s\n", sc->path);
    g_string_append_printf(out, "model       %s (L=%d, C=%d, NH=%d, T=%d, V=%d)\n",
                           sim_report_model_name(sc), sc->model.layers, sc->model.hidden,
                           sc->model.heads, sc->model.seq_len, sc->model.vocab);
    if (sc->hardware.set)
        g_string_append_printf(out, "hardware    %s (%.1f TFLOP/s, %s, %s)\n",
                               sim_report_hardware_name(sc), sc->hardware.peak_flops / 1e12,
                               sc->hardware.nvlink ? "NVLink" : "PCIe",
                               sc->costs.set ? "explicit [costs]" : "analytic cost model");
    else
        g_string_append(out, "hardware    none (explicit [costs])\n");
    g_string_append_printf(out,
                           "schedule    %s (%s), N=%d, v=%d, m/a=%d (micro-batches per "
                           "update)\n",
                           job->schedule->kind, sc->pipeline.mode, job->schedule->n_stages,
                           job->schedule->n_chunks, sc->pipeline.mb_per_step);
    g_autofree char *context = sc->parallel.context > 1
                                   ? g_strdup_printf("context %d x ", sc->parallel.context)
                                   : g_strdup("");
    g_string_append_printf(out,
                           "layout      %" G_GINT64_FORMAT " GPUs = data %d x tensor %d x "
                           "%sstages %d; sequence parallel %s, recompute %s, distributed "
                           "optimizer %s\n",
                           res->gpus, job->layout.data, sc->parallel.tensor, context,
                           job->schedule->n_stages, sc->parallel.sequence_parallel ? "on" : "off",
                           sc->model.recompute, sc->parallel.distributed_optimizer ? "on" : "off");
    g_string_append_printf(out,
                           "batch       %d sequences per micro-batch, %d per step, %d steps, "
                           "%d micro-batches simulated\n",
                           sc->pipeline.microbatch_size, sc->training.global_batch,
                           job->schedule->n_steps, job->schedule->n_mb);
    g_string_append(out, "\n");
    g_string_append_printf(out, "step time   %s ms (makespan %s ms)\n",
                           sim_report_format_ms(ms, sizeof ms, res->step_time_ns),
                           sim_report_format_ms(ms2, sizeof ms2, res->makespan_ns));
    g_string_append_printf(out, "throughput  %.1f tokens/s, %.3f samples/s\n",
                           res->throughput_tokens_per_s, res->throughput_samples_per_s);
    /* Two different figures (docs/simulator.md, the summary): the bottleneck stage's idle share
     * of one steady step, and every stage's busy share of the whole run. */
    g_string_append_printf(out,
                           "bubble      %.4f (schedule bubble: idle share of the busiest "
                           "stage's step, (C - m(F+B+W))/C)\n",
                           res->bubble_fraction);
    g_string_append_printf(out,
                           "efficiency  %.4f (mean stage utilisation over the whole run, fill, "
                           "drain and lighter stages included: busy / (N x makespan))\n",
                           res->efficiency);
    if (res->mfu > 0.0)
        g_string_append_printf(out, "MFU         %.4f (HFU %.4f, %.1f model TFLOP/s per GPU)\n",
                               res->mfu, res->hfu, res->tflops_per_gpu);
    else
        g_string_append(out, "MFU         n/a (no FLOP rate)\n");
    g_string_append_printf(out, "\xce\x94max        %d\n", res->delta_max);
    g_string_append_printf(out, "peak memory %.3f GiB allocated, %.3f GiB reserved",
                           (double)res->peak_memory_bytes / SIM_REPORT_GIB,
                           (double)pp_memory_reserved_bytes(res->peak_memory_bytes) /
                               SIM_REPORT_GIB);
    g_string_append_c(out, '\n');
    if (sc->hardware.set && res->peak_memory_bytes > sc->hardware.memory_bytes) {
        g_autofree char *over = pp_memory_over(res->peak_memory_bytes, sc->hardware.memory_bytes);
        g_autofree char *advice = pp_memory_advice(sc);
        g_string_append_printf(out, "            it would not fit: %s; %s\n", over, advice);
    }
    g_string_append(out, "\n");
    /* "\xce\x94" is Δ: two bytes, one column, hence one pad space more in that header. The
     * last three columns split the peak (GiB at its moment): weights + gradients + optimizer
     * state, stashed weight copies, live activations. */
    g_string_append(out, "stage     busy ms     span ms  peak in-flight  peak mem GiB  "
                         "\xce\x94max  versions   w+g+o   stash     act\n");
    for (int32_t s = 0; s < res->n_stages; s++) {
        const SimStageResult *st = &res->stages[s];
        g_string_append_printf(out, "%5d %11s %11s %15d %13.3f %5d %9d %7.3f %7.3f %7.3f\n",
                               st->stage, sim_report_format_ms(ms, sizeof ms, st->busy_ns),
                               sim_report_format_ms(ms2, sizeof ms2, st->span_ns),
                               st->peak_inflight, (double)st->peak_memory_bytes / SIM_REPORT_GIB,
                               st->delta_max, st->weight_versions,
                               (double)job->cost->static_bytes[s] / SIM_REPORT_GIB,
                               (double)st->stash_peak_bytes / SIM_REPORT_GIB,
                               (double)st->activation_peak_bytes / SIM_REPORT_GIB);
    }
    return g_string_free(out, FALSE);
}

/* --- JSON --- */

JsonNode *sim_report_build_json(const SimJob *job) {
    const PpScenario   *sc = job->scenario;
    const SimResult    *res = job->result;
    const SimCostModel *cost = job->cost;
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "scenario");
    json_builder_add_string_value(b, sc->path);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, sim_report_model_name(sc));
    json_builder_set_member_name(b, "hardware");
    json_builder_add_string_value(b, sim_report_hardware_name(sc));
    json_builder_set_member_name(b, "schedule");
    json_builder_add_string_value(b, job->schedule->kind);
    json_builder_set_member_name(b, "mode");
    json_builder_add_string_value(b, sc->pipeline.mode);

    const struct {
        const char *name;
        int64_t     value;
    } ints[] = {
        {"n_stages", job->schedule->n_stages},
        {"chunks", job->schedule->n_chunks},
        {"microbatches", sc->pipeline.microbatches},
        {"accumulation", sc->pipeline.accumulation},
        {"microbatch_size", sc->pipeline.microbatch_size},
        {"global_batch", sc->training.global_batch},
        {"steps", job->schedule->n_steps},
        {"microbatches_simulated", job->schedule->n_mb},
        {"step_time_ns", res->step_time_ns},
        {"makespan_ns", res->makespan_ns},
        {"delta_max", res->delta_max},
        {"peak_memory_bytes", res->peak_memory_bytes},
        {"peak_reserved_bytes", pp_memory_reserved_bytes(res->peak_memory_bytes)},
        {"ops_simulated", res->n_ops_simulated},
        {"gpus", res->gpus},
        {"data_parallel", job->layout.data},
        {"tensor_parallel", sc->parallel.tensor},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(ints); i++) {
        json_builder_set_member_name(b, ints[i].name);
        json_builder_add_int_value(b, ints[i].value);
    }
    const struct {
        const char *name;
        double      value;
    } reals[] = {
        {"throughput_tokens_per_s", res->throughput_tokens_per_s},
        {"throughput_samples_per_s", res->throughput_samples_per_s},
        {"bubble_fraction", res->bubble_fraction},
        {"efficiency", res->efficiency},
        {"mfu", res->mfu},
        {"hfu", res->hfu},
        {"tflops_per_gpu", res->tflops_per_gpu},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(reals); i++) {
        json_builder_set_member_name(b, reals[i].name);
        json_builder_add_double_value(b, reals[i].value);
    }

    json_builder_set_member_name(b, "stages");
    json_builder_begin_array(b);
    for (int32_t s = 0; s < res->n_stages; s++) {
        const SimStageResult *st = &res->stages[s];
        const struct {
            const char *name;
            int64_t     value;
        } fields[] = {
            {"stage", st->stage},
            {"busy_ns", st->busy_ns},
            {"span_ns", st->span_ns},
            {"peak_inflight", st->peak_inflight},
            {"peak_memory_bytes", st->peak_memory_bytes},
            {"peak_activation_bytes", st->peak_activation_bytes},
            {"delta_max", st->delta_max},
            {"delay_max", st->delay_max},
            {"weight_versions", st->weight_versions},
            {"weights_bytes", cost->weights_bytes[s]},
            {"grads_bytes", cost->grads_bytes[s]},
            {"optim_bytes", cost->optim_bytes[s]},
            {"buffer_bytes", cost->buffer_bytes[s]},
            {"stash_peak_bytes", st->stash_peak_bytes},
            {"activation_peak_bytes", st->activation_peak_bytes},
            {"peak_stash_bytes", st->peak_stash_bytes},
            {"peak_time_ns", st->peak_time_ns},
            {"dp_wait_ns", st->dp_wait_ns},
        };
        json_builder_begin_object(b);
        for (size_t i = 0; i < G_N_ELEMENTS(fields); i++) {
            json_builder_set_member_name(b, fields[i].name);
            json_builder_add_int_value(b, fields[i].value);
        }
        /* The peak by category: the six parts add up to total_bytes; reserved_bytes is what
         * the caching allocator holds for it (pp_memory_reserved_bytes()). */
        const struct {
            const char *name;
            int64_t     value;
        } memory[] = {
            {"total_bytes", st->peak_memory_bytes},
            {"time_ns", st->peak_time_ns},
            {"weights_bytes", cost->weights_bytes[s]},
            {"grads_bytes", cost->grads_bytes[s]},
            {"optim_bytes", cost->optim_bytes[s]},
            {"buffer_bytes", cost->buffer_bytes[s]},
            {"stash_bytes", st->stash_peak_bytes},
            {"activation_bytes", st->activation_peak_bytes},
            {"reserved_bytes", pp_memory_reserved_bytes(st->peak_memory_bytes)},
        };
        json_builder_set_member_name(b, "memory");
        json_builder_begin_object(b);
        for (size_t i = 0; i < G_N_ELEMENTS(memory); i++) {
            json_builder_set_member_name(b, memory[i].name);
            json_builder_add_int_value(b, memory[i].value);
        }
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* --- files --- */

/* Closes the memory stream @fp (owning *@buf of *@len bytes) and writes it to @path. */
static gboolean sim_report_flush_memstream(FILE *fp, char **buf, size_t *len, const char *path,
                                           GError **error) {
    int      rc = fclose(fp);
    gboolean ok = FALSE;
    if (rc != 0)
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot build %s: %s", path,
                    g_strerror(errno));
    else
        ok = pp_file_write(path, *buf, *len, error);
    free(*buf);
    *buf = NULL;
    return ok;
}

/* Writes one CSV string field (quoted by libcsv) followed by @sep. */
static void sim_report_csv_string(FILE *fp, const char *value, char sep) {
    csv_fwrite(fp, value, strlen(value));
    fputc(sep, fp);
}

static gboolean sim_report_write_stages_csv(const SimJob *job, const char *path, GError **error) {
    char  *buf = NULL;
    size_t len = 0;
    FILE  *fp = open_memstream(&buf, &len);
    PP_ASSERT(fp != NULL);
    fputs("stage,busy_ns,span_ns,peak_inflight,peak_memory_bytes,peak_activation_bytes,"
          "delta_max,delay_max,weight_versions,weights_bytes,grads_bytes,optim_bytes,"
          "stash_peak_bytes,activation_peak_bytes,peak_stash_bytes,peak_time_ns,buffer_bytes,"
          "peak_reserved_bytes\n",
          fp);
    for (int32_t s = 0; s < job->result->n_stages; s++) {
        const SimStageResult *st = &job->result->stages[s];
        fprintf(fp,
                "%d,%lld,%lld,%d,%lld,%lld,%d,%d,%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld\n",
                st->stage, (long long)st->busy_ns, (long long)st->span_ns, st->peak_inflight,
                (long long)st->peak_memory_bytes, (long long)st->peak_activation_bytes,
                st->delta_max, st->delay_max, st->weight_versions,
                (long long)job->cost->weights_bytes[s], (long long)job->cost->grads_bytes[s],
                (long long)job->cost->optim_bytes[s], (long long)st->stash_peak_bytes,
                (long long)st->activation_peak_bytes, (long long)st->peak_stash_bytes,
                (long long)st->peak_time_ns, (long long)job->cost->buffer_bytes[s],
                (long long)pp_memory_reserved_bytes(st->peak_memory_bytes));
    }
    return sim_report_flush_memstream(fp, &buf, &len, path, error);
}

/* memory.csv: the memory timeline, one row per change in the engine's event order. */
static gboolean sim_report_write_memory_csv(const SimJob *job, const char *path, GError **error) {
    const SimResult *res = job->result;
    char            *buf = NULL;
    size_t           len = 0;
    FILE            *fp = open_memstream(&buf, &len);
    PP_ASSERT(fp != NULL);
    fputs("stage,time_ns,activation_bytes,stash_bytes,total_bytes\n", fp);
    for (int64_t i = 0; i < res->n_memory_rows; i++) {
        const SimMemoryRow *row = &res->memory_timeline[i];
        fprintf(fp, "%d,%lld,%lld,%lld,%lld\n", row->stage, (long long)row->time_ns,
                (long long)row->activation_bytes, (long long)row->stash_bytes,
                (long long)row->total_bytes);
    }
    return sim_report_flush_memstream(fp, &buf, &len, path, error);
}

static gboolean sim_report_write_summary_csv(const SimJob *job, const char *path, GError **error) {
    const PpScenario *sc = job->scenario;
    const SimResult  *res = job->result;
    char              d[5][G_ASCII_DTOSTR_BUF_SIZE];
    char             *buf = NULL;
    size_t            len = 0;
    FILE             *fp = open_memstream(&buf, &len);
    PP_ASSERT(fp != NULL);
    fputs("schedule,model,hardware,mode,n_stages,chunks,microbatches,accumulation,"
          "microbatch_size,global_batch,steps,step_time_ns,makespan_ns,"
          "throughput_tokens_per_s,throughput_samples_per_s,bubble_fraction,efficiency,mfu,"
          "delta_max,peak_memory_bytes\n",
          fp);
    sim_report_csv_string(fp, job->schedule->kind, ',');
    sim_report_csv_string(fp, sim_report_model_name(sc), ',');
    sim_report_csv_string(fp, sim_report_hardware_name(sc), ',');
    sim_report_csv_string(fp, sc->pipeline.mode, ',');
    fprintf(fp, "%d,%d,%d,%d,%d,%d,%d,%lld,%lld,%s,%s,%s,%s,%s,%d,%lld\n", job->schedule->n_stages,
            job->schedule->n_chunks, sc->pipeline.microbatches, sc->pipeline.accumulation,
            sc->pipeline.microbatch_size, sc->training.global_batch, job->schedule->n_steps,
            (long long)res->step_time_ns, (long long)res->makespan_ns,
            sim_report_format_double(d[0], res->throughput_tokens_per_s),
            sim_report_format_double(d[1], res->throughput_samples_per_s),
            sim_report_format_double(d[2], res->bubble_fraction),
            sim_report_format_double(d[3], res->efficiency),
            sim_report_format_double(d[4], res->mfu), res->delta_max,
            (long long)res->peak_memory_bytes);
    return sim_report_flush_memstream(fp, &buf, &len, path, error);
}

gboolean sim_report_make_out_dir(const char *dir, GError **error) {
    /* What pacer-train writes and pacer-sim never does (exec/train/exec-train-out.c). */
    static const char *const train_marks[] = {"log.csv", "checkpoints"};
    for (size_t i = 0; i < G_N_ELEMENTS(train_marks); i++) {
        g_autofree char *path = g_build_filename(dir, train_marks[i], NULL);
        if (g_file_test(path, G_FILE_TEST_EXISTS)) {
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_EXISTS,
                        "--out %s holds a pacer-train run (%s): pacer-sim would overwrite its "
                        "ops.csv and scenario.ini, so nothing was written. Give a folder of its "
                        "own, for example --out %s/pred",
                        dir, train_marks[i], dir);
            return FALSE;
        }
    }
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN, "cannot create directory %s: %s", dir,
                    g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}

gboolean sim_report_write_dir(const SimJob *job, const char *dir, GError **error) {
    if (!sim_report_make_out_dir(dir, error))
        return FALSE;
    g_autofree char *ops = g_build_filename(dir, "ops.csv", NULL);
    g_autofree char *stages = g_build_filename(dir, "stages.csv", NULL);
    g_autofree char *summary = g_build_filename(dir, "summary.csv", NULL);
    g_autofree char *memory = g_build_filename(dir, "memory.csv", NULL);
    g_autofree char *trace = g_build_filename(dir, "trace.json", NULL);
    g_autofree char *ini = g_build_filename(dir, "scenario.ini", NULL);
    g_autofree char *ini_text = pp_scenario_to_data(job->scenario);
    /* sim_job_new(..., for_out = TRUE, ...) */
    PP_ASSERT(job->result->trace != NULL && job->result->memory_timeline != NULL);
    return pp_trace_write_csv(job->result->trace, ops, error) &&
           sim_report_write_stages_csv(job, stages, error) &&
           sim_report_write_summary_csv(job, summary, error) &&
           sim_report_write_memory_csv(job, memory, error) &&
           sim_perfetto_write(job->schedule, job->cost, job->result, trace, error) &&
           pp_file_write(ini, ini_text, strlen(ini_text), error);
}
