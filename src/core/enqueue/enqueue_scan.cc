/*
 * MPI_Scan and MPI_Exscan, host side: the chain of device/scan/scan_schedule.h
 * over the all-peer connections (connected on first need, as for the
 * exchanges: core/connect/peer_conns.h), one lane per channel; the lanes' step
 * counters in, the launch, each connection's counters committed (and the
 * proxy told what moves on net links).
 */
#include <algorithm>
#include <cstring>

#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/enqueue/enqueue.h"
#include "core/comm/params.h"
#include "core/connect/peer_conns.h"
#include "device/collectives.h"
#include "device/scan/scan_schedule.h"

namespace loom {
namespace {

loomResult_t scanCall(const char *what, bool exclusive, const void *sendbuff, void *recvbuff, size_t count,
                      loomDataType_t datatype, loomRedOp_t op, loomComm *comm, cudaStream_t stream) {
    loomResult_t r = checkCall(what, comm, datatype, true, op);
    if (r != loomSuccess) return r;
    const size_t esize = loomTypeSize(datatype);
    const int n = comm->nranks, me = comm->rank;
    const bool writes = !(exclusive && me == 0); // exscan: rank 0's output is left alone
    if (count && (!sendbuff || (writes && !recvbuff))) return fail(loomInvalidArgument, "%s: NULL buffer", what);
    if (!stream) stream = comm->stream;
    const size_t bytes = count * esize;
    if (n == 1) {
        enterCollective(comm, exclusive ? "exscan" : "scan");
        if (!bytes || exclusive || sendbuff == recvbuff) return loomSuccess;
        cudaError_t e = cudaMemcpyAsync(recvbuff, sendbuff, bytes, cudaMemcpyDeviceToDevice, stream);
        return e == cudaSuccess ? loomSuccess : cudaFailed(comm, what, "copy", e);
    }
    PeerConns &p = *comm->peers;
    if (!p.ready) { // collective: every rank's first call over the all-peer connections
        r = connectPeers(comm);
        if (r != loomSuccess) return r;
    }
    enterCollective(comm, exclusive ? "exscan" : "scan");
    if (!bytes) return loomSuccess;
    // In place (the same buffer) is part of the schedule; a partial overlap
    // is not: such an input is copied first.
    const char *in = static_cast<const char *>(sendbuff), *outc = static_cast<const char *>(recvbuff);
    if (writes && in != outc && in < outc + bytes && outc < in + bytes) {
        r = growDeviceBuffer(comm, &p.inputCopy, &p.inputCopyBytes, bytes, "overlapping scan input");
        if (r != loomSuccess) return r;
        cudaError_t e = cudaMemcpyAsync(p.inputCopy, in, bytes, cudaMemcpyDeviceToDevice, stream);
        if (e != cudaSuccess) return cudaFailed(comm, what, "input copy", e);
        sendbuff = p.inputCopy;
    }
    const int C = p.channels;
    ScanArgs a;
    memset(&a, 0, sizeof(a));
    a.s.rank = me;
    a.s.nranks = n;
    a.s.exclusive = exclusive;
    a.s.count = count;
    a.s.chunkElems = std::max<size_t>(1, p.slotBytes / esize);
    a.s.channels = C;
    for (int c = 0; c < C; ++c) {
        if (me > 0) a.recvSteps[c] = p.steps[(size_t)(me - 1) * C + c].recv;
        if (me + 1 < n) a.sendSteps[c] = p.steps[(size_t)(me + 1) * C + c].send;
    }
    a.in = sendbuff;
    a.out = recvbuff;
    a.conns = p.connsDev;
    a.nthreads = exchangeThreads(bytes, params().ringThreads);
    a.nslots = p.nslots;
    a.slotBytes = p.slotBytes;
    kernelWaits(comm, a);
    cudaError_t e = launchScan(a, datatype, op, stream);
    if (e != cudaSuccess) return cudaFailed(comm, what, "launch", e);

    // Commit: what each connection of the chain moved.
    std::vector<unsigned long long> &sends = p.callSends, &recvs = p.callRecvs;
    sends.resize((size_t)n * C);
    recvs.resize((size_t)n * C);
    scanStepCounts(a.s, sends.data(), recvs.data());
    for (int q : {me - 1, me + 1})
        if (q >= 0 && q < n) commitPeerSteps(p, q, sends.data(), recvs.data());
    LOOM_TRACE(kColl, "rank %d: %s of %zu B, %d lanes", me, exclusive ? "exscan" : "scan", bytes, C);
    return loomSuccess;
}

} // namespace
} // namespace loom

using namespace loom;

extern "C" loomResult_t loomScan(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                 loomRedOp_t op, loomComm_t comm, cudaStream_t stream) {
    return scanCall("loomScan", false, sendbuff, recvbuff, count, datatype, op, comm, stream);
}

extern "C" loomResult_t loomExScan(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                   loomRedOp_t op, loomComm_t comm, cudaStream_t stream) {
    return scanCall("loomExScan", true, sendbuff, recvbuff, count, datatype, op, comm, stream);
}
