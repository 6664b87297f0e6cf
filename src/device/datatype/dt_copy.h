/*
 * Packing and unpacking on the GPU with a datatype plan
 * (src/coll/coll_loom_dtplan.h): one kernel moves count elements between
 * a user buffer laid out as the plan says and a packed one, in device
 * (or mapped host) memory. The work is cut into pieces of at most
 * kDtPieceBytes of one run; a warp moves a piece, 16-byte words where both
 * ends allow, else 4-byte, else bytes.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "base/dt_seg.h"
#include "device/host_device.h"

namespace loom {

constexpr uint64_t kDtPieceBytes = 4096;

// A plan in device memory: its segments, and per segment the pieces of one
// element before it (firstPiece[k]; firstPiece[nsegs]: an element's pieces).
struct DtPlanDev {
    const loom_dt_seg_t *segs;
    const uint64_t *firstPiece;
    uint64_t pieces;  // of one element (firstPiece[nsegs], known to the host too)
    int nsegs;
    int64_t extent;   // from one element's start to the next's
    uint64_t bytes;   // packed bytes of one element
};

// Pieces of one run of len bytes.
LOOM_HD uint64_t dtPiecesOf(uint64_t len) { return (len + kDtPieceBytes - 1) / kDtPieceBytes; }

// count elements: user -> packed (unpack false) or packed -> user (true),
// on stream, with ctas CTAs of 256 threads (0: enough for the work, at
// most 1024).
cudaError_t launchDtCopy(const DtPlanDev &plan, size_t count, const void *user, void *packed, bool unpack, int ctas,
                         cudaStream_t stream);

} // namespace loom
