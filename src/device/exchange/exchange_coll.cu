/*
 * The exchange kernel (alltoall(v), gather(v), scatter(v)): one CTA per lane
 * walks its rounds of exchange_schedule.h. In a round the lane sends to one
 * peer and receives from another, each over its channel's connection with
 * that peer, so a round runs as Prims over one pair made of the two halves,
 * with the step counters the host keeps for them; each half is used in one
 * round per call (sends to q in round q - r, receives from q in round
 * r - q) and by one channel, so the lanes never share a counter. Over
 * bytes, on the Simple protocol. A direct half (the receiver reads the
 * sender's input in place, or the sender writes into the receiver's output:
 * direct_pair.h) is one step of its channel; the end that does not copy
 * signals first in the round and awaits the other end last. One-shot
 * pairs (small blocks, empty ones too) move as the one-shot alltoall's LL
 * lines through the one-shot slots, by CTAs of their own after the lanes
 * (oneshot_body.h with the call's pair bound). Copies left to
 * the copy engines (a gather's direct pairs, or every pushed pair in
 * copy-engine mode) take a second kernel, exchangeAfterCopiesKernel.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/datatype/dt_view_copy.h"
#include "device/exchange/direct_pair.h"
#include "device/kernel_load.h"
#include "device/oneshot/oneshot_body.h"
#include "device/prims.h"
#include "device/prims_simple.h"

namespace loom {
namespace {

// Where a lane gave up: who its round waited on, for the host's message.
__device__ void exchangeAbort(const ExchangeArgs &a, const ExchangeSched &s, int round) {
    if (threadIdx.x == 0) {
        a.abortFlag[kAbortSendPeer] = exchangeTo(s, round) + 1;
        a.abortFlag[kAbortRecvPeer] = exchangeFrom(s, round) + 1;
        a.abortFlag[kAbortSet] = 1;
    }
}

// The call's schedule with its tables resolved (in the parameters, or in
// device memory), and each connection's steps before the call.
__device__ ExchangeSched exchangeTables(const ExchangeArgs &a, const ConnSteps **stepsOf) {
    ExchangeSched s = a.s;
    *stepsOf = a.steps;
    if (!s.sendCount) { // the tables are in the parameters
        const size_t n = (size_t)s.nranks;
        s.sendCount = a.inlined;
        s.sendDispl = a.inlined + n;
        s.recvCount = a.inlined + 2 * n;
        s.recvDispl = a.inlined + 3 * n;
        if (a.direct) {
            s.directSend = a.inlined + 4 * n;
            s.directSrc = a.inlined + 5 * n;
        }
        *stepsOf = reinterpret_cast<const ConnSteps *>(a.inlined + (a.direct ? 6 : 4) * n);
    }
    return s;
}

// The view's copy by the whole CTA, a piece per warp, called, not inlined:
// its words get registers of their own instead of spilling the kernel's
// (inlined, or with the lanes form for small pieces beside it, the kernel
// spilled and the fused alltoall ran slower: docs/performance.md).
__device__ __noinline__ void viewCopy(const DtView &v, char *user, size_t at, size_t len, char *flat, bool toUser) {
    dtViewCopySpread(v, user, at, len, flat, toUser, threadIdx.x / 32, blockDim.x / 32, threadIdx.x & 31);
}

// Input bytes [at, at + len) (packed offsets, through the send view when it
// has blocks) to dst, by the whole CTA.
__device__ void copyIn(const ExchangeArgs &a, size_t at, size_t len, uint8_t *dst) {
    if (a.inView.nblocks)
        viewCopy(a.inView, (char *)a.in, at, len, (char *)dst, false);
    else
        directCopy((const uint8_t *)a.in + at, dst, len);
}

// src to output bytes [at, at + len) (through the receive view when it has
// blocks), by the whole CTA.
__device__ void copyOut(const ExchangeArgs &a, const uint8_t *src, size_t at, size_t len) {
    if (a.outView.nblocks)
        viewCopy(a.outView, (char *)a.out, at, len, (char *)src, true);
    else
        directCopy(src, (uint8_t *)a.out + at, len);
}

// One FIFO op of the walk (a chunk sent, received, or of the own block
// copied): through Prims' own moves where no view is in the way, else the
// view's copy between the user's layout and the slot (a chunk of the own
// block with both views through selfScratch).
template <typename P>
__device__ bool fifoOp(const ExchangeArgs &a, const ExchangeSched &s, P &prims, EdgeOp o) {
    const bool local = o.recv < 0 && o.send < 0;
    const bool viewIn = a.inView.nblocks && (local || o.send >= 0), viewOut = a.outView.nblocks && (local || o.recv >= 0);
    o.send = o.send >= 0 ? 0 : -1;
    o.recv = o.recv >= 0 ? 0 : -1;
    if (!viewIn && !viewOut) return prims.run(o, (const uint8_t *)a.in, (uint8_t *)a.out, nullptr);
    if (o.send >= 0) return prims.stepWith(false, o.len, [&](char *slot) { copyIn(a, o.srcAt, o.len, (uint8_t *)slot); });
    if (o.recv >= 0) return prims.stepWith(true, o.len, [&](char *slot) { copyOut(a, (uint8_t *)slot, o.dstAt, o.len); });
    if (!viewOut) { // the own block: packed offsets srcAt (input) and dstAt (output)
        copyIn(a, o.srcAt, o.len, (uint8_t *)a.out + o.dstAt);
    } else if (!viewIn) {
        copyOut(a, (const uint8_t *)a.in + o.srcAt, o.dstAt, o.len);
    } else {
        uint8_t *mid = (uint8_t *)a.selfScratch + (o.srcAt - s.sendDispl[s.rank]);
        copyIn(a, o.srcAt, o.len, mid);
        __syncthreads(); // the chunk packed, block-wide, before any warp unpacks it
        copyOut(a, mid, o.dstAt, o.len);
    }
    __syncthreads();
    return true;
}

// The one-shot pairs' CTAs: plain bytes of the call's buffers, never
// through a view (the host packs a side with such blocks:
// stage_datatype.cc). Not inlined: the lanes' registers stay theirs. A line
// that did not come has set the abort words (its peer named).
__device__ __noinline__ void exchangeOneShotPairs(const OneShotArgs &a, int cta) {
    oneShotBody<uint8_t, OpSum>(a, cta, a.nblocks);
}

// __grid_constant__: the inlined tables are read in place (their address is
// taken), not copied per thread.
__global__ void __launch_bounds__(kMaxRingThreads) exchangeKernel(const __grid_constant__ ExchangeArgs a) {
    if (blockIdx.x >= exchangeAllLanes(a.s)) return exchangeOneShotPairs(a.pairs, blockIdx.x - exchangeAllLanes(a.s));
    if (!callStarted(a.wait)) return;
    using P = Prims<ProtoSimple, uint8_t, OpSum, 1>;
    const ConnSteps *stepsOf;
    const ExchangeSched s = exchangeTables(a, &stepsOf);
    const int lane = blockIdx.x, ch = exchangeChannel(s, lane);
    const uint8_t *in = (const uint8_t *)a.in;
    uint8_t *out = (uint8_t *)a.out;
    ExchangeCursor c = exchangeFirst(s, lane);
    // Every round of the lane (a direct half may be all a round has).
    for (int round = exchangeFirstRound(s, lane); round < s.nranks; round = exchangeNextRound(s, lane, round)) {
        const int toPeer = exchangeTo(s, round), fromPeer = exchangeFrom(s, round);
        const bool directSend = round > 0 && exchangeSendDirect(s, toPeer);
        const bool directRecv = round > 0 && exchangeRecvDirect(s, fromPeer);
        const bool fifoOps = !exchangeDone(s, c) && c.round == round;
        if (!directSend && !directRecv && !fifoOps) continue;
        const int to = exchangeConn(s, toPeer, ch), from = exchangeConn(s, fromPeer, ch);
        // This round's pair (every thread its own copy: Prims reads it per step).
        ConnPair pair;
        pair.send = a.conns[to].send;
        pair.recv = a.conns[from].recv;
        ConnSteps steps;
        steps.send = stepsOf[to].send;
        steps.recv = stepsOf[from].recv;
        // The round's order (exchange_schedule.h): signals, copies, FIFO ops,
        // waits for the other ends' copies.
        const bool sendCopies = exchangeDirectCopies(s, true), recvCopies = exchangeDirectCopies(s, false);
        if (directSend && !sendCopies) directPublish(pair.send, steps.send);
        if (directRecv && !recvCopies) directReady(pair.recv, steps.recv);
        if (directSend && sendCopies && s.deferCopies) {
            if (!directAwaitHead(pair.send, steps.send, a.wait)) return exchangeAbort(a, s, round);
        } else if (directSend && sendCopies) {
            size_t lo, hi;
            exchangeDirectSlice(s.sendCount[toPeer], s.channels, ch, &lo, &hi);
            uint8_t *dst = reinterpret_cast<uint8_t *>(s.directSend[toPeer]) + lo;
            const size_t at = s.sendDispl[toPeer] + lo;
            const bool mapped = dst != in + at; // else the handshake only
            if (!directWrite(pair.send, steps.send, [&] { if (mapped) copyIn(a, at, hi - lo, dst); }, mapped, a.wait))
                return exchangeAbort(a, s, round);
        }
        if (directRecv && recvCopies) {
            size_t lo, hi;
            exchangeDirectSlice(s.recvCount[fromPeer], s.channels, ch, &lo, &hi);
            const uint8_t *src = reinterpret_cast<const uint8_t *>(s.directSrc[fromPeer]) + lo;
            const size_t at = s.recvDispl[fromPeer] + lo;
            if (!directRead(pair.recv, steps.recv, [&] { if (src != out + at) copyOut(a, src, at, hi - lo); }, a.wait))
                return exchangeAbort(a, s, round);
        }
        if (fifoOps) {
            P prims(&pair, &steps, a.nslots, a.slotBytes, a.wait, a.abortFlag);
            for (; !exchangeDone(s, c) && c.round == round; c = exchangeNext(s, lane, c)) {
                EdgeOp o = exchangeOp(s, lane, c);
                if (!fifoOp(a, s, prims, o)) return exchangeAbort(a, s, round);
            }
        }
        if (directSend && !sendCopies && !directAwaitHead(pair.send, steps.send, a.wait))
            return exchangeAbort(a, s, round);
        if (directRecv && !recvCopies && !s.deferWaits && // deferred waits: the second kernel's
            !directAwaitWritten(pair.recv, steps.recv, a.wait, a.abortFlag + kAbortUndelivered, fromPeer))
            return exchangeAbort(a, s, round);
    }
}

// Deferred copies (exchange_schedule.h): after the exchange kernel and the
// copy engines' writes (done: stream order), the publication of every
// channel of each pushed direct send. One thread per connection. Marked
// written only where the block was: not where the mapping failed, the
// copies could not be enqueued, or the first kernel gave up (it timed out
// waiting for the root's ready: the copies may have landed in an output
// the root had not freed, so its call must fail, not take them). Then, with
// deferred waits (copy-engine mode), every pushed direct receive's writes,
// awaited only once this rank's own are published.
__global__ void exchangeAfterCopiesKernel(const __grid_constant__ ExchangeArgs a) {
    if (!callStarted(a.wait)) return;
    const ConnSteps *stepsOf;
    const ExchangeSched s = exchangeTables(a, &stepsOf);
    const int conns = s.nranks * s.channels;
    const char *in = static_cast<const char *>(a.in);
    const bool wrote = !a.enginesFailed && !a.abortFlag[kAbortSet];
    for (int k = threadIdx.x; s.deferCopies && k < conns; k += blockDim.x) {
        const int q = k / s.channels;
        if (q != s.rank && exchangeSendDirect(s, q)) // mapped: the copy's two ends differ
            directPublishWritten(a.conns[k].send, stepsOf[k].send,
                                 wrote && s.directSend[q] != reinterpret_cast<size_t>(in + s.sendDispl[q]));
    }
    if (!s.deferWaits) return;
    __syncthreads(); // every publication before any wait
    __shared__ int failed;
    if (threadIdx.x == 0) failed = 0;
    __syncthreads();
    for (int k = threadIdx.x; !a.abortFlag[kAbortSet] && k < conns; k += blockDim.x) {
        const int q = k / s.channels;
        if (q == s.rank || !exchangeRecvDirect(s, q)) continue;
        if (!directAwaitWrittenThread(a.conns[k].recv, stepsOf[k].recv, a.wait,
                                      a.abortFlag + kAbortUndelivered, q))
            atomicExch(&failed, q + 1);
    }
    __syncthreads();
    if (threadIdx.x == 0 && failed) { // who never wrote, for the host's message
        a.abortFlag[kAbortRecvPeer] = failed;
        a.abortFlag[kAbortSet] = 1;
    }
}

} // namespace

cudaError_t launchExchange(const ExchangeArgs &a, cudaStream_t stream) {
    exchangeKernel<<<exchangeAllLanes(a.s) + a.pairs.nblocks, a.nthreads, 0, stream>>>(a);
    return cudaGetLastError();
}

cudaError_t launchExchangeAfterCopies(const ExchangeArgs &a, cudaStream_t stream) {
    exchangeAfterCopiesKernel<<<1, 256, 0, stream>>>(a);
    return cudaGetLastError();
}

cudaError_t loadExchangeKernels(KernelLoad *l) { return loadKernels(l, exchangeKernel, exchangeAfterCopiesKernel); }

} // namespace loom
