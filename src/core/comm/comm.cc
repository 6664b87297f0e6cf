/*
 * Communicator life cycle: unique id, peer exchange over the caller's
 * bootstrap (MPI in the component), ring connections over p2p, teardown.
 */
#include "core/comm/comm.h"
#include "core/stream/pinned_uploads.h"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <sched.h>
#include <unistd.h>
#include <vector>

#include "base/cuda_driver.h"
#include "base/debug.h"
#include "base/fnv1a.h"
#include "core/ras/watchdog.h"
#include "core/ras/arrival_query.h"
#include "base/bootstrap.h"
#include "core/connect/peer_conns.h"
#include "core/algo/zerocopy/zerocopy.h"
#include "device/zerocopy/zerocopy_schedule.h"
#include "core/connect/connect.h"
#include "core/comm/kernel_load.h"
#include "core/comm/params.h"
#include "btl_gpu/net/net_transport.h"
#include "core/comm/topology.h"

using namespace loom;

namespace {

// Same value for every process of one OS instance (hostname + boot id);
// computed once per process.
uint64_t hostHash() {
    static const uint64_t h = [] {
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        std::string id = host;
        std::ifstream boot("/proc/sys/kernel/random/boot_id");
        std::string b;
        if (boot >> b) id += b;
        return fnv1a(id);
    }();
    return h;
}

// The host this rank counts as. LOOM_FAKE_NODES splits one box into
// pretend hosts so the net transport can be tested there: 1 makes every
// process a host of its own (every ring connection crosses hosts); k >= 2
// groups GPUs by CUDA index / k (rings with p2p inside a group, net between).
uint64_t rankHostHash(int cudaDev) {
    const int k = params().fakeNodes;
    if (k <= 0) return hostHash();
    std::string part = k == 1 ? ":pid" + std::to_string(getpid()) : ":gpus" + std::to_string(cudaDev / k);
    static std::once_flag once;
    std::call_once(once, [&] {
        LOOM_INFO(kInit, "LOOM_FAKE_NODES=%d: this process (pid %d, GPU %d) counts as host '%s'", k, (int)getpid(),
                  cudaDev, part.c_str() + 1);
    });
    return fnv1a(std::to_string(hostHash()) + part);
}

#define CUDA_TRY(call, what)                                                                         \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess)                                                                       \
            return fail(loomUnhandledCudaError, "rank %d GPU %d: %s: %s", comm->rank, comm->cudaDev, \
                        what, cudaGetErrorString(e_));                                               \
    } while (0)

// Phase 1, local: the GPU, loom's stream, the abort flag.
loomResult_t setupGpu(loomComm *comm, RankIdentity *me) {
    const Params &p = params();
    CUDA_TRY(cudaSetDevice(comm->cudaDev), "cudaSetDevice");
    if (loomResult_t r = loadDeviceKernels(comm->rank, comm->cudaDev)) return r;
    CUDA_TRY(cudaDeviceGetPCIBusId(me->busId, sizeof(me->busId), comm->cudaDev), "cudaDeviceGetPCIBusId");
    memcpy(comm->busId, me->busId, sizeof(comm->busId));
    // A blocking stream: loom's kernels are ordered after the application's
    // work on the legacy default stream (cudaMemset, pageable cudaMemcpy whose
    // DMA may still run when the call returns), as CUDA-aware MPI users
    // expect. LOOM_STREAM_BLOCKING=0: a non-blocking one, which each call
    // orders so explicitly (core/stream/app_order.cc).
    int least = 0, greatest = 0;
    if (p.streamPriority) CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priorities");
    comm->order.blocking = p.streamBlocking != 0;
    CUDA_TRY(cudaStreamCreateWithPriority(&comm->stream, comm->order.blocking ? cudaStreamDefault : cudaStreamNonBlocking,
                                          p.streamPriority ? greatest : 0),
             "cudaStreamCreate");
    CUDA_TRY(cudaHostAlloc((void **)&comm->ras.abortFlag, kAbortWords * sizeof(int), cudaHostAllocMapped),
             "cudaHostAlloc");
    for (int k = 0; k < kAbortWords; ++k) comm->ras.abortFlag[k] = 0;
    CUDA_TRY(cudaHostGetDevicePointer((void **)&comm->ras.abortFlagDev, (void *)comm->ras.abortFlag, 0),
             "cudaHostGetDevicePointer");
    CUDA_TRY(cudaHostAlloc((void **)&comm->ras.watch, sizeof(WatchWords), cudaHostAllocMapped), "cudaHostAlloc");
    memset((void *)comm->ras.watch, 0, sizeof(WatchWords));
    WatchWords *watchDev = nullptr;
    CUDA_TRY(cudaHostGetDevicePointer((void **)&watchDev, (void *)comm->ras.watch, 0), "cudaHostGetDevicePointer");
    int clockKHz = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, comm->cudaDev), "clock rate");
    const double cyclesPerSecond = clockKHz * 1000.0;
    comm->ras.waitLimit.hardCycles = (unsigned long long)(p.timeoutSeconds * cyclesPerSecond);
    comm->ras.waitLimit.stuckCycles = (unsigned long long)(p.stuckSeconds * cyclesPerSecond);
    comm->ras.waitLimit.reportCycles = (unsigned long long)(kStallReportSeconds * cyclesPerSecond);
    comm->ras.waitLimit.words = watchDev;
    return loomSuccess;
}

