/*
 * p2p transport: GPU memory of one process mapped into another through CUDA
 * IPC, so kernels store straight into the peer's FIFO over NVLink/PCIe.
 * Each mapping is opened once per communicator (opening costs milliseconds).
 */
#pragma once

#include <cuda_runtime.h>

#include "loom.h"

namespace loom {

// What a rank publishes so its peers can map its FIFO region.
struct P2pEndpoint {
    cudaIpcMemHandle_t handle;
    char busId[16]; // PCI bus id of the GPU that holds the region
};

struct P2pRegion {
    void *base = nullptr;
    size_t bytes = 0;
};

// Allocates `bytes` of zeroed device memory on the current device, exportable.
loomResult_t p2pAllocRegion(size_t bytes, P2pRegion *region, P2pEndpoint *endpoint);
void p2pFreeRegion(P2pRegion *region);

// Can this process's current device load/store into the peer's GPU memory?
bool p2pCanConnect(int myDevice, const P2pEndpoint &peer);

// Maps a peer's region (nothing to do when the peer is this process).
loomResult_t p2pOpen(const P2pEndpoint &peer, void **ptr);
void p2pClose(void *ptr);

} // namespace loom
