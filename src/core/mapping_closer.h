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
 * post; that thread does the waiting. A close not yet started can be taken
 * back (its mapping is wanted again, and CUDA maps an allocation only once
 * per process); a running one can be waited for. A mapping keeps its
 * owner's memory allocated until it is closed here, so the closes are
 * bounded by what the caches keep (core/direct_buffers.h). The process has
 * one closer (mappingCloser()); the unit tests make their own with a close
 * of their own.
 */
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace loom {

class MappingCloser {
  public:
    using CloseFn = std::function<void(int device, void *at)>;

    explicit MappingCloser(CloseFn close) : close_(std::move(close)) {}
    MappingCloser(const MappingCloser &) = delete;
    MappingCloser &operator=(const MappingCloser &) = delete;
    ~MappingCloser(); // after the closes still posted

    // Closes `at` (a mapping on GPU `device`) later; then runs `closed` on
    // the closer's thread, holding none of its locks. False where no thread
    // can be started (said once): the caller closes it itself.
    bool post(int device, void *at, std::function<void()> closed);
    // True if `at`'s close was posted and not started: it is dropped, and
    // its `closed` will not run (the mapping stays open, the caller's again).
    bool takeBack(void *at);
    // Returns once `at` is neither waiting to be closed nor being closed.
    void waitClosed(void *at);
    // Returns once every close posted so far is done.
    void drain();

  private:
    struct Close {
        int device;
        void *at;
        std::function<void()> closed;
    };
    bool start();
    void run();
    bool queued(void *at) const;

    CloseFn close_;
    std::mutex mu_;
    std::condition_variable wake_, done_;
    std::deque<Close> queue_;
    void *running_ = nullptr; // the mapping being closed
    bool started_ = false, stop_ = false, refused_ = false;
    std::thread thread_;
};

// The process's closer: cudaIpcCloseMemHandle on the mapping's GPU.
MappingCloser &mappingCloser();

} // namespace loom
