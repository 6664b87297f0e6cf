/*
 * All-peer connections of a communicator: one connection with every other
 * rank, for the exchanges (alltoall(v), gather(v), scatter(v);
 * device/exchange/exchange_schedule.h). Made on first need, collectively (the first
 * exchange call, which every rank makes), through the bootstrap the
 * communicator was created with, and kept until the communicator goes.
 *
 * Per pair the transport the ring would choose: p2p inside a host where both
 * GPUs reach each other (the receiver's FIFO in a GPU region of its own,
 * mapped by the sender), shm inside a host otherwise (a segment per
 * receiver holding its FIFOs from every such peer), net across hosts (one
 * channel per peer, host FIFOs moved by the proxy). Each pair has C(n) =
 * clamp(48 / (n - 1), 1, LOOM_EXCHANGE_CHANNELS) connections (channels: one
 * CTA each, so that a pair moves at more than one CTA's copy rate;
 * exchangeChannels; the cap is 32 by default: 2 ranks moved 0.39x NCCL's
 * bandwidth at 16, 0.65x at 32, no more at 48). A FIFO is FifoFlags +
 * nslots x slotBytes: per rank n x C(n) x (768 B + nslots x slotBytes) of
 * receive FIFOs in GPU memory or shared host memory, plus two such FIFOs of
 * pinned host memory per connection across hosts. The slots are the edge
 * slots (LOOM_NSLOTS x LOOM_EDGE_SLOT_BYTES, 4 x 128 KiB by default) while
 * their slots stay within kExchangeFifoBudget (32 MiB), else smaller
 * (exchangeFifoShape, down to 2 x 4 KiB): 32 MiB at 2 ranks (32 channels),
 * 18 MiB at 3 (24 channels, 64 KiB slots), 32 MiB at 4 (16), 24 MiB at 8 (6),
 * 32 MiB at 64 (1), 32 MiB at 1024 (4 x 8 KiB slots), 33 MiB at 4096 (2 x
 * 4 KiB); past 4096 ranks it grows with n (8 KiB per peer).
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "btl_gpu/net/net_transport.h"
#include "btl_gpu/p2p/p2p.h"
#include "btl_gpu/shm/shm.h"
#include "core/ipc/direct_buffers.h"
#include "core/enqueue/engine_copies.h"
#include "device/conn.h"
#include "device/exchange/exchange_schedule.h"
#include "loom.h"

struct loomComm;

namespace loom {

struct PeerConns {
    // From the communicator's creation (the same on every rank).
    loomBootstrap_t bootstrap{};
    std::vector<uint64_t> hostOf;           // per rank: its host as counted (LOOM_FAKE_NODES may split one)
    std::vector<uint8_t> p2pWith;           // per rank: this rank's GPU and its reach each other
    // Made on first need.
    bool ready = false;
    bool useNet = false;       // some peer is across hosts
    int channels = 1;          // connections per pair
    int nslots = 0;            // per FIFO
    size_t slotBytes = 0, fifoBytes = 0;
    P2pRegion region;          // receive FIFOs from p2p peers: FIFO q x channels + c at that many fifoBytes
    std::vector<char *> peerRegion; // p2p peers' regions, mapped here
    ShmSegment shmRecv;        // receive FIFOs from shm peers, the same layout
    std::vector<ShmSegment> shmSend; // shm peers' segments
    std::vector<NetLinks> net; // per peer across hosts (its channels)
    std::vector<ConnPair> conns;     // per connection (q x channels + c): the kernel's view
    std::vector<ConnSteps> steps;    // per connection: slots sent and received on it so far
    ConnPair *connsDev = nullptr;
    // Calls whose tables do not fit the kernel parameters: counts and
    // displacements (4 x n), the direct tables (2 x n), then the steps, in
    // device memory, and the event of the last kernel that read them.
    void *tablesDev = nullptr;
    cudaEvent_t tablesRead = nullptr;
    void *inputCopy = nullptr; // an in-place call's input
    size_t inputCopyBytes = 0;
    // Per call, host side, sized once: the tables above, and each
    // connection's slots sent and received by the call.
    std::vector<size_t> callTables;
    std::vector<unsigned long long> callSends, callRecvs;
    // Direct pairs: buffers described to and mapped from p2p peers, and a
    // call's records (core/enqueue/enqueue_direct.cc).
    DirectBuffers direct;
    std::vector<int> directTo, directFrom;
    std::vector<BufferDesc> directOut, directIn;
    bool directSaid = false, unshareableInSaid = false, unshareableOutSaid = false; // once-per-communicator INFO lines
    // A pushed gather's copy-engine writes by this rank (core/enqueue/engine_copies.h)
    // and a call's blocks for them.
    EngineCopies engines;
    std::vector<EngineBlock> engineBlocks;
    bool enginesSaid = false;
};

// Channels per pair at n ranks, at most `cap` (LOOM_EXCHANGE_CHANNELS,
// agreed at the communicator's creation: the same on every rank).
inline int exchangeChannels(int n, int cap) {
    const int c = n > 1 ? kMaxExchangeLanes / (n - 1) : 1;
    return c < 1 ? 1 : c > cap ? cap : c;
}

constexpr size_t kExchangeFifoBudget = size_t(32) << 20; // slots of the receive FIFOs per rank

// Slots of each all-peer FIFO: the edge slots (nslots x slotBytes) halved,
// slots first (down to 4), then their size (down to 4 KiB), then slots
// (down to 2), until the slots of n x C(n) FIFOs fit the budget. The same
// on every rank: the inputs are agreed.
inline void exchangeFifoShape(int n, int channels, size_t edgeSlotBytes, int edgeSlots, int *nslots,
                              size_t *slotBytes) {
    const size_t fifos = (size_t)n * (size_t)channels;
    *nslots = edgeSlots;
    *slotBytes = edgeSlotBytes;
    while (fifos * (size_t)*nslots * *slotBytes > kExchangeFifoBudget) {
        if (*nslots > 4) *nslots /= 2;
        else if (*slotBytes > 4096) *slotBytes /= 2;
        else if (*nslots > 2) *nslots /= 2;
        else break;
    }
}

// Threads per CTA of an exchange or scan whose largest block (bytes one pair
// moves) is `largest`: small calls on 128 threads, which were faster for
// alltoall and scatter up to 16 KiB per peer (docs/performance.md); larger
// ones on LOOM_NTHREADS for bandwidth. A rank's own choice: threads change
// nothing its peers see.
constexpr size_t kExchangeSmallBlock = 16 << 10;
inline int exchangeThreads(size_t largest, int ringThreads) {
    return largest <= kExchangeSmallBlock && ringThreads > 128 ? 128 : ringThreads;
}

// Lanes that copy a rank's own block of `bytes` beside the pairs' rounds
// (exchange_schedule.h), so that the copy ends with the pairs' traffic
// (`other` bytes: the larger of what this rank sends to and receives from
// its peers). One lane copies about a twelfth of what a rank's pairs move
// (docs/performance.md, "Measurements behind the code"), so the copy wants
// ~12 lanes per byte of pair traffic; kSelfLanesPerShare 16 leaves a margin
// (8 lanes lost to NCCL's alltoall at 256 MiB, 16 won). At most a pair's channels and the block's chunks of `chunk`, at
// least one. A rank's own choice: its peers never see these lanes.
constexpr int kSelfLanesPerShare = 16;
inline int exchangeSelfLanes(size_t bytes, size_t other, size_t chunk, int channels) {
    const size_t chunks = (bytes + chunk - 1) / chunk;
    size_t want = other ? (kSelfLanesPerShare * bytes + other - 1) / other : (size_t)channels;
    if (want > (size_t)channels) want = (size_t)channels;
    const size_t lanes = want < chunks ? want : chunks;
    return lanes < 1 ? 1 : (int)lanes;
}

// Collective (every rank, the first time an exchange needs them): connects
// every pair. All ranks leave with the same result.
loomResult_t connectPeers(loomComm *comm);

// After a call's launch: adds what the call moves on rank q's connections
// (sends, recvs: the call's slots per connection, n x channels entries) to
// their step counters and, on a net link that moves any, promises it to the
// proxy.
void commitPeerSteps(PeerConns &p, int q, const unsigned long long *sends, const unsigned long long *recvs);

// Frees what connectPeers made (net links closed by the deadline).
void releasePeers(loomComm *comm, std::chrono::steady_clock::time_point netDeadline);

} // namespace loom
