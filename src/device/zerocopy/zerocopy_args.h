/*
 * The zero-copy allreduce's launch arguments (zerocopy_schedule.h), shared by
 * host (core/algo/zerocopy/zerocopy.cc) and device (zerocopy_coll.cu).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/wait.h"
#include "device/zerocopy/zerocopy_schedule.h"

namespace loom {

struct ZeroCopyArgs {
    int rank, nranks, ctas;
    bool oneShot;
    bool mapFailed;   // this rank's host could not map some peer buffer: every rank skips the data
    // Staged (zerocopy_schedule.h): in[q] / out[q] of a peer are its scratch's
    // input copies / results; `scratch` is this rank's (inputs, then results
    // at scratchBytes).
    bool staged;
    char *scratch;
    size_t scratchBytes;
    size_t count;     // elements
    // Every rank's input and output as this rank addresses them (its own, or
    // its mapping of the peer's allocation). Null where mapFailed.
    const void *in[kMaxZeroCopyRanks];
    void *out[kMaxZeroCopyRanks];
    // mine: this rank's flag words, [peer][cta]; peer[q]: q's words, at row
    // `rank` (what this rank's CTAs write).
    volatile uint64_t *mine;
    volatile uint64_t *peer[kMaxZeroCopyRanks];
    uint64_t call;    // >= 1, counted alike on every rank
    WaitLimit wait; // how its waits may end (device/wait.h)
    volatile int *abortFlag; // conn.h's AbortWord
    // LOOM_PROFILE (core/algo/zerocopy/zerocopy_profile.h): CTA 0's %globaltimer at its
    // start, arrive seen, range moved, done seen (mapped host memory); null: off.
    uint64_t *stamps;
};

} // namespace loom
