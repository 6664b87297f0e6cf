// CPU model of the resident kernel's hand-off (device/resident/resident_handoff.h,
// resident_coll.cu): CTA 0 hands each call of several CTAs to the others as
// LL lines on the device mailbox's head, the others poll it, run the calls
// they are needed for, and arrive; the last arrival marks the call finished,
// which CTA 0 waits for before it writes the next one. Every step is one
// line written or read, or one arrival, interleaved at random: a line's
// data and flags land together (one 16-byte store), lines land in any order
// and a warp's poll reads them at different moments.
//  1. Random scripts (2..6 CTAs, calls needing 1..all of them, sequence
//     numbers that wrap past 0): every call runs exactly once on each CTA it
//     needs and on no other, every head a CTA takes is one call's whole, and
//     every CTA leaves.
//  Not modeled: a ragged call's block tables, which the CTAs it needs read
//  after its head under the same tag, before they arrive.
//  Mutations must fail: taking a head by line 0's tag alone (a torn head),
//  taking the same tag twice, taking a zeroed mailbox, writing a call before
//  the last one finished, a leave command under the last call's tag.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "device/resident/resident_handoff.h"
#include "unit_suites.h"

using namespace loom;

namespace {

constexpr int kHead = 4; // head lines in the model (the real head is one line per lane, up to 32)

struct Line {
    uint64_t data = 0;
    uint32_t f0 = 0, f1 = 0;
};

// What a line of call `tag` carries: line 0 its command and CTAs, the others
// a value only that call's line has.
uint64_t lineData(uint32_t tag, int k, int32_t command, uint32_t ctas) {
    if (k == 0) return (uint64_t)(uint32_t)command | (uint64_t)ctas << 32;
    return (uint64_t)tag * 0x9e3779b97f4a7c15ull + (uint64_t)k * 0xbf58476d1ce4e5b9ull;
}

// The rules under test: the shared ones, or a mutation.
struct Rules {
    bool (*lineCarries)(uint32_t, uint32_t, uint32_t) = residentLineCarries;
    bool (*tagIsNew)(uint32_t, uint32_t) = residentTagIsNew;
    uint32_t (*leaveTag)(uint32_t) = residentLeaveTag;
    bool line0Only = false;      // take the head when line 0 alone carries a new tag
    bool skipFinishedWait = false; // CTA 0 writes the next call without waiting for `finished`
};

struct Model {
    const Rules &rules;
    int ctas;
    std::vector<uint32_t> need; // per call of the script: the CTAs it needs
    std::mt19937 &rng;
    Line head[kHead];
    unsigned arrived = 0;
    uint32_t finished = 0;
    std::string error;
    // runs[i][c]: how often CTA c ran call i
    std::vector<std::vector<int>> runs;

    struct Cta {
        enum { kAwait, kWrite, kRun, kWaitFinished, kPoll, kArrive, kLeft } state;
        uint32_t seq = 0;        // CTA 0: the call it holds (or the leave command's tag); the others: the last tag taken
        int call = -1;           // index into the script of the call held
        unsigned n = 0;          // CTAs of the call held
        std::vector<int> toWrite, toRead;
        Line snap[kHead];
        bool leaving = false;
    };
    std::vector<Cta> cta;
    uint32_t firstSeq;
    int nextCall = 0;

    Model(const Rules &r, int n, std::vector<uint32_t> script, uint32_t lastSeq, std::mt19937 &g)
        : rules(r), ctas(n), need(std::move(script)), rng(g), runs(need.size(), std::vector<int>(n, 0)), cta(n),
          firstSeq(residentNext(lastSeq)) {
        for (int c = 0; c < n; ++c) {
            cta[c].state = c ? Cta::kPoll : Cta::kAwait;
            cta[c].seq = lastSeq;
        }
    }

    int callOf(uint32_t tag) const { // the script index that tag numbers
        uint32_t s = firstSeq;
        for (int i = 0; i < (int)need.size(); ++i, s = residentNext(s))
            if (s == tag) return i;
        return -1;
    }

    void shuffled(std::vector<int> &v) {
        v.clear();
        for (int k = 0; k < kHead; ++k) v.push_back(k);
        std::shuffle(v.begin(), v.end(), rng);
    }

    void arrive(Cta &me) {
        if (++arrived == me.n) {
            arrived = 0;
            finished = me.seq;
        }
    }

