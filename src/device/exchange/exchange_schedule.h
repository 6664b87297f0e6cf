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
 * chunks on `selfLanes` lanes of their own after the groups' (chunk i on
 * self lane i % selfLanes), so that it runs beside the pairs' rounds instead
 * of before group 0's (ahead of them, it delayed the peers' traffic by the
 * copy's whole time). Inside a round a channel's send
 * chunks and receive chunks alternate (send c, then receive c), which keeps
 * every FIFO of depth >= 1 moving (the CPU simulator checks it). A pair with
 * nothing to move has no op on either end.
 *
 * Connection q x channels + c of a rank leads to rank q (its connection
 * r x channels + c leads back). Sources are always the input: an in-place
 * alltoall must copy its buffer first (a block is overwritten by a receive
 * before its own send otherwise).
 *
 * Direct pairs (inside a host over p2p, blocks of at least
 * LOOM_EXCHANGE_DIRECT_BYTES whose sender's buffer can be mapped): the
 * receiver reads the block from the sender's input in place (its GPU mapping
 * of the sender's allocation, set up per call by the host) instead of through
 * the FIFO: one copy instead of two. Each channel moves its slice
 * (exchangeDirectSlice) in one step of the pair's connection on that channel:
 * the sender publishes the step when its lane enters the round (its input is
 * ready), the receiver waits for it, copies its slice and returns the credit,
 * and the sender's lane leaves the round only with the credit back (its input
 * is not read any more once its kernel ends). Ready signals are posted before
 * any wait of the round, so the waits are on peers in the same round of the
 * same lane, as for the FIFO ops. Both ends know a pair is direct: the sender
 * from its own buffer, the receiver from the sender's word (the host's
 * per-call exchange of buffer descriptions); the walk skips direct halves.
 *
 * Pushed direct pairs (directPush, LOOM_EXCHANGE_DIRECT_PUSH: a gather's root
 * would otherwise do every copy with its own SMs): the mirror image. The
 * receiver describes its output, the sender maps it; the receiver signals
 * "ready" (the credit) when its lane enters the round (its output is free:
 * its kernel runs), the sender waits for it, writes its slice into the
 * receiver's output and publishes the step, and the receiver's lane leaves
 * the round only once the step is published. The counters end where a pulled
 * pair leaves them (one step each way per channel), so either mode and the
 * FIFO follow one another on a connection. Both ends know the mode: it is
 * agreed at the communicator's creation and from the call's shape.
 *
 * Copy-engine copies (deferCopies, LOOM_EXCHANGE_COPY_ENGINE_BYTES): the
 * senders of a pushed fan-in (a gather's root's peers) may leave the writes
 * of their blocks into the root's output to their copy engines. A sender's
 * kernel then only awaits the root's ready; after the kernel the host
 * enqueues the copies and a second kernel (exchangeAfterCopies) publishes
 * every channel's step, marked written. The counters end as for a pair
 * copied by SMs; the root cannot tell. Only a fan-in (gather(v), which every
 * rank knows alike: no rank but the root receives) may defer, and only on
 * its senders, which receive nothing: their kernels wait only on the root's
 * ready, given on entering its round, never on a second kernel. Elsewhere
 * two deferring ends wait for each other's second kernel (the CPU simulator
 * shows the deadlock). Pulled pairs are not deferred: the root's own copy
 * engines reading its peers' blocks were about half as fast as NCCL's
 * gather (core/enqueue/engine_copies.h; docs/performance.md).
 *
 * Copy-engine mode (LOOM_EXCHANGE_COPY_ENGINES=1, alike on every rank): every
 * direct pair of every exchange is pushed and deferred (exchangeDeferAll),
 * and the deadlock above is taken apart by moving the receivers' waits too:
 * a receiver awaits its pushed blocks in the second kernel (deferWaits),
 * which first publishes its own deferred writes and only then waits. So a
 * first kernel waits only on what other first kernels give (readies, FIFO
 * steps), and a second kernel only on what other second kernels give, each
 * of which publishes before it waits. A receiver must not await a deferred
 * block in its first kernel: a lane stuck there would hold back the readies
 * of its later rounds, which the sender's first kernel awaits (the CPU
 * simulator shows it). A weak point, shared with the deferred gathers: the
 * host enqueues the copies without knowing whether the first kernel got its
 * receivers' readies; where it timed out (a receiver later than
 * LOOM_TIMEOUT), the copies may land in that receiver's output before its
 * call, and after a time-out every output of the call is suspect.
 *
 * One-shot pairs of the v-forms (a bound B, LOOM_EXCHANGE_ONESHOT_BYTES;
 * inside a host where every pair maps the other's memory): a pair whose
 * block has at most B bytes, an empty one too, moves as the one-shot
 * alltoall moves it (device/oneshot/oneshot_schedule.h): LL lines into the
 * receiver's one-shot slot for the sender, tagged with the call's one-shot
 * flag, a token line where the block is empty. The walk skips such pairs:
 * the host gives it their counts as 0 (exchangeWalkBytes), so neither end
 * has a FIFO op or a step for them; CTAs of their own after the self lanes
 * write and await their lines (exchange_coll.cu). Both ends know the pair's
 * bytes (MPI makes the sender's and the receiver's counts agree), so they
 * judge it alike with no agreement per call, and a rank all of whose blocks
 * are at most B runs the call on the one-shot kernel (or the resident
 * kernel) instead, its peers none the wiser. Every v-form call advances the
 * communicator's one-shot flag on every rank, whichever kernel runs it.
 * One-shot pairs are never direct.
 *
 * The kernel walks a lane with exchangeFirst / exchangeNext (a cursor: no
 * search per op); exchangeStepCounts is the host's count per connection.
 */
#ifndef LOOM_EXCHANGE_SCHEDULE_H
#define LOOM_EXCHANGE_SCHEDULE_H

#include <stddef.h>

#include "base/limits.h"
#include "device/edges/edge_op.h"
#include "device/host_device.h"
#include "device/oneshot/oneshot_schedule.h"

namespace loom {

// CTAs of one exchange (kMaxExchangeLanes, base/limits.h): rounds beyond
// it share lane groups; also the most channels per pair (at 2 ranks every
// lane can serve the one pair).
constexpr int kMaxExchangeChannels = kMaxExchangeLanes;

struct ExchangeSched {
    int rank, nranks;
    int lanes;                 // CTAs of the pairs' rounds: a multiple of channels, >= channels
    const size_t *sendCount, *sendDispl; // per peer, in elements (nranks each)
    const size_t *recvCount, *recvDispl;
    size_t chunkElems;         // one slot
    int channels;              // connections per pair, >= 1
    int selfLanes = 1;         // CTAs of round 0 (the own block), after the others: >= 1
    // Direct pairs (null: none this call), per peer (0: through the FIFO).
    // Pulled: directSend[q] != 0 when q reads my block in place; directSrc[q]
    // the address of q's block for me in my mapping of q's input. Pushed:
    // directSend[q] the address of my block's place in my mapping of q's
    // output; directSrc[q] != 0 when q writes its block into my output. An
    // address equal to the copy's other end (a mapping that failed) only
    // signals: nothing is copied.
    const size_t *directSend = nullptr, *directSrc = nullptr;
    bool directPush = false;
    bool deferCopies = false;  // pushed direct sends: written and published after the kernel (copy engines)
    bool deferWaits = false;   // pushed direct receives: awaited in the second kernel (copy-engine mode)
};

// Whether a pair whose block has `count` bytes goes one-shot under the
// call's bound (0: no one-shot pairs), and what of it the walk moves: all
// of it, or nothing (the host gives the walk a one-shot pair as empty: no
// field of the schedule for it, which the kernel's registers would pay).
LOOM_HD bool exchangeOneShotPair(size_t bound, size_t count) { return bound && oneShotCarries(bound, count); }
LOOM_HD size_t exchangeWalkBytes(size_t bound, size_t count) { return exchangeOneShotPair(bound, count) ? 0 : count; }
LOOM_HD bool exchangeSendDirect(const ExchangeSched &s, int q) { return s.directSend && s.directSend[q]; }
LOOM_HD bool exchangeRecvDirect(const ExchangeSched &s, int q) { return s.directSrc && s.directSrc[q]; }

// Whether this rank copies its direct half (send half or receive half):
// the receiver of a pulled pair, the sender of a pushed one. A lane's round
// runs, in this order: a signal for each direct half it does not copy
// (waits on nothing), the copy of each it does (waits for the other end's
// signal), its FIFO ops, and a wait for the other end's copy of each half
// it does not copy. The kernel runs it; the CPU simulator checks it.
LOOM_HD bool exchangeDirectCopies(const ExchangeSched &s, bool sendHalf) { return sendHalf == s.directPush; }

// Whether this rank may defer its pushed direct sends (copy-engine copies,
// above): the call is a pushed fan-in (fanIn, alike on every rank) and this
// rank receives nothing from its peers.
LOOM_HD bool exchangeMayDeferCopies(const ExchangeSched &s, bool fanIn) {
    if (!fanIn || !s.directPush) return false;
    for (int q = 0; q < s.nranks; ++q)
        if (q != s.rank && s.recvCount[q]) return false;
    return true;
}

// Copy-engine mode (above): this rank defers every pushed direct send and
// awaits every pushed direct receive in the second kernel.
LOOM_HD void exchangeDeferAll(ExchangeSched *s) {
    bool sends = false, recvs = false;
    for (int q = 0; q < s->nranks; ++q) {
        if (q == s->rank) continue;
        sends = sends || exchangeSendDirect(*s, q);
        recvs = recvs || exchangeRecvDirect(*s, q);
    }
    s->deferCopies = s->directPush && sends;
    s->deferWaits = s->directPush && recvs;
}

// Whether the call has a second kernel (deferred writes or waits).
LOOM_HD bool exchangeSecondKernel(const ExchangeSched &s) { return s.deferCopies || s.deferWaits; }

// Channel c's slice [*lo, *hi) of a direct block of `bytes`: 16-byte
// multiples in channel order, the last one ragged (possibly empty ones at
// the end of a small block: their steps only signal).
LOOM_HD void exchangeDirectSlice(size_t bytes, int channels, int c, size_t *lo, size_t *hi) {
    size_t per = (bytes + (size_t)channels - 1) / (size_t)channels;
    per = (per + 15) & ~(size_t)15;
    const size_t a = (size_t)c * per;
    *lo = a < bytes ? a : bytes;
    *hi = a + per < bytes ? a + per : bytes;
}

// Where a lane's walk is: round, the channel's chunk j (the block's chunk
// channel + j x channels) and which half of the chunk's pair.
struct ExchangeCursor {
    int round;     // 0: the local copy; n: past the lane's last round
    size_t chunk;
    bool recv;     // the receive of this chunk (else its send)
};

LOOM_HD size_t exchangeChunks(size_t count, size_t chunkElems) { return (count + chunkElems - 1) / chunkElems; }

LOOM_HD bool exchangeSelfLane(const ExchangeSched &s, int lane) { return lane >= s.lanes; }
LOOM_HD int exchangeAllLanes(const ExchangeSched &s) { return s.lanes + s.selfLanes; } // the kernel's CTAs
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

// Chunks of the own block that self lane `lane` copies.
LOOM_HD size_t exchangeSelfChunks(const ExchangeSched &s, int lane) {
    const size_t all = exchangeChunks(s.sendCount[s.rank], s.chunkElems), j = (size_t)(lane - s.lanes);
    return all > j ? (all - j + (size_t)s.selfLanes - 1) / (size_t)s.selfLanes : 0;
}


// FIFO chunks channel c sends to / receives from q this call (none on direct halves).
LOOM_HD size_t exchangeSendChunks(const ExchangeSched &s, int q, int c) {
    return exchangeSendDirect(s, q) ? 0 : exchangeChannelChunks(s, s.sendCount[q], c);
}
LOOM_HD size_t exchangeRecvChunks(const ExchangeSched &s, int q, int c) {
    return exchangeRecvDirect(s, q) ? 0 : exchangeChannelChunks(s, s.recvCount[q], c);
}

// Whether the cursor names an op on the lane: the half has a chunk there.
LOOM_HD bool exchangeHasOp(const ExchangeSched &s, int lane, const ExchangeCursor &c) {
    const int ch = exchangeChannel(s, lane);
    if (c.round == 0) return !c.recv && c.chunk < exchangeSelfChunks(s, lane);
    const size_t n = c.recv ? exchangeRecvChunks(s, exchangeFrom(s, c.round), ch)
                            : exchangeSendChunks(s, exchangeTo(s, c.round), ch);
    return c.chunk < n;
}

// The lane's first round (a self lane's is 0; n: none).
LOOM_HD int exchangeFirstRound(const ExchangeSched &s, int lane) {
    const int first = exchangeSelfLane(s, lane) ? 0 : exchangeGroup(s, lane) + 1;
    return first < s.nranks ? first : s.nranks;
}

// The lane's first round after `round` (n: none left).
LOOM_HD int exchangeNextRound(const ExchangeSched &s, int lane, int round) {
    const int next = exchangeSelfLane(s, lane) ? s.nranks : round + exchangeGroups(s);
    return next < s.nranks ? next : s.nranks;
}

// The next position after c on the lane (ops or not); round n ends it.
LOOM_HD ExchangeCursor exchangeStep(const ExchangeSched &s, int lane, ExchangeCursor c) {
    const int ch = exchangeChannel(s, lane);
    size_t chunks;
    if (c.round == 0) {
        chunks = exchangeSelfChunks(s, lane);
    } else {
        if (!c.recv) {
            c.recv = true;
            return c;
        }
        const size_t sends = exchangeSendChunks(s, exchangeTo(s, c.round), ch);
        const size_t recvs = exchangeRecvChunks(s, exchangeFrom(s, c.round), ch);
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
    c.round = exchangeFirstRound(s, lane);
    c.chunk = 0;
    c.recv = false;
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
    if (c.round == 0) {
        const size_t at = ((size_t)(lane - s.lanes) + c.chunk * (size_t)s.selfLanes) * s.chunkElems;
        const unsigned long long key = edgeKey(0u, at);
        const size_t left = s.sendCount[s.rank] - at;
        return edgeOp(-1, -1, kBufIn, s.sendDispl[s.rank] + at, kBufOut, s.recvDispl[s.rank] + at,
                      left < s.chunkElems ? left : s.chunkElems, false, key);
    }
    const size_t at = ((size_t)ch + c.chunk * (size_t)s.channels) * s.chunkElems;
    const unsigned long long key = edgeKey((unsigned)c.round, at);
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

// Steps a call sends on and receives from each connection (nranks x
// channels entries; the host's step counters and the proxy follow them): a
// FIFO half one per chunk, a direct half one per channel, a one-shot pair
// (walked as empty) none.
inline void exchangeStepCounts(const ExchangeSched &s, unsigned long long *sends, unsigned long long *recvs) {
    for (int q = 0; q < s.nranks; ++q)
        for (int c = 0; c < s.channels; ++c) {
            const int k = exchangeConn(s, q, c);
            sends[k] = q == s.rank ? 0 : exchangeSendDirect(s, q) ? 1 : exchangeChannelChunks(s, s.sendCount[q], c);
            recvs[k] = q == s.rank ? 0 : exchangeRecvDirect(s, q) ? 1 : exchangeChannelChunks(s, s.recvCount[q], c);
        }
}

} // namespace loom

#endif
