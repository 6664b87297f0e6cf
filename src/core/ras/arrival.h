/*
 * The arrival board: which ranks of one host have entered how many
 * collectives of a communicator. One POSIX shared-memory segment per
 * (communicator, OS instance), one 64-byte slot per rank of that host: who
 * the rank is (rank, pid, GPU, bus id) and how many collectives it has
 * entered, a relaxed store as each call is enqueued (no cost worth naming),
 * and the last call its GPU started (copied there by the process's watchdog,
 * core/ras/watchdog.h, from the word its kernels write).
 *
 * When a collective times out, a waiting rank reads its host's board: a rank
 * that has entered fewer calls than the waiting one never arrived, and the
 * error names it; one whose process is gone is named as dead. Ranks of other hosts are on their own hosts' boards; a
 * waiting rank that finds everyone of its host present says so, and names
 * its silent neighbours.
 *
 * The segment is created 0600 by the host's lowest rank, opened by the
 * others after an agreement, and unlinked after a second one: nothing is
 * left in /dev/shm however the job ends later.
 *
 * An optional area after the slots (extraBytes, zero-filled) carries what
 * the host's ranks pass each other per call without the MPI library: the
 * zero-copy allreduce's buffer descriptions (core/algo/zerocopy/zerocopy.h).
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "loom.h"

namespace loom {

// Lives in the segment (zero-filled by ftruncate, never constructed).
struct ArrivalSlot {
    std::atomic<uint64_t> entered; // collectives this rank has enqueued
    int32_t rank, pid, cudaDev;    // pid 0: the slot was never filled
    char busId[16];
    char host[20];
    uint64_t pidNs; // the pid namespace pid belongs to (containers sharing /dev/shm may differ)
    alignas(64) std::atomic<uint64_t> started; // the last call this rank's GPU started (a line of its own: another writer)
    std::atomic<uint64_t> failedIn; // 0, or the calls it had entered when its side of the communicator failed
};
static_assert(sizeof(ArrivalSlot) == 128, "whole cache lines per rank (the extra area starts aligned)");

// What a rank's slot said when it was read.
struct Arrival {
    uint64_t entered;
    uint64_t started; // on its GPU
    uint64_t failedIn = 0; // 0: its side of the communicator works; else its calls entered when it failed
    int rank, pid, cudaDev;
    uint64_t pidNs;
    std::string busId, host;
};

class ArrivalBoard {
  public:
    // The host's lowest rank creates the segment (0600, a new name);
    // the others open it once that is agreed.
    static loomResult_t create(const std::string &name, int nslots, size_t extraBytes, ArrivalBoard **out);
    static loomResult_t open(const std::string &name, int nslots, size_t extraBytes, ArrivalBoard **out);
    ~ArrivalBoard();
    ArrivalBoard(const ArrivalBoard &) = delete;
    ArrivalBoard &operator=(const ArrivalBoard &) = delete;

    // By the creator once every rank has opened it.
    void unlink();
    // Fills this rank's slot (who it is) ...
    void publish(int slot, int rank, int cudaDev, const char *busId);
    // ... and counts its collectives.
    void enter(int slot, uint64_t entered) { slots_[slot].entered.store(entered, std::memory_order_relaxed); }
    // ... and the last call its GPU started.
    void started(int slot, uint64_t call) { slots_[slot].started.store(call, std::memory_order_relaxed); }
    // ... and that its side of the communicator failed (its calls return errors from now on).
    void failed(int slot, uint64_t entered) { slots_[slot].failedIn.store(entered ? entered : 1, std::memory_order_relaxed); }
    Arrival read(int slot) const;
    int slots() const { return nslots_; }
    // The area after the slots (null when made without one).
    void *extra() const { return extraBytes_ ? static_cast<void *>(slots_ + nslots_) : nullptr; }

  private:
    ArrivalBoard() = default;
    static loomResult_t map(int fd, const std::string &name, int nslots, size_t extraBytes, ArrivalBoard **out);
    size_t bytes() const { return (size_t)nslots_ * sizeof(ArrivalSlot) + extraBytes_; }
    ArrivalSlot *slots_ = nullptr;
    int nslots_ = 0;
    size_t extraBytes_ = 0;
    std::string name_;
    bool owner_ = false;
};

// The ranks on `board` that have entered fewer than `entered` collectives.
std::vector<Arrival> absentRanks(const ArrivalBoard &board, uint64_t entered);

// The ranks on `board` whose process is gone (killed, crashed, exited).
// Only ranks in this process's pid namespace can be checked; others are
// never called dead.
std::vector<Arrival> deadRanks(const ArrivalBoard &board);

// Slots no rank filled (its open failed): those ranks' arrival is unknown.
int unfilledSlots(const ArrivalBoard &board);

// "rank 3 (host h, pid 123, GPU 2, 0000:1b:00.0) entered 4 of 5 calls; ..."
std::string describeAbsent(const std::vector<Arrival> &absent, uint64_t entered);
// "rank 3 (host h, pid 123, GPU 2, 0000:1b:00.0); ..."
std::string describeRanks(const std::vector<Arrival> &ranks);

} // namespace loom
