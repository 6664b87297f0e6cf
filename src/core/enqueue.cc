/*
 * Plan and enqueue: how many channels a call uses and what each kernel CTA
 * is told; advances the per-channel FIFO step counters exactly as the kernel
 * will (the same schedule functions, so both sides of a ring stay in step).
 */
#include <cstring>

#include "core/comm.h"
#include "core/debug.h"
#include "core/params.h"
#include "device/collectives.h"
#include "device/ring_schedule.h"
#include "device/tree_schedule.h"

using namespace loom;

extern "C" size_t loomTypeSize(loomDataType_t type) {
    switch (type) {
    case loomInt8: case loomUint8: return 1;
    case loomFloat16: case loomBfloat16: return 2;
    case loomInt32: case loomUint32: case loomFloat32: return 4;
    case loomInt64: case loomUint64: case loomFloat64: return 8;
    default: return 0;
    }
}

namespace {

// Every rank derives the same number from the same count.
int channelsFor(const loomComm *comm, size_t bytes) {
    size_t n = bytes / (size_t)params().minChannelBytes;
    if (n < 1) n = 1;
    return n < (size_t)comm->maxChannels ? (int)n : comm->maxChannels;
}

// Small messages: every rank pushes its input to every peer as LL lines and
// reduces locally (one hop). Slots alternate between two parities per call.
loomResult_t oneShotAllReduce(const void *in, void *out, size_t bytes, loomDataType_t dtype, loomRedOp_t op,
                              loomComm *comm, cudaStream_t stream) {
    OneShotArgs a;
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.out = out;
    a.bytes = bytes;
    a.nranks = comm->nranks;
    a.rank = comm->rank;
    size_t units = (bytes + 7) / 8;
    size_t blocks = (units + kOneShotThreads - 1) / kOneShotThreads;
    a.nblocks = (int)(blocks < (size_t)kMaxOneShotBlocks ? blocks : kMaxOneShotBlocks);
    uint32_t call = ++comm->llCalls;
    if (call == 0) call = ++comm->llCalls; // flag 0 would match zeroed slots
    a.flag = call;
    size_t parity = (size_t)(call & 1) * comm->nranks;
    for (int q = 0; q < comm->nranks; ++q) {
        char *mine = static_cast<char *>(comm->region.base) + comm->llOffset;
        a.mine[q] = reinterpret_cast<const LLLine *>(mine + (parity + q) * comm->llSlotBytes);
        if (q != comm->rank)
            a.slot[q] = reinterpret_cast<LLLine *>(comm->peerBase[q] + comm->llOffset +
                                                   (parity + comm->rank) * comm->llSlotBytes);
    }
    a.timeoutCycles = comm->timeoutCycles;
    a.abortFlag = comm->abortFlagDev;
    cudaError_t err = launchOneShotAllreduce(a, dtype, op, stream);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): one-shot allreduce launch: %s", comm->rank,
                    comm->cudaDev, comm->busId, cudaGetErrorString(err));
    return loomSuccess;
}

EdgeCall edgeCall(const loomComm *comm, const void *in, void *out, size_t count) {
    EdgeCall c;
    c.in = in;
    c.out = out;
    c.count = count;
    c.nthreads = params().ringThreads;
    c.nslots = comm->nslots;
    c.slotBytes = comm->edgeSlotBytes;
    c.timeoutCycles = comm->timeoutCycles;
    c.abortFlag = comm->abortFlagDev;
    return c;
}

// A call moves `chunks` slots each way over edge slot k (if this rank has
// that edge): the step counters follow, and the proxy is told for net edges.
void advanceEdge(loomComm *comm, int k, uint64_t chunks) {
    if (comm->edgePeer[k] < 0 || !chunks) return;
    comm->edge[k].step += chunks;
    if (comm->edgeNet[k].send) netPost(&comm->edgeNet[k], 1, &chunks);
}

// Small messages across hosts: the double binary tree, log2(hosts) network
// hops each way. Both trees take half the data; every edge moves one slot per
// chunk each way, which the step counters (and the proxy) follow.
loomResult_t treeAllReduce(const void *in, void *out, size_t count, size_t esize, loomDataType_t dtype,
                           loomRedOp_t op, loomComm *comm, cudaStream_t stream) {
    TreeArgs a;
    memset(&a, 0, sizeof(a));
    a.c = edgeCall(comm, in, out, count);
    for (int t = 0; t < 2; ++t) {
        a.tree[t].node = comm->treeNode[t];
        a.tree[t].lag = comm->nslots / 2 > 0 ? comm->nslots / 2 : 1; // the schedule is deadlock-free for any lag
        for (int e = 0; e < kTreeEdges; ++e) a.tree[t].edge[e] = comm->edge[treeEdgeSlot(t, e)];
    }
    cudaError_t err = launchTreeAllreduce(a, dtype, op, stream);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): tree allreduce launch: %s", comm->rank,
                    comm->cudaDev, comm->busId, cudaGetErrorString(err));
    for (int t = 0; t < 2; ++t) {
        size_t b, e;
        treeHalf(count, esize, t, &b, &e);
        const uint64_t chunks = treeChunks(e - b, treeChunkElems(comm->edgeSlotBytes, esize));
        for (int k = treeEdgeSlot(t, 0); k < treeEdgeSlot(t + 1, 0); ++k) advanceEdge(comm, k, chunks);
    }
    LOOM_TRACE(kColl, "rank %d: allreduce %zu x %zu B, trees", comm->rank, count, esize);
    return loomSuccess;
}

