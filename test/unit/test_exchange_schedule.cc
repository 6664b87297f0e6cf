// The per-peer exchange schedule (src/device/exchange/exchange_schedule.h) on the one
// simulator (sched_sim.h): alltoall with equal and ragged blocks (zeros,
// displacements in shuffled order with gaps), gather(v) and scatter(v) at
// every root, 1..64 ranks, 1..5 lane groups of 1 or 3 channels per pair,
// FIFOs of depth 1 and 2; every rank's output against the definition, the
// host's counts against the walk, and mutated schedules that must fail.
// Direct pairs (moved in place: the walk skips them, each channel copies its
// exchangeDirectSlice in one step), pulled or pushed, at random: their
// handshakes run as tokens around the FIFO ops in the kernel's order, both
// ends' step counts are compared, and mutated handshakes must fail. In a
// pushed gather the senders may defer their writes past their kernels
// (copy-engine copies): a second kernel, after every lane of the first,
// publishes them; deferring where the call is no fan-in must deadlock,
// unless the receivers wait in the second kernel too (copy-engine mode).
// One-shot pairs (blocks of 0..oneShotBytes): the walk skips them on both
// ends and no step counts them; their bytes move by the one-shot schedule
// (oneshot_schedule.h: the sender's piece, the receiver's incoming size and
// displacement) if and only if both ends judge the pair one-shot; ends that
// judge pairs apart must fail.
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/connect/peer_conns.h"
#include "device/exchange/exchange_schedule.h"
#include "device/oneshot/oneshot_args.h"
#include "sched_sim.h"
#include "sim_ranks.h"
#include "unit_suites.h"

using namespace loom;
using namespace loom::sim;

namespace {

// Every rank's tables: send[r][q] elements from r to q, at sendDispl[r][q]
// in r's input and recvDispl[q][r] in q's output.
struct Tables {
    int n = 0;
    std::vector<std::vector<size_t>> send, sendDispl, recv, recvDispl;
};

enum Kind { kAllToAll, kGather, kScatter };

Tables makeTables(Kind kind, int n, int root, bool ragged, unsigned seed) {
    std::mt19937 rng(seed);
    Tables t;
    t.n = n;
    t.send.assign(n, std::vector<size_t>(n, 0));
    const size_t base = 1 + rng() % 40;
    for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q) {
            const bool carries = kind == kAllToAll || (kind == kGather ? q == root : r == root);
            const unsigned pick = rng() % 5;
            t.send[r][q] = !carries ? 0 : !ragged ? base : pick == 0 ? 0 : pick == 1 ? rng() % 3 : rng() % 200;
        }
    t.recv.assign(n, std::vector<size_t>(n, 0));
    for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q) t.recv[q][r] = t.send[r][q];
    // Send blocks back to back in peer order; receive blocks in a shuffled order with gaps.
    t.sendDispl.assign(n, std::vector<size_t>(n, 0));
    t.recvDispl.assign(n, std::vector<size_t>(n, 0));
    for (int r = 0; r < n; ++r) {
        size_t at = 0;
        for (int q = 0; q < n; ++q) {
            t.sendDispl[r][q] = at;
            at += t.send[r][q];
        }
        std::vector<int> order(n);
        for (int q = 0; q < n; ++q) order[q] = q;
        if (ragged) std::shuffle(order.begin(), order.end(), rng);
        at = 0;
        for (int q : order) {
            t.recvDispl[r][q] = at;
            at += t.recv[r][q] + (ragged ? rng() % 3 : 0);
        }
    }
    return t;
}

ExchangeSched schedOf(const Tables &t, int r, int lanes, size_t chunk, int channels, int selfLanes) {
    return ExchangeSched{r,  t.n,   lanes, t.send[r].data(), t.sendDispl[r].data(), t.recv[r].data(),
                         t.recvDispl[r].data(), chunk, channels, selfLanes};
}

// One-shot pairs in the simulator: blocks of 0..bytes elements; apart: odd
// ranks judge by half the bound (a mutation).
struct OneShotShape {
    size_t bytes = 0;
    bool apart = false;
};

using OpFn = std::function<EdgeOp(const ExchangeSched &, int lane, const ExchangeCursor &)>;
EdgeOp plainOp(const ExchangeSched &s, int lane, const ExchangeCursor &c) { return exchangeOp(s, lane, c); }

// Which blocks are read in place: direct[r][q] for the block r sends q.
using DirectPairs = std::vector<std::vector<char>>;

