// Schedule simulation of every ring collective (ring_sim.h): 1..64 ranks,
// ring orders other than rank order, channels on several rings, every root, several channels, awkward
// counts, FIFOs of depth 2 (LOOM_NSLOTS's least) and 4; and mutated
// schedules that must fail. (Depth 1 deadlocks the ring by design: a step
// that receives and sends needs room for its send before its receive frees
// the peer's slot.)
#include <cstdint>
#include <random>
#include <vector>

#include "ring_sim.h"
#include "sim_ranks.h"
#include "unit_suites.h"

using namespace loom;
using namespace loom::sim;

namespace {

const char *const kNames[] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"};

std::vector<int> shuffledOrder(int n, unsigned seed) {
    std::vector<int> o(n);
    for (int i = 0; i < n; ++i) o[i] = i;
    std::mt19937 rng(seed);
    std::shuffle(o.begin(), o.end(), rng);
    return o;
}

void runMatrix(int coll) {
    const size_t counts[] = {0, 1, 3, 7, 16, 63, 1000, 4099};
    const int channels[] = {1, 3};
    const size_t slots[] = {4, 12};
    for (int n = 1; n <= simRanks(64); n += (n < 8 ? 1 : 14))
        for (size_t count : counts)
            for (int nch : channels)
                for (size_t slot : slots)
                    for (int depth = 2; depth <= (n <= 8 ? 4 : 2); depth += 2) {
                        Case k{coll, n, nch, count, slot, 4, depth, (int)(count % n), shuffledOrder(n, (unsigned)count + n), {}, {}, {}};
                        std::string err = simulate(k);
                        if (!err.empty())
                            ck_abort_msg("%s: nranks %d channels %d count %zu slot %zu depth %d root %d: %s",
                                         kNames[coll], n, nch, count, slot, depth, k.root, err.c_str());
                    }
}

// Mutations: each must make some case fail.
RingStep recvBeforeSend(int coll, int pos, int rootPos, int n, int s) {
    RingStep st = ringCollStep(coll, pos, rootPos, n, s);
    if (s == 0 && pos == 0) st = ringCollStep(coll, pos, rootPos, n, n > 2 ? 1 : s);
    return st;
}
RingStep wrongBlock(int coll, int pos, int rootPos, int n, int s) {
    RingStep st = ringCollStep(coll, pos, rootPos, n, s);
    if (s == 1) st.chunk = ringMod(st.chunk + 1, n);
    return st;
}
RingStep noReduce(int coll, int pos, int rootPos, int n, int s) {
    RingStep st = ringCollStep(coll, pos, rootPos, n, s);
    if (pos == 1) st.reduce = false;
    return st;
}
RingStep reversedChain(int coll, int pos, int rootPos, int n, int s) {
    return ringCollStep(coll, pos, ringMod(rootPos + 1, n), n, s); // the chain starts one position late
}

bool someCaseFails(int coll, StepFn fn) {
    for (int n = 2; n <= 9; ++n)
        for (size_t count : {1, 7, 100, 1000})
            for (int root : {0, n - 1}) {
                Case k{coll, n, 2, count, 8, 4, 2, root, shuffledOrder(n, 7), {}, {}, {}};
                if (!simulate(k, fn).empty()) return true;
            }
    return false;
}

// Ragged blocks: random counts (some 0, some far larger than the rest) and,
// for allgather, displacements in a shuffled order with gaps.
Case raggedCase(int coll, int n, int nch, size_t slot, int depth, unsigned seed) {
    std::mt19937 rng(seed);
    Case k{coll, n, nch, 0, slot, 4, depth, 0, shuffledOrder(n, seed), {}, {}, {}};
    for (int q = 0; q < n; ++q) {
        const unsigned kind = rng() % 4;
        k.counts.push_back(kind == 0 ? 0 : kind == 1 ? rng() % 5 : kind == 2 ? rng() % 200 : rng() % 3000);
    }
    std::vector<int> place = shuffledOrder(n, seed * 7 + 1);
    k.displs.assign(n, 0);
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
        const int q = coll == loomCollAllGather ? place[i] : i;
        k.displs[q] = at;
        at += k.counts[q] + (coll == loomCollAllGather ? rng() % 3 : 0);
    }
    return k;
}

