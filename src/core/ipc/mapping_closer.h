/*
 * CUDA IPC mappings closed on a thread of their own, never inside a call.
 *
 * cudaIpcCloseMemHandle waits for every kernel the process runs on that
 * GPU, on blocking and non-blocking streams alike (test/perf/api_waits, 1x
 * H200, CUDA 13). Inside a collective that includes other communicators'
 * kernels, which may wait for a peer that is itself inside a call waiting
 * for this rank: with call orders crossed across communicators (legal in
 * MPI) every rank hung until the peer timeout (coll_cross_order, last
 * round: a direct-pair alltoall evicting a mapping while the other
 * communicator's allreduce kernel waits).
 *
 * Posted closes run in posting order on one thread, started at the first
 * post; that thread does the waiting. The newest `keep` closes are held
 * back: a mapping let go and wanted again soon after (a cache cycling over
 * a few more buffers than it holds) is taken back before its close starts,
 * since once it runs the caller can only wait for it (CUDA maps an
 * allocation once per process). drain() and the destructor close the held
 * ones too. A close is named by a key of the caller's, unique while posted
 * (an address may be mapped again once closed, so not the address). The
 * process has one closer (mappingCloser()); the unit tests make their own.
 */
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace loom {

class MappingCloser {
  public:
    using CloseFn = std::function<void(int device, void *at)>;

    explicit MappingCloser(CloseFn close, size_t keep = 0) : close_(std::move(close)), keep_(keep) {}
    MappingCloser(const MappingCloser &) = delete;
    MappingCloser &operator=(const MappingCloser &) = delete;
    // After the closes still posted (up to 30 s: then the thread is left).
    ~MappingCloser();

    // Closes `at` (a mapping on GPU `device`) later; then runs `closed` on
    // the closer's thread, holding none of its locks. False where no thread
    // can be started (said once) or after a fork: the caller closes it.
    bool post(const void *key, int device, void *at, std::function<void()> closed);
    // True if key's close was posted and not started: it is dropped, and
    // its `closed` will not run (the mapping stays open, the caller's again).
    bool takeBack(const void *key);
    // Returns once key's close is neither waiting nor running.
    void waitClosed(const void *key);
    // Returns once every close posted so far is done, held ones included.
    void drain();
    // A close is running now (it waits for every kernel of the process).
    bool running() const { return running_.load(std::memory_order_relaxed) != nullptr; }
    // In a forked child: no thread there; posts are refused.
    void forgetThread();

  private:
    struct Close {
        const void *key;
        int device;
        void *at;
        std::function<void()> closed;
    };
    bool start();
    void run();
    std::deque<Close>::iterator find(const void *key);

    CloseFn close_;
    const size_t keep_;
    std::mutex mu_;
    std::condition_variable wake_, done_;
    std::deque<Close> queue_;
    std::atomic<const void *> running_{nullptr}; // the key being closed (written under mu_)
    size_t mustRun_ = 0;            // the queue's first closes that run although held back (waitClosed, drain)
    bool stop_ = false, refused_ = false, forked_ = false;
    std::thread *thread_ = nullptr; // left, not joined, in a forked child
};

// The process's closer: cudaIpcCloseMemHandle on the mapping's GPU,
// kMappingClosesKept held back.
constexpr size_t kMappingClosesKept = 16;
MappingCloser &mappingCloser();

} // namespace loom