DirectPairs randomDirect(const Tables &t, unsigned seed) {
    std::mt19937 rng(seed);
    DirectPairs d(t.n, std::vector<char>(t.n, 0));
    for (int r = 0; r < t.n; ++r)
        for (int q = 0; q < t.n; ++q) d[r][q] = q != r && t.send[r][q] && rng() % 2;
    return d;
}

// Mutations of the direct pairs' handshake (each must fail).
enum Handshake {
    kHandshakeAsBuilt,
    kAwaitBeforeSignal, // the end that does not copy waits for the other's copy before it signals
    kReceiversOtherMode, // receivers take pushed pairs for pulled ones and back
    kNoSignal,           // the end that does not copy never signals
    kDeferEverywhere,    // every rank defers its pushed direct sends, fan-in or not
    kDeferredNeverSignalled, // the second kernel publishes nothing
    kEnginesAll,          // copy-engine mode as built (exchangeDeferAll): not a mutation
    kEnginesAllWaitFirst, // copy-engine mode, but receivers await deferred writes in the first kernel
    kEnginesAllWaitBeforePublish, // copy-engine mode, but the second kernel waits before it publishes
};

// Whether a rank copies its send or receive half of a direct pair, as the
// kernel decides it, or as receivers decide it under kReceiversOtherMode.
bool copiesUnder(const ExchangeSched &s, bool sendHalf, Handshake h) {
    return exchangeDirectCopies(s, sendHalf) != (!sendHalf && h == kReceiversOtherMode);
}

// A lane's ops as the kernel runs them: per round the direct halves'
// handshake (tokens of no data on ports of their own: D carries the
// sender's tokens to the receiver, C the receiver's to the sender) around
// the FIFO ops, in exchange_schedule.h's order. The copies themselves are
// checked after the run. With deferred credits every lane ends with a token
// to the second kernel (port E + lane of its own rank).
constexpr unsigned kLaneDoneKey = 0xfffeu;
std::vector<EdgeOp> laneOps(const ExchangeSched &s, int lane, const OpFn &opFn, Handshake h) {
    std::vector<EdgeOp> ops;
    const int n = s.nranks, C = s.channels, ch = exchangeChannel(s, lane);
    const int dBase = n * C, cBase = 2 * n * C, eBase = 3 * n * C;
    auto token = [&](int recvPort, int sendPort, int round) {
        ops.push_back(edgeOp(recvPort, sendPort, kBufNone, 0, kBufNone, 0, 0, false, edgeKey(0xffffu, (size_t)round)));
    };
    ExchangeCursor c = exchangeFirst(s, lane);
    for (int round = exchangeFirstRound(s, lane); round < n; round = exchangeNextRound(s, lane, round)) {
        const int to = exchangeTo(s, round), from = exchangeFrom(s, round);
        const bool ds = round > 0 && exchangeSendDirect(s, to), dr = round > 0 && exchangeRecvDirect(s, from);
        const bool sendCopies = copiesUnder(s, true, h), recvCopies = copiesUnder(s, false, h);
        const int dTo = dBase + to * C + ch, cTo = cBase + to * C + ch;       // the pair with `to`
        const int dFrom = dBase + from * C + ch, cFrom = cBase + from * C + ch; // the pair with `from`
        auto signals = [&] {
            if (h == kNoSignal) return;
            if (ds && !sendCopies) token(-1, dTo, round);  // published
            if (dr && !recvCopies) token(-1, cFrom, round); // ready
        };
        auto waits = [&] {
            if (ds && !sendCopies) token(cTo, -1, round);  // the receiver read it
            if (dr && !recvCopies && !s.deferWaits) token(dFrom, -1, round); // the sender wrote it (deferred: kernel 2)
        };
        if (h == kAwaitBeforeSignal) waits();
        signals();
        if (ds && sendCopies) {
            token(cTo, -1, round);                     // ready -> write
            if (!s.deferCopies) token(-1, dTo, round); // -> written (deferred: the second kernel's)
        }
        if (dr && recvCopies) token(dFrom, -1, round), token(-1, cFrom, round); // published -> read -> credit
        for (; !exchangeDone(s, c) && c.round == round; c = exchangeNext(s, lane, c)) {
            ops.push_back(opFn(s, lane, c));
        }
        if (h != kAwaitBeforeSignal) waits();
    }
    if (exchangeSecondKernel(s))
        ops.push_back(edgeOp(-1, eBase + lane, kBufNone, 0, kBufNone, 0, 0, false, edgeKey(kLaneDoneKey, 0)));
    return ops;
}

