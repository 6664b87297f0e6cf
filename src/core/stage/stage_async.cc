/*
 * Staging for a non-blocking call of a rank whose buffers the kernels cannot
 * use (host memory, another GPU's). MPI's non-blocking collectives return
 * without waiting for other ranks, so neither copy may wait on loom's stream:
 * it holds earlier calls' kernels, and those wait for peers. (A rank with
 * host buffers that finished such calls inside the call deadlocked with a
 * peer that posted its part after a message from it.)
 *
 * - Each call gets a device buffer of its own from the communicator's memory
 *   pool, allocated and freed in order on the staging stream (no cudaMalloc
 *   or cudaFree: those wait for the whole device).
 * - The copy in runs on the staging stream and has finished when
 *   loomStagedIn returns: the kernel launched after it sees the bytes on
 *   loom's stream or in the resident kernel, and the caller may reuse its
 *   input at once.
 * - The copies out are only recorded; loomStagedFinish runs them once the
 *   call's mark (loomCommMark) has passed, so they wait for nothing but
 *   themselves, then gives the buffer back.
 *
 * Invariants: the staging stream holds staging copies and pool operations
 * only, never a kernel, so synchronizing it waits for no peer. Small host
 * copies go through the communicator's pinned bounce buffer, one at a time
 * (the caller serialises a communicator's calls with the progress that
 * finishes them). A pool that cannot be had (old driver) leaves *staged
 * null: the caller finishes the call inside the call, as for blocking ones.
 * A call that failed (copyOut = 0) may have left work on loom's stream that
 * uses its buffer: the buffer is parked and freed with the communicator,
 * after loom's stream has drained.
 *
 * Not known to be safe: CUDA maps streams onto a few hardware queues, and a
 * staging copy behind a peer-waiting kernel or stream wait of loom's stream
 * in the same queue would wait for peers. test/perf/queue_sharing found no
 * such false dependency on CUDA's default 8 connections (only with
 * CUDA_DEVICE_MAX_CONNECTIONS=1); the one core/stream/resident.cc once blamed on
 * them was lazy loading.
 */
#include <cstring>
#include <new>
#include <vector>

#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/stage/stage_bounce.h"
#include "loom_component.h"
#include "core/comm/on_device.h"

struct loomStaged {
    loomComm *comm;
    void *buf;
    struct Out {
        void *dst;          // the caller's
        const void *src;    // in buf
        size_t bytes;
    };
    std::vector<Out> outs;
};

namespace {

// Kept by the pool between calls; beyond it, freed memory goes back to the
// driver at the staging stream's next synchronize.
constexpr uint64_t kPoolKeepBytes = 64ull << 20;

// The pool and stream, made at the first staged non-blocking call.
bool stagingReady(loomComm *comm) {
    if (comm->stage.pool || comm->stage.poolFailed) return comm->stage.pool != nullptr;
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = comm->cudaDev;
    uint64_t keep = kPoolKeepBytes;
    cudaError_t e = cudaMemPoolCreate(&comm->stage.pool, &props);
    if (e == cudaSuccess) e = cudaMemPoolSetAttribute(comm->stage.pool, cudaMemPoolAttrReleaseThreshold, &keep);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&comm->stage.stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        cudaGetLastError(); // not sticky
        if (comm->stage.pool) cudaMemPoolDestroy(comm->stage.pool);
        comm->stage.pool = nullptr;
        comm->stage.poolFailed = true;
        LOOM_WARN(loom::kColl, "rank %d GPU %d: no memory pool for non-blocking calls on host buffers (%s): they "
                  "finish inside the call", comm->rank, comm->cudaDev, cudaGetErrorString(e));
    }
    return comm->stage.pool != nullptr;
}

