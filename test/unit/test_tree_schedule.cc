// Schedule simulation for trees: the tree allreduce ops of
// src/device/tree_schedule.h run over host buffers on the double binary trees
// of topo/search.h (and on chains, the trees inside a host), 1..64 ranks.
// Every tree edge has a FIFO of `depth` slots in each direction; ranks take
// turns and run their next op only when it can go (a receive needs a slot, a
// send a free one), as the kernels' flags allow. A sweep in which nobody
// moves is a deadlock. Slots carry the chunk and direction their sender
// meant, so a rank that takes the wrong one fails the test.
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "device/ring_schedule.h"
#include "device/tree_schedule.h"
#include "topo/search.h"
#include "unit_suites.h"

using namespace loom;

namespace {

struct Slot {
    size_t chunk;
    bool up;
    std::vector<int64_t> data;
};

int64_t input(int rank, size_t i) { return (int64_t)(rank + 1) * 1000003 + (int64_t)(i * 7 % 1009); }

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

// One allreduce over the given trees (tree k takes half k of the count).
// Returns the number of wrong outputs, or a negative code for a broken protocol.
// In place, `in` and `out` are one buffer (the input is overwritten).
long simulate(const std::vector<TreeNode> trees[2], size_t count, size_t chunkElems, int depth, size_t lag,
              bool inPlace = false) {
    const int n = (int)trees[0].size();
    const size_t align = 4;
    std::vector<std::vector<int64_t>> in(n, std::vector<int64_t>(count)), out = in;
    for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) in[r][i] = input(r, i), out[r][i] = inPlace ? in[r][i] : -1;
    for (int k = 0; k < 2; ++k) {
        size_t b, e;
        channelRange(count, 2, k, align * 4, &b, &e);
        const size_t len = e - b, nchunks = treeChunks(len, chunkElems);
        const std::vector<TreeNode> &t = trees[k];
        std::map<std::pair<int, int>, std::deque<Slot>> fifo; // (from, to)
        std::vector<size_t> next(n, 0);
        for (bool moved = true; moved;) {
            moved = false;
            for (int r = 0; r < n; ++r) {
                if (next[r] >= treeOpCount(t[r], nchunks)) continue;
                TreeOp op = treeOp(t[r], nchunks, lag, next[r]);
                size_t off, l;
                treeChunk(len, chunkElems, op.chunk, &off, &l);
                int64_t *o = out[r].data() + b + off;
                const int64_t *x = (inPlace ? out[r] : in[r]).data() + b + off;
                if (op.kind == kTreeRecvReduce || op.kind == kTreeRecvDown) {
                    std::deque<Slot> &q = fifo[{op.peer, r}];
                    if (q.empty()) continue; // wait
                    Slot s = q.front();
                    q.pop_front();
                    if (s.chunk != op.chunk || s.up != (op.kind == kTreeRecvReduce) || s.data.size() != l)
                        return -2000000;
                    for (size_t i = 0; i < l; ++i)
                        o[i] = op.kind == kTreeRecvDown ? s.data[i] : (op.first ? x[i] : o[i]) + s.data[i];
                } else if (op.kind == kTreeSendUp || op.kind == kTreeSendDown) {
                    std::deque<Slot> &q = fifo[{r, op.peer}];
                    if ((int)q.size() >= depth) continue; // no credit
                    const bool fromIn = op.kind == kTreeSendUp && treeSendsInput(t[r]);
                    q.push_back(Slot{op.chunk, op.kind == kTreeSendUp, std::vector<int64_t>(fromIn ? x : o,
                                                                                            (fromIn ? x : o) + l)});
                } else {
                    for (size_t i = 0; i < l; ++i) o[i] = x[i];
                }
                ++next[r];
                moved = true;
            }
        }
        for (int r = 0; r < n; ++r)
            if (next[r] != treeOpCount(t[r], nchunks)) return -1000000; // deadlock
        for (auto &f : fifo)
            if (!f.second.empty()) return -3000000; // sent, never received
    }
    long bad = 0;
    for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
            int64_t want = 0;
            for (int q = 0; q < n; ++q) want += input(q, i);
            bad += out[r][i] != want;
        }
    return bad;
}

} // namespace

START_TEST(double_binary_trees_allreduce) {
    const size_t counts[] = {0, 1, 7, 64, 1000, 4099};
    for (int n = 1; n <= 64; n += (n < 9 ? 1 : 5)) {
        std::vector<int> p0, p1;
        topo::binaryTree(n, &p0);
        topo::complementaryTree(n, &p1);
        const std::vector<TreeNode> trees[2] = {nodesOf(p0), nodesOf(p1)};
        ck_assert_msg(!trees[0].empty() && !trees[1].empty(), "n %d: a node with more than 3 children", n);
        for (size_t count : counts)
            for (size_t chunk : {(size_t)4, (size_t)12, (size_t)64})
                for (int depth : {1, 2, 4})
                    for (size_t lag : {(size_t)0, (size_t)1, (size_t)depth, (size_t)depth + 3}) {
                        long bad = simulate(trees, count, chunk, depth, lag, depth == 2 && lag == 1);
                        if (bad != 0)
                            ck_abort_msg("n %d count %zu chunk %zu depth %d lag %zu (in place at depth 2, lag 1): "
                                         "%ld (-1000000 deadlock, "
                                         "-2000000 wrong slot, -3000000 slot left over)", n, count, chunk, depth, lag,
                                         bad);
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
                for (bool inPlace : {false, true})
                    ck_assert_int_eq(simulate(trees, 4099, 64, depth, lag, inPlace), 0);
    }
}
END_TEST

START_TEST(the_simulation_sees_a_deadlock) {
    // Two ranks that are each other's parent both wait for the other's
    // partial sum first: the simulation must report it, not pass or spin.
    std::vector<TreeNode> cycle = {TreeNode{1, 1, {1, -1, -1}}, TreeNode{0, 1, {0, -1, -1}}};
    const std::vector<TreeNode> trees[2] = {cycle, cycle};
    ck_assert_int_eq(simulate(trees, 64, 4, 2, 0), -1000000);
}
END_TEST

START_TEST(ops_cover_every_chunk_once) {
    std::vector<int> p0;
    topo::binaryTree(13, &p0);
    std::vector<TreeNode> t = nodesOf(p0);
    for (const TreeNode &node : t)
        for (size_t nchunks : {(size_t)0, (size_t)1, (size_t)5})
            for (size_t lag : {(size_t)0, (size_t)1, (size_t)3, (size_t)9}) {
                std::vector<int> up(nchunks, 0), down(nchunks, 0);
                for (size_t i = 0; i < treeOpCount(node, nchunks); ++i) {
                    TreeOp op = treeOp(node, nchunks, lag, i);
                    ck_assert_uint_lt(op.chunk, nchunks);
                    (op.kind == kTreeRecvDown || op.kind == kTreeSendDown ? down : up)[op.chunk]++;
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
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, double_binary_trees_allreduce);
    tcase_add_test(tc, chains_allreduce);
    tcase_add_test(tc, the_simulation_sees_a_deadlock);
    tcase_add_test(tc, ops_cover_every_chunk_once);
    suite_add_tcase(s, tc);
    return s;
}