// Small messages across hosts: recursive doubling, log2(ranks) network hops
// (two more for ranks beyond a power of two). Every edge of this rank moves
// every chunk once each way.
loomResult_t rdAllReduce(const void *in, void *out, size_t count, size_t esize, loomDataType_t dtype, loomRedOp_t op,
                         loomComm *comm, cudaStream_t stream) {
    RdArgs a;
    memset(&a, 0, sizeof(a));
    a.c = edgeCall(comm, in, out, count);
    a.role = comm->rdRole;
    for (int k = 0; k < kRdEdgeSlots; ++k) a.edge[k] = comm->edge[kTreeEdgeSlots + k];
    cudaError_t err = launchRdAllreduce(a, dtype, op, stream);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): recursive-doubling allreduce launch: %s", comm->rank,
                    comm->cudaDev, comm->busId, cudaGetErrorString(err));
    const uint64_t chunks = (count + comm->edgeSlotBytes / esize - 1) / (comm->edgeSlotBytes / esize);
    for (int k = kTreeEdgeSlots; k < kEdgeSlots; ++k) advanceEdge(comm, k, chunks);
    LOOM_TRACE(kColl, "rank %d: allreduce %zu x %zu B, recursive doubling", comm->rank, count, esize);
    return loomSuccess;
}

} // namespace

extern "C" loomResult_t loomAllReduce(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                      loomRedOp_t op, loomComm_t comm, cudaStream_t stream) {
    if (!comm) return fail(loomInvalidArgument, "loomAllReduce: comm is NULL");
    if (comm->failed) return fail(loomRemoteError, "loomAllReduce: rank %d: communicator failed earlier", comm->rank);
    size_t esize = loomTypeSize(datatype);
    if (!esize) return fail(loomInvalidArgument, "loomAllReduce: unknown datatype %d", (int)datatype);
    if ((int)op < 0 || op >= loomNumOps) return fail(loomInvalidArgument, "loomAllReduce: unknown op %d", (int)op);
    if (count == 0) return loomSuccess;
    if (!sendbuff || !recvbuff) return fail(loomInvalidArgument, "loomAllReduce: NULL buffer");
    if (!stream) stream = comm->stream;
    if (comm->allPeersMapped && count * esize <= comm->llMaxBytes)
        return oneShotAllReduce(sendbuff, recvbuff, count * esize, datatype, op, comm, stream);
    if (comm->rdReady && count * esize <= comm->rdMaxBytes)
        return rdAllReduce(sendbuff, recvbuff, count, esize, datatype, op, comm, stream);
    if (comm->treeReady && count * esize <= comm->treeMaxBytes)
        return treeAllReduce(sendbuff, recvbuff, count, esize, datatype, op, comm, stream);

    // Mid sizes: the ring on LL (low latency per step); large: Simple.
    const bool ll = count * esize <= comm->llRingMaxBytes;
    const int proto = ll ? kProtoLL : kProtoSimple;
    const size_t chBytes = ll ? comm->llRingChannelBytes : comm->channelBytes;
    uint64_t *steps = ll ? comm->llRingStep : comm->step;
    RingArgs a;
    memset(&a, 0, sizeof(a));
    a.proto = proto;
    a.sendSizes = comm->sendNet;
    a.in = sendbuff;
    a.out = recvbuff;
    a.count = count;
    a.nranks = comm->nranks;
    a.pos = comm->ringPos; // the schedule is in ring positions
    a.nchannels = channelsFor(comm, count * esize);
    a.nthreads = params().ringThreads;
    a.nslots = comm->nslots;
    a.slotBytes = ll ? comm->llRingSlotBytes : comm->slotBytes;
    a.timeoutCycles = comm->timeoutCycles;
    a.abortFlag = comm->abortFlagDev;
    for (int c = 0; c < a.nchannels && comm->nranks > 1; ++c) {
        const size_t at = (size_t)c * chBytes;
        auto flags = [&](char *area) { return reinterpret_cast<FifoFlags *>(area + at); };
        RingChannel &ch = a.ch[c];
        ch.recvSlots = comm->recvSlotBase[proto] + at + sizeof(FifoFlags);
        ch.recvTail = &flags(comm->recvArea[proto])->recvTail;
        ch.sendHead = &flags(comm->creditArea[proto])->sendHead;
        ch.sendSlots = comm->sendSlotBase[proto] + at + sizeof(FifoFlags);
        ch.nextRecvTail = &flags(comm->sendArea[proto])->recvTail;
        ch.prevSendHead = &flags(comm->prevCreditArea[proto])->sendHead;
        ch.step = steps[c];
    }
    cudaError_t err = launchRingAllreduce(a, datatype, op, stream);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): allreduce launch: %s", comm->rank, comm->cudaDev,
                    comm->busId, cudaGetErrorString(err));
    // The kernel sends 2(n-1) slots per round on each channel it runs (and
    // receives as many); the proxy moves them for net connections.
    const size_t align = 16 / esize;
    const size_t slotElems = ringSlotDataBytes(a.proto, a.slotBytes) / esize;
    uint64_t callSteps[kMaxChannels] = {};
    for (int c = 0; c < a.nchannels && comm->nranks > 1; ++c) {
        size_t b, e;
        channelRange(count, a.nchannels, c, align * 4, &b, &e);
        size_t chunk = ringChunkElems(e - b, comm->nranks, slotElems, align);
        callSteps[c] = ringRounds(e - b, comm->nranks, chunk) * (uint64_t)ringSendsPerRound(comm->nranks);
        steps[c] += callSteps[c];
    }
    if (comm->sendNet || comm->recvNet) netPost(&comm->net, a.nchannels, callSteps);
    LOOM_TRACE(kColl, "rank %d: allreduce %zu x %zu B, ring %s on %d channels", comm->rank, count, esize,
               ll ? "LL" : "Simple", a.nchannels);
    return loomSuccess;
}
