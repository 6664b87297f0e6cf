// Ring schedules on the one simulator (sched_sim.h): any collective of
// src/device/ring/ring_schedule.h, equal or ragged blocks, walked exactly as the
// kernel and the host walk it (ringGeom, ringCollStep, ringStepOffsets,
// ringEdgeOp, ringCallSteps): one lane and one port per channel, the port's
// send side landing in the next position's. Checks every rank's output
// against the collective's definition and the host's step counts against
// the walk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "device/conn.h"
#include "device/ring/ring_schedule.h"
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
    // Several rings (core/connect/ring_link.h): channel ch runs on rings[ch % size],
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
    const bool perBlock = k.coll == loomCollReduceScatter || k.coll == loomCollAllGather;
    const int nsteps = n > 1 ? ringStepsPerRound(k.coll, n) : 1;
    std::vector<RingGeom> geom;
    for (int ch = 0; ch < k.nchannels; ++ch)
        geom.push_back(ringGeom(k.coll, walked, n, k.nchannels, ch, k.slotElems, k.align));
    std::vector<Rank> ranks(n);
    for (int q = 0; q < n; ++q) {
        Rank &r = ranks[q];
        r.in.resize(k.coll == loomCollReduceScatter ? whole : k.coll == loomCollAllGather ? ringBlockCount(blocks, q) : k.count);
        for (size_t i = 0; i < r.in.size(); ++i) r.in[i] = input(q, i);
        r.out.assign(k.coll == loomCollAllGather ? whole : k.coll == loomCollReduceScatter ? ringBlockCount(blocks, q) : k.count,
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
                const size_t to = k.coll == loomCollAllGather ? ringBlockDispl(walked, 0) : 0;
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
    for (int ch = 0; ch < k.nchannels && n > 1; ++ch) // the host's count (core/algo/ring/ring.cc), per channel's ring
        for (int q = 0; q < n; ++q) {
            unsigned long long s, r;
            ringCallSteps(k.coll, posOfRing[ringOf(ch)][q], posOfRing[ringOf(ch)][k.root], n, geom[ch], &s, &r);
            if (s != run.sent[q][ch] || r != run.recvd[q][ch]) return "the host's step count differs from the walk";
        }
    // The reference, computed once: sums (or the gathered blocks) over the
    // whole span, each rank's output a window of it.
    std::vector<Value> ref;
    switch (k.coll) {
    case loomCollAllReduce: case loomCollReduce: case loomCollReduceScatter:
        ref.assign(k.coll == loomCollReduceScatter ? whole : k.count, 0);
        for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < ref.size(); ++i) ref[i] += input(r, i);
        break;
    case loomCollAllGather: // later blocks win where blocks overlap
        ref.assign(whole, kUntouched);
        for (int b = 0; b < n; ++b)
            for (size_t i = 0; i < ringBlockCount(blocks, b); ++i) ref[ringBlockDispl(blocks, b) + i] = input(b, i);
        break;
    default:
        for (size_t i = 0; i < k.count; ++i) ref.push_back(input(k.root, i));
        break;
    }
    for (int q = 0; q < n; ++q) {
        const bool none = k.coll == loomCollReduce && q != k.root;
        const size_t from = k.coll == loomCollReduceScatter ? ringBlockDispl(blocks, q) : 0;
        for (size_t i = 0; i < ranks[q].out.size(); ++i) {
            const Value want = none ? kUntouched : ref[from + i];
            if (ranks[q].out[i] != want) return "rank " + std::to_string(q) + " element " + std::to_string(i) + " wrong";
        }
    }
    return "";
}

