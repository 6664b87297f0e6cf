/*
 * A loom communicator: the ranks, the GPU, loom's stream and the ring
 * connections (FIFO region of this rank, mapped regions of its neighbours,
 * per ring: core/connect/ring_link.h).
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "btl_gpu/p2p/p2p.h"
#include "btl_gpu/net/net_transport.h"
#include "btl_gpu/shm/shm.h"
#include "core/ras/arrival.h"
#include "core/comm/params.h"
#include "core/stream/resident.h"
#include "core/connect/ring_link.h"
#include "device/oneshot/oneshot_args.h"
#include "device/conn.h"
#include "device/ring/ring_args.h"
#include "device/edges/edge_args.h"
#include "device/edges/rd_args.h"
#include "loom_component.h"
#include "topo/search.h"

namespace loom {
struct PeerConns; // core/connect/peer_conns.h
struct ZeroCopyState; // core/algo/zerocopy/zerocopy.h
struct ArrivalPeers;  // core/ras/arrival_query.h
class PinnedUploads;  // core/stream/pinned_uploads.h
}

namespace loom {
// Completion marks on the communicator's stream (core/stream/call_marks.cc): events
// in issue order, each with its ticket; the stream runs them in that order.
struct CallMarks {
    struct Mark {
        uint64_t ticket;
        cudaEvent_t event;     // on loom's stream; null: it held nothing
        uint32_t residentSeq;  // a pending resident call before the mark (core/stream/resident.h); 0: none
    };
    std::vector<Mark> pending; // oldest first
    std::vector<cudaEvent_t> spare;
    uint64_t issued = 0, finished = 0; // tickets
};
} // namespace loom

struct loomComm {
    int rank = 0, nranks = 0, cudaDev = -1;
    // The topology's distinct rings (at most one per channel); channel c
    // runs on rings[c % rings.size()] (core/connect/ring_link.h).
    std::vector<loom::RingLink> rings;
    loom::RingChannel *ringChansDev[loom::kNumRingProtos] = {};
    loom::ConnSteps ringSteps[loom::kNumRingProtos][loom::kMaxChannels] = {};
    int maxChannels = 1, nslots = 2;
    size_t slotBytes = 0;
    size_t channelBytes = 0;     // FifoFlags + slots of one channel
    loom::P2pRegion region;      // this rank's FIFOs (one per channel), then its LL slots
    std::vector<char *> peerBase; // peers' regions mapped into this process (null: not mapped)
    bool ringsUseNet = false;    // some ring connection of this rank crosses hosts
    bool spansHosts = false;     // some ring connection of the communicator crosses hosts
    std::string nic;             // the topology's NIC nearest this rank's GPU ("mlx5_0:1"; "" if none)
    bool allPeersMapped = false; // one-shot LL possible
    unsigned algoMask = ~0u; // LOOM_ALGO: the algorithms selection may choose (bit per Algo, select.h)
    size_t llOffset = 0;         // LL slots: [2 parities][nranks senders] x llSlotBytes
    size_t llSlotBytes = 0;
    size_t llMaxBytes = 0;
    uint32_t llCalls = 0;        // one-shot calls so far (flag and parity)
    // The ring on the LL protocol has FIFOs of its own (lines must never meet
    // Simple's raw data) after the one-shot slots, and its own step counters.
    size_t llRingOffset = 0;
    size_t llRingSlotBytes = 0;
    size_t llRingChannelBytes = 0; // FifoFlags + slots of one channel
    size_t llRingMaxBytes = 0;
    // The ring on LL128 (device/prims_ll128.h), the same way after the LL
    // ring's FIFOs; it runs only where ll128Ready: one host, NVLink between
    // its GPUs (intraNvlink, from the topology) and every ring link p2p.
    size_t ll128RingOffset = 0;
    size_t ll128RingSlotBytes = 0;
    size_t ll128RingChannelBytes = 0;
    size_t ll128RingMaxBytes = 0;
    bool intraNvlink = false;
    bool ll128Ready = false;
    // Small messages across hosts: trees (double binary tree across hosts,
    // chains inside) and recursive doubling, over edges with one peer each
    // (device/edges/peer_edge.h): slot k leads to edgePeer[k], which uses its slot
    // edgePeerSlot[k] for the same edge (-1: none).
    int edgePeer[loom::kEdgeSlots] = {}, edgePeerSlot[loom::kEdgeSlots] = {};
    loom::PeerEdge edge[loom::kEdgeSlots] = {}; // the kernels' view (also in device memory: edgeConnsDev)
    loom::ConnSteps edgeSteps[loom::kEdgeSlots] = {}; // slots sent and received on each edge so far
    loom::ConnPair *edgeConnsDev = nullptr;
    void *edgeAcc = nullptr;     // the doubling reduce / reduce_scatter's accumulator (GPU memory)
    size_t edgeAccBytes = 0;
    loom::NetLinks edgeNet[loom::kEdgeSlots];   // edges across hosts
    bool edgesUseNet = false;    // some of this rank's edges cross hosts
    size_t edgeSlotBytes = 0;
    size_t edgeFifoBytes = 0;    // FifoFlags + slots of one edge FIFO
    size_t edgeOffset = 0;       // this rank's edge receive FIFOs in its region (kEdgeSlots of them)
    loom::topo::Tree trees[2];   // every rank's place (the same on all ranks)
    loom::TreeNode treeNode[2];  // this rank's
    bool treeReady = false;      // connected (agreed by all ranks)
    size_t treeMaxBytes = 0;
    loom::RdRole rdRole = {};    // this rank's part in recursive doubling (what the kernel is told)
    bool rdReady = false;
    size_t rdMaxBytes = 0;
    cudaStream_t stream = nullptr;
    volatile int *abortFlag = nullptr; // host-mapped, set by a kernel that timed out
    int *abortFlagDev = nullptr;
    // Shared with the watchdog (core/ras/watchdog.h) and every kernel's waits
    // (device/wait.h): host-mapped words, and the limits every call's waits
    // get (callWait adds the call's number).
    loom::WatchWords *watch = nullptr;
    loom::WaitLimit waitLimit = {};
    void *scratch = nullptr;     // loomCommScratch's buffer (GPU memory)
    size_t scratchBytes = 0;
    void *stageBounce = nullptr; // pinned: host-buffer ranks' copies to and from scratch (core/stage/stage_bounce.cc)
    bool stageBounceFailed = false;
    // Non-blocking staged calls (core/stage/stage_async.cc): their buffers' pool and
    // the stream of their copies (never a kernel on it); stagePoolFailed: none
    // to be had (such calls finish inside the call).
    cudaMemPool_t stagePool = nullptr;
    cudaStream_t stageStream = nullptr;
    bool stagePoolFailed = false;
    std::vector<void *> stageParked; // buffers of staged calls that failed: loom's stream may still use them
    // Ragged calls (allgatherv, reduce_scatter with counts): their block
    // tables (counts, then displacements; 2 x nranks) in device memory, and
    // the event of the last kernel that read them (the next call's copy waits
    // for it on its own stream). vInput: a copy of an in-place ragged
    // reduce_scatter's input (core-owned; scratch belongs to the caller).
    size_t *blockTablesDev = nullptr;
    loom::PinnedUploads *uploads = nullptr; // host tables to the GPU through pinned memory: made on first use
    cudaEvent_t blockTablesRead = nullptr;
    // LOOM_STREAM_BLOCKING=0: loom's stream is a non-blocking stream, which
    // waits for the application's legacy-stream work through this event
    // (core/stream/app_order.cc); with it, whether the legacy stream was idle when
    // the current call entered (asked at every entry).
    cudaEvent_t legacyMark = nullptr;
    bool legacyIdleAtEntry = false;
    bool streamBlocking = true; // loom's stream orders after the legacy stream by itself
    void *vInput = nullptr;
    size_t vInputBytes = 0;
    loom::PeerConns *peers = nullptr; // all-peer connections (exchanges): made on first need
    // The zero-copy allreduce (core/algo/zerocopy/zerocopy.h): its flag words in the
    // region (nranks x kMaxZeroCopyCtas) and its state; ready where every
    // pair is mapped inside one host (agreed: from gathered data).
    size_t zeroCopyOffset = 0;
    // The staged two-shot's scratch in the region (stagedBytes of input
    // copies, then as many of results; 0: none), same size on every rank.
    size_t stagedOffset = 0, stagedBytes = 0;
    bool zeroCopyReady = false;
    loom::ZeroCopyState *zeroCopy = nullptr;
    const char *lastColl = "";   // the collective last enqueued (for errors)
    uint64_t collsEntered = 0;   // collectives enqueued so far
    uint64_t collsDone = 0;      // ... of which loomCommWait saw finish
    uint64_t commTag = 0;        // from the unique id: the same on every rank
    loom::ArrivalBoard *arrivals = nullptr; // this host's ranks' collsEntered (null: none)
    int arrivalSlot = -1;        // this rank's slot on it
    loom::ArrivalPeers *arrivalPeers = nullptr; // ranks span hosts: whom to ask about theirs (arrival_query.h)
    bool failed = false;
    bool gpuShared = false;      // another rank's process uses this GPU (no resident kernel)
    // The resident kernel (core/stream/resident.h); residentOff: it could not be had
    // on this communicator (every call launches).
    loom::ResidentState *resident = nullptr;
    bool residentOff = false;
    // loom's stream holds nothing unfinished (a wait saw it drain and nothing
    // was enqueued since; false when unsure), and whether it was so when the
    // current call entered (beginCall): the resident kernel's cheap check.
    bool streamIdle = true;
    bool streamIdleAtEntry = false;
    // loomCommSetHostWait: 0 while the caller may not wait on the host for
    // other ranks (MPI's non-blocking collectives): no zero-copy allreduce.
    bool hostWaitAllowed = true;
    loom::CallMarks marks;       // loomCommMark / loomCommTest (core/stream/call_marks.cc)
    std::vector<void *> retiredBuffers; // device buffers replaced by larger ones: freed with the communicator
    size_t grownBytes = 0;              // every growDeviceBuffer allocation, live and retired
    char busId[16] = "";
    // Choices said at TUNE (enqueue.cc): per collective and power-of-two size class.
    static constexpr int kTuneColls = 8, kTuneClasses = 48;
    uint8_t tuneSaid[kTuneColls][kTuneClasses] = {};
};

namespace loom {

void residentOrder(loomComm *comm); // core/stream/resident.h
void orderAfterApplication(loomComm *comm, cudaStream_t stream); // core/stream/app_order.cc

// Every collective entry point, before anything goes on loom's stream.
inline void beginCall(loomComm *comm) {
    if (comm->resident) residentOrder(comm); // after a pending non-blocking resident call
    orderAfterApplication(comm, comm->stream); // after the application's legacy-stream work
    comm->streamIdleAtEntry = comm->streamIdle;
    comm->streamIdle = false;
}

// Work put on loom's stream ahead of the call's own kernel (copies of inputs).
inline void streamBusy(loomComm *comm) {
    comm->streamIdle = false;
    comm->streamIdleAtEntry = false;
}

// Every collective's enqueue, once per call on every rank, before its launch:
// names it for errors and counts it on the arrival board.
inline void enterCollective(loomComm *comm, const char *name) {
    comm->lastColl = name;
    ++comm->collsEntered;
    if (comm->arrivals) comm->arrivals->enter(comm->arrivalSlot, comm->collsEntered);
}

// The wait limits of the call that entered last (enterCollective).
inline WaitLimit callWait(const loomComm *comm) {
    WaitLimit w = comm->waitLimit;
    w.seq = comm->collsEntered;
    if (comm->rank == params().stuckRank && (long)w.seq == params().stuckCall) w.seq |= kCallStuckHere; // tests
    return w;
}

// A call that entered (enterCollective) and goes on under another
// algorithm, which enters it again: the first entry is taken back.
inline void withdrawEntry(loomComm *comm) {
    --comm->collsEntered;
    if (comm->arrivals) comm->arrivals->enter(comm->arrivalSlot, comm->collsEntered);
}

// A ring protocol's FIFO slot, and one channel's FifoFlags + slots, in the
// area of that protocol (kProtoSimple, kProtoLL, kProtoLL128).
inline size_t ringSlotBytes(const loomComm *comm, int proto) {
    return proto == kProtoLL ? comm->llRingSlotBytes : proto == kProtoLL128 ? comm->ll128RingSlotBytes : comm->slotBytes;
}
inline size_t ringChannelBytes(const loomComm *comm, int proto) {
    return proto == kProtoLL ? comm->llRingChannelBytes
           : proto == kProtoLL128 ? comm->ll128RingChannelBytes
                                  : comm->channelBytes;
}

// After the stream finished the calls up to some point (err: what the wait
// or query said): a silent peer, a failed kernel or an undelivered block as
// loomCommWait reports them. all: every call enqueued so far finished.
loomResult_t callsFinished(loomComm *comm, cudaError_t err, bool all);

// A call on a communicator that failed earlier: loomProcFailed naming the
// dead rank where a peer's death was the cause, else loomRemoteError.
loomResult_t failedEarlier(const loomComm *comm, const char *what);

// What the host's arrival board says about the ranks missing from the
// oldest unfinished call ("did not arrive: rank 1 (host ...) entered 1 of 2
// calls"), for a wait that timed out.
std::string describeAbsentPeers(const loomComm *comm);

// A device buffer of the communicator's that grows on demand (in whole MiB,
// on the communicator's GPU): scratch, the in-place reduce_scatter copy, the
// doubling accumulator. The old buffer goes with cudaFree, which waits for
// the GPU to finish with it.
loomResult_t growDeviceBuffer(loomComm *comm, void **buf, size_t *have, size_t need, const char *what);

} // namespace loom