void runRagged(int coll) {
    for (int n = 1; n <= simRanks(64); n += (n < 9 ? 1 : 11))
        for (int nch : {1, 3})
            for (size_t slot : {4, 12, 64})
                for (unsigned seed = 0; seed < 6; ++seed) {
                    Case k = raggedCase(coll, n, nch, slot, 2 + (int)(seed % 2) * 2, seed * 131 + n);
                    std::string err = simulate(k);
                    if (!err.empty())
                        ck_abort_msg("%s ragged: nranks %d channels %d slot %zu seed %u: %s", kNames[coll], n, nch, slot,
                                     seed, err.c_str());
                }
}

// Channels on different rings (the topology's ring c % nrings, or
// LOOM_RINGS): every collective, equal and ragged blocks, every root.
Case severalRingsCase(int coll, int n, int nrings, int nch, size_t count, int root, unsigned seed) {
    Case k = coll == loomCollReduceScatter || coll == loomCollAllGather ? raggedCase(coll, n, nch, 12, 2, seed)
                                                                  : Case{coll, n, nch, count, 12, 4, 2, root, {}, {}, {}, {}};
    if (seed % 2 == 0) { // equal blocks half the time
        k.counts.clear();
        k.displs.clear();
        k.count = count;
    }
    k.root = root;
    for (int r = 0; r < nrings; ++r) k.rings.push_back(shuffledOrder(n, seed * 17 + (unsigned)r));
    return k;
}

void runSeveralRings(int coll) {
    for (int n : {2, 3, 4, 5, 8, 13, 33}) {
        if (n > simRanks(33)) continue;
        for (int nrings : {2, 3})
            for (int nch : {2, 3, 5})
                for (size_t count : {1, 7, 1000, 4099})
                    for (int root : {0, n / 2, n - 1}) {
                        const unsigned seed = (unsigned)(n * 1000 + nrings * 100 + nch * 10) + (unsigned)count + root;
                        Case k = severalRingsCase(coll, n, nrings, nch, count, root, seed);
                        std::string err = simulate(k);
                        if (!err.empty())
                            ck_abort_msg("%s on %d rings: nranks %d channels %d count %zu root %d seed %u: %s",
                                         kNames[coll], nrings, n, nch, count, root, seed, err.c_str());
                    }
    }
}

// The LL ring: consecutive allreduce calls through the kernels' flow control
// (simulateRingCalls). 1048579 floats at 2 ranks on 16 channels of 64 KiB LL
// slots (8192 floats of data each) leave every channel but the last a fifth
// round whose second chunk is empty: its receiver counted it before its
// sender got there, and a credit test that wraps (sendStep - head < nslots)
// stalled the sender for good, the GPU's 'the next calls time out'.
const std::vector<RingSimCall> kLLRagged = {{1048579, 16}, {1048579, 16}, {1000, 1}, {1048576, 16}, {1048579, 16}};

bool wrappingCredit(uint64_t sendStep, uint64_t head, int nslots) { return sendStep - head < (uint64_t)nslots; }

} // namespace

START_TEST(ll_ring_ragged_allreduce_then_next_calls) {
    for (unsigned seed = 0; seed < 8; ++seed) {
        const std::string err = simulateRingCalls(2, kLLRagged, 8192, 4, 4, seed);
        if (!err.empty()) ck_abort_msg("LL ring, 2 ranks, seed %u: %s", seed, err.c_str());
    }
}
END_TEST

