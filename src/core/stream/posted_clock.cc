/*
 * core/stream/posted_clock.h: a thread's latest post time, and its C reader
 * (loom_component.h).
 */
#include "core/stream/posted_clock.h"

#include <time.h>

#include "base/param_table.h"
#include "loom_component.h"

namespace {

thread_local uint64_t g_postedNs = 0;

bool profiling() {
    static const bool on = loomParamLong("LOOM_PROFILE") != 0;
    return on;
}

} // namespace

namespace loom {

void notePosted() {
    if (!profiling()) return;
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    g_postedNs = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

} // namespace loom

extern "C" uint64_t loomPostedNs(void) { return g_postedNs; }
