/* SPDX-License-Identifier: MIT
 * gpt2-cuda.h: the CUDA side of kernels/ (gpt2_cuda_*). It holds the device query the GPU
 * test suite uses to skip cleanly on machines without a GPU.
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
