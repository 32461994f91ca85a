/* SPDX-License-Identifier: MIT
 * exec-evaluate-val.c: pacer-train evaluate without --text: the checkpoint's run folder gives
 * its scenario.ini, the scenario its data (data_prepare_default(), the shards training used),
 * and the loss is taken over the validation windows that training validates on
 * (exec_train_validate(): the first run.eval_batches x pipeline.microbatch_size windows of T
 * tokens of the val shard).
 */
#include "exec-evaluate.h"

#include <string.h>

#include "data-corpus.h"
#include "data-shard.h"
#include "exec-checkpoint-unit.h"
#include "pp-error.h"
#include "pp-scenario.h"

char *exec_evaluate_run_scenario(const char *checkpoint, GError **error) {
    /* a run folder; a unit RUN/checkpoints/step-N; a file in a unit */
    g_autofree char *unit = g_file_test(checkpoint, G_FILE_TEST_IS_DIR)
                                ? g_strdup(checkpoint)
                                : g_path_get_dirname(checkpoint);
    g_autofree char *units = g_path_get_dirname(unit);
    g_autofree char *units_name = g_path_get_basename(units);
    g_autofree char *run = g_path_get_dirname(units);
    g_autofree char *own = g_build_filename(checkpoint, "scenario.ini", NULL);
    g_autofree char *of_unit = g_build_filename(run, "scenario.ini", NULL);
    if (g_file_test(checkpoint, G_FILE_TEST_IS_DIR) && g_file_test(own, G_FILE_TEST_IS_REGULAR))
        return g_steal_pointer(&own);
    if (strcmp(units_name, EXEC_CHECKPOINT_UNITS_DIR) == 0 &&
        g_file_test(of_unit, G_FILE_TEST_IS_REGULAR))
        return g_steal_pointer(&of_unit);
    g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_OPEN,
                "--checkpoint %s: no scenario.ini of a pacer-train run at %s or %s, so the run's "
                "validation split is unknown; evaluate a run folder, one of its "
                "checkpoints/step-NNNNNNNN, or give --text FILE",
                checkpoint, own, of_unit);
    return NULL;
}

gboolean exec_evaluate_val(const char *model, const char *scenario_path, int heads, int seq_len,
                           double *loss, int64_t *tokens, char **what, GError **error) {
    g_autoptr(PpScenario) sc = pp_scenario_load(scenario_path, NULL, error);
    if (!sc)
        return FALSE;
    DataCorpusParams data;
    data_params_init(&data);
    data.cache_dir = sc->data.cache_dir;
    data.paths = (const char *const *)sc->data.paths;
    data.val_fraction = sc->data.val_fraction;
    g_autofree char *train_path = NULL, *val_path = NULL;
    if (!data_prepare_default(&data, &train_path, &val_path, error))
        return FALSE;
    g_autoptr(DataShard) shard = data_shard_open(val_path, NULL, error);
    if (!shard)
        return FALSE;
    uint64_t        n_tokens = 0;
    const uint16_t *val = data_shard_tokens(shard, &n_tokens);
    int32_t         T = seq_len > 0 ? seq_len : sc->model.seq_len;
    int64_t         wanted = (int64_t)sc->run.eval_batches * sc->pipeline.microbatch_size;
    if (wanted < 1) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: run.eval_batches = %d: the run validates on no window; give --text FILE",
                    scenario_path, sc->run.eval_batches);
        return FALSE;
    }
    /* Training wraps around a short split; its distinct windows are the first ones. */
    int64_t             windows = MIN(wanted, (int64_t)((n_tokens - 1) / (uint64_t)T));
    int64_t             n_ids = windows * T + 1;
    g_autofree int32_t *ids = g_new(int32_t, n_ids); /* (windows * T + 1) */
    for (int64_t i = 0; i < n_ids; i++)
        ids[i] = val[i];
    *what = g_strdup_printf("the validation split of %s: the first %" G_GINT64_FORMAT
                            " windows of %d tokens of %s (run.eval_batches x "
                            "pipeline.microbatch_size, as training validates)",
                            scenario_path, windows, T, val_path);
    return exec_evaluate_ids(model, ids, n_ids, heads, T, loss, tokens, error);
}
