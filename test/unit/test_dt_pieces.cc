// The datatype copy's pieces (src/device/datatype/dt_pieces.h) on the CPU:
// every piece of a call, as the kernel's warps take them, copied run by run
// from a user buffer into a packed one. Every packed byte must be written
// exactly once and hold the user byte the plan puts there (a reference
// walk over segments and runs); every word size the kernel would use must
// divide the piece's addresses, lengths and strides. Plans: short runs
// (grouped, with a last partial group), long runs cut into pieces, runs of
// exactly half and one piece, odd lengths, negative offsets and strides,
// several segments, several elements with a resized extent. Mutations that
// must fail: a segment's piece count one short, one too many, and a piece
// size that disagrees with the grouping. The copy loops' word steps
// (DtRunStep: a lane's words 32 or 1 apart, stepped with additions) must
// land where division puts them; a step that drops its carry or its whole
// runs must not.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "device/datatype/dt_pieces.h"
#include "unit_suites.h"

using namespace loom;

namespace {

struct Plan {
    std::vector<loom_dt_seg_t> segs;
    int64_t extent;
    uint64_t bytes; // packed bytes of one element
};

// A segment of count runs of len bytes, stride apart from offset, packed at `packed`.
loom_dt_seg_t seg(int64_t offset, int64_t stride, uint64_t len, uint64_t count, uint64_t packed) {
    return loom_dt_seg_t{offset, stride, len, count, packed};
}

// Segments packed back to back (each segment's packed offset from the ones before).
Plan plan(std::vector<loom_dt_seg_t> segs, int64_t extent) {
    uint64_t at = 0;
    for (loom_dt_seg_t &s : segs) s.packed = at, at += s.len * s.count;
    return Plan{segs, extent, at};
}

std::vector<Plan> plans() {
    std::vector<Plan> p;
    p.push_back(plan({seg(0, 512, 256, 1000, 0)}, 512000));                // 256 B blocks: 16 a piece, last group of 8
    p.push_back(plan({seg(0, 56, 24, 5, 0)}, 280));                        // vector(5, 3, 7, double)
    p.push_back(plan({seg(0, 16, 12, 10923, 0)}, 174768));                 // contiguous(10923, double_int)
    p.push_back(plan({seg(8, 9000, 4100, 7, 0)}, 63008));                  // long runs: two pieces, the second 4 B
    p.push_back(plan({seg(0, 4096, 2048, 9, 0), seg(40000, 8192, 4096, 3, 0)}, 80000)); // half and one piece
    p.push_back(plan({seg(-24, -24, 8, 4, 0)}, 96));                       // hvector(4, 2, -24 B, int)
    p.push_back(plan({seg(3, 7, 5, 300, 0), seg(-41, 1, 1, 1, 0), seg(17, 0, 3, 1, 0)}, 2200)); // odd, bytes
    p.push_back(plan({seg(0, 1024, 1024, 8192, 0)}, 1 << 23));             // a subarray face: 4 runs a piece
    std::vector<loom_dt_seg_t> many;
    for (int k = 0; k < 40; ++k) many.push_back(seg(k * 100, 0, 4 + (k % 5) * 4, 1, 0)); // an indexed type
    p.push_back(plan(many, 4100));
    return p;
}

// first[] of a plan: the pieces of one element before each segment.
std::vector<uint64_t> firstOf(const Plan &p) {
    std::vector<uint64_t> first(p.segs.size() + 1, 0);
    for (size_t k = 0; k < p.segs.size(); ++k) first[k + 1] = first[k] + dtSegPieces(p.segs[k]);
    return first;
}

// "" when the pieces of `count` elements pack exactly what the plan says;
// `first` and `perElement` as the kernel gets them (mutated by the tests).
std::string simulate(const Plan &p, uint64_t count, const std::vector<uint64_t> &first, uint64_t perElement) {
    int64_t lo = 0, hi = 0; // the user bytes the plan touches
    for (uint64_t e = 0; e < count; ++e)
        for (const loom_dt_seg_t &s : p.segs)
            for (uint64_t r = 0; r < s.count; ++r) {
                const int64_t at = (int64_t)e * p.extent + s.offset + (int64_t)r * s.stride;
                lo = std::min(lo, at), hi = std::max(hi, at + (int64_t)s.len);
            }
    std::vector<unsigned char> user((size_t)(hi - lo));
    for (size_t i = 0; i < user.size(); ++i) user[i] = (unsigned char)(i * 131 + (i >> 9));
    const unsigned char *base = user.data() - lo;
    const uint64_t total = p.bytes * count;
    std::vector<unsigned char> want(total), got(total, 0);
    std::vector<int> writes(total, 0);
    uint64_t k = 0;
    for (uint64_t e = 0; e < count; ++e)
        for (const loom_dt_seg_t &s : p.segs)
            for (uint64_t r = 0; r < s.count; ++r, k += s.len)
                memcpy(&want[k], base + (int64_t)e * p.extent + s.offset + (int64_t)r * s.stride, s.len);
    // Pieces as the kernel's warps take them, with the call's pointers at
    // 16-aligned addresses (cudaMalloc's are): the plan's offsets misalign.
    const uint64_t userBase = 0x10000, packedBase = 0x20000;
    for (uint64_t w = 0; w < perElement * count; ++w) {
        const DtPiece pc = dtPieceAt(p.segs.data(), first.data(), (int)p.segs.size(), perElement, p.extent, p.bytes, w);
        if (pc.n == 0 || pc.nr == 0 || pc.n * (uint64_t)pc.nr > 2 * kDtPieceBytes)
            return "piece " + std::to_string(w) + ": " + std::to_string(pc.nr) + " runs of " + std::to_string(pc.n);
        const uint32_t word = dtWordBytes(userBase + (uint64_t)pc.user, packedBase + pc.packed, pc.n, pc.nr, pc.stride,
                                          (int64_t)pc.n);
        if (pc.n % word || (userBase + (uint64_t)pc.user) % word || (packedBase + pc.packed) % word ||
            (pc.nr > 1 && (pc.stride % word)))
            return "piece " + std::to_string(w) + ": word of " + std::to_string(word) + " bytes does not fit";
        for (uint32_t r = 0; r < pc.nr; ++r) {
            const uint64_t to = pc.packed + (uint64_t)r * pc.n;
            const int64_t from = pc.user + (int64_t)r * pc.stride;
            if (to + pc.n > total || from < lo || from + (int64_t)pc.n > hi)
                return "piece " + std::to_string(w) + ": run " + std::to_string(r) + " outside the buffers";
            memcpy(&got[to], base + from, pc.n);
            for (uint32_t i = 0; i < pc.n; ++i) ++writes[to + i];
        }
    }
    for (uint64_t i = 0; i < total; ++i) {
        if (writes[i] != 1) return "packed byte " + std::to_string(i) + " written " + std::to_string(writes[i]) + " times";
        if (got[i] != want[i]) return "packed byte " + std::to_string(i) + " is not the plan's user byte";
    }
    return "";
}

// "" when `step` walks from every first word of a lane (start) through
// `steps` words `skip` apart exactly as division places them, for runs of
// unitsPerRun words.
std::string stepsMatchDivision(const DtRunStep &step, uint32_t skip, uint32_t unitsPerRun, int steps) {
    for (uint32_t start = 0; start < 3 * unitsPerRun + 33; ++start) {
        DtRunWord p = DtRunStep(skip, unitsPerRun).at(start); // the first word as the loops find it
        for (int k = 0; k < steps; ++k, step.next(p)) {
            const uint32_t i = start + (uint32_t)k * skip;
            if (p.run != i / unitsPerRun || p.word != i % unitsPerRun)
                return "word " + std::to_string(i) + " of runs of " + std::to_string(unitsPerRun) + " stepped to run " +
                       std::to_string(p.run) + " word " + std::to_string(p.word);
        }
    }
    return "";
}

} // namespace

