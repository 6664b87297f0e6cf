/*
 * `ib` net plugin: native verbs (InfiniBand or RoCE), libibverbs via dlopen.
 *
 * Connection: the listen handle is a TCP address; connect/accept are
 * non-blocking state machines exchanging QP number, PSN, LID/GID, MTU and the
 * sender's CTS ring (address, rkey) over that socket, then move an RC QP
 * through INIT/RTR/RTS. The socket stays open: its EOF tells a receiver that
 * the sender is gone.
 * Data: irecv posts a receive (for the immediate) and RDMA-writes a CTS entry
 * {addr, rkey, size, tag} into the sender's ring; isend takes the next entry
 * and posts one signaled RDMA WRITE WITH IMM carrying the payload, immediate =
 * size; the receive completion ends the irecv.
 */
#include "btl_gpu/net/ib/net_ib.h"

#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <algorithm>
#include <atomic>
#include <thread>
#include <fstream>
#include <ifaddrs.h>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "btl_gpu/net/ib/ibv_api.h"
#include "core/debug.h"

namespace loom {
namespace net {

namespace {

constexpr uint32_t kMagic = 0x62696f6c; // "loib"
constexpr int kCtsSlots = 64;
constexpr int kQpDepth = 2 * kCtsSlots + 8;
constexpr int kMaxQps = 8; // per connection

struct Device {
    std::string name;
    ibv_context *ctx;
    ibv_pd *pd;
    int port;
    ibv_port_attr attr;
    int gidIndex;
    ibv_gid gid;
    bool roce;
    Properties props;
};
std::vector<Device> g_devs;

struct HandleData {
    uint32_t magic;
    uint32_t ip; // network order
    uint16_t port;
    uint16_t pad;
    void *pending; // the sender's comm while connecting
};
static_assert(sizeof(HandleData) <= kHandleBytes, "handle too large");

// What each side tells the other about its QP.
struct ConnInfo {
    uint32_t qpn, psn, mtu; // qpn: the first data QP (or the loopback QP)
    uint32_t nqp;           // data QPs; the connector's count is used by both
    uint32_t qpns[kMaxQps];
    uint16_t lid;
    uint8_t gid[16];
    uint64_t ctsAddr; // sender: its CTS ring
    uint32_t ctsRkey;
};

// A CTS entry; valid when both sequence words carry the expected value.
struct Cts {
    uint32_t seq0;
    uint32_t rkey;
    uint64_t addr;
    uint32_t size;
    uint32_t tag;
    uint32_t pad;
    uint32_t seq1;
};

struct Comm {
    Device *dev = nullptr;
    int fd = -1;
    ibv_cq *cq = nullptr;
    std::vector<ibv_qp *> qps; // a message is split over all of them
    Cts *ring = nullptr; // sender: written by the receiver; receiver: entries it sends
    ibv_mr *ringMr = nullptr;
    uint64_t remoteRing = 0;
    uint32_t remoteRingRkey = 0;
    ibv_qp *loopQp = nullptr;   // receiver: connected to itself, for flush reads
    char *scratch = nullptr;    // ... their 8-byte destination
    ibv_mr *scratchMr = nullptr;
    uint64_t seq = 0;      // next isend / irecv
    uint64_t completed = 0; // receiver: irecvs finished
    bool failed = false;
    // handshake
    int state = 0;
    ConnInfo local{}, remote{};
    size_t moved = 0;
};

struct ListenComm {
    Device *dev;
    int fd;
    Comm *accepting = nullptr;
};

// A registration: the MR and what memory it covers (flush policy), shared by
// every registration of a range inside it while any of them is live.
struct IbMr {
    ibv_mr *mr;
    MemType type;
    uintptr_t begin, end;
    Device *dev;
    int refs;
};

// Live comms, so that an async event about one of their QPs can fail them
// (and an event about a comm being destroyed finds nothing).
std::mutex g_commMu;
std::vector<Comm *> g_comms;
std::atomic<uint64_t> g_asyncEvents{0};

// Live registrations. Only live ones are reused, so memory freed (after its
// last deregistration) and allocated again is never served a stale MR.
std::mutex g_regMu;
std::vector<IbMr *> g_regs;

struct Request {
    Comm *comm;
    bool recv;
    int pending = 1; // completions still to come (one per QP used)
    bool done = false;
    loomResult_t err = loomSuccess;
    size_t size = 0;
};

// ------------------------------------------------------------------ devices

std::string pciPath(const std::string &name) {
    char real[PATH_MAX];
    std::string link = "/sys/class/infiniband/" + name + "/device";
    return realpath(link.c_str(), real) ? real : "";
}

// RoCE: the first IPv4 RoCE v2 GID (LOOM_IB_GID_INDEX overrides).
int chooseGid(const Ibv *v, Device &d) {
    if (const char *e = getenv("LOOM_IB_GID_INDEX")) return atoi(e);
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
                LOOM_INFO(kNet, "ib: %s port %d %s, %.0f Gb/s, GID index %d", d.name.c_str(), p,
                          d.roce ? "RoCE" : "IB", d.props.speedGbps, d.gidIndex);
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

// ------------------------------------------------------------------ sockets

uint32_t localIp() {
    if (const char *e = getenv("LOOM_SOCKET_IFADDR")) return inet_addr(e);
    uint32_t ip = htonl(INADDR_LOOPBACK);
    ifaddrs *ifs = nullptr;
    if (getifaddrs(&ifs) != 0) return ip;
    for (ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            uint32_t a = ((sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            if (a != htonl(INADDR_LOOPBACK)) { ip = a; break; }
        }
    freeifaddrs(ifs);
    return ip;
}

void nonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Moves the rest of `bytes` of `buf`; true when all moved. *err on failure.
bool pump(int fd, bool out, void *buf, size_t bytes, size_t *moved, bool *err) {
    while (*moved < bytes) {
        ssize_t n = out ? send(fd, (char *)buf + *moved, bytes - *moved, MSG_NOSIGNAL)
                        : recv(fd, (char *)buf + *moved, bytes - *moved, 0);
        if (n > 0) { *moved += (size_t)n; continue; }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
        *err = true; // closed or broken
        return false;
    }
    return true;
}

// ------------------------------------------------------------------ QPs

int qpsPerConn() {
    int n = getenv("LOOM_IB_QPS_PER_CONN") ? atoi(getenv("LOOM_IB_QPS_PER_CONN")) : 1;
    return n < 1 ? 1 : n > kMaxQps ? kMaxQps : n;
}

loomResult_t createQp(Comm *c, bool sender, int nqp) {
    const Ibv *v = ibv();
    Device *d = c->dev;
    {
        std::lock_guard<std::mutex> g(g_commMu);
        g_comms.push_back(c);
    }
    c->cq = v->createCq(d->ctx, 2 * kQpDepth * (nqp + 1), nullptr, nullptr, 0);
    if (!c->cq) return fail(loomSystemError, "ib: %s: ibv_create_cq: %s", d->props.name, strerror(errno));
    for (int k = 0; k < nqp; ++k) {
        ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof(ia));
        ia.send_cq = ia.recv_cq = c->cq;
        ia.qp_context = c; // async events name the comm
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = ia.cap.max_recv_wr = kQpDepth;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        ibv_qp *qp = v->createQp(d->pd, &ia);
        if (!qp) return fail(loomSystemError, "ib: %s: ibv_create_qp: %s", d->props.name, strerror(errno));
        c->qps.push_back(qp);
        ibv_qp_attr a;
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_INIT;
        a.port_num = (uint8_t)d->port;
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        if (v->modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
            return fail(loomSystemError, "ib: %s: QP to INIT: %s", d->props.name, strerror(errno));
        c->local.qpns[k] = qp->qp_num;
    }
    c->local.nqp = (uint32_t)nqp;
    // The sender's CTS ring is written by the receiver; the receiver's holds the entries it sends.
    c->ring = static_cast<Cts *>(calloc(kCtsSlots, sizeof(Cts)));
    int access = IBV_ACCESS_LOCAL_WRITE | (sender ? IBV_ACCESS_REMOTE_WRITE : 0);
    c->ringMr = c->ring ? v->regMr(d->pd, c->ring, kCtsSlots * sizeof(Cts), access) : nullptr;
    if (!c->ringMr) return fail(loomSystemError, "ib: %s: registering the CTS ring: %s", d->props.name, strerror(errno));
    std::random_device rd;
    c->local.qpn = c->qps[0]->qp_num;
    c->local.psn = rd() & 0xffffff;
    c->local.mtu = d->attr.active_mtu;
    c->local.lid = d->attr.lid;
    memcpy(c->local.gid, d->gid.raw, 16);
    c->local.ctsAddr = (uint64_t)(uintptr_t)c->ring;
    c->local.ctsRkey = c->ringMr->rkey;
    return loomSuccess;
}

loomResult_t qpToRts(Device *d, ibv_qp *qp, const ConnInfo &local, const ConnInfo &remote);

loomResult_t toRts(Comm *c) {
    if (c->remote.nqp != c->qps.size())
        return fail(loomInternalError, "ib: %s: %u QPs on the other side, %zu here", c->dev->props.name,
                    c->remote.nqp, c->qps.size());
    loomResult_t r = loomSuccess;
    for (size_t k = 0; k < c->qps.size() && r == loomSuccess; ++k) {
        ConnInfo local = c->local, remote = c->remote;
        local.qpn = c->local.qpns[k];
        remote.qpn = c->remote.qpns[k];
        r = qpToRts(c->dev, c->qps[k], local, remote);
    }
    c->remoteRing = c->remote.ctsAddr;
    c->remoteRingRkey = c->remote.ctsRkey;
    return r;
}

// Moves a QP in INIT to RTR and RTS towards `remote`.
loomResult_t qpToRts(Device *d, ibv_qp *qp, const ConnInfo &local, const ConnInfo &remote) {
    const Ibv *v = ibv();
    ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (ibv_mtu)(local.mtu < remote.mtu ? local.mtu : remote.mtu);
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = (uint8_t)d->port;
    a.ah_attr.dlid = remote.lid;
    if (d->roce) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)d->gidIndex;
        a.ah_attr.grh.hop_limit = 255;
    }
    if (v->modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return fail(loomSystemError, "ib: %s: QP to RTR: %s", d->props.name, strerror(errno));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;  // 4.096 us x 2^14 = 67 ms per try
    a.retry_cnt = 7; // a silent peer fails the QP after about half a second
    a.rnr_retry = 7;
    a.sq_psn = local.psn;
    a.max_rd_atomic = 1;
    if (v->modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                   IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return fail(loomSystemError, "ib: %s: QP to RTS: %s", d->props.name, strerror(errno));
    return loomSuccess;
}

// The receiver's flush QP: an RC QP connected to itself. Its RDMA READ of a
// received GPU buffer completes only after the NIC's earlier writes to that
// buffer are visible, which is what the GPU needs before it reads the data.
loomResult_t createLoopback(Comm *c) {
    const Ibv *v = ibv();
    Device *d = c->dev;
    ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = ia.recv_cq = c->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = kCtsSlots;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    c->loopQp = v->createQp(d->pd, &ia);
    c->scratch = static_cast<char *>(calloc(1, 8));
    if (!c->loopQp || !c->scratch) return fail(loomSystemError, "ib: %s: flush QP: %s", d->props.name, strerror(errno));
    c->scratchMr = v->regMr(d->pd, c->scratch, 8, IBV_ACCESS_LOCAL_WRITE);
    ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = (uint8_t)d->port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
    if (!c->scratchMr || v->modifyQp(c->loopQp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return fail(loomSystemError, "ib: %s: flush QP to INIT: %s", d->props.name, strerror(errno));
    ConnInfo self = c->local;
    self.qpn = c->loopQp->qp_num;
    return qpToRts(d, c->loopQp, self, self);
}

enum class FlushPolicy { Auto, On, Off };

// LOOM_NET_GDR_FLUSH=auto|on|off; auto flushes GPU buffers only. Logged once.
FlushPolicy flushPolicy() {
    static FlushPolicy p = [] {
        const char *e = getenv("LOOM_NET_GDR_FLUSH");
        FlushPolicy f = !e || !strcmp(e, "auto") ? FlushPolicy::Auto : !strcmp(e, "on") ? FlushPolicy::On : FlushPolicy::Off;
        LOOM_INFO(kNet, "ib: GDR flush %s", f == FlushPolicy::Auto ? "auto: after receives into GPU memory"
                                             : f == FlushPolicy::On ? "on: after every receive" : "off");
        return f;
    }();
    return p;
}

void destroy(Comm *c) {
    if (!c) return;
    const Ibv *v = ibv();
    {
        std::lock_guard<std::mutex> g(g_commMu);
        g_comms.erase(std::remove(g_comms.begin(), g_comms.end(), c), g_comms.end());
    }
    for (ibv_qp *qp : c->qps) v->destroyQp(qp);
    if (c->loopQp) v->destroyQp(c->loopQp);
    if (c->cq) v->destroyCq(c->cq);
    if (c->scratchMr) v->deregMr(c->scratchMr);
    free(c->scratch);
    if (c->ringMr) v->deregMr(c->ringMr);
    free(c->ring);
    if (c->fd >= 0) close(c->fd);
    delete c;
}

// ------------------------------------------------------------------ connect / accept

loomResult_t ibListen(int dev, Handle *handle, void **listenComm) {
    if (dev < 0 || dev >= (int)g_devs.size()) return fail(loomInvalidUsage, "ib: listen on device %d", dev);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (sockaddr *)&sa, &len) != 0) {
        if (fd >= 0) close(fd);
        return fail(loomSystemError, "ib: listen socket: %s", strerror(errno));
    }
    nonBlocking(fd);
    memset(handle, 0, sizeof(*handle));
    HandleData *h = reinterpret_cast<HandleData *>(handle->data);
    h->magic = kMagic;
    h->ip = localIp();
    h->port = sa.sin_port;
    *listenComm = new ListenComm{&g_devs[dev], fd};
    return loomSuccess;
}

loomResult_t ibConnect(int dev, Handle *handle, void **sendComm) {
    *sendComm = nullptr;
    HandleData *h = reinterpret_cast<HandleData *>(handle->data);
    if (h->magic != kMagic) return fail(loomInvalidArgument, "ib: not an ib listen handle");
    if (dev < 0 || dev >= (int)g_devs.size()) return fail(loomInvalidUsage, "ib: connect on device %d", dev);
    Comm *c = static_cast<Comm *>(h->pending);
    bool err = false;
    if (!c) {
        c = new Comm;
        c->dev = &g_devs[dev];
        loomResult_t r = createQp(c, true, qpsPerConn());
        sockaddr_in sa;
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = h->ip;
        sa.sin_port = h->port;
        if (r == loomSuccess) {
            c->fd = socket(AF_INET, SOCK_STREAM, 0);
            if (c->fd >= 0) nonBlocking(c->fd);
            if (c->fd < 0 || (connect(c->fd, (sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS))
                r = fail(loomRemoteError, "ib: connect to the receiver: %s", strerror(errno));
        }
        if (r != loomSuccess) {
            destroy(c);
            return r;
        }
        h->pending = c;
    }
    if (c->state == 0) { // TCP connected?
        pollfd p = {c->fd, POLLOUT, 0};
        if (poll(&p, 1, 0) <= 0) return loomSuccess;
        int so = 0;
        socklen_t sl = sizeof(so);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so, &sl);
        if (so != 0) err = true;
        else c->state = 1;
    }
    if (!err && c->state == 1 && pump(c->fd, true, &c->local, sizeof(ConnInfo), &c->moved, &err)) {
        c->state = 2;
        c->moved = 0;
    }
    if (!err && c->state == 2 && pump(c->fd, false, &c->remote, sizeof(ConnInfo), &c->moved, &err)) {
        h->pending = nullptr;
        loomResult_t r = toRts(c);
        if (r != loomSuccess) {
            destroy(c);
            return r;
        }
        *sendComm = c;
        return loomSuccess;
    }
    if (err) {
        h->pending = nullptr;
        destroy(c);
        return fail(loomRemoteError, "ib: connect: the receiver closed the connection");
    }
    return loomSuccess; // not yet: call again
}

loomResult_t ibAccept(void *listenComm, void **recvComm) {
    *recvComm = nullptr;
    ListenComm *l = static_cast<ListenComm *>(listenComm);
    Comm *c = l->accepting;
    bool err = false;
    if (!c) {
        int fd = accept(l->fd, nullptr, nullptr);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return loomSuccess;
            return fail(loomSystemError, "ib: accept: %s", strerror(errno));
        }
        nonBlocking(fd);
        c = new Comm;
        c->dev = l->dev;
        c->fd = fd;
        l->accepting = c;
    }
    if (c->state == 0 && pump(c->fd, false, &c->remote, sizeof(ConnInfo), &c->moved, &err)) {
        // As many QPs as the sender made.
        int nqp = (int)c->remote.nqp;
        loomResult_t r = nqp >= 1 && nqp <= kMaxQps
                             ? createQp(c, false, nqp)
                             : fail(loomRemoteError, "ib: accept: the sender asks for %d QPs", nqp);
        if (r != loomSuccess) {
            l->accepting = nullptr;
            destroy(c);
            return r;
        }
        c->state = 1;
        c->moved = 0;
    }
    if (!err && c->state == 1 && pump(c->fd, true, &c->local, sizeof(ConnInfo), &c->moved, &err)) {
        l->accepting = nullptr;
        loomResult_t r = toRts(c);
        if (r == loomSuccess) r = createLoopback(c);
        if (r != loomSuccess) {
            destroy(c);
            return r;
        }
        *recvComm = c;
        return loomSuccess;
    }
    if (err) {
        l->accepting = nullptr;
        destroy(c);
        return fail(loomRemoteError, "ib: accept: the sender closed the connection");
    }
    return loomSuccess;
}

// ------------------------------------------------------------------ memory

loomResult_t ibRegMr(void *comm, void *data, size_t size, MemType type, void **mhandle) {
    Device *d = *static_cast<Device **>(comm); // every comm starts with its device
    const uintptr_t b = (uintptr_t)data, e = b + size;
    std::lock_guard<std::mutex> lock(g_regMu);
    for (IbMr *m : g_regs)
        if (m->dev == d && m->type == type && m->begin <= b && e <= m->end) {
            ++m->refs;
            *mhandle = m;
            return loomSuccess;
        }
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    ibv_mr *mr = ibv()->regMr(d->pd, data, size, access);
    if (mr) {
        IbMr *m = new IbMr{mr, type, b, e, d, 1};
        g_regs.push_back(m);
        *mhandle = m;
        return loomSuccess;
    }
    return fail(type == MemType::Cuda ? loomNotSupported : loomSystemError,
                "ib: %s: registering %zu bytes of %s memory: %s%s", d->props.name, size,
                type == MemType::Cuda ? "GPU" : "host", strerror(errno),
                type == MemType::Cuda ? " (GPU memory needs nvidia-peermem, or regMrDmaBuf)" : "");
}

loomResult_t ibRegMrDmaBuf(void *comm, void *data, size_t size, MemType type, int fd, size_t offset, void **mhandle) {
    Device *d = *static_cast<Device **>(comm);
    const Ibv *v = ibv();
    if (!v->regDmabufMr) return fail(loomNotSupported, "ib: this rdma-core has no ibv_reg_dmabuf_mr");
    ibv_mr *mr = v->regDmabufMr(d->pd, offset, size, (uint64_t)(uintptr_t)data, fd,
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr) return fail(loomSystemError, "ib: %s: dma-buf registration: %s", d->props.name, strerror(errno));
    std::lock_guard<std::mutex> lock(g_regMu);
    IbMr *m = new IbMr{mr, type, 0, 0, d, 1}; // dma-buf ranges are not shared (empty range)
    g_regs.push_back(m);
    *mhandle = m;
    return loomSuccess;
}

loomResult_t ibDeregMr(void *, void *mhandle) {
    IbMr *m = static_cast<IbMr *>(mhandle);
    if (!m) return loomSuccess;
    std::lock_guard<std::mutex> lock(g_regMu);
    if (--m->refs > 0) return loomSuccess;
    for (size_t i = 0; i < g_regs.size(); ++i)
        if (g_regs[i] == m) g_regs.erase(g_regs.begin() + (long)i);
    ibv()->deregMr(m->mr);
    delete m;
    return loomSuccess;
}

uint32_t lkeyOf(void *mh) { return mh ? static_cast<IbMr *>(mh)->mr->lkey : 0; }
uint32_t rkeyOf(void *mh) { return mh ? static_cast<IbMr *>(mh)->mr->rkey : 0; }

// ------------------------------------------------------------------ data

loomResult_t ibIsend(void *comm, void *data, size_t size, int tag, void *mhandle, void **request) {
    *request = nullptr;
    Comm *c = static_cast<Comm *>(comm);
    if (!c) return fail(loomInvalidArgument, "ib: isend on a NULL comm");
    if (c->failed) return fail(loomRemoteError, "ib: %s: isend on a failed connection", c->dev->props.name);
    if (size && !mhandle) return fail(loomInvalidArgument, "ib: isend of %zu bytes without a registration", size);
    volatile Cts *e = &c->ring[c->seq % kCtsSlots];
    const uint32_t want = (uint32_t)(c->seq + 1);
    if (e->seq0 != want || e->seq1 != want) return loomSuccess; // the receiver has not posted: later
    __sync_synchronize();
    if (size > e->size)
        return fail(loomInvalidArgument, "ib: isend of %zu bytes into a %u-byte receive", size, e->size);
    if ((uint32_t)tag != e->tag) return fail(loomInvalidArgument, "ib: isend tag %d, receive tag %u", tag, e->tag);
    // Split over the QPs; every QP carries a part (maybe empty) with its
    // size as immediate, so the receiver expects exactly one completion per QP.
    const size_t nq = c->qps.size(), per = (size + nq - 1) / nq;
    Request *r = new Request{c, false};
    r->size = size;
    r->pending = (int)nq;
    for (size_t k = 0; k < nq; ++k) {
        const size_t off = std::min(size, k * per), len = std::min(per, size - off);
        ibv_sge sge = {(uint64_t)(uintptr_t)data + off, (uint32_t)len, len ? lkeyOf(mhandle) : 0};
        ibv_send_wr wr, *bad = nullptr;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = (uint64_t)(uintptr_t)r;
        wr.sg_list = len ? &sge : nullptr;
        wr.num_sge = len ? 1 : 0;
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.imm_data = htonl((uint32_t)len);
        wr.wr.rdma.remote_addr = e->addr + off;
        wr.wr.rdma.rkey = e->rkey;
        if (int err = ibv_post_send(c->qps[k], &wr, &bad)) {
            // The connection is done for. Parts already posted still complete
            // (flushed) through the CQ and reference r, so it is freed only if
            // none was posted; the caller gets the error, not the request.
            c->failed = true;
            r->pending -= (int)(nq - k);
            if (r->pending == 0) delete r;
            return fail(loomRemoteError, "ib: %s: posting RDMA WRITE WITH IMM failed: %s", c->dev->props.name,
                        strerror(err));
        }
    }
    ++c->seq;
    *request = r;
    return loomSuccess;
}

loomResult_t ibIrecv(void *comm, void *data, size_t size, int tag, void *mhandle, void **request) {
    *request = nullptr;
    Comm *c = static_cast<Comm *>(comm);
    if (!c) return fail(loomInvalidArgument, "ib: irecv on a NULL comm");
    if (c->failed) return fail(loomRemoteError, "ib: %s: irecv on a failed connection", c->dev->props.name);
    if (size && !mhandle) return fail(loomInvalidArgument, "ib: irecv of %zu bytes without a registration", size);
    if (size > UINT32_MAX) return fail(loomInvalidArgument, "ib: irecv of %zu bytes (max 4 GiB - 1)", size);
    if (c->seq - c->completed >= (uint64_t)kCtsSlots) return loomSuccess; // ring full: later
    Request *r = new Request{c, true};
    r->pending = (int)c->qps.size(); // one part per QP
    ibv_recv_wr rw, *rbad = nullptr; // catches a part's immediate
    memset(&rw, 0, sizeof(rw));
    rw.wr_id = (uint64_t)(uintptr_t)r;
    Cts *e = &c->ring[c->seq % kCtsSlots];
    const uint32_t s = (uint32_t)(c->seq + 1);
    *e = Cts{s, size ? rkeyOf(mhandle) : 0, (uint64_t)(uintptr_t)data, (uint32_t)size,
             (uint32_t)tag, 0, s};
    ibv_sge sge = {(uint64_t)(uintptr_t)e, (uint32_t)sizeof(Cts), c->ringMr->lkey};
    ibv_send_wr wr, *bad = nullptr;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 0; // CTS writes complete silently unless they fail
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = c->remoteRing + (c->seq % kCtsSlots) * sizeof(Cts);
    wr.wr.rdma.rkey = c->remoteRingRkey;
    int rcv = 0;
    for (size_t k = 0; k < c->qps.size() && !rcv; ++k) rcv = ibv_post_recv(c->qps[k], &rw, &rbad);
    int snd = rcv ? 0 : ibv_post_send(c->qps[0], &wr, &bad);
    if (rcv || snd) {
        delete r;
        c->failed = true;
        return fail(loomRemoteError, "ib: %s: posting %s failed: %s", c->dev->props.name,
                    rcv ? "the receive" : "the CTS write", strerror(rcv ? rcv : snd));
    }
    ++c->seq;
    *request = r;
    return loomSuccess;
}

loomResult_t ibIflush(void *comm, void *data, size_t size, void *mhandle, void **request) {
    *request = nullptr;
    Comm *c = static_cast<Comm *>(comm);
    IbMr *m = static_cast<IbMr *>(mhandle);
    FlushPolicy p = flushPolicy();
    if (!c || !size || !m || p == FlushPolicy::Off || (p == FlushPolicy::Auto && m->type != MemType::Cuda))
        return loomSuccess; // nothing to flush
    if (c->failed) return fail(loomRemoteError, "ib: %s: iflush on a failed connection", c->dev->props.name);
    Request *r = new Request{c, false};
    ibv_sge sge = {(uint64_t)(uintptr_t)c->scratch, 1, c->scratchMr->lkey};
    ibv_send_wr wr, *bad = nullptr;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = (uint64_t)(uintptr_t)r;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)data;
    wr.wr.rdma.rkey = m->mr->rkey;
    if (int e = ibv_post_send(c->loopQp, &wr, &bad)) {
        delete r;
        return fail(loomSystemError, "ib: %s: posting the flush read failed: %s", c->dev->props.name, strerror(e));
    }
    *request = r;
    return loomSuccess;
}

const char *wcError(ibv_wc_status s) {
    switch (s) {
    case IBV_WC_REM_ACCESS_ERR: return "remote access error (bad rkey or address)";
    case IBV_WC_RETRY_EXC_ERR: return "peer unreachable (retries exhausted)";
    case IBV_WC_WR_FLUSH_ERR: return "flushed: the QP is in error state";
    case IBV_WC_LOC_PROT_ERR: return "local protection error (unregistered buffer)";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request";
    default: return "work completion error";
    }
}

// Drains the comm's CQ into the requests it names.
void pollCq(Comm *c) {
    ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0)
        for (int i = 0; i < n; ++i) {
            Request *r = reinterpret_cast<Request *>((uintptr_t)wc[i].wr_id);
            if (wc[i].status != IBV_WC_SUCCESS) {
                c->failed = true;
                LOOM_WARN(kNet, "ib: %s: %s (status %d)", c->dev->props.name, wcError(wc[i].status), wc[i].status);
            }
            if (!r) continue; // a CTS write
            if (wc[i].status != IBV_WC_SUCCESS) r->err = loomRemoteError;
            else if (r->recv) r->size += ntohl(wc[i].imm_data);
            if (--r->pending == 0) r->done = true;
        }
    if (n < 0) c->failed = true;
}

// The socket reads EOF when the peer process is gone.
bool peerGone(Comm *c) {
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

loomResult_t ibTest(void *request, int *done, size_t *size) {
    Request *r = static_cast<Request *>(request);
    Comm *c = r->comm;
    *done = 0;
    pollCq(c);
    if (!r->done && (c->failed || peerGone(c))) {
        c->failed = true;
        r->done = true;
        r->err = loomRemoteError;
    }
    if (!r->done) return loomSuccess;
    loomResult_t err = r->err;
    size_t n = r->size;
    bool recv = r->recv;
    delete r;
    if (recv) ++c->completed;
    if (err != loomSuccess)
        return fail(err, "ib: %s: %s failed: the connection broke or a peer died", c->dev->props.name,
                    recv ? "irecv" : "isend");
    *done = 1;
    if (size) *size = n;
    return loomSuccess;
}

loomResult_t ibClose(void *comm) {
    destroy(static_cast<Comm *>(comm));
    return loomSuccess;
}

loomResult_t ibCloseListen(void *listenComm) {
    ListenComm *l = static_cast<ListenComm *>(listenComm);
    if (!l) return loomSuccess;
    destroy(l->accepting);
    close(l->fd);
    delete l;
    return loomSuccess;
}

const NetPlugin kIb = {"ib",        ibInit,     ibDevices,     ibGetProperties, ibListen,  ibConnect,
                       ibAccept,    ibRegMr,    ibRegMrDmaBuf, ibDeregMr,       ibIsend,   ibIrecv,
                       ibIflush,    ibTest,     ibClose,       ibClose,         ibCloseListen};

} // namespace

const NetPlugin *ibPlugin() { return &kIb; }

uint64_t ibAsyncEvents() { return g_asyncEvents.load(); }

size_t ibLiveRegistrations() {
    std::lock_guard<std::mutex> lock(g_regMu);
    return g_regs.size();
}

} // namespace net
} // namespace loom
