/*
 * Where a zero-copy allreduce's time goes (LOOM_PROFILE=1), per communicator,
 * printed when it is freed: the host's steps up to and after the launch
 * (describe the two buffers, exchange the descriptions, check and map, launch,
 * record the read) and, from CTA 0's timestamps (%globaltimer into mapped
 * host memory), the kernel's phases: waiting for the peers' arrive, moving
 * its range, waiting for their done. Means over the calls after the first
 * (a first call maps new buffers). Off: one branch per call.
 */
#pragma once

#include <chrono>
#include <cstdint>

namespace loom {

class ZeroCopyProfile {
  public:
    enum Step { kDescribe, kExchange, kMap, kLaunch, kRecord, kSteps };
    enum Phase { kArrive, kMove, kDone, kPhases }; // the kernel's

    ZeroCopyProfile(); // on only with LOOM_PROFILE (coll_loom_profile) = 1
    ~ZeroCopyProfile();
    bool on() const { return on_; }
    // Device address of the kernel's 4 timestamps (null: off).
    uint64_t *stamps() const { return stampsDev_; }
    // A call starts: the previous call's kernel stamps (if complete) are added.
    void begin();
    // The time since the previous mark goes to `step`.
    void mark(Step step);
    // One line on stderr (whatever LOOM_DEBUG says), rank `rank`'s.
    void report(int rank, int cudaDev) const;

  private:
    bool on_ = false;
    uint64_t calls_ = 0, kernels_ = 0;
    double ns_[kSteps] = {}, gpuNs_[kPhases] = {};
    volatile uint64_t *stamps_ = nullptr; // host view: start, arrived, moved, done
    uint64_t *stampsDev_ = nullptr;
    std::chrono::steady_clock::time_point last_;
};

} // namespace loom
