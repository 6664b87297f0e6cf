/*
 * What a call on loom's stream orders after: the application's work on the
 * legacy default stream queued before the call (a cudaMemsetAsync(buf, ...,
 * 0), a pageable cudaMemcpy whose DMA may still run when it returns), as
 * CUDA-aware MPI users expect.
 *
 * loom's stream is a non-blocking stream (cudaStreamNonBlocking), and this
 * ordering is made explicitly at every call's first step (beginCall): where
 * the legacy stream still holds work, an event recorded on it is waited for
 * on loom's stream. A blocking stream would order the same way implicitly,
 * but it also makes every later legacy-stream operation of the application
 * wait for every loom kernel in flight: a GEMM launched on the default
 * stream behind an MPI_Iallreduce did not start until the collective ended
 * (no overlap), and threads whose collectives ran on different communicators
 * waited on each other across ranks through their legacy-stream copies.
 *
 * Invariants: the call's own work goes on loom's stream after this step, so
 * it comes after the legacy work queued before the call; so do the copies
 * in of staged calls whose source is device memory (another GPU's buffer,
 * which a legacy-stream cudaMemcpy may still be writing), on loom's stream
 * or the staging stream (core/stage_bounce.cc, core/stage_async.cc); the event is the
 * communicator's and reused (a stream wait takes the record current when it
 * is made), under the module's lock like the rest of the call;
 * the legacy stream is asked only where the call may go to the resident
 * kernel (its size), whose check needs to know it idle (core/resident.h);
 * other calls record and wait without asking, which costs less (2x
 * H200: a query 1.5 us, a record and a stream wait together 0.8 us,
 * test/perf/flag_latency). With LOOM_STREAM_BLOCKING=1 loom's stream is a
 * blocking stream again, which orders after the legacy stream implicitly
 * (no event), and the application's later legacy work waits for it. Work on the
 * application's own streams is not ordered (it never was): it must be
 * synchronized before the call.
 */
#include "core/comm.h"
#include "core/debug.h"

namespace loom {

void orderAfterApplication(loomComm *comm, cudaStream_t stream, bool ask) {
    comm->legacyAsked = ask;
    comm->legacyIdleAtEntry = ask && cudaStreamQuery(cudaStreamLegacy) == cudaSuccess;
    if (comm->legacyIdleAtEntry || (stream == comm->stream && comm->streamBlocking)) return;
    cudaError_t e = comm->legacyMark ? cudaSuccess : cudaEventCreateWithFlags(&comm->legacyMark, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(comm->legacyMark, cudaStreamLegacy);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, comm->legacyMark, 0);
    if (e == cudaSuccess) return;
    // Ordering on the GPU failed: wait on the host instead (an error of the
    // application's own work is the application's; loom's launches say theirs).
    cudaGetLastError();
    LOOM_TRACE(kColl, "rank %d: ordering after the legacy stream on the GPU failed (%s): waiting on the host",
               comm->rank, cudaGetErrorString(e));
    cudaStreamSynchronize(cudaStreamLegacy);
    cudaGetLastError();
}

} // namespace loom
