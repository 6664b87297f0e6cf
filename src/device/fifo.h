/*
 * The FIFO every connection uses, whatever carries it (p2p: the receiver's
 * GPU memory mapped by the sender with CUDA IPC; shm: host memory mapped into
 * both GPUs; net: a send FIFO and a receive FIFO of each rank in host-mapped
 * memory, moved between hosts by the proxy): a FifoFlags head, then nslots
 * slots of slotBytes. Shared by host (core, btl_gpu, proxy) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/limits.h" // kMaxChannels, kMaxRingThreads, kMaxSlots, kMaxNetChannels

namespace loom {

constexpr int kProtoSimple = 0;
constexpr int kProtoLL = 1;
constexpr int kProtoLL128 = 2;
constexpr int kNumRingProtos = 3; // FIFO areas of a ring connection, one per protocol

// Payload one FIFO slot of slotBytes carries under a protocol (LL lines carry
// 8 data bytes in 16, LL128 lines 120 in 128). Host and device must agree on it.
#ifdef __CUDACC__
__host__ __device__
#endif
inline size_t ringSlotDataBytes(int proto, size_t slotBytes) {
    return proto == kProtoLL ? slotBytes / 2 : proto == kProtoLL128 ? slotBytes / 128 * 120 : slotBytes;
}

// Head of one FIFO; the slots follow it. recvTail comes first: a sender's
// pointer to the receiver's tail is also a pointer to its FifoFlags.
struct alignas(256) FifoFlags {
    volatile uint64_t recvTail; // slots the sender has written (published)
    // Pushed direct pairs (direct_pair.h): the last step whose block the
    // sender wrote in full, set before recvTail; a step it could not write
    // (its mapping of this rank's output failed) leaves it behind.
    volatile uint64_t directWritten;
    uint64_t pad0[14];
    volatile uint64_t sendHead; // slots the receiver has consumed (the sender's credit)
    uint64_t pad1[15];
    // Net connections only: bytes of the step in each slot, written by the
    // sending GPU before the tail, read by the proxy that sends the slot.
    volatile uint64_t stepBytes[kMaxSlots];
};
static_assert(offsetof(FifoFlags, recvTail) == 0, "stepBytesOf relies on recvTail first");
static_assert(offsetof(FifoFlags, directWritten) == sizeof(uint64_t), "directWrittenOf: the word after recvTail");

#ifdef __CUDACC__
__host__ __device__
#endif
inline volatile uint64_t *directWrittenOf(volatile uint64_t *recvTail) { return recvTail + 1; }

#ifdef __CUDACC__
__host__ __device__
#endif
inline volatile uint64_t *stepBytesOf(volatile uint64_t *recvTail) {
    return reinterpret_cast<FifoFlags *>(const_cast<uint64_t *>(recvTail))->stepBytes;
}

} // namespace loom
