#include "base/cuda_driver.h"

#include <dlfcn.h>
#include <mutex>

#include "base/dl_bind.h"
#include "base/debug.h"

namespace loom {

namespace {

CudaDriver g_driver;
const CudaDriver *g_loaded = nullptr;
std::once_flag g_once;

template <typename Fn>
bool bind(void *lib, const char *name, Fn *&slot, bool required = true) {
    return dlBind(lib, "libcuda.so.1", name, slot, "treating all memory as host memory", required, kInit);
}

void load() {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        LOOM_INFO(kInit, "no CUDA driver (%s); treating all memory as host memory", dlerror());
        return;
    }
    if (!bind(lib, "cuInit", g_driver.cuInit) ||
        !bind(lib, "cuPointerGetAttributes", g_driver.cuPointerGetAttributes) ||
        !bind(lib, "cuGetErrorString", g_driver.cuGetErrorString))
        return;
    bind(lib, "cuDeviceGetCount", g_driver.cuDeviceGetCount, false);
    bind(lib, "cuMemGetHandleForAddressRange", g_driver.cuMemGetHandleForAddressRange, false); // CUDA >= 11.7
    bind(lib, "cuStreamWaitValue32_v2", g_driver.cuStreamWaitValue32, false); // CUDA 12's name
    if (!g_driver.cuStreamWaitValue32) bind(lib, "cuStreamWaitValue32", g_driver.cuStreamWaitValue32, false);
    bind(lib, "cuDeviceGet", g_driver.cuDeviceGet, false);
    bind(lib, "cuDeviceGetAttribute", g_driver.cuDeviceGetAttribute, false);
    CUresult rc = g_driver.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        // e.g. CUDA_ERROR_NO_DEVICE on a machine with a driver but no GPU.
        LOOM_INFO(kInit, "cuInit failed (error %d); treating all memory as host memory", static_cast<int>(rc));
        return;
    }
    g_loaded = &g_driver;
}

} // namespace

const CudaDriver *cudaDriver() {
    std::call_once(g_once, load);
    return g_loaded;
}

} // namespace loom
