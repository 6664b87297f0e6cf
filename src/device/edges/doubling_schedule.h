/*
 * Small messages across hosts for the rooted and gather-type collectives,
 * over the recursive-doubling edges (rd_args.h: rank r < p talks to r ^ 2^s
 * at step s, and an extra rank x >= p to its host x - p), in the one op form
 * (edge_op.h) that the edge kernel runs, the host counts its steps from and
 * the CPU simulator (test/unit/sched_sim.h) executes:
 *
 *   broadcast       binomial tree over rel = r ^ R (R: the root, or its host
 *                   when the root is an extra, which first hands its data to
 *                   R): rank rel receives at step lowbit(rel) and sends at
 *                   every lower step, from the highest down; hosts pass the
 *                   result on to their extras.
 *   reduce          the mirror image: extras hand their input to their host,
 *                   every rank folds in its children (the extra first, then
 *                   steps 0, 1, ...) and sends the sum to its parent with the
 *                   last child's step; interior sums wait in the
 *                   communicator's accumulator. A root beyond p gets the
 *                   result from its host chunk by chunk, each right after
 *                   sending that chunk's input (sending all input first
 *                   would deadlock the edge: the host, blocked on sending a
 *                   result the root does not yet take, stops taking input).
 *   allgather       recursive doubling on virtual blocks (block v < p and,
 *                   if it exists, block v + p, which its extra handed over):
 *                   at step s a rank swaps the 2^s virtual blocks it holds
 *                   with its partner's; hosts send the whole result to their
 *                   extras.
 *   reduce_scatter  recursive halving on the same virtual blocks: extras
 *                   hand their whole input to their host, which folds it
 *                   into the accumulator; at step s (from the highest) a
 *                   rank sends the half it gives up and reduces the half it
 *                   keeps; at the end its block goes to the output and the
 *                   extra's block to the extra.
 * log2(p) network hops (two more with extras) instead of the ring's n - 1:
 * latency, not bandwidth, is what small messages across hosts pay for.
 * Every message is cut into chunks of one slot. A chunk's key: broadcast and
 * reduce pass a chunk on in the step that receives it, so their key is the
 * chunk number alone; allgather and reduce_scatter key (phase, number):
 * phase s for step s, kDblIn for an extra's data to its host, kDblOut for a
 * host's result to its extra.
 */
#ifndef LOOM_DOUBLING_SCHEDULE_H
#define LOOM_DOUBLING_SCHEDULE_H

#include <stddef.h>

#include "base/coll.h"
#include "device/edges/edge_op.h"
#include "device/edges/rd_args.h"
#include "device/edges/rd_schedule.h"

