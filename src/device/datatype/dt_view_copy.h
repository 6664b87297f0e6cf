/*
 * A packed range of a view (dt_view.h) copied in place by a group of warps:
 * packed bytes [a, a + len) of the call, between the user's layout and a
 * flat buffer that holds those bytes (flat[0] is packed byte a): a FIFO
 * slot, a peer's block, or the call's whole packed buffer. Two forms: a
 * piece per warp at a time, each searched for (dtViewCopySpread, for a
 * whole GPU of warps; dtViewCopyLanes where pieces are small), and runs of
 * pieces walked by each warp, small ones a lane's each (dtViewCopy, for a
 * kernel's few CTAs).
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
// warp walks its run of pieces (at most 32, dtViewWalkMost), lane k
// keeping piece k, and copies them (dtLanePiecesCopy). The walk ends
// before the copies start, so its registers are free for the copies.
__device__ inline void dtViewCopy(const DtView &v, char *user, uint64_t a, uint64_t len, char *flat, bool toUser,
                                  uint64_t warp, uint64_t warps, int lane) {
    uint64_t first, end;
    dtViewRangePieces(v, a, len, &first, &end);
    if (first == end) return;
    const uint64_t walk = dtViewWalkLength(end - first, warps, dtViewWalkMost(v));
    for (uint64_t from = first + warp * walk; from < end; from += warps * walk) {
        const uint64_t to = end - from < walk ? end : from + walk;
        DtPiece mine = {};
        uint32_t lo = 0, hi = 0;
        {
            DtViewWalk c;
            dtViewWalkStart(v, from, &c);
            for (uint64_t w = from; w < to; ++w, dtViewWalkNext(v, &c)) {
                const DtPiece pc = dtViewWalkPiece(c);
                if ((int)(w - from) == lane) {
                    mine = pc;
                    dtViewClip(pc, a, a + len, &lo, &hi);
                }
            }
        }
        dtLanePiecesCopy(mine, lo, hi, user, a, flat, toUser, lane);
    }
}

// The lanes form of the whole-GPU kernels, for views whose pieces are
// small (dtViewWalkMost: a struct's fields, an indexed type's short
// blocks), where a warp per piece leaves most lanes idle: warp `warp` of
// `warps` takes 32 pieces at a time, each lane finding its own by search.
__device__ inline void dtViewCopyLanes(const DtView &v, char *user, uint64_t a, uint64_t len, char *flat,
                                       bool toUser, uint64_t warp, uint64_t warps, int lane) {
    uint64_t first, end;
    dtViewRangePieces(v, a, len, &first, &end);
    for (uint64_t from = first + warp * 32; from < end; from += warps * 32) {
        DtPiece mine = {};
        uint32_t lo = 0, hi = 0;
        if (from + lane < end) {
            mine = dtViewPieceAt(v, from + lane);
            dtViewClip(mine, a, a + len, &lo, &hi);
        }
        dtLanePiecesCopy(mine, lo, hi, user, a, flat, toUser, lane);
    }
}

} // namespace loom
