// Edges of the small-message algorithms as the connection set-up sees them
// (core/connect/connect_tree.cc, core/connect/connect_rd.cc): each rank's edge slots and the
// slot its peer uses for the same edge. The two ends of an edge must name
// each other — in the same tree, one as parent and the other as child; in
// the same recursive-doubling step — else a rank writes a FIFO its peer
// never reads.
#include <string>
#include <vector>

#include "core/connect/connect.h"
#include "topo/search.h"
#include "unit_suites.h"

using namespace loom;

namespace {

topo::Tree treeOf(const std::vector<int> &parent) {
    topo::Tree t;
    t.parent = parent;
    t.children.assign(parent.size(), {});
    for (size_t r = 0; r < parent.size(); ++r)
        if (parent[r] >= 0) t.children[parent[r]].push_back((int)r);
    return t;
}

int peerOfSlot(const TreeNode node[2], int k) {
    const TreeNode &nd = node[k / kTreeEdges];
    return k % kTreeEdges == 0 ? nd.parent : nd.children[k % kTreeEdges - 1];
}

// Every edge seen from both ends; returns the number of edges checked.
int checkPairing(const topo::Tree trees[2], int n) {
    std::vector<std::vector<int>> slots(n, std::vector<int>(kTreeEdgeSlots));
    std::vector<std::vector<TreeNode>> nodes(n, std::vector<TreeNode>(2));
    for (int r = 0; r < n; ++r) ck_assert(planTreeEdges(trees, r, nodes[r].data(), slots[r].data()));
    int edges = 0;
    for (int r = 0; r < n; ++r)
        for (int k = 0; k < kTreeEdgeSlots; ++k) {
            const int kp = slots[r][k];
            const int q = peerOfSlot(nodes[r].data(), k);
            ck_assert_int_eq(kp < 0, q < 0);
            if (kp < 0) continue;
            ++edges;
            ck_assert_int_eq(kp / kTreeEdges, k / kTreeEdges);                  // same tree
            ck_assert_int_eq(kp % kTreeEdges == 0, k % kTreeEdges != 0);        // parent <-> child
            ck_assert_int_eq(peerOfSlot(nodes[q].data(), kp), r);               // names me back
            ck_assert_int_eq(slots[q][kp], k);
        }
    return edges;
}

} // namespace

START_TEST(edge_slots_pair_up_on_double_binary_trees) {
    for (int n = 1; n <= 64; ++n) {
        std::vector<int> p0, p1;
        topo::binaryTree(n, &p0);
        topo::complementaryTree(n, &p1);
        const topo::Tree trees[2] = {treeOf(p0), treeOf(p1)};
        ck_assert_int_eq(checkPairing(trees, n), 2 * 2 * (n - 1)); // n-1 edges per tree, seen from both ends
    }
}
END_TEST

START_TEST(edge_slots_pair_up_on_chains_inside_hosts) {
    // 4 hosts of 3 GPUs: binary tree over the hosts' heads, chains below them
    // (a head has up to 2 host children and 1 chain child).
    const int hosts = 4, per = 3, n = hosts * per;
    std::vector<int> hp0, hp1;
    topo::binaryTree(hosts, &hp0);
    topo::complementaryTree(hosts, &hp1);
    auto expand = [&](const std::vector<int> &hp) {
        std::vector<int> parent(n, -1);
        for (int h = 0; h < hosts; ++h) {
            parent[h * per] = hp[h] < 0 ? -1 : hp[h] * per;
            for (int i = 1; i < per; ++i) parent[h * per + i] = h * per + i - 1;
        }
        return treeOf(parent);
    };
    const topo::Tree trees[2] = {expand(hp0), expand(hp1)};
    ck_assert_int_eq(checkPairing(trees, n), 2 * 2 * (n - 1));
}
END_TEST

