/*
 * The exchange kernel (alltoall(v), gather(v), scatter(v)): one CTA per lane
 * walks its rounds of exchange_schedule.h. In a round the lane sends to one
 * peer and receives from another, each over its channel's connection with
 * that peer, so a round runs as Prims over one pair made of the two halves,
 * with the step counters the host keeps for them; each half is used in one
 * round per call (sends to q in round q - r, receives from q in round
 * r - q) and by one channel, so the lanes never share a counter. Over
 * bytes, on the Simple protocol.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/prims.h"
#include "device/prims_simple.h"

namespace loom {
namespace {

// __grid_constant__: the inlined tables are read in place (their address is
// taken), not copied per thread.
__global__ void __launch_bounds__(kMaxRingThreads) exchangeKernel(const __grid_constant__ ExchangeArgs a) {
    using P = Prims<ProtoSimple, uint8_t, OpSum, 1>;
    ExchangeSched s = a.s;
    const ConnSteps *stepsOf = a.steps;
    if (!s.sendCount) { // the tables are in the parameters
        const size_t n = (size_t)s.nranks;
        s.sendCount = a.inlined;
        s.sendDispl = a.inlined + n;
        s.recvCount = a.inlined + 2 * n;
        s.recvDispl = a.inlined + 3 * n;
        stepsOf = reinterpret_cast<const ConnSteps *>(a.inlined + 4 * n);
    }
    const int lane = blockIdx.x, ch = exchangeChannel(s, lane);
    const uint8_t *in = (const uint8_t *)a.in;
    uint8_t *out = (uint8_t *)a.out;
    ExchangeCursor c = exchangeFirst(s, lane);
    while (!exchangeDone(s, c)) {
        const int round = c.round;
        const int to = exchangeConn(s, exchangeTo(s, round), ch), from = exchangeConn(s, exchangeFrom(s, round), ch);
        // This round's pair (every thread its own copy: Prims reads it per step).
        ConnPair pair;
        pair.send = a.conns[to].send;
        pair.recv = a.conns[from].recv;
        ConnSteps steps;
        steps.send = stepsOf[to].send;
        steps.recv = stepsOf[from].recv;
        P prims(&pair, &steps, a.nslots, a.slotBytes, a.timeoutCycles, a.abortFlag);
        for (; !exchangeDone(s, c) && c.round == round; c = exchangeNext(s, lane, c)) {
            EdgeOp o = exchangeOp(s, lane, c);
            o.send = o.send >= 0 ? 0 : -1;
            o.recv = o.recv >= 0 ? 0 : -1;
            if (!prims.run(o, in, out, nullptr)) {
                if (threadIdx.x == 0) { // who this round waited on, for the host's message
                    a.abortFlag[kAbortSendPeer] = exchangeTo(s, round) + 1;
                    a.abortFlag[kAbortRecvPeer] = exchangeFrom(s, round) + 1;
                }
                return;
            }
        }
    }
}

} // namespace

cudaError_t launchExchange(const ExchangeArgs &a, cudaStream_t stream) {
    exchangeKernel<<<a.s.lanes, a.nthreads, 0, stream>>>(a);
    return cudaGetLastError();
}

} // namespace loom
