/*
 * Connections as the kernels see them: one direction each, with its own step
 * counter. A collective need not send as many steps as it receives (a
 * broadcast's root only sends, the end of its chain only receives), so the
 * two directions of a channel are counted apart, by the host (which plans
 * each call's steps from the schedule and tells the proxy) and by the kernel
 * (which starts from the host's counts and walks the same schedule).
 */
#pragma once

#include <stdint.h>

#include "device/fifo.h"
#include "device/host_device.h"
#include "device/wait.h"

namespace loom {

// Where this rank sends: the peer's FIFO (slots, tail) and the credit the peer
// returns (head). sizes: net connections only, the FifoFlags' stepBytes the
// proxy reads (null: no sizes needed).
struct ConnSend {
    char *slots;
    volatile uint64_t *tail; // the receiver's tail: I bump it after writing a slot
    volatile uint64_t *head; // slots the receiver consumed: my credit
    int sizes;               // 1: write each step's size before the tail (net)
};

// Where this rank receives: its FIFO (slots, tail) and where it returns credit.
struct ConnRecv {
    char *slots;
    volatile uint64_t *tail; // slots the sender has published to me
    volatile uint64_t *head; // the sender's credit: I bump it after consuming a slot
};

// A receive side and a send side that a kernel uses together: a ring
// channel's (receive from the previous rank, send to the next: RingChannel
// in ring_args.h), or an edge with one peer (both directions with that peer:
// trees, recursive doubling).
struct ConnPair {
    ConnRecv recv;
    ConnSend send;
};

// Whether a sender at step `sendStep` has credit on a FIFO of nslots slots
// whose receiver has consumed `head` steps: sendStep < head + nslots. Never
// as sendStep - head < nslots: on LL a receiver counts an empty step (len 0:
// no lines to poll) without waiting for its sender, so head may run ahead of
// sendStep, and the unsigned difference would wrap and stall the sender for
// good (the LL ring's deadlock at ragged sizes). Kernels (prims.h) and the
// CPU simulator (test/unit/ring_sim.h) use this one test.
LOOM_HD bool sendCredit(uint64_t sendStep, uint64_t head, int nslots) { return sendStep < head + (uint64_t)nslots; }

// Step counters of one channel before a call: slots sent and received on it
// by earlier calls (kept by the host, which advances them per call).
struct ConnSteps {
    uint64_t send, recv;
};

// The host-mapped abort words of a communicator: [kAbortSet] != 0 once a
// kernel gave up; kernels whose peers are not the ring's (the exchanges,
// the scan chain) also leave the ranks they were sending to and receiving
// from (+1; 0: none) for the host's error message. [kAbortUndelivered]: a
// rank (+1) whose pushed block never came (it could not map this rank's
// output); the call fails, the communicator stays usable.
enum AbortWord { kAbortSet = 0, kAbortSendPeer = 1, kAbortRecvPeer = 2, kAbortUndelivered = 3, kAbortWords = 4 };

} // namespace loom
