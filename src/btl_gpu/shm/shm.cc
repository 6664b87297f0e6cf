#include "btl_gpu/shm/shm.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "base/debug.h"

namespace loom {

namespace {

loomResult_t mapAndRegister(int fd, size_t bytes, ShmSegment *seg) {
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fail(loomSystemError, "shm: mmap of %zu bytes (%s): %s", bytes, seg->name, strerror(errno));
    cudaError_t err = cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (err == cudaSuccess) err = cudaHostGetDevicePointer(&seg->device, p, 0);
    if (err != cudaSuccess) {
        munmap(p, bytes);
        return fail(loomUnhandledCudaError, "shm: registering %s with CUDA: %s", seg->name, cudaGetErrorString(err));
    }
    seg->host = p;
    seg->bytes = bytes;
    return loomSuccess;
}

} // namespace

loomResult_t shmCreate(size_t bytes, const char *tag, ShmSegment *seg, ShmEndpoint *endpoint) {
    static std::atomic<unsigned> counter{0};
    snprintf(seg->name, sizeof(seg->name), "/loom-%d-%u-%s", (int)getpid(), counter++, tag);
    int fd = shm_open(seg->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return fail(loomSystemError, "shm: shm_open(%s): %s", seg->name, strerror(errno));
    seg->owner = true;
    if (ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        shmUnlink(seg);
        return fail(loomSystemError, "shm: %zu bytes for %s: %s (is /dev/shm large enough?)", bytes, seg->name,
                    strerror(errno));
    }
    loomResult_t r = mapAndRegister(fd, bytes, seg);
    close(fd);
    if (r != loomSuccess) {
        shmUnlink(seg);
        return r;
    }
    memset(seg->host, 0, bytes);
    snprintf(endpoint->name, sizeof(endpoint->name), "%s", seg->name);
    endpoint->bytes = bytes;
    return loomSuccess;
}

loomResult_t shmOpen(const ShmEndpoint &endpoint, ShmSegment *seg) {
    snprintf(seg->name, sizeof(seg->name), "%s", endpoint.name);
    int fd = shm_open(endpoint.name, O_RDWR, 0600);
    if (fd < 0) return fail(loomSystemError, "shm: shm_open(%s): %s", endpoint.name, strerror(errno));
    loomResult_t r = mapAndRegister(fd, endpoint.bytes, seg);
    close(fd);
    return r;
}

void shmUnlink(ShmSegment *seg) {
    if (seg->owner && seg->name[0]) shm_unlink(seg->name);
    seg->owner = false;
}

void shmClose(ShmSegment *seg) {
    shmUnlink(seg);
    if (seg->host) {
        cudaHostUnregister(seg->host);
        munmap(seg->host, seg->bytes);
    }
    seg->host = seg->device = nullptr;
}

} // namespace loom
