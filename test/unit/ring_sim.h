// The ring simulator: any collective of src/device/ring_schedule.h executed
// over host buffers exactly as the kernel and the host walk it (ringGeom,
// ringCollStep, ringStepOffsets, ringCallSteps), equal or ragged blocks,
// with bounded FIFOs between ring neighbours and every position advancing on
// its own whenever its step can run (data there to receive, room to send).
// A stall with steps left is a deadlock. Each slot carries the round, block
// and length its sender meant, so a receiver expecting another step fails.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "device/ring_schedule.h"

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

inline int64_t input(int rank, size_t i) { return (int64_t)(rank + 1) * 1000003 + (int64_t)(i * 7 % 1009); }

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
    auto inSize = [&](int r) {
        return k.coll == kRingReduceScatter ? whole : k.coll == kRingAllGather ? ringBlockCount(blocks, r) : k.count;
    };
    auto outSize = [&](int r) {
        return k.coll == kRingAllGather ? whole : k.coll == kRingReduceScatter ? ringBlockCount(blocks, r) : k.count;
    };
    std::vector<std::vector<int64_t>> in(n), out(n);
    for (int r = 0; r < n; ++r) {
        in[r].resize(inSize(r));
        for (size_t i = 0; i < in[r].size(); ++i) in[r][i] = input(r, i);
        out[r].assign(outSize(r), -1);
    }
    struct Slot { size_t round; int chunk; size_t len; std::vector<int64_t> data; };
    for (int ch = 0; ch < k.nchannels; ++ch) {
        const RingGeom g = ringGeom(k.coll, walked, n, k.nchannels, ch, k.slotElems, k.align);
        if (n == 1) { // the kernel copies its range of the input (an allgather's to its displacement)
            size_t b = g.begin, e = g.begin + g.n;
            const size_t to = k.coll == kRingAllGather ? ringBlockDispl(blocks, 0) : 0;
            if (k.coll == kRingAllGather || k.coll == kRingReduceScatter)
                channelRange(ringBlockCount(blocks, 0), k.nchannels, ch, k.align * 4, &b, &e);
            for (size_t i = b; i < e; ++i) out[0][to + i] = in[0][i];
            continue;
        }
        const int nsteps = ringStepsPerRound(k.coll, n);
        std::vector<std::deque<Slot>> fifo(n); // fifo[p]: slots sent to position p
        std::vector<size_t> round(n, 0);
        std::vector<int> step(n, 0);
        std::vector<unsigned long long> sent(n, 0), recvd(n, 0);
        for (bool moved = true; moved;) {
            moved = false;
            for (int p = 0; p < n; ++p) {
                if (round[p] >= g.rounds) continue;
                const RingStep st = stepFn(k.coll, p, rootPos, n, step[p]);
                std::deque<Slot> &from = fifo[p], &to = fifo[(p + 1) % n];
                if ((st.recv && from.empty()) || (st.send && (int)to.size() >= k.depth)) continue;
                size_t inAt, outAt, len;
                const bool perBlock = k.coll == kRingReduceScatter || k.coll == kRingAllGather;
                ringStepOffsets(k.coll, g, walked, n, k.nchannels, ch, k.align, round[p], st.chunk,
                                perBlock ? order[st.chunk] : 0, &inAt, &outAt, &len);
                if (len > k.slotElems) return "a step moves more than a slot";
                const int owner = order[p];
                if ((len && (st.recv ? false : inAt + len > in[owner].size())) ||
                    (len && st.reduce && inAt + len > in[owner].size()) ||
                    (len && st.toOutput && outAt + len > out[owner].size()))
                    return "a step reaches outside the buffers";
                const int q = order[p];
                std::vector<int64_t> v(len);
                if (st.recv) {
                    Slot got = from.front();
                    from.pop_front();
                    ++recvd[p];
                    if (got.round != round[p] || got.chunk != st.chunk || got.len != len)
                        return "position " + std::to_string(p) + " received another step than it expected";
                    v = got.data;
                } else {
                    for (size_t i = 0; i < len; ++i) v[i] = in[q][inAt + i];
                }
                if (st.reduce)
                    for (size_t i = 0; i < len; ++i) v[i] += in[q][inAt + i];
                if (st.toOutput)
                    for (size_t i = 0; i < len; ++i) out[q][outAt + i] = v[i];
                if (st.send) {
                    to.push_back(Slot{round[p], st.chunk, len, v});
                    ++sent[p];
                }
                if (++step[p] == nsteps) step[p] = 0, ++round[p];
                moved = true;
            }
        }
        for (int p = 0; p < n; ++p) {
            if (round[p] < g.rounds) return "deadlock at position " + std::to_string(p);
            if (!fifo[p].empty()) return "position " + std::to_string(p) + " left slots unreceived";
            unsigned long long s, r;
            ringCallSteps(k.coll, p, rootPos, n, g, &s, &r);
            if (s != sent[p] || r != recvd[p]) return "the host's step count differs from the walk";
        }
    }
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < out[q].size(); ++i) {
            int64_t want = -1; // untouched
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
            if (out[q][i] != want)
                return "rank " + std::to_string(q) + " element " + std::to_string(i) + " wrong";
        }
    return "";
}

} // namespace sim
} // namespace loom