START_TEST(ll_ring_calls_match_reference) {
    // Awkward counts in a row (empty chunks at every rank count), small slots, depth 2 and 4, LL and Simple.
    for (int n = 2; n <= 9; n += (n < 5 ? 1 : 4))
        for (size_t slot : {4, 12})
            for (int depth : {2, 4})
                for (unsigned seed = 0; seed < 4; ++seed)
                    for (bool ll : {true, false}) {
                        const std::vector<RingSimCall> calls = {{1, 1}, {7, 3}, {63, 2}, {1000, 3}, {4099, 3}, {3, 1}};
                        const std::string err = simulateRingCalls(n, calls, slot, 4, depth, seed, ll);
                        if (!err.empty())
                            ck_abort_msg("%s ring: nranks %d slot %zu depth %d seed %u: %s", ll ? "LL" : "Simple", n,
                                         slot, depth, seed, err.c_str());
                    }
}
END_TEST

// LL128 runs the same flow as LL (lines carry their flags; an empty step
// needs none), on slots of 120/128 of their bytes: 64 KiB slots carry 15360
// floats. Counts around that slot and its multiples at 2 and 4 ranks.
START_TEST(ll128_ring_calls_match_reference) {
    const size_t slotElems = ringSlotDataBytes(kProtoLL128, 64 << 10) / sizeof(float);
    ck_assert_int_eq(slotElems, 15360);
    for (int n : {2, 4})
        for (unsigned seed = 0; seed < 2; ++seed) {
            const std::vector<RingSimCall> calls = {
                {slotElems * 16 * (size_t)n + 3, 16}, {slotElems - 1, 4}, {1, 1}, {slotElems * 33 + 7, 16}, {5, 2}};
            const std::string err = simulateRingCalls(n, calls, slotElems, 4, 4, seed, true);
            if (!err.empty()) ck_abort_msg("LL128 ring: nranks %d seed %u: %s", n, seed, err.c_str());
        }
}
END_TEST

START_TEST(ll_ring_wrapping_credit_deadlocks) {
    // The credit test the kernels had must be caught; Simple never runs a
    // receiver ahead of its sender, so it passes there.
    bool caught = false;
    for (unsigned seed = 0; seed < 8 && !caught; ++seed)
        caught = simulateRingCalls(2, kLLRagged, 8192, 4, 4, seed, true, wrappingCredit).find("deadlock") !=
                 std::string::npos;
    ck_assert_msg(caught, "a wrapping credit test passed the ragged LL calls");
    for (unsigned seed = 0; seed < 4; ++seed)
        ck_assert(simulateRingCalls(2, kLLRagged, 8192, 4, 4, seed, false, wrappingCredit).empty());
}
END_TEST

START_TEST(several_rings_match_reference) {
    for (int coll = 0; coll < LOOM_TABLE_COLLS; ++coll) runSeveralRings(coll);
}
END_TEST

START_TEST(walking_the_first_ring_on_every_channel_fails) {
    // A kernel or host that took ring 0's positions for every channel while
    // the connections follow each channel's ring must be caught.
    for (int coll = 0; coll < LOOM_TABLE_COLLS; ++coll) {
        bool caught = false;
        for (int n = 3; n <= 6 && !caught; ++n)
            for (unsigned seed = 0; seed < 8 && !caught; ++seed) {
                Case k = severalRingsCase(coll, n, 2, 2, 100, 1, seed);
                k.walkFirstRing = true;
                caught = !simulate(k).empty();
            }
        ck_assert_msg(caught, "%s: a walk on the first ring's positions passed", kNames[coll]);
    }
}
END_TEST

START_TEST(ragged_reduce_scatter_matches_reference) { runRagged(loomCollReduceScatter); }
END_TEST
START_TEST(ragged_allgather_matches_reference) { runRagged(loomCollAllGather); }
END_TEST

START_TEST(ragged_mutation_fails) {
    // A walk whose geometry ignores the ragged counts (every block taken as
    // long as block 0) must give wrong answers somewhere.
    for (int coll : {loomCollReduceScatter, loomCollAllGather}) {
        bool caught = false;
        for (unsigned seed = 0; seed < 20 && !caught; ++seed) {
            Case k = raggedCase(coll, 5, 2, 12, 2, seed);
            k.walkCounts.assign(k.counts.size(), k.counts[0]);
            caught = !simulate(k).empty();
        }
        ck_assert_msg(caught, "%s: a walk over equal blocks passed ragged tables", kNames[coll]);
    }
}
END_TEST

