/*
 * `ib` plugin, devices: one per active port (speed x width, IB or RoCE, the
 * RoCE v2 IPv4 GID), and a thread per opened device that turns its async
 * events into loom errors naming device and port.
 */
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "btl_gpu/net/ib/ib_internal.h"
#include "base/debug.h"
#include "base/param_read.h"

namespace loom {
namespace net {
namespace ib {

std::vector<Device> g_devs;
std::mutex g_commMu;
std::vector<Comm *> g_comms;
std::atomic<uint64_t> g_asyncEvents{0};

namespace {

// ------------------------------------------------------------------ devices

// GPUDirect RDMA through peer memory: the NIC can register GPU memory with
// ibv_reg_mr when NVIDIA's peer-memory module is loaded (nvidia-peermem, or
// the older nv_peer_mem). dma-buf registration is reported separately.
bool peerMemoryLoaded() {
    std::ifstream a("/sys/module/nvidia_peermem/initstate"), b("/sys/kernel/mm/memory_peers/nv_mem/version");
    return a.good() || b.good();
}

std::string pciPath(const std::string &name) {
    char real[PATH_MAX];
    std::string link = "/sys/class/infiniband/" + name + "/device";
    return realpath(link.c_str(), real) ? real : "";
}

// RoCE: the first IPv4 RoCE v2 GID (LOOM_IB_GID_INDEX overrides).
int chooseGid(const Ibv *v, Device &d) {
    const long forced = paramLong("LOOM_IB_GID_INDEX");
    if (forced >= 0) return (int)forced;
    if (!d.roce) return 0;
    for (int i = 0; i < d.attr.gid_tbl_len && i < 256; ++i) {
        ibv_gid g;
        if (v->queryGid(d.ctx, (uint8_t)d.port, i, &g) != 0) continue;
        static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(g.raw, v4, 12) != 0) continue;
        std::ifstream type("/sys/class/infiniband/" + d.name + "/ports/" + std::to_string(d.port) +
                           "/gid_attrs/types/" + std::to_string(i));
        std::string t;
        std::getline(type, t);
        if (t.empty() || t.find("v2") != std::string::npos) return i;
    }
    return 0;
}

double portGbps(const ibv_port_attr &a) {
    static const struct { int speed; double gbps; } kSpeed[] = {{1, 2.5}, {2, 5}, {4, 10}, {8, 10}, {16, 14},
                                                                 {32, 25}, {64, 50}, {128, 100}, {256, 200}};
    static const struct { int width; int lanes; } kWidth[] = {{1, 1}, {2, 4}, {4, 8}, {8, 12}, {16, 2}};
    double g = 0;
    int lanes = 0;
    for (auto s : kSpeed) if (s.speed == a.active_speed) g = s.gbps;
    for (auto w : kWidth) if (w.width == a.active_width) lanes = w.lanes;
    return g * lanes;
}

// One thread per opened device: reports its port and QP events as loom
// errors naming device and port, and fails the connection of a broken QP.
void asyncEvents(ibv_context *ctx, std::string name) {
    markBackgroundThread();
    const Ibv *v = ibv();
    ibv_async_event ev;
    while (v->getAsyncEvent(ctx, &ev) == 0) {
        g_asyncEvents.fetch_add(1);
        const char *what = v->eventTypeStr(ev.event_type);
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_PATH_MIG_ERR: {
            Comm *c = static_cast<Comm *>(ev.element.qp->qp_context);
            std::lock_guard<std::mutex> g(g_commMu);
            if (std::find(g_comms.begin(), g_comms.end(), c) != g_comms.end()) c->failed = true;
            fail(loomRemoteError, "ib: %s: QP %u: %s", name.c_str(), ev.element.qp->qp_num, what);
            break;
        }
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_DEVICE_FATAL:
            fail(loomSystemError, "ib: %s port %d: %s", name.c_str(), ev.element.port_num, what);
            break;
        default:
            LOOM_INFO(kNet, "ib: %s: async event %s", name.c_str(), what);
        }
        v->ackAsyncEvent(&ev);
    }
}

} // namespace

loomResult_t ibInit() {
    static std::once_flag once;
    static loomResult_t result = loomSuccess;
    std::call_once(once, [] {
        const Ibv *v = ibv();
        if (!v) { result = fail(loomNotSupported, "ib: libibverbs not available"); return; }
        int n = 0;
        ibv_device **list = v->getDeviceList(&n);
        for (int i = 0; list && i < n; ++i) {
            ibv_context *ctx = v->openDevice(list[i]);
            ibv_device_attr da;
            if (!ctx || v->queryDevice(ctx, &da) != 0) continue;
            bool used = false;
            for (int p = 1; p <= da.phys_port_cnt; ++p) {
                Device d;
                d.name = v->getDeviceName(list[i]);
                d.ctx = ctx;
                d.port = p;
                memset(&d.attr, 0, sizeof(d.attr));
                if (v->queryPort(ctx, (uint8_t)p, &d.attr) != 0 || d.attr.state != IBV_PORT_ACTIVE) continue;
                d.pd = v->allocPd(ctx);
                if (!d.pd) continue;
                d.roce = d.attr.link_layer == IBV_LINK_LAYER_ETHERNET;
                d.gidIndex = chooseGid(v, d);
                memset(&d.gid, 0, sizeof(d.gid));
                v->queryGid(ctx, (uint8_t)p, d.gidIndex, &d.gid);
                memset(&d.props, 0, sizeof(d.props));
                snprintf(d.props.name, sizeof(d.props.name), "%s:%d", d.name.c_str(), p);
                snprintf(d.props.pciPath, sizeof(d.props.pciPath), "%s", pciPath(d.name).c_str());
                d.props.speedGbps = portGbps(d.attr);
                d.props.maxRecvs = 1;
                d.props.dmabuf = v->regDmabufMr != nullptr;
                d.props.gdr = peerMemoryLoaded();
                LOOM_INFO(kNet, "ib: %s port %d %s, %.0f Gb/s, GID index %d, GPU memory: peer-memory %s, dma-buf %s",
                          d.name.c_str(), p, d.roce ? "RoCE" : "IB", d.props.speedGbps, d.gidIndex,
                          d.props.gdr ? "yes" : "no", d.props.dmabuf ? "yes" : "no");
                g_devs.push_back(d);
                used = true;
            }
            if (!used) v->closeDevice(ctx);
            else std::thread(asyncEvents, ctx, std::string(v->getDeviceName(list[i]))).detach();
        }
        if (list) v->freeDeviceList(list);
        if (g_devs.empty()) result = fail(loomNotSupported, "ib: no active RDMA port");
    });
    return result;
}

loomResult_t ibDevices(int *n) {
    *n = (int)g_devs.size();
    return loomSuccess;
}

loomResult_t ibGetProperties(int dev, Properties *p) {
    if (dev < 0 || dev >= (int)g_devs.size()) return fail(loomInvalidArgument, "ib: no device %d", dev);
    *p = g_devs[dev].props;
    return loomSuccess;
}

} // namespace ib
} // namespace net
} // namespace loom
