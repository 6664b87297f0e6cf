/*
 * The zero-copy allreduce, host side (device/zerocopy/zerocopy_schedule.h): per call,
 * every rank describes its input and output (core/ipc/direct_buffers.h: a CUDA
 * IPC handle per allocation, cached by the driver's buffer id) to every peer
 * through the bootstrap's pairwise exchange, maps the peers' (cached per
 * peer and allocation), and launches one kernel that reduces straight from
 * the mapped buffers. Every rank receives every rank's descriptions, so the
 * choices that follow are alike everywhere: all buffers shareable, or every
 * rank takes the FIFO path for this call; one-shot or two-shot.
 *
 * The descriptions travel through the host's shared-memory board
 * (core/ipc/desc_board.h, in the arrival board's segment) where every rank has
 * it, else as n - 1 point-to-point messages each way on the MPI PML (the
 * bootstrap's pairwise exchange), which costs a few microseconds a call
 * (docs/performance.md, "Measurements behind the code").
 *
 * Cost per call on a cache hit: two cuPointerGetAttributes, the exchange,
 * one event record; on a miss add cudaIpcGetMemHandle at the owner and
 * cudaIpcOpenMemHandle here (tens to hundreds of microseconds, once per
 * allocation). The exchange makes the call wait on the host for every peer
 * to arrive: fine for blocking calls, not for non-blocking ones (issue 14).
 */
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "core/comm/comm.h"
#include "core/ipc/desc_board.h"
#include "core/ipc/direct_buffers.h"
#include "core/algo/zerocopy/zerocopy_profile.h"
#include "loom.h"

namespace loom {

// What a rank tells its peers per call: its input's and output's
// allocations and the call's size (checked alike on every rank).
struct ZeroCopyRecord {
    BufferDesc in, out;
    uint64_t bytes;
};

struct ZeroCopyState {
    DirectBuffers buffers;                // this communicator's descriptions and mappings
    std::vector<ZeroCopyRecord> records;  // a call's, per rank; then the n - 1 copies of this rank's to send
    std::vector<ZeroCopyRecord> received; // ... and what it receives, per peer (the PML's exchange)
    std::vector<int> peers;           // every other rank
    uint64_t calls = 0;               // zero-copy kernels launched (the flags' call number)
    std::unique_ptr<DescBoard> board; // the host's board (null: the PML), agreed by every rank
    uint64_t exchanges = 0;           // descriptions exchanged on it (the board's seq)
    bool unshareableSaid = false, said = false, stagedSaid = false;
    ZeroCopyProfile profile;          // LOOM_PROFILE: where a call's time goes
};

// The bytes of the board's area for nranks ranks' records (each rank's
// input and output descriptions).
inline size_t zeroCopyBoardBytes(int nranks) { return DescBoard::bytes(nranks, sizeof(ZeroCopyRecord)); }

// Runs the allreduce zero-copy when every rank's buffers can be mapped
// (*ran = true), else leaves it to the caller's FIFO path (*ran = false,
// alike on every rank). A peer buffer this rank cannot map fails the call on
// every rank (the kernel tells them); the communicator stays usable.
loomResult_t zeroCopyAllReduce(loomComm *comm, const void *in, void *out, size_t count, loomDataType_t dtype,
                               loomRedOp_t op, cudaStream_t stream, bool *ran);

// The staged two-shot (device/zerocopy/zerocopy_schedule.h): the same kernel and
// flags, over each rank's scratch in its region (mapped by the peers at
// set-up) instead of its buffers, so no per-call host agreement: for calls
// that may not wait on the host (non-blocking) and buffers that cannot be
// shared. Fits: zero-copy ready and 0 < bytes <= the scratch's size
// (LOOM_ZERO_COPY_STAGED_BYTES), alike on every rank.
bool stagedTwoShotFits(const loomComm *comm, size_t bytes);
loomResult_t stagedTwoShotAllReduce(loomComm *comm, const void *in, void *out, size_t count, loomDataType_t dtype,
                                    loomRedOp_t op, cudaStream_t stream);

} // namespace loom
