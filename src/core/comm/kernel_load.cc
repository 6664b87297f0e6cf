/*
 * Every loom kernel loaded on a device before the first of them runs there
 * (device/kernel_load.h: why a lazy first launch can hang two communicators).
 */
#include "core/comm/kernel_load.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <vector>

#include "base/debug.h"
#include "core/algo/registry.h"
#include "device/collectives.h"
#include "device/datatype/dt_copy.h"

namespace loom {

loomResult_t loadDeviceKernels(int rank, int device) {
    static std::mutex mu;
    static std::set<int> loaded; // devices of this process whose kernels are loaded
    std::lock_guard<std::mutex> hold(mu);
    if (loaded.count(device)) return loomSuccess;
    // The caller made `device` current (cudaFuncGetAttributes loads for it).
    const auto start = std::chrono::steady_clock::now();
    KernelLoad l;
    // The table algorithms' kernels (each registry entry names its loader;
    // entries may share one), then the other paths'.
    std::vector<cudaError_t (*)(KernelLoad *)> loaders;
    for (int i = 0; i < kRegistrySize; ++i)
        if (std::find(loaders.begin(), loaders.end(), kRegistry[i]->loadKernels) == loaders.end())
            loaders.push_back(kRegistry[i]->loadKernels);
    for (auto load : {loadExchangeKernels, loadScanKernels, loadResidentKernels, loadLocalReduceKernels, loadDtCopyKernels})
        loaders.push_back(load);
    for (auto load : loaders) {
        cudaError_t e = load(&l);
        if (e != cudaSuccess)
            return fail(loomUnhandledCudaError, "rank %d GPU %d: loading loom's kernels: %s", rank, device,
                        cudaGetErrorString(e));
    }
    // A kernel needing more local memory than the context holds makes its
    // first launch grow it, which synchronizes the device like a lazy load:
    // grown here, now, instead.
    size_t stack = 0;
    const bool known = cudaDeviceGetLimit(&stack, cudaLimitStackSize) == cudaSuccess;
    if (!known) cudaGetLastError(); // left as it is
    if (known && l.maxLocalBytes > stack) {
        cudaError_t e = cudaDeviceSetLimit(cudaLimitStackSize, l.maxLocalBytes);
        if (e != cudaSuccess)
            return fail(loomUnhandledCudaError, "rank %d GPU %d: stack size %zu B for loom's kernels: %s", rank,
                        device, l.maxLocalBytes, cudaGetErrorString(e));
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    LOOM_INFO(kInit, "rank %d GPU %d: %d kernel loads (signed integer ops share unsigned instances) in %.1f ms; "
              "local memory up to %zu B per thread (stack limit %zu B%s)", rank, device, l.kernels, ms,
              l.maxLocalBytes, stack, known && l.maxLocalBytes > stack ? ", raised" : "");
    loaded.insert(device);
    return loomSuccess;
}

} // namespace loom
