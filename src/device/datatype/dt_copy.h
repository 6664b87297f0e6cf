/*
 * Packing and unpacking on the GPU with a datatype plan
 * (src/coll/coll_loom_dtplan.h): one kernel moves count elements between
 * a user buffer laid out as the plan says and a packed one, in device
 * (or mapped host) memory.
 *
 * The work is cut into pieces of about kDtPieceBytes, and a warp moves a
 * piece: a part of one long run, or, where runs are short (under half a
 * piece), as many whole runs as fill one, so that a vector of 256-byte
 * blocks keeps every lane busy (one run per warp left half of them idle:
 * 57% of a device copy, test/gpu/dt_pack). Each lane keeps kDtUnroll
 * words in flight, the widest words (16, 8, 4, 2 or 1 bytes) that every
 * address and length of the piece allows.
 *
 * A plan of up to kDtInlineSegs segments travels in the kernel's
 * arguments; a longer one in a device table (dtPlanTable), which the
 * caller uploads on the launch's stream.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "base/dt_seg.h"
#include "device/collectives.h"
#include "device/host_device.h"

namespace loom {

constexpr uint64_t kDtPieceBytes = 4096;
constexpr int kDtInlineSegs = 16;

// A plan as the kernel reads it: per segment the pieces of one element
// before it (firstPiece[k]; firstPiece[nsegs]: an element's pieces).
struct DtPlanDev {
    loom_dt_seg_t segs[kDtInlineSegs]; // nsegs <= kDtInlineSegs
    uint64_t firstPiece[kDtInlineSegs + 1];
    const loom_dt_seg_t *tableSegs;    // else: the device table (dtPlanTable)
    const uint64_t *tableFirst;
    uint64_t pieces; // of one element
    int nsegs;
    int64_t extent;  // from one element's start to the next's
    uint64_t bytes;  // packed bytes of one element
};

// Whole runs of len bytes a piece takes (1: a run is cut into pieces).
LOOM_HD uint64_t dtRunsPerPiece(uint64_t len) { return len >= kDtPieceBytes / 2 || len == 0 ? 1 : kDtPieceBytes / len; }
// Pieces of one run of len bytes (runs of at least half a piece).
LOOM_HD uint64_t dtPiecesOf(uint64_t len) { return (len + kDtPieceBytes - 1) / kDtPieceBytes; }
// Pieces of one segment.
LOOM_HD uint64_t dtSegPieces(const loom_dt_seg_t &s) {
    const uint64_t g = dtRunsPerPiece(s.len);
    return s.len == 0 ? 0 : g > 1 ? (s.count + g - 1) / g : s.count * dtPiecesOf(s.len);
}

// Bytes of the device table of a plan of nsegs segments (0: inline).
size_t dtTableBytes(int nsegs);
// The kernel's view of a plan (segs in host memory). Past kDtInlineSegs
// segments it fills hostTable (dtTableBytes) for the caller to copy to
// devTable, in device memory, before the launch.
void dtPlanDev(const loom_dt_seg_t *segs, int nsegs, int64_t extent, uint64_t bytes, void *hostTable,
               const void *devTable, DtPlanDev *p);

// count elements: user -> packed (unpack false) or packed -> user (true),
// on stream, with ctas CTAs of 256 threads (0: enough for the work, at
// most 1024).
cudaError_t launchDtCopy(const DtPlanDev &plan, size_t count, const void *user, void *packed, bool unpack, int ctas,
                         cudaStream_t stream);
// Loads the kernel before any loom kernel runs (device/kernel_load.h).
cudaError_t loadDtCopyKernels(KernelLoad *l);

} // namespace loom
