#include "btl_gpu/net/net_transport.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include <cuda_runtime.h>

#include "btl_gpu/net/plugins.h"
#include "base/bootstrap.h"
#include "base/cuda_driver.h"
#include "base/debug.h"
#include "device/ring/ring_args.h"
#include "proxy/proxy.h"
#include "base/param_read.h"

namespace loom {

namespace {

constexpr int kTag = 0; // one plugin connection per channel: nothing to tell apart

loomResult_t allocArea(size_t bytes, NetHostArea *a) {
    void *h = nullptr, *d = nullptr;
    cudaError_t e = cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer(&d, h, 0);
    if (e != cudaSuccess) {
        if (h) cudaFreeHost(h);
        return fail(loomUnhandledCudaError, "net: %zu bytes of mapped host memory for FIFOs: %s", bytes,
                    cudaGetErrorString(e));
    }
    memset(h, 0, bytes);
    a->host = static_cast<char *>(h);
    a->device = static_cast<char *>(d);
    a->bytes = bytes;
    return loomSuccess;
}

void freeArea(NetHostArea *a) {
    if (a->host) cudaFreeHost(a->host);
    *a = NetHostArea{};
}

// The proxy's view of channel c's FIFO: flags in `area` (host addresses),
// slots there or in `gpu` (GPU addresses, which the NIC reaches).
ProxyFifo fifoOf(const NetLinks *l, const NetHostArea &area, char *gpu, int c, void *mr, bool recv) {
    const size_t at = (size_t)c * l->channelBytes;
    FifoFlags *f = reinterpret_cast<FifoFlags *>(area.host + at);
    char *slots = (gpu ? gpu : area.host) + at + sizeof(FifoFlags);
    ProxyFifo fifo{slots, l->slotBytes, l->nslots, &f->recvTail, &f->sendHead, f->stepBytes, mr};
    fifo.flush = recv && gpu;
    return fifo;
}

// GPUDirect RDMA where the plugin's device can register GPU memory (peer
// memory, or dma-buf where the driver exports it) and LOOM_NET_GDR is not 0.
bool wantGdr(const net::NetPlugin *p, int dev) {
    if (paramLong("LOOM_NET_GDR") == 0) return false;
    net::Properties props;
    if (p->getProperties(dev, &props) != loomSuccess) return false;
    const CudaDriver *drv = cudaDriver();
    return props.gdr || (props.dmabuf && drv && drv->cuMemGetHandleForAddressRange);
}

// A dma-buf fd for the whole GPU buffer (-1 where the driver gives none).
int dmabufFd(char *gpu, size_t bytes) {
    const CudaDriver *drv = cudaDriver();
    int fd = -1;
    if (!drv || !drv->cuMemGetHandleForAddressRange ||
        drv->cuMemGetHandleForAddressRange(&fd, (CUdeviceptr)(uintptr_t)gpu, bytes,
                                           CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != CUDA_SUCCESS)
        return -1;
    return fd;
}

// Registers one direction's slots: in GPU memory when *gpu is set — through
// a dma-buf fd, else as peer memory — falling back to the host area (logged)
// if the NIC takes neither, else host memory.
loomResult_t registerSlots(const NetLinks *l, const std::vector<void *> &comms, const NetHostArea &area, char **gpu,
                           std::vector<void *> *mrs, const char *dir) {
    const size_t slots = (size_t)l->nslots * l->slotBytes;
    const net::NetPlugin *p = l->plugin;
    const int fd = *gpu ? dmabufFd(*gpu, l->gpuBytes) : -1;
    for (int c = 0; *gpu && c < l->nchannels; ++c) {
        const size_t at = (size_t)c * l->channelBytes + sizeof(FifoFlags);
        if (fd >= 0 && p->regMrDmaBuf(comms[c], *gpu + at, slots, net::MemType::Cuda, fd, at, &(*mrs)[c]) == loomSuccess)
            continue;
        if (p->regMr(comms[c], *gpu + at, slots, net::MemType::Cuda, &(*mrs)[c]) == loomSuccess) continue;
        LOOM_INFO(kNet, "net %s: %s slots: the NIC cannot register GPU memory; using host memory", p->name, dir);
        for (int k = 0; k < c; ++k) p->deregMr(comms[k], (*mrs)[k]);
        mrs->assign(mrs->size(), nullptr);
        cudaFree(*gpu);
        *gpu = nullptr;
    }
    if (fd >= 0) close(fd); // the registrations hold the buffer
    for (int c = 0; !*gpu && c < l->nchannels; ++c) {
        const size_t at = (size_t)c * l->channelBytes + sizeof(FifoFlags);
        loomResult_t r = p->regMr(comms[c], area.host + at, slots, net::MemType::Host, &(*mrs)[c]);
        if (r != loomSuccess) return r;
    }
    return loomSuccess;
}

// The plugin every rank with net connections can use, preferred first.
loomResult_t agreePlugin(const NetCommon &s, bool usesNet, const loomBootstrap_t *bs, const net::NetPlugin **out) {
    uint32_t mine = usesNet ? netUsablePlugins() : ~0u; // ranks without net don't restrict
    std::vector<uint32_t> all(s.nranks);
    if (bs->allgather(bs->ctx, &mine, all.data(), sizeof(mine)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of net plugins failed", s.rank);
    uint32_t common = ~0u;
    for (uint32_t m : all) common &= m;
    for (int i = 0; i < kNumNetPlugins; ++i)
        if ((common >> i) & 1) {
            *out = netPlugin(i);
            return loomSuccess;
        }
    for (int r = 0; r < s.nranks; ++r)
        if (all[r] == 0)
            return fail(loomNotSupported, "rank %d: the communicator spans hosts, but rank %d has no usable net "
                        "plugin (no active RDMA port, no libucp.so.0%s)", s.rank, r,
                        paramString("LOOM_NET") ? ", or LOOM_NET excludes them" : "");
    return fail(loomNotSupported, "rank %d: the ranks of the communicator have no net plugin in common", s.rank);
}

// The plugin device whose name is the topology's NIC (ib names devices
// "mlx5_0:1"); device 0 when there is no such NIC.
int deviceFor(const net::NetPlugin *p, const char *nic) {
    int n = 0;
    if (!nic || !*nic || p->devices(&n) != loomSuccess) return 0;
    for (int d = 0; d < n; ++d) {
        net::Properties props;
        if (p->getProperties(d, &props) == loomSuccess && strncmp(props.name, nic, strlen(nic)) == 0 &&
            (props.name[strlen(nic)] == ':' || props.name[strlen(nic)] == '\0'))
            return d;
    }
    return 0;
}

// Local: FIFOs and listening endpoints (one per channel) for the receive side.
loomResult_t prepare(const NetSetup &s, const NetCommon &common, NetLinks *l, net::Handle *handles) {
    const int nch = s.nchannels;
    l->send = s.send;
    l->recv = s.recv;
    l->sendPeer = s.sendPeer;
    l->recvPeer = s.recvPeer;
    l->nchannels = nch;
    l->nslots = s.nslots;
    l->slotBytes = s.slotBytes;
    l->channelBytes = sizeof(FifoFlags) + (size_t)s.nslots * s.slotBytes;
    l->listenComms.assign(nch, nullptr);
    l->sendComms.assign(nch, nullptr);
    l->recvComms.assign(nch, nullptr);
    l->sendMr.assign(nch, nullptr);
    l->recvMr.assign(nch, nullptr);
    l->sendIds.assign(nch, -1);
    l->recvIds.assign(nch, -1);
    l->proxies.assign(nch, nullptr);
    if (!s.send && !s.recv) return loomSuccess;
    l->dev = deviceFor(l->plugin, s.nicName && *s.nicName ? s.nicName : common.nicName);
    loomResult_t r = loomSuccess;
    const size_t bytes = (size_t)nch * l->channelBytes;
    if (s.send) r = allocArea(bytes, &l->sendArea);
    if (r == loomSuccess && s.recv) r = allocArea(bytes, &l->recvArea);
    if (r == loomSuccess && wantGdr(l->plugin, l->dev)) {
        // The host areas stay (flags; fallback slots); failures here only
        // mean no GDR. Whole 2 MiB pages: a dma-buf covers page-aligned ranges.
        l->gpuBytes = (bytes + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
        if (s.send && cudaMalloc((void **)&l->sendGpu, l->gpuBytes) != cudaSuccess) l->sendGpu = nullptr;
        if (s.recv && cudaMalloc((void **)&l->recvGpu, l->gpuBytes) != cudaSuccess) l->recvGpu = nullptr;
        cudaGetLastError();
    }
    for (int c = 0; c < nch && r == loomSuccess && s.recv; ++c)
        r = l->plugin->listen(l->dev, &handles[c], &l->listenComms[c]);
    return r;
}

// Connect every link's send side and accept its receive side, channel by
// channel, all at once (a peer may be connecting to this rank on another
// link), until done or timeout.
loomResult_t establish(const NetCommon &common, const std::vector<NetLinks *> &links) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration<double>(common.timeoutSeconds);
    for (;;) {
        bool pending = false;
        for (NetLinks *l : links)
            for (int c = 0; c < l->nchannels; ++c) {
                if (l->send && !l->sendComms[c]) {
                    loomResult_t r = l->plugin->connect(l->dev, &l->peerHandles[c], &l->sendComms[c]);
                    if (r != loomSuccess) return r;
                    pending |= !l->sendComms[c];
                }
                if (l->recv && !l->recvComms[c]) {
                    loomResult_t r = l->plugin->accept(l->listenComms[c], &l->recvComms[c]);
                    if (r != loomSuccess) return r;
                    pending |= !l->recvComms[c];
                }
            }
        if (!pending) return loomSuccess;
        if (clock::now() > deadline) {
            for (NetLinks *l : links)
                for (int c = 0; c < l->nchannels; ++c)
                    if ((l->send && !l->sendComms[c]) || (l->recv && !l->recvComms[c]))
                        return fail(loomRemoteError, "rank %d: net (%s): no connection with rank %d (send) / %d "
                                    "(receive) within %.0f s", common.rank, l->plugin->name, l->sendPeer, l->recvPeer,
                                    common.timeoutSeconds);
            return fail(loomRemoteError, "rank %d: net: connections not made within %.0f s", common.rank,
                        common.timeoutSeconds);
        }
    }
}

// Registration of the FIFOs and hand-over to the proxy.
loomResult_t attach(const NetSetup &s, NetLinks *l) {
    if (!s.send && !s.recv) return loomSuccess;
    loomResult_t r = loomSuccess;
    if (s.send) r = registerSlots(l, l->sendComms, l->sendArea, &l->sendGpu, &l->sendMr, "send");
    if (r == loomSuccess && s.recv) r = registerSlots(l, l->recvComms, l->recvArea, &l->recvGpu, &l->recvMr, "receive");
    if (r != loomSuccess) return r;
    for (int c = 0; c < l->nchannels; ++c) {
        Proxy *p = netAcquireProxy(l->plugin, s.proxyBase + c);
        if (!p) return fail(loomInternalError, "net: no proxy for %s", l->plugin->name);
        l->proxies[c] = p;
        if (s.send)
            l->sendIds[c] = p->addSend(l->sendComms[c], fifoOf(l, l->sendArea, l->sendGpu, c, l->sendMr[c], false), kTag);
        if (s.recv)
            l->recvIds[c] = p->addRecv(l->recvComms[c], fifoOf(l, l->recvArea, l->recvGpu, c, l->recvMr[c], true), kTag);
        if ((s.send && l->sendIds[c] < 0) || (s.recv && l->recvIds[c] < 0))
            return fail(loomInternalError, "net: proxy thread full (%d connections)", Proxy::kMaxConns);
        p->kick(); // receives get posted now
    }
    return loomSuccess;
}

} // namespace

loomResult_t netConnect(const NetCommon &common, const std::vector<NetSetup> &setups, const loomBootstrap_t *bs,
                        const std::vector<NetLinks *> &links) {
    bool uses = false;
    for (const NetSetup &s : setups) uses |= s.send || s.recv;
    const net::NetPlugin *plugin = nullptr;
    loomResult_t r = agreePlugin(common, uses, bs, &plugin);
    if (r != loomSuccess) return r; // decided from gathered data: the same on every rank
    for (NetLinks *l : links) l->plugin = plugin;
    std::vector<net::Handle> mine(common.tableHandles);
    for (size_t i = 0; i < setups.size() && r == loomSuccess; ++i)
        r = setups[i].handleAt + setups[i].nchannels > common.tableHandles
                ? fail(loomInternalError, "net: handle table of %d too small", common.tableHandles)
                : prepare(setups[i], common, links[i], mine.data() + setups[i].handleAt);
    r = agreeAll(bs, common.rank, common.nranks, r, "net FIFOs and listen");
    if (r != loomSuccess) return r;
    const size_t per = (size_t)common.tableHandles;
    std::vector<net::Handle> all((size_t)common.nranks * per);
    if (bs->allgather(bs->ctx, mine.data(), all.data(), per * sizeof(net::Handle)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of net handles failed", common.rank);
    for (size_t i = 0; i < setups.size(); ++i)
        if (setups[i].send) {
            const auto at = all.begin() + (ptrdiff_t)((size_t)setups[i].sendPeer * per + setups[i].peerHandleAt);
            links[i]->peerHandles.assign(at, at + setups[i].nchannels);
        }
    r = uses ? establish(common, links) : loomSuccess;
    for (size_t i = 0; i < setups.size() && r == loomSuccess; ++i) r = attach(setups[i], links[i]);
    r = agreeAll(bs, common.rank, common.nranks, r, "net connections");
    for (size_t i = 0; i < setups.size() && r == loomSuccess; ++i) {
        const NetSetup &s = setups[i];
        const NetLinks *l = links[i];
        if (s.send || s.recv)
            LOOM_INFO(kNet, "rank %d: net %s dev %d: %s%s%s, %d channels x %d slots x %zu KiB; send slots in %s, "
                      "receive slots in %s", common.rank, plugin->name, l->dev, s.recv ? "from " : "",
                      s.recv ? std::to_string(s.recvPeer).c_str() : "",
                      s.send ? (" to " + std::to_string(s.sendPeer)).c_str() : "", l->nchannels, l->nslots,
                      l->slotBytes >> 10, l->sendGpu ? "GPU memory (GDR)" : "host memory",
                      l->recvGpu ? "GPU memory (GDR, flushed)" : "host memory");
    }
    return r;
}

void netPost(NetLinks *l, int nchannels, const uint64_t *sendSteps, const uint64_t *recvSteps) {
    for (int c = 0; c < nchannels && c < l->nchannels; ++c) {
        if (!l->proxies[c]) continue;
        if (l->send && sendSteps[c]) l->proxies[c]->post(l->sendIds[c], sendSteps[c]);
        if (l->recv && recvSteps[c]) l->proxies[c]->post(l->recvIds[c], recvSteps[c]);
    }
}

loomResult_t netError(const NetLinks *l) {
    for (size_t c = 0; c < l->proxies.size(); ++c) {
        if (!l->proxies[c]) continue;
        for (int id : {l->sendIds[c], l->recvIds[c]}) {
            loomResult_t r = id >= 0 ? l->proxies[c]->error(id) : loomSuccess;
            if (r != loomSuccess) return r;
        }
    }
    return loomSuccess;
}

void netAbandon(NetLinks *l) {
    for (size_t c = 0; c < l->proxies.size(); ++c) {
        if (!l->proxies[c]) continue;
        if (l->sendIds[c] >= 0) l->proxies[c]->dropPosted(l->sendIds[c]);
        if (l->recvIds[c] >= 0) l->proxies[c]->dropPosted(l->recvIds[c]);
    }
}

void netClose(NetLinks *l, std::chrono::steady_clock::time_point end) {
    // Sends the GPU has handed over are finished first, within the deadline.
    for (size_t c = 0; c < l->proxies.size(); ++c) {
        if (!l->proxies[c] || l->sendIds[c] < 0) continue;
        double left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
        if (!l->proxies[c]->quiesce(l->sendIds[c], left > 0 ? left : 0))
            LOOM_WARN(kNet, "net: channel %zu: steps not sent at close (connection failed or peer gone)", c);
    }
    for (size_t c = 0; c < l->proxies.size(); ++c) {
        if (!l->proxies[c]) continue;
        if (l->sendIds[c] >= 0) l->proxies[c]->remove(l->sendIds[c]);
        if (l->recvIds[c] >= 0) l->proxies[c]->remove(l->recvIds[c]);
    }
    // The proxy no longer touches them: deregister, close, free (receives
    // first; this rank needs nothing more from its receive peer).
    const net::NetPlugin *p = l->plugin;
    for (size_t c = 0; p && c < l->recvComms.size(); ++c) {
        if (l->recvMr[c]) p->deregMr(l->recvComms[c], l->recvMr[c]);
        if (l->recvComms[c]) p->closeRecv(l->recvComms[c]);
        if (l->listenComms[c]) p->closeListen(l->listenComms[c]);
    }
    for (size_t c = 0; p && c < l->sendComms.size(); ++c) {
        if (l->sendMr[c]) p->deregMr(l->sendComms[c], l->sendMr[c]);
        if (l->sendComms[c]) p->closeSend(l->sendComms[c]);
        // A connect that never completed (set-up failed or timed out).
        else if (l->send && c < l->peerHandles.size() && p->abandonConnect) p->abandonConnect(&l->peerHandles[c]);
    }
    for (Proxy *p : l->proxies) netReleaseProxy(p);
    if (l->sendGpu) cudaFree(l->sendGpu);
    if (l->recvGpu) cudaFree(l->recvGpu);
    freeArea(&l->sendArea);
    freeArea(&l->recvArea);
    *l = NetLinks{};
}

} // namespace loom
