/*
 * MPI_Scan and MPI_Exscan along a chain in rank order, over the all-peer
 * connections (core/connect/peer_conns.h: connection q x channels + c leads to rank
 * q). Rank r receives the prefix of ranks 0..r-1 from r - 1, chunk by chunk,
 * and passes the prefix through r on to r + 1:
 *
 *   scan:    out_r = op(prefix_{r-1}, in_r), and that goes on to r + 1
 *   exscan:  out_r = prefix_{r-1} (as received), op(prefix_{r-1}, in_r) goes
 *            on; rank 0 only sends its input, its output is left alone
 *            (MPI leaves it undefined)
 *
 * op(lower ranks, higher ranks) in every step: the result is the left fold in
 * rank order that MPI defines, bit for bit the same as a sequential one.
 * Chunk i (one slot) travels on channel i % channels; a lane (CTA) per
 * channel. n - 1 hops: a bandwidth schedule; small messages across many
 * ranks would want recursive doubling (log2(n) hops) instead.
 *
 * In place (the input is the output) works: every op reads its input before
 * it writes the same elements.
 */
#ifndef LOOM_SCAN_SCHEDULE_H
#define LOOM_SCAN_SCHEDULE_H

#include <stddef.h>

#include "device/edges/edge_op.h"
#include "device/host_device.h"

namespace loom {

struct ScanSched {
    int rank, nranks;
    bool exclusive;
    size_t count;      // elements
    size_t chunkElems; // one slot
    int channels;      // lanes, and connections per pair
};

LOOM_HD size_t scanChunks(const ScanSched &s) { return (s.count + s.chunkElems - 1) / s.chunkElems; }

// Ops of a lane: one per chunk of its channel; none where the rank has
// nothing to do (a lone rank's exscan, an empty call).
LOOM_HD size_t scanOpCount(const ScanSched &s, int lane) {
    if (s.nranks == 1 && s.exclusive) return 0;
    const size_t all = scanChunks(s);
    return all > (size_t)lane ? (all - (size_t)lane + (size_t)s.channels - 1) / (size_t)s.channels : 0;
}

LOOM_HD EdgeOp scanOp(const ScanSched &s, int lane, size_t j) {
    const size_t i = (size_t)lane + j * (size_t)s.channels, at = i * s.chunkElems;
    const size_t left = s.count - at, len = left < s.chunkElems ? left : s.chunkElems;
    const bool first = s.rank == 0, last = s.rank == s.nranks - 1;
    const int send = last ? -1 : (s.rank + 1) * s.channels + lane;
    const int recv = first ? -1 : (s.rank - 1) * s.channels + lane;
    const unsigned long long key = edgeKey(0, i);
    if (first) // scan: out = in, and in goes on; exscan: in goes on
        return edgeOp(-1, send, kBufIn, at, s.exclusive ? kBufNone : kBufOut, s.exclusive ? 0 : at, len, false, key);
    if (!s.exclusive) return edgeOp(recv, send, kBufIn, at, kBufOut, at, len, true, key);
    if (last) return edgeOp(recv, -1, kBufNone, 0, kBufOut, at, len, false, key); // out = the prefix
    EdgeOp o = edgeOp(recv, send, kBufIn, at, kBufOut, at, len, true, key);
    o.rawDst = true; // out = the prefix; op(prefix, in) goes on
    return o;
}

// Slots a call sends on and receives from each connection (n x channels
// entries): the host's step counters follow them.
inline void scanStepCounts(const ScanSched &s, unsigned long long *sends, unsigned long long *recvs) {
    walkStepCounts(
        s.channels, [&](int lane) { return scanOpCount(s, lane); },
        [&](int lane, size_t j) { return scanOp(s, lane, j); }, s.nranks * s.channels, sends, recvs);
}

} // namespace loom

#endif
