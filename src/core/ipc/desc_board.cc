/*
 * core/desc_board.h.
 */
#include "core/ipc/desc_board.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <sched.h>

#include "base/debug.h"
#include "core/ras/watchdog.h"

namespace loom {

namespace {

constexpr size_t kLine = 64;

size_t roundUp(size_t b) { return (b + kLine - 1) / kLine * kLine; }

std::atomic<uint64_t> *posted(char *line) { return reinterpret_cast<std::atomic<uint64_t> *>(line); }

} // namespace

size_t DescBoard::bytes(int nranks, size_t recordBytes) { return (size_t)nranks * (kLine + 2 * roundUp(recordBytes)); }

DescBoard::DescBoard(void *area, int nranks, int rank, size_t recordBytes)
    : area_(static_cast<char *>(area)), nranks_(nranks), rank_(rank), recordBytes_(recordBytes),
      slotBytes_(roundUp(recordBytes)), stride_(kLine + 2 * roundUp(recordBytes)) {
    static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) && std::atomic<uint64_t>::is_always_lock_free,
                  "a lock-free 64-bit word shared between processes");
}

loomResult_t DescBoard::exchange(uint64_t seq, const void *mine, void *all, const WaitLimit &limit, int *absent,
                                 WaitEnd *why) {
    char *own = line(rank_);
    memcpy(own + kLine + (seq & 1) * slotBytes_, mine, recordBytes_);
    posted(own)->store(seq, std::memory_order_release);
    char *out = static_cast<char *>(all);
    memcpy(out + (size_t)rank_ * recordBytes_, mine, recordBytes_);
    WaitClock clock{0, 0, false};
    bool timing = false; // one clock for all peers, from the first wait that outlasts the spins
    for (int q = 0; q < nranks_; ++q) {
        if (q == rank_) continue;
        char *l = line(q);
        for (long spins = 0; posted(l)->load(std::memory_order_acquire) < seq; ++spins) {
            if (spins < 2000) continue; // peers normally arrive within microseconds
            if (!timing) clock.start = hostNowNs(), timing = true;
            sched_yield();
            if ((spins & 1023) != 0) continue;
            const WaitEnd end = waitCheck(limit, clock, hostNowNs());
            if (end != kWaitGoesOn) {
                *absent = q;
                *why = end;
                return fail(loomRemoteError, "rank %d: rank %d posted no record for exchange %llu", rank_, q,
                            (unsigned long long)seq);
            }
        }
        memcpy(out + (size_t)q * recordBytes_, l + kLine + (seq & 1) * slotBytes_, recordBytes_);
    }
    return loomSuccess;
}

} // namespace loom
