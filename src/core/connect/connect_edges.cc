/*
 * Edges of the small-message algorithms across hosts (peer_edge.h): trees
 * and recursive doubling each say which peer every slot leads to and which
 * slot the peer uses for the same edge; this file connects them all at once.
 * Inside a host an edge is p2p: each end's receive FIFO is in its own GPU
 * region (edge slot k of kEdgeSlots after the ring's areas), the peer writes
 * it through CUDA IPC and the credit for each direction lives with its
 * sender. Across hosts it is a net link with one channel (host FIFOs of this
 * rank, moved by the proxy). Only where the ranks span hosts: inside one host
 * the ring and the one-shot kernel win.
 */
#include <cstring>

#include "base/bootstrap.h"
#include "core/connect/connect.h"
#include "base/debug.h"
#include "core/comm/params.h"
#include "base/setup_write.h"

namespace loom {

namespace {

FifoFlags *flagsAt(char *area) { return reinterpret_cast<FifoFlags *>(area); }

} // namespace

loomResult_t connectEdges(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers,
                          const Reach &reach) {
    const int n = comm->nranks, me = comm->rank;
    for (int k = 0; k < kEdgeSlots; ++k) comm->edges.peer[k] = comm->edges.peerSlot[k] = -1;
    if (!comm->spansHosts || n < 2 || (!comm->edges.treeMaxBytes && !comm->edges.rdMaxBytes)) return loomSuccess;
    auto sameHost = [&](int a, int b) { return peers[a].hostHash == peers[b].hostHash; };
    const SameHostP2p p2pInsideHosts = [&](int a, int b) { return !sameHost(a, b) || reach.p2p(a, b); };
    // Decided from the same graphs and gathered data on every rank.
    int *peerOf = comm->edges.peer, *peerSlot = comm->edges.peerSlot;
    comm->edges.treeReady = comm->edges.treeMaxBytes && planTrees(comm, p2pInsideHosts, peerOf, peerSlot);
    comm->edges.rdReady = comm->edges.rdMaxBytes && planRd(comm, p2pInsideHosts, peerOf, peerSlot);

    // Inside a host: map the peers' regions.
    loomResult_t r = loomSuccess;
    for (int k = 0; k < kEdgeSlots && r == loomSuccess; ++k)
        if (peerOf[k] >= 0 && sameHost(me, peerOf[k])) r = mapPeerRegion(comm, peers, peerOf[k]);
    r = agreeAll(bs, me, n, r, "mapping edge peers");
    if (r != loomSuccess) return r;

    // Across hosts: one net link per edge, all set up in one collective call.
    std::vector<NetSetup> setups;
    std::vector<NetLinks *> links;
    for (int k = 0; k < kEdgeSlots; ++k) {
        if (peerOf[k] < 0 || sameHost(me, peerOf[k])) continue;
        setups.push_back(NetSetup{true, true, peerOf[k], peerOf[k], 1, comm->ring.nslots, comm->edges.slotBytes, k,
                                  peerSlot[k], k});
        links.push_back(&comm->edges.net[k]);
        comm->edges.useNet = true;
    }
    const NetCommon common{comm->nic.c_str(), me, n, setupWaitSeconds(), kEdgeSlots};
    r = netConnect(common, setups, bs, links);
    if (r != loomSuccess) return r;

    char *mine = static_cast<char *>(comm->region.base) + comm->edges.offset;
    for (int k = 0; k < kEdgeSlots; ++k) {
        PeerEdge &d = comm->edges.edge[k];
        d = PeerEdge{};
        const int peer = peerOf[k];
        if (peer < 0) continue;
        if (sameHost(me, peer)) {
            char *myFifo = mine + (size_t)k * comm->edges.fifoBytes;
            char *theirs = comm->peerBase[peer] + comm->edges.offset + (size_t)peerSlot[k] * comm->edges.fifoBytes;
            d.recv.slots = myFifo + sizeof(FifoFlags);
            d.recv.tail = &flagsAt(myFifo)->recvTail;
            d.send.head = &flagsAt(myFifo)->sendHead; // the credit for my sends lives with me
            d.send.slots = theirs + sizeof(FifoFlags);
            d.send.tail = &flagsAt(theirs)->recvTail;
            d.recv.head = &flagsAt(theirs)->sendHead;
        } else {
            const NetLinks &l = comm->edges.net[k];
            d.recv.slots = netRecvSlotBase(l) + sizeof(FifoFlags);
            d.recv.tail = &flagsAt(l.recvArea.device)->recvTail;
            d.recv.head = &flagsAt(l.recvArea.device)->sendHead; // the proxy takes it as its head
            d.send.slots = netSendSlotBase(l) + sizeof(FifoFlags);
            d.send.tail = &flagsAt(l.sendArea.device)->recvTail; // the proxy sends what it counts
            d.send.head = &flagsAt(l.sendArea.device)->sendHead;
            d.send.sizes = 1;
        }
    }
    // The kernels read the edges from device memory.
    cudaError_t e = cudaMalloc((void **)&comm->edges.connsDev, sizeof(comm->edges.edge));
    if (e == cudaSuccess) e = setupWrite(comm->edges.connsDev, comm->edges.edge, sizeof(comm->edges.edge));
    r = e == cudaSuccess ? loomSuccess
                         : fail(loomUnhandledCudaError, "rank %d: edge table: %s", me, cudaGetErrorString(e));
    r = agreeAll(bs, me, n, r, "uploading the edge table");
    if (r != loomSuccess) return r;
    if (comm->edges.treeReady)
        LOOM_INFO(kInit, "rank %d: trees: parent %d / %d, children %d / %d; %s; up to %zu KiB, %zu KiB slots", me,
                  comm->edges.treeNode[0].parent, comm->edges.treeNode[1].parent, comm->edges.treeNode[0].nchildren,
                  comm->edges.treeNode[1].nchildren, comm->edges.useNet ? "edges across hosts over the net" : "p2p only",
                  comm->edges.treeMaxBytes >> 10, comm->edges.slotBytes >> 10);
    if (comm->edges.rdReady) {
        const RdPlan q = rdPlan(me, n);
        LOOM_INFO(kInit, "rank %d: recursive doubling: %d steps over %d ranks%s; up to %zu KiB", me, q.steps, q.p,
                  q.extra >= 0  ? (", folds in rank " + std::to_string(q.extra)).c_str()
                  : q.host >= 0 ? (", an extra of rank " + std::to_string(q.host)).c_str()
                                : "",
                  comm->edges.rdMaxBytes >> 10);
    }
    return loomSuccess;
}

} // namespace loom
