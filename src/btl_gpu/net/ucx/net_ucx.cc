/*
 * `ucx` net plugin: loom's network interface over UCP tag matching, for any
 * fabric UCX drives (and TCP, which the CPU tests use on loopback).
 *
 * One UCP worker per communicator. The receiver's worker address is the
 * listen handle; the sender connects an endpoint to it and sends a hello
 * carrying the handle's secret and its own worker address, so the receiver
 * connects back (only to a sender that had the handle). Both
 * endpoints use peer error handling: a peer that dies fails the
 * communicator's requests instead of leaving them pending forever.
 */
#include "btl_gpu/net/ucx/net_ucx.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <set>
#include <string>
#include <cstdlib>
#include <vector>


#include "btl_gpu/net/ucx/ucp_api.h"
#include "base/debug.h"
#include "base/param_read.h"

namespace loom {
namespace net {

namespace {

constexpr uint64_t kHelloTag = 1;         // connection handshake
constexpr uint64_t kDataBit = 1ull << 63; // data: kDataBit | user tag
constexpr uint64_t kFullMask = ~0ull;
constexpr uint32_t kMagic = 0x6d6f6f6c;   // "loom"

// The listen handle: the receiving worker's address, plus the connect state
// of the sender that uses it (NCCL-style: connect is re-entered with the handle).
using HandleData = UcxHandle;

ucp_context_h g_ctx = nullptr;

// Set by init; every other entry point runs after a successful init.
const Ucp *U() { return ucp(); }

struct Request;

struct Comm {
    ucp_worker_h worker = nullptr;
    ucp_ep_h ep = nullptr; // sender: to the receiver; receiver: back to the sender
    bool failed = false;
    bool sent = false;        // some data went out on ep: flushed before it closes
    Request *hello = nullptr; // handshake message in flight (an ordinary request)
    std::vector<char> helloBuf;
    uint8_t secret[kSideSecretBytes] = {}; // listen comm: what the hello must start with
    std::set<Request *> live; // posted, not yet released: cancelled when the comm closes
};

struct Request {
    Comm *comm;
    void *ucx = nullptr;
    bool recv;
    bool done = false;
    ucs_status_t status = UCS_OK;
    size_t size;
};

void onEpError(void *arg, ucp_ep_h, ucs_status_t status) {
    Comm *c = static_cast<Comm *>(arg);
    c->failed = true;
    LOOM_WARN(kNet, "ucx: peer failed or closed (%s)", U()->statusString(status));
}

void onSend(void *, ucs_status_t status, void *user) {
    Request *r = static_cast<Request *>(user);
    r->status = status;
    r->done = true;
}

void onRecv(void *, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
    Request *r = static_cast<Request *>(user);
    r->status = status;
    if (status == UCS_OK) r->size = info->length;
    r->done = true;
}

// UCP's tag API registers (or copies) internally; the handle only records
// the range and its memory type. GPU memory needs a UCX built with CUDA.
struct UcxMr {
    void *data;
    size_t size;
    MemType type;
};

// LOOM_UCX_MEMTYPE_HINT=0: let UCX detect memory types (for comparison).
bool memoryTypeHint() {
    static const bool on = paramLong("LOOM_UCX_MEMTYPE_HINT") != 0;
    return on;
}

// A tagged send (to the comm's endpoint) or receive (on its worker); the
// callbacks complete the Request.
loomResult_t post(Comm *c, bool recv, void *data, size_t size, uint64_t tag, Request **out, bool sync,
                  const UcxMr *mr = nullptr) {
    Request *r = new Request{c, nullptr, recv, false, UCS_OK, size};
    ucp_request_param_t p;
    memset(&p, 0, sizeof(p));
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.user_data = r;
    if (mr && memoryTypeHint()) {
        // Said, not detected: a CUDA-aware UCX otherwise asks the driver
        // about every buffer (pinned host memory is not in its cache).
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        p.memory_type = mr->type == MemType::Cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    }
    if (recv) {
        p.cb.recv = onRecv;
        r->ucx = U()->tagRecvNbx(c->worker, data, size, tag, kFullMask, &p);
    } else {
        p.cb.send = onSend;
        r->ucx = sync ? U()->tagSendSyncNbx(c->ep, data, size, tag, &p) : U()->tagSendNbx(c->ep, data, size, tag, &p);
    }
    if (UCS_PTR_IS_ERR(r->ucx)) {
        ucs_status_t s = UCS_PTR_STATUS(r->ucx);
        delete r;
        return fail(loomSystemError, "ucx: %s: %s", recv ? "receive" : "send", U()->statusString(s));
    }
    c->live.insert(r);
    *out = r;
    return loomSuccess;
}

void release(Request *r) {
    r->comm->live.erase(r);
    U()->requestFree(r->ucx);
    delete r;
}

loomResult_t ucsFail(const char *what, ucs_status_t s) {
    return fail(loomSystemError, "ucx: %s: %s", what, U()->statusString(s));
}

loomResult_t newWorker(Comm *c) {
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // Created and closed on the application's thread, progressed by a proxy
    // thread, never both at once (the proxy's lock hands it over).
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    ucs_status_t s = U()->workerCreate(g_ctx, &wp, &c->worker);
    return s == UCS_OK ? loomSuccess : ucsFail("worker", s);
}

loomResult_t connectEp(Comm *c, const void *address) {
    ucp_ep_params_t ep;
    memset(&ep, 0, sizeof(ep));
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = static_cast<const ucp_address_t *>(address);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = onEpError;
    ep.err_handler.arg = c;
    ucs_status_t s = U()->epCreate(c->worker, &ep, &c->ep);
    return s == UCS_OK ? loomSuccess : ucsFail("endpoint", s);
}

// Waits, bounded in time, for a UCX request of a closing connection;
// whether it finished.
bool drain(ucp_worker_h w, void *req, double seconds, const char *what) {
    if (!UCS_PTR_IS_PTR(req)) return true;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (U()->requestCheckStatus(req) == UCS_INPROGRESS && std::chrono::steady_clock::now() < end)
        for (int i = 0; i < 100; ++i) U()->workerProgress(w);
    const bool done = U()->requestCheckStatus(req) != UCS_INPROGRESS;
    if (!done && what) LOOM_WARN(kNet, "ucx: %s did not finish within %.0f s", what, seconds);
    U()->requestFree(req);
    return done;
}

void destroy(Comm *c) {
    if (!c) return;
    if (c->ep) {
        ucp_request_param_t p;
        memset(&p, 0, sizeof(p));
        // A sender's flush first, bounded: a synchronous send completes once
        // the receiver matched it, but a rendezvous message's data may still
        // be queued here (TCP: in UCX's send queue behind a full socket), and
        // a forced close would drop it; the receiver, steps behind, would
        // wait for steps that never come. The receiver's worker must be
        // progressed meanwhile (loom's proxy does it while the link is
        // open; loom closes send links before receive links). A connection
        // that failed or only received has nothing to flush.
        if (c->sent && !c->failed && !drain(c->worker, U()->epFlushNbx(c->ep, &p), 1.0, nullptr))
            LOOM_INFO(kNet, "ucx: flushing a closing send connection did not finish within 1 s (peer gone?)");
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        // Then forced: a graceful close waits for a peer that may have closed
        // first — up to UCX's keepalive timeout, 30 s per connection in the
        // two-way test.
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
        drain(c->worker, U()->epCloseNbx(c->ep, &p), 1.0, "a closing connection");
    }
    // Requests nobody will test any more (the hello, receives the proxy had
    // posted ahead): cancelled, completed, freed.
    for (Request *r : c->live) {
        U()->requestCancel(c->worker, r->ucx);
        drain(c->worker, r->ucx, 1.0, "a cancelled request");
        delete r;
    }
    c->live.clear();
    if (c->worker) U()->workerDestroy(c->worker);
    delete c;
}

// ------------------------------------------------------------------ the table

loomResult_t ucxInit() {
    if (g_ctx) return loomSuccess;
    if (!U()) return fail(loomNotSupported, "ucx: libucp.so.0 not available");
    ucp_config_t *cfg;
    // TCP moves a message in segments of TX/RX_SEG_SIZE (8 KiB by default):
    // with loom's 512 KiB steps, 256 KiB segments more than doubled the
    // bandwidth over TCP (docs/performance.md, "Measurements behind the
    // code"). Unless the user chose. Set in the environment (not with
    // ucp_config_modify, which did not reach the TCP transport of UCX 1.16)
    // before UCX reads it; once, on the thread creating loom's first network
    // communicator.
    for (const char *name : {"UCX_TCP_TX_SEG_SIZE", "UCX_TCP_RX_SEG_SIZE"})
        if (!getenv(name)) {
            setenv(name, "256k", 0);
            LOOM_INFO(kNet, "ucx: %s=256k (loom's default; set it to override)", name);
        }
    ucs_status_t s = U()->configRead(nullptr, nullptr, &cfg);
    if (s != UCS_OK) return ucsFail("config", s);
    ucp_params_t p;
    memset(&p, 0, sizeof(p));
    // Workers are created on the application's thread while the proxy thread
    // progresses others: the context's shared state must be thread-safe.
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_TAG;
    p.mt_workers_shared = 1;
    s = U()->initVersion(UCP_API_MAJOR, UCP_API_MINOR, &p, cfg, &g_ctx);
    U()->configRelease(cfg);
    return s == UCS_OK ? loomSuccess : ucsFail("init", s);
}

loomResult_t ucxDevices(int *n) {
    *n = 1; // UCX chooses and aggregates the interfaces itself
    return loomSuccess;
}

loomResult_t ucxGetProperties(int dev, Properties *p) {
    if (dev != 0) return fail(loomInvalidArgument, "ucx: no device %d", dev);
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "ucx");
    p->maxRecvs = 1;
    return loomSuccess; // speed, latency, PCI path: unknown to the UCP API
}

loomResult_t ucxListen(int dev, Handle *handle, void **listenComm) {
    if (!g_ctx || dev != 0) return fail(loomInvalidUsage, "ucx: listen before init or on device %d", dev);
    Comm *c = new Comm;
    loomResult_t r = newWorker(c);
    ucp_address_t *addr = nullptr;
    size_t len = 0;
    if (r == loomSuccess) {
        ucs_status_t s = U()->workerGetAddress(c->worker, &addr, &len);
        if (s != UCS_OK) r = ucsFail("worker address", s);
    }
    HandleData *h = reinterpret_cast<HandleData *>(handle->data);
    if (r == loomSuccess && len > sizeof(h->addr))
        r = fail(loomNotSupported, "ucx: worker address of %zu bytes exceeds the %zu-byte handle (set UCX_TLS)", len,
                 sizeof(h->addr));
    if (r == loomSuccess) {
        memset(handle, 0, sizeof(*handle));
        h->magic = kMagic;
        h->addrLen = (uint32_t)len;
        memcpy(h->addr, addr, len);
        sideNewSecret(c->secret);
        memcpy(h->secret, c->secret, kSideSecretBytes);
    }
    if (addr) U()->workerReleaseAddress(c->worker, addr);
    if (r != loomSuccess) {
        destroy(c);
        return r;
    }
    *listenComm = c;
    return loomSuccess;
}

loomResult_t ucxConnect(int dev, Handle *handle, void **sendComm) {
    *sendComm = nullptr;
    HandleData *h = reinterpret_cast<HandleData *>(handle->data);
    if (h->magic != kMagic) return fail(loomInvalidArgument, "ucx: not a ucx listen handle");
    Comm *c = static_cast<Comm *>(h->pending);
    if (!c) { // first call: endpoint, then the hello with our address
        c = new Comm;
        loomResult_t r = newWorker(c);
        if (r == loomSuccess) r = connectEp(c, h->addr);
        ucp_address_t *mine = nullptr;
        size_t len = 0;
        if (r == loomSuccess && U()->workerGetAddress(c->worker, &mine, &len) != UCS_OK)
            r = fail(loomSystemError, "ucx: worker address");
        if (r != loomSuccess) {
            destroy(c);
            return r;
        }
        c->helloBuf.assign(reinterpret_cast<const char *>(h->secret),
                           reinterpret_cast<const char *>(h->secret) + kSideSecretBytes);
        c->helloBuf.insert(c->helloBuf.end(), reinterpret_cast<char *>(mine), reinterpret_cast<char *>(mine) + len);
        U()->workerReleaseAddress(c->worker, mine);
        r = post(c, false, c->helloBuf.data(), c->helloBuf.size(), kHelloTag, &c->hello, false);
        if (r != loomSuccess) {
            destroy(c);
            return r;
        }
        h->pending = c;
    }
    U()->workerProgress(c->worker);
    if (!c->hello->done && !c->failed) return loomSuccess; // not yet: call again
    h->pending = nullptr;
    bool sent = c->hello->done && c->hello->status == UCS_OK;
    if (c->hello->done) {
        release(c->hello);
        c->hello = nullptr;
    }
    if (c->failed || !sent) {
        destroy(c);
        return fail(loomRemoteError, "ucx: connect: the receiver did not answer");
    }
    *sendComm = c;
    return loomSuccess;
}

loomResult_t ucxAccept(void *listenComm, void **recvComm) {
    *recvComm = nullptr;
    Comm *l = static_cast<Comm *>(listenComm);
    if (!l || !l->worker) return fail(loomInvalidUsage, "ucx: accept on a closed or used listen comm");
    if (!l->hello) {
        l->helloBuf.resize(kHandleBytes);
        loomResult_t r = post(l, true, l->helloBuf.data(), l->helloBuf.size(), kHelloTag, &l->hello, false);
        if (r != loomSuccess) return r;
    }
    U()->workerProgress(l->worker);
    if (!l->hello->done) return loomSuccess; // not yet: call again
    ucs_status_t hs = l->hello->status;
    l->helloBuf.resize(l->hello->size);
    release(l->hello);
    l->hello = nullptr;
    if (hs != UCS_OK) return ucsFail("accept hello", hs);
    if (l->helloBuf.size() <= kSideSecretBytes ||
        !sideSameSecret(reinterpret_cast<const uint8_t *>(l->helloBuf.data()), l->secret)) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true))
            LOOM_WARN(kNet, "ucx: ignored a hello without the listen handle's secret (further ones at INFO)");
        else
            LOOM_INFO(kNet, "ucx: ignored a hello without the listen handle's secret");
        return loomSuccess; // the next call posts the receive again
    }
    // The worker moves to the receive comm; the listen comm stays empty.
    Comm *c = new Comm;
    c->worker = l->worker;
    l->worker = nullptr;
    loomResult_t r = connectEp(c, l->helloBuf.data() + kSideSecretBytes);
    if (r != loomSuccess) {
        destroy(c);
        return r;
    }
    *recvComm = c;
    return loomSuccess;
}

