/*
 * What the host hands the scan kernel per call (MPI_Scan, MPI_Exscan along
 * the chain of scan_schedule.h): the schedule, the buffers, the all-peer
 * connection table and, per lane, the step counters of the two connections
 * the lane uses (from rank - 1, to rank + 1) before the call. Shared by host
 * (core) and device code.
 */
#pragma once

#include <stddef.h>

#include "device/conn.h"
#include "device/exchange/exchange_schedule.h"
#include "device/scan/scan_schedule.h"

namespace loom {

struct ScanArgs {
    ScanSched s; // lanes = s.channels
    const void *in;
    void *out;
    const ConnPair *conns;            // device memory: connection q x channels + c leads to rank q
    unsigned long long recvSteps[kMaxExchangeChannels]; // per lane: its connection from rank - 1
    unsigned long long sendSteps[kMaxExchangeChannels]; // per lane: its connection to rank + 1
    int nthreads;
    int nslots;
    size_t slotBytes;
    WaitLimit wait;                   // how its waits may end (device/wait.h)
    volatile int *abortFlag;          // host-mapped: set by the kernel on timeout
};

static_assert(sizeof(ScanArgs) <= 4096, "kernel parameters of CUDA < 12.1");

} // namespace loom
