/* SPDX-License-Identifier: MIT
 * test-kernels-cuda.c: GPU suite entry point. Skips (exit 77) on machines without a CUDA
 * device, so CPU-only CI shows SKIP; on a GPU box it checks that a device is visible.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpt2-cuda.h"

int main(void) {
    int n = gpt2_cuda_device_count();
    if (n == 0) {
        printf("no CUDA device: skipping the gpu suite\n");
        return 77;
    }
    printf("%d CUDA device(s) visible\n", n);
    return n > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
