/*
 * The table collectives' entry points (allreduce, broadcast, reduce,
 * allgather, reduce_scatter and the ragged forms): argument checks, then the
 * algorithm for the call (core/select/select.h over the registry's entries),
 * then that entry's enqueue (plan, launch, commit: each algorithm's own
 * file, core/algo/registry.h lists them).
 */
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/comm/comm.h"
#include "core/enqueue/enqueue.h"
#include "core/stream/posted_clock.h"
#include "core/algo/zerocopy/zerocopy.h"
#include "base/debug.h"
#include "core/comm/params.h"
#include "core/algo/registry.h"
#include "core/select/select.h"
#include "core/select/tuning.h"
#include "device/oneshot/oneshot_schedule.h"
#include "device/ring/ring_schedule.h"

using namespace loom;

extern "C" size_t loomTypeSize(loomDataType_t type) {
    switch (type) {
    case loomInt8: case loomUint8: return 1;
    case loomInt16: case loomUint16: case loomFloat16: case loomBfloat16: return 2;
    case loomInt32: case loomUint32: case loomFloat32: return 4;
    case loomInt64: case loomUint64: case loomFloat64: return 8;
    case loomFloatComplex: case loomFloatInt: case loomIntInt: case loomShortInt: return 8;
    case loomDoubleComplex: case loomDoubleInt: case loomLongInt: return 16;
    default: return 0;
    }
}

extern "C" int loomOpSupported(loomDataType_t type, loomRedOp_t op) {
    if (!loomTypeSize(type) || (int)op < 0 || op >= loomNumOps) return 0;
    const bool pair = type >= loomFloatInt && type <= loomShortInt;
    const bool loc = op == loomMinloc || op == loomMaxloc;
    if (pair || loc) return pair && loc;
    if (type == loomFloatComplex || type == loomDoubleComplex) return op == loomSum || op == loomProd;
    const bool floating = type == loomFloat16 || type == loomBfloat16 || type == loomFloat32 || type == loomFloat64;
    return !floating || op == loomSum || op == loomProd || op == loomMin || op == loomMax;
}

