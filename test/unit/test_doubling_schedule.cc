// The doubling family (src/device/edges/doubling_schedule.h through
// edge_schedule.h: binomial broadcast and reduce, recursive-doubling
// allgather, recursive-halving reduce_scatter) on the one simulator: 1..70
// ranks (powers of two and ranks with extras), roots below p and among the
// extras, awkward counts and chunks, FIFOs of depth 1..4, allgather in
// place; each result against the collective's definition, the host's step
// counts against the walk. Mutated schedules must fail: ranks that disagree
// on the root, and a rank that takes two chunks of one edge out of order.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "edge_sim.h"
#include "sim_ranks.h"
#include "unit_suites.h"

using namespace loom;
using namespace loom::sim;

namespace {

const char *const kNames[] = {"broadcast", "reduce", "allgather", "reduce_scatter"};

struct Mutation {
    int rank = -1;       // this rank's schedule is changed
    int root = -1;       // ... to believe this root
    bool swap = false;   // ... or to swap two sends or two receives of one edge (different chunks)
};

std::string simulate(int coll, int n, size_t count, size_t chunk, int depth, int root, bool inPlace = false,
                     const Mutation &m = Mutation()) {
    std::vector<EdgeSched> sched(n);
    std::vector<Rank> ranks;
    std::vector<std::pair<size_t, size_t>> swapped(n, {0, 0});
    for (int r = 0; r < n; ++r) {
        EdgeSched &s = sched[r];
        s = EdgeSched{};
        s.algo = kEdgeDoubling;
        s.count = count;
        s.elemBytes = 8;
        s.chunkElems = chunk;
        s.dbl = dblRole(coll, r, n, r == m.rank && m.root >= 0 ? m.root : root, count, chunk, rdStepSlot(0));
        ranks.push_back(edgeRank(s, rdPorts(r, n)));
        Rank &k = ranks.back();
        const size_t whole = count * (size_t)n;
        k.in.resize(coll == loomCollReduceScatter ? whole : count);
        for (size_t i = 0; i < k.in.size(); ++i) k.in[i] = input(r, i);
        k.out.assign(coll == loomCollAllGather ? whole : count, kUntouched);
        k.acc.assign(dblAccElems(s.dbl), kUntouched);
        if (inPlace && coll == loomCollAllGather) {
            k.inPlace = true;
            k.inOffset = (size_t)r * count;
            std::copy(k.in.begin(), k.in.end(), k.out.begin() + k.inOffset);
        }
        if (r == m.rank && m.swap) { // the first two sends or receives of one edge with different keys
            const size_t ops = edgeOpCount(s, 0);
            for (size_t a = 0; a < ops && !swapped[r].second; ++a)
                for (size_t b = a + 1; b < ops; ++b) {
                    const EdgeOp x = edgeSchedOp(s, 0, a), y = edgeSchedOp(s, 0, b);
                    const bool sameEdge = (x.recv >= 0 && x.recv == y.recv) || (x.send >= 0 && x.send == y.send);
                    if (sameEdge && x.key != y.key) {
                        swapped[r] = {a, b};
                        break;
                    }
                }
            if (!swapped[r].second) return "nothing to swap";
            const std::pair<size_t, size_t> w = swapped[r];
            k.op = [&s, w](int lane, size_t i) {
                return edgeSchedOp(s, lane, i == w.first ? w.second : i == w.second ? w.first : i);
            };
        }
    }
    Run run = execute(ranks, depth, chunk, sum);
    if (!run.error.empty()) return run.error;
    for (int r = 0; r < n; ++r) {
        if (!hostCountsMatch(sched[r], run, r)) return "rank " + std::to_string(r) + ": host counts differ";
        const std::vector<Value> &out = ranks[r].out;
        for (size_t i = 0; i < out.size(); ++i) {
            Value want = kUntouched;
            switch (coll) {
            case loomCollBroadcast: want = input(root, i); break;
            case loomCollReduce:
                if (r != root) break;
                want = 0;
                for (int q = 0; q < n; ++q) want += input(q, i);
                break;
            case loomCollAllGather: want = input((int)(i / count), i % count); break;
            default:
                want = 0;
                for (int q = 0; q < n; ++q) want += input(q, (size_t)r * count + i);
            }
            if (out[i] != want) return "rank " + std::to_string(r) + " element " + std::to_string(i) + " wrong";
        }
    }
    return "";
}

void runMatrix(int coll) {
    for (int n = 1; n <= simRanks(70); n += (n < 18 ? 1 : 13)) {
        int p = 1;
        while (p * 2 <= n) p *= 2;
        std::vector<int> roots = {0, n - 1, n / 2};
        if (p < n) roots.push_back(p); // an extra
        for (int root : roots)
            for (size_t count : {(size_t)1, (size_t)5, (size_t)37})
                for (size_t chunk : {(size_t)3, (size_t)8})
                    for (int depth : {1, 2, 4})
                        for (bool inPlace : {false, true}) {
                            if (inPlace && coll != loomCollAllGather) continue;
                            const std::string err = simulate(coll, n, count, chunk, depth, root, inPlace);
                            ck_assert_msg(err.empty(), "%s: %d ranks, root %d, %zu elements, chunk %zu, depth %d%s: %s",
                                          kNames[coll], n, root, count, chunk, depth, inPlace ? ", in place" : "",
                                          err.c_str());
                        }
    }
}

} // namespace

