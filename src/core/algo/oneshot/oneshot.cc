/*
 * One-shot calls (device/oneshot/oneshot_schedule.h): small messages inside a host
 * where every pair of GPUs maps the other's memory. Every rank writes each
 * peer's piece as LL lines into that peer's slot, one hop, and builds its
 * output locally. Slots alternate between two parities per call.
 */
#include <cstring>

#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/enqueue/enqueue.h"
#include "core/stream/posted_clock.h"
#include "core/stream/resident.h"
#include "core/comm/params.h"
#include "core/algo/registry.h"
#include "core/select/tuning.h"
#include "device/collectives.h"
#include "device/oneshot/oneshot_schedule.h"
#include "device/ring/ring_schedule.h"

namespace loom {

void oneShotCallArgs(loomComm *comm, int coll, const void *in, void *out, size_t bytes, int root,
                     const size_t *counts, const size_t *displs, const size_t *rcounts, const size_t *rdispls,
                     OneShotArgs *a) {
    memset(static_cast<void *>(a), 0, sizeof(*a));
    a->coll = coll;
    a->root = root;
    a->in = in;
    a->out = out;
    a->bytes = bytes;
    a->nranks = comm->nranks;
    a->rank = comm->rank;
    a->ragged = counts != nullptr;
    for (int q = 0; counts && q < comm->nranks; ++q) a->counts[q] = counts[q], a->displs[q] = displs[q];
    for (int q = 0; rcounts && q < comm->nranks; ++q) a->rcounts[q] = rcounts[q], a->rdispls[q] = rdispls[q];
    uint32_t call = ++comm->ll.calls;
    if (call == 0) call = ++comm->ll.calls; // flag 0 would match zeroed slots
    a->flag = call;
    const size_t parity = (size_t)(call & 1) * comm->nranks;
    const char *mine = static_cast<const char *>(comm->region.base) + comm->ll.offset;
    for (int q = 0; q < comm->nranks; ++q) {
        a->mine[q] = reinterpret_cast<const LLLine *>(mine + (parity + q) * comm->ll.slotBytes);
        if (q != comm->rank)
            a->slot[q] = reinterpret_cast<LLLine *>(comm->peerBase[q] + comm->ll.offset +
                                                    (parity + comm->rank) * comm->ll.slotBytes);
    }
}

loomResult_t oneShotCollective(loomComm *comm, int coll, const void *in, void *out, size_t bytes, loomDataType_t dtype,
                               loomRedOp_t op, int root, cudaStream_t stream, const size_t *counts,
                               const size_t *displs, const size_t *rcounts, const size_t *rdispls) {
    OneShotArgs a;
    enterCollective(comm, loomCollName(coll));
    oneShotCallArgs(comm, coll, in, out, bytes, root, counts, displs, rcounts, rdispls, &a);
    size_t units = (oneShotMaxPiece(coll, comm->nranks, OneShotBlocks{counts, displs, bytes, rcounts, rdispls}) + 7) / 8;
    if (coll == loomCollAllGather || coll == loomCollAllToAll) units *= (size_t)comm->nranks; // n output blocks
    a.nblocks = oneShotChannels(units); // core/select/tuning.h
    kernelWaits(comm, a);
    const bool moves = coll == loomCollAllGather || coll == loomCollBroadcast || coll == loomCollAllToAll;
    const bool eligible = residentEligible(comm, units, stream);
    notePostStep(kStepEligible);
    if (eligible) { // no launch: the resident kernel runs it (core/stream/resident.h)
        bool ran = false;
        const loomResult_t r = residentRun(comm, a, dtype, op, moves, &ran);
        if (ran) {
            LOOM_TRACE(kColl, "rank %d: %s %zu B per piece, one-shot on the resident kernel", comm->rank,
                       loomCollName(coll), bytes);
            return r;
        }
    }
    cudaError_t err = moves ? launchOneShotBytes(a, stream) : launchOneShotColl(a, dtype, op, stream);
    if (err != cudaSuccess) return cudaFailed(comm, loomCollName(coll), "one-shot launch", err);
    notePosted();
    LOOM_TRACE(kColl, "rank %d: %s %zu B per piece, one-shot", comm->rank, loomCollName(coll), bytes);
    return loomSuccess;
}

// The registry's entry (core/algo/registry.h).

namespace {

// Bytes one rank may move over its links, (n-1) x piece, up to which each
// one-shot collective beats the ring (measured: docs/performance.md,
// "Measurements behind the code"). Ragged calls count their largest block as
// the piece. LOOM_ONESHOT_MAX_BYTES replaces the table.
constexpr size_t kOneShotLinkBytes[LOOM_TABLE_COLLS] = {
    0,           // allreduce: LOOM_LL_MAX_BYTES alone decides
    1536 * 1024, // reduce_scatter
    1536 * 1024, // allgather
    768 * 1024,  // broadcast
    1536 * 1024, // reduce
};

// LL lines carry 8-byte units: a 16-byte element would straddle two;
// allreduce: LOOM_LL_MAX_BYTES alone.
bool oneShotFits(const loomComm *comm, const CallShape &s) {
    if (!comm->ll.allPeersMapped || s.esize > 8) return false;
    if (s.coll == loomCollAllReduce) return s.bytes <= comm->ll.maxBytes;
    return oneShotPieceFits(comm, s.piece, kOneShotLinkBytes[s.coll]);
}

int oneShotCtas(const loomComm *, const CallShape &s) { return oneShotChannels((s.bytes + 7) / 8); }

loomResult_t oneShotRun(loomComm *comm, const TableCall &c) {
    if (c.counts) {
        size_t bytes[kMaxOneShotRanks], at[kMaxOneShotRanks]; // the ragged blocks in bytes
        const size_t esize = loomTypeSize(c.dtype);
        for (int q = 0; q < comm->nranks; ++q) bytes[q] = c.counts[q] * esize, at[q] = c.displs[q] * esize;
        return oneShotCollective(comm, c.coll, c.in, c.out, 0, c.dtype, c.op, 0, c.stream, bytes, at);
    }
    return oneShotCollective(comm, c.coll, c.in, c.out, c.count * loomTypeSize(c.dtype), c.dtype, c.op, c.root,
                             c.stream);
}

} // namespace

extern const AlgoEntry kOneShotAlgo = {kAlgoOneShot, "oneshot", "one-shot", kProtoLL, kTableColls, oneShotFits,
                                       "every peer mapped, under the one-shot crossover", oneShotCtas, oneShotRun,
                                       loadOneShotKernels};

} // namespace loom
