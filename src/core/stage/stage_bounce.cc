/*
 * Buffers of ranks that run on the communicator's kernels but that the
 * kernels cannot use (host memory: MPI allows a rank host buffers while its
 * peers pass device buffers; another GPU's memory): their copies to and
 * from the scratch buffer (loomCommScratch), on loom's own stream, small
 * host ones through a pinned bounce buffer. Never on the legacy default
 * stream: a legacy-stream copy waits for every blocking stream's work, other
 * communicators' kernels included, which made threads that run collectives
 * on different communicators wait on each other across ranks.
 *
 * Why not cudaMemcpy from the caller's (pageable) memory: it goes through
 * the driver's staging and the legacy stream, and on the GPU hosts a staged
 * 4-byte MPI_Allreduce cost many times the same call on device buffers that
 * way (docs/performance.md, "Measurements behind the code").
 *
 * Invariants: the bounce buffer is the communicator's, used by one copy at a
 * time (the component serialises a communicator's calls and the progress
 * that finishes its non-blocking staged calls, core/stage/stage_async.cc); a copy in has
 * finished when loomCommStageIn returns (loom's stream drained: the call may
 * take the resident kernel); a copy out waits for the stream, so it comes
 * after the call's kernel.
 */
#include <cstring>

#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/stage/stage_bounce.h"
#include "loom_component.h"

namespace loom {

constexpr size_t kBounceBytes = 1u << 20; // larger copies go straight (bandwidth, not latency)

namespace {

// The bounce buffer (allocated at the first small copy); null: none to be had.
void *bounce(loomComm *comm) {
    if (!comm->stage.bounce && !comm->stage.bounceFailed) {
        int current = -1;
        cudaGetDevice(&current);
        cudaSetDevice(comm->cudaDev);
        if (cudaHostAlloc(&comm->stage.bounce, kBounceBytes, cudaHostAllocDefault) != cudaSuccess) {
            cudaGetLastError(); // not sticky: cudaMemcpy goes on
            comm->stage.bounce = nullptr;
            comm->stage.bounceFailed = true;
            LOOM_WARN(loom::kColl, "rank %d GPU %d: no pinned bounce buffer for host-buffer ranks: copies go straight",
                      comm->rank, comm->cudaDev);
        }
        if (current >= 0) cudaSetDevice(current);
    }
    return comm->stage.bounce;
}

} // namespace

loomResult_t stageCopyFail(loomComm *comm, const char *what, cudaError_t e) {
    comm->ras.failed = true; // a copy that could not be enqueued: the next call would meet a broken context
    return loom::fail(loomUnhandledCudaError, "rank %d GPU %d: staging a host buffer %s: %s", comm->rank,
                      comm->cudaDev, what, cudaGetErrorString(e));
}

// The bounce buffer for `bytes` of the host-side buffer `host`, or null when
// the copy goes straight from or to it (too large, or another GPU's memory).
void *stageBounceFor(loomComm *comm, const void *host, size_t bytes) {
    loomPointerInfo_t info;
    loomPointerQuery(host, &info);
    return bytes <= kBounceBytes && info.kind == loomMemoryHost ? bounce(comm) : nullptr;
}

bool stagedSourceOnDevice(const void *src) {
    loomPointerInfo_t info;
    loomPointerQuery(src, &info);
    return info.kind != loomMemoryHost;
}

} // namespace loom

namespace {

using loom::stageBounceFor;
using loom::stageCopyFail;

// Copies on loom's stream and waits like every wait (errors of earlier
// kernels said as such, proxies left their cores).
loomResult_t copyAndWait(loomComm *comm, void *dst, const void *src, size_t bytes, const char *what) {
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, comm->stream);
    if (e != cudaSuccess) return stageCopyFail(comm, what, e);
    loom::streamBusy(comm);
    return loomCommWait(comm);
}

} // namespace

extern "C" loomResult_t loomCommStageIn(loomComm_t comm, void *scratch, const void *src, size_t bytes) {
    if (!comm) return loom::fail(loomInvalidArgument, "loomCommStageIn: comm is NULL");
    if (bytes == 0) return loomSuccess;
    if (!scratch || !src) return loom::fail(loomInvalidArgument, "loomCommStageIn: NULL %s with %zu bytes",
                                            src ? "scratch" : "source buffer", bytes);
    void *b = stageBounceFor(comm, src, bytes);
    if (b) memcpy(b, src, bytes);
    else if (loom::stagedSourceOnDevice(src)) loom::orderAfterApplication(comm, comm->stream); // core/stream/app_order.cc
    // Large host buffers (pageable: a synchronous copy, but on loom's stream)
    // and another GPU's buffers straight from where they are.
    return copyAndWait(comm, scratch, b ? b : src, bytes, "in");
}

extern "C" loomResult_t loomCommStageOut(loomComm_t comm, void *dst, const void *scratch, size_t bytes) {
    if (!comm) return loom::fail(loomInvalidArgument, "loomCommStageOut: comm is NULL");
    if (bytes == 0) return loomSuccess;
    if (!dst || !scratch) return loom::fail(loomInvalidArgument, "loomCommStageOut: NULL %s with %zu bytes",
                                            dst ? "scratch" : "destination buffer", bytes);
    void *b = stageBounceFor(comm, dst, bytes);
    const loomResult_t r = copyAndWait(comm, b ? b : dst, scratch, bytes, "out");
    if (r == loomSuccess && b) memcpy(dst, b, bytes);
    return r;
}
