/*
 * What the host hands the tree allreduce kernel: per tree (two, a double
 * binary tree), this rank's node and one edge per tree neighbour. An edge is
 * two one-way FIFOs with the ring's layout (FifoFlags + slots): the peer's
 * chunks arrive in the receive FIFO, this rank's go into the send FIFO, each
 * flow-controlled by a head counter, whatever carries them (p2p: the
 * receiver's GPU memory mapped by the sender; net: host FIFOs of this rank
 * moved by the proxy). Shared by host (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/ring_args.h"
#include "device/ring_schedule.h"
#include "device/tree_schedule.h"

namespace loom {

constexpr int kTreeEdges = 1 + kMaxTreeChildren; // edge 0: the parent; 1 + j: child j
constexpr int kTreeEdgeSlots = 2 * kTreeEdges;   // FIFO pairs a rank may have (both trees)
// Which of a rank's edge slots an edge is: tree t, parent or child j.
inline constexpr int treeEdgeSlot(int tree, int edge) { return tree * kTreeEdges + edge; }

struct TreeEdge {
    char *recvSlots;                 // the peer's chunks for me
    volatile uint64_t *recvTail;     // ... and their tail
    volatile uint64_t *peerSendHead; // my credit to the peer (I bump it when a slot is consumed)
    char *sendSlots;                 // my chunks for the peer
    volatile uint64_t *peerRecvTail; // ... and their tail (I bump it); a FifoFlags, for stepBytes
    volatile uint64_t *sendHead;     // credit for my sends: slots the peer consumed
    int sendSizes;                   // net: the proxy needs each step's size (FifoFlags::stepBytes)
    uint64_t step;                   // slots sent (= received) on this edge by earlier calls
};

struct TreeSide {
    TreeNode node;                   // ranks of the parent and children
    TreeEdge edge[kTreeEdges];       // [0] parent, [1 + j] child j
    size_t lag;                      // chunks the broadcast runs behind the reduce
};

struct TreeArgs {
    const void *in;
    void *out;
    size_t count;
    int nthreads;
    int nslots;
    size_t slotBytes;
    unsigned long long timeoutCycles;
    volatile int *abortFlag;
    TreeSide tree[2];                // CTA t walks tree t over its half of the data
};

// Tree t's share of the elements (host and kernel must cut alike): half each,
// in pieces of 64 bytes so the halves stay 16-byte aligned.
LOOM_TREE_HD void treeHalf(size_t count, size_t elemBytes, int tree, size_t *begin, size_t *end) {
    channelRange(count, 2, tree, 64 / elemBytes, begin, end);
}

// A chunk is one slot of data.
LOOM_TREE_HD size_t treeChunkElems(size_t slotBytes, size_t elemBytes) { return slotBytes / elemBytes; }

static_assert(sizeof(TreeArgs) <= 4096, "kernel parameters of CUDA < 12.1");

} // namespace loom
