/* SPDX-License-Identifier: MIT
 * test-cuda-util.c: the gpu-suite helpers of test-cuda-util.h.
 */
#include "test-cuda-util.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern-check.h"
#include "kern-util.h"

static KernCudaCtx *tcu_shared_ctx;
static cudaStream_t tcu_stream;

int tcu_main(Suite *suite) {
    const char *why = NULL;
    if (kern_cuda_device_query(&why) == 0) {
        /* One line that scripts/gpu-check quotes as the reason of the skip. */
        printf("SKIP: no usable CUDA device: %s\n", why);
        fflush(stdout);
        return 77;
    }
    KERN_CUDA_CHECK(cudaSetDevice(0));
    KERN_CUDA_CHECK(cudaStreamCreateWithFlags(&tcu_stream, cudaStreamNonBlocking));
    tcu_shared_ctx = kern_cuda_ctx_new(tcu_stream);
    KERN_ASSERT(tcu_shared_ctx);
    SRunner *sr = srunner_create(suite);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_ENV);
    int n = srunner_ntests_failed(sr);
    srunner_free(sr);
    kern_cuda_ctx_free(tcu_shared_ctx);
    KERN_CUDA_CHECK(cudaStreamDestroy(tcu_stream));
    return n ? EXIT_FAILURE : EXIT_SUCCESS;
}

KernCudaCtx *tcu_ctx(void) {
    return tcu_shared_ctx;
}

void tcu_randn(float *x, size_t n, float scale, uint64_t seed) {
    uint64_t rng = kern_rng_seed(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * kern_rng_normal(&rng);
}

void tcu_uniform(float *x, size_t n, float lo, float hi, uint64_t seed) {
    uint64_t rng = kern_rng_seed(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * kern_rng_uniform(&rng);
}

/* Every transfer and memset goes through the shared (non-blocking) stream and is waited for:
 * plain cudaMemcpy/cudaMemset run on the legacy stream, which that stream does not wait for. */
static void tcu_copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    KERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, tcu_stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(tcu_stream));
}

void *tcu_alloc_poisoned(size_t bytes) {
    void *dev = NULL;
    KERN_CUDA_CHECK(cudaMalloc(&dev, bytes ? bytes : 1));
    KERN_CUDA_CHECK(cudaMemsetAsync(dev, 0xff, bytes ? bytes : 1, tcu_stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(tcu_stream));
    return dev;
}

void *tcu_upload(const float *host, size_t n, KernDtype dt) {
    void *dev = tcu_alloc_poisoned(n * kern_dtype_size(dt));
    if (!host || n == 0)
        return dev;
    float *tmp = NULL;
    KERN_CUDA_CHECK(cudaMalloc((void **)&tmp, n * sizeof(float)));
    tcu_copy(tmp, host, n * sizeof(float), cudaMemcpyHostToDevice);
    kern_cuda_convert(dev, dt, tmp, KERN_DTYPE_F32, n, tcu_stream);
    KERN_CUDA_CHECK(cudaStreamSynchronize(tcu_stream));
    KERN_CUDA_CHECK(cudaFree(tmp));
    return dev;
}

int32_t *tcu_upload_ids(const int32_t *host, size_t n) {
    int32_t *dev = (int32_t *)tcu_alloc_poisoned(n * sizeof(int32_t));
    tcu_copy(dev, host, n * sizeof(int32_t), cudaMemcpyHostToDevice);
    return dev;
}

float *tcu_download(const void *dev, size_t n, KernDtype dt) {
    float *host = kern_xmalloc(n * sizeof(float));
    if (n == 0)
        return host;
    float *tmp = NULL;
    KERN_CUDA_CHECK(cudaStreamSynchronize(tcu_stream));
    KERN_CUDA_CHECK(cudaMalloc((void **)&tmp, n * sizeof(float)));
    kern_cuda_convert(tmp, KERN_DTYPE_F32, dev, dt, n, tcu_stream);
    KERN_CUDA_CHECK(cudaStreamSynchronize(tcu_stream));
    tcu_copy(host, tmp, n * sizeof(float), cudaMemcpyDeviceToHost);
    KERN_CUDA_CHECK(cudaFree(tmp));
    return host;
}

void tcu_free(void *dev) {
    KERN_CUDA_CHECK(cudaStreamSynchronize(tcu_stream));
    KERN_CUDA_CHECK(cudaFree(dev));
}

void tcu_round(float *x, size_t n, KernDtype dt) {
    if (dt == KERN_DTYPE_F32 || n == 0)
        return;
    void  *dev = tcu_upload(x, n, dt);
    float *back = tcu_download(dev, n, dt);
    memcpy(x, back, n * sizeof(float));
    free(back);
    tcu_free(dev);
}

double tcu_rel_err(const float *got, const float *ref, size_t n) {
    double max_ref = 0.0, max_diff = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(ref[i]) && !isfinite(got[i]))
            return INFINITY;
        double r = fabs((double)ref[i]);
        double d = fabs((double)got[i] - (double)ref[i]);
        max_ref = r > max_ref ? r : max_ref;
        max_diff = d > max_diff ? d : max_diff;
    }
    return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}