START_TEST(dt_run_steps_match_division) {
    for (uint32_t skip : {1u, 32u})
        for (uint32_t units = 1; units <= 300; ++units) {
            const std::string err = stepsMatchDivision(DtRunStep(skip, units), skip, units, 70);
            ck_assert_msg(err.empty(), "skip %u: %s", skip, err.c_str());
        }
    // Mutations that must fail: a step without its carry into the next
    // run, one without its whole runs, one a word long.
    int caught = 0, tried = 0;
    for (uint32_t units : {3u, 7u, 16u, 31u, 33u, 256u}) {
        if (32 % units != 0) { // (runs that divide a skip never carry)
            DtRunStep noCarry(32, units);
            noCarry.unitsPerRun = 0xffffffffu; // never wraps
            ++tried, caught += !stepsMatchDivision(noCarry, 32, units, 70).empty();
        }
        if (32 / units > 0) {
            DtRunStep noRuns(32, units);
            noRuns.runs = 0;
            ++tried, caught += !stepsMatchDivision(noRuns, 32, units, 70).empty();
        }
        DtRunStep oneWord(32, units);
        oneWord.words = (oneWord.words + 1) % units;
        ++tried, caught += !stepsMatchDivision(oneWord, 32, units, 70).empty();
    }
    ck_assert_msg(caught == tried, "%d of %d mutated word steps went unnoticed", tried - caught, tried);
}
END_TEST

