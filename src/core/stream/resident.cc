/*
 * The resident kernel's host side (resident.h, device/resident/resident_args.h).
 */
#include "core/stream/resident.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sched.h>

#include "core/comm/comm.h"
#include "base/cuda_driver.h"
#include "base/debug.h"
#include "core/ipc/mapping_closer.h"
#include "core/comm/params.h"
#include "core/stream/posted_clock.h"
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
    // A call posted by a caller that may not wait (MPI's non-blocking ones),
    // not yet seen done; 0: none. While it is outstanding nothing else is
    // posted (the mailbox holds one call), and loom's stream waits for it.
    uint32_t pending = 0;
    uint32_t ordered = 0;              // the pending call loom's stream already waits for (0: none)
    uint32_t failedSeq = 0;            // the last pending call that failed, and its error, for its
    loomResult_t failedErr = loomSuccess; // own mark when another caller saw it first
    unsigned polls = 0;
    unsigned long launches = 0;
    unsigned long calls = 0, posted = 0; // run here; of those, posted by callers that may not wait
};

namespace {

static_assert(sizeof(ResidentCall) % 8 == 0, "the mailbox carries whole 8-byte units");

constexpr int kAnyKey = -1;

// Set where cuStreamWaitValue32 failed once: non-blocking calls then launch
// (ordering them after a pending call would need a wait on the host).
std::atomic<bool> streamWaitBroken{false};
// Communicators of this process with resident-kernel state (for
// LOOM_RESIDENT_NONBLOCKING=1, which posts only while this one is the only
// one). Posting was off by default, and on only behind that gate, because
// with three threads on a communicator each (coll_threads_np2) posting hung
// in the first iterations (cuda-gdb showed threads inside cudaLaunchKernel,
// and a launched call queued behind another communicator's waiting kernel).
// test/perf/queue_sharing then found no stream held up by another's waiting
// kernel, event wait or cuStreamWaitValue32 on the default 8 connections,
// only by a kernel's first launch under lazy loading. With kernels loaded up
// front (device/kernel_load.h) coll_threads with posting on every
// communicator passed every run (docs/performance.md,
// LOOM_RESIDENT_NONBLOCKING), so =2 (any number) is the default. CUDA_DEVICE_MAX_CONNECTIONS=1 still makes any waiting
// kernel or stream wait hold every stream (docs/routing.md).
std::atomic<int> residentComms{0};

void clearPending(ResidentState *r) {
    r->pending = 0;
    r->ordered = 0; // else a later call with the same number (after a wrap) would find its wait already there
}

// Whether a posted call is still outstanding (one seen done is cleared).
bool stillPending(ResidentState *r) {
    if (r->pending && r->box->done == r->pending) clearPending(r);
    return r->pending != 0;
}
int reductionKey(loomDataType_t dtype, loomRedOp_t op) { return (int)dtype * 64 + (int)op; }

void destroy(ResidentState *r) {
    residentComms.fetch_sub(1);
    if (r->stream) cudaStreamDestroy(r->stream);
    if (r->box) cudaFreeHost((void *)r->box);
    cudaFree(r->dev);
    delete r;
}

// Once per process, before any call posts (residentRun checks the outcome
// after create()): a driver may have the symbol
// but refuse stream memory operations, and then the call after a posted one
// would wait for it on the host (residentOrder), inside a non-blocking call.
// The probe waits on the fresh mailbox's `done` (0: satisfied at once).
void probeStreamWait(const loomComm *comm, ResidentState *r) {
    static std::once_flag once;
    std::call_once(once, [&] {
        const CudaDriver *d = cudaDriver();
        if (!d || !d->cuStreamWaitValue32) return;
        const CUresult e = d->cuStreamWaitValue32((CUstream)r->stream, (CUdeviceptr)(uintptr_t)&r->boxDev->done, 0,
                                                  CU_STREAM_WAIT_VALUE_EQ);
        if (e == CUDA_SUCCESS) return;
        streamWaitBroken.store(true);
        LOOM_INFO(kColl, "rank %d: no stream memory operations (cuStreamWaitValue32: %d): non-blocking calls launch",
                  comm->rank, (int)e);
    });
}

// The kernel's stream and boxes; null where any of them cannot be had.
ResidentState *create(loomComm *comm) {
    ResidentState *r = new ResidentState;
    residentComms.fetch_add(1);
    cudaError_t e = cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaHostAlloc((void **)&r->box, sizeof(ResidentHostBox), cudaHostAllocMapped);
    if (e == cudaSuccess) memset((void *)r->box, 0, sizeof(ResidentHostBox));
    if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&r->boxDev, (void *)r->box, 0);
    if (e == cudaSuccess) e = cudaMalloc((void **)&r->dev, sizeof(ResidentDevBox));
    if (e == cudaSuccess) {
        probeStreamWait(comm, r);
        return r;
    }
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
loomResult_t startKernel(loomComm *comm, int key, loomDataType_t dtype, loomRedOp_t op) {
    ResidentState *r = comm->resident;
    r->box->state = kResidentRunning;
    cudaError_t e = cudaMemsetAsync(r->dev, 0, sizeof(ResidentDevBox), r->stream);
    if (e != cudaSuccess) return cudaFailed(comm, "resident kernel", "reset", e);
    ResidentLaunchArgs a;
    a.r.host = r->boxDev;
    a.r.dev = r->dev;
    a.r.lastSeq = r->seq;
    a.r.idleNs = (unsigned long long)params().residentIdleUs * 1000ull;
    a.ctas = residentCtas();
    e = key == kAnyKey ? launchResidentBytes(a, r->stream) : launchResident(a, dtype, op, r->stream);
    if (e != cudaSuccess) return cudaFailed(comm, "resident kernel", "launch", e);
    r->alive = true;
    r->key = key;
    if (!r->launches++ && comm->rank == 0)
        LOOM_INFO(kColl, "one-shot calls up to %ld B go to the resident kernel (%d CTAs; it leaves after "
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
    notePosted();
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
            if (q != cudaSuccess) return cudaFailed(comm, "resident kernel", "ended", q);
            taken = r->box->taken == s; // its writes are all visible now that it ended
            break;
        }
    }
    if (!r->alive && !taken) {
        loomResult_t res = startKernel(comm, key, dtype, op);
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

loomResult_t settle(loomComm *comm);

loomResult_t leave(loomComm *comm) {
    ResidentState *r = comm->resident;
    if (r->pending) { // the mailbox still holds it: the kernel must take it first
        loomResult_t res = settle(comm);
        if (res != loomSuccess) return res;
    }
    if (!r->alive) return loomSuccess;
    ResidentCall call;
    memset(&call, 0, sizeof(call));
    call.command = kResidentLeave;
    const uint32_t s = residentNext(r->seq);
    writeMail(r->box, call, s);
    r->seq = s;
    const cudaError_t e = awaitEnd(r);
    return e == cudaSuccess ? loomSuccess : cudaFailed(comm, "resident kernel", "leaving", e);
}

} // namespace

bool residentAllowed(const loomComm *comm, size_t bytes) {
    const Params &p = params();
    // A caller that may not wait posts the call; the next calls need loom's
    // stream to wait for it on the GPU (residentOrder).
    // LOOM_RESIDENT_NONBLOCKING=1: while no other communicator has a resident kernel; 2: any.
    const bool alone = residentComms.load(std::memory_order_relaxed) - (comm->resident ? 1 : 0) == 0;
    const bool posting = comm->order.hostWaitAllowed ||
                         (p.residentNonblocking && (p.residentNonblocking == 2 || alone) &&
                          !streamWaitBroken.load(std::memory_order_relaxed) && cudaDriver() &&
                          cudaDriver()->cuStreamWaitValue32);
    // Not while a peer's mapping is being closed: the close waits for every
    // kernel, the resident one until it idles out (core/ipc/mapping_closer.h).
    return p.residentIdleUs > 0 && !comm->gpuShared && !gpuSharedInProcess() && posting &&
           bytes <= (size_t)p.residentMaxBytes && !mappingCloser().running();
}

bool residentEligible(loomComm *comm, size_t units, cudaStream_t stream) {
    if (stream != comm->stream || !residentAllowed(comm, units * 8)) return false;
    if (comm->resident && stillPending(comm->resident)) return false; // one call in the mailbox at a time
    // Nothing of loom's, nor of the application's on the legacy stream, may
    // still write the buffers (the latter asked at the call's entry with
    // LOOM_STREAM_BLOCKING=0: beginCall).
    if (!comm->order.idleAtEntry && cudaStreamQuery(comm->stream) != cudaSuccess) return false;
    return comm->order.blocking ? cudaStreamQuery(cudaStreamLegacy) == cudaSuccess : comm->order.legacyIdleAtEntry;
}

namespace {

// One look at call s (the last posted): 1 done, 0 not yet, -1 failed: a
// peer's line never came (the abort words say whose; callsFinished reports
// it), or the kernel ended before the call was done (*err says so). `every`:
// the kernel's stream is queried every that many looks (about 1 us each).
int look(loomComm *comm, uint32_t s, unsigned every, loomResult_t *err) {
    ResidentState *r = comm->resident;
    *err = loomSuccess;
    if (r->box->done == s) return 1;
    if (*comm->ras.abortFlag) return -1;
    if (++r->polls % every) return 0;
    const cudaError_t q = cudaStreamQuery(r->stream);
    if (q == cudaErrorNotReady) return 0;
    r->alive = false;
    if (r->box->done == s) return 1; // finished, then left idle
    if (*comm->ras.abortFlag) return -1;
    comm->ras.failed = true;
    *err = q != cudaSuccess ? cudaFailed(comm, "resident kernel", "ended", q)
                            : fail(loomInternalError, "rank %d GPU %d (%s): %s: the resident kernel ended before call %u "
                                   "finished; communicator unusable", comm->rank, comm->cudaDev, comm->busId,
                                   comm->ras.lastColl, s);
    return -1;
}

// A posted call that failed: its `done` is written here, so that loom's
// stream, which may wait for it (residentOrder), drains; its kernels see the
// abort words and leave.
void release(ResidentState *r, loomResult_t err) {
    r->box->done = r->pending;
    r->failedSeq = r->pending;
    r->failedErr = err;
    clearPending(r);
}

// Looks at call s until it is done or failed (look's answer).
int spinOn(loomComm *comm, uint32_t s, loomResult_t *err) {
    int k;
    for (unsigned spins = 1; (k = look(comm, s, 4096, err)) == 0; ++spins)
        if (spins % 4096 == 0) sched_yield(); // a rank sharing its core with a peer's (oversubscribed)
    return k;
}

// Spins until the kernel says call s is done (or a peer's line never came,
// or the kernel ended), as loomCommWait reports it.
loomResult_t finish(loomComm *comm, uint32_t s) {
    loomResult_t err = loomSuccess;
    spinOn(comm, s, &err);
    if (err != loomSuccess) return err;
    return residentCallsFinished(comm, cudaSuccess, true);
}

// Waits for the posted call: done (success), or failed (its error).
loomResult_t settle(loomComm *comm) {
    ResidentState *r = comm->resident;
    loomResult_t err = loomSuccess;
    const int k = spinOn(comm, r->pending, &err);
    if (k > 0) {
        clearPending(r);
        return loomSuccess;
    }
    if (err == loomSuccess) err = residentCallsFinished(comm, cudaSuccess, false); // the abort words say what failed
    release(r, err);
    return err;
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
    // The first communicator's create() probed stream memory operations: a
    // call that may not wait posts only where they work (it launches else).
    if (!comm->order.hostWaitAllowed && streamWaitBroken.load(std::memory_order_relaxed)) return loomSuccess;
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
    ++r->calls;
    if (!comm->order.hostWaitAllowed) { // the caller may not wait: done when a mark or loomCommWait sees `done`
        r->pending = r->seq;
        ++r->posted;
        comm->order.idle = true; // it was at entry, and the call is not on it
        return loomSuccess;
    }
    res = finish(comm, r->seq);
    if (res == loomSuccess) comm->order.idle = true; // it was at entry (residentEligible), and the call is not on it
    return res;
}

uint32_t residentPending(loomComm *comm) {
    ResidentState *r = comm->resident;
    return r && stillPending(r) ? r->pending : 0;
}

loomResult_t residentTest(loomComm *comm, uint32_t s, bool *done) {
    ResidentState *r = comm->resident;
    *done = true;
    if (!r) return loomSuccess;
    if (r->pending != s) return s == r->failedSeq ? r->failedErr : loomSuccess; // seen already (by another caller)
    loomResult_t err = loomSuccess;
    const int k = look(comm, s, 256, &err);
    if (k == 0) {
        *done = false;
        return loomSuccess;
    }
    if (k > 0) {
        clearPending(r);
        return loomSuccess;
    }
    // A peer's line never came (err success: callsFinished reports the abort
    // words), or the kernel ended early (err says so).
    release(r, err != loomSuccess ? err : loomRemoteError);
    return err;
}

loomResult_t residentSettle(loomComm *comm) {
    return comm->resident && comm->resident->pending ? settle(comm) : loomSuccess;
}

void residentOrder(loomComm *comm) {
    ResidentState *r = comm->resident;
    if (!r->pending || r->ordered == r->pending || !stillPending(r)) return;
    // EQ, not GEQ: nothing is posted after it until the host saw it done, and
    // loom's stream is busy (this wait) until then, so `done` stays there.
    const CudaDriver *d = cudaDriver();
    const CUresult e = d && d->cuStreamWaitValue32
                           ? d->cuStreamWaitValue32((CUstream)comm->stream, (CUdeviceptr)(uintptr_t)&r->boxDev->done,
                                                    r->pending, CU_STREAM_WAIT_VALUE_EQ)
                           : CUDA_ERROR_NOT_SUPPORTED;
    streamBusy(comm);
    if (e == CUDA_SUCCESS) {
        r->ordered = r->pending;
        return;
    }
    // No stream memory operations after all: this call waits on the host
    // (once per process; from now on non-blocking calls launch, residentAllowed).
    if (!streamWaitBroken.exchange(true))
        LOOM_WARN(kColl, "rank %d: cuStreamWaitValue32 failed (%d): non-blocking calls no longer go to the resident "
                  "kernel", comm->rank, (int)e);
    if (settle(comm) != loomSuccess) comm->ras.failed = true; // said by fail(); the call's own wait reports it again
}

loomResult_t residentCallsFinished(loomComm *comm, cudaError_t err, bool all) {
    const loomResult_t res = callsFinished(comm, err, all);
    ResidentState *r = comm->resident;
    if (res == loomSuccess || !r) return res;
    char text[256];
    const cudaError_t q = cudaStreamQuery(comm->stream);
    snprintf(text, sizeof(text), "resident kernel %s, last call %u, pending %u (stream waits for %u), done word %u, "
             "taken %u, state %u; loom's stream %s", r->alive ? "alive" : "not running", r->seq, r->pending, r->ordered,
             r->box->done, r->box->taken, r->box->state, q == cudaSuccess ? "idle" : q == cudaErrorNotReady ? "busy" : "failed");
    LOOM_INFO(kColl, "rank %d: %s", comm->rank, text);
    return res;
}

void residentRelease(loomComm *comm) {
    ResidentState *r = comm->resident;
    if (!r) return;
    // What a run with posting on (LOOM_RESIDENT_NONBLOCKING) shows took place.
    LOOM_INFO(kColl, "rank %d: the resident kernel ran %lu calls, %lu of them posted by non-blocking calls", comm->rank,
              r->calls, r->posted);
    if (r->alive) {
        if (comm->ras.failed) awaitEnd(r); // its CTAs leave on their own time-outs
        else leave(comm);
    }
    destroy(r);
    comm->resident = nullptr;
}

} // namespace loom
