/*
 * Copy-engine mode (LOOM_EXCHANGE_COPY_ENGINES=1) for broadcast and
 * allgather: inside one host where every pair of GPUs is mapped, a blocking
 * call whose block is at least LOOM_EXCHANGE_DIRECT_BYTES runs as an
 * exchange (enqueue_exchange.cc) in which each sender's copy engines write
 * its block straight into every receiver's output, so that no SM moves the
 * data (what overlap with the application's kernels wants; the SM paths stay
 * faster alone, docs/routing.md). Allgather: every rank sends its block to every
 * peer, received at rank x block. Broadcast: the root sends the buffer to
 * every peer; the others send nothing, so the root's links carry (n - 1) x
 * the buffer (the ring: 1 x): at more than 2 ranks this bcast is slower
 * still, for overlap only. Errors and time-outs of these calls name
 * "alltoallv" (the exchange they run as).
 *
 * Every rank takes the same route: the mode is agreed at creation (an
 * agreed tunable), the block and loomCommSetHostWait's setting are the same
 * on every rank of a call, and so are spansHosts and allPeersMapped. Pairs
 * whose buffers cannot be shared go through the exchange kernel's FIFOs,
 * chosen per call by the exchange itself.
 */
#include <vector>

#include "core/comm/comm.h"
#include "core/enqueue/enqueue.h"
#include "core/comm/params.h"
#include "core/connect/peer_conns.h"
#include "loom_component.h"

namespace loom {

bool movementOnEngines(const loomComm *comm, size_t block) {
    const long least = params().exchangeDirectBytes;
    // pairwise: the per-call buffer descriptions (without it no block moves
    // in place, and the FIFOs would carry every copy); allPeersMapped is the
    // one-shot family's flag (up to 8 ranks, LOOM_LL_MAX_BYTES > 0).
    return params().exchangeCopyEngines && comm->order.hostWaitAllowed && !comm->spansHosts && comm->ll.allPeersMapped &&
           comm->nranks > 1 && least > 0 && block >= (size_t)least && comm->peers && comm->peers->bootstrap.pairwise;
}

loomResult_t allGatherOnEngines(loomComm *comm, const void *in, void *out, size_t block, cudaStream_t stream) {
    const size_t n = (size_t)comm->nranks;
    std::vector<size_t> t(4 * n); // send counts, send displacements, receive counts, receive displacements
    for (size_t q = 0; q < n; ++q) {
        t[q] = block;         // the same block to every rank, itself included
        t[n + q] = 0;         // from the input
        t[2 * n + q] = block; // rank q's block
        t[3 * n + q] = q * block;
    }
    return loomExchange(in, t.data(), t.data() + n, out, t.data() + 2 * n, t.data() + 3 * n, 0, 0, comm, stream);
}

loomResult_t broadcastOnEngines(loomComm *comm, const void *in, void *out, size_t bytes, int root,
                                cudaStream_t stream) {
    const size_t n = (size_t)comm->nranks, me = (size_t)comm->rank, r = (size_t)root;
    std::vector<size_t> t(4 * n, 0);
    if (me == r) {
        for (size_t q = 0; q < n; ++q) t[q] = q == r && in == out ? 0 : bytes; // itself only into another buffer
        t[2 * n + r] = t[r];
    } else {
        t[2 * n + r] = bytes; // the root's buffer, at the start of this one
    }
    return loomExchange(in, t.data(), t.data() + n, out, t.data() + 2 * n, t.data() + 3 * n, 0, 0, comm, stream);
}

} // namespace loom
