/* SPDX-License-Identifier: MIT
 * pp-sched-registry.c: the schedule kinds by name ("gpipe", "1f1b", ...), a static table
 * in the order --help and error messages list them.
 */
#include <string.h>

#include "pp-sched-gen.h"

static const PpSchedKindInfo pp_sched_kind_table[] = {
    {"gpipe", pp_sched_build_gpipe, "all F then all BW per step, flush", PP_PLACEMENT_LOOP},
    {"1f1b", pp_sched_build_1f1b, "1F1B with flush (PipeDream-Flush, Megatron, DeepSpeed)",
     PP_PLACEMENT_LOOP},
    {"interleaved", pp_sched_build_interleaved,
     "Megatron interleaved 1F1B, n_chunks chunks per device, m % N == 0", PP_PLACEMENT_LOOP},
    {"zb-h1", pp_sched_build_zb_h1, "zero-bubble handcrafted ZB-H1 (B/W split, 1F1B memory)",
     PP_PLACEMENT_LOOP},
    {"zb-h2", pp_sched_build_zb_h2, "zero-bubble handcrafted ZB-H2 (B/W split, more memory)",
     PP_PLACEMENT_LOOP},
    {"zb-1p", pp_sched_build_zb_1p,
     "zero-bubble automatic schedule under 1x 1F1B's peak activations (greedy)", PP_PLACEMENT_LOOP},
    {"zb-2p", pp_sched_build_zb_2p,
     "zero-bubble automatic schedule under 2x 1F1B's peak activations (greedy)", PP_PLACEMENT_LOOP},
    {"zb-v", pp_sched_build_zb_v,
     "zero-bubble V schedule: 2 chunks per device in a V, B/W split, 1F1B's peak memory",
     PP_PLACEMENT_V},
    {"dualpipe-v", pp_sched_build_dualpipe_v,
     "DeepSeek's DualPipe cut in half: 2 chunks per device in a V, F/B pairs, m >= 2N",
     PP_PLACEMENT_V},
    {"pipedream", pp_sched_build_pipedream,
     "async 1F1B, update after every backward, weight stashing (N-s versions)", PP_PLACEMENT_LOOP},
    {"2bw", pp_sched_build_2bw,
     "PipeDream-2BW: async 1F1B, update every m backwards, two weight versions", PP_PLACEMENT_LOOP},
    {"async-1f1b", pp_sched_build_async_1f1b,
     "async 1F1B without stashing, update after every backward (PACI with a = 1)",
     PP_PLACEMENT_LOOP},
    {"paci", pp_sched_build_paci,
     "PACI: async 1F1B, local accumulation over a backwards, backpressure q < N - s",
     PP_PLACEMENT_LOOP},
    {"custom", pp_sched_build_custom, "per-stage op orders read from a CSV order file",
     PP_PLACEMENT_LOOP},
    {NULL, NULL, NULL, PP_PLACEMENT_LOOP},
};

const PpSchedKindInfo *pp_sched_kinds(void) {
    return pp_sched_kind_table;
}

const PpSchedKindInfo *pp_sched_kind_lookup(const char *name) {
    for (const PpSchedKindInfo *info = pp_sched_kind_table; info->name != NULL; info++) {
        if (strcmp(info->name, name) == 0)
            return info;
    }
    return NULL;
}

PpPlacement pp_sched_kind_placement(const char *name) {
    const PpSchedKindInfo *info = name != NULL ? pp_sched_kind_lookup(name) : NULL;
    return info != NULL ? info->placement : PP_PLACEMENT_LOOP;
}

char *pp_sched_kind_names(void) {
    GString *names = g_string_new(NULL);
    for (const PpSchedKindInfo *info = pp_sched_kind_table; info->name != NULL; info++)
        g_string_append_printf(names, "%s%s", names->len ? ", " : "", info->name);
    return g_string_free(names, FALSE);
}
