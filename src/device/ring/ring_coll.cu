/*
 * Every ring collective (allreduce, reduce_scatter, allgather, and the
 * broadcast and reduce chains): one CTA per channel walks ring_schedule.h
 * and runs each step as one primitive of Prims over the channel's
 * connections. What differs between collectives is only where a step's block
 * lives in the user's buffers (ringStepOffsets). Reductions are compiled per
 * (protocol, type, op); allgather and broadcast once, over bytes.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/kernel_load.h"
#include "device/prims.h"
#include "device/prims_ll.h"
#include "device/prims_ll128.h"
#include "device/prims_simple.h"
#include "device/ring/ring_schedule.h"

namespace loom {
namespace {

template <typename Proto, typename T, typename Op>
__global__ void __launch_bounds__(kMaxRingThreads) ringKernel(RingArgs a) {
    if (!callStarted(a.wait)) return;
    constexpr size_t kAlign = sizeof(T) >= 16 ? 1 : 16 / sizeof(T); // 16-byte vectors
    const RingChannel *c = a.chans + blockIdx.x;
    const size_t slotElems = ringSlotDataBytes(Proto::kId, a.slotBytes) / sizeof(T);
    const RingGeom g = ringGeom(a.coll, a.blocks, a.nranks, a.nchannels, blockIdx.x, slotElems, kAlign);
    const T *in = (const T *)a.in;
    T *out = (T *)a.out;
    if (a.nranks == 1) { // no steps: the result is the input (an allgather's lands at its displacement)
        const size_t to = a.coll == loomCollAllGather ? ringBlockDispl(a.blocks, 0) : 0;
        size_t b = g.begin, e = g.begin + g.n;
        if (a.coll == loomCollAllGather || a.coll == loomCollReduceScatter)
            channelRange(ringBlockCount(a.blocks, 0), a.nchannels, blockIdx.x, kAlign * 4, &b, &e);
        if (in + b != out + to + b)
            ProtoSimple::move<T, Op>(nullptr, nullptr, in + b, nullptr, out + to + b, e - b, false, 0, 0, 0);
        return;
    }
    Prims<Proto, T, Op> prims(&c->conn, &a.steps[blockIdx.x], a.nslots, a.slotBytes, a.wait, a.abortFlag);
    const int nsteps = ringStepsPerRound(a.coll, a.nranks);
    const int rootPos = c->posOf[a.root]; // this channel's ring
    for (size_t round = 0; round < g.rounds; ++round) {
        for (int s = 0; s < nsteps; ++s) {
            const RingStep st = ringCollStep(a.coll, c->pos, rootPos, a.nranks, s);
            const int owner = (a.coll == loomCollReduceScatter || a.coll == loomCollAllGather) ? c->order[st.chunk] : 0;
            size_t inAt, outAt, len;
            ringStepOffsets(a.coll, g, a.blocks, a.nranks, a.nchannels, blockIdx.x, kAlign, round, st.chunk, owner,
                            &inAt, &outAt, &len);
            if (!prims.run(ringEdgeOp(st, round, inAt, outAt, len), in, out, nullptr)) return;
        }
    }
}

template <typename T, typename Op> struct RingKernel {
    static cudaError_t launch(const RingArgs &a, cudaStream_t stream) {
        if (a.proto == kProtoLL) ringKernel<ProtoLL, T, Op><<<a.nchannels, a.nthreads, 0, stream>>>(a);
        else if (a.proto == kProtoLL128) ringKernel<ProtoLL128, T, Op><<<a.nchannels, a.nthreads, 0, stream>>>(a);
        else ringKernel<ProtoSimple, T, Op><<<a.nchannels, a.nthreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
    static cudaError_t load(KernelLoad *l) {
        return loadKernels(l, ringKernel<ProtoLL, T, Op>, ringKernel<ProtoLL128, T, Op>, ringKernel<ProtoSimple, T, Op>);
    }
};

} // namespace

cudaError_t launchRingColl(const RingArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<RingKernel>(dtype, op, a, stream);
}

cudaError_t launchRingBytes(const RingArgs &a, cudaStream_t stream) {
    return RingKernel<uint8_t, OpSum>::launch(a, stream); // the op is never applied: no step reduces
}

cudaError_t loadRingKernels(KernelLoad *l) { return loadTypeOps<RingKernel>(l); }

} // namespace loom
