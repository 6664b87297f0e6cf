/*
 * Loading every instance of loom's kernels before any of them runs.
 *
 * Under CUDA's lazy loading (CUDA_MODULE_LOADING=LAZY, the default since
 * CUDA 12.2) a kernel is loaded at its first launch, and loading may
 * synchronize the context: it waits for every kernel running on the device.
 * loom's kernels wait for their peers' kernels. So with two communicators in
 * flight at once (MPI_THREAD_MULTIPLE, or non-blocking calls on two
 * communicators issued in another order on each rank), a first launch on
 * one rank waits for its other communicator's kernel, which waits for the
 * peer rank, whose first launch of another kernel waits the other way
 * round: both ranks stay inside cudaLaunchKernel for ever (coll_threads_np2
 * hung so in its first iterations). cudaFuncGetAttributes loads a kernel
 * without running it; core/comm/kernel_load.cc calls the loaders below once per
 * device, when its first communicator is made, before any loom kernel runs
 * in this process on that device.
 */
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "loom.h"

namespace loom {

template <typename... F> cudaError_t loadKernels(KernelLoad *l, F... kernels) {
    cudaError_t e = cudaSuccess;
    auto one = [&](const void *k) {
        cudaFuncAttributes at;
        if (e == cudaSuccess) e = cudaFuncGetAttributes(&at, k);
        if (e != cudaSuccess) return;
        ++l->kernels;
        if (at.localSizeBytes > l->maxLocalBytes) l->maxLocalBytes = at.localSizeBytes;
    };
    (one(reinterpret_cast<const void *>(kernels)), ...);
    return e;
}

// Adapts Kernel<T, Op>::load to dispatchTypeOp's launch(args, stream).
template <template <typename, typename> class Kernel> struct LoadEach {
    template <typename T, typename Op> struct Instance {
        static cudaError_t launch(KernelLoad *const &l, cudaStream_t) { return Kernel<T, Op>::load(l); }
    };
};

// Every (type, op) instance of a reduction kernel that loom accepts
// (loomOpSupported): through the same switch as the launches, so an
// instance the launches can reach is an instance loaded here.
template <template <typename, typename> class Kernel> cudaError_t loadTypeOps(KernelLoad *l) {
    for (int t = 0; t < loomNumTypes; ++t)
        for (int o = 0; o < loomNumOps; ++o) {
            if (!loomOpSupported((loomDataType_t)t, (loomRedOp_t)o)) continue;
            cudaError_t e = dispatchTypeOp<LoadEach<Kernel>::template Instance>((loomDataType_t)t, (loomRedOp_t)o,
                                                                                  l, nullptr);
            if (e != cudaSuccess) return e;
        }
    return cudaSuccess;
}

} // namespace loom
