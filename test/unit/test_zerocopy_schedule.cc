// Simulation of the zero-copy allreduce (device/zerocopy/zerocopy_schedule.h) on the CPU.
//  1. Ranges: 1..8 ranks, every element size, awkward counts, 1..32 CTAs,
//     one-shot and two-shot (in place too): running every CTA's range as the
//     kernel does gives the reference sum on every rank, each output element
//     is stored exactly once, and every range starts on a 16-byte unit.
//  2. Flags: ranks of several CTAs run several calls, every step interleaved
//     at random: no CTA touches a rank's buffers unless that rank's kernel for
//     the same call is running, and nothing deadlocks.
//  3. Staged (each rank's scratch instead of its buffers): CTA b copies part
//     b of every other slice of its input into its scratch, reduces as in 2,
//     storing peers' results into their scratch, and copies part b of every
//     other slice out of its scratch: the reference sum everywhere (in place
//     too), and every scratch element a CTA reads was written, in this call,
//     by the same-index CTA of its owner (the only CTA whose flags order it).
//  Mutations must fail: slices rounded down leave elements unreduced; CTA
//  ranges that overlap store twice; dropping the arrive wait or the done
//  wait lets a CTA touch buffers of a rank outside the call; waiting for an
//  exact flag value instead of ">=" deadlocks; pairing every CTA with the
//  peers' CTA 0 instead of its own index lets a rank leave while peers still
//  touch its buffers.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "device/zerocopy/zerocopy_schedule.h"
#include "unit_suites.h"

using namespace loom;

namespace {

using RangeFn = std::function<void(bool oneShot, size_t count, size_t esize, int n, int r, int ctas, int b, size_t *lo,
                                   size_t *hi)>;

RangeFn schedule() {
    return [](bool o, size_t c, size_t e, int n, int r, int ctas, int b, size_t *lo, size_t *hi) {
        zeroCopyRange(o, c, e, n, r, ctas, b, lo, hi);
    };
}

// One call over host buffers as the kernel runs it (elements as uint64 sums,
// `esize` only shapes the ranges). "" or why not.
std::string runRanges(const RangeFn &range, bool oneShot, bool inPlace, size_t count, size_t esize, int n, int ctas) {
    std::mt19937_64 rng(count * 31 + esize * 7 + (size_t)n * 131 + (size_t)ctas + (oneShot ? 1 : 0));
    std::vector<std::vector<uint64_t>> in(n, std::vector<uint64_t>(count)), out(n, std::vector<uint64_t>(count, 0));
    std::vector<std::vector<int>> stores(n, std::vector<int>(count, 0));
    std::vector<uint64_t> want(count, 0);
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) want[i] += (in[q][i] = rng() >> 8);
    if (inPlace) out = in;
    std::vector<std::vector<uint64_t>> &dst = out, &src = inPlace ? out : in;
    for (int r = 0; r < n; ++r)
        for (int b = 0; b < ctas; ++b) {
            size_t lo, hi;
            range(oneShot, count, esize, n, r, ctas, b, &lo, &hi);
            if (lo > hi || hi > count) return "rank " + std::to_string(r) + " CTA " + std::to_string(b) + ": bad range";
            if (lo < count && (lo * esize) % 16) return "a range starts inside a 16-byte unit";
            for (size_t i = lo; i < hi; ++i) {
                uint64_t acc = 0;
                for (int q = 0; q < n; ++q) acc += src[q][i];
                for (int q = 0; q < n; ++q)
                    if (!oneShot || q == r) dst[q][i] = acc, ++stores[q][i];
            }
        }
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) {
            if (stores[q][i] != 1)
                return "rank " + std::to_string(q) + " element " + std::to_string(i) + " stored " +
                       std::to_string(stores[q][i]) + " times";
            if (dst[q][i] != want[i]) return "rank " + std::to_string(q) + " element " + std::to_string(i) + " wrong";
        }
    return "";
}

std::string sweepRanges(const RangeFn &range) {
    const size_t counts[] = {1, 2, 7, 15, 16, 17, 100, 1000, 4097, 65537};
    const size_t esizes[] = {1, 2, 4, 8, 16};
    const int ctaCounts[] = {1, 3, 32};
    for (int n = 1; n <= kMaxZeroCopyRanks; ++n)
        for (size_t count : counts)
            for (size_t esize : esizes)
                for (int ctas : ctaCounts)
                    for (int shape = 0; shape < 3; ++shape) { // two-shot, two-shot in place, one-shot
                        std::string why = runRanges(range, shape == 2, shape == 1, count, esize, n, ctas);
                        if (!why.empty())
                            return why + " (n " + std::to_string(n) + ", count " + std::to_string(count) + ", esize " +
                                   std::to_string(esize) + ", " + std::to_string(ctas) + " CTAs, shape " +
                                   std::to_string(shape) + ")";
                    }
    return "";
}

