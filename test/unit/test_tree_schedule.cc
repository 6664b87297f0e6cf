// Tree allreduce schedules (src/device/edges/tree_schedule.h through
// edge_schedule.h) on the one simulator: the double binary trees of
// topo/search.h and chains (the trees inside a host), 1..64 ranks, FIFOs of
// depth 1..4, lags below, at and above the depth, in place and not; every
// rank must end with the sum, and the host's step counts must be the walk's.
// A cycle of parents must be reported as a deadlock.
#include <cstdint>
#include <vector>

#include "edge_sim.h"
#include "topo/search.h"
#include "sim_ranks.h"
#include "unit_suites.h"

using namespace loom;
using namespace loom::sim;

namespace {

std::vector<TreeNode> nodesOf(const std::vector<int> &parent) {
    const int n = (int)parent.size();
    std::vector<TreeNode> t(n);
    for (int r = 0; r < n; ++r) t[r] = TreeNode{parent[r], 0, {-1, -1, -1}};
    for (int r = 0; r < n; ++r)
        if (parent[r] >= 0) {
            TreeNode &p = t[parent[r]];
            if (p.nchildren == kMaxTreeChildren) return {}; // not a tree loom can run
            p.children[p.nchildren++] = r;
        }
    return t;
}

// One allreduce of `count` 4-byte elements over the trees; "" or the failure.
std::string simulate(const std::vector<TreeNode> trees[2], size_t count, size_t chunkElems, int depth, size_t lag,
                     bool inPlace = false) {
    const int n = (int)trees[0].size();
    std::vector<EdgeSched> sched(n);
    std::vector<Rank> ranks;
    for (int r = 0; r < n; ++r) {
        EdgeSched &s = sched[r];
        s = EdgeSched{};
        s.algo = kEdgeTreeAllReduce;
        s.count = count;
        s.elemBytes = 4;
        s.chunkElems = chunkElems;
        s.tree[0] = trees[0][r];
        s.tree[1] = trees[1][r];
        s.lag = lag;
        ranks.push_back(edgeRank(s, treePorts(trees, r)));
        Rank &k = ranks.back();
        k.in.resize(count);
        for (size_t i = 0; i < count; ++i) k.in[i] = input(r, i);
        k.out = inPlace ? k.in : std::vector<Value>(count, kUntouched);
        k.inPlace = inPlace;
    }
    Run run = execute(ranks, depth, chunkElems, sum);
    if (!run.error.empty()) return run.error;
    std::vector<Value> want(count, 0); // the sum, once: n ranks x n inputs per element was most of the time
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) want[i] += input(q, i);
    for (int r = 0; r < n; ++r) {
        if (!hostCountsMatch(sched[r], run, r)) return "rank " + std::to_string(r) + ": host counts differ";
        for (size_t i = 0; i < count; ++i)
            if (ranks[r].out[i] != want[i]) return "rank " + std::to_string(r) + " element " + std::to_string(i) + " wrong";
    }
    return "";
}

} // namespace

START_TEST(double_binary_trees_allreduce) {
    const size_t counts[] = {0, 1, 7, 64, 1000, 4099};
    for (int n = 1; n <= simRanks(64); n += (n < 9 ? 1 : 5)) {
        std::vector<int> p0, p1;
        topo::binaryTree(n, &p0);
        topo::complementaryTree(n, &p1);
        const std::vector<TreeNode> trees[2] = {nodesOf(p0), nodesOf(p1)};
        ck_assert_msg(!trees[0].empty() && !trees[1].empty(), "n %d: a node with more than 3 children", n);
        for (size_t count : counts)
            for (size_t chunk : {(size_t)4, (size_t)12, (size_t)64})
                for (int depth : {1, 2, 4})
                    for (size_t lag : {(size_t)0, (size_t)1, (size_t)depth, (size_t)depth + 3}) {
                        const std::string err = simulate(trees, count, chunk, depth, lag, depth == 2 && lag == 1);
                        ck_assert_msg(err.empty(), "n %d count %zu chunk %zu depth %d lag %zu: %s", n, count, chunk,
                                      depth, lag, err.c_str());
                    }
    }
}
END_TEST

START_TEST(chains_allreduce) {
    // Inside a host the trees are chains (rank i's parent is i-1).
    for (int n = 1; n <= 9; ++n) {
        std::vector<int> p(n);
        for (int r = 0; r < n; ++r) p[r] = r - 1;
        const std::vector<TreeNode> trees[2] = {nodesOf(p), nodesOf(p)};
        for (int depth : {1, 4})
            for (size_t lag : {(size_t)0, (size_t)2, (size_t)7})
                for (bool inPlace : {false, true}) {
                    const std::string err = simulate(trees, 4099, 64, depth, lag, inPlace);
                    ck_assert_msg(err.empty(), "n %d depth %d lag %zu: %s", n, depth, lag, err.c_str());
                }
    }
}
END_TEST

START_TEST(the_simulation_sees_a_deadlock) {
    // Two ranks that are each other's parent both wait for the other's
    // partial sum first: the simulation must report it, not pass or spin.
    std::vector<TreeNode> cycle = {TreeNode{1, 1, {1, -1, -1}}, TreeNode{0, 1, {0, -1, -1}}};
    const std::vector<TreeNode> trees[2] = {cycle, cycle};
    ck_assert(simulate(trees, 64, 4, 2, 0).find("deadlock") != std::string::npos);
}
END_TEST

START_TEST(ops_cover_every_chunk_once) {
    // Per chunk: one up op per child (or one for a leaf), one down op per
    // child (at least one below a parent), every chunk exactly once.
    std::vector<int> p0;
    topo::binaryTree(13, &p0);
    std::vector<TreeNode> t = nodesOf(p0);
    for (const TreeNode &node : t)
        for (size_t nchunks : {(size_t)0, (size_t)1, (size_t)5})
            for (size_t lag : {(size_t)0, (size_t)1, (size_t)3, (size_t)9}) {
                std::vector<int> up(nchunks, 0), down(nchunks, 0);
                for (size_t i = 0; i < treeOpCount(node, nchunks); ++i) {
                    const TreeSlot sl = treeSlot(node, nchunks, lag, i);
                    ck_assert_uint_lt(sl.chunk, nchunks);
                    (sl.up ? up : down)[sl.chunk]++;
                }
                for (size_t c = 0; c < nchunks; ++c) {
                    ck_assert_int_eq(up[c], treeUpOps(node));
                    ck_assert_int_eq(down[c], treeDownOps(node));
                }
            }
}
END_TEST

Suite *tree_schedule_suite(void) {
    Suite *s = suite_create("tree_schedule");
    TCase *tc = tcase_create("tree_schedule");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, double_binary_trees_allreduce);
    tcase_add_test(tc, chains_allreduce);
    tcase_add_test(tc, the_simulation_sees_a_deadlock);
    tcase_add_test(tc, ops_cover_every_chunk_once);
    suite_add_tcase(s, tc);
    return s;
}