loomResult_t ucxRegMr(void *, void *data, size_t size, MemType type, void **mhandle) {
    *mhandle = new (std::nothrow) UcxMr{data, size, type};
    return *mhandle ? loomSuccess : fail(loomSystemError, "ucx: out of memory");
}

loomResult_t ucxRegMrDmaBuf(void *, void *, size_t, MemType, int, size_t, void **) {
    return fail(loomNotSupported, "ucx: no dma-buf registration");
}

loomResult_t ucxDeregMr(void *, void *mhandle) {
    delete static_cast<UcxMr *>(mhandle);
    return loomSuccess;
}

loomResult_t postData(Comm *c, bool recv, void *data, size_t size, int tag, const UcxMr *mr, void **request) {
    *request = nullptr;
    if (!c) return fail(loomInvalidArgument, "ucx: NULL communicator");
    // A receive may still find its message: what a closing sender sent
    // before it went sits in the worker's unexpected queue. test() cancels it
    // if nothing is there.
    if (c->failed && !recv) return fail(loomRemoteError, "ucx: isend on a failed connection");
    if (tag < 0) return fail(loomInvalidArgument, "ucx: negative tag %d", tag);
    c->sent |= !recv;
    // Sends are synchronous: one completes when the receiver has matched it
    // (not when UCX has copied it); a rendezvous message's data may follow
    // later, which destroy() flushes before it closes. The proxy keeps
    // several in flight, which hides the acknowledgement's round trip.
    Request *r = nullptr;
    loomResult_t res = post(c, recv, data, size, kDataBit | (uint32_t)tag, &r, !recv, mr);
    *request = r;
    return res;
}