// The second kernel of deferred copies (after the copies): once every lane
// of the first is done, every channel's publication of each pushed direct
// send, then (deferred waits) every channel's wait for each pushed direct
// receive.
std::vector<EdgeOp> afterCopiesOps(const ExchangeSched &s, int lanes, Handshake h) {
    std::vector<EdgeOp> ops;
    const int n = s.nranks, C = s.channels, dBase = n * C, eBase = 3 * n * C;
    for (int lane = 0; lane < lanes; ++lane)
        ops.push_back(edgeOp(eBase + lane, -1, kBufNone, 0, kBufNone, 0, 0, false, edgeKey(kLaneDoneKey, 0)));
    auto publications = [&] {
        for (int round = 1; round < n && h != kDeferredNeverSignalled; ++round) {
            const int to = exchangeTo(s, round);
            if (!s.deferCopies || !exchangeSendDirect(s, to) || !exchangeDirectCopies(s, true)) continue;
            for (int c = 0; c < C; ++c)
                ops.push_back(edgeOp(-1, dBase + to * C + c, kBufNone, 0, kBufNone, 0, 0, false,
                                     edgeKey(0xffffu, (size_t)round)));
        }
    };
    auto waits = [&] {
        for (int round = 1; round < n && s.deferWaits; ++round) {
            const int from = exchangeFrom(s, round);
            if (!exchangeRecvDirect(s, from) || exchangeDirectCopies(s, false)) continue;
            for (int c = 0; c < C; ++c)
                ops.push_back(edgeOp(dBase + from * C + c, -1, kBufNone, 0, kBufNone, 0, 0, false,
                                     edgeKey(0xffffu, (size_t)round)));
        }
    };
    if (h == kEnginesAllWaitBeforePublish) waits(), publications();
    else publications(), waits();
    return ops;
}

