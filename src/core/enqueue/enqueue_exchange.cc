/*
 * Exchanges (alltoall(v); gather(v) and scatter(v) as exchanges where only
 * the root's pairs carry data), host side: connect every pair on first need
 * (core/connect/peer_conns.h), upload the call's tables, launch the exchange kernel
 * (device/exchange/exchange_schedule.h), commit each peer's step counters. Small
 * calls whose block bound every rank knows (alltoall, gather, scatter) go
 * one-shot instead (select.cc: exchangeOneShot), without connecting pairs;
 * so do the v-forms' calls in which every pair of this rank is a one-shot
 * pair (exchangeOneShotPairBound), and the exchange kernel moves the
 * one-shot pairs of the others.
 */
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/enqueue/enqueue.h"
#include "core/enqueue/enqueue_direct.h"
#include "core/enqueue/exchange_views.h"
#include "core/comm/params.h"
#include "core/connect/peer_conns.h"
#include "core/stream/pinned_uploads.h"
#include "core/select/select.h"
#include "core/select/tuning.h"
#include "device/collectives.h"
#include "device/exchange/exchange_schedule.h"
#include "device/oneshot/oneshot_schedule.h"

namespace loom {

namespace {

// The call's tables to device memory on `stream`, after the last kernel that
// read the previous ones (through pinned memory, core/stream/pinned_uploads.h).
loomResult_t uploadTables(loomComm *comm, const std::vector<size_t> &tables, cudaStream_t stream) {
    PeerConns &p = *comm->peers;
    cudaError_t e = cudaStreamWaitEvent(stream, p.tablesRead, 0);
    if (e == cudaSuccess)
        e = PinnedUploads::upload(comm, p.tablesDev, tables.data(), tables.size() * sizeof(size_t), stream);
    return e == cudaSuccess ? loomSuccess : cudaFailed(comm, "alltoallv", "tables", e);
}

bool overlaps(const char *in, size_t inSpan, const char *out, size_t outSpan) {
    return inSpan && outSpan && in < out + outSpan && out < in + inSpan;
}

// MPI's in place: the send blocks are the receive blocks.
bool sameLayout(const char *in, const size_t *sendcounts, const size_t *sdispls, const char *out,
                const size_t *recvcounts, const size_t *rdispls, int n) {
    if (in != out) return false;
    for (int q = 0; q < n; ++q)
        if (sendcounts[q] != recvcounts[q] || (sendcounts[q] && sdispls[q] != rdispls[q])) return false;
    return true;
}

// Whether this rank's pushed direct sends go on its copy engines
// (exchange_schedule.h: deferred copies): a pushed fan-in where this rank
// writes some block that select.h's rule puts on them.
bool deferToEngines(loomComm *comm, const ExchangeKnobs &k, const ExchangeSched &s, int fanIn,
                    const size_t *directSend) {
    if (!exchangeMayDeferCopies(s, fanIn != 0)) return false;
    bool any = false;
    for (int q = 0; q < s.nranks; ++q)
        any = any || (q != s.rank && directSend[q] && exchangeBlockOnEngines(k, s.sendCount[q]));
    PeerConns &p = *comm->peers;
    if (any && !p.enginesSaid) {
        p.enginesSaid = true;
        LOOM_INFO(kColl, "rank %d: gather blocks of >= LOOM_EXCHANGE_COPY_ENGINE_BYTES=%zu are written into the "
                  "root's output by this GPU's copy engines; said once per communicator", s.rank, k.copyEngineBytes);
    }
    return any;
}

// Whether every pair of this rank (both directions) is a one-shot pair.
// Whether every block of this rank is a one-shot pair's, its own too: the
// one-shot kernel would copy a large own block 8 bytes a thread on at most
// kMaxOneShotBlocks CTAs (a choice of this rank's alone).
bool allPairsOneShot(size_t bound, const size_t *sendcounts, const size_t *recvcounts, int n) {
    if (!bound) return false;
    for (int q = 0; q < n; ++q)
        if (sendcounts[q] > bound || recvcounts[q] > bound) return false;
    return true;
}

// CTAs the exchange kernel gives its one-shot pairs at most, beside its
// lanes (whose pairs are the call's large ones): its CTAs all spin at once,
// so they are kept few (not yet timed).
constexpr int kExchangePairCtas = 8;

// n == 1: the rank's own block.
loomResult_t selfCopy(loomComm *comm, const char *in, char *out, size_t bytes, cudaStream_t stream) {
    if (!bytes || in == out) return loomSuccess;
    cudaError_t e = cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream);
    return e == cudaSuccess ? loomSuccess : cudaFailed(comm, "alltoallv", "own block", e);
}

} // namespace

} // namespace loom

