/*
 * Connections of a communicator (the ring's, and the edges of trees and
 * recursive doubling across hosts): for each pair, p2p (the
 * receiver's FIFO in its GPU memory, mapped into the sender with CUDA IPC)
 * when both GPUs can reach each other, else shm (the FIFO in shared host
 * memory mapped into both GPUs) when they share a host, else net (FIFOs in
 * host memory on both sides, moved by the proxy over a net plugin). Both ends
 * of a pair decide from the same gathered data, so they always agree.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/param_table.h"
#include "core/comm/comm.h"

namespace loom {

struct PeerInfo {
    uint64_t hostHash; // the host this rank counts as (LOOM_FAKE_NODES may split one)
    uint64_t osHost;   // the OS instance it runs on (shared memory reaches its ranks)
    int pid;
    int cudaDev;
    P2pEndpoint endpoint;
    // What every rank must hold alike: the tunables the parameter table
    // marks agreed (they shape the connections or the choice of algorithm:
    // ranks that chose differently would wait for each other for ever), one
    // word each in table order (base/param_table.h: loomAgreedWords), and the
    // ring channels this rank's topology gives.
    unsigned long long agreed[LOOM_MAX_AGREED];
    uint64_t channels;
};

// Which pairs of GPUs can use p2p (both ways), gathered so that both ends of
// every pair decide alike: can[a * n + b] means a's GPU reaches b's.
struct Reach {
    int n = 0;
    std::vector<uint8_t> can;
    bool p2p(int a, int b) const { return can[(size_t)a * n + b] && can[(size_t)b * n + a]; }
};

// Collective: checks that the ranks agree on the FIFO geometry and gathers
// the reachability.
loomResult_t gatherReach(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers, Reach *reach);

// Peer q's region mapped into this process (once; kept in comm->peerBase).
loomResult_t mapPeerRegion(loomComm *comm, const std::vector<PeerInfo> &peers, int q);

// Collective. Connects what the ring (and, when every pair is p2p, the
// one-shot kernel) needs and fills comm's areas.
loomResult_t connectRing(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers,
                         const Reach &reach);

// Local: the kernels' view of the ring connections (one RingChannel per
// channel and protocol) and each ring's order, copied into device memory.
loomResult_t buildRingTables(loomComm *comm);

// "prev, next" of each distinct ring ("1, 3; 2, 0"), for errors.
std::string ringNeighbours(const loomComm *comm);
// One line per ring: neighbours, transports, and the NICs where it crosses hosts.
std::string describeRings(const loomComm *comm);

// Whether two ranks may have an edge: on different hosts, or p2p between them.
using SameHostP2p = std::function<bool(int, int)>;

// This rank's side of both trees: its node and, per edge slot, the slot the
// peer uses for the same edge (-1: no edge). False when a rank has more
// children than a tree kernel takes (kMaxTreeChildren).
bool planTreeEdges(const topo::Tree trees[2], int rank, TreeNode node[2], int peerSlot[kTreeEdgeSlots]);
// Trees usable by every rank (decided alike everywhere): fills comm->edges.treeNode
// and slots [0, kTreeEdgeSlots) of peerOf/peerSlot.
bool planTrees(loomComm *comm, const SameHostP2p &p2pInsideHosts, int peerOf[kEdgeSlots], int peerSlot[kEdgeSlots]);

// Rank's recursive-doubling edges: peerOf[k] / peerSlot[k] for its slot
// kTreeEdgeSlots + k. False beyond kMaxRdSteps steps.
bool planRdEdges(int rank, int n, int peerOf[kRdEdgeSlots], int peerSlot[kRdEdgeSlots]);
// Recursive doubling usable by every rank: fills comm->edges.rdRole and its slots.
bool planRd(loomComm *comm, const SameHostP2p &p2pInsideHosts, int peerOf[kEdgeSlots], int peerSlot[kEdgeSlots]);

// Collective. When the ranks span hosts: plans the trees and recursive
// doubling (each off where LOOM_TREE_MAX_BYTES / LOOM_RD_MAX_BYTES is 0 or a
// host has GPUs without p2p between them) and connects their edges (p2p
// inside a host, net across); sets comm->edges.treeReady / rdReady.
loomResult_t connectEdges(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers,
                          const Reach &reach);

} // namespace loom
