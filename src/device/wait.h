/*
 * How a kernel waits for a flag another GPU, the CPU or the NIC writes:
 * spin, then back off with __nanosleep. A peer that is only late (still on
 * the host before the call, or its GPU busy with earlier work) is waited for
 * without limit, as MPI and NCCL do. A wait ends early only when
 *  - the host's watchdog cancels the call (core/ras/watchdog.h: a peer's process
 *    died, or its host is gone): words->cancel != 0;
 *  - it is stuck: silent for stuckCycles counted from the moment every rank
 *    of the communicator had started this call on its GPU (words->allStarted
 *    >= seq, kept by the watchdog): a peer inside the call stopped moving;
 *  - LOOM_TIMEOUT is set (hardCycles != 0) and it has been silent that long.
 * A wait silent for reportCycles marks words->stalled with its call's
 * number, so the watchdog looks at the peers (who has not arrived, who
 * died) until the host has seen that call finish (words->done).
 *
 * waitCheck is the whole rule, a plain function of the clock and the host
 * words, run by the CPU unit tests too. The host words are read only every
 * kWaitLookEvery backed-off spins: a read of host memory crosses PCIe.
 */
#pragma once

#include <stdint.h>

#include "device/host_device.h"

namespace loom {

// One communicator's words in host memory, mapped for its GPU.
struct WatchWords {
    volatile int cancel;          // host -> GPU: != 0 ends every wait of the communicator's calls
    volatile int why;             // GPU -> host: the WaitEnd of the first wait that gave up
    volatile uint64_t allStarted; // host -> GPU: every rank's GPU has started calls up to this one
    volatile uint64_t started;    // GPU -> host: the last call this rank's GPU started
    volatile uint64_t stalled;    // GPU -> host: the last call a wait of which passed reportCycles
    volatile uint64_t done;       // host -> watchdog: the calls the host has seen finish
};

// How one call's waits may end; in every kernel's arguments.
struct WaitLimit {
    unsigned long long hardCycles;   // LOOM_TIMEOUT (0: none)
    unsigned long long stuckCycles;  // LOOM_STUCK_TIMEOUT (0: none)
    unsigned long long reportCycles; // silence before words->stalled is marked
    uint64_t seq;                    // this call's number (the arrival board's count of calls entered)
    WatchWords *words;               // device view of the host words (null: no watchdog, e.g. unit tests)
};

enum WaitEnd { kWaitGoesOn = 0, kWaitCancelled = 1, kWaitStuck = 2, kWaitTimedOut = 3 };

// A testing aid (LOOM_STUCK_RANK, LOOM_STUCK_CALL) in WaitLimit::seq: this
// rank's GPU says it started the call, then does none of it (a hung GPU, as
// its peers see it).
constexpr uint64_t kCallStuckHere = 1ull << 63;

// One wait's own clock.
struct WaitClock {
    unsigned long long start;   // when the wait began
    unsigned long long armedAt; // when it first saw every rank inside the call (0: not yet)
    bool reported;              // words->stalled marked for this wait
};

constexpr int kWaitSpins = 1000;     // spins before backing off
constexpr int kWaitLookEvery = 64;   // backed-off spins between looks at the host words

// Whether a wait that has been silent since c.start may go on at `now`.
LOOM_HD WaitEnd waitCheck(const WaitLimit &l, WaitClock &c, unsigned long long now) {
    if (l.hardCycles && now - c.start > l.hardCycles) return kWaitTimedOut;
    if (!l.words) return kWaitGoesOn;
    if (l.words->cancel) return kWaitCancelled;
    if (!c.reported && now - c.start > l.reportCycles) {
        if (l.words->stalled < l.seq) l.words->stalled = l.seq;
        c.reported = true;
    }
    if (l.stuckCycles) {
        if (!c.armedAt) {
            if (l.words->allStarted >= l.seq) c.armedAt = now | 1;
        } else if (now - c.armedAt > l.stuckCycles) {
            return kWaitStuck;
        }
    }
    return kWaitGoesOn;
}

#ifdef __CUDACC__
// The clock waits count in (SM cycles).
__device__ inline unsigned long long waitNow() { return (unsigned long long)clock64(); }

// Records why a wait gave up (the first reason stands) and says so.
__device__ inline bool waitGaveUp(const WaitLimit &l, WaitEnd end) {
    if (l.words && !l.words->why) l.words->why = end;
    return false;
}

// A backed-off spin of a wait: false once it must give up. `spins` counts
// the wait's spins (the first kWaitSpins do not come here); it is wound back
// at each look, so a wait of hours never overflows it.
__device__ inline bool waitGoesOn(const WaitLimit &l, WaitClock &c, int &spins) {
    __nanosleep(100);
    if (spins < kWaitSpins + kWaitLookEvery) return true;
    spins = kWaitSpins;
    const WaitEnd end = waitCheck(l, c, waitNow());
    return end == kWaitGoesOn || waitGaveUp(l, end);
}

// The call has started on this GPU: every kernel says so first (its CTA 0's
// thread 0; a call's later kernels say it again). False: the kernel must
// return at once (kCallStuckHere).
__device__ inline bool callStarted(const WaitLimit &l) {
    if (l.words && blockIdx.x == 0 && threadIdx.x == 0) l.words->started = l.seq & ~kCallStuckHere;
    return !(l.seq & kCallStuckHere);
}

// Thread 0's wait for a condition on a flag.
struct Waiter {
    const WaitLimit &limit;
    template <typename Cond>
    __device__ bool operator()(Cond cond) const {
        WaitClock c{waitNow(), 0, false};
        int spins = 0;
        while (!cond())
            if (++spins > kWaitSpins && !waitGoesOn(limit, c, spins)) return false;
        return true;
    }
};
#endif

} // namespace loom