// "" when every rank's output is right, else the first thing wrong.
// lanes: groups x channels. direct: pairs moved in place (their receivers
// are told unless receiverUnaware), pulled or pushed. fanIn: the call is a
// gather (whose copying ends defer their copies where exchangeMayDeferCopies
// lets them).
std::string simulate(const Tables &t, int groups, int channels, size_t chunk, int depth, const OpFn &opFn = plainOp,
                     const Tables *walked = nullptr, const DirectPairs *direct = nullptr, bool receiverUnaware = false,
                     int selfLanes = 1, bool push = false, Handshake h = kHandshakeAsBuilt, bool fanIn = false,
                     OneShotShape pairs = {}) {
    const int n = t.n, lanes = groups * channels;
    const Tables &w = walked ? *walked : t;
    // One-shot pairs: each rank's bound; the walk gets their counts as 0 (the host's tables).
    auto boundOf = [&](int r) { return pairs.apart && r % 2 ? pairs.bytes / 2 : pairs.bytes; };
    Tables walk = w;
    for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q)
            if (q != r) {
                walk.send[r][q] = exchangeWalkBytes(boundOf(r), w.send[r][q]);
                walk.recv[r][q] = exchangeWalkBytes(boundOf(r), w.recv[r][q]);
            }
    std::vector<ExchangeSched> sched;
    std::vector<std::vector<size_t>> dSend(n, std::vector<size_t>(n, 0)), dSrc(n, std::vector<size_t>(n, 0));
    for (int r = 0; r < n; ++r) {
        sched.push_back(schedOf(walk, r, lanes, chunk, channels, selfLanes));
        sched[r].directPush = push;
        if (!direct) continue;
        for (int q = 0; q < n; ++q) {
            dSend[r][q] = (*direct)[r][q];
            dSrc[r][q] = (*direct)[q][r] && !receiverUnaware ? 0x1000 : 0; // any address: the sim copies itself
        }
        sched[r].directSend = dSend[r].data();
        sched[r].directSrc = dSrc[r].data();
        if (h == kEnginesAll || h == kEnginesAllWaitFirst || h == kEnginesAllWaitBeforePublish) { // copy-engine mode
            exchangeDeferAll(&sched[r]);
            if (h == kEnginesAllWaitFirst) sched[r].deferWaits = false;
        } else {
            sched[r].deferCopies = exchangeMayDeferCopies(sched[r], fanIn) || (h == kDeferEverywhere && push);
        }
        if (!push && exchangeMayDeferCopies(sched[r], true)) // whatever the call: pulled pairs never defer
            return "rank " + std::to_string(r) + " may defer pulled copies";
    }
    std::vector<Rank> ranks(n);
    for (int r = 0; r < n; ++r) {
        Rank &k = ranks[r];
        size_t inLen = 0, outLen = 0;
        for (int q = 0; q < n; ++q) {
            inLen = std::max(inLen, t.sendDispl[r][q] + t.send[r][q]);
            outLen = std::max(outLen, t.recvDispl[r][q] + t.recv[r][q]);
        }
        for (size_t i = 0; i < inLen; ++i) k.in.push_back(input(r, i));
        k.out.assign(outLen, kUntouched);
        k.lanes = lanes + selfLanes;
        for (int q = 0; q < n; ++q)
            for (int c = 0; q != r && c < channels; ++c)
                for (int base : {0, n * channels, 2 * n * channels}) // data, D tokens, C tokens
                    k.sendTo[base + q * channels + c] = {q, base + r * channels + c};
        auto ops = std::make_shared<std::vector<std::vector<EdgeOp>>>();
        for (int lane = 0; lane < k.lanes; ++lane) ops->push_back(laneOps(sched[r], lane, opFn, h));
        if (exchangeSecondKernel(sched[r])) { // the second kernel: one more lane, fed by every lane's E port
            for (int lane = 0; lane < k.lanes; ++lane)
                k.sendTo[3 * n * channels + lane] = {r, 3 * n * channels + lane};
            ops->push_back(afterCopiesOps(sched[r], k.lanes, h));
            ++k.lanes;
        }
        k.count = [ops](int lane) { return (*ops)[lane].size(); };
        k.op = [ops](int lane, size_t i) { return (*ops)[lane][i]; };
    }
    Run run = execute(ranks, depth, chunk, sum);
    if (!run.error.empty()) return run.error;
    std::vector<std::vector<unsigned long long>> sends(n), recvs(n);
    const int conns = n * channels;
    for (int r = 0; r < n; ++r) {
        sends[r].resize((size_t)conns);
        recvs[r].resize((size_t)conns);
        exchangeStepCounts(sched[r], sends[r].data(), recvs[r].data());
        for (int k = 0; k < conns; ++k) {
            auto a = run.sent[r].find(k), b = run.recvd[r].find(k);
            const int q = k / channels;
            // A direct half: one step per channel, outside the walk.
            const unsigned long long ds = exchangeSendDirect(sched[r], q), dr = exchangeRecvDirect(sched[r], q);
            if (sends[r][k] != ds + (a == run.sent[r].end() ? 0 : a->second) ||
                recvs[r][k] != dr + (b == run.recvd[r].end() ? 0 : b->second))
                return "rank " + std::to_string(r) + ": the host's step count differs from the walk";
        }
    }
    // Both ends of every connection count the same steps.
    for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q)
            for (int c = 0; q != r && c < channels; ++c)
                if (sends[r][q * channels + c] != recvs[q][r * channels + c])
                    return "ranks " + std::to_string(r) + " -> " + std::to_string(q) + ": step counts differ";
    // The one-shot pairs: lines the sender writes and its receiver waits
    // for, by the one-shot schedule's tables of each end.
    auto blocksOf = [&](int r) {
        return OneShotBlocks{t.send[r].data(), t.sendDispl[r].data(), 0, w.recv[r].data(), t.recvDispl[r].data()};
    };
    for (int r = 0; pairs.bytes && r < n; ++r)
        for (int q = 0; q < n; ++q) {
            if (q == r) continue;
            const bool writes = exchangeOneShotPair(boundOf(r), t.send[r][q]);
            const bool waits = exchangeOneShotPair(boundOf(q), w.recv[q][r]);
            const std::string pair = "ranks " + std::to_string(r) + " -> " + std::to_string(q);
            if (writes != waits) return pair + ": one end takes the pair for one-shot, the other does not";
            if (!writes) continue;
            const OneShotPiece piece = oneShotPiece(loomCollAllToAll, r, q, 0, blocksOf(r));
            if (piece.bytes != oneShotIncoming(loomCollAllToAll, r, q, 0, blocksOf(q)))
                return pair + ": one-shot lines of another size than awaited";
            const size_t at = oneShotOutDispl(loomCollAllToAll, blocksOf(q), r);
            for (size_t i = 0; i < piece.bytes; ++i) ranks[q].out[at + i] = input(r, piece.offset + i);
        }
    // The direct copies: each channel's slice, from the sender's input into
    // the receiver's output, made by whichever end thinks it copies.
    for (int r = 0; direct && r < n; ++r)
        for (int q = 0; q < n; ++q) {
            const bool byReceiver = exchangeRecvDirect(sched[q], r) && copiesUnder(sched[q], false, h);
            const bool bySender = exchangeSendDirect(sched[r], q) && copiesUnder(sched[r], true, h);
            if (!byReceiver && !bySender) continue;
            for (int c = 0; c < channels; ++c) {
                size_t lo, hi;
                exchangeDirectSlice(t.send[r][q], channels, c, &lo, &hi);
                for (size_t i = lo; i < hi; ++i) ranks[q].out[t.recvDispl[q][r] + i] = input(r, t.sendDispl[r][q] + i);
            }
        }
    for (int r = 0; r < n; ++r) {
        std::vector<Value> want(ranks[r].out.size(), kUntouched);
        for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < t.recv[r][q]; ++i) want[t.recvDispl[r][q] + i] = input(q, t.sendDispl[q][r] + i);
        for (size_t i = 0; i < want.size(); ++i)
            if (ranks[r].out[i] != want[i])
                return "rank " + std::to_string(r) + " element " + std::to_string(i) + " wrong";
    }
    return "";
}