START_TEST(allreduce_matches_reference) { runMatrix(loomCollAllReduce); }
END_TEST
START_TEST(reduce_scatter_matches_reference) { runMatrix(loomCollReduceScatter); }
END_TEST
START_TEST(allgather_matches_reference) { runMatrix(loomCollAllGather); }
END_TEST
START_TEST(broadcast_matches_reference) { runMatrix(loomCollBroadcast); }
END_TEST
START_TEST(reduce_matches_reference) { runMatrix(loomCollReduce); }
END_TEST

START_TEST(mutations_fail) {
    for (int coll = 0; coll < LOOM_TABLE_COLLS; ++coll) {
        if (coll == loomCollAllReduce || coll == loomCollReduceScatter || coll == loomCollAllGather) {
            ck_assert_msg(someCaseFails(coll, recvBeforeSend), "%s: recv-before-send not caught", kNames[coll]);
            ck_assert_msg(someCaseFails(coll, wrongBlock), "%s: wrong block not caught", kNames[coll]);
        } else {
            ck_assert_msg(someCaseFails(coll, reversedChain), "%s: shifted chain not caught", kNames[coll]);
        }
        if (coll == loomCollAllReduce || coll == loomCollReduceScatter || coll == loomCollReduce)
            ck_assert_msg(someCaseFails(coll, noReduce), "%s: dropped reduction not caught", kNames[coll]);
    }
}
END_TEST

START_TEST(depth_one_deadlocks) {
    // The simulator must see a deadlock when there is one (ring, depth 1).
    Case k{loomCollAllReduce, 3, 1, 100, 8, 4, 1, 0, {}, {}, {}, {}};
    ck_assert(simulate(k).find("deadlock") != std::string::npos);
}
END_TEST

START_TEST(send_and_receive_counts_differ_on_chains) {
    // The reason connections count both directions apart: a broadcast's
    // root only sends, the chain's end only receives.
    RingGeom g = ringGeom(loomCollBroadcast, RingBlocks{nullptr, nullptr, 1000}, 4, 1, 0, 100, 4);
    unsigned long long s, r;
    ringCallSteps(loomCollBroadcast, 2, 2, 4, g, &s, &r);
    ck_assert(s == g.rounds && r == 0);
    ringCallSteps(loomCollBroadcast, 1, 2, 4, g, &s, &r);
    ck_assert(s == 0 && r == g.rounds);
    ringCallSteps(loomCollReduce, 3, 2, 4, g, &s, &r); // the rank after the root starts the chain
    ck_assert(s == g.rounds && r == 0);
    ringCallSteps(loomCollReduce, 2, 2, 4, g, &s, &r);
    ck_assert(s == 0 && r == g.rounds);
}
END_TEST

Suite *ring_schedule_suite(void) {
    Suite *s = suite_create("ring_schedule");
    TCase *tc = tcase_create("ring_schedule");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, allreduce_matches_reference);
    tcase_add_test(tc, reduce_scatter_matches_reference);
    tcase_add_test(tc, allgather_matches_reference);
    tcase_add_test(tc, broadcast_matches_reference);
    tcase_add_test(tc, reduce_matches_reference);
    tcase_add_test(tc, mutations_fail);
    tcase_add_test(tc, ragged_reduce_scatter_matches_reference);
    tcase_add_test(tc, ragged_allgather_matches_reference);
    tcase_add_test(tc, ragged_mutation_fails);
    tcase_add_test(tc, send_and_receive_counts_differ_on_chains);
    tcase_add_test(tc, depth_one_deadlocks);
    tcase_add_test(tc, several_rings_match_reference);
    tcase_add_test(tc, walking_the_first_ring_on_every_channel_fails);
    tcase_add_test(tc, ll_ring_ragged_allreduce_then_next_calls);
    tcase_add_test(tc, ll_ring_calls_match_reference);
    tcase_add_test(tc, ll128_ring_calls_match_reference);
    tcase_add_test(tc, ll_ring_wrapping_credit_deadlocks);
    suite_add_tcase(s, tc);
    return s;
}
