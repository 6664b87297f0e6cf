/*
 * The algorithms of the table collectives (allreduce, broadcast, reduce,
 * allgather, reduce_scatter and their ragged forms): one entry each, in the
 * order selection tries them. An entry is all the rest of core asks about
 * its algorithm: its names (LOOM_ALGO's key, the one traces and messages
 * use), its protocol, the collectives it runs, when it can run a call (fits,
 * and the rule's words for the trace), its CTAs for the time model, and how
 * it runs a call (enqueue: plan, launch, commit). Selection
 * (core/select/select.cc) walks kRegistry; the entry points
 * (core/enqueue/enqueue.cc) check the call, ask selection and run the chosen
 * entry's enqueue; nothing else branches on the algorithm.
 *
 * Adding an algorithm: its line in core/algo/algo_list.h (its number and
 * its place in the order), its entry and enqueue in its folder of
 * core/algo, its kernel with its launch and load functions in its folder of
 * src/device, and the sources in Makefile.am
 * (docs/architecture.md, "Adding an algorithm").
 */
#pragma once

#include <cstddef>

#include "core/comm/comm.h"
#include "core/select/select.h"
#include "device/ring/ring_schedule.h" // loomColl (base/coll.h)
#include "loom.h"

namespace loom {

struct KernelLoad; // device/collectives.h

// One call of a table collective as its entry point hands it on.
struct TableCall {
    int coll;       // loomColl (base/coll.h)
    const void *in; // the root's buffer for a broadcast (receivers: out)
    void *out;
    size_t count;   // elements: of the buffer, or of one block (allgather, reduce_scatter)
    size_t total;   // elements of the largest buffer (ragged: the blocks' sum)
    loomDataType_t dtype;
    loomRedOp_t op; // reductions only
    int root;       // broadcast, reduce
    const size_t *counts = nullptr, *displs = nullptr; // ragged blocks (elements, host memory), or null
    cudaStream_t stream = nullptr;
};

struct AlgoEntry {
    int algo;         // Algo
    const char *key;  // its name in LOOM_ALGO
    const char *name; // in traces and messages
    int proto;        // Proto
    unsigned colls;   // 1 << loomColl of each collective it runs
    // Whether it can run the call (s.ragged: only an entry whose enqueue
    // runs ragged blocks may say yes to one).
    bool (*fits)(const loomComm *, const CallShape &);
    const char *why;  // fits in words (the trace says it when the entry is chosen)
    int (*channels)(const loomComm *, const CallShape &); // an allreduce's CTAs (null: -1, none modelled)
    loomResult_t (*enqueue)(loomComm *, const TableCall &);
    // Loads its kernels on the current device before any loom kernel runs
    // there (core/comm/kernel_load.cc; entries may share one).
    cudaError_t (*loadKernels)(KernelLoad *);
};

extern const AlgoEntry *const kRegistry[]; // in the order selection tries them
extern const int kRegistrySize;

// The entry of algorithm number `algo` (null: none).
const AlgoEntry *algoEntry(int algo);

// The entries' shared pieces (registry.cc).
constexpr unsigned collBit(int coll) { return 1u << coll; }
constexpr unsigned kTableColls = (1u << LOOM_TABLE_COLLS) - 1; // every table collective
bool fitsAlways(const loomComm *, const CallShape &);
// Every pair maps the other's memory, the piece fits a one-shot slot, and
// the rank's link bytes (n-1) x piece are at most `crossover`
// (LOOM_ONESHOT_MAX_BYTES replaces it): one-shot's rule, and the
// exchanges' (select.cc).
bool oneShotPieceFits(const loomComm *comm, size_t piece, size_t crossover);

} // namespace loom
