/*
 * What the host hands a ring kernel per call: the collective, its buffers and
 * counts, and each channel's step counters. The channels themselves (their
 * connections and ring) are in a per-communicator table in device memory
 * (chans), so the arguments stay small whatever the channel count. Shared by
 * host (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/conn.h"
#include "device/ring/ring_schedule.h"

namespace loom {

// One channel as a ring kernel sees it: its connections and this rank's
// place on the channel's ring. Channels may run on different rings (the
// topology's ring c % nrings), so positions and orders are per channel.
struct RingChannel {
    ConnPair conn;    // receive from the previous rank on this ring, send to the next
    int pos;          // this rank's position on the ring
    const int *order; // device memory: the rank at each position (blocks of gather-type calls are in rank order)
    const int *posOf; // device memory: the position of each rank (a root's)
};

struct RingArgs {
    int coll;  // loomColl (base/coll.h)
    int proto; // kProtoSimple, kProtoLL or kProtoLL128: which FIFOs chans points at
    const RingChannel *chans; // device memory: this rank's channels [0, nchannels)
    const void *in;
    void *out;
    RingBlocks blocks; // count: the call's elements, or per block (reduce_scatter, allgather);
                       // ragged blocks: counts/displs tables in device memory
    int nranks;
    int root;      // broadcast, reduce: the root (a rank; each channel finds its position)
    int nchannels;
    int nthreads;  // per channel CTA, a multiple of 32 up to kMaxRingThreads
    int nslots;
    size_t slotBytes;
    WaitLimit wait;                   // how its waits may end (device/wait.h)
    volatile int *abortFlag;          // host-mapped: set by the kernel on timeout
    ConnSteps steps[kMaxChannels];    // per channel, before this call
};

static_assert(sizeof(RingArgs) <= 4096, "kernel parameters of CUDA < 12.1");

} // namespace loom
