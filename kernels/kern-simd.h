/* SPDX-License-Identifier: MIT
 * kern-simd.h: which vector instruction set the CPU kernels use. Hot loops are compiled once
 * per x86-64 level (KERN_CLONES: v4 = AVX-512, v3 = AVX2 + FMA, and the baseline) and the
 * processor picks one when the program loads; the shipped build never assumes more than the
 * baseline. Results are deterministic on one machine but may differ between levels.
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KERN_HAVE_CLONES 1
#define KERN_CLONES      __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KERN_HAVE_CLONES 0
#define KERN_CLONES
#endif

typedef enum {
    KERN_ISA_BASELINE, /* anything else: plain C, 128-bit vectors on x86-64 */
    KERN_ISA_AVX2,     /* x86-64-v3: AVX2 + FMA */
    KERN_ISA_AVX512,   /* x86-64-v4: AVX-512 F/BW/CD/DQ/VL */
} KernIsa;

/* The level this processor runs: the same choice KERN_CLONES makes. */
KernIsa kern_isa(void);
/* "avx512", "avx2" or "baseline". (transfer none): a static string. */
const char *kern_isa_name(void);

#ifdef __cplusplus
}
#endif
