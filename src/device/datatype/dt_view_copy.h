/*
 * A packed range of a view (dt_view.h) copied in place by a group of warps:
 * packed bytes [a, a + len) of the call, between the user's layout and a
 * flat buffer that holds those bytes (flat[0] is packed byte a): a FIFO
 * slot, a peer's block, or the call's whole packed buffer. Two forms: a
 * piece per warp at a time, each searched for (dtViewCopySpread, for a
 * whole GPU of warps), and runs of pieces walked by each warp, small ones
 * a lane's each (dtViewCopy, for a kernel's few CTAs).
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
    if (alone) {
        if (toUser) dtPieceCopy<true>(f, (int64_t)pc.n, u, pc.stride, pc.n, pc.nr, lo, hi, lane);
        else dtPieceCopy<true>(u, pc.stride, f, (int64_t)pc.n, pc.n, pc.nr, lo, hi, lane);
    } else {
        if (toUser) dtPieceCopy(f, (int64_t)pc.n, u, pc.stride, pc.n, pc.nr, lo, hi, lane);
        else dtPieceCopy(u, pc.stride, f, (int64_t)pc.n, pc.n, pc.nr, lo, hi, lane);
    }
}

// The whole-GPU form (dt_copy.cu's view kernel, thousands of warps): warp
// `warp` of `warps` takes every warps-th piece, each found by its
// searches. Its few registers keep more warps on an SM: on a whole GPU the
// walked form below was slower, on a kernel's few CTAs faster
// (test/perf/view_loops, docs/performance.md).
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

// The walked form (a kernel's few CTAs over a FIFO chunk or a pair's
// slice): every lane of the warp calls it (the loops are the warp's). A
// warp walks its run of pieces 32 at a time, lane k keeping piece k of
// each batch: a small part (at most kDtLanePieceBytes) the lane copies
// alone, all in flight at once, and a larger one the whole warp copies,
// one after the other.
__device__ inline void dtViewCopy(const DtView &v, char *user, uint64_t a, uint64_t len, char *flat, bool toUser,
                                  uint64_t warp, uint64_t warps, int lane) {
    uint64_t first, end;
    dtViewRangePieces(v, a, len, &first, &end);
    if (first == end) return;
    const uint64_t walk = dtViewWalkLength(end - first, warps, dtViewWalkMost(v));
    for (uint64_t from = first + warp * walk; from < end; from += warps * walk) {
        const uint64_t to = end - from < walk ? end : from + walk;
        DtViewWalk c;
        dtViewWalkStart(v, from, &c);
        for (uint64_t batch = from; batch < to; batch += 32) {
            DtPiece mine = {};
            uint32_t lo = 0, hi = 0;
            for (uint64_t w = batch; w < to && w < batch + 32; ++w, dtViewWalkNext(v, &c)) {
                const DtPiece pc = dtViewWalkPiece(c);
                if ((int)(w - batch) == lane) {
                    mine = pc;
                    dtViewClip(pc, a, a + len, &lo, &hi);
                }
            }
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
                dtViewPieceCopy(pc, __shfl_sync(~0u, lo, k), __shfl_sync(~0u, hi, k), user, a, flat, toUser, lane,
                                false);
            }
        }
    }
}

} // namespace loom
