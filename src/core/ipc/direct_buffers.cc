/*
 * The caches of core/direct_buffers.h.
 */
#include "core/ipc/direct_buffers.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include <sys/stat.h>
#include <unistd.h>

#include "base/cuda_driver.h"
#include "base/debug.h"
#include "core/ipc/mapping_closer.h"
#include "core/comm/params.h"

namespace loom {

// A peer allocation mapped into this process on one GPU, for every
// communicator that reads it. With no reference left its close is posted
// (core/ipc/mapping_closer.h); the entry goes once the close is done.
struct SharedMapping {
    uint64_t pidNamespace;
    int pid, device;
    uint64_t bufferId, base, size; // the owner's
    char *at;
    int refs;
    bool stale;   // the owner freed it (a new allocation of its overlaps it): never handed out again
    bool closing; // no reference left: its close posted
    bool open;    // false once closed inside a call (the fallback below)
};

namespace {

// m maps an allocation of d's owner on `device`, and may be handed out.
bool sameOwner(const SharedMapping &m, const BufferDesc &d, int device) {
    return !m.stale && m.pidNamespace == d.pidNamespace && m.pid == d.pid && m.device == device;
}

// Ranges [a, a + as) and [b, b + bs) share a byte.
bool overlap(uint64_t a, uint64_t as, uint64_t b, uint64_t bs) { return a < b + bs && b < a + as; }

std::mutex g_mappingsLock;
std::vector<std::unique_ptr<SharedMapping>> g_mappings;

void eraseMapping(const SharedMapping *s) { // g_mappingsLock held
    auto i = std::find_if(g_mappings.begin(), g_mappings.end(),
                          [s](const std::unique_ptr<SharedMapping> &m) { return m.get() == s; });
    if (i != g_mappings.end()) g_mappings.erase(i);
}

// The described allocation's mapping here, handed out again: one more
// reference (its posted close taken back). Null where there is none, or
// where its close is running: then *closing is it. g_mappingsLock held.
SharedMapping *reuseMapping(const BufferDesc &d, int device, SharedMapping **closing) {
    *closing = nullptr;
    for (auto &m : g_mappings) {
        if (!sameOwner(*m, d, device) || m->bufferId != d.bufferId) continue;
        if (m->closing && !mappingCloser().takeBack(m.get())) {
            *closing = m.get();
            return nullptr;
        }
        m->closing = false;
        ++m->refs;
        return m.get();
    }
    return nullptr;
}

// The process's mapping of the described allocation on `device`, opened on
// first use; one more reference to it.
cudaError_t acquireMapping(const BufferDesc &d, int device, SharedMapping **out) {
    std::unique_lock<std::mutex> lock(g_mappingsLock);
    for (;;) {
        SharedMapping *closing;
        if ((*out = reuseMapping(d, device, &closing))) return cudaSuccess;
        if (!closing) break;
        // Being closed right now (let go, the closes held back passed it,
        // and wanted again): CUDA maps it once per process, so wait (this
        // waits for the process's kernels: header), then map anew. The entry
        // goes with its close.
        lock.unlock();
        mappingCloser().waitClosed(closing);
        lock.lock();
    }
    // The owner's allocations that this one replaced were freed (after the
    // calls that read them: the owner's call waits for its readers); their
    // mappings close when the last communicator lets go, or below where the
    // driver refuses the new one while they are open.
    for (auto &m : g_mappings)
        if (sameOwner(*m, d, device) && overlap(m->base, m->size, d.base, d.size)) {
            LOOM_TRACE(kColl, "direct: pid %d freed its allocation 0x%llx (buffer id %llu)", m->pid,
                       (unsigned long long)m->base, (unsigned long long)m->bufferId);
            m->stale = true;
        }
    void *at = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&at, d.handle, cudaIpcMemLazyEnablePeerAccess);
    if (e == cudaErrorAlreadyMapped) {
        cudaGetLastError();
        // "resource already mapped": the driver refuses while an older
        // mapping of the owner's memory is open or being closed (seen for
        // buffers freed and allocated again at the same range; header).
        // Close the owner's mappings that no call will use again here (this
        // waits for the process's kernels), wait for those being closed, and
        // map again.
        std::vector<const SharedMapping *> running;
        int closedHere = 0;
        for (auto &m : g_mappings) {
            if (!m->open || m->pid != d.pid || m->pidNamespace != d.pidNamespace || m->device != device ||
                !(m->stale || m->closing))
                continue;
            if (m->closing && !mappingCloser().takeBack(m.get())) {
                running.push_back(m.get());
                continue;
            }
            cudaIpcCloseMemHandle(m->at);
            m->open = false;
            ++closedHere;
        }
        g_mappings.erase(std::remove_if(g_mappings.begin(), g_mappings.end(),
                                        [](const std::unique_ptr<SharedMapping> &m) { return !m->open && m->closing; }),
                         g_mappings.end());
        lock.unlock();
        for (const SharedMapping *r : running) mappingCloser().waitClosed(r);
        lock.lock();
        SharedMapping *closing;
        if ((*out = reuseMapping(d, device, &closing))) return cudaSuccess; // mapped meanwhile by another thread
        LOOM_TRACE(kColl, "direct: mapping pid %d's allocation 0x%llx: resource already mapped; %d of its old "
                   "mappings closed here, %zu waited for; mapping again", d.pid, (unsigned long long)d.base,
                   closedHere, running.size());
        e = cudaIpcOpenMemHandle(&at, d.handle, cudaIpcMemLazyEnablePeerAccess);
    }
    if (e != cudaSuccess) return e;
    g_mappings.push_back(std::unique_ptr<SharedMapping>(new SharedMapping{
        d.pidNamespace, d.pid, device, d.bufferId, d.base, d.size, static_cast<char *>(at), 1, false, false, true}));
    *out = g_mappings.back().get();
    return cudaSuccess;
}

// One reference less; the last one posts the close (core/ipc/mapping_closer.h;
// closed here only where the closer has no thread).
void releaseMapping(SharedMapping *s) {
    std::lock_guard<std::mutex> lock(g_mappingsLock);
    if (--s->refs > 0) return;
    s->closing = true;
    if (!s->open) { // closed already (the fallback above)
        eraseMapping(s);
        return;
    }
    const bool posted = mappingCloser().post(s, s->device, s->at, [s] {
        std::lock_guard<std::mutex> relock(g_mappingsLock);
        eraseMapping(s);
    });
    if (posted) return;
    cudaIpcCloseMemHandle(s->at); // no closer thread: here, as before it
    eraseMapping(s);
}

// This process's pid namespace: processes in two namespaces may share a pid.
uint64_t pidNamespace() {
    static const uint64_t ns = [] {
        struct stat st;
        return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
    }();
    return ns;
}

} // namespace