START_TEST(doubling_broadcast) { runMatrix(loomCollBroadcast); }
END_TEST
START_TEST(doubling_reduce) { runMatrix(loomCollReduce); }
END_TEST
START_TEST(doubling_allgather) { runMatrix(loomCollAllGather); }
END_TEST
START_TEST(doubling_reduce_scatter) { runMatrix(loomCollReduceScatter); }
END_TEST

START_TEST(mutated_schedules_fail) {
    for (int coll : {loomCollBroadcast, loomCollReduce, loomCollAllGather, loomCollReduceScatter})
        for (int n : {2, 3, 5, 8, 13}) {
            // Ranks that disagree on the root (rooted calls).
            if (coll == loomCollBroadcast || coll == loomCollReduce)
                for (int r = 0; r < n; ++r) {
                    Mutation m;
                    m.rank = r;
                    m.root = 1; // the real root is 0
                    const DblRole mine = dblRole(coll, r, n, 0, 37, 8, 0), wrong = dblRole(coll, r, n, 1, 37, 8, 0);
                    bool differs = dblOpCount(mine) != dblOpCount(wrong);
                    for (size_t i = 0; !differs && i < dblOpCount(mine); ++i) {
                        const EdgeOp a = dblOp(mine, i), b = dblOp(wrong, i);
                        differs = a.recv != b.recv || a.send != b.send || a.src != b.src || a.dst != b.dst;
                    }
                    if (!differs) continue; // this rank's part does not depend on the root
                    ck_assert_msg(!simulate(coll, n, 37, 8, 2, 0, false, m).empty(),
                                  "%s, %d ranks: rank %d believing root 1 passed", kNames[coll], n, r);
                }
            // Two chunks of one edge taken out of order.
            for (int r = 0; r < n; ++r) {
                Mutation m;
                m.rank = r;
                m.swap = true;
                const std::string err = simulate(coll, n, 37, 8, 2, 0, false, m);
                ck_assert_msg(!err.empty() && err != "nothing to swap", "%s, %d ranks: rank %d swapped passed (%s)",
                              kNames[coll], n, r, err.c_str());
            }
        }
}
END_TEST

Suite *doubling_schedule_suite(void) {
    Suite *s = suite_create("doubling_schedule");
    TCase *tc = tcase_create("doubling_schedule");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, doubling_broadcast);
    tcase_add_test(tc, doubling_reduce);
    tcase_add_test(tc, doubling_allgather);
    tcase_add_test(tc, doubling_reduce_scatter);
    tcase_add_test(tc, mutated_schedules_fail);
    suite_add_tcase(s, tc);
    return s;
}