START_TEST(a_rank_with_too_many_children_turns_trees_off) {
    const topo::Tree star = treeOf({-1, 0, 0, 0, 0}); // 4 children
    const topo::Tree trees[2] = {star, star};
    TreeNode node[2];
    int slots[kTreeEdgeSlots];
    ck_assert(!planTreeEdges(trees, 0, node, slots));
    ck_assert(!planTreeEdges(trees, 3, node, slots)); // judged on every rank alike
    // Parents and children that disagree are no trees: no edges, rather than
    // FIFOs one end writes and the other never reads.
    topo::Tree bad = treeOf({-1, 0, 0});
    bad.children[0] = {1}; // rank 2's parent does not list it
    const topo::Tree badTrees[2] = {bad, treeOf({-1, 0, 0})};
    ck_assert(!planTreeEdges(badTrees, 2, node, slots)); // planTrees asks every rank: off everywhere
}
END_TEST

// The first way rank r's recursive-doubling edges of an n-rank plan break
// the pairing, or "" when they pair up. Plain comparisons, not ck_assert:
// Check reports every passing assertion to its parent through a pipe, and
// the ~10^6 of them here outran the test timeout under ASan.
static std::string rdEdgeError(int n, int r, const std::vector<std::vector<int>> &peer,
                        const std::vector<std::vector<int>> &slot) {
    const RdPlan q = rdPlan(0, n), m = rdPlan(r, n);
    auto where = [&](int k, const char *what) {
        return "n " + std::to_string(n) + ", rank " + std::to_string(r) + ", slot " + std::to_string(k) + ": " + what;
    };
    int edges = 0;
    for (int k = 0; k < kRdEdgeSlots; ++k) {
        const int p = peer[r][k];
        if ((p < 0) != (slot[r][k] < 0)) return where(k, "a peer without a slot, or a slot without a peer");
        if (p < 0) continue;
        ++edges;
        if (p == r || p >= n) return where(k, "the peer is itself or no rank");
        const int kp = slot[r][k] - kTreeEdgeSlots;
        if (kp != k) return where(k, "the peer's end is another step"); // the same step (or the extra edge) at both ends
        if (peer[p][kp] != r || slot[p][kp] != kTreeEdgeSlots + k) return where(k, "the peer does not name me back");
        if (k < kMaxRdSteps && p != (r ^ (1 << k))) return where(k, "lower and upper differ in more than bit k");
    }
    // A doubling rank: one partner per step, plus its extra; an extra: its host only.
    if (edges != (m.host >= 0 ? 1 : q.steps + (m.extra >= 0)))
        return "n " + std::to_string(n) + ", rank " + std::to_string(r) + ": " + std::to_string(edges) + " edges";
    return "";
}

START_TEST(recursive_doubling_edges_pair_up) {
    for (int n = 1; n <= 300; ++n) {
        std::vector<std::vector<int>> peer(n, std::vector<int>(kRdEdgeSlots)), slot(n, std::vector<int>(kRdEdgeSlots));
        bool ok = true;
        for (int r = 0; r < n; ++r) ok = planRdEdges(r, n, peer[r].data(), slot[r].data()) && ok;
        const RdPlan q = rdPlan(0, n);
        ck_assert_int_eq(ok, q.steps <= kMaxRdSteps); // beyond 128 doubling ranks: off
        if (!ok) continue;
        ck_assert_int_eq(1 << q.steps, q.p);
        ck_assert(q.p <= n && 2 * q.p > n);
        for (int r = 0; r < n; ++r) {
            const std::string err = rdEdgeError(n, r, peer, slot);
            ck_assert_msg(err.empty(), "%s", err.c_str());
        }
    }
}
END_TEST

Suite *edges_suite(void) {
    Suite *s = suite_create("edges");
    TCase *tc = tcase_create("edges");
    tcase_add_test(tc, edge_slots_pair_up_on_double_binary_trees);
    tcase_add_test(tc, edge_slots_pair_up_on_chains_inside_hosts);
    tcase_add_test(tc, a_rank_with_too_many_children_turns_trees_off);
    tcase_add_test(tc, recursive_doubling_edges_pair_up);
    tcase_set_timeout(tc, 60); // the default 4 s is tight under ASan on a loaded 2-core CI machine
    suite_add_tcase(s, tc);
    return s;
}
