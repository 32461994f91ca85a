/* SPDX-License-Identifier: MIT
 * exec-stash.h: which weight version each stashed copy of a virtual stage holds and how many
 * micro-batches still need it (PipeDream, 2BW). Host bookkeeping shared by the backends (the
 * copies' memory is each backend's own): F acquires the copy of its version, filling one
 * nobody needs when no copy holds it; B (or the fused BW) finds it and releases it. A released
 * copy keeps its version, so the next F of that version reuses it and copies nothing: one copy
 * per weight version.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

typedef struct {
    int32_t  n;       /* copies: the stage's weight versions */
    int32_t *version; /* (n) version held (kept when released), -1 none */
    int32_t *refs;    /* (n) micro-batches still needing it */
} ExecStashes;

/* @n >= 0 empty copies. Free with exec_stashes_clear(). */
void exec_stashes_init(ExecStashes *stashes, int32_t n);
void exec_stashes_clear(ExecStashes *stashes);
/* Every copy empty (a new replay). */
void exec_stashes_reset(ExecStashes *stashes);
/* F of @version: the copy holding it, or the lowest copy nobody needs, now holding @version
 * (*@fill TRUE: the caller copies the live weights into it). One more micro-batch needs it.
 * Aborts when every copy is needed (the schedule declares how many a stage keeps). */
int32_t exec_stashes_acquire(ExecStashes *stashes, int32_t version, gboolean *fill);
/* B or BW of @version: the copy its F acquired; aborts when none holds it. */
int32_t exec_stashes_find(const ExecStashes *stashes, int32_t version);
/* After the B or BW that read copy @i: one micro-batch fewer needs it. */
void exec_stashes_release(ExecStashes *stashes, int32_t i);
