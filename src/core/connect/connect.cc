#include "core/connect/connect.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/bootstrap.h"
#include "base/debug.h"
#include "core/comm/params.h"
#include "base/setup_write.h"

namespace loom {

namespace {

// Offsets of the protocol areas inside a GPU region and inside a shm segment.
void regionAreas(const loomComm *comm, char *base, char *areas[kNumRingProtos]) {
    areas[kProtoSimple] = base;
    areas[kProtoLL] = comm->ring.llMaxBytes ? base + comm->ring.llOffset : nullptr;
    areas[kProtoLL128] = comm->ring.ll128MaxBytes ? base + comm->ring.ll128Offset : nullptr;
}
size_t shmBytes(const loomComm *comm) {
    return (size_t)comm->maxChannels * comm->ring.channelBytes +
           (comm->ring.llMaxBytes ? (size_t)comm->maxChannels * comm->ring.llChannelBytes : 0);
}
void shmAreas(const loomComm *comm, void *base, char *areas[kNumRingProtos]) {
    areas[kProtoSimple] = static_cast<char *>(base);
    areas[kProtoLL] = comm->ring.llMaxBytes ? static_cast<char *>(base) + (size_t)comm->maxChannels * comm->ring.channelBytes
                                           : nullptr;
    areas[kProtoLL128] = nullptr; // host memory: never LL128
}

// What rank q holds for agreed tunable i, as its error shows it.
std::string agreedText(const PeerInfo &p, int i) {
    const loomParamDef *d = loomAgreedAt(i);
    if (d->type == LOOM_PARAM_INT) return std::to_string((long long)p.agreed[i]);
    return p.agreed[i] ? "set" : "unset";
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
    for (int q = 0; q < n; ++q) {
        for (int i = 0; i < loomAgreedCount(); ++i) {
            if (peers[q].agreed[i] == peers[0].agreed[i]) continue;
            const loomParamDef *d = loomAgreedAt(i);
            const std::string a = agreedText(peers[q], i), b = agreedText(peers[0], i);
            return fail(loomInvalidUsage, "rank %d: ranks %d and 0 differ in %s (%s): set it alike on every rank", me,
                        q, d->env, a == b ? "values differ" : (a + " vs " + b).c_str());
        }
        if (peers[q].channels != peers[0].channels)
            return fail(loomInvalidUsage, "rank %d: ranks %d and 0 differ in ring channels (%llu vs %llu: "
                        "LOOM_MAX_NCHANNELS, LOOM_CHANNEL_BW or their topologies): set them alike on every rank", me,
                        q, (unsigned long long)peers[q].channels, (unsigned long long)peers[0].channels);
    }
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
    const int n = comm->nranks, me = comm->rank, nr = (int)comm->ring.links.size();
    auto p2p = [&](int a, int b) { return reach.p2p(a, b); };
    // Across hosts: the net transport. Decided from gathered data, so every
    // rank knows whether any rank goes through the net set-up below.
    auto sameHost = [&](int a, int b) { return peers[a].hostHash == peers[b].hostHash; };
    for (RingLink &ring : comm->ring.links) {
        ring.recvNet = !sameHost(ring.prev, me);
        ring.sendNet = !sameHost(me, ring.next);
        ring.recvShm = !ring.recvNet && !p2p(ring.prev, me);
        ring.sendShm = !ring.sendNet && !p2p(me, ring.next);
        comm->ring.useNet |= ring.usesNet();
    }
    if (comm->spansHosts) { // (the LL ring is off: allocateFifos)
        // Per ring a receive link (its handles at the ring's place in the
        // table) and a send link (to the same place in the next rank's), each
        // on the NIC the topology gave this ring where it enters / leaves the host.
        std::vector<NetSetup> setups;
        std::vector<NetLinks *> links;
        for (RingLink &ring : comm->ring.links) {
            NetSetup recv{false, ring.recvNet, -1, ring.prev, ring.nchannels, comm->ring.nslots, comm->ring.slotBytes,
                          ring.handleBase, ring.handleBase, ring.handleBase, ring.recvNic.c_str()};
            NetSetup send = recv;
            send.send = ring.sendNet;
            send.recv = false;
            send.sendPeer = ring.next;
            send.recvPeer = -1;
            send.nicName = ring.sendNic.c_str();
            setups.push_back(recv);
            links.push_back(&ring.netRecv);
            setups.push_back(send);
            links.push_back(&ring.netSend);
        }
        const NetCommon common{comm->nic.c_str(), me, n, setupWaitSeconds(), comm->maxChannels};
        loomResult_t r = netConnect(common, setups, bs, links);
        if (r != loomSuccess) return r;
    }

    // Receivers whose previous rank cannot reach them publish a shm FIFO (per ring).
    std::vector<ShmEndpoint> myShm((size_t)nr);
    loomResult_t made = loomSuccess;
    for (int k = 0; k < nr && made == loomSuccess; ++k)
        if (comm->ring.links[k].recvShm) made = shmCreate(shmBytes(comm), "fifo", &comm->ring.links[k].shmRecv, &myShm[k]);
    made = agreeAll(bs, me, n, made, "shm FIFO creation");
    if (made != loomSuccess) return made;
    std::vector<ShmEndpoint> shm((size_t)n * nr);
    if (bs->allgather(bs->ctx, myShm.data(), shm.data(), sizeof(ShmEndpoint) * (size_t)nr) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of shm FIFOs failed", me);

    bool all = n <= kMaxOneShotRanks && comm->ll.maxBytes > 0;
    for (int a = 0; all && a < n; ++a)
        for (int b = 0; all && b < n; ++b) all = p2p(a, b);
    comm->peerBase.assign(n, nullptr);
    loomResult_t r = loomSuccess;
    for (int q = 0; q < n && r == loomSuccess; ++q) {
        bool need = all && q != me;
        for (const RingLink &ring : comm->ring.links)
            need |= q != me && ((q == ring.next && !ring.sendShm && !ring.sendNet) ||
                                (q == ring.prev && !ring.recvShm && !ring.recvNet));
        if (need) r = mapPeerRegion(comm, peers, q);
    }
    for (int k = 0; k < nr && r == loomSuccess; ++k)
        if (comm->ring.links[k].sendShm) r = shmOpen(shm[(size_t)comm->ring.links[k].next * nr + k], &comm->ring.links[k].shmSend);
    // Everyone has mapped what it needs (or failed): the names can go.
    r = agreeAll(bs, me, n, r, "mapping peers");
    for (RingLink &ring : comm->ring.links) shmUnlink(&ring.shmRecv);
    if (r != loomSuccess) return r;
    comm->ll.allPeersMapped = all;

    char *myRegion = static_cast<char *>(comm->region.base);
    for (RingLink &ring : comm->ring.links) {
        // Net FIFOs have the Simple layout only (LL is off across hosts).
        if (ring.recvNet) {
            ring.recvArea[kProtoSimple] = ring.prevCreditArea[kProtoSimple] = ring.netRecv.recvArea.device;
        } else if (ring.recvShm) {
            shmAreas(comm, ring.shmRecv.device, ring.recvArea);
            shmAreas(comm, ring.shmRecv.device, ring.prevCreditArea);
        } else {
            regionAreas(comm, myRegion, ring.recvArea);
            regionAreas(comm, comm->peerBase[ring.prev], ring.prevCreditArea);
        }
        if (ring.sendNet) {
            ring.sendArea[kProtoSimple] = ring.creditArea[kProtoSimple] = ring.netSend.sendArea.device;
        } else if (ring.sendShm) {
            shmAreas(comm, ring.shmSend.device, ring.sendArea);
            shmAreas(comm, ring.shmSend.device, ring.creditArea);
        } else {
            regionAreas(comm, comm->peerBase[ring.next], ring.sendArea);
            regionAreas(comm, myRegion, ring.creditArea);
        }
        for (int p = 0; p < kNumRingProtos; ++p) {
            ring.recvSlotBase[p] = ring.recvArea[p];
            ring.sendSlotBase[p] = ring.sendArea[p];
        }
        if (ring.recvNet) ring.recvSlotBase[kProtoSimple] = netRecvSlotBase(ring.netRecv);
        if (ring.sendNet) ring.sendSlotBase[kProtoSimple] = netSendSlotBase(ring.netSend);
    }
    // LL128 where every link of every ring is NVLink p2p (gathered reach and
    // the same rings everywhere: every rank decides alike).
    comm->ring.ll128Ready = comm->ring.ll128MaxBytes > 0 && n > 1;
    for (const RingLink &ring : comm->ring.links)
        for (int i = 0; i < n && comm->ring.ll128Ready; ++i)
            comm->ring.ll128Ready = p2p(ring.order[i], ring.order[(i + 1) % n]);
    return loomSuccess;
}

namespace {

// A ring's order and positions in device memory (the kernel reads them per channel).
cudaError_t uploadRingOrder(RingLink *ring) {
    const size_t bytes = sizeof(int) * ring->order.size();
    cudaError_t e = cudaMalloc((void **)&ring->orderDev, bytes);
    if (e == cudaSuccess) e = cudaMalloc((void **)&ring->posOfDev, sizeof(int) * ring->posOf.size());
    if (e == cudaSuccess) e = setupWrite(ring->orderDev, ring->order.data(), bytes);
    if (e == cudaSuccess)
        e = setupWrite(ring->posOfDev, ring->posOf.data(), sizeof(int) * ring->posOf.size());
    return e;
}

} // namespace

loomResult_t buildRingTables(loomComm *comm) {
    const int n = comm->nranks, nr = (int)comm->ring.links.size();
    cudaError_t e = cudaSuccess;
    for (RingLink &ring : comm->ring.links)
        if (e == cudaSuccess) e = uploadRingOrder(&ring);
    for (int p = 0; p < kNumRingProtos && e == cudaSuccess; ++p) {
        const size_t chBytes = ringChannelBytes(comm, p);
        std::vector<RingChannel> chans((size_t)comm->maxChannels);
        for (int c = 0; c < comm->maxChannels && n > 1; ++c) {
            const RingLink &ring = comm->ring.links[c % nr];
            if (!ring.recvArea[p] || !ring.sendArea[p]) continue;
            // Channel c's FIFO: index c of a region or shm segment, index c / nr of the ring's net link.
            const size_t recvAt = (size_t)(ring.recvNet ? RingLink::netIndex(c, nr) : c) * chBytes;
            const size_t sendAt = (size_t)(ring.sendNet ? RingLink::netIndex(c, nr) : c) * chBytes;
            auto flags = [](char *area, size_t at) { return reinterpret_cast<FifoFlags *>(area + at); };
            RingChannel &ch = chans[c];
            ch.conn.recv.slots = ring.recvSlotBase[p] + recvAt + sizeof(FifoFlags);
            ch.conn.recv.tail = &flags(ring.recvArea[p], recvAt)->recvTail;
            ch.conn.recv.head = &flags(ring.prevCreditArea[p], recvAt)->sendHead;
            ch.conn.send.slots = ring.sendSlotBase[p] + sendAt + sizeof(FifoFlags);
            ch.conn.send.tail = &flags(ring.sendArea[p], sendAt)->recvTail;
            ch.conn.send.head = &flags(ring.creditArea[p], sendAt)->sendHead;
            ch.conn.send.sizes = ring.sendNet; // the proxy needs each step's size
            ch.pos = ring.pos;
            ch.order = ring.orderDev;
            ch.posOf = ring.posOfDev;
        }
        e = cudaMalloc((void **)&comm->ring.chansDev[p], sizeof(RingChannel) * chans.size());
        if (e == cudaSuccess)
            e = setupWrite(comm->ring.chansDev[p], chans.data(), sizeof(RingChannel) * chans.size());
    }
    if (e != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d: ring connection tables: %s", comm->rank, comm->cudaDev,
                    cudaGetErrorString(e));
    return loomSuccess;
}

std::string ringNeighbours(const loomComm *comm) {
    std::string s;
    for (size_t k = 0; k < comm->ring.links.size(); ++k) {
        const RingLink &ring = comm->ring.links[k];
        bool seen = false; // rings with the same neighbours are named once
        for (size_t j = 0; j < k && !seen; ++j)
            seen = comm->ring.links[j].prev == ring.prev && comm->ring.links[j].next == ring.next;
        if (!seen) s += (s.empty() ? "" : "; ") + std::to_string(ring.prev) + ", " + std::to_string(ring.next);
    }
    return s;
}

std::string describeRings(const loomComm *comm) {
    auto kind = [](bool net, bool shm) { return net ? "net" : shm ? "shm" : "p2p"; };
    std::string s;
    for (size_t k = 0; k < comm->ring.links.size(); ++k) {
        const RingLink &ring = comm->ring.links[k];
        char one[160];
        snprintf(one, sizeof(one), "%sring %zu: %d -(%s)-> %d -(%s)-> %d%s%s%s%s", k ? "; " : "", k, ring.prev,
                 kind(ring.recvNet, ring.recvShm), comm->rank, kind(ring.sendNet, ring.sendShm), ring.next,
                 ring.recvNet ? " in on " : "", ring.recvNet ? ring.recvNic.c_str() : "",
                 ring.sendNet ? " out on " : "", ring.sendNet ? ring.sendNic.c_str() : "");
        s += one;
    }
    return s;
}

} // namespace loom
