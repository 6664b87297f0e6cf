/*
 * A packed range of a view (dt_view.h) copied in place by a group of warps:
 * packed bytes [a, a + len) of the call, between the user's layout and a
 * flat buffer that holds those bytes (flat[0] is packed byte a): a FIFO
 * slot, a peer's block, or the call's whole packed buffer. Warp `warp` of
 * `warps` takes every warps-th piece of the range.
 */
#pragma once

#include "device/datatype/dt_view.h"
#include "device/datatype/dt_warp_copy.h"

namespace loom {

__device__ inline void dtViewCopy(const DtView &v, char *user, uint64_t a, uint64_t len, char *flat, bool toUser,
                                  uint64_t warp, uint64_t warps, int lane) {
    if (len == 0 || v.nblocks == 0) return;
    const uint64_t end = a + len, last = dtViewPieceOf(v, end - 1);
    for (uint64_t w = dtViewPieceOf(v, a) + warp; w <= last && w < v.pieces; w += warps) {
        const DtPiece pc = dtViewPieceAt(v, w);
        uint32_t lo, hi;
        dtViewClip(pc, a, end, &lo, &hi);
        if (lo == hi) continue;
        char *u = user + pc.user;
        char *f = flat + (int64_t)(pc.packed - a); // below flat for a piece that starts before a: only [lo, hi) is touched
        if (toUser) dtWarpCopy(f, (int64_t)pc.n, u, pc.stride, pc.n, pc.nr, lo, hi, lane);
        else dtWarpCopy(u, pc.stride, f, (int64_t)pc.n, pc.n, pc.nr, lo, hi, lane);
    }
}

} // namespace loom