START_TEST(dt_pieces_cover_every_byte_once) {
    for (const Plan &p : plans())
        for (uint64_t count : {1, 2, 3}) {
            const std::vector<uint64_t> first = firstOf(p);
            const std::string err = simulate(p, count, first, first.back());
            ck_assert_msg(err.empty(), "plan of %zu segments (first len %llu), %llu elements: %s", p.segs.size(),
                          (unsigned long long)p.segs[0].len, (unsigned long long)count, err.c_str());
        }
}
END_TEST

START_TEST(dt_pieces_short_runs_share_a_piece) {
    // 256-byte runs: 16 to a piece, so a warp moves 4 KiB, not 256 bytes.
    ck_assert_uint_eq(dtRunsPerPiece(256), 16);
    ck_assert_uint_eq(dtSegPieces(seg(0, 512, 256, 1000, 0)), 63);
    ck_assert_uint_eq(dtRunsPerPiece(kDtPieceBytes / 2), 1);
    ck_assert_uint_eq(dtSegPieces(seg(0, 9000, 4100, 7, 0)), 14);
}
END_TEST

START_TEST(dt_pieces_mutations_fail) {
    int caught = 0, tried = 0;
    for (const Plan &p : plans()) {
        std::vector<uint64_t> first = firstOf(p);
        const uint64_t per = first.back();
        // a segment's pieces one short (the last piece of the element lost)
        ++tried, caught += !simulate(p, 2, first, per - 1).empty();
        // one too many in the first segment (a piece past its runs)
        std::vector<uint64_t> f = first;
        for (size_t k = 1; k < f.size(); ++k) ++f[k];
        ++tried, caught += !simulate(p, 2, f, per + 1).empty();
    }
    ck_assert_msg(caught == tried, "%d of %d mutated piece counts went unnoticed", tried - caught, tried);
    // a kernel that grouped short runs by a different rule than the count of pieces
    Plan p = plan({seg(0, 512, 256, 1000, 0)}, 512000);
    std::vector<uint64_t> first = {0, 1000}; // one piece per run, as before grouping
    ck_assert_msg(!simulate(p, 1, first, 1000).empty(), "pieces counted per run while runs are grouped went unnoticed");
}
END_TEST

Suite *dt_pieces_suite(void) {
    Suite *s = suite_create("dt_pieces");
    TCase *tc = tcase_create("dt_pieces");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dt_pieces_cover_every_byte_once);
    tcase_add_test(tc, dt_pieces_short_runs_share_a_piece);
    tcase_add_test(tc, dt_pieces_mutations_fail);
    tcase_add_test(tc, dt_run_steps_match_division);
    suite_add_tcase(s, tc);
    return s;
}
