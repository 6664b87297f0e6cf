/*
 * shm transport: a ring connection between two GPUs of one host that cannot
 * reach each other's memory. The receiver's FIFO lives in POSIX shared
 * memory, registered with CUDA as mapped pinned memory in both processes, so
 * the sending GPU writes it and the receiving GPU reads it over PCIe; the
 * kernels are the same as for p2p.
 */
#pragma once

#include <cstddef>

#include "loom.h"

namespace loom {

struct ShmEndpoint {
    char name[64]; // shm_open name, "" when the peer has no segment for us
    size_t bytes;
};

struct ShmSegment {
    void *host = nullptr;   // this process's mapping
    void *device = nullptr; // the same memory as the GPU sees it
    size_t bytes = 0;
    bool owner = false;     // created here: unlinked here
    char name[64] = "";
};

// Creates a zeroed segment of `bytes`, mapped for the current GPU.
loomResult_t shmCreate(size_t bytes, const char *tag, ShmSegment *seg, ShmEndpoint *endpoint);
// Maps a peer's segment for the current GPU.
loomResult_t shmOpen(const ShmEndpoint &endpoint, ShmSegment *seg);
// Removes the name once every peer has mapped it (the memory lives on).
void shmUnlink(ShmSegment *seg);
void shmClose(ShmSegment *seg);

} // namespace loom
