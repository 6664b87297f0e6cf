/*
 * The resident kernel (resident_coll.cu, core/stream/resident.cc): one kernel per
 * communicator that stays on the GPU between small one-shot calls and takes
 * each call from a mailbox in host memory, so a blocking call costs no
 * launch. Shared by host (core) and device code.
 *
 * The mailbox holds the call as LL lines (ll_line.h) tagged with the call's
 * sequence number: a reader that sees every flag equal to the number it
 * expects holds the whole call, with no separate "posted" word and no fence
 * between payload and flag on either side (each 8-byte half of a line is one
 * store on the host and carries its own flag).
 *
 * Leaving (idle, or told to): the kernel's poller announces kLeaving in
 * `state`, fences, and reads the mailbox once more; the host writes the
 * mailbox, fences, and reads `state`. One of the two sees the other's store
 * (store, fence, load on both sides), so a call posted while the kernel
 * leaves is either run by it (state back to kRunning) or found by the host,
 * which waits for the kernel's end and launches a new one unless `taken`
 * says the old one took the call (it may have run it, idled and left).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/host_device.h"
#include "device/oneshot/oneshot_args.h"

namespace loom {

enum ResidentCommand : int32_t { kResidentRun = 1, kResidentLeave = 2 };
enum ResidentPhase : uint32_t { kResidentRunning = 1, kResidentLeaving = 2 };

// What the host posts per call.
struct ResidentCall {
    int32_t command; // ResidentCommand
    int32_t ctas;    // the CTAs it needs: set by CTA 0 as it hands the call on (the host leaves it 0)
    OneShotArgs args;
};

// The mailbox's lines: all of the call, and its head (up to the block
// tables, all a call that is not ragged needs: one line per lane of a warp,
// one round trip over PCIe).
constexpr int kResidentMailLines = (int)((sizeof(ResidentCall) + 7) / 8);
constexpr int kResidentHeadLines = (int)((offsetof(ResidentCall, args) + offsetof(OneShotArgs, counts) + 7) / 8);
static_assert(kResidentHeadLines <= 32, "the head is one line per lane of a warp");

// Host-mapped (cudaHostAlloc): the mailbox, and the kernel's answers on lines of their own.
struct ResidentHostBox {
    LLLine mail[kResidentMailLines];
    alignas(128) volatile uint32_t state; // ResidentPhase, written by the kernel's poller (and the host before a launch)
    alignas(128) volatile uint32_t done;  // the sequence number of the last call every CTA finished
    alignas(128) volatile uint32_t taken; // ... of the last call the poller took (a host that saw kLeaving
                                          // must not post that call to a fresh kernel: it may have run)
};

// Device memory: CTA 0 (the poller) hands each call of several CTAs to the
// others on `mail`, LL lines like the host's tagged with the call's
// sequence number, `ctas` set (a call of few units needs fewer CTAs than the
// kernel has; the others skip it); a kResidentLeave command when the kernel
// leaves. A CTA takes the head whose lines all carry one tag newer than the
// last it saw (it may not have been needed for the calls in between), so
// one poll of one line per lane of a warp brings the whole call; the rest
// (block tables) only for ragged calls. All zero at launch: no call yet.
struct ResidentDevBox {
    LLLine mail[kResidentMailLines];
    uint32_t failed;      // a CTA's call failed (abort words set): every CTA leaves
    unsigned int arrived; // CTAs done with the current call
    uint32_t finished;    // the last call every CTA it needed is done with (set by the last to arrive)
};


struct ResidentLaunch {
    ResidentHostBox *host; // device view of the host box
    ResidentDevBox *dev;
    uint32_t lastSeq;      // the call before the first one this kernel takes
    unsigned long long idleNs; // leave after this long without a call
};

// The sequence number after s (0 never tags a call: the mailbox starts zeroed).
LOOM_HD uint32_t residentNext(uint32_t s) { return s + 1 == 0 ? 1 : s + 1; }

} // namespace loom
