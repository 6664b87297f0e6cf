/*
 * An exchange whose input or output is a datatype's user layout (loom's
 * exchange kernel reading and writing it in place through packed views,
 * device/datatype/dt_view.h; core/enqueue/enqueue_exchange_typed.cc builds
 * them), and the exchange every loomExchange runs.
 */
#pragma once

#include <cstddef>

#include "device/datatype/dt_view.h"
#include "loom.h"

struct loomComm;

namespace loom {

// Views with their tables in device memory (nblocks 0: that side is plain
// bytes); selfScratch: device room for the own block's packed bytes when
// both sides have views.
struct ExchangeViews {
    DtView in, out;
    char *selfScratch;
};

// loomExchange with views (null: none). With a view the call must go to
// the exchange kernel: a communicator of more than one rank, not one-shot
// (exchangeOneShot); the caller packs and unpacks around other calls.
loomResult_t exchangeCall(const void *sendbuff, const size_t *sendcounts, const size_t *sdispls, void *recvbuff,
                          const size_t *recvcounts, const size_t *rdispls, size_t agreedBlock, int fanIn,
                          const ExchangeViews *views, loomComm *comm, cudaStream_t stream);

} // namespace loom
