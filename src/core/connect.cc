#include "core/connect.h"

#include <cstdlib>
#include <cstring>

#include "core/bootstrap.h"
#include "core/debug.h"
#include "core/params.h"

namespace loom {

namespace {

// Offsets of the protocol areas inside a GPU region and inside a shm segment.
void regionAreas(const loomComm *comm, char *base, char *areas[2]) {
    areas[kProtoSimple] = base;
    areas[kProtoLL] = base + comm->llRingOffset;
}
size_t shmBytes(const loomComm *comm) {
    return (size_t)comm->maxChannels * comm->channelBytes +
           (comm->llRingMaxBytes ? (size_t)comm->maxChannels * comm->llRingChannelBytes : 0);
}
void shmAreas(const loomComm *comm, void *base, char *areas[2]) {
    areas[kProtoSimple] = static_cast<char *>(base);
    areas[kProtoLL] = static_cast<char *>(base) + (size_t)comm->maxChannels * comm->channelBytes;
}

} // namespace

loomResult_t mapPeerRegion(loomComm *comm, const std::vector<PeerInfo> &peers, int q) {
    if (comm->peerBase[q]) return loomSuccess;
    void *p = nullptr;
    loomResult_t r = p2pOpen(peers[q].endpoint, &p);
    comm->peerBase[q] = static_cast<char *>(p);
    return r;
}

loomResult_t gatherReach(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers, Reach *reach) {
    const int n = comm->nranks, me = comm->rank;
    // Decided from gathered data: every rank leaves here, or none.
    for (int q = 0; q < n; ++q)
        if (memcmp(peers[q].fifoGeometry, peers[0].fifoGeometry, 5 * sizeof(uint64_t)) != 0)
            return fail(loomInvalidUsage, "rank %d: ranks %d and 0 differ in channels/slots/slot size/LL thresholds "
                        "(%llu/%llu/%llu/%llu/%llu vs %llu/%llu/%llu/%llu/%llu): set LOOM_* tunables alike on every rank",
                        me, q, (unsigned long long)peers[q].fifoGeometry[0], (unsigned long long)peers[q].fifoGeometry[1],
                        (unsigned long long)peers[q].fifoGeometry[2], (unsigned long long)peers[q].fifoGeometry[3],
                        (unsigned long long)peers[q].fifoGeometry[4], (unsigned long long)peers[0].fifoGeometry[0],
                        (unsigned long long)peers[0].fifoGeometry[1], (unsigned long long)peers[0].fifoGeometry[2],
                        (unsigned long long)peers[0].fifoGeometry[3], (unsigned long long)peers[0].fifoGeometry[4]);
    for (int q = 0; q < n; ++q)
        if (memcmp(peers[q].fifoGeometry + 5, peers[0].fifoGeometry + 5, 3 * sizeof(uint64_t)) != 0)
            return fail(loomInvalidUsage, "rank %d: ranks %d and 0 differ in LOOM_TREE_MAX_BYTES/LOOM_EDGE_SLOT_BYTES/"
                        "LOOM_RD_MAX_BYTES (%llu/%llu/%llu vs %llu/%llu/%llu): set them alike on every rank", me, q,
                        (unsigned long long)peers[q].fifoGeometry[5], (unsigned long long)peers[q].fifoGeometry[6],
                        (unsigned long long)peers[q].fifoGeometry[7], (unsigned long long)peers[0].fifoGeometry[5],
                        (unsigned long long)peers[0].fifoGeometry[6], (unsigned long long)peers[0].fifoGeometry[7]);
    for (int q = 0; q < n; ++q)
        if (memcmp(peers[q].fifoGeometry + 8, peers[0].fifoGeometry + 8, 3 * sizeof(uint64_t)) != 0)
            return fail(loomInvalidUsage, "rank %d: ranks %d and 0 differ in LOOM_ONESHOT_MAX_BYTES/LOOM_DOUBLING/"
                        "LOOM_ALGO (%lld/%lld/0x%llx vs %lld/%lld/0x%llx): set them alike on every rank", me, q,
                        (long long)peers[q].fifoGeometry[8], (long long)peers[q].fifoGeometry[9],
                        (unsigned long long)peers[q].fifoGeometry[10], (long long)peers[0].fifoGeometry[8],
                        (long long)peers[0].fifoGeometry[9], (unsigned long long)peers[0].fifoGeometry[10]);
    const uint64_t host = peers[me].hostHash;
    const bool p2pOff = paramLong("LOOM_P2P_DISABLE") != 0;
    // Whom can my GPU reach? Gathered, so both ends of a pair see both answers.
    std::vector<uint8_t> mine(n, 0);
    reach->n = n;
    reach->can.assign((size_t)n * n, 0);
    for (int q = 0; q < n; ++q)
        mine[q] = q == me || (!p2pOff && peers[q].hostHash == host && p2pCanConnect(comm->cudaDev, peers[q].endpoint));
    if (bs->allgather(bs->ctx, mine.data(), reach->can.data(), (size_t)n) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of reachability failed", me);
    return loomSuccess;
}

loomResult_t connectRing(loomComm *comm, const loomBootstrap_t *bs, const std::vector<PeerInfo> &peers,
                         const Reach &reach) {
    const int n = comm->nranks, me = comm->rank;
    auto p2p = [&](int a, int b) { return reach.p2p(a, b); };
    // Across hosts: the net transport. Decided from gathered data, so every
    // rank knows whether any rank goes through the net set-up below.
    auto sameHost = [&](int a, int b) { return peers[a].hostHash == peers[b].hostHash; };
    comm->recvNet = !sameHost(comm->prev, me);
    comm->sendNet = !sameHost(me, comm->next);
    comm->recvShm = !comm->recvNet && !p2p(comm->prev, me);
    comm->sendShm = !comm->sendNet && !p2p(me, comm->next);
    if (comm->spansHosts) { // (the LL ring is off: allocateFifos)
        const NetCommon common{comm->nic.c_str(), me, n, params().timeoutSeconds, comm->maxChannels};
        const NetSetup ns{comm->sendNet, comm->recvNet, comm->next, comm->prev, comm->maxChannels, comm->nslots,
                          comm->slotBytes, 0, 0, 0};
        loomResult_t r = netConnect(common, {ns}, bs, {&comm->net});
        if (r != loomSuccess) return r;
    }

    // Receivers whose previous rank cannot reach them publish a shm FIFO.
    ShmEndpoint myShm{};
    loomResult_t made = comm->recvShm ? shmCreate(shmBytes(comm), "fifo", &comm->shmRecv, &myShm) : loomSuccess;
    made = agreeAll(bs, me, n, made, "shm FIFO creation");
    if (made != loomSuccess) return made;
    std::vector<ShmEndpoint> shm(n);
    if (bs->allgather(bs->ctx, &myShm, shm.data(), sizeof(myShm)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of shm FIFOs failed", me);

    bool all = n <= kMaxOneShotRanks && comm->llMaxBytes > 0;
    for (int a = 0; all && a < n; ++a)
        for (int b = 0; all && b < n; ++b) all = p2p(a, b);
    comm->peerBase.assign(n, nullptr);
    loomResult_t r = loomSuccess;
    for (int q = 0; q < n && r == loomSuccess; ++q)
        if (q != me && (all || (q == comm->next && !comm->sendShm) || (q == comm->prev && !comm->recvShm)))
            r = mapPeerRegion(comm, peers, q);
    if (r == loomSuccess && comm->sendShm) r = shmOpen(shm[comm->next], &comm->shmSend);
    // Everyone has mapped what it needs (or failed): the names can go.
    r = agreeAll(bs, me, n, r, "mapping peers");
    shmUnlink(&comm->shmRecv);
    if (r != loomSuccess) return r;
    comm->allPeersMapped = all;

    char *myRegion = static_cast<char *>(comm->region.base);
    // Net FIFOs have the Simple layout only (LL is off across hosts).
    if (comm->recvNet) {
        comm->recvArea[kProtoSimple] = comm->prevCreditArea[kProtoSimple] = comm->net.recvArea.device;
    } else if (comm->recvShm) {
        shmAreas(comm, comm->shmRecv.device, comm->recvArea);
        shmAreas(comm, comm->shmRecv.device, comm->prevCreditArea);
    } else {
        regionAreas(comm, myRegion, comm->recvArea);
        regionAreas(comm, comm->peerBase[comm->prev], comm->prevCreditArea);
    }
    if (comm->sendNet) {
        comm->sendArea[kProtoSimple] = comm->creditArea[kProtoSimple] = comm->net.sendArea.device;
    } else if (comm->sendShm) {
        shmAreas(comm, comm->shmSend.device, comm->sendArea);
        shmAreas(comm, comm->shmSend.device, comm->creditArea);
    } else {
        regionAreas(comm, comm->peerBase[comm->next], comm->sendArea);
        regionAreas(comm, myRegion, comm->creditArea);
    }
    for (int p = 0; p < 2; ++p) {
        comm->recvSlotBase[p] = comm->recvArea[p];
        comm->sendSlotBase[p] = comm->sendArea[p];
    }
    if (comm->recvNet) comm->recvSlotBase[kProtoSimple] = netRecvSlotBase(comm->net);
    if (comm->sendNet) comm->sendSlotBase[kProtoSimple] = netSendSlotBase(comm->net);
    return loomSuccess;
}

loomResult_t buildRingTables(loomComm *comm) {
    const int n = comm->nranks;
    cudaError_t e = cudaMalloc((void **)&comm->ringRanksDev, sizeof(int) * (size_t)n);
    if (e == cudaSuccess)
        e = cudaMemcpy(comm->ringRanksDev, comm->ringOrder.data(), sizeof(int) * (size_t)n, cudaMemcpyHostToDevice);
    for (int p = 0; p < 2 && e == cudaSuccess; ++p) {
        const size_t chBytes = p == kProtoLL ? comm->llRingChannelBytes : comm->channelBytes;
        std::vector<RingChannel> chans((size_t)comm->maxChannels);
        for (int c = 0; c < comm->maxChannels && n > 1 && comm->recvArea[p]; ++c) {
            const size_t at = (size_t)c * chBytes;
            auto flags = [&](char *area) { return reinterpret_cast<FifoFlags *>(area + at); };
            RingChannel &ch = chans[c];
            ch.recv.slots = comm->recvSlotBase[p] + at + sizeof(FifoFlags);
            ch.recv.tail = &flags(comm->recvArea[p])->recvTail;
            ch.recv.head = &flags(comm->prevCreditArea[p])->sendHead;
            ch.send.slots = comm->sendSlotBase[p] + at + sizeof(FifoFlags);
            ch.send.tail = &flags(comm->sendArea[p])->recvTail;
            ch.send.head = &flags(comm->creditArea[p])->sendHead;
            ch.send.sizes = comm->sendNet; // the proxy needs each step's size
        }
        e = cudaMalloc((void **)&comm->ringChansDev[p], sizeof(RingChannel) * chans.size());
        if (e == cudaSuccess)
            e = cudaMemcpy(comm->ringChansDev[p], chans.data(), sizeof(RingChannel) * chans.size(),
                           cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d: ring connection tables: %s", comm->rank, comm->cudaDev,
                    cudaGetErrorString(e));
    return loomSuccess;
}

} // namespace loom
