/*
 * Completion marks for callers that must not block (MPI's non-blocking
 * collectives through the component): loomCommMark records an event on the
 * communicator's stream after everything enqueued so far and names it by a
 * ticket; loomCommTest asks, without blocking, whether the stream got past
 * it. Every loom kernel of a communicator runs on its one stream, so marks
 * finish in ticket order: a test pops finished marks from the front and
 * stops at the first unfinished one. Events are recycled.
 */
#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/stream/resident.h"
#include "loom_component.h"

using loom::CallMarks;

extern "C" loomResult_t loomCommSetHostWait(loomComm_t comm, int allowed) {
    if (!comm) return loom::fail(loomInvalidArgument, "loomCommSetHostWait: comm is NULL");
    comm->order.hostWaitAllowed = allowed != 0;
    return loomSuccess;
}

extern "C" loomResult_t loomCommMark(loomComm_t comm, uint64_t *ticket) {
    if (!comm || !ticket) return loom::fail(loomInvalidArgument, "loomCommMark: comm or ticket is NULL");
    CallMarks &m = comm->order.marks;
    cudaEvent_t e = nullptr;
    cudaError_t err = cudaSuccess;
    // No event where loom's stream holds nothing (the last call went to the
    // resident kernel, or none came since a wait drained it).
    if (!comm->order.idle) {
        if (!m.spare.empty()) {
            e = m.spare.back();
            m.spare.pop_back();
        } else {
            err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
        }
        if (err == cudaSuccess) err = cudaEventRecord(e, comm->stream);
    }
    if (err != cudaSuccess) {
        if (e) m.spare.push_back(e);
        return loom::fail(loomUnhandledCudaError, "rank %d GPU %d: loomCommMark: %s", comm->rank, comm->cudaDev,
                          cudaGetErrorString(err));
    }
    m.pending.push_back(CallMarks::Mark{++m.issued, e, loom::residentPending(comm)});
    *ticket = m.issued;
    return loomSuccess;
}

extern "C" loomResult_t loomCommTest(loomComm_t comm, uint64_t ticket, int *done) {
    if (!comm || !done) return loom::fail(loomInvalidArgument, "loomCommTest: comm or done is NULL");
    CallMarks &m = comm->order.marks;
    *done = 0;
    if (ticket > m.issued) return loom::fail(loomInvalidArgument, "loomCommTest: ticket %llu was never issued",
                                             (unsigned long long)ticket);
    size_t popped = 0;
    cudaError_t err = cudaSuccess;
    loomResult_t failed = loomSuccess;
    while (popped < m.pending.size() && m.finished < ticket) {
        CallMarks::Mark &k = m.pending[popped];
        if (k.residentSeq) { // the resident call first: loom's stream may wait for it
            bool seen = false;
            const loomResult_t f = loom::residentTest(comm, k.residentSeq, &seen);
            if (f != loomSuccess) failed = f; // the kernel ended early (released: the stream drains)
            if (!seen) break;
            k.residentSeq = 0;
        }
        if (k.event) {
            err = cudaEventQuery(k.event);
            if (err == cudaErrorNotReady) {
                err = cudaSuccess;
                break;
            }
            m.spare.push_back(k.event);
        }
        m.finished = k.ticket; // finished, or the stream failed (reported below)
        ++popped;
        if (err != cudaSuccess) break;
    }
    m.pending.erase(m.pending.begin(), m.pending.begin() + (long)popped);
    if (failed != loomSuccess) {
        *done = 1;
        return failed;
    }
    if (m.finished < ticket && err == cudaSuccess)
        return loomSuccess; // still running (an aborted kernel too: it may still touch buffers)
    *done = 1;
    return loom::callsFinished(comm, err, m.pending.empty());
}
