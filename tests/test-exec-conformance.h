/* SPDX-License-Identifier: MIT
 * test-exec-conformance.h: the backend conformance suite (test-exec-conformance.c) and what it
 * asks of the backend under test. Each program of the suite links the checks and one backend's
 * file (test-exec-backend-NAME.c), which defines test_backend: how the tiny pipeline selects the
 * backend, the backend's own tolerances and what it reports, how the suite is run (the CUDA
 * backend's skips with 77 without a device), and the checks only that backend has.
 */
#pragma once

#include <check.h>
#include <glib.h>

#include "test-exec-util.h"

G_BEGIN_DECLS

typedef struct _TestBackend TestBackend;

struct _TestBackend {
    const char *name; /* run.backend, e.g. "cpu" */
    /* Sets the fields of @p (test_exec_tiny_params(): the CPU backend) that select this
     * backend, computing in fp32. */
    void (*select)(ExecPipelineParams *p);
    /* The same for pacer-train: "section.key=value" settings, NULL-terminated. */
    const char *const *train_sets;
    /* How early a dependency's end may appear before its consumer's start in the measured
     * trace (ns): 0 with one clock for all stages; event timers of different stages read
     * against separate anchors need a few µs. */
    int64_t cross_stage_slack_ns;
    /* The backend accounts the memory of its stages (exec_pipeline_memory(), memory.csv). */
    gboolean accounts_memory;
    /* Check's per-test timeout (s) of the suite's cases. */
    double timeout_s;
    /* Adds the checks only this backend has to @tc. */
    void (*add_own)(TCase *tc);
    /* Runs @suite and returns main()'s exit status (77: the backend cannot run here). */
    int (*run)(Suite *suite);
};

/* The backend under test (defined by the backend's file). */
extern const TestBackend test_backend;

/* test_exec_tiny_params(@shape) with test_backend selected. */
ExecPipelineParams test_conf_params(const PpSchedule *shape);

/* Runs case @c with @p (its shape set to the case's schedule, no clipping: clipping is per
 * stage, so only without it is a split run the same math) and the gradient tap: returns
 * the mean loss; *@grads gets every gradient of the last update (by tensor name, gathered at
 * U), *@params every parameter after the run, *@res_out (nullable; transfer full) the result. */
double test_conf_run_collect(const TestExecCase *c, ExecPipelineParams p, ExecRunResult **res_out,
                             GHashTable **grads, GHashTable **params);

/* @backend_sets (test_backend.train_sets) followed by @sets (nullable), NULL-terminated.
 * Returns: (transfer container): the strings stay the callers'. */
const char **test_conf_sets(const char *const *backend_sets, const char *const *sets);

G_END_DECLS
