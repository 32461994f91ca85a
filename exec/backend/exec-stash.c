/* SPDX-License-Identifier: MIT
 * exec-stash.c: the stashed weight copies' bookkeeping of a virtual stage (exec-stash.h).
 */
#include "exec-stash.h"

#include "pp-error.h"

void exec_stashes_init(ExecStashes *stashes, int32_t n) {
    PP_ASSERT(n >= 0);
    stashes->n = n;
    stashes->version = g_new(int32_t, MAX(n, 1));
    stashes->refs = g_new(int32_t, MAX(n, 1));
    exec_stashes_reset(stashes);
}

void exec_stashes_clear(ExecStashes *stashes) {
    g_clear_pointer(&stashes->version, g_free);
    g_clear_pointer(&stashes->refs, g_free);
    stashes->n = 0;
}

void exec_stashes_reset(ExecStashes *stashes) {
    for (int32_t i = 0; i < stashes->n; i++) {
        stashes->version[i] = -1;
        stashes->refs[i] = 0;
    }
}

/* The copy holding @version, or -1. */
static int32_t exec_stashes_lookup(const ExecStashes *stashes, int32_t version) {
    for (int32_t i = 0; i < stashes->n; i++)
        if (stashes->version[i] == version)
            return i;
    return -1;
}

int32_t exec_stashes_acquire(ExecStashes *stashes, int32_t version, gboolean *fill) {
    PP_ASSERT(version >= 0);
    int32_t i = exec_stashes_lookup(stashes, version);
    *fill = i < 0;
    for (int32_t k = 0; i < 0 && k < stashes->n; k++)
        if (stashes->refs[k] == 0)
            i = k;
    if (i < 0)
        PP_ABORT("all %d weight copies are needed at an F of version %d", stashes->n, version);
    stashes->version[i] = version;
    stashes->refs[i]++;
    return i;
}

int32_t exec_stashes_find(const ExecStashes *stashes, int32_t version) {
    int32_t i = exec_stashes_lookup(stashes, version);
    if (i < 0)
        PP_ABORT("no weight copy holds version %d", version);
    return i;
}

void exec_stashes_release(ExecStashes *stashes, int32_t i) {
    PP_ASSERT(i >= 0 && i < stashes->n && stashes->refs[i] > 0);
    stashes->refs[i]--;
}
