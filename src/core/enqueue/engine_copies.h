/*
 * Copy-engine copies of an exchange (device/exchange/exchange_schedule.h, deferred
 * copies): a pushed gather's blocks written into the root's output by its
 * peers' copy engines instead of their SMs. Chosen by measurement
 * (test/perf/copy_paths, _in0 modes; the numbers: docs/performance.md,
 * "the measurements behind the defaults"): into one GPU its peers' copy
 * engines beat the root's SMs pulling, while the root's own copy engines
 * pulling through IPC mappings are the slowest, so pulled pairs never use
 * them. The engines cost more per call (the copies wait for the kernel, the
 * publications for the copies) and pay only for large blocks, hence
 * LOOM_EXCHANGE_COPY_ENGINE_BYTES's default. One stream per block (up
 * to kEngineStreams, dealt round robin), forked from the call's stream after
 * the exchange kernel and joined back to it before the publications'
 * kernel; made on first use, kept with the all-peer connections.
 */
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime.h>

#include "loom.h"

namespace loom {

constexpr int kEngineStreams = 8;

struct EngineBlock {
    const char *src; // a peer's block, mapped here
    char *dst;       // its place in this rank's output
    size_t bytes;
};

class EngineCopies {
public:
    // Enqueues every block's copy after what `stream` holds now; `stream`
    // goes on once all are done. A block whose src is its dst (a mapping
    // that failed) is not copied.
    loomResult_t copy(const std::vector<EngineBlock> &blocks, cudaStream_t stream, int rank);
    void release(); // after the streams' work (the all-peer connections go)

private:
    loomResult_t grow(int streams, int rank);
    std::vector<cudaStream_t> streams_;
    std::vector<cudaEvent_t> done_; // per stream: its copies of the call
    cudaEvent_t fork_ = nullptr;    // the call's stream up to the exchange kernel
};

} // namespace loom
