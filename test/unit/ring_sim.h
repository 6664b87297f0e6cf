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
};

// "" when every rank's output is right, else what went wrong first.
inline std::string simulate(const Case &k, StepFn stepFn = ringCollStep) {
    const int n = k.nranks;
    std::vector<int> order = k.order;
    if (order.empty())
        for (int p = 0; p < n; ++p) order.push_back(p);
    std::vector<int> posOf(n);
    for (int p = 0; p < n; ++p) posOf[order[p]] = p;
    const int rootPos = posOf[k.root];
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
        const int p = posOf[q];
        r.in.resize(k.coll == kRingReduceScatter ? whole : k.coll == kRingAllGather ? ringBlockCount(blocks, q) : k.count);
        for (size_t i = 0; i < r.in.size(); ++i) r.in[i] = input(q, i);
        r.out.assign(k.coll == kRingAllGather ? whole : k.coll == kRingReduceScatter ? ringBlockCount(blocks, q) : k.count,
                     kUntouched);
        r.lanes = k.nchannels;
        for (int ch = 0; ch < k.nchannels; ++ch) r.sendTo[ch] = {order[(p + 1) % n], ch};
        r.count = [&](int ch) -> size_t { return n == 1 ? 1 : geom[ch].rounds * (size_t)nsteps; };
        r.op = [&, p](int ch, size_t i) {
            const RingGeom &g = geom[ch];
            if (n == 1) { // the kernel copies its range of the input (an allgather's to its displacement)
                size_t b = g.begin, e = g.begin + g.n;
                const size_t to = k.coll == kRingAllGather ? ringBlockDispl(walked, 0) : 0;
                if (perBlock) channelRange(ringBlockCount(walked, 0), k.nchannels, ch, k.align * 4, &b, &e);
                return edgeOp(-1, -1, kBufIn, b, kBufOut, to + b, e - b, false, 0);
            }
            const size_t round = i / nsteps;
            const RingStep st = stepFn(k.coll, p, rootPos, n, (int)(i % nsteps));
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
    for (int ch = 0; ch < k.nchannels && n > 1; ++ch)
        for (int p = 0; p < n; ++p) {
            unsigned long long s, r;
            ringCallSteps(k.coll, p, rootPos, n, geom[ch], &s, &r);
            if (s != run.sent[order[p]][ch] || r != run.recvd[order[p]][ch])
                return "the host's step count differs from the walk";
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
