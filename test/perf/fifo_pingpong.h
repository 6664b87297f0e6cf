// net_latency's GPU ping-pong kernel (fifo_pingpong.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

struct FifoPingPongArgs {
    char *outSlots;
    volatile uint64_t *outTail, *outHead, *outSizes;
    const char *inSlots;
    volatile uint64_t *inTail, *inHead;
    size_t slotBytes, bytes;
    int nslots, first;
    uint64_t total, warmup;
    volatile uint64_t *times; // host-mapped: [0] ns at step `warmup`, [1] ns at the end
};

cudaError_t launchFifoPingPong(const FifoPingPongArgs &a);
