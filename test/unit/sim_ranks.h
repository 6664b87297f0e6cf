// How many ranks the schedule simulators go up to: every size up to 64-70
// ranks, or LOOM_TEST_SIM_RANKS where that is set above 0. `make check` sets
// it to 16 (Makefile.am; `make check-full` runs every size): the same code
// paths at a fraction of the time (the simulators were the unit suite's
// longest part, and most of the sanitizer stage's).
#pragma once

#include <cstdlib>

inline int simRanks(int full) {
    static const int cap = [] {
        const char *e = std::getenv("LOOM_TEST_SIM_RANKS");
        return e ? std::atoi(e) : 0;
    }();
    return cap > 0 && cap < full ? cap : full;
}
