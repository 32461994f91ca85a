/* SPDX-License-Identifier: MIT
 * exec-train-segment.c: one segment of pacer-train (exec-train.h): the schedule of its length,
 * its replay (or PACI's policy live) on the pipeline from its first step's data position, and
 * its per-step log columns: mean loss, grad norm, the lr stage 0 applied, Δmax, tokens/s.
 */
#include "exec-train-private.h"

#include <math.h>

#include "pp-error.h"

struct _ExecTrainSchedules {
    const PpScenario *sc;
    PpScheduleParams  params;   /* the scenario's, n_steps set per length */
    GHashTable       *by_steps; /* n_steps -> PpSchedule */
};

ExecTrainSchedules *exec_train_schedules_new(const PpScenario *sc) {
    ExecTrainSchedules *schedules = g_new0(ExecTrainSchedules, 1);
    schedules->sc = sc;
    pp_scenario_schedule_params(sc, &schedules->params);
    schedules->by_steps = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                                (GDestroyNotify)pp_schedule_free);
    return schedules;
}

void exec_train_schedules_free(ExecTrainSchedules *schedules) {
    if (!schedules)
        return;
    g_hash_table_unref(schedules->by_steps);
    g_free(schedules);
}

const PpSchedule *exec_train_schedule(ExecTrainSchedules *schedules, int32_t n_steps,
                                      GError **error) {
    PpSchedule *sched = g_hash_table_lookup(schedules->by_steps, GINT_TO_POINTER(n_steps));
    if (sched)
        return sched;
    schedules->params.n_steps = n_steps;
    sched = pp_schedule_new(&schedules->params, error);
    if (!sched)
        return NULL;
    g_hash_table_insert(schedules->by_steps, GINT_TO_POINTER(n_steps), sched);
    /* Data positions are global: micro-batch index = step * mb_per_step + mb. */
    if (sched->n_mb != n_steps * sched->mb_per_step) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: schedule %s runs %d micro-batches for %d steps of %d; pacer-train "
                    "needs steps x micro-batches per step (a custom order must cover "
                    "training.steps, or set run.eval_every/checkpoint_every to match it)",
                    schedules->sc->path, sched->kind, sched->n_mb, n_steps, sched->mb_per_step);
        return NULL;
    }
    return sched;
}

int32_t exec_train_next_boundary(const PpScenario *sc, int32_t step) {
    int32_t       end = sc->training.steps;
    const int32_t every[] = {sc->run.eval_every, sc->run.checkpoint_every};
    for (size_t i = 0; i < G_N_ELEMENTS(every); i++) {
        if (every[i] > 0) {
            int32_t next = (step / every[i] + 1) * every[i];
            end = MIN(end, next);
        }
    }
    return end;
}

/* The mean loss of the micro-batches of every replica that step @k of @res consumed, summed
 * in the order of their global micro-batches (replica, then micro-batch: one pipeline running
 * D times the micro-batches sums the same losses in the same order); NAN when none ran. */
static double exec_train_step_loss(const ExecRunResult *res, int32_t k) {
    double  sum = 0.0;
    int32_t count = 0;
    for (int32_t d = 0; d < res->n_replicas; d++) {
        for (int32_t mb = 0; mb < res->n_mb; mb++) {
            if (res->mb_step[mb] != k)
                continue;
            sum += res->losses[(size_t)d * res->n_mb + mb];
            count++;
        }
    }
    return count > 0 ? sum / count : NAN;
}

/* Fills the log columns of @rows (seg) from the segment's result @res of program @ran. */
static void exec_train_segment_rows(const ExecTrainLive *live, const PpSchedule *ran,
                                    const ExecRunResult *res, ExecTrainRow *rows) {
    for (int32_t k = 0; k < live->seg; k++) {
        double sq = 0.0;
        for (int32_t s = 0; s < ran->n_stages; s++)
            if (k < res->n_updates[s])
                sq += res->grad_norm[s][k] * res->grad_norm[s][k];
        /* Δ of the program that ran (exec.c asserted every op's version against it). */
        int32_t delta = 0;
        for (int32_t mb = 0; mb < res->n_mb; mb++) {
            if (res->mb_step[mb] != k)
                continue;
            for (int32_t vs = 0; vs < ran->n_vstages; vs++)
                delta = MAX(delta, pp_schedule_delta(ran, mb, vs));
        }
        int32_t step = live->step0 + k;
        rows[k] = (ExecTrainRow){
            .step = step,
            .tokens = (int64_t)(step + 1) * live->tokens_per_step,
            .train_loss = exec_train_step_loss(res, k),
            .val_loss = NAN,
            /* the lr stage 0 applied at its k-th update of the segment */
            .lr = k < res->n_updates[0] ? res->lr[0][k] : NAN,
            .grad_norm = sqrt(sq),
            .tokens_per_s = live->tokens_per_s[k],
            .delta_max = delta,
        };
    }
}

gboolean exec_train_run_segment(ExecPipeline *pipeline, const PpSchedule *sched,
                                const PpPipelineParams *dynamic, ExecTrainLive *live, int32_t step0,
                                int32_t seg, ExecTrainRow *rows, int32_t *n_skipped,
                                GError **error) {
    /* One pipeline's (one replica's) micro-batches per step. */
    int32_t mb_per_step = dynamic ? dynamic->mb_per_step : sched->mb_per_step;
    int64_t mb_offset = (int64_t)step0 * mb_per_step;
    exec_train_live_begin(live, step0, seg, exec_pipeline_version(pipeline, 0));
    /* Dynamic mode takes the scenario's resolved kind and accumulation: no program to build. */
    const ExecDynamicParams run = {.kind = dynamic ? dynamic->kind : NULL,
                                   .mb_per_step = mb_per_step,
                                   .n_mb = seg * mb_per_step};
    g_autoptr(PpSchedule) program = NULL;
    g_autoptr(ExecRunResult) res =
        dynamic ? exec_pipeline_run_dynamic(pipeline, &run, mb_offset, &program, error)
                : exec_pipeline_run(pipeline, sched, mb_offset, error);
    if (res) {
        exec_train_segment_rows(live, program ? program : sched, res, rows);
        *n_skipped += res->n_skipped;
    }
    exec_train_live_end(live);
    return res != NULL;
}
