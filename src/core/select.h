/*
 * Which algorithm a call takes: one table (select.cc), tried in order; the
 * first row that names the call's collective and whose condition holds
 * wins. Every entry point (enqueue.cc) asks here, then plans, launches and
 * commits that algorithm. The choice and the rule that made it are traced
 * per call (LOOM_DEBUG=TRACE LOOM_DEBUG_SUBSYS=COLL).
 */
#pragma once

#include <cstddef>

#include "core/comm.h"

namespace loom {

enum Algo : int {
    kAlgoOneShot = 0,         // one-shot LL inside a host (device/oneshot_schedule.h)
    kAlgoRecursiveDoubling,   // allreduce across hosts (device/rd_schedule.h)
    kAlgoTrees,               // allreduce across hosts (device/tree_schedule.h)
    kAlgoDoubling,            // bcast/reduce/allgather/reduce_scatter across hosts (device/doubling_schedule.h)
    kAlgoRingLL,              // the ring on LL
    kAlgoRing,                // the ring (chains for bcast and reduce) on Simple
    kNumAlgos
};

// The call as selection sees it. coll: RingColl (the same numbering as the
// one-shot collectives).
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
};

// The table's rows whose algorithm is in comm->algoMask (LOOM_ALGO) are
// tried; when none of them fits, the ring.
Choice selectAlgorithm(const loomComm *comm, const CallShape &s);

// The exchanges (alltoall, gather, scatter: enqueue_exchange.cc): one-shot
// (every peer mapped, one-shot in LOOM_ALGO) for a call whose blocks are at
// most `block` bytes on every rank, a bound every rank knows alike (0: none,
// as for the v-forms, whose counts each rank knows only for itself: their
// exchange kernel). Otherwise the exchange kernel. *why: the reason.
bool exchangeOneShot(const loomComm *comm, size_t block, const char **why);

constexpr unsigned kAllAlgos = (1u << kNumAlgos) - 1;

// LOOM_ALGO's syntax: algorithm names (oneshot, rd, trees, doubling, ll_ring,
// ring) separated by commas, all of them if empty or null; a leading ^
// excludes the listed ones instead. False (and *mask untouched) for a name it
// does not know or a list that leaves nothing.
bool parseAlgoMask(const char *text, unsigned *mask);

const char *algoName(int algo);

} // namespace loom
