/* SPDX-License-Identifier: MIT
 * exec-slots.c: the activation slot table of a virtual stage (exec-slots.h).
 */
#include "exec-slots.h"

#include <glib.h>

#include "pp-error.h"

void exec_slots_init(ExecSlots *slots, int32_t n) {
    PP_ASSERT(n >= 0);
    slots->n = n;
    slots->mb = g_new(int32_t, MAX(n, 1));
    exec_slots_reset(slots);
}

void exec_slots_clear(ExecSlots *slots) {
    g_clear_pointer(&slots->mb, g_free);
    slots->n = 0;
}

void exec_slots_reset(ExecSlots *slots) {
    for (int32_t i = 0; i < slots->n; i++)
        slots->mb[i] = -1;
}

int32_t exec_slots_find(const ExecSlots *slots, int32_t mb) {
    for (int32_t i = 0; i < slots->n; i++)
        if (slots->mb[i] == mb)
            return i;
    PP_ABORT("no activation slot holds micro-batch %d", mb);
}

int32_t exec_slots_take(ExecSlots *slots, int32_t mb) {
    for (int32_t i = 0; i < slots->n; i++) {
        if (slots->mb[i] == -1) {
            slots->mb[i] = mb;
            return i;
        }
    }
    PP_ABORT("all %d activation slots busy at F(mb=%d)", slots->n, mb);
}

void exec_slots_release(ExecSlots *slots, int32_t slot) {
    PP_ASSERT(slot >= 0 && slot < slots->n);
    slots->mb[slot] = -1;
}
