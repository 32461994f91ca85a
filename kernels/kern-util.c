/* SPDX-License-Identifier: MIT
 * kern-util.c: aborting allocators and the explicit-state xorshift64* generator of
 * kern-util.h.
 */
#include "kern-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void *kern_xmalloc(size_t size_bytes) {
    void *p = malloc(size_bytes ? size_bytes : 1);
    if (!p) {
        fprintf(stderr, "kern_xmalloc: out of memory allocating %zu bytes\n", size_bytes);
        abort();
    }
    return p;
}

void *kern_xcalloc(size_t n, size_t size_bytes) {
    void *p = calloc(n ? n : 1, size_bytes ? size_bytes : 1);
    if (!p) {
        fprintf(stderr, "kern_xcalloc: out of memory allocating %zu x %zu bytes\n", n, size_bytes);
        abort();
    }
    return p;
}

uint64_t kern_rng_seed(uint64_t seed) {
    /* splitmix64 finaliser: spreads nearby seeds apart and never yields 0 in practice;
     * 0 itself is remapped because xorshift would stay at 0 forever */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 0x2545F4914F6CDD1Dull;
}

uint32_t kern_rng_u32(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

float kern_rng_uniform(uint64_t *state) {
    return (float)(kern_rng_u32(state) >> 8) / 16777216.0f;
}

float kern_rng_normal(uint64_t *state) {
    /* u1 in (0, 1] so that log(u1) is finite */
    double u1 = ((double)(kern_rng_u32(state) >> 8) + 1.0) / 16777216.0;
    double u2 = (double)(kern_rng_u32(state) >> 8) / 16777216.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t kern_hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}