// A staged call (zerocopy_schedule.h) with copy ranges `copy` (the kernel:
// the reduce ranges of each slice), every phase of every CTA in turn; each
// scratch element remembers the CTA that wrote it. "" or why not.
std::string runStaged(const RangeFn &copy, bool inPlace, size_t count, size_t esize, int n, int ctas) {
    std::mt19937_64 rng(count * 17 + esize * 5 + (size_t)n * 101 + (size_t)ctas);
    std::vector<std::vector<uint64_t>> in(n, std::vector<uint64_t>(count)), out(n, std::vector<uint64_t>(count, 0));
    std::vector<uint64_t> want(count, 0);
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) want[i] += (in[q][i] = rng() >> 8);
    if (inPlace) out = in;
    std::vector<std::vector<uint64_t>> &src = inPlace ? out : in;
    // scratch[r]: inputs then results; writer[r][k]: the CTA that wrote it (-1: none).
    std::vector<std::vector<uint64_t>> scratch(n, std::vector<uint64_t>(2 * count, 0));
    std::vector<std::vector<int>> writer(n, std::vector<int>(2 * count, -1));
    auto read = [&](int owner, size_t k, int b, uint64_t *v) {
        if (writer[owner][k] != b) return false;
        *v = scratch[owner][k];
        return true;
    };
    auto fault = [&](const char *what, int r, int b, size_t i) {
        return std::string(what) + ": rank " + std::to_string(r) + " CTA " + std::to_string(b) + " element " +
               std::to_string(i) + " not written by its owner's CTA " + std::to_string(b);
    };
    for (int r = 0; r < n; ++r) // 0. copy in
        for (int b = 0; b < ctas; ++b)
            for (int s = 0; s < n; ++s) {
                if (s == r) continue;
                size_t lo, hi;
                copy(false, count, esize, n, s, ctas, b, &lo, &hi);
                for (size_t i = lo; i < hi && i < count; ++i) scratch[r][i] = src[r][i], writer[r][i] = b;
            }
    for (int r = 0; r < n; ++r) // 1. reduce slice r; results to the peers' scratch
        for (int b = 0; b < ctas; ++b) {
            size_t lo, hi;
            zeroCopyRange(false, count, esize, n, r, ctas, b, &lo, &hi);
            for (size_t i = lo; i < hi; ++i) {
                uint64_t acc = src[r][i], v;
                for (int q = 0; q < n; ++q) {
                    if (q == r) continue;
                    if (!read(q, i, b, &v)) return fault("reduce", r, b, i);
                    acc += v;
                }
                out[r][i] = acc;
                for (int q = 0; q < n; ++q)
                    if (q != r) scratch[q][count + i] = acc, writer[q][count + i] = b;
            }
        }
    for (int r = 0; r < n; ++r) // 2. copy out
        for (int b = 0; b < ctas; ++b)
            for (int s = 0; s < n; ++s) {
                if (s == r) continue;
                size_t lo, hi;
                copy(false, count, esize, n, s, ctas, b, &lo, &hi);
                for (size_t i = lo; i < hi && i < count; ++i)
                    if (!read(r, count + i, b, &out[r][i])) return fault("copy out", r, b, i);
            }
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i)
            if (out[q][i] != want[i]) return "rank " + std::to_string(q) + " element " + std::to_string(i) + " wrong";
    return "";
}

std::string sweepStaged(const RangeFn &copy) {
    const size_t counts[] = {1, 7, 16, 17, 1000, 4097};
    const size_t esizes[] = {1, 4, 8, 16};
    for (int n = 2; n <= kMaxZeroCopyRanks; ++n)
        for (size_t count : counts)
            for (size_t esize : esizes)
                for (int ctas : {1, 3, 32})
                    for (int inPlace = 0; inPlace < 2; ++inPlace) {
                        std::string why = runStaged(copy, inPlace, count, esize, n, ctas);
                        if (!why.empty())
                            return why + " (n " + std::to_string(n) + ", count " + std::to_string(count) +
                                   ", esize " + std::to_string(esize) + ", " + std::to_string(ctas) + " CTAs" +
                                   (inPlace ? ", in place)" : ")");
                    }
    return "";
}

