// The datatype plan's copy kernel (dt_copy.h).
#include "device/datatype/dt_copy.h"

#include <cstring>

#include "device/datatype/dt_view_copy.h"
#include "device/datatype/dt_warp_copy.h"
#include "device/kernel_load.h"

namespace loom {

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

// Warps take a piece each, or with kLanes (small pieces:
// dtPiecesAreSmall) 32 pieces each, a lane's each (dtLaneBatches).
template <bool kLanes>
__global__ void dtCopyKernel(const DtPlanDev p, uint64_t count, const char *user, char *packed, bool unpack) {
    const bool inline_ = p.nsegs <= kDtInlineSegs;
    const loom_dt_seg_t *segs = inline_ ? p.segs : p.tableSegs;
    const uint64_t *first = inline_ ? p.firstPiece : p.tableFirst;
    const uint64_t perElement = p.pieces, total = perElement * count;
    const int lane = threadIdx.x & 31;
    const uint64_t warp = blockIdx.x * (uint64_t)kWarps + threadIdx.x / 32, warps = (uint64_t)gridDim.x * kWarps;
    char *u = const_cast<char *>(user);
    if constexpr (kLanes) {
        dtLaneBatches(0, total, warp, warps, lane, u, 0, packed, unpack,
                      [&](uint64_t w, DtPiece *pc, uint32_t *lo, uint32_t *hi) {
                          *pc = dtPieceAt(segs, first, p.nsegs, perElement, p.extent, p.bytes, w);
                          *lo = 0;
                          *hi = pc->n * pc->nr;
                      });
    } else {
        for (uint64_t w = warp; w < total; w += warps) {
            const DtPiece pc = dtPieceAt(segs, first, p.nsegs, perElement, p.extent, p.bytes, w);
            dtPieceCopy(u + pc.user, pc.stride, packed + pc.packed, pc.n, pc.nr, 0, pc.n * pc.nr, unpack, lane);
        }
    }
}

// Packed bytes [a, a + len) of a view, between the user's layout and packed + a.
template <bool kLanes>
__global__ void dtViewKernel(const DtView v, char *user, char *packed, uint64_t a, uint64_t len, bool unpack) {
    const uint64_t warp = blockIdx.x * (uint64_t)kWarps + threadIdx.x / 32, warps = (uint64_t)gridDim.x * kWarps;
    if constexpr (kLanes) dtViewCopyLanes(v, user, a, len, packed + a, unpack, warp, warps, threadIdx.x & 31);
    else dtViewCopySpread(v, user, a, len, packed + a, unpack, warp, warps, threadIdx.x & 31);
}

// CTAs for `pieces` pieces, a warp's each or (lanes) 32 a warp's.
int dtCtas(uint64_t pieces, bool lanes) {
    const uint64_t warps = lanes ? (pieces + 31) / 32 : pieces, want = (warps + kWarps - 1) / kWarps;
    return want < 1024 ? (int)want : 1024;
}

} // namespace

size_t dtTableBytes(int nsegs) {
    return nsegs <= kDtInlineSegs ? 0 : nsegs * sizeof(loom_dt_seg_t) + (nsegs + 1) * sizeof(uint64_t);
}

void dtPlanDev(const loom_dt_seg_t *segs, int nsegs, int64_t extent, uint64_t bytes, void *hostTable,
               const void *devTable, DtPlanDev *p) {
    memset(p, 0, sizeof(*p));
    const bool inline_ = nsegs <= kDtInlineSegs;
    loom_dt_seg_t *s = inline_ ? p->segs : static_cast<loom_dt_seg_t *>(hostTable);
    uint64_t *first = inline_ ? p->firstPiece : reinterpret_cast<uint64_t *>(s + nsegs);
    first[0] = 0;
    for (int k = 0; k < nsegs; ++k) {
        s[k] = segs[k];
        first[k + 1] = first[k] + dtSegPieces(segs[k]);
    }
    if (!inline_) {
        p->tableSegs = static_cast<const loom_dt_seg_t *>(devTable);
        p->tableFirst = reinterpret_cast<const uint64_t *>(p->tableSegs + nsegs);
    }
    p->pieces = first[nsegs];
    p->nsegs = nsegs;
    p->extent = extent;
    p->bytes = bytes;
}

cudaError_t launchDtCopy(const DtPlanDev &plan, size_t count, const void *user, void *packed, bool unpack, int ctas,
                         cudaStream_t stream) {
    if (count == 0 || plan.nsegs == 0 || plan.pieces == 0) return cudaSuccess;
    const bool lanes = dtPiecesAreSmall(plan.bytes, plan.pieces);
    if (ctas <= 0) ctas = dtCtas(plan.pieces * count, lanes);
    const auto kernel = lanes ? dtCopyKernel<true> : dtCopyKernel<false>;
    kernel<<<ctas, kThreads, 0, stream>>>(plan, count, static_cast<const char *>(user), static_cast<char *>(packed),
                                          unpack);
    return cudaGetLastError();
}

cudaError_t launchDtViewCopy(const DtView &v, const void *user, void *packed, uint64_t a, uint64_t len, bool unpack,
                             cudaStream_t stream) {
    if (len == 0 || v.nblocks == 0 || v.pieces == 0) return cudaSuccess;
    const bool lanes = dtPiecesAreSmall(v.bytes, v.pieces);
    const auto kernel = lanes ? dtViewKernel<true> : dtViewKernel<false>;
    kernel<<<dtCtas(v.pieces, lanes), kThreads, 0, stream>>>(v, const_cast<char *>(static_cast<const char *>(user)),
                                                            static_cast<char *>(packed), a, len, unpack);
    return cudaGetLastError();
}

cudaError_t loadDtCopyKernels(KernelLoad *l) {
    return loadKernels(l, dtCopyKernel<false>, dtCopyKernel<true>, dtViewKernel<false>, dtViewKernel<true>);
}

} // namespace loom