const char *const kKindNames[] = {"alltoall", "gather", "scatter"};

// The direct pairs less the one-shot ones (enqueue_exchange.cc: one-shot pairs are never direct).
DirectPairs withoutOneShot(const Tables &t, DirectPairs d, const OneShotShape &pairs) {
    for (int r = 0; r < t.n; ++r)
        for (int q = 0; q < t.n; ++q)
            if (t.send[r][q] <= pairs.bytes) d[r][q] = 0;
    return d;
}

void runMatrix(Kind kind, bool ragged) {
    for (int n = 1; n <= simRanks(64); n += n < 9 ? 1 : 11)
        for (int groups : {1, 2, 5})
            for (int channels : {1, 3})
                for (size_t chunk : {4, 12})
                    for (int depth : {1, 2})
                        for (unsigned seed = 0; seed < (n <= 9 ? 4u : 2u); ++seed) {
                            const int root = (int)(seed * 7 + (unsigned)n) % n;
                            Tables t = makeTables(kind, n, root, ragged, seed * 977 + (unsigned)n);
                            // Odd seeds: some pairs direct, pulled or pushed.
                            const DirectPairs d = randomDirect(t, seed * 31 + (unsigned)n);
                            const bool push = (seed / 2 + (unsigned)n) % 2;
                            std::string err = simulate(t, groups, channels, chunk, depth, plainOp, nullptr,
                                                       seed % 2 ? &d : nullptr, false, 1 + (int)(seed / 2), push,
                                                       kHandshakeAsBuilt, kind == kGather);
                            // The same direct pairs in copy-engine mode (every pair pushed, deferred).
                            if (err.empty() && seed % 2)
                                err = simulate(t, groups, channels, chunk, depth, plainOp, nullptr, &d, false,
                                               1 + (int)(seed / 2), true, kEnginesAll, kind == kGather);
                            // One-shot pairs (blocks of 0..30), beside direct pairs of the
                            // larger blocks (one-shot pairs never are: the host's rule).
                            const OneShotShape pairs{30};
                            const DirectPairs dp = withoutOneShot(t, d, pairs);
                            if (err.empty() && n <= kMaxOneShotRanks)
                                err = simulate(t, groups, channels, chunk, depth, plainOp, nullptr,
                                               seed % 2 ? &dp : nullptr, false, 1 + (int)(seed / 2), push,
                                               kHandshakeAsBuilt, kind == kGather, pairs);
                            if (!err.empty())
                                ck_abort_msg("%s%s: nranks %d groups %d channels %d chunk %zu depth %d root %d "
                                             "seed %u%s: %s", kKindNames[kind], ragged ? "v" : "", n, groups,
                                             channels, chunk, depth, root, seed,
                                             seed % 2 ? (push ? " (pushed pairs)" : " (pulled pairs)") : "",
                                             err.c_str());
                        }
}

// Mutations: each must make some case fail.
bool someCaseFails(const OpFn &fn, bool ragged, bool walkOwnCounts = false, int channels = 1, int selfLanes = 1) {
    for (int n = 2; n <= 7; ++n)
        for (unsigned seed = 0; seed < 4; ++seed) {
            Tables t = makeTables(kAllToAll, n, 0, ragged, seed + 31 * (unsigned)n);
            Tables w = t;
            if (walkOwnCounts) w.recv = w.send; // the receiver takes its own send counts
            if (!simulate(t, 2, channels, 4, 2, fn, walkOwnCounts ? &w : nullptr, nullptr, false, selfLanes).empty())
                return true;
        }
    return false;
}

// Some ragged alltoall (or gatherv) with one-shot pairs fails; walkOwnCounts:
// receivers take their own send counts.
bool someOneShotCaseFails(const OneShotShape &pairs, bool walkOwnCounts = false) {
    for (int n = 2; n <= 7; ++n)
        for (unsigned seed = 0; seed < 4; ++seed)
            for (Kind kind : {kAllToAll, kGather}) {
                Tables t = makeTables(kind, n, 1, true, seed + 57 * (unsigned)n);
                Tables w = t;
                if (walkOwnCounts) w.recv = w.send;
                if (!simulate(t, 2, 3, 12, 2, plainOp, walkOwnCounts ? &w : nullptr, nullptr, false, 1, false,
                              kHandshakeAsBuilt, kind == kGather, pairs).empty())
                    return true;
            }
    return false;
}

