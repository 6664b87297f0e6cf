/*
 * The closer thread of core/mapping_closer.h.
 */
#include "core/mapping_closer.h"

#include <algorithm>
#include <system_error>

#include <cuda_runtime.h>

#include "core/debug.h"

namespace loom {

bool MappingCloser::post(int device, void *at, std::function<void()> closed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ && !start()) return false;
    queue_.push_back(Close{device, at, std::move(closed)});
    wake_.notify_all();
    return true;
}

bool MappingCloser::takeBack(void *at) {
    std::lock_guard<std::mutex> lock(mu_);
    auto i = std::find_if(queue_.begin(), queue_.end(), [at](const Close &c) { return c.at == at; });
    if (i == queue_.end()) return false;
    queue_.erase(i);
    return true;
}

bool MappingCloser::queued(void *at) const {
    return std::any_of(queue_.begin(), queue_.end(), [at](const Close &c) { return c.at == at; });
}

void MappingCloser::waitClosed(void *at) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return running_ != at && !queued(at); });
}

void MappingCloser::drain() {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return queue_.empty() && !running_; });
}

MappingCloser::~MappingCloser() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        wake_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
}

bool MappingCloser::start() { // mu_ held
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

void MappingCloser::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return; // stopping, nothing left
        Close c = std::move(queue_.front());
        queue_.pop_front();
        running_ = c.at;
        lock.unlock();
        close_(c.device, c.at);
        if (c.closed) c.closed();
        lock.lock();
        running_ = nullptr;
        done_.notify_all();
    }
}

MappingCloser &mappingCloser() {
    // Made at first use, after CUDA started in this process: destroyed (its
    // thread joined) before the CUDA runtime's own teardown at exit, or when
    // the library is unloaded.
    static MappingCloser closer([](int device, void *at) {
        int was = -1;
        const bool switched =
            cudaGetDevice(&was) == cudaSuccess && was != device && cudaSetDevice(device) == cudaSuccess;
        const cudaError_t e = cudaIpcCloseMemHandle(at);
        if (e != cudaSuccess) {
            cudaGetLastError();
            LOOM_WARN(kColl, "closing the mapping of a peer's buffer at %p on GPU %d: %s", at, device,
                      cudaGetErrorString(e));
        }
        if (switched) cudaSetDevice(was);
    });
    return closer;
}

} // namespace loom
