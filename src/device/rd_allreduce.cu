/*
 * Recursive-doubling allreduce (rd_args.h), one CTA, chunk by chunk of one
 * slot: each exchange sends this rank's chunk, then receives the partner's
 * and reduces it into the output. Both partners reduce in the same order —
 * op(lower rank's value, upper rank's value) — so every rank ends with the
 * same bits even where op does not commute bitwise.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/edge_step.h"
#include "device/rd_args.h"

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
    auto len = [&](size_t c) { return c + 1 < nchunks ? chunkElems : a.c.count - c * chunkElems; };
    const int x = kMaxRdSteps; // the extra rank's edge
    bool ok = true;

    if (a.isExtra) {
        // Hand the input to the rank that does the steps; the result comes back.
        for (size_t c = 0; c < nchunks && ok; ++c)
            ok = edgeStep<T, Op>(a.edge[x], k[x], true, in + c * chunkElems, nullptr, len(c), false, a.c.nslots,
                                 a.c.slotBytes, wait, &failed);
        for (size_t c = 0; c < nchunks && ok; ++c)
            ok = edgeStep<T, Op>(a.edge[x], k[x], false, nullptr, out + c * chunkElems, len(c), false, a.c.nslots,
                                 a.c.slotBytes, wait, &failed);
    } else {
        // The running value: out after the first reduction, in before it.
        const T *mine = in;
        if (a.hasExtra) { // this rank is the lower: op(mine, extra's)
            for (size_t c = 0; c < nchunks && ok; ++c)
                ok = edgeStep<T, Op, true>(a.edge[x], k[x], false, in + c * chunkElems, out + c * chunkElems, len(c),
                                           true, a.c.nslots, a.c.slotBytes, wait, &failed);
            mine = out;
        }
        for (int s = 0; s < a.steps && ok; ++s) {
            const bool lower = (a.rank & (1 << s)) == 0;
            for (size_t c = 0; c < nchunks && ok; ++c) {
                const size_t off = c * chunkElems;
                ok = edgeStep<T, Op>(a.edge[s], k[s], true, mine + off, nullptr, len(c), false, a.c.nslots, a.c.slotBytes,
                                     wait, &failed);
                if (!ok) break;
                ok = lower ? edgeStep<T, Op, true>(a.edge[s], k[s], false, mine + off, out + off, len(c), true,
                                                   a.c.nslots, a.c.slotBytes, wait, &failed)
                           : edgeStep<T, Op>(a.edge[s], k[s], false, mine + off, out + off, len(c), true, a.c.nslots,
                                             a.c.slotBytes, wait, &failed);
            }
            mine = out;
        }
        if (mine == in && ok) // one rank, nothing folded: the result is the input
            ProtoSimple::move<T, Op>(a, nullptr, in, nullptr, out, a.c.count, false, 0, 0, 0);
        for (size_t c = 0; c < nchunks && ok && a.hasExtra; ++c)
            ok = edgeStep<T, Op>(a.edge[x], k[x], true, out + c * chunkElems, nullptr, len(c), false, a.c.nslots,
                                 a.c.slotBytes, wait, &failed);
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
