/*
 * Ring schedules of every collective loom runs on a ring: which block a rank
 * sends, reduces or copies at each step, and which elements a step covers.
 * Compiled for host and device: the kernel walks it, the host advances the
 * connections' step counters (and tells the proxy) from it, and the CPU
 * simulator (test/unit/ring_sim.h) executes it over host buffers for 1..64
 * ranks, so schedule bugs are caught before a GPU runs.
 *
 * Positions are ring positions (pos 0..n-1 along the ring), not ranks. A
 * channel's range is walked in rounds; every round runs ringStepsPerRound
 * steps and one step moves at most one FIFO slot each way.
 *
 *   allreduce       round = n chunks of the range; reduce-scatter, then
 *                   allgather: 2(n-1) sends and receives per rank.
 *   reduce_scatter  input = n blocks (block q: rank q's result; equal or
 *                   ragged, RingBlocks); a round takes one chunk of every
 *                   block: n-1 each way.
 *   allgather       output = n blocks (equal, or ragged at any displacements);
 *                   the mirror image: n-1 each way.
 *   broadcast       a chain along the ring from the root: one chunk a round;
 *                   the root only sends, the last rank of the chain only receives.
 *   reduce          a chain along the ring ending at the root: the rank after
 *                   the root only sends, the root only receives.
 * Invariant (checked by the simulator): over a round, what position p sends
 * is what position p+1 receives, in the same order, and no position sends
 * more than one step ahead of what it received, so FIFOs of depth >= 2
 * (LOOM_NSLOTS's least) carry it without deadlock.
 */
#ifndef LOOM_RING_SCHEDULE_H
#define LOOM_RING_SCHEDULE_H

#include <stddef.h>

#include "device/edges/edge_op.h"
#include "base/coll.h" // loomColl: the collective of a call
#include "device/host_device.h"