// Another process on this GPU, seen by any communicator of this process (two
// communicators may each hold one process per GPU while the GPU has two).
std::atomic<bool> gpuSharedSeen{false};
void noteGpuShared() { gpuSharedSeen = true; }

// Whether this process's contexts on dev go through CUDA's MPS server: then
// the kernels of processes sharing the GPU run side by side instead of
// taking turns. CU_DEVICE_ATTRIBUTE_MPS_ENABLED (133), asked of the driver
// by number: CUDA 12 headers before it lack the name, a statically linked
// runtime older than it may refuse it, and a driver that does not know it
// answers an error (no MPS assumed).
bool mpsEnabled(int dev) {
    const CudaDriver *d = cudaDriver();
    CUdevice cu;
    int on = 0;
    if (!d || !d->cuDeviceGet || !d->cuDeviceGetAttribute || d->cuDeviceGet(&cu, dev) != CUDA_SUCCESS) return false;
    return d->cuDeviceGetAttribute(&on, static_cast<CUdevice_attribute>(133), cu) == CUDA_SUCCESS && on != 0;
}

} // namespace

namespace loom {
bool gpuSharedInProcess() { return gpuSharedSeen.load(); }
} // namespace loom

namespace {

// Phase 2, collective and deterministic: ring neighbours and channel count.
loomResult_t planFromTopology(loomComm *comm, const loomBootstrap_t *bs, const RankIdentity &me) {
    std::vector<RankIdentity> ids(comm->nranks);
    if (bs->allgather(bs->ctx, &me, ids.data(), sizeof(me)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of GPU identities failed", comm->rank);
    topo::Graphs g;
    std::vector<RingNics> nics;
    loomResult_t r = commTopology(comm->rank, comm->nranks, ids, bs, &g, &comm->nic, &nics);
    if (r != loomSuccess) return r;
    for (const RankIdentity &id : ids) comm->spansHosts |= id.hostHash != ids[0].hostHash;
    // Side by side only where every process on this GPU is an MPS client (a
    // process outside the server, another user's or pipe directory's, still
    // takes turns with the rest); the answer is used by this rank alone
    // (resident.cc: ranks choose the resident kernel alone).
    for (int q = 0; q < comm->nranks; ++q) {
        if (q == comm->rank || ids[q].hostHash != me.hostHash || strcmp(ids[q].busId, me.busId) != 0) continue;
        comm->gpuShared |= !ids[q].mps || !me.mps;
    }
    if (comm->gpuShared) noteGpuShared();
    // The same graphs on every rank: every rank decides alike.
    comm->intraNvlink = !comm->spansHosts && g.intraType <= topo::PathType::Nvl;
    comm->edges.trees[0] = g.trees[0];
    comm->edges.trees[1] = g.trees[1];
    std::vector<std::vector<int>> orders;
    for (const topo::Ring &ring : g.rings) orders.push_back(ring.ranks);
    if (const char *given = paramString("LOOM_RINGS")) { // agreed across ranks with the FIFO geometry
        std::vector<std::vector<int>> mine;
        std::string why;
        if (parseRingOrders(given, comm->nranks, &mine, &why)) {
            orders = mine;
            // The topology vouched for its own rings' links only: a given
            // order may cross PCIe, where LL128's lines could tear.
            comm->intraNvlink = false;
            nics.assign(orders.size(), RingNics{});
            if (comm->rank == 0) LOOM_INFO(kGraph, "LOOM_RINGS: %zu ring(s) instead of the topology's", orders.size());
        } else if (comm->rank == 0) {
            LOOM_INFO(kGraph, "LOOM_RINGS not used on this communicator of %d ranks (%s): the topology's rings",
                      comm->nranks, why.c_str());
        }
    }
    int ch = params().maxChannels > 0 ? params().maxChannels : g.channels;
    if (comm->spansHosts) {
        // Across hosts a channel is a network connection, each with its own
        // FIFOs; hosts without a known NIC (sockets, fake nodes) get 4.
        if (params().netChannels > 0) ch = params().netChannels;
        else if (params().maxChannels <= 0) ch = g.ringBw > 0 ? g.channels : 4;
        ch = ch > kMaxNetChannels ? kMaxNetChannels : ch;
    }
    comm->maxChannels = ch < 1 ? 1 : ch > kMaxChannels ? kMaxChannels : ch;
    // Channel c runs on ring c % nrings: rings beyond the channel count go unused.
    const int nr = (int)orders.size() < comm->maxChannels ? (int)orders.size() : comm->maxChannels;
    comm->ring.links.assign((size_t)nr, RingLink{});
    int handles = 0;
    for (int k = 0; k < nr; ++k) {
        RingLink &ring = comm->ring.links[k];
        ring.order = orders[k];
        const int n = (int)ring.order.size();
        ring.posOf.assign((size_t)comm->nranks, 0);
        for (int i = 0; i < n; ++i) ring.posOf[ring.order[i]] = i;
        ring.pos = ring.posOf[comm->rank];
        ring.next = ring.order[(ring.pos + 1) % n];
        ring.prev = ring.order[(ring.pos + n - 1) % n];
        ring.nchannels = (comm->maxChannels - k + nr - 1) / nr;
        ring.handleBase = handles;
        handles += ring.nchannels;
        ring.recvNic = nics[k].recv.empty() ? comm->nic : nics[k].recv;
        ring.sendNic = nics[k].send.empty() ? comm->nic : nics[k].send;
    }
    return loomSuccess;
}

// Phase 3, local: FIFO sizes and this rank's region.
loomResult_t allocateFifos(loomComm *comm, PeerInfo *mine) {
    const Params &p = params();
    comm->ring.nslots = p.nslots;
    comm->ring.slotBytes = (size_t)p.slotBytes;
    comm->ring.channelBytes = sizeof(FifoFlags) + (size_t)comm->ring.nslots * comm->ring.slotBytes;
    comm->ll.maxBytes = comm->nranks <= kMaxOneShotRanks ? (size_t)p.llMaxBytes : 0;
    comm->ll.slotBytes = (llBytes(comm->ll.maxBytes) + 255) / 256 * 256;
    comm->ll.offset = (size_t)comm->maxChannels * comm->ring.channelBytes;
    // The LL ring is not carried by the proxy: off on every rank when the
    // ranks span hosts — decided here, before the region's layout, which the
    // edge FIFOs' offset must not depend on LOOM_LL_SLOT_BYTES through.
    comm->ring.llMaxBytes = comm->spansHosts ? 0 : (size_t)p.llRingMaxBytes;
    comm->ring.llSlotBytes = (size_t)p.llSlotBytes;
    comm->ring.llChannelBytes = sizeof(FifoFlags) + (size_t)comm->ring.nslots * comm->ring.llSlotBytes;
    comm->ring.llOffset = comm->ll.offset + 2 * (size_t)comm->nranks * comm->ll.slotBytes;
    // LL128 likewise (its FIFOs in this region only: never in host memory).
    comm->ring.ll128MaxBytes = comm->spansHosts || !comm->intraNvlink ? 0 : (size_t)p.ll128RingMaxBytes;
    comm->ring.ll128SlotBytes = (size_t)p.ll128SlotBytes;
    comm->ring.ll128ChannelBytes = sizeof(FifoFlags) + (size_t)comm->ring.nslots * comm->ring.ll128SlotBytes;
    comm->ring.ll128Offset =
        comm->ring.llOffset + (comm->ring.llMaxBytes ? (size_t)comm->maxChannels * comm->ring.llChannelBytes : 0);
    comm->edges.offset = comm->ring.ll128Offset +
                       (comm->ring.ll128MaxBytes ? (size_t)comm->maxChannels * comm->ring.ll128ChannelBytes : 0);
    // Edge FIFOs only where trees or recursive doubling may run (ranks on
    // several hosts).
    comm->edges.treeMaxBytes = comm->spansHosts ? (size_t)p.treeMaxBytes : 0;
    comm->edges.rdMaxBytes = comm->spansHosts ? (size_t)p.rdMaxBytes : 0;
    comm->edges.slotBytes = (size_t)p.edgeSlotBytes;
    comm->edges.fifoBytes = sizeof(FifoFlags) + (size_t)comm->ring.nslots * comm->edges.slotBytes;
    const bool edges = comm->edges.treeMaxBytes || comm->edges.rdMaxBytes;
    size_t regionBytes = comm->edges.offset + (edges ? kEdgeSlots * comm->edges.fifoBytes : 0);
    // The zero-copy allreduce's flag words (zeroed with the region: calls count from 1).
    comm->zc.offset = (regionBytes + 255) / 256 * 256;
    if (comm->nranks <= kMaxZeroCopyRanks) regionBytes = comm->zc.offset + zeroCopyFlagBytes(comm->nranks);
    // The staged two-shot's scratch (inside one host only; whether every
    // pair is mapped is known later: unused then).
    if (comm->nranks <= kMaxZeroCopyRanks && comm->nranks > 1 && !comm->spansHosts && p.zeroCopyStagedBytes > 0) {
        comm->zc.stagedBytes = ((size_t)p.zeroCopyStagedBytes + 255) / 256 * 256;
        comm->zc.stagedOffset = (regionBytes + 255) / 256 * 256;
        regionBytes = comm->zc.stagedOffset + 2 * comm->zc.stagedBytes;
    }
    return p2pAllocRegion(regionBytes, &comm->region, &mine->endpoint);
}

// The arrival board of this rank's OS instance (arrival.h). Only a
// diagnostic: a board that cannot be made leaves the communicator without
// one (said at WARN), never fails it. The two agreements order create before
// open before unlink on every host at once.
// The host whose board holds rank q: its OS instance, or with
// LOOM_ARRIVAL_PER_HOST the host it counts as (arrival_query.h's tests).
// Only where every rank set it (an agreed tunable): the boards are made
// before the agreement check fails a communicator whose ranks differ.
bool boardsPerHost(const std::vector<PeerInfo> &peers) {
    static const int k = loomAgreedIndex("LOOM_ARRIVAL_PER_HOST");
    for (const PeerInfo &p : peers)
        if (k < 0 || !p.agreed[k]) return false;
    return true;
}
uint64_t boardHost(const PeerInfo &p, bool perHost) { return perHost ? p.hostHash : p.osHost; }

loomResult_t makeArrivalBoard(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers) {
    const int me = comm->rank, n = comm->nranks;
    const bool perHost = boardsPerHost(peers);
    std::vector<int> locals;
    for (int q = 0; q < n; ++q)
        if (boardHost(peers[q], perHost) == boardHost(peers[me], perHost)) locals.push_back(q);
    const bool leader = locals[0] == me;
    char name[64];
    snprintf(name, sizeof(name), "/loom-arrive-%d-%016llx", peers[locals[0]].pid, (unsigned long long)comm->commTag);
    ArrivalBoard *board = nullptr;
    // Every rank on this host: room for the zero-copy allreduce's per-call
    // buffer descriptions (core/ipc/desc_board.h) after the slots.
    const size_t extra = (int)locals.size() == n && n <= kMaxZeroCopyRanks ? zeroCopyBoardBytes(n) : 0;
    loomResult_t made = leader ? ArrivalBoard::create(name, (int)locals.size(), extra, &board) : loomSuccess;
    loomResult_t r = agreeAll(bs, me, n, loomSuccess, "arrival board creation");
    if (r != loomSuccess) {
        delete board;
        return r;
    }
    if (!leader) made = ArrivalBoard::open(name, (int)locals.size(), extra, &board);
    r = agreeAll(bs, me, n, loomSuccess, "arrival board mapping");
    if (board) board->unlink();
    if (r != loomSuccess) {
        delete board;
        return r;
    }
    if (made != loomSuccess) {
        LOOM_WARN(kInit, "rank %d: no arrival board (%s): a timeout will not name the ranks that did not arrive",
                  me, loomGetLastError());
        return loomSuccess;
    }
    for (size_t k = 0; k < locals.size(); ++k)
        if (locals[k] == me) comm->ras.arrivalSlot = (int)k;
    board->publish(comm->ras.arrivalSlot, me, comm->cudaDev, comm->busId);
    comm->ras.arrivals = board;
    return loomSuccess;
}

// The board, and where ranks span hosts (agreed), every rank's contact for
// questions about its host's board (arrival_query.h): the host's ranks
// serve it when the board leaves some rank out.
loomResult_t setupArrivals(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers) {
    loomResult_t r = makeArrivalBoard(comm, bs, peers);
    if (r != loomSuccess || !comm->spansHosts) return r;
    const int n = comm->nranks;
    ArrivalContact mine;
    memset(&mine, 0, sizeof(mine));
    if (comm->ras.arrivals && comm->ras.arrivals->slots() < n) arrivalServe(comm->commTag, comm->ras.arrivals, &mine);
    // Loopback (no other interface) reaches no other OS instance: not handed
    // to ranks there, whose own loopback would get the secret.
    bool otherOs = false;
    for (int q = 0; q < n; ++q) otherOs |= peers[q].osHost != peers[comm->rank].osHost;
    if (otherOs && mine.ip == htonl(INADDR_LOOPBACK)) memset(&mine, 0, sizeof(mine));
    ArrivalPeers *ap = new ArrivalPeers;
    ap->contacts.resize(n);
    if (bs->allgather(bs->ctx, &mine, ap->contacts.data(), sizeof(mine)) != 0) {
        delete ap;
        return fail(loomRemoteError, "rank %d: bootstrap allgather of arrival contacts failed", comm->rank);
    }
    const bool perHost = boardsPerHost(peers);
    for (int q = 0; q < n; ++q) ap->boardOf.push_back(boardHost(peers[q], perHost));
    comm->ras.arrivalPeers = ap;
    return loomSuccess;
}

// Every phase that can fail on one rank is followed by agreeAll, so all ranks
// leave together instead of some waiting in the next exchange.
loomResult_t initComm(loomComm *comm, const loomBootstrap_t *bs) {
    const int rank = comm->rank, n = comm->nranks;
    RankIdentity me{};
    me.hostHash = rankHostHash(comm->cudaDev);
    me.mps = mpsEnabled(comm->cudaDev) ? 1 : 0;
    comm->mpsClient = me.mps != 0;
    loomResult_t r = agreeAll(bs, rank, n, setupGpu(comm, &me), "GPU setup");
    if (r == loomSuccess) r = planFromTopology(comm, bs, me);
    if (r != loomSuccess) return r;

    PeerInfo mine{};
    mine.hostHash = me.hostHash;
    mine.osHost = hostHash();
    mine.pid = (int)getpid();
    mine.cudaDev = comm->cudaDev;
    loomAgreedWords(mine.agreed); // checked alike on every rank (connect.cc: gatherReach)
    mine.channels = (uint64_t)comm->maxChannels;
    comm->algoMask = params().algoMask; // agreed through LOOM_ALGO and LOOM_PROTO (gatherReach)
    r = agreeAll(bs, rank, n, allocateFifos(comm, &mine), "FIFO allocation");
    if (r != loomSuccess) return r;
    std::vector<PeerInfo> peers(n);
    if (bs->allgather(bs->ctx, &mine, peers.data(), sizeof(PeerInfo)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of peer info failed", rank);
    if (n > 1) {
        r = setupArrivals(comm, bs, peers);
        if (r != loomSuccess) return r;
    }
    if (n > 1) {
        Reach reach;
        r = gatherReach(comm, bs, peers, &reach);
        if (r == loomSuccess) r = connectRing(comm, bs, peers, reach);
        if (r == loomSuccess) r = connectEdges(comm, bs, peers, reach);
        if (r != loomSuccess) return r;
        // What the all-peer connections need later (core/connect/peer_conns.h).
        PeerConns *pc = new PeerConns;
        comm->peers = pc;
        pc->bootstrap = *bs;
        for (int q = 0; q < n; ++q) {
            pc->hostOf.push_back(peers[q].hostHash);
            pc->p2pWith.push_back(reach.p2p(rank, q));
        }
        // Zero-copy allreduce: from agreed facts only (every pair mapped, one host).
        comm->zc.ready = comm->ll.allPeersMapped && !comm->spansHosts && n <= kMaxZeroCopyRanks &&
                              bs->pairwise && params().zeroCopyMaxBytes > 0;
        if (comm->zc.ready) {
            comm->zc.state = new ZeroCopyState;
            // Its descriptions through the host's board where every rank has
            // one (agreed), else through the PML.
            const uint8_t mineOk =
                params().zeroCopyBoard && comm->ras.arrivals && comm->ras.arrivals->extra() && comm->ras.arrivalSlot == rank;
            std::vector<uint8_t> ok((size_t)n);
            if (bs->allgather(bs->ctx, &mineOk, ok.data(), 1) != 0)
                return fail(loomRemoteError, "rank %d: bootstrap allgather of the descriptor board failed", rank);
            if (std::count(ok.begin(), ok.end(), 1) == n)
                comm->zc.state->board.reset(
                    new DescBoard(comm->ras.arrivals->extra(), n, rank, sizeof(ZeroCopyRecord)));
        }
    }
    r = agreeAll(bs, rank, n, buildRingTables(comm), "ring connection tables");
    if (r != loomSuccess) return r;
    LOOM_INFO(kInit, "rank %d/%d GPU %d (%s): %s; %d channels x %d slots x %zu KiB (LL ring up to %zu KiB: %zu KiB "
              "slots); one-shot LL up to %zu KiB: %s; GPU memory %.1f MiB", rank, n, comm->cudaDev, comm->busId,
              describeRings(comm).c_str(), comm->maxChannels, comm->ring.nslots, comm->ring.slotBytes >> 10,
              comm->ring.llMaxBytes >> 10, comm->ring.llSlotBytes >> 10, comm->ll.maxBytes >> 10,
              comm->ll.allPeersMapped ? "yes" : "no", comm->region.bytes / 1048576.0);
    return loomSuccess;
}

void releaseComm(loomComm *comm) {
    int current = -1;
    cudaGetDevice(&current);
    if (comm->cudaDev >= 0) cudaSetDevice(comm->cudaDev);
    residentSettle(comm); // a pending call first: loom's stream may wait for it
    if (comm->stream) cudaStreamSynchronize(comm->stream);
    residentRelease(comm); // before the slots its calls write go
    watchStop(comm);       // its kernels are done: nothing more to watch
    // One deadline for the sends of all links (a dead peer takes none).
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (RingLink &ring : comm->ring.links) {
        netClose(&ring.netSend, end);
        netClose(&ring.netRecv, end);
    }
    for (NetLinks &l : comm->edges.net) netClose(&l, end);
    releasePeers(comm, end);
    if (comm->zc.state) comm->zc.state->profile.report(comm->rank, comm->cudaDev);
    delete comm->zc.state; // its mappings close (the stream is idle)
    for (char *m : comm->peerBase)
        if (m) p2pClose(m);
    for (RingLink &ring : comm->ring.links) {
        shmClose(&ring.shmSend);
        shmClose(&ring.shmRecv);
        cudaFree(ring.orderDev);
        cudaFree(ring.posOfDev);
    }
    p2pFreeRegion(&comm->region);
    for (RingChannel *t : comm->ring.chansDev) cudaFree(t);
    cudaFree(comm->stage.scratch);
    if (comm->stage.bounce) cudaFreeHost(comm->stage.bounce);
    if (comm->stage.stream) { // staged calls were finished (the component drains its requests first)
        for (void *p : comm->stage.parked) cudaFreeAsync(p, comm->stage.stream); // loom's stream is idle (above)
        cudaStreamSynchronize(comm->stage.stream);
        cudaStreamDestroy(comm->stage.stream);
    }
    if (comm->stage.pool) cudaMemPoolDestroy(comm->stage.pool); // its memory goes once every buffer is back
    cudaFree(comm->blockTablesDev);
    delete comm->uploads; // under the communicator's device: its events and pinned slots
    cudaFree(comm->stage.vInput);
    for (void *p : comm->stage.packed) cudaFree(p);
    cudaFree(comm->stage.dtTable);
    cudaFree(comm->edges.connsDev);
    cudaFree(comm->edges.acc);
    if (comm->blockTablesRead) cudaEventDestroy(comm->blockTablesRead);
    if (comm->order.legacyMark) cudaEventDestroy(comm->order.legacyMark);
    for (const loom::CallMarks::Mark &m : comm->order.marks.pending) cudaEventDestroy(m.event);
    for (cudaEvent_t e : comm->order.marks.spare) cudaEventDestroy(e);
    for (void *p : comm->retiredBuffers) cudaFree(p);
    if (comm->stream) cudaStreamDestroy(comm->stream);
    if (comm->ras.abortFlag) cudaFreeHost((void *)comm->ras.abortFlag);
    if (comm->ras.watch) cudaFreeHost((void *)comm->ras.watch);
    if (comm->ras.arrivals) arrivalUnserve(comm->ras.arrivals); // before the board goes
    delete comm->ras.arrivals;
    delete comm->ras.arrivalPeers;
    if (current >= 0) cudaSetDevice(current);
    delete comm;
}

} // namespace

extern "C" loomResult_t loomGetUniqueId(loomUniqueId *id) {
    if (!id) return fail(loomInvalidArgument, "loomGetUniqueId: id is NULL");
    memset(id, 0, sizeof(*id));
    std::random_device rd;
    uint64_t words[3] = {hostHash(), ((uint64_t)rd() << 32) | rd(), (uint64_t)getpid()};
    memcpy(id->internal, words, sizeof(words));
    return loomSuccess;
}

extern "C" loomResult_t loomCommInitRank(loomComm_t *out, int nranks, loomUniqueId id, int rank, int cudaDev,
                                         const loomBootstrap_t *bootstrap) {
    // Peers meet through the bootstrap; the id names the communicator's
    // shared objects (the same on every rank, random per communicator).
    if (!out || !bootstrap || !bootstrap->allgather) return fail(loomInvalidArgument, "loomCommInitRank: NULL argument");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(loomInvalidArgument, "loomCommInitRank: rank %d of %d", rank, nranks);
    *out = nullptr;
    loomComm *comm = new (std::nothrow) loomComm;
    if (!comm) return fail(loomSystemError, "loomCommInitRank: out of memory");
    comm->rank = rank;
    comm->nranks = nranks;
    comm->commTag = fnv1a(std::string(id.internal, sizeof(id.internal)));
    int current = -1;
    cudaGetDevice(&current);
    comm->cudaDev = cudaDev >= 0 ? cudaDev : current < 0 ? 0 : current;
    loomResult_t r = initComm(comm, bootstrap);
    if (current >= 0) cudaSetDevice(current);
    if (r != loomSuccess) {
        releaseComm(comm);
        return r;
    }
    if (nranks > 1) watchStart(comm);
    *out = comm;
    return loomSuccess;
}

extern "C" loomResult_t loomCommDestroy(loomComm_t comm) {
    if (comm) releaseComm(comm);
    return loomSuccess;
}

extern "C" loomResult_t loomCommCount(loomComm_t comm, int *count) {
    if (!comm || !count) return fail(loomInvalidArgument, "loomCommCount: NULL argument");
    *count = comm->nranks;
    return loomSuccess;
}

extern "C" loomResult_t loomCommUserRank(loomComm_t comm, int *rank) {
    if (!comm || !rank) return fail(loomInvalidArgument, "loomCommUserRank: NULL argument");
    *rank = comm->rank;
    return loomSuccess;
}

extern "C" loomResult_t loomCommDevice(loomComm_t comm, int *device) {
    if (!comm || !device) return fail(loomInvalidArgument, "loomCommDevice: NULL argument");
    *device = comm->cudaDev;
    return loomSuccess;
}

extern "C" loomResult_t loomCommMemoryBytes(loomComm_t comm, size_t *bytes) {
    if (!comm || !bytes) return fail(loomInvalidArgument, "loomCommMemoryBytes: NULL argument");
    *bytes = comm->region.bytes + comm->grownBytes; // grownBytes includes the scratch
    return loomSuccess;
}

loomResult_t loom::growDeviceBuffer(loomComm *comm, void **buf, size_t *have, size_t need, const char *what) {
    if (need <= *have) return loomSuccess;
    // cudaFree waits for the whole device, kernels of other communicators
    // waiting for peers included, and a peer's kernel may wait for what this
    // thread launches next (two communicators in flight at once): the old
    // buffer is retired, freed with the communicator. Growing twofold keeps
    // the retired ones smaller than the live one together; where that much
    // is not to be had, just what is needed.
    const size_t mib = size_t(1) << 20;
    const size_t least = (need + mib - 1) / mib * mib;
    size_t want = std::max(least, (2 * *have + mib - 1) / mib * mib);
    int current = -1;
    cudaGetDevice(&current);
    cudaSetDevice(comm->cudaDev);
    void *fresh = nullptr;
    cudaError_t e = cudaMalloc(&fresh, want);
    if (e != cudaSuccess && want > least) {
        cudaGetLastError(); // not sticky
        want = least;
        e = cudaMalloc(&fresh, want);
    }
    if (current >= 0) cudaSetDevice(current);
    if (e != cudaSuccess) { // the old buffer stays: a later, smaller call may still use it
        cudaGetLastError(); // not sticky: a caller that goes on without the buffer must not see it at its launch
        return fail(loomUnhandledCudaError, "rank %d GPU %d: %s of %zu bytes: %s", comm->rank, comm->cudaDev, what,
                    want, cudaGetErrorString(e));
    }
    if (*buf) comm->retiredBuffers.push_back(*buf);
    comm->grownBytes += want;
    *buf = fresh;
    *have = want;
    return loomSuccess;
}

extern "C" loomResult_t loomCommScratch(loomComm_t comm, size_t bytes, void **ptr) {
    if (!comm || !ptr) return fail(loomInvalidArgument, "loomCommScratch: NULL argument");
    loomResult_t r = growDeviceBuffer(comm, &comm->stage.scratch, &comm->stage.scratchBytes, bytes, "scratch buffer");
    if (r != loomSuccess) return r;
    *ptr = comm->stage.scratch;
    return loomSuccess;
}



extern "C" loomResult_t loomCommPeersConnected(loomComm_t comm, int *connected) {
    if (!comm || !connected) return fail(loomInvalidArgument, "loomCommPeersConnected: NULL argument");
    *connected = comm->peers && comm->peers->ready;
    return loomSuccess;
}

extern "C" loomResult_t loomCommConnectPeers(loomComm_t comm) {
    if (!comm) return fail(loomInvalidArgument, "loomCommConnectPeers: comm is NULL");
    if (!comm->peers) return fail(loomNotSupported, "loomCommConnectPeers: no all-peer connections on this communicator");
    if (comm->peers->ready) return loomSuccess;
    int current = -1;
    cudaGetDevice(&current);
    if (current != comm->cudaDev) cudaSetDevice(comm->cudaDev);
    const loomResult_t r = connectPeers(comm);
    if (current >= 0 && current != comm->cudaDev) cudaSetDevice(current);
    return r;
}

extern "C" loomResult_t loomCommWait(loomComm_t comm) {
    if (!comm) return fail(loomInvalidArgument, "loomCommWait: comm is NULL");
    // A pending resident call first: loom's stream may wait for it.
    if (loomResult_t r = loom::residentSettle(comm)) return r;
    // Nothing enqueued since a wait saw the stream drain (calls the resident
    // kernel ran finished inside them): no synchronize to pay.
    if (comm->order.idle) return loom::residentCallsFinished(comm, cudaSuccess, true);
    cudaError_t err;
    if (comm->ring.useNet || comm->edges.useNet) {
        // The proxy threads move this collective's data: a rank bound to one
        // core (mpirun's default binding) must not spin them out of it.
        while ((err = cudaStreamQuery(comm->stream)) == cudaErrorNotReady) sched_yield();
    } else {
        err = cudaStreamSynchronize(comm->stream);
    }
    comm->order.idle = err == cudaSuccess;
    return loom::residentCallsFinished(comm, err, true);
}


