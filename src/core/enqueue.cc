/*
 * The collectives' entry points: argument checks, then the algorithm and
 * protocol for the call (the selection rules below: one-shot LL, recursive
 * doubling, trees, rings), then that algorithm's plan, launch and commit.
 * Small-message allreduce algorithms (one-shot, trees, recursive doubling)
 * are planned here; the ring and its chains in enqueue_ring.cc.
 */
#include <cstring>

#include "core/comm.h"
#include "core/enqueue.h"
#include "core/debug.h"
#include "core/params.h"
#include "device/collectives.h"
#include "device/ring_schedule.h"
#include "device/tree_schedule.h"

using namespace loom;

extern "C" size_t loomTypeSize(loomDataType_t type) {
    switch (type) {
    case loomInt8: case loomUint8: return 1;
    case loomInt16: case loomUint16: case loomFloat16: case loomBfloat16: return 2;
    case loomInt32: case loomUint32: case loomFloat32: return 4;
    case loomInt64: case loomUint64: case loomFloat64: return 8;
    default: return 0;
    }
}

extern "C" int loomOpSupported(loomDataType_t type, loomRedOp_t op) {
    if (!loomTypeSize(type) || (int)op < 0 || op >= loomNumOps) return 0;
    const bool floating = type == loomFloat16 || type == loomBfloat16 || type == loomFloat32 || type == loomFloat64;
    return !floating || op == loomSum || op == loomProd || op == loomMin || op == loomMax;
}

namespace {

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
    comm->lastColl = "allreduce";
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
    if (comm->edgeNet[k].send) netPost(&comm->edgeNet[k], 1, &chunks, &chunks);
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
    comm->lastColl = "allreduce";
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
    comm->lastColl = "allreduce";
    cudaError_t err = launchRdAllreduce(a, dtype, op, stream);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): recursive-doubling allreduce launch: %s", comm->rank,
                    comm->cudaDev, comm->busId, cudaGetErrorString(err));
    const uint64_t chunks = (count + comm->edgeSlotBytes / esize - 1) / (comm->edgeSlotBytes / esize);
    for (int k = kTreeEdgeSlots; k < kEdgeSlots; ++k) advanceEdge(comm, k, chunks);
    LOOM_TRACE(kColl, "rank %d: allreduce %zu x %zu B, recursive doubling", comm->rank, count, esize);
    return loomSuccess;
}

// Checks every collective shares; loomSuccess means go on (count > 0).
loomResult_t checkCall(const char *what, loomComm *comm, loomDataType_t dtype, bool reduction, loomRedOp_t op) {
    if (!comm) return fail(loomInvalidArgument, "%s: comm is NULL", what);
    if (comm->failed) return fail(loomRemoteError, "%s: rank %d: communicator failed earlier", what, comm->rank);
    if (!loomTypeSize(dtype)) return fail(loomInvalidArgument, "%s: unknown datatype %d", what, (int)dtype);
    if (reduction && !loomOpSupported(dtype, op))
        return fail(loomInvalidArgument, "%s: op %d is not defined on datatype %d", what, (int)op, (int)dtype);
    return loomSuccess;
}

loomResult_t checkRoot(const char *what, const loomComm *comm, int root) {
    if (root < 0 || root >= comm->nranks)
        return fail(loomInvalidArgument, "%s: root %d of %d ranks", what, root, comm->nranks);
    return loomSuccess;
}

RingCall ringCall(int coll, const void *in, void *out, size_t count, size_t totalBytes, loomDataType_t dtype,
                  loomRedOp_t op, int root) {
    RingCall c;
    c.coll = coll;
    c.proto = kProtoSimple;
    c.in = in;
    c.out = out;
    c.count = count;
    c.totalBytes = totalBytes;
    c.dtype = dtype;
    c.op = op;
    c.root = root;
    return c;
}

} // namespace

