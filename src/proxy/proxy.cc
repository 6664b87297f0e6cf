#include "proxy/proxy.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "base/debug.h"

namespace loom {

// Holds mu_ for a caller on another thread, announced to the spinning proxy.
struct Proxy::Update {
    Proxy *p;
    explicit Update(Proxy *proxy) : p(proxy) {
        p->waiters_.fetch_add(1, std::memory_order_acq_rel);
        p->mu_.lock();
        p->waiters_.fetch_sub(1, std::memory_order_acq_rel);
    }
    ~Update() { p->mu_.unlock(); }
};

Proxy::Proxy(const net::NetPlugin *plugin, int idleSpinUs)
    : plugin_(plugin), idleSpinUs_(idleSpinUs), thread_([this] { run(); }) {}

Proxy::~Proxy() {
    {
        Update g(this);
        stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
}

int Proxy::addSend(void *sendComm, const ProxyFifo &fifo, int tag) {
    Update g(this);
    return add(true, sendComm, fifo, tag);
}

int Proxy::addRecv(void *recvComm, const ProxyFifo &fifo, int tag) {
    Update g(this);
    return add(false, recvComm, fifo, tag);
}

int Proxy::add(bool send, void *comm, const ProxyFifo &fifo, int tag) {
    Conn c;
    c.send = send;
    c.comm = comm;
    c.fifo = fifo;
    c.tag = tag;
    c.requests.assign(fifo.nslots, nullptr);
    c.flushing.assign(fifo.nslots, 0);
    size_t id = 0;
    while (id < conns_.size() && !conns_[id].removed) ++id;
    if (id == (size_t)kMaxConns) return -1;
    targets_[id].store(0);
    if (id == conns_.size()) conns_.push_back(c);
    else conns_[id] = c;
    return (int)id;
}

void Proxy::remove(int id) {
    Update g(this);
    conns_[id].active = false;
    conns_[id].removed = true;
}

bool Proxy::quiesce(int id, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
        {
            Update g(this);
            const Conn &c = conns_[id];
            if (c.abandoned) return false;
            if (!c.active || (c.done >= targets_[id].load() && c.done == c.posted && (!c.send || c.done >= *c.fifo.tail)))
                return c.active;
            kicked_ = true;
        }
        cv_.notify_one();
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

void Proxy::post(int id, uint64_t steps) {
    // Both seq_cst: either the thread's check before it sleeps sees the new
    // target (postedWork), or this sees it sleeping and wakes it.
    targets_[id].fetch_add(steps);
    if (!sleeping_.load()) return;
    {
        Update g(this);
        kicked_ = true;
    }
    cv_.notify_one();
}

void Proxy::dropPosted(int id) {
    Update g(this);
    targets_[id].store(conns_[id].done);
    conns_[id].abandoned = true;
}

bool Proxy::postedWork() const {
    for (size_t i = 0; i < conns_.size(); ++i)
        if (conns_[i].active && !conns_[i].abandoned && conns_[i].done < targets_[i].load()) return true;
    return false;
}

void Proxy::kick() {
    {
        Update g(this);
        kicked_ = true;
    }
    cv_.notify_one();
}

bool Proxy::failConn(Conn &c, loomResult_t r) {
    error_.store(r);
    c.err = r;
    c.active = false;
    return true;
}

loomResult_t Proxy::error(int id) {
    Update g(this);
    return conns_[id].err;
}

// One pass over a connection: complete what finished (in order: a step is
// released only after all earlier ones), then start what may start.
bool Proxy::progress(Conn &c) {
    bool moved = false;
    const ProxyFifo &f = c.fifo;
    while (c.done < c.posted) {
        const int slot = (int)(c.done % f.nslots);
        int finished = 0;
        size_t bytes = 0;
        loomResult_t r = plugin_->test(c.requests[slot], &finished, &bytes);
        if (r != loomSuccess) {
            return failConn(c, r);
        }
        if (!finished) break;
        c.requests[slot] = nullptr;
        if (!c.send && f.flush && !c.flushing[slot]) {
            // Arrived in GPU memory: make it visible to the GPU before the tail.
            void *freq = nullptr;
            r = plugin_->iflush(c.comm, f.slots + (size_t)slot * f.slotBytes, bytes, f.mhandle, &freq);
            if (r != loomSuccess) {
                return failConn(c, r);
            }
            if (freq) {
                c.requests[slot] = freq;
                c.flushing[slot] = 1;
                f.sizes[slot] = bytes; // kept for the tail, written again below
                moved = true;
                break; // test it on the next pass (steps are released in order)
            }
        }
        if (!c.send && c.flushing[slot]) bytes = f.sizes[slot];
        c.flushing[slot] = 0;
        ++c.done;
        if (c.send) {
            *f.head = c.done; // slot free: credit for the GPU
        } else {
            f.sizes[slot] = bytes;
            std::atomic_thread_fence(std::memory_order_release); // data and size before the tail
            *f.tail = c.done; // data in place: the GPU may read it
        }
        moved = true;
    }
    for (;;) {
        const uint64_t step = c.posted;
        const int slot = (int)(step % f.nslots);
        void *req = nullptr;
        loomResult_t r;
        if (c.send) {
            if (step >= *f.tail) break; // the GPU has not written it yet
            std::atomic_thread_fence(std::memory_order_acquire); // the tail before the data
            r = plugin_->isend(c.comm, f.slots + (size_t)slot * f.slotBytes, f.sizes[slot], c.tag, f.mhandle, &req);
        } else {
            if (step - *f.head >= (uint64_t)f.nslots) break; // the GPU still reads that slot
            r = plugin_->irecv(c.comm, f.slots + (size_t)slot * f.slotBytes, f.slotBytes, c.tag, f.mhandle, &req);
        }
        if (r != loomSuccess) {
            return failConn(c, r);
        }
        if (!req) break; // the network is busy: later
        c.requests[slot] = req;
        ++c.posted;
        moved = true;
    }
    return moved;
}

void Proxy::run() {
    markBackgroundThread();
    using clock = std::chrono::steady_clock;
    constexpr int kMinIdleSleepUs = 1000, kMaxIdleSleepUs = 16000;
    int idleSleepUs = kMinIdleSleepUs;
    auto lastMove = clock::now();
    bool woke = false;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        bool moved = false, busy = false;
        // Idle connections get the plugin's upkeep every 1024th pass and at
        // every wake-up from sleep (at least every 16 ms).
        const bool upkeep = plugin_->progress && (++passes_ % 1024 == 0 || woke);
        woke = false;
        for (size_t i = 0; i < conns_.size(); ++i) {
            Conn &c = conns_[i];
            if (!c.active) continue;
            if (upkeep && c.posted == c.done) {
                loomResult_t r = plugin_->progress(c.comm);
                if (r != loomSuccess) {
                    moved |= failConn(c, r);
                    continue;
                }
            }
            moved |= progress(c);
            // Sends in flight finish by themselves, and steps of a collective
            // the host posted will come; receives posted ahead for data that
            // may not come for a long time keep nobody awake.
            busy |= !c.abandoned && ((c.send && c.posted != c.done) || c.done < targets_[i].load());
        }
        if (moved || busy || kicked_) {
            lastMove = clock::now();
            idleSleepUs = kMinIdleSleepUs;
        }
        if (moved || busy || kicked_ ||
            clock::now() - lastMove < std::chrono::microseconds(idleSpinUs_)) {
            if (kicked_) {
                kicked_ = false;
                lastMove = clock::now();
            }
            // Spinning: let add/remove/post/kick in between passes. A mutex
            // unlocked and locked again at once is mostly re-taken by this
            // thread, so callers announce themselves and are waited for.
            lock.unlock();
            while (waiters_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
            lock.lock();
            continue;
        }
        // Idle: sleep until kicked. A GPU that posts without a kick is still
        // served at the next timeout, which backs off from 1 to 16 ms while
        // nothing happens (each wake-up costs a network progress call).
        sleeps_.fetch_add(1);
        sleeping_.store(true); // before postedWork() reads the targets (see post())
        cv_.wait_for(lock, std::chrono::microseconds(idleSleepUs), [this] { return stop_ || kicked_ || postedWork(); });
        sleeping_.store(false);
        woke = true;
        idleSleepUs = std::min(idleSleepUs * 2, kMaxIdleSleepUs);
    }
}

} // namespace loom
