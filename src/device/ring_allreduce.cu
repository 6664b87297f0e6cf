/*
 * Ring allreduce: one CTA per channel walks the schedule of ring_schedule.h;
 * each step moves one chunk through a FIFO slot in the next rank's memory
 * (CUDA IPC), flow-controlled by a head counter (slots freed). Written once,
 * templated on protocol (Simple: bulk data + fence + tail flag; LL: lines
 * with inline flags), element type and op.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/prims_ll.h"
#include "device/prims_simple.h"
#include "device/ring_schedule.h"
#include "device/wait.h"

namespace loom {
namespace {

constexpr size_t kAlignBytes = 16;

template <typename Proto, typename T, typename Op>
__global__ void __launch_bounds__(kMaxRingThreads) ringAllreduceKernel(RingArgs a) {
    // Written only between the barriers where they are read, so every thread
    // sees the same value: waits fail before barrier 1, moves before barrier 2.
    __shared__ bool waitFailed, moveFailed;
    const RingChannel &c = a.ch[blockIdx.x];
    size_t begin, end;
    channelRange(a.count, a.nchannels, blockIdx.x, kAlignBytes / sizeof(T) * 4, &begin, &end);
    const size_t n = end - begin;
    const T *in = (const T *)a.in + begin;
    T *out = (T *)a.out + begin;
    const size_t slotElems = ringSlotDataBytes(Proto::kId, a.slotBytes) / sizeof(T);
    const size_t chunkElems = ringChunkElems(n, a.nranks, slotElems, kAlignBytes / sizeof(T));
    const size_t rounds = a.nranks > 1 ? ringRounds(n, a.nranks, chunkElems) : 0;
    const Waiter wait{a.timeoutCycles};
    uint64_t sent = c.step, recvd = c.step;
    if (threadIdx.x == 0) waitFailed = moveFailed = false;
    __syncthreads();
    bool abort = false;

    for (size_t round = 0; round < rounds; ++round) {
        for (int s = 0; s < ringStepsPerRound(a.nranks); ++s) {
            const RingStep st = ringAllreduceStep(a.pos, a.nranks, s);
            size_t off, len;
            ringChunk(n, a.nranks, chunkElems, round, st.chunk, &off, &len);
            if (threadIdx.x == 0) {
                bool ok = true;
                if (st.recv) ok = Proto::waitData(c, recvd, wait);
                if (ok && st.send) ok = wait([&] { return sent - *c.sendHead < (uint64_t)a.nslots; });
                waitFailed = !ok;
                __threadfence(); // order the flag reads before the data reads below
            }
            __syncthreads();
            if ((abort = waitFailed)) break;
            const void *src = st.recv ? c.recvSlots + (recvd % a.nslots) * a.slotBytes : nullptr;
            void *toNext = st.send ? c.sendSlots + (sent % a.nslots) * a.slotBytes : nullptr;
            bool ok = Proto::template move<T, Op>(a, src, in + off, toNext, st.toOutput ? out + off : nullptr, len,
                                                  st.reduce, (uint32_t)(recvd + 1), (uint32_t)(sent + 1), clock64());
            if (!ok) moveFailed = true;
            if (st.send) Proto::fenceSend();
            __syncthreads();
            if ((abort = moveFailed)) break;
            if (threadIdx.x == 0) {
                if (st.send) Proto::publish(a, c, sent, len * sizeof(T));
                if (st.recv) *c.prevSendHead = recvd + 1;
            }
            // Every thread keeps the counters: they pick the slots above.
            sent += st.send;
            recvd += st.recv;
        }
        if (abort) break;
    }
    if (abort) {
        if (threadIdx.x == 0) *a.abortFlag = 1;
        return;
    }
    // A single rank: no steps ran; the result is the input.
    if (a.nranks == 1 && a.in != a.out)
        ProtoSimple::move<T, Op>(a, nullptr, in, nullptr, out, n, false, 0, 0, 0);
}

template <typename T, typename Op> struct RingKernel {
    static cudaError_t launch(const RingArgs &a, cudaStream_t stream) {
        if (a.proto == kProtoLL) ringAllreduceKernel<ProtoLL, T, Op><<<a.nchannels, a.nthreads, 0, stream>>>(a);
        else ringAllreduceKernel<ProtoSimple, T, Op><<<a.nchannels, a.nthreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t launchRingAllreduce(const RingArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<RingKernel>(dtype, op, a, stream);
}

} // namespace loom