using namespace loom;

extern "C" loomResult_t loomAllToAllV(const void *sendbuff, const size_t *sendcounts, const size_t *sdispls,
                                      void *recvbuff, const size_t *recvcounts, const size_t *rdispls, loomComm_t comm,
                                      cudaStream_t stream) {
    return loomExchange(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, 0, 0, comm, stream);
}

extern "C" loomResult_t loomExchange(const void *sendbuff, const size_t *sendcounts, const size_t *sdispls,
                                     void *recvbuff, const size_t *recvcounts, const size_t *rdispls,
                                     size_t agreedBlock, int fanIn, loomComm_t comm, cudaStream_t stream) {
    return exchangeCall(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, agreedBlock, fanIn, nullptr,
                        comm, stream);
}

loomResult_t loom::exchangeCall(const void *sendbuff, const size_t *sendcounts, const size_t *sdispls, void *recvbuff,
                                const size_t *recvcounts, const size_t *rdispls, size_t agreedBlock, int fanIn,
                                const ExchangeViews *views, loomComm *comm, cudaStream_t stream) {
    loomResult_t checked = checkComm("loomAllToAllV", comm);
    if (checked != loomSuccess) return checked;
    if (!sendcounts || !sdispls || !recvcounts || !rdispls)
        return fail(loomInvalidArgument, "loomAllToAllV: NULL counts or displacements");
    const int n = comm->nranks, me = comm->rank;
    if (sendcounts[me] != recvcounts[me])
        return fail(loomInvalidArgument, "loomAllToAllV: rank %d sends itself %zu bytes but receives %zu", me,
                    sendcounts[me], recvcounts[me]);
    size_t inSpan = 0, outSpan = 0, largest = 0, sent = 0, received = 0; // sent, received: to and from peers
    for (int q = 0; q < n; ++q) {
        if (sendcounts[q]) inSpan = std::max(inSpan, sdispls[q] + sendcounts[q]);
        if (recvcounts[q]) outSpan = std::max(outSpan, rdispls[q] + recvcounts[q]);
        largest = std::max(largest, std::max(sendcounts[q], recvcounts[q]));
        if (q != me) sent += sendcounts[q], received += recvcounts[q];
    }
    if ((inSpan && !sendbuff) || (outSpan && !recvbuff)) return fail(loomInvalidArgument, "loomAllToAllV: NULL buffer");
    if (agreedBlock && largest > agreedBlock)
        return fail(loomInvalidArgument, "loomExchange: rank %d has a block of %zu bytes, past the agreed %zu", me,
                    largest, agreedBlock);
    if (!stream) stream = comm->stream;
    const char *in = static_cast<const char *>(sendbuff);
    char *out = static_cast<char *>(recvbuff);
    const bool inViewed = views && views->in.nblocks, outViewed = views && views->out.nblocks;
    const char *oneShotWhy = nullptr;
    if ((inViewed || outViewed) && (n == 1 || exchangeOneShot(comm, agreedBlock, &oneShotWhy)))
        return fail(loomInternalError, "rank %d: an exchange in datatype layouts must run on the exchange kernel", me);
    if (n == 1) {
        enterCollective(comm, "alltoallv");
        return selfCopy(comm, in + sdispls[0], out + rdispls[0], sendcounts[0], stream);
    }
    // The same choice on every rank (agreedBlock and the communicator's
    // settings are alike everywhere).
    const char *why = nullptr;
    const bool agreedOneShot = exchangeOneShot(comm, agreedBlock, &why);
    // The v-forms' one-shot pairs (exchange_schedule.h): where every pair of
    // this rank is one (and its own block small), the call runs one-shot
    // here, whatever its peers run.
    const size_t pairBound = agreedBlock ? 0 : exchangeOneShotPairBound(comm);
    const bool pairsOneShot = !inViewed && !outViewed && allPairsOneShot(pairBound, sendcounts, recvcounts, n);
    if (pairsOneShot) why = "every block of this rank within LOOM_EXCHANGE_ONESHOT_BYTES";
    LOOM_TRACE(kColl, "rank %d: exchange, blocks up to %zu B (agreed: %zu B): %s (%s)", me, largest, agreedBlock,
               agreedOneShot || pairsOneShot ? "one-shot" : "exchange kernel", why);
    // Collective: every rank connects its pairs at its first call that is
    // not one-shot by an agreed block (a v-form's, whichever kernel runs it
    // here).
    if (!agreedOneShot && !comm->peers->ready) {
        loomResult_t r = connectPeers(comm);
        if (r != loomSuccess) return r;
    }
    const bool oneShot = agreedOneShot || pairsOneShot;
    // From here on the peers have taken this call's one-shot flag (or will,
    // whatever they hit): a call that fails before this rank takes its own
    // leaves its one-shot sequence out of step, so the communicator fails.
    auto outOfStep = [&](loomResult_t r) {
        if (pairBound) comm->ras.failed = true;
        return r;
    };
    PeerConns &p = *comm->peers;
    // Sources are always the input (exchange_schedule.h): an input the
    // receives could overwrite is copied first. Not for one-shot in MPI's in
    // place (one buffer, one table for both sides): there the thread that
    // writes unit u of block q read unit u of piece q before.
    // (Not with a view: MPI's in place is never fused, and other send and
    // receive buffers may not overlap.)
    if (!inViewed && !outViewed && overlaps(in, inSpan, out, outSpan) &&
        !(oneShot && sameLayout(in, sendcounts, sdispls, out, recvcounts, rdispls, n))) {
        loomResult_t r = growDeviceBuffer(comm, &p.inputCopy, &p.inputCopyBytes, inSpan, "in-place alltoallv input");
        if (r != loomSuccess) return outOfStep(r);
        streamBusy(comm);
        cudaError_t e = cudaMemcpyAsync(p.inputCopy, in, inSpan, cudaMemcpyDeviceToDevice, stream);
        if (e != cudaSuccess) return outOfStep(cudaFailed(comm, "alltoallv", "copy of an in-place input", e));
        in = static_cast<const char *>(p.inputCopy);
    }
    if (oneShot)
        return oneShotCollective(comm, loomCollAllToAll, in, out, 0, loomUint8, loomSum, 0, stream, sendcounts,
                                 sdispls, recvcounts, rdispls);
    enterCollective(comm, "alltoallv");
    if (!inSpan && !outSpan && !pairBound) return loomSuccess; // nothing moves on any of this rank's pairs
    // Tables: send counts, send displacements, receive counts, receive
    // displacements, the direct tables when some pair is direct, then each
    // connection's steps before this call.
    const size_t N = (size_t)n, conns = p.conns.size();
    std::vector<size_t> &tables = p.callTables;
    tables.resize(6 * N + 2 * conns); // the direct tables' room; trimmed below when no pair is direct
    bool direct = false;
    loomResult_t late = loomSuccess; // a peer's buffer this rank could not map: the call fails after its launch
    const ExchangeKnobs knobs = exchangeKnobs();
    const bool push = exchangePushes(knobs, fanIn != 0, agreedBlock);
    // No in-place pairs while the caller must not block (loomCommSetHostWait):
    // their buffer descriptions are a per-call host exchange.
    size_t least = comm->order.hostWaitAllowed ? exchangeDirectLeast(knobs, fanIn != 0) : 0;
    if (least && least <= pairBound) least = pairBound + 1; // one-shot pairs are never direct (both ends know)
    // One-shot pairs move plain bytes: a side in its datatype layout has none (stage_datatype.cc packs it).
    if ((inViewed && exchangeOneShotBlocks(pairBound, sendcounts, n, me)) ||
        (outViewed && exchangeOneShotBlocks(pairBound, recvcounts, n, me)))
        return outOfStep(fail(loomInternalError, "rank %d: an exchange side in its datatype layout has blocks of at "
                              "most LOOM_EXCHANGE_ONESHOT_BYTES=%zu bytes (one-shot pairs)", me, pairBound));
    loomResult_t r = planDirectPairs(comm, least, push, in, sendcounts, sdispls, out, recvcounts, rdispls,
                                     push ? outViewed : inViewed, tables.data() + 4 * N, tables.data() + 5 * N,
                                     &direct, &late);
    if (r != loomSuccess) return outOfStep(r);
    const size_t stepsAt = (direct ? 6 : 4) * N;
    tables.resize(stepsAt + 2 * conns);
    // The walk's counts: a one-shot pair's as empty (its CTAs have the call's own, a.pairs).
    for (int q = 0; q < n; ++q) {
        tables[q] = q == me ? sendcounts[q] : exchangeWalkBytes(pairBound, sendcounts[q]);
        tables[2 * N + q] = q == me ? recvcounts[q] : exchangeWalkBytes(pairBound, recvcounts[q]);
    }
    std::copy(sdispls, sdispls + n, tables.begin() + N);
    std::copy(rdispls, rdispls + n, tables.begin() + 3 * N);
    static_assert(sizeof(ConnSteps) == 2 * sizeof(size_t), "steps as two words");
    memcpy(tables.data() + stepsAt, p.steps.data(), conns * sizeof(ConnSteps));

    ExchangeSched s;
    s.rank = me;
    s.nranks = n;
    s.sendCount = tables.data();
    s.sendDispl = sdispls;
    s.recvCount = tables.data() + 2 * N;
    s.recvDispl = rdispls;
    s.channels = p.channels;
    s.lanes = std::max(1, std::min(n - 1, kMaxExchangeLanes / p.channels)) * p.channels;
    s.chunkElems = p.slotBytes;
    s.selfLanes = exchangeSelfLanes(sendcounts[me], std::max(sent, received), p.slotBytes, p.channels);
    s.directPush = direct && push;
    if (direct) { // the host's view; the kernel's are set below
        s.directSend = tables.data() + 4 * N;
        s.directSrc = tables.data() + 5 * N;
    }
    // The copy engines cannot read a datatype's layout: a viewed input's
    // pushed blocks are written by the SMs (its receivers cannot tell).
    if (knobs.enginesAll) { // copy-engine mode: every pushed pair on the engines, waits in the second kernel
        exchangeDeferAll(&s);
        if (inViewed) s.deferCopies = false;
        if (s.deferCopies && !p.enginesSaid) {
            p.enginesSaid = true;
            LOOM_INFO(kColl, "rank %d: LOOM_EXCHANGE_COPY_ENGINES=1: exchange blocks of >= %zu B go into their "
                      "receivers' outputs by this GPU's copy engines; said once per communicator", me, least);
        }
    } else {
        s.deferCopies = s.directPush && !inViewed && deferToEngines(comm, knobs, s, fanIn, s.directSend);
    }
    ExchangeArgs a;
    memset(static_cast<void *>(&a), 0, offsetof(ExchangeArgs, inlined)); // not the tables: filled below
    a.s = s;
    a.s.sendCount = a.s.sendDispl = a.s.recvCount = a.s.recvDispl = nullptr; // inlined
    a.s.directSend = a.s.directSrc = nullptr;
    a.direct = direct;
    if (tables.size() <= (size_t)kExchangeInlineWords) {
        std::copy(tables.begin(), tables.end(), a.inlined);
    } else {
        r = uploadTables(comm, tables, stream);
        if (r != loomSuccess) return outOfStep(r);
        const size_t *t = static_cast<const size_t *>(p.tablesDev);
        a.s.sendCount = t;
        a.s.sendDispl = t + N;
        a.s.recvCount = t + 2 * N;
        a.s.recvDispl = t + 3 * N;
        if (direct) {
            a.s.directSend = t + 4 * N;
            a.s.directSrc = t + 5 * N;
        }
        a.steps = reinterpret_cast<const ConnSteps *>(t + stepsAt);
    }
    a.in = in;
    a.out = out;
    if (views) {
        a.inView = views->in;
        a.outView = views->out;
        a.selfScratch = views->selfScratch;
    }
    a.conns = p.connsDev;
    a.nthreads = exchangeThreads(largest, params().ringThreads);
    a.nslots = p.nslots;
    a.slotBytes = p.slotBytes;
    kernelWaits(comm, a);
    if (pairBound) { // a ragged one-shot alltoall of the small pairs: every v-form call takes a flag, on every rank
        oneShotCallArgs(comm, loomCollAllToAll, in, out, 0, 0, sendcounts, sdispls, recvcounts, rdispls, &a.pairs);
        a.pairs.pairBound = pairBound;
        size_t most = 0; // the largest one-shot block, for the CTA count
        for (int q = 0; q < n; ++q) {
            if (q != me && exchangeOneShotPair(pairBound, sendcounts[q])) most = std::max(most, sendcounts[q]);
            if (q != me && exchangeOneShotPair(pairBound, recvcounts[q])) most = std::max(most, recvcounts[q]);
        }
        a.pairs.nblocks = std::min(oneShotChannels((most + 7) / 8 * N), kExchangePairCtas);
        a.pairs.wait = a.wait;
        a.pairs.abortFlag = a.abortFlag;
    }
    cudaError_t e = launchExchange(a, stream);
    if (e != cudaSuccess) return cudaFailed(comm, "alltoallv", "launch", e);
    if (exchangeSecondKernel(s)) { // the pushed direct blocks on the copy engines, their publications, waits
        p.engineBlocks.clear();
        for (int q = 0; q < n; ++q)
            if (s.deferCopies && q != me && tables[4 * N + q])
                p.engineBlocks.push_back({in + sdispls[q], reinterpret_cast<char *>(tables[4 * N + q]), sendcounts[q]});
        // The publications follow even when the copies could not be
        // enqueued: the root is not left waiting; the call fails after.
        r = p.engines.copy(p.engineBlocks, stream, me);
        if (late == loomSuccess) late = r;
        a.enginesFailed = r != loomSuccess; // the root is told its blocks did not come
        e = launchExchangeAfterCopies(a, stream);
        if (e != cudaSuccess) { // the root's ready is spent and copies may be in flight: no later call is safe
            comm->ras.failed = true;
            return cudaFailed(comm, "alltoallv", "launch of the publications after the copies", e);
        }
    }
    if (a.steps && (e = cudaEventRecord(p.tablesRead, stream)) != cudaSuccess) return cudaFailed(comm, "alltoallv", "launch", e);
    if (direct && (r = p.direct.markRead(stream)) != loomSuccess) return r;

    // Commit: the host's copy of the schedule says what each peer's
    // connection moved (and the proxy is promised it on net links).
    std::vector<unsigned long long> &sends = p.callSends, &recvs = p.callRecvs;
    sends.resize(conns);
    recvs.resize(conns);
    exchangeStepCounts(s, sends.data(), recvs.data());
    for (int q = 0; q < n; ++q) commitPeerSteps(p, q, sends.data(), recvs.data());
    LOOM_TRACE(kColl, "rank %d: alltoallv %zu B out, %zu B in, %d lanes of %d channels + %d for its own block%s; "
               "one-shot pairs' blocks: %d sent, %d received on %d CTAs", comm->rank, inSpan, outSpan, s.lanes,
               s.channels, s.selfLanes, direct ? ", direct pairs" : "",
               exchangeOneShotBlocks(pairBound, sendcounts, n, me), exchangeOneShotBlocks(pairBound, recvcounts, n, me),
               a.pairs.nblocks);
    // A pair whose peer buffer this rank could not map: the kernel runs
    // the handshake (its peers are not left waiting); the error is returned
    // once it is done, so no buffer of the call is still in use.
    if (late != loomSuccess) cudaStreamSynchronize(stream);
    return late;
}
