/*
 * What the host hands the edge kernel per call: the schedule (edge_schedule.h),
 * the buffers, and each edge's step counters before the call. The edges
 * themselves are in a per-communicator table in device memory, so the
 * arguments stay small. Shared by host (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/conn.h"
#include "device/edges/edge_schedule.h"

namespace loom {

struct EdgeArgs {
    EdgeSched s;
    const void *in;
    void *out;
    void *acc;                        // the communicator's accumulator (reduce, reduce_scatter)
    const ConnPair *conns;            // device memory: this rank's kEdgeSlots edges
    int nthreads;
    int nslots;                       // slots per edge FIFO
    size_t slotBytes;
    WaitLimit wait;                   // how its waits may end (device/wait.h)
    volatile int *abortFlag;          // host-mapped: set by the kernel on timeout
    ConnSteps steps[kEdgeSlots];      // per edge, before this call
};

static_assert(sizeof(EdgeArgs) <= 4096, "kernel parameters of CUDA < 12.1");

} // namespace loom