loomResult_t ucxIsend(void *comm, void *data, size_t size, int tag, void *mhandle, void **request) {
    return postData(static_cast<Comm *>(comm), false, data, size, tag, static_cast<UcxMr *>(mhandle), request);
}

loomResult_t ucxIrecv(void *comm, void *data, size_t size, int tag, void *mhandle, void **request) {
    return postData(static_cast<Comm *>(comm), true, data, size, tag, static_cast<UcxMr *>(mhandle), request);
}

loomResult_t ucxIflush(void *, void *, size_t, void *, void **request) {
    *request = nullptr; // host memory, or UCX's own GPU support: nothing to flush
    return loomSuccess;
}

loomResult_t ucxTest(void *request, int *done, size_t *size) {
    Request *r = static_cast<Request *>(request);
    *done = 0;
    U()->workerProgress(r->comm->worker);
    if (!r->done && r->comm->failed) {
        // What the peer sent before it went may still be in this worker's
        // sockets: progress until the worker is idle (bounded) before giving
        // up on the receive. A receive is not tied to the dead endpoint:
        // then cancel it ourselves.
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        for (int idle = 0; !r->done && idle < 100 && std::chrono::steady_clock::now() < end;)
            idle = U()->workerProgress(r->comm->worker) ? 0 : idle + 1;
        if (!r->done) U()->requestCancel(r->comm->worker, r->ucx);
        for (int i = 0; i < 1000 && !r->done; ++i) U()->workerProgress(r->comm->worker);
    }
    if (!r->done) return loomSuccess;
    ucs_status_t s = r->status;
    size_t n = r->size;
    bool recv = r->recv;
    release(r);
    if (s == UCS_ERR_MESSAGE_TRUNCATED)
        return fail(loomInvalidArgument, "ucx: received more than the %zu bytes posted", n);
    if (s != UCS_OK) return fail(loomRemoteError, "ucx: %s failed: %s", recv ? "irecv" : "isend", U()->statusString(s));
    *done = 1;
    if (size) *size = n;
    return loomSuccess;
}

