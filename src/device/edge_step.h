/*
 * One chunk over a PeerEdge, for a whole CTA: thread 0 waits (data from the
 * peer, or a free slot in its FIFO), every thread moves its part
 * (ProtoSimple's bulk move: receive, reduce with `in`, copy to `out` and/or
 * into the peer's slot), the writers fence, and thread 0 publishes the step
 * or returns the credit. The tree and recursive-doubling kernels are
 * sequences of these.
 */
#pragma once

#include "device/peer_edge.h"
#include "device/prims_simple.h"
#include "device/fifo.h"
#include "device/wait.h"

namespace loom {

struct EdgeCounters {
    uint64_t sent, recvd; // every thread keeps them: they pick the slots
};

// recv: out[i] = reduce ? op(slot[i], in[i]) (InFirst: op(in[i], slot[i])) : slot[i].
// send: the peer's slot[i] = in[i]. False when the peer stayed silent
// (same answer in every thread). `failed` is a __shared__ flag of the CTA.
template <typename T, typename Op, bool InFirst = false>
__device__ bool edgeStep(const PeerEdge &d, EdgeCounters &k, bool send, const T *in, T *out, size_t len, bool reduce,
                         int nslots, size_t slotBytes, const Waiter &wait, bool *failed) {
    const bool recv = !send;
    if (threadIdx.x == 0) {
        const bool ok = recv ? wait([&] { return *d.recvTail > k.recvd; })
                             : wait([&] { return k.sent - *d.sendHead < (uint64_t)nslots; });
        *failed = !ok;
        __threadfence(); // order the flag read before the data reads below
    }
    __syncthreads();
    if (*failed) return false;
    if (recv) {
        const void *slot = d.recvSlots + (k.recvd % nslots) * slotBytes;
        ProtoSimple::move<T, Op, InFirst>(0, slot, in, nullptr, out, len, reduce, 0, 0, 0);
    } else {
        void *slot = d.sendSlots + (k.sent % nslots) * slotBytes;
        ProtoSimple::move<T, Op>(0, nullptr, in, slot, nullptr, len, false, 0, 0, 0);
        ProtoSimple::fenceSend();
    }
    __syncthreads(); // every thread's part moved (and fenced) before the flags move
    if (threadIdx.x == 0) {
        if (send) {
            if (d.sendSizes) { // the proxy sends stepBytes, which must land before the tail
                stepBytesOf(d.peerRecvTail)[k.sent % nslots] = len * sizeof(T);
                __threadfence_system();
            }
            *d.peerRecvTail = k.sent + 1;
        } else {
            *d.peerSendHead = k.recvd + 1;
        }
    }
    if (send) ++k.sent;
    else ++k.recvd;
    return true;
}

} // namespace loom
