/*
 * The closer thread of core/mapping_closer.h.
 */
#include "core/mapping_closer.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include <cuda_runtime.h>

#include "core/debug.h"

namespace loom {
namespace mapping_closer {

namespace {

struct Close {
    int device;
    void *at;
    std::function<void()> closed;
};

void closeNow(const Close &c) {
    int was = -1;
    const bool switched = cudaGetDevice(&was) == cudaSuccess && was != c.device &&
                          cudaSetDevice(c.device) == cudaSuccess;
    const cudaError_t e = cudaIpcCloseMemHandle(c.at);
    if (e != cudaSuccess) {
        cudaGetLastError();
        LOOM_WARN(kColl, "closing the mapping of a peer's buffer at %p on GPU %d: %s", c.at, c.device,
                  cudaGetErrorString(e));
    }
    if (switched) cudaSetDevice(was);
    if (c.closed) c.closed();
}

// One per process: made at the first post, stopped (after the closes still
// posted) when the process or library goes.
class Closer {
  public:
    bool post(Close c) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!started_ && !start()) return false;
        queue_.push_back(std::move(c));
        wake_.notify_all();
        return true;
    }
    bool takeBack(void *at) {
        std::lock_guard<std::mutex> lock(mu_);
        auto i = std::find_if(queue_.begin(), queue_.end(), [at](const Close &c) { return c.at == at; });
        if (i == queue_.end()) return false;
        queue_.erase(i);
        return true;
    }
    void waitClosed(void *at) {
        std::unique_lock<std::mutex> lock(mu_);
        done_.wait(lock, [&] {
            return running_ != at &&
                   std::none_of(queue_.begin(), queue_.end(), [at](const Close &c) { return c.at == at; });
        });
    }
    void drain() {
        std::unique_lock<std::mutex> lock(mu_);
        done_.wait(lock, [&] { return queue_.empty() && !running_; });
    }
    ~Closer() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
            wake_.notify_all();
        }
        if (thread_.joinable()) thread_.join(); // after the closes still posted
    }

  private:
    bool start() {
        try {
            thread_ = std::thread([this] { run(); });
        } catch (const std::system_error &e) {
            if (!refused_)
                LOOM_WARN(kColl, "no thread for closing peers' mappings (%s): they close inside calls", e.what());
            refused_ = true;
            return false;
        }
        started_ = true;
        return true;
    }
    void run() {
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return; // stopping, nothing left
            Close c = std::move(queue_.front());
            queue_.pop_front();
            running_ = c.at;
            lock.unlock();
            closeNow(c);
            lock.lock();
            running_ = nullptr;
            done_.notify_all();
        }
    }

    std::mutex mu_;
    std::condition_variable wake_, done_;
    std::deque<Close> queue_;
    void *running_ = nullptr; // the mapping being closed
    bool started_ = false, stop_ = false, refused_ = false;
    std::thread thread_;
};

Closer &closer() {
    static Closer c;
    return c;
}

} // namespace

bool post(int device, void *at, std::function<void()> closed) {
    return closer().post(Close{device, at, std::move(closed)});
}
bool takeBack(void *at) { return closer().takeBack(at); }
void waitClosed(void *at) { closer().waitClosed(at); }
void drain() { closer().drain(); }

} // namespace mapping_closer
} // namespace loom
