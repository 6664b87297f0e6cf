/*
 * Recursive-doubling allreduce (rd_args.h), one CTA, walking rd_schedule.h
 * (the schedule the CPU simulation checks) chunk by chunk of one slot: each
 * exchange sends this rank's chunk, then receives the partner's and reduces
 * it into the output. Both partners reduce in the same order — op(lower
 * rank's value, upper rank's value) — so every rank ends with the same bits
 * even where op does not commute bitwise.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/edge_step.h"
#include "device/rd_args.h"
#include "device/rd_schedule.h"

namespace loom {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxRingThreads) rdAllreduceKernel(RdArgs a) {
    __shared__ bool failed; // edgeStep's: thread 0 writes it before a barrier, all read it after
    const T *in = (const T *)a.c.in;
    T *out = (T *)a.c.out;
    const size_t chunkElems = a.c.slotBytes / sizeof(T);
    const size_t nchunks = (a.c.count + chunkElems - 1) / chunkElems;
    EdgeCounters k[kRdEdgeSlots];
    for (int e = 0; e < kRdEdgeSlots; ++e) k[e].sent = k[e].recvd = a.edge[e].step;
    const Waiter wait{a.c.timeoutCycles};
    if (threadIdx.x == 0) failed = false;
    __syncthreads();
    const size_t ops = rdOpCount(a.role, nchunks);
    bool ok = true;
    for (size_t i = 0; i < ops && ok; ++i) {
        const RdOp op = rdOp(a.role, nchunks, i);
        const size_t off = op.chunk * chunkElems;
        const size_t len = op.chunk + 1 < nchunks ? chunkElems : a.c.count - off;
        const T *value = (op.fromIn ? in : out) + off;
        if (op.kind == kRdCopy) {
            ProtoSimple::move<T, Op>(0, nullptr, in + off, nullptr, out + off, len, false, 0, 0, 0);
            continue;
        }
        const PeerEdge &d = a.edge[op.edge];
        EdgeCounters &kc = k[op.edge];
        if (op.kind == kRdSend)
            ok = edgeStep<T, Op>(d, kc, true, value, nullptr, len, false, a.c.nslots, a.c.slotBytes, wait, &failed);
        else if (op.inFirst)
            ok = edgeStep<T, Op, true>(d, kc, false, value, out + off, len, op.reduce, a.c.nslots, a.c.slotBytes,
                                       wait, &failed);
        else
            ok = edgeStep<T, Op>(d, kc, false, value, out + off, len, op.reduce, a.c.nslots, a.c.slotBytes, wait,
                                 &failed);
    }
    if (!ok && threadIdx.x == 0) *a.c.abortFlag = 1;
}

template <typename T, typename Op> struct RdKernel {
    static cudaError_t launch(const RdArgs &a, cudaStream_t stream) {
        rdAllreduceKernel<T, Op><<<1, a.c.nthreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t launchRdAllreduce(const RdArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<RdKernel>(dtype, op, a, stream);
}

} // namespace loom
