/*
 * Collectives over the edges (device/edges/edge_schedule.h: trees, recursive
 * doubling and halving, binomial trees), host side: build the schedule,
 * launch, commit (advance each edge's send and receive counters by what the
 * schedule's ops move, and promise the proxy those steps on net edges).
 * These algorithms run small messages across hosts.
 */
#include "core/enqueue/enqueue.h"

#include <cstring>

#include "base/debug.h"
#include "core/comm/params.h"
#include "core/algo/registry.h"
#include "device/collectives.h"
#include "device/edges/doubling_schedule.h"
#include "device/edges/edge_schedule.h"
#include "device/edges/rd_args.h"
#include "device/ring/ring_schedule.h"

namespace loom {

namespace {

EdgeSched schedBase(const loomComm *comm, int algo, size_t count, size_t elemBytes) {
    EdgeSched s;
    memset(&s, 0, sizeof(s));
    s.algo = algo;
    s.count = count;
    s.elemBytes = elemBytes;
    s.chunkElems = comm->edges.slotBytes / elemBytes;
    return s;
}

} // namespace

EdgeSched treeSched(const loomComm *comm, size_t count, size_t esize) {
    EdgeSched s = schedBase(comm, kEdgeTreeAllReduce, count, esize);
    for (int t = 0; t < 2; ++t) s.tree[t] = comm->edges.treeNode[t];
    s.lag = comm->ring.nslots / 2 > 0 ? comm->ring.nslots / 2 : 1; // the schedule is deadlock-free for any lag
    return s;
}

EdgeSched rdSched(const loomComm *comm, size_t count, size_t esize) {
    EdgeSched s = schedBase(comm, kEdgeRdAllReduce, count, esize);
    s.rd = comm->edges.rdRole;
    return s;
}

EdgeSched doublingSched(const loomComm *comm, int coll, size_t count, size_t elemBytes, int root) {
    EdgeSched s = schedBase(comm, kEdgeDoubling, count, elemBytes);
    s.dbl = dblRole(coll, comm->rank, comm->nranks, root, count, s.chunkElems, rdStepSlot(0));
    return s;
}

loomResult_t edgeCollective(loomComm *comm, const EdgeCall &c, cudaStream_t stream) {
    EdgeArgs a;
    memset(&a, 0, sizeof(a));
    a.s = c.s;
    a.in = c.in;
    a.out = c.out;
    if (c.s.algo == kEdgeDoubling && dblAccElems(c.s.dbl)) {
        // The doubling reduce and reduce_scatter keep partial sums here.
        loomResult_t r = growDeviceBuffer(comm, &comm->edges.acc, &comm->edges.accBytes,
                                          dblAccElems(c.s.dbl) * c.s.elemBytes, "doubling accumulator");
        if (r != loomSuccess) return r;
        a.acc = comm->edges.acc;
    }
    a.conns = comm->edges.connsDev;
    a.nthreads = params().ringThreads;
    a.nslots = comm->ring.nslots;
    a.slotBytes = comm->edges.slotBytes;
    enterCollective(comm, c.name);
    kernelWaits(comm, a);
    for (int k = 0; k < kEdgeSlots; ++k) a.steps[k] = comm->edges.steps[k];
    cudaError_t err = c.bytes ? launchEdgeBytes(a, stream) : launchEdgeColl(a, c.dtype, c.op, stream);
    if (err != cudaSuccess) return cudaFailed(comm, c.name, c.algoName, err);
    unsigned long long sends[kEdgeSlots], recvs[kEdgeSlots];
    edgeStepCounts(c.s, sends, recvs);
    for (int k = 0; k < kEdgeSlots; ++k) {
        if (!sends[k] && !recvs[k]) continue;
        comm->edges.steps[k].send += sends[k];
        comm->edges.steps[k].recv += recvs[k];
        if (comm->edges.net[k].send) {
            const uint64_t s = sends[k], r = recvs[k];
            netPost(&comm->edges.net[k], 1, &s, &r);
        }
    }
    LOOM_TRACE(kColl, "rank %d: %s %zu x %zu B, %s", comm->rank, c.name, c.s.count, c.s.elemBytes, c.algoName);
    return loomSuccess;
}

// The registry's entries (core/algo/registry.h): recursive doubling and
// trees (allreduce), and the doubling family (broadcast, reduce, allgather,
// reduce_scatter), all across hosts.

namespace {

// Recursive doubling (log2 n hops; trees 2x that, rings 2(n-1)) up to
// LOOM_RD_MAX_BYTES, where it won across hosts (docs/performance.md).
bool rdFits(const loomComm *comm, const CallShape &s) { return comm->edges.rdReady && s.bytes <= comm->edges.rdMaxBytes; }
bool treesFit(const loomComm *comm, const CallShape &s) { return comm->edges.treeReady && s.bytes <= comm->edges.treeMaxBytes; }

// The doubling family takes log2(ranks) network hops (one or two more with
// extras) where the ring takes n - 1; but an edge hop costs about twice a
// ring hop today (measured across fake hosts over ucx/TCP:
// docs/performance.md), so it runs where it takes fewer than half the
// ring's hops (from 8 ranks). LOOM_DOUBLING=1/0 forces it on/off. Equal
// blocks only.
bool doublingFits(const loomComm *comm, const CallShape &s) {
    if (s.ragged || !comm->edges.rdReady || s.bytes > comm->edges.rdMaxBytes || params().doubling == 0) return false;
    if (params().doubling == 1) return true;
    const RdPlan q = rdPlan(comm->rank, comm->nranks); // p and steps are the same on every rank
    const bool extras = q.p < comm->nranks;
    const bool rooted = s.coll == loomCollBroadcast || s.coll == loomCollReduce; // extras add a hop, not two
    const int hops = q.steps + (extras ? (rooted ? 1 : 2) : 0);
    return 2 * hops < comm->nranks - 1;
}

template <bool kRd>
loomResult_t allReduceRun(loomComm *comm, const TableCall &t) {
    const size_t esize = loomTypeSize(t.dtype);
    const EdgeCall c{kRd ? rdSched(comm, t.count, esize) : treeSched(comm, t.count, esize), t.in, t.out, t.dtype, t.op,
                     false, "allreduce", kRd ? "recursive doubling" : "trees"};
    return edgeCollective(comm, c, t.stream);
}

loomResult_t doublingRun(loomComm *comm, const TableCall &t) {
    const int coll = t.coll; // broadcast, reduce, allgather or reduce_scatter (the entry's colls)
    const bool bytes = coll == loomCollBroadcast || coll == loomCollAllGather; // moved, never reduced
    const size_t esize = loomTypeSize(t.dtype);
    EdgeCall c;
    c.s = bytes ? doublingSched(comm, coll, t.count * esize, 1, t.root) : doublingSched(comm, coll, t.count, esize, t.root);
    c.in = t.in;
    c.out = t.out;
    c.dtype = t.dtype;
    c.op = t.op;
    c.bytes = bytes;
    c.name = loomCollName(coll);
    c.algoName = coll == loomCollReduceScatter ? "recursive halving"
                 : coll == loomCollAllGather   ? "recursive doubling"
                                           : "binomial tree";
    return edgeCollective(comm, c, t.stream);
}

} // namespace

extern const AlgoEntry kRdAlgo = {kAlgoRecursiveDoubling, "rd", "recursive doubling", kProtoSimple,
                                  collBit(loomCollAllReduce), rdFits, "ranks span hosts, up to LOOM_RD_MAX_BYTES", nullptr,
                                  allReduceRun<true>, loadEdgeKernels};
extern const AlgoEntry kTreesAlgo = {kAlgoTrees, "trees", "trees", kProtoSimple, collBit(loomCollAllReduce), treesFit,
                                     "ranks span hosts, up to LOOM_TREE_MAX_BYTES", nullptr, allReduceRun<false>,
                                     loadEdgeKernels};
extern const AlgoEntry kDoublingAlgo = {
    kAlgoDoubling, "doubling", "doubling family", kProtoSimple,
    collBit(loomCollBroadcast) | collBit(loomCollReduce) | collBit(loomCollAllGather) | collBit(loomCollReduceScatter), doublingFits,
    "ranks span hosts, fewer than half the ring's hops (LOOM_DOUBLING)", nullptr, doublingRun, loadEdgeKernels};

} // namespace loom
