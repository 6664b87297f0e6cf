/*
 * The one-shot LL collectives (small messages, oneshot_schedule.h): every
 * rank writes what each peer needs from it as LL lines into that peer's slot
 * for it, then builds its output from the lines it holds. Shared by host
 * (core) and device code.
 *
 * LL line: 16 bytes = {data0, flag, data1, flag}; a 16-byte aligned store
 * lands whole, so a reader that sees both flags equal to the call's flag has
 * the 8 data bytes, with no fence and no separate flag write.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/wait.h"

namespace loom {

constexpr int kMaxOneShotRanks = 8;
constexpr int kOneShotThreads = 512;
constexpr int kMaxOneShotBlocks = 32;

struct LLLine {
    uint32_t data0, flag0, data1, flag1;
};

// Bytes of LL lines holding `dataBytes` of payload.
inline size_t llBytes(size_t dataBytes) { return (dataBytes + 7) / 8 * sizeof(LLLine); }

struct OneShotArgs {
    int coll;       // loomColl (base/coll.h): a table collective or alltoall
    int root;       // broadcast, reduce
    const void *in;
    void *out;
    size_t bytes;   // the call's block (OneShotBlocks)
    bool ragged;    // blocks of counts/displs bytes (allgatherv, reduce_scatter with counts, alltoall)
    int nranks;
    int rank;
    int nblocks;
    uint32_t flag;  // this call's flag (never 0; slots start zeroed)
    // slot[q]: where this rank's lines go in peer q's memory (this call's parity);
    // mine[q]: where peer q's lines arrive in our memory.
    LLLine *slot[kMaxOneShotRanks];
    const LLLine *mine[kMaxOneShotRanks];
    WaitLimit wait; // how its waits may end (device/wait.h)
    volatile int *abortFlag;
    // The block tables last: only ragged calls read them (the resident
    // kernel's mailbox carries them only then: device/resident/resident_args.h).
    size_t counts[kMaxOneShotRanks], displs[kMaxOneShotRanks];
    size_t rcounts[kMaxOneShotRanks], rdispls[kMaxOneShotRanks]; // alltoall: this rank's receive tables
    // Ragged alltoall beside the exchange kernel (exchange_coll.cu): only
    // pairs of at most this many bytes (oneShotCarries), and not the own
    // block (its self lanes copy it); 0: every pair, and the own block.
    size_t pairBound;
};

} // namespace loom