EdgeOp wrongPeer(const ExchangeSched &s, int lane, const ExchangeCursor &c) {
    EdgeOp o = exchangeOp(s, lane, c);
    if (o.recv >= 0) o.recv = exchangeConn(s, exchangeTo(s, c.round), exchangeChannel(s, lane)); // r + k, not r - k
    return o;
}
EdgeOp noLocalCopy(const ExchangeSched &s, int lane, const ExchangeCursor &c) {
    EdgeOp o = exchangeOp(s, lane, c);
    if (c.round == 0) o.dst = kBufNone;
    return o;
}
EdgeOp selfLanesOverlap(const ExchangeSched &s, int lane, const ExchangeCursor &c) {
    EdgeOp o = exchangeOp(s, lane, c);
    if (c.round == 0) { // chunks of self lane j at j + i instead of j + i x selfLanes
        const size_t at = ((size_t)(lane - s.lanes) + c.chunk) * s.chunkElems;
        o.srcAt = s.sendDispl[s.rank] + at;
        o.dstAt = s.recvDispl[s.rank] + at;
    }
    return o;
}
EdgeOp chunkOffByOne(const ExchangeSched &s, int lane, const ExchangeCursor &c) {
    EdgeOp o = exchangeOp(s, lane, c);
    if (o.recv >= 0 && c.chunk > 0) o.dstAt -= 1;
    return o;
}
EdgeOp wrongChannel(const ExchangeSched &s, int lane, const ExchangeCursor &c) {
    EdgeOp o = exchangeOp(s, lane, c);
    if (o.send >= 0) o.send = exchangeConn(s, exchangeTo(s, c.round), (exchangeChannel(s, lane) + 1) % s.channels);
    return o;
}

} // namespace

START_TEST(alltoall_matches_reference) { runMatrix(kAllToAll, false); }
END_TEST
START_TEST(alltoallv_matches_reference) { runMatrix(kAllToAll, true); }
END_TEST
START_TEST(gather_and_gatherv_match_reference) {
    runMatrix(kGather, false);
    runMatrix(kGather, true);
}
END_TEST
START_TEST(scatter_and_scatterv_match_reference) {
    runMatrix(kScatter, false);
    runMatrix(kScatter, true);
}
END_TEST

// The direct slices of every channel tile the block in order, 16-byte
// aligned starts; a slicing that is not a tiling must be caught.
using SliceFn = std::function<void(size_t, int, int, size_t *, size_t *)>;
bool slicesTile(const SliceFn &slice) {
    for (size_t bytes : {0ul, 1ul, 15ul, 16ul, 17ul, 100ul, 4095ul, 65536ul, 1000003ul})
        for (int channels = 1; channels <= kMaxExchangeChannels; ++channels) {
            size_t at = 0;
            for (int c = 0; c < channels; ++c) {
                size_t lo, hi;
                slice(bytes, channels, c, &lo, &hi);
                if (lo != at || hi < lo || hi > bytes || (lo < bytes && lo % 16)) return false;
                at = hi;
            }
            if (at != bytes) return false;
        }
    return true;
}

START_TEST(direct_slices_tile_blocks) {
    ck_assert_msg(slicesTile(exchangeDirectSlice), "exchangeDirectSlice does not tile a block");
    ck_assert_msg(!slicesTile([](size_t b, int ch, int c, size_t *lo, size_t *hi) {
        *lo = b * c / ch; // even shares: not 16-byte aligned
        *hi = b * (c + 1) / ch;
    }), "unaligned slices were not caught");
    ck_assert_msg(!slicesTile([](size_t b, int ch, int c, size_t *lo, size_t *hi) {
        exchangeDirectSlice(b, ch, c, lo, hi);
        if (c == ch - 1 && *hi > *lo) --*hi; // the last byte dropped
    }), "a dropped byte was not caught");
}
END_TEST

