/*
 * A diagnostic build of the resident kernel (resident_coll.cu): with
 * LOOM_RESIDENT_TRACE defined, each stage of a call's hand-off between the
 * host, CTA 0 and the other CTAs is timed by the GPU's globaltimer, summed
 * per CTA count, and printed by CTA 0 when the kernel leaves (idle, or the
 * communicator's end). Stages: CTA 0 saw the call > began to hand it on
 * (published) > a CTA held it (its one poll of the LL lines took the whole
 * head) > its body > its fence and arrival; published > `done`
 * (the whole call on the GPU); `done` > CTA 0 saw the next call (the host's
 * turn-around, gaps over 100 us left out).
 * Without the macro, RESIDENT_TRACE(...) is nothing (not base/debug.h's
 * LOOM_TRACE, a log line). Build, in a build tree
 * (and the same without NVCC=... to go back):
 *   touch ../src/device/resident/resident_coll.cu
 *   make NVCC="nvcc -DLOOM_RESIDENT_TRACE" && make gpu-tests
 */
#pragma once

#ifdef LOOM_RESIDENT_TRACE
#include <stdio.h>

#include "device/oneshot/oneshot_args.h"

namespace loom {

enum TraceStage { kTrSeenToPub, kTrPubToCopied, kTrBody, kTrFenceArrive, kTrPubToDone, kTrDoneToSeen, kTrStages };
struct ResidentTrace {
    unsigned long long sum[kMaxOneShotBlocks + 1][kTrStages], n[kMaxOneShotBlocks + 1][kTrStages];
    unsigned long long bytes[kMaxOneShotBlocks + 1];
    unsigned long long pub, done; // this call's publish time, the last call's done time
};
__device__ ResidentTrace residentTrace; // one translation unit includes this: resident_coll.cu
__device__ __forceinline__ void traceAdd(unsigned ctas, int stage, unsigned long long ns) {
    if (ctas > kMaxOneShotBlocks) ctas = kMaxOneShotBlocks;
    atomicAdd(&residentTrace.sum[ctas][stage], ns);
    atomicAdd(&residentTrace.n[ctas][stage], 1ull);
}
__device__ void tracePrint() {
    static const char *names[kTrStages] = {"seen>pub", "pub>copied", "body", "fence+arrive", "pub>done", "done>seen"};
    for (int c = 1; c <= kMaxOneShotBlocks; ++c) {
        ResidentTrace &t = residentTrace;
        if (!t.n[c][kTrBody]) continue;
        printf("resident trace: %d CTAs, %llu calls, %llu B/call:", c, t.n[c][kTrBody] / c, t.bytes[c] / (t.n[c][kTrBody] / c));
        for (int s = 0; s < kTrStages; ++s)
            if (t.n[c][s]) printf(" %s %.2f", names[s], t.sum[c][s] / 1000.0 / t.n[c][s]);
        printf(" us\n");
        for (int s = 0; s < kTrStages; ++s) t.sum[c][s] = t.n[c][s] = 0;
        t.bytes[c] = 0;
    }
}

} // namespace loom

#define RESIDENT_TRACE(...) __VA_ARGS__
#else
#define RESIDENT_TRACE(...)
#endif
