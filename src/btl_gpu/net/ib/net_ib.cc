/*
 * `ib` net plugin: native verbs (InfiniBand or RoCE), libibverbs via dlopen.
 * This file: registration (a refcounted cache), the data path and the plugin
 * table; devices are in ib_device.cc, connections in ib_connect.cc.
 *
 * Data: irecv posts a receive per QP (for the immediates) and RDMA-writes a
 * CTS entry {addr, rkey, size, tag} into the sender's ring; isend takes the
 * next entry and posts one signaled RDMA WRITE WITH IMM per QP carrying its
 * part of the payload, immediate = part size; the receive completions end the
 * irecv. iflush reads a byte of the buffer back through a loopback QP.
 */
#include "btl_gpu/net/ib/net_ib.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>

#include "btl_gpu/net/ib/ib_internal.h"
#include "base/debug.h"
#include "base/param_read.h"

namespace loom {
namespace net {

namespace ib {

std::mutex g_regMu;
std::vector<IbMr *> g_regs;

namespace {

enum class FlushPolicy { Auto, On, Off };

// LOOM_NET_GDR_FLUSH=auto|on|off; auto flushes GPU buffers only. Logged once.
FlushPolicy flushPolicy() {
    static FlushPolicy p = [] {
        const char *e = paramString("LOOM_NET_GDR_FLUSH");
        FlushPolicy f = !e || !strcmp(e, "auto") ? FlushPolicy::Auto : !strcmp(e, "on") ? FlushPolicy::On : FlushPolicy::Off;
        LOOM_INFO(kNet, "ib: GDR flush %s", f == FlushPolicy::Auto ? "auto: after receives into GPU memory"
                                             : f == FlushPolicy::On ? "on: after every receive" : "off");
        return f;
    }();
    return p;
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


const NetPlugin kIb = {"ib",        ibInit,     ibDevices,     ibGetProperties, ibListen,  ibConnect,
                       ibAccept,    ibRegMr,    ibRegMrDmaBuf, ibDeregMr,       ibIsend,   ibIrecv,
                       ibIflush,    ibTest,     ibClose,       ibClose,         ibCloseListen,
                       nullptr /* the NIC keeps RC connections up by itself */, ibAbandonConnect};


} // namespace
} // namespace ib

const NetPlugin *ibPlugin() { return &ib::kIb; }

size_t ibLiveRegistrations() {
    std::lock_guard<std::mutex> lock(ib::g_regMu);
    return ib::g_regs.size();
}

uint64_t ibAsyncEvents() { return ib::g_asyncEvents.load(); }

} // namespace net
} // namespace loom
