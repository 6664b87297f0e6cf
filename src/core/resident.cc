/*
 * The resident kernel's host side (resident.h, device/resident_args.h).
 */
#include "core/resident.h"

#include <atomic>
#include <cstring>
#include <sched.h>

#include "core/comm.h"
#include "core/debug.h"
#include "core/params.h"
#include "device/collectives.h"

namespace loom {

struct ResidentState {
    cudaStream_t stream = nullptr;     // non-blocking: the legacy stream never waits for the kernel
    ResidentHostBox *box = nullptr;    // host-mapped
    ResidentHostBox *boxDev = nullptr; // its device view
    ResidentDevBox *dev = nullptr;
    bool alive = false;                // launched and not seen to end
    int key = -1;                      // the running instance: (type, op) of its reductions
    uint32_t seq = 0;                  // the last call posted
    unsigned long launches = 0;
};

namespace {

static_assert(sizeof(ResidentCall) % 8 == 0, "the mailbox carries whole 8-byte units");

constexpr int kAnyKey = -1;
int reductionKey(loomDataType_t dtype, loomRedOp_t op) { return (int)dtype * 64 + (int)op; }

loomResult_t cudaFail(const loomComm *comm, const char *what, cudaError_t e) {
    return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): resident kernel: %s: %s", comm->rank, comm->cudaDev,
                comm->busId, what, cudaGetErrorString(e));
}

void destroy(ResidentState *r) {
    if (r->stream) cudaStreamDestroy(r->stream);
    if (r->box) cudaFreeHost((void *)r->box);
    cudaFree(r->dev);
    delete r;
}

// The kernel's stream and boxes; null where any of them cannot be had.
ResidentState *create(loomComm *comm) {
    ResidentState *r = new ResidentState;
    cudaError_t e = cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaHostAlloc((void **)&r->box, sizeof(ResidentHostBox), cudaHostAllocMapped);
    if (e == cudaSuccess) memset((void *)r->box, 0, sizeof(ResidentHostBox));
    if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&r->boxDev, (void *)r->box, 0);
    if (e == cudaSuccess) e = cudaMalloc((void **)&r->dev, sizeof(ResidentDevBox));
    if (e == cudaSuccess) return r;
    cudaGetLastError(); // not sticky: the launched path goes on
    LOOM_WARN(kColl, "rank %d GPU %d (%s): no resident kernel (%s): every call launches", comm->rank, comm->cudaDev,
              comm->busId, cudaGetErrorString(e));
    destroy(r);
    return nullptr;
}

// The call as LL lines tagged s: each 8-byte half is one store with its
// flag. Block tables only for ragged calls (the kernel reads them only
// then), and before the head.
void writeMail(ResidentHostBox *box, const ResidentCall &call, uint32_t s) {
    const uint64_t *units = reinterpret_cast<const uint64_t *>(&call);
    const int lines = call.args.ragged ? kResidentMailLines : kResidentHeadLines;
    for (int k = lines - 1; k >= 0; --k) {
        volatile uint64_t *line = reinterpret_cast<volatile uint64_t *>(&box->mail[k]);
        const uint64_t v = units[k], tag = (uint64_t)s << 32;
        line[0] = (v & 0xffffffffu) | tag;
        line[1] = (v >> 32) | tag;
    }
    // The mail before the look at `state` (resident_args.h), as the GPU sees them.
#if defined(__aarch64__)
    asm volatile("dmb sy" ::: "memory");
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// LOOM_RESIDENT_CTAS, capped by LOOM_MAX_CTAS.
int residentCtas() {
    const int n = params().residentCtas, cap = params().maxCtas;
    return cap > 0 && cap < n ? cap : n;
}

// A fresh kernel that takes call residentNext(r->seq) first.
loomResult_t launch(loomComm *comm, int key, loomDataType_t dtype, loomRedOp_t op) {
    ResidentState *r = comm->resident;
    r->box->state = kResidentRunning;
    cudaError_t e = cudaMemsetAsync(r->dev, 0, sizeof(ResidentDevBox), r->stream);
    if (e != cudaSuccess) return cudaFail(comm, "reset", e);
    ResidentLaunchArgs a;
    a.r.host = r->boxDev;
    a.r.dev = r->dev;
    a.r.lastSeq = r->seq;
    a.r.idleNs = (unsigned long long)params().residentIdleUs * 1000ull;
    a.ctas = residentCtas();
    e = key == kAnyKey ? launchResidentBytes(a, r->stream) : launchResident(a, dtype, op, r->stream);
    if (e != cudaSuccess) return cudaFail(comm, "launch", e);
    r->alive = true;
    r->key = key;
    if (!r->launches++ && comm->rank == 0)
        LOOM_INFO(kColl, "blocking one-shot calls up to %ld B go to the resident kernel (%d CTAs; it leaves after "
                  "%ld us without a call); said once per communicator", params().residentMaxBytes,
                  residentCtas(), params().residentIdleUs);
    LOOM_TRACE(kColl, "rank %d: resident kernel launched (%d CTAs, key %d)", comm->rank, residentCtas(), key);
    return loomSuccess;
}

// Posts call s to a kernel that may be leaving (resident_args.h): run by it,
// or, once it has ended, by a fresh one (the instance `key` asks for).
loomResult_t post(loomComm *comm, const ResidentCall &call, int key, loomDataType_t dtype, loomRedOp_t op) {
    ResidentState *r = comm->resident;
    const uint32_t s = residentNext(r->seq);
    writeMail(r->box, call, s);
    bool taken = false; // by the running kernel, though it may be leaving
    if (r->alive && r->box->state == kResidentLeaving) {
        for (unsigned spins = 1;; ++spins) {
            // It took the call in its last look (and may have run it, idled
            // and left since: then the call must not run again).
            if (r->box->taken == s || r->box->state == kResidentRunning) break;
            const cudaError_t q = cudaStreamQuery(r->stream);
            if (q == cudaErrorNotReady) {
                if (spins % 64 == 0) sched_yield();
                continue;
            }
            r->alive = false;
            if (q != cudaSuccess) return cudaFail(comm, "ended", q);
            taken = r->box->taken == s; // its writes are all visible now that it ended
            break;
        }
    }
    if (!r->alive && !taken) {
        loomResult_t res = launch(comm, key, dtype, op);
        if (res != loomSuccess) return res;
    }
    r->seq = s;
    return loomSuccess;
}

// Waits until the kernel ended (after a leave command, or a failure).
cudaError_t awaitEnd(ResidentState *r) {
    const cudaError_t e = cudaStreamSynchronize(r->stream);
    r->alive = false;
    return e;
}

loomResult_t leave(loomComm *comm) {
    ResidentState *r = comm->resident;
    if (!r->alive) return loomSuccess;
    ResidentCall call;
    memset(&call, 0, sizeof(call));
    call.command = kResidentLeave;
    const uint32_t s = residentNext(r->seq);
    writeMail(r->box, call, s);
    r->seq = s;
    const cudaError_t e = awaitEnd(r);
    return e == cudaSuccess ? loomSuccess : cudaFail(comm, "leaving", e);
}

} // namespace

