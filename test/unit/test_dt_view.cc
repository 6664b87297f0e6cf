// Packed views (src/device/datatype/dt_view.h, dt_view_build.h) on the CPU:
// a call's typed blocks, each of its own plan, at their user offsets and
// packed offsets (gaps between blocks, blocks without elements), and packed
// ranges of them copied the way the view kernels' warps do (dt_view_copy.h):
// the pieces from dtViewPieceOf(a) to dtViewPieceOf(a + len - 1), each
// clipped to the range, word by word in the words dtPartWordBytes picks.
// Packing a range must write each of its packed bytes exactly once with the
// user byte the plans put there (a reference walk over blocks, elements,
// segments and runs) and nothing outside it; unpacking must write each user
// byte of the range once from its packed byte and leave every other user
// byte alone. Ranges: the whole view, random ones, and a block cut into
// FIFO chunks (their union must be the whole block once), split between 1
// to 40 warps that take a piece or 32 (a lane's each) at a time. Blocks of
// elements that go on into one another are one element of grouped runs
// (dtFoldElements): checked the same way, and two wrong folds must fail
// the byte checks. Mutations
// that must fail: no clipping, a range started one piece late, warps that
// leave the last piece of each batch or start where the range does, a
// block's first piece off by one, and a builder fed blocks out of packed
// order. Last, LOOM_DT_FUSE's per-call rule (core/stage/dt_fuse_mode.h) on
// views of long and of small pieces, at and around its byte bound.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/stage/dt_fuse_mode.h"
#include "device/datatype/dt_view_build.h"
#include "unit_suites.h"

using namespace loom;

