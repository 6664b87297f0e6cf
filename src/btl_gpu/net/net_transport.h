/*
 * net transport: ring and tree connections between GPUs on different hosts, over a
 * net plugin (ib: native verbs; ucx) and moved by the process's proxy thread.
 *
 * Each rank with a net connection has, per channel, a send FIFO and a receive
 * FIFO in pinned host memory mapped into its GPU, laid out like a p2p/shm FIFO
 * (FifoFlags, then the slots), so the ring kernels are unchanged: the GPU
 * writes a step into its send FIFO (size in FifoFlags::stepBytes, then the
 * tail) and the proxy sends it; the proxy receives into the receive FIFO,
 * bumps its tail, and the GPU reads it and returns the credit. The GPU stores
 * into host memory itself, over PCIe, so no cudaMemcpy stage sits between
 * kernel and network (what NCCL does without GPUDirect RDMA as well).
 * Where the NIC can reach GPU memory (ib: a dma-buf of it, or nvidia-peermem),
 * the slots are in GPU memory instead and every received step is flushed
 * (plugin iflush) before the GPU is told; LOOM_NET_GDR=0 turns it off.
 *
 * Set-up is collective over the communicator's bootstrap: every rank joins
 * every exchange, also ranks without net connections and ranks that failed.
 */
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "btl_gpu/net/net.h"
#include "loom.h"

namespace loom {

class Proxy;

struct NetHostArea {
    char *host = nullptr;   // the proxy's view
    char *device = nullptr; // the GPU's view of the same memory
    size_t bytes = 0;
};

struct NetLinks {
    const net::NetPlugin *plugin = nullptr;
    int dev = 0;                    // plugin device (the NIC closest to this rank's GPU)
    bool send = false, recv = false; // which directions this link has
    int sendPeer = -1, recvPeer = -1;
    int nchannels = 0;
    size_t channelBytes = 0;        // FifoFlags + slots of one channel
    size_t slotBytes = 0;
    int nslots = 0;
    NetHostArea sendArea, recvArea; // channels x [FifoFlags + slots]
    // GPUDirect RDMA: the slots in GPU memory instead (same layout, the flags
    // stay in host memory for the proxy), where the NIC can register it;
    // null: the host area's slots are used.
    char *sendGpu = nullptr, *recvGpu = nullptr;
    size_t gpuBytes = 0;            // each (a whole number of 2 MiB pages)
    std::vector<void *> listenComms, sendComms, recvComms, sendMr, recvMr;
    std::vector<net::Handle> peerHandles; // the send peer's listen handles (they hold a connect in progress)
    std::vector<int> sendIds, recvIds; // proxy connections per channel
    std::vector<Proxy *> proxies;      // the proxy thread of each channel
};

// One link: this rank's send connection to sendPeer and/or receive
// connection from recvPeer, nchannels plugin connections each (the ring: to
// the next rank, from the previous one; a tree edge: both with one peer).
struct NetSetup {
    bool send, recv;
    int sendPeer, recvPeer;
    int nchannels;
    int nslots;
    size_t slotBytes;
    // The handle exchange: every rank publishes a table of listen handles;
    // this link's receive side publishes its channels' at handleAt, and the
    // send peer published those of the link that receives from this rank at
    // peerHandleAt (both sides compute it from the same graphs).
    int handleAt, peerHandleAt;
    int proxyBase; // channel c runs on proxy thread proxyBase + c (mod the plugin's threads)
    const char *nicName = nullptr; // the NIC for this link ("device:port"); null or "": NetCommon's
};

struct NetCommon {
    const char *nicName; // topology's NIC nearest this rank's GPU ("" if none)
    int rank, nranks;
    double timeoutSeconds;
    int tableHandles;    // handles in each rank's table (same on all ranks)
};

// Collective: plugin choice (agreed by all ranks), FIFOs, listen, handle
// exchange, connect/accept of all links at once, registration, proxy. Every
// rank calls it, also with no links. On failure everything created here is
// released by netClose of each link.
loomResult_t netConnect(const NetCommon &c, const std::vector<NetSetup> &setups, const loomBootstrap_t *bs,
                        const std::vector<NetLinks *> &links);

// Where the kernel finds the slots: a base laid out like the areas
// (channels x [FifoFlags + slots]); the GPU's own memory with GPUDirect RDMA.
inline char *netSendSlotBase(const NetLinks &l) { return l.sendGpu ? l.sendGpu : l.sendArea.device; }
inline char *netRecvSlotBase(const NetLinks &l) { return l.recvGpu ? l.recvGpu : l.recvArea.device; }

// The GPU is about to run a collective that sends sendSteps[c] and receives
// recvSteps[c] slots on channel c of the first `nchannels` (the two differ:
// a broadcast's root only sends, the end of its chain only receives).
void netPost(NetLinks *links, int nchannels, const uint64_t *sendSteps, const uint64_t *recvSteps);

// First error the proxy saw on this process's connections (loomSuccess if none).
loomResult_t netError(const NetLinks *links);

// A kernel of this communicator timed out: the proxy stops waiting for the
// steps it was promised (else it would spin until the communicator is freed).
void netAbandon(NetLinks *links);

// Finishes the sends the GPU handed over (until `deadline`: a dead peer may
// never take them), then closes and frees everything. One deadline for all
// of a communicator's links.
void netClose(NetLinks *links, std::chrono::steady_clock::time_point deadline);
inline void netClose(NetLinks *links) { netClose(links, std::chrono::steady_clock::now() + std::chrono::seconds(30)); }

} // namespace loom
