/*
 * Logging and error reporting of loom's core.
 *
 * LOOM_DEBUG=WARN|INFO|TRACE picks the level (default WARN),
 * LOOM_DEBUG_SUBSYS=INIT,TOPO,GRAPH,NET,PROXY,COLL,TUNING (alias TUNE) (or ALL) the subsystems.
 * Every line names host and pid so that mpirun's merged output stays readable.
 */
#pragma once

#include "loom.h"

namespace loom {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum Subsys : unsigned {
    kInit = 1u << 0,
    kTopo = 1u << 1,
    kGraph = 1u << 2,
    kNet = 1u << 3,
    kProxy = 1u << 4,
    kColl = 1u << 5,
    kTune = 1u << 6,
    kAll = ~0u
};

struct LogConfig {
    LogLevel level;
    unsigned subsys;
};

// Parses the two environment strings (either may be null). Pure: unit-tested.
LogConfig parseLogConfig(const char *level, const char *subsys);

bool logEnabled(LogLevel level, unsigned subsys);
void logPrintf(LogLevel level, unsigned subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Records the message as the thread's last error (loomGetLastError), logs it at
// WARN (at INFO where an embedder reports the API's errors itself, except on
// background threads), and returns `result` so call sites can `return fail(...)`.
loomResult_t fail(loomResult_t result, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Called first on loom's own threads (proxies, the ib async event thread):
// no API call returns their errors, so an embedder never reports them and
// fail() keeps them at WARN there.
void markBackgroundThread();

} // namespace loom

#define LOOM_WARN(sub, ...) \
    do { if (loom::logEnabled(loom::LogLevel::Warn, sub)) loom::logPrintf(loom::LogLevel::Warn, sub, __VA_ARGS__); } while (0)
#define LOOM_INFO(sub, ...) \
    do { if (loom::logEnabled(loom::LogLevel::Info, sub)) loom::logPrintf(loom::LogLevel::Info, sub, __VA_ARGS__); } while (0)
#define LOOM_TRACE(sub, ...) \
    do { if (loom::logEnabled(loom::LogLevel::Trace, sub)) loom::logPrintf(loom::LogLevel::Trace, sub, __VA_ARGS__); } while (0)
