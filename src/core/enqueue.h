/*
 * Inside enqueue: one call as planned for an algorithm. The path of every
 * collective is call (enqueue.cc: checks, then algorithm and protocol from
 * the selection rules there) -> plan -> launch -> commit (each algorithm's
 * file: enqueue_ring.cc for the ring and its chains).
 */
#pragma once

#include <cstddef>

#include "core/comm.h"
#include "loom.h"

namespace loom {

struct RingCall {
    int coll;            // RingColl
    int proto;           // kProtoSimple or kProtoLL
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

} // namespace loom
