// How many ranks the schedule simulators go up to. They are pure logic and
// cover every size up to 64-70 ranks in a plain build; a sanitizer build's
// `make check` sets LOOM_TEST_SIM_RANKS (Makefile.am), and there they stop at
// that many ranks: the same code paths, at a fraction of the instrumented
// cost (the simulators were most of the sanitizer stage's time).
#pragma once

#include <cstdlib>

inline int simRanks(int full) {
    static const int cap = [] {
        const char *e = std::getenv("LOOM_TEST_SIM_RANKS");
        return e ? std::atoi(e) : 0;
    }();
    return cap > 0 && cap < full ? cap : full;
}
