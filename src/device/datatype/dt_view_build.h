/*
 * The host's side of a packed view (dt_view.h): from the call's typed
 * blocks, the one table the kernels read (plans, blocks, every plan's
 * segments and piece counts), built in host memory with its pointers at
 * the address the table will have on the device, for one upload.
 */
#pragma once

#include <cstring>
#include <vector>

#include "device/datatype/dt_view.h"

namespace loom {

// One datatype's plan as the component built it (segments packed back to back).
struct DtViewLayout {
    const loom_dt_seg_t *segs;
    int nsegs;
    int64_t extent;
    uint64_t bytes;
};

// One typed block: count elements of layouts[layout] at user bytes `user`
// from the call's user pointer, packed from byte `packed` of the call's
// packed buffer.
struct DtViewInput {
    int layout;
    uint64_t count;
    int64_t user;
    uint64_t packed;
};

// The blocks whose elements fold (dtFoldElements) as one element of a
// plan of their own, added after the call's layouts; a block of the same
// layout and count as the block folded before it shares that one's plan
// (an alltoall's blocks share one). segs holds the new plans' segments.
// Where no block folds, all, blocks and segs stay empty: the call's own
// layouts and blocks stand. False: a layout index out of range.
inline bool dtViewFold(const DtViewLayout *layouts, int nlayouts, const DtViewInput *in, int nin,
                       std::vector<DtViewLayout> *all, std::vector<DtViewInput> *blocks,
                       std::vector<loom_dt_seg_t> *segs) {
    all->clear();
    blocks->clear();
    segs->clear();
    const DtViewInput *last = nullptr; // the block folded last, before its fold
    loom_dt_seg_t one;
    for (int i = 0; i < nin; ++i) {
        if (in[i].layout < 0 || in[i].layout >= nlayouts) return false;
        const DtViewLayout &l = layouts[in[i].layout];
        if (!dtFoldElements(l.segs, l.nsegs, l.extent, in[i].count, &one)) continue;
        if (blocks->empty()) { // the first fold: copies to change
            all->assign(layouts, layouts + nlayouts);
            blocks->assign(in, in + nin);
            segs->reserve((size_t)(nin - i)); // the new plans point into it: it must not move
        }
        DtViewInput &b = (*blocks)[i];
        if (!last || last->layout != b.layout || last->count != b.count) {
            segs->push_back(one);
            all->push_back(DtViewLayout{&segs->back(), 1, l.extent * (int64_t)b.count, l.bytes * b.count});
        }
        last = &in[i];
        b.layout = (int)all->size() - 1;
        b.count = 1;
    }
    return true;
}

// Fills *table (the image to upload to devTable) and *v (pointers into
// devTable). Blocks without bytes are left out; blocks whose elements
// fold are one element of their own plan (dtViewFold). False, and nothing
// usable, where the blocks are not in packed order without overlap, a
// layout's segments are not packed back to back (the kernels' searches
// need both) or a layout index is out of range.
inline bool dtViewBuild(const DtViewLayout *callLayouts, int nCallLayouts, const DtViewInput *callBlocks, int nin,
                        const void *devTable, std::vector<char> *table, DtView *v) {
    std::vector<DtViewLayout> folded;
    std::vector<DtViewInput> foldedIn;
    std::vector<loom_dt_seg_t> foldedSegs;
    if (!dtViewFold(callLayouts, nCallLayouts, callBlocks, nin, &folded, &foldedIn, &foldedSegs)) return false;
    const bool anyFold = !foldedIn.empty();
    const DtViewLayout *layouts = anyFold ? folded.data() : callLayouts;
    const int nlayouts = anyFold ? (int)folded.size() : nCallLayouts;
    const DtViewInput *in = anyFold ? foldedIn.data() : callBlocks;
    std::vector<DtViewBlock> blocks;
    uint64_t pieces = 0, end = 0;
    std::vector<uint64_t> perElement(nlayouts);
    size_t nsegs = 0;
    for (int k = 0; k < nlayouts; ++k) {
        perElement[k] = 0;
        uint64_t packed = 0; // segments back to back, as dtViewPieceOf searches them
        for (int j = 0; j < layouts[k].nsegs; ++j) {
            const loom_dt_seg_t &s = layouts[k].segs[j];
            if (s.packed != packed) return false;
            packed += s.len * s.count;
            perElement[k] += dtSegPieces(s);
        }
        if (packed != layouts[k].bytes) return false;
        nsegs += layouts[k].nsegs;
    }
    for (int i = 0; i < nin; ++i) {
        if (in[i].layout < 0 || in[i].layout >= nlayouts) return false;
        const DtViewLayout &l = layouts[in[i].layout];
        if (in[i].count == 0 || l.bytes == 0 || perElement[in[i].layout] == 0) continue;
        if (in[i].packed < end) return false;
        blocks.push_back(DtViewBlock{in[i].packed, pieces, in[i].user, in[i].count, (uint32_t)in[i].layout});
        pieces += in[i].count * perElement[in[i].layout];
        end = in[i].packed + in[i].count * l.bytes;
    }
    const size_t plansAt = 0, blocksAt = plansAt + nlayouts * sizeof(DtViewPlan);
    const size_t segsAt = blocksAt + blocks.size() * sizeof(DtViewBlock);
    const size_t firstAt = segsAt + nsegs * sizeof(loom_dt_seg_t);
    table->assign(firstAt + (nsegs + nlayouts) * sizeof(uint64_t), 0);
    char *img = table->data();
    const char *dev = static_cast<const char *>(devTable);
    size_t segAt = 0; // segments placed so far (and first[] entries: one more per layout)
    for (int k = 0; k < nlayouts; ++k) {
        const DtViewLayout &l = layouts[k];
        DtViewPlan p;
        p.segs = reinterpret_cast<const loom_dt_seg_t *>(dev + segsAt) + segAt;
        p.first = reinterpret_cast<const uint64_t *>(dev + firstAt) + segAt + k;
        p.nsegs = l.nsegs;
        p.extent = l.extent;
        p.bytes = l.bytes;
        memcpy(img + plansAt + k * sizeof(DtViewPlan), &p, sizeof(p));
        uint64_t *first = reinterpret_cast<uint64_t *>(img + firstAt) + segAt + k;
        first[0] = 0;
        for (int j = 0; j < l.nsegs; ++j) first[j + 1] = first[j] + dtSegPieces(l.segs[j]);
        if (l.nsegs) memcpy(img + segsAt + segAt * sizeof(loom_dt_seg_t), l.segs, l.nsegs * sizeof(loom_dt_seg_t));
        segAt += l.nsegs;
    }
    if (!blocks.empty()) memcpy(img + blocksAt, blocks.data(), blocks.size() * sizeof(DtViewBlock));
    v->plans = reinterpret_cast<const DtViewPlan *>(dev + plansAt);
    v->blocks = reinterpret_cast<const DtViewBlock *>(dev + blocksAt);
    v->nblocks = (int)blocks.size();
    v->pieces = pieces;
    v->bytes = end;
    return true;
}

} // namespace loom
