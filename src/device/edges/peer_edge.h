/*
 * A connection of this rank with one peer for the small-message algorithms
 * across hosts (trees, recursive doubling and halving, binomial trees): two
 * one-way FIFOs with the ring's layout (FifoFlags + slots), each
 * flow-controlled by a head counter, with its own step counter,
 * whatever carries them (p2p: the receiver's GPU memory mapped by the sender;
 * net: host FIFOs of this rank moved by the proxy). A rank has kEdgeSlots of
 * them at most: slots [0, kTreeEdgeSlots) for the trees, then those of
 * recursive doubling. Shared by host (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/conn.h"
#include "device/host_device.h"
#include "device/edges/tree_schedule.h"

namespace loom {

constexpr int kTreeEdges = 1 + kMaxTreeChildren;  // per tree: edge 0 the parent, 1 + j child j
constexpr int kTreeEdgeSlots = 2 * kTreeEdges;    // both trees
constexpr int kMaxRdSteps = 7;                    // recursive doubling over up to 128 ranks (+ extras)
constexpr int kRdEdgeSlots = kMaxRdSteps + 1;     // a partner per step, then the extra rank's edge
constexpr int kEdgeSlots = kTreeEdgeSlots + kRdEdgeSlots;

// Which of a rank's edge slots an edge is.
LOOM_HD constexpr int treeEdgeSlot(int tree, int edge) { return tree * kTreeEdges + edge; }
LOOM_HD constexpr int rdStepSlot(int step) { return kTreeEdgeSlots + step; }
LOOM_HD constexpr int rdExtraSlot() { return kTreeEdgeSlots + kMaxRdSteps; }

// An edge as the kernels see it: both directions with one peer (conn.h),
// the receive side in this rank's FIFO, the send side in the peer's.
using PeerEdge = ConnPair;

} // namespace loom
