/*
 * Which algorithm a call takes. The registry (core/algo/registry.h) holds
 * one entry per algorithm, with the condition under which it can run a
 * call, in table order. Where the time model (core/select/tuning.h) has
 * constants for some allowed algorithm that fits, the fastest predicted of
 * those wins (fitting entries the model does not know, the LL and LL128
 * rings, are passed over); elsewhere the first entry, in table order, that
 * runs the call's collective and whose condition holds. Every entry point
 * (enqueue.cc) asks here, then runs the chosen entry's enqueue (plan,
 * launch, commit). The choice and the rule that made it are traced per call
 * (LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL).
 */
#pragma once

#include <cstddef>

#include "core/comm/comm.h"
#include "device/fifo.h" // kProtoSimple, kProtoLL, kProtoLL128

namespace loom {

// The algorithms' numbers, in selection order (core/algo/algo_list.h).
enum Algo : int {
#define LOOM_ALGORITHM(number, entry) number,
#include "core/algo/algo_list.h"
#undef LOOM_ALGORITHM
    kNumAlgos
};

// The call as selection sees it. coll: a table collective (loomColl, base/coll.h).
struct CallShape {
    int coll;
    size_t bytes;  // the largest buffer: allgather's output, reduce_scatter's input, else the message
    size_t piece;  // what this rank sends each peer in one shot (ragged: the largest block)
    size_t esize;  // bytes of the element the kernel reduces (1 for data movement)
    bool ragged;   // blocks of different sizes or places (allgatherv, reduce_scatter with counts)
};

struct Choice {
    int algo;         // Algo
    const char *rule; // why
    // Where the time model (core/select/tuning.h) chose: the predicted time, and the
    // next fastest algorithm the rules allowed (-1: none) with its own.
    double us = -1;
    int runnerUp = -1;
    double runnerUpUs = -1;
};

// The entries whose algorithm is in comm->algoMask (LOOM_ALGO) are tried;
// when none of them fits, the ring.
Choice selectAlgorithm(const loomComm *comm, const CallShape &s);
// The same among the algorithms of `allowed` only (a call that found it
// cannot run zero-copy asks again without it).
Choice selectAlgorithm(const loomComm *comm, const CallShape &s, unsigned allowed);

// The exchanges (alltoall, gather, scatter: enqueue_exchange.cc): one-shot
// (every peer mapped, one-shot in LOOM_ALGO) for a call whose blocks are at
// most `block` bytes on every rank, a bound every rank knows alike (0: none,
// as for the v-forms, whose counts each rank knows only for itself: their
// exchange kernel). Otherwise the exchange kernel. *why: the reason.
bool exchangeOneShot(const loomComm *comm, size_t block, const char **why);

// The v-forms' one-shot pairs (device/exchange/exchange_schedule.h): a pair
// whose block has at most this many bytes (an empty one too) moves as LL
// lines through the one-shot slots. LOOM_EXCHANGE_ONESHOT_BYTES, at most a
// one-shot slot's payload (LOOM_LL_MAX_BYTES), where every peer is mapped
// and one-shot is in LOOM_ALGO; else 0 (none; and in copy-engine mode,
// LOOM_EXCHANGE_COPY_ENGINES=1, whose broadcast and allgather run as
// exchanges for their blocks to go on the engines). From agreed facts
// only: both ends of a pair judge it alike.
size_t exchangeOneShotPairBound(const loomComm *comm);

// How many of a side's blocks (counts, n of them) are one-shot pairs'
// payloads (not empty, not the rank's own block, which is copied locally).
inline int exchangeOneShotBlocks(size_t bound, const size_t *counts, int n, int me) {
    int k = 0;
    for (int q = 0; bound && q < n; ++q) k += q != me && counts[q] && counts[q] <= bound;
    return k;
}

// How the exchange kernel moves a call's blocks inside a host over p2p: the
// settings every rank agreed at the communicator's creation.
struct ExchangeKnobs {
    size_t directBytes;       // LOOM_EXCHANGE_DIRECT_BYTES: blocks moved in place from this size (0: never)
    size_t gatherDirectBytes; // LOOM_GATHER_DIRECT_BYTES: the same for gather(v)
    int push;                 // LOOM_EXCHANGE_DIRECT_PUSH: 0 receivers copy, 1 senders in gathers, 2 senders
    size_t copyEngineBytes;   // LOOM_EXCHANGE_COPY_ENGINE_BYTES: gathers pushed by the senders' copy engines from here
    bool enginesAll = false;  // LOOM_EXCHANGE_COPY_ENGINES=1: every direct pair pushed and deferred (exchange_schedule.h)
};
ExchangeKnobs exchangeKnobs(); // from params()

// The smallest block a pair moves in place (0: none) in an exchange that is a
// fan-in (a gather(v): fanIn) or not (copy-engine mode: directBytes for all). Both ends of a pair know its size and
// the call's kind: they decide alike.
size_t exchangeDirectLeast(const ExchangeKnobs &k, bool fanIn);

// Whether a call's in-place pairs are pushed (their senders copy), from what
// every rank passes alike: fanIn, and a gather's block (agreedBlock; 0 for
// the v-forms): one of at least copyEngineBytes is pushed whatever `push`;
// in copy-engine mode every call's.
bool exchangePushes(const ExchangeKnobs &k, bool fanIn, size_t agreedBlock);

// Whether a sender of a pushed gather writes a block of `bytes` with its copy
// engines (its own choice: the root's kernel runs the same either way).
bool exchangeBlockOnEngines(const ExchangeKnobs &k, size_t bytes);

constexpr unsigned kAllAlgos = (1u << kNumAlgos) - 1;

// LOOM_ALGO's syntax: algorithm names (oneshot, zerocopy, rd, trees, doubling, ll_ring,
// ll128_ring, ring) separated by commas, all of them if empty or null; a leading ^
// excludes the listed ones instead. False (and *mask untouched) for a name it
// does not know or a list that leaves nothing.
bool parseAlgoMask(const char *text, unsigned *mask);

const char *algoName(int algo);

// The protocols (NCCL's names; numbered as device/fifo.h's kProtoSimple,
// kProtoLL, kProtoLL128, the one numbering host and device use): how an
// algorithm's data and flags travel. LL: 16-byte lines, 8 bytes of data and
// two 4-byte flags (one-shot, the LL ring); LL128: 128-byte lines, 120 bytes
// of data and an 8-byte flag (the LL128 ring); Simple: plain stores then one
// flag per chunk (the ring and chains, trees, doubling, zero-copy).
int algoProto(int algo);
const char *protoName(int proto);

// LOOM_PROTO's syntax: protocol names (LL, LL128, Simple) as LOOM_ALGO's;
// *algos gets the algorithms that run on the listed protocols. False
// (untouched) for a name it does not know or a list that leaves none.
bool parseProtoAlgos(const char *text, unsigned *algos);

} // namespace loom
