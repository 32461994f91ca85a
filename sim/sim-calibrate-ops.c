/* SPDX-License-Identifier: MIT
 * sim-calibrate-ops.c: the operator cost model's constants fitted to measured op times
 * (sim-calibrate-ops.h). The model is not linear in them (a product's time is its FLOPs over
 * kernel_eff_max x K / (K + kernel_eff_half_hidden) x its shape's losses, a pass the larger of
 * its device time and its operators x launch_us), so the fit is a coordinate descent: golden-
 * section searches of each constant in turn, over a logarithmic scale, until a round moves
 * none of them. Every candidate is priced by the simulator's own operator model, so the fit
 * and the prediction cannot disagree about the operators.
 */
#include "sim-calibrate-ops.h"

#include <math.h>

#include "pp-error.h"
#include "sim-cost.h"

/* Rounds of the coordinate descent and golden-section steps per search (each narrows the
 * interval to 0.618 of itself: 60 steps reach 1e-12 of a decade's width). */
#define SIM_CAL_OPS_ROUNDS 40
#define SIM_CAL_OPS_STEPS  60
/* The searched ranges: kernel_eff_max in [1e-3, 1], kernel_eff_half_hidden and launch_us
 * each in [0, 2^20] (u = log(1 + x)). */
#define SIM_CAL_OPS_EFF_MIN 1e-3
#define SIM_CAL_OPS_MAX     1048576.0

typedef struct {
    PpScenario          **at; /* (n_sizes) the base scenario at each sample size */
    int32_t               n_sizes;
    const SimCalOpSample *samples;
    int32_t               n;
    int32_t              *size_of; /* (n) index into at */
} SimCalOpsFit;

/* The constants as searched: x[0] = log(kernel_eff_max), x[1] = log(1 + half_hidden), x[2] =
 * log(1 + launch_us). */
static void sim_cal_ops_apply(const SimCalOpsFit *f, const double x[3]) {
    for (int32_t k = 0; k < f->n_sizes; k++) {
        PpHardwareParams *hw = &f->at[k]->hardware;
        hw->kernel_eff_max = exp(x[0]);
        hw->kernel_eff_half_hidden = expm1(x[1]);
        hw->launch_ns = llround(expm1(x[2]) * 1e3);
    }
}

/* @cost's time of @kind on @stage (calibrate takes one chunk per stage). */
static int64_t sim_cal_ops_pick(const SimCostModel *cost, int32_t stage, PpOpKind kind) {
    return kind == PP_OP_FORWARD    ? cost->f_ns[stage]
           : kind == PP_OP_BACKWARD ? cost->b_ns[stage]
           : kind == PP_OP_WEIGHT   ? cost->w_ns[stage]
                                    : sim_cost_bw_ns(cost, stage);
}

/* @base at micro-batch size @mb_size (the global batch following), its layers split as @split
 * (n_stages). */
static PpScenario *sim_cal_ops_at(const PpScenario *base, const int32_t *split, int32_t mb_size,
                                  GError **error) {
    PpScenarioDelta delta = {.microbatch_size = mb_size,
                             .global_batch = mb_size * base->pipeline.mb_per_step};
    PpScenario     *sc = pp_scenario_with(base, &delta, error);
    if (sc == NULL)
        return NULL;
    const int32_t n = sc->pipeline.stages;
    g_free(sc->run.layers_per_stage);
    sc->run.layers_per_stage = g_memdup2(split, sizeof(int32_t) * (size_t)n);
    sc->run.n_layers_per_stage = n;
    return sc;
}

/* Predicted ns of every sample at the applied constants into @pred (n). */
static gboolean sim_cal_ops_predict(const SimCalOpsFit *f, double *pred, GError **error) {
    for (int32_t k = 0; k < f->n_sizes; k++) {
        g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(f->at[k], error);
        if (cost == NULL)
            return FALSE;
        for (int32_t i = 0; i < f->n; i++) {
            const SimCalOpSample *s = &f->samples[i];
            if (f->size_of[i] != k)
                continue;
            pred[i] = (double)sim_cal_ops_pick(cost, s->stage, s->kind);
        }
    }
    return TRUE;
}