    // One step of CTA c.
    void step(int c) {
        Cta &me = cta[c];
        switch (me.state) {
        case Cta::kAwait: // the host's next call, or leave when the script is done
            if (nextCall == (int)need.size()) {
                me.leaving = true;
                me.seq = rules.leaveTag(me.seq);
                shuffled(me.toWrite);
                me.state = Cta::kWrite;
                return;
            }
            me.seq = residentNext(me.seq);
            me.call = nextCall++;
            me.n = need[me.call];
            if (me.n > 1) shuffled(me.toWrite);
            me.state = me.n > 1 ? Cta::kWrite : Cta::kRun;
            return;
        case Cta::kWrite: {
            const int k = me.toWrite.back();
            me.toWrite.pop_back();
            const int32_t command = me.leaving ? kResidentLeave : kResidentRun;
            head[k].data = me.leaving ? (k ? 0 : (uint64_t)(uint32_t)command) : lineData(me.seq, k, command, me.n);
            head[k].f0 = head[k].f1 = me.seq;
            if (me.toWrite.empty()) me.state = me.leaving ? Cta::kLeft : Cta::kRun;
            return;
        }
        case Cta::kRun:
            ++runs[me.call][c];
            if (me.n > 1) arrive(me);
            me.state = me.n > 1 && !rules.skipFinishedWait ? Cta::kWaitFinished : Cta::kAwait;
            return;
        case Cta::kWaitFinished:
            if (finished == me.seq) me.state = Cta::kAwait;
            return;
        case Cta::kPoll: {
            if (me.toRead.empty()) shuffled(me.toRead);
            const int k = me.toRead.back();
            me.toRead.pop_back();
            me.snap[k] = head[k];
            if (!me.toRead.empty()) return;
            const uint32_t t = me.snap[0].f0;
            bool whole = true;
            for (int l = 0; l < kHead && !rules.line0Only; ++l)
                whole = whole && rules.lineCarries(me.snap[l].f0, me.snap[l].f1, t);
            if (!whole || !rules.tagIsNew(t, me.seq)) return; // poll again
            me.seq = t;
            const int32_t command = (int32_t)(uint32_t)me.snap[0].data;
            if (command != kResidentRun) { // leave (or no call at all: the kernel's CTAs leave too)
                me.state = Cta::kLeft;
                return;
            }
            me.n = (uint32_t)(me.snap[0].data >> 32);
            me.call = callOf(t);
            if (me.call < 0 || need[me.call] != me.n) {
                error = "CTA " + std::to_string(c) + " took tag " + std::to_string(t) + " with " +
                        std::to_string(me.n) + " CTAs, not a call of the script";
                return;
            }
            for (int l = 1; l < kHead; ++l)
                if (me.snap[l].data != lineData(t, l, kResidentRun, me.n)) {
                    error = "CTA " + std::to_string(c) + " took a torn head for call " + std::to_string(me.call);
                    return;
                }
            if (!residentCtaNeeded((unsigned)c, me.n)) return;
            ++runs[me.call][c];
            me.state = Cta::kArrive;
            return;
        }
        case Cta::kArrive:
            arrive(me);
            me.state = Cta::kPoll;
            return;
        case Cta::kLeft: return;
        }
    }

    // Runs to the end; "" or what went wrong.
    std::string run() {
        for (long steps = 0; steps < 200000 && error.empty(); ++steps) {
            bool all = true;
            for (const Cta &x : cta) all = all && x.state == Cta::kLeft;
            if (all) break;
            step((int)(rng() % (unsigned)ctas));
        }
        if (!error.empty()) return error;
        for (int c = 0; c < ctas; ++c)
            if (cta[c].state != Cta::kLeft) return "CTA " + std::to_string(c) + " never left";
        for (size_t i = 0; i < need.size(); ++i)
            for (int c = 0; c < ctas; ++c)
                if (runs[i][c] != (residentCtaNeeded((unsigned)c, need[i]) ? 1 : 0))
                    return "call " + std::to_string(i) + " (" + std::to_string(need[i]) + " CTAs) ran " +
                           std::to_string(runs[i][c]) + " times on CTA " + std::to_string(c);
        return "";
    }
};

// `seeds` random scripts under `rules`: the first failure, or "".
std::string scripts(const Rules &rules, int seeds) {
    for (int seed = 0; seed < seeds; ++seed) {
        std::mt19937 rng(seed * 7919 + 3);
        const int ctas = 2 + (int)(rng() % 5);
        std::vector<uint32_t> need(1 + rng() % 12);
        for (auto &n : need) n = 1 + rng() % (unsigned)ctas;
        const uint32_t lastSeq = seed % 3 == 0 ? 0xfffffffdu - (uint32_t)(rng() % 3) : (uint32_t)(rng() % 1000);
        Model m(rules, ctas, need, lastSeq, rng);
        const std::string err = m.run();
        if (!err.empty()) return "seed " + std::to_string(seed) + ": " + err;
    }
    return "";
}

constexpr int kSeeds = 2000;

} // namespace

START_TEST(calls_run_once_on_the_ctas_they_need) {
    const std::string err = scripts(Rules{}, kSeeds);
    ck_assert_msg(err.empty(), "%s", err.c_str());
}
END_TEST

START_TEST(sequence_numbers_skip_zero) {
    ck_assert_uint_eq(residentNext(0xffffffffu), 1);
    ck_assert_uint_eq(residentLeaveTag(0xffffffffu), 1);
    ck_assert(!residentTagIsNew(0, 5));
}
END_TEST

START_TEST(mutations_fail) {
    Rules torn;
    torn.line0Only = true;
    ck_assert_msg(!scripts(torn, kSeeds).empty(), "taking a head by line 0's tag alone went unnoticed");
    Rules twice;
    twice.tagIsNew = [](uint32_t t, uint32_t) { return t != 0; };
    ck_assert_msg(!scripts(twice, kSeeds).empty(), "taking a tag twice went unnoticed");
    Rules zero;
    zero.tagIsNew = [](uint32_t t, uint32_t last) { return t != last; };
    ck_assert_msg(!scripts(zero, kSeeds).empty(), "taking a zeroed mailbox went unnoticed");
    Rules early;
    early.skipFinishedWait = true;
    ck_assert_msg(!scripts(early, kSeeds).empty(), "writing a call before the last one finished went unnoticed");
    Rules oldLeave;
    oldLeave.leaveTag = [](uint32_t last) { return last; };
    ck_assert_msg(!scripts(oldLeave, kSeeds).empty(), "a leave command under the last call's tag went unnoticed");
}
END_TEST

Suite *resident_handoff_suite(void) {
    Suite *s = suite_create("resident_handoff");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, calls_run_once_on_the_ctas_they_need);
    tcase_add_test(tc, sequence_numbers_skip_zero);
    tcase_add_test(tc, mutations_fail);
    suite_add_tcase(s, tc);
    return s;
}
