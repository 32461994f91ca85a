/* SPDX-License-Identifier: MIT
 * kern-simd.c: run-time detection of the x86-64 level (kern-simd.h), done once.
 */
#include "kern-simd.h"

#include <stdatomic.h>

static KernIsa kern_isa_detect(void) {
#if KERN_HAVE_CLONES
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        return KERN_ISA_AVX512;
    if (__builtin_cpu_supports("x86-64-v3"))
        return KERN_ISA_AVX2;
#endif
    return KERN_ISA_BASELINE;
}

KernIsa kern_isa(void) {
    static atomic_int cached = -1; /* every thread detects the same value */
    int               isa = atomic_load_explicit(&cached, memory_order_relaxed);
    if (isa < 0) {
        isa = (int)kern_isa_detect();
        atomic_store_explicit(&cached, isa, memory_order_relaxed);
    }
    return (KernIsa)isa;
}

const char *kern_isa_name(void) {
    switch (kern_isa()) {
    case KERN_ISA_AVX512:
        return "avx512";
    case KERN_ISA_AVX2:
        return "avx2";
    default:
        return "baseline";
    }
}
