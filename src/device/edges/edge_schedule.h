/*
 * Every schedule over a rank's edges (peer_edge.h), behind one interface:
 * the tree allreduce (two lanes, one per tree), the recursive-doubling
 * allreduce, and the doubling family for broadcast, reduce, allgather and
 * reduce_scatter (doubling_schedule.h). A lane is one CTA of the kernel;
 * edgeSchedOp(s, lane, i) is its op i in the one op form (edge_op.h) over the
 * rank's edge slots. The kernel runs it, the host counts each edge's sends
 * and receives from it (edgeStepCounts), the CPU simulator executes it.
 */
#ifndef LOOM_EDGE_SCHEDULE_H
#define LOOM_EDGE_SCHEDULE_H

#include <stddef.h>

#include "device/edges/doubling_schedule.h"
#include "device/edges/edge_op.h"
#include "device/edges/peer_edge.h"
#include "device/edges/rd_schedule.h"
#include "device/edges/tree_args.h"
#include "device/edges/tree_schedule.h"

namespace loom {

static_assert(kRdExtraEdge == kMaxRdSteps && kRdEdgeSlots == kMaxRdSteps + 1, "rd_schedule.h's edges");

enum EdgeAlgo : int { kEdgeTreeAllReduce = 0, kEdgeRdAllReduce, kEdgeDoubling };

struct EdgeSched {
    int algo;          // EdgeAlgo
    size_t count;      // elements: of the call, or per block (allgather, reduce_scatter)
    size_t elemBytes;  // what the kernel counts in (1 for data-movement calls)
    size_t chunkElems; // one slot
    TreeNode tree[2];  // trees: this rank's node on each
    size_t lag;        // trees: chunks the broadcast half runs behind the reduce
    RdRole rd;         // recursive-doubling allreduce
    DblRole dbl;       // doubling family (its count and chunk are the ones above)
};

LOOM_HD int edgeLanes(const EdgeSched &s) { return s.algo == kEdgeTreeAllReduce ? 2 : 1; }

LOOM_HD size_t edgeOpCount(const EdgeSched &s, int lane) {
    switch (s.algo) {
    case kEdgeTreeAllReduce: {
        size_t b, e;
        treeHalf(s.count, s.elemBytes, lane, &b, &e);
        return treeOpCount(s.tree[lane], treeChunks(e - b, s.chunkElems));
    }
    case kEdgeRdAllReduce: return rdOpCount(s.rd, (s.count + s.chunkElems - 1) / s.chunkElems);
    default: return dblOpCount(s.dbl);
    }
}

LOOM_HD EdgeOp edgeSchedOp(const EdgeSched &s, int lane, size_t i) {
    switch (s.algo) {
    case kEdgeTreeAllReduce: {
        size_t b, e;
        treeHalf(s.count, s.elemBytes, lane, &b, &e);
        return treeEdgeOp(s.tree[lane], treeEdgeSlot(lane, 0), b, e - b, s.chunkElems, s.lag, i);
    }
    case kEdgeRdAllReduce: return rdEdgeOp(s.rd, s.count, s.chunkElems, rdStepSlot(0), i);
    default: return dblOp(s.dbl, i);
    }
}

// Slots a call sends and receives on each edge slot (host: the step
// counters and the proxy follow them). Walks every op: these algorithms run
// small messages, a few ops per chunk.
inline void edgeStepCounts(const EdgeSched &s, unsigned long long sends[kEdgeSlots],
                           unsigned long long recvs[kEdgeSlots]) {
    walkStepCounts(
        edgeLanes(s), [&](int lane) { return edgeOpCount(s, lane); },
        [&](int lane, size_t i) { return edgeSchedOp(s, lane, i); }, kEdgeSlots, sends, recvs);
}

} // namespace loom

#endif
