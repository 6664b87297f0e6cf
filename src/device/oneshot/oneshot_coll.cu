/*
 * One-shot collectives on the LL protocol, for small messages inside a host:
 * one hop over NVLink instead of a ring's n-1 or 2(n-1) steps. The schedule
 * (who sends whom what, who reduces) is oneshot_schedule.h; the kernel's body
 * is oneshot_body.h, shared with the resident kernel (resident_coll.cu).
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/kernel_load.h"
#include "device/oneshot/oneshot_body.h"

namespace loom {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(kOneShotThreads) oneShotKernel(OneShotArgs a) {
    oneShotBody<T, Op>(a, blockIdx.x, gridDim.x);
}

template <typename T, typename Op> struct OneShotKernel {
    static cudaError_t launch(const OneShotArgs &a, cudaStream_t stream) {
        oneShotKernel<T, Op><<<a.nblocks, kOneShotThreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
    static cudaError_t load(KernelLoad *l) { return loadKernels(l, oneShotKernel<T, Op>); }
};

} // namespace

cudaError_t launchOneShotColl(const OneShotArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<OneShotKernel>(dtype, op, a, stream);
}

// Data movement never reduces: one instance serves every type.
cudaError_t launchOneShotBytes(const OneShotArgs &a, cudaStream_t stream) {
    return OneShotKernel<uint8_t, OpSum>::launch(a, stream);
}

cudaError_t loadOneShotKernels(KernelLoad *l) { return loadTypeOps<OneShotKernel>(l); }

} // namespace loom
