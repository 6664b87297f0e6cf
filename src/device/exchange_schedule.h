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
 * on both ends. Each pair has `channels` connections, and a block's chunks
 * (one slot each) are dealt to them: chunk i on channel i % channels. Lanes
 * (CTAs) come in groups of `channels`, lane L serving channel L % channels
 * of group L / channels; rounds are dealt to the groups round-robin, round
 * k on group (k - 1) % groups, so several pairs and several channels of a
 * pair are in flight. Round 0 is the rank's own block: local copies of its
 * chunks, dealt to group 0's channels alike. Inside a round a channel's send
 * chunks and receive chunks alternate (send c, then receive c), which keeps
 * every FIFO of depth >= 1 moving (the CPU simulator checks it). A pair with
 * nothing to move has no op on either end.
 *
 * Connection q x channels + c of a rank leads to rank q (its connection
 * r x channels + c leads back). Sources are always the input: an in-place
 * alltoall must copy its buffer first (a block is overwritten by a receive
 * before its own send otherwise).
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

// CTAs of one exchange: rounds beyond this share lane groups; also the most
// channels per pair (at 2 ranks every lane can serve the one pair).
constexpr int kMaxExchangeLanes = 48;
constexpr int kMaxExchangeChannels = kMaxExchangeLanes;

struct ExchangeSched {
    int rank, nranks;
    int lanes;                 // CTAs: a multiple of channels, >= channels
    const size_t *sendCount, *sendDispl; // per peer, in elements (nranks each)
    const size_t *recvCount, *recvDispl;
    size_t chunkElems;         // one slot
    int channels;              // connections per pair, >= 1
};

// Where a lane's walk is: round, the channel's chunk j (the block's chunk
// channel + j x channels) and which half of the chunk's pair.
struct ExchangeCursor {
    int round;     // 0: the local copy; n: past the lane's last round
    size_t chunk;
    bool recv;     // the receive of this chunk (else its send)
};

LOOM_HD size_t exchangeChunks(size_t count, size_t chunkElems) { return (count + chunkElems - 1) / chunkElems; }

LOOM_HD int exchangeChannel(const ExchangeSched &s, int lane) { return lane % s.channels; }
LOOM_HD int exchangeGroup(const ExchangeSched &s, int lane) { return lane / s.channels; }
LOOM_HD int exchangeGroups(const ExchangeSched &s) { return s.lanes / s.channels; }
LOOM_HD int exchangeConn(const ExchangeSched &s, int peer, int channel) { return peer * s.channels + channel; }

// Chunks of a block of `count` elements that channel c carries.
LOOM_HD size_t exchangeChannelChunks(const ExchangeSched &s, size_t count, int c) {
    const size_t all = exchangeChunks(count, s.chunkElems);
    return all > (size_t)c ? (all - (size_t)c + (size_t)s.channels - 1) / (size_t)s.channels : 0;
}

LOOM_HD int exchangeTo(const ExchangeSched &s, int round) { return (s.rank + round) % s.nranks; }
LOOM_HD int exchangeFrom(const ExchangeSched &s, int round) { return (s.rank - round + s.nranks) % s.nranks; }

// Whether the cursor names an op on the lane: the half has a chunk there.
LOOM_HD bool exchangeHasOp(const ExchangeSched &s, int lane, const ExchangeCursor &c) {
    const int ch = exchangeChannel(s, lane);
    if (c.round == 0) return !c.recv && c.chunk < exchangeChannelChunks(s, s.sendCount[s.rank], ch);
    const size_t n = c.recv ? exchangeChannelChunks(s, s.recvCount[exchangeFrom(s, c.round)], ch)
                            : exchangeChannelChunks(s, s.sendCount[exchangeTo(s, c.round)], ch);
    return c.chunk < n;
}

// The lane's first round after `round` (n: none left).
LOOM_HD int exchangeNextRound(const ExchangeSched &s, int lane, int round) {
    const int next = round == 0 ? exchangeGroup(s, lane) + 1 : round + exchangeGroups(s);
    return next < s.nranks ? next : s.nranks;
}

