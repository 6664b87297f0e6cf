/*
 * The resident kernel (resident_args.h): runs one-shot calls (oneshot_body.h)
 * as the host posts them, until it has been idle for idleNs or is told to
 * leave. CTA 0's first warp polls the mailbox in host memory and hands each
 * call of several CTAs to the others as LL lines in device memory
 * (resident_args.h); after a call the last CTA to finish tells the host
 * (`done`).
 *
 * Invariants:
 *  - the host posts call s + 1 only after it read done == s, so every CTA is
 *    past call s (and `arrived` is reset) before any CTA sees call s + 1;
 *  - only the poller decides to leave (idle, a leave command or a failed
 *    CTA), and it tells the other CTAs with a leave command on dev->mail;
 *  - a call needs the CTAs its units need (at most the kernel's): the others
 *    skip it, and `done` waits only for those it needs; CTA 0 waits for
 *    them too (dev->finished) before it looks for the next call, so it never
 *    leaves while a needed CTA has yet to start;
 *  - a CTA whose call fails (a peer's line never came) leaves at once, and
 *    so does every other CTA at its next look: the abort words tell the host.
 * One instance per (type, op) of the reductions; any instance runs the
 * collectives that only move data.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/kernel_load.h"
#include "device/oneshot/oneshot_body.h"
#include "device/resident/resident_args.h"
#include "device/resident/resident_handoff.h"
#include "device/resident/resident_trace.h"

namespace loom {
namespace {

__device__ __forceinline__ unsigned long long globalNs() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// After the poller saw a call in host memory (and before the barrier that
// lets its CTA run it): acquire at system scope. The call's inputs were
// written since this kernel last read them (by kernels, copy engines or the
// host), and no kernel boundary drops what this SM cached; the barrier
// carries the order to the CTA's other threads.
__device__ __forceinline__ void acquireCall() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
// The other CTAs, after they saw the call CTA 0 handed on: gpu scope is
// enough (causality is transitive: the inputs' writers happen before CTA
// 0's system-scope acquire, which its thread 0 makes before it writes the
// lines: handOn), and it drops this SM's stale L1 lines as well; a system
// fence costs far more (docs/performance.md, the resident kernel's hand-off).
__device__ __forceinline__ void acquirePublished() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// How long a CTA waiting for a call polls without a pause: calls of a busy
// loop come within a few us of the last.
constexpr unsigned long long kHotPollNs = 20000;

// A warp: whether lines [from, to) of a mailbox carry call `seq` (then
// copied to *out).
__device__ bool readMail(const LLLine *mail, uint32_t seq, ResidentCall *out, int from, int to) {
    bool whole = true;
    for (int k = from + (threadIdx.x & 31); k < to; k += 32) {
        uint64_t v;
        if (llLoad(&mail[k], seq, &v)) reinterpret_cast<uint64_t *>(out)[k] = v;
        else whole = false;
    }
    return __all_sync(0xffffffffu, whole);
}

// Warp 0 of CTA 0: the host mailbox's head, then the block tables of a ragged call.
__device__ bool readCall(const ResidentHostBox *host, uint32_t seq, ResidentCall *out) {
    if (!readMail(host->mail, seq, out, 0, kResidentHeadLines)) return false;
    __syncwarp();
    if (!out->args.ragged || out->command != kResidentRun) return true;
    while (!readMail(host->mail, seq, out, kResidentHeadLines, kResidentMailLines)) {} // posted before the head
    return true;
}

// Warp 0 of another CTA: whether the device mailbox's head lines all carry
// one tag other than `last` (and 0: nothing yet); then the head is in *out
// and the tag in *tag.
__device__ bool readHanded(const ResidentDevBox *dev, uint32_t last, ResidentCall *out, uint32_t *tag) {
    const int lane = threadIdx.x & 31;
    uint32_t f0 = 0, f1 = 0;
    const uint64_t v = lane < kResidentHeadLines ? llLoadAny(&dev->mail[lane], &f0, &f1) : 0;
    const uint32_t t = __shfl_sync(0xffffffffu, f0, 0);
    if (!__all_sync(0xffffffffu, lane >= kResidentHeadLines || residentLineCarries(f0, f1, t)) ||
        !residentTagIsNew(t, last))
        return false;
    if (lane < kResidentHeadLines) reinterpret_cast<uint64_t *>(out)[lane] = v;
    *tag = t;
    return true;
}

// Thread 0 of CTA 0, after its system-scope acquire of the call (so these
// plain stores release the call's inputs to the CTAs that see them):
// `lines` lines of *call onto the device mailbox, tagged seq.
__device__ void handOn(ResidentDevBox *dev, const ResidentCall &call, uint32_t seq, int lines) {
    for (int k = 0; k < lines; ++k) llStore(&dev->mail[k], reinterpret_cast<const uint64_t *>(&call)[k], seq);
}

// Thread 0 of CTA 0: tells the other CTAs to leave (tag residentLeaveTag:
// newer than any call they saw).
__device__ void handOnLeave(ResidentDevBox *dev, uint32_t seq) {
    static_assert(offsetof(ResidentCall, command) == 0, "the command is line 0's low half");
    for (int k = 0; k < kResidentHeadLines; ++k) llStore(&dev->mail[k], k ? 0 : (uint32_t)kResidentLeave, seq);
}

// Warp 0 of CTA 0: waits for call `seq`; false when the kernel is to leave
// (idle for r.idleNs and no call after announcing it, or a failed CTA).
__device__ bool awaitCall(const ResidentLaunch &r, uint32_t seq, ResidentCall *call) {
    const unsigned long long since = globalNs();
    for (;;) {
        if (readCall(r.host, seq, call)) {
            if ((threadIdx.x & 31) == 0) {
                acquireCall();
                r.host->taken = seq; // after the fence: a store to host memory would hold it up
            }
            return true;
        }
        if (*(volatile uint32_t *)&r.dev->failed) return false;
        const unsigned long long idle = globalNs() - since;
        if (idle > r.idleNs) {
            if ((threadIdx.x & 31) == 0) r.host->state = kResidentLeaving;
            __syncwarp();
            __threadfence_system(); // the announcement lands before the last look
            if (readCall(r.host, seq, call)) {
                if ((threadIdx.x & 31) == 0) {
                    acquireCall();
                    r.host->taken = seq, r.host->state = kResidentRunning;
                }
                return true;
            }
            return false;
        }
        if (idle > kHotPollNs) __nanosleep(256); // poll less often once idle
    }
}

// The CTAs a call needs (its units, as the launched kernel would get).
__device__ __forceinline__ unsigned ctasFor(const OneShotArgs &a) {
    return a.nblocks < 1 ? 1u : (unsigned)a.nblocks < gridDim.x ? (unsigned)a.nblocks : gridDim.x;
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kOneShotThreads) residentKernel(ResidentLaunch r) {
    __shared__ ResidentCall call;
    __shared__ unsigned used; // CTAs of this call (0: leave)
    ResidentDevBox *dev = r.dev;
    uint32_t seq = r.lastSeq; // CTA 0: every thread; other CTAs: warp 0's is the one that counts
    RESIDENT_TRACE(unsigned long long tSeen = 0, tPub = 0, tStart = 0);
    for (;;) {
        if (blockIdx.x == 0) {
            const uint32_t lastTaken = seq;
            seq = residentNext(seq);
            if (threadIdx.x < 32) {
                const bool got = awaitCall(r, seq, &call);
                if (threadIdx.x == 0) {
                    used = got && call.command == kResidentRun ? ctasFor(call.args) : 0;
                    RESIDENT_TRACE(if (used) {
                        tSeen = globalNs();
                        const unsigned long long gap = tSeen - residentTrace.done;
                        if (residentTrace.done && gap < 100000) traceAdd(used, kTrDoneToSeen, gap);
                        atomicAdd(&residentTrace.bytes[used], (unsigned long long)call.args.bytes);
                        tStart = tPub = globalNs();
                        *(volatile unsigned long long *)&residentTrace.pub = tPub;
                        traceAdd(used, kTrSeenToPub, tPub - tSeen);
                    })
                    if (used > 1) { // hand the call to the other CTAs it needs
                        call.ctas = (int32_t)used;
                        handOn(dev, call, seq, call.args.ragged ? kResidentMailLines : kResidentHeadLines);
                    } else if (!used) {
                        handOnLeave(dev, residentLeaveTag(lastTaken));
                    }
                }
            }
            __syncthreads();
            if (!used) {
                RESIDENT_TRACE(if (threadIdx.x == 0) tracePrint());
                return;
            }
        } else {
            if (threadIdx.x < 32) {
                uint32_t tag;
                const unsigned long long since = globalNs();
                // A newer call than the last seen (calls this CTA is not needed for may have passed).
                // Polled without a pause for as long as the poller does (awaitCall).
                while (!readHanded(dev, seq, &call, &tag))
                    if (globalNs() - since > kHotPollNs) __nanosleep(128);
                seq = tag;
                const bool run = call.command == kResidentRun;
                const unsigned n = run ? (unsigned)call.ctas : 0;
                if (run && residentCtaNeeded(blockIdx.x, n) && call.args.ragged) // written with the head, before the tag changes again
                    while (!readMail(dev->mail, tag, &call, kResidentHeadLines, kResidentMailLines)) {}
                if (threadIdx.x == 0) {
                    used = n;
                    acquirePublished();
                    RESIDENT_TRACE(if (residentCtaNeeded(blockIdx.x, n)) {
                        tPub = *(volatile unsigned long long *)&residentTrace.pub;
                        tStart = globalNs();
                        traceAdd(n, kTrPubToCopied, tStart - tPub);
                    })
                }
            }
            __syncthreads();
            const unsigned mine = used;
            __syncthreads(); // every thread read `used` before thread 0 may overwrite it for the next call
            if (!mine) return;
            if (!residentCtaNeeded(blockIdx.x, mine)) continue;
        }
        const unsigned ctas = used;
        const bool ok = __syncthreads_and(oneShotBody<T, Op>(call.args, blockIdx.x, (int)ctas));
        RESIDENT_TRACE(unsigned long long tBody = globalNs(); if (threadIdx.x == 0) traceAdd(ctas, kTrBody, tBody - tStart));
        if (threadIdx.x == 0) {
            if (!ok) { // every CTA leaves: the others at their next wait
                *(volatile uint32_t *)&dev->failed = 1;
                if (blockIdx.x == 0) handOnLeave(dev, residentLeaveTag(seq));
                // `done` all the same, after the abort words: loom's stream
                // may wait for it (a pending call, core/stream/resident.h); the
                // host reads the abort words before it trusts a call done.
                __threadfence_system();
                r.host->done = seq;
            } else {
                // This CTA's outputs and lines before `done`, at system scope:
                // an output may be mapped host memory (C API callers). With
                // several CTAs each releases them at gpu scope with its
                // arrival, and the last to arrive fences at system scope for
                // all (a fence is cumulative: it orders what the arrivals
                // released to it) before it writes `done`.
                if (ctas == 1) {
                    __threadfence_system();
                    r.host->done = seq;
                    RESIDENT_TRACE(traceAdd(1, kTrFenceArrive, globalNs() - tBody));
                    RESIDENT_TRACE(residentTrace.done = globalNs(); traceAdd(1, kTrPubToDone, residentTrace.done - tPub));
                } else {
                    __threadfence();
                    if (atomicAdd(&dev->arrived, 1u) == ctas - 1) {
                        RESIDENT_TRACE(traceAdd(ctas, kTrFenceArrive, globalNs() - tBody));
                        atomicExch(&dev->arrived, 0u);
                        *(volatile uint32_t *)&dev->finished = seq;
                        __threadfence_system(); // every CTA's outputs (seen through their arrivals) before the host hears
                        r.host->done = seq;
                        RESIDENT_TRACE(residentTrace.done = globalNs();
                                   traceAdd(ctas, kTrPubToDone, residentTrace.done - tPub));
                    } else {
                        RESIDENT_TRACE(traceAdd(ctas, kTrFenceArrive, globalNs() - tBody));
                    }
                }
            }
        }
        if (!ok) return;
        // CTA 0 goes back to the mailbox (and its idle clock) only once every
        // CTA the call needs is done with it: one dispatched late would else
        // find the kernel gone (a leave command) and the call half run.
        if (blockIdx.x == 0 && ctas > 1) {
            if (threadIdx.x == 0) {
                int spins = 0;
                while (*(volatile uint32_t *)&dev->finished != seq && !*(volatile uint32_t *)&dev->failed)
                    if (++spins > 64) __nanosleep(128);
            }
            __syncthreads();
        }
    }
}

template <typename T, typename Op> struct ResidentKernel {
    static cudaError_t launch(const ResidentLaunchArgs &a, cudaStream_t stream) {
        residentKernel<T, Op><<<a.ctas, kOneShotThreads, 0, stream>>>(a.r);
        return cudaGetLastError();
    }
    static cudaError_t load(KernelLoad *l) { return loadKernels(l, residentKernel<T, Op>); }
};

} // namespace

cudaError_t launchResident(const ResidentLaunchArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<ResidentKernel>(dtype, op, a, stream);
}

cudaError_t launchResidentBytes(const ResidentLaunchArgs &a, cudaStream_t stream) {
    return ResidentKernel<uint8_t, OpSum>::launch(a, stream);
}

cudaError_t loadResidentKernels(KernelLoad *l) { return loadTypeOps<ResidentKernel>(l); }

} // namespace loom