// The flag protocol as the kernel runs it, one CTA step at a time.
struct Protocol {
    bool arriveWait = true, doneWait = true, exactWait = false, pairCta0 = false;
};

enum Pc { kPostArrive, kWaitArrive, kTouch, kPostDone, kWaitDone, kFinished };

// n ranks x ctas CTAs run `calls` calls under a random schedule. "" or why not.
std::string runFlags(const Protocol &p, int n, int ctas, int calls, unsigned seed) {
    std::mt19937 rng(seed);
    // word[r][q][b]: rank r's flag word written by rank q's CTA b.
    std::vector<uint64_t> word((size_t)n * n * ctas, 0);
    auto w = [&](int r, int q, int b) -> uint64_t & { return word[((size_t)r * n + q) * ctas + b]; };
    std::vector<int> call(n, 1);           // the call a rank's kernel runs (or will launch next)
    std::vector<bool> running(n, false);   // its kernel for `call` is running (buffers ready)
    std::vector<std::vector<int>> pc(n, std::vector<int>(ctas, kPostArrive));
    auto reached = [&](uint64_t have, uint64_t want) { return p.exactWait ? have == want : have >= want; };
    auto waitsOk = [&](int r, int b, uint64_t want) {
        for (int q = 0; q < n; ++q)
            if (q != r && !reached(w(r, q, p.pairCta0 ? 0 : b), want)) return false;
        return true;
    };
    for (;;) {
        // Enabled steps: (rank, CTA) or (rank, -1) for a launch / an ending.
        std::vector<std::pair<int, int>> steps;
        bool allDone = true;
        for (int r = 0; r < n; ++r) {
            if (call[r] > calls) continue;
            allDone = false;
            if (!running[r]) {
                steps.push_back({r, -1});
                continue;
            }
            bool finished = true;
            for (int b = 0; b < ctas; ++b) {
                const uint64_t c = (uint64_t)call[r];
                switch (pc[r][b]) {
                case kWaitArrive:
                    if (!p.arriveWait || waitsOk(r, b, zeroCopyArrive(c))) steps.push_back({r, b});
                    break;
                case kWaitDone:
                    if (!p.doneWait || waitsOk(r, b, zeroCopyDone(c))) steps.push_back({r, b});
                    break;
                case kFinished: break;
                default: steps.push_back({r, b});
                }
                finished = finished && pc[r][b] == kFinished;
            }
            if (finished) steps.push_back({r, -1});
        }
        if (allDone) return "";
        if (steps.empty()) return "deadlock";
        const auto [r, b] = steps[rng() % steps.size()];
        const uint64_t c = (uint64_t)call[r];
        if (b < 0) {
            if (!running[r]) { // launch: its buffers hold this call's data from now on
                running[r] = true;
                for (int k = 0; k < ctas; ++k) pc[r][k] = kPostArrive;
            } else { // the kernel ended: the host may reuse its buffers
                running[r] = false;
                ++call[r];
            }
            continue;
        }
        switch (pc[r][b]) {
        case kPostArrive:
        case kPostDone:
            for (int q = 0; q < n; ++q)
                if (q != r) w(q, r, b) = pc[r][b] == kPostArrive ? zeroCopyArrive(c) : zeroCopyDone(c);
            break;
        case kTouch: // reads every input (and two-shot writes every output)
            for (int q = 0; q < n; ++q)
                if (!running[q] || (uint64_t)call[q] != c)
                    return "rank " + std::to_string(r) + " CTA " + std::to_string(b) + " touched rank " +
                           std::to_string(q) + "'s buffers in call " + std::to_string(c) + " while it was " +
                           (running[q] ? "in call " : "between calls, before ") + std::to_string(call[q]);
            break;
        default: break;
        }
        ++pc[r][b];
    }
}

std::string sweepFlags(const Protocol &p) {
    for (int n = 2; n <= 4; ++n)
        for (int ctas : {1, 2, 3})
            for (unsigned seed = 0; seed < 300; ++seed) {
                std::string why = runFlags(p, n, ctas, 4, seed * 977 + (unsigned)(n * 13 + ctas));
                if (!why.empty())
                    return why + " (n " + std::to_string(n) + ", " + std::to_string(ctas) + " CTAs, seed " +
                           std::to_string(seed) + ")";
            }
    return "";
}

} // namespace

START_TEST(zero_copy_ranges_cover_every_element_once) {
    const std::string why = sweepRanges(schedule());
    ck_assert_msg(why.empty(), "%s", why.c_str());
}
END_TEST

