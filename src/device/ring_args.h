/*
 * What the host hands a ring kernel per call: the collective, its buffers and
 * counts, and each channel's step counters. The connections themselves are in
 * a per-communicator table in device memory (chans), so the arguments stay
 * small whatever the channel count. Shared by host (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/conn.h"
#include "device/ring_schedule.h"

namespace loom {

struct RingArgs {
    int coll;  // RingColl
    int proto; // kProtoSimple or kProtoLL: which FIFOs chans points at
    const RingChannel *chans; // device memory: this rank's channels [0, nchannels)
    const int *ringRanks;     // device memory: the rank at each ring position (blocks are in rank order)
    const void *in;
    void *out;
    RingBlocks blocks; // count: the call's elements, or per block (reduce_scatter, allgather);
                       // ragged blocks: counts/displs tables in device memory
    int nranks;
    int pos;       // this rank's ring position
    int rootPos;   // broadcast, reduce: the root's ring position
    int nchannels;
    int nthreads;  // per channel CTA, a multiple of 32 up to kMaxRingThreads
    int nslots;
    size_t slotBytes;
    unsigned long long timeoutCycles; // a peer silent for this long fails the call
    volatile int *abortFlag;          // host-mapped: set by the kernel on timeout
    ConnSteps steps[kMaxChannels];    // per channel, before this call
};

static_assert(sizeof(RingArgs) <= 4096, "kernel parameters of CUDA < 12.1");

} // namespace loom
