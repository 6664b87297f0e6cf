/*
 * Peers' buffers used in place by the exchanges' direct pairs
 * (device/exchange/exchange_schedule.h): this rank describes the allocation under its
 * input (pulled pairs) or output (pushed pairs) to the peers that will copy
 * from or into it (a CUDA IPC handle, cached per allocation), and maps the
 * allocations its peers describe (cached per peer and allocation). Both
 * caches key an allocation by the driver's buffer id
 * (CU_POINTER_ATTRIBUTE_BUFFER_ID, unique in its process for the process's
 * life), so a buffer freed and allocated again at the same address is a new
 * entry, never a stale mapping; a peer's new allocation at an address it
 * mapped before releases the old mapping (that allocation is gone).
 *
 * Memory that legacy CUDA IPC cannot share (cudaMallocAsync pools, VMM
 * allocations, managed or host memory, another GPU's memory) is described
 * as not shareable: its pairs go through the FIFO. A miss costs
 * cudaIpcGetMemHandle on the owner and cudaIpcOpenMemHandle on the reader
 * (tens to hundreds of microseconds, once per allocation); a hit costs a
 * cuPointerGetAttributes and a search of a few entries.
 *
 * CUDA maps an allocation once per process and GPU (a second
 * cudaIpcOpenMemHandle of it fails: "resource already mapped"), so the
 * mappings themselves are shared by every communicator of the process on
 * that GPU, counted, and closed when the last one lets go; each
 * communicator keeps its own entries and events. They are keyed by the
 * owner (pid namespace, pid) and its buffer id, not by the handle's bytes:
 * two cudaIpcGetMemHandle calls on one allocation (two communicators of the
 * owner) give different bytes for the same memory. A new allocation of the
 * owner over the range of one mapped here means the old one was freed (after
 * the calls that read it: the owner's call waits for its readers): the old
 * mapping is never handed out again, and closes when its last communicator
 * lets go. The driver (1x H200, CUDA 13) mapped a new allocation of 1 or
 * 64 MiB at the address of one still mapped (test/perf/api_waits), but
 * refused some of coll_exchange's reallocated buffers ("resource already
 * mapped") until the old mappings were closed; then the owner's mappings
 * that no call will use again are closed inside the call (waiting for the
 * process's kernels), those being closed are waited for, and the new one
 * is mapped again. A call also waits where it wants an allocation whose
 * close is already running (header of core/ipc/mapping_closer.h: the newest
 * closes are held back so that this is rare).
 *
 * Mappings are closed on the closer's thread (core/ipc/mapping_closer.h), not in
 * the call that lets them go: cudaIpcCloseMemHandle waits for every kernel
 * of the process, other communicators' included, which may wait for a peer
 * that waits for this call. A mapping wanted again before its close started
 * is taken back; one being closed is waited for, then mapped anew.
 *
 * Bounds: kDescribed allocations described, kMappedPerPeer mappings per
 * peer and communicator (least recently used goes, once the kernels that
 * read it are done: each entry holds the event of its last reading call,
 * one event per call, shared by every mapping the call used, and back in a
 * pool once no entry holds it). A
 * mapping keeps the peer's memory allocated until it is released, so at most
 * kMappedPerPeer of a peer's freed buffers per communicator stay alive
 * through this cache.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "loom.h"

namespace loom {

// What a reader needs to map a block: sent per call to each reader.
struct BufferDesc {
    cudaIpcMemHandle_t handle;
    uint64_t bufferId; // the allocation's, in its owner's process
    uint64_t base;     // the allocation's start in the owner's address space
    uint64_t size;     // and its bytes
    uint64_t offset;   // the block's offset in the allocation
    uint64_t pidNamespace; // the owner's pid namespace (its inode): with pid, the process
    int32_t shareable;     // 0: not mappable; read through the FIFO
    int32_t pid;           // the owner's process (buffer ids are unique within it)
};

struct SharedMapping; // one per process, GPU and peer allocation (direct_buffers.cc)

class DirectBuffers {
  public:
    static constexpr int kDescribed = 64;
    static constexpr int kMappedPerPeer = 8;

    // A new call: mappings it uses are not released before markRead.
    void beginCall() { ++clock_; }
    // How a peer can map the allocation under `ptr` (offset: ptr's).
    // cudaDev: the communicator's GPU (memory elsewhere is not shareable).
    BufferDesc describe(const void *ptr, int cudaDev);
    // Peer q's block as described: its address in this process, on the
    // communicator's GPU cudaDev (written through by a pushed pair). `me`:
    // this rank, whose mappings fail when LOOM_DIRECT_MAP_FAIL names it (tests).
    loomResult_t map(int me, int q, const BufferDesc &d, int cudaDev, char **at);
    // After the launch that reads this call's mappings on `stream`.
    loomResult_t markRead(cudaStream_t stream);
    // Every mapping closed (after the kernels that read them).
    void release();
    DirectBuffers() = default;
    DirectBuffers(const DirectBuffers &) = delete; // its events' deleters point here
    DirectBuffers &operator=(const DirectBuffers &) = delete;
    ~DirectBuffers() { release(); }

  private:
    struct Described {
        uint64_t bufferId;
        cudaIpcMemHandle_t handle;
        bool shareable;
        uint64_t used;
    };
    struct Mapped {
        int peer;
        SharedMapping *shared; // the allocation (owner's id and range) and its start here
        std::shared_ptr<cudaEvent_t> read; // recorded after the last call that read it (null: none yet)
        uint64_t used;
    };
    void unmap(Mapped &m);

    std::vector<Described> described_;
    std::vector<Mapped> mapped_;
    std::vector<cudaEvent_t> freeEvents_; // recorded once, held by no mapping any more
    uint64_t clock_ = 0;
    bool evictionSaid_ = false;
};

} // namespace loom