namespace {

// Said at LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=TUNE by rank 0 for the first
// calls of each power-of-two size class and collective: the choice, its
// predicted time and the runner-up's.
constexpr int kTuneSaidPerClass = 3;

void sayChoice(loomComm *comm, int coll, size_t bytes, const Choice &c) {
    if (comm->rank != 0 || coll < 0 || coll >= loomComm::kTuneColls || !logEnabled(LogLevel::Info, kTune)) return;
    int cls = 0;
    while (cls < loomComm::kTuneClasses - 1 && (size_t(2) << cls) <= bytes) ++cls;
    uint8_t &said = comm->tuneSaid[coll][cls];
    if (said >= kTuneSaidPerClass) return;
    ++said;
    const CallShape shape{coll, bytes, bytes, 0, false};
    const int channels = allReduceChannels(comm, shape, c.algo);
    const bool resident = c.algo == kAlgoOneShot && residentFits(comm, shape);
    const double us = c.us < 0 ? c.us : predictCallUs(comm, shape, c.algo); // the resident kernel's saving
    char how[64];
    snprintf(how, sizeof(how), channels > 0 ? "%s (%s, %d CTAs%s)" : "%s (%s)", algoName(c.algo),
             protoName(algoProto(c.algo)), channels, resident ? ", resident kernel" : "");
    if (c.us < 0)
        LOOM_INFO(kTune, "%s of %zu B at %d ranks: %s (%s; not modelled here)", loomCollName(coll), bytes,
                  comm->nranks, how, c.rule);
    else if (c.runnerUp < 0)
        LOOM_INFO(kTune, "%s of %zu B at %d ranks: %s, predicted %.1f us; no other algorithm allowed",
                  loomCollName(coll), bytes, comm->nranks, how, us);
    else
        LOOM_INFO(kTune, "%s of %zu B at %d ranks: %s, predicted %.1f us; runner-up %s, %.1f us",
                  loomCollName(coll), bytes, comm->nranks, how, us, algoName(c.runnerUp), c.runnerUpUs);
}

// The table's choice for a call (select.cc), traced with its reason.
Choice choose(loomComm *comm, int coll, size_t bytes, size_t piece, size_t esize, bool ragged = false) {
    // No host rendezvous while the caller must not block (loomCommSetHostWait):
    // zero-copy then only staged (no per-call agreement), where it fits.
    const bool staged = coll == loomCollAllReduce && stagedTwoShotFits(comm, bytes);
    const unsigned allowed = comm->order.hostWaitAllowed || staged ? kAllAlgos : kAllAlgos & ~(1u << kAlgoZeroCopy);
    const Choice c = selectAlgorithm(comm, CallShape{coll, bytes, piece, esize, ragged}, allowed);
    LOOM_TRACE(kColl, "rank %d: %s of %zu B: %s (%s)", comm->rank, loomCollName(coll), bytes, algoName(c.algo),
               c.rule);
    sayChoice(comm, coll, bytes, c);
    notePostStep(kStepChosen);
    return c;
}

loomResult_t checkRoot(const char *what, const loomComm *comm, int root) {
    if (root < 0 || root >= comm->nranks)
        return fail(loomInvalidArgument, "%s: root %d of %d ranks", what, root, comm->nranks);
    return loomSuccess;
}

// Whether ragged blocks are in fact nranks equal blocks back to back.
bool equalBlocks(const size_t *counts, const size_t *displs, int n) {
    for (int q = 0; q < n; ++q)
        if (counts[q] != counts[0] || displs[q] != (size_t)q * counts[0]) return false;
    return true;
}

// A device buffer of the communicator's own for an in-place ragged
// reduce_scatter's input (whose blocks the result would overwrite).
loomResult_t vInputCopy(loomComm *comm, const void *in, size_t bytes, cudaStream_t stream, const void **copy) {
    loomResult_t r = growDeviceBuffer(comm, &comm->stage.vInput, &comm->stage.vInputBytes, bytes, "in-place reduce_scatter input");
    if (r != loomSuccess) return r;
    streamBusy(comm);
    cudaError_t e = cudaMemcpyAsync(comm->stage.vInput, in, bytes, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d: copy of an in-place reduce_scatter's input (%zu B): %s",
                    comm->rank, comm->cudaDev, bytes, cudaGetErrorString(e));
    *copy = comm->stage.vInput;
    return loomSuccess;
}

// The chosen entry runs the call: `piece` and `esize` as CallShape's.
loomResult_t runTableCall(loomComm *comm, const TableCall &c, size_t piece, size_t esize, bool ragged = false) {
    const Choice ch = choose(comm, c.coll, c.total * loomTypeSize(c.dtype), piece, esize, ragged);
    return algoEntry(ch.algo)->enqueue(comm, c);
}

// A ragged allgather or reduce_scatter (counts/displs in elements, `total`
// of them): the entries whose rules take ragged blocks (one-shot where its
// largest block fits, else the ring).
loomResult_t raggedCollective(loomComm *comm, int coll, const void *in, void *out, const size_t *counts,
                              const size_t *displs, size_t total, loomDataType_t dtype, loomRedOp_t op,
                              cudaStream_t stream) {
    const size_t esize = loomTypeSize(dtype);
    size_t largest = 0;
    for (int q = 0; q < comm->nranks; ++q) largest = counts[q] > largest ? counts[q] : largest;
    const bool reduces = coll == loomCollReduceScatter; // moved data has no element size limit
    const TableCall c{coll, in, out, 0, total, dtype, op, 0, counts, displs, stream};
    return runTableCall(comm, c, largest * esize, reduces ? esize : 1, true);
}

} // namespace

