/*
 * Small host tables (a ragged call's blocks, an exchange's counts and
 * displacements) uploaded to device memory on a call's stream from pinned
 * memory. From pageable memory the driver may first synchronize the stream
 * (CUDA's API synchronization behaviour: pageable memory staged to pinned),
 * and the stream may hold this communicator's earlier non-blocking call,
 * whose kernel waits for peers; a peer that reaches that call only after a
 * call of its own that waits for this rank's next one would hang with it.
 *
 * Each upload takes a slot whose last copy is done (cudaEventQuery, never a
 * wait): the table is written there, copied on the stream, and the slot's
 * event recorded after the copy. Slots are made as needed, one per upload
 * in flight, up to kMaxSlots; past that an upload goes from pageable memory
 * as before (said once at WARN). A slot too small gets a larger buffer; the
 * smaller one is freed with the communicator, since cudaFreeHost waits for
 * every running kernel. On the driver measured (1x H200, CUDA 13,
 * test/perf/api_waits) a pageable upload of 4 KiB or 1 MiB onto a stream
 * whose kernel is running did return at once: the documented staging wait
 * did not happen there, and pinned slots guard drivers where it does.
 */
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime.h>

#include "loom.h"

struct loomComm;

namespace loom {

class PinnedUploads {
public:
    static constexpr int kMaxSlots = 64;

    PinnedUploads() = default;
    PinnedUploads(const PinnedUploads &) = delete;
    PinnedUploads &operator=(const PinnedUploads &) = delete;
    // Frees the slots (the streams they were copied on are idle): deleted
    // by the communicator's release, under its device.
    ~PinnedUploads();

    // bytes of src to dst (device memory) on `stream`; src may go once this returns.
    cudaError_t upload(void *dst, const void *src, size_t bytes, cudaStream_t stream);
    // The same through comm's (made here; without one, from pageable memory).
    static cudaError_t upload(loomComm *comm, void *dst, const void *src, size_t bytes, cudaStream_t stream);
    int slots() const { return (int)slots_.size(); }

private:
    struct Slot {
        void *host = nullptr;
        size_t bytes = 0;
        cudaEvent_t copied = nullptr; // recorded after the slot's last copy
    };
    Slot *freeSlot(size_t bytes);

    std::vector<Slot> slots_;
    std::vector<void *> outgrown_; // slots' smaller buffers: freed with the communicator, never inside a call
    bool warned_ = false;
};

} // namespace loom
