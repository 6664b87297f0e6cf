/*
 * The tree allreduce schedule: what a rank does, op by op, on one of the two
 * trees of a double binary tree (topo/search.h). Compiled for host and device
 * like ring_schedule.h: a tree kernel is meant to walk it, and the CPU
 * simulation (test/unit) runs it over host buffers with bounded FIFOs on every
 * tree edge, so deadlocks and wrong results show up before a GPU runs it.
 *
 * Data: the two trees take one half of the count each (channelRange over 2);
 * a tree's range is cut into chunks of one FIFO slot. Per chunk, reduce goes
 * up (children's partial sums into the output buffer, then to the parent) and
 * the result comes down (from the parent into the output, then to the
 * children). The output buffer is the accumulator, so in place works and the
 * root needs no extra storage. The down phase of chunk k runs `lag` chunks
 * after its up phase, so up and down overlap. No lag deadlocks with FIFOs of
 * any depth >= 1: give up(c) the key c and down(c) the key c + lag + 1/2;
 * every rank's ops run in increasing key order, a receive waits for the send
 * of the same key one edge away, and a send's credit for a receive of a lower
 * key — so no cycle of waits can form (the simulation checks lags below, at
 * and above the depth). Lag is a performance knob for the kernel: how far
 * reduce runs ahead of broadcast.
 */
#ifndef LOOM_TREE_SCHEDULE_H
#define LOOM_TREE_SCHEDULE_H

#include <stddef.h>

#ifdef __CUDACC__
#define LOOM_TREE_HD __host__ __device__ __forceinline__
#else
#define LOOM_TREE_HD inline
#endif

namespace loom {

// A binary tree across hosts plus a chain inside a host: at most 3 children.
constexpr int kMaxTreeChildren = 3;

struct TreeNode {
    int parent; // -1 at the root
    int nchildren;
    int children[kMaxTreeChildren];
};

enum TreeOpKind {
    kTreeCopy = 0,   // out = in (a root without children: a single rank)
    kTreeRecvReduce, // out = (first child ? in : out) + slot from child `peer`
    kTreeSendUp,     // slot to the parent = (children ? out : in)
    kTreeRecvDown,   // out = slot from the parent
    kTreeSendDown,   // slot to child `peer` = out
};

struct TreeOp {
    int kind;   // TreeOpKind
    int peer;   // the rank received from or sent to (-1 for kTreeCopy)
    size_t chunk;
    bool first; // kTreeRecvReduce: the first child of this chunk (reduce with `in`)
};

// kTreeSendUp's source: a leaf sends its input, others their partial sum.
LOOM_TREE_HD bool treeSendsInput(const TreeNode &t) { return t.nchildren == 0; }

LOOM_TREE_HD int treeUpOps(const TreeNode &t) { return t.nchildren + (t.parent >= 0 || t.nchildren == 0 ? 1 : 0); }
LOOM_TREE_HD int treeDownOps(const TreeNode &t) { return (t.parent >= 0 ? 1 : 0) + t.nchildren; }

// Ops of a rank for nchunks chunks.
LOOM_TREE_HD size_t treeOpCount(const TreeNode &t, size_t nchunks) {
    return nchunks * (size_t)(treeUpOps(t) + treeDownOps(t));
}

LOOM_TREE_HD TreeOp treeUpOp(const TreeNode &t, size_t chunk, int j) {
    TreeOp op;
    op.chunk = chunk;
    op.first = j == 0;
    if (j < t.nchildren) {
        op.kind = kTreeRecvReduce;
        op.peer = t.children[j];
    } else if (t.parent >= 0) {
        op.kind = kTreeSendUp;
        op.peer = t.parent;
    } else {
        op.kind = kTreeCopy;
        op.peer = -1;
    }
    return op;
}

LOOM_TREE_HD TreeOp treeDownOp(const TreeNode &t, size_t chunk, int j) {
    TreeOp op;
    op.chunk = chunk;
    op.first = false;
    if (t.parent >= 0 && j == 0) {
        op.kind = kTreeRecvDown;
        op.peer = t.parent;
    } else {
        op.kind = kTreeSendDown;
        op.peer = t.children[j - (t.parent >= 0 ? 1 : 0)];
    }
    return op;
}

// Op number `index` (0 .. treeOpCount-1) of a rank. In slot s = 0, 1, ...
// the rank runs the up ops of chunk s (if s < nchunks), then the down ops of
// chunk s - lag (if that is a chunk).
LOOM_TREE_HD TreeOp treeOp(const TreeNode &t, size_t nchunks, size_t lag, size_t index) {
    const size_t up = (size_t)treeUpOps(t), down = (size_t)treeDownOps(t);
    if (lag > nchunks) lag = nchunks;
    // Slots 0 .. lag-1: up only; lag .. nchunks-1: up and down; then down only.
    const size_t head = lag * up;
    if (index < head) return treeUpOp(t, index / up, (int)(index % up));
    index -= head;
    const size_t both = (nchunks - lag) * (up + down);
    if (index < both) {
        const size_t s = lag + index / (up + down), j = index % (up + down);
        return j < up ? treeUpOp(t, s, (int)j) : treeDownOp(t, s - lag, (int)(j - up));
    }
    index -= both;
    return treeDownOp(t, nchunks - lag + index / down, (int)(index % down));
}

// Elements [off, off + len) of chunk `chunk` of a range of n elements.
LOOM_TREE_HD void treeChunk(size_t n, size_t chunkElems, size_t chunk, size_t *off, size_t *len) {
    size_t o = chunk * chunkElems;
    *off = o < n ? o : n;
    *len = o >= n ? 0 : (n - o < chunkElems ? n - o : chunkElems);
}

LOOM_TREE_HD size_t treeChunks(size_t n, size_t chunkElems) { return (n + chunkElems - 1) / chunkElems; }

} // namespace loom

#endif