START_TEST(mutations_fail) {
    ck_assert_msg(someCaseFails(wrongPeer, false), "receiving from the wrong peer was not caught");
    ck_assert_msg(someCaseFails(noLocalCopy, false), "a dropped local block was not caught");
    ck_assert_msg(someCaseFails(chunkOffByOne, false), "a chunk written one element early was not caught");
    ck_assert_msg(someCaseFails(plainOp, true, true), "a receiver walking its own send counts was not caught");
    ck_assert_msg(someCaseFails(wrongChannel, false, false, 3), "a send on another channel of the pair was not caught");
    ck_assert_msg(someCaseFails(chunkOffByOne, false, false, 3), "an off-by-one chunk on 3 channels was not caught");
    ck_assert_msg(someCaseFails(selfLanesOverlap, false, false, 1, 3), "self lanes striding wrong were not caught");
    ck_assert_msg(!someOneShotCaseFails(OneShotShape{30}), "one-shot pairs as built fail");
    ck_assert_msg(someOneShotCaseFails(OneShotShape{30, true}), "ends judging one-shot pairs apart were not caught");
    ck_assert_msg(someOneShotCaseFails(OneShotShape{30}, true),
                  "a receiver awaiting one-shot lines by its own send counts was not caught");
    // A sender that reads as direct a pair its receiver expects in its FIFO.
    bool caught = false;
    for (int n = 2; n <= 5 && !caught; ++n) {
        Tables t = makeTables(kAllToAll, n, 0, false, 7u + (unsigned)n);
        const DirectPairs d = randomDirect(t, 3u * (unsigned)n);
        caught = !simulate(t, 2, 3, 4, 2, plainOp, nullptr, &d, true).empty();
    }
    ck_assert_msg(caught, "a direct pair its receiver did not know of was not caught");
}
END_TEST

// Some alltoall (or gather) with direct pairs (pulled or pushed) fails under
// handshake h.
bool handshakeFails(bool push, Handshake h, Kind kind = kAllToAll) {
    for (int n = 2; n <= 6; ++n)
        for (int channels : {1, 3}) {
            Tables t = makeTables(kind, n, n / 2, false, 11u + (unsigned)n);
            const DirectPairs d = randomDirect(t, 5u * (unsigned)n);
            if (!simulate(t, 2, channels, 4, 1, plainOp, nullptr, &d, false, 1, push, h, kind == kGather).empty())
                return true;
        }
    return false;
}

START_TEST(direct_handshakes_complete_and_mutations_fail) {
    for (bool push : {false, true}) {
        const char *mode = push ? "pushed" : "pulled";
        ck_assert_msg(!handshakeFails(push, kHandshakeAsBuilt), "%s pairs: the handshake as built fails", mode);
        ck_assert_msg(handshakeFails(push, kAwaitBeforeSignal), "%s pairs: a wait before the signal was not caught",
                      mode);
        ck_assert_msg(handshakeFails(push, kReceiversOtherMode), "%s pairs: ends in different modes were not caught",
                      mode);
        ck_assert_msg(handshakeFails(push, kNoSignal), "%s pairs: a missing signal was not caught", mode);
    }
    // Copy-engine copies: a pushed gather's senders defer their writes; that
    // completes, and fails without the publications after or outside a
    // fan-in. Pulled pairs never defer (simulate asks exchangeMayDeferCopies).
    ck_assert_msg(!handshakeFails(false, kHandshakeAsBuilt, kGather), "pulled gathers fail");
    ck_assert_msg(!handshakeFails(true, kHandshakeAsBuilt, kGather), "pushed gathers with deferred writes fail");
    ck_assert_msg(handshakeFails(true, kDeferredNeverSignalled, kGather), "deferred writes never published: not caught");
    ck_assert_msg(handshakeFails(true, kDeferEverywhere), "writes deferred outside a fan-in: no deadlock caught");
    // Copy-engine mode: every pushed pair deferred, its receiver waiting in
    // the second kernel; waiting in the first instead deadlocks.
    for (Kind kind : {kAllToAll, kGather, kScatter})
        ck_assert_msg(!handshakeFails(true, kEnginesAll, kind), "copy-engine mode fails (%s)", kKindNames[kind]);
    ck_assert_msg(handshakeFails(true, kEnginesAllWaitFirst), "copy-engine mode with waits in the first kernel: no "
                  "deadlock caught");
    ck_assert_msg(handshakeFails(true, kEnginesAllWaitBeforePublish), "copy-engine mode with a second kernel that "
                  "waits before it publishes: no deadlock caught");
}
END_TEST

START_TEST(pairs_meet_in_one_round_on_both_ends) {
    // Round k: r sends to r + k, and r + k receives from r in its round k.
    for (int n = 1; n <= 17; ++n)
        for (int r = 0; r < n; ++r)
            for (int k = 1; k < n; ++k) {
                std::vector<size_t> z(n, 0);
                ExchangeSched a{r, n, 1, z.data(), z.data(), z.data(), z.data(), 1, 1};
                ExchangeSched b = a;
                b.rank = exchangeTo(a, k);
                ck_assert_int_eq(exchangeFrom(b, k), r);
            }
}
END_TEST

