/*
 * One step of a schedule, in the one form every schedule over connections is
 * walked in: the kernels run it with Prims::run, the host counts each
 * connection's sends and receives from it, and the CPU simulator
 * (test/unit/sched_sim.h) executes it over host buffers with bounded FIFOs.
 *
 *   value = recv ? (reduce ? op(slot, src) : slot) : src   (inFirst: op(src, slot))
 *   dst[dstAt ..] = value   (when dst names a buffer; rawDst: the slot as received)
 *   the next slot of `send` = value   (when send names a connection)
 *
 * Connections are indices into the kernel's connection table (a ring
 * channel's one pair, or a rank's edge slots). Buffers are the call's input,
 * output, or the communicator's accumulator (interior nodes of a reduce
 * tree, recursive halving). `key` names what the step carries; the sender's
 * and the receiver's must match (the simulator checks it, kernels ignore it).
 */
#ifndef LOOM_EDGE_OP_H
#define LOOM_EDGE_OP_H

#include <stddef.h>

#include "device/host_device.h"

namespace loom {

enum EdgeBuf : int { kBufNone = 0, kBufIn, kBufOut, kBufAcc };

struct EdgeOp {
    int recv, send;  // connections (-1: none)
    int src, dst;    // EdgeBuf
    size_t srcAt, dstAt, len; // elements
    bool reduce, inFirst;
    // dst gets the received slot, send the reduced value (an exclusive scan's
    // interior rank; scan_schedule.h). The Simple protocol only.
    bool rawDst;
    unsigned long long key;
};

LOOM_HD EdgeOp edgeOp(int recv, int send, int src, size_t srcAt, int dst, size_t dstAt, size_t len, bool reduce,
                      unsigned long long key, bool inFirst = false) {
    EdgeOp o;
    o.recv = recv;
    o.send = send;
    o.src = src;
    o.srcAt = srcAt;
    o.dst = dst;
    o.dstAt = dstAt;
    o.len = len;
    o.reduce = reduce;
    o.inFirst = inFirst;
    o.rawDst = false;
    o.key = key;
    return o;
}

// Slots a call sends on and receives from each of `ports` connections, by
// walking every op of every lane (count(lane) ops, op(lane, i)): for
// schedules of a few ops per chunk (host side: step counters, the proxy).
template <typename Count, typename Op>
inline void walkStepCounts(int lanes, Count count, Op op, int ports, unsigned long long *sends,
                           unsigned long long *recvs) {
    for (int k = 0; k < ports; ++k) sends[k] = recvs[k] = 0;
    for (int lane = 0; lane < lanes; ++lane)
        for (size_t i = 0, n = count(lane); i < n; ++i) {
            const EdgeOp o = op(lane, i);
            if (o.send >= 0) ++sends[o.send];
            if (o.recv >= 0) ++recvs[o.recv];
        }
}

// A key from a phase and a chunk number.
LOOM_HD unsigned long long edgeKey(unsigned phase, size_t chunk) {
    return ((unsigned long long)phase << 40) | (unsigned long long)chunk;
}

} // namespace loom

#endif
