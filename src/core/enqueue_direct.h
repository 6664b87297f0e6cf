/*
 * An exchange call's direct pairs (device/exchange_schedule.h): which of
 * this rank's blocks its p2p peers read in place, and where it reads theirs.
 */
#pragma once

#include <cstddef>

#include "loom.h"

struct loomComm;

namespace loom {

// A call's direct tables (n entries each, zero where the pair goes through
// the FIFO). Pairs inside a host over p2p whose block is at least
// LOOM_EXCHANGE_DIRECT_BYTES: this rank describes its input to each such
// receiver and learns each such sender's input through the bootstrap's
// pairwise exchange (both ends know the pair from the counts). directSend[q]:
// q reads my block in place; directSrc[q]: q's block for me, mapped here.
// *any: some pair is direct. A mapping that fails leaves its pair's
// handshake in place (the block is read from this rank's own output, so the
// sender is not left waiting) and its error in *late, for the caller to
// return after the launch.
loomResult_t planDirectPairs(loomComm *comm, const char *in, const size_t *sendcounts, const size_t *sdispls,
                             char *out, const size_t *recvcounts, const size_t *rdispls, size_t *directSend,
                             size_t *directSrc, bool *any, loomResult_t *late);

} // namespace loom
