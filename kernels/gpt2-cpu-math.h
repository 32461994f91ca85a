/* SPDX-License-Identifier: MIT
 * gpt2-cpu-math.h: inline helpers shared by the GPT-2 CPU kernels (internal to kernels/): a
 * polynomial exp that vectorises, and row reductions in a fixed number of partial sums.
 * Being inline, they are compiled into each instruction-set clone of their callers.
 */
#pragma once

#include <stdint.h>
#include <string.h>

/* Lanes of the fixed-order partial sums/maxima: wide enough for the compiler to vectorise,
 * and the same on every machine, so a row's reduction order never depends on the vector width
 * or the thread count. */
#define GPT2_LANES 16

/* e^x for x in about [-87, 88] (clamped outside): x = n ln2 + r with |r| <= ln2 / 2, e^r by
 * its degree-6 Taylor polynomial, 2^n assembled in the exponent bits (relative error below
 * 3e-7 over the range, measured against double exp).
 * Branch-free, so loops calling it vectorise; deterministic. */
static inline float gpt2_cpu_expf(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    /* round-to-nearest of x / ln2 by the 1.5 * 2^23 trick */
    float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    /* ln2 split in a high part exact in float times small n, and the rest */
    float r = x - n * 0.693145752f - n * 1.42860677e-6f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f +
                                                  r * (0.0416666679f + r * (0.00833333377f +
                                                                            r * 0.00138888892f)))));
    /* The shift is unsigned: a NaN x passes the clamp, its n converts to INT32_MIN on x86
     * (cvttss2si), and a signed shift of the negative sum was undefined (UBSan, from the
     * NaN logits of tests/test-checkpoint.c's overflow case). The result is NaN either way (p
     * is NaN); for finite x the bits are the same. */
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float    scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* tanh(u) = 1 - 2 / (e^{2u} + 1); absolute error ~1e-7, enough where 1 + tanh is used. */
static inline float gpt2_cpu_tanhf(float u) {
    return 1.0f - 2.0f / (gpt2_cpu_expf(2.0f * u) + 1.0f);
}

/* Adds the lanes of @acc in lane order. */
static inline float gpt2_cpu_lanes_sum(const float *acc) {
    float s = 0.0f;
    for (int k = 0; k < GPT2_LANES; k++)
        s += acc[k];
    return s;
}

/* Sum of x[0..n): element i goes to lane i % GPT2_LANES. */
static inline float gpt2_cpu_row_sum(const float *x, int n) {
    float acc[GPT2_LANES] = {0};
    int   i = 0;
    for (; i + GPT2_LANES <= n; i += GPT2_LANES)
        for (int k = 0; k < GPT2_LANES; k++)
            acc[k] += x[i + k];
    for (; i < n; i++)
        acc[i % GPT2_LANES] += x[i];
    return gpt2_cpu_lanes_sum(acc);
}

/* Sum of x[i] * y[i] over [0, n), lanes as gpt2_cpu_row_sum(). */
static inline float gpt2_cpu_row_dot(const float *x, const float *y, int n) {
    float acc[GPT2_LANES] = {0};
    int   i = 0;
    for (; i + GPT2_LANES <= n; i += GPT2_LANES)
        for (int k = 0; k < GPT2_LANES; k++)
            acc[k] += x[i + k] * y[i + k];
    for (; i < n; i++)
        acc[i % GPT2_LANES] += x[i] * y[i];
    return gpt2_cpu_lanes_sum(acc);
}

/* Maximum of x[0..n), n >= 1. */
static inline float gpt2_cpu_row_max(const float *x, int n) {
    float acc[GPT2_LANES];
    for (int k = 0; k < GPT2_LANES; k++)
        acc[k] = x[0];
    int i = 0;
    for (; i + GPT2_LANES <= n; i += GPT2_LANES)
        for (int k = 0; k < GPT2_LANES; k++)
            acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
    for (; i < n; i++)
        acc[0] = x[i] > acc[0] ? x[i] : acc[0];
    float m = acc[0];
    for (int k = 1; k < GPT2_LANES; k++)
        m = acc[k] > m ? acc[k] : m;
    return m;
}

/* x[i] = e^(x[i] - shift) for i < n, in place; returns their sum (lanes as gpt2_cpu_row_sum(),
 * one pass over x). */
static inline float gpt2_cpu_exp_shifted_sum(float *x, int n, float shift) {
    float acc[GPT2_LANES] = {0};
    int   i = 0;
    for (; i + GPT2_LANES <= n; i += GPT2_LANES) {
        for (int k = 0; k < GPT2_LANES; k++) {
            float e = gpt2_cpu_expf(x[i + k] - shift);
            x[i + k] = e;
            acc[k] += e;
        }
    }
    for (; i < n; i++) {
        x[i] = gpt2_cpu_expf(x[i] - shift);
        acc[i % GPT2_LANES] += x[i];
    }
    return gpt2_cpu_lanes_sum(acc);
}