bool residentAllowed(const loomComm *comm, size_t bytes) {
    const Params &p = params();
    return p.residentIdleUs > 0 && !comm->gpuShared && !gpuSharedInProcess() && comm->hostWaitAllowed &&
           bytes <= (size_t)p.residentMaxBytes;
}

bool residentEligible(loomComm *comm, size_t units, cudaStream_t stream) {
    if (stream != comm->stream || !residentAllowed(comm, units * 8)) return false;
    // Nothing of loom's, nor of the application's on the legacy stream, may still write the buffers.
    if (!comm->streamIdleAtEntry && cudaStreamQuery(comm->stream) != cudaSuccess) return false;
    return cudaStreamQuery(cudaStreamLegacy) == cudaSuccess;
}

namespace {

// Spins until the kernel says call s is done (or a peer's line never came,
// or the kernel ended), as loomCommWait reports it.
loomResult_t finish(loomComm *comm, uint32_t s) {
    ResidentState *r = comm->resident;
    cudaError_t err = cudaSuccess;
    for (unsigned spins = 1; r->box->done != s; ++spins) {
        if (*comm->abortFlag) break; // a peer's line never came (the abort words say whose)
        if (spins % 4096 == 0) {
            const cudaError_t q = cudaStreamQuery(r->stream);
            if (q == cudaErrorNotReady) {
                sched_yield(); // a rank sharing its core with a peer's (oversubscribed)
                continue;
            }
            r->alive = false;
            if (r->box->done == s || *comm->abortFlag) break; // finished (then left idle), or failed
            if (q != cudaSuccess) {
                err = q;
                break;
            }
            comm->failed = true;
            return fail(loomInternalError, "rank %d GPU %d (%s): %s: the resident kernel ended before call %u "
                        "finished; communicator unusable", comm->rank, comm->cudaDev, comm->busId, comm->lastColl, s);
        }
    }
    return callsFinished(comm, err, true);
}

} // namespace

loomResult_t residentRun(loomComm *comm, const OneShotArgs &a, loomDataType_t dtype, loomRedOp_t op, bool moves,
                         bool *ran) {
    *ran = false;
    if (comm->residentOff) return loomSuccess;
    if (!comm->resident && !(comm->resident = create(comm))) {
        comm->residentOff = true;
        return loomSuccess;
    }
    ResidentState *r = comm->resident;
    const int key = moves ? kAnyKey : reductionKey(dtype, op);
    loomResult_t res = loomSuccess;
    if (r->alive && key != kAnyKey && key != r->key) res = leave(comm); // another instance: this one leaves first
    ResidentCall call;
    memset(&call, 0, sizeof(call));
    call.args = a;
    call.command = kResidentRun;
    if (res == loomSuccess) res = post(comm, call, key, dtype, op);
    if (res != loomSuccess) { // not posted: this call and the later ones launch (said at WARN by fail())
        comm->residentOff = true;
        return loomSuccess;
    }
    *ran = true;
    res = finish(comm, r->seq);
    if (res == loomSuccess) comm->streamIdle = true; // it was at entry (residentEligible), and the call is not on it
    return res;
}

void residentRelease(loomComm *comm) {
    ResidentState *r = comm->resident;
    if (!r) return;
    if (r->alive) {
        if (comm->failed) awaitEnd(r); // its CTAs leave on their own time-outs
        else leave(comm);
    }
    destroy(r);
    comm->resident = nullptr;
}

} // namespace loom
