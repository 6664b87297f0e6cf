/*
 * Which edges recursive doubling needs (rd_args.h): one per step to the
 * partner rank ^ 2^k, in slot rdStepSlot(k) at both ends, and one between an
 * extra rank (>= p) and the rank p below it, in rdExtraSlot() at both ends.
 * Connected by connect_edges.cc with the trees' edges.
 */
#include "core/connect/connect.h"
#include "base/debug.h"

namespace loom {

bool planRdEdges(int rank, int n, int peerOf[kRdEdgeSlots], int peerSlot[kRdEdgeSlots]) {
    for (int k = 0; k < kRdEdgeSlots; ++k) peerOf[k] = peerSlot[k] = -1;
    const RdPlan q = rdPlan(rank, n);
    if (q.steps > kMaxRdSteps) return false;
    for (int s = 0; s < q.steps && q.host < 0; ++s) {
        peerOf[s] = rdPartner(rank, s);
        peerSlot[s] = rdStepSlot(s);
    }
    const int x = rdExtraSlot() - kTreeEdgeSlots;
    if (q.extra >= 0 || q.host >= 0) {
        peerOf[x] = q.extra >= 0 ? q.extra : q.host;
        peerSlot[x] = rdExtraSlot();
    }
    return true;
}

bool planRd(loomComm *comm, const SameHostP2p &p2pInsideHosts, int peerOf[kEdgeSlots], int peerSlot[kEdgeSlots]) {
    const int n = comm->nranks, me = comm->rank;
    int po[kRdEdgeSlots], ps[kRdEdgeSlots];
    for (int r = 0; r < n; ++r) {
        if (!planRdEdges(r, n, po, ps)) {
            LOOM_INFO(kInit, "rank %d: recursive doubling off: more than %d steps", me, kMaxRdSteps);
            return false;
        }
        for (int k = 0; k < kRdEdgeSlots; ++k)
            if (po[k] >= 0 && !p2pInsideHosts(r, po[k])) {
                LOOM_INFO(kInit, "rank %d: recursive doubling off: ranks %d and %d share a host without p2p", me, r,
                          po[k]);
                return false;
            }
    }
    planRdEdges(me, n, peerOf + kTreeEdgeSlots, peerSlot + kTreeEdgeSlots);
    comm->edges.rdRole = rdRoleOf(me, n);
    return true;
}

} // namespace loom
