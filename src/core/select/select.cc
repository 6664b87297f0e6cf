/*
 * Selection over the registry's entries (select.h), the exchanges' own
 * choices, and the names LOOM_ALGO and LOOM_PROTO take.
 */
#include "core/select/select.h"

#include <algorithm>

#include "core/comm/params.h"
#include "core/algo/registry.h"
#include "core/select/tuning.h"
#include "device/ring/ring_schedule.h"

namespace loom {

// Link bytes (n-1) x block up to which one-shot runs alltoall, gather and
// scatter instead of the exchange kernel (measured up to 768 KiB of link
// bytes: docs/performance.md; past that, allgather's crossover is kept).
constexpr size_t kExchangeOneShotLinkBytes = 1536 * 1024;

bool exchangeOneShot(const loomComm *comm, size_t block, const char **why) {
    if (!block) *why = "no block bound known alike (a v-form, or empty blocks)";
    else if (!(comm->algoMask & (1u << kAlgoOneShot)) || !oneShotPieceFits(comm, block, kExchangeOneShotLinkBytes))
        *why = "one-shot off, a peer not mapped, or the block past a one-shot slot or the crossover";
    else {
        *why = "every peer mapped, blocks known alike, under the one-shot crossover";
        return true;
    }
    return false;
}

size_t exchangeOneShotPairBound(const loomComm *comm) {
    if (!comm->ll.allPeersMapped || !(comm->algoMask & (1u << kAlgoOneShot)) || params().exchangeCopyEngines) return 0;
    return std::min((size_t)params().exchangeOneShotBytes, comm->ll.maxBytes);
}

// Gathers: through the root's FIFOs (its peers' SMs write, the root copies
// locally) below gatherDirectBytes; pushed by the peers' copy engines from
// copyEngineBytes (docs/performance.md, LOOM_GATHER_DIRECT_BYTES and the
// copy-engine entry; core/enqueue/engine_copies.h).
ExchangeKnobs exchangeKnobs() {
    return ExchangeKnobs{(size_t)params().exchangeDirectBytes, (size_t)params().gatherDirectBytes,
                         params().exchangeDirectPush, (size_t)params().exchangeCopyEngineBytes,
                         params().exchangeCopyEngines != 0};
}

size_t exchangeDirectLeast(const ExchangeKnobs &k, bool fanIn) {
    return fanIn && !k.enginesAll ? k.gatherDirectBytes : k.directBytes;
}

bool exchangeBlockOnEngines(const ExchangeKnobs &k, size_t bytes) { return k.copyEngineBytes && bytes >= k.copyEngineBytes; }

bool exchangePushes(const ExchangeKnobs &k, bool fanIn, size_t agreedBlock) {
    return k.enginesAll || k.push == 2 || (fanIn && (k.push == 1 || exchangeBlockOnEngines(k, agreedBlock)));
}

Choice selectAlgorithm(const loomComm *comm, const CallShape &s) { return selectAlgorithm(comm, s, kAllAlgos); }

Choice selectAlgorithm(const loomComm *comm, const CallShape &s, unsigned allowed) {
    // Where the model knows some allowed algorithm that fits, the fastest
    // predicted of those wins and fitting rows it does not know (the LL and
    // LL128 rings) are passed over: they run where LOOM_ALGO leaves nothing
    // the model knows. Elsewhere the table's order decides.
    Choice first{-1, nullptr}, best{-1, nullptr}, second{-1, nullptr};
    for (int i = 0; i < kRegistrySize; ++i) {
        const AlgoEntry *e = kRegistry[i];
        if (!(comm->algoMask & allowed & (1u << e->algo)) || !(e->colls & collBit(s.coll)) || !e->fits(comm, s))
            continue;
        const Choice c{e->algo, e->why, predictUs(comm, s, e->algo)};
        if (first.algo < 0) first = c;
        if (c.us < 0) continue;
        if (best.algo < 0 || c.us < best.us) { // ties: the earlier row
            second = best;
            best = c;
        } else if (second.algo < 0 || c.us < second.us) {
            second = c;
        }
    }
    if (first.algo < 0) return Choice{kAlgoRing, "LOOM_ALGO leaves no other algorithm that fits this call"};
    if (best.algo < 0) {
        first.us = -1;
        return first;
    }
    best.rule = "fastest predicted of the algorithms whose rules allow the call (core/select/tuning.h)";
    best.runnerUp = second.algo;
    best.runnerUpUs = second.us;
    return best;
}

} // namespace loom
