/*
 * An exchange call's direct pairs (device/exchange/exchange_schedule.h): which blocks
 * move in place between p2p peers, and where the copying end finds the other
 * end's buffer.
 */
#pragma once

#include <cstddef>

#include "loom.h"

struct loomComm;

namespace loom {

// A call's direct tables (n entries each, zero where the pair goes through
// the FIFO; exchange_schedule.h says what they hold). Pairs inside a host
// over p2p whose block is at least `least` (select.h's exchangeDirectLeast:
// both ends know the pair's size and the call's kind alike; 0: none): the
// end that does not copy (pulled: the sender; pushed, `push`: the receiver)
// describes its buffer to the end that does, through the bootstrap's
// pairwise exchange (both ends know the pair from the counts), and the
// copying end maps it. *any: some pair is direct. A mapping that fails
// leaves its pair's handshake in place (its copy's two ends made one place,
// so nothing moves and the peer is not left waiting) and its error in *late,
// for the caller to return after the launch. `opaque`: the buffer this rank
// would describe is a datatype's user layout (enqueue_exchange_typed.cc),
// which its peers cannot read or write as bytes: described as not
// shareable, its pairs go through the FIFO.
loomResult_t planDirectPairs(loomComm *comm, size_t least, bool push, const char *in, const size_t *sendcounts,
                             const size_t *sdispls, char *out, const size_t *recvcounts, const size_t *rdispls,
                             bool opaque, size_t *directSend, size_t *directSrc, bool *any, loomResult_t *late);

} // namespace loom
