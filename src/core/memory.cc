/*
 * Buffer classification and synchronous copies: what the component needs to
 * route a call (host → previous module, device → loom) and to stage through
 * host memory when nothing better exists.
 */
#include <cstring>

#include <cuda_runtime.h>

#include "cuda_driver.h"
#include "debug.h"
#include "setup_write.h"
#include "loom.h"

using namespace loom;

extern "C" int loomCudaDriverAvailable(void) { return cudaDriver() != nullptr; }

extern "C" int loomCudaDeviceCount(void) {
    const CudaDriver *drv = cudaDriver();
    int n = 0;
    if (!drv || !drv->cuDeviceGetCount || drv->cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
    return n;
}

extern "C" int loomCudaCurrentDevice(void) {
    int device = -1;
    if (loomCudaDeviceCount() <= 0 || cudaGetDevice(&device) != cudaSuccess) return -1;
    return device;
}

extern "C" loomResult_t loomPointerQuery(const void *ptr, loomPointerInfo_t *info) {
    if (!info) return fail(loomInvalidArgument, "loomPointerQuery: info is NULL");
    info->kind = loomMemoryHost;
    info->device = -1;
    const CudaDriver *drv = cudaDriver();
    if (!drv || !ptr) return loomSuccess;

    // cuPointerGetAttributes (plural) reports unknown (plain host) pointers as
    // success with zeroed attributes, and needs no current context.
    unsigned int memType = 0;
    int ordinal = -1;
    unsigned int isManaged = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *data[] = {&memType, &ordinal, &isManaged};
    CUresult rc = drv->cuPointerGetAttributes(3, attrs, data, reinterpret_cast<CUdeviceptr>(ptr));
    if (rc != CUDA_SUCCESS) return loomSuccess; // older drivers: not a CUDA pointer
    if (isManaged) {
        info->kind = loomMemoryManaged;
        info->device = ordinal;
    } else if (memType == CU_MEMORYTYPE_DEVICE) {
        info->kind = loomMemoryDevice;
        info->device = ordinal;
    }
    return loomSuccess;
}

extern "C" loomResult_t loomMemcpySync(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return loomSuccess;
    if (!dst || !src) return fail(loomInvalidArgument, "loomMemcpySync: NULL %s pointer", dst ? "source" : "destination");
    loomPointerInfo_t d, s;
    loomPointerQuery(dst, &d);
    loomPointerQuery(src, &s);
    if (d.kind == loomMemoryHost && s.kind == loomMemoryHost) {
        memcpy(dst, src, bytes);
        return loomSuccess;
    }
    // Copy under the owning device so the runtime uses that device's context
    // and the application's current device is left as it was.
    int owner = d.kind != loomMemoryHost ? d.device : s.device;
    int current = -1;
    cudaError_t err = cudaGetDevice(&current);
    if (err == cudaSuccess && owner >= 0 && owner != current) err = cudaSetDevice(owner);
    // On this thread's default stream, not the legacy one: both order after
    // the application's legacy-stream work, but a legacy-stream copy also
    // waits for every blocking stream's work, loom's kernels of the other
    // communicators included, and those may wait for peers that reach this
    // call's own collective only after theirs (a staged call crossed with
    // another communicator's non-blocking call: test/gpu/coll_cross_order).
    if (err == cudaSuccess) err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread);
    if (err == cudaSuccess) err = cudaStreamSynchronize(cudaStreamPerThread);
    if (current >= 0 && owner >= 0 && owner != current) cudaSetDevice(current);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "copy of %zu bytes (device %d) failed: %s", bytes, owner,
                    cudaGetErrorString(err));
    return loomSuccess;
}

cudaError_t loom::setupWrite(void *dst, const void *src, size_t bytes) {
    cudaStream_t s = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = src ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s) : cudaMemsetAsync(dst, 0, bytes, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (s) cudaStreamDestroy(s);
    return e;
}
