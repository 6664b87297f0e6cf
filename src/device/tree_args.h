/*
 * What the host hands the tree allreduce kernel: per tree (two, a double
 * binary tree), this rank's node and one edge (peer_edge.h) per tree
 * neighbour. Shared by host (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/fifo.h"
#include "device/ring_schedule.h"
#include "device/peer_edge.h"
#include "device/tree_schedule.h"

namespace loom {

struct TreeSide {
    TreeNode node;                   // ranks of the parent and children
    PeerEdge edge[kTreeEdges];       // [0] parent, [1 + j] child j
    size_t lag;                      // chunks the broadcast runs behind the reduce
};

struct TreeArgs {
    EdgeCall c;
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
