/*
 * A loom communicator: the ranks, the GPU, loom's stream, this rank's FIFO
 * region and its peers' mapped ones, and one part per concern (rings,
 * one-shot LL, edges, zero-copy, staging, stream order, arrival/failure).
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
#include "base/coll.h"
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

namespace loom {
// The rings (Simple, LL, LL128; core/algo/ring): the topology's distinct
// rings (at most one per channel; channel c runs on links[c % size],
// core/connect/ring_link.h), their channels in device memory and step
// counters per protocol, and each protocol's FIFO area in the region.
struct RingPart {
    std::vector<RingLink> links;
    RingChannel *chansDev[kNumRingProtos] = {};
    ConnSteps steps[kNumRingProtos][kMaxChannels] = {};
    int nslots = 2;
    size_t slotBytes = 0;
    size_t channelBytes = 0; // FifoFlags + slots of one Simple channel
    bool useNet = false;     // some ring connection of this rank crosses hosts
    // The ring on the LL protocol has FIFOs of its own (lines must never meet
    // Simple's raw data) after the one-shot slots, and its own step counters.
    size_t llOffset = 0;
    size_t llSlotBytes = 0;
    size_t llChannelBytes = 0; // FifoFlags + slots of one channel
    size_t llMaxBytes = 0;
    // The ring on LL128 (device/prims_ll128.h), the same way after the LL
    // ring's FIFOs; it runs only where ll128Ready: one host, NVLink between
    // its GPUs (intraNvlink, from the topology) and every ring link p2p.
    size_t ll128Offset = 0;
    size_t ll128SlotBytes = 0;
    size_t ll128ChannelBytes = 0;
    size_t ll128MaxBytes = 0;
    bool ll128Ready = false;
};

// The one-shot LL slots (core/algo/oneshot): [2 parities][nranks senders] x
// slotBytes from offset in the region; possible where allPeersMapped.
struct OneShotPart {
    bool allPeersMapped = false;
    size_t offset = 0;
    size_t slotBytes = 0;
    size_t maxBytes = 0;
    uint32_t calls = 0; // one-shot calls so far (flag and parity)
};

// Small messages across hosts (core/algo/edges): trees (double binary tree
// across hosts, chains inside) and recursive doubling, over edges with one
// peer each (device/edges/peer_edge.h): slot k leads to peer[k], which uses
// its slot peerSlot[k] for the same edge (-1: none).
struct EdgePart {
    int peer[kEdgeSlots] = {}, peerSlot[kEdgeSlots] = {};
    PeerEdge edge[kEdgeSlots] = {};  // the kernels' view (also in device memory: connsDev)
    ConnSteps steps[kEdgeSlots] = {}; // slots sent and received on each edge so far
    ConnPair *connsDev = nullptr;
    void *acc = nullptr;              // the doubling reduce / reduce_scatter's accumulator (GPU memory)
    size_t accBytes = 0;
    NetLinks net[kEdgeSlots];         // edges across hosts
    bool useNet = false;              // some of this rank's edges cross hosts
    size_t slotBytes = 0;
    size_t fifoBytes = 0;             // FifoFlags + slots of one edge FIFO
    size_t offset = 0;                // this rank's edge receive FIFOs in its region (kEdgeSlots of them)
    topo::Tree trees[2];              // every rank's place (the same on all ranks)
    TreeNode treeNode[2];             // this rank's
    bool treeReady = false;           // connected (agreed by all ranks)
    size_t treeMaxBytes = 0;
    RdRole rdRole = {};               // this rank's part in recursive doubling (what the kernel is told)
    bool rdReady = false;
    size_t rdMaxBytes = 0;
};

// The zero-copy allreduce (core/algo/zerocopy/zerocopy.h): its flag words in
// the region (nranks x kMaxZeroCopyCtas from offset) and its state; ready
// where every pair is mapped inside one host (agreed: from gathered data).
// The staged two-shot's scratch in the region: stagedBytes of input copies,
// then as many of results (0: none), the same size on every rank.
struct ZeroCopyPart {
    size_t offset = 0;
    size_t stagedOffset = 0, stagedBytes = 0;
    bool ready = false;
    ZeroCopyState *state = nullptr;
};

// Host-memory staging (core/stage): loomCommScratch's buffer, the pinned
// bounce of host-buffer ranks' copies (stage_bounce.cc), and non-blocking
// staged calls' buffer pool and the stream of their copies (never a kernel
// on it; poolFailed: none to be had, such calls finish inside the call);
// parked: buffers of staged calls that failed (loom's stream may still use
// them). vInput: a copy of an in-place ragged reduce_scatter's input
// (core-owned; scratch belongs to the caller).
struct StagePart {
    void *scratch = nullptr;
    size_t scratchBytes = 0;
    void *bounce = nullptr;
    bool bounceFailed = false;
    cudaMemPool_t pool = nullptr;
    cudaStream_t stream = nullptr;
    bool poolFailed = false;
    std::vector<void *> parked;
    void *vInput = nullptr;
    size_t vInputBytes = 0;
    // Packed copies of non-contiguous datatypes (stage_datatype.cc): the
    // input's, the output's, and the device tables of long plans. Reused
    // call after call: everything that touches them runs on loom's stream.
    void *packed[2] = {nullptr, nullptr};
    size_t packedBytes[2] = {0, 0};
    void *dtTable = nullptr;
    size_t dtTableBytes = 0;
    std::vector<char> dtTableLast; // what dtTable holds (or will, on the stream)
};

// Ordering on loom's stream (core/stream): LOOM_STREAM_BLOCKING=0 makes it a
// non-blocking stream that waits for the application's legacy-stream work
// through legacyMark (app_order.cc; legacyIdleAtEntry: the legacy stream
// was idle when the current call entered); blocking: it orders after the
// legacy stream by itself. idle: nothing unfinished on it (a wait saw it
// drain and nothing was enqueued since; false when unsure), idleAtEntry: so
// when the current call entered (the resident kernel's cheap check).
// hostWaitAllowed (loomCommSetHostWait): 0 while the caller may not wait on
// the host for other ranks (MPI's non-blocking collectives): no zero-copy
// allreduce. marks: loomCommMark / loomCommTest (call_marks.cc).
struct OrderPart {
    cudaEvent_t legacyMark = nullptr;
    bool legacyIdleAtEntry = false;
    bool blocking = true;
    bool idle = true;
    bool idleAtEntry = false;
    bool hostWaitAllowed = true;
    CallMarks marks;
};

// Arrival and failure (core/ras): the host-mapped abort flag a kernel that
// timed out sets; the words shared with the watchdog (watchdog.h) and every
// kernel's waits (device/wait.h), and the limits every call's waits get
// (callWait adds the call's number); the collectives entered and seen done;
// this host's arrival board and this rank's slot on it, whom to ask across
// hosts (arrival_query.h); failed: an earlier call failed.
struct RasPart {
    volatile int *abortFlag = nullptr;
    int *abortFlagDev = nullptr;
    WatchWords *watch = nullptr;
    WaitLimit waitLimit = {};
    const char *lastColl = ""; // the collective last enqueued (for errors)
    uint64_t collsEntered = 0;
    uint64_t collsDone = 0;    // ... of which loomCommWait saw finish
    ArrivalBoard *arrivals = nullptr;
    int arrivalSlot = -1;
    ArrivalPeers *arrivalPeers = nullptr;
    bool failed = false;
};
} // namespace loom

// A loom communicator: the ranks and GPU, loom's stream, the FIFO region
// every path shares, and one part per concern above.
struct loomComm {
    int rank = 0, nranks = 0, cudaDev = -1;
    char busId[16] = "";
    uint64_t commTag = 0;         // from the unique id: the same on every rank
    cudaStream_t stream = nullptr;
    int maxChannels = 1;
    loom::P2pRegion region;       // this rank's FIFOs (one per channel), then its LL slots
    std::vector<char *> peerBase; // peers' regions mapped into this process (null: not mapped)
    bool spansHosts = false;      // some ring connection of the communicator crosses hosts
    std::string nic;              // the topology's NIC nearest this rank's GPU ("mlx5_0:1"; "" if none)
    bool intraNvlink = false;     // NVLink between every pair of GPUs of the host
    bool gpuShared = false;       // another rank's process uses this GPU, without MPS (no resident kernel)
    bool mpsClient = false;       // this process reaches its GPU through CUDA MPS (a kernel error may be another client's)
    unsigned algoMask = ~0u;      // LOOM_ALGO: the algorithms selection may choose (bit per Algo, select.h)
    loom::RingPart ring;
    loom::OneShotPart ll;
    loom::EdgePart edges;
    loom::ZeroCopyPart zc;
    loom::StagePart stage;
    loom::OrderPart order;
    loom::RasPart ras;
    // Ragged calls (allgatherv, reduce_scatter with counts): their block
    // tables (counts, then displacements; 2 x nranks) in device memory, and
    // the event of the last kernel that read them (the next call's copy waits
    // for it on its own stream).
    size_t *blockTablesDev = nullptr;
    loom::PinnedUploads *uploads = nullptr; // host tables to the GPU through pinned memory: made on first use
    cudaEvent_t blockTablesRead = nullptr;
    loom::PeerConns *peers = nullptr; // all-peer connections (exchanges): made on first need
    // The resident kernel (core/stream/resident.h); residentOff: it could not be had
    // on this communicator (every call launches).
    loom::ResidentState *resident = nullptr;
    bool residentOff = false;
    std::vector<void *> retiredBuffers; // device buffers replaced by larger ones: freed with the communicator
    size_t grownBytes = 0;              // every growDeviceBuffer allocation, live and retired
    // Choices said at TUNE (enqueue.cc): per collective and power-of-two size class.
    static constexpr int kTuneColls = loomCollCount, kTuneClasses = 48;
    uint8_t tuneSaid[kTuneColls][kTuneClasses] = {};
};

namespace loom {

void orderAfterApplication(loomComm *comm, cudaStream_t stream); // core/stream/app_order.cc

// Every collective entry point, before anything goes on loom's stream
// (core/stream/app_order.cc: after a pending resident call and the
// application's legacy-stream work).
void beginCall(loomComm *comm);

// Work put on loom's stream ahead of the call's own kernel (copies of inputs).
inline void streamBusy(loomComm *comm) {
    comm->order.idle = false;
    comm->order.idleAtEntry = false;
}

// Every collective's enqueue, once per call on every rank, before its launch:
// names it for errors and counts it on the arrival board.
inline void enterCollective(loomComm *comm, const char *name) {
    comm->ras.lastColl = name;
    ++comm->ras.collsEntered;
    if (comm->ras.arrivals) comm->ras.arrivals->enter(comm->ras.arrivalSlot, comm->ras.collsEntered);
}

// The wait limits of the call that entered last (enterCollective).
inline WaitLimit callWait(const loomComm *comm) {
    WaitLimit w = comm->ras.waitLimit;
    w.seq = comm->ras.collsEntered;
    if (comm->rank == params().stuckRank && (long)w.seq == params().stuckCall) w.seq |= kCallStuckHere; // tests
    return w;
}

// Every kernel's waits: the limits of the call that entered last
// (enterCollective) and the communicator's abort flag.
template <class KernelArgs> void kernelWaits(const loomComm *comm, KernelArgs &a) {
    a.wait = callWait(comm);
    a.abortFlag = comm->ras.abortFlagDev;
}

// A CUDA call of a collective's enqueue that failed (a launch, a copy, an
// event), named the same way on every path: rank, GPU, the collective and
// the step.
loomResult_t cudaFailed(const loomComm *comm, const char *coll, const char *step, cudaError_t e);

// A call that entered (enterCollective) and goes on under another
// algorithm, which enters it again: the first entry is taken back.
inline void withdrawEntry(loomComm *comm) {
    --comm->ras.collsEntered;
    if (comm->ras.arrivals) comm->ras.arrivals->enter(comm->ras.arrivalSlot, comm->ras.collsEntered);
}

// A ring protocol's FIFO slot, and one channel's FifoFlags + slots, in the
// area of that protocol (kProtoSimple, kProtoLL, kProtoLL128).
inline size_t ringSlotBytes(const loomComm *comm, int proto) {
    return proto == kProtoLL ? comm->ring.llSlotBytes : proto == kProtoLL128 ? comm->ring.ll128SlotBytes : comm->ring.slotBytes;
}
inline size_t ringChannelBytes(const loomComm *comm, int proto) {
    return proto == kProtoLL ? comm->ring.llChannelBytes
           : proto == kProtoLL128 ? comm->ring.ll128ChannelBytes
                                  : comm->ring.channelBytes;
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
