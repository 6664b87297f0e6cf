/*
 * loom's network plugin interface, in the shape of NCCL's net plugins: a
 * table of functions over opaque communicators. Connection setup is
 * non-blocking (connect/accept return a null comm until established, call
 * again); data calls return a request (or null: try again later) that test()
 * completes. Implemented by `ucx` (any fabric UCX drives; TCP in tests) and,
 * next, `ib` (native verbs).
 */
#pragma once

#include <cstddef>

#include "loom.h"

namespace loom {
namespace net {

// What a receiver publishes (through the bootstrap) for a sender to connect.
constexpr size_t kHandleBytes = 1024; // a UCX worker address with several transports needs a few hundred bytes
struct Handle {
    char data[kHandleBytes];
};

struct Properties {
    char name[64];
    char pciPath[256]; // "" when unknown
    double speedGbps;  // 0 when unknown
    int latencyUs;     // 0 when unknown
    int maxRecvs;      // receives one irecv can group
    bool gdr;          // can read/write GPU memory directly
    bool dmabuf;       // supports regMrDmaBuf
};

enum class MemType { Host = 0, Cuda = 1 };

struct NetPlugin {
    const char *name;
    loomResult_t (*init)();
    loomResult_t (*devices)(int *ndev);
    loomResult_t (*getProperties)(int dev, Properties *props);
    loomResult_t (*listen)(int dev, Handle *handle, void **listenComm);
    // The handle keeps the connect state between calls (as NCCL's does).
    loomResult_t (*connect)(int dev, Handle *handle, void **sendComm);
    loomResult_t (*accept)(void *listenComm, void **recvComm);
    loomResult_t (*regMr)(void *comm, void *data, size_t size, MemType type, void **mhandle);
    loomResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, MemType type, int fd, size_t offset,
                                void **mhandle);
    loomResult_t (*deregMr)(void *comm, void *mhandle);
    loomResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void **request);
    loomResult_t (*irecv)(void *recvComm, void *data, size_t size, int tag, void *mhandle, void **request);
    // Makes received GPU data visible to the GPU; *request null: nothing to do.
    loomResult_t (*iflush)(void *recvComm, void *data, size_t size, void *mhandle, void **request);
    // *done set when finished; *size: bytes sent or received. Errors free the request.
    loomResult_t (*test)(void *request, int *done, size_t *size);
    loomResult_t (*closeSend)(void *sendComm);
    loomResult_t (*closeRecv)(void *recvComm);
    loomResult_t (*closeListen)(void *listenComm);
    // Optional (may be null): lets a connection's machinery run while no
    // request is in flight (keepalives, connection upkeep). The proxy calls
    // it for idle connections from time to time.
    loomResult_t (*progress)(void *comm);
    // Optional (may be null): gives up a connect() in progress on `handle`
    // (the caller stopped waiting for it), releasing what it holds.
    loomResult_t (*abandonConnect)(Handle *handle);
};

} // namespace net
} // namespace loom
