/* SPDX-License-Identifier: MIT
 * test-memory.c: the memory model of common/pp-memory.h: GPT-2 124M's parameter count, the
 * activation bytes per block in closed form, and that the simulator's cost model charges
 * exactly pp_memory_vstage_bytes() per stage (one formula for the simulator and the executor).
 */
#include <check.h>
#include <stdlib.h>

#include "pp-memory.h"
#include "pp-scenario.h"
#include "sim-cost.h"

static const PpMemoryShape gpt2_124m = {
    .microbatch_size = 4, .seq_len = 1024, .hidden = 768, .heads = 12, .vocab = 50257};

START_TEST(test_memory_gpt2_params) {
    PpMemoryModel m;
    pp_memory_model(&gpt2_124m, &m);
    ck_assert_double_eq(m.layer_params, 7087872.0);
    /* GPT-2 124M counts the tied head once: untied, the head adds V h = 38597376. */
    double whole = pp_memory_vstage_params(&m, 12, TRUE, TRUE);
    ck_assert_double_eq(whole - 50257.0 * 768.0, 124439808.0);
    /* sb(34h + 5as) and sb(2h + 5as) per block; 34sbh and 2sbh with flash attention. */
    ck_assert_double_eq(m.layer_act_bytes, 1024.0 * 4 * (34.0 * 768 + 5.0 * 12 * 1024));
    ck_assert_double_eq(m.layer_act_b_bytes, 1024.0 * 4 * (2.0 * 768 + 5.0 * 12 * 1024));
    ck_assert_double_eq(m.logits_bytes, 4.0 * 1024 * 50257 * 4);
    PpMemoryShape flash = gpt2_124m;
    flash.flash_attention = TRUE;
    pp_memory_model(&flash, &m);
    ck_assert_double_eq(m.layer_act_bytes, 34.0 * 1024 * 4 * 768);
    ck_assert_double_eq(m.layer_act_b_bytes, 2.0 * 1024 * 4 * 768);
    PpMemoryBytes bytes;
    pp_memory_vstage_bytes(&m, 3, FALSE, FALSE, 2, 1, &bytes);
    ck_assert_int_eq(bytes.static_bytes, 16 * 3 * 7087872);
    ck_assert_int_eq(bytes.stash_bytes, 2 * 3 * 7087872);
    ck_assert_int_eq(bytes.act_bytes, 2 * 3 * 34 * 1024 * 4 * 768);
    ck_assert_int_eq(bytes.total_bytes, bytes.static_bytes + bytes.stash_bytes + bytes.act_bytes);
}
END_TEST

/* The simulator's per-stage static bytes and per-unit activation bytes are the executor's
 * prediction for the same partition (one chunk per stage). */
START_TEST(test_memory_matches_simulator) {
    static const char ini[] = "[model]\npreset = gpt2\n"
                              "[pipeline]\nschedule = 1f1b\nstages = 4\nmicrobatches = 8\n"
                              "microbatch_size = 4\n"
                              "[costs]\nforward_us = 1\nbackward_us = 1\n"
                              "[run]\nlayers_per_stage = 2,4,3,3\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(PpScenario) sc = pp_scenario_load_data(ini, "memory.ini", NULL, &error);
    ck_assert_msg(sc != NULL, "%s", error ? error->message : "");
    g_autoptr(SimCostModel) cost = sim_cost_new_from_scenario(sc, &error);
    ck_assert_msg(cost != NULL, "%s", error ? error->message : "");
    PpMemoryModel m;
    pp_memory_model(&gpt2_124m, &m);
    const int32_t layers[] = {2, 4, 3, 3};
    for (int32_t s = 0; s < 4; s++) {
        PpMemoryBytes bytes;
        pp_memory_vstage_bytes(&m, layers[s], s == 0, s == 3, 1, 1, &bytes);
        ck_assert_int_eq(bytes.static_bytes, cost->static_bytes[s]);
        ck_assert_int_eq(bytes.act_bytes, cost->act_bytes[s]);
        ck_assert_int_eq(bytes.stash_bytes, cost->weight_copy_bytes[s]);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("memory");
    tcase_add_test(tc, test_memory_gpt2_params);
    tcase_add_test(tc, test_memory_matches_simulator);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
