#include "proxy/proxy.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "core/debug.h"

namespace loom {

Proxy::Proxy(const net::NetPlugin *plugin, int idleSpinUs)
    : plugin_(plugin), idleSpinUs_(idleSpinUs), thread_([this] { run(); }) {}

Proxy::~Proxy() {
    {
        std::lock_guard<std::mutex> g(mu_);
        stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
}

int Proxy::addSend(void *sendComm, const ProxyFifo &fifo, int tag) {
    std::lock_guard<std::mutex> g(mu_);
    return add(true, sendComm, fifo, tag);
}

int Proxy::addRecv(void *recvComm, const ProxyFifo &fifo, int tag) {
    std::lock_guard<std::mutex> g(mu_);
    return add(false, recvComm, fifo, tag);
}

int Proxy::add(bool send, void *comm, const ProxyFifo &fifo, int tag) {
    Conn c;
    c.send = send;
    c.comm = comm;
    c.fifo = fifo;
    c.tag = tag;
    c.requests.assign(fifo.nslots, nullptr);
    conns_.push_back(c);
    return (int)conns_.size() - 1;
}

void Proxy::remove(int id) {
    std::lock_guard<std::mutex> g(mu_);
    conns_[id].active = false;
}

void Proxy::kick() {
    {
        std::lock_guard<std::mutex> g(mu_);
        kicked_ = true;
    }
    cv_.notify_one();
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
            error_.store(r);
            c.active = false;
            return true;
        }
        if (!finished) break;
        c.requests[slot] = nullptr;
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
            error_.store(r);
            c.active = false;
            return true;
        }
        if (!req) break; // the network is busy: later
        c.requests[slot] = req;
        ++c.posted;
        moved = true;
    }
    return moved;
}

void Proxy::run() {
    using clock = std::chrono::steady_clock;
    constexpr int kMinIdleSleepUs = 1000, kMaxIdleSleepUs = 16000;
    int idleSleepUs = kMinIdleSleepUs;
    auto lastMove = clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        bool moved = false, busy = false;
        for (Conn &c : conns_) {
            if (!c.active) continue;
            moved |= progress(c);
            // Sends in flight finish by themselves; receives stay posted for
            // data that may not come for a long time, so they keep nobody awake.
            busy |= c.send && c.posted != c.done;
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
            // Spinning: let add/remove/kick in between passes.
            lock.unlock();
            lock.lock();
            continue;
        }
        // Idle: sleep until kicked. A GPU that posts without a kick is still
        // served at the next timeout, which backs off from 1 to 16 ms while
        // nothing happens (each wake-up costs a network progress call).
        sleeps_.fetch_add(1);
        cv_.wait_for(lock, std::chrono::microseconds(idleSleepUs), [this] { return stop_ || kicked_; });
        idleSleepUs = std::min(idleSleepUs * 2, kMaxIdleSleepUs);
    }
}

} // namespace loom
