/* SPDX-License-Identifier: MIT
 * pp-sched-registry.c: the schedule kinds by name ("gpipe", "1f1b", ...), a static table
 * in the order --help and error messages list them.
 */
#include <string.h>

#include "pp-sched-gen.h"

static const PpSchedKindInfo pp_sched_kind_table[] = {
    {"gpipe", pp_sched_build_gpipe, "all F then all BW per step, flush"},
    {"1f1b", pp_sched_build_1f1b, "1F1B with flush (PipeDream-Flush, Megatron, DeepSpeed)"},
    {"interleaved", pp_sched_build_interleaved,
     "Megatron interleaved 1F1B, n_chunks chunks per device, m % N == 0"},
    {"zb-h1", pp_sched_build_zb_h1, "zero-bubble handcrafted ZB-H1 (B/W split, 1F1B memory)"},
    {"zb-h2", pp_sched_build_zb_h2, "zero-bubble handcrafted ZB-H2 (B/W split, more memory)"},
    {"zb-1p", pp_sched_build_zb_1p,
     "zero-bubble automatic schedule under 1x 1F1B's peak activations (greedy)"},
    {"zb-2p", pp_sched_build_zb_2p,
     "zero-bubble automatic schedule under 2x 1F1B's peak activations (greedy)"},
    {"pipedream", pp_sched_build_pipedream,
     "async 1F1B, update after every backward, weight stashing (N-s versions)"},
    {"2bw", pp_sched_build_2bw,
     "PipeDream-2BW: async 1F1B, update every m backwards, two weight versions"},
    {"async-1f1b", pp_sched_build_async_1f1b,
     "async 1F1B without stashing, update after every backward (PACI with a = 1)"},
    {"paci", pp_sched_build_paci,
     "PACI: async 1F1B, local accumulation over a backwards, backpressure q < N - s"},
    {"custom", pp_sched_build_custom, "per-stage op orders read from a CSV order file"},
    {NULL, NULL, NULL},
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

char *pp_sched_kind_names(void) {
    GString *names = g_string_new(NULL);
    for (const PpSchedKindInfo *info = pp_sched_kind_table; info->name != NULL; info++)
        g_string_append_printf(names, "%s%s", names->len ? ", " : "", info->name);
    return g_string_free(names, FALSE);
}