namespace {

struct Layout {
    std::vector<loom_dt_seg_t> segs;
    int64_t extent;
    uint64_t bytes;
};

// Runs of len bytes, count of them stride apart from offset; packed back to back.
Layout layout(std::vector<loom_dt_seg_t> segs, int64_t extent) {
    uint64_t at = 0;
    for (loom_dt_seg_t &s : segs) s.packed = at, at += s.len * s.count;
    return Layout{segs, extent, at};
}

std::vector<Layout> layouts() {
    std::vector<Layout> l;
    l.push_back(layout({{0, 512, 256, 40, 0}}, 20480));                             // 256 B blocks: grouped runs
    l.push_back(layout({{8, 9000, 4100, 3, 0}}, 27008));                            // long runs cut in pieces
    l.push_back(layout({{0, 16, 12, 700, 0}}, 11200));                              // short, 4-byte words
    l.push_back(layout({{3, 7, 5, 90, 0}, {700, 1, 1, 1, 0}, {701, 0, 3, 1, 0}}, 720)); // odd bytes
    l.push_back(layout({{-64, -32, 16, 4, 0}, {0, 0, 8, 1, 0}}, 176));              // negative offsets, resized
    l.push_back(layout({{0, 0, 6000, 1, 0}}, 6000));                                // contiguous
    std::vector<loom_dt_seg_t> many;
    for (int k = 0; k < 30; ++k) many.push_back({k * 50, 0, (uint64_t)(2 + (k % 4) * 6), 1, 0}); // indexed
    l.push_back(layout(many, 1500));
    l.push_back(layout({{0, 0, 8, 1, 0}, {8, 0, 0, 3, 0}, {20, 4, 4, 0, 0}, {40, 0, 24, 1, 0}}, 64)); // empty segments
    l.push_back(layout({{0, 0, 256, 1, 0}}, 512));                                  // a block resized: folds
    l.push_back(layout({{4, 0, 12, 1, 0}}, 12));                                    // touching: one run
    l.push_back(layout({{-8, 0, 8, 1, 0}}, -24));                                   // a negative extent
    return l;
}

// Layouts small enough for blocks of many elements (folded runs over many pieces).
bool smallLayout(const Layout &l) { return l.extent > -1024 && l.extent < 1024; }

// The user bytes [lo, hi) a block's elements touch.
void span(const Layout &l, const DtViewInput &b, int64_t *lo, int64_t *hi) {
    *lo = b.user, *hi = b.user;
    for (uint64_t e = 0; e < b.count; ++e)
        for (const loom_dt_seg_t &s : l.segs)
            for (uint64_t r = 0; r < s.count; ++r) {
                const int64_t at = b.user + (int64_t)e * l.extent + s.offset + (int64_t)r * s.stride;
                *lo = std::min(*lo, at), *hi = std::max(*hi, at + (int64_t)s.len);
            }
}

struct Call {
    std::vector<DtViewInput> blocks;
    int64_t userLo, userHi; // the user bytes any block touches, from the call's user pointer
    uint64_t packedBytes;
};

// Blocks of random layouts and counts (some empty), packed in order with
// random gaps, at disjoint user places in a random order.
Call randomCall(const std::vector<Layout> &ls, std::mt19937 &rng) {
    Call c;
    const int n = 1 + (int)(rng() % 6);
    uint64_t packed = rng() % 3 ? 0 : 24;
    for (int i = 0; i < n; ++i) {
        DtViewInput b;
        b.layout = (int)(rng() % ls.size());
        b.count = rng() % 5 == 0 ? 0 : 1 + rng() % 3;
        if (b.count && smallLayout(ls[b.layout]) && rng() % 3 == 0) b.count = 20 + rng() % 60;
        b.packed = packed;
        b.user = 0;
        packed += b.count * ls[b.layout].bytes + (rng() % 2 ? 0 : 8 * (rng() % 5));
        c.blocks.push_back(b);
    }
    c.packedBytes = packed;
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    int64_t at = 0;
    c.userLo = c.userHi = 0;
    for (int i : order) { // user places apart: an unpack must write each byte once
        DtViewInput &b = c.blocks[i];
        int64_t lo, hi;
        b.user = 0;
        span(ls[b.layout], b, &lo, &hi);
        b.user = at - lo + 16 * (int64_t)(rng() % 3);
        span(ls[b.layout], b, &lo, &hi);
        c.userLo = std::min(c.userLo, lo), c.userHi = std::max(c.userHi, hi);
        at = hi + 16;
    }
    return c;
}

// Where each packed byte of the call comes from in the user buffer (-1: a gap).
std::vector<int64_t> reference(const std::vector<Layout> &ls, const Call &c) {
    std::vector<int64_t> from(c.packedBytes, -1);
    for (const DtViewInput &b : c.blocks) {
        const Layout &l = ls[b.layout];
        uint64_t k = b.packed;
        for (uint64_t e = 0; e < b.count; ++e)
            for (const loom_dt_seg_t &s : l.segs)
                for (uint64_t r = 0; r < s.count; ++r)
                    for (uint64_t i = 0; i < s.len; ++i, ++k)
                        from[k] = b.user + (int64_t)e * l.extent + s.offset + (int64_t)r * s.stride + (int64_t)i;
    }
    return from;
}

struct Mutation {
    bool noClip = false;     // copy whole pieces
    int startLate = 0;       // warp 0 starts this many pieces after its first
    bool stopEarly = false;  // every batch of pieces left without its last
    bool sameStart = false;  // every warp starts at the range's first piece
};

// Packed bytes [a, a + len) between user and packed, as the view kernels'
// warps move them (dt_view_copy.h): warp after warp (the pieces are
// independent), each taking every warps-th batch of `per` pieces, each
// piece found by search (per 1: dtViewCopySpread; 32: dtViewCopyLanes, a
// lane's each; 0: the one dtPiecesAreSmall picks).
// Records every byte written; "" or what broke.
std::string copyRange(const DtView &v, uint64_t a, uint64_t len, bool toUser, const Mutation &m,
                      std::vector<unsigned char> &user, int64_t userLo, std::vector<unsigned char> &packed,
                      std::vector<int> &writes, uint64_t warps = 7, uint64_t per = 0) {
    const uint64_t userBase = 0x100000, packedBase = 0x800000; // 16-aligned, as cudaMalloc's
    const uint64_t end = a + len;
    uint64_t first, last;
    dtViewRangePieces(v, a, len, &first, &last);
    if (per == 0) per = dtPiecesAreSmall(v.bytes, v.pieces) ? 32 : 1;
    for (uint64_t warp = 0; warp < warps; ++warp) {
        for (uint64_t batch = first + (m.sameStart ? 0 : warp * per); batch < last; batch += warps * per) {
            uint64_t from = batch, to = last - batch < per ? last : batch + per;
            if (warp == 0 && batch == first) from += m.startLate;
            if (m.stopEarly) --to;
            for (uint64_t w = from; w < to; ++w) {
                const DtPiece pc = dtViewPieceAt(v, w);
                uint32_t lo, hi;
                dtViewClip(pc, a, end, &lo, &hi);
                if (m.noClip) lo = 0, hi = pc.n * pc.nr;
                if (lo == hi) continue;
                const uint32_t word = dtPartWordBytes(userBase + (uint64_t)pc.user, packedBase + pc.packed, pc.n, pc.nr,
                                                      pc.stride, (int64_t)pc.n, lo, hi);
                if (pc.n % word || lo % word || hi % word || (userBase + (uint64_t)pc.user) % word ||
                    (packedBase + pc.packed) % word || (pc.nr > 1 && pc.stride % word))
                    return "piece " + std::to_string(w) + ": a " + std::to_string(word) + "-byte word does not fit";
                for (uint32_t b = lo; b < hi; ++b) {
                    const uint32_t run = b / pc.n, at = b % pc.n;
                    const uint64_t p = pc.packed + (uint64_t)run * pc.n + at;
                    const int64_t u = pc.user + (int64_t)run * pc.stride + at - userLo;
                    if (p >= packed.size() || u < 0 || u >= (int64_t)user.size())
                        return "piece " + std::to_string(w) + " reaches outside the buffers";
                    if (toUser) user[u] = packed[p], ++writes[u];
                    else packed[p] = user[u], ++writes[p];
                }
            }
        }
    }
    return "";
}

// Packs (or unpacks) [a, a + len) and checks every byte; "" or what broke.
std::string check(const std::vector<Layout> &ls, const Call &c, const DtView &v, uint64_t a, uint64_t len,
                  bool unpack, const Mutation &m, uint64_t warps = 7, uint64_t per = 0) {
    const std::vector<int64_t> from = reference(ls, c);
    std::vector<unsigned char> user((size_t)(c.userHi - c.userLo)), packed(c.packedBytes);
    for (size_t i = 0; i < user.size(); ++i) user[i] = (unsigned char)(i * 131 + (i >> 8) + 1);
    for (size_t i = 0; i < packed.size(); ++i) packed[i] = (unsigned char)(i * 71 + (i >> 9) + 7);
    const std::vector<unsigned char> user0 = user, packed0 = packed;
    std::vector<int> writes(unpack ? user.size() : packed.size(), 0);
    const std::string err = copyRange(v, a, len, unpack, m, user, c.userLo, packed, writes, warps, per);
    if (!err.empty()) return err;
    std::vector<int> want(writes.size(), 0);
    for (uint64_t p = a; p < a + len && p < c.packedBytes; ++p)
        if (from[p] >= 0) ++want[unpack ? (size_t)(from[p] - c.userLo) : p];
    for (size_t i = 0; i < writes.size(); ++i)
        if (writes[i] != want[i])
            return std::string(unpack ? "user" : "packed") + " byte " + std::to_string(i) + " written " +
                   std::to_string(writes[i]) + " times, not " + std::to_string(want[i]);
    for (uint64_t p = a; p < a + len && p < c.packedBytes; ++p) {
        if (from[p] < 0) continue;
        const size_t u = (size_t)(from[p] - c.userLo);
        if (unpack ? user[u] != packed0[p] : packed[p] != user0[u])
            return "packed byte " + std::to_string(p) + " and its user byte differ";
    }
    return "";
}

struct Built {
    std::vector<char> table;
    DtView view;
    bool ok;
};

Built build(const std::vector<Layout> &ls, const Call &c);

} // namespace

