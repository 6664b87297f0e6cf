/*
 * What the host hands the ring kernels: per channel, where this rank's FIFO is,
 * where the next rank's FIFO is (mapped through CUDA IPC) and where the
 * previous rank's credit counter is. Shared by host (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace loom {

constexpr int kMaxChannels = 64;
constexpr int kProtoSimple = 0;
constexpr int kProtoLL = 1;

// Payload one FIFO slot of slotBytes carries under a protocol (LL lines carry
// 8 data bytes in 16). Host and device must agree on it.
#ifdef __CUDACC__
__host__ __device__
#endif
inline size_t ringSlotDataBytes(int proto, size_t slotBytes) { return proto == kProtoLL ? slotBytes / 2 : slotBytes; }
constexpr int kMaxRingThreads = 1024;

// Head of one channel's FIFO in a rank's GPU memory; the slots follow it.
struct alignas(256) FifoFlags {
    volatile uint64_t recvTail; // slots the previous rank has written into our slots
    uint64_t pad0[15];
    volatile uint64_t sendHead; // of our sends, slots the next rank has consumed
    uint64_t pad1[15];
};

struct RingChannel {
    char *mySlots;
    FifoFlags *myFlags;
    char *nextSlots;       // the next rank's slots (we write them)
    FifoFlags *nextFlags;  // the next rank's flags (we bump its recvTail)
    FifoFlags *prevFlags;  // the previous rank's flags (we bump its sendHead)
    uint64_t step;         // slots sent (= received) on this channel by earlier calls
};

struct RingArgs {
    int proto; // kProtoSimple or kProtoLL: which FIFOs ch[] points at
    const void *in;
    void *out;
    size_t count;
    int nranks;
    int pos; // this rank's ring position
    int nchannels;
    int nthreads; // per channel CTA, a multiple of 32 up to kMaxRingThreads
    int nslots;
    size_t slotBytes;
    unsigned long long timeoutCycles; // a peer silent for this long fails the call
    volatile int *abortFlag;          // host-mapped: set by the kernel on timeout
    RingChannel ch[kMaxChannels];
};

} // namespace loom
