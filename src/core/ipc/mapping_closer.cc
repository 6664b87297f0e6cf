/*
 * The closer thread of core/mapping_closer.h.
 */
#include "core/ipc/mapping_closer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>
#include <system_error>

#include <pthread.h>

#include <cuda_runtime.h>

#include "base/debug.h"

namespace loom {

bool MappingCloser::post(const void *key, int device, void *at, std::function<void()> closed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (forked_ || (!thread_ && !start())) return false;
    queue_.push_back(Close{key, device, at, std::move(closed)});
    wake_.notify_all();
    return true;
}

std::deque<MappingCloser::Close>::iterator MappingCloser::find(const void *key) { // mu_ held
    return std::find_if(queue_.begin(), queue_.end(), [key](const Close &c) { return c.key == key; });
}

bool MappingCloser::takeBack(const void *key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto i = find(key);
    if (i == queue_.end()) return false;
    if ((size_t)(i - queue_.begin()) < mustRun_) --mustRun_;
    queue_.erase(i);
    return true;
}

void MappingCloser::waitClosed(const void *key) {
    std::unique_lock<std::mutex> lock(mu_);
    auto i = find(key);
    if (i != queue_.end()) { // maybe held back: it and those before it run now
        mustRun_ = std::max(mustRun_, (size_t)(i - queue_.begin()) + 1);
        wake_.notify_all();
    }
    done_.wait(lock, [&] { return running_ != key && find(key) == queue_.end(); });
}

void MappingCloser::drain() {
    std::unique_lock<std::mutex> lock(mu_);
    mustRun_ = queue_.size();
    wake_.notify_all();
    done_.wait(lock, [&] { return queue_.empty() && !running_.load(); });
}

void MappingCloser::forgetThread() {
    // The child of a fork has no closer thread, and mu_ may have been held
    // by another thread at the fork: start over without either.
    new (&mu_) std::mutex();
    forked_ = true;
    thread_ = nullptr; // the parent's; not joinable here
    queue_.clear();
    running_ = nullptr;
}

MappingCloser::~MappingCloser() {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
    wake_.notify_all();
    const bool finished =
        done_.wait_for(lock, std::chrono::seconds(30), [&] { return queue_.empty() && !running_.load(); });
    const size_t left = queue_.size() + (running_.load() ? 1 : 0);
    lock.unlock();
    if (!thread_) return;
    if (finished) {
        thread_->join();
        delete thread_;
        return;
    }
    // A close that waits for a kernel that does not end: leave it.
    fprintf(stderr, "loom: %zu closes of peers' mappings still waiting for kernels after 30 s: left\n", left);
    thread_->detach();
}

bool MappingCloser::start() { // mu_ held
    try {
        thread_ = new std::thread([this] { run(); });
    } catch (const std::system_error &e) {
        thread_ = nullptr;
        if (!refused_)
            LOOM_WARN(kColl, "no thread for closing peers' mappings (%s): they close inside calls", e.what());
        refused_ = true;
        return false;
    }
    return true;
}

void MappingCloser::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || queue_.size() > keep_ || mustRun_; });
        if (queue_.empty()) return; // stopping, nothing left
        Close c = std::move(queue_.front());
        queue_.pop_front();
        if (mustRun_) --mustRun_;
        running_ = c.key;
        lock.unlock();
        close_(c.device, c.at);
        if (c.closed) c.closed();
        lock.lock();
        running_ = nullptr;
        done_.notify_all();
    }
}

namespace {

void closeOnDevice(int device, void *at) {
    int was = -1;
    const bool switched = cudaGetDevice(&was) == cudaSuccess && was != device && cudaSetDevice(device) == cudaSuccess;
    const cudaError_t e = cudaIpcCloseMemHandle(at);
    if (e != cudaSuccess) {
        cudaGetLastError();
        LOOM_WARN(kColl, "closing the mapping of a peer's buffer at %p on GPU %d: %s", at, device,
                  cudaGetErrorString(e));
    }
    if (switched) cudaSetDevice(was);
}

} // namespace

MappingCloser &mappingCloser() {
    // Made at first use, after CUDA started in this process: destroyed (its
    // thread joined) before the CUDA runtime's own teardown at exit, or when
    // the library is unloaded.
    static MappingCloser closer(closeOnDevice, kMappingClosesKept);
    static const int forkHook = pthread_atfork(nullptr, nullptr, [] { closer.forgetThread(); });
    (void)forkHook;
    return closer;
}

} // namespace loom
