/*
 * Completion marks for callers that must not block (MPI's non-blocking
 * collectives through the component): loomCommMark records an event on the
 * communicator's stream after everything enqueued so far and names it by a
 * ticket; loomCommTest asks, without blocking, whether the stream got past
 * it. Every loom kernel of a communicator runs on its one stream, so marks
 * finish in ticket order: a test pops finished marks from the front and
 * stops at the first unfinished one. Events are recycled.
 */
#include "core/comm.h"
#include "core/debug.h"
#include "loom.h"

using loom::CallMarks;

extern "C" loomResult_t loomCommSetHostWait(loomComm_t comm, int allowed) {
    if (!comm) return loom::fail(loomInvalidArgument, "loomCommSetHostWait: comm is NULL");
    comm->hostWaitAllowed = allowed != 0;
    return loomSuccess;
}

extern "C" loomResult_t loomCommMark(loomComm_t comm, uint64_t *ticket) {
    if (!comm || !ticket) return loom::fail(loomInvalidArgument, "loomCommMark: comm or ticket is NULL");
    CallMarks &m = comm->marks;
    cudaEvent_t e = nullptr;
    cudaError_t err = cudaSuccess;
    if (!m.spare.empty()) {
        e = m.spare.back();
        m.spare.pop_back();
    } else {
        err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    }
    if (err == cudaSuccess) err = cudaEventRecord(e, comm->stream);
    if (err != cudaSuccess) {
        if (e) m.spare.push_back(e);
        return loom::fail(loomUnhandledCudaError, "rank %d GPU %d: loomCommMark: %s", comm->rank, comm->cudaDev,
                          cudaGetErrorString(err));
    }
    m.pending.push_back(CallMarks::Mark{++m.issued, e});
    *ticket = m.issued;
    return loomSuccess;
}

extern "C" loomResult_t loomCommTest(loomComm_t comm, uint64_t ticket, int *done) {
    if (!comm || !done) return loom::fail(loomInvalidArgument, "loomCommTest: comm or done is NULL");
    CallMarks &m = comm->marks;
    *done = 0;
    if (ticket > m.issued) return loom::fail(loomInvalidArgument, "loomCommTest: ticket %llu was never issued",
                                             (unsigned long long)ticket);
    size_t popped = 0;
    cudaError_t err = cudaSuccess;
    while (popped < m.pending.size() && m.finished < ticket) {
        err = cudaEventQuery(m.pending[popped].event);
        if (err == cudaErrorNotReady) {
            err = cudaSuccess;
            break;
        }
        m.finished = m.pending[popped].ticket; // finished, or the stream failed (reported below)
        m.spare.push_back(m.pending[popped].event);
        ++popped;
        if (err != cudaSuccess) break;
    }
    m.pending.erase(m.pending.begin(), m.pending.begin() + (long)popped);
    if (m.finished < ticket && err == cudaSuccess) return loomSuccess; // still running (an aborted kernel too: it may still touch buffers)
    *done = 1;
    return loom::callsFinished(comm, err, m.pending.empty());
}
