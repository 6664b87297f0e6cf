/*
 * The steps of a direct pair of an exchange (exchange_schedule.h): the
 * receiver reads the sender's block in place, over its GPU mapping of the
 * sender's buffer, instead of through the FIFO. One step of the pair's
 * connection per channel: the sender publishes it (its input is ready: its
 * kernel runs, so the kernels before it on its stream are done), the
 * receiver waits for it, copies its slice and returns the credit, and the
 * sender waits for the credit before it may leave the call (nothing reads
 * its input after that). No slot is used: the counters alone carry the
 * handshake, so the FIFO path of later calls finds them consistent.
 *
 * A pushed pair turns it around (the sender writes into the receiver's
 * output, mapped at the sender): the receiver signals ready (directReady),
 * the sender waits for it, copies its slice and publishes (directWrite), and
 * the receiver waits for the publication before it leaves
 * (directAwaitWritten). The same counters, the same end state.
 *
 * Every thread of the CTA calls each function; thread 0 does the flags.
 */
#pragma once

#include <stdint.h>

#include "device/conn.h"
#include "device/fifo.h"
#include "device/prims_simple.h"
#include "device/reduce_ops.h"
#include "device/wait.h"

namespace loom {

struct DirectShared {
    bool failed;
};
__device__ inline DirectShared &directShared() {
    __shared__ DirectShared s;
    return s;
}

// Sender: step `step` of connection c is ready to be read.
__device__ inline void directPublish(const ConnSend &c, uint64_t step) {
    if (threadIdx.x == 0) {
        __threadfence_system();
        *c.tail = step + 1;
    }
}

// Sender: waits until the receiver has moved c's head past step `step`:
// pulled, it has read the step (its credit is back); pushed, it is ready
// for the step (directReady).
__device__ inline bool directAwaitHead(const ConnSend &c, uint64_t step, const WaitLimit &limit) {
    if (threadIdx.x == 0) directShared().failed = !Waiter{limit}([&] { return *c.head > step; });
    __syncthreads();
    const bool ok = !directShared().failed;
    __syncthreads(); // everyone has read the flag before the next step writes it
    return ok;
}

// dst[0..len) <- src[0..len) by the whole CTA; src or dst may be a peer
// GPU's memory. Pointers that share their misalignment move in 16-byte
// vectors after a short head. src == dst (a pair whose mapping failed:
// the handshake runs, the host returns the error) copies nothing.
__device__ inline void directCopy(const uint8_t *src, uint8_t *dst, size_t len) {
    using S = ProtoSimple;
    if (src == dst) return;
    size_t head = 0;
    if ((((uintptr_t)src ^ (uintptr_t)dst) & 15) == 0) {
        head = (16 - ((uintptr_t)src & 15)) & 15;
        if (head > len) head = len;
        if (head) S::move<uint8_t, OpSum>(nullptr, src, nullptr, nullptr, dst, head, false, 0, 0, 0);
    }
    S::move<uint8_t, OpSum>(nullptr, src + head, nullptr, nullptr, dst + head, len - head, false, 0, 0, 0);
}

// Receiver: waits for step `step` of connection c, runs copy() (every
// thread: the sender's block slice, mapped here, into this rank's output),
// returns the credit.
template <typename Copy>
__device__ inline bool directRead(const ConnRecv &c, uint64_t step, Copy copy, const WaitLimit &limit) {
    if (threadIdx.x == 0) {
        directShared().failed = !Waiter{limit}([&] { return *c.tail > step; });
        __threadfence(); // the flag before the data
    }
    __syncthreads();
    if (directShared().failed) return false;
    copy();
    __syncthreads(); // every load of the sender's memory has returned
    if (threadIdx.x == 0) {
        __threadfence_system();
        *c.head = step + 1;
    }
    return true;
}

// A pushed pair's sender whose copy is deferred (copy-engine copies,
// exchange_schedule.h) only awaits the ready (directAwaitHead): the copy
// engines write, and then directPublishWritten publishes.

// After a deferred copy (the copy engines' writes are done: stream order):
// one thread publishes step `step` of connection c, marked written unless
// `mapped` is false (its host could not map the receiver's output).
__device__ inline void directPublishWritten(const ConnSend &c, uint64_t step, bool mapped) {
    __threadfence_system();
    if (mapped) {
        *directWrittenOf(c.tail) = step + 1;
        __threadfence_system();
    }
    *c.tail = step + 1;
}

// Pushed pair, receiver: step `step` of connection c may be written (its
// output is free: this kernel runs, so the kernels before it are done).
__device__ inline void directReady(const ConnRecv &c, uint64_t step) {
    if (threadIdx.x == 0) *c.head = step + 1;
}

// Pushed pair, sender: waits until the receiver is ready for step `step` of
// connection c, runs copy() (every thread: its own block slice into the
// receiver's output, mapped here), and publishes the step once every store
// is visible. Not `mapped` (its host could not map the receiver's output:
// copy() copies nothing) it publishes without marking the step written: the
// receiver reports it.
template <typename Copy>
__device__ inline bool directWrite(const ConnSend &c, uint64_t step, Copy copy, bool mapped, const WaitLimit &limit) {
    if (!directAwaitHead(c, step, limit)) return false;
    copy();
    __syncthreads(); // every store of the CTA is issued
    if (threadIdx.x == 0) {
        __threadfence_system(); // ... and visible to the receiver before the step
        if (mapped) {
            *directWrittenOf(c.tail) = step + 1;
            __threadfence_system();
        }
        *c.tail = step + 1;
    }
    return true;
}

// One thread's wait (the second kernel's, copy-engine mode: a thread per
// connection): as directAwaitWritten, false when the sender stayed silent.
__device__ inline bool directAwaitWrittenThread(const ConnRecv &c, uint64_t step, const WaitLimit &limit,
                                                volatile int *undelivered, int peer) {
    if (!Waiter{limit}([&] { return *c.tail > step; })) return false;
    __threadfence();
    if (*directWrittenOf(c.tail) != step + 1) *undelivered = peer + 1;
    return true;
}

// Pushed pair, receiver: waits until the sender published step `step`; its
// slice is in this rank's output unless the sender could not write it, which
// sets *undelivered to `peer` + 1 for the host (the call fails, the
// communicator stays usable).
__device__ inline bool directAwaitWritten(const ConnRecv &c, uint64_t step, const WaitLimit &limit,
                                          volatile int *undelivered, int peer) {
    if (threadIdx.x == 0) {
        directShared().failed = !Waiter{limit}([&] { return *c.tail > step; });
        __threadfence();
        if (!directShared().failed && *directWrittenOf(c.tail) != step + 1) *undelivered = peer + 1;
    }
    __syncthreads();
    const bool ok = !directShared().failed;
    __syncthreads(); // everyone has read the flag before the next step writes it
    return ok;
}

} // namespace loom