extern "C" loomResult_t loomAllReduce(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                      loomRedOp_t op, loomComm_t comm, cudaStream_t stream) {
    loomResult_t r = checkCall("loomAllReduce", comm, datatype, true, op);
    if (r != loomSuccess || count == 0) return r;
    if (!sendbuff || !recvbuff) return fail(loomInvalidArgument, "loomAllReduce: NULL buffer");
    if (!stream) stream = comm->stream;
    const size_t esize = loomTypeSize(datatype), bytes = count * esize;
    if (comm->allPeersMapped && bytes <= comm->llMaxBytes)
        return oneShotAllReduce(sendbuff, recvbuff, bytes, datatype, op, comm, stream);
    if (comm->rdReady && bytes <= comm->rdMaxBytes)
        return rdAllReduce(sendbuff, recvbuff, count, esize, datatype, op, comm, stream);
    if (comm->treeReady && bytes <= comm->treeMaxBytes)
        return treeAllReduce(sendbuff, recvbuff, count, esize, datatype, op, comm, stream);
    // Mid sizes: the ring on LL (low latency per step); large: Simple.
    RingCall c = ringCall(kRingAllReduce, sendbuff, recvbuff, count, bytes, datatype, op, 0);
    if (bytes <= comm->llRingMaxBytes) c.proto = kProtoLL;
    return ringCollective(comm, c, stream);
}

extern "C" loomResult_t loomBroadcast(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                      int root, loomComm_t comm, cudaStream_t stream) {
    loomResult_t r = checkCall("loomBroadcast", comm, datatype, false, loomSum);
    if (r == loomSuccess) r = checkRoot("loomBroadcast", comm, root);
    if (r != loomSuccess || count == 0) return r;
    if (!recvbuff || (comm->rank == root && !sendbuff)) return fail(loomInvalidArgument, "loomBroadcast: NULL buffer");
    const void *in = comm->rank == root ? sendbuff : recvbuff;
    const size_t bytes = count * loomTypeSize(datatype);
    return ringCollective(comm, ringCall(kRingBroadcast, in, recvbuff, count, bytes, datatype, loomSum, root),
                          stream ? stream : comm->stream);
}

extern "C" loomResult_t loomReduce(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                   loomRedOp_t op, int root, loomComm_t comm, cudaStream_t stream) {
    loomResult_t r = checkCall("loomReduce", comm, datatype, true, op);
    if (r == loomSuccess) r = checkRoot("loomReduce", comm, root);
    if (r != loomSuccess || count == 0) return r;
    if (!sendbuff || (comm->rank == root && !recvbuff)) return fail(loomInvalidArgument, "loomReduce: NULL buffer");
    const size_t bytes = count * loomTypeSize(datatype);
    return ringCollective(comm, ringCall(kRingReduce, sendbuff, recvbuff, count, bytes, datatype, op, root),
                          stream ? stream : comm->stream);
}

extern "C" loomResult_t loomAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, loomDataType_t datatype,
                                      loomComm_t comm, cudaStream_t stream) {
    loomResult_t r = checkCall("loomAllGather", comm, datatype, false, loomSum);
    if (r != loomSuccess || sendcount == 0) return r;
    if (!sendbuff || !recvbuff) return fail(loomInvalidArgument, "loomAllGather: NULL buffer");
    const size_t total = sendcount * loomTypeSize(datatype) * (size_t)comm->nranks;
    return ringCollective(comm, ringCall(kRingAllGather, sendbuff, recvbuff, sendcount, total, datatype, loomSum, 0),
                          stream ? stream : comm->stream);
}

extern "C" loomResult_t loomReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                          loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                                          cudaStream_t stream) {
    loomResult_t r = checkCall("loomReduceScatter", comm, datatype, true, op);
    if (r != loomSuccess || recvcount == 0) return r;
    if (!sendbuff || !recvbuff) return fail(loomInvalidArgument, "loomReduceScatter: NULL buffer");
    const size_t total = recvcount * loomTypeSize(datatype) * (size_t)comm->nranks;
    return ringCollective(comm, ringCall(kRingReduceScatter, sendbuff, recvbuff, recvcount, total, datatype, op, 0),
                          stream ? stream : comm->stream);
}
