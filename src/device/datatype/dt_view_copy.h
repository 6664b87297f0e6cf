/*
 * A packed range of a view (dt_view.h) copied in place by a group of warps:
 * packed bytes [a, a + len) of the call, between the user's layout and a
 * flat buffer that holds those bytes (flat[0] is packed byte a): a FIFO
 * slot, a peer's block, or the call's whole packed buffer. A piece per
 * warp at a time (dtViewCopySpread), or where pieces are small 32 per warp,
 * a lane's each (dtViewCopyLanes); each piece is found by its searches.
 */
#pragma once

#include "device/datatype/dt_view.h"
#include "device/datatype/dt_warp_copy.h"

namespace loom {

// Piece pc's part [lo, hi) between the user's layout and flat (which holds
// packed byte a at 0), by the whole warp or by this lane alone.
__device__ inline void dtViewPieceCopy(const DtPiece &pc, uint32_t lo, uint32_t hi, char *user, uint64_t a, char *flat,
                                       bool toUser, int lane, bool alone) {
    char *u = user + pc.user;
    char *f = flat + (int64_t)(pc.packed - a); // below flat for a piece that starts before a: only [lo, hi) is touched
    if (alone) dtPieceCopy<true>(u, pc.stride, f, pc.n, pc.nr, lo, hi, toUser, lane);
    else dtPieceCopy<false>(u, pc.stride, f, pc.n, pc.nr, lo, hi, toUser, lane);
}

// Each lane's piece, part [lo, hi) (none: lo == hi): a small part (at
// most kDtLanePieceBytes) the lane copies alone, all in flight at once,
// and a larger one the whole warp copies, one after the other. Every lane of
// the warp calls it.
__device__ inline void dtLanePiecesCopy(const DtPiece &mine, uint32_t lo, uint32_t hi, char *user, uint64_t a,
                                        char *flat, bool toUser, int lane) {
    const bool alone = hi - lo <= kDtLanePieceBytes;
    if (alone && lo < hi) dtViewPieceCopy(mine, lo, hi, user, a, flat, toUser, lane, true);
    for (unsigned big = __ballot_sync(~0u, !alone); big; big &= big - 1) {
        const int k = __ffs(big) - 1;
        DtPiece pc;
        pc.user = __shfl_sync(~0u, mine.user, k);
        pc.packed = __shfl_sync(~0u, mine.packed, k);
        pc.stride = __shfl_sync(~0u, mine.stride, k);
        pc.n = __shfl_sync(~0u, mine.n, k);
        pc.nr = __shfl_sync(~0u, mine.nr, k);
        dtViewPieceCopy(pc, __shfl_sync(~0u, lo, k), __shfl_sync(~0u, hi, k), user, a, flat, toUser, lane, false);
    }
}

// Warp `warp` of `warps` takes every warps-th piece, each found by its
// searches: the view kernel's form (dt_copy.cu) and the exchange kernel's
// (a FIFO chunk or a pair's slice). Warps that walked runs of pieces with
// additions were faster per CTA in test/perf/view_loops but slower in the
// collectives and over the whole GPU: more registers, more spills
// (docs/performance.md).
__device__ inline void dtViewCopySpread(const DtView &v, char *user, uint64_t a, uint64_t len, char *flat,
                                        bool toUser, uint64_t warp, uint64_t warps, int lane) {
    uint64_t first, end;
    dtViewRangePieces(v, a, len, &first, &end);
    for (uint64_t w = first + warp; w < end; w += warps) {
        const DtPiece pc = dtViewPieceAt(v, w);
        uint32_t lo, hi;
        dtViewClip(pc, a, a + len, &lo, &hi);
        if (lo < hi) dtViewPieceCopy(pc, lo, hi, user, a, flat, toUser, lane, false);
    }
}

// Pieces [first, end), 32 to a warp at a time (warp `warp` of `warps`),
// lane k taking the batch's k-th: partOf(w, &pc, &lo, &hi) gives piece w
// and its part. The lanes form of the view and plan kernels.
template <typename PartOf>
__device__ inline void dtLaneBatches(uint64_t first, uint64_t end, uint64_t warp, uint64_t warps, int lane, char *user,
                                     uint64_t a, char *flat, bool toUser, PartOf partOf) {
    for (uint64_t from = first + warp * 32; from < end; from += warps * 32) {
        DtPiece pc = {};
        uint32_t lo = 0, hi = 0;
        if (from + lane < end) partOf(from + lane, &pc, &lo, &hi);
        dtLanePiecesCopy(pc, lo, hi, user, a, flat, toUser, lane);
    }
}

// The lanes form, for views whose pieces are small (dtPiecesAreSmall):
// each lane finds its own piece by search.
__device__ inline void dtViewCopyLanes(const DtView &v, char *user, uint64_t a, uint64_t len, char *flat,
                                       bool toUser, uint64_t warp, uint64_t warps, int lane) {
    uint64_t first, end;
    dtViewRangePieces(v, a, len, &first, &end);
    dtLaneBatches(first, end, warp, warps, lane, user, a, flat, toUser,
                  [&](uint64_t w, DtPiece *pc, uint32_t *lo, uint32_t *hi) {
                      *pc = dtViewPieceAt(v, w);
                      dtViewClip(*pc, a, a + len, lo, hi);
                  });
}

} // namespace loom