namespace loom {

loomResult_t checkComm(const char *what, loomComm *comm) {
    notePostStep(kStepCalled);
    if (!comm) return fail(loomInvalidArgument, "%s: comm is NULL", what);
    if (comm->ras.failed) return failedEarlier(comm, what);
    beginCall(comm);
    notePostStep(kStepChecked);
    return loomSuccess;
}

loomResult_t checkCall(const char *what, loomComm *comm, loomDataType_t dtype, bool reduction, loomRedOp_t op) {
    const loomResult_t r = checkComm(what, comm);
    if (r != loomSuccess) return r;
    if (!loomTypeSize(dtype)) return fail(loomInvalidArgument, "%s: unknown datatype %d", what, (int)dtype);
    if (reduction && !loomOpSupported(dtype, op))
        return fail(loomInvalidArgument, "%s: op %d is not defined on datatype %d", what, (int)op, (int)dtype);
    return loomSuccess;
}

} // namespace loom

extern "C" loomResult_t loomAllReduce(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                      loomRedOp_t op, loomComm_t comm, cudaStream_t stream) {
    loomResult_t r = checkCall("loomAllReduce", comm, datatype, true, op);
    if (r != loomSuccess || count == 0) return r;
    if (!sendbuff || !recvbuff) return fail(loomInvalidArgument, "loomAllReduce: NULL buffer");
    if (!stream) stream = comm->stream;
    const size_t esize = loomTypeSize(datatype);
    return runTableCall(comm, TableCall{loomCollAllReduce, sendbuff, recvbuff, count, count, datatype, op, 0, nullptr,
                                        nullptr, stream},
                        count * esize, esize);
}

extern "C" loomResult_t loomBroadcast(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                      int root, loomComm_t comm, cudaStream_t stream) {
    loomResult_t r = checkCall("loomBroadcast", comm, datatype, false, loomSum);
    if (r == loomSuccess) r = checkRoot("loomBroadcast", comm, root);
    if (r != loomSuccess || count == 0) return r;
    if (!recvbuff || (comm->rank == root && !sendbuff)) return fail(loomInvalidArgument, "loomBroadcast: NULL buffer");
    const void *in = comm->rank == root ? sendbuff : recvbuff;
    const size_t bytes = count * loomTypeSize(datatype);
    if (!stream) stream = comm->stream;
    if (movementOnEngines(comm, bytes)) return broadcastOnEngines(comm, in, recvbuff, bytes, root, stream);
    return runTableCall(
        comm, TableCall{loomCollBroadcast, in, recvbuff, count, count, datatype, loomSum, root, nullptr, nullptr, stream},
        bytes, 1);
}

extern "C" loomResult_t loomReduce(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                                   loomRedOp_t op, int root, loomComm_t comm, cudaStream_t stream) {
    loomResult_t r = checkCall("loomReduce", comm, datatype, true, op);
    if (r == loomSuccess) r = checkRoot("loomReduce", comm, root);
    if (r != loomSuccess || count == 0) return r;
    if (!sendbuff || (comm->rank == root && !recvbuff)) return fail(loomInvalidArgument, "loomReduce: NULL buffer");
    const size_t bytes = count * loomTypeSize(datatype);
    if (!stream) stream = comm->stream;
    return runTableCall(
        comm, TableCall{loomCollReduce, sendbuff, recvbuff, count, count, datatype, op, root, nullptr, nullptr, stream},
        bytes, loomTypeSize(datatype));
}

extern "C" loomResult_t loomAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, loomDataType_t datatype,
                                      loomComm_t comm, cudaStream_t stream) {
    loomResult_t r = checkCall("loomAllGather", comm, datatype, false, loomSum);
    if (r != loomSuccess || sendcount == 0) return r;
    if (!sendbuff || !recvbuff) return fail(loomInvalidArgument, "loomAllGather: NULL buffer");
    const size_t block = sendcount * loomTypeSize(datatype), n = (size_t)comm->nranks;
    if (!stream) stream = comm->stream;
    if (movementOnEngines(comm, block)) return allGatherOnEngines(comm, sendbuff, recvbuff, block, stream);
    return runTableCall(comm, TableCall{loomCollAllGather, sendbuff, recvbuff, sendcount, sendcount * n, datatype, loomSum, 0,
                                        nullptr, nullptr, stream},
                        block, 1);
}

