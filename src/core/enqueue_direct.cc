/*
 * core/enqueue_direct.h: a call's direct pairs, through the caches of
 * core/direct_buffers.h.
 */
#include "core/enqueue_direct.h"

#include <algorithm>

#include "core/comm.h"
#include "core/debug.h"
#include "core/params.h"
#include "core/peer_conns.h"

namespace loom {

loomResult_t planDirectPairs(loomComm *comm, const char *in, const size_t *sendcounts, const size_t *sdispls,
                             char *out, const size_t *recvcounts, const size_t *rdispls, size_t *directSend,
                             size_t *directSrc, bool *any, loomResult_t *late) {
    PeerConns &p = *comm->peers;
    const int n = comm->nranks, me = comm->rank;
    std::fill(directSend, directSend + n, 0);
    std::fill(directSrc, directSrc + n, 0);
    *any = false;
    *late = loomSuccess;
    const size_t least = (size_t)params().exchangeDirectBytes;
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
    p.direct.beginCall();
    BufferDesc mine{};
    if (!to.empty()) mine = p.direct.describe(in, comm->cudaDev);
    if (!to.empty() && !mine.shareable && !p.unshareableSaid) {
        p.unshareableSaid = true;
        LOOM_INFO(kColl, "rank %d: exchange blocks of >= %zu bytes go through the FIFO: the input at %p cannot be "
                  "shared with CUDA IPC (pool, VMM, managed, host or another GPU's memory); said once per "
                  "communicator", me, least, static_cast<const void *>(in));
    }
    p.directOut.assign(to.size(), mine);
    for (size_t i = 0; i < to.size(); ++i) {
        p.directOut[i].offset += sdispls[to[i]];
        directSend[to[i]] = mine.shareable ? 1 : 0;
    }
    p.directIn.resize(from.size());
    if (p.bootstrap.pairwise(p.bootstrap.ctx, (int)to.size(), to.data(), p.directOut.data(), (int)from.size(),
                             from.data(), p.directIn.data(), sizeof(BufferDesc)) != 0)
        return fail(loomRemoteError, "rank %d: exchanging buffer descriptions (%zu to send, %zu to receive) failed",
                    me, to.size(), from.size());
    for (size_t j = 0; j < from.size(); ++j) {
        const int q = from[j];
        if (!p.directIn[j].shareable) continue;
        const char *at = nullptr;
        loomResult_t r = p.direct.map(q, p.directIn[j], comm->cudaDev, &at);
        if (r != loomSuccess) {
            if (*late == loomSuccess) *late = r;
            at = out + rdispls[q]; // the handshake without the data (see the header)
        }
        directSrc[q] = reinterpret_cast<size_t>(at);
    }
    for (int q = 0; q < n; ++q) *any = *any || directSend[q] || directSrc[q];
    if (*any && !p.directSaid) {
        p.directSaid = true;
        LOOM_INFO(kColl, "rank %d: exchange blocks of >= %zu bytes are read in place over p2p (first call: %zu "
                  "peers' blocks read here); said once per communicator", me, least,
                  (size_t)std::count_if(directSrc, directSrc + n, [](size_t a) { return a != 0; }));
    }
    if (*any)
        LOOM_TRACE(kColl, "rank %d: exchange reads %zu peers' blocks in place, %d of its own read in place", me,
                   (size_t)std::count_if(directSrc, directSrc + n, [](size_t a) { return a != 0; }),
                   (int)std::count_if(directSend, directSend + n, [](size_t a) { return a != 0; }));
    return loomSuccess;
}

} // namespace loom
