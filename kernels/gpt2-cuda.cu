/* SPDX-License-Identifier: MIT
 * gpt2-cuda.cu: CUDA side of kernels/. Holds the device query the GPU tests use to skip
 * cleanly on machines without a GPU.
 */
#include <cuda_runtime.h>

#include "gpt2-cuda.h"

int gpt2_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 0;
    return n;
}
