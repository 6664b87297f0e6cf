/*
 * What the host hands the ring kernels: per channel, where this rank's FIFO is,
 * where the next rank's FIFO is and where the previous rank's credit counter
 * is, whatever transport carries them. Shared by host (core) and device code.
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
constexpr int kMaxSlots = 64; // LOOM_NSLOTS's bound
constexpr int kMaxNetChannels = 16; // channels of a communicator that spans hosts

// Head of one channel's FIFO in a rank's GPU memory; the slots follow it.
// recvTail comes first: a RingChannel's nextRecvTail is also its FifoFlags.
struct alignas(256) FifoFlags {
    volatile uint64_t recvTail; // slots the previous rank has written into our slots
    uint64_t pad0[15];
    volatile uint64_t sendHead; // of our sends, slots the next rank has consumed
    uint64_t pad1[15];
    // Net connections only: bytes of the step in each slot, written by the
    // sending GPU before the tail, read by the proxy that sends the slot.
    volatile uint64_t stepBytes[kMaxSlots];
};

// One channel's ring connections as the kernel sees them, whatever carries
// them (p2p: GPU memory mapped with CUDA IPC; shm: host memory mapped into
// both GPUs; net: a send FIFO and a receive FIFO of this rank in host-mapped
// memory, moved between hosts by the proxy). With p2p and shm the FIFO of a
// pair lives on the receiving side.
struct RingChannel {
    char *recvSlots;                 // my receive FIFO (the previous rank writes it)
    volatile uint64_t *recvTail;     // ... and its tail: slots posted to me
    volatile uint64_t *sendHead;     // credit for my sends: slots the next rank consumed
    char *sendSlots;                 // the next rank's receive FIFO (I write it)
    volatile uint64_t *nextRecvTail; // its tail (I bump it)
    volatile uint64_t *prevSendHead; // the previous rank's credit (I bump it)
    uint64_t step;                   // slots sent (= received) on this channel by earlier calls
};

struct RingArgs {
    int proto; // kProtoSimple or kProtoLL: which FIFOs ch[] points at
    // The next rank is reached through the net transport: the proxy needs
    // each step's size, in the FifoFlags (stepBytes) of the send FIFO. A flag,
    // not a pointer per channel: RingArgs stays within the 4 KiB of kernel
    // parameters CUDA < 12.1 allows.
    int sendSizes;
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

static_assert(offsetof(FifoFlags, recvTail) == 0, "stepBytesOf relies on recvTail first");
static_assert(sizeof(RingArgs) <= 4096, "kernel parameters of CUDA < 12.1");

#ifdef __CUDACC__
__host__ __device__
#endif
inline volatile uint64_t *stepBytesOf(volatile uint64_t *nextRecvTail) {
    return reinterpret_cast<FifoFlags *>(const_cast<uint64_t *>(nextRecvTail))->stepBytes;
}

} // namespace loom
