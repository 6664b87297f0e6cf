/*
 * Collectives over the edges (device/edge_schedule.h: trees, recursive
 * doubling and halving, binomial trees), host side: build the schedule,
 * launch, commit (advance each edge's send and receive counters by what the
 * schedule's ops move, and promise the proxy those steps on net edges).
 * These algorithms run small messages across hosts.
 */
#include "core/enqueue/enqueue.h"

#include <cstring>

#include "base/debug.h"
#include "core/comm/params.h"
#include "device/collectives.h"
#include "device/edge_schedule.h"

namespace loom {

namespace {

EdgeSched schedBase(const loomComm *comm, int algo, size_t count, size_t elemBytes) {
    EdgeSched s;
    memset(&s, 0, sizeof(s));
    s.algo = algo;
    s.count = count;
    s.elemBytes = elemBytes;
    s.chunkElems = comm->edgeSlotBytes / elemBytes;
    return s;
}

} // namespace

EdgeSched treeSched(const loomComm *comm, size_t count, size_t esize) {
    EdgeSched s = schedBase(comm, kEdgeTreeAllReduce, count, esize);
    for (int t = 0; t < 2; ++t) s.tree[t] = comm->treeNode[t];
    s.lag = comm->nslots / 2 > 0 ? comm->nslots / 2 : 1; // the schedule is deadlock-free for any lag
    return s;
}

EdgeSched rdSched(const loomComm *comm, size_t count, size_t esize) {
    EdgeSched s = schedBase(comm, kEdgeRdAllReduce, count, esize);
    s.rd = comm->rdRole;
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
        loomResult_t r = growDeviceBuffer(comm, &comm->edgeAcc, &comm->edgeAccBytes,
                                          dblAccElems(c.s.dbl) * c.s.elemBytes, "doubling accumulator");
        if (r != loomSuccess) return r;
        a.acc = comm->edgeAcc;
    }
    a.conns = comm->edgeConnsDev;
    a.nthreads = params().ringThreads;
    a.nslots = comm->nslots;
    a.slotBytes = comm->edgeSlotBytes;
    enterCollective(comm, c.name);
    a.wait = callWait(comm);
    a.abortFlag = comm->abortFlagDev;
    for (int k = 0; k < kEdgeSlots; ++k) a.steps[k] = comm->edgeSteps[k];
    cudaError_t err = c.bytes ? launchEdgeBytes(a, stream) : launchEdgeColl(a, c.dtype, c.op, stream);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): %s (%s) launch: %s", comm->rank, comm->cudaDev,
                    comm->busId, c.name, c.algoName, cudaGetErrorString(err));
    unsigned long long sends[kEdgeSlots], recvs[kEdgeSlots];
    edgeStepCounts(c.s, sends, recvs);
    for (int k = 0; k < kEdgeSlots; ++k) {
        if (!sends[k] && !recvs[k]) continue;
        comm->edgeSteps[k].send += sends[k];
        comm->edgeSteps[k].recv += recvs[k];
        if (comm->edgeNet[k].send) {
            const uint64_t s = sends[k], r = recvs[k];
            netPost(&comm->edgeNet[k], 1, &s, &r);
        }
    }
    LOOM_TRACE(kColl, "rank %d: %s %zu x %zu B, %s", comm->rank, c.name, c.s.count, c.s.elemBytes, c.algoName);
    return loomSuccess;
}

} // namespace loom
