/*
 * Every collective over a rank's edges (edge_schedule.h: the tree and
 * recursive-doubling allreduce, the doubling broadcast, reduce, allgather
 * and reduce_scatter): one CTA per lane walks its ops and runs each as one
 * primitive of Prims over the edge table. Small messages across hosts, on
 * the Simple protocol. Reductions are compiled per (type, op); broadcast and
 * allgather once, over bytes.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/kernel_load.h"
#include "device/prims.h"
#include "device/prims_simple.h"

namespace loom {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxRingThreads) edgeKernel(EdgeArgs a) {
    if (!callStarted(a.wait)) return;
    Prims<ProtoSimple, T, Op, kEdgeSlots> prims(a.conns, a.steps, a.nslots, a.slotBytes, a.wait,
                                                a.abortFlag);
    const T *in = (const T *)a.in;
    T *out = (T *)a.out, *acc = (T *)a.acc;
    for (size_t i = 0, n = edgeOpCount(a.s, blockIdx.x); i < n; ++i)
        if (!prims.run(edgeSchedOp(a.s, blockIdx.x, i), in, out, acc)) return;
}

template <typename T, typename Op> struct EdgeKernel {
    static cudaError_t launch(const EdgeArgs &a, cudaStream_t stream) {
        edgeKernel<T, Op><<<edgeLanes(a.s), a.nthreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
    static cudaError_t load(KernelLoad *l) { return loadKernels(l, edgeKernel<T, Op>); }
};

} // namespace

cudaError_t launchEdgeColl(const EdgeArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<EdgeKernel>(dtype, op, a, stream);
}

cudaError_t launchEdgeBytes(const EdgeArgs &a, cudaStream_t stream) {
    return EdgeKernel<uint8_t, OpSum>::launch(a, stream); // the op is never applied: no step reduces
}

cudaError_t loadEdgeKernels(KernelLoad *l) { return loadTypeOps<EdgeKernel>(l); }

} // namespace loom
