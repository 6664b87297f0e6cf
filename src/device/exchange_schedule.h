/*
 * Per-peer exchanges over all-peer connections: MPI_Alltoall(v), and
 * MPI_Gather(v) / MPI_Scatter(v) as exchanges where only the root's pairs
 * carry data. Rank r sends sendCount[q] elements from in + sendDispl[q] to
 * every rank q and receives recvCount[q] elements from q into
 * out + recvDispl[q]; for every pair the sender's and the receiver's counts
 * agree (MPI requires it), so both ends derive the same ops.
 *
 * Pairwise rounds: in round k (1..n-1) rank r sends to r + k and receives
 * from r - k, so every pair meets in exactly one round, k = (q - r) mod n,
 * on both ends. Rounds are dealt to lanes (CTAs) round-robin, round k on
 * lane (k - 1) % lanes, so several connections are in flight; round 0 is the
 * rank's own block, a local copy on lane 0. Inside a round the send chunks
 * and the receive chunks alternate (send c, then receive c), which keeps
 * every FIFO of depth >= 1 moving (the CPU simulator checks it). A pair with
 * nothing to move has no op on either end.
 *
 * Connection q of a rank leads to rank q (its connection r leads back).
 * Sources are always the input: an in-place alltoall must copy its buffer
 * first (a block is overwritten by a receive before its own send otherwise).
 *
 * The kernel walks a lane with exchangeFirst / exchangeNext (a cursor: no
 * search per op); exchangeStepCounts is the host's count per connection.
 */
#ifndef LOOM_EXCHANGE_SCHEDULE_H
#define LOOM_EXCHANGE_SCHEDULE_H

#include <stddef.h>

#include "device/edge_op.h"
#include "device/host_device.h"

namespace loom {

struct ExchangeSched {
    int rank, nranks;
    int lanes;                 // CTAs, >= 1
    const size_t *sendCount, *sendDispl; // per peer, in elements (nranks each)
    const size_t *recvCount, *recvDispl;
    size_t chunkElems;         // one slot
};

// Where a lane's walk is: round, chunk and which half of the chunk's pair.
struct ExchangeCursor {
    int round;     // 0: the local copy; n: past the lane's last round
    size_t chunk;
    bool recv;     // the receive of this chunk (else its send)
};

LOOM_HD size_t exchangeChunks(size_t count, size_t chunkElems) { return (count + chunkElems - 1) / chunkElems; }

LOOM_HD int exchangeTo(const ExchangeSched &s, int round) { return (s.rank + round) % s.nranks; }
LOOM_HD int exchangeFrom(const ExchangeSched &s, int round) { return (s.rank - round + s.nranks) % s.nranks; }

// Whether the cursor names an op: the round is on this rank, the half has a chunk there.
LOOM_HD bool exchangeHasOp(const ExchangeSched &s, const ExchangeCursor &c) {
    if (c.round == 0) return c.chunk == 0 && !c.recv && s.sendCount[s.rank] > 0;
    const size_t n = c.recv ? exchangeChunks(s.recvCount[exchangeFrom(s, c.round)], s.chunkElems)
                            : exchangeChunks(s.sendCount[exchangeTo(s, c.round)], s.chunkElems);
    return c.chunk < n;
}

// The next position after c on the lane (ops or not); round n ends it.
LOOM_HD ExchangeCursor exchangeStep(const ExchangeSched &s, int lane, ExchangeCursor c) {
    if (c.round == 0) {
        c.round = lane + 1;
        c.chunk = 0;
        c.recv = false;
        return c;
    }
    if (!c.recv) {
        c.recv = true;
        return c;
    }
    const size_t sends = exchangeChunks(s.sendCount[exchangeTo(s, c.round)], s.chunkElems);
    const size_t recvs = exchangeChunks(s.recvCount[exchangeFrom(s, c.round)], s.chunkElems);
    c.recv = false;
    if (++c.chunk < (sends > recvs ? sends : recvs)) return c;
    c.chunk = 0;
    c.round += s.lanes;
    if (c.round > s.nranks) c.round = s.nranks;
    return c;
}

LOOM_HD bool exchangeDone(const ExchangeSched &s, const ExchangeCursor &c) { return c.round >= s.nranks; }

// The lane's first op (or a done cursor).
LOOM_HD ExchangeCursor exchangeFirst(const ExchangeSched &s, int lane) {
    ExchangeCursor c;
    c.round = lane == 0 ? 0 : lane + 1;
    c.chunk = 0;
    c.recv = false;
    if (c.round >= s.nranks) c.round = s.nranks;
    while (!exchangeDone(s, c) && !exchangeHasOp(s, c)) c = exchangeStep(s, lane, c);
    return c;
}

LOOM_HD ExchangeCursor exchangeNext(const ExchangeSched &s, int lane, ExchangeCursor c) {
    do c = exchangeStep(s, lane, c);
    while (!exchangeDone(s, c) && !exchangeHasOp(s, c));
    return c;
}

// The op at a cursor that names one.
LOOM_HD EdgeOp exchangeOp(const ExchangeSched &s, const ExchangeCursor &c) {
    if (c.round == 0)
        return edgeOp(-1, -1, kBufIn, s.sendDispl[s.rank], kBufOut, s.recvDispl[s.rank], s.sendCount[s.rank], false,
                      0);
    const size_t at = c.chunk * s.chunkElems;
    const unsigned long long key = edgeKey((unsigned)c.round, c.chunk);
    if (c.recv) {
        const int from = exchangeFrom(s, c.round);
        const size_t left = s.recvCount[from] - at;
        return edgeOp(from, -1, kBufNone, 0, kBufOut, s.recvDispl[from] + at, left < s.chunkElems ? left : s.chunkElems,
                      false, key);
    }
    const int to = exchangeTo(s, c.round);
    const size_t left = s.sendCount[to] - at;
    return edgeOp(-1, to, kBufIn, s.sendDispl[to] + at, kBufNone, 0, left < s.chunkElems ? left : s.chunkElems, false,
                  key);
}

// Slots a call sends to and receives from each peer (the host's step
// counters and the proxy follow them).
inline void exchangeStepCounts(const ExchangeSched &s, unsigned long long *sends, unsigned long long *recvs) {
    for (int q = 0; q < s.nranks; ++q) {
        sends[q] = q == s.rank ? 0 : exchangeChunks(s.sendCount[q], s.chunkElems);
        recvs[q] = q == s.rank ? 0 : exchangeChunks(s.recvCount[q], s.chunkElems);
    }
}

} // namespace loom

#endif
