/*
 * core/stream/posted_clock.h: a thread's latest post time, and its C reader
 * (loom_component.h).
 */
#include "core/stream/posted_clock.h"

#include "base/mono_clock.h"
#include "base/param_table.h"
#include "loom_component.h"

namespace {

thread_local uint64_t g_postedNs = 0;
thread_local uint64_t g_stepNs[loom::kPostSteps] = {};

bool profiling() {
    static const bool on = loomParamLong("LOOM_PROFILE") != 0;
    return on;
}

} // namespace

namespace loom {

void notePosted() {
    if (profiling()) g_postedNs = loomMonotonicNs();
}

void notePostStep(PostStep step) {
    if (profiling()) g_stepNs[step] = loomMonotonicNs();
}

} // namespace loom

extern "C" uint64_t loomPostedNs(void) { return g_postedNs; }

extern "C" uint64_t loomPostStepNs(int step) { return step >= 0 && step < loom::kPostSteps ? g_stepNs[step] : 0; }
