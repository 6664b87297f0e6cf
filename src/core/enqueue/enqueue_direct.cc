/*
 * core/enqueue/enqueue_direct.h: a call's direct pairs, through the caches of
 * core/direct_buffers.h.
 */
#include "core/enqueue/enqueue_direct.h"

#include <algorithm>

#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/comm/params.h"
#include "core/connect/peer_conns.h"

namespace loom {

loomResult_t planDirectPairs(loomComm *comm, size_t least, bool push, const char *in, const size_t *sendcounts,
                             const size_t *sdispls, char *out, const size_t *recvcounts, const size_t *rdispls,
                             bool opaque, size_t *directSend, size_t *directSrc, bool *any, loomResult_t *late) {
    PeerConns &p = *comm->peers;
    const int n = comm->nranks, me = comm->rank;
    std::fill(directSend, directSend + n, 0);
    std::fill(directSrc, directSrc + n, 0);
    *any = false;
    *late = loomSuccess;
    if (!least || !p.bootstrap.pairwise) return loomSuccess;
    std::vector<int> &to = p.directTo, &from = p.directFrom;
    to.clear();
    from.clear();
    for (int q = 0; q < n; ++q) {
        if (q == me || !p.peerRegion[q]) continue; // p2p pairs only
        if (sendcounts[q] >= least) to.push_back(q);
        if (recvcounts[q] >= least) from.push_back(q);
    }
    if (to.empty() && from.empty()) return loomSuccess;
    // The end that does not copy describes its buffer to the end that does:
    // pulled, senders their input to the receivers; pushed, receivers their
    // output to the senders.
    const std::vector<int> &describeTo = push ? from : to, &learnFrom = push ? to : from;
    const char *mineAt = push ? out : in;
    const size_t *myDispls = push ? rdispls : sdispls;
    size_t *signals = push ? directSrc : directSend; // my halves the peer copies: nonzero
    size_t *copies = push ? directSend : directSrc;  // my halves I copy: the peer's buffer mapped here
    p.direct.beginCall();
    BufferDesc mine{};
    if (!describeTo.empty() && !opaque) mine = p.direct.describe(mineAt, comm->cudaDev);
    bool &said = push ? p.unshareableOutSaid : p.unshareableInSaid;
    if (!describeTo.empty() && !mine.shareable && !opaque && !said) {
        said = true;
        LOOM_INFO(kColl, "rank %d: exchange blocks of >= %zu bytes go through the FIFO: the %s at %p cannot be "
                  "shared with CUDA IPC (pool, VMM, managed, host or another GPU's memory); said once per "
                  "communicator", me, least, push ? "output" : "input", static_cast<const void *>(mineAt));
    }
    p.directOut.assign(describeTo.size(), mine);
    for (size_t i = 0; i < describeTo.size(); ++i) {
        p.directOut[i].offset += myDispls[describeTo[i]];
        signals[describeTo[i]] = mine.shareable ? 1 : 0;
    }
    p.directIn.resize(learnFrom.size());
    if (p.bootstrap.pairwise(p.bootstrap.ctx, (int)describeTo.size(), describeTo.data(), p.directOut.data(),
                             (int)learnFrom.size(), learnFrom.data(), p.directIn.data(), sizeof(BufferDesc)) != 0)
        return fail(loomRemoteError, "rank %d: exchanging buffer descriptions (%zu to send, %zu to receive) failed",
                    me, describeTo.size(), learnFrom.size());
    for (size_t j = 0; j < learnFrom.size(); ++j) {
        const int q = learnFrom[j];
        if (!p.directIn[j].shareable) continue;
        char *at = nullptr;
        loomResult_t r = p.direct.map(me, q, p.directIn[j], comm->cudaDev, &at);
        if (r == loomSuccess) {
            copies[q] = reinterpret_cast<size_t>(at);
            continue;
        }
        if (*late == loomSuccess) *late = r;
        // The handshake without the data: the copy's two ends are one place,
        // which the kernel never copies (see the header).
        copies[q] = push ? reinterpret_cast<size_t>(in + sdispls[q]) : reinterpret_cast<size_t>(out + rdispls[q]);
    }
    for (int q = 0; q < n; ++q) *any = *any || directSend[q] || directSrc[q];
    auto count = [n](const size_t *t) { return (int)std::count_if(t, t + n, [](size_t a) { return a != 0; }); };
    if (*any && !p.directSaid && !params().exchangeCopyEngines) { // copy-engine mode: loomExchange says it
        p.directSaid = true;
        const int mode = params().exchangeDirectPush;
        LOOM_INFO(kColl, "rank %d: exchange blocks of >= %zu bytes move in place over p2p, copied by their %s "
                  "(LOOM_EXCHANGE_DIRECT_PUSH=%d; gathers of blocks >= LOOM_EXCHANGE_COPY_ENGINE_BYTES=%ld by their "
                  "senders' copy engines; first call %s: %d copied here); said once per communicator", me, least,
                  mode == 2 ? "senders" : mode == 1 ? "senders in gathers, else by their receivers" : "receivers",
                  mode, params().exchangeCopyEngineBytes, push ? "pushed" : "pulled", count(copies));
    }
    if (*any)
        LOOM_TRACE(kColl, "rank %d: exchange %s %d peers' buffers in place, %d peers %s its own", me,
                   push ? "writes into" : "reads", count(copies), count(signals), push ? "write into" : "read");
    return loomSuccess;
}

} // namespace loom
