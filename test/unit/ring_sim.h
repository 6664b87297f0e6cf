// Ring schedules on the one simulator (sched_sim.h): any collective of
// src/device/ring_schedule.h, equal or ragged blocks, walked exactly as the
// kernel and the host walk it (ringGeom, ringCollStep, ringStepOffsets,
// ringEdgeOp, ringCallSteps): one lane and one port per channel, the port's
// send side landing in the next position's. Checks every rank's output
// against the collective's definition and the host's step counts against
// the walk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "device/ring_schedule.h"
#include "sched_sim.h"

namespace loom {
namespace sim {

using StepFn = RingStep (*)(int coll, int pos, int rootPos, int nranks, int s);

struct Case {
    int coll;
    int nranks;
    int nchannels;
    size_t count;      // per block for reduce_scatter / allgather
    size_t slotElems;
    size_t align;      // elements of 16 bytes
    int depth;         // FIFO slots
    int root;          // a rank
    std::vector<int> order; // rank at each ring position (empty: identity)
    std::vector<size_t> counts, displs; // ragged blocks (reduce_scatter, allgather); empty: equal
    std::vector<size_t> walkCounts;     // mutations: the counts the walk uses instead (the reference keeps counts)
    // Several rings (core/ring_link.h): channel ch runs on rings[ch % size],
    // each an order of the ranks; empty: every channel on `order`.
    std::vector<std::vector<int>> rings = {};
    bool walkFirstRing = false; // mutation: every channel's walk takes its positions from the first ring
};

// "" when every rank's output is right, else what went wrong first.
inline std::string simulate(const Case &k, StepFn stepFn = ringCollStep) {
    const int n = k.nranks;
    std::vector<std::vector<int>> rings = k.rings;
    if (rings.empty()) rings.push_back(k.order);
    for (std::vector<int> &order : rings)
        if (order.empty())
            for (int p = 0; p < n; ++p) order.push_back(p);
    std::vector<std::vector<int>> posOfRing(rings.size(), std::vector<int>(n));
    for (size_t r = 0; r < rings.size(); ++r)
        for (int p = 0; p < n; ++p) posOfRing[r][rings[r][p]] = p;
    // Channel ch's ring: its connections; walked: where its schedule takes positions.
    auto ringOf = [&](int ch) { return (size_t)ch % rings.size(); };
    auto walkedRing = [&](int ch) { return k.walkFirstRing ? 0 : ringOf(ch); };
    const bool ragged = !k.counts.empty();
    const RingBlocks blocks = ragged ? RingBlocks{k.counts.data(), k.displs.data(), 0} : RingBlocks{nullptr, nullptr, k.count};
    const RingBlocks walked = k.walkCounts.empty() ? blocks : RingBlocks{k.walkCounts.data(), k.displs.data(), 0};
    // Buffer sizes: reduce_scatter's input and allgather's output hold every block.
    size_t whole = 0;
    for (int q = 0; q < n; ++q) whole = std::max(whole, ringBlockDispl(blocks, q) + ringBlockCount(blocks, q));
    const bool perBlock = k.coll == kRingReduceScatter || k.coll == kRingAllGather;
    const int nsteps = n > 1 ? ringStepsPerRound(k.coll, n) : 1;
    std::vector<RingGeom> geom;
    for (int ch = 0; ch < k.nchannels; ++ch)
        geom.push_back(ringGeom(k.coll, walked, n, k.nchannels, ch, k.slotElems, k.align));
    std::vector<Rank> ranks(n);
    for (int q = 0; q < n; ++q) {
        Rank &r = ranks[q];
        r.in.resize(k.coll == kRingReduceScatter ? whole : k.coll == kRingAllGather ? ringBlockCount(blocks, q) : k.count);
        for (size_t i = 0; i < r.in.size(); ++i) r.in[i] = input(q, i);
        r.out.assign(k.coll == kRingAllGather ? whole : k.coll == kRingReduceScatter ? ringBlockCount(blocks, q) : k.count,
                     kUntouched);
        r.lanes = k.nchannels;
        for (int ch = 0; ch < k.nchannels; ++ch) {
            const std::vector<int> &order = rings[ringOf(ch)];
            r.sendTo[ch] = {order[(posOfRing[ringOf(ch)][q] + 1) % n], ch};
        }
        r.count = [&](int ch) -> size_t { return n == 1 ? 1 : geom[ch].rounds * (size_t)nsteps; };
        r.op = [&, q](int ch, size_t i) {
            const RingGeom &g = geom[ch];
            if (n == 1) { // the kernel copies its range of the input (an allgather's to its displacement)
                size_t b = g.begin, e = g.begin + g.n;
                const size_t to = k.coll == kRingAllGather ? ringBlockDispl(walked, 0) : 0;
                if (perBlock) channelRange(ringBlockCount(walked, 0), k.nchannels, ch, k.align * 4, &b, &e);
                return edgeOp(-1, -1, kBufIn, b, kBufOut, to + b, e - b, false, 0);
            }
            // As the kernel: this channel's position and the root's on its ring.
            const std::vector<int> &order = rings[walkedRing(ch)];
            const std::vector<int> &posOf = posOfRing[walkedRing(ch)];
            const size_t round = i / nsteps;
            const RingStep st = stepFn(k.coll, posOf[q], posOf[k.root], n, (int)(i % nsteps));
            size_t inAt, outAt, len;
            ringStepOffsets(k.coll, g, walked, n, k.nchannels, ch, k.align, round, st.chunk,
                            perBlock ? order[st.chunk] : 0, &inAt, &outAt, &len);
            EdgeOp o = ringEdgeOp(st, round, inAt, outAt, len);
            if (o.recv >= 0) o.recv = ch;
            if (o.send >= 0) o.send = ch;
            return o;
        };
    }
    Run run = execute(ranks, k.depth, k.slotElems, sum);
    if (!run.error.empty()) return run.error;
    for (int ch = 0; ch < k.nchannels && n > 1; ++ch) // the host's count (enqueue_ring.cc), per channel's ring
        for (int q = 0; q < n; ++q) {
            unsigned long long s, r;
            ringCallSteps(k.coll, posOfRing[ringOf(ch)][q], posOfRing[ringOf(ch)][k.root], n, geom[ch], &s, &r);
            if (s != run.sent[q][ch] || r != run.recvd[q][ch]) return "the host's step count differs from the walk";
        }
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < ranks[q].out.size(); ++i) {
            Value want = kUntouched;
            switch (k.coll) {
            case kRingAllReduce: case kRingReduce:
                if (k.coll == kRingReduce && q != k.root) break;
                want = 0;
                for (int r = 0; r < n; ++r) want += input(r, i);
                break;
            case kRingReduceScatter:
                want = 0;
                for (int r = 0; r < n; ++r) want += input(r, ringBlockDispl(blocks, q) + i);
                break;
            case kRingAllGather:
                for (int b = 0; b < n; ++b) // the block holding element i, if any
                    if (i >= ringBlockDispl(blocks, b) && i < ringBlockDispl(blocks, b) + ringBlockCount(blocks, b))
                        want = input(b, i - ringBlockDispl(blocks, b));
                break;
            default: want = input(k.root, i); break;
            }
            if (ranks[q].out[i] != want) return "rank " + std::to_string(q) + " element " + std::to_string(i) + " wrong";
        }
    return "";
}

} // namespace sim
} // namespace loom