START_TEST(dt_view_elements_fold) {
    // Elements that go on into one another at one stride become one element
    // of grouped runs (dtFoldElements); others keep a piece per element.
    const std::vector<Layout> ls = layouts();
    loom_dt_seg_t one;
    const Layout &resized = ls[8], &touching = ls[9], &back = ls[10];
    ck_assert(dtFoldElements(resized.segs.data(), 1, resized.extent, 64, &one));
    ck_assert(one.stride == 512 && one.count == 64 && one.len == 256 && one.offset == 0);
    ck_assert(dtFoldElements(ls[0].segs.data(), 1, ls[0].extent, 3, &one)); // 40 runs of 512 B, extent 40 x 512
    ck_assert(one.stride == 512 && one.count == 120);
    ck_assert(dtFoldElements(touching.segs.data(), 1, touching.extent, 5, &one));
    ck_assert(one.count == 1 && one.len == 60 && one.offset == 4);
    ck_assert(dtFoldElements(back.segs.data(), 1, back.extent, 5, &one) && one.stride == -24 && one.count == 5);
    ck_assert(!dtFoldElements(ls[1].segs.data(), 1, ls[1].extent, 3, &one)); // extent 27008, runs 3 x 9000 apart
    ck_assert(!dtFoldElements(ls[4].segs.data(), 2, ls[4].extent, 3, &one)); // two segments
    ck_assert(!dtFoldElements(resized.segs.data(), 1, resized.extent, 1, &one)); // one element: nothing to fold
    ck_assert(!dtFoldElements(ls[2].segs.data(), 1, ls[2].extent, UINT64_MAX / 100, &one)); // runs overflow
    // A block of 64 resized elements: 4 pieces of 16 runs, not 64 of one.
    Call c;
    c.blocks = {{8, 64, 0, 0}};
    c.userLo = 0, c.userHi = 64 * 512, c.packedBytes = 64 * 256;
    Built b = build(ls, c);
    ck_assert(b.ok);
    ck_assert_msg(b.view.pieces == 4, "folded block of 64 elements: %llu pieces", (unsigned long long)b.view.pieces);
    for (bool unpack : {false, true})
        ck_assert_msg(check(ls, c, b.view, 0, c.packedBytes, unpack, Mutation{}).empty(), "folded block");
    // Folds that must fail the byte checks: one that ignores the extent (the
    // runs' stride of an element that does not go on at it), and one that
    // takes a one-run element's own stride field (0) for its extent.
    struct Wrong {
        int layout;
        loom_dt_seg_t seg;
    } wrong[] = {{1, {8, 9000, 4100, 9, 0}}, {8, {0, 0, 256, 64, 0}}};
    for (const Wrong &w : wrong) {
        Call cw;
        cw.blocks = {{w.layout, w.layout == 1 ? 3u : 64u, 0, 0}};
        int64_t lo, hi;
        span(ls[w.layout], cw.blocks[0], &lo, &hi);
        cw.userLo = lo, cw.userHi = hi, cw.packedBytes = cw.blocks[0].count * ls[w.layout].bytes;
        std::vector<Layout> mutated = {Layout{{w.seg}, w.seg.stride * (int64_t)w.seg.count, cw.packedBytes}};
        Call asOne = cw;
        asOne.blocks[0].layout = 0, asOne.blocks[0].count = 1;
        Built bw = build(mutated, asOne);
        ck_assert(bw.ok);
        ck_assert_msg(!check(ls, cw, bw.view, 0, cw.packedBytes, false, Mutation{}).empty(),
                      "a wrong fold of layout %d went unnoticed", w.layout);
    }
}
END_TEST

