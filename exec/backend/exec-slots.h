/* SPDX-License-Identifier: MIT
 * exec-slots.h: which micro-batch holds each activation slot of a virtual stage. Host
 * bookkeeping shared by the backends (the slots' memory is each backend's own): F takes a
 * slot, B (or the fused BW) and W find it by micro-batch, the last of them releases it.
 */
#pragma once

#include <stdint.h>

typedef struct {
    int32_t  n;  /* slots: the schedule's peak of activations in flight on the virtual stage */
    int32_t *mb; /* (n) micro-batch holding each slot, -1 when free */
} ExecSlots;

/* @n >= 0 free slots. Free with exec_slots_clear(). */
void exec_slots_init(ExecSlots *slots, int32_t n);
void exec_slots_clear(ExecSlots *slots);
/* Marks every slot free (a new replay). */
void exec_slots_reset(ExecSlots *slots);
/* The slot holding @mb; aborts when none does (a schedule the backend checked cannot). */
int32_t exec_slots_find(const ExecSlots *slots, int32_t mb);
/* A free slot, now holding @mb; aborts when all are busy (prepare() checked the schedule's
 * peak against n). */
int32_t exec_slots_take(ExecSlots *slots, int32_t mb);
void    exec_slots_release(ExecSlots *slots, int32_t slot);
