#include "btl_gpu/p2p/p2p.h"

#include <cstring>

#include "base/debug.h"
#include "base/setup_write.h"

namespace loom {

loomResult_t p2pAllocRegion(size_t bytes, P2pRegion *region, P2pEndpoint *endpoint) {
    int dev = -1;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess) err = cudaMalloc(&region->base, bytes);
    if (err == cudaSuccess) err = setupWrite(region->base, nullptr, bytes);
    if (err == cudaSuccess) err = cudaIpcGetMemHandle(&endpoint->handle, region->base);
    if (err == cudaSuccess) err = cudaDeviceGetPCIBusId(endpoint->busId, sizeof(endpoint->busId), dev);
    if (err != cudaSuccess) {
        if (region->base) cudaFree(region->base);
        region->base = nullptr;
        return fail(loomUnhandledCudaError, "p2p: FIFO region of %zu bytes on GPU %d: %s", bytes, dev,
                    cudaGetErrorString(err));
    }
    region->bytes = bytes;
    return loomSuccess;
}

void p2pFreeRegion(P2pRegion *region) {
    if (region->base) cudaFree(region->base);
    region->base = nullptr;
}

bool p2pCanConnect(int myDevice, const P2pEndpoint &peer) {
    int peerDevice = -1;
    if (cudaDeviceGetByPCIBusId(&peerDevice, peer.busId) != cudaSuccess) {
        cudaGetLastError(); // not visible from here: not a p2p peer
        return false;
    }
    if (peerDevice == myDevice) return true; // same GPU, another process
    int can = 0;
    return cudaDeviceCanAccessPeer(&can, myDevice, peerDevice) == cudaSuccess && can;
}

loomResult_t p2pOpen(const P2pEndpoint &peer, void **ptr) {
    cudaError_t err = cudaIpcOpenMemHandle(ptr, peer.handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "p2p: cannot map the FIFO of the GPU at %s: %s", peer.busId,
                    cudaGetErrorString(err));
    return loomSuccess;
}

void p2pClose(void *ptr) {
    if (ptr) cudaIpcCloseMemHandle(ptr);
}

} // namespace loom