/* Sum of squared relative errors at @x. */
static gboolean sim_cal_ops_loss(const SimCalOpsFit *f, const double x[3], double *pred,
                                 double *loss, GError **error) {
    sim_cal_ops_apply(f, x);
    if (!sim_cal_ops_predict(f, pred, error))
        return FALSE;
    *loss = 0.0;
    for (int32_t i = 0; i < f->n; i++) {
        double r = pred[i] / (double)f->samples[i].ns - 1.0;
        *loss += r * r;
    }
    return TRUE;
}

/* Golden-section search of @x + t @d over t in [@lo, @hi], moving @x to the best point seen
 * (a flat or bumpy stretch cannot make it worse than where it started). */
static gboolean sim_cal_ops_search(const SimCalOpsFit *f, double x[3], const double d[3], double lo,
                                   double hi, double *pred, double *best, GError **error) {
    const double g = (sqrt(5.0) - 1.0) / 2.0;
    double       a = lo, b = hi, t[2] = {b - g * (b - a), a + g * (b - a)}, l[2] = {NAN, NAN};
    double       best_t = 0.0;
    for (int i = 0; i <= SIM_CAL_OPS_STEPS; i++) {
        /* Price the points not yet priced (both at the start, then the new one). */
        for (int k = 0; k < 2; k++) {
            if (!isnan(l[k]))
                continue;
            double y[3];
            for (int c = 0; c < 3; c++)
                y[c] = x[c] + t[k] * d[c];
            if (!sim_cal_ops_loss(f, y, pred, &l[k], error))
                return FALSE;
            if (l[k] < *best) {
                *best = l[k];
                best_t = t[k];
            }
        }
        if (i == SIM_CAL_OPS_STEPS)
            break;
        if (l[0] <= l[1]) {
            b = t[1];
            t[1] = t[0];
            l[1] = l[0];
            t[0] = b - g * (b - a);
            l[0] = NAN;
        } else {
            a = t[0];
            t[0] = t[1];
            l[0] = l[1];
            t[1] = a + g * (b - a);
            l[1] = NAN;
        }
    }
    for (int c = 0; c < 3; c++)
        x[c] += best_t * d[c];
    return TRUE;
}

/* The range of t that keeps @x + t @d inside [@lo, @hi] on every coordinate. */
static void sim_cal_ops_span(const double x[3], const double d[3], const double lo[3],
                             const double hi[3], double *t_lo, double *t_hi) {
    *t_lo = -G_MAXDOUBLE;
    *t_hi = G_MAXDOUBLE;
    for (int c = 0; c < 3; c++) {
        if (d[c] == 0.0)
            continue;
        double p = (lo[c] - x[c]) / d[c], q = (hi[c] - x[c]) / d[c];
        *t_lo = MAX(*t_lo, MIN(p, q));
        *t_hi = MIN(*t_hi, MAX(p, q));
    }
}

static void sim_cal_ops_clear(SimCalOpsFit *f) {
    for (int32_t k = 0; f->at != NULL && k < f->n_sizes; k++)
        pp_scenario_free(f->at[k]);
    g_free(f->at);
    g_free(f->size_of);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SimCalOpsFit, sim_cal_ops_clear)

