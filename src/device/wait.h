/*
 * How a kernel's thread 0 waits for a flag another GPU, the CPU or the NIC
 * writes: spin, then back off with __nanosleep; a peer silent for
 * timeoutCycles fails the wait (the caller aborts the collective).
 */
#pragma once

namespace loom {

struct Waiter {
    unsigned long long timeoutCycles;
    template <typename Cond>
    __device__ bool operator()(Cond cond) const {
        unsigned long long start = clock64();
        int spins = 0;
        while (!cond()) {
            if (++spins > 1000) {
                __nanosleep(100);
                if (clock64() - start > timeoutCycles) return false;
            }
        }
        return true;
    }
};

} // namespace loom
