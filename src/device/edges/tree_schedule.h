/*
 * The tree allreduce schedule: what a rank does, op by op, on one of the two
 * trees of a double binary tree (topo/search.h), in the one op form
 * (edge_op.h) that the tree kernel runs, the host counts its steps from and
 * the CPU simulator (test/unit/sched_sim.h) executes over host buffers with
 * bounded FIFOs on every tree edge, so deadlocks and wrong results show up
 * before a GPU runs it.
 *
 * Data: the two trees take one half of the count each (channelRange over 2);
 * a tree's range is cut into chunks of one FIFO slot. Per chunk, reduce goes
 * up and the result comes down:
 *   up    child j's chunk is reduced with the input (first child) or the
 *         partial sum in the output buffer; the last child's step sends the
 *         sum straight to the parent (receive, reduce, send in one step); a
 *         leaf sends its input.
 *   down  the parent's chunk lands in the output and goes on to the first
 *         child in the same step; the other children get it from the output.
 * The output buffer is the accumulator, so in place works and the root needs
 * no extra storage. The down phase of chunk k runs `lag` chunks after its up
 * phase, so up and down overlap. No lag deadlocks with FIFOs of any depth
 * >= 1: give up(c) the key c and down(c) the key c + lag + 1/2; every rank's
 * ops run in increasing key order, a receive waits for the send of the same
 * key one edge away, and a send's credit for a receive of a lower key — so
 * no cycle of waits can form (the simulation checks lags below, at and above
 * the depth). Lag is a performance knob: how far reduce runs ahead of
 * broadcast.
 */
#ifndef LOOM_TREE_SCHEDULE_H
#define LOOM_TREE_SCHEDULE_H

#include <stddef.h>

#include "device/edges/edge_op.h"


namespace loom {

// A binary tree across hosts plus a chain inside a host: at most 3 children.
constexpr int kMaxTreeChildren = 3;

struct TreeNode {
    int parent; // -1 at the root
    int nchildren;
    int children[kMaxTreeChildren];
};

// Which step of a chunk an op is: up step j or down step j.
struct TreeSlot {
    bool up;
    int j;
    size_t chunk;
};

LOOM_HD int treeUpOps(const TreeNode &t) { return t.nchildren > 0 ? t.nchildren : 1; }
LOOM_HD int treeDownOps(const TreeNode &t) {
    return t.parent >= 0 ? (t.nchildren > 0 ? t.nchildren : 1) : t.nchildren;
}

// Ops of a rank for nchunks chunks.
LOOM_HD size_t treeOpCount(const TreeNode &t, size_t nchunks) {
    return nchunks * (size_t)(treeUpOps(t) + treeDownOps(t));
}

// Op number `index` (0 .. treeOpCount-1) of a rank. In slot s = 0, 1, ...
// the rank runs the up ops of chunk s (if s < nchunks), then the down ops of
// chunk s - lag (if that is a chunk).
LOOM_HD TreeSlot treeSlot(const TreeNode &t, size_t nchunks, size_t lag, size_t index) {
    const size_t up = (size_t)treeUpOps(t), down = (size_t)treeDownOps(t);
    if (lag > nchunks) lag = nchunks;
    // Slots 0 .. lag-1: up only; lag .. nchunks-1: up and down; then down only.
    const size_t head = lag * up;
    if (index < head) return TreeSlot{true, (int)(index % up), index / up};
    index -= head;
    const size_t both = (nchunks - lag) * (up + down);
    if (index < both) {
        const size_t s = lag + index / (up + down), j = index % (up + down);
        return j < up ? TreeSlot{true, (int)j, s} : TreeSlot{false, (int)(j - up), s - lag};
    }
    index -= both;
    return TreeSlot{false, (int)(index % down), nchunks - lag + index / down};
}

// Elements [off, off + len) of chunk `chunk` of a range of n elements.
LOOM_HD void treeChunk(size_t n, size_t chunkElems, size_t chunk, size_t *off, size_t *len) {
    size_t o = chunk * chunkElems;
    *off = o < n ? o : n;
    *len = o >= n ? 0 : (n - o < chunkElems ? n - o : chunkElems);
}

LOOM_HD size_t treeChunks(size_t n, size_t chunkElems) { return (n + chunkElems - 1) / chunkElems; }

// Op `index` of a rank on a tree whose range is [begin, begin + n) of the
// buffers, in chunks of chunkElems. Connections: port0 the parent, port0 +
// 1 + j child j. Keys: (1, chunk) up, (2, chunk) down.
LOOM_HD EdgeOp treeEdgeOp(const TreeNode &t, int port0, size_t begin, size_t n, size_t chunkElems, size_t lag,
                               size_t index) {
    const TreeSlot sl = treeSlot(t, treeChunks(n, chunkElems), lag, index);
    size_t off, len;
    treeChunk(n, chunkElems, sl.chunk, &off, &len);
    const size_t at = begin + off;
    const int parent = t.parent >= 0 ? port0 : -1;
    if (sl.up) {
        const unsigned long long key = edgeKey(1, sl.chunk);
        if (t.nchildren == 0) // a leaf sends its input; a lone root copies it
            return parent >= 0 ? edgeOp(-1, parent, kBufIn, at, kBufNone, 0, len, false, key)
                               : edgeOp(-1, -1, kBufIn, at, kBufOut, at, len, false, key);
        const bool last = sl.j == t.nchildren - 1;
        const int to = last ? parent : -1; // the last child's step sends the sum up
        return edgeOp(port0 + 1 + sl.j, to, sl.j == 0 ? kBufIn : kBufOut, at, to >= 0 ? kBufNone : kBufOut, at, len,
                      true, key);
    }
    const unsigned long long key = edgeKey(2, sl.chunk);
    if (parent >= 0 && sl.j == 0) // from the parent into the output, and on to the first child
        return edgeOp(parent, t.nchildren > 0 ? port0 + 1 : -1, kBufNone, 0, kBufOut, at, len, false, key);
    return edgeOp(-1, port0 + 1 + sl.j, kBufOut, at, kBufNone, 0, len, false, key); // child j (j > 0 below a parent)
}

} // namespace loom

#endif