START_TEST(all_peer_fifos_stay_within_budget) {
    // core/connect/peer_conns.h: channels and slot shapes per rank count, for every
    // channel cap LOOM_EXCHANGE_CHANNELS allows.
    for (int cap = 1; cap <= kMaxExchangeChannels; cap += cap < 16 ? 15 : 16)
        for (int n = 2; n <= 8192; n += n < 80 ? 1 : n / 8) {
            int slots = 0;
            size_t slotBytes = 0;
            const int C = exchangeChannels(n, cap);
            exchangeFifoShape(n, C, 128 * 1024, 4, &slots, &slotBytes);
            const size_t bytes = (size_t)n * (size_t)C * (size_t)slots * slotBytes;
            ck_assert_int_ge(C, 1);
            ck_assert_int_le(C, cap);
            ck_assert_int_le(C * std::min(n - 1, kMaxExchangeChannels / C), kMaxExchangeChannels); // lanes
            ck_assert_int_ge(slots, 2);
            ck_assert_uint_ge(slotBytes, 4096);
            if (n <= 4096) ck_assert_msg(bytes <= kExchangeFifoBudget, "%d ranks: %zu bytes of slots", n, bytes);
            else if (C == 1) ck_assert_uint_eq(slots * slotBytes, 8192); // the floor
        }
    int slots = 0;
    size_t slotBytes = 0;
    exchangeFifoShape(4, exchangeChannels(4, 16), 128 * 1024, 4, &slots, &slotBytes); // the default cap at 4 ranks
    ck_assert_int_eq(exchangeChannels(4, 16), 16);
    ck_assert_int_eq(slots, 4);
    ck_assert_uint_eq(slotBytes, 128 * 1024);
    ck_assert_int_eq(exchangeChannels(2, 48), 48);
    exchangeFifoShape(64, exchangeChannels(64, 16), 128 * 1024, 8, &slots, &slotBytes); // deeper FIFOs give way first
    ck_assert_int_eq(slots, 4);
    ck_assert_uint_eq(slotBytes, 128 * 1024);
}
END_TEST

START_TEST(self_lanes_follow_the_own_share) {
    // core/connect/peer_conns.h: the own block's lanes grow with its share of the
    // pair traffic, within [1, channels] and the block's chunks.
    const size_t MiB = 1 << 20, chunk = 128 * 1024;
    ck_assert_int_eq(exchangeSelfLanes(128 * MiB, 128 * MiB, chunk, 32), 16);        // 2 ranks, alltoall
    ck_assert_int_eq(exchangeSelfLanes(64 * MiB, 192 * MiB, chunk, 16), 6);          // 4 ranks, alltoall / gather root
    ck_assert_int_eq(exchangeSelfLanes(1 * MiB, 1023 * MiB, chunk, 16), 1);          // a small share: one lane
    ck_assert_int_eq(exchangeSelfLanes(64 * MiB, 0, chunk, 16), 16);                 // nothing else to move: all
    ck_assert_int_eq(exchangeSelfLanes(256 * 1024, 256 * 1024, chunk, 32), 2);       // no more lanes than chunks
    ck_assert_int_eq(exchangeSelfLanes(0, 64 * MiB, chunk, 16), 1);                  // no own block: one idle lane
    for (size_t own = 0; own <= 512 * MiB; own += 7 * MiB + 1)
        for (size_t other = 0; other <= 512 * MiB; other += 13 * MiB + 3) {
            const int l = exchangeSelfLanes(own, other, chunk, 16);
            ck_assert_int_ge(l, 1);
            ck_assert_int_le(l, 16);
            if (own > other && other) ck_assert_int_eq(l, std::min<size_t>(16, (own + chunk - 1) / chunk));
        }
}
END_TEST

Suite *exchange_schedule_suite(void) {
    Suite *s = suite_create("exchange_schedule");
    TCase *tc = tcase_create("exchange_schedule");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, alltoall_matches_reference);
    tcase_add_test(tc, alltoallv_matches_reference);
    tcase_add_test(tc, gather_and_gatherv_match_reference);
    tcase_add_test(tc, scatter_and_scatterv_match_reference);
    tcase_add_test(tc, direct_slices_tile_blocks);
    tcase_add_test(tc, mutations_fail);
    tcase_add_test(tc, direct_handshakes_complete_and_mutations_fail);
    tcase_add_test(tc, pairs_meet_in_one_round_on_both_ends);
    tcase_add_test(tc, all_peer_fifos_stay_within_budget);
    tcase_add_test(tc, self_lanes_follow_the_own_share);
    suite_add_tcase(s, tc);
    return s;
}
