/* SPDX-License-Identifier: MIT
 * sim-calibrate-ops.h: `pacer-sim calibrate` for a scenario whose cost model is the operator
 * model (hardware.cost_model = operators; docs/cost-model.md, The operator cost model): the
 * constants a hardware preset fits — the matmul ceiling kernel_eff_max, the short-reduction
 * term kernel_eff_half_hidden and the host floor launch_us — fitted to the measured op times
 * calibrate pools (sim-calibrate.c), each predicted by the simulator's own operator model.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "pp-types.h"
#include "pp-scenario.h"

G_BEGIN_DECLS

/* One measured time the fit matches: the typical duration of @kind (F, B, W or a fused BW) on
 * @stage at micro-batch size @mb_size (sim-calibrate.c's typical time, dispatch excluded). */
typedef struct {
    int32_t  mb_size; /* sequences */
    int32_t  stage;
    PpOpKind kind;
    int64_t  ns;
} SimCalOpSample;

/* The fitted constants. */
typedef struct {
    gboolean fitted;
    double   kernel_eff_max;         /* the matmul ceiling, in (0, 1] */
    double   kernel_eff_half_hidden; /* reduction length K at which a product halves, >= 0 */
    int64_t  launch_ns;              /* host time per operator launched */
    int32_t  n_samples;              /* measured times matched */
    int32_t  n_launch_bound;         /* of them, passes the host floor bounds at the fit: 0
                                        means launch_ns is only an upper bound */
    int32_t n_sizes;                 /* micro-batch sizes among them */
    double  rms_rel_err;             /* root mean square of predicted / measured - 1 */
} SimCalOperators;

/* Fits @out to @samples (@n of them, micro-batch sizes of @base's model and pipeline) by least
 * squares in the relative error, the operator model evaluated by sim_cost_new_from_scenario()
 * on @base at each size with the candidate constants and @split (n_stages: the layers per
 * stage the measured run had); kernel_eff_half_tokens, the bandwidths
 * and the rest of [hardware] stay @base's. Returns FALSE with @error when @base cannot be
 * simulated at a sample's size. */
gboolean sim_calibrate_fit_operators(const PpScenario *base, const int32_t *split,
                                     const SimCalOpSample *samples, int32_t n, SimCalOperators *out,
                                     GError **error);

/* ns of @kind (F, B, W or BW) on @stage for micro-batches of @mb_size sequences by the operator
 * model on @base split as @split with @op's constants (calibrate's scaling to a size no trace ran);
 * -1 when
 * @base cannot be simulated at that size. */
int64_t sim_calibrate_operators_ns(const PpScenario *base, const int32_t *split,
                                   const SimCalOperators *op, int32_t mb_size, int32_t stage,
                                   PpOpKind kind);

G_END_DECLS
