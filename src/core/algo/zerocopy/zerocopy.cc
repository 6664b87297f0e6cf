/*
 * core/algo/zerocopy/zerocopy.h: describe, exchange, map, launch.
 */
#include "core/algo/zerocopy/zerocopy.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/debug.h"
#include "core/comm/params.h"
#include "core/connect/peer_conns.h"
#include "core/algo/registry.h"
#include "core/select/tuning.h"
#include "core/ras/watchdog.h"
#include "device/collectives.h"
#include "device/ring/ring_schedule.h"
#include "device/zerocopy/zerocopy_args.h"

namespace loom {

namespace {

// Rank q's input and output share a byte of one allocation (MPI_IN_PLACE,
// or a buffer the caller passed twice).
bool inPlace(const BufferDesc &in, const BufferDesc &out, size_t bytes) {
    return in.bufferId == out.bufferId && in.pid == out.pid && in.pidNamespace == out.pidNamespace &&
           in.offset < out.offset + bytes && out.offset < in.offset + bytes;
}

// The flag words (this rank's and every peer's), the call's number (counted
// alike on every rank, direct and staged calls together) and the abort words.
void setFlagsAndCall(loomComm *comm, ZeroCopyArgs *a) {
    a->mine = reinterpret_cast<volatile uint64_t *>(static_cast<char *>(comm->region.base) + comm->zc.offset);
    for (int q = 0; q < comm->nranks; ++q)
        if (q != comm->rank)
            a->peer[q] = reinterpret_cast<volatile uint64_t *>(comm->peerBase[q] + comm->zc.offset);
    a->call = ++comm->zc.state->calls;
    kernelWaits(comm, *a);
}

} // namespace

loomResult_t zeroCopyAllReduce(loomComm *comm, const void *in, void *out, size_t count, loomDataType_t dtype,
                               loomRedOp_t op, cudaStream_t stream, bool *ran) {
    *ran = false;
    ZeroCopyState &z = *comm->zc.state;
    const loomBootstrap_t &bs = comm->peers->bootstrap;
    const int n = comm->nranks, me = comm->rank;
    const size_t bytes = count * loomTypeSize(dtype);
    if (z.peers.empty())
        for (int q = 0; q < n; ++q)
            if (q != me) z.peers.push_back(q);
    // 1. Every rank's input and output descriptions, on every rank (the call
    // counts as entered from here: a rank that never comes is named).
    enterCollective(comm, "allreduce");
    ZeroCopyProfile &prof = z.profile;
    if (prof.on()) prof.begin();
    z.buffers.beginCall();
    const ZeroCopyRecord mine{z.buffers.describe(in, comm->cudaDev), z.buffers.describe(out, comm->cudaDev), bytes};
    if (prof.on()) prof.mark(ZeroCopyProfile::kDescribe);
    std::vector<ZeroCopyRecord> &rec = z.records;
    rec.resize(2 * (size_t)n - 1); // all ranks', then the n - 1 copies of mine to send
    if (z.board) {
        int absent = -1;
        WaitEnd why = kWaitGoesOn;
        if (z.board->exchange(++z.exchanges, &mine, rec.data(), hostWaitLimit(comm, comm->ras.collsEntered), &absent,
                              &why) != loomSuccess) {
            comm->ras.failed = true; // the board's sequence is broken for every later call
            int dead = -1;
            const std::string gone = watchReason(comm, &dead);
            if (why == kWaitCancelled && !gone.empty())
                return fail(watchCancelledResult(dead), "rank %d GPU %d (%s): allreduce: waiting for rank %d's buffer "
                            "descriptions: %s; communicator unusable", me, comm->cudaDev, comm->busId, absent,
                            gone.c_str());
            return fail(loomRemoteError, "rank %d GPU %d (%s): allreduce: rank %d posted no buffer descriptions on "
                        "this host's board within LOOM_TIMEOUT=%.0f s: %s; communicator unusable", me, comm->cudaDev,
                        comm->busId, absent, params().timeoutSeconds, describeAbsentPeers(comm).c_str());
        }
    } else {
        ZeroCopyRecord *send = rec.data() + n;
        for (int i = 0; i < n - 1; ++i) send[i] = mine;
        std::vector<ZeroCopyRecord> &got = z.received;
        got.resize((size_t)n - 1);
        if (bs.pairwise(bs.ctx, n - 1, z.peers.data(), send, n - 1, z.peers.data(), got.data(),
                        sizeof(ZeroCopyRecord)) != 0) {
            // Peers whose exchange went through may launch this call: its
            // flags no longer pair the same calls on every rank.
            comm->ras.failed = true;
            return fail(loomRemoteError, "rank %d: allreduce: exchanging buffer descriptions with %d peers failed; "
                        "communicator unusable", me, n - 1);
        }
        for (int i = 0; i < n - 1; ++i) rec[z.peers[i]] = got[i];
        rec[me] = mine;
    }
    if (prof.on()) prof.mark(ZeroCopyProfile::kExchange);
    // Every rank holds the same records: a size that differs between ranks
    // (an MPI error) or a buffer shorter than it fails the call everywhere,
    // before any rank touches a peer's memory.
    for (int q = 0; q < n; ++q) {
        const ZeroCopyRecord &r = rec[q];
        const bool shortIn = r.in.shareable && r.in.offset + bytes > r.in.size;
        const bool shortOut = r.out.shareable && r.out.offset + bytes > r.out.size;
        if (r.bytes != bytes || shortIn || shortOut) {
            withdrawEntry(comm);
            return fail(loomInvalidArgument, "rank %d: allreduce: rank %d %s (this rank: %zu bytes); every rank's "
                        "call fails, the communicator stays usable", me, q,
                        r.bytes != bytes ? ("passed " + std::to_string(r.bytes) + " bytes").c_str()
                                         : shortIn ? "passed an input shorter than the call"
                                                   : "passed an output shorter than the call", bytes);
        }
    }
    // 2. The choices, from what every rank now holds alike.
    int unshareable = -1;
    bool anyInPlace = false;
    for (int q = 0; q < n; ++q) {
        if (unshareable < 0 && (!rec[q].in.shareable || !rec[q].out.shareable)) unshareable = q;
        anyInPlace = anyInPlace || inPlace(rec[q].in, rec[q].out, bytes);
    }
    if (unshareable >= 0) {
        if (!z.unshareableSaid) {
            z.unshareableSaid = true;
            LOOM_INFO(kColl, "rank %d: allreduce of %zu B not zero-copy: rank %d's %s cannot be shared with CUDA "
                      "IPC (pool, VMM, managed or host memory), so no rank reads it in place (the staged two-shot up "
                      "to %zu B, else the FIFOs); said once per communicator, chosen per call", me, bytes, unshareable,
                      rec[unshareable].in.shareable ? "output" : "input", comm->zc.stagedBytes);
        }
        LOOM_TRACE(kColl, "rank %d: allreduce %zu B: not zero-copy (rank %d's buffers not shareable)", me, bytes,
                   unshareable);
        withdrawEntry(comm); // the path taken instead enters the call again
        return loomSuccess;
    }
    const bool oneShot = bytes <= (size_t)params().zeroCopyOneShotBytes && !anyInPlace;
    // 3. The peers' buffers mapped here (one-shot reads inputs only).
    ZeroCopyArgs a;
    memset(static_cast<void *>(&a), 0, sizeof(a));
    a.in[me] = in;
    a.out[me] = out;
    loomResult_t late = loomSuccess;
    for (int q = 0; q < n && late == loomSuccess; ++q) {
        if (q == me) continue;
        for (int side = 0; side < (oneShot ? 1 : 2) && late == loomSuccess; ++side) {
            char *at = nullptr;
            late = z.buffers.map(me, q, side == 0 ? rec[q].in : rec[q].out, comm->cudaDev, &at);
            if (side == 0) a.in[q] = at;
            else a.out[q] = at;
        }
    }
    // 4. The kernel: it runs even when a mapping failed, so that no peer is
    // left waiting; then it moves nothing on any rank and each rank's call fails.
    a.rank = me;
    a.nranks = n;
    a.oneShot = oneShot;
    a.mapFailed = late != loomSuccess;
    a.count = count;
    a.ctas = zeroCopyChannels(bytes, n, oneShot); // core/select/tuning.h
    setFlagsAndCall(comm, &a);
    a.stamps = prof.stamps();
    if (prof.on()) prof.mark(ZeroCopyProfile::kMap);
    cudaError_t e = launchZeroCopyAllReduce(a, dtype, op, stream);
    if (prof.on()) prof.mark(ZeroCopyProfile::kLaunch);
    if (e != cudaSuccess) { // the peers wait for this rank's flags in vain: no later call is safe
        comm->ras.failed = true;
        return cudaFailed(comm, "allreduce", "zero-copy launch", e);
    }
    *ran = true;
    loomResult_t r = z.buffers.markRead(stream);
    if (prof.on()) prof.mark(ZeroCopyProfile::kRecord);
    if (r != loomSuccess) { // the mappings this kernel reads would not wait for it: let it finish first
        cudaStreamSynchronize(stream);
        comm->ras.failed = true;
    }
    if (!z.said) {
        z.said = true;
        LOOM_INFO(kColl, "rank %d: allreduce from %ld B reads and writes the ranks' own buffers in place (zero-copy, "
                  "%s-shot first: %d CTAs); said once per communicator", me, params().zeroCopyMinBytes,
                  oneShot ? "one" : "two", a.ctas);
    }
    LOOM_TRACE(kColl, "rank %d: allreduce %zu B zero-copy, %s-shot, %d CTAs%s", me, bytes, oneShot ? "one" : "two",
               a.ctas, anyInPlace ? ", a rank in place" : "");
    return late != loomSuccess ? late : r;
}

bool stagedTwoShotFits(const loomComm *comm, size_t bytes) {
    return comm->zc.ready && comm->zc.stagedBytes && bytes && bytes <= comm->zc.stagedBytes;
}

loomResult_t stagedTwoShotAllReduce(loomComm *comm, const void *in, void *out, size_t count, loomDataType_t dtype,
                                    loomRedOp_t op, cudaStream_t stream) {
    ZeroCopyState &z = *comm->zc.state;
    const int n = comm->nranks, me = comm->rank;
    const size_t bytes = count * loomTypeSize(dtype);
    enterCollective(comm, "allreduce");
    ZeroCopyArgs a;
    memset(static_cast<void *>(&a), 0, sizeof(a));
    a.in[me] = in;
    a.out[me] = out;
    for (int q = 0; q < n; ++q)
        if (q != me) {
            a.in[q] = comm->peerBase[q] + comm->zc.stagedOffset;
            a.out[q] = comm->peerBase[q] + comm->zc.stagedOffset + comm->zc.stagedBytes;
        }
    a.rank = me;
    a.nranks = n;
    a.staged = true;
    a.scratch = static_cast<char *>(comm->region.base) + comm->zc.stagedOffset;
    a.scratchBytes = comm->zc.stagedBytes;
    a.count = count;
    a.ctas = zeroCopyChannels(bytes, n, false); // core/select/tuning.h
    setFlagsAndCall(comm, &a);
    cudaError_t e = launchZeroCopyAllReduce(a, dtype, op, stream);
    if (e != cudaSuccess) { // the peers wait for this rank's flags in vain: no later call is safe
        comm->ras.failed = true;
        return cudaFailed(comm, "allreduce", "staged two-shot launch", e);
    }
    if (!z.stagedSaid) {
        z.stagedSaid = true;
        LOOM_INFO(kColl, "rank %d: allreduce of %zu B through the staged two-shot (input copied into this rank's "
                  "scratch, results out of it; %d CTAs): said once per communicator", me, bytes,
                  a.ctas);
    }
    LOOM_TRACE(kColl, "rank %d: allreduce %zu B staged two-shot, %d CTAs", me, bytes, a.ctas);
    return loomSuccess;
}

// The registry's entry (core/algo/registry.h).

namespace {

// Every pair of GPUs mapped inside one host, the bootstrap able to pass
// buffer descriptions per call, and the size within
// LOOM_ZERO_COPY_MIN_BYTES..MAX_BYTES.
bool zeroCopyFits(const loomComm *comm, const CallShape &s) {
    return comm->zc.ready && s.bytes >= (size_t)params().zeroCopyMinBytes &&
           s.bytes <= (size_t)params().zeroCopyMaxBytes;
}

int zeroCopyCallCtas(const loomComm *comm, const CallShape &s) {
    return zeroCopyChannels(s.bytes, comm->nranks, (long)s.bytes <= params().zeroCopyOneShotBytes);
}

// Where the caller must not wait on the host for its peers
// (loomCommSetHostWait), selection offers zero-copy only where the staged
// two-shot runs it (core/enqueue/enqueue.cc). A call whose buffers some rank
// cannot share (every rank sees it alike) goes staged where that fits, else
// to the next entry selection picks without zero-copy.
loomResult_t zeroCopyRun(loomComm *comm, const TableCall &t) {
    const size_t esize = loomTypeSize(t.dtype), bytes = t.count * esize;
    if (!comm->order.hostWaitAllowed) return stagedTwoShotAllReduce(comm, t.in, t.out, t.count, t.dtype, t.op, t.stream);
    bool ran = false;
    const loomResult_t r = zeroCopyAllReduce(comm, t.in, t.out, t.count, t.dtype, t.op, t.stream, &ran);
    if (ran || r != loomSuccess) return r;
    if (stagedTwoShotFits(comm, bytes)) return stagedTwoShotAllReduce(comm, t.in, t.out, t.count, t.dtype, t.op, t.stream);
    const Choice ch = selectAlgorithm(comm, CallShape{loomCollAllReduce, bytes, bytes, esize, false},
                                      kAllAlgos & ~(1u << kAlgoZeroCopy));
    LOOM_TRACE(kColl, "rank %d: allreduce of %zu B: %s instead (a buffer not shareable)", comm->rank, bytes,
               algoName(ch.algo));
    return algoEntry(ch.algo)->enqueue(comm, t);
}

} // namespace

extern const AlgoEntry kZeroCopyAlgo = {kAlgoZeroCopy, "zerocopy", "zero-copy", kProtoSimple, collBit(loomCollAllReduce),
                                        zeroCopyFits, "every peer mapped, within LOOM_ZERO_COPY_MIN_BYTES..MAX_BYTES",
                                        zeroCopyCallCtas, zeroCopyRun, loadZeroCopyKernels};

} // namespace loom