namespace {

START_TEST(dt_fuse_mode_rule) {
    // LOOM_DT_FUSE per call (core/stage/dt_fuse_mode.h): a set mode as it
    // is; -1 in place (2) only for a side with a block of LOOM_DT_FUSE_BYTES
    // or more whose pieces are not small. Views built from real layouts:
    // 256 B runs (long pieces) and an indexed type's blocks of 2-20 B (small).
    const std::vector<Layout> ls = layouts();
    Call longRuns, shortRuns;
    longRuns.blocks = {{0, 3, 0, 0}, {0, 1, 3 * 20480, 3 * ls[0].bytes}};
    longRuns.userLo = 0, longRuns.userHi = 4 * 20480, longRuns.packedBytes = 4 * ls[0].bytes;
    shortRuns.blocks = {{6, 4, 0, 0}};
    shortRuns.userLo = 0, shortRuns.userHi = 4 * 1500, shortRuns.packedBytes = 4 * ls[6].bytes;
    const Built l = build(ls, longRuns), s = build(ls, shortRuns);
    ck_assert(l.ok && s.ok);
    ck_assert_msg(!dtPiecesAreSmall(l.view.bytes, l.view.pieces) && dtPiecesAreSmall(s.view.bytes, s.view.pieces),
                  "pieces: %llu of %llu B, %llu of %llu B", (unsigned long long)l.view.pieces,
                  (unsigned long long)l.view.bytes, (unsigned long long)s.view.pieces, (unsigned long long)s.view.bytes);
    const size_t counts[3] = {3 * ls[0].bytes, 0, ls[0].bytes}; // per peer: the largest is 3 elements
    const size_t few[3] = {ls[0].bytes, ls[0].bytes, 0};         // the largest is 1 element
    Params p{};
    // The receive side (view and counts) decides when the rank pulls, the
    // send side when it pushes; the other side here is one the rule would
    // never fuse (small pieces, few bytes), so a mixed-up side shows.
    auto pulled = [&](const DtView &v, const size_t *c, int n) {
        const DtView views[2] = {s.view, v};
        const size_t *const cs[2] = {few, c};
        return dtFuseMode(p, false, views, cs, n);
    };
    auto pushed = [&](const DtView &v, const size_t *c, int n) {
        const DtView views[2] = {v, s.view};
        const size_t *const cs[2] = {c, few};
        return dtFuseMode(p, true, views, cs, n);
    };
    p.dtFuseBytes = 3 * ls[0].bytes;
    for (int set : {0, 1, 2}) {
        p.dtFuse = set;
        ck_assert_int_eq(pulled(l.view, counts, 3), set);
        ck_assert_int_eq(pushed(s.view, counts, 3), set);
    }
    p.dtFuse = -1;
    ck_assert_int_eq(pulled(l.view, counts, 3), 2);        // at the bound
    ck_assert_int_eq(pushed(l.view, counts, 3), 2);
    ck_assert_int_eq(pulled(s.view, counts, 3), 0);        // small pieces: packed whatever the size
    ck_assert_int_eq(pushed(s.view, counts, 3), 0);
    ck_assert_int_eq(pulled(DtView{}, counts, 3), 0);      // a contiguous side
    ck_assert_int_eq(pulled(l.view, counts + 1, 2), 0);    // the largest block (1 element) under the bound
    ck_assert_int_eq(pushed(l.view, few, 3), 0);
    {   // the same views and counts, pulled and pushed: only the side copied counts
        const DtView views[2] = {s.view, l.view};
        const size_t *const cs[2] = {counts, counts};
        ck_assert_int_eq(dtFuseMode(p, false, views, cs, 3), 2);
        ck_assert_int_eq(dtFuseMode(p, true, views, cs, 3), 0);
        const DtView swapped[2] = {l.view, s.view};
        ck_assert_int_eq(dtFuseMode(p, false, swapped, cs, 3), 0);
        ck_assert_int_eq(dtFuseMode(p, true, swapped, cs, 3), 2);
        const DtView both[2] = {l.view, l.view};
        const size_t *const bytesApart[2] = {few, counts};
        ck_assert_int_eq(dtFuseMode(p, false, both, bytesApart, 3), 2);
        ck_assert_int_eq(dtFuseMode(p, true, both, bytesApart, 3), 0);
    }
    p.dtFuseBytes = 3 * ls[0].bytes + 1;
    ck_assert_int_eq(pulled(l.view, counts, 3), 0);        // one byte short
    p.dtFuseBytes = 0;
    ck_assert_int_eq(pulled(l.view, counts + 1, 1), 2);    // 0: whatever the size, even no bytes to this peer
    ck_assert_int_eq(pulled(s.view, counts, 3), 0);
}
END_TEST

Built build(const std::vector<Layout> &ls, const Call &c) {
    std::vector<DtViewLayout> dl;
    for (const Layout &l : ls) dl.push_back(DtViewLayout{l.segs.data(), (int)l.segs.size(), l.extent, l.bytes});
    Built b;
    b.table.reserve(1 << 16); // the image's address is the "device" address: it must not move
    b.ok = dtViewBuild(dl.data(), (int)dl.size(), c.blocks.data(), (int)c.blocks.size(), nullptr, &b.table, &b.view);
    if (!b.ok) return b;
    // rebuilt at its own address: the pointers lead into the image
    b.ok = dtViewBuild(dl.data(), (int)dl.size(), c.blocks.data(), (int)c.blocks.size(), b.table.data(), &b.table,
                       &b.view);
    return b;
}

} // namespace

