// The per-peer exchange schedule (src/device/exchange_schedule.h) on the one
// simulator (sched_sim.h): alltoall with equal and ragged blocks (zeros,
// displacements in shuffled order with gaps), gather(v) and scatter(v) at
// every root, 1..64 ranks, 1..5 lane groups of 1 or 3 channels per pair,
// FIFOs of depth 1 and 2; every
// rank's output against the definition, the host's counts against the walk,
// and mutated schedules that must fail.
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/peer_conns.h"
#include "device/exchange_schedule.h"
#include "sched_sim.h"
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

ExchangeSched schedOf(const Tables &t, int r, int lanes, size_t chunk, int channels) {
    return ExchangeSched{r,  t.n,   lanes, t.send[r].data(), t.sendDispl[r].data(), t.recv[r].data(),
                         t.recvDispl[r].data(), chunk, channels};
}

using OpFn = std::function<EdgeOp(const ExchangeSched &, int lane, const ExchangeCursor &)>;
EdgeOp plainOp(const ExchangeSched &s, int lane, const ExchangeCursor &c) { return exchangeOp(s, lane, c); }

// "" when every rank's output is right, else the first thing wrong.
// lanes: groups x channels.
std::string simulate(const Tables &t, int groups, int channels, size_t chunk, int depth, const OpFn &opFn = plainOp,
                     const Tables *walked = nullptr) {
    const int n = t.n, lanes = groups * channels;
    const Tables &w = walked ? *walked : t;
    std::vector<ExchangeSched> sched;
    for (int r = 0; r < n; ++r) sched.push_back(schedOf(w, r, lanes, chunk, channels));
    // Per lane a cursor advanced op by op (the simulator asks for op i after op i - 1).
    auto cursors = std::make_shared<std::vector<std::vector<ExchangeCursor>>>(n);
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
        k.lanes = lanes;
        for (int q = 0; q < n; ++q)
            for (int c = 0; q != r && c < channels; ++c) k.sendTo[q * channels + c] = {q, r * channels + c};
        (*cursors)[r].resize(lanes);
        const ExchangeSched *s = &sched[r];
        k.count = [s, cursors, r](int lane) {
            size_t ops = 0;
            for (ExchangeCursor c = exchangeFirst(*s, lane); !exchangeDone(*s, c); c = exchangeNext(*s, lane, c)) ++ops;
            (*cursors)[r][lane] = exchangeFirst(*s, lane);
            return ops;
        };
        k.op = [s, cursors, r, opFn](int lane, size_t i) {
            ExchangeCursor &c = (*cursors)[r][lane];
            if (i > 0) c = exchangeNext(*s, lane, c);
            return opFn(*s, lane, c);
        };
    }
    Run run = execute(ranks, depth, chunk, sum);
    if (!run.error.empty()) return run.error;
    for (int r = 0; r < n; ++r) {
        std::vector<unsigned long long> sends((size_t)n * channels), recvs((size_t)n * channels);
        exchangeStepCounts(sched[r], sends.data(), recvs.data());
        for (int q = 0; q < n * channels; ++q) {
            auto a = run.sent[r].find(q), b = run.recvd[r].find(q);
            if (sends[q] != (a == run.sent[r].end() ? 0 : a->second) ||
                recvs[q] != (b == run.recvd[r].end() ? 0 : b->second))
                return "rank " + std::to_string(r) + ": the host's step count differs from the walk";
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

void runMatrix(Kind kind, bool ragged) {
    for (int n = 1; n <= 64; n += n < 9 ? 1 : 11)
        for (int groups : {1, 2, 5})
            for (int channels : {1, 3})
                for (size_t chunk : {4, 12})
                    for (int depth : {1, 2})
                        for (unsigned seed = 0; seed < (n <= 9 ? 3u : 1u); ++seed) {
                            const int root = (int)(seed * 7 + (unsigned)n) % n;
                            Tables t = makeTables(kind, n, root, ragged, seed * 977 + (unsigned)n);
                            std::string err = simulate(t, groups, channels, chunk, depth);
                            if (!err.empty())
                                ck_abort_msg("%s%s: nranks %d groups %d channels %d chunk %zu depth %d root %d "
                                             "seed %u: %s", kKindNames[kind], ragged ? "v" : "", n, groups,
                                             channels, chunk, depth, root, seed, err.c_str());
                        }
}

// Mutations: each must make some case fail.
bool someCaseFails(const OpFn &fn, bool ragged, bool walkOwnCounts = false, int channels = 1) {
    for (int n = 2; n <= 7; ++n)
        for (unsigned seed = 0; seed < 4; ++seed) {
            Tables t = makeTables(kAllToAll, n, 0, ragged, seed + 31 * (unsigned)n);
            Tables w = t;
            if (walkOwnCounts) w.recv = w.send; // the receiver takes its own send counts
            if (!simulate(t, 2, channels, 4, 2, fn, walkOwnCounts ? &w : nullptr).empty()) return true;
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

START_TEST(mutations_fail) {
    ck_assert_msg(someCaseFails(wrongPeer, false), "receiving from the wrong peer was not caught");
    ck_assert_msg(someCaseFails(noLocalCopy, false), "a dropped local block was not caught");
    ck_assert_msg(someCaseFails(chunkOffByOne, false), "a chunk written one element early was not caught");
    ck_assert_msg(someCaseFails(plainOp, true, true), "a receiver walking its own send counts was not caught");
    ck_assert_msg(someCaseFails(wrongChannel, false, false, 3), "a send on another channel of the pair was not caught");
    ck_assert_msg(someCaseFails(chunkOffByOne, false, false, 3), "an off-by-one chunk on 3 channels was not caught");
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
    // core/peer_conns.h: channels and slot shapes per rank count, for every
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

Suite *exchange_schedule_suite(void) {
    Suite *s = suite_create("exchange_schedule");
    TCase *tc = tcase_create("exchange_schedule");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, alltoall_matches_reference);
    tcase_add_test(tc, alltoallv_matches_reference);
    tcase_add_test(tc, gather_and_gatherv_match_reference);
    tcase_add_test(tc, scatter_and_scatterv_match_reference);
    tcase_add_test(tc, mutations_fail);
    tcase_add_test(tc, pairs_meet_in_one_round_on_both_ends);
    tcase_add_test(tc, all_peer_fifos_stay_within_budget);
    suite_add_tcase(s, tc);
    return s;
}
