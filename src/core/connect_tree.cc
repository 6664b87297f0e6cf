/*
 * Tree connections: each edge of the two trees is a pair of one-way FIFOs
 * (up: child to parent; down: parent to child), with the ring's FIFO layout.
 * Inside a host the edge is p2p: each end's receive FIFO is in its own GPU
 * region (edge slot k of kTreeEdgeSlots after the ring's areas), the peer
 * writes it through CUDA IPC and the credit for each direction lives with
 * its sender. Across hosts it is a net link with one channel (host FIFOs of
 * this rank, moved by the proxy). Trees are used only where the ranks span
 * hosts: inside one host the ring and the one-shot kernel win.
 */
#include <cstring>

#include "core/bootstrap.h"
#include "core/connect.h"
#include "core/debug.h"
#include "core/params.h"

namespace loom {

namespace {

// The edge of rank r's node that leads to `peer` in tree t (-1: none).
int edgeTo(const topo::Tree &t, int r, int peer) {
    if (t.parent[r] == peer) return 0;
    for (size_t j = 0; j < t.children[r].size(); ++j)
        if (t.children[r][j] == peer) return 1 + (int)j;
    return -1;
}

FifoFlags *flagsAt(char *area) { return reinterpret_cast<FifoFlags *>(area); }

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
        if (nd.parent >= 0) peerSlot[treeEdgeSlot(t, 0)] = treeEdgeSlot(t, edgeTo(tr, nd.parent, rank));
        for (int j = 0; j < nd.nchildren; ++j)
            peerSlot[treeEdgeSlot(t, 1 + j)] = treeEdgeSlot(t, edgeTo(tr, nd.children[j], rank));
    }
    return true;
}

loomResult_t connectTrees(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers,
                          const Reach &reach) {
    const int n = comm->nranks, me = comm->rank;
    if (!comm->spansHosts || comm->treeMaxBytes == 0 || n < 2) return loomSuccess;
    // Every rank decides from the same trees and the gathered reachability.
    int unusedSlots[kTreeEdgeSlots];
    TreeNode unusedNodes[2];
    for (int r = 0; r < n; ++r)
        if (!planTreeEdges(comm->trees, r, unusedNodes, unusedSlots)) {
            LOOM_INFO(kInit, "rank %d: trees off: rank %d has more than %d children", me, r, kMaxTreeChildren);
            return loomSuccess;
        }
    auto sameHost = [&](int a, int b) { return peers[a].hostHash == peers[b].hostHash; };
    for (int t = 0; t < 2; ++t)
        for (int r = 0; r < n; ++r) {
            const int p = comm->trees[t].parent[r];
            if (p >= 0 && sameHost(r, p) && !reach.p2p(r, p)) {
                LOOM_INFO(kInit, "rank %d: trees off: ranks %d and %d share a host without p2p", me, r, p);
                return loomSuccess;
            }
        }
    planTreeEdges(comm->trees, me, comm->treeNode, comm->treePeerSlot);

    int peerOf[kTreeEdgeSlots];
    for (int k = 0; k < kTreeEdgeSlots; ++k) {
        const TreeNode &nd = comm->treeNode[k / kTreeEdges];
        const int e = k % kTreeEdges;
        peerOf[k] = comm->treePeerSlot[k] < 0 ? -1 : e == 0 ? nd.parent : nd.children[e - 1];
    }

    // Inside a host: map the peers' regions.
    loomResult_t r = loomSuccess;
    for (int k = 0; k < kTreeEdgeSlots && r == loomSuccess; ++k)
        if (peerOf[k] >= 0 && sameHost(me, peerOf[k])) r = mapPeerRegion(comm, peers, peerOf[k]);
    r = agreeAll(bs, me, n, r, "mapping tree peers");
    if (r != loomSuccess) return r;

    // Across hosts: one net link per edge, all set up in one collective call.
    std::vector<NetSetup> setups;
    std::vector<NetLinks *> links;
    for (int k = 0; k < kTreeEdgeSlots; ++k) {
        if (peerOf[k] < 0 || sameHost(me, peerOf[k])) continue;
        setups.push_back(NetSetup{true, true, peerOf[k], peerOf[k], 1, comm->nslots, comm->treeSlotBytes, k,
                                  comm->treePeerSlot[k], k});
        links.push_back(&comm->treeNet[k]);
        comm->treeUsesNet = true;
    }
    const NetCommon common{comm->nic.c_str(), me, n, params().timeoutSeconds, kTreeEdgeSlots};
    r = netConnect(common, setups, bs, links);
    if (r != loomSuccess) return r;

    char *mine = static_cast<char *>(comm->region.base) + comm->treeOffset;
    for (int k = 0; k < kTreeEdgeSlots; ++k) {
        TreeEdge &d = comm->treeEdge[k];
        d = TreeEdge{};
        const int peer = peerOf[k];
        if (peer < 0) continue;
        if (sameHost(me, peer)) {
            char *myFifo = mine + (size_t)k * comm->treeFifoBytes;
            char *theirs = comm->peerBase[peer] + comm->treeOffset + (size_t)comm->treePeerSlot[k] * comm->treeFifoBytes;
            d.recvSlots = myFifo + sizeof(FifoFlags);
            d.recvTail = &flagsAt(myFifo)->recvTail;
            d.sendHead = &flagsAt(myFifo)->sendHead;
            d.sendSlots = theirs + sizeof(FifoFlags);
            d.peerRecvTail = &flagsAt(theirs)->recvTail;
            d.peerSendHead = &flagsAt(theirs)->sendHead;
        } else {
            const NetLinks &l = comm->treeNet[k];
            d.recvSlots = netRecvSlotBase(l) + sizeof(FifoFlags);
            d.recvTail = &flagsAt(l.recvArea.device)->recvTail;
            d.peerSendHead = &flagsAt(l.recvArea.device)->sendHead; // the proxy takes it as its head
            d.sendSlots = netSendSlotBase(l) + sizeof(FifoFlags);
            d.peerRecvTail = &flagsAt(l.sendArea.device)->recvTail; // the proxy sends what it counts
            d.sendHead = &flagsAt(l.sendArea.device)->sendHead;
            d.sendSizes = 1;
        }
    }
    comm->treeReady = true;
    LOOM_INFO(kInit, "rank %d: trees: parent %d / %d, children %d / %d; %s; up to %zu KiB, %zu KiB slots", me,
              comm->treeNode[0].parent, comm->treeNode[1].parent, comm->treeNode[0].nchildren,
              comm->treeNode[1].nchildren, comm->treeUsesNet ? "edges across hosts over the net" : "p2p only",
              comm->treeMaxBytes >> 10, comm->treeSlotBytes >> 10);
    return loomSuccess;
}

} // namespace loom