START_TEST(dt_view_ranges_copy_every_byte_once) {
    const std::vector<Layout> ls = layouts();
    std::mt19937 rng(4242);
    for (int t = 0; t < 150; ++t) {
        const Call c = randomCall(ls, rng);
        const Built b = build(ls, c);
        ck_assert_msg(b.ok, "call %d: the builder refused blocks in packed order", t);
        const Mutation none;
        for (bool unpack : {false, true}) {
            const uint64_t warps = 1 + rng() % 40; // from one warp to more warps than pieces
            // the kernels' pick, a piece a warp, or 32 a warp
            const uint64_t per = t % 3 == 0 ? 0 : t % 3 == 1 ? 1 : 32;
            std::string err = check(ls, c, b.view, 0, c.packedBytes, unpack, none, warps, per);
            ck_assert_msg(err.empty(), "call %d, whole view, %s: %s", t, unpack ? "unpack" : "pack", err.c_str());
            for (int r = 0; r < 4 && c.packedBytes; ++r) {
                const uint64_t a = rng() % c.packedBytes, len = 1 + rng() % (c.packedBytes - a);
                err = check(ls, c, b.view, a, len, unpack, none, warps, per);
                ck_assert_msg(err.empty(), "call %d, [%llu, +%llu), %s: %s", t, (unsigned long long)a,
                              (unsigned long long)len, unpack ? "unpack" : "pack", err.c_str());
            }
        }
    }
}
END_TEST

