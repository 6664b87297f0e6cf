/*
 * Communicator life cycle: unique id, peer exchange over the caller's
 * bootstrap (MPI in the component), ring connections over p2p, teardown.
 */
#include "core/comm.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/debug.h"
#include "core/params.h"

using namespace loom;

namespace {

struct PeerInfo {
    uint64_t hostHash;
    int pid;
    int cudaDev;
    P2pEndpoint endpoint;
};

uint64_t fnv1a(const std::string &s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

// Same value for every process of one OS instance (hostname + boot id).
uint64_t hostHash() {
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    std::string id = host;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string b;
    if (boot >> b) id += b;
    return fnv1a(id);
}

#define CUDA_TRY(call, what)                                                                         \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess)                                                                       \
            return fail(loomUnhandledCudaError, "rank %d GPU %d: %s: %s", comm->rank, comm->cudaDev, \
                        what, cudaGetErrorString(e_));                                               \
    } while (0)

// Maps next's and prev's FIFO regions (one mapping when they are the same rank).
loomResult_t connectRing(loomComm *comm, const std::vector<PeerInfo> &peers) {
    const uint64_t me = peers[comm->rank].hostHash;
    for (int peer : {comm->next, comm->prev}) {
        if (peers[peer].hostHash != me || !p2pCanConnect(comm->cudaDev, peers[peer].endpoint)) {
            // Between hosts or GPUs without peer access: the shm and net
            // transports will carry this; until then the caller falls back.
            LOOM_INFO(kInit, "rank %d: no p2p path to rank %d (GPU %s); loom GPU path not available", comm->rank,
                      peer, peers[peer].endpoint.busId);
            return loomNotSupported;
        }
    }
    void *p = nullptr;
    loomResult_t r = p2pOpen(peers[comm->next].endpoint, &p);
    if (r != loomSuccess) return r;
    comm->nextBase = static_cast<char *>(p);
    if (comm->prev == comm->next) {
        comm->prevBase = comm->nextBase;
        return loomSuccess;
    }
    r = p2pOpen(peers[comm->prev].endpoint, &p);
    comm->prevBase = static_cast<char *>(p);
    return r;
}

loomResult_t initComm(loomComm *comm, const loomBootstrap_t *bs) {
    const Params &p = params();
    comm->maxChannels = p.maxChannels;
    comm->nslots = p.nslots;
    comm->slotBytes = (size_t)p.slotBytes;
    comm->channelBytes = sizeof(FifoFlags) + (size_t)comm->nslots * comm->slotBytes;
    comm->next = (comm->rank + 1) % comm->nranks;
    comm->prev = (comm->rank + comm->nranks - 1) % comm->nranks;

    CUDA_TRY(cudaSetDevice(comm->cudaDev), "cudaSetDevice");
    CUDA_TRY(cudaStreamCreateWithFlags(&comm->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    CUDA_TRY(cudaHostAlloc((void **)&comm->abortFlag, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
    *comm->abortFlag = 0;
    CUDA_TRY(cudaHostGetDevicePointer((void **)&comm->abortFlagDev, (void *)comm->abortFlag, 0),
             "cudaHostGetDevicePointer");
    int clockKHz = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, comm->cudaDev), "clock rate");
    comm->timeoutCycles = (unsigned long long)(p.timeoutSeconds * clockKHz * 1000.0);

    PeerInfo mine{};
    mine.hostHash = hostHash();
    mine.pid = (int)getpid();
    mine.cudaDev = comm->cudaDev;
    loomResult_t r = p2pAllocRegion((size_t)comm->maxChannels * comm->channelBytes, &comm->region, &mine.endpoint);
    if (r != loomSuccess) return r;
    memcpy(comm->busId, mine.endpoint.busId, sizeof(comm->busId));

    std::vector<PeerInfo> peers(comm->nranks);
    if (bs->allgather(bs->ctx, &mine, peers.data(), sizeof(PeerInfo)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of peer info failed", comm->rank);
    if (comm->nranks > 1) {
        r = connectRing(comm, peers);
        if (r != loomSuccess) return r;
    }
    LOOM_INFO(kInit, "rank %d/%d GPU %d (%s): ring %d -> %d -> %d over p2p, %d channels x %d slots x %zu KiB = %.1f MiB",
              comm->rank, comm->nranks, comm->cudaDev, comm->busId, comm->prev, comm->rank, comm->next,
              comm->maxChannels, comm->nslots, comm->slotBytes >> 10, comm->region.bytes / 1048576.0);
    return loomSuccess;
}

void releaseComm(loomComm *comm) {
    int current = -1;
    cudaGetDevice(&current);
    if (comm->cudaDev >= 0) cudaSetDevice(comm->cudaDev);
    if (comm->stream) cudaStreamSynchronize(comm->stream);
    if (comm->prevBase && comm->prevBase != comm->nextBase) p2pClose(comm->prevBase);
    if (comm->nextBase) p2pClose(comm->nextBase);
    p2pFreeRegion(&comm->region);
    if (comm->stream) cudaStreamDestroy(comm->stream);
    if (comm->abortFlag) cudaFreeHost((void *)comm->abortFlag);
    if (current >= 0) cudaSetDevice(current);
    delete comm;
}

} // namespace

extern "C" loomResult_t loomGetUniqueId(loomUniqueId *id) {
    if (!id) return fail(loomInvalidArgument, "loomGetUniqueId: id is NULL");
    memset(id, 0, sizeof(*id));
    std::random_device rd;
    uint64_t words[3] = {hostHash(), ((uint64_t)rd() << 32) | rd(), (uint64_t)getpid()};
    memcpy(id->internal, words, sizeof(words));
    return loomSuccess;
}

extern "C" loomResult_t loomCommInitRank(loomComm_t *out, int nranks, loomUniqueId id, int rank, int cudaDev,
                                         const loomBootstrap_t *bootstrap) {
    (void)id; // identifies the communicator in logs; peers meet through the bootstrap
    if (!out || !bootstrap || !bootstrap->allgather) return fail(loomInvalidArgument, "loomCommInitRank: NULL argument");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(loomInvalidArgument, "loomCommInitRank: rank %d of %d", rank, nranks);
    *out = nullptr;
    loomComm *comm = new (std::nothrow) loomComm;
    if (!comm) return fail(loomSystemError, "loomCommInitRank: out of memory");
    comm->rank = rank;
    comm->nranks = nranks;
    comm->cudaDev = cudaDev;
    int current = -1;
    cudaGetDevice(&current);
    loomResult_t r = initComm(comm, bootstrap);
    if (current >= 0) cudaSetDevice(current);
    if (r != loomSuccess) {
        releaseComm(comm);
        return r;
    }
    *out = comm;
    return loomSuccess;
}

extern "C" loomResult_t loomCommDestroy(loomComm_t comm) {
    if (comm) releaseComm(comm);
    return loomSuccess;
}

extern "C" loomResult_t loomCommCount(loomComm_t comm, int *count) {
    if (!comm || !count) return fail(loomInvalidArgument, "loomCommCount: NULL argument");
    *count = comm->nranks;
    return loomSuccess;
}

extern "C" loomResult_t loomCommUserRank(loomComm_t comm, int *rank) {
    if (!comm || !rank) return fail(loomInvalidArgument, "loomCommUserRank: NULL argument");
    *rank = comm->rank;
    return loomSuccess;
}

extern "C" loomResult_t loomCommMemoryBytes(loomComm_t comm, size_t *bytes) {
    if (!comm || !bytes) return fail(loomInvalidArgument, "loomCommMemoryBytes: NULL argument");
    *bytes = comm->region.bytes;
    return loomSuccess;
}

extern "C" loomResult_t loomCommWait(loomComm_t comm) {
    if (!comm) return fail(loomInvalidArgument, "loomCommWait: comm is NULL");
    cudaError_t err = cudaStreamSynchronize(comm->stream);
    if (*comm->abortFlag) {
        comm->failed = true;
        char host[64] = "?";
        gethostname(host, sizeof(host) - 1);
        return fail(loomRemoteError, "%s rank %d GPU %d (%s): allreduce: ring neighbour rank %d or %d silent for %.0f s; "
                    "communicator unusable", host, comm->rank, comm->cudaDev, comm->busId, comm->prev, comm->next,
                    params().timeoutSeconds);
    }
    if (err != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): kernel failed: %s", comm->rank, comm->cudaDev,
                    comm->busId, cudaGetErrorString(err));
    return loomSuccess;
}