namespace loom {


struct RingStep {
    int chunk;     // allreduce: chunk of the round; reduce_scatter/allgather: ring position whose block moves
    bool recv;     // take the chunk from the previous rank's slot
    bool reduce;   // combine it with this rank's input
    bool send;     // pass the result to the next rank
    bool toOutput; // write the result to the output buffer
};

LOOM_HD int ringMod(int a, int n) { return ((a % n) + n) % n; }

LOOM_HD RingStep ringStepOf(int chunk, bool recv, bool reduce, bool send, bool toOutput) {
    RingStep st;
    st.chunk = chunk; st.recv = recv; st.reduce = reduce; st.send = send; st.toOutput = toOutput;
    return st;
}

// Steps of one round (nranks >= 2).
LOOM_HD int ringStepsPerRound(int coll, int nranks) {
    switch (coll) {
    case loomCollAllReduce: return 2 * nranks - 1;
    case loomCollReduceScatter: case loomCollAllGather: return nranks;
    default: return 1;
    }
}

// Step s of a round, for the rank at ring position pos; rootPos: the root's
// position (broadcast, reduce).
LOOM_HD RingStep ringCollStep(int coll, int pos, int rootPos, int nranks, int s) {
    const int n = nranks;
    switch (coll) {
    case loomCollAllReduce:
        if (s == 0) return ringStepOf(ringMod(pos - 1, n), false, false, true, false); // own input of chunk pos-1
        if (s < n) // reduce-scatter; s == n-1 completes chunk pos
            return ringStepOf(ringMod(pos - 1 - s, n), true, true, true, s == n - 1);
        return ringStepOf(ringMod(pos - (s - n + 1), n), true, false, s < 2 * n - 2, true); // allgather
    case loomCollReduceScatter: // block pos-1-s; the last step completes my own block (pos)
        return ringStepOf(ringMod(pos - 1 - s, n), s > 0, s > 0, s < n - 1, s == n - 1);
    case loomCollAllGather: // my block first, then the block of position pos-s
        return ringStepOf(ringMod(pos - s, n), s > 0, false, s < n - 1, true);
    case loomCollBroadcast: {
        const int rel = ringMod(pos - rootPos, n); // 0: the root
        return ringStepOf(0, rel > 0, false, rel < n - 1, true);
    }
    default: { // loomCollReduce
        const int rel = ringMod(pos - rootPos - 1, n); // n-1: the root
        return ringStepOf(0, rel > 0, rel > 0, rel < n - 1, rel == n - 1);
    }
    }
}

// Elements [begin, end) of channel ch when count elements are split over
// nchannels (each range a multiple of `align` elements, except the last).
LOOM_HD void channelRange(size_t count, int nchannels, int ch, size_t align, size_t *begin, size_t *end) {
    size_t per = (count + nchannels - 1) / nchannels;
    per = (per + align - 1) / align * align;
    size_t b = per * (size_t)ch, e = b + per;
    *begin = b < count ? b : count;
    *end = e < count ? e : count;
}

// Allreduce's chunk for a channel range of n elements: a full slot for large
// ranges, otherwise 1/nranks of the range (rounded up to `align`) so that
// every rank owns a share and the ring works in parallel even in one round.
LOOM_HD size_t ringChunkElems(size_t n, int nranks, size_t slotElems, size_t align) {
    size_t share = (n + nranks - 1) / nranks;
    share = (share + align - 1) / align * align;
    if (share == 0) share = align;
    return share < slotElems ? share : slotElems;
}

// The blocks of reduce_scatter and allgather: rank q's block has counts[q]
// elements at displs[q] of the buffer that holds every block (reduce_scatter:
// the input; allgather: the output). counts == nullptr: every block has
// `count` elements, at q * count. The tables are in the memory of whoever
// walks the schedule (device for the kernel, host for the host).
struct RingBlocks {
    const size_t *counts;
    const size_t *displs;
    size_t count;
};

LOOM_HD size_t ringBlockCount(const RingBlocks &b, int q) { return b.counts ? b.counts[q] : b.count; }
LOOM_HD size_t ringBlockDispl(const RingBlocks &b, int q) { return b.counts ? b.displs[q] : (size_t)q * b.count; }

// One channel's part of a call.
//   allreduce, broadcast, reduce: [begin, begin + n) of the call's elements.
//   reduce_scatter, allgather: every block is split over the channels alone
//   (ringBlockRange); n is the largest share of a block on this channel.
// Every step moves at most chunkElems (a slot) each way.
struct RingGeom {
    size_t begin;
    size_t n;
    size_t chunkElems; // allreduce, broadcast, reduce: elements of one step
    size_t rounds;
};

LOOM_HD size_t alignUp(size_t x, size_t align) { return (x + align - 1) / align * align; }

LOOM_HD RingGeom ringGeom(int coll, const RingBlocks &blocks, int nranks, int nchannels, int ch, size_t slotElems,
                          size_t align) {
    RingGeom g;
    size_t end, perRound;
    if (coll == loomCollReduceScatter || coll == loomCollAllGather) {
        g.begin = 0;
        g.n = 0;
        for (int q = 0; q < nranks; ++q) {
            size_t b, e;
            channelRange(ringBlockCount(blocks, q), nchannels, ch, align * 4, &b, &e);
            if (e - b > g.n) g.n = e - b;
        }
        g.chunkElems = slotElems;
        perRound = slotElems;
    } else {
        channelRange(blocks.count, nchannels, ch, align * 4, &g.begin, &end);
        g.n = end - g.begin;
        if (coll == loomCollAllReduce) {
            g.chunkElems = ringChunkElems(g.n, nranks, slotElems, align);
            perRound = (size_t)nranks * g.chunkElems;
        } else {
            size_t c = alignUp(g.n, align);
            if (c == 0) c = align;
            g.chunkElems = c < slotElems ? c : slotElems;
            perRound = g.chunkElems;
        }
    }
    g.rounds = nranks > 1 ? (g.n + perRound - 1) / perRound : 0;
    return g;
}

// Elements [off, off + len) of step `st` in round `round`, relative to the
// channel's range (allreduce, broadcast, reduce); len may be 0.
LOOM_HD void ringStepRange(int coll, const RingGeom &g, int nranks, size_t round, int chunk, size_t *off,
                           size_t *len) {
    size_t o = coll == loomCollAllReduce ? (round * (size_t)nranks + (size_t)chunk) * g.chunkElems
                                      : round * g.chunkElems;
    *off = o;
    *len = o >= g.n ? 0 : (g.n - o < g.chunkElems ? g.n - o : g.chunkElems);
}

// reduce_scatter, allgather: the elements of rank q's block that round
// `round` moves on channel ch, [at, at + len) from the block's start. The
// block's share of the channel is cut into g.rounds equal aligned chunks (at
// most a slot each, since no share exceeds g.n), so ragged blocks advance
// together and every round moves one step of every block; len may be 0.
LOOM_HD void ringBlockRange(const RingBlocks &blocks, int q, const RingGeom &g, int nchannels, int ch, size_t align,
                            size_t round, size_t *at, size_t *len) {
    size_t b, e;
    channelRange(ringBlockCount(blocks, q), nchannels, ch, align * 4, &b, &e);
    const size_t n = e - b, chunk = alignUp((n + g.rounds - 1) / g.rounds, align), o = round * chunk;
    *at = b + (o < n ? o : n);
    *len = o >= n ? 0 : (n - o < chunk ? n - o : chunk);
}

// Where a step's data is, in elements: inAt in the input, outAt in the
// output, len elements. A reduce_scatter reads every rank's block of its
// input and writes its own block alone; an allgather reads its own block and
// writes every rank's block of its output. `rankOfBlock`: the rank whose
// block the step moves (reduce_scatter, allgather).
LOOM_HD void ringStepOffsets(int coll, const RingGeom &g, const RingBlocks &blocks, int nranks, int nchannels, int ch,
                             size_t align, size_t round, int chunk, int rankOfBlock, size_t *inAt, size_t *outAt,
                             size_t *len) {
    if (coll == loomCollReduceScatter || coll == loomCollAllGather) {
        size_t at;
        ringBlockRange(blocks, rankOfBlock, g, nchannels, ch, align, round, &at, len);
        const size_t whole = ringBlockDispl(blocks, rankOfBlock) + at;
        *inAt = coll == loomCollReduceScatter ? whole : at;
        *outAt = coll == loomCollReduceScatter ? at : whole;
        return;
    }
    size_t off;
    ringStepRange(coll, g, nranks, round, chunk, &off, len);
    *inAt = *outAt = g.begin + off;
}

// A ring step as the one op form (edge_op.h): connection 0 is the channel
// (receive from the previous position, send to the next); the step reads the
// input at inAt and writes the output at outAt. Its key is (round, chunk).
LOOM_HD EdgeOp ringEdgeOp(const RingStep &st, size_t round, size_t inAt, size_t outAt, size_t len) {
    return edgeOp(st.recv ? 0 : -1, st.send ? 0 : -1, kBufIn, inAt, st.toOutput ? kBufOut : kBufNone, outAt, len,
                  st.reduce, edgeKey((unsigned)st.chunk, round));
}

// Slots the rank at pos sends and receives in one round (the same on every channel).
LOOM_HD void ringRoundSteps(int coll, int pos, int rootPos, int nranks, unsigned long long *sends,
                            unsigned long long *recvs) {
    unsigned long long s1 = 0, r1 = 0;
    for (int s = 0; nranks > 1 && s < ringStepsPerRound(coll, nranks); ++s) {
        RingStep st = ringCollStep(coll, pos, rootPos, nranks, s);
        s1 += st.send;
        r1 += st.recv;
    }
    *sends = s1;
    *recvs = r1;
}

// Slots the rank at pos sends and receives on one channel over a whole call.
LOOM_HD void ringCallSteps(int coll, int pos, int rootPos, int nranks, const RingGeom &g, unsigned long long *sends,
                           unsigned long long *recvs) {
    ringRoundSteps(coll, pos, rootPos, nranks, sends, recvs);
    *sends *= g.rounds;
    *recvs *= g.rounds;
}

} // namespace loom

#endif