START_TEST(dt_view_chunks_make_the_whole) {
    // A FIFO's chunks of a block (odd sizes too) must together pack it once.
    const std::vector<Layout> ls = layouts();
    std::mt19937 rng(7);
    for (int t = 0; t < 100; ++t) {
        const Call c = randomCall(ls, rng);
        const Built b = build(ls, c);
        const std::vector<int64_t> from = reference(ls, c);
        std::vector<unsigned char> user((size_t)(c.userHi - c.userLo)), packed(c.packedBytes, 0);
        for (size_t i = 0; i < user.size(); ++i) user[i] = (unsigned char)(i * 29 + 3);
        std::vector<int> writes(packed.size(), 0);
        const uint64_t chunk = 1 + rng() % 9000;
        for (uint64_t a = 0; a < c.packedBytes; a += chunk) {
            const std::string err = copyRange(b.view, a, std::min(chunk, c.packedBytes - a), false, Mutation{}, user,
                                              c.userLo, packed, writes);
            ck_assert_msg(err.empty(), "call %d, chunk at %llu: %s", t, (unsigned long long)a, err.c_str());
        }
        for (uint64_t p = 0; p < c.packedBytes; ++p) {
            ck_assert_msg(writes[p] == (from[p] >= 0 ? 1 : 0), "call %d, %llu-byte chunks: packed byte %llu written %d times",
                          t, (unsigned long long)chunk, (unsigned long long)p, writes[p]);
            if (from[p] >= 0) ck_assert(packed[p] == user[(size_t)(from[p] - c.userLo)]);
        }
    }
}
END_TEST

