// CPU model of the component's pointer memo (src/coll/coll_loom_where_memo.h):
// random scripts of calls (enter ... leave, nested where a call starts
// kept calls inside it), asks of a few pointers inside and outside calls,
// and an application that remaps memory between calls (a pointer's kind
// and device change while no call runs). A fake driver answers and counts.
//  1. Every answer is what the driver says now.
//  2. Inside an outermost call the driver is asked once per pointer for the
//     first LOOM_WHERE_MEMO pointers, on every ask for the ones past them;
//     outside a call on every ask. NULL is host memory, never asked.
//  Mutations must fail: a memo never cleared (an answer outlives its call),
//  one cleared at every leave (a kept call's leave empties its caller's),
//  and none (every ask goes to the driver).
#include <cstdint>
#include <cstdio>
#include <string>
#include <map>
#include <random>
#include <vector>

#include "coll/coll_loom_where_memo.h"
#include "unit_suites.h"

namespace {

constexpr int kPointers = 6; // more than LOOM_WHERE_MEMO
char arena[kPointers];

std::map<const void *, loomPointerInfo_t> memory; // what the driver says now
std::map<const void *, int> asked;                // driver queries per pointer

loomResult_t fakeQuery(const void *ptr, loomPointerInfo_t *info) {
    ++asked[ptr];
    *info = memory[ptr];
    return loomSuccess;
}

struct Rules {
    void (*enter)(loom_where_memo_t *) = loom_where_memo_enter;
    void (*leave)(loom_where_memo_t *) = loom_where_memo_leave;
    loomPointerInfo_t (*ask)(loom_where_memo_t *, const void *, loom_pointer_query_fn) = loom_where_memo_ask;
};

// One random script; an empty string, or what went wrong first.
std::string script(const Rules &rules, unsigned seed) {
    std::mt19937 rng(seed);
    loom_where_memo_t m = {};
    memory.clear();
    for (int p = 0; p < kPointers; ++p) memory[&arena[p]] = {loomMemoryHost, -1};
    std::map<const void *, int> asksInCall; // this outermost call's asks per pointer
    std::vector<const void *> order;        // its pointers, first ask first
    int depth = 0;
    for (int step = 0; step < 400; ++step) {
        const int what = (int)(rng() % 8);
        char text[160];
        if (what == 0 && depth < 3) { // a call begins (inside one: a kept call it starts)
            rules.enter(&m);
            if (depth++ == 0) asksInCall.clear(), order.clear(), asked.clear();
        } else if (what == 1 && depth > 0) { // a call ends
            rules.leave(&m);
            if (--depth > 0) continue;
            for (size_t i = 0; i < order.size(); ++i) {
                const void *p = order[i];
                const int want = i < LOOM_WHERE_MEMO ? 1 : asksInCall[p];
                if (asked[p] != want) {
                    snprintf(text, sizeof(text), "seed %u step %d: pointer %d asked of the driver %d times in one "
                             "call (%d asks), want %d", seed, step, (int)((const char *)p - arena), asked[p],
                             asksInCall[p], want);
                    return text;
                }
            }
        } else if (what == 2 && depth == 0) { // the application remaps memory between calls
            const int p = (int)(rng() % kPointers), kind = (int)(rng() % 3);
            memory[&arena[p]] = {(loomMemoryKind_t)kind, kind == 0 ? -1 : (int)(rng() % 4)};
        } else { // an ask
            const bool null = rng() % 10 == 0;
            const void *p = null ? nullptr : &arena[rng() % kPointers];
            const int before = asked[p];
            const loomPointerInfo_t got = rules.ask(&m, p, fakeQuery);
            const loomPointerInfo_t want = null ? loomPointerInfo_t{loomMemoryHost, -1} : memory[p];
            if (got.kind != want.kind || got.device != want.device) {
                snprintf(text, sizeof(text), "seed %u step %d: pointer %d is kind %d device %d, the memo said %d/%d",
                         seed, step, null ? -1 : (int)((const char *)p - arena), want.kind, want.device, got.kind,
                         got.device);
                return text;
            }
            if (null && asked[p] != before) return "seed " + std::to_string(seed) + ": NULL was asked of the driver";
            if (depth == 0 && !null && asked[p] != before + 1)
                return "seed " + std::to_string(seed) + ": an ask outside a call was answered from the memo";
            if (depth > 0 && !null) {
                if (!asksInCall[p]++) order.push_back(p);
            }
        }
    }
    return "";
}

std::string scripts(const Rules &rules, unsigned seeds) {
    for (unsigned s = 1; s <= seeds; ++s) {
        std::string e = script(rules, s);
        if (!e.empty()) return e;
    }
    return "";
}

constexpr unsigned kSeeds = 2000;

} // namespace

START_TEST(answers_are_the_drivers_asked_once_per_call) {
    const std::string e = scripts(Rules{}, kSeeds);
    ck_assert_msg(e.empty(), "%s", e.c_str());
}
END_TEST

START_TEST(mutations_fail) {
    Rules kept;
    kept.leave = [](loom_where_memo_t *m) { --m->depth; };
    ck_assert_msg(!scripts(kept, kSeeds).empty(), "a memo never cleared went unnoticed");
    Rules eager;
    eager.leave = [](loom_where_memo_t *m) { --m->depth, m->n = 0; };
    ck_assert_msg(!scripts(eager, kSeeds).empty(), "a memo cleared at a kept call's leave went unnoticed");
    Rules none;
    none.ask = [](loom_where_memo_t *, const void *p, loom_pointer_query_fn q) {
        loom_where_memo_t fresh = {};
        return loom_where_memo_ask(&fresh, p, q);
    };
    ck_assert_msg(!scripts(none, kSeeds).empty(), "no memo at all went unnoticed");
}
END_TEST

Suite *where_memo_suite(void) {
    Suite *s = suite_create("where_memo");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, answers_are_the_drivers_asked_once_per_call);
    tcase_add_test(tc, mutations_fail);
    suite_add_tcase(s, tc);
    return s;
}
