/*
 * `ib` plugin, connections: the listen handle is a side channel's address
 * and secret (side_channel.h); connect and accept are non-blocking state
 * machines exchanging QP numbers, PSN, LID/GID, MTU and the sender's CTS ring
 * over that socket (the sender's hello carries its half), then move RC QPs
 * through INIT/RTR/RTS. The socket stays open: its EOF tells a receiver the sender is
 * gone. The receiver also gets a loopback QP for flush reads.
 */
#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <sys/socket.h>
#include <unistd.h>

#include "btl_gpu/net/ib/ib_internal.h"
#include "base/debug.h"
#include "base/param_read.h"

namespace loom {
namespace net {
namespace ib {

namespace {

// ------------------------------------------------------------------ sockets

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
    int n = (int)paramLong("LOOM_IB_QPS_PER_CONN");
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

} // namespace

// ------------------------------------------------------------------ connect / accept

loomResult_t ibListen(int dev, Handle *handle, void **listenComm) {
    if (dev < 0 || dev >= (int)g_devs.size()) return fail(loomInvalidUsage, "ib: listen on device %d", dev);
    memset(handle, 0, sizeof(*handle));
    HandleData *h = reinterpret_cast<HandleData *>(handle->data);
    SideListener *side = nullptr;
    loomResult_t r = SideListener::open(sideLocalIp(), sizeof(ConnInfo), &h->side, &side);
    if (r != loomSuccess) return r;
    h->magic = kMagic;
    *listenComm = new ListenComm{&g_devs[dev], side};
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
        sa.sin_addr.s_addr = h->side.ip;
        sa.sin_port = h->side.port;
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
        c->hello = sideHello(h->side, &c->local, sizeof(ConnInfo));
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
    if (!err && c->state == 1 && pump(c->fd, true, c->hello.data(), c->hello.size(), &c->moved, &err)) {
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

loomResult_t ibAbandonConnect(Handle *handle) {
    HandleData *h = reinterpret_cast<HandleData *>(handle->data);
    if (h->magic != kMagic) return fail(loomInvalidArgument, "ib: not an ib listen handle");
    if (h->pending) destroy(static_cast<Comm *>(h->pending));
    h->pending = nullptr;
    return loomSuccess;
}

loomResult_t ibAccept(void *listenComm, void **recvComm) {
    *recvComm = nullptr;
    ListenComm *l = static_cast<ListenComm *>(listenComm);
    Comm *c = l->accepting;
    bool err = false;
    if (!c) {
        // Only a connector that presented the handle's secret gets this far.
        ConnInfo remote;
        int fd = -1;
        loomResult_t r = l->side->poll(&remote, &fd);
        if (r != loomSuccess || fd < 0) return r;
        c = new Comm;
        c->dev = l->dev;
        c->fd = fd;
        c->remote = remote;
        // As many QPs as the sender made.
        int nqp = (int)c->remote.nqp;
        r = nqp >= 1 && nqp <= kMaxQps ? createQp(c, false, nqp)
                                        : fail(loomRemoteError, "ib: accept: the sender asks for %d QPs", nqp);
        if (r != loomSuccess) {
            destroy(c);
            return r;
        }
        l->accepting = c;
    }
    if (pump(c->fd, true, &c->local, sizeof(ConnInfo), &c->moved, &err)) {
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


loomResult_t ibClose(void *comm) {
    destroy(static_cast<Comm *>(comm));
    return loomSuccess;
}

loomResult_t ibCloseListen(void *listenComm) {
    ListenComm *l = static_cast<ListenComm *>(listenComm);
    if (!l) return loomSuccess;
    destroy(l->accepting);
    delete l->side;
    delete l;
    return loomSuccess;
}


} // namespace ib
} // namespace net
} // namespace loom