BufferDesc DirectBuffers::describe(const void *ptr, int cudaDev) {
    BufferDesc d;
    memset(&d, 0, sizeof(d));
    const CudaDriver *drv = cudaDriver();
    if (!drv || !ptr) return d;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
    unsigned int type = 0;
    unsigned long long id = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    int ordinal = -1, ipc = 0;
    void *vals[] = {&type, &id, &start, &size, &ordinal, &ipc};
    if (drv->cuPointerGetAttributes(6, attrs, vals, (CUdeviceptr)ptr) != CUDA_SUCCESS) return d;
    if (type != CU_MEMORYTYPE_DEVICE || !ipc || ordinal != cudaDev || !start) return d;
    d.bufferId = id;
    d.base = (uint64_t)start;
    d.size = (uint64_t)size;
    d.pid = (int32_t)getpid();
    d.pidNamespace = pidNamespace();
    d.offset = (uint64_t)((uintptr_t)ptr - (uintptr_t)start);
    for (Described &e : described_)
        if (e.bufferId == id) {
            e.used = clock_;
            d.handle = e.handle;
            d.shareable = e.shareable;
            return d;
        }
    Described e{id, {}, false, clock_};
    if (cudaIpcGetMemHandle(&e.handle, reinterpret_cast<void *>(start)) == cudaSuccess) e.shareable = true;
    else cudaGetLastError(); // not shareable after all: FIFO
    if ((int)described_.size() >= kDescribed)
        described_.erase(std::min_element(described_.begin(), described_.end(),
                                          [](const Described &a, const Described &b) { return a.used < b.used; }));
    described_.push_back(e);
    d.handle = e.handle;
    d.shareable = e.shareable;
    LOOM_TRACE(kColl, "direct: allocation %p (buffer id %llu) %s", reinterpret_cast<void *>(start), id,
               e.shareable ? "shareable" : "not shareable");
    return d;
}