START_TEST(dt_view_mutations_fail) {
    const std::vector<Layout> ls = layouts();
    std::mt19937 rng(99);
    int tried = 0, caught = 0;
    for (int t = 0; t < 60; ++t) {
        Call c = randomCall(ls, rng);
        Built b = build(ls, c);
        if (b.view.pieces < 3 || c.packedBytes < 2) continue;
        const uint64_t a = 1 + rng() % (c.packedBytes / 2), len = c.packedBytes / 3 + 1;
        Mutation m;
        m.noClip = true; // a range's first and last pieces copied whole
        ++tried, caught += !check(ls, c, b.view, a, std::min(len, c.packedBytes - a), false, m).empty() ||
                           !check(ls, c, b.view, a, std::min(len, c.packedBytes - a), true, m).empty();
        m = Mutation{};
        m.startLate = 1;
        ++tried, caught += !check(ls, c, b.view, 0, c.packedBytes, false, m).empty();
        m = Mutation{};
        m.stopEarly = true; // every batch's last piece left
        ++tried, caught += !check(ls, c, b.view, 0, c.packedBytes, false, m, 3).empty();
        m = Mutation{};
        m.sameStart = true; // warps that overlap
        ++tried, caught += !check(ls, c, b.view, 0, c.packedBytes, true, m, 3).empty();
        if (b.view.nblocks > 1) { // a block's pieces numbered one early
            DtViewBlock *blocks = reinterpret_cast<DtViewBlock *>(const_cast<DtViewBlock *>(b.view.blocks));
            --blocks[1].firstPiece;
            ++tried, caught += !check(ls, c, b.view, 0, c.packedBytes, false, Mutation{}, 7, 1).empty();
        }
    }
    ck_assert_msg(tried > 100 && caught == tried, "%d of %d mutations went unnoticed", tried - caught, tried);
    // blocks out of packed order: the builder must refuse them
    std::vector<DtViewLayout> dl;
    for (const Layout &l : ls) dl.push_back(DtViewLayout{l.segs.data(), (int)l.segs.size(), l.extent, l.bytes});
    const DtViewInput swapped[2] = {{0, 1, 0, ls[0].bytes}, {1, 1, 100000, 0}};
    std::vector<char> table;
    DtView v;
    ck_assert_msg(!dtViewBuild(dl.data(), (int)dl.size(), swapped, 2, nullptr, &table, &v),
                  "blocks out of packed order were taken");
    loom_dt_seg_t gap[2] = {{0, 0, 8, 1, 0}, {16, 0, 8, 1, 16}}; // segments not back to back
    const DtViewLayout holey{gap, 2, 24, 16};
    const DtViewInput one{0, 1, 0, 0};
    ck_assert_msg(!dtViewBuild(&holey, 1, &one, 1, nullptr, &table, &v), "segments with a packed gap were taken");
}
END_TEST

Suite *dt_view_suite(void) {
    Suite *s = suite_create("dt_view");
    TCase *tc = tcase_create("dt_view");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dt_view_ranges_copy_every_byte_once);
    tcase_add_test(tc, dt_view_chunks_make_the_whole);
    tcase_add_test(tc, dt_view_mutations_fail);
    tcase_add_test(tc, dt_view_elements_fold);
    tcase_add_test(tc, dt_fuse_mode_rule);
    suite_add_tcase(s, tc);
    return s;
}
