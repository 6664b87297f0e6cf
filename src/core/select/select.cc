/*
 * The selection table (select.h) and the measurements behind its rows.
 */
#include "core/select/select.h"

#include "core/comm/params.h"
#include "core/select/tuning.h"
#include "device/doubling_schedule.h"
#include "device/oneshot_schedule.h"
#include "device/rd_args.h"
#include "device/ring_schedule.h"

namespace loom {

namespace {

// Bytes one rank may move over its links, (n-1) x piece, up to which each
// one-shot collective beats the ring (measured: docs/performance.md,
// "Measurements behind the code"). Ragged calls count their largest block as
// the piece. LOOM_ONESHOT_MAX_BYTES replaces the table.
constexpr size_t kOneShotLinkBytes[kRingNumColls] = {
    0,           // allreduce: LOOM_LL_MAX_BYTES alone decides
    1536 * 1024, // reduce_scatter
    1536 * 1024, // allgather
    768 * 1024,  // broadcast
    1536 * 1024, // reduce
};

// Every pair maps the other's memory, the piece fits a slot, and the rank's
// link bytes (n-1) x piece are at most `crossover` (LOOM_ONESHOT_MAX_BYTES
// replaces it).
bool oneShotPieceFits(const loomComm *comm, size_t piece, size_t crossover) {
    const long limit = params().oneShotMaxBytes;
    const size_t link = piece * (size_t)(comm->nranks - 1);
    return comm->allPeersMapped && piece <= comm->llMaxBytes && link <= (limit >= 0 ? (size_t)limit : crossover);
}

// The same for the table's collectives (LL lines carry 8-byte units: a
// 16-byte element would straddle two; allreduce: LOOM_LL_MAX_BYTES alone).
bool oneShotFits(const loomComm *comm, const CallShape &s) {
    if (!comm->allPeersMapped || s.esize > 8) return false;
    if (s.coll == kRingAllReduce) return s.bytes <= comm->llMaxBytes;
    return oneShotPieceFits(comm, s.piece, kOneShotLinkBytes[s.coll]);
}

// Recursive doubling (log2 n hops; trees 2x that, rings 2(n-1)) up to
// LOOM_RD_MAX_BYTES, where it won across hosts (docs/performance.md).
bool rdFits(const loomComm *comm, const CallShape &s) { return comm->rdReady && s.bytes <= comm->rdMaxBytes; }
bool treesFit(const loomComm *comm, const CallShape &s) { return comm->treeReady && s.bytes <= comm->treeMaxBytes; }

// The doubling family takes log2(ranks) network hops (one or two more with
// extras) where the ring takes n - 1; but an edge hop costs about twice a
// ring hop today (measured across fake hosts over ucx/TCP:
// docs/performance.md), so it runs where it takes fewer than half the
// ring's hops (from 8 ranks).
// LOOM_DOUBLING=1/0 forces it on/off. Equal blocks only.
bool doublingFits(const loomComm *comm, const CallShape &s) {
    if (s.ragged || !comm->rdReady || s.bytes > comm->rdMaxBytes || params().doubling == 0) return false;
    if (params().doubling == 1) return true;
    const RdPlan q = rdPlan(comm->rank, comm->nranks); // p and steps are the same on every rank
    const bool extras = q.p < comm->nranks;
    const bool rooted = s.coll == kRingBroadcast || s.coll == kRingReduce; // extras add a hop, not two
    const int hops = q.steps + (extras ? (rooted ? 1 : 2) : 0);
    return 2 * hops < comm->nranks - 1;
}

// The LL ring (off by default: it won only in a narrow band of sizes).
bool ringLLFits(const loomComm *comm, const CallShape &s) { return s.bytes <= comm->llRingMaxBytes && s.esize <= 8; }

// The LL128 ring (off by default, LOOM_LL128_MAX_BYTES): NVLink rings only
// (comm->ll128Ready), elements that fit its 8-byte units.
bool ringLL128Fits(const loomComm *comm, const CallShape &s) {
    return comm->ll128Ready && s.bytes <= comm->ll128RingMaxBytes && s.esize <= 8;
}

// The zero-copy allreduce (enqueue_zerocopy.cc): every pair of GPUs mapped
// inside one host, the bootstrap able to pass buffer descriptions per call,
// and the size within LOOM_ZERO_COPY_MIN_BYTES..MAX_BYTES.
bool zeroCopyFits(const loomComm *comm, const CallShape &s) {
    return comm->zeroCopyReady && s.bytes >= (size_t)params().zeroCopyMinBytes &&
           s.bytes <= (size_t)params().zeroCopyMaxBytes;
}

bool always(const loomComm *, const CallShape &) { return true; }

constexpr unsigned bit(int coll) { return 1u << coll; }
constexpr unsigned kAll = (1u << kRingNumColls) - 1;
constexpr unsigned kAllReduce = bit(kRingAllReduce);
constexpr unsigned kDoublingColls = bit(kRingBroadcast) | bit(kRingReduce) | bit(kRingAllGather) | bit(kRingReduceScatter);

struct Rule {
    unsigned colls; // bit(coll) of the collectives it applies to
    int algo;
    bool (*fits)(const loomComm *, const CallShape &);
    const char *why;
};

const Rule kRules[] = {
    {kAllReduce, kAlgoZeroCopy, zeroCopyFits, "every peer mapped, within LOOM_ZERO_COPY_MIN_BYTES..MAX_BYTES"},
    {kAll, kAlgoOneShot, oneShotFits, "every peer mapped, under the one-shot crossover"},
    {kAllReduce, kAlgoRecursiveDoubling, rdFits, "ranks span hosts, up to LOOM_RD_MAX_BYTES"},
    {kAllReduce, kAlgoTrees, treesFit, "ranks span hosts, up to LOOM_TREE_MAX_BYTES"},
    {kDoublingColls, kAlgoDoubling, doublingFits, "ranks span hosts, fewer than half the ring's hops (LOOM_DOUBLING)"},
    {kAllReduce, kAlgoRingLL128, ringLL128Fits, "NVLink rings, up to LOOM_LL128_MAX_BYTES"},
    {kAllReduce, kAlgoRingLL, ringLLFits, "up to LOOM_LL_RING_MAX_BYTES"},
    {kAll, kAlgoRing, always, "bandwidth"},
};

} // namespace

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
    for (const Rule &r : kRules) {
        if (!(comm->algoMask & allowed & (1u << r.algo)) || !(r.colls & bit(s.coll)) || !r.fits(comm, s)) continue;
        const Choice c{r.algo, r.why, predictUs(comm, s, r.algo)};
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

namespace {
const NamedBit kAlgoKeys[kNumAlgos] = {{"oneshot", 1u << kAlgoOneShot},   {"rd", 1u << kAlgoRecursiveDoubling},
                                       {"trees", 1u << kAlgoTrees},       {"doubling", 1u << kAlgoDoubling},
                                       {"ll_ring", 1u << kAlgoRingLL},    {"ring", 1u << kAlgoRing},
                                       {"zerocopy", 1u << kAlgoZeroCopy}, {"ll128_ring", 1u << kAlgoRingLL128}};
} // namespace

bool parseAlgoMask(const char *text, unsigned *mask) {
    if (!text || !*text) {
        *mask = kAllAlgos;
        return true;
    }
    int unknown = 0;
    const unsigned m = parseNameMask(text, kAlgoKeys, kNumAlgos, kAllAlgos, &unknown);
    if (unknown || !m) return false;
    *mask = m;
    return true;
}

int algoProto(int algo) {
    return algo == kAlgoOneShot || algo == kAlgoRingLL ? kProtoNameLL
           : algo == kAlgoRingLL128                    ? kProtoNameLL128
                                                       : kProtoNameSimple;
}

const char *protoName(int proto) {
    static const char *const names[kNumProtoNames] = {"LL", "Simple", "LL128"};
    return proto >= 0 && proto < kNumProtoNames ? names[proto] : "?";
}

bool parseProtoAlgos(const char *text, unsigned *algos) {
    if (!text || !*text) {
        *algos = kAllAlgos;
        return true;
    }
    const NamedBit keys[kNumProtoNames] = {
        {"LL", 1u << kProtoNameLL}, {"Simple", 1u << kProtoNameSimple}, {"LL128", 1u << kProtoNameLL128}};
    int unknown = 0;
    const unsigned protos = parseNameMask(text, keys, kNumProtoNames, (1u << kNumProtoNames) - 1, &unknown);
    unsigned m = 0;
    for (int a = 0; a < kNumAlgos; ++a)
        if (protos & (1u << algoProto(a))) m |= 1u << a;
    if (unknown || !m) return false;
    *algos = m;
    return true;
}

const char *algoName(int algo) {
    static const char *const names[kNumAlgos] = {"one-shot", "recursive doubling", "trees", "doubling family",
                                                 "ring (LL)", "ring", "zero-copy", "ring (LL128)"};
    return algo >= 0 && algo < kNumAlgos ? names[algo] : "?";
}

} // namespace loom
