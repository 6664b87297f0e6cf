/*
 * What a call on loom's stream orders after: the application's work on the
 * legacy default stream queued before the call (a cudaMemsetAsync(buf, ...,
 * 0), a pageable cudaMemcpy whose DMA may still run when it returns), as
 * CUDA-aware MPI users expect.
 *
 * By default loom's stream is a blocking stream, which orders so by itself,
 * at no cost; but then every later legacy-stream operation of the
 * application waits for every loom kernel in flight: a GEMM launched on the
 * default stream behind an MPI_Iallreduce does not start until the
 * collective ends (test/perf/overlap_bench -L: almost none of a large
 * allreduce hidden), and threads whose collectives run on different communicators
 * wait on each other through their legacy-stream copies.
 *
 * With LOOM_STREAM_BLOCKING=0 it is a non-blocking stream, and every call's
 * first step (beginCall) orders it explicitly: the legacy stream is asked
 * (cudaStreamQuery, a microsecond or two), and only where it still
 * holds work is an event recorded on it and waited for on loom's stream.
 * Asking first matters: an event recorded on the legacy stream completes
 * only after the earlier work of every blocking stream of the application
 * (cudaStreamCreate's default), which the call must not wait for (an
 * application's NCCL or compute stream). Most of the allreduce is hidden
 * then, at a little more per launched call (docs/performance.md,
 * LOOM_STREAM_BLOCKING).
 *
 * Invariants: the call's own work goes on loom's stream after this step, so
 * it comes after the legacy work queued before the call; so do the copies
 * in of staged calls whose source is device memory (another GPU's buffer,
 * which a legacy-stream cudaMemcpy may still be writing) on loom's stream
 * (core/stage/stage_bounce.cc) and, with the non-blocking stream, on the staging
 * stream (core/stage/stage_async.cc: with a blocking loom stream an event on the
 * legacy stream would wait for loom's own kernels, which wait for peers);
 * the event is the communicator's and reused (a stream wait takes the
 * record current when it is made), under the module's lock like the rest of
 * the call; legacyIdleAtEntry tells the resident kernel's check that nothing
 * of the application's may still write the buffers (core/stream/resident.h); with
 * the blocking stream nothing is asked here, and that check asks itself.
 * Work on the application's own streams is not ordered (it never was): it
 * must be synchronized before the call.
 */
#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/stream/resident.h"

namespace loom {

void beginCall(loomComm *comm) {
    if (comm->resident) residentOrder(comm); // after a pending non-blocking resident call
    orderAfterApplication(comm, comm->stream); // after the application's legacy-stream work
    comm->order.idleAtEntry = comm->order.idle;
    comm->order.idle = false;
}

void orderAfterApplication(loomComm *comm, cudaStream_t stream) {
    if (stream == comm->stream && comm->order.blocking) return;
    comm->order.legacyIdleAtEntry = cudaStreamQuery(cudaStreamLegacy) == cudaSuccess;
    if (comm->order.legacyIdleAtEntry) return;
    cudaError_t e = comm->order.legacyMark ? cudaSuccess : cudaEventCreateWithFlags(&comm->order.legacyMark, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(comm->order.legacyMark, cudaStreamLegacy);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, comm->order.legacyMark, 0);
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
