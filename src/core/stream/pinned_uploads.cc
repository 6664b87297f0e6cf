#include "core/stream/pinned_uploads.h"

#include <cstring>
#include <new>

#include "core/comm/comm.h"
#include "base/debug.h"

namespace loom {

PinnedUploads::~PinnedUploads() {
    for (Slot &s : slots_) {
        if (s.copied) cudaEventSynchronize(s.copied);
        if (s.copied) cudaEventDestroy(s.copied);
        if (s.host) cudaFreeHost(s.host);
    }
    for (void *p : outgrown_) cudaFreeHost(p);
}

PinnedUploads::Slot *PinnedUploads::freeSlot(size_t bytes) {
    Slot *small = nullptr; // a free slot too small: grown rather than adding one
    for (Slot &s : slots_) {
        const cudaError_t q = cudaEventQuery(s.copied);
        if (q == cudaErrorNotReady) continue;
        if (q != cudaSuccess) {
            cudaGetLastError(); // a failed stream: its error is the call's, not the slot's
            continue;
        }
        if (s.bytes >= bytes) return &s;
        small = &s;
    }
    const size_t want = (bytes + 4095) / 4096 * 4096;
    void *host = nullptr;
    if (small) {
        if (cudaHostAlloc(&host, want, cudaHostAllocDefault) != cudaSuccess) return nullptr;
        if (small->host) outgrown_.push_back(small->host); // cudaFreeHost waits for running kernels (api_waits)
        small->host = host;
        small->bytes = want;
        return small;
    }
    if ((int)slots_.size() >= kMaxSlots) return nullptr;
    Slot s;
    if (cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming) != cudaSuccess) return nullptr;
    if (cudaHostAlloc(&s.host, want, cudaHostAllocDefault) != cudaSuccess) {
        cudaEventDestroy(s.copied);
        return nullptr;
    }
    s.bytes = want;
    slots_.push_back(s);
    return &slots_.back();
}

cudaError_t PinnedUploads::upload(loomComm *comm, void *dst, const void *src, size_t bytes, cudaStream_t stream) {
    if (!comm->uploads) comm->uploads = new (std::nothrow) PinnedUploads;
    if (!comm->uploads) return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
    // Slots' events and pinned buffers belong to the communicator's device.
    int current = -1;
    cudaGetDevice(&current);
    if (current != comm->cudaDev) cudaSetDevice(comm->cudaDev);
    const cudaError_t e = comm->uploads->upload(dst, src, bytes, stream);
    if (current >= 0 && current != comm->cudaDev) cudaSetDevice(current);
    return e;
}

cudaError_t PinnedUploads::upload(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return cudaSuccess;
    Slot *s = freeSlot(bytes);
    if (!s) {
        cudaGetLastError(); // an allocation that failed is not the call's error
        if (!warned_)
            LOOM_WARN(kColl, "%d table uploads in flight, or no pinned memory: tables go from pageable memory, "
                      "which may synchronize the stream", (int)slots_.size());
        warned_ = true;
        return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
    }
    memcpy(s->host, src, bytes);
    cudaError_t e = cudaMemcpyAsync(dst, s->host, bytes, cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess) return e; // nothing queued: the slot stays free
    e = cudaEventRecord(s->copied, stream);
    if (e != cudaSuccess) { // the copy may still read the slot, and its event cannot say when: retire it
        outgrown_.push_back(s->host);
        s->host = nullptr;
        s->bytes = 0;
    }
    return e;
}

} // namespace loom
