/*
 * Ring connections of a communicator: for each neighbour pair, p2p (the
 * receiver's FIFO in its GPU memory, mapped into the sender with CUDA IPC)
 * when both GPUs can reach each other, else shm (the FIFO in shared host
 * memory mapped into both GPUs) when they share a host, else net (FIFOs in
 * host memory on both sides, moved by the proxy over a net plugin). Both ends
 * of a pair decide from the same gathered data, so they always agree.
 */
#pragma once

#include <cstdint>
#include <vector>

#include "core/comm.h"

namespace loom {

struct PeerInfo {
    uint64_t hostHash;
    int pid;
    int cudaDev;
    P2pEndpoint endpoint;
    // What both ends of every connection must agree on (each rank reads its
    // own LOOM_* environment): channels, slots, slot size, LL thresholds.
    uint64_t fifoGeometry[5];
};

// Collective. Connects what the ring (and, when every pair is p2p, the
// one-shot kernel) needs and fills comm's areas.
loomResult_t connectRing(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers);

} // namespace loom