extern "C" loomResult_t loomReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                          loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                                          cudaStream_t stream) {
    loomResult_t r = checkCall("loomReduceScatter", comm, datatype, true, op);
    if (r != loomSuccess || recvcount == 0) return r;
    if (!sendbuff || !recvbuff) return fail(loomInvalidArgument, "loomReduceScatter: NULL buffer");
    const size_t block = recvcount * loomTypeSize(datatype), n = (size_t)comm->nranks;
    if (!stream) stream = comm->stream;
    return runTableCall(comm, TableCall{loomCollReduceScatter, sendbuff, recvbuff, recvcount, recvcount * n, datatype, op,
                                        0, nullptr, nullptr, stream},
                        block, loomTypeSize(datatype));
}

extern "C" loomResult_t loomAllGatherV(const void *sendbuff, size_t sendcount, void *recvbuff, const size_t *recvcounts,
                                       const size_t *displs, loomDataType_t datatype, loomComm_t comm,
                                       cudaStream_t stream) {
    loomResult_t r = checkCall("loomAllGatherV", comm, datatype, false, loomSum);
    if (r != loomSuccess) return r;
    if (!recvcounts || !displs) return fail(loomInvalidArgument, "loomAllGatherV: NULL recvcounts or displs");
    if (sendcount != recvcounts[comm->rank])
        return fail(loomInvalidArgument, "loomAllGatherV: rank %d sends %zu elements, recvcounts[%d] is %zu", comm->rank,
                    sendcount, comm->rank, recvcounts[comm->rank]);
    size_t total = 0;
    for (int q = 0; q < comm->nranks; ++q) total += recvcounts[q];
    if (total == 0) return loomSuccess;
    if (!recvbuff || (sendcount && !sendbuff)) return fail(loomInvalidArgument, "loomAllGatherV: NULL buffer");
    if (equalBlocks(recvcounts, displs, comm->nranks))
        return loomAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
    return raggedCollective(comm, loomCollAllGather, sendbuff, recvbuff, recvcounts, displs, total, datatype, loomSum,
                            stream ? stream : comm->stream);
}

extern "C" loomResult_t loomReduceScatterV(const void *sendbuff, void *recvbuff, const size_t *recvcounts,
                                           loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                                           cudaStream_t stream) {
    loomResult_t r = checkCall("loomReduceScatterV", comm, datatype, true, op);
    if (r != loomSuccess) return r;
    if (!recvcounts) return fail(loomInvalidArgument, "loomReduceScatterV: NULL recvcounts");
    std::vector<size_t> displs((size_t)comm->nranks);
    size_t total = 0;
    for (int q = 0; q < comm->nranks; ++q) displs[q] = total, total += recvcounts[q];
    if (total == 0) return loomSuccess;
    if (!sendbuff || (recvcounts[comm->rank] && !recvbuff))
        return fail(loomInvalidArgument, "loomReduceScatterV: NULL buffer");
    if (equalBlocks(recvcounts, displs.data(), comm->nranks))
        return loomReduceScatter(sendbuff, recvbuff, recvcounts[0], datatype, op, comm, stream);
    if (!stream) stream = comm->stream;
    const size_t esize = loomTypeSize(datatype);
    const char *in = static_cast<const char *>(sendbuff), *out = static_cast<const char *>(recvbuff);
    const size_t inBytes = total * esize, outBytes = recvcounts[comm->rank] * esize;
    if (out && in < out + outBytes && out < in + inBytes) { // the result would overwrite blocks still to be read
        r = vInputCopy(comm, sendbuff, inBytes, stream, &sendbuff);
        if (r != loomSuccess) return r;
    }
    return raggedCollective(comm, loomCollReduceScatter, sendbuff, recvbuff, recvcounts, displs.data(), total, datatype,
                            op, stream);
}
