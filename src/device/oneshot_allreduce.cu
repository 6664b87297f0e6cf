/*
 * One-shot allreduce on the LL protocol, for small messages: one hop over
 * NVLink instead of 2(n-1) ring steps. Each thread owns 8-byte units: it
 * stores its unit of the input as an LL line into every peer's slot, then
 * waits for the peers' lines of the same unit and reduces all n inputs in
 * rank order (so every rank computes bit-identical results).
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/ll_line.h"

namespace loom {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(kOneShotThreads) oneShotKernel(OneShotArgs a) {
    const size_t units = (a.bytes + 7) / 8;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const char *in = (const char *)a.in;
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    // 1. Publish: my units to every peer.
    for (size_t u = first; u < units; u += stride) {
        uint64_t v = loadUnit(in, u * 8, a.bytes);
        for (int q = 0; q < a.nranks; ++q)
            if (q != a.rank) llStore(a.slot[q] + u, v, a.flag);
    }
    // 2. Gather and reduce in rank order.
    const unsigned long long start = clock64();
    for (size_t u = first; u < units; u += stride) {
        uint64_t acc = 0;
        for (int q = 0; q < a.nranks; ++q) {
            uint64_t v;
            if (q == a.rank) {
                v = loadUnit(in, u * 8, a.bytes);
            } else {
                if (!llWait(a.mine[q] + u, a.flag, &v, start, a.timeoutCycles)) {
                    *a.abortFlag = 1;
                    return;
                }
            }
            acc = q == 0 ? v : reduceUnit<T, Op>(acc, v);
        }
        storeUnit((char *)a.out, u * 8, a.bytes, acc);
    }
}

template <typename T, typename Op> struct OneShotKernel {
    static cudaError_t launch(const OneShotArgs &a, cudaStream_t stream) {
        oneShotKernel<T, Op><<<a.nblocks, kOneShotThreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t launchOneShotAllreduce(const OneShotArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<OneShotKernel>(dtype, op, a, stream);
}

} // namespace loom
