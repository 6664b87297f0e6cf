/*
 * core/algo/registry.h: the table's order and the entries' shared pieces.
 * Each entry lives with its algorithm's enqueue.
 */
#include "core/algo/registry.h"

#include "core/comm/params.h"

namespace loom {

#define LOOM_ALGORITHM(number, entry) extern const AlgoEntry entry;
#include "core/algo/algo_list.h"
#undef LOOM_ALGORITHM

// Selection's order: the first that fits wins where the time model knows
// none of them (core/select/select.cc); the ring, which always fits, last.
const AlgoEntry *const kRegistry[] = {
#define LOOM_ALGORITHM(number, entry) &entry,
#include "core/algo/algo_list.h"
#undef LOOM_ALGORITHM
};
const int kRegistrySize = (int)(sizeof(kRegistry) / sizeof(kRegistry[0]));
static_assert(sizeof(kRegistry) / sizeof(kRegistry[0]) == kNumAlgos, "one entry per Algo");

const AlgoEntry *algoEntry(int algo) {
    if (algo < 0 || algo >= kRegistrySize || kRegistry[algo]->algo != algo) return nullptr; // numbered in list order
    return kRegistry[algo];
}

bool fitsAlways(const loomComm *, const CallShape &) { return true; }

bool oneShotPieceFits(const loomComm *comm, size_t piece, size_t crossover) {
    const long limit = params().oneShotMaxBytes;
    const size_t link = piece * (size_t)(comm->nranks - 1);
    return comm->ll.allPeersMapped && piece <= comm->ll.maxBytes && link <= (limit >= 0 ? (size_t)limit : crossover);
}

} // namespace loom
