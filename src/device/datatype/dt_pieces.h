/*
 * How a datatype plan's copy is cut into pieces, one per warp
 * (device/datatype/dt_copy.cu), shared with the CPU simulator
 * (test/unit/test_dt_pieces.cc) that checks every packed byte is written
 * exactly once, from the right user byte.
 *
 * A piece is about kDtPieceBytes: a part of one long run, or, where runs
 * are short (under half a piece), as many whole runs of one segment as
 * fill one, so that a vector of 256-byte blocks keeps every lane busy (one
 * run per warp left half of them idle; docs/performance.md). Pieces are
 * numbered element by element; within an element, segment by segment
 * (first[k]: the pieces of an element before segment k; first[nsegs]: an
 * element's).
 */
#pragma once

#include <cstdint>

#include "base/dt_seg.h"
#include "device/host_device.h"

namespace loom {

constexpr uint64_t kDtPieceBytes = 4096;

// Pieces of `bytes` in all that average under kDtLanePieceBytes are
// copied a lane's each (a struct's fields, an indexed type's short
// blocks), where a warp per piece would leave most lanes idle (the lanes
// forms of dt_copy.cu's kernels, dtLaneBatches in dt_view_copy.h).
constexpr uint32_t kDtLanePieceBytes = 128;

LOOM_HD bool dtPiecesAreSmall(uint64_t bytes, uint64_t pieces) { return bytes < pieces * kDtLanePieceBytes; }

// Whole runs of len bytes a piece takes (1: a run is cut into pieces).
LOOM_HD uint64_t dtRunsPerPiece(uint64_t len) { return len >= kDtPieceBytes / 2 || len == 0 ? 1 : kDtPieceBytes / len; }
// Pieces of one run of len bytes (runs of at least half a piece).
LOOM_HD uint64_t dtPiecesOf(uint64_t len) { return (len + kDtPieceBytes - 1) / kDtPieceBytes; }
// Pieces of one segment.
LOOM_HD uint64_t dtSegPieces(const loom_dt_seg_t &s) {
    const uint64_t g = dtRunsPerPiece(s.len);
    return s.len == 0 ? 0 : g > 1 ? (s.count + g - 1) / g : s.count * dtPiecesOf(s.len);
}

// count elements whose one segment's runs go on from each element into
// the next at the same stride (a block resized to its stride, a vector
// whose extent is its runs' stride times their count) as one element of
// count x runs runs (*one; one run where they touch). Pieces never span
// two elements, so a type of one 256-byte block took a warp's piece per
// element where the vector of the same runs takes 4 KiB
// (docs/performance.md). False: the elements do not fold.
inline bool dtFoldElements(const loom_dt_seg_t *segs, int nsegs, int64_t extent, uint64_t count, loom_dt_seg_t *one) {
    if (nsegs != 1 || count < 2) return false;
    const loom_dt_seg_t &s = segs[0];
    if (s.len == 0 || s.count == 0 || count > UINT64_MAX / s.count) return false;
    const __int128 stride = s.count == 1 ? extent : s.stride;
    if (stride * (__int128)s.count != extent) return false; // the next element's first run is not the next run
    const uint64_t runs = count * s.count;
    if (stride * (__int128)runs > INT64_MAX || stride * (__int128)runs < INT64_MIN) return false;
    *one = s;
    one->stride = (int64_t)stride;
    one->count = runs;
    one->packed = 0;
    if (stride == (__int128)s.len && runs <= UINT64_MAX / s.len) one->len = s.len * runs, one->count = 1;
    return true;
}

// One piece: nr runs of n bytes; the first at `user` bytes from the call's
// user pointer (element e's start + the run's offset) and at `packed`
// bytes from its packed pointer; user runs `stride` bytes apart, packed
// ones n apart.
struct DtPiece {
    int64_t user;
    uint64_t packed;
    int64_t stride;
    uint32_t n, nr;
};

// Piece w of a call: element w / perElement, the segment found by binary
// search over first[] (the last k with first[k] <= the piece's index in
// its element).
LOOM_HD DtPiece dtPieceAt(const loom_dt_seg_t *segs, const uint64_t *first, int nsegs, uint64_t perElement,
                          int64_t extent, uint64_t bytes, uint64_t w) {
    const uint64_t e = w / perElement, inElement = w % perElement;
    int lo = 0, hi = nsegs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (first[mid] <= inElement) lo = mid;
        else hi = mid - 1;
    }
    const loom_dt_seg_t &s = segs[lo];
    const uint64_t piece = inElement - first[lo], g = dtRunsPerPiece(s.len);
    uint64_t run, at, n, nr;
    if (g > 1) { // whole short runs
        run = piece * g, at = 0, n = s.len;
        nr = s.count - run < g ? s.count - run : g;
    } else {     // a part of one long run
        const uint64_t perRun = dtPiecesOf(s.len);
        run = piece / perRun, at = (piece % perRun) * kDtPieceBytes, nr = 1;
        n = s.len - at < kDtPieceBytes ? s.len - at : kDtPieceBytes;
    }
    DtPiece p;
    p.user = (int64_t)e * extent + s.offset + (int64_t)run * s.stride + (int64_t)at;
    p.packed = e * bytes + s.packed + run * s.len + at;
    p.stride = s.stride;
    p.n = (uint32_t)n;
    p.nr = (uint32_t)nr;
    return p;
}

// Word i of a piece's packed bytes (in words of its copy, unitsPerRun to
// a run) is word `word` of run `run` on the user's side. A lane's words
// are `skip` apart (32: the warp's lanes; 1: a lane alone); from its
// first, found by division, the next ones are stepped to with additions
// only (a division per word cost more than its copy).
struct DtRunWord {
    uint32_t run, word;
};

struct DtRunStep {
    uint32_t runs, words, unitsPerRun; // whole runs and words of a skip
    LOOM_HD DtRunStep(uint32_t skip, uint32_t unitsPerRun_)
        : runs(skip / unitsPerRun_), words(skip % unitsPerRun_), unitsPerRun(unitsPerRun_) {}
    LOOM_HD DtRunWord at(uint32_t i) const { return {i / unitsPerRun, i % unitsPerRun}; }
    LOOM_HD void next(DtRunWord &p) const {
        p.run += runs;
        p.word += words;
        if (p.word >= unitsPerRun) p.word -= unitsPerRun, ++p.run;
    }
};

// The widest word (16, 8, 4, 2 or 1 bytes) that both pointers, the run
// length and (for several runs) both strides are multiples of.
LOOM_HD uint32_t dtWordBytes(uint64_t src, uint64_t dst, uint32_t n, uint32_t nr, int64_t sStride, int64_t dStride) {
    const uint64_t bits = src | dst | n | (nr > 1 ? (uint64_t)sStride | (uint64_t)dStride : 0);
    return (bits & 15) == 0 ? 16 : (bits & 7) == 0 ? 8 : (bits & 3) == 0 ? 4 : (bits & 1) == 0 ? 2 : 1;
}

// The widest word of a piece's part [lo, hi) (bytes of its runs, counted
// run after run): dtWordBytes's, narrowed until it divides both ends.
LOOM_HD uint32_t dtPartWordBytes(uint64_t src, uint64_t dst, uint32_t n, uint32_t nr, int64_t sStride,
                                 int64_t dStride, uint32_t lo, uint32_t hi) {
    uint32_t w = dtWordBytes(src, dst, n, nr, sStride, dStride);
    while ((lo | hi) & (w - 1)) w /= 2;
    return w;
}

} // namespace loom