namespace loom {

// The doubling family runs broadcast, reduce, allgather and reduce_scatter (loomColl).

constexpr unsigned kDblIn = 16, kDblOut = 17;
constexpr int kDblMaxPorts = kRdExtraEdge + 1; // the steps' partners and the extra

// A rank's part: the call (count: of the message, or per block) and where
// it stands in the doubling.
struct DblRole {
    int coll, rank, n, p, steps, root;
    size_t count, chunk; // elements; chunk: elements of one slot
    int port0;           // connection of step 0; step s is port0 + s, the extra's port0 + kRdExtraEdge
};

LOOM_HD DblRole dblRole(int coll, int rank, int n, int root, size_t count, size_t chunk, int port0) {
    DblRole d;
    d.coll = coll;
    d.rank = rank;
    d.n = n;
    d.root = root;
    d.count = count;
    d.chunk = chunk;
    d.port0 = port0;
    const RdPlan q = rdPlan(rank, n);
    d.p = q.p;
    d.steps = q.steps;
    return d;
}

LOOM_HD size_t dblChunks(size_t len, size_t chunk) { return (len + chunk - 1) / chunk; }
LOOM_HD int dblLowBit(int v) {
    int b = 0;
    while (!(v & 1)) v >>= 1, ++b;
    return b;
}
LOOM_HD int dblExtraPort(const DblRole &d) { return d.port0 + kRdExtraEdge; }
LOOM_HD int dblExtraOf(const DblRole &d) { return d.rank + d.p < d.n ? d.rank + d.p : -1; }
// The root's stand-in below p, and this rank's place relative to it.
LOOM_HD int dblEffRoot(const DblRole &d) { return d.root >= d.p ? d.root - d.p : d.root; }

// Elements [at, at + len) of chunk j of a contiguous range [begin, begin + n).
LOOM_HD void dblChunkOf(size_t begin, size_t n, size_t chunk, size_t j, size_t *at, size_t *len) {
    const size_t o = j * chunk;
    *at = begin + o;
    *len = n - o < chunk ? n - o : chunk;
}

// Virtual blocks [g, g + 2^s) as two ranges of elements (blocks below p,
// then their extras' blocks): chunk j of the pair, and the chunk counts.
struct DblPayload {
    size_t aBegin, aLen, bBegin, bLen, aChunks, chunks;
};
LOOM_HD DblPayload dblPayload(const DblRole &d, int g, int s) {
    DblPayload y;
    const int w = 1 << s;
    y.aBegin = (size_t)g * d.count;
    y.aLen = (size_t)w * d.count;
    const int b0 = g + d.p, b1 = g + w + d.p < d.n ? g + w + d.p : d.n;
    y.bBegin = (size_t)b0 * d.count;
    y.bLen = b0 < b1 ? (size_t)(b1 - b0) * d.count : 0;
    y.aChunks = dblChunks(y.aLen, d.chunk);
    y.chunks = y.aChunks + dblChunks(y.bLen, d.chunk);
    return y;
}
LOOM_HD void dblPayloadChunk(const DblRole &d, const DblPayload &y, size_t j, size_t *at, size_t *len) {
    if (j < y.aChunks) dblChunkOf(y.aBegin, y.aLen, d.chunk, j, at, len);
    else dblChunkOf(y.bBegin, y.bLen, d.chunk, j - y.aChunks, at, len);
}

// A swap with the partner of step s: my `give` payload out, their `take`
// payload in, interleaved send, receive, send, ... Op k of ops (sends + recvs).
struct DblSwap {
    size_t sends, recvs;
};
// Which op k is: a send (true) or a receive, and its chunk.
LOOM_HD bool dblSwapIsSend(const DblSwap &w, size_t k, size_t *j) {
    const size_t both = 2 * (w.sends < w.recvs ? w.sends : w.recvs);
    if (k < both) {
        *j = k / 2;
        return k % 2 == 0;
    }
    *j = k - both / 2;
    return w.sends > w.recvs;
}

// Step s's two payloads: the 2^s virtual blocks this rank's group holds, and
// its partner's (allgather gives the first and takes the second; halving
// gives the second and keeps the first).
LOOM_HD void dblGroups(const DblRole &d, int s, DblPayload *mine, DblPayload *theirs) {
    const int q = d.rank ^ (1 << s);
    *mine = dblPayload(d, (d.rank >> s) << s, s);
    *theirs = dblPayload(d, (q >> s) << s, s);
}

// Ops of every step's swap (the same for doubling and halving).
LOOM_HD size_t dblSwapTotal(const DblRole &d) {
    size_t ops = 0;
    for (int s = 0; s < d.steps; ++s) {
        DblPayload mine, theirs;
        dblGroups(d, s, &mine, &theirs);
        ops += mine.chunks + theirs.chunks;
    }
    return ops;
}

// Op k of step s's swap: `give` goes out from sendBuf, `take` comes in,
// reduced (or not) with recvSrc into recvDst.
LOOM_HD EdgeOp dblSwapOp(const DblRole &d, int s, const DblPayload &give, const DblPayload &take, size_t k,
                         int sendBuf, int recvSrc, int recvDst, bool reduce) {
    const DblSwap w{give.chunks, take.chunks};
    size_t j, at, len;
    const bool send = dblSwapIsSend(w, k, &j);
    dblPayloadChunk(d, send ? give : take, j, &at, &len);
    return send ? edgeOp(-1, d.port0 + s, sendBuf, at, kBufNone, 0, len, false, edgeKey(s, j))
                : edgeOp(d.port0 + s, -1, recvSrc, at, recvDst, at, len, reduce, edgeKey(s, j));
}

// ---- broadcast ----
// The connections a rank sends each chunk on, in order (at most 8 + 1).
LOOM_HD int dblBcastTargets(const DblRole &d, int *ports) {
    if (d.rank >= d.p) return 0;
    const int R = dblEffRoot(d), rel = d.rank ^ R;
    int m = 0;
    for (int s = (rel == 0 ? d.steps : dblLowBit(rel)) - 1; s >= 0; --s) ports[m++] = d.port0 + s;
    const int x = dblExtraOf(d);
    if (x >= 0 && x != d.root) ports[m++] = dblExtraPort(d);
    return m;
}

LOOM_HD size_t dblBcastCount(const DblRole &d) {
    int ports[kDblMaxPorts];
    const int m = dblBcastTargets(d, ports);
    return dblChunks(d.count, d.chunk) * (size_t)(m > 0 ? m : 1);
}

LOOM_HD EdgeOp dblBcastOp(const DblRole &d, size_t i) {
    int ports[kDblMaxPorts];
    const int m = dblBcastTargets(d, ports), per = m > 0 ? m : 1;
    const size_t j = i / per;
    const int k = (int)(i % per);
    size_t at, len;
    dblChunkOf(0, d.count, d.chunk, j, &at, &len);
    const int send = m > 0 ? ports[k] : -1;
    const unsigned long long key = edgeKey(0, j);
    if (d.rank >= d.p) // an extra: the root hands its data to its host, the others get the result
        return d.rank == d.root ? edgeOp(-1, dblExtraPort(d), kBufIn, at, kBufOut, at, len, false, key)
                                : edgeOp(dblExtraPort(d), -1, kBufNone, 0, kBufOut, at, len, false, key);
    const int R = dblEffRoot(d), rel = d.rank ^ R;
    if (k > 0) return edgeOp(-1, send, d.rank == d.root ? kBufIn : kBufOut, at, kBufNone, 0, len, false, key);
    if (d.rank == d.root) return edgeOp(-1, send, kBufIn, at, kBufOut, at, len, false, key);
    // The first op of a chunk receives it (from the parent, or from an extra root) and passes it on.
    const int from = rel == 0 ? dblExtraPort(d) : d.port0 + dblLowBit(rel);
    return edgeOp(from, send, kBufNone, 0, kBufOut, at, len, false, key);
}

// ---- reduce ----
// The connections a rank folds in, in order (the extra first, then steps 0, 1, ...).
LOOM_HD int dblReduceSources(const DblRole &d, int *ports) {
    if (d.rank >= d.p) return 0;
    int m = 0;
    if (dblExtraOf(d) >= 0) ports[m++] = dblExtraPort(d);
    const int rel = d.rank ^ dblEffRoot(d);
    for (int s = 0; s < (rel == 0 ? d.steps : dblLowBit(rel)); ++s) ports[m++] = d.port0 + s;
    return m;
}

LOOM_HD size_t dblReduceCount(const DblRole &d) {
    const size_t nc = dblChunks(d.count, d.chunk);
    if (d.rank >= d.p) return nc * (d.rank == d.root ? 2 : 1);
    int ports[kDblMaxPorts];
    const int m = dblReduceSources(d, ports);
    return nc * (size_t)(m > 0 ? m : 1);
}

LOOM_HD EdgeOp dblReduceOp(const DblRole &d, size_t i) {
    size_t at, len;
    if (d.rank >= d.p) { // an extra: its input to its host; a root gets each chunk's result right after
        const bool root = d.rank == d.root, back = root && i % 2;
        const size_t j = root ? i / 2 : i;
        dblChunkOf(0, d.count, d.chunk, j, &at, &len);
        return back ? edgeOp(dblExtraPort(d), -1, kBufNone, 0, kBufOut, at, len, false, edgeKey(0, j))
                    : edgeOp(-1, dblExtraPort(d), kBufIn, at, kBufNone, 0, len, false, edgeKey(0, j));
    }
    int ports[kDblMaxPorts];
    const int m = dblReduceSources(d, ports), per = m > 0 ? m : 1;
    const size_t j = i / per;
    const int k = (int)(i % per);
    dblChunkOf(0, d.count, d.chunk, j, &at, &len);
    const int R = dblEffRoot(d), rel = d.rank ^ R;
    // Where the sum goes: the parent, the extra root, or the output (the root).
    const int sink = rel != 0 ? d.port0 + dblLowBit(rel) : d.root != d.rank ? dblExtraPort(d) : -1;
    const unsigned long long key = edgeKey(0, j);
    const int acc = d.rank == d.root ? kBufOut : kBufAcc; // partial sums between children
    if (m == 0) // a leaf sends its input (a lone root copies it)
        return sink >= 0 ? edgeOp(-1, sink, kBufIn, at, kBufNone, 0, len, false, key)
                         : edgeOp(-1, -1, kBufIn, at, kBufOut, at, len, false, key);
    const int to = k == m - 1 ? sink : -1; // the last child's step sends the sum on
    return edgeOp(ports[k], to, k == 0 ? kBufIn : acc, at, to >= 0 ? kBufNone : acc, at, len, true, key);
}

// ---- allgather (count: elements per block; output n blocks) ----
LOOM_HD size_t dblAllGatherCount(const DblRole &d) {
    const size_t blk = dblChunks(d.count, d.chunk), all = dblChunks(d.count * (size_t)d.n, d.chunk);
    if (d.rank >= d.p) return blk + all;
    return blk + (dblExtraOf(d) >= 0 ? blk + all : 0) + dblSwapTotal(d);
}

LOOM_HD EdgeOp dblAllGatherOp(const DblRole &d, size_t i) {
    const size_t blk = dblChunks(d.count, d.chunk);
    const size_t mine = (size_t)d.rank * d.count;
    size_t at, len;
    if (d.rank >= d.p) { // an extra: its block to its host (and its own output), then the whole result back
        if (i < blk) {
            dblChunkOf(0, d.count, d.chunk, i, &at, &len);
            return edgeOp(-1, dblExtraPort(d), kBufIn, at, kBufOut, mine + at, len, false, edgeKey(kDblIn, i));
        }
        dblChunkOf(0, d.count * (size_t)d.n, d.chunk, i - blk, &at, &len);
        return edgeOp(dblExtraPort(d), -1, kBufNone, 0, kBufOut, at, len, false, edgeKey(kDblOut, i - blk));
    }
    if (i < blk) { // my own block into place (nothing in place)
        dblChunkOf(0, d.count, d.chunk, i, &at, &len);
        return edgeOp(-1, -1, kBufIn, at, kBufOut, mine + at, len, false, edgeKey(0, i));
    }
    i -= blk;
    const int x = dblExtraOf(d);
    if (x >= 0) {
        if (i < blk) { // the extra's block
            dblChunkOf((size_t)x * d.count, d.count, d.chunk, i, &at, &len);
            return edgeOp(dblExtraPort(d), -1, kBufNone, 0, kBufOut, at, len, false, edgeKey(kDblIn, i));
        }
        i -= blk;
    }
    for (int s = 0; s < d.steps; ++s) {
        DblPayload mine, theirs;
        dblGroups(d, s, &mine, &theirs);
        if (i < mine.chunks + theirs.chunks) return dblSwapOp(d, s, mine, theirs, i, kBufOut, kBufNone, kBufOut, false);
        i -= mine.chunks + theirs.chunks;
    }
    dblChunkOf(0, d.count * (size_t)d.n, d.chunk, i, &at, &len); // the whole result to the extra
    return edgeOp(-1, dblExtraPort(d), kBufOut, at, kBufNone, 0, len, false, edgeKey(kDblOut, i));
}

// ---- reduce_scatter (count: elements per block; input n blocks) ----
LOOM_HD size_t dblReduceScatterCount(const DblRole &d) {
    const size_t blk = dblChunks(d.count, d.chunk), all = dblChunks(d.count * (size_t)d.n, d.chunk);
    if (d.rank >= d.p) return all + blk;
    return blk + (dblExtraOf(d) >= 0 ? all + blk : 0) + dblSwapTotal(d);
}

LOOM_HD EdgeOp dblReduceScatterOp(const DblRole &d, size_t i) {
    const size_t blk = dblChunks(d.count, d.chunk), all = dblChunks(d.count * (size_t)d.n, d.chunk);
    size_t at, len;
    if (d.rank >= d.p) { // an extra: its whole input to its host, its block back
        if (i < all) {
            dblChunkOf(0, d.count * (size_t)d.n, d.chunk, i, &at, &len);
            return edgeOp(-1, dblExtraPort(d), kBufIn, at, kBufNone, 0, len, false, edgeKey(kDblIn, i));
        }
        dblChunkOf(0, d.count, d.chunk, i - all, &at, &len);
        return edgeOp(dblExtraPort(d), -1, kBufNone, 0, kBufOut, at, len, false, edgeKey(kDblOut, i - all));
    }
    const int x = dblExtraOf(d);
    // The running sums: the input until the first fold, then the accumulator.
    int cur = kBufIn;
    if (x >= 0) {
        if (i < all) {
            dblChunkOf(0, d.count * (size_t)d.n, d.chunk, i, &at, &len);
            return edgeOp(dblExtraPort(d), -1, kBufIn, at, kBufAcc, at, len, true, edgeKey(kDblIn, i));
        }
        i -= all;
        cur = kBufAcc;
    }
    for (int s = d.steps - 1; s >= 0; --s) {
        DblPayload keep, give;
        dblGroups(d, s, &keep, &give);
        if (i < give.chunks + keep.chunks) return dblSwapOp(d, s, give, keep, i, cur, cur, kBufAcc, true);
        i -= give.chunks + keep.chunks;
        cur = kBufAcc;
    }
    if (i < blk) { // my block, reduced, to the output
        dblChunkOf(0, d.count, d.chunk, i, &at, &len);
        return edgeOp(-1, -1, cur, (size_t)d.rank * d.count + at, kBufOut, at, len, false, edgeKey(0, i));
    }
    i -= blk;
    dblChunkOf((size_t)x * d.count, d.count, d.chunk, i, &at, &len); // the extra's block
    return edgeOp(-1, dblExtraPort(d), cur, at, kBufNone, 0, len, false, edgeKey(kDblOut, i));
}

LOOM_HD size_t dblOpCount(const DblRole &d) {
    switch (d.coll) {
    case loomCollBroadcast: return dblBcastCount(d);
    case loomCollReduce: return dblReduceCount(d);
    case loomCollAllGather: return dblAllGatherCount(d);
    default: return dblReduceScatterCount(d);
    }
}

LOOM_HD EdgeOp dblOp(const DblRole &d, size_t i) {
    switch (d.coll) {
    case loomCollBroadcast: return dblBcastOp(d, i);
    case loomCollReduce: return dblReduceOp(d, i);
    case loomCollAllGather: return dblAllGatherOp(d, i);
    default: return dblReduceScatterOp(d, i);
    }
}

// Accumulator elements a call needs (reduce: the message; reduce_scatter: the input).
LOOM_HD size_t dblAccElems(const DblRole &d) {
    return d.coll == loomCollReduce ? d.count : d.coll == loomCollReduceScatter ? d.count * (size_t)d.n : 0;
}

} // namespace loom

#endif
