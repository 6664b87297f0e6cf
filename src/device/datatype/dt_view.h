/*
 * A packed view: a call's user buffer seen as the packed bytes its typed
 * blocks hold (an alltoallw's block per peer, each of its own type, or one
 * type's blocks at their displacements). Block b's count elements of plan
 * plans[b.plan] sit at user bytes b.user on and fill packed bytes
 * [b.packed, b.packed + count x bytes) of the call's packed buffer.
 *
 * The view's pieces (dt_pieces.h) are numbered block by block (b.firstPiece:
 * the pieces of the blocks before it), so one kernel covers every block of
 * a call, and the pieces of a packed range [a, a + len) are those from
 * dtViewPieceOf(a) up to dtViewPieceOf(a + len - 1), each clipped to the
 * range (dtViewClip): a part of the packed buffer is copied without the
 * rest (what a FIFO chunk of a block needs).
 *
 * Invariants the host's builder keeps and the CPU simulator
 * (test/unit/test_dt_view.cc) relies on: blocks have elements, appear in
 * packed order and do not overlap there; a plan's segments are packed back
 * to back (segs[k].packed is the bytes of the segments before k).
 */
#pragma once

#include <cstdint>

#include "device/datatype/dt_pieces.h"

namespace loom {

struct DtViewPlan {
    const loom_dt_seg_t *segs;
    const uint64_t *first;  // per segment the pieces of one element before it; first[nsegs]: an element's
    int nsegs;
    int64_t extent;         // from one element's start to the next's
    uint64_t bytes;         // packed bytes of one element
};

struct DtViewBlock {
    uint64_t packed;        // its first packed byte in the call's packed buffer
    uint64_t firstPiece;    // the pieces of the blocks before it
    int64_t user;           // its first element's start from the call's user pointer
    uint64_t count;         // elements, > 0
    uint32_t plan;          // into DtView::plans
};

struct DtView {
    const DtViewBlock *blocks;
    const DtViewPlan *plans;
    int nblocks;
    uint64_t pieces;        // of every block
    uint64_t bytes;         // the packed end of the last block
};

// The last block whose key (firstPiece, or packed when byPacked) is <= x.
LOOM_HD int dtViewBlockOf(const DtView &v, uint64_t x, bool byPacked) {
    int lo = 0, hi = v.nblocks - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if ((byPacked ? v.blocks[mid].packed : v.blocks[mid].firstPiece) <= x) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Piece w of the view, its user and packed offsets from the call's pointers.
LOOM_HD DtPiece dtViewPieceAt(const DtView &v, uint64_t w) {
    const DtViewBlock &b = v.blocks[dtViewBlockOf(v, w, false)];
    const DtViewPlan &p = v.plans[b.plan];
    DtPiece pc = dtPieceAt(p.segs, p.first, p.nsegs, p.first[p.nsegs], p.extent, p.bytes, w - b.firstPiece);
    pc.user += b.user;
    pc.packed += b.packed;
    return pc;
}

// The piece that holds packed byte a, or where a falls between blocks (or
// past the last) the first piece after it.
LOOM_HD uint64_t dtViewPieceOf(const DtView &v, uint64_t a) {
    const int bi = dtViewBlockOf(v, a, true);
    const DtViewBlock &b = v.blocks[bi];
    const DtViewPlan &p = v.plans[b.plan];
    if (a < b.packed) return 0; // before the first block
    if (a - b.packed >= b.count * p.bytes) return bi + 1 < v.nblocks ? v.blocks[bi + 1].firstPiece : v.pieces;
    const uint64_t o = a - b.packed, e = o / p.bytes, in = o % p.bytes;
    int lo = 0, hi = p.nsegs - 1; // the segment that holds `in`: the last packed at or before it
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (p.segs[mid].packed <= in) lo = mid;
        else hi = mid - 1;
    }
    const loom_dt_seg_t &s = p.segs[lo];
    const uint64_t r = in - s.packed, g = dtRunsPerPiece(s.len);
    const uint64_t piece = g > 1 ? r / s.len / g : r / s.len * dtPiecesOf(s.len) + r % s.len / kDtPieceBytes;
    return b.firstPiece + e * p.first[p.nsegs] + p.first[lo] + piece;
}

// The pieces that hold bytes of packed range [a, a + len): [*first, *end)
// (none: *first == *end).
LOOM_HD void dtViewRangePieces(const DtView &v, uint64_t a, uint64_t len, uint64_t *first, uint64_t *end) {
    *first = *end = 0;
    if (len == 0 || v.nblocks == 0) return;
    const uint64_t f = dtViewPieceOf(v, a), last = dtViewPieceOf(v, a + len - 1);
    const uint64_t e = last < v.pieces ? last + 1 : v.pieces;
    if (f < e) *first = f, *end = e;
}

// The part of piece pc inside packed bytes [a, end): bytes [*lo, *hi) of the
// piece's packed run of n x nr bytes (*lo == *hi: none).
LOOM_HD void dtViewClip(const DtPiece &pc, uint64_t a, uint64_t end, uint32_t *lo, uint32_t *hi) {
    const uint64_t from = pc.packed, to = pc.packed + (uint64_t)pc.n * pc.nr;
    const uint64_t l = a > from ? a : from, h = end < to ? end : to;
    *lo = l < h ? (uint32_t)(l - from) : 0;
    *hi = l < h ? (uint32_t)(h - from) : 0;
}

} // namespace loom
