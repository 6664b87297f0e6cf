// Simulation of the one-shot schedules (device/oneshot/oneshot_schedule.h) on the CPU.
//  1. Results: every collective, 1..8 ranks, every root, awkward sizes: the
//     pieces the schedule sends, combined by the kernel's rules, equal a
//     reference computed from the collective's definition.
//  2. Slot safety: random sequences of one-shot calls (random collectives and
//     roots) run by ranks that advance independently in a random order over
//     slots of two parities; no rank may overwrite a line its owner has not
//     read, and no sequence may deadlock.
//  3. alltoall with every rank's own tables (ragged blocks, zeros, gaps, the
//     receive blocks reversed; gather and scatter shapes): what each rank
//     expects from a peer is what that peer sends it.
//  4. V-form sequences: one-shot calls mixed with exchanges whose small
//     pairs pass one-shot lines and whose others pass FIFO blocks, each rank
//     on the one-shot or the exchange kernel by its own pairs: no overwrite,
//     no deadlock.
//  Mutations must fail: a schedule without token lines overwrites unread
//  lines; a wrong reduce_scatter offset gives wrong results; an alltoall
//  sending its own block to every peer, or a receiver that files a block
//  under its sender's displacement, gives wrong results; an exchange kernel
//  that passes nothing on an empty pair overwrites unread lines, one that
//  takes no flag deadlocks.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "device/oneshot/oneshot_schedule.h"
#include "unit_suites.h"

using namespace loom;

