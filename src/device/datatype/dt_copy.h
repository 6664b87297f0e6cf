/*
 * Packing and unpacking on the GPU with a datatype plan
 * (src/coll/coll_loom_dtplan.h): one kernel moves count elements between
 * a user buffer laid out as the plan says and a packed one, in device
 * (or mapped host) memory.
 *
 * The work is cut into pieces (dt_pieces.h), a warp per piece, or where
 * pieces are small (dtPiecesAreSmall, dt_pieces.h) a lane per piece; each
 * lane keeps kDtUnroll words in flight, the widest words (16, 8, 4, 2 or
 * 1 bytes) that every address and length of the piece allows.
 *
 * A plan of up to kDtInlineSegs segments travels in the kernel's
 * arguments; a longer one in a device table (dtTableBytes), which the
 * caller uploads on the launch's stream. A call's blocks of several types
 * go in one launch over a packed view (dt_view.h), all of whose tables
 * the caller uploads (dt_view_build.h).
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "base/dt_seg.h"
#include "device/collectives.h"
#include "device/datatype/dt_pieces.h"
#include "device/datatype/dt_view.h"

namespace loom {

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
// Packed bytes [a, a + len) of a view (dt_view.h: its tables in device
// memory): user -> packed + a (unpack false) or back, on stream.
cudaError_t launchDtViewCopy(const DtView &v, const void *user, void *packed, uint64_t a, uint64_t len, bool unpack,
                             cudaStream_t stream);
// Loads the kernels before any loom kernel runs (device/kernel_load.h).
cudaError_t loadDtCopyKernels(KernelLoad *l);

} // namespace loom
