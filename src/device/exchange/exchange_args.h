/*
 * What the host hands the exchange kernel per call (alltoall(v), and
 * gather(v) / scatter(v) as exchanges): the schedule (exchange_schedule.h),
 * its count and displacement tables and each connection's step counters
 * before the call (in the parameters when they fit, else uploaded to device
 * memory per call); the connections, `channels` per peer, in a
 * per-communicator table in device memory. Counts are bytes. Shared by host
 * (core) and device code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/conn.h"
#include "device/datatype/dt_view.h"
#include "device/exchange/exchange_schedule.h"
#include "device/oneshot/oneshot_args.h"

namespace loom {

// Tables of calls up to this many words travel in the kernel parameters
// (up to 64 ranks with the default channel counts): no upload per call.
constexpr int kExchangeInlineWords = 384;

struct ExchangeArgs {
    ExchangeSched s;                  // its tables: in device memory, or null (then `inlined`)
    const void *in;
    void *out;
    const ConnPair *conns;            // device memory: connection q x channels + c leads to rank q
    const ConnSteps *steps;           // device memory, per connection before this call (null: inlined)
    int nthreads;
    int nslots;                       // slots per FIFO
    size_t slotBytes;
    WaitLimit wait;                   // how its waits may end (device/wait.h)
    volatile int *abortFlag;          // host-mapped: set by the kernel on timeout
    int direct;                       // some pair is direct: the inlined tables include directSend, directSrc
    int enginesFailed;                // deferred copies the host could not enqueue: published as not written
    // Datatypes moved in place (core/enqueue/enqueue_exchange_typed.cc):
    // where a view has blocks, `in` (or `out`) is the user's buffer and the
    // tables' displacements are packed offsets in it (dt_view.h); every
    // read of the input (write of the output) goes through the view. Such a
    // side has no pair its peer copies (no pulled send, no pushed receive)
    // and no deferred copies. selfScratch: room for the own block's packed
    // bytes when both sides have views (its chunks go through it).
    DtView inView, outView;
    char *selfScratch;
    // One-shot pairs (exchange_schedule.h): the call as a ragged one-shot
    // alltoall whose pairBound is the call's bound, run by pairs.nblocks
    // CTAs after the self lanes (0: none).
    OneShotArgs pairs;
    // Small calls: send counts, send displacements, receive counts, receive
    // displacements (n each), with direct pairs directSend and directSrc (n
    // each), then the steps (2 words per connection).
    size_t inlined[kExchangeInlineWords];
};

static_assert(sizeof(ExchangeArgs) <= 4096, "kernel parameters of CUDA < 12.1");

} // namespace loom