namespace {

// memcpy that accepts empty (possibly null) ranges.
void copyBytes(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}

using PieceFn = std::function<OneShotPiece(int coll, int from, int to, int root, const OneShotBlocks &b)>;

PieceFn schedule() {
    return [](int c, int f, int t, int r, const OneShotBlocks &b) { return oneShotPiece(c, f, t, r, b); };
}

// Runs one call over host buffers as the kernel does, on uint32 elements
// (SUM) for reductions and raw bytes for data movement. Ragged blocks:
// counts/displs (bytes, multiples of 4) for reduce_scatter and allgather.
// Returns "" or why not.
std::string runCall(int coll, int n, int root, size_t bytes, const PieceFn &piece,
                    const std::vector<size_t> &counts = {}, const std::vector<size_t> &displs = {}) {
    const OneShotBlocks blocks = {counts.empty() ? nullptr : counts.data(), counts.empty() ? nullptr : displs.data(),
                                  bytes};
    size_t whole = 0; // reduce_scatter's input, allgather's output
    for (int q = 0; q < n; ++q) whole = std::max(whole, oneShotBlockDispl(blocks, q) + oneShotBlockBytes(blocks, q));
    const size_t inBytes = coll == loomCollReduceScatter || coll == loomCollAllToAll ? whole
                         : coll == loomCollAllGather ? oneShotBlockBytes(blocks, 0) : bytes;
    std::vector<std::vector<uint8_t>> in(n), out(n);
    std::mt19937 rng(coll * 131 + n * 17 + root + (unsigned)bytes);
    for (int r = 0; r < n; ++r) {
        in[r].resize(coll == loomCollAllGather ? oneShotBlockBytes(blocks, r) : inBytes);
        for (auto &b : in[r]) b = (uint8_t)rng();
    }
    // msg[from][to]: the bytes of the piece (token: empty).
    std::vector<std::vector<std::vector<uint8_t>>> msg(n, std::vector<std::vector<uint8_t>>(n));
    for (int f = 0; f < n; ++f)
        for (int t = 0; t < n; ++t) {
            if (f == t) continue;
            OneShotPiece p = piece(coll, f, t, root, blocks);
            if (p.offset + p.bytes > in[f].size()) return "piece past the input";
            msg[f][t].assign(in[f].begin() + p.offset, in[f].begin() + p.offset + p.bytes);
        }
    auto sum32 = [](std::vector<uint8_t> &acc, const uint8_t *v) {
        for (size_t i = 0; i + 4 <= acc.size(); i += 4) {
            uint32_t a, b;
            copyBytes(&a, &acc[i], 4);
            copyBytes(&b, v + i, 4);
            a += b;
            copyBytes(&acc[i], &a, 4);
        }
    };
    for (int me = 0; me < n; ++me) {
        out[me].assign(coll == loomCollAllGather || coll == loomCollAllToAll ? whole
                       : (coll == loomCollReduce && me != root) ? 0
                       : coll == loomCollReduceScatter ? oneShotBlockBytes(blocks, me) : bytes, 0);
        if (oneShotReduces(coll, me, root)) {
            const size_t own = piece(coll, me, me, root, blocks).offset, rb = oneShotReducedBytes(coll, me, blocks);
            if (rb != out[me].size()) return "reduced size differs from the output";
            for (int q = 0; q < n; ++q) {
                const uint8_t *v = q == me ? in[me].data() + own : msg[q][me].data();
                if (q != me && msg[q][me].size() != rb) return "a reduction lacks a contribution";
                if (q == 0) copyBytes(out[me].data(), v, rb);
                else sum32(out[me], v);
            }
        } else if (coll == loomCollAllGather) {
            for (int q = 0; q < n; ++q) {
                const std::vector<uint8_t> &v = q == me ? in[me] : msg[q][me];
                if (v.size() != oneShotBlockBytes(blocks, q)) return "allgather block missing";
                copyBytes(out[me].data() + oneShotBlockDispl(blocks, q), v.data(), v.size());
            }
        } else if (coll == loomCollAllToAll) {
            for (int q = 0; q < n; ++q) {
                const size_t at = oneShotBlockDispl(blocks, me), b = oneShotBlockBytes(blocks, me);
                const uint8_t *v = q == me ? in[me].data() + at : msg[q][me].data();
                const size_t got = q == me ? b : msg[q][me].size();
                if (got != (q == me ? b : oneShotIncoming(coll, q, me, root, blocks))) return "alltoall block missing";
                copyBytes(out[me].data() + oneShotOutDispl(coll, blocks, q), v, got);
            }
        } else if (coll == loomCollBroadcast) {
            const std::vector<uint8_t> &v = me == root ? in[me] : msg[root][me];
            if (v.size() != bytes) return "broadcast payload missing";
            copyBytes(out[me].data(), v.data(), bytes);
        }
    }
    // Reference from the definitions.
    for (int me = 0; me < n; ++me) {
        std::vector<uint8_t> ref(out[me].size(), 0);
        if (coll == loomCollAllReduce || (coll == loomCollReduce && me == root) || coll == loomCollReduceScatter) {
            const size_t at = coll == loomCollReduceScatter ? oneShotBlockDispl(blocks, me) : 0;
            copyBytes(ref.data(), in[0].data() + at, ref.size());
            for (int q = 1; q < n; ++q) sum32(ref, in[q].data() + at);
        } else if (coll == loomCollAllGather) {
            for (int q = 0; q < n; ++q) copyBytes(ref.data() + oneShotBlockDispl(blocks, q), in[q].data(), in[q].size());
        } else if (coll == loomCollBroadcast) {
            ref = in[root];
        } else if (coll == loomCollAllToAll) {
            for (int q = 0; q < n; ++q)
                copyBytes(ref.data() + (size_t)q * bytes, in[q].data() + (size_t)me * bytes, bytes);
        }
        if (ref != out[me]) return "rank " + std::to_string(me) + ": wrong result";
    }
    return "";
}

// alltoall with per-rank tables: sc[f][t] bytes from rank f to rank t, the
// send blocks in rank order with gaps, the receive blocks in reverse rank
// order with gaps. `recvDisplOf`: where the receiver files a block (the
// schedule's oneShotOutDispl, or a mutation). Returns "" or why not.
using RecvDisplFn = std::function<size_t(const OneShotBlocks &b, int from)>;
std::string runAllToAll(const std::vector<std::vector<size_t>> &sc, unsigned seed, const PieceFn &piece,
                        const RecvDisplFn &recvDisplOf) {
    const int n = (int)sc.size();
    std::mt19937 rng(seed);
    std::vector<std::vector<size_t>> sd(n, std::vector<size_t>(n)), rc(n, std::vector<size_t>(n)),
        rd(n, std::vector<size_t>(n));
    std::vector<std::vector<uint8_t>> in(n), out(n), ref(n);
    for (int r = 0; r < n; ++r) {
        size_t at = rng() % 3;
        for (int q = 0; q < n; ++q) sd[r][q] = at, at += sc[r][q] + rng() % 5;
        in[r].resize(at);
        for (auto &b : in[r]) b = (uint8_t)rng();
        at = rng() % 3;
        for (int q = n - 1; q >= 0; --q) rc[r][q] = sc[q][r], rd[r][q] = at, at += rc[r][q] + rng() % 5;
        out[r].assign(at, 0xee);
    }
    for (int r = 0; r < n; ++r) { // the definition: rank q's block for r lands at r's displacement for q
        ref[r] = out[r];
        for (int q = 0; q < n; ++q) copyBytes(ref[r].data() + rd[r][q], in[q].data() + sd[q][r], sc[q][r]);
    }
    auto view = [&](int r) { return OneShotBlocks{sc[r].data(), sd[r].data(), 0, rc[r].data(), rd[r].data()}; };
    for (int me = 0; me < n; ++me) {
        const OneShotBlocks mine = view(me);
        for (int q = 0; q < n; ++q) {
            const uint8_t *v;
            size_t bytes;
            if (q == me) {
                v = in[me].data() + oneShotBlockDispl(mine, me);
                bytes = oneShotBlockBytes(mine, me);
            } else {
                const OneShotPiece p = piece(loomCollAllToAll, q, me, 0, view(q)); // in the sender's tables
                if (p.bytes != oneShotIncoming(loomCollAllToAll, q, me, 0, mine))
                    return "rank " + std::to_string(me) + " expects another size from rank " + std::to_string(q);
                if (p.offset + p.bytes > in[q].size()) return "piece past the input";
                v = in[q].data() + p.offset;
                bytes = p.bytes;
            }
            if (recvDisplOf(mine, q) + bytes > out[me].size()) return "block past the output";
            copyBytes(out[me].data() + recvDisplOf(mine, q), v, bytes);
        }
        if (out[me] != ref[me]) return "rank " + std::to_string(me) + ": wrong result";
    }
    return "";
}

RecvDisplFn recvDispls() {
    return [](const OneShotBlocks &b, int from) { return oneShotOutDispl(loomCollAllToAll, b, from); };
}

// Random alltoall(v), gather and scatter count matrices at n ranks.
std::vector<std::vector<size_t>> countMatrix(int n, int shape, std::mt19937 &rng) {
    std::vector<std::vector<size_t>> sc(n, std::vector<size_t>(n, 0));
    const int root = (int)(rng() % n);
    const size_t block = rng() % 40;
    for (int f = 0; f < n; ++f)
        for (int t = 0; t < n; ++t) {
            if (shape == 0) sc[f][t] = rng() % 4 == 0 ? 0 : rng() % 300; // alltoallv
            if (shape == 1 && t == root) sc[f][t] = block;                // gather
            if (shape == 2 && f == root) sc[f][t] = block;                // scatter
        }
    return sc;
}

// The slot-safety walk: calls 0..calls-1, each rank in them on its own,
// advancing in a random order (rng): a rank writes its call's lines (and
// queues its FIFO blocks), then waits for the lines and blocks meant for
// it, marks them read and moves on. passes(c, f, t, end): what pair f -> t
// passes in call c as rank `end` (f writing, t waiting) sees it: 'l' lines,
// 'f' a FIFO block, 0 nothing. takesFlag(c, r): whether rank r takes a
// one-shot flag for call c (its lines' tag; the tag's parity picks the
// slots). Returns "" or the first violation: an unread line overwritten, or
// a deadlock.
using PassFn = std::function<char(int c, int f, int t, int end)>;
using FlagFn = std::function<bool(int c, int r)>;
std::string walkSequence(int n, int calls, std::mt19937 &rng, const PassFn &passes, const FlagFn &takesFlag) {
    struct Slot { uint32_t tag = 0; bool read = true; };
    std::vector<std::vector<std::array<Slot, 2>>> slot(n, std::vector<std::array<Slot, 2>>(n)); // [owner][sender][parity]
    std::vector<std::vector<std::vector<int>>> fifo(n, std::vector<std::vector<int>>(n)); // [from][to]: calls queued
    std::vector<int> at(n, 0);         // the call each rank is in
    std::vector<bool> wrote(n, false); // its writes for that call are done
    std::vector<uint32_t> flag(n, 0), tag(n, 0); // flags taken; the current call's
    for (;;) {
        std::vector<int> ready;
        bool allDone = true;
        for (int r = 0; r < n; ++r) {
            if (at[r] == calls) continue;
            allDone = false;
            const int c = at[r];
            bool can = true;
            for (int q = 0; wrote[r] && q < n; ++q) {
                if (q == r) continue;
                const char kind = passes(c, q, r, r);
                if (kind == 'l' && slot[r][q][tag[r] & 1].tag != tag[r]) can = false;
                if (kind == 'f' && (fifo[q][r].empty() || fifo[q][r].front() != c)) can = false;
            }
            if (can) ready.push_back(r);
        }
        if (allDone) return "";
        if (ready.empty()) return "deadlock";
        const int r = ready[rng() % ready.size()], c = at[r];
        if (!wrote[r]) {
            if (takesFlag(c, r)) ++flag[r];
            tag[r] = flag[r];
            for (int q = 0; q < n; ++q) {
                if (q == r) continue;
                const char kind = passes(c, r, q, r);
                if (kind == 'f') fifo[r][q].push_back(c);
                if (kind != 'l') continue;
                Slot &s = slot[q][r][tag[r] & 1];
                if (!s.read) return "call " + std::to_string(c) + ": rank " + std::to_string(r) +
                                    " overwrote a line rank " + std::to_string(q) + " had not read";
                s.tag = tag[r];
                s.read = false;
            }
            wrote[r] = true;
        } else {
            for (int q = 0; q < n; ++q) {
                if (q == r) continue;
                const char kind = passes(c, q, r, r);
                if (kind == 'l') slot[r][q][tag[r] & 1].read = true;
                if (kind == 'f') fifo[q][r].erase(fifo[q][r].begin());
            }
            wrote[r] = false;
            ++at[r];
        }
    }
}

// Random one-shot calls (random collectives and roots); without tokens a
// pair with no payload passes nothing (a mutation).
std::string runSequence(int n, unsigned seed, int calls, bool tokens, const PieceFn &piece) {
    std::mt19937 rng(seed);
    std::vector<int> coll(calls), root(calls);
    for (int c = 0; c < calls; ++c) {
        coll[c] = (int)(rng() % kOneShotColls);
        root[c] = (int)(rng() % n);
    }
    const OneShotBlocks blocks = {nullptr, nullptr, 16};
    auto passes = [&](int c, int f, int t, int) -> char {
        const OneShotPiece p = piece(coll[c], f, t, root[c], blocks);
        return (tokens ? oneShotLines(p) : (p.bytes + 7) / 8) ? 'l' : 0;
    };
    return walkSequence(n, calls, rng, passes, [](int, int) { return true; });
}

// V-form sequences (exchange_schedule.h, one-shot pairs): one-shot calls
// mixed with v-form exchanges of random blocks (alltoallv, gatherv and
// scatterv shapes) whose pairs of at most `bound` bytes pass LL lines (a
// token when empty) and whose larger pairs pass a block through the
// exchange kernel's FIFOs, which its receiver awaits before its call ends
// (a queue here, credit aside). A rank all of whose pairs are one-shot runs
// the call on the one-shot kernel, any other on the exchange kernel; each
// rank takes a flag per call. Mutations: the exchange kernel passing nothing
// on an empty pair, or taking no flag.
enum VFormMutation { kVFormAsBuilt, kEmptyPairsSilent, kExchangeTakesNoFlag };
std::string runVFormSequence(int n, unsigned seed, int calls, size_t bound, VFormMutation m) {
    std::mt19937 rng(seed);
    std::vector<int> coll(calls), root(calls);
    std::vector<std::vector<std::vector<size_t>>> sc(calls); // v-form calls: bytes [from][to]
    for (int c = 0; c < calls; ++c) {
        const bool vform = rng() % 3 != 0;
        coll[c] = vform ? -1 : (int)(rng() % kOneShotColls);
        root[c] = (int)(rng() % n);
        if (!vform) continue;
        const int shape = (int)(rng() % 3);
        sc[c] = countMatrix(n, shape, rng);
        for (int f = 0; shape && f < n; ++f) // gathers and scatters: odd pairs' blocks past the bounds
            for (int t = 0; t < n; ++t) sc[c][f][t] *= (f + t) % 2 ? 10 : 1;
    }
    auto exchangeKernel = [&](int c, int r) { // some pair of r's is past the bound
        for (int q = 0; coll[c] < 0 && q < n; ++q)
            if (q != r && !(oneShotCarries(bound, sc[c][r][q]) && oneShotCarries(bound, sc[c][q][r]))) return true;
        return false;
    };
    auto passes = [&](int c, int f, int t, int end) -> char {
        if (coll[c] >= 0) return 'l';
        if (!oneShotCarries(bound, sc[c][f][t])) return 'f';
        return m == kEmptyPairsSilent && !sc[c][f][t] && exchangeKernel(c, end) ? 0 : 'l';
    };
    auto takesFlag = [&](int c, int r) { return !(m == kExchangeTakesNoFlag && exchangeKernel(c, r)); };
    return walkSequence(n, calls, rng, passes, takesFlag);
}

START_TEST(vform_sequences_never_overwrite_or_deadlock) {
    for (int n = 2; n <= 8; ++n)
        for (unsigned seed = 0; seed < 150; ++seed) {
            // 250: about half the ranks of an alltoallv have no pair past it (both kernels in one call)
            std::string err = runVFormSequence(n, seed, 40, seed % 2 ? 100 : 250, kVFormAsBuilt);
            if (!err.empty()) ck_abort_msg("n %d seed %u: %s", n, seed, err.c_str());
        }
    bool silent = false, noFlag = false;
    for (int n = 3; n <= 8; ++n)
        for (unsigned seed = 0; seed < 150; ++seed) {
            silent = silent || !runVFormSequence(n, seed, 40, seed % 2 ? 100 : 250, kEmptyPairsSilent).empty();
            noFlag = noFlag || !runVFormSequence(n, seed, 40, seed % 2 ? 100 : 250, kExchangeTakesNoFlag).empty();
        }
    ck_assert_msg(silent, "an exchange kernel passing nothing on empty pairs was not caught");
    ck_assert_msg(noFlag, "an exchange kernel taking no one-shot flag was not caught");
}
END_TEST

START_TEST(results_match_reference) {
    const size_t sizes[] = {4, 8, 12, 20, 64, 1000};
    for (int coll = 0; coll < kOneShotColls; ++coll)
        for (int n = 1; n <= 8; ++n)
            for (int root = 0; root < n; ++root)
                for (size_t bytes : sizes) {
                    std::string err = runCall(coll, n, root, bytes, schedule());
                    if (!err.empty())
                        ck_abort_msg("%s: n %d root %d bytes %zu: %s", loomCollName(coll), n, root, bytes, err.c_str());
                }
}
END_TEST

START_TEST(ragged_results_match_reference) {
    std::mt19937 rng(5);
    for (int coll : {loomCollReduceScatter, loomCollAllGather})
        for (int n = 1; n <= 8; ++n)
            for (int trial = 0; trial < 40; ++trial) {
                std::vector<size_t> counts(n), displs(n);
                for (int q = 0; q < n; ++q) counts[q] = 4 * (rng() % 3 == 0 ? 0 : rng() % 300);
                // allgather: blocks in a shuffled order with gaps; reduce_scatter: back to back
                std::vector<int> order(n);
                for (int q = 0; q < n; ++q) order[q] = q;
                if (coll == loomCollAllGather) std::shuffle(order.begin(), order.end(), rng);
                size_t at = 0;
                for (int q : order) displs[q] = at, at += counts[q] + (coll == loomCollAllGather ? 4 * (rng() % 2) : 0);
                std::string err = runCall(coll, n, 0, 0, schedule(), counts, displs);
                if (!err.empty()) ck_abort_msg("%s ragged: n %d trial %d: %s", loomCollName(coll), n, trial, err.c_str());
            }
}
END_TEST

START_TEST(alltoall_with_own_tables_matches_reference) {
    std::mt19937 rng(11);
    for (int n = 1; n <= 8; ++n)
        for (int shape = 0; shape < 3; ++shape)
            for (int trial = 0; trial < 30; ++trial) {
                std::string err = runAllToAll(countMatrix(n, shape, rng), rng(), schedule(), recvDispls());
                if (!err.empty()) ck_abort_msg("alltoall n %d shape %d trial %d: %s", n, shape, trial, err.c_str());
            }
}
END_TEST

START_TEST(every_pair_exchanges_a_line) {
    for (int coll = 0; coll < kOneShotColls; ++coll)
        for (int n = 2; n <= 8; ++n)
            for (int root = 0; root < n; ++root)
                for (int f = 0; f < n; ++f)
                    for (int t = 0; t < n; ++t)
                        if (f != t)
                            ck_assert_uint_ge(oneShotLines(oneShotPiece(coll, f, t, root, {nullptr, nullptr, 64})), 1);
}
END_TEST

START_TEST(sequences_never_overwrite_or_deadlock) {
    for (int n = 2; n <= 8; ++n)
        for (unsigned seed = 0; seed < 200; ++seed) {
            std::string err = runSequence(n, seed, 40, true, schedule());
            if (!err.empty()) ck_abort_msg("n %d seed %u: %s", n, seed, err.c_str());
        }
}
END_TEST

START_TEST(mutations_fail) {
    // No token lines: a broadcast's receivers race ahead of each other.
    bool caught = false;
    for (int n = 3; n <= 8 && !caught; ++n)
        for (unsigned seed = 0; seed < 200 && !caught; ++seed)
            caught = !runSequence(n, seed, 40, false, schedule()).empty();
    ck_assert_msg(caught, "a schedule without token lines passed the slot-safety walk");
    // Reduce_scatter sending every peer block 0.
    PieceFn wrongOffset = [](int c, int f, int t, int r, const OneShotBlocks &b) {
        OneShotPiece p = oneShotPiece(c, f, t, r, b);
        if (c == loomCollReduceScatter && f != t) p.offset = 0;
        return p;
    };
    ck_assert(!runCall(loomCollReduceScatter, 3, 0, 8, wrongOffset).empty());
    // Reduce whose root misses a contribution.
    PieceFn dropOne = [](int c, int f, int t, int r, const OneShotBlocks &b) {
        OneShotPiece p = oneShotPiece(c, f, t, r, b);
        if (c == loomCollReduce && f == 1) p.bytes = 0;
        return p;
    };
    ck_assert(!runCall(loomCollReduce, 3, 0, 8, dropOne).empty());
    // Alltoall sending every peer its own block; a receiver filing blocks in
    // rank order instead of at its receive displacements.
    PieceFn ownBlock = [](int c, int f, int t, int r, const OneShotBlocks &b) {
        OneShotPiece p = oneShotPiece(c, f, t, r, b);
        if (c == loomCollAllToAll) p.offset = oneShotBlockDispl(b, f);
        return p;
    };
    std::vector<std::vector<size_t>> sc(3, std::vector<size_t>(3, 16));
    ck_assert(!runAllToAll(sc, 1, ownBlock, recvDispls()).empty());
    RecvDisplFn rankOrder = [](const OneShotBlocks &b, int from) {
        size_t at = 0;
        for (int q = 0; q < from; ++q) at += b.rcounts[q];
        return at;
    };
    ck_assert(!runAllToAll(sc, 1, schedule(), rankOrder).empty());
    ck_assert(runAllToAll(sc, 1, schedule(), recvDispls()).empty()); // the unmutated run passes
}
END_TEST

} // namespace

Suite *oneshot_schedule_suite(void) {
    Suite *s = suite_create("oneshot_schedule");
    TCase *tc = tcase_create("oneshot_schedule");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, results_match_reference);
    tcase_add_test(tc, ragged_results_match_reference);
    tcase_add_test(tc, alltoall_with_own_tables_matches_reference);
    tcase_add_test(tc, every_pair_exchanges_a_line);
    tcase_add_test(tc, sequences_never_overwrite_or_deadlock);
    tcase_add_test(tc, vform_sequences_never_overwrite_or_deadlock);
    tcase_add_test(tc, mutations_fail);
    suite_add_tcase(s, tc);
    return s;
}