void DirectBuffers::unmap(Mapped &m) {
    // None of this communicator's kernels reads it any more: its reading
    // calls waited on the host (direct pairs and zero-copy are taken only
    // there), so this returns at once.
    if (m.read) cudaEventSynchronize(*m.read);
    m.read.reset();
    releaseMapping(m.shared);
    m.shared = nullptr;
}

loomResult_t DirectBuffers::map(int me, int q, const BufferDesc &d, int cudaDev, char **at) {
    if (params().directMapFail == me)
        return fail(loomUnhandledCudaError, "direct: cannot map rank %d's buffer: failure injected by "
                    "LOOM_DIRECT_MAP_FAIL=%d", q, me);
    for (size_t i = 0; i < mapped_.size();) {
        Mapped &m = mapped_[i];
        const SharedMapping &s = *m.shared;
        if (m.peer == q && overlap(s.base, s.size, d.base, d.size)) {
            if (s.bufferId == d.bufferId) { // hit
                m.used = clock_;
                *at = s.at + d.offset;
                return loomSuccess;
            }
            unmap(m); // the peer freed that allocation: its address holds a new one
            mapped_.erase(mapped_.begin() + (long)i);
            continue;
        }
        ++i;
    }
    int mine = 0;
    long lru = -1;
    for (size_t i = 0; i < mapped_.size(); ++i) {
        const Mapped &m = mapped_[i];
        if (m.peer != q) continue;
        ++mine;
        if (m.used < clock_ && (lru < 0 || m.used < mapped_[lru].used)) lru = (long)i;
    }
    if (mine >= kMappedPerPeer && lru >= 0) {
        if (!evictionSaid_)
            LOOM_INFO(kColl, "rank %d: %d of rank %d's buffers mapped: the least recently used is let go (closed on "
                      "the closer's thread, core/ipc/mapping_closer.h); said once per communicator", me, mine, q);
        evictionSaid_ = true;
        unmap(mapped_[lru]);
        mapped_.erase(mapped_.begin() + lru);
    }
    Mapped m{q, nullptr, nullptr, clock_};
    cudaError_t e = acquireMapping(d, cudaDev, &m.shared);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return fail(loomUnhandledCudaError, "direct: cannot map rank %d's buffer (allocation at 0x%llx): %s", q,
                    (unsigned long long)d.base, cudaGetErrorString(e));
    }
    mapped_.push_back(m);
    *at = m.shared->at + d.offset;
    LOOM_TRACE(kColl, "direct: mapped rank %d's allocation 0x%llx (buffer id %llu) at %p", q,
               (unsigned long long)d.base, (unsigned long long)d.bufferId, static_cast<void *>(m.shared->at));
    return loomSuccess;
}

loomResult_t DirectBuffers::markRead(cudaStream_t stream) {
    bool any = false;
    for (const Mapped &m : mapped_) any = any || m.used == clock_;
    if (!any) return loomSuccess;
    cudaEvent_t ev = nullptr;
    cudaError_t e = cudaSuccess;
    if (!freeEvents_.empty()) {
        ev = freeEvents_.back();
        freeEvents_.pop_back();
    } else {
        e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    }
    if (e == cudaSuccess && (e = cudaEventRecord(ev, stream)) != cudaSuccess) freeEvents_.push_back(ev);
    if (e != cudaSuccess) // the mappings keep their older events: released only at the communicator's end
        return fail(loomUnhandledCudaError, "direct: recording the read of the call's peer buffers: %s",
                    cudaGetErrorString(e));
    // One event for the call, held by each mapping it read; back in the pool
    // when the last of them lets go (re-recording it then is safe: nothing
    // waits for its old capture any more).
    std::shared_ptr<cudaEvent_t> read(new cudaEvent_t(ev), [this](cudaEvent_t *p) {
        freeEvents_.push_back(*p);
        delete p;
    });
    for (Mapped &m : mapped_)
        if (m.used == clock_) m.read = read;
    return loomSuccess;
}

void DirectBuffers::release() {
    for (Mapped &m : mapped_) unmap(m);
    mapped_.clear();
    described_.clear();
    for (cudaEvent_t e : freeEvents_) cudaEventDestroy(e);
    freeEvents_.clear();
}

} // namespace loom