// One copy on the staging stream, finished on return; small host buffers
// through the bounce buffer. toDevice: dst is the staged buffer.
loomResult_t copyNow(loomComm *comm, void *dst, const void *src, size_t bytes, bool toDevice) {
    void *b = loom::stageBounceFor(comm, toDevice ? src : dst, bytes);
    if (b && toDevice) memcpy(b, src, bytes);
    // Device memory (another GPU's) may still be written by the legacy
    // stream; pageable host memory cannot be (core/stream/app_order.cc).
    if (!b && toDevice && !comm->order.blocking && loom::stagedSourceOnDevice(src))
        loom::orderAfterApplication(comm, comm->stage.stream);
    cudaError_t e = cudaMemcpyAsync(toDevice || !b ? dst : b, toDevice && b ? b : src, bytes, cudaMemcpyDefault,
                                    comm->stage.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(comm->stage.stream);
    if (e != cudaSuccess) return loom::stageCopyFail(comm, toDevice ? "in" : "out", e);
    if (b && !toDevice) memcpy(dst, b, bytes);
    return loomSuccess;
}

} // namespace

extern "C" loomResult_t loomStagedCreate(loomComm_t comm, size_t bytes, void **buffer, loomStaged_t *staged) {
    if (!comm || !buffer || !staged) return loom::fail(loomInvalidArgument, "loomStagedCreate: NULL argument");
    *staged = nullptr;
    *buffer = nullptr;
    loom::OnDevice on(comm->cudaDev);
    if (!stagingReady(comm)) return loomSuccess;
    void *buf = nullptr;
    cudaError_t e = cudaMallocFromPoolAsync(&buf, bytes ? bytes : 1, comm->stage.pool, comm->stage.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(comm->stage.stream); // usable from loom's stream too
    if (e != cudaSuccess) {
        cudaGetLastError();
        return loom::fail(loomUnhandledCudaError, "rank %d GPU %d: a staging buffer of %zu bytes for a non-blocking "
                          "call: %s", comm->rank, comm->cudaDev, bytes, cudaGetErrorString(e));
    }
    *staged = new loomStaged{comm, buf, {}};
    *buffer = buf;
    return loomSuccess;
}

extern "C" loomResult_t loomStagedIn(loomStaged_t staged, void *dst, const void *src, size_t bytes) {
    if (!staged) return loom::fail(loomInvalidArgument, "loomStagedIn: staged is NULL");
    if (!bytes) return loomSuccess;
    if (!dst || !src) return loom::fail(loomInvalidArgument, "loomStagedIn: NULL %s with %zu bytes",
                                        src ? "scratch" : "source buffer", bytes);
    loom::OnDevice on(staged->comm->cudaDev);
    return copyNow(staged->comm, dst, src, bytes, true);
}

extern "C" loomResult_t loomStagedOut(loomStaged_t staged, void *dst, const void *src, size_t bytes) {
    if (!staged) return loom::fail(loomInvalidArgument, "loomStagedOut: staged is NULL");
    if (bytes && (!dst || !src))
        return loom::fail(loomInvalidArgument, "loomStagedOut: NULL %s with %zu bytes",
                          dst ? "scratch" : "destination buffer", bytes);
    try {
        if (bytes) staged->outs.push_back(loomStaged::Out{dst, src, bytes});
    } catch (const std::bad_alloc &) {
        return loom::fail(loomSystemError, "loomStagedOut: out of host memory");
    }
    return loomSuccess;
}

extern "C" loomResult_t loomStagedFinish(loomStaged_t staged, int copyOut) {
    if (!staged) return loomSuccess;
    loomComm *comm = staged->comm;
    loom::OnDevice on(comm->cudaDev);
    loomResult_t r = loomSuccess;
    for (const loomStaged::Out &o : staged->outs)
        if (copyOut && r == loomSuccess) r = copyNow(comm, o.dst, o.src, o.bytes, false);
    if (copyOut) { // the call's kernel is done: nothing reads the buffer any more
        if (cudaFreeAsync(staged->buf, comm->stage.stream) != cudaSuccess) cudaGetLastError(); // a failed context
    } else { // a failed call: work it enqueued may still run; freed with the communicator, after its stream
        try {
            comm->stage.parked.push_back(staged->buf);
        } catch (const std::bad_alloc &) { /* leaked: better than freed under a running kernel */ }
    }
    delete staged;
    return r;
}
