// The one schedule simulator: any schedule in the op form of
// src/device/edges/edge_op.h executed over host buffers exactly as the kernels run
// it (Prims::run). Each rank has lanes (its CTAs: ring channels, the two
// trees) that walk their ops on their own, and connections (ports) whose
// send side lands in one peer's receive port through a FIFO of `depth`
// slots. A lane's next op runs whenever it can (data there to receive, room
// to send); a sweep in which nobody moves with ops left is a deadlock. Each
// slot carries its sender's key and length, so a receiver that expected
// another step fails; ops that reach outside a buffer, slots left over and
// counts that differ from the host's are failures too. The ring
// (ring_sim.h), trees, recursive doubling and the doubling family all run
// on it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "device/edges/edge_op.h"

namespace loom {
namespace sim {

using Value = int64_t;
using Combine = std::function<Value(Value, Value)>; // op(a, b)

struct Rank {
    int lanes = 1;
    std::function<size_t(int lane)> count;          // ops of a lane
    std::function<EdgeOp(int lane, size_t i)> op;   // op i of a lane
    std::map<int, std::pair<int, int>> sendTo;      // port -> (peer rank, the peer's port)
    std::vector<Value> in, out, acc;                // buffers (out, acc start as kUntouched)
    bool inPlace = false;                           // the input is the output from inOffset on
    size_t inOffset = 0;
};

constexpr Value kUntouched = -1;

struct Run {
    std::string error;                                      // "" when every op ran
    std::vector<std::map<int, unsigned long long>> sent, recvd; // per rank, per port
};

constexpr int kMaxPorts = 1024; // ring channels, edge slots, or all-peer connections and their direct handshakes

inline Run execute(std::vector<Rank> &ranks, int depth, size_t maxLen, const Combine &op) {
    struct Slot {
        unsigned long long key;
        std::vector<Value> data;
    };
    struct Lane {
        size_t next = 0, count = 0;
        EdgeOp op; // the op at next (computed once per op)
    };
    const int n = (int)ranks.size();
    Run run;
    run.sent.resize(n);
    run.recvd.resize(n);
    // FIFOs exist only for receive ports someone sends to (a deque per
    // possible port made setup most of a small run's time); a receive port
    // with no sender reads the empty `never` forever, which ends as a deadlock.
    std::vector<int> fifoOf((size_t)n * kMaxPorts, -1); // [rank * kMaxPorts + receive port] -> fifo
    std::vector<int> dest((size_t)n * kMaxPorts, -1);   // [rank * kMaxPorts + send port] -> fifo
    std::vector<size_t> fifoPort;                       // fifo -> rank * kMaxPorts + receive port
    std::vector<std::vector<Lane>> lanes(n);
    for (int r = 0; r < n; ++r) {
        for (const auto &t : ranks[r].sendTo)
            if (t.first >= 0 && t.first < kMaxPorts && t.second.first >= 0 && t.second.first < n &&
                t.second.second >= 0 && t.second.second < kMaxPorts) {
                const size_t at = (size_t)t.second.first * kMaxPorts + t.second.second;
                if (fifoOf[at] < 0) {
                    fifoOf[at] = (int)fifoPort.size();
                    fifoPort.push_back(at);
                }
                dest[(size_t)r * kMaxPorts + t.first] = fifoOf[at];
            }
        lanes[r].resize(ranks[r].lanes);
        for (int l = 0; l < ranks[r].lanes; ++l) {
            lanes[r][l].count = ranks[r].count(l);
            if (lanes[r][l].count) lanes[r][l].op = ranks[r].op(l, 0);
        }
    }
    std::vector<std::deque<Slot>> fifo(fifoPort.size());
    std::deque<Slot> never;
    std::vector<std::vector<Value>> spare; // slot buffers to reuse (an allocation per op was a third of the time)
    auto fail = [&](int r, int lane, size_t i, const std::string &what) {
        run.error = "rank " + std::to_string(r) + " lane " + std::to_string(lane) + " op " + std::to_string(i) + ": " +
                    what;
        return run;
    };
    for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < n; ++r) {
            Rank &k = ranks[r];
            for (int lane = 0; lane < k.lanes; ++lane) {
                Lane &ln = lanes[r][lane];
                if (ln.next >= ln.count) continue;
                const size_t i = ln.next;
                const EdgeOp &o = ln.op;
                if (o.recv >= kMaxPorts || o.send >= kMaxPorts) return fail(r, lane, i, "port out of range");
                const int to = o.send >= 0 ? dest[(size_t)r * kMaxPorts + o.send] : -1;
                if (o.send >= 0 && to < 0) return fail(r, lane, i, "sends on a port with no peer");
                const int fromId = o.recv >= 0 ? fifoOf[(size_t)r * kMaxPorts + o.recv] : -1;
                std::deque<Slot> *from = o.recv < 0 ? nullptr : fromId < 0 ? &never : &fifo[fromId];
                if ((from && from->empty()) || (to >= 0 && (int)fifo[to].size() >= depth)) continue;
                auto buf = [&](int b) -> std::vector<Value> * {
                    return b == kBufIn ? (k.inPlace ? &k.out : &k.in) : b == kBufOut ? &k.out : b == kBufAcc ? &k.acc : nullptr;
                };
                std::vector<Value> *src = buf(o.src), *dst = buf(o.dst);
                const size_t srcAt = o.srcAt + (o.src == kBufIn && k.inPlace ? k.inOffset : 0);
                if (o.len > maxLen && (o.recv >= 0 || o.send >= 0)) return fail(r, lane, i, "moves more than a slot");
                const bool needSrc = o.recv < 0 || o.reduce;
                if (o.len && needSrc && (!src || srcAt + o.len > src->size()))
                    return fail(r, lane, i, "reads outside its buffers");
                if (o.len && o.dst != kBufNone && (!dst || o.dstAt + o.len > dst->size()))
                    return fail(r, lane, i, "writes outside its buffers");
                std::vector<Value> v, raw;
                if (!from && !spare.empty()) {
                    v.swap(spare.back());
                    spare.pop_back();
                }
                if (o.rawDst && (!from || o.send < 0 || !o.reduce))
                    return fail(r, lane, i, "a raw destination without a receive, a send and a reduction");
                if (from) {
                    Slot &got = from->front();
                    if (got.key != o.key || got.data.size() != o.len)
                        return fail(r, lane, i, "received another step than it expected");
                    v.swap(got.data);
                    from->pop_front();
                    ++run.recvd[r][o.recv];
                    if (o.rawDst) raw = v;
                    if (o.reduce)
                        for (size_t e = 0; e < o.len; ++e) {
                            const Value x = (*src)[srcAt + e];
                            v[e] = o.inFirst ? op(x, v[e]) : op(v[e], x);
                        }
                } else {
                    if (src) v.assign(src->begin() + srcAt, src->begin() + srcAt + o.len);
                    else v.clear();
                }
                if (dst) {
                    const std::vector<Value> &w = o.rawDst ? raw : v;
                    std::copy(w.begin(), w.end(), dst->begin() + o.dstAt);
                }
                if (to >= 0) {
                    fifo[to].push_back(Slot{o.key, std::move(v)});
                    ++run.sent[r][o.send];
                } else {
                    spare.push_back(std::move(v));
                }
                if (++ln.next < ln.count) ln.op = k.op(lane, ln.next);
                moved = true;
            }
        }
    }
    for (int r = 0; r < n; ++r)
        for (int lane = 0; lane < ranks[r].lanes; ++lane)
            if (lanes[r][lane].next < lanes[r][lane].count) return fail(r, lane, lanes[r][lane].next, "deadlock");
    for (size_t f = 0; f < fifo.size(); ++f)
        if (!fifo[f].empty()) {
            run.error = "rank " + std::to_string(fifoPort[f] / kMaxPorts) + " left slots unreceived on port " +
                        std::to_string(fifoPort[f] % kMaxPorts);
            return run;
        }
    return run;
}

inline Value sum(Value a, Value b) { return a + b; }

// Every rank's input: distinct per rank and element.
inline Value input(int rank, size_t i) { return (Value)(rank + 1) * 1000003 + (Value)(i * 7 % 1009); }

} // namespace sim
} // namespace loom
