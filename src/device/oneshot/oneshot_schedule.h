/*
 * One-shot schedules (small messages inside a host where every pair of GPUs
 * maps the other's memory): every rank writes, in one hop, what each peer
 * needs from it as LL lines into that peer's slot for it, then builds its
 * output from the lines it holds. Compiled for host and device: the kernel
 * (oneshot_coll.cu) follows it and the CPU simulator (test_oneshot_schedule.cc)
 * executes it over host buffers.
 *
 *   allreduce       every rank sends its input to every peer; all reduce.
 *   reduce_scatter  input = n blocks (equal or ragged); block q goes to rank q.
 *   allgather       every rank sends its block to every peer (blocks equal or
 *                   ragged, at any displacements of the output).
 *   broadcast       the root sends its buffer to every peer.
 *   reduce          every rank but the root sends its input to the root.
 *   alltoall        block q of the input goes to rank q; rank q puts what
 *                   rank r sent at its receive displacement for r. Each
 *                   rank has its own tables (alltoall(v), and gather(v) /
 *                   scatter(v) as alltoalls whose other pairs pass tokens):
 *                   the sender's say what it sends, the receiver's what
 *                   arrives and where (MPI makes the two agree). Beside
 *                   the exchange kernel only the pairs of small blocks
 *                   (oneShotCarries) move so.
 *
 * Invariant (why two slot parities are enough, checked by the simulator):
 * every call is a full exchange. Each ordered pair passes at least one line,
 * a token line where the schedule has no payload for the pair, and every
 * rank waits for every line meant for it before its kernel ends. So when A
 * writes B's slot of parity p in call c, A has seen a line of B's from call
 * c-1, B's call c-1 has started, and B's call c-2 (the last user of parity
 * p) has ended: A never overwrites lines B has not read. A v-form exchange
 * keeps it although only its pairs of small blocks pass lines: every
 * other pair moves a block (FIFO chunks, or an in-place handshake) that its
 * receiver waits for before its call ends, which tells as much (the
 * simulator's v-form sequences; an empty pair is always a one-shot pair).
 */
#ifndef LOOM_ONESHOT_SCHEDULE_H
#define LOOM_ONESHOT_SCHEDULE_H

#include <stddef.h>

#include "base/coll.h"
#include "device/host_device.h"

namespace loom {

// One-shot runs the table collectives and alltoall (loomColl, base/coll.h).
constexpr int kOneShotColls = loomCollAllToAll + 1;

// The call's blocks. `bytes`: the whole buffer for allreduce, broadcast and
// reduce, one rank's block for reduce_scatter and allgather. Ragged blocks
// (allgatherv, reduce_scatter with counts): rank q's block has counts[q]
// bytes at displs[q] (reduce_scatter: of the input; allgather: of the
// output); counts == nullptr: every block `bytes`, at q * bytes. alltoall:
// counts/displs are this rank's send tables, rcounts/rdispls its receive
// tables (nullptr: `bytes` at q * bytes on both sides).
struct OneShotBlocks {
    const size_t *counts;
    const size_t *displs;
    size_t bytes;
    const size_t *rcounts = nullptr;
    const size_t *rdispls = nullptr;
};

LOOM_HD size_t oneShotBlockBytes(const OneShotBlocks &b, int q) { return b.counts ? b.counts[q] : b.bytes; }
LOOM_HD size_t oneShotBlockDispl(const OneShotBlocks &b, int q) { return b.counts ? b.displs[q] : (size_t)q * b.bytes; }

// What rank `from` sends rank `to` (from != to): `bytes` of its input from
// byte `offset` (0 bytes: a token line).
struct OneShotPiece {
    size_t offset;
    size_t bytes;
};

LOOM_HD OneShotPiece oneShotPiece(int coll, int from, int to, int root, const OneShotBlocks &b) {
    OneShotPiece p;
    p.offset = 0;
    p.bytes = b.bytes;
    if (coll == loomCollReduceScatter || coll == loomCollAllToAll) {
        p.offset = oneShotBlockDispl(b, to);
        p.bytes = oneShotBlockBytes(b, to);
    }
    if (coll == loomCollAllGather) p.bytes = oneShotBlockBytes(b, from);
    if (coll == loomCollBroadcast && from != root) p.bytes = 0;
    if (coll == loomCollReduce && to != root) p.bytes = 0;
    return p;
}

// What rank `me` receives from rank `from` (!= me), in me's tables: the
// bytes of from's piece for me (0: its token line).
LOOM_HD size_t oneShotIncoming(int coll, int from, int me, int root, const OneShotBlocks &b) {
    if (coll == loomCollAllToAll) return b.rcounts ? b.rcounts[from] : b.bytes;
    return oneShotPiece(coll, from, me, root, b).bytes;
}

// allgather, alltoall: where rank `from`'s block lands in this rank's output.
LOOM_HD size_t oneShotOutDispl(int coll, const OneShotBlocks &b, int from) {
    if (coll == loomCollAllToAll) return b.rdispls ? b.rdispls[from] : (size_t)from * b.bytes;
    return oneShotBlockDispl(b, from);
}

// LL lines of one piece: its 8-byte units, or the token line.
LOOM_HD size_t oneShotLines(const OneShotPiece &p) { return p.bytes ? (p.bytes + 7) / 8 : 1; }

// An alltoall's pairs that move one-shot: every pair (bound 0), or, beside
// the exchange kernel (exchange_schedule.h: one-shot pairs of the v-forms),
// those whose block has at most `bound` bytes, empty ones too (their token
// lines); the others move through the exchange kernel's FIFOs or in place.
// Both ends judge a pair by its bytes, which MPI makes the same on both.
LOOM_HD bool oneShotCarries(size_t bound, size_t bytes) { return !bound || bytes <= bound; }

// Whether rank `me` reduces the n contributions (in rank order, its own from
// its input at oneShotPiece(coll, me, me, ...).offset) into its output, and
// how many bytes: its block (reduce_scatter), the buffer (allreduce, reduce).
LOOM_HD bool oneShotReduces(int coll, int me, int root) {
    return coll == loomCollAllReduce || coll == loomCollReduceScatter || (coll == loomCollReduce && me == root);
}
LOOM_HD size_t oneShotReducedBytes(int coll, int me, const OneShotBlocks &b) {
    return coll == loomCollReduceScatter ? oneShotBlockBytes(b, me) : b.bytes;
}

// The largest piece of a call (what must fit a slot).
LOOM_HD size_t oneShotMaxPiece(int coll, int nranks, const OneShotBlocks &b) {
    if ((coll != loomCollReduceScatter && coll != loomCollAllGather && coll != loomCollAllToAll) || !b.counts)
        return b.bytes;
    size_t m = 0;
    for (int q = 0; q < nranks; ++q) m = b.counts[q] > m ? b.counts[q] : m;
    for (int q = 0; coll == loomCollAllToAll && b.rcounts && q < nranks; ++q) m = b.rcounts[q] > m ? b.rcounts[q] : m;
    return m;
}

} // namespace loom

#endif
