/* SPDX-License-Identifier: MIT
 * kern-util.h: small helpers of kernels/: allocation that aborts on OOM (docs/style.md §3.4) and a
 * xorshift random generator with explicit state (no globals).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* malloc/calloc that abort with a message on failure; never return NULL (size 0 gives a valid
 * pointer). Returns: (transfer full): release with free(). */
void *kern_xmalloc(size_t size_bytes);
void *kern_xcalloc(size_t n, size_t size_bytes);

/* xorshift64* generator. @state must be non-zero; kern_rng_seed() makes one from any value. */
uint64_t kern_rng_seed(uint64_t seed);
uint32_t kern_rng_u32(uint64_t *state);
/* Uniform in [0, 1) with 24 random bits. */
float kern_rng_uniform(uint64_t *state);
/* Standard normal (Box-Muller, one value per call, computed in double). */
float kern_rng_normal(uint64_t *state);
/* 64-bit FNV-1a hash of a NUL-terminated string, for per-name seeds. */
uint64_t kern_hash_str(const char *s);

#ifdef __cplusplus
}
#endif
