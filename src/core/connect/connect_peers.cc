/*
 * All-peer connections (core/connect/peer_conns.h): made collectively on first need,
 * each phase agreed by all ranks, as at the communicator's creation.
 */
#include "core/connect/peer_conns.h"

#include <algorithm>
#include <cstring>

#include "base/bootstrap.h"
#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/comm/params.h"
#include "base/setup_write.h"
#include "device/fifo.h"

namespace loom {

namespace {

FifoFlags *flagsAt(char *area) { return reinterpret_cast<FifoFlags *>(area); }

enum PairKind { kPairSelf, kPairP2p, kPairShm, kPairNet };

PairKind kindOf(const PeerConns &p, int me, int q) {
    if (q == me) return kPairSelf;
    if (p.hostOf[me] != p.hostOf[q]) return kPairNet;
    return p.p2pWith[q] ? kPairP2p : kPairShm;
}

// The pair's two FIFOs inside a host: mine (q sends into it; the credit for
// my sends to q lives in its flags) and theirs (I send into it).
ConnPair hostPair(char *mine, char *theirs) {
    ConnPair d{};
    d.recv.slots = mine + sizeof(FifoFlags);
    d.recv.tail = &flagsAt(mine)->recvTail;
    d.send.head = &flagsAt(mine)->sendHead;
    d.send.slots = theirs + sizeof(FifoFlags);
    d.send.tail = &flagsAt(theirs)->recvTail;
    d.recv.head = &flagsAt(theirs)->sendHead;
    return d;
}

// Channel c of a net link: its FIFO at c x channelBytes of the link's areas.
ConnPair netPair(const NetLinks &l, int c) {
    const size_t at = (size_t)c * l.channelBytes;
    ConnPair d{};
    d.recv.slots = netRecvSlotBase(l) + at + sizeof(FifoFlags);
    d.recv.tail = &flagsAt(l.recvArea.device + at)->recvTail;
    d.recv.head = &flagsAt(l.recvArea.device + at)->sendHead; // the proxy takes it as its head
    d.send.slots = netSendSlotBase(l) + at + sizeof(FifoFlags);
    d.send.tail = &flagsAt(l.sendArea.device + at)->recvTail; // the proxy sends what it counts
    d.send.head = &flagsAt(l.sendArea.device + at)->sendHead;
    d.send.sizes = 1;
    return d;
}

struct Published {
    P2pEndpoint p2p;
    ShmEndpoint shm;
};

// Frees what a connection attempt made, keeping what the communicator's
// creation left (bootstrap, hosts, reach) for the next attempt.
void dropConnections(PeerConns &p, std::chrono::steady_clock::time_point netDeadline) {
    p.engines.release(); // after the copies that read peers' buffers
    p.direct.release();  // after the kernels that read peers' buffers
    for (NetLinks &l : p.net) netClose(&l, netDeadline);
    p.net.clear();
    for (char *b : p.peerRegion)
        if (b) p2pClose(b);
    p.peerRegion.clear();
    for (ShmSegment &s : p.shmSend) shmClose(&s);
    p.shmSend.clear();
    shmClose(&p.shmRecv);
    p.shmRecv = ShmSegment{};
    p2pFreeRegion(&p.region);
    cudaFree(p.connsDev);
    cudaFree(p.tablesDev);
    cudaFree(p.inputCopy);
    if (p.tablesRead) cudaEventDestroy(p.tablesRead);
    p.connsDev = nullptr;
    p.tablesDev = p.inputCopy = nullptr;
    p.inputCopyBytes = 0;
    p.tablesRead = nullptr;
    p.conns.clear();
    p.steps.clear();
    p.ready = p.useNet = false;
}

loomResult_t connectAll(loomComm *comm) {
    PeerConns &p = *comm->peers;
    const loomBootstrap_t *bs = &p.bootstrap;
    const int cap = params().maxCtas > 0 && params().maxCtas < params().exchangeChannels ? params().maxCtas
                                                                                         : params().exchangeChannels;
    const int n = comm->nranks, me = comm->rank, C = exchangeChannels(n, cap); // LOOM_MAX_CTAS caps it too
    p.channels = C;
    exchangeFifoShape(n, C, comm->edges.slotBytes, comm->ring.nslots, &p.nslots, &p.slotBytes);
    p.fifoBytes = sizeof(FifoFlags) + (size_t)p.nslots * p.slotBytes;
    p.peerRegion.assign(n, nullptr);
    p.shmSend.assign(n, ShmSegment{});
    p.net = std::vector<NetLinks>(n);
    p.conns.assign((size_t)n * C, ConnPair{});
    p.steps.assign((size_t)n * C, ConnSteps{0, 0});
    bool anyP2p = false, anyShm = false;
    for (int q = 0; q < n; ++q) {
        const PairKind k = kindOf(p, me, q);
        anyP2p |= k == kPairP2p;
        anyShm |= k == kPairShm;
    }

    // Receive FIFOs: a GPU region for the p2p peers, a segment for the shm ones.
    Published mine{};
    const size_t bytes = (size_t)n * C * p.fifoBytes;
    loomResult_t r = loomSuccess;
    if (anyP2p) r = p2pAllocRegion(bytes, &p.region, &mine.p2p);
    if (r == loomSuccess && anyShm) r = shmCreate(bytes, "peers", &p.shmRecv, &mine.shm);
    r = agreeAll(bs, me, n, r, "all-peer receive FIFOs");
    if (r != loomSuccess) return r;
    std::vector<Published> all((size_t)n);
    if (bs->allgather(bs->ctx, &mine, all.data(), sizeof(Published)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of all-peer FIFOs failed", me);
    for (int q = 0; q < n && r == loomSuccess; ++q) {
        const PairKind k = kindOf(p, me, q);
        if (k == kPairP2p) {
            void *base = nullptr;
            r = p2pOpen(all[q].p2p, &base);
            p.peerRegion[q] = static_cast<char *>(base);
        } else if (k == kPairShm) {
            r = shmOpen(all[q].shm, &p.shmSend[q]);
        }
    }
    r = agreeAll(bs, me, n, r, "mapping all peers' FIFOs");
    shmUnlink(&p.shmRecv); // every peer has it mapped (or the set-up failed)
    if (r != loomSuccess) return r;

    // Across hosts: one link per peer (send and receive, C channels), all at
    // once; every rank takes part, also with none.
    std::vector<NetSetup> setups;
    std::vector<NetLinks *> links;
    for (int q = 0; q < n; ++q) {
        if (kindOf(p, me, q) != kPairNet) continue;
        setups.push_back(NetSetup{true, true, q, q, C, p.nslots, p.slotBytes, q * C, me * C, q * C});
        links.push_back(&p.net[q]);
        p.useNet = true;
    }
    const NetCommon common{comm->nic.c_str(), me, n, setupWaitSeconds(), n * C};
    r = netConnect(common, setups, bs, links);
    if (r != loomSuccess) return r;

    for (int q = 0; q < n; ++q)
        for (int c = 0; c < C; ++c) {
            // FIFO of connection k = q x C + c in my area, that of me x C + c in the peer's.
            const size_t mine = (size_t)(q * C + c) * p.fifoBytes, theirs = (size_t)(me * C + c) * p.fifoBytes;
            ConnPair &d = p.conns[(size_t)q * C + c];
            switch (kindOf(p, me, q)) {
            case kPairP2p: d = hostPair(static_cast<char *>(p.region.base) + mine, p.peerRegion[q] + theirs); break;
            case kPairShm:
                d = hostPair(static_cast<char *>(p.shmRecv.device) + mine,
                             static_cast<char *>(p.shmSend[q].device) + theirs);
                break;
            case kPairNet: d = netPair(p.net[q], c); break;
            default: break;
            }
        }
    const size_t conns = (size_t)n * C;
    cudaError_t e = cudaMalloc((void **)&p.connsDev, sizeof(ConnPair) * conns);
    if (e == cudaSuccess) e = setupWrite(p.connsDev, p.conns.data(), sizeof(ConnPair) * conns);
    if (e == cudaSuccess) e = cudaMalloc(&p.tablesDev, 6 * sizeof(size_t) * (size_t)n + sizeof(ConnSteps) * conns);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&p.tablesRead, cudaEventDisableTiming);
    r = e == cudaSuccess ? loomSuccess
                         : fail(loomUnhandledCudaError, "rank %d: all-peer connection table: %s", me,
                                cudaGetErrorString(e));
    r = agreeAll(bs, me, n, r, "all-peer connection tables");
    if (r != loomSuccess) return r;
    p.ready = true;
    LOOM_INFO(kInit, "rank %d: all-peer connections: %d p2p, %d shm, %zu net; %d channels x %d x %zu KiB slots per "
              "peer; %.1f MiB of receive FIFOs", me, (int)std::count_if(p.peerRegion.begin(), p.peerRegion.end(),
                                                         [](char *b) { return b != nullptr; }),
              (int)std::count_if(p.shmSend.begin(), p.shmSend.end(), [](const ShmSegment &s) { return s.host; }),
              setups.size(), C, p.nslots, p.slotBytes >> 10,
              ((anyP2p ? bytes : 0) + (anyShm ? bytes : 0)) / 1048576.0);
    return loomSuccess;
}

} // namespace

loomResult_t connectPeers(loomComm *comm) {
    loomResult_t r = connectAll(comm);
    // A failed attempt leaves nothing behind (all ranks failed it alike: each
    // phase is agreed); a later exchange tries again.
    if (r != loomSuccess) dropConnections(*comm->peers, std::chrono::steady_clock::now() + std::chrono::seconds(30));
    return r;
}

void commitPeerSteps(PeerConns &p, int q, const unsigned long long *sends, const unsigned long long *recvs) {
    const int C = p.channels;
    uint64_t so[kMaxExchangeChannels], ro[kMaxExchangeChannels];
    bool any = false;
    for (int c = 0; c < C; ++c) {
        const size_t k = (size_t)q * C + c;
        p.steps[k].send += sends[k];
        p.steps[k].recv += recvs[k];
        so[c] = sends[k];
        ro[c] = recvs[k];
        any |= sends[k] || recvs[k];
    }
    if (any && p.net[q].send) netPost(&p.net[q], C, so, ro);
}

void releasePeers(loomComm *comm, std::chrono::steady_clock::time_point netDeadline) {
    if (!comm->peers) return;
    dropConnections(*comm->peers, netDeadline);
    delete comm->peers;
    comm->peers = nullptr;
}

} // namespace loom
