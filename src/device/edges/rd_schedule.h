/*
 * The recursive-doubling allreduce schedule (rd_args.h): what a rank does,
 * op by op, chunk by chunk. Compiled for host and device like
 * tree_schedule.h: the kernel walks it, and a CPU simulation (test/unit) runs
 * it over host buffers with bounded FIFOs on every edge, so deadlocks, wrong
 * results and ranks that end with different bits show up without a GPU.
 *
 * An extra rank (>= p) sends its input to its host rank chunk by chunk, then
 * receives the result. Every other rank first folds in its extra's input (if
 * it has one: op(mine, extra's)), then per step sends its running value's
 * chunk to the partner and reduces the partner's into the output — both as
 * op(lower rank's, upper rank's) — and at the end sends the result to its
 * extra. The running value is the input until the first reduction, then the
 * output. rdEdgeOp gives each op in the one op form (edge_op.h) that the
 * kernel runs and the simulator (test/unit/sched_sim.h) executes.
 */
#ifndef LOOM_RD_SCHEDULE_H
#define LOOM_RD_SCHEDULE_H

#include <stddef.h>

#include "device/edges/edge_op.h"


namespace loom {

constexpr int kRdExtraEdge = 7; // edge index of the extra (or host) rank; steps use 0 .. 6

// A rank's part, as the kernel is told it.
struct RdRole {
    int rank;
    int steps;    // log2(p); 0 for an extra rank
    int hasExtra; // folds in the extra rank's vector first
    int isExtra;  // hands its input over and gets the result back
};

enum RdOpKind {
    kRdSend = 0, // the peer's slot = (fromIn ? in : out)[chunk]
    kRdRecv,     // out[chunk] = reduce ? op(slot, other) (inFirst: op(other, slot)) : slot; other = (fromIn ? in : out)
    kRdCopy,     // out[chunk] = in[chunk] (nothing to exchange)
};

struct RdOp {
    int kind;
    int edge;     // 0 .. steps-1: the partner of that step; kRdExtraEdge: the extra or host rank
    size_t chunk;
    bool fromIn;  // the running value is still the input
    bool reduce;
    bool inFirst;
};

LOOM_HD size_t rdOpCount(const RdRole &r, size_t nchunks) {
    if (r.isExtra) return 2 * nchunks;
    if (!r.hasExtra && r.steps == 0) return nchunks;
    return (r.hasExtra ? 2 * nchunks : 0) + 2 * nchunks * (size_t)r.steps;
}

LOOM_HD RdOp rdOp(const RdRole &r, size_t nchunks, size_t i) {
    RdOp op;
    op.reduce = false;
    op.inFirst = false;
    op.fromIn = false;
    if (r.isExtra) {
        op.edge = kRdExtraEdge;
        op.kind = i < nchunks ? kRdSend : kRdRecv;
        op.chunk = i < nchunks ? i : i - nchunks;
        op.fromIn = i < nchunks;
        return op;
    }
    if (!r.hasExtra && r.steps == 0) {
        op.kind = kRdCopy;
        op.edge = -1;
        op.chunk = i;
        return op;
    }
    if (r.hasExtra) {
        if (i < nchunks) { // fold in the extra rank's input: this rank is the lower
            op.kind = kRdRecv;
            op.edge = kRdExtraEdge;
            op.chunk = i;
            op.fromIn = true;
            op.reduce = true;
            op.inFirst = true;
            return op;
        }
        i -= nchunks;
        if (i >= 2 * nchunks * (size_t)r.steps) { // the result back to the extra
            op.kind = kRdSend;
            op.edge = kRdExtraEdge;
            op.chunk = i - 2 * nchunks * (size_t)r.steps;
            return op;
        }
    }
    const int s = (int)(i / (2 * nchunks));
    const size_t j = i % (2 * nchunks);
    op.edge = s;
    op.chunk = j / 2;
    op.fromIn = s == 0 && !r.hasExtra;
    if (j % 2 == 0) {
        op.kind = kRdSend;
    } else {
        op.kind = kRdRecv;
        op.reduce = true;
        op.inFirst = (r.rank & (1 << s)) == 0; // the lower rank's value first, on both ends
    }
    return op;
}

// Op i in the one op form, over a count of chunkElems chunks; connections
// port0 + edge. Keys: (step, chunk) for the exchanges; (kRdExtraEdge, chunk)
// for the extra's input, (kRdExtraEdge + 1, chunk) for its result.
LOOM_HD EdgeOp rdEdgeOp(const RdRole &r, size_t count, size_t chunkElems, int port0, size_t i) {
    const size_t nchunks = (count + chunkElems - 1) / chunkElems;
    const RdOp o = rdOp(r, nchunks, i);
    const size_t at = o.chunk * chunkElems;
    const size_t len = o.chunk + 1 < nchunks ? chunkElems : count - at;
    const int from = o.fromIn ? kBufIn : kBufOut;
    if (o.kind == kRdCopy) return edgeOp(-1, -1, kBufIn, at, kBufOut, at, len, false, edgeKey(0, o.chunk));
    // The extra's input travels in phase kRdExtraEdge, its result in the next.
    const bool inputOfExtra = o.edge == kRdExtraEdge && (r.isExtra ? o.kind == kRdSend : o.kind == kRdRecv);
    const unsigned phase = o.edge != kRdExtraEdge ? (unsigned)o.edge : inputOfExtra ? kRdExtraEdge : kRdExtraEdge + 1;
    if (o.kind == kRdSend) return edgeOp(-1, port0 + o.edge, from, at, kBufNone, 0, len, false, edgeKey(phase, o.chunk));
    return edgeOp(port0 + o.edge, -1, from, at, kBufOut, at, len, o.reduce, edgeKey(phase, o.chunk), o.inFirst);
}

} // namespace loom

#endif
