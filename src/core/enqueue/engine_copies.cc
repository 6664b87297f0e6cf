/*
 * core/enqueue/engine_copies.h: a call's copy-engine copies, forked from its stream
 * and joined back.
 */
#include "core/enqueue/engine_copies.h"

#include <algorithm>

#include "base/debug.h"

namespace loom {

namespace {

loomResult_t cudaFail(int rank, const char *what, cudaError_t e) {
    return fail(loomUnhandledCudaError, "rank %d: copy-engine copies: %s: %s", rank, what, cudaGetErrorString(e));
}

} // namespace

loomResult_t EngineCopies::grow(int streams, int rank) {
    cudaError_t e = cudaSuccess;
    if (!fork_) e = cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming);
    while (e == cudaSuccess && (int)streams_.size() < streams) {
        cudaStream_t s = nullptr;
        cudaEvent_t d = nullptr;
        e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            if (s) cudaStreamDestroy(s);
            break;
        }
        streams_.push_back(s);
        done_.push_back(d);
    }
    return e == cudaSuccess ? loomSuccess : cudaFail(rank, "creating streams and events", e);
}

loomResult_t EngineCopies::copy(const std::vector<EngineBlock> &blocks, cudaStream_t stream, int rank) {
    int moving = 0;
    for (const EngineBlock &b : blocks) moving += b.bytes && b.src != b.dst;
    if (!moving) return loomSuccess;
    const int used = std::min(moving, kEngineStreams);
    loomResult_t r = grow(used, rank);
    if (r != loomSuccess) return r;
    cudaError_t e = cudaEventRecord(fork_, stream);
    for (int i = 0; e == cudaSuccess && i < used; ++i) e = cudaStreamWaitEvent(streams_[i], fork_, 0);
    int next = 0;
    for (const EngineBlock &b : blocks) {
        if (e != cudaSuccess) break;
        if (!b.bytes || b.src == b.dst) continue;
        e = cudaMemcpyAsync(b.dst, b.src, b.bytes, cudaMemcpyDefault, streams_[next]);
        next = (next + 1) % used;
    }
    // Joined even after a failure, so that `stream` never runs ahead of a
    // copy that was enqueued.
    for (int i = 0; i < used; ++i) {
        cudaError_t j = cudaEventRecord(done_[i], streams_[i]);
        if (j == cudaSuccess) j = cudaStreamWaitEvent(stream, done_[i], 0);
        if (e == cudaSuccess) e = j;
    }
    return e == cudaSuccess ? loomSuccess : cudaFail(rank, "enqueuing the copies", e);
}

void EngineCopies::release() {
    for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    for (cudaEvent_t d : done_) cudaEventDestroy(d);
    if (fork_) cudaEventDestroy(fork_);
    streams_.clear();
    done_.clear();
    fork_ = nullptr;
}

} // namespace loom