loomResult_t ucxClose(void *comm) {
    destroy(static_cast<Comm *>(comm));
    return loomSuccess;
}


// An idle worker still has work: wire-up replies, keepalives, the peer's
// connection checks. UCX does it only inside ucp_worker_progress.
loomResult_t ucxProgress(void *comm) {
    Comm *c = static_cast<Comm *>(comm);
    if (c && c->worker) U()->workerProgress(c->worker);
    return loomSuccess;
}

loomResult_t ucxAbandonConnect(Handle *handle) {
    HandleData *h = reinterpret_cast<HandleData *>(handle->data);
    if (h->magic != kMagic) return fail(loomInvalidArgument, "ucx: not a ucx listen handle");
    destroy(static_cast<Comm *>(h->pending));
    h->pending = nullptr;
    return loomSuccess;
}

const NetPlugin kUcx = {"ucx",         ucxInit,         ucxDevices,   ucxGetProperties, ucxListen,
                        ucxConnect,    ucxAccept,       ucxRegMr,     ucxRegMrDmaBuf,   ucxDeregMr,
                        ucxIsend,      ucxIrecv,        ucxIflush,    ucxTest,          ucxClose,
                        ucxClose,      ucxClose,        ucxProgress,  ucxAbandonConnect};

} // namespace

const NetPlugin *ucxPlugin() { return &kUcx; }

} // namespace net
} // namespace loom
