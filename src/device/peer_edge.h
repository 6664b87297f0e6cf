/*
 * A connection of this rank with one peer for the small-message algorithms
 * across hosts (trees, recursive doubling): two one-way FIFOs with the ring's
 * layout (FifoFlags + slots), each flow-controlled by a head counter,
 * whatever carries them (p2p: the receiver's GPU memory mapped by the sender;
 * net: host FIFOs of this rank moved by the proxy). A rank has kEdgeSlots of
 * them at most: slots [0, kTreeEdgeSlots) for the trees, then those of
 * recursive doubling. Shared by host (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/tree_schedule.h"

namespace loom {

constexpr int kTreeEdges = 1 + kMaxTreeChildren;  // per tree: edge 0 the parent, 1 + j child j
constexpr int kTreeEdgeSlots = 2 * kTreeEdges;    // both trees
constexpr int kMaxRdSteps = 7;                    // recursive doubling over up to 128 ranks (+ extras)
constexpr int kRdEdgeSlots = kMaxRdSteps + 1;     // a partner per step, then the extra rank's edge
constexpr int kEdgeSlots = kTreeEdgeSlots + kRdEdgeSlots;

// Which of a rank's edge slots an edge is.
inline constexpr int treeEdgeSlot(int tree, int edge) { return tree * kTreeEdges + edge; }
inline constexpr int rdStepSlot(int step) { return kTreeEdgeSlots + step; }
inline constexpr int rdExtraSlot() { return kTreeEdgeSlots + kMaxRdSteps; }

struct PeerEdge {
    char *recvSlots;                 // the peer's chunks for me
    volatile uint64_t *recvTail;     // ... and their tail
    volatile uint64_t *peerSendHead; // my credit to the peer (I bump it when a slot is consumed)
    char *sendSlots;                 // my chunks for the peer
    volatile uint64_t *peerRecvTail; // ... and their tail (I bump it); a FifoFlags, for stepBytes
    volatile uint64_t *sendHead;     // credit for my sends: slots the peer consumed
    int sendSizes;                   // net: the proxy needs each step's size (FifoFlags::stepBytes)
    uint64_t step;                   // slots sent (= received) on this edge by earlier calls
};

// What every kernel that moves chunks over PeerEdges is given besides them.
struct EdgeCall {
    const void *in;
    void *out;
    size_t count;
    int nthreads;
    int nslots;                       // slots per edge FIFO
    size_t slotBytes;                 // one chunk
    unsigned long long timeoutCycles; // a peer silent for this long fails the call
    volatile int *abortFlag;          // host-mapped: set by the kernel on timeout
};

} // namespace loom
