/*
 * Which edges the trees need: each edge of the two trees (up: child to
 * parent, down: parent to child) is one PeerEdge, in slot treeEdgeSlot(t, e)
 * at both ends. Connected by connect_edges.cc with the other small-message
 * algorithms' edges.
 */
#include "core/connect/connect.h"
#include "base/debug.h"

namespace loom {

namespace {

// The edge of rank r's node that leads to `peer` in tree t (-1: none).
int edgeTo(const topo::Tree &t, int r, int peer) {
    if (t.parent[r] == peer) return 0;
    for (size_t j = 0; j < t.children[r].size(); ++j)
        if (t.children[r][j] == peer) return 1 + (int)j;
    return -1;
}

} // namespace

bool planTreeEdges(const topo::Tree trees[2], int rank, TreeNode node[2], int peerSlot[kTreeEdgeSlots]) {
    for (int k = 0; k < kTreeEdgeSlots; ++k) peerSlot[k] = -1;
    for (int t = 0; t < 2; ++t) {
        const topo::Tree &tr = trees[t];
        for (size_t r = 0; r < tr.children.size(); ++r)
            if (tr.children[r].size() > (size_t)kMaxTreeChildren) return false;
        TreeNode &nd = node[t];
        nd.parent = tr.parent[rank];
        nd.nchildren = (int)tr.children[rank].size();
        for (int j = 0; j < kMaxTreeChildren; ++j) nd.children[j] = j < nd.nchildren ? tr.children[rank][j] : -1;
        // Each end finds itself among the other's edges (else the trees are
        // not trees: no edges rather than FIFOs nobody reads).
        const int up = nd.parent >= 0 ? edgeTo(tr, nd.parent, rank) : 0;
        if (up < 0) return false;
        if (nd.parent >= 0) peerSlot[treeEdgeSlot(t, 0)] = treeEdgeSlot(t, up);
        for (int j = 0; j < nd.nchildren; ++j) {
            const int down = edgeTo(tr, nd.children[j], rank);
            if (down != 0) return false;
            peerSlot[treeEdgeSlot(t, 1 + j)] = treeEdgeSlot(t, down);
        }
    }
    return true;
}

bool planTrees(loomComm *comm, const SameHostP2p &p2pInsideHosts, int peerOf[kEdgeSlots], int peerSlot[kEdgeSlots]) {
    const int n = comm->nranks, me = comm->rank;
    int unusedSlots[kTreeEdgeSlots];
    TreeNode unusedNodes[2];
    for (int r = 0; r < n; ++r)
        if (!planTreeEdges(comm->edges.trees, r, unusedNodes, unusedSlots)) {
            LOOM_INFO(kInit, "rank %d: trees off: rank %d has more than %d children", me, r, kMaxTreeChildren);
            return false;
        }
    for (int t = 0; t < 2; ++t)
        for (int r = 0; r < n; ++r) {
            const int p = comm->edges.trees[t].parent[r];
            if (p >= 0 && !p2pInsideHosts(r, p)) {
                LOOM_INFO(kInit, "rank %d: trees off: ranks %d and %d share a host without p2p", me, r, p);
                return false;
            }
        }
    planTreeEdges(comm->edges.trees, me, comm->edges.treeNode, peerSlot);
    for (int k = 0; k < kTreeEdgeSlots; ++k) {
        const TreeNode &nd = comm->edges.treeNode[k / kTreeEdges];
        const int e = k % kTreeEdges;
        peerOf[k] = peerSlot[k] < 0 ? -1 : e == 0 ? nd.parent : nd.children[e - 1];
    }
    return true;
}

} // namespace loom
