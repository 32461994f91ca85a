/* SPDX-License-Identifier: MIT
 * gpt2-cuda.h: CUDA kernels, gpt2_cuda_* (same argument order as gpt2_cpu_* plus a stream).
 * Only the device query lives here until the CUDA backend issue fills this library.
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices visible to this process; 0 when there is no driver or no device. */
int gpt2_cuda_device_count(void);

#ifdef __cplusplus
}
#endif
