/*
 * Buffer classification and synchronous copies: what the component needs to
 * route a call (host → previous module, device → loom) and to stage through
 * host memory when nothing better exists.
 */
#include <cstring>
#include <mutex>

#include <cuda_runtime.h>

#include "base/cuda_driver.h"
#include "base/debug.h"
#include "base/setup_write.h"
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

namespace {

// One non-blocking stream per device for loomMemcpyAside, made at first use
// and kept for the process (streams are cheap; a copy's stream must outlive
// it, and the component's copies come from any thread).
constexpr int kAsideDevices = 64;
std::mutex asideLock;
cudaStream_t asideStreams[kAsideDevices];

// The current device's aside stream (nullptr: none could be made).
cudaStream_t asideStream(int device) {
    if (device < 0 || device >= kAsideDevices) return nullptr;
    std::lock_guard<std::mutex> hold(asideLock);
    if (!asideStreams[device] && cudaStreamCreateWithFlags(&asideStreams[device], cudaStreamNonBlocking) != cudaSuccess)
        asideStreams[device] = nullptr;
    return asideStreams[device];
}

// A synchronous copy on the owning device's per-thread default stream
// (aside: on its non-blocking aside stream instead).
loomResult_t copyNow(void *dst, const void *src, size_t bytes, bool aside, const char *what) {
    if (bytes == 0) return loomSuccess;
    if (!dst || !src) return fail(loomInvalidArgument, "%s: NULL %s pointer", what, dst ? "source" : "destination");
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
    // Not on the legacy stream: both streams below order after nothing of
    // loom's, but a legacy-stream copy also waits for every blocking
    // stream's work, loom's kernels of the other communicators included, and
    // those may wait for peers that reach this call's own collective only
    // after theirs (a staged call crossed with another communicator's
    // non-blocking call: test/gpu/coll_cross_order). The per-thread stream
    // still waits for the application's legacy-stream work, and that work
    // may itself wait for loom's kernels: the aside stream waits for nothing.
    cudaStream_t stream = cudaStreamPerThread, own = nullptr;
    if (err == cudaSuccess && aside) {
        int dev = -1;
        cudaGetDevice(&dev);
        stream = asideStream(dev);
        // past the kept streams' devices (or none could be kept): one for this copy
        if (!stream && (err = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking)) == cudaSuccess) stream = own;
    }
    if (err == cudaSuccess) err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (own) cudaStreamDestroy(own);
    if (current >= 0 && owner >= 0 && owner != current) cudaSetDevice(current);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "%s: copy of %zu bytes (device %d) failed: %s", what, bytes, owner,
                    cudaGetErrorString(err));
    return loomSuccess;
}

} // namespace

extern "C" loomResult_t loomMemcpySync(void *dst, const void *src, size_t bytes) {
    return copyNow(dst, src, bytes, false, "loomMemcpySync");
}

extern "C" loomResult_t loomMemcpyAside(void *dst, const void *src, size_t bytes) {
    return copyNow(dst, src, bytes, true, "loomMemcpyAside");
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
