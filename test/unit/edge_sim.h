// Schedules over a rank's edges (src/device/edges/edge_schedule.h) on the one
// simulator (sched_sim.h): each rank's lanes walk edgeSchedOp, its edge
// slots are its ports, and each slot lands in the peer's slot for the same
// edge (trees: parent and children; recursive doubling: the partner of each
// step and the extra rank).
#pragma once

#include <vector>

#include "device/edges/edge_schedule.h"
#include "device/edges/rd_args.h"
#include "sched_sim.h"

namespace loom {
namespace sim {

// Ports of rank r on recursive doubling's edges (rd_args.h).
inline std::map<int, std::pair<int, int>> rdPorts(int r, int n) {
    std::map<int, std::pair<int, int>> to;
    const RdPlan q = rdPlan(r, n);
    for (int s = 0; s < q.steps && q.host < 0; ++s) to[rdStepSlot(s)] = {rdPartner(r, s), rdStepSlot(s)};
    if (q.extra >= 0 || q.host >= 0) to[rdExtraSlot()] = {q.extra >= 0 ? q.extra : q.host, rdExtraSlot()};
    return to;
}

// Ports of rank r on two trees given as nodes (edge slots of peer_edge.h).
inline std::map<int, std::pair<int, int>> treePorts(const std::vector<TreeNode> trees[2], int r) {
    std::map<int, std::pair<int, int>> to;
    for (int t = 0; t < 2; ++t) {
        const TreeNode &nd = trees[t][r];
        if (nd.parent >= 0) {
            const TreeNode &p = trees[t][nd.parent];
            for (int j = 0; j < p.nchildren; ++j)
                if (p.children[j] == r) to[treeEdgeSlot(t, 0)] = {nd.parent, treeEdgeSlot(t, 1 + j)};
        }
        for (int j = 0; j < nd.nchildren; ++j) to[treeEdgeSlot(t, 1 + j)] = {nd.children[j], treeEdgeSlot(t, 0)};
    }
    return to;
}

// A rank running schedule `s` (kept alive by the caller) on those ports.
inline Rank edgeRank(const EdgeSched &s, std::map<int, std::pair<int, int>> ports) {
    Rank r;
    r.lanes = edgeLanes(s);
    r.count = [&s](int lane) { return edgeOpCount(s, lane); };
    r.op = [&s](int lane, size_t i) { return edgeSchedOp(s, lane, i); };
    r.sendTo = std::move(ports);
    return r;
}

// The host's counts (edgeStepCounts) must be what the walk moved.
inline bool hostCountsMatch(const EdgeSched &s, const Run &run, int rank) {
    unsigned long long sends[kEdgeSlots], recvs[kEdgeSlots];
    edgeStepCounts(s, sends, recvs);
    for (int k = 0; k < kEdgeSlots; ++k) {
        auto a = run.sent[rank].find(k), b = run.recvd[rank].find(k);
        if (sends[k] != (a == run.sent[rank].end() ? 0 : a->second)) return false;
        if (recvs[k] != (b == run.recvd[rank].end() ? 0 : b->second)) return false;
    }
    return true;
}

} // namespace sim
} // namespace loom
