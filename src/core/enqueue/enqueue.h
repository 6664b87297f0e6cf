/*
 * Inside enqueue: one call as planned for an algorithm. The path of every
 * table collective is call (enqueue.cc: checks, then the algorithm from
 * selection over the registry, core/algo/registry.h) -> the entry's
 * enqueue: plan -> launch -> commit (each algorithm's file: core/algo/ring/ring.cc
 * for the ring and its chains, core/algo/edges/edges.cc for the small-message
 * algorithms across hosts, core/algo/oneshot/oneshot.cc, core/algo/zerocopy/zerocopy.cc).
 */
#pragma once

#include <cstddef>

#include "core/comm/comm.h"
#include "device/edges/edge_schedule.h"
#include "loom.h"

namespace loom {

struct RingCall {
    int coll;            // loomColl (base/coll.h)
    int proto;           // kProtoSimple, kProtoLL or kProtoLL128
    const void *in;
    void *out;
    size_t count;        // elements; per block for reduce_scatter / allgather
    const size_t *counts, *displs; // ragged blocks (host memory, elements), or null
    size_t totalBytes;   // of the largest buffer: sets the channel count
    loomDataType_t dtype;
    loomRedOp_t op;      // reductions only
    int root;            // broadcast, reduce
};

// Plans, launches and commits one ring collective on stream. Ragged blocks
// go to the kernel through the communicator's block tables.
loomResult_t ringCollective(loomComm *comm, const RingCall &c, cudaStream_t stream);

// A collective over the edges (device/edges/edge_schedule.h): its schedule, from
// one of the builders below, and buffers.
struct EdgeCall {
    EdgeSched s;
    const void *in;
    void *out;
    loomDataType_t dtype;
    loomRedOp_t op;     // reductions only
    bool bytes;         // data movement: the kernel over bytes (s counts bytes)
    const char *name;   // the collective
    const char *algoName;
};

// A one-shot call (core/algo/oneshot/oneshot.cc, device/oneshot/oneshot_schedule.h; coll:
// loomColl, a table collective or alltoall). Ragged blocks: counts/displs in bytes (else null); alltoall:
// counts/displs this rank's send tables, rcounts/rdispls its receive tables.
loomResult_t oneShotCollective(loomComm *comm, int coll, const void *in, void *out, size_t bytes, loomDataType_t dtype,
                               loomRedOp_t op, int root, cudaStream_t stream, const size_t *counts = nullptr,
                               const size_t *displs = nullptr, const size_t *rcounts = nullptr,
                               const size_t *rdispls = nullptr);

// A one-shot call's arguments but its CTA count and waits, with the call's
// flag (never 0) and its slots (the flag's parity): slot[q] this rank's slot
// in peer q's memory, mine[q] peer q's in ours. Every one-shot call takes a
// flag, and every v-form exchange where one-shot pairs are on
// (enqueue_exchange.cc), alike on every rank.
struct OneShotArgs; // device/oneshot/oneshot_args.h
void oneShotCallArgs(loomComm *comm, int coll, const void *in, void *out, size_t bytes, int root,
                     const size_t *counts, const size_t *displs, const size_t *rcounts, const size_t *rdispls,
                     OneShotArgs *a);

// Copy-engine mode's broadcast and allgather (enqueue_engines.cc): whether
// a call of this block takes it (the same answer on every rank), and the
// calls as exchanges whose pairs the senders' copy engines move.
bool movementOnEngines(const loomComm *comm, size_t block);
loomResult_t allGatherOnEngines(loomComm *comm, const void *in, void *out, size_t block, cudaStream_t stream);
loomResult_t broadcastOnEngines(loomComm *comm, const void *in, void *out, size_t bytes, int root,
                                cudaStream_t stream);

// Every collective's entry (enqueue.cc): checkComm, the checks and the
// start every call shares (comm, its state, then beginCall); checkCall adds
// the datatype and (reduction) the op. loomSuccess means go on.
loomResult_t checkComm(const char *what, loomComm *comm);
loomResult_t checkCall(const char *what, loomComm *comm, loomDataType_t dtype, bool reduction, loomRedOp_t op);

EdgeSched treeSched(const loomComm *comm, size_t count, size_t esize);
EdgeSched rdSched(const loomComm *comm, size_t count, size_t esize);
// coll: broadcast, reduce, allgather or reduce_scatter (loomColl); count: elements of the message, or per block (allgather,
// reduce_scatter), in units of elemBytes.
EdgeSched doublingSched(const loomComm *comm, int coll, size_t count, size_t elemBytes, int root);

// Plans, launches and commits one collective over the edges on stream.
loomResult_t edgeCollective(loomComm *comm, const EdgeCall &c, cudaStream_t stream);

} // namespace loom