START_TEST(zero_copy_range_mutations_fail) {
    // Slices rounded down: the buffer's end is never reduced.
    RangeFn floorSlices = [](bool o, size_t c, size_t e, int n, int r, int ctas, int b, size_t *lo, size_t *hi) {
        const size_t per = c / (size_t)(o ? 1 : n);
        size_t a = o ? 0 : (size_t)r * per, z = a + per;
        const size_t part = (z - a + (size_t)ctas - 1) / (size_t)ctas;
        *lo = std::min(z, a + (size_t)b * part) / (16 / e) * (16 / e);
        *hi = std::min(z, a + (size_t)(b + 1) * part);
    };
    ck_assert(!sweepRanges(floorSlices).empty());
    // CTA ranges one unit too long: neighbours store the same elements.
    RangeFn overlapping = [](bool o, size_t c, size_t e, int n, int r, int ctas, int b, size_t *lo, size_t *hi) {
        zeroCopyRange(o, c, e, n, r, ctas, b, lo, hi);
        *hi = std::min(c, *hi + 16 / e);
    };
    ck_assert(!sweepRanges(overlapping).empty());
}
END_TEST

START_TEST(zero_copy_flags_keep_buffers_in_their_call) {
    const std::string why = sweepFlags(Protocol{});
    ck_assert_msg(why.empty(), "%s", why.c_str());
}
END_TEST

START_TEST(zero_copy_flag_mutations_fail) {
    Protocol noArrive;
    noArrive.arriveWait = false;
    ck_assert(sweepFlags(noArrive).find("touched") != std::string::npos);
    Protocol noDone;
    noDone.doneWait = false;
    ck_assert(sweepFlags(noDone).find("touched") != std::string::npos);
    Protocol exact;
    exact.exactWait = true;
    ck_assert(sweepFlags(exact).find("deadlock") != std::string::npos);
    Protocol cta0;
    cta0.pairCta0 = true;
    ck_assert(sweepFlags(cta0).find("touched") != std::string::npos);
}
END_TEST

START_TEST(zero_copy_staged_pairs_every_scratch_element) {
    const std::string why = sweepStaged(schedule());
    ck_assert_msg(why.empty(), "%s", why.c_str());
    // Copies by the next CTA's ranges: a peer reads scratch that no CTA its
    // flags wait for wrote (or nothing wrote).
    RangeFn shifted = [](bool o, size_t c, size_t e, int n, int r, int ctas, int b, size_t *lo, size_t *hi) {
        zeroCopyRange(o, c, e, n, r, ctas, (b + 1) % ctas, lo, hi);
    };
    ck_assert(sweepStaged(shifted).find("not written") != std::string::npos);
    // Copies of the whole buffer split by CTA (not slice by slice).
    RangeFn whole = [](bool, size_t c, size_t e, int, int r, int ctas, int b, size_t *lo, size_t *hi) {
        zeroCopyRange(true, c, e, 1, r, ctas, b, lo, hi);
    };
    ck_assert(!sweepStaged(whole).empty());
}
END_TEST

START_TEST(zero_copy_ctas_follow_the_bytes) {
    ck_assert_int_eq(zeroCopyCtas(false, 1, 4, 32 << 10, 32), 1);
    ck_assert_int_eq(zeroCopyCtas(false, 1 << 20, 4, 32 << 10, 32), 8);   // 256 KiB a rank
    ck_assert_int_eq(zeroCopyCtas(true, 1 << 20, 4, 32 << 10, 32), 32);   // one-shot: the whole buffer
    ck_assert_int_eq(zeroCopyCtas(false, 1ull << 30, 4, 32 << 10, 32), 32);
    ck_assert_int_eq(zeroCopyCtas(false, 1ull << 30, 4, 32 << 10, 12), 12);
    ck_assert_int_eq(zeroCopyCtas(false, 1ull << 30, 4, 32 << 10, 99), kMaxZeroCopyCtas);
}
END_TEST

Suite *zerocopy_schedule_suite(void) {
    Suite *s = suite_create("zerocopy_schedule");
    TCase *t = tcase_create("zerocopy");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, zero_copy_ranges_cover_every_element_once);
    tcase_add_test(t, zero_copy_range_mutations_fail);
    tcase_add_test(t, zero_copy_flags_keep_buffers_in_their_call);
    tcase_add_test(t, zero_copy_flag_mutations_fail);
    tcase_add_test(t, zero_copy_staged_pairs_every_scratch_element);
    tcase_add_test(t, zero_copy_ctas_follow_the_bytes);
    suite_add_tcase(s, t);
    return s;
}
