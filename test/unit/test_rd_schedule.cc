// Recursive-doubling allreduce schedules (src/device/edges/rd_schedule.h through
// edge_schedule.h) on the one simulator: 1..70 ranks (powers of two and
// ranks with extras), FIFOs of depth 1 and 4. With a sum every rank must end
// with the total; with an op that neither commutes nor associates every rank
// must still end with the same bits (both ends of an exchange reduce alike).
#include <cstdint>
#include <vector>

#include "edge_sim.h"
#include "sim_ranks.h"
#include "unit_suites.h"

using namespace loom;
using namespace loom::sim;

namespace {

// Every rank's output, or the failure in *err. swapRank >= 0: that rank
// takes its first two receives on one edge in the opposite order (a mutation).
std::vector<std::vector<Value>> simulate(int n, size_t count, size_t chunkElems, int depth, const Combine &op,
                                         std::string *err, int swapRank = -1) {
    std::vector<EdgeSched> sched(n);
    std::vector<Rank> ranks;
    for (int r = 0; r < n; ++r) {
        EdgeSched &s = sched[r];
        s = EdgeSched{};
        s.algo = kEdgeRdAllReduce;
        s.count = count;
        s.elemBytes = 8;
        s.chunkElems = chunkElems;
        s.rd = rdRoleOf(r, n);
        ranks.push_back(edgeRank(s, rdPorts(r, n)));
        if (r == swapRank) {
            size_t a = 0, b = 0;
            for (size_t i = 0, ops = edgeOpCount(s, 0); i < ops && !b; ++i)
                for (size_t k = i + 1; k < ops; ++k) {
                    const EdgeOp x = edgeSchedOp(s, 0, i), y = edgeSchedOp(s, 0, k);
                    if (x.recv >= 0 && x.recv == y.recv && x.key != y.key) {
                        a = i, b = k;
                        break;
                    }
                }
            ranks.back().op = [&s, a, b](int lane, size_t i) {
                return edgeSchedOp(s, lane, i == a ? b : i == b ? a : i);
            };
        }
        ranks.back().in.resize(count);
        for (size_t i = 0; i < count; ++i) ranks.back().in[i] = input(r, i);
        ranks.back().out.assign(count, kUntouched);
    }
    Run run = execute(ranks, depth, chunkElems, op);
    *err = run.error;
    for (int r = 0; r < n && err->empty(); ++r)
        if (!hostCountsMatch(sched[r], run, r)) *err = "host counts differ";
    std::vector<std::vector<Value>> out;
    for (const Rank &k : ranks) out.push_back(k.out);
    return out;
}

} // namespace

START_TEST(recursive_doubling_sums_on_every_rank) {
    for (int n = 1; n <= simRanks(70); ++n)
        for (size_t count : {(size_t)1, (size_t)5, (size_t)64})
            for (int depth : {1, 4}) {
                std::string err;
                auto out = simulate(n, count, 8, depth, sum, &err);
                ck_assert_msg(err.empty(), "%d ranks, %zu elements, depth %d: %s", n, count, depth, err.c_str());
                for (size_t i = 0; i < count; ++i) {
                    Value want = 0;
                    for (int q = 0; q < n; ++q) want += input(q, i);
                    for (int r = 0; r < n; ++r) ck_assert_int_eq(out[r][i], want);
                }
            }
}
END_TEST

START_TEST(every_rank_ends_with_the_same_bits) {
    // a*3 + b: neither commutes nor associates, like a float min of -0 and
    // +0 or a sum that rounds. Identical results need both ends of every
    // exchange (and a host and its extra) to reduce in the same order.
    auto op = [](Value a, Value b) { return a * 3 + b; };
    for (int n = 2; n <= simRanks(70); ++n) {
        std::string err;
        auto out = simulate(n, 37, 8, 2, op, &err);
        ck_assert_msg(err.empty(), "%d ranks: %s", n, err.c_str());
        for (int r = 1; r < n; ++r) ck_assert_msg(out[r] == out[0], "%d ranks: rank %d differs from rank 0", n, r);
    }
}
END_TEST

START_TEST(a_rank_taking_chunks_out_of_order_fails) {
    for (int n : {2, 3, 4, 6, 8, 13})
        for (int r = 0; r < n; ++r) {
            std::string err;
            simulate(n, 37, 8, 2, sum, &err, r);
            ck_assert_msg(!err.empty(), "%d ranks: rank %d's swapped receives passed", n, r);
        }
}
END_TEST

Suite *rd_schedule_suite(void) {
    Suite *s = suite_create("rd_schedule");
    TCase *tc = tcase_create("rd_schedule");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, recursive_doubling_sums_on_every_rank);
    tcase_add_test(tc, every_rank_ends_with_the_same_bits);
    tcase_add_test(tc, a_rank_taking_chunks_out_of_order_fails);
    suite_add_tcase(s, tc);
    return s;
}
