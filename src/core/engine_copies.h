/*
 * Copy-engine copies of an exchange (device/exchange_schedule.h, deferred
 * copies): a pushed gather's blocks written into the root's output by its
 * peers' copy engines instead of their SMs. Measured on 4x H200, three peers
 * into one GPU (test/perf/copy_paths, _in0 modes): the peers' copy engines
 * moved 368 GB/s into the root at 16 MiB per peer and 388 GB/s at 256 MiB
 * (the root's SMs pulling: 328 and 362 at best); the root's own copy engines
 * pulling the three blocks through IPC mappings moved only 200-216 GB/s
 * (0.46-0.58x NCCL's gather), so pulled pairs never use them. In loom-bench
 * the engines cost ~14 us more per call (the copies wait for the kernel, the
 * publications for the copies) and pay from 64 MiB per block: gather at 4
 * ranks 0.994x NCCL at 256 MiB (SMs 0.965x), 1.044x at 1 GiB (0.988x);
 * hence LOOM_EXCHANGE_COPY_ENGINE_BYTES's default. One stream per block (up
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
