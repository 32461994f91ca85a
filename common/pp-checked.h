/* SPDX-License-Identifier: MIT
 * pp-checked.h: overflow-checked int64 arithmetic for quantities derived from input (ns over
 * a run, bytes per stage, FLOPs per stage). Each helper returns FALSE instead of wrapping, so
 * the caller can turn an impossible input into a GError; the envelope PP_CHECKED_MAX leaves
 * room to add two in-range quantities without overflowing.
 */
#pragma once

#include <glib.h>
#include <math.h>
#include <stdint.h>

G_BEGIN_DECLS

/* The largest value a derived quantity may take: 2^62 (4.6e18 ns is 146 years; bytes 4 EiB). */
#define PP_CHECKED_MAX (INT64_C(1) << 62)

/* *@out = @a + @b; FALSE (and *@out unchanged) when the sum leaves [-2^62, 2^62]. */
static inline gboolean pp_checked_add(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r) || r > PP_CHECKED_MAX || r < -PP_CHECKED_MAX)
        return FALSE;
    *out = r;
    return TRUE;
}

/* *@out = @a * @b; FALSE (and *@out unchanged) when the product leaves [-2^62, 2^62]. */
static inline gboolean pp_checked_mul(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || r > PP_CHECKED_MAX || r < -PP_CHECKED_MAX)
        return FALSE;
    *out = r;
    return TRUE;
}

/* *@out = @a + @b * @c (a running total of counts times sizes); FALSE on overflow. */
static inline gboolean pp_checked_add_mul(int64_t a, int64_t b, int64_t c, int64_t *out) {
    int64_t prod;
    return pp_checked_mul(b, c, &prod) && pp_checked_add(a, prod, out);
}

/* Rounds the double @v (a FLOP, byte or ns count computed in floating point) to the nearest
 * integer into *@out; FALSE when @v is not finite or lies outside [0, PP_CHECKED_MAX]. */
static inline gboolean pp_checked_round(double v, int64_t *out) {
    if (!(v >= 0.0 && v <= (double)PP_CHECKED_MAX))
        return FALSE;
    *out = llround(v);
    return TRUE;
}

G_END_DECLS