// The ring allreduce's flow control over consecutive calls, step counter by
// step counter, as Prims (prims.h) runs it on the LL protocol
// (prims_ll.h): each rank's kernel starts every channel from the counters
// the host committed (ringCallSteps per call, as core/algo/ring/ring.cc adds them
// up); a send waits for credit (`credit`: sendCredit, the kernels' test),
// then writes its lines tagged step + 1 into slot step % depth; a receive
// polls the lines tagged with its own step + 1 and returns credit (head =
// step + 1) once read. An empty step (len 0, a ragged tail's chunk) has no
// lines: on LL its receive waits for nothing (ll = false: Simple, which
// waits for the sender's tail even then). One op of a CTA (rank, channel)
// runs at a time, the CTA drawn at random from those that can move (seed),
// so ranks run ahead of each other as GPUs do; a rank's next call starts
// once all its CTAs finished this one. "" when every call ends with every
// rank's output right and the kernel's counters where the host put them.
struct RingSimCall {
    size_t count;
    int nchannels;
};

using CreditFn = bool (*)(uint64_t sendStep, uint64_t head, int nslots);

inline std::string simulateRingCalls(int n, const std::vector<RingSimCall> &calls, size_t slotElems, size_t align,
                                     int depth, unsigned seed, bool ll = true, CreditFn credit = sendCredit) {
    const int coll = loomCollAllReduce, nsteps = ringStepsPerRound(coll, n);
    struct Slot {
        bool full = false;
        uint64_t step = 0;
        std::vector<Value> data;
    };
    struct Fifo { // the receive FIFO of (rank, channel), written by the previous rank
        uint64_t head = 0; // steps the receiver consumed: the sender's credit
        std::vector<Slot> slots;
    };
    struct Lane {
        size_t next = 0, count = 0;
        uint64_t send = 0, recv = 0; // the kernel's counters
    };
    struct RankState {
        size_t call = 0;
        std::vector<Lane> lanes;
        ConnSteps host[kMaxChannels] = {}; // the host's commits so far
        std::vector<Value> in, out;
    };
    std::vector<RankState> ranks(n);
    std::vector<Fifo> fifo((size_t)n * kMaxChannels);
    for (Fifo &f : fifo) f.slots.resize(depth);
    auto geomOf = [&](const RingSimCall &c, int ch) {
        return ringGeom(coll, RingBlocks{nullptr, nullptr, c.count}, n, c.nchannels, ch, slotElems, align);
    };
    // A rank enqueues a call: launch (the kernel starts from the commits so far), then commit.
    auto enqueue = [&](int q) {
        RankState &r = ranks[q];
        const RingSimCall &c = calls[r.call];
        r.in.resize(c.count);
        for (size_t i = 0; i < c.count; ++i) r.in[i] = input(q, i);
        r.out.assign(c.count, kUntouched);
        r.lanes.assign(c.nchannels, Lane{});
        for (int ch = 0; ch < c.nchannels; ++ch) {
            const RingGeom g = geomOf(c, ch);
            r.lanes[ch] = Lane{0, g.rounds * (size_t)nsteps, r.host[ch].send, r.host[ch].recv};
            unsigned long long s, rv;
            ringCallSteps(coll, q, 0, n, g, &s, &rv);
            r.host[ch].send += s;
            r.host[ch].recv += rv;
        }
    };
    for (int q = 0; q < n && !calls.empty(); ++q) enqueue(q);
    std::mt19937 rng(seed);
    for (;;) {
        // The CTAs that can move (a CTA waiting for data or credit cannot).
        std::vector<std::pair<int, int>> ready;
        for (int q = 0; q < n; ++q) {
            const RankState &r = ranks[q];
            if (r.call >= calls.size()) continue;
            const RingSimCall &c = calls[r.call];
            for (int ch = 0; ch < c.nchannels; ++ch) {
                const Lane &ln = r.lanes[ch];
                if (ln.next >= ln.count) continue;
                const RingGeom g = geomOf(c, ch);
                const RingStep st = ringCollStep(coll, q, 0, n, (int)(ln.next % nsteps));
                size_t off, len;
                ringStepRange(coll, g, n, ln.next / nsteps, st.chunk, &off, &len);
                const Fifo &mine = fifo[(size_t)q * kMaxChannels + ch];
                const Fifo &next = fifo[(size_t)((q + 1) % n) * kMaxChannels + ch];
                const Slot &in = mine.slots[ln.recv % depth];
                const bool dataThere = !st.recv || (ll && len == 0) || (in.full && in.step == ln.recv);
                if (dataThere && (!st.send || credit(ln.send, next.head, depth))) ready.push_back({q, ch});
            }
        }
        if (ready.empty()) break;
        const auto pick = ready[rng() % ready.size()];
        const int q = pick.first, ch = pick.second;
        RankState &r = ranks[q];
        const RingSimCall &c = calls[r.call];
        Lane &ln = r.lanes[ch];
        const RingGeom g = geomOf(c, ch);
        const RingStep st = ringCollStep(coll, q, 0, n, (int)(ln.next % nsteps));
        size_t off, len;
        ringStepRange(coll, g, n, ln.next / nsteps, st.chunk, &off, &len);
        const size_t at = g.begin + off;
        std::vector<Value> v(r.in.begin() + at, r.in.begin() + at + len);
        if (st.recv) {
            Fifo &mine = fifo[(size_t)q * kMaxChannels + ch];
            Slot &s = mine.slots[ln.recv % depth];
            if (s.full && s.step == ln.recv) {
                if (s.data.size() != len)
                    return "call " + std::to_string(r.call) + " rank " + std::to_string(q) + " channel " +
                           std::to_string(ch) + ": received a step of another length";
                for (size_t e = 0; e < len; ++e) v[e] = st.reduce ? s.data[e] + v[e] : s.data[e];
                s.full = false;
            } else if (!(ll && len == 0)) {
                return "internal: a receive ran without its data";
            }
            mine.head = ++ln.recv;
        }
        if (st.toOutput) std::copy(v.begin(), v.end(), r.out.begin() + at);
        if (st.send) {
            Fifo &next = fifo[(size_t)((q + 1) % n) * kMaxChannels + ch];
            Slot &s = next.slots[ln.send % depth];
            if (len || !ll) { // LL: an empty step writes no lines; Simple still bumps the tail
                if (s.full)
                    return "call " + std::to_string(r.call) + " rank " + std::to_string(q) + " channel " +
                           std::to_string(ch) + ": overwrote lines not yet read";
                s.full = true;
                s.step = ln.send;
                s.data = v;
            }
            ++ln.send;
        }
        ++ln.next;
        bool done = true;
        for (const Lane &l : r.lanes) done = done && l.next >= l.count;
        if (!done) continue;
        // The call is over on this rank: counters where the host committed them, output right.
        for (int k = 0; k < c.nchannels; ++k)
            if (r.lanes[k].send != r.host[k].send || r.lanes[k].recv != r.host[k].recv)
                return "call " + std::to_string(r.call) + " rank " + std::to_string(q) + " channel " +
                       std::to_string(k) + ": the kernel's step counters end off the host's commit";
        for (size_t i = 0; i < c.count; ++i) {
            Value want = 0;
            for (int p = 0; p < n; ++p) want += input(p, i);
            if (r.out[i] != want)
                return "call " + std::to_string(r.call) + " rank " + std::to_string(q) + " element " +
                       std::to_string(i) + " wrong";
        }
        if (++r.call < calls.size()) enqueue(q);
    }
    for (int q = 0; q < n; ++q) {
        const RankState &r = ranks[q];
        if (r.call >= calls.size()) continue;
        for (int ch = 0; ch < calls[r.call].nchannels; ++ch) {
            const Lane &ln = r.lanes[ch];
            if (ln.next < ln.count)
                return "deadlock: call " + std::to_string(r.call) + " rank " + std::to_string(q) + " channel " +
                       std::to_string(ch) + " op " + std::to_string(ln.next) + " (send step " +
                       std::to_string(ln.send) + ", credit head " +
                       std::to_string(fifo[(size_t)((q + 1) % n) * kMaxChannels + ch].head) + ", recv step " +
                       std::to_string(ln.recv) + ")";
        }
    }
    return "";
}

} // namespace sim
} // namespace loom