// The next position after c on the lane (ops or not); round n ends it.
LOOM_HD ExchangeCursor exchangeStep(const ExchangeSched &s, int lane, ExchangeCursor c) {
    const int ch = exchangeChannel(s, lane);
    size_t chunks;
    if (c.round == 0) {
        chunks = exchangeChannelChunks(s, s.sendCount[s.rank], ch);
    } else {
        if (!c.recv) {
            c.recv = true;
            return c;
        }
        const size_t sends = exchangeChannelChunks(s, s.sendCount[exchangeTo(s, c.round)], ch);
        const size_t recvs = exchangeChannelChunks(s, s.recvCount[exchangeFrom(s, c.round)], ch);
        chunks = sends > recvs ? sends : recvs;
    }
    c.recv = false;
    if (++c.chunk < chunks) return c;
    c.chunk = 0;
    c.round = exchangeNextRound(s, lane, c.round);
    return c;
}

LOOM_HD bool exchangeDone(const ExchangeSched &s, const ExchangeCursor &c) { return c.round >= s.nranks; }

// The lane's first op (or a done cursor).
LOOM_HD ExchangeCursor exchangeFirst(const ExchangeSched &s, int lane) {
    ExchangeCursor c;
    const int group = exchangeGroup(s, lane);
    c.round = group == 0 ? 0 : group + 1;
    c.chunk = 0;
    c.recv = false;
    if (c.round >= s.nranks) c.round = s.nranks;
    while (!exchangeDone(s, c) && !exchangeHasOp(s, lane, c)) c = exchangeStep(s, lane, c);
    return c;
}

LOOM_HD ExchangeCursor exchangeNext(const ExchangeSched &s, int lane, ExchangeCursor c) {
    do c = exchangeStep(s, lane, c);
    while (!exchangeDone(s, c) && !exchangeHasOp(s, lane, c));
    return c;
}

// The op at a cursor that names one.
LOOM_HD EdgeOp exchangeOp(const ExchangeSched &s, int lane, const ExchangeCursor &c) {
    const int ch = exchangeChannel(s, lane);
    const size_t at = ((size_t)ch + c.chunk * (size_t)s.channels) * s.chunkElems;
    const unsigned long long key = edgeKey((unsigned)c.round, at);
    if (c.round == 0) {
        const size_t left = s.sendCount[s.rank] - at;
        return edgeOp(-1, -1, kBufIn, s.sendDispl[s.rank] + at, kBufOut, s.recvDispl[s.rank] + at,
                      left < s.chunkElems ? left : s.chunkElems, false, key);
    }
    if (c.recv) {
        const int from = exchangeFrom(s, c.round);
        const size_t left = s.recvCount[from] - at;
        return edgeOp(exchangeConn(s, from, ch), -1, kBufNone, 0, kBufOut, s.recvDispl[from] + at,
                      left < s.chunkElems ? left : s.chunkElems, false, key);
    }
    const int to = exchangeTo(s, c.round);
    const size_t left = s.sendCount[to] - at;
    return edgeOp(-1, exchangeConn(s, to, ch), kBufIn, s.sendDispl[to] + at, kBufNone, 0,
                  left < s.chunkElems ? left : s.chunkElems, false, key);
}

// Slots a call sends on and receives from each connection (n x channels
// entries; the host's step counters and the proxy follow them).
inline void exchangeStepCounts(const ExchangeSched &s, unsigned long long *sends, unsigned long long *recvs) {
    for (int q = 0; q < s.nranks; ++q)
        for (int c = 0; c < s.channels; ++c) {
            const int k = exchangeConn(s, q, c);
            sends[k] = q == s.rank ? 0 : exchangeChannelChunks(s, s.sendCount[q], c);
            recvs[k] = q == s.rank ? 0 : exchangeChannelChunks(s, s.recvCount[q], c);
        }
}

} // namespace loom

#endif
