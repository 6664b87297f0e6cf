/*
 * Per-call records between the ranks of one host through shared memory (the
 * arrival board's extra area, core/ras/arrival.h), instead of the MPI library's
 * point-to-point messages: the zero-copy allreduce's buffer descriptions
 * (core/algo/zerocopy/zerocopy.h). Every rank posts its record for exchange `seq`
 * and reads every other rank's; exchanges are numbered alike on every rank.
 *
 * Layout: per rank a 64-byte line with the last posted seq, then two record
 * slots (seq parity). Why two are enough: a rank writes the slot of seq + 2
 * only after reading every rank's record of seq + 1, which each posted after
 * reading all records of seq; so no record is overwritten before every rank
 * has read it.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/wait.h"
#include "loom.h"

namespace loom {

class DescBoard {
  public:
    // Bytes of the area for `nranks` ranks' records of `recordBytes`.
    static size_t bytes(int nranks, size_t recordBytes);
    // area: bytes(nranks, recordBytes), zero-filled before its first use,
    // shared by the nranks ranks (rank: this one's index).
    DescBoard(void *area, int nranks, int rank, size_t recordBytes);

    // Posts `mine` as this rank's record of exchange `seq` (>= 1; one more
    // than the last), then copies every rank's record of `seq` into `all`
    // (nranks records, rank order). It waits for a rank that has not posted
    // as kernels wait (device/wait.h, on the host clock in nanoseconds:
    // core/ras/watchdog.h's hostWaitLimit); when the wait must end:
    // loomRemoteError, *absent = that rank, *why = the WaitEnd.
    loomResult_t exchange(uint64_t seq, const void *mine, void *all, const WaitLimit &limit, int *absent,
                          WaitEnd *why);

  private:
    char *line(int r) const { return area_ + (size_t)r * stride_; }
    char *area_;
    int nranks_, rank_;
    size_t recordBytes_, slotBytes_, stride_;
};

} // namespace loom