gboolean sim_calibrate_fit_operators(const PpScenario *base, const int32_t *split,
                                     const SimCalOpSample *samples, int32_t n, SimCalOperators *out,
                                     GError **error) {
    PP_ASSERT(pp_scenario_cost_operators(base));
    *out = (SimCalOperators){.n_samples = n};
    if (n == 0)
        return TRUE;
    g_auto(SimCalOpsFit) f = {.samples = samples, .n = n};
    f.at = g_new0(PpScenario *, n);
    f.size_of = g_new(int32_t, n);
    for (int32_t i = 0; i < n; i++) {
        int32_t k = 0;
        while (k < f.n_sizes && f.at[k]->pipeline.microbatch_size != samples[i].mb_size)
            k++;
        if (k == f.n_sizes) {
            f.at[k] = sim_cal_ops_at(base, split, samples[i].mb_size, error);
            if (f.at[k] == NULL)
                return FALSE;
            f.n_sizes++;
        }
        f.size_of[i] = k;
    }
    /* Start from the scenario's own constants. */
    const PpHardwareParams *hw = &base->hardware;
    double                  x[3] = {log(CLAMP(hw->kernel_eff_max, SIM_CAL_OPS_EFF_MIN, 1.0)),
                                    log1p(CLAMP(hw->kernel_eff_half_hidden, 0.0, SIM_CAL_OPS_MAX)),
                                    log1p(CLAMP((double)hw->launch_ns / 1e3, 0.0, SIM_CAL_OPS_MAX))};
    const double            lo[3] = {log(SIM_CAL_OPS_EFF_MIN), 0.0, 0.0};
    const double            hi[3] = {0.0, log1p(SIM_CAL_OPS_MAX), log1p(SIM_CAL_OPS_MAX)};
    g_autofree double      *pred = g_new(double, n), *bare = g_new(double, n);
    double                  best = 0.0;
    if (!sim_cal_ops_loss(&f, x, pred, &best, error))
        return FALSE;
    for (int r = 0; r < SIM_CAL_OPS_ROUNDS; r++) {
        const double before = best, start[3] = {x[0], x[1], x[2]};
        double       t_lo = 0, t_hi = 0;
        for (int c = 0; c < 3; c++) {
            double d[3] = {0, 0, 0};
            d[c] = 1.0;
            sim_cal_ops_span(x, d, lo, hi, &t_lo, &t_hi);
            if (!sim_cal_ops_search(&f, x, d, t_lo, t_hi, pred, &best, error))
                return FALSE;
        }
        /* Then along the round's move (Powell's extra direction): the ceiling and the
         * short-reduction term trade against each other along a narrow valley. */
        double d[3] = {x[0] - start[0], x[1] - start[1], x[2] - start[2]};
        if (d[0] != 0.0 || d[1] != 0.0 || d[2] != 0.0) {
            sim_cal_ops_span(x, d, lo, hi, &t_lo, &t_hi);
            if (!sim_cal_ops_search(&f, x, d, MAX(t_lo, -1.0), MIN(t_hi, 16.0), pred, &best, error))
                return FALSE;
        }
        if (!(best < before))
            break;
    }
    /* The fit, and which passes its host floor bounds (those it prices above the same
     * constants without a floor). */
    double loss = 0.0, bare_loss = 0.0;
    double y[3] = {x[0], x[1], 0.0};
    if (!sim_cal_ops_loss(&f, y, bare, &bare_loss, error) ||
        !sim_cal_ops_loss(&f, x, pred, &loss, error))
        return FALSE;
    for (int32_t i = 0; i < n; i++)
        out->n_launch_bound += pred[i] > bare[i];
    out->fitted = TRUE;
    out->kernel_eff_max = f.at[0]->hardware.kernel_eff_max;
    out->kernel_eff_half_hidden = f.at[0]->hardware.kernel_eff_half_hidden;
    out->launch_ns = f.at[0]->hardware.launch_ns;
    out->n_sizes = f.n_sizes;
    out->rms_rel_err = sqrt(loss / n);
    return TRUE;
}

int64_t sim_calibrate_operators_ns(const PpScenario *base, const int32_t *split,
                                   const SimCalOperators *op, int32_t mb_size, int32_t stage,
                                   PpOpKind kind) {
    PP_ASSERT(op->fitted);
    g_autoptr(PpScenario) sc = sim_cal_ops_at(base, split, mb_size, NULL);
    if (sc == NULL)
        return -1;
    sc->hardware.kernel_eff_max = op->kernel_eff_max;
    sc->hardware.kernel_eff_half_hidden = op->kernel_eff_half_hidden;
    sc->hardware.launch_ns = op->launch_ns;
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, NULL);
    return cost != NULL ? sim_cal_ops_pick(cost, stage, kind) : -1;
}
